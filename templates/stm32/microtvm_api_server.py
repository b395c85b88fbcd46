#!/usr/bin/env python3
"""Project API server of the stm32 template: our own firmware (no vendor HAL) for the boards of
``boards.yaml``, built with arm-none-eabi-gcc, driven by the host over the board's UART.

What makes this platform different (everything else is project_api.template): the board data
renders ``board.h``, the linker script and the Makefile; every build ends with a memory report
(``build/memory.txt``) and a firmware that does not fit fails in one line saying by how much;
emulated boards are "flashed" by recording the image and run under QEMU (template.qemu), whose
UART our client reaches through a FIFO endpoint. Real boards are flashed by a runner of
template.flash (pyOCD by default) and reached on their ST-LINK's serial port (template.serial_ports).
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from project_api import server
from project_api.crt_manifest import read_manifest
from project_api.errors import BuildError, FlashError
from project_api.template import (
    NewProject,
    TemplateHandler,
    TransportMixin,
    ai_api,
    compile_definitions,
    load_boards,
    memory,
    option,
    remote,
    require,
    run_logged,
    serial_ports,
)
from project_api.template import flash as flash_runners
from project_api.template.options import SERIAL_NUMBER_CHARS
from project_api.template.qemu import (
    QemuSerialLine,
    emulator_argv,
    require_image,
    run_emulator,
)

_LOG = logging.getLogger("stm32")
BOARDS = load_boards(__file__)
ELF = "build/firmware.elf"
BANNER = b"project-api stm32 ready"
APP_SOURCES = ("src/startup.c", "src/clock.c", "src/uart.c", "src/platform.c", "src/main.c")
STANDALONE_SOURCES = ("src/startup.c", "src/clock.c", "src/uart.c", "src/platform.c",
                      "src/standalone_main.c")
MLPERFTINY_SOURCES = ("src/startup.c", "src/clock.c", "src/uart.c", "src/platform.c",
                      "src/mlperftiny_main.c")
# QEMU runs instructions at about 1e8/s here; a model run of a few seconds is normal.
TIMEOUTS = server.TransportTimeouts(session_start_retry_timeout_sec=2.0,
                                    session_start_timeout_sec=20.0,
                                    session_established_timeout_sec=120.0)
_PPRE = {1: 0, 2: 4, 4: 5, 8: 6, 16: 7}
_OVERFLOW = re.compile(r"region `(\w+)' overflowed by (\d+) bytes")


def clock_registers(board: dict[str, Any]) -> dict[str, int]:
    """PLLCFGR, the APB divider codes and the reset SYSCLK of a board's clock tree."""
    clock, pll = board["clock"], board["clock"]["pll"]
    if board["family"] == "l4":
        src = 3 if clock["source"] == "hse" else 2
        pllcfgr = (src | (pll["m"] - 1) << 4 | pll["n"] << 8 | 1 << 24
                   | (pll["r"] // 2 - 1) << 25)
        reset_hz = 4_000_000  # MSI
    else:
        pllcfgr = (pll["m"] | pll["n"] << 6 | (pll["p"] // 2 - 1) << 16
                   | (1 << 22 if clock["source"] == "hse" else 0) | pll["q"] << 24)
        reset_hz = 16_000_000  # HSI
    return {"pllcfgr": pllcfgr, "ppre1": _PPRE[clock["apb1_div"]],
            "ppre2": _PPRE[clock["apb2_div"]], "reset_sysclk_hz": reset_hz}


class Handler(TransportMixin, TemplateHandler):
    """The stm32 template's Project API handler."""

    PLATFORM_NAME = "stm32"
    BUILDS_FOR = ("cortex-m",)
    BOARDS = BOARDS
    OPTIONS = [
        option("board", "str", choices=list(BOARDS), default="qemu_netduinoplus2",
               optional=["generate_project"],
               help="Board of boards.yaml (qemu_* boards run under QEMU)."),
        option("project_type", "str", choices=["host_driven", "standalone", "mlperftiny"],
               default="host_driven", optional=["generate_project"],
               help="host_driven: an RPC server on the UART; standalone: the ai_ API "
                    "(src/ai/ai_runtime.h) and a main that runs every model once; "
                    "mlperftiny: the MLPerf Tiny benchmark protocol on the UART."),
        ai_api.MLPERFTINY_MODEL_OPTION,
        *ai_api.STANDALONE_OPTIONS,
        option("opt_level", "str", choices=["0", "1", "2", "3", "s", "z", "g"], default="s",
               optional=["generate_project"], help="GCC optimisation level (-O<level>)."),
        option("workspace_size_bytes", "int", default=32 * 1024, minimum=4096, maximum=1 << 24,
               optional=["generate_project"],
               help="TVM_WORKSPACE_SIZE_BYTES: the pool for tensors the host allocates."),
        option("stack_size_bytes", "int", default=8192, minimum=1024, maximum=1 << 20,
               optional=["generate_project"], help="Main stack reserved at the end of RAM."),
        option("max_packet_size_bytes", "int", default=4096, minimum=256, maximum=1 << 20,
               optional=["generate_project"],
               help="TVM_CRT_MAX_PACKET_SIZE_BYTES: the device's largest RPC packet (4096 "
                    "keeps 97 percent of the UART bytes payload; 2048 saves about 6 KiB of RAM)."),
        option("libc", "str", choices=["newlib-nano", "picolibc"], default="newlib-nano",
               optional=["generate_project"], help="C library."),
        option("warning_as_error", "bool", default=False, optional=["generate_project"],
               help="Treat warnings as errors (-Werror) in the runtime and model code too."),
        option("compile_definitions", "str", optional=["generate_project"],
               help="Extra flags for every C file: -DNAME, -DNAME=VALUE or -UNAME, VALUE a number, "
                    "identifier or C string of letters, digits, spaces and _.,:/+=-, e.g. "
                    "'-DFOO=1 -DVERSION=\"1.2\" -UBAR'."),
        option("verbose", "bool", default=False, optional=["build"],
               help="Run make with verbose output."),
        option("flash_runner", "str", choices=list(flash_runners.RUNNERS), optional=["flash"],
               help="Flash tool (default: pyocd on hardware, qemu on emulated boards)."),
        option("pyocd_pack", "str", optional=["flash"],
               help="CMSIS pack (.pack) for a pyOCD target that is not built in."),
        option("serial_number", "str", optional=["flash", "open_transport"],
               chars=SERIAL_NUMBER_CHARS,
               help="The ST-LINK's serial number: picks the probe and its serial port."),
        option("serial_port", "str", optional=["open_transport"],
               help="The board's serial port or pyserial URL (default: found by USB ID)."),
        option("baud_rate", "int", default=115200, minimum=1200, maximum=12_000_000,
               optional=["generate_project", "open_transport"],
               help="UART baud rate of the firmware and the host side."),
        *remote.REMOTE_OPTIONS,
    ]

    def render(self, project: NewProject) -> None:
        opts = project.options
        name, board = opts["board"], BOARDS[opts["board"]]
        standalone = opts["project_type"] == "standalone"
        ai_api.check_standalone_options(opts)
        crt = [str(p) for p in read_manifest(project.crt_dir).project_sources(
            opts["project_type"])]
        project.copy_crt(crt)
        mlperftiny = opts["project_type"] == "mlperftiny"
        app = (STANDALONE_SOURCES if standalone else MLPERFTINY_SOURCES if mlperftiny
               else APP_SOURCES)
        project.copy(*app, "src/firmware.h", "src/stm32_regs.h", "boards.yaml")
        generated, model_dirs = ai_api.write_model_sources(project)
        app = (*app, *generated)
        packet = opts["max_packet_size_bytes"]
        project.write_device_crt_config(packet, f"stm32 template, board {name}")
        bus_div = board["clock"][f"{board['uart']['bus']}_div"]
        enr = board["uart"].get("enable_register", f"{board['uart']['bus']}enr")
        context = dict(board_name=name, board=board, baudrate=opts["baud_rate"],
                       rx_ring_bytes=1024 if standalone else
                       max(1024, 1 << (packet + 64).bit_length()),
                       uart_enr=f"RCC_{enr.upper()}", uart_apb_div=bus_div,
                       **clock_registers(board))
        project.render("board.h.j2", "src/board.h", **context)
        project.render("firmware.ld.j2", "firmware.ld", **context)
        specs = "nano.specs" if opts["libc"] == "newlib-nano" else "picolibc.specs"
        project.render("Makefile.j2", "Makefile", libc_specs=specs, app_sources=app,
                       model_dirs=model_dirs,
                       crt_sources=[f"crt/{p}" for p in crt], **context,
                       compile_definition_flags=compile_definitions(opts["compile_definitions"]))

    def build(self, options: dict) -> None:
        values = self.options_for("build", options)
        self.check_targets()
        make = require("make", "install make, e.g. 'apt-get install make'")
        require("arm-none-eabi-gcc", "install the Arm GNU toolchain, e.g. 'apt-get install "
                "gcc-arm-none-eabi libnewlib-arm-none-eabi'")
        name, board = self.board()
        log = self.project_dir / "build" / "build.log"
        cmd = [make, "-C", str(self.project_dir), f"-j{max(1, min(4, os.cpu_count() or 1))}"]
        build = self.project_dir / "build"
        for stale in ("memory.txt", "memory.json"):  # never a report of an earlier build
            (build / stale).unlink(missing_ok=True)
        try:
            run_logged(cmd + (["V=1"] if values["verbose"] else []), cwd=self.project_dir,
                       log_path=log)
        except BuildError:
            over = _OVERFLOW.findall(log.read_text(errors="replace")) if log.is_file() else []
            if over:
                raise self._does_not_fit(name, board, dict((r, int(n)) for r, n in over),
                                         values, log) from None
            raise
        _LOG.info("%s", memory.write_report(build, name, board)[0])

    def _does_not_fit(self, name: str, board: dict, over: dict[str, int], values: dict,
                      log: Any) -> BuildError:
        """The one-line error of a firmware that overflows its regions (ld still writes the
        map: the memory report is written too, with the largest parts of each region)."""
        build = self.project_dir / "build"
        sizes = {"RAM": board["memory"]["ram"]["length"],
                 "FLASH": board["memory"]["flash"]["length"]}
        try:
            _, report = memory.write_report(build, name, board, over)
        except (OSError, ValueError) as exc:  # no map: say so, keep the rest of the message
            _LOG.info("no memory report: %s", exc)
            report = None
        parts = []
        for region, n in over.items():
            text = f"{region} by {n} bytes of {sizes.get(region, '?')}"
            if report is not None:
                top = report.largest("ram" if region == "RAM" else "flash")
                text += " (largest: " + ", ".join(f"{p.name} {p.size}" for p in top) + ")"
            parts.append(text)
        where = f"memory report: {build / 'memory.txt'}; " if report is not None else ""
        own = {k: values.get(k) for k in ("workspace_size_bytes", "stack_size_bytes",
                                          "max_packet_size_bytes")}
        hints = [memory.overflow_hint(r, own) for r in over]
        return BuildError(f"build failed: the firmware does not fit {name}: {', '.join(parts)}; "
                          f"{'; '.join(dict.fromkeys(hints))}; {where}full log: {log}",
                          log=str(log))

    def flash(self, options: dict) -> None:
        values, (name, board) = self.options_for("flash", options), self.board()
        elf = self.project_dir / ELF
        if not elf.is_file():
            raise FlashError(f"nothing to flash: {ELF} is not built; run 'project-api build'")
        if remote.flash_with_labgrid(values, elf, {"name": name, **board}):
            return  # labgrid's OpenOCD driver on the place's USB debugger
        runner = flash_runners.runner_for(values["flash_runner"], {"name": name, **board}, values)
        flash_runners.check_arm_elf(elf)
        with flash_runners.progress_report(f"flash {name} ({runner.NAME})") as progress:
            runner.flash(elf, {"name": name, **board},
                         remote.probe_id(values) or values["serial_number"], progress)

    def open_transport(self, options: dict) -> dict:
        values, (name, board) = self.options_for("open_transport", options), self.board()
        reply = remote.open_remote(self, values, values["baud_rate"])  # serial_url, labgrid_place
        if reply is not None:
            return reply
        if not board["emulated"]:
            return self.open_uart(serial_ports.board_port(
                board["usb"], values["serial_port"], values["serial_number"],
                f"{name}'s ST-LINK"), values["baud_rate"])
        elf = require_image(self.project_dir / ELF)
        line = QemuSerialLine()
        argv = emulator_argv("qemu-system-arm", [
            "-M", board["qemu"]["machine"], "-nographic", "-icount", "shift=0",
            "-semihosting-config", "enable=on,target=native"], elf, line)
        return run_emulator(self, line, argv, cwd=self.project_dir,
                            log_path=self.project_dir / "build" / "qemu.log", timeouts=TIMEOUTS,
                            banner=BANNER)


if __name__ == "__main__":
    server.main(Handler())

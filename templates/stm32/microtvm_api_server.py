#!/usr/bin/env python3
"""Project API server of the stm32 template: our own firmware (no vendor HAL) for the boards of
``boards.yaml``, built with arm-none-eabi-gcc, driven by the host over the board's UART.

What makes this platform different (everything else is project_api.template): the board data
renders ``board.h``, the linker script and the Makefile; every build ends with a memory report
(``build/memory.txt``) and a firmware that does not fit fails in one line saying by how much;
emulated boards are "flashed" by recording the image and run under QEMU (template.qemu), whose
UART our client reaches through a FIFO endpoint. Real boards are flashed by a runner of
template.flash (pyOCD by default) and reached on their ST-LINK's serial port (template.serial_ports);
when the link is opened again after the board went away, the same runner resets it first.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any

from project_api import server
from project_api.errors import BuildError, FlashError
from project_api.template import (
    Link,
    NewProject,
    ProjectType,
    TemplateHandler,
    common,
    compile_definitions,
    load_boards,
    memory,
    option,
    project_type_option,
    remote,
    require,
    run_logged,
    serial_ports,
    uart_link,
)
from project_api.template import flash as flash_runners
from project_api.template.ai_api import STANDALONE_OPTIONS
from project_api.template.labgrid_place import flash_with_labgrid
from project_api.template.mlperftiny_model import MLPERFTINY_MODEL_OPTION
from project_api.template.profile import PROFILE_OPTION
from project_api.template.qemu import QemuSerialLine, emulator_argv, emulator_link, require_image

_LOG = logging.getLogger("stm32")
BOARDS = load_boards(__file__)
ELF = "build/firmware.elf"
BANNER = b"project-api stm32 ready"
#: Every firmware's start-up, clock, UART and platform; then its main.
BOARD_SOURCES = ("src/startup.c", "src/clock.c", "src/uart.c", "src/platform.c")
PROJECT_TYPES = {
    "host_driven": ProjectType(sources=(*BOARD_SOURCES, "src/main.c"), crt="host_driven",
                               link="rpc", banner=BANNER, help="an RPC server on the UART"),
    "standalone": ProjectType(sources=(*BOARD_SOURCES, "src/standalone_main.c"),
                              crt="standalone", link=None, model="ai_api",
                              help="the ai_ API (src/ai/ai_runtime.h) and a main that runs every "
                                   "model once"),
    "mlperftiny": ProjectType(sources=(*BOARD_SOURCES, "src/mlperftiny_main.c"),
                              crt="mlperftiny", link="mlperftiny", banner=BANNER,
                              model="mlperftiny",
                              help="the MLPerf Tiny benchmark protocol on the UART"),
}
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


class Handler(TemplateHandler):
    """The stm32 template's Project API handler."""

    PLATFORM_NAME = "stm32"
    PROJECT_TYPES = PROJECT_TYPES
    BUILDS_FOR = ("cortex-m",)
    BOARDS = BOARDS
    OPTIONS = [
        option("board", "str", choices=list(BOARDS), default="qemu_netduinoplus2",
               optional=["generate_project"],
               help="Board of boards.yaml (qemu_* boards run under QEMU)."),
        project_type_option(PROJECT_TYPES),
        MLPERFTINY_MODEL_OPTION,
        *STANDALONE_OPTIONS,
        option("opt_level", "str", choices=["0", "1", "2", "3", "s", "z", "g"], default="s",
               optional=["generate_project"], help="GCC optimisation level (-O<level>)."),
        common("workspace_size_bytes", default=32 * 1024, maximum=1 << 24),
        option("stack_size_bytes", "int", default=8192, minimum=1024, maximum=1 << 20,
               optional=["generate_project"], help="Main stack reserved at the end of RAM."),
        common("max_packet_size_bytes",
               help="TVM_CRT_MAX_PACKET_SIZE_BYTES: the device's largest RPC packet (4096 "
                    "keeps 97 percent of the UART bytes payload; 2048 saves about 6 KiB of RAM)."),
        PROFILE_OPTION,
        option("libc", "str", choices=["newlib-nano", "picolibc"], default="newlib-nano",
               optional=["generate_project"], help="C library."),
        common("warning_as_error"),
        common("compile_definitions"),
        common("verbose"),
        option("flash_runner", "str", choices=list(flash_runners.RUNNERS),
               optional=["flash", "open_transport"],
               help="Flash tool (default: pyocd on hardware, qemu on emulated boards); "
                    "open_transport resets a real board through it before reopening its link."),
        option("pyocd_pack", "str", optional=["flash", "open_transport"],
               help="CMSIS pack (.pack) for a pyOCD target that is not built in."),
        common("serial_number"),
        common("serial_port"),
        option("baud_rate", "int", default=115200, minimum=1200, maximum=12_000_000,
               optional=["generate_project", "open_transport"],
               help="UART baud rate of the firmware and the host side."),
        *remote.REMOTE_OPTIONS,
    ]

    def render(self, project: NewProject) -> None:
        opts = project.options
        name, board = opts["board"], BOARDS[opts["board"]]
        crt = project.crt_sources
        project.copy_crt(crt)
        app = project.project_type.sources
        project.copy(*app, "src/firmware.h", "src/stm32_regs.h", "boards.yaml")
        generated, model_dirs = project.write_model_sources()
        project.write_crt_config(f"stm32 template, board {name}")
        bus_div = board["clock"][f"{board['uart']['bus']}_div"]
        enr = board["uart"].get("enable_register", f"{board['uart']['bus']}enr")
        context = dict(board_name=name, board=board, baudrate=opts["baud_rate"],
                       rx_ring_bytes=project.rx_ring_bytes,
                       uart_enr=f"RCC_{enr.upper()}", uart_apb_div=bus_div,
                       **clock_registers(board))
        project.render("board.h.j2", "src/board.h", **context)
        project.render("firmware.ld.j2", "firmware.ld", **context)
        specs = "nano.specs" if opts["libc"] == "newlib-nano" else "picolibc.specs"
        project.render("Makefile.j2", "Makefile", libc_specs=specs, app_sources=(*app, *generated),
                       model_dirs=model_dirs,
                       crt_sources=[f"crt/{p}" for p in crt], **context,
                       compile_definition_flags=compile_definitions(opts["compile_definitions"]))

    def do_build(self, values: dict) -> None:
        make = require("make", "install make, e.g. 'apt-get install make'")
        require("arm-none-eabi-gcc", "install the Arm GNU toolchain, e.g. 'apt-get install "
                "gcc-arm-none-eabi libnewlib-arm-none-eabi'")
        name, board = self.board(values)
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

    def do_flash(self, values: dict) -> None:
        name, board = self.board(values)
        elf = self.project_dir / ELF
        if not elf.is_file():
            raise FlashError(f"nothing to flash: {ELF} is not built; run 'project-api build'")
        if flash_with_labgrid(values, elf, board):
            return  # labgrid's OpenOCD driver on the place's USB debugger
        runner = flash_runners.runner_for(values["flash_runner"], board, values)
        flash_runners.check_firmware(elf, board)
        with flash_runners.progress_report(f"flash {name} ({runner.NAME})") as progress:
            runner.flash(elf, board, remote.probe_id(values) or values["serial_number"], progress)

    def do_reset(self, values: dict) -> None:
        """Before a reopen: a real board on a local probe is reset through its flash runner
        (``-o flash_runner``, pyOCD by default; the probe ``-o serial_number`` picks). An
        emulated board restarts with QEMU, and a serial_url or labgrid place has no local
        probe: nothing to do for them."""
        name, board = self.board(values)
        if board["emulated"] or values["serial_url"] or values["labgrid_place"]:
            return
        runner = flash_runners.runner_for(values["flash_runner"], board, values)
        _LOG.info("resetting %s (%s) before reopening its link", name, runner.NAME)
        runner.reset(board, values["serial_number"],
                     self.project_dir / "build" / flash_runners.RESET_LOG)

    def do_open_transport(self, values: dict) -> Link:
        name, board = self.board(values)
        link = remote.remote_link(values, values["baud_rate"])  # serial_url, labgrid_place
        if link is not None:
            return link
        if not board["emulated"]:
            return uart_link(serial_ports.board_port(
                board["usb"], values["serial_port"], values["serial_number"],
                f"{name}'s {board['probe']}"), values["baud_rate"])
        elf, emulator = require_image(self.project_dir / ELF), board["emulator"]
        line = QemuSerialLine()
        argv = emulator_argv(emulator["binary"], emulator["args"], elf, line)
        return emulator_link(argv, line, cwd=self.project_dir,
                             log_path=self.project_dir / "build" / "qemu.log", timeouts=TIMEOUTS,
                             banner=self.project_type(values).banner,
                             package=emulator.get("package"))


if __name__ == "__main__":
    server.main(Handler())

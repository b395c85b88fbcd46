"""What every bare-metal template shares (stm32, riscv): its project types and their firmware
mains, the build with its memory report and one-line "does not fit", the flash through a runner
of :mod:`.flash` or a labgrid place, the reset before a reopen, and the link: QEMU's serial line
for an emulated board, the board's USB serial port, or a remote one.

A bare-metal template is then only its platform: a subclass of :class:`BareMetalHandler` that
names its compiler (:attr:`BareMetalHandler.TOOLCHAIN`), renders its ``board.h``, linker script
and Makefile from its boards' data, and holds the C of its start-up, clock, UART and platform.
The mains (``firmware/*.c``, copied into the project's ``src/``) are written against the port
``firmware/firmware_port.h``, which those sources implement.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from pathlib import Path
from typing import ClassVar

from project_api.api import server
from project_api.errors import BuildError, FlashError
from project_api.template import flash as flash_runners
from project_api.template import memory, remote, serial_ports
from project_api.template.handler import TemplateHandler
from project_api.template.link import Link, uart_link
from project_api.template.new_project import NewProject
from project_api.template.project_types import ProjectType
from project_api.template.runner import require, run_logged

_LOG = logging.getLogger(__name__)

#: The shared firmware sources: the mains of each project type, the port they call, and the
#: platform calls that need nothing but the port (``random.c``).
FIRMWARE_DIR = Path(__file__).resolve().parent / "firmware"
#: The firmware of every bare-metal project.
ELF = "build/firmware.elf"
# QEMU runs instructions at about 1e8/s here; a model run of a few seconds is normal.
QEMU_TIMEOUTS = server.TransportTimeouts(session_start_retry_timeout_sec=2.0,
                                         session_start_timeout_sec=20.0,
                                         session_established_timeout_sec=120.0)
_OVERFLOW = re.compile(r"region `(\w+)' overflowed by (\d+) bytes")


def banner(platform: str) -> bytes:
    """The start of the ready line of a bare-metal firmware (``firmware/main.c``)."""
    return f"project-api {platform} ready".encode()


def project_types(platform: str, board_sources: tuple[str, ...]) -> dict[str, ProjectType]:
    """The three project types of a bare-metal template whose board support is
    ``board_sources`` (start-up, UART, platform, ...): each adds its shared main."""
    ready = banner(platform)
    board_sources = (*board_sources, "src/random.c")  # TVMPlatformGenerateRandom, shared
    return {
        "host_driven": ProjectType(sources=(*board_sources, "src/main.c"), crt="host_driven",
                                   link="rpc", banner=ready, help="an RPC server on the UART"),
        "standalone": ProjectType(sources=(*board_sources, "src/standalone_main.c"),
                                  crt="standalone", link=None, model="ai_api",
                                  help="the ai_ API (src/ai/ai_runtime.h) and a main that runs "
                                       "every model once"),
        "mlperftiny": ProjectType(sources=(*board_sources, "src/mlperftiny_main.c"),
                                  crt="mlperftiny", link="mlperftiny", banner=ready,
                                  model="mlperftiny",
                                  help="the MLPerf Tiny benchmark protocol on the UART"),
    }


def copy_sources(project: NewProject, *extra: str) -> None:
    """Copy the project type's sources (the shared mains from :data:`FIRMWARE_DIR`, the rest
    from the template), the port header and ``extra`` template files into the project."""
    assert project.project_type is not None
    own = []
    for rel in project.project_type.sources:
        shared = FIRMWARE_DIR / Path(rel).name
        if rel.startswith("src/") and shared.is_file() and not (project.template_dir / rel).exists():
            (project.dir / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(shared, project.dir / rel)
        else:
            own.append(rel)
    (project.dir / "src").mkdir(parents=True, exist_ok=True)
    shutil.copy2(FIRMWARE_DIR / "firmware_port.h", project.dir / "src" / "firmware_port.h")
    project.copy(*own, *extra)


class BareMetalHandler(TemplateHandler):
    """A template that builds its own firmware with make and a GNU cross toolchain."""

    #: The compiler the Makefile calls, and the one line naming the package that installs it.
    TOOLCHAIN: ClassVar[tuple[str, str]] = ("", "")
    #: Option names whose values the "does not fit" hint may name (RAM it reserves).
    RAM_OPTIONS: ClassVar[tuple[str, ...]] = ("workspace_size_bytes", "stack_size_bytes",
                                              "max_packet_size_bytes")

    def do_build(self, values: dict) -> None:
        make = require("make", "install make, e.g. 'apt-get install make'")
        require(*self.TOOLCHAIN)
        name, board = self.board(values)
        build = self.project_dir / "build"
        log = build / "build.log"
        cmd = [make, "-C", str(self.project_dir), f"-j{max(1, min(4, os.cpu_count() or 1))}"]
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
                      log: Path) -> BuildError:
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
        own = {k: values.get(k) for k in self.RAM_OPTIONS}
        hints = [memory.overflow_hint(r, own) for r in over]
        return BuildError(f"build failed: the firmware does not fit {name}: {', '.join(parts)}; "
                          f"{'; '.join(dict.fromkeys(hints))}; {where}full log: {log}",
                          log=str(log))

    def do_flash(self, values: dict) -> None:
        from project_api.template.labgrid_place import flash_with_labgrid

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
        (``-o flash_runner``, else the board's own or pyOCD; the probe ``-o serial_number``
        picks). An emulated board restarts with QEMU, and a serial_url or labgrid place has no
        local probe: nothing to do for them."""
        name, board = self.board(values)
        if board["emulated"] or remote.reached_remotely(values):
            return
        runner = flash_runners.runner_for(values["flash_runner"], board, values)
        _LOG.info("resetting %s (%s) before reopening its link", name, runner.NAME)
        runner.reset(board, values["serial_number"],
                     self.project_dir / "build" / flash_runners.RESET_LOG)

    def do_open_transport(self, values: dict) -> Link:
        from project_api.template.qemu import (
            QemuSerialLine,
            emulator_argv,
            emulator_link,
            require_image,
        )

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
                             log_path=self.project_dir / "build" / "qemu.log",
                             timeouts=QEMU_TIMEOUTS, banner=self.project_type(values).banner,
                             package=emulator.get("package"))

#!/usr/bin/env python3
"""Project API server of the zephyr template: one Zephyr application for every board of
``boards.yaml``, built with ``west``, flashed with Zephyr's own runners, driven over the console
UART.

What makes this platform different (everything else is project_api.template):

* the project is a Zephyr application: ``CMakeLists.txt`` and ``prj.conf`` rendered from
  ``templates/``, a board overlay where one is needed (``boards/``), our firmware (``src/``), the
  runtime sources of the crt manifest (``crt/``) and the model;
* the Zephyr tree (``zephyr_base``, default ``$ZEPHYR_BASE``) is checked: its ``VERSION`` is
  compared as numbers against the tested range, and the board's RAM (its board yaml, found under
  ``boards/`` whatever the layout, else ``ram_bytes`` of boards.yaml) must hold the heap;
* ``build`` is ``west build -b <board> -d build -p auto``; ``flash`` is ``west flash`` with the
  probe's serial number in the form its runner takes;
* ``open_transport``: real boards through the shared serial-port discovery, at the console's
  ``current-speed`` read from the built devicetree (``build/zephyr/zephyr.dts``). QEMU boards are
  started by this server (template.qemu: the emulator dies with the server) on the board's
  machine options from boards.yaml, with the console on a socket chardev that waits for our
  connection (:class:`~project_api.template.qemu.QemuSocketLine`). We do not use ``west build -t
  run``: Zephyr's qemu.cmake puts the console on ``mon:stdio`` (a mux, which takes 0x01 as its
  escape) or on ``QEMU_PIPE`` baked into the CMake cache at configure time, and runs QEMU under
  the build tool, out of reach of the death signal.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from project_api import server
from project_api.crt_manifest import read_manifest
from project_api.errors import BuildError, FlashError, ServerError
from project_api.template import (
    NewProject,
    TemplateHandler,
    TransportMixin,
    ai_api,
    compile_definitions,
    load_boards,
    option,
    remote,
    run_logged,
    serial_ports,
)
from project_api.template.options import SERIAL_NUMBER_CHARS
from project_api.template.qemu import (
    QemuSocketLine,
    emulator_argv,
    require_image,
    run_emulator,
)
from project_api.template.quoting import check_cmake_path
from project_api.template.targets import software_float
from project_api.template.zephyr import (
    DEFAULT_WEST,
    built_console_baud,
    check_cmsis,
    check_tree_for_board,
    check_version,
    flash_serial_args,
    west_and_tree,
    zephyr_board_name,
    zephyr_version,
)

_LOG = logging.getLogger("zephyr")
TEMPLATE_DIR = Path(__file__).resolve().parent
BOARDS = load_boards(__file__)
#: The start of the firmware's first line (host_driven and mlperftiny). open_transport reads up to
#: its end; what follows (mlperftiny: the benchmark's start-up lines) is left for the client.
BANNER = b"project-api zephyr ready"
ELF = "build/zephyr/zephyr.elf"
DTS = "build/zephyr/zephyr.dts"
BUILD_LOG = "build.log"
#: The system heap replaces the runtime's static pool (platform.c allocates with k_aligned_alloc).
REPLACED_BY_ZEPHYR = {"src/platform/memory_pool.c", "src/memory/page_allocator.c"}
HOST_DRIVEN_SOURCES = ("src/main.c", "src/platform.c")
STANDALONE_SOURCES = ("src/standalone_main.c", "src/platform.c")
#: mlperftiny needs no platform.c: its runtime libraries call only the port and the model glue.
MLPERFTINY_SOURCES = ("src/mlperftiny_main.c",)
#: mlperftiny's CONFIG_MAIN_STACK_SIZE unless config_main_stack_size is given.
MLPERFTINY_MAIN_STACK_BYTES = 4096
#: QEMU runs a model run of a few seconds; a real board answers like any UART device.
QEMU_TIMEOUTS = server.TransportTimeouts(session_start_retry_timeout_sec=2.0,
                                         session_start_timeout_sec=20.0,
                                         session_established_timeout_sec=120.0)


class Handler(TransportMixin, TemplateHandler):
    """The zephyr template's Project API handler."""

    PLATFORM_NAME = "zephyr"
    BUILDS_FOR = ("cortex-m", "x86")
    BOARDS = BOARDS
    OPTIONS = [
        option("board", "str", choices=list(BOARDS), default="qemu_cortex_m3",
               optional=["generate_project"],
               help="Board of boards.yaml (qemu_cortex_m3, qemu_x86 and mps2_an521 run under "
                    "QEMU)."),
        option("project_type", "str", choices=["host_driven", "standalone", "mlperftiny"],
               default="host_driven", optional=["generate_project"],
               help="host_driven: an RPC server on the console UART; standalone: the ai_ API "
                    "(src/ai/ai_runtime.h) and a main that runs every model once; "
                    "mlperftiny: the MLPerf Tiny benchmark protocol on the console UART."),
        ai_api.MLPERFTINY_MODEL_OPTION,
        option("west_cmd", "str", default=DEFAULT_WEST,
               optional=["generate_project", "build", "flash", "open_transport"],
               help="The west command: a command by design, run as given (split into words "
                    "like a shell would, but never run by one; default: this Python's -m "
                    "west)."),
        option("zephyr_base", "str",
               optional=["generate_project", "build", "flash", "open_transport"],
               help="Path to the Zephyr tree (default: $ZEPHYR_BASE)."),
        option("serial_number", "str", optional=["flash", "open_transport"],
               chars=SERIAL_NUMBER_CHARS,
               help="The debug probe's serial number: picks the probe and its serial port."),
        option("serial_port", "str", optional=["open_transport"],
               help="The board's serial port or pyserial URL (default: found by USB ID)."),
        option("baud_rate", "int", minimum=1200, maximum=12_000_000, optional=["open_transport"],
               help="Host-side baud rate (default: the console's current-speed in the built "
                    "devicetree)."),
        option("gdbserver_port", "int", minimum=1, maximum=65535, optional=["open_transport"],
               help="QEMU boards: start QEMU's GDB server on this port, CPU halted."),
        option("config_main_stack_size", "int", minimum=512, maximum=1 << 20,
               optional=["generate_project"],
               help="Sets CONFIG_MAIN_STACK_SIZE (mlperftiny default: 4096)."),
        option("workspace_size_bytes", "int", minimum=4096, maximum=1 << 30,
               optional=["generate_project"],
               help="TVM_WORKSPACE_SIZE_BYTES: the runtime heap (CONFIG_HEAP_MEM_POOL_SIZE) for "
                    "tensors the host allocates (default: the board's recommended heap)."),
        option("max_packet_size_bytes", "int", default=4096, minimum=256, maximum=1 << 20,
               optional=["generate_project"],
               help="TVM_CRT_MAX_PACKET_SIZE_BYTES: the device's largest RPC packet."),
        option("warning_as_error", "bool", default=False, optional=["generate_project"],
               help="Warnings are errors (CONFIG_COMPILER_WARNINGS_AS_ERRORS), and an untested "
                    "Zephyr version is an error."),
        option("compile_definitions", "str", optional=["generate_project"],
               help="Extra flags for the application: -DNAME, -DNAME=VALUE or -UNAME, VALUE a number, "
                    "identifier or C string of letters, digits, spaces and _.,:/+=-, e.g. "
                    "'-DFOO=1 -DVERSION=\"1.2\" -UBAR'."),
        option("extra_files_tar", "str", optional=["generate_project"],
               help="A tar archive extracted into the generated project."),
        option("cmsis_path", "str", optional=["generate_project"],
               help="CMSIS (with CMSIS-NN) for models that include its headers."),
        *ai_api.STANDALONE_OPTIONS,
        option("verbose", "bool", default=False, optional=["build"],
               help="Run west build with verbose output."),
        *remote.remote_options(flash=False),  # west flash runs on the board's own machine
    ]

    # --- generate ----------------------------------------------------------------------------

    def render(self, project: NewProject) -> None:
        opts = project.options
        name, board = opts["board"], BOARDS[opts["board"]]
        standalone = opts["project_type"] == "standalone"
        mlperftiny = opts["project_type"] == "mlperftiny"
        ai_api.check_standalone_options(opts)
        check_cmake_path(project.dir, "the project directory")  # ${CMAKE_CURRENT_SOURCE_DIR}
        version = check_tree_for_board(opts, name, board)  # sets the default heap
        check_cmsis(project.library.modules.values(), opts["cmsis_path"])
        slow = software_float(project.library.modules.values(), name, board)
        if slow and opts["warning_as_error"]:
            raise ServerError(message=f"{slow} (warning_as_error)")
        if slow:
            _LOG.warning("%s", slow)
        if mlperftiny and not opts["config_main_stack_size"]:
            # The protocol and the model run on main's stack: about 1 KiB deep on Cortex-M
            # (results formatting, the model's run function), more than Zephyr's default.
            opts["config_main_stack_size"] = MLPERFTINY_MAIN_STACK_BYTES

        crt = [str(p) for p in read_manifest(project.crt_dir).project_sources(
            opts["project_type"]) if str(p) not in REPLACED_BY_ZEPHYR]
        project.copy_crt(crt)
        app = (STANDALONE_SOURCES if standalone else MLPERFTINY_SOURCES if mlperftiny
               else HOST_DRIVEN_SOURCES)
        project.copy(*app, "boards.yaml")
        if (project.template_dir / "boards" / f"{name}.overlay").is_file():
            project.copy(f"boards/{name}.overlay")
        generated, model_dirs = ai_api.write_model_sources(project)
        sources = [*app, *generated]
        packet = opts["max_packet_size_bytes"]
        project.write_device_crt_config(packet, f"zephyr template, board {name}")
        definitions = compile_definitions(opts["compile_definitions"])
        context = dict(
            board_name=name, board=board, zephyr_board=zephyr_board_name(name, board, version),
            app_sources=sources, model_dirs=model_dirs, crt_sources=[f"crt/{p}" for p in crt],
            definitions=definitions, rx_ring_bytes=1024 if standalone or mlperftiny else
            max(1024, 1 << (packet + 64).bit_length()),
        )
        project.render("CMakeLists.txt.j2", "CMakeLists.txt", **context)
        project.render("prj.conf.j2", "prj.conf", **context)
        if opts["extra_files_tar"]:
            project.extract_tar(opts["extra_files_tar"])

    # --- build and flash ---------------------------------------------------------------------

    def _west(self, values: Mapping[str, Any], method: str) -> tuple[list[str], dict[str, str],
                                                                        tuple[int, int, int]]:
        west, base = west_and_tree(values, method)
        return west, {"ZEPHYR_BASE": str(base)}, zephyr_version(base)

    def build(self, options: dict) -> None:
        values = self.options_for("build", options)
        self.check_targets()
        name, board = self.board()
        self.check_board_cpu(name, str(board["cpu"]))
        west, env, version = self._west(values, "build")
        check_version(version, values["warning_as_error"])
        cmd = [*west, "build", "-b", zephyr_board_name(name, board, version), "-d",
               str(self.project_dir / "build"), "-p", "auto", str(self.project_dir)]
        if values["verbose"]:
            cmd.insert(len(west), "-v")
        # The log stays outside build/, which west may wipe (pristine auto) while it runs.
        log = self.project_dir / BUILD_LOG
        run_logged(cmd, cwd=self.project_dir, log_path=log, env=env)
        if not (self.project_dir / ELF).is_file():  # a west or a tree that builds nothing
            raise BuildError(f"build failed: '{' '.join(west)} build' succeeded but wrote no "
                             f"{ELF}; check that west_cmd runs west and that zephyr_base "
                             f"({env['ZEPHYR_BASE']}) is a whole Zephyr checkout; full log: "
                             f"{log}", log=str(log))

    def flash(self, options: dict) -> None:
        values, (name, board) = self.options_for("flash", options), self.board()
        if board["qemu"]:
            _LOG.info("%s is emulated: nothing to flash; open_transport starts QEMU", name)
            return
        if not (self.project_dir / ELF).is_file():
            raise FlashError(f"nothing to flash: {ELF} is not built; run 'project-api build'")
        west, env, _ = self._west(values, "flash")
        runner = str(board["flash_runner"])
        cmd = [*west, "flash", "-d", str(self.project_dir / "build"), "-r", runner,
               *flash_serial_args(runner, values["serial_number"])]
        run_logged(cmd, cwd=self.project_dir, log_path=self.project_dir / "build" / "flash.log",
                   step="flash", error=FlashError, env=env)

    # --- transport ---------------------------------------------------------------------------

    def open_transport(self, options: dict) -> dict:
        values, (name, board) = self.options_for("open_transport", options), self.board()
        if self.require_generated("project_type")["project_type"] == "standalone":
            raise ServerError(message="open_transport: a standalone firmware has no RPC server; "
                                      "read its ai: lines on the console instead")
        baud = values["baud_rate"] or (None if board["qemu"] else built_console_baud(self.project_dir / DTS))
        reply = remote.open_remote(self, values, baud or 115200)  # serial_url, labgrid_place
        if reply is not None:
            return reply
        if not board["qemu"]:
            return self.open_uart(serial_ports.board_port(
                board.get("usb"), values["serial_port"], values["serial_number"],
                f"{name}'s debug probe", index=board.get("usb_port_index")), baud)
        elf = require_image(self.project_dir / ELF)
        line = QemuSocketLine()
        argv = emulator_argv(board["emulator"]["binary"], board["emulator"]["args"], elf, line,
                             values["gdbserver_port"])
        return run_emulator(self, line, argv,
                            cwd=self.project_dir, log_path=self.project_dir / "build" / "qemu.log",
                            timeouts=QEMU_TIMEOUTS, banner=BANNER,
                            banner_timeout_sec=600.0 if values["gdbserver_port"] else 30.0)


if __name__ == "__main__":
    server.main(Handler())

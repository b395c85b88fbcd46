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
* before a reopen (``do_reset``), a real board on a local probe is reset with ``west reset`` when
  its flash runner implements that command (``reset`` of the runner in boards.yaml's ``runners``);
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
from project_api.errors import BuildError, FlashError, ServerError
from project_api.template import (
    Link,
    NewProject,
    ProjectType,
    TemplateHandler,
    common,
    compile_definitions,
    load_boards,
    option,
    project_type_option,
    remote,
    run_logged,
    serial_ports,
    uart_link,
)
from project_api.template.ai_api import STANDALONE_OPTIONS
from project_api.template.boards import load_table
from project_api.template.mlperftiny_model import MLPERFTINY_MODEL_OPTION
from project_api.template.profile import PROFILE_OPTION
from project_api.template.qemu import QemuSocketLine, emulator_argv, emulator_link, require_image
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
#: What each flash runner can do besides ``west flash`` (``reset``: ``west reset`` through it).
RUNNERS = load_table(__file__, "runners")
#: The start of the firmware's first line (host_driven and mlperftiny). open_transport reads up to
#: its end; what follows (mlperftiny: the benchmark's start-up lines) is left for the client.
BANNER = b"project-api zephyr ready"
ELF = "build/zephyr/zephyr.elf"
DTS = "build/zephyr/zephyr.dts"
BUILD_LOG = "build.log"
RESET_LOG = "build/reset.log"
#: The system heap replaces the runtime's static pool (platform.c allocates with k_aligned_alloc).
REPLACED_BY_ZEPHYR = {"src/platform/memory_pool.c", "src/memory/page_allocator.c"}
PROJECT_TYPES = {
    "host_driven": ProjectType(sources=("src/main.c", "src/platform.c"), crt="host_driven",
                               link="rpc", banner=BANNER, help="an RPC server on the console UART"),
    "standalone": ProjectType(sources=("src/standalone_main.c", "src/platform.c"),
                              crt="standalone", link=None, model="ai_api",
                              help="the ai_ API (src/ai/ai_runtime.h) and a main that runs every "
                                   "model once"),
    # No platform.c: mlperftiny's runtime libraries call only the port and the model glue.
    "mlperftiny": ProjectType(sources=("src/mlperftiny_main.c",), crt="mlperftiny",
                              link="mlperftiny", banner=BANNER, model="mlperftiny",
                              help="the MLPerf Tiny benchmark protocol on the console UART"),
}
#: CONFIG_MAIN_STACK_SIZE per project type unless config_main_stack_size is given: mlperftiny's
#: protocol and model run on main's stack, about 1 KiB deep on Cortex-M (results formatting,
#: the model's run function), more than Zephyr's default.
MAIN_STACK_BYTES = {"mlperftiny": 4096}
#: QEMU runs a model run of a few seconds; a real board answers like any UART device.
QEMU_TIMEOUTS = server.TransportTimeouts(session_start_retry_timeout_sec=2.0,
                                         session_start_timeout_sec=20.0,
                                         session_established_timeout_sec=120.0)


class Handler(TemplateHandler):
    """The zephyr template's Project API handler."""

    PLATFORM_NAME = "zephyr"
    BUILDS_FOR = ("cortex-m", "x86")
    BOARDS = BOARDS
    PROJECT_TYPES = PROJECT_TYPES
    OPTIONS = [
        option("board", "str", choices=list(BOARDS), default="qemu_cortex_m3",
               optional=["generate_project"],
               help="Board of boards.yaml (qemu_cortex_m3, qemu_x86 and mps2_an521 run under "
                    "QEMU)."),
        project_type_option(PROJECT_TYPES),
        MLPERFTINY_MODEL_OPTION,
        option("west_cmd", "str", default=DEFAULT_WEST,
               optional=["generate_project", "build", "flash", "open_transport"],
               help="The west command: a command by design, run as given (split into words "
                    "like a shell would, but never run by one; default: this Python's -m "
                    "west)."),
        option("zephyr_base", "str",
               optional=["generate_project", "build", "flash", "open_transport"],
               help="Path to the Zephyr tree (default: $ZEPHYR_BASE)."),
        common("serial_number"),
        common("serial_port"),
        option("baud_rate", "int", minimum=1200, maximum=12_000_000, optional=["open_transport"],
               help="Host-side baud rate (default: the console's current-speed in the built "
                    "devicetree)."),
        option("gdbserver_port", "int", minimum=1, maximum=65535, optional=["open_transport"],
               help="QEMU boards: start QEMU's GDB server on this port, CPU halted."),
        option("config_main_stack_size", "int", minimum=512, maximum=1 << 20,
               optional=["generate_project"],
               help="Sets CONFIG_MAIN_STACK_SIZE (mlperftiny default: 4096)."),
        common("workspace_size_bytes",
               help="TVM_WORKSPACE_SIZE_BYTES: the runtime heap (CONFIG_HEAP_MEM_POOL_SIZE) for "
                    "tensors the host allocates (default: the board's recommended heap)."),
        common("max_packet_size_bytes"),
        PROFILE_OPTION,
        common("warning_as_error",
               help="Warnings are errors (CONFIG_COMPILER_WARNINGS_AS_ERRORS), and an untested "
                    "Zephyr version is an error."),
        common("compile_definitions"),
        option("extra_files_tar", "str", optional=["generate_project"],
               help="A tar archive extracted into the generated project."),
        option("cmsis_path", "str", optional=["generate_project"],
               help="CMSIS (with CMSIS-NN) for models that include its headers."),
        *STANDALONE_OPTIONS,
        common("verbose"),
        *remote.remote_options(flash=False),  # west flash runs on the board's own machine
    ]

    # --- generate ----------------------------------------------------------------------------

    def render(self, project: NewProject) -> None:
        opts = project.options
        name, board = opts["board"], BOARDS[opts["board"]]
        check_cmake_path(project.dir, "the project directory")  # ${CMAKE_CURRENT_SOURCE_DIR}
        version, heap = check_tree_for_board(opts, name, board)
        check_cmsis(project.library.modules.values(), opts["cmsis_path"])
        slow = software_float(project.library.modules.values(), name, board)
        if slow and opts["warning_as_error"]:
            raise ServerError(message=f"{slow} (warning_as_error)")
        if slow:
            _LOG.warning("%s", slow)
        crt = [p for p in project.crt_sources if p not in REPLACED_BY_ZEPHYR]
        project.copy_crt(crt)
        app = project.project_type.sources
        project.copy(*app, "boards.yaml")
        if (project.template_dir / "boards" / f"{name}.overlay").is_file():
            project.copy(f"boards/{name}.overlay")
        generated, model_dirs = project.write_model_sources()
        project.write_crt_config(f"zephyr template, board {name}")
        context = dict(
            board_name=name, board=board, zephyr_board=zephyr_board_name(name, board, version),
            app_sources=[*app, *generated], model_dirs=model_dirs,
            crt_sources=[f"crt/{p}" for p in crt],
            definitions=compile_definitions(opts["compile_definitions"]),
            rx_ring_bytes=project.rx_ring_bytes, workspace_size_bytes=heap,
            config_main_stack_size=(opts["config_main_stack_size"]
                                    or MAIN_STACK_BYTES.get(opts["project_type"])),
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

    def do_build(self, values: dict) -> None:
        name, board = self.board(values)
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

    def do_flash(self, values: dict) -> None:
        name, board = self.board(values)
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

    def do_reset(self, values: dict) -> None:
        """Before a reopen: ``west reset -d build -r <runner>`` (with the probe's serial number
        in the runner's form) for a real board on a local probe whose runner implements it.
        An emulated board restarts with QEMU, a serial_url or labgrid place has no local probe,
        and a runner without ``west reset`` leaves the running firmware as it is."""
        name, board = self.board(values)
        if board["qemu"] or remote.reached_remotely(values):
            return
        runner = str(board["flash_runner"])
        if not RUNNERS.get(runner, {}).get("reset"):
            _LOG.info("%s: west cannot reset it through its runner %s; reopening its link on "
                      "the running firmware", name, runner)
            return
        west, env, _ = self._west(values, "open_transport")
        cmd = [*west, "reset", "-d", str(self.project_dir / "build"), "-r", runner,
               *flash_serial_args(runner, values["serial_number"])]
        _LOG.info("resetting %s (west reset, runner %s) before reopening its link", name, runner)
        run_logged(cmd, cwd=self.project_dir, log_path=self.project_dir / RESET_LOG,
                   step="reset", error=FlashError, env=env)

    # --- transport ---------------------------------------------------------------------------

    def do_open_transport(self, values: dict) -> Link:
        name, board = self.board(values)
        baud = values["baud_rate"] or (None if board["qemu"]
                                       else built_console_baud(self.project_dir / DTS))
        link = remote.remote_link(values, baud or 115200)  # serial_url, labgrid_place
        if link is not None:
            return link
        if not board["qemu"]:
            return uart_link(serial_ports.board_port(
                board.get("usb"), values["serial_port"], values["serial_number"],
                f"{name}'s debug probe", index=board.get("usb_port_index")), baud)
        elf, emulator = require_image(self.project_dir / ELF), board["emulator"]
        line = QemuSocketLine()
        argv = emulator_argv(emulator["binary"], emulator["args"], elf, line,
                             values["gdbserver_port"])
        return emulator_link(argv, line, cwd=self.project_dir,
                             log_path=self.project_dir / "build" / "qemu.log",
                             timeouts=QEMU_TIMEOUTS, banner=self.project_type(values).banner,
                             banner_timeout_sec=600.0 if values["gdbserver_port"] else 30.0,
                             package=emulator.get("package"))


if __name__ == "__main__":
    server.main(Handler())

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

import importlib.util
import logging
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from project_api import server
from project_api.crt_manifest import read_manifest
from project_api.errors import BuildError, FlashError, MissingProgramError, ServerError
from project_api.template import (
    NewProject,
    TemplateHandler,
    TransportMixin,
    ai_api,
    compile_definitions,
    option,
    remote,
    run_logged,
    serial_ports,
    targets,
)
from project_api.template.qemu import QemuSocketLine, require_image, run_emulator

_LOG = logging.getLogger("zephyr")
TEMPLATE_DIR = Path(__file__).resolve().parent
BOARDS: dict[str, dict[str, Any]] = yaml.safe_load(
    (TEMPLATE_DIR / "boards.yaml").read_text())["boards"]
#: The start of the firmware's first line (host_driven and mlperftiny). open_transport reads up to
#: its end; what follows (mlperftiny: the benchmark's start-up lines) is left for the client.
BANNER = b"project-api zephyr ready"
ELF = "build/zephyr/zephyr.elf"
DTS = "build/zephyr/zephyr.dts"
BUILD_LOG = "build.log"
#: Zephyr releases (major, minor) the generated application is written for, both ends included.
TESTED_ZEPHYR = ((3, 2), (4, 2))
#: Zephyr 3.7 introduced hardware model v2 board names (board/soc/variant).
HWM2_FROM = (3, 7)
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
DEFAULT_WEST = f"{sys.executable} -m west"


# --- the Zephyr tree -------------------------------------------------------------------------

def zephyr_version(zephyr_base: Path) -> tuple[int, int, int]:
    """(major, minor, patch) from ``<zephyr_base>/VERSION``; ServerError if it is no Zephyr tree."""
    path = Path(zephyr_base) / "VERSION"
    try:
        text = path.read_text()
    except OSError:
        raise ServerError(message=f"zephyr_base {zephyr_base} is not a Zephyr tree (no VERSION "
                                  "file); pass -o zephyr_base=<zephyr checkout> or set "
                                  "ZEPHYR_BASE") from None
    fields = dict(re.findall(r"^\s*(VERSION_MAJOR|VERSION_MINOR|PATCHLEVEL)\s*=\s*(\d+)", text,
                             re.M))
    if "VERSION_MAJOR" not in fields or "VERSION_MINOR" not in fields:
        raise ServerError(message=f"{path} names no VERSION_MAJOR/VERSION_MINOR; pass -o "
                                  "zephyr_base=<zephyr checkout>")
    return (int(fields["VERSION_MAJOR"]), int(fields["VERSION_MINOR"]),
            int(fields.get("PATCHLEVEL", 0)))


def check_version(version: Sequence[int], warning_as_error: bool) -> None:
    """Warn (or, with warning_as_error, raise) when ``version`` is outside :data:`TESTED_ZEPHYR`."""
    low, high = TESTED_ZEPHYR
    if low <= tuple(version[:2]) <= high:
        return
    text = ".".join(map(str, version))
    message = (f"Zephyr {text} has not been tested with this template (tested "
               f"{low[0]}.{low[1]} to {high[0]}.{high[1]}); use a tested release, or drop "
               "warning_as_error to try it anyway")
    if warning_as_error:
        raise ServerError(message=message)
    _LOG.warning("%s", message)


def zephyr_base_of(values: Mapping[str, Any], method: str) -> Path:
    """The Zephyr tree: the option, else $ZEPHYR_BASE; ServerError when neither is set."""
    base = values.get("zephyr_base") or os.environ.get("ZEPHYR_BASE")
    if not base:
        raise ServerError(message=f"{method}: ZEPHYR_BASE is unset; set it to your Zephyr "
                                  "checkout (e.g. ~/zephyrproject/zephyr) or pass -o "
                                  "zephyr_base=PATH")
    path = Path(base).expanduser()
    zephyr_version(path)  # a tree, or the one-line error
    return path


def board_ram_bytes(zephyr_base: Path | None, name: str) -> tuple[int, str]:
    """(RAM bytes, where it came from): the Zephyr tree's board yaml (any arch or vendor
    folder: ``boards/<arch>/<board>/`` before 3.7, ``boards/<vendor>/<board>/`` after), else
    boards.yaml's ``ram_bytes``."""
    board = BOARDS[name]
    if zephyr_base is not None and (zephyr_base / "boards").is_dir():
        # Hardware model v2 names a board's yaml after its target, '/' written as '_'.
        stems = [str(board.get("zephyr_board", name))]
        if board.get("zephyr_board_hwm2"):
            stems.append(str(board["zephyr_board_hwm2"]).replace("/", "_"))
        found = [p for stem in dict.fromkeys(stems)
                 for p in sorted((zephyr_base / "boards").rglob(f"{stem}.yaml"))]
        for path in found:
            try:
                data = yaml.safe_load(path.read_text()) or {}
            except (OSError, yaml.YAMLError):
                continue
            if isinstance(data, dict) and isinstance(data.get("ram"), int):
                return data["ram"] * 1024, str(path)
    return int(board["ram_bytes"]), "boards.yaml"


def zephyr_board_name(name: str, version: Sequence[int] | None) -> str:
    """The name ``west build -b`` takes for board ``name`` on Zephyr ``version``."""
    board = BOARDS[name]
    if version is not None and tuple(version[:2]) >= HWM2_FROM and board.get("zephyr_board_hwm2"):
        return str(board["zephyr_board_hwm2"])
    return str(board.get("zephyr_board", name))


# --- west --------------------------------------------------------------------------------------

def west_argv(west_cmd: str | None) -> list[str]:
    """``west_cmd`` split like a shell would; MissingProgramError when west is not installed."""
    argv = shlex.split(west_cmd or DEFAULT_WEST)
    hint = ("install it with 'pip install west', or pass -o west_cmd=<path of west>")
    if len(argv) >= 3 and argv[1:3] == ["-m", "west"]:
        python = shutil.which(argv[0])
        found = (importlib.util.find_spec("west") is not None if argv[0] == sys.executable
                 else python is not None and subprocess.run(
                     [python, "-c", "import west"], capture_output=True).returncode == 0)
        if not found:
            raise MissingProgramError(f"west not found: {argv[0]} has no west module; {hint}")
        return argv
    program = shutil.which(argv[0])
    if program is None:
        raise MissingProgramError(f"west not found: '{argv[0]}' is not on PATH; {hint}")
    return [program, *argv[1:]]


def flash_serial_args(runner: str, serial_number: str | None) -> list[str]:
    """The ``west flash`` arguments that pick the probe with ``serial_number`` for ``runner``."""
    if not serial_number:
        return []
    if runner == "nrfjprog":
        # Segger serial numbers are shown zero-padded over USB; nrfjprog takes them without.
        return ["--dev-id", serial_number.lstrip("0") or "0"]
    if runner in ("jlink", "pyocd"):
        return ["--dev-id", serial_number]
    if runner == "openocd":
        return ["--cmd-pre-init", f"adapter serial {serial_number}"]
    if runner == "stm32cubeprogrammer":
        return ["--conn-modifiers", f"sn={serial_number}"]
    raise FlashError(f"flash runner {runner} takes no serial number here; drop -o serial_number "
                     "or flash with another runner")


# --- the devicetree ----------------------------------------------------------------------------

def _block(text: str, start: int) -> str:
    """The text between the brace at or after ``start`` and its match (nested blocks removed)."""
    open_at = text.index("{", start)
    depth, out, i = 0, [], open_at
    while i < len(text):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                break
        elif depth == 1:
            out.append(c)
        i += 1
    return "".join(out)


def console_baud_rate(dts_text: str) -> int:
    """``current-speed`` of the node ``/chosen`` names as ``zephyr,console`` in a zephyr.dts."""
    text = re.sub(r"/\*.*?\*/", "", dts_text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    chosen = re.search(r"(?m)^\s*chosen\s*\{", text)
    if chosen is None:
        raise ValueError("no /chosen node")
    console = re.search(r"zephyr,console\s*=\s*(&\{[^}]*\}|&[\w-]+|\"[^\"]*\")\s*;",
                        _block(text, chosen.start()))
    if console is None:
        raise ValueError("/chosen has no zephyr,console")
    ref = console.group(1)
    if ref.startswith("&{") or ref.startswith('"'):
        node = ref.strip('&{}"').rstrip("/").rsplit("/", 1)[-1]
        where = re.search(rf"(?m)^\s*(?:[\w-]+:\s*)*{re.escape(node)}\s*\{{", text)
    else:
        label = ref[1:]
        where = re.search(rf"(?m)^\s*(?:[\w-]+:\s*)*{re.escape(label)}:\s*(?:[\w-]+:\s*)*"
                          r"[\w,.+@-]+\s*\{", text)
    if where is None:
        raise ValueError(f"the console node {ref} is not defined")
    speed = re.search(r"current-speed\s*=\s*<\s*(0x[0-9a-fA-F]+|\d+)\s*>", _block(text, where.start()))
    if speed is None:
        raise ValueError(f"the console node {ref} has no current-speed")
    return int(speed.group(1), 0)


def qemu_argv(board: Mapping[str, Any], elf: Path, line: QemuSocketLine,
              gdbserver_port: int | None) -> list[str]:
    """The emulator's command line: the board's machine, our kernel, the console on ``line``
    and, with ``gdbserver_port``, a GDB server that holds the CPU until GDB continues it."""
    emulator = board["emulator"]
    argv = [str(emulator["binary"]), *map(str, emulator["args"]), "-monitor", "none",
            "-kernel", str(elf), *line.qemu_args("uart"), "-serial", "chardev:uart"]
    if gdbserver_port is not None:
        argv += ["-gdb", f"tcp::{int(gdbserver_port)}", "-S"]
    return argv


class Handler(TransportMixin, TemplateHandler):
    """The zephyr template's Project API handler."""

    PLATFORM_NAME = "zephyr"
    BUILDS_FOR = ("cortex-m", "x86")
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
               help="The west command, split like a shell would (default: this Python's -m "
                    "west)."),
        option("zephyr_base", "str",
               optional=["generate_project", "build", "flash", "open_transport"],
               help="Path to the Zephyr tree (default: $ZEPHYR_BASE)."),
        option("serial_number", "str", optional=["flash", "open_transport"],
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
               help="Extra -D/-U flags for the application, e.g. \"-DFOO=1 -UBAR\"."),
        option("extra_files_tar", "str", optional=["generate_project"],
               help="A tar archive extracted into the generated project."),
        option("cmsis_path", "str", optional=["generate_project"],
               help="CMSIS (with CMSIS-NN) for models that include its headers."),
        option("extra_models", "str", optional=["generate_project"],
               help="standalone: more MLF archives in the firmware, comma-separated paths."),
        option("shared_pool", "bool", default=False, optional=["generate_project"],
               help="standalone: one activation pool sized to the largest model."),
        option("sample_seed", "int", default=0, minimum=0, maximum=(1 << 31) - 1,
               optional=["generate_project"], help="standalone: seed of the known inputs."),
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
        if not standalone and (opts["extra_models"] or opts["shared_pool"]):
            raise ServerError(message="extra_models and shared_pool need project_type=standalone")
        base = opts["zephyr_base"] or os.environ.get("ZEPHYR_BASE")
        version = None
        if base:
            base_path = zephyr_base_of(opts, "generate_project")
            version = zephyr_version(base_path)
            check_version(version, opts["warning_as_error"])
        else:
            base_path = None
            _LOG.warning("ZEPHYR_BASE is unset: the Zephyr version is not checked and the RAM "
                         "of %s comes from boards.yaml", name)
        heap = opts["workspace_size_bytes"] or int(board["recommended_heap_bytes"])
        opts["workspace_size_bytes"] = heap
        ram, source = board_ram_bytes(base_path, name)
        if heap >= ram:
            raise ServerError(message=f"workspace_size_bytes={heap} does not fit {name}'s RAM of "
                                      f"{ram} bytes ({source}); pass a smaller -o "
                                      "workspace_size_bytes=N")
        self._check_cmsis(project, opts["cmsis_path"])
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
        if standalone:
            ai = ai_api.generate(project, opts["extra_models"], opts["shared_pool"],
                                 opts["sample_seed"])
            sources, model_dirs = [*app, *ai.sources], ai.model_dirs
        elif mlperftiny:
            project.write_model_glue()
            ai_api.write_mlperftiny_model(project, opts["mlperftiny_model"])
            sources = [*app, "src/model_glue.c", "src/mlperftiny_model.c"]
            model_dirs = ["model"]
        else:
            project.write_model_glue()
            sources, model_dirs = [*app, "src/model_glue.c"], ["model"]
        packet = opts["max_packet_size_bytes"]
        project.write_crt_config({
            "TVM_CRT_MAX_PACKET_SIZE_BYTES": (packet, "Largest RPC packet, header included."),
            "TVM_MODEL_WORKSPACE_SIZE_BYTES": (project.workspace_bytes(),
                                               "Model workspace given to TVMBackendWorkspaceInit."),
        }, title=f"zephyr template, board {name}")
        definitions = compile_definitions(opts["compile_definitions"])
        context = dict(
            board_name=name, board=board, zephyr_board=zephyr_board_name(name, version),
            app_sources=sources, model_dirs=model_dirs, crt_sources=[f"crt/{p}" for p in crt],
            definitions=definitions, rx_ring_bytes=1024 if standalone or mlperftiny else
            max(1024, 1 << (packet + 64).bit_length()),
        )
        project.render("CMakeLists.txt.j2", "CMakeLists.txt", **context)
        project.render("prj.conf.j2", "prj.conf", **context)
        if opts["extra_files_tar"]:
            self._extract_extra(Path(opts["extra_files_tar"]), project.dir)

    @staticmethod
    def _check_cmsis(project: NewProject, cmsis_path: str | None) -> None:
        uses = any("arm_nnfunctions.h" in Path(s).read_text(errors="replace")
                   for mod in project.library.modules.values() for s in mod.sources)
        if uses and not cmsis_path:
            raise ServerError(message="the model includes CMSIS-NN headers; pass -o "
                                      "cmsis_path=<CMSIS checkout with CMSIS-NN>")
        if cmsis_path and not Path(cmsis_path).is_dir():
            raise ServerError(message=f"cmsis_path {cmsis_path} is not a directory; pass the "
                                      "path of your CMSIS checkout")

    @staticmethod
    def _extract_extra(archive: Path, dest: Path) -> None:
        from project_api import mlf

        if not archive.is_file():
            raise ServerError(message=f"extra_files_tar {archive} is not a file; pass a tar "
                                      "archive's path")
        try:
            mlf.safe_extract(archive, dest)
        except mlf.MLFError as exc:
            raise ServerError(message=f"extra_files_tar {archive}: {exc}; pass a tar archive") \
                from None

    # --- build and flash ---------------------------------------------------------------------

    def _board(self) -> tuple[str, dict[str, Any]]:
        return (name := self.require_generated("board")["board"]), BOARDS[name]

    def _west(self, values: Mapping[str, Any], method: str) -> tuple[list[str], dict[str, str],
                                                                        tuple[int, int, int]]:
        west = west_argv(values["west_cmd"])
        base = zephyr_base_of(values, method)
        return west, {"ZEPHYR_BASE": str(base)}, zephyr_version(base)

    def build(self, options: dict) -> None:
        values = self.options_for("build", options)
        self.check_targets()
        name, board = self._board()
        self._check_board_arch(name, board)
        west, env, version = self._west(values, "build")
        check_version(version, values["warning_as_error"])
        cmd = [*west, "build", "-b", zephyr_board_name(name, version), "-d",
               str(self.project_dir / "build"), "-p", "auto", str(self.project_dir)]
        if values["verbose"]:
            cmd.insert(len(west), "-v")
        # The log stays outside build/, which west may wipe (pristine auto) while it runs.
        run_logged(cmd, cwd=self.project_dir, log_path=self.project_dir / BUILD_LOG, env=env)

    def _check_board_arch(self, name: str, board: Mapping[str, Any]) -> None:
        """BuildError when a module's C builds only for a CPU family the board is not (Arm-only
        code on qemu_x86)."""
        family = targets.family_of(str(board["cpu"]))
        for mod in self.model_library().modules.values():
            need = targets.arch_requirement(mod)
            if need is not None and not targets.builds(need[0], (family,)):
                raise BuildError(f"module {mod.name!r} targets {targets.family_title(need[0])} "
                                 f"({need[1]}), which board {name} ({board['cpu']}) cannot run; "
                                 "regenerate the project with an Arm board")

    def flash(self, options: dict) -> None:
        values, (name, board) = self.options_for("flash", options), self._board()
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
        values, (name, board) = self.options_for("open_transport", options), self._board()
        if self.require_generated("project_type")["project_type"] == "standalone":
            raise ServerError(message="open_transport: a standalone firmware has no RPC server; "
                                      "read its ai: lines on the console instead")
        baud = values["baud_rate"] or (None if board["qemu"] else self._console_baud())
        reply = remote.open_remote(self, values, baud or 115200)  # serial_url, labgrid_place
        if reply is not None:
            return reply
        if not board["qemu"]:
            return self.open_uart(serial_ports.board_port(
                board.get("usb"), values["serial_port"], values["serial_number"],
                f"{name}'s debug probe", index=board.get("usb_port_index")), baud)
        elf = require_image(self.project_dir / ELF)
        line = QemuSocketLine()
        return run_emulator(self, line, qemu_argv(board, elf, line, values["gdbserver_port"]),
                            cwd=self.project_dir, log_path=self.project_dir / "build" / "qemu.log",
                            timeouts=QEMU_TIMEOUTS, banner=BANNER,
                            banner_timeout_sec=600.0 if values["gdbserver_port"] else 30.0)

    def _console_baud(self) -> int:
        path = self.project_dir / DTS
        if not path.is_file():
            raise ServerError(message=f"open_transport: {path} does not exist; run 'project-api "
                                      "build' first (or pass -o baud_rate=N)")
        try:
            return console_baud_rate(path.read_text(errors="replace"))
        except ValueError as exc:
            raise ServerError(message=f"open_transport: cannot read the console's baud rate from "
                                      f"{path} ({exc}); pass -o baud_rate=N") from None


if __name__ == "__main__":
    server.main(Handler())

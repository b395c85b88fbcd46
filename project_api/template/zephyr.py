"""What a Zephyr template needs to know about Zephyr's tree, west and the devicetree.

* the tree (``zephyr_base``, default ``$ZEPHYR_BASE``): its ``VERSION``, compared as numbers
  against the releases the application is written for (:data:`TESTED_ZEPHYR`); a board's RAM
  from its board yaml wherever it sits under ``boards/`` (the pre-3.7 ``boards/<arch>/<board>/``
  and the hardware-model-v2 ``boards/<vendor>/<board>/`` layouts); the board name ``west build
  -b`` takes on that release;
* west: the command (``west_cmd``, split like a shell would; one line when it is missing, naming
  a missing tree too: :func:`west_and_tree`) and the serial-number argument of each ``west
  flash`` runner;
* the built devicetree (``build/zephyr/zephyr.dts``): the chosen console's ``current-speed``.

The board entries are those of a template's ``boards.yaml`` (``zephyr_board``,
``zephyr_board_hwm2``, ``ram_bytes``).
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
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from project_api.errors import FlashError, MissingProgramError, OptionValueError, ServerError
from project_api.template.quoting import check_cmake_path, tcl_word

_LOG = logging.getLogger(__name__)
#: Zephyr releases (major, minor) the generated application is written for, both ends included.
TESTED_ZEPHYR = ((3, 2), (4, 2))
#: Zephyr 3.7 introduced hardware model v2 board names (board/soc/variant).
HWM2_FROM = (3, 7)
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
    check_cmake_path(path, "zephyr_base")  # CMake reads it from $ENV{ZEPHYR_BASE}
    zephyr_version(path)  # a tree, or the one-line error
    return path


def board_ram_bytes(zephyr_base: Path | None, name: str,
                    board: Mapping[str, Any]) -> tuple[int, str]:
    """(RAM bytes, where it came from): the Zephyr tree's board yaml (any arch or vendor
    folder: ``boards/<arch>/<board>/`` before 3.7, ``boards/<vendor>/<board>/`` after), else
    boards.yaml's ``ram_bytes``."""
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


def zephyr_board_name(name: str, board: Mapping[str, Any], version: Sequence[int] | None) -> str:
    """The name ``west build -b`` takes for board ``name`` on Zephyr ``version``."""
    if version is not None and tuple(version[:2]) >= HWM2_FROM and board.get("zephyr_board_hwm2"):
        return str(board["zephyr_board_hwm2"])
    return str(board.get("zephyr_board", name))


# --- west --------------------------------------------------------------------------------------

def west_argv(west_cmd: str | None) -> list[str]:
    """``west_cmd`` split like a shell would (``shlex``: quotes group words, nothing is expanded)
    into the argv our calls start with; MissingProgramError when west is not installed.

    ``west_cmd`` is a command by design: whatever program it names runs, with the user's
    rights, as ``west`` would. It is never given to a shell, so ``;``, ``$()`` or a backtick in
    it is only part of a word."""
    try:
        argv = shlex.split(west_cmd or DEFAULT_WEST)
    except ValueError as exc:  # an unbalanced quote
        raise ServerError(message=f"west_cmd {west_cmd!r}: {exc}; write it as a shell command "
                                  "line (quotes balanced)") from None
    if not argv:
        raise ServerError(message="west_cmd is empty; pass -o west_cmd=<path of west>")
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


def west_and_tree(values: Mapping[str, Any], method: str) -> tuple[list[str], Path]:
    """The west command and the Zephyr tree a step needs; one MissingProgramError naming every
    part that is missing (west, ZEPHYR_BASE, a tree without VERSION) and how to get each."""
    problems: list[str] = []
    west: list[str] = []
    base: Path | None = None
    try:
        west = west_argv(values.get("west_cmd"))
    except MissingProgramError as exc:
        problems.append(exc.detail)
    try:
        base = zephyr_base_of(values, method)
    except ServerError as exc:
        problems.append(exc.message.removeprefix(f"{method}: "))
    if problems:
        raise MissingProgramError(f"{method} needs west and a Zephyr tree: " + "; ".join(problems))
    assert base is not None
    return west, base


def flash_serial_args(runner: str, serial_number: str | None) -> list[str]:
    """The ``west flash`` arguments that pick the probe with ``serial_number`` for ``runner``."""
    if not serial_number:
        return []
    if runner == "nrfjprog":
        # Segger serial numbers are shown zero-padded over USB; nrfjprog takes them without.
        return ["--dev-id", serial_number.lstrip("0") or "0"]
    if runner in ("jlink", "pyocd"):
        return ["--dev-id", serial_number]
    if runner == "openocd":  # a Tcl command
        return ["--cmd-pre-init", f"adapter serial {tcl_word(serial_number, 'serial_number')}"]
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


def check_cmsis(modules: Iterable[Any], cmsis_path: str | None) -> None:
    """ServerError when a module includes CMSIS-NN headers and no ``cmsis_path`` is given, or
    ``cmsis_path`` is no directory."""
    uses = any("arm_nnfunctions.h" in Path(s).read_text(errors="replace")
               for mod in modules for s in mod.sources)
    if uses and not cmsis_path:
        raise ServerError(message="the model includes CMSIS-NN headers; pass -o "
                                  "cmsis_path=<CMSIS checkout with CMSIS-NN>")
    if cmsis_path:
        check_cmake_path(cmsis_path, "cmsis_path")  # set(CMSIS_PATH ...) in CMakeLists.txt
    if cmsis_path and not Path(cmsis_path).is_dir():
        raise ServerError(message=f"cmsis_path {cmsis_path} is not a directory; pass the "
                                  "path of your CMSIS checkout")


def check_tree_for_board(options: Mapping[str, Any], name: str,
                         board: Mapping[str, Any]) -> tuple[tuple[int, int, int] | None, int]:
    """At generate time: the Zephyr tree's version (checked; None without a tree, with a
    warning) and the heap: ``workspace_size_bytes``, else the board's recommended heap, which
    must fit the board's RAM. ``options`` are not changed."""
    version = base_path = None
    if options.get("zephyr_base") or os.environ.get("ZEPHYR_BASE"):
        base_path = zephyr_base_of(options, "generate_project")
        version = zephyr_version(base_path)
        check_version(version, bool(options.get("warning_as_error")))
    else:
        _LOG.warning("ZEPHYR_BASE is unset: the Zephyr version is not checked and the RAM of %s "
                     "comes from boards.yaml", name)
    heap = options.get("workspace_size_bytes") or int(board["recommended_heap_bytes"])
    ram, source = board_ram_bytes(base_path, name, board)
    if heap >= ram:
        raise OptionValueError(f"workspace_size_bytes={heap} does not fit {name}'s RAM of "
                               f"{ram} bytes ({source}); pass a smaller -o "
                               "workspace_size_bytes=N")
    return version, heap


def built_console_baud(dts_path: Path) -> int:
    """The console's baud rate in a built ``zephyr.dts``; ServerError saying what to do when the
    file is missing or names none."""
    if not dts_path.is_file():
        raise ServerError(message=f"open_transport: {dts_path} does not exist; run 'project-api "
                                  "build' first (or pass -o baud_rate=N)")
    try:
        return console_baud_rate(dts_path.read_text(errors="replace"))
    except ValueError as exc:
        raise ServerError(message=f"open_transport: cannot read the console's baud rate from "
                                  f"{dts_path} ({exc}); pass -o baud_rate=N") from None

"""Flashing a board: one small runner class per tool, behind one interface.

As in Zephyr's west runners, a runner is a class with a name and declared capabilities, and every
side effect goes through one method, so each runner is tested without a probe attached (golden
argv for the command-line tools, golden calls for pyOCD's Python API)::

    runner = runner_for(values["flash_runner"], board, values)   # None: pyocd, or qemu if emulated
    with progress_report(f"flash {name}") as progress:
        runner.flash(elf, {"name": name, **board}, values["serial_number"], progress)

``board`` is the board's entry of the template's ``boards.yaml`` plus its ``name``; the runners
read ``emulated``, ``pyocd_target``, ``openocd_interface`` and ``openocd_target`` (OpenOCD's
scripts for the probe and the chip, e.g. ``interface/stlink.cfg`` and ``target/stm32f4x.cfg``),
``elf`` (the image's ``machine`` and ``bits``), ``probe`` (how messages name the debug probe)
and ``memory.flash`` from it: nothing here knows a CPU or a probe. ``serial_number`` picks the
debug probe (for ST-LINK, the USB serial number its virtual COM port shows too); None means
"the only one".

Runners: :class:`PyOcdRunner` (the default on hardware; pyOCD's Python API, which is a
dependency), :class:`OpenOcdRunner`, :class:`CubeProgrammerRunner` and :class:`EsptoolRunner` (when
installed; esptool writes a raw image over a chip's serial boot loader), and
:class:`QemuRunner` for emulated boards, which only checks the image (the emulator that
``open_transport`` starts loads it); :func:`check_firmware` checks an image against the board
before any runner gets it. Every runner on hardware programs, verifies and resets. A missing tool raises MissingProgramError with the install hint; a probe
that is absent or ambiguous raises a one-line FlashError listing the candidates.

:meth:`FlashRunner.reset` restarts the firmware already on a board through the same probe,
writing nothing (a template's ``open_transport`` does it before it opens the link to a board
that went away)::

    runner.reset({"name": name, **board}, values["serial_number"], build / RESET_LOG)

pyOCD opens a session on the probe and calls ``target.reset()`` (what ``pyocd reset`` does);
OpenOCD runs ``-c init -c "reset run" -c shutdown`` after the board's scripts (the OpenOCD User's
Guide, "General Commands": ``init`` ends the configuration stage, ``reset run`` resets and lets
the target run, ``shutdown`` exits; Zephyr's openocd runner ends its flash the same way);
STM32CubeProgrammer runs ``--connect port=SWD [sn=SN] -rst`` (UM2237: ``-rst``, reset system);
the QEMU runner has nothing to reset (the emulator that ``open_transport`` starts boots the
image afresh).
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import importlib.util
import logging
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, ClassVar

from project_api.errors import FlashError, MissingProgramError
from project_api.template.quoting import tcl_word

_LOG = logging.getLogger(__name__)

#: A progress callback: the fraction done, 0.0 to 1.0 (pyOCD's ProgressCallback convention).
Progress = Callable[[float], None]

#: Where a runner's tool output goes, beside the image (``build/flash.log``).
FLASH_LOG = "flash.log"
#: Where a reset's tool output goes (``build/reset.log``, in the folder the template gives).
RESET_LOG = "reset.log"


@dataclass(frozen=True)
class RunnerCaps:
    """What a runner can do; :func:`runner_for` checks ``hardware`` against the board."""

    hardware: bool  #: flashes a real board (False: records an image for an emulator)
    serial_number: bool = False  #: picks the probe by its serial number
    verify: bool = False  #: reads the flash back after writing it
    reset: bool = False  #: resets the board into the new firmware


class FlashRunner(abc.ABC):
    """A way to put an image on a board. Subclasses set the class attributes and :meth:`flash`.

    ``options`` are the flash step's option values; a runner reads only the ones it knows
    (``pyocd_pack``). External programs run only through :meth:`check_call` (and
    :meth:`output` for queries), so a test can replace either.
    """

    NAME: ClassVar[str]
    CAPS: ClassVar[RunnerCaps]
    #: The executable on PATH, or None for a runner that needs none.
    PROGRAM: ClassVar[str | None] = None
    #: How to install what the runner needs (the second half of MissingProgramError).
    INSTALL_HINT: ClassVar[str] = ""

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        self.options = dict(options or {})

    @classmethod
    def available(cls) -> bool:
        """Whether the tool this runner drives is installed."""
        return cls.PROGRAM is None or shutil.which(cls.PROGRAM) is not None

    def require(self) -> str:
        """The tool's path; MissingProgramError naming the install hint when it is absent."""
        assert self.PROGRAM is not None
        path = shutil.which(self.PROGRAM)
        if path is None:
            raise MissingProgramError(f"flash_runner={self.NAME}: '{self.PROGRAM}' is not "
                                      f"installed (not found on PATH); {self.INSTALL_HINT}")
        return path

    @abc.abstractmethod
    def flash(self, image: Path, board: Mapping[str, Any], serial_number: str | None,
              progress: Progress) -> None:
        """Write ``image`` (an ELF file) to ``board``, verify it and start it."""

    def reset(self, board: Mapping[str, Any], serial_number: str | None,
              log_path: Path | None = None) -> None:
        """Restart the firmware on ``board`` through the probe ``serial_number`` picks (None:
        the only one), writing nothing; the tool's output goes to ``log_path`` when given.
        FlashError (MissingProgramError) when it cannot; this base cannot reset at all."""
        raise FlashError(f"flash_runner={self.NAME} cannot reset a board")

    def output(self, argv: Sequence[str]) -> str:
        """What ``argv`` prints (stdout and stderr), for queries such as ``--version``."""
        _LOG.debug("%s: %s", self.NAME, shlex.join(argv))
        proc = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, errors="replace", check=False)
        return proc.stdout

    def check_call(self, argv: Sequence[str], log_path: Path | None, cwd: Path | None = None,
                   step: str = "flash") -> None:
        """Run ``argv`` (in ``cwd``) with its output in ``log_path`` (None: only in the log
        records); FlashError naming ``step`` and its first error line."""
        _LOG.info("%s: %s", self.NAME, shlex.join(argv))
        with contextlib.ExitStack() as stack:
            log = None
            if log_path is not None:
                log_path.parent.mkdir(parents=True, exist_ok=True)
                log = stack.enter_context(open(log_path, "w", encoding="utf-8",
                                               errors="replace"))
                log.write(f"$ {shlex.join(argv)}\n")
                log.flush()
            proc = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, errors="replace",
                                  check=False, cwd=cwd)
            if log is not None:
                log.write(proc.stdout)
        for line in proc.stdout.splitlines():
            _LOG.info("%s: %s", self.NAME, line.rstrip())
        if proc.returncode != 0:
            cause = next((line.strip() for line in proc.stdout.splitlines()
                          if re.search(r"\berror\b", line, re.I)),
                         f"{Path(argv[0]).name} exited with status {proc.returncode}")
            where = f"; full log: {log_path}" if log_path is not None else ""
            raise FlashError(f"{step} failed ({self.NAME}): {cause}{where}",
                             **({"log": str(log_path)} if log_path is not None else {}))


def check_firmware(image: Path, board: Mapping[str, Any]) -> bytes:
    """The bytes of ``image`` if it is a whole ELF executable (header, program headers and every
    loadable segment inside the file; :func:`.elf.check_image`) for ``board``'s CPU (its
    boards.yaml ``elf``: ``machine``, pyelftools' ``e_machine`` name such as ``EM_ARM``, and
    ``bits``), else FlashError saying what is wrong and to rebuild."""
    from project_api.template.elf import check_image

    elf = board.get("elf") or {}
    data = check_image(image, elf.get("machine"), FlashError)
    bits = {1: 32, 2: 64}.get(data[4])
    if elf.get("bits") and bits != elf["bits"]:
        raise FlashError(f"{image} is a {bits}-bit ELF file, not a {elf['bits']}-bit image for "
                         f"{board.get('name', 'the board')}; rebuild it with 'project-api build'")
    return data


def load_segments(image: Path, flash: Mapping[str, int] | None = None) -> list[tuple[int, bytes]]:
    """``(load address, bytes)`` of each loadable segment of an ELF file (inside ``flash``, a
    ``{"origin", "length"}`` region, when given): what the flash must hold after programming."""
    from elftools.elf.elffile import ELFFile

    segments = []
    with open(image, "rb") as f:
        for seg in ELFFile(f).iter_segments():
            if seg["p_type"] != "PT_LOAD" or seg["p_filesz"] == 0:
                continue
            addr = seg["p_paddr"]
            if flash and not flash["origin"] <= addr < flash["origin"] + flash["length"]:
                continue
            segments.append((addr, seg.data()[: seg["p_filesz"]]))
    return segments


class PyOcdRunner(FlashRunner):
    """pyOCD through its Python API: the probe chosen by serial number, the target of
    ``pyocd_target``, a CMSIS pack from ``-o pyocd_pack=PATH`` when the target is not built in."""

    NAME = "pyocd"
    CAPS = RunnerCaps(hardware=True, serial_number=True, verify=True, reset=True)
    INSTALL_HINT = "install it with 'pip install pyocd'"

    @classmethod
    def available(cls) -> bool:
        return importlib.util.find_spec("pyocd") is not None

    def require(self) -> str:
        if not self.available():
            raise MissingProgramError(f"flash_runner=pyocd: pyOCD is not installed; "
                                      f"{self.INSTALL_HINT}")
        return "pyocd"

    def session_options(self, board: Mapping[str, Any]) -> dict[str, Any]:
        """pyOCD session options: the target, and the pack for a target it does not build in."""
        from pyocd.target import TARGET

        target = board.get("pyocd_target")
        if not target:
            raise FlashError(f"board {board.get('name')} has no pyocd_target; add it to the "
                             "board's entry or use another flash_runner")
        options: dict[str, Any] = {"target_override": target}
        pack = self.options.get("pyocd_pack")
        if pack:
            if not Path(pack).is_file():
                raise FlashError(f"pyocd_pack {pack} is not a file; pass the path of the "
                                 f"CMSIS pack (.pack) for {target}")
            options["pack"] = str(pack)
        elif target not in TARGET and target not in _managed_pack_targets():
            raise FlashError(f"pyOCD has no built-in target {target}; pass -o pyocd_pack=PATH "
                             f"to its CMSIS pack, or run 'pyocd pack install {target}'")
        return options

    def flash(self, image: Path, board: Mapping[str, Any], serial_number: str | None,
              progress: Progress) -> None:
        self.require()
        from pyocd.core.exceptions import Error as PyOcdError
        from pyocd.core.session import Session
        from pyocd.flash.file_programmer import FileProgrammer

        options = self.session_options(board)
        segments = load_segments(image, board.get("memory", {}).get("flash"))
        probe = self.probe(board, serial_number)
        _LOG.info("pyocd: %s (%s), target %s", probe.description, probe.unique_id,
                  options["target_override"])
        try:
            with Session(probe, options=options) as session:
                FileProgrammer(session, progress=progress).program(str(image), file_format="elf")
                for addr, data in segments:
                    if bytes(session.target.read_memory_block8(addr, len(data))) != data:
                        raise FlashError(f"verify failed: the flash at 0x{addr:08x} differs from "
                                         f"{image} after programming; flash again, or erase it "
                                         f"with 'pyocd erase --chip -t {board['pyocd_target']}'")
                session.target.reset()
        except (PyOcdError, OSError) as exc:  # OSError: libusb's (pyusb's USBError is one)
            raise FlashError(f"flash failed (pyocd): {exc}; check the probe's USB cable and "
                             "that no other debugger holds it") from None

    def probe(self, board: Mapping[str, Any], serial_number: str | None) -> Any:
        """The one debug probe ``serial_number`` picks (None: the only one attached)."""
        from pyocd.core.helpers import ConnectHelper

        probes = ConnectHelper.get_all_connected_probes(
            blocking=False, unique_id=serial_number, print_wait_message=False)
        return _one_probe(probes, serial_number, board.get("probe", "debug probe"))

    def reset(self, board: Mapping[str, Any], serial_number: str | None,
              log_path: Path | None = None) -> None:
        """A session on the probe and ``target.reset()``, as ``pyocd reset`` does (the target
        runs after it, and the session resumes it on disconnect)."""
        self.require()
        from pyocd.core.exceptions import Error as PyOcdError
        from pyocd.core.session import Session

        options = self.session_options(board)
        probe = self.probe(board, serial_number)
        _LOG.info("pyocd: resetting %s through %s (%s)", board.get("name"), probe.description,
                  probe.unique_id)
        try:
            with Session(probe, options=options) as session:
                session.target.reset()
        except (PyOcdError, OSError) as exc:
            raise FlashError(f"reset failed (pyocd): {exc}; check the probe's USB cable and "
                             "that no other debugger holds it") from None


def _managed_pack_targets() -> set[str]:
    """Targets of the CMSIS packs installed with ``pyocd pack install`` (lower case)."""
    from pyocd.target.pack.pack_target import ManagedPacks

    try:
        return {dev.part_number.lower() for dev in ManagedPacks.get_installed_targets()}
    except Exception as exc:  # the pack cache is optional; a broken one only hides its targets
        _LOG.debug("pyOCD's installed packs: %s", exc)
        return set()


def _one_probe(probes: Sequence[Any], serial_number: str | None, probe: str) -> Any:
    """The only probe of ``probes``, or FlashError listing what is there (``probe``: how the
    board's debug probe is named, e.g. ST-LINK)."""
    which = f" with serial number {serial_number}" if serial_number else ""
    if not probes:
        raise FlashError(f"no debug probe found{which}; connect the board's {probe} by USB "
                         "('pyocd list' shows the probes)")
    if len(probes) > 1:
        listed = ", ".join(f"{p.unique_id} ({p.description})" for p in probes)
        raise FlashError(f"{len(probes)} debug probes found{which}: {listed}; pick one with "
                         "-o serial_number=<unique id>")
    return probes[0]


class OpenOcdRunner(FlashRunner):
    """OpenOCD with the board's probe and chip scripts: ``program <elf> verify reset exit``."""

    NAME = "openocd"
    PROGRAM = "openocd"
    CAPS = RunnerCaps(hardware=True, serial_number=True, verify=True, reset=True)
    INSTALL_HINT = "install OpenOCD, e.g. 'apt-get install openocd'"

    def version(self, program: str) -> tuple[int, ...]:
        """OpenOCD's version (``Open On-Chip Debugger 0.12.0``); (0,) if it prints none."""
        m = re.search(r"Open On-Chip Debugger (\d+)\.(\d+)", self.output([program, "--version"]))
        return (int(m.group(1)), int(m.group(2))) if m else (0,)

    def argv(self, program: str, image: Path, board: Mapping[str, Any],
             serial_number: str | None, version: tuple[int, ...]) -> list[str]:
        """The command line, run in the image's folder (:meth:`flash`); ``adapter serial``
        from OpenOCD 0.11 on, ``hla_serial`` before. ``-c`` takes Tcl, and OpenOCD's ``program``
        procedure passes its file name to ``eval`` again, so it gets the image's bare name and
        the serial number, both checked by :func:`~project_api.template.quoting.tcl_word`:
        the project's path, whatever it holds, never reaches Tcl."""
        name = tcl_word(image.name, "the image's file name")
        return self.board_args(program, board, serial_number, version) + [
            "-c", f"program {{{name}}} verify reset exit"]

    def board_args(self, program: str, board: Mapping[str, Any], serial_number: str | None,
                   version: tuple[int, ...]) -> list[str]:
        """``openocd -f <interface> [-c "adapter serial SN"] -f <target>``: the probe and the
        chip, before any command."""
        missing = [key for key in ("openocd_interface", "openocd_target") if not board.get(key)]
        if missing:
            raise FlashError(f"board {board.get('name')} has no {' or '.join(missing)}; add "
                             "it to the board's entry or use another flash_runner")
        argv = [program, "-f", str(board["openocd_interface"])]
        if serial_number:
            word = "adapter serial" if version >= (0, 11) else "hla_serial"
            argv += ["-c", f"{word} {tcl_word(serial_number, 'serial_number')}"]
        return argv + ["-f", str(board["openocd_target"])]

    def reset_argv(self, program: str, board: Mapping[str, Any], serial_number: str | None,
                   version: tuple[int, ...]) -> list[str]:
        """The board's scripts, then ``init`` (the end of the configuration stage), ``reset
        run`` (reset, and let the target run) and ``shutdown`` (the OpenOCD User's Guide,
        "General Commands")."""
        return self.board_args(program, board, serial_number, version) + [
            "-c", "init", "-c", "reset run", "-c", "shutdown"]

    def reset(self, board: Mapping[str, Any], serial_number: str | None,
              log_path: Path | None = None) -> None:
        program = self.require()
        argv = self.reset_argv(program, board, serial_number, self.version(program))
        self.check_call(argv, log_path, step="reset")

    def flash(self, image: Path, board: Mapping[str, Any], serial_number: str | None,
              progress: Progress) -> None:
        program = self.require()
        argv = self.argv(program, image, board, serial_number, self.version(program))
        progress(0.0)
        self.check_call(argv, image.parent / FLASH_LOG, cwd=image.parent)
        progress(1.0)


class CubeProgrammerRunner(FlashRunner):
    """ST's STM32CubeProgrammer command line: connect over SWD, write, verify, reset."""

    NAME = "stm32cubeprogrammer"
    PROGRAM = "STM32_Programmer_CLI"
    CAPS = RunnerCaps(hardware=True, serial_number=True, verify=True, reset=True)
    INSTALL_HINT = ("install STM32CubeProgrammer or STM32CubeCLT from st.com and put its bin/ "
                    "folder on PATH")

    @staticmethod
    def connect(program: str, serial_number: str | None) -> list[str]:
        """``STM32_Programmer_CLI --connect port=SWD [sn=SN]``: the ST-LINK, over SWD."""
        return [program, "--connect", "port=SWD",
                *([f"sn={serial_number}"] if serial_number else [])]

    def argv(self, program: str, image: Path, serial_number: str | None) -> list[str]:
        return [*self.connect(program, serial_number), "--write", str(image), "--verify", "-rst"]

    def reset_argv(self, program: str, serial_number: str | None) -> list[str]:
        """Connect and ``-rst`` (UM2237, STM32CubeProgrammer's manual: reset system)."""
        return [*self.connect(program, serial_number), "-rst"]

    def flash(self, image: Path, board: Mapping[str, Any], serial_number: str | None,
              progress: Progress) -> None:
        argv = self.argv(self.require(), image, serial_number)
        progress(0.0)
        self.check_call(argv, image.parent / FLASH_LOG)
        progress(1.0)

    def reset(self, board: Mapping[str, Any], serial_number: str | None,
              log_path: Path | None = None) -> None:
        self.check_call(self.reset_argv(self.require(), serial_number), log_path, step="reset")


class EsptoolRunner(FlashRunner):
    """Espressif's esptool (``pip install esptool``) over the chip's serial boot loader: the
    raw image (``firmware.bin`` beside the ELF, the board's ``image`` made by the build) at
    flash offset 0, for chips that boot it directly; esptool checks what it wrote against an
    MD5 digest the chip computes, then resets the chip (``--after hard_reset``)."""

    NAME = "esptool"
    PROGRAM = "esptool.py"
    CAPS = RunnerCaps(hardware=True, serial_number=True, verify=True, reset=True)
    INSTALL_HINT = "install esptool, e.g. 'pip install esptool'"

    def port(self, board: Mapping[str, Any], serial_number: str | None) -> str:
        """The chip's serial port: ``-o serial_port``, else found by the board's USB ID and
        ``serial_number`` (:func:`.serial_ports.board_port`)."""
        from project_api.template import serial_ports

        return serial_ports.board_port(board.get("usb"), self.options.get("serial_port"),
                                       serial_number, f"{board.get('name')}'s {board.get('probe')}")

    @staticmethod
    def chip_args(program: str, board: Mapping[str, Any], port: str) -> list[str]:
        chip = board.get("esptool_chip")
        if not chip:
            raise FlashError(f"board {board.get('name')} has no esptool_chip; add it to the "
                             "board's entry or use another flash_runner")
        return [program, "--chip", str(chip), "--port", port]

    def argv(self, program: str, image: Path, board: Mapping[str, Any], port: str) -> list[str]:
        return [*self.chip_args(program, board, port), "--after", "hard_reset",
                "write_flash", "0x0", str(image)]

    def reset_argv(self, program: str, board: Mapping[str, Any], port: str) -> list[str]:
        """``run``: esptool resets the chip out of its boot loader into the flash's firmware."""
        return [*self.chip_args(program, board, port), "run"]

    def flash(self, image: Path, board: Mapping[str, Any], serial_number: str | None,
              progress: Progress) -> None:
        raw = image.with_suffix(".bin")
        if not raw.is_file():
            raise FlashError(f"nothing to flash: {raw.name} is not built beside {image.name}; "
                             "run 'project-api build'")
        argv = self.argv(self.require(), raw, board, self.port(board, serial_number))
        progress(0.0)
        self.check_call(argv, image.parent / FLASH_LOG)
        progress(1.0)

    def reset(self, board: Mapping[str, Any], serial_number: str | None,
              log_path: Path | None = None) -> None:
        argv = self.reset_argv(self.require(), board, self.port(board, serial_number))
        self.check_call(argv, log_path, step="reset")


class QemuRunner(FlashRunner):
    """Emulated boards: checks that the image is a whole ELF executable for the board; nothing
    is written (the emulator that ``open_transport`` starts loads ``build/firmware.elf`` itself)."""

    NAME = "qemu"
    CAPS = RunnerCaps(hardware=False)

    def flash(self, image: Path, board: Mapping[str, Any], serial_number: str | None,
              progress: Progress) -> None:
        data = check_firmware(image, board)
        _LOG.info("qemu: %s (%d bytes, sha256 %s) is ready for %s", image.name, len(data),
                  hashlib.sha256(data).hexdigest()[:16], board.get("name"))
        progress(1.0)

    def reset(self, board: Mapping[str, Any], serial_number: str | None,
              log_path: Path | None = None) -> None:
        """Nothing to reset: the emulator ``open_transport`` starts boots the image afresh."""
        _LOG.debug("qemu: %s restarts with its emulator", board.get("name"))


#: Every runner by name (the choices of a template's ``flash_runner`` option).
RUNNERS: dict[str, type[FlashRunner]] = {
    cls.NAME: cls for cls in (PyOcdRunner, OpenOcdRunner, CubeProgrammerRunner, EsptoolRunner,
                              QemuRunner)
}


def runner_for(name: str | None, board: Mapping[str, Any],
               options: Mapping[str, Any] | None = None) -> FlashRunner:
    """The runner ``name`` (None: qemu for an emulated board, else the board's own
    ``flash_runner``, else pyocd) for ``board``; FlashError when it cannot flash that kind of
    board."""
    emulated = bool(board.get("emulated"))
    name = name or ("qemu" if emulated else board.get("flash_runner") or "pyocd")
    if name not in RUNNERS:
        raise FlashError(f"unknown flash_runner {name!r}; pick one of {', '.join(RUNNERS)}")
    cls = RUNNERS[name]
    if cls.CAPS.hardware == emulated:
        kind, default = ("an emulated", "qemu") if emulated else ("a real", "pyocd")
        raise FlashError(f"flash_runner={name} cannot flash {kind} board "
                         f"({board.get('name', 'this board')}); use flash_runner={default}")
    return cls(options)


@contextlib.contextmanager
def progress_report(label: str, stream: IO[str] | None = None) -> Iterator[Progress]:
    """A progress callback: a tqdm bar when ``stream`` (stderr) is a terminal, else a log line
    at every quarter, so a captured log stays one line per step (pyOCD's TTY/no-TTY split)."""
    stream = stream if stream is not None else sys.stderr
    if stream.isatty():
        from tqdm import tqdm

        with tqdm(total=100, desc=label, unit="%", file=stream, leave=True,
                  bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed}") as bar:
            def update(fraction: float) -> None:
                delta = min(100.0, 100 * fraction) - bar.n
                if delta > 0:  # a later phase (program after erase) restarts at 0: keep the bar
                    bar.update(delta)
            yield update
        return
    quarters = [0]

    def log(fraction: float) -> None:
        step = int(4 * min(max(fraction, 0.0), 1.0))
        if step > quarters[0]:
            quarters[0] = step
            _LOG.info("%s: %d%%", label, 25 * step)
    yield log

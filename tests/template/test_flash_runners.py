"""project_api/template/flash.py without a probe: golden argv for OpenOCD and STM32CubeProgrammer
(stand-in programs on PATH that record their argv), golden pyOCD API calls (mocks), the runner
chosen by -o flash_runner through the stm32 server, and the one-line errors."""

from __future__ import annotations

import io
import json
import os
import struct
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from helpers.flash_doubles import (
    BOARDS,
    DATA,
    F429,
    L4R5,
    QEMU,
    TEXT,
    PyOcdMocks,
    arm_elf,
    fake_probe,
    stm32_handler,
)

from project_api.errors import FlashError, MissingProgramError
from project_api.template import flash


@pytest.fixture
def image(tmp_path: Path) -> Path:
    return arm_elf(tmp_path / "build" / "firmware.elf",
                   [(0x08000000, TEXT), (0x08000000 + len(TEXT), DATA)])


STAND_IN = """#!{python}
import json, os, sys
with open(os.environ["ARGV_LOG"], "a") as log:
    log.write(json.dumps(sys.argv) + "\\n")
if sys.argv[1:] == ["--version"]:
    sys.stderr.write(os.environ.get("STAND_IN_VERSION", "") + "\\n")
    sys.exit(0)
sys.stdout.write(os.environ.get("STAND_IN_OUTPUT", "") + "\\n")
sys.exit(int(os.environ.get("STAND_IN_STATUS", "0")))
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Put recording stand-ins for openocd and STM32_Programmer_CLI first on PATH; returns a
    function giving the argv lists they were called with."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("openocd", "STM32_Programmer_CLI"):
        program = bin_dir / name
        program.write_text(STAND_IN.format(python=sys.executable))
        program.chmod(0o755)
    log = tmp_path / "argv.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ARGV_LOG", str(log))
    monkeypatch.setenv("STAND_IN_VERSION", "Open On-Chip Debugger 0.12.0")

    def calls() -> list[list[str]]:
        lines = log.read_text().splitlines() if log.exists() else []
        return [json.loads(line) for line in lines]
    calls.bin_dir = bin_dir  # type: ignore[attr-defined]
    return calls


def _progress() -> tuple[list[float], flash.Progress]:
    seen: list[float] = []
    return seen, seen.append


# --- OpenOCD and STM32CubeProgrammer: golden argv ---------------------------------------------


@pytest.mark.parametrize("version, serial_number, serial_args", [
    ("Open On-Chip Debugger 0.12.0+dev-00001", "066DFF495351", ["-c", "adapter serial 066DFF495351"]),
    ("Open On-Chip Debugger 0.10.0", "066DFF495351", ["-c", "hla_serial 066DFF495351"]),
    ("Open On-Chip Debugger 0.12.0", None, []),
])
def test_openocd_golden_argv(stand_in, image: Path, monkeypatch: pytest.MonkeyPatch,
                             version: str, serial_number: str | None,
                             serial_args: list[str]) -> None:
    monkeypatch.setenv("STAND_IN_VERSION", version)
    seen, progress = _progress()
    flash.OpenOcdRunner().flash(image, F429, serial_number, progress)
    openocd = str(stand_in.bin_dir / "openocd")
    assert stand_in() == [
        [openocd, "--version"],
        [openocd, "-f", "interface/stlink.cfg", *serial_args, "-f", "target/stm32f4x.cfg",
         "-c", f"program {{{image.name}}} verify reset exit"],  # run in image.parent
    ]
    assert seen == [0.0, 1.0]
    assert (image.parent / flash.FLASH_LOG).read_text().startswith(f"$ {openocd} -f ")


def test_openocd_argv_through_the_call_wrapper(image: Path) -> None:
    """West's way: patch the runner's one call wrapper (no program on PATH but the tool)."""
    with mock.patch("shutil.which", return_value="/usr/bin/openocd"), \
            mock.patch.object(flash.OpenOcdRunner, "output",
                              return_value="Open On-Chip Debugger 0.11.0\n") as output, \
            mock.patch.object(flash.OpenOcdRunner, "check_call") as call:
        flash.OpenOcdRunner().flash(image, F429, "0670FF", lambda f: None)
    output.assert_called_once_with(["/usr/bin/openocd", "--version"])
    call.assert_called_once_with(
        ["/usr/bin/openocd", "-f", "interface/stlink.cfg", "-c", "adapter serial 0670FF", "-f",
         "target/stm32f4x.cfg", "-c", f"program {{{image.name}}} verify reset exit"],
        image.parent / "flash.log", cwd=image.parent)


def test_openocd_target_per_family(stand_in, image: Path) -> None:
    flash.OpenOcdRunner().flash(image, {"name": "nucleo_f767zi", **BOARDS["nucleo_f767zi"]},
                                None, lambda f: None)
    flash.OpenOcdRunner().flash(image, L4R5, None, lambda f: None)
    targets = [argv[argv.index("-f", 2) + 1] for argv in stand_in() if "-f" in argv]
    assert targets == ["target/stm32f7x.cfg", "target/stm32l4x.cfg"]


def test_the_probe_and_the_image_format_are_the_boards_data(image: Path, tmp_path: Path) -> None:
    """Nothing in the runners knows ST-LINK or Arm: a board whose boards.yaml entry names
    another probe script and another CPU gets them (they used to be hard-coded)."""
    other = {**F429, "name": "x86_board", "openocd_interface": "interface/cmsis-dap.cfg",
             "elf": {"machine": "EM_386", "bits": 32}, "probe": "CMSIS-DAP"}
    with mock.patch("shutil.which", return_value="/usr/bin/openocd"), \
            mock.patch.object(flash.OpenOcdRunner, "output", return_value=""), \
            mock.patch.object(flash.OpenOcdRunner, "check_call") as call:
        flash.OpenOcdRunner().flash(image, other, None, lambda f: None)
    assert call.call_args.args[0][1:3] == ["-f", "interface/cmsis-dap.cfg"]
    assert flash.check_firmware(image, F429) == image.read_bytes()
    with pytest.raises(FlashError, match=r"is an ELF file for EM_ARM, not EM_386"):
        flash.check_firmware(image, other)
    with pytest.raises(FlashError, match=r"is a 32-bit ELF file, not a 64-bit image for x86_64"):
        flash.check_firmware(image, {"name": "x86_64", "elf": {"bits": 64}})
    with PyOcdMocks([]), pytest.raises(FlashError, match="connect the board's CMSIS-DAP by USB"):
        flash.PyOcdRunner().flash(image, other, None, lambda f: None)


@pytest.mark.parametrize("serial_number, connect", [
    ("066DFF495351", ["port=SWD", "sn=066DFF495351"]),
    (None, ["port=SWD"]),
])
def test_cubeprogrammer_golden_argv(stand_in, image: Path, serial_number: str | None,
                                    connect: list[str]) -> None:
    seen, progress = _progress()
    flash.CubeProgrammerRunner().flash(image, F429, serial_number, progress)
    cli = str(stand_in.bin_dir / "STM32_Programmer_CLI")
    assert stand_in() == [[cli, "--connect", *connect, "--write", str(image), "--verify", "-rst"]]
    assert seen == [0.0, 1.0]


def test_tool_failure_names_its_error_line_and_log(stand_in, image: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_STATUS", "1")
    monkeypatch.setenv("STAND_IN_OUTPUT", "Info : clock speed 1800 kHz\n"
                                          "Error: open failed\nin procedure 'program'")
    with pytest.raises(FlashError) as info:
        flash.OpenOcdRunner().flash(image, F429, None, lambda f: None)
    log = image.parent / flash.FLASH_LOG
    assert str(info.value) == f"flash failed (openocd): Error: open failed; full log: {log}"
    assert "in procedure 'program'" in log.read_text()
    monkeypatch.setenv("STAND_IN_OUTPUT", "nothing useful")
    with pytest.raises(FlashError, match=r"\(stm32cubeprogrammer\): STM32_Programmer_CLI exited "
                                         r"with status 1; full log"):
        flash.CubeProgrammerRunner().flash(image, F429, None, lambda f: None)


@pytest.mark.parametrize("runner, program, hint", [
    (flash.OpenOcdRunner, "openocd", "apt-get install openocd"),
    (flash.CubeProgrammerRunner, "STM32_Programmer_CLI", "STM32CubeProgrammer"),
])
def test_missing_tool(tmp_path: Path, image: Path, monkeypatch: pytest.MonkeyPatch,
                      runner: type[flash.FlashRunner], program: str, hint: str) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert not runner.available()
    with pytest.raises(MissingProgramError) as info:
        runner().flash(image, F429, None, lambda f: None)
    message = str(info.value)
    assert f"'{program}' is not installed" in message and hint in message
    assert "\n" not in message


def test_missing_pyocd(image: Path) -> None:
    with mock.patch("importlib.util.find_spec", return_value=None):
        assert not flash.PyOcdRunner.available()
        with pytest.raises(MissingProgramError, match="pyOCD is not installed; install it with "
                                                      "'pip install pyocd'"):
            flash.PyOcdRunner().flash(image, F429, None, lambda f: None)


# --- pyOCD: golden API calls --------------------------------------------------------------------


def test_pyocd_golden_calls(image: Path) -> None:
    probe = fake_probe("066DFF495351848777254629")
    seen, progress = _progress()
    with PyOcdMocks([probe]) as m:
        flash.PyOcdRunner().flash(image, F429, "066DFF495351", progress)
    m.list_mock.assert_called_once_with(blocking=False, unique_id="066DFF495351",
                                        print_wait_message=False)
    m.session_cls.assert_called_once_with(probe, options={"target_override": "stm32f429xi"})
    m.programmer_cls.assert_called_once_with(m.session, progress=progress)
    m.programmer_cls.return_value.program.assert_called_once_with(str(image), file_format="elf")
    assert m.session.target.read_memory_block8.call_args_list == [
        mock.call(0x08000000, len(TEXT)), mock.call(0x08000000 + len(TEXT), len(DATA))]
    m.session.target.reset.assert_called_once_with()
    assert [c[0] for c in m.session.mock_calls if c[0] in ("__enter__", "__exit__")] == \
        ["__enter__", "__exit__"]


def test_pyocd_every_board_target_is_known_or_needs_a_pack(image: Path) -> None:
    """Built-in targets go straight through; nucleo_l4r5zi's needs its CMSIS pack."""
    from pyocd.target import TARGET

    for name, board in BOARDS.items():
        if board["emulated"]:
            continue
        if name == "nucleo_l4r5zi":
            assert board["pyocd_target"] not in TARGET
            continue
        options = flash.PyOcdRunner().session_options(board)
        assert options == {"target_override": board["pyocd_target"]}


def test_board_without_a_target_for_the_runner(image: Path) -> None:
    bare = {k: v for k, v in F429.items() if k not in ("pyocd_target", "openocd_target")}
    for runner, key in ((flash.PyOcdRunner, "pyocd_target"), (flash.OpenOcdRunner, "openocd_target")):
        with mock.patch.object(runner, "output", return_value=""), \
                mock.patch("shutil.which", return_value="/usr/bin/openocd"), \
                pytest.raises(FlashError) as info:
            runner().flash(image, bare, None, lambda f: None)
        assert str(info.value) == (f"board nucleo_f429zi has no {key}; add it to the board's "
                                   "entry or use another flash_runner")


def test_pyocd_pack(image: Path, tmp_path: Path) -> None:
    with mock.patch.object(flash, "_managed_pack_targets", return_value=set()):
        with pytest.raises(FlashError) as info:
            flash.PyOcdRunner().flash(image, L4R5, None, lambda f: None)
    assert str(info.value) == ("pyOCD has no built-in target stm32l4r5zitx; pass -o "
                               "pyocd_pack=PATH to its CMSIS pack, or run 'pyocd pack install "
                               "stm32l4r5zitx'")
    with pytest.raises(FlashError, match="pyocd_pack .*missing.pack is not a file"):
        flash.PyOcdRunner({"pyocd_pack": str(tmp_path / "missing.pack")}).flash(
            image, L4R5, None, lambda f: None)
    pack = tmp_path / "Keil.STM32L4xx_DFP.2.6.1.pack"
    pack.write_bytes(b"PK")
    probe = fake_probe("0670FF")
    with PyOcdMocks([probe]) as m:
        flash.PyOcdRunner({"pyocd_pack": str(pack)}).flash(image, L4R5, None, lambda f: None)
    m.session_cls.assert_called_once_with(
        probe, options={"target_override": "stm32l4r5zitx", "pack": str(pack)})


def test_pyocd_no_probe_and_several_probes(image: Path) -> None:
    with PyOcdMocks([]) as m, pytest.raises(FlashError) as info:
        flash.PyOcdRunner().flash(image, F429, None, lambda f: None)
    assert str(info.value) == ("no debug probe found; connect the board's ST-LINK by USB "
                               "('pyocd list' shows the probes)")
    m.session_cls.assert_not_called()
    with PyOcdMocks([]), pytest.raises(FlashError, match="^no debug probe found with serial "
                                                         "number ABC; "):
        flash.PyOcdRunner().flash(image, F429, "ABC", lambda f: None)
    two = [fake_probe("0670FF11", "NUCLEO-F429ZI"), fake_probe("066DFF22", "DISCO-L475VG-IOT01A")]
    with PyOcdMocks(two) as m, pytest.raises(FlashError) as info:
        flash.PyOcdRunner().flash(image, F429, None, lambda f: None)
    assert str(info.value) == ("2 debug probes found: 0670FF11 (NUCLEO-F429ZI), 066DFF22 "
                               "(DISCO-L475VG-IOT01A); pick one with -o serial_number=<unique id>")
    m.session_cls.assert_not_called()


def test_pyocd_verify_mismatch_and_probe_errors(image: Path) -> None:
    stale = {0x08000000: TEXT[:-1] + b"\x00", 0x08000000 + len(TEXT): DATA}
    with PyOcdMocks([fake_probe("0670FF")], stale) as m, pytest.raises(FlashError) as info:
        flash.PyOcdRunner().flash(image, F429, None, lambda f: None)
    assert str(info.value).startswith("verify failed: the flash at 0x08000000 differs from ")
    m.session.target.reset.assert_not_called()
    from pyocd.core.exceptions import ProbeError

    with PyOcdMocks([fake_probe("0670FF")]) as m, pytest.raises(FlashError) as info:
        m.programmer_cls.return_value.program.side_effect = ProbeError("USB transfer failed")
        flash.PyOcdRunner().flash(image, F429, None, lambda f: None)
    assert str(info.value) == ("flash failed (pyocd): USB transfer failed; check the probe's USB "
                               "cable and that no other debugger holds it")
    with PyOcdMocks([fake_probe("0670FF")]) as m, pytest.raises(FlashError, match="^flash failed "
                                                            r"\(pyocd\): \[Errno 16\] busy; "):
        m.session.__enter__.side_effect = OSError(16, "busy")  # libusb: the probe is held
        flash.PyOcdRunner().flash(image, F429, None, lambda f: None)


# --- reset through the probe (open_transport, before reopening a board's link) ------------------


@pytest.mark.parametrize("version, serial_number, serial_args", [
    ("Open On-Chip Debugger 0.12.0", "066DFF495351", ["-c", "adapter serial 066DFF495351"]),
    ("Open On-Chip Debugger 0.10.0", "066DFF495351", ["-c", "hla_serial 066DFF495351"]),
    ("Open On-Chip Debugger 0.12.0", None, []),
])
def test_openocd_reset_golden_argv(stand_in, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   version: str, serial_number: str | None,
                                   serial_args: list[str]) -> None:
    """The board's scripts, then init, reset run, shutdown: nothing is written."""
    monkeypatch.setenv("STAND_IN_VERSION", version)
    log = tmp_path / "build" / flash.RESET_LOG
    flash.OpenOcdRunner().reset(F429, serial_number, log)
    openocd = str(stand_in.bin_dir / "openocd")
    assert stand_in() == [
        [openocd, "--version"],
        [openocd, "-f", "interface/stlink.cfg", *serial_args, "-f", "target/stm32f4x.cfg",
         "-c", "init", "-c", "reset run", "-c", "shutdown"],
    ]
    assert log.read_text().startswith(f"$ {openocd} -f interface/stlink.cfg ")


@pytest.mark.parametrize("serial_number, connect", [
    ("066DFF495351", ["port=SWD", "sn=066DFF495351"]),
    (None, ["port=SWD"]),
])
def test_cubeprogrammer_reset_golden_argv(stand_in, serial_number: str | None,
                                          connect: list[str]) -> None:
    flash.CubeProgrammerRunner().reset(F429, serial_number)  # no log file: only log records
    cli = str(stand_in.bin_dir / "STM32_Programmer_CLI")
    assert stand_in() == [[cli, "--connect", *connect, "-rst"]]


def test_reset_failure_is_one_line_naming_the_step(stand_in, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_STATUS", "1")
    monkeypatch.setenv("STAND_IN_OUTPUT", "Error: open failed\nin procedure 'init'")
    log = tmp_path / flash.RESET_LOG
    with pytest.raises(FlashError) as info:
        flash.OpenOcdRunner().reset(F429, None, log)
    assert str(info.value) == f"reset failed (openocd): Error: open failed; full log: {log}"
    monkeypatch.setenv("STAND_IN_OUTPUT", "ST-LINK error (DEV_USB_COMM_ERR)")
    with pytest.raises(FlashError) as info:
        flash.CubeProgrammerRunner().reset(F429, "0670FF")
    assert str(info.value) == "reset failed (stm32cubeprogrammer): ST-LINK error " \
                              "(DEV_USB_COMM_ERR)"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(MissingProgramError, match="'openocd' is not installed"):
        flash.OpenOcdRunner().reset(F429, None)


def test_pyocd_reset_golden_calls() -> None:
    """A session on the probe and target.reset(), as 'pyocd reset' does; nothing programmed,
    nothing read back."""
    probe = fake_probe("066DFF495351848777254629")
    with PyOcdMocks([probe]) as m:
        flash.PyOcdRunner().reset(F429, "066DFF495351")
    m.list_mock.assert_called_once_with(blocking=False, unique_id="066DFF495351",
                                        print_wait_message=False)
    m.session_cls.assert_called_once_with(probe, options={"target_override": "stm32f429xi"})
    m.session.target.reset.assert_called_once_with()
    m.programmer_cls.assert_not_called()
    m.session.target.read_memory_block8.assert_not_called()
    assert [c[0] for c in m.session.mock_calls if c[0] in ("__enter__", "__exit__")] == \
        ["__enter__", "__exit__"]


def test_pyocd_reset_errors(tmp_path: Path) -> None:
    with PyOcdMocks([]) as m, pytest.raises(FlashError) as info:
        flash.PyOcdRunner().reset(F429, None)
    assert str(info.value) == ("no debug probe found; connect the board's ST-LINK by USB "
                               "('pyocd list' shows the probes)")
    m.session_cls.assert_not_called()
    with PyOcdMocks([fake_probe("0670FF")]) as m, pytest.raises(FlashError) as info:
        m.session.__enter__.side_effect = OSError(16, "busy")  # libusb: the probe is held
        flash.PyOcdRunner().reset(F429, None)
    assert str(info.value) == ("reset failed (pyocd): [Errno 16] busy; check the probe's USB "
                               "cable and that no other debugger holds it")
    pack = tmp_path / "Keil.STM32L4xx_DFP.2.6.1.pack"
    pack.write_bytes(b"PK")
    with PyOcdMocks([fake_probe("0670FF")]) as m:
        flash.PyOcdRunner({"pyocd_pack": str(pack)}).reset(L4R5, None)
    m.session_cls.assert_called_once_with(
        m.list_mock.return_value[0], options={"target_override": "stm32l4r5zitx",
                                              "pack": str(pack)})


def test_qemu_runner_has_nothing_to_reset(stand_in) -> None:
    flash.QemuRunner().reset(QEMU, None)
    assert stand_in() == []


# --- QEMU, choice of runner, progress ---------------------------------------------------------------


def test_qemu_runner_checks_the_whole_image(image: Path) -> None:
    """Issue #17, item 4: the image is read as an ELF file (header, program headers, every
    loadable segment, the entry point), not only its magic; nothing is written beside it."""
    seen, progress = _progress()
    before = sorted(p.name for p in image.parent.iterdir())
    flash.QemuRunner().flash(image, QEMU, None, progress)
    assert seen == [1.0]
    assert sorted(p.name for p in image.parent.iterdir()) == before  # no flashed.json
    data = image.read_bytes()
    cases = {
        "header.elf": (data[:100], r"is truncated: its program header table ends at byte 116, "
                                   r"the file holds 100; rebuild it with 'project-api build'"),
        "segment.elf": (data[:-10], rf"is truncated: its segment at 0x0800{len(TEXT):04x} ends "
                                    rf"at byte {len(data)}, the file holds {len(data) - 10}"),
        "x86.elf": (data[:18] + b"\x3e\x00" + data[20:], r"is an ELF file for EM_X86_64, not "
                                                         r"EM_ARM"),
        "entry.elf": (data[:24] + struct.pack("<I", 0x20000001) + data[28:],
                      r"is damaged: its entry point 0x20000001 lies in no loaded segment"),
        "magic.elf": (b"\x00" + data[1:], r"is not an ELF file"),
    }
    for name, (content, message) in cases.items():
        bad = image.parent / name
        bad.write_bytes(content)
        with pytest.raises(FlashError, match=rf"{name} {message}"):
            flash.QemuRunner().flash(bad, QEMU, None, progress)


def test_runner_choice() -> None:
    assert type(flash.runner_for(None, QEMU)) is flash.QemuRunner
    assert type(flash.runner_for(None, F429)) is flash.PyOcdRunner
    assert type(flash.runner_for("openocd", F429)) is flash.OpenOcdRunner
    assert type(flash.runner_for("stm32cubeprogrammer", F429)) is flash.CubeProgrammerRunner
    assert flash.runner_for("pyocd", F429, {"pyocd_pack": "x.pack"}).options["pyocd_pack"] == \
        "x.pack"
    with pytest.raises(FlashError, match=r"^flash_runner=qemu cannot flash a real board "
                                         r"\(nucleo_f429zi\); use flash_runner=pyocd$"):
        flash.runner_for("qemu", F429)
    with pytest.raises(FlashError, match=r"^flash_runner=openocd cannot flash an emulated board "
                                         r"\(qemu_netduinoplus2\); use flash_runner=qemu$"):
        flash.runner_for("openocd", QEMU)
    with pytest.raises(FlashError, match="unknown flash_runner 'jlink'; pick one of pyocd, "
                                         "openocd, stm32cubeprogrammer, esptool, qemu"):
        flash.runner_for("jlink", F429)
    caps = {name: cls.CAPS for name, cls in flash.RUNNERS.items()}
    assert all(c.serial_number and c.verify and c.reset for n, c in caps.items() if n != "qemu")
    assert not caps["qemu"].hardware


def test_progress_report_without_a_terminal(caplog: pytest.LogCaptureFixture) -> None:
    class NotATty:
        def isatty(self) -> bool:
            return False
    with caplog.at_level("INFO", logger=flash.__name__):
        with flash.progress_report("flash b", NotATty()) as progress:  # type: ignore[arg-type]
            for f in (0.0, 0.1, 0.3, 0.31, 0.8, 1.0, 0.0, 0.5, 1.0):
                progress(f)
    assert [r.getMessage() for r in caplog.records] == ["flash b: 25%", "flash b: 75%",
                                                         "flash b: 100%"]


def test_progress_report_on_a_terminal() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True
    out = Tty()
    with flash.progress_report("flash b", out) as progress:
        for f in (0.0, 0.5, 1.0, 0.0, 1.0):
            progress(f)
    assert "flash b: 100%|" in out.getvalue()


# --- through the stm32 server ----------------------------------------------------------------


def test_server_flash_runner_option(stand_in, image: Path) -> None:
    project = image.parent.parent
    handler = stm32_handler(project, "nucleo_f429zi")
    handler.flash({"flash_runner": "stm32cubeprogrammer", "serial_number": "0670FF"})
    cli = str(stand_in.bin_dir / "STM32_Programmer_CLI")
    assert stand_in() == [[cli, "--connect", "port=SWD", "sn=0670FF", "--write", str(image),
                           "--verify", "-rst"]]
    handler.flash({"flash_runner": "openocd"})
    assert stand_in()[-1][-1] == f"program {{{image.name}}} verify reset exit"
    with PyOcdMocks([fake_probe("0670FF")]) as m:
        handler.flash({"serial_number": "0670FF"})  # pyocd by default on hardware
    m.list_mock.assert_called_once_with(blocking=False, unique_id="0670FF",
                                        print_wait_message=False)
    m.programmer_cls.return_value.program.assert_called_once_with(str(image), file_format="elf")
    with pytest.raises(FlashError, match="flash_runner=qemu cannot flash a real board"):
        handler.flash({"flash_runner": "qemu"})


def test_server_flash_on_emulated_board_checks(image: Path) -> None:
    handler = stm32_handler(image.parent.parent, "qemu_netduinoplus2")
    handler.flash({})
    assert not (image.parent / "flashed.json").exists()
    with pytest.raises(FlashError, match="cannot flash an emulated board"):
        handler.flash({"flash_runner": "pyocd"})


def test_cli_flash_with_runner_options(stand_in, tmp_path: Path, models_dir: Path) -> None:
    """``project-api flash DIR -o flash_runner=... -o serial_number=...`` on a generated
    nucleo_f429zi project: the options reach the server's flash step, typed and scoped."""
    import subprocess

    from project_api.api.project import generate_project
    from project_api.emit import emit

    mlf = emit(models_dir / "hello_world_int8.tflite", tmp_path / "hello.tar", name="default")
    generate_project("stm32", mlf.path, tmp_path / "prj", {"board": "nucleo_f429zi"}).close()
    elf = arm_elf(tmp_path / "prj" / "build" / "firmware.elf", [(0x08000000, TEXT)])
    out = subprocess.run([sys.executable, "-m", "project_api", "flash", str(tmp_path / "prj"),
                          "-o", "flash_runner=stm32cubeprogrammer", "-o", "serial_number=0001"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    cli = str(stand_in.bin_dir / "STM32_Programmer_CLI")
    assert stand_in() == [[cli, "--connect", "port=SWD", "sn=0001", "--write", str(elf),
                           "--verify", "-rst"]]
    out = subprocess.run([sys.executable, "-m", "project_api", "flash", str(tmp_path / "prj"),
                          "-o", "flash_runner=qemu"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1].endswith(
        "flash_runner=qemu cannot flash a real board (nucleo_f429zi); use flash_runner=pyocd")



# --- through the stm32 server: a reopen resets a real board first ------------------------------

NUCLEO_SN = "0670FF495351848777254629"


def _nucleo(tmp_path: Path, events: list[str]) -> tuple[Any, Any]:
    """The stm32 server on a nucleo_f429zi project, and comports() patched to list its ST-LINK's
    virtual COM port as ``loop://`` (a pyserial URL the UART opens), recording each lookup."""
    from helpers.serial_ports import ST, port

    tmp_path.mkdir(parents=True, exist_ok=True)
    handler = stm32_handler(tmp_path, "nucleo_f429zi")
    listed = port("loop://", *ST, NUCLEO_SN, "STM32 STLink")

    def comports() -> list[Any]:
        events.append("port lookup")
        return [listed]
    return handler, mock.patch("serial.tools.list_ports.comports", side_effect=comports)


def test_server_reopen_resets_the_real_board_once(tmp_path: Path) -> None:
    """Issue 21: the first open_transport of a server resets nothing; the next one (the client's
    recovery: close_transport, open_transport) resets the board through pyOCD, after the old
    link is closed and before the port is looked up and opened again."""
    events: list[str] = []
    handler, ports = _nucleo(tmp_path, events)
    with ports, PyOcdMocks([fake_probe(NUCLEO_SN)]) as m:
        m.session.target.reset.side_effect = lambda: events.append("reset")
        reply = handler.open_transport({})
        assert reply["endpoint"] == {"type": "serial", "port": "loop://", "baudrate": 115200}
        assert events == ["port lookup"]
        m.session_cls.assert_not_called()
        handler.close_transport()
        handler.open_transport({})
        assert events == ["port lookup", "reset", "port lookup"]
        m.session.target.reset.assert_called_once_with()
        m.session_cls.assert_called_once_with(m.list_mock.return_value[0],
                                              options={"target_override": "stm32f429xi"})
        m.programmer_cls.assert_not_called()
        handler.close_transport()
    assert events.count("reset") == 1


def test_server_reset_takes_the_runner_options_of_open_transport(stand_in,
                                                                 tmp_path: Path) -> None:
    """flash_runner and serial_number given to open_transport pick the tool and the probe of the
    reset; its output goes to build/reset.log."""
    events: list[str] = []
    handler, ports = _nucleo(tmp_path, events)
    openocd = str(stand_in.bin_dir / "openocd")
    cli = str(stand_in.bin_dir / "STM32_Programmer_CLI")
    with ports:
        handler.open_transport({"flash_runner": "openocd", "serial_number": "0670FF"})
        assert stand_in() == []
        handler.open_transport({"flash_runner": "openocd", "serial_number": "0670FF"})
        assert stand_in()[1:] == [[openocd, "-f", "interface/stlink.cfg", "-c",
                                   "adapter serial 0670FF", "-f", "target/stm32f4x.cfg", "-c",
                                   "init", "-c", "reset run", "-c", "shutdown"]]
        assert (tmp_path / "build" / flash.RESET_LOG).read_text().startswith(f"$ {openocd} ")
        handler.close_transport()
        handler.open_transport({"flash_runner": "stm32cubeprogrammer"})
        assert stand_in()[-1] == [cli, "--connect", "port=SWD", "-rst"]
        handler.close_transport()


def test_server_failed_reset_is_one_warning_and_the_link_opens(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    events: list[str] = []
    handler, ports = _nucleo(tmp_path, events)
    with ports, PyOcdMocks([]), caplog.at_level("WARNING"):
        handler.open_transport({})
        handler.close_transport()
        reply = handler.open_transport({})
        handler.close_transport()
    assert reply["endpoint"]["port"] == "loop://"
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == ["open_transport: could not reset the board before reopening its link "
                        "(no debug probe found; connect the board's ST-LINK by USB ('pyocd "
                        "list' shows the probes)); opening it anyway"]
    assert events == ["port lookup", "port lookup"]


def test_server_resets_no_emulated_board_and_no_remote_link(tmp_path: Path) -> None:
    """QEMU restarts from the image with its link; a serial_url or a labgrid place has no local
    probe: no probe is even looked for."""
    events: list[str] = []
    handler, ports = _nucleo(tmp_path / "nucleo", events)
    values = handler.options_for("open_transport", {})
    with ports, PyOcdMocks([fake_probe(NUCLEO_SN)]) as m:
        for _ in range(2):
            handler.open_transport({"serial_url": "loop://"})
        handler.close_transport()
        handler.do_reset({**values, "labgrid_place": "nucleo-1"})
        (tmp_path / "qemu").mkdir()
        emulated = stm32_handler(tmp_path / "qemu", "qemu_netduinoplus2")
        emulated.do_reset(emulated.options_for("open_transport", {}))
        m.list_mock.assert_not_called()
        m.session_cls.assert_not_called()
    assert events == []

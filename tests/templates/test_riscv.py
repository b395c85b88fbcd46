"""riscv template (#34) on QEMU sifive_e (FE310, rv32imac, 16 KiB RAM) and virt (rv32imafc,
NS16550): the shared models host-driven, each output equal to TFLite Micro's; validate of 200
micro_speech samples exact on the FE310; recovery when the emulator is killed mid-validate;
per-operator cycles from mcycle; standalone (ai_ API) and mlperftiny firmware; the real boards'
firmware builds and their flash runners' command lines; and the one-line errors of a missing
toolchain or QEMU. Every firmware is built once per session; QEMU boots are shared."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from ai_api_helpers import check_against_tflm, hex_of, parse_lines
from conftest import path_with_only, require_tool
from fault_proxy import KillAfter

from project_api.api.project import GeneratedProject, generate_project
from project_api.archive import mlf as mlf_lib
from project_api.emit import emit
from project_api.emit.reference import run_tflm
from project_api.emit.target import for_cpu
from project_api.errors import MissingProgramError, ProjectAPIError
from project_api.micro import Session
from project_api.micro.recovery import RetryPolicy
from project_api.system.paths import template_dir
from project_api.template import flash
from project_api.template.boards import read_boards
from project_api.tools.profile import ICOUNT_INSTRUCTIONS_PER_SECOND, profile_session
from project_api.tools.validate import validate

BOARDS = read_boards(template_dir("riscv") / "boards.yaml")
QEMU = "qemu-system-riscv32"
#: The shared models each emulated board runs host-driven: all of them on virt; on the
#: FE310's 16 KiB the ones whose activations, I/O and the RPC server fit (the rest do not:
#: test_models_that_do_not_fit_the_fe310_say_so).
ON_BOARD = {
    "qemu_sifive_e": ("hello_world_int8", "micro_speech_int8"),
    "qemu_virt_rv32": ("hello_world_int8", "hello_world_float", "micro_speech_int8",
                       "kws_ref_model_int8", "ad01_int8", "ic_resnet8_int8", "vww_96_int8"),
}
# kws_ref_model_float32 is left out: TFLite Micro itself cannot run it (a hybrid CONV_2D), so
# there is no reference to hold it to.
#: Room for the largest shared model on virt (the template's defaults suit the FE310).
VIRT_OPTIONS = {"workspace_size_bytes": 256 * 1024, "max_packet_size_bytes": 4096,
                "stack_size_bytes": 8192}
_OURS: list[str] = []


def qemu_pids() -> set[int]:
    """qemu-system-riscv32 processes of this test session (by their command line: the
    process name is cut to 15 characters, which pgrep -x would compare)."""
    out = subprocess.run(["pgrep", "-a", "-f", QEMU], capture_output=True, text=True)
    return {int(line.split()[0]) for line in out.stdout.splitlines()
            if line.split()[1].endswith(QEMU) and all(mark in line for mark in _OURS)}


@pytest.fixture(scope="module", autouse=True)
def riscv_tools_and_no_qemu_left(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    for tool in ("make", "riscv64-unknown-elf-gcc", QEMU, "pgrep"):
        require_tool(tool)
    _OURS[:] = [str(tmp_path_factory.getbasetemp())]
    before = qemu_pids()
    yield
    assert not qemu_pids() - before, f"a {QEMU} process was left running"


def _emit(models_dir: Path, name: str, board: str, root: Path, **kw) -> mlf_lib.ModelLibrary:
    return emit(models_dir / f"{name}.tflite", root / f"{name}-{board}.tar", name="default",
                target=for_cpu(BOARDS[board]["cpu"]), **kw)


def _build(archive: Path, where: Path, board: str, **options):
    extra = VIRT_OPTIONS if board == "qemu_virt_rv32" else {}
    return generate_project("riscv", archive, where, {"board": board, "warning_as_error": True,
                                                      **extra, **options}, build=True)


@pytest.fixture(scope="module")
def projects(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    root = tmp_path_factory.mktemp("riscv")
    built = {}
    try:
        for board, names in ON_BOARD.items():
            for name in names:
                emitted = _emit(models_dir, name, board, root)
                project = _build(emitted.path, root / f"{board}-{name}", board)
                built[board, name] = (project, models_dir / f"{name}.tflite", emitted)
                project.flash()
        yield built
    finally:
        for project, _, _ in built.values():
            project.close()


def _inputs(emitted, n: int, seed: int) -> np.ndarray:
    t = emitted.inputs[0]
    rng = np.random.default_rng(seed)
    if t.dtype == "int8":
        return rng.integers(-128, 127, (n, *t.shape), dtype=np.int8, endpoint=True)
    return rng.uniform(-1, 1, (n, *t.shape)).astype(t.dtype)


@pytest.mark.parametrize("board", list(ON_BOARD))
def test_shared_models_host_driven_equal_tflite_micro(projects: dict, board: str) -> None:
    """One session per firmware; each model's output byte-equal to TFLM's on a seeded input."""
    for name in ON_BOARD[board]:
        project, tflite, emitted = projects[board, name]
        x = _inputs(emitted, 1, seed=len(name))[0]
        with project.session() as session:
            model = session.model()
            model.set_input(0, x)
            model.run()
            got = model.get_output(0)
            seconds = session.time(model, number=1, repeat=2).results
        want = run_tflm(tflite.read_bytes(), [x])[0]
        assert got.tobytes() == want.tobytes(), (board, name)
        # -icount shift=0: mcycle counts instructions, so both rounds take the same time (but
        # for a UART interrupt's few instructions)
        assert min(seconds) > 0 and max(seconds) - min(seconds) <= 1e-3 * max(seconds)


def test_validate_200_micro_speech_samples_exact_on_the_fe310(projects: dict) -> None:
    project, tflite, emitted = projects["qemu_sifive_e", "micro_speech_int8"]
    xs = _inputs(emitted, 200, seed=34)
    report = validate(project, {emitted.inputs[0].name: xs}, tflite=tflite, litert=False,
                      number=0)
    (tflm,) = report.comparison("tflm").outputs
    assert report.samples == 200 and tflm.samples == 200
    assert tflm.exact == 1.0 and tflm.max_abs_int == 0.0, tflm


def test_emulator_killed_mid_validate_recovers(projects: dict) -> None:
    """QEMU is SIGKILLed mid-run: recovery starts it again and every output is TFLM's."""
    project, tflite, emitted = projects["qemu_sifive_e", "hello_world_int8"]
    info = mlf_lib.open_mlf(project.directory / "model").module()
    xs = _inputs(emitted, 60, seed=5)
    model_bytes = tflite.read_bytes()
    want = np.stack([run_tflm(model_bytes, [x])[0] for x in xs])
    before = qemu_pids()
    transport = KillAfter(project.transport(), lambda: qemu_pids() - before, after=100)
    transport.open()
    try:
        with Session(transport, timeout_sec=2.0, retry=RetryPolicy()) as session:
            report = validate(session, {info.inputs[0].name: xs}, module=info, number=0)
    finally:
        transport.close()
    assert transport.killed, "the emulator was never killed"
    np.testing.assert_array_equal(report.outputs[0].reshape(want.shape), want)
    assert report.recovery is not None and report.recovery.restarts >= 1
    assert not report.recovery.failed_samples


def test_profile_cycles_per_operator_from_mcycle(models_dir: Path, tmp_path: Path) -> None:
    emitted = _emit(models_dir, "micro_speech_int8", "qemu_sifive_e", tmp_path, profile=True)
    with _build(emitted.path, tmp_path / "prof", "qemu_sifive_e") as project:
        project.flash()
        with mlf_lib.open_mlf(project.directory / "model") as lib:
            module, metadata = lib.module(), lib.metadata
        x = _inputs(emitted, 1, seed=3)[0]
        with project.session() as session:
            report = profile_session(session, module, metadata, [x], repeat=2, number=1,
                                     instructions_rate=ICOUNT_INSTRUCTIONS_PER_SECOND)
    want = run_tflm((models_dir / "micro_speech_int8.tflite").read_bytes(), [x])[0]
    assert report.outputs[0].tobytes() == want.tobytes()
    ops = {o.op for o in report.ops}
    assert {"DEPTHWISE_CONV_2D", "FULLY_CONNECTED"} <= ops, ops
    assert all(o.instructions > 0 for o in report.ops)
    assert 0 <= report.unattributed_seconds < 0.01 * report.whole_seconds


def _qemu_until_exit(elf: Path, board: str) -> subprocess.CompletedProcess:
    args = [str(a) for a in BOARDS[board]["emulator"]["args"]]
    return subprocess.run([QEMU, *args, "-monitor", "none", "-kernel", str(elf),
                           "-serial", "stdio"], capture_output=True, text=True, timeout=120)


def test_standalone_runs_every_model_equal_tflite_micro(models_dir: Path,
                                                        tmp_path: Path) -> None:
    emitted = _emit(models_dir, "micro_speech_int8", "qemu_sifive_e", tmp_path)
    with _build(emitted.path, tmp_path / "sa", "qemu_sifive_e", project_type="standalone",
                workspace_size_bytes=1024):
        pass
    run = _qemu_until_exit(tmp_path / "sa/build/firmware.elf", "qemu_sifive_e")
    lines = parse_lines(run.stdout)
    assert run.returncode == 0 and lines["done"] == ["0"], (run.stdout, run.stderr)
    check_against_tflm(models_dir / "micro_speech_int8.tflite", "int8", (1, 1960),
                       hex_of(lines["input"], "default"), hex_of(lines["output"], "default"))


def test_mlperftiny_accuracy_equals_tflite_micro(models_dir: Path, tmp_path: Path) -> None:
    from project_api.tools import mlperftiny as mt

    tflite = models_dir / "kws_ref_model_int8.tflite"
    emitted = _emit(models_dir, "kws_ref_model_int8", "qemu_virt_rv32", tmp_path)
    xs = _inputs(emitted, 6, seed=9)
    want = [run_tflm(tflite.read_bytes(), [x])[0] for x in xs]
    with _build(emitted.path, tmp_path / "mt", "qemu_virt_rv32",
                project_type="mlperftiny") as project:
        project.flash()
        transport = project.transport()
        transport.open()
        try:
            device = mt.Device(transport, timeout_sec=20.0)
            device.start()
            report = mt.accuracy(device, [mt.Sample(f"s{i}", 0, [x.tobytes()])
                                          for i, x in enumerate(xs)])
        finally:
            transport.close()
    assert report.ok and report.answered == list(range(len(xs)))
    assert len(report.scores) == len(xs)
    for got, w in zip(report.scores, want, strict=True):
        assert np.argmax(got) == np.argmax(w.reshape(-1))


@pytest.mark.parametrize("board", [b for b in BOARDS if not BOARDS[b]["emulated"]])
def test_real_boards_firmware_builds(models_dir: Path, tmp_path: Path, board: str) -> None:
    emitted = _emit(models_dir, "hello_world_int8", board, tmp_path)
    with _build(emitted.path, tmp_path / board, board):
        pass
    elf = tmp_path / board / "build/firmware.elf"
    flash.check_firmware(elf, {"name": board, **BOARDS[board]})
    head = (tmp_path / board / "build/firmware.bin").read_bytes()[:8]
    if BOARDS[board]["image"] == "esp32c3_direct_boot":
        assert head == bytes.fromhex("1d04dbae1d04dbae")  # the ROM's direct-boot magic, twice
    nm = subprocess.run(["riscv64-unknown-elf-nm", str(elf)], capture_output=True, text=True,
                        check=True).stdout
    assert " T _start" in nm and " T TVMCrtRpcServer_Feed" in nm


def test_flash_runners_command_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each real board's default runner, and the command line it runs (recorded, not run)."""
    image = tmp_path / "build" / "firmware.elf"
    image.parent.mkdir()
    image.write_bytes(b"\x7fELF")
    image.with_suffix(".bin").write_bytes(b"\x1d\x04\xdb\xae" * 2)
    calls: list[list[str]] = []
    monkeypatch.setattr(flash.FlashRunner, "require", lambda self: self.PROGRAM)
    monkeypatch.setattr(flash.FlashRunner, "output",
                        lambda self, argv: "Open On-Chip Debugger 0.12.0")
    monkeypatch.setattr(flash.FlashRunner, "check_call",
                        lambda self, argv, log, cwd=None, step="flash": calls.append(list(argv)))

    def flashed(board: str, serial_number: str | None = None, **options) -> list[str]:
        entry = {"name": board, **BOARDS[board]}
        runner = flash.runner_for(None, entry, options)
        calls.clear()
        runner.flash(image, entry, serial_number, lambda f: None)
        return calls[-1]

    assert flashed("hifive1_revb", "000979001234") == [
        "openocd", "-f", "interface/jlink.cfg", "-c", "adapter serial 000979001234",
        "-f", "board/sifive-hifive1-revb.cfg", "-c", "program {firmware.elf} verify reset exit"]
    assert flashed("longan_nano") == [
        "openocd", "-f", "interface/ftdi/sipeed-rv-debugger.cfg", "-f", "target/gd32vf103.cfg",
        "-c", "program {firmware.elf} verify reset exit"]
    assert flashed("esp32c3_devkitm", serial_port="/dev/ttyUSB3") == [
        "esptool.py", "--chip", "esp32c3", "--port", "/dev/ttyUSB3", "--after", "hard_reset",
        "write_flash", "0x0", str(image.with_suffix(".bin"))]
    entry = {"name": "esp32c3_devkitm", **BOARDS["esp32c3_devkitm"]}
    calls.clear()
    flash.runner_for(None, entry, {"serial_port": "/dev/ttyUSB3"}).reset(entry, None)
    assert calls == [["esptool.py", "--chip", "esp32c3", "--port", "/dev/ttyUSB3", "run"]]
    assert type(flash.runner_for(None, {"name": "q", **BOARDS["qemu_sifive_e"]})) is \
        flash.QemuRunner


def test_models_that_do_not_fit_the_fe310_say_so(models_dir: Path, tmp_path: Path) -> None:
    """analyze reports the fit against the board's 16 KiB, and the build's one line agrees."""
    out = subprocess.run([sys.executable, "-m", "project_api", "analyze",
                          str(models_dir / "kws_ref_model_int8.tflite"), "--template", "riscv",
                          "-o", "board=qemu_sifive_e"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stderr  # 1: it does not fit
    assert "fit on qemu_sifive_e" in out.stdout and "DOES NOT FIT" in out.stdout, out.stdout
    emitted = _emit(models_dir, "kws_ref_model_int8", "qemu_sifive_e", tmp_path)
    with pytest.raises(ProjectAPIError, match=r"the firmware does not fit qemu_sifive_e: RAM by "
                                              r"\d+ bytes of 16384"):
        _build(emitted.path, tmp_path / "kws", "qemu_sifive_e")


def test_missing_toolchain_and_qemu_name_the_debian_package(projects: dict,
                                                            tmp_path: Path) -> None:
    project, _, emitted = projects["qemu_sifive_e", "hello_world_int8"]
    with path_with_only(tmp_path / "bin"):
        with generate_project("riscv", emitted.path, tmp_path / "prj", {}) as fresh:
            with pytest.raises(MissingProgramError) as info:
                fresh.build()
        with GeneratedProject.from_directory(project.directory) as built:  # a server without QEMU
            with pytest.raises(ProjectAPIError) as no_qemu:
                with built.session():
                    pass
    assert "'riscv64-unknown-elf-gcc' is not installed" in str(info.value)
    assert "gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf" in str(info.value)
    assert len(str(info.value).splitlines()) == 1
    assert "apt-get install qemu-system-misc" in str(no_qemu.value), str(no_qemu.value)


def test_one_go_run_on_the_fe310_equals_tflite_micro(models_dir: Path, tmp_path: Path) -> None:
    """docs/riscv.md's one command: emit for the board's core, generate, build, boot QEMU's
    FE310 and run, the output checked against TFLite Micro; nothing left in the folder."""
    work = tmp_path / "cwd"
    work.mkdir()
    out = subprocess.run(
        [sys.executable, "-m", "project_api", "run", "--template", "riscv", "--model",
         str(models_dir / "micro_speech_int8.tflite"), "-o", "board=qemu_sifive_e", "--check",
         "--repeat", "1"],
        capture_output=True, text=True, timeout=600, cwd=work)
    assert out.returncode == 0, out.stderr
    assert "check output 0 against TFLite Micro: OK" in out.stdout, out.stdout
    assert list(work.iterdir()) == []

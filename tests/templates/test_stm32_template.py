"""stm32 template: generate and build for every board of boards.yaml; on the emulated STM32F405
(QEMU netduinoplus2) run models host-driven over the UART, bit-exact with TFLite Micro; one-line
errors; no QEMU left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from stm32_support import (  # noqa: F401  (the fixture is autouse)
    QEMU_BOARD,
    build_project,
    qemu_pids,
    stm32_tools_and_no_qemu_left,
)

from project_api.api.project import generate_project
from project_api.emit import emit
from project_api.emit.reference import run_tflm
from project_api.errors import ProjectAPIError
from project_api.system import paths
from project_api.template.boards import read_boards

BOARDS = read_boards(paths.template_dir("stm32") / "boards.yaml")


@pytest.fixture(scope="module")
def models(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    out = tmp_path_factory.mktemp("stm32_models")
    result = {}
    for name in ("hello_world_int8", "micro_speech_int8"):
        tflite = models_dir / f"{name}.tflite"
        result[name] = (tflite, emit(tflite, out / f"{name}.tar", name="default"))
    return result


def _project(models: dict, name: str, where: Path, board: str = QEMU_BOARD, **options):
    return build_project(models[name][1].path, where, board, **options)


@pytest.fixture(scope="module")
def qemu_projects(models: dict, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("stm32_qemu")
    projects = {name: _project(models, name, root / name) for name in models}
    yield projects
    for project in projects.values():
        project.close()


@pytest.mark.parametrize("board", [b for b in BOARDS if b != QEMU_BOARD])
def test_build_every_board(models: dict, tmp_path: Path, board: str) -> None:
    with _project(models, "hello_world_int8", tmp_path / "prj", board=board,
                  opt_level="2") as project:
        project.build()  # a second build does nothing and succeeds
    prj = tmp_path / "prj"
    spec = BOARDS[board]
    assert (prj / "build/firmware.elf").is_file() and (prj / "build/firmware.bin").is_file()
    assert f"-mcpu={spec['cpu']}" in (prj / "Makefile").read_text()
    assert "-O2" in (prj / "Makefile").read_text()
    ld = (prj / "firmware.ld").read_text()
    assert f"LENGTH = {spec['memory']['ram']['length']}" in ld
    report = (prj / "build/memory.txt").read_text()
    assert f"of {spec['memory']['ram']['length']} bytes" in report
    used = json.loads((prj / "build/memory.json").read_text())
    assert used["flash"]["rpc server"] > 0 and used["ram"]["runtime"] > 0
    _check_vector_table(prj, spec)
    # pyOCD by default; a serial number no probe has keeps attached boards safe.
    expected = "no debug probe found with serial number none0|pyOCD has no built-in target"
    with pytest.raises(ProjectAPIError, match=expected):
        with generate_project_dir(prj, {"serial_number": "none0"}) as project:
            project.flash()


def _check_vector_table(prj: Path, spec: dict) -> None:
    """The image starts with the initial stack (end of RAM), Reset_Handler and, at the UART's
    IRQ, its handler (Thumb addresses)."""
    nm = subprocess.run(["arm-none-eabi-nm", str(prj / "build/firmware.elf")],
                        capture_output=True, text=True, check=True).stdout
    symbols = {f[2]: int(f[0], 16) for f in (line.split() for line in nm.splitlines())
               if len(f) == 3}
    image = (prj / "build/firmware.bin").read_bytes()
    words = np.frombuffer(image[: 4 * (16 + spec["irq_count"])], dtype="<u4")
    ram = spec["memory"]["ram"]
    assert words[0] == ram["origin"] + ram["length"]
    assert words[1] == symbols["Reset_Handler"] | 1
    assert words[15] == symbols["SysTick_Handler"] | 1
    assert words[16 + spec["uart"]["irq"]] == symbols["UartIrqHandler"] | 1


def generate_project_dir(prj: Path, options: dict | None = None):
    from project_api.api.project import GeneratedProject

    return GeneratedProject.from_directory(prj, options)


def test_qemu_build_and_memory_report(qemu_projects: dict) -> None:
    prj = Path(qemu_projects["micro_speech_int8"].directory)
    used = json.loads((prj / "build/memory.json").read_text())
    assert used["flash"]["model weights"] > 10_000  # micro_speech's weights
    assert used["ram"]["activations"] > 0
    size = subprocess.run(["arm-none-eabi-size", str(prj / "build/firmware.elf")],
                          capture_output=True, text=True, check=True).stdout.split("\n")[1]
    text, data, _ = (int(v) for v in size.split()[:3])
    assert abs(sum(used["flash"].values()) - (text + data)) < 256
    _check_vector_table(prj, BOARDS[QEMU_BOARD])


def _check_bit_exact(project, tflite: Path, inputs: list[np.ndarray]) -> list[float]:
    model_bytes = tflite.read_bytes()
    with project.session() as session:
        model = session.model()
        for x in inputs:
            model.set_input(0, x)
            model.run()
            want = run_tflm(model_bytes, [x])[0]
            got = model.get_output(0)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.reshape(want.shape), want)
        timing = session.time(model, number=3, repeat=2)
    assert len(timing.results) == 2 and all(t > 0 for t in timing.results)
    return list(timing.results)


def test_hello_world_on_qemu(qemu_projects: dict, models: dict) -> None:
    project = qemu_projects["hello_world_int8"]
    project.flash()  # QEMU: checks the image; QEMU itself loads build/firmware.elf
    assert not (Path(project.directory) / "build/flashed.json").exists()
    tensor = models["hello_world_int8"][1].inputs[0]
    xs = [np.full(tensor.shape, v, dtype=tensor.dtype) for v in (-128, -20, 0, 37, 127)]
    _check_bit_exact(project, models["hello_world_int8"][0], xs)


def test_micro_speech_on_qemu(qemu_projects: dict, models: dict) -> None:
    project = qemu_projects["micro_speech_int8"]
    project.flash()
    tensor = models["micro_speech_int8"][1].inputs[0]
    rng = np.random.default_rng(7)
    xs = [rng.integers(-128, 127, tensor.shape, dtype=np.int8, endpoint=True) for _ in range(3)]
    times = _check_bit_exact(project, models["micro_speech_int8"][0], xs)
    # -icount shift=0: SysTick counts instructions, so the device time is the same every run.
    assert max(times) - min(times) <= 1e-3 * max(times)


def test_micro_speech_through_json_rpc(qemu_projects: dict, models: dict) -> None:
    """Every byte through read_transport/write_transport, as microTVM's client does it."""
    from project_api.api.transport import ProjectTransport
    from project_api.micro import Session

    project = qemu_projects["micro_speech_int8"]
    tensor = models["micro_speech_int8"][1].inputs[0]
    x = np.random.default_rng(11).integers(-128, 127, tensor.shape, dtype=np.int8, endpoint=True)
    transport = ProjectTransport(project.client, project.options, use_endpoint=False,
                                 shutdown_client=False)
    with Session(transport) as session:
        assert transport.endpoint is None
        model = session.model()
        model.set_input(0, x)
        model.run()
        want = run_tflm(models["micro_speech_int8"][0].read_bytes(), [x])[0]
        np.testing.assert_array_equal(model.get_output(0).reshape(want.shape), want)


def test_project_api_run_cli(qemu_projects: dict, models: dict, tmp_path: Path) -> None:
    prj = Path(qemu_projects["hello_world_int8"].directory)
    tensor = models["hello_world_int8"][1].inputs[0]
    x = np.full(tensor.shape, 42, dtype=tensor.dtype)
    np.save(tmp_path / "x.npy", x)
    subprocess.run([sys.executable, "-m", "project_api", "run", str(prj), "--input",
                    f"{tensor.name}=" + str(tmp_path / "x.npy"), "--output",
                    str(tmp_path / "y.npz"), "--repeat", "1", "--number", "1"],
                   check=True, capture_output=True, text=True, timeout=120)
    want = run_tflm(models["hello_world_int8"][0].read_bytes(), [x])[0]
    got = np.load(tmp_path / "y.npz")
    np.testing.assert_array_equal(got[got.files[0]].reshape(want.shape), want)


def test_unknown_board(models: dict, tmp_path: Path) -> None:
    with pytest.raises(ProjectAPIError) as info:
        generate_project("stm32", models["hello_world_int8"][1].path, tmp_path / "prj",
                         {"board": "nucleo_nope"})
    message = str(info.value).splitlines()[0]
    assert "nucleo_nope" in message and "nucleo_f429zi" in message and QEMU_BOARD in message
    assert not (tmp_path / "prj").exists()


def test_firmware_too_big(models: dict, tmp_path: Path) -> None:
    with pytest.raises(ProjectAPIError) as info:
        _project(models, "hello_world_int8", tmp_path / "prj", board="nucleo_l432kc",
                 workspace_size_bytes=128 * 1024)
    message = str(info.value).strip().splitlines()[-1]
    assert "does not fit nucleo_l432kc" in message and "overflowed" not in message
    assert "RAM by " in message and "bytes" in message


def test_qemu_dies_with_its_server(qemu_projects: dict) -> None:
    """SIGKILL the server mid-session: the emulator goes with it (PR_SET_PDEATHSIG), and once
    a client has opened the FIFO endpoint (as ours does) no FIFO folder is left either."""
    from project_api.api.transport import FdTransport

    prj = Path(qemu_projects["hello_world_int8"].directory)
    before = qemu_pids()
    code = ("import json, sys, time; sys.path.insert(0, sys.argv[1]);"
            "import microtvm_api_server as s; h = s.Handler();"
            "print(json.dumps(h.open_transport({})['endpoint']), flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code, str(prj)], cwd=prj,
                            stdout=subprocess.PIPE, text=True)
    try:
        endpoint = json.loads(proc.stdout.readline())
        assert endpoint["type"] == "fifo" and endpoint["remove_after_open"] is True
        fifo_dir = Path(endpoint["rx_path"]).parent
        client_side = FdTransport.for_fifos(endpoint["rx_path"], endpoint["tx_path"],
                                            remove_after_open=True)
        client_side.open()
        started = qemu_pids() - before
        assert started, "no QEMU was started"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        deadline = time.monotonic() + 5
        while qemu_pids() & started and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not qemu_pids() & started
        client_side.close()
        assert not fifo_dir.exists(), f"{fifo_dir} was left behind"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()


@pytest.fixture(scope="module")
def busy_project(models: dict, tmp_path_factory: pytest.TempPathFactory):
    """hello_world on firmware that stays busy 5 ms after every Feed (test hook)."""
    project = _project(models, "hello_world_int8", tmp_path_factory.mktemp("busy") / "prj",
                       compile_definitions="-DFIRMWARE_TEST_BUSY_MS=5")
    yield project
    project.close()


def test_busy_device_loses_no_byte(busy_project, models: dict) -> None:
    """Requests arrive while the device is busy: the interrupt-driven ring keeps every byte."""
    tensor = models["hello_world_int8"][1].inputs[0]
    xs = [np.full(tensor.shape, v, dtype=tensor.dtype) for v in (-77, 5, 99)]
    _check_bit_exact(busy_project, models["hello_world_int8"][0], xs)


def test_uart_receive_overflow_is_reported(busy_project) -> None:
    """The host sends more than the receive ring holds while the device is busy: the interrupt
    handler counts what it drops and the firmware says so in a device log frame."""
    prj = Path(busy_project.directory)
    code = ("import sys; sys.path.insert(0, sys.argv[1]);"
            "import microtvm_api_server as s; h = s.Handler();"
            "h.open_transport({}); h.write_transport(bytes(20000), 10.0); seen = b'';\n"
            "while b'overrun)' not in seen: seen += h.read_transport(4096, 20.0)\n"
            "h.close_transport(); print(seen[seen.index(b'stm32: '):].decode(errors='replace'))")
    out = subprocess.run([sys.executable, "-c", code, str(prj)], cwd=prj, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "stm32: UART receive lost" in out.stdout and "ring of 8192 bytes" in out.stdout  # 4 KiB packets


def test_shutdown_exits_qemu_through_semihosting(qemu_projects: dict) -> None:
    """kShutdown from the host: the firmware leaves QEMU with semihosting SYS_EXIT (status 0),
    which QEMU honours under -semihosting-config enable=on,target=native."""
    from project_api.micro.rpc import RPCCode, make_packet

    project = qemu_projects["hello_world_int8"]
    log = Path(project.directory) / "build/qemu.log"
    with project.session() as session:
        session.model()
        started = qemu_pids()
        session.rpc.channel.send(make_packet(RPCCode.SHUTDOWN, b""))
        deadline = time.monotonic() + 10
        while "shutdown requested" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        while qemu_pids() & started and time.monotonic() < deadline:
            time.sleep(0.05)
    text = log.read_text()
    assert "stm32 firmware: shutdown requested by the host" in text
    assert "terminating on signal" not in text  # it exited by itself, before close_transport


def test_warning_as_error(tmp_path: Path) -> None:
    from mlf_kernels import warning_module, write_mlf

    mlf = write_mlf(tmp_path / "warn.tar", [warning_module()])
    with pytest.raises(ProjectAPIError) as info:
        with generate_project("stm32", mlf, tmp_path / "strict", {"warning_as_error": True}) as p:
            p.build()
    message = str(info.value).strip().splitlines()[-1]
    assert "build failed: model/codegen/host/src/" in message and "build/build.log" in message
    with generate_project("stm32", mlf, tmp_path / "lax", {"warning_as_error": False}) as p:
        p.build()
    assert (tmp_path / "lax/build/firmware.elf").is_file()


def test_float32_dense_on_qemu_uses_the_fpu(tmp_path: Path) -> None:
    """float32 code with the hard-float ABI: the start-up code must have enabled the FPU."""
    from mlf_kernels import dense_mlf

    mlf, weight, bias = dense_mlf(tmp_path / "dense.tar", in_features=32, out_features=12)
    x = np.random.default_rng(2).standard_normal((1, 32)).astype(np.float32)
    with generate_project("stm32", mlf, tmp_path / "prj", {"warning_as_error": True}) as project:
        project.build()
        with project.session() as session:
            model = session.model()
            model.set_input(0, x)
            model.run()
            out = model.get_output(0)
    assert "-mfloat-abi=hard" in (tmp_path / "prj/Makefile").read_text()
    np.testing.assert_allclose(out, np.maximum(x @ weight.T + bias, 0.0), rtol=1e-5, atol=1e-6)


def test_picolibc_on_qemu(models: dict, tmp_path: Path) -> None:
    with _project(models, "hello_world_int8", tmp_path / "prj", libc="picolibc",
                  opt_level="z") as project:
        tensor = models["hello_world_int8"][1].inputs[0]
        xs = [np.full(tensor.shape, v, dtype=tensor.dtype) for v in (-3, 64)]
        _check_bit_exact(project, models["hello_world_int8"][0], xs)
    assert "picolibc" in (tmp_path / "prj/build/firmware.map").read_text()

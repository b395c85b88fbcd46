"""zephyr template under QEMU, without Zephyr (runs everywhere, CI included): the template's QEMU lifecycle with a firmware we
can build here, the stm32 template's for the emulated STM32F405, standing in for zephyr.elf:
the console on a socket chardev that waits for our connection, a host-driven inference through
the template server's read/write_transport that matches TFLite Micro bit for bit (so no byte is
lost or doubled, 0x01 included), a second open_transport after close, and no QEMU left; for
project type mlperftiny, the ready line awaited and the benchmark's start-up lines left to the
client, which plays the golden MLPerf Tiny transcript.
The full flow with Zephyr itself is test_zephyr_flow.py."""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.mlperftiny_transcript import play_golden, samples, tflm_results
from stm32_support import (  # noqa: F401  (the fixture is autouse)
    build_project,
    qemu_pids,
    stm32_tools_and_no_qemu_left,
)

from project_api import server
from project_api.api.project import generate_project
from project_api.api.transport import Transport
from project_api.emit import emit
from project_api.emit.reference import run_tflm
from project_api.micro import Session
from project_api.system import paths

TEMPLATE = paths.template_dir("zephyr")


def _server_module() -> Any:
    spec = importlib.util.spec_from_file_location("zephyr_server_qemu",
                                                  TEMPLATE / "microtvm_api_server.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules["zephyr_server_qemu"] = module
    spec.loader.exec_module(module)
    return module


class HandlerTransport(Transport):
    """A Transport over a handler's open/read/write/close_transport (microTVM's client path)."""

    def __init__(self, handler: Any, options: dict[str, Any]) -> None:
        self.handler, self.options = handler, options
        self._timeouts: server.TransportTimeouts | None = None
        self.reply: dict[str, Any] = {}

    def timeouts(self) -> server.TransportTimeouts:
        assert self._timeouts is not None
        return self._timeouts

    def open(self) -> None:
        self.reply = self.handler.open_transport(self.options)
        self._timeouts = self.reply["timeouts"]

    def close(self) -> None:
        self.handler.close_transport()

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        return self.handler.read_transport(n, timeout_sec)

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        self.handler.write_transport(data, timeout_sec)


@pytest.fixture(scope="module")
def hello(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    out = tmp_path_factory.mktemp("zephyr_qemu_mlf")
    tflite = models_dir / "hello_world_int8.tflite"
    return tflite, emit(tflite, out / "hello.tar", name="default")


def _stand_in(mlf_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
              **options: Any) -> Any:
    """A zephyr qemu_cortex_m3 project whose zephyr.elf is the stm32 template's QEMU firmware
    of the same project type, and a handler whose board entry runs it on its own machine
    (netduinoplus2)."""
    monkeypatch.delenv("ZEPHYR_BASE", raising=False)
    with build_project(mlf_path, tmp_path / "stm32", **options) as stm32:
        elf = Path(stm32.directory) / "build/firmware.elf"
    prj = tmp_path / "zephyr"
    generate_project("zephyr", mlf_path, prj, {"board": "qemu_cortex_m3", **options}).close()
    (prj / "build/zephyr").mkdir(parents=True)
    shutil.copy2(elf, prj / "build/zephyr/zephyr.elf")
    module = _server_module()
    board = {**module.BOARDS["qemu_cortex_m3"], "emulator": {
        "binary": "qemu-system-arm",
        "args": ["-M", "netduinoplus2", "-nographic", "-semihosting-config",
                 "enable=on,target=native"]}}
    monkeypatch.setitem(module.BOARDS, "qemu_cortex_m3", board)
    for name, kind in module.PROJECT_TYPES.items():  # the stand-in firmware's ready line
        if kind.banner is not None:
            monkeypatch.setitem(module.PROJECT_TYPES, name,
                                dataclasses.replace(kind, banner=b"project-api stm32 ready"))
    return module.Handler(project_dir=prj)


@pytest.fixture
def stand_in_zephyr_project(hello, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    handler = _stand_in(hello[1].path, tmp_path, monkeypatch)
    yield handler
    handler.close_transport()


def _socket_dirs() -> set[str]:
    import tempfile

    return {p.name for p in Path(tempfile.gettempdir()).glob("project-api-qemu-*")}


@pytest.fixture
def own_tempdir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp dir of the test's own (the socket folders of tests running beside it under xdist
    do not count), made in the system's: tmp_path is too long for a Unix socket's path."""
    import tempfile

    own = Path(tempfile.mkdtemp(prefix="pa-"))
    monkeypatch.setattr(tempfile, "tempdir", str(own))
    yield own
    shutil.rmtree(own)


def test_qemu_socket_lifecycle_and_inference(stand_in_zephyr_project, hello,
                                             own_tempdir: Path) -> None:
    handler = stand_in_zephyr_project
    tflite, emitted = hello
    shape = emitted.inputs[0].shape
    before_dirs, before_qemu = _socket_dirs(), qemu_pids()
    rng = np.random.default_rng(5)
    for attempt in range(2):  # the second open_transport works after the first was closed
        transport = HandlerTransport(handler, {})
        with Session(transport) as session:
            assert "endpoint" not in transport.reply  # no socket endpoint: JSON-RPC carries it
            assert len(qemu_pids() - before_qemu) == 1
            assert len(_socket_dirs() - before_dirs) == 1  # the FIFOs' folder, in our temp dir
            model = session.model()
            for _ in range(3):
                x = rng.integers(-128, 127, shape, dtype=np.int8, endpoint=True)
                model.set_input(0, x)
                model.run()
                want = run_tflm(tflite.read_bytes(), [x])[0]
                np.testing.assert_array_equal(model.get_output(0).reshape(want.shape), want)
        assert not qemu_pids() - before_qemu, f"QEMU left running after close {attempt}"
        assert _socket_dirs() <= before_dirs, "the socket folder was left behind"


def test_qemu_log_and_missing_elf(stand_in_zephyr_project) -> None:
    handler = stand_in_zephyr_project
    handler.open_transport({})
    handler.close_transport()
    assert (handler.project_dir / "build/qemu.log").is_file()
    (handler.project_dir / "build/zephyr/zephyr.elf").unlink()
    with pytest.raises(server.ServerError, match="zephyr.elf does not exist; run 'project-api "
                                                 "build' first"):
        handler.open_transport({})


def test_qemu_mlperftiny_golden_transcript(models_dir: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """project_type=mlperftiny: open_transport starts QEMU, waits for the ready line and leaves
    the start-up lines to the client; the golden transcript plays through read/write_transport
    and the results equal TFLite Micro's."""
    tflite = models_dir / "kws_ref_model_int8.tflite"
    kws = emit(tflite, tmp_path / "kws.tar")
    handler = _stand_in(kws.path, tmp_path, monkeypatch, project_type="mlperftiny",
                        mlperftiny_model="kws01")
    before = qemu_pids()
    (x,) = samples(kws, 1, seed=13)
    transport = HandlerTransport(handler, {})
    transport.open()
    try:
        assert "endpoint" not in transport.reply
        results = play_golden(transport, x.tobytes())
    finally:
        transport.close()
    want = tflm_results(tflite, kws, x)
    assert len(results) == 3 and all([f"{v:.3f}" for v in r] == want for r in results)
    deadline = time.monotonic() + 5
    while qemu_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not qemu_pids() - before, "QEMU left running after close"


def test_serial_url_reaches_a_remote_board_without_a_local_qemu(
        hello, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """-o serial_url on a QEMU board of the zephyr template: the board on the other end (here a
    QEMU this test serves on a loopback TCP port) is used, and the server starts none."""
    from farm_support import Farm, require_farm_tools

    require_farm_tools()
    tflite, emitted = hello
    handler = _stand_in(emitted.path, tmp_path, monkeypatch)
    farm = Farm(tmp_path / "farm", handler.project_dir / "build/zephyr/zephyr.elf", boards=1,
                rfc2217=False, labgrid=False)
    try:
        before = qemu_pids()
        transport = HandlerTransport(handler, {"serial_url": farm.url(0)})
        with Session(transport) as session:
            assert transport.reply["endpoint"] == {"type": "serial", "port": farm.url(0),
                                                   "baudrate": 115200}
            assert qemu_pids() == before  # no local QEMU started
            model = session.model()
            x = np.full(emitted.inputs[0].shape, -3, dtype=np.int8)
            model.set_input(0, x)
            model.run()
            want = run_tflm(tflite.read_bytes(), [x])[0]
            np.testing.assert_array_equal(model.get_output(0).reshape(want.shape), want)
    finally:
        handler.close_transport()
        farm.close()
        farm.assert_stopped()

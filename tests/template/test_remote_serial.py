"""Boards on other machines without labgrid (#11): ``-o serial_url`` (socket:// straight to a QEMU
board's TCP UART, rfc2217:// through ser2net), bit-exact with TFLite Micro; the option rules; the
pyOCD remote-probe flash path (golden calls); timeout errors that name the network link."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from farm_support import Farm, require_farm_tools
from helpers.flash_doubles import F429, PyOcdMocks, arm_elf, fake_probe, stm32_handler
from stm32_support import (  # noqa: F401  (the fixture is autouse)
    build_project,
    qemu_pids,
    stm32_tools_and_no_qemu_left,
)

from project_api.api.project import GeneratedProject
from project_api.api.server import TransportTimeouts
from project_api.api.transport import SerialTransport
from project_api.emit import emit
from project_api.errors import ServerError, SessionTimeoutError
from project_api.micro.api import Session
from project_api.template import labgrid_place, remote, remote_serial
from project_api.tools.validate import validate

# --- the options, without a board ----------------------------------------------------------


def test_probe_id() -> None:
    assert remote.probe_id({"probe": "remote:lab-pc:5555"}) == "remote:lab-pc:5555"
    assert remote.probe_id({"probe": None}) is None
    for bad in ("lab-pc:5555", "remote:lab-pc", "remote::5555", "remote:lab-pc:http"):
        with pytest.raises(ServerError, match="want remote:HOST:PORT"):
            remote.probe_id({"probe": bad})


def test_serial_url_of_a_network_serial_port() -> None:
    assert labgrid_place.serial_url({"host": "lab", "port": 4000, "protocol": "raw"}) == \
        "socket://lab:4000"
    assert labgrid_place.serial_url({"host": "lab", "port": 4000}).startswith("rfc2217://lab:4000?")
    with pytest.raises(ServerError, match="speaks 'ssh'"):
        labgrid_place.serial_url({"host": "lab", "port": 1, "protocol": "ssh"})
    with pytest.raises(ServerError, match="no host and port"):
        labgrid_place.serial_url({"host": "lab"})


def test_coordinator_address(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LG_COORDINATOR", raising=False)
    with pytest.raises(ServerError, match="set LG_COORDINATOR=HOST:PORT or pass -o "
                                          "labgrid_coordinator"):
        labgrid_place.coordinator_address({})
    monkeypatch.setenv("LG_COORDINATOR", "lab-pc")
    assert labgrid_place.coordinator_address({}) == "lab-pc:20408"
    assert labgrid_place.coordinator_address({"labgrid_coordinator": "127.0.0.1:1234"}) == \
        "127.0.0.1:1234"


def test_stm32_server_declares_the_remote_options(tmp_path: Path) -> None:
    handler = stm32_handler(tmp_path, "nucleo_f429zi")
    names = {o.name: o for o in handler.OPTIONS}
    for name in ("serial_url", "labgrid_place", "labgrid_coordinator", "labgrid_wait", "probe"):
        assert name in names
    assert "open_transport" in names["serial_url"].wire.optional
    assert "flash" in names["probe"].wire.optional
    with pytest.raises(ServerError, match="serial_url or labgrid_place, not both"):
        remote.remote_link({"serial_url": "socket://x:1", "labgrid_place": "p"})
    assert remote.remote_link({}) is None


# --- pyOCD through a remote probe: golden calls -----------------------------------------------


def test_pyocd_resolves_a_remote_probe_id_without_connecting() -> None:
    """pyOCD (>= 0.36) spells a 'pyocd server' probe remote:HOST:PORT: its aggregator makes a
    TCP client probe of it at once, without touching the network."""
    from pyocd.probe.aggregator import DebugProbeAggregator

    (probe,) = DebugProbeAggregator.get_all_connected_probes(unique_id="remote:127.0.0.1:5555")
    assert type(probe).__name__ == "TCPClientProbe"
    assert probe.unique_id == "remote:127.0.0.1:5555"


def test_flash_through_a_remote_probe_golden_calls(tmp_path: Path) -> None:
    """``project-api flash prj -o probe=remote:HOST:PORT``: the stm32 server's pyOCD runner asks
    for exactly that probe and programs the board's pyocd_target from boards.yaml."""
    image = arm_elf(tmp_path / "build" / "firmware.elf", [(0x08000000, bytes(range(256)) * 4),
                                                          (0x08000400, b"initial .data")])
    handler = stm32_handler(tmp_path, "nucleo_f429zi")
    probe = fake_probe("remote:127.0.0.1:5555", "remote probe")
    with PyOcdMocks([probe]) as m:
        handler.flash({"probe": "remote:127.0.0.1:5555", "serial_number": "ignored"})
    m.list_mock.assert_called_once_with(blocking=False, unique_id="remote:127.0.0.1:5555",
                                        print_wait_message=False)
    m.session_cls.assert_called_once_with(probe, options={"target_override":
                                                          F429["pyocd_target"]})
    m.programmer_cls.return_value.program.assert_called_once_with(str(image), file_format="elf")
    m.session.target.reset.assert_called_once_with()
    with pytest.raises(ServerError, match="want remote:HOST:PORT"):
        handler.flash({"probe": "usb:1234"})


# --- timeouts over a network link ----------------------------------------------------------------


def test_session_timeout_names_the_network_link() -> None:
    """A TCP serial server that never answers: the handshake's timeout error says the link is
    a network one."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []
    thread = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
    thread.start()
    transport = SerialTransport(f"socket://127.0.0.1:{port}", 115200, TransportTimeouts(
        session_start_retry_timeout_sec=0.2, session_start_timeout_sec=0.6,
        session_established_timeout_sec=1.0))
    try:
        with pytest.raises(SessionTimeoutError) as info:
            Session(transport).open()
        assert "over a network link (serial_url/labgrid)" in str(info.value)
        assert f"socket://127.0.0.1:{port}" in str(info.value)
    finally:
        transport.close()
        thread.join(5)
        for s in accepted:
            s.close()
        listener.close()


def test_network_uart_transport_opens_on_first_use() -> None:
    transport = remote_serial.NetworkUartTransport("socket://127.0.0.1:1")
    transport.open()  # nothing happens: the client connects through the endpoint itself
    assert transport._ser is None
    with pytest.raises(ServerError, match=r"connection refused to socket://127.0.0.1:1 \(nothing "
                                          r"listens there\); check the host and port"):
        transport.read(1, 0.1)
    transport.close()


# --- on QEMU boards served over TCP ------------------------------------------------------------


@pytest.fixture(scope="module")
def board(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple]:
    require_farm_tools()
    root = tmp_path_factory.mktemp("remote_serial")
    tflite = models_dir / "hello_world_int8.tflite"
    mlf = emit(tflite, root / "hello.tar", name="default")
    build_project(mlf.path, root / "prj").close()
    farm = Farm(root / "farm", root / "prj" / "build" / "firmware.elf", boards=2, labgrid=False)
    try:
        yield root / "prj", tflite, mlf, farm
    finally:
        farm.close()
        farm.assert_stopped()


def _samples(mlf, n: int) -> dict[str, np.ndarray]:
    t = mlf.inputs[0]
    rng = np.random.default_rng(n)
    return {t.name: rng.integers(-128, 127, (n, *t.shape), dtype=np.int8, endpoint=True)}


@pytest.mark.parametrize("kind", ["socket", "rfc2217"])
def test_validate_over_serial_url_is_bit_exact(board: tuple, kind: str) -> None:
    prj, tflite, mlf, farm = board
    url = farm.url(1) if kind == "socket" else farm.rfc2217_url + "?ign_set_control"
    before = qemu_pids()
    with GeneratedProject.from_directory(prj, {"serial_url": url}) as project:
        report = validate(project, _samples(mlf, 24), tflite=tflite, litert=False, number=1,
                          repeat=1)
        assert qemu_pids() == before  # serial_url never starts a local QEMU
    (tflm,) = report.comparison("tflm").outputs
    assert report.samples == 24 and tflm.exact == 1.0 and tflm.max_abs_int == 0.0


def test_cli_run_over_serial_url(board: tuple, tmp_path: Path) -> None:
    import subprocess

    prj, tflite, mlf, farm = board
    x = _samples(mlf, 1)[mlf.inputs[0].name][0]
    np.save(tmp_path / "x.npy", x)
    out = subprocess.run([sys.executable, "-m", "project_api", "run", str(prj), "-o",
                          f"serial_url={farm.url(1)}", "--input", f"0={tmp_path / 'x.npy'}",
                          "--output", str(tmp_path / "y.npz"), "--json"],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    from project_api.tools.references import tflm_outputs

    (want,) = tflm_outputs(tflite.read_bytes(), [x[None]])
    got = np.load(tmp_path / "y.npz")
    assert np.array_equal(got[got.files[0]].reshape(want[0].shape), want[0])


def test_host_firmware_reports_its_build_hash(models_dir: Path, tmp_path: Path) -> None:
    """The shared glue compiles the project's build hash into every firmware (here the host
    template's); generating again alike gives the same hash, other options another."""
    from project_api.api.project import generate_project
    from project_api.template import glue
    from project_api.tools.farm import device_build_hash

    mlf = emit(models_dir / "hello_world_int8.tflite", tmp_path / "hello.tar", name="default")
    with generate_project("host", mlf.path, tmp_path / "prj", {"project_type": "host_driven"},
                          build=True) as project, project.session() as session:
        assert device_build_hash(session) == glue.read_build_hash(tmp_path / "prj")
    generate_project("host", mlf.path, tmp_path / "again",
                     {"project_type": "host_driven"}).close()
    generate_project("host", mlf.path, tmp_path / "other",
                     {"project_type": "host_driven", "workspace_size_bytes": 1 << 17}).close()
    hashes = [glue.read_build_hash(tmp_path / d) for d in ("prj", "again", "other")]
    assert hashes[0] == hashes[1] != hashes[2] and all(hashes)


def test_missing_labgrid_is_one_install_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "labgrid", None)  # makes "import labgrid" raise ImportError
    with pytest.raises(ServerError, match=r"-o labgrid_place needs the 'labgrid' package, which "
                                          r"is not installed; install it with: "
                                          r"pip install 'project-api\[labgrid\]'$"):
        remote.remote_link({"labgrid_place": "p", "labgrid_coordinator": "127.0.0.1:1"})

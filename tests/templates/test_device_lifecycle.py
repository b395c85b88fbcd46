"""The host template's device dies with its server (issue #8).

When the template server that started ``build/main`` is killed with SIGKILL, the device must not
linger with parent 1: on Linux the kernel sends it SIGTERM (PR_SET_PDEATHSIG), even while it runs
a long request; a build with ``-DTVM_HOST_PARENT_POLL=1`` (the default off Linux) notices with
getppid() while it waits for input. The client still holds its ends of the FIFOs throughout, so
end-of-file alone would not stop the device.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import require_tool
from mlf_kernels import dense_mlf, device_pids, generate_host_project

from project_api.api.project import GeneratedProject
from project_api.micro import Session

GONE_WITHIN_SEC = 2.0

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="finds device processes through Linux /proc")


def _build(tmp: Path, name: str, **options: object) -> Path:
    mlf, _, _ = dense_mlf(tmp / f"{name}.tar", in_features=64, out_features=64)
    generate_host_project(mlf, tmp / name, **options).close()
    return tmp / name


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two built projects: the default one and one that polls getppid()."""
    require_tool("make")
    require_tool("cc")
    tmp = tmp_path_factory.mktemp("lifecycle")
    return {
        "pdeathsig": _build(tmp, "pdeathsig"),
        "poll": _build(tmp, "poll", compile_definitions="-DTVM_HOST_PARENT_POLL=1"),
    }


@pytest.fixture()
def fifo_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temp dir of its own for the server (its FIFO folders go there)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    return tmp


class _Killed:
    """A server with an open session, whose server process the test kills."""

    def __init__(self, project_dir: Path):
        self.binary = project_dir / "build" / "main"
        self.project = GeneratedProject.from_directory(project_dir)
        self.session = Session(self.project.transport())
        self.session.__enter__()
        pids = device_pids(self.binary)
        assert len(pids) == 1, pids
        self.device_pid = pids[0]
        self.server_pid = self.project.client.process.pid
        assert _parent_of(self.device_pid) == self.server_pid

    def kill_server(self) -> None:
        os.kill(self.server_pid, signal.SIGKILL)
        self.project.client.process.wait(timeout=5)

    def close(self) -> None:
        for step in (lambda: self.session.__exit__(None, None, None), self.project.close):
            try:
                step()
            except Exception:  # the server is dead; the client's clean-up may complain
                pass
        if self.device_pid in device_pids(self.binary):
            os.kill(self.device_pid, signal.SIGKILL)  # never leave one behind for other tests


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _wait_gone(binary: Path, pid: int, timeout: float) -> float:
    start = time.monotonic()
    while pid in device_pids(binary):
        if time.monotonic() - start > timeout:
            raise AssertionError(
                f"device pid {pid} still runs {timeout} s after its server was killed "
                f"(parent now {_parent_of(pid)})"
            )
        time.sleep(0.05)
    return time.monotonic() - start


@pytest.fixture()
def killed(request: pytest.FixtureRequest, projects: dict[str, Path],
           fifo_tmp: Path) -> Iterator[_Killed]:
    k = _Killed(projects[request.param])
    try:
        yield k
    finally:
        k.close()


@pytest.mark.parametrize("killed", ["pdeathsig", "poll"], indirect=True)
def test_idle_device_dies_with_its_server(killed: _Killed) -> None:
    killed.kill_server()
    _wait_gone(killed.binary, killed.device_pid, GONE_WITHIN_SEC)


@pytest.mark.parametrize("killed", ["pdeathsig"], indirect=True)
def test_busy_device_dies_with_its_server(killed: _Killed) -> None:
    """Killed in the middle of a time evaluator run of a billion iterations (minutes of CPU):
    before the fix the device ran it to the end with parent 1, at 100 % CPU."""
    model = killed.session.model()
    model.set_input(0, np.ones((1, 64), dtype=np.float32))
    errors: list[BaseException] = []

    def run() -> None:
        try:
            killed.session.time(model, number=1_000_000_000, repeat=1)
        except BaseException as exc:  # the link dies under it: expected
            errors.append(exc)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    time.sleep(0.5)
    assert runner.is_alive(), errors
    killed.kill_server()
    _wait_gone(killed.binary, killed.device_pid, GONE_WITHIN_SEC)
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert errors, "the time evaluator call must fail once the device is gone"


@pytest.mark.parametrize("killed", ["pdeathsig"], indirect=True)
def test_no_fifo_folder_is_left(killed: _Killed, fifo_tmp: Path) -> None:
    """The server's FIFO folder was in our temp dir, and nothing of it is left once the killed
    server's device is gone and the client has closed."""
    link = os.readlink(f"/proc/{killed.device_pid}/fd/0")
    assert link.startswith(str(fifo_tmp / "project-api-fifo-")), link
    killed.kill_server()
    _wait_gone(killed.binary, killed.device_pid, GONE_WITHIN_SEC)
    killed.close()
    assert list(fifo_tmp.glob("project-api-fifo-*")) == []

"""The client against real server processes: the loopback template, crashing and TVM-style servers."""

from __future__ import annotations

import logging
import os
import random
import shutil
import sys
import tarfile
import textwrap
import time
from pathlib import Path

import pytest
from conftest import require_tool

from project_api import errors, server
from project_api.api import client, transport

LOOPBACK = Path(__file__).resolve().parents[1] / "loopback_template"


@pytest.fixture
def mlf_tar(tmp_path) -> Path:
    """A stand-in Model Library Format archive (the loopback template only copies it)."""
    src = tmp_path / "mlf_src"
    (src / "codegen").mkdir(parents=True)
    (src / "metadata.json").write_text('{"version": 7}\n')
    path = tmp_path / "model.tar"
    with tarfile.open(path, "w") as tar:
        tar.add(src, arcname=".")
    return path


@pytest.fixture
def generated(tmp_path, mlf_tar) -> Path:
    project_dir = tmp_path / "generated"
    with client.instantiate_from_dir(LOOPBACK) as api:
        api.generate_project(mlf_tar, "/unused/crt", project_dir, {"board": "b1", "verbose": True})
    return project_dir


def test_template_info_lists_every_option_kind():
    with client.instantiate_from_dir(LOOPBACK) as api:
        info = api.server_info_query("0.15.0")
    assert info["platform_name"] == "loopback"
    assert info["is_template"] is True
    assert info["model_library_format_path"] == ""  # TVM templates report "" too
    assert info["protocol_version"] == 1
    options = {o["name"]: o for o in info["project_options"]}
    assert {o["type"] for o in options.values()} == {"bool", "str", "int"}
    assert (
        options["board"]["required"] == ["generate_project"] and options["board"]["default"] is None
    )
    assert (
        options["transport"]["choices"] == ["rpc", "fifo"]
        and options["transport"]["default"] == "rpc"
    )
    assert options["buffer_size_bytes"]["default"] == 16 * 1024 * 1024
    assert all(list(o) == list(server.ProjectOption._fields) for o in options.values())


def test_generate_build_flash_and_transport(generated, mlf_tar, tmp_path):
    assert (generated / "microtvm_api_server.py").read_bytes() == (
        LOOPBACK / "microtvm_api_server.py"
    ).read_bytes()
    assert (generated / "model.tar").read_bytes() == mlf_tar.read_bytes()
    with client.instantiate_from_dir(generated) as api:
        info = api.server_info_query("0.15.0")
        assert info["is_template"] is False
        assert info["model_library_format_path"] == str((generated / "model.tar").resolve())
        with pytest.raises(
            server.ServerError, match="flash: no build/firmware.bin; run build first"
        ):
            api.flash({})
        api.build({})
        api.build({})  # idempotent
        api.flash({})
        assert (generated / "build" / "firmware.bin").read_text() == "b1\n"
        reply = api.open_transport({})
        assert reply == {
            "timeouts": {
                "session_start_retry_timeout_sec": 0,
                "session_start_timeout_sec": 5.0,
                "session_established_timeout_sec": 5.0,
            }
        }
        api.write_transport(b"\x00hello\xff", 1.0)
        assert api.read_transport(3, 1.0) == {"data": b"\x00he"}
        assert api.read_transport(100, 1.0) == {"data": b"llo\xff"}
        api.close_transport()
        with pytest.raises(server.TransportClosedError):
            api.read_transport(1, 0)


def test_generate_refuses_an_existing_directory(mlf_tar, tmp_path):
    existing = tmp_path / "exists"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine")
    with client.instantiate_from_dir(LOOPBACK) as api:
        with pytest.raises(server.ServerError, match="already exists"):
            api.generate_project(mlf_tar, "/unused", existing, {"board": "b"})
        with pytest.raises(server.ServerError, match="option board is required"):
            api.generate_project(mlf_tar, "/unused", tmp_path / "new", {})
        # The server is still serving after handler errors.
        assert api.server_info_query("0.15.0")["is_template"] is True
    assert (existing / "keep.txt").read_text() == "mine"
    assert not (tmp_path / "new").exists()


def test_eight_mib_round_trip_and_read_timeout(generated):
    payload = random.Random(8).randbytes(8 << 20)
    with client.instantiate_from_dir(generated) as api:
        api.open_transport({})
        api.write_transport(payload, 10.0)
        got = api.read_transport(len(payload), 10.0)["data"]
        assert len(got) == len(payload) and got == payload
        start = time.monotonic()
        with pytest.raises(server.IoTimeoutError) as info:
            api.read_transport(16, 0.05)
        assert time.monotonic() - start < 5
        assert "IoTimeoutError" in str(info.value)
        # Still serving after the error.
        api.write_transport(b"z", 1.0)
        assert api.read_transport(1, 1.0)["data"] == b"z"


def test_project_transport_fifo_fast_path(generated):
    api = client.instantiate_from_dir(generated)
    t = transport.ProjectTransport(api, {"transport": "fifo"})
    with t:
        assert t.endpoint is not None and t.endpoint["type"] == "fifo"
        fifo_dir = Path(t.endpoint["rx_path"]).parent
        assert not fifo_dir.exists()  # the client removed it once both ends were open
        payload = random.Random(3).randbytes(1 << 20)
        t.write(payload, 5.0)
        got = bytearray()
        while len(got) < len(payload):
            got += t.read(len(payload) - len(got), 5.0)
        assert bytes(got) == payload
        with pytest.raises(server.IoTimeoutError):
            t.read(1, 0.02)
        assert t.timeouts().session_established_timeout_sec == 5.0
    assert api.is_shutdown
    assert api.process.returncode == 0
    assert not fifo_dir.exists()


def test_project_transport_json_rpc_path_with_logger(generated, caplog):
    api = client.instantiate_from_dir(generated)
    t = transport.TransportLogger(
        "loop", transport.ProjectTransport(api, {"transport": "fifo"}, use_endpoint=False)
    )
    with caplog.at_level(logging.INFO, logger="project_api.api.transport"):
        with t:
            t.write(b"rpc!", 1.0)
            assert t.read(10, 1.0) == b"rpc!"
    messages = [r.getMessage() for r in caplog.records if r.name == "project_api.api.transport"]
    assert messages[1] == "loop: write { 1.00s}        <- [  4 B]: 72 70 63 21" + " " * 38 + "rpc!"
    assert messages[2] == "loop: read { 1.00s}   10 B -> [  4 B]: 72 70 63 21" + " " * 38 + "rpc!"


def test_not_found_message(tmp_path):
    with pytest.raises(errors.ProjectAPIServerNotFoundError) as info:
        client.instantiate_from_dir(tmp_path)
    assert str(info.value) == (
        f"No Project API server found in project directory: {tmp_path}\n"
        "Tried: launch_microtvm_api_server.sh, microtvm_api_server.py"
    )


def test_launch_script_takes_precedence(tmp_path):
    shutil.copy2(LOOPBACK / "microtvm_api_server.py", tmp_path / "microtvm_api_server.py")
    launcher = tmp_path / "launch_microtvm_api_server.sh"
    marker = tmp_path / "launched.txt"
    launcher.write_text(f'#!/bin/sh\necho "$@" > "{marker}"\nexec "{sys.executable}" "$@"\n')
    launcher.chmod(0o755)
    with client.instantiate_from_dir(tmp_path, debug=True) as api:
        assert api.server_info_query("0.15.0")["platform_name"] == "loopback"
    args = marker.read_text().split()
    assert args[0] == str(tmp_path / "microtvm_api_server.py")
    assert args[1] == "--read-fd" and args[3] == "--write-fd" and args[5] == "--debug"


CRASHING_SERVER = """
import os, sys
from project_api import server

class Handler(server.ProjectAPIHandler):
    def server_info_query(self, tvm_version):
        return server.ServerInfo("crashy", True, None, [])
    def generate_project(self, *args): pass
    def build(self, options):
        for i in range(100):
            print(f"build log line {i}", file=sys.stderr)
        sys.stderr.flush()
        os._exit(3)
    def flash(self, options):
        os.kill(os.getpid(), 9)
    def open_transport(self, options): pass
    def close_transport(self): pass
    def read_transport(self, n, timeout_sec):
        os.close(int(sys.argv[sys.argv.index("--write-fd") + 1]))
        import time; time.sleep(0.3)
        os._exit(0)
    def write_transport(self, data, timeout_sec): pass

server.main(Handler())
"""


@pytest.fixture
def crashy(tmp_path) -> Path:
    (tmp_path / "microtvm_api_server.py").write_text(textwrap.dedent(CRASHING_SERVER))
    return tmp_path


def test_server_crash_mid_call_gives_exit_status_and_stderr_tail(crashy, caplog):
    api = client.instantiate_from_dir(crashy)
    assert api.server_info_query("0.15.0")["platform_name"] == "crashy"
    with caplog.at_level(logging.INFO, logger="project_api.server_log"):
        with pytest.raises(errors.ServerExitedError) as info:
            api.build({})
    err = info.value
    assert err.returncode == 3
    assert "exited with status 3 while calling method build" in str(err)
    assert err.stderr_tail.splitlines()[-1] == "build log line 99"
    assert "build log line 60" in err.stderr_tail  # a bounded tail
    assert "build log line 0\n" not in err.stderr_tail + "\n"
    assert api.is_shutdown
    # Every stderr line also went to the logger.
    forwarded = [r.getMessage() for r in caplog.records if r.name == "project_api.server_log"]
    assert sum("build log line" in m for m in forwarded) == 100
    with pytest.raises(errors.ConnectionShutdownError, match="connection already closed"):
        api.build({})


def test_server_killed_by_signal(crashy):
    with client.instantiate_from_dir(crashy) as api:
        with pytest.raises(errors.ServerExitedError) as info:
            api.flash({})
    assert info.value.returncode == -9
    assert "was killed by signal 9" in str(info.value)


def test_server_closing_its_pipe_is_not_a_hang(crashy):
    with client.instantiate_from_dir(crashy) as api:
        with pytest.raises(errors.ConnectionShutdownError):
            api.read_transport(1, 1.0)


def test_server_with_bad_python_reports_stderr(tmp_path):
    (tmp_path / "microtvm_api_server.py").write_text(
        "raise SystemExit('this template is broken')\n"
    )
    with client.instantiate_from_dir(tmp_path) as api:
        with pytest.raises(errors.ServerExitedError) as info:
            api.server_info_query("0.15.0")
    assert "this template is broken" in info.value.stderr_tail
    assert info.value.returncode == 1


def test_debug_flag_logs_requests(generated, caplog):
    with caplog.at_level(logging.DEBUG, logger="project_api.server_log"):
        with client.instantiate_from_dir(generated, debug=True) as api:
            api.server_info_query("0.15.0")
    forwarded = [r for r in caplog.records if r.name == "project_api.server_log"]
    assert any(
        "request:" in r.getMessage() and "server_info_query" in r.getMessage() for r in forwarded
    )
    assert any(r.levelno == logging.DEBUG for r in forwarded)


def test_shutdown_kills_a_server_that_ignores_eof(tmp_path):
    (tmp_path / "microtvm_api_server.py").write_text(
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)\n"
    )
    api = client.instantiate_from_dir(tmp_path)
    api._shutdown_grace_sec = 0.2
    start = time.monotonic()
    api.shutdown()
    assert time.monotonic() - start < 10
    assert api.process.returncode == -9


# A server written exactly as for microTVM v0.15 (only the import line differs): its "device" is
# a `cat` process driven through the server's read_with_timeout / write_with_timeout helpers.
TVM_STYLE_SERVER = """
import os
import pathlib
import subprocess

from project_api import server

PROJECT_OPTIONS = server.default_project_options(
    project_type={"choices": ("host",)},
    board={"choices": ("cat",), "required": []},
) + [
    server.ProjectOption(
        "workspace_size_bytes",
        optional=["generate_project"],
        type="int",
        default=4096,
        help="Sets the value of TVM_WORKSPACE_SIZE_BYTES.",
    ),
]


class Handler(server.ProjectAPIHandler):
    def __init__(self):
        super(Handler, self).__init__()
        self._proc = None

    def server_info_query(self, tvm_version):
        return server.ServerInfo(
            platform_name="host",
            is_template=False,
            model_library_format_path=pathlib.Path(os.getcwd()) / "model.tar",
            project_options=PROJECT_OPTIONS,
        )

    def generate_project(self, model_library_format_path, standalone_crt_dir, project_dir, options):
        raise NotImplementedError()

    def build(self, options):
        pass

    def flash(self, options):
        pass

    def open_transport(self, options):
        self._proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
        self._set_nonblock(self._proc.stdin.fileno())
        self._set_nonblock(self._proc.stdout.fileno())
        return server.TransportTimeouts(
            session_start_retry_timeout_sec=0,
            session_start_timeout_sec=0,
            session_established_timeout_sec=0,
        )

    def _set_nonblock(self, fd):
        os.set_blocking(fd, False)

    def close_transport(self):
        if self._proc is not None:
            proc = self._proc
            self._proc = None
            proc.terminate()
            proc.wait()

    def read_transport(self, n, timeout_sec):
        if self._proc is None:
            raise server.TransportClosedError()
        return server.read_with_timeout(self._proc.stdout.fileno(), n, timeout_sec)

    def write_transport(self, data, timeout_sec):
        if self._proc is None:
            raise server.TransportClosedError()
        fd = self._proc.stdin.fileno()
        while data:
            num_written = server.write_with_timeout(fd, data, timeout_sec)
            data = data[num_written:]


if __name__ == "__main__":
    server.main(Handler())
"""


def test_tvm_style_server_works_with_our_client(tmp_path):
    require_tool("cat")
    (tmp_path / "microtvm_api_server.py").write_text(TVM_STYLE_SERVER)
    api = client.instantiate_from_dir(tmp_path)
    info = api.server_info_query("0.15.0")
    assert info["platform_name"] == "host" and info["is_template"] is False
    names = [o["name"] for o in info["project_options"]]
    assert names[:2] == ["verbose", "project_type"] and names[-1] == "workspace_size_bytes"
    with pytest.raises(server.ServerError) as err:
        api.generate_project("a", "b", "c", {})
    assert "NotImplementedError" in str(err.value)
    api.build({})
    api.flash({})
    t = transport.ProjectTransport(api, {})
    with t:
        assert t.endpoint is None
        assert t.timeouts() == server.TransportTimeouts(0, 0, 0)
        # `cat` holds only a pipe's worth, so write and read back in slices.
        payload = os.urandom(200_000)
        got = bytearray()
        for start in range(0, len(payload), 16384):
            piece = payload[start : start + 16384]
            t.write(piece, 5.0)
            goal = start + len(piece)
            while len(got) < goal:
                got += t.read(goal - len(got), 5.0)
        assert bytes(got) == payload
        with pytest.raises(server.IoTimeoutError):
            t.read(1, 0.02)
    assert api.is_shutdown and api.process.returncode == 0


def test_relative_project_dir(tmp_path, monkeypatch):
    shutil.copytree(LOOPBACK, tmp_path / "proj", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.chdir(tmp_path)
    with client.instantiate_from_dir("proj") as api:
        assert api.server_info_query("0.15.0")["platform_name"] == "loopback"
    with pytest.raises(errors.ProjectAPIServerNotFoundError, match="project directory: nope\n"):
        client.instantiate_from_dir("nope")


def test_pipelined_writes_against_a_real_server(generated):
    api = client.instantiate_from_dir(generated)
    with transport.ProjectTransport(api, pipeline_writes=True) as t:
        payload = random.Random(5).randbytes(300_000)
        t.write(payload, 5.0)
        got = bytearray()
        while len(got) < len(payload):
            got += t.read(len(payload), 5.0)
        assert bytes(got) == payload
        for i in range(50):
            t.write(bytes([i]), 1.0)
            assert t.read(1, 1.0) == bytes([i])
    assert api.process.returncode == 0

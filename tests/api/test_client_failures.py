"""Issue #8, client side: a server that never answers at start-up, and nothing left in the temp
directory when a server is killed while its FIFO endpoint is in use."""

from __future__ import annotations

import os
import signal
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

from project_api import errors
from project_api.api import client, transport
from project_api.cli import main

LOOPBACK = Path(__file__).resolve().parents[1] / "loopback_template"


def _hanging_server(tmp_path: Path) -> Path:
    project = tmp_path / "hangs"
    project.mkdir()
    (project / client.SERVER_SCRIPT_NAME).write_text(textwrap.dedent("""\
        import time
        time.sleep(3600)  # never serves: stuck importing something, say
    """))
    return project


def test_server_that_never_answers_times_out_clearly(tmp_path, monkeypatch):
    monkeypatch.setenv(client.SERVER_START_TIMEOUT_ENV, "0.5")
    api = client.instantiate_from_dir(_hanging_server(tmp_path))
    proc = api.process
    with pytest.raises(errors.ClientError) as info:
        api.server_info_query()
    message = str(info.value)
    assert "did not answer server_info_query within 0.5s" in message
    assert client.SERVER_START_TIMEOUT_ENV in message
    assert "\n" not in message
    # The unresponsive server was stopped, not left running.
    assert proc.poll() is not None
    assert api.is_shutdown


def test_cli_info_on_a_hanging_server_fails_in_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(client.SERVER_START_TIMEOUT_ENV, "0.5")
    assert main(["info", str(_hanging_server(tmp_path))]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and client.SERVER_START_TIMEOUT_ENV in err
    assert "internal error" not in err


def test_bad_start_timeout_value_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv(client.SERVER_START_TIMEOUT_ENV, "soon")
    with client.instantiate_from_dir(LOOPBACK) as api:
        with pytest.raises(errors.ClientError, match=r"not a number of seconds; set it to e\.g\."):
            api.server_info_query()


@pytest.fixture
def generated(tmp_path) -> Path:
    src = tmp_path / "mlf_src"
    (src / "codegen").mkdir(parents=True)
    (src / "metadata.json").write_text('{"version": 7}\n')
    mlf = tmp_path / "model.tar"
    with tarfile.open(mlf, "w") as tar:
        tar.add(src, arcname=".")
    project = tmp_path / "generated"
    with client.instantiate_from_dir(LOOPBACK) as api:
        api.generate_project(mlf, "/unused/crt", project, {"board": "b1"})
    return project


@pytest.mark.skipif(sys.platform == "win32", reason="FIFOs are POSIX")
def test_sigkilled_server_leaves_no_fifo_folder(generated, tmp_path, monkeypatch):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))  # where the server's FifoEndpoint makes its folder
    api = client.instantiate_from_dir(generated)
    t = transport.ProjectTransport(api, {"transport": "fifo"})
    t.open()
    try:
        assert t.endpoint is not None and t.endpoint["type"] == "fifo"
        # Both ends are open, so the FIFOs and their folder are gone already...
        assert list(tmp.iterdir()) == []
        t.write(b"ping", 5.0)  # ...and the link still works.
        got = b""
        while len(got) < 4:
            got += t.read(4 - len(got), 5.0)
        assert got == b"ping"
        os.kill(api.process.pid, signal.SIGKILL)
        api.process.wait()
    finally:
        try:
            t.close()
        except errors.ProjectAPIError:
            pass  # the server is dead: close_transport cannot be answered
        api.shutdown()
    assert list(tmp.iterdir()) == []

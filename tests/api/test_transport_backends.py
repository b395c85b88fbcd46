"""Transport backends, the Timeout value object, and the server's fd helpers."""

from __future__ import annotations

import os
import threading
import time

import pytest
from rpc_fixtures import ClientServerFixture, mock_handler

from project_api import server
from project_api.api import transport
from project_api.errors import IoTimeoutError, TransportClosedError

# --- Timeout ---------------------------------------------------------------------------------


def test_timeout_infinite_and_non_blocking():
    forever = transport.Timeout(None)
    assert forever.is_infinite and not forever.is_non_blocking
    assert forever.time_left() is None and not forever.expired()
    now = transport.Timeout(0)
    assert now.is_non_blocking and not now.is_infinite
    assert now.time_left() == 0 and now.expired()


def test_timeout_counts_down_and_restarts():
    t = transport.Timeout(0.05)
    left = t.time_left()
    assert 0 < left <= 0.05
    time.sleep(0.06)
    assert t.expired() and t.time_left() == 0
    t.restart(10)
    assert not t.expired() and t.time_left() > 9
    with pytest.raises(ValueError):
        transport.Timeout(-1)


# --- LoopTransport ---------------------------------------------------------------------------


def test_loop_transport_round_trip_and_partial_reads():
    with transport.LoopTransport() as loop:
        loop.write(b"hello world", 1.0)
        assert loop.read(5, 1.0) == b"hello"
        assert loop.read(100, 1.0) == b" world"
        with pytest.raises(IoTimeoutError):
            loop.read(1, 0)
        with pytest.raises(IoTimeoutError):
            loop.read(1, 0.02)
    with pytest.raises(TransportClosedError):
        loop.read(1, 0)
    with pytest.raises(TransportClosedError):
        loop.write(b"x", 0)


def test_loop_transport_wakes_a_waiting_reader():
    loop = transport.LoopTransport()
    loop.open()
    threading.Timer(0.05, loop.write, args=(b"late", 1.0)).start()
    assert loop.read(10, 5.0) == b"late"
    loop.close()


def test_loop_transport_capacity_times_out_writes():
    loop = transport.LoopTransport(capacity_bytes=4)
    loop.open()
    loop.write(b"abcd", 0)
    with pytest.raises(IoTimeoutError):
        loop.write(b"e", 0.01)
    assert loop.timeouts() == transport.debug_transport_timeouts()


# --- FdTransport and the server helpers ------------------------------------------------------


@pytest.fixture
def pipe_pair():
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:
            pass


def test_fd_transport_over_a_pipe():
    r, w = os.pipe()
    t = transport.FdTransport(r, w)
    with t:
        t.write(b"x" * 1000, 1.0)
        got = b""
        while len(got) < 1000:
            got += t.read(300, 1.0)
        assert got == b"x" * 1000
        with pytest.raises(IoTimeoutError):
            t.read(1, 0.01)
    with pytest.raises(TransportClosedError):
        t.read(1, 0)


def test_fd_transport_eof_and_broken_pipe():
    r1, w1 = os.pipe()  # we read r1
    r2, w2 = os.pipe()  # we write w2
    t = transport.FdTransport(r1, w2)
    os.close(w1)
    with pytest.raises(TransportClosedError):
        t.read(10, 1.0)
    os.close(r2)
    with pytest.raises(TransportClosedError):
        t.write(b"data", 1.0)
    t.close()


def test_fd_transport_write_timeout_when_pipe_is_full():
    r, w = os.pipe()
    t = transport.FdTransport(r, w)
    with pytest.raises(IoTimeoutError):
        t.write(b"\0" * (4 << 20), 0.05)
    t.close()


def test_read_with_timeout(pipe_pair):
    r, w = pipe_pair
    with pytest.raises(IoTimeoutError):
        server.read_with_timeout(r, 10, 0.01)
    os.write(w, b"abc")
    assert server.read_with_timeout(r, 10, 1.0) == b"abc"
    os.write(w, b"abcdef")
    assert server.read_with_timeout(r, 2, None) == b"ab"
    os.close(w)
    assert server.read_with_timeout(r, 10, 0) == b"cdef"
    with pytest.raises(TransportClosedError):
        server.read_with_timeout(r, 10, 1.0)
    os.fstat(r)  # still open: closing it is the owner's job


def test_write_with_timeout(pipe_pair):
    r, w = pipe_pair
    assert server.write_with_timeout(w, b"hello", 1.0) == 5
    assert os.read(r, 10) == b"hello"
    os.set_blocking(w, False)
    big = b"\0" * (4 << 20)
    written = server.write_with_timeout(w, big, 0.05)
    assert 0 < written < len(big)  # a partial write reports its count
    with pytest.raises(IoTimeoutError):
        server.write_with_timeout(w, b"more", 0.01)
    os.close(r)
    with pytest.raises(TransportClosedError):
        server.write_with_timeout(w, b"more", 1.0)


# --- FifoEndpoint --------------------------------------------------------------------------------


def test_fifo_endpoint_round_trip_with_a_device_thread(tmp_path):
    endpoint = server.FifoEndpoint(directory=tmp_path)
    info = endpoint.to_json()
    assert info == {
        "type": "fifo",
        "rx_path": str(endpoint.rx_path),
        "tx_path": str(endpoint.tx_path),
        "remove_after_open": True,
    }
    dev_read, dev_write = endpoint.open_device_fds()

    def device():  # upper-cases what it receives, until EOF
        while True:
            data = os.read(dev_read, 4096)
            if not data:
                break
            os.write(dev_write, data.upper())
        os.close(dev_write)

    t = transport.FdTransport.for_fifos(info["rx_path"], info["tx_path"])
    t.open()
    thread = threading.Thread(target=device)
    thread.start()
    t.write(b"abc" * 1000, 1.0)
    got = b""
    while len(got) < 3000:
        got += t.read(3000, 2.0)
    assert got == b"ABC" * 1000
    # The endpoint's spare writer keeps the device from seeing EOF until it closes.
    t.close()
    assert thread.is_alive()
    endpoint.close()
    thread.join(2)
    assert not thread.is_alive()
    os.close(dev_read)
    assert not endpoint.dir.exists()


def test_fifo_client_sees_eof_when_the_device_closes(tmp_path):
    endpoint = server.FifoEndpoint(directory=tmp_path)
    dev_read, dev_write = endpoint.open_device_fds()
    t = transport.FdTransport.for_fifos(endpoint.rx_path, endpoint.tx_path)
    t.open()
    os.write(dev_write, b"bye")
    os.close(dev_write)
    assert t.read(10, 1.0) == b"bye"
    with pytest.raises(TransportClosedError):
        t.read(10, 1.0)
    t.close()
    os.close(dev_read)
    endpoint.close()


def test_fifo_open_without_device_fails_cleanly(tmp_path):
    endpoint = server.FifoEndpoint(directory=tmp_path)
    t = transport.FdTransport.for_fifos(endpoint.rx_path, endpoint.tx_path)
    with pytest.raises(TransportClosedError):
        t.open()
    endpoint.close()


# --- SerialTransport -------------------------------------------------------------------------


def test_serial_transport_over_pyserial_loop_url():
    with transport.SerialTransport("loop://", 115200) as t:
        t.write(b"serial bytes", 1.0)
        got = b""
        while len(got) < 12:
            got += t.read(64, 1.0)
        assert got == b"serial bytes"
        with pytest.raises(IoTimeoutError):
            t.read(1, 0.01)
    with pytest.raises(TransportClosedError):
        t.read(1, 0)


def test_serial_transport_bad_port():
    t = transport.SerialTransport("/nonexistent/ttyNOPE")
    with pytest.raises(TransportClosedError):
        t.open()


# --- ProjectTransport over an in-process server ----------------------------------------------


def test_project_transport_uses_json_rpc_without_endpoint():
    loop = transport.LoopTransport()
    loop.open()
    timeouts = server.TransportTimeouts(1.0, 2.0, 3.0)
    fixture = ClientServerFixture(
        mock_handler(
            open_transport={"return_value": timeouts},
            close_transport={"return_value": None},
            read_transport={"side_effect": loop.read},
            write_transport={"side_effect": loop.write},
        )
    )
    t = transport.ProjectTransport(fixture.client, {"o": 1})
    with t:
        assert t.timeouts() == timeouts
        assert t.endpoint is None
        t.write(b"\x00\x01abc", 1.0)
        assert t.read(3, 1.0) == b"\x00\x01a"
        assert t.read(3, 1.0) == b"bc"
        with pytest.raises(IoTimeoutError):
            t.read(3, 0)
    fixture.handler.open_transport.assert_called_once_with({"o": 1})
    fixture.handler.close_transport.assert_called_once_with()
    assert fixture.client.is_shutdown


def test_project_transport_uses_serial_endpoint():
    timeouts = server.TransportTimeouts(0, 0, 0)
    fixture = ClientServerFixture(
        mock_handler(
            open_transport={
                "return_value": {
                    "timeouts": timeouts,
                    "endpoint": {"type": "serial", "port": "loop://"},
                }
            },
            close_transport={"return_value": None},
        )
    )
    t = transport.ProjectTransport(fixture.client, shutdown_client=False)
    with t:
        assert t.endpoint == {"type": "serial", "port": "loop://"}
        t.write(b"direct", 1.0)
        assert t.read(6, 1.0) == b"direct"
    assert not fixture.client.is_shutdown
    fixture.handler.close_transport.assert_called_once_with()


def test_project_transport_closes_the_server_side_if_the_endpoint_fails():
    fixture = ClientServerFixture(
        mock_handler(
            open_transport={
                "return_value": {
                    "timeouts": server.TransportTimeouts(0, 0, 0),
                    "endpoint": {
                        "type": "fifo",
                        "rx_path": "/nonexistent/rx",
                        "tx_path": "/nonexistent/tx",
                    },
                }
            },
            close_transport={"return_value": None},
        )
    )
    t = transport.ProjectTransport(fixture.client, shutdown_client=False)
    with pytest.raises(TransportClosedError) as info:
        t.open()
    assert "/nonexistent/rx" in info.value.data["reason"]
    fixture.handler.close_transport.assert_called_once_with()
    with pytest.raises(TransportClosedError):
        t.timeouts()


def _loop_fixture():
    loop = transport.LoopTransport()
    loop.open()
    fixture = ClientServerFixture(
        mock_handler(
            open_transport={"return_value": server.TransportTimeouts(0, 0, 0)},
            close_transport={"return_value": None},
            read_transport={"side_effect": loop.read},
            write_transport={"side_effect": loop.write},
        )
    )
    return loop, fixture


def test_pipelined_writes_round_trip_and_stay_in_step():
    loop, fixture = _loop_fixture()
    t = transport.ProjectTransport(fixture.client, pipeline_writes=True, shutdown_client=False)
    with t:
        for i in range(5):
            payload = bytes([i]) * (i + 1)
            t.write(payload, 1.0)
            assert fixture.client._pending is not None
            assert t.read(100, 1.0) == payload
            assert fixture.client._pending is None
        # A failed write is reported by the next call, and the exchange stays in step.
        fixture.handler.write_transport.side_effect = server.TransportClosedError
        t.write(b"lost", 1.0)
        with pytest.raises(TransportClosedError) as info:
            t.read(10, 0)
        assert "calling method write_transport" in str(info.value)
        fixture.handler.write_transport.side_effect = loop.write
        t.write(b"again", 1.0)
        assert t.read(10, 1.0) == b"again"
        t.write(b"unread", 1.0)
    # close collected the last write's reply before close_transport.
    assert fixture.client._pending is None
    fixture.handler.close_transport.assert_called_once_with()
    assert fixture.client_to_server.buf == b"" and fixture.server_to_client.buf == b""


def test_pipelined_write_error_at_close_is_logged_not_raised(caplog):
    loop, fixture = _loop_fixture()
    t = transport.ProjectTransport(fixture.client, pipeline_writes=True)
    t.open()
    fixture.handler.write_transport.side_effect = server.IoTimeoutError
    t.write(b"x", 0)
    with caplog.at_level("WARNING", logger="project_api.api.transport"):
        t.close()
    assert "the last write before close failed" in caplog.text
    fixture.handler.close_transport.assert_called_once_with()
    assert fixture.client.is_shutdown

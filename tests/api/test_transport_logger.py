"""TransportLogger reproduces microTVM's transport log lines exactly (spec §1.11, §7.2)."""

from __future__ import annotations

import logging
from unittest import mock

import pytest

from project_api.api import transport
from project_api.errors import IoTimeoutError, TransportClosedError


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def logged():
    logger = logging.getLogger("transport_logger_test")
    records = _Records()
    logger.addHandler(records)
    logger.setLevel(logging.DEBUG)
    child = mock.Mock(spec=transport.Transport)
    yield transport.TransportLogger("foo", child, logger=logger), child, records.messages
    logger.removeHandler(records)


def test_open(logged):
    tl, child, messages = logged
    tl.open()
    child.open.assert_called_once_with()
    assert messages[-1] == "foo: opening transport"


def test_close(logged):
    tl, child, messages = logged
    tl.close()
    child.close.assert_called_once_with()
    assert messages[-1] == "foo: closing transport"


def test_read_normal(logged):
    tl, child, messages = logged
    child.read.return_value = b"data"
    assert tl.read(23, 3.0) == b"data"
    child.read.assert_called_once_with(23, 3.0)
    assert messages[-1] == "foo: read { 3.00s}   23 B -> [  4 B]: 64 61 74 61" + " " * 38 + "data"


def test_read_multiline(logged):
    tl, child, messages = logged
    child.read.return_value = b"data" * 6
    assert tl.read(23, 3.0) == b"data" * 6
    assert messages[-1] == (
        "foo: read { 3.00s}   23 B -> [ 24 B]:\n"
        "0000  64 61 74 61 64 61 74 61 64 61 74 61 64 61 74 61  datadatadatadata\n"
        "0010  64 61 74 61 64 61 74 61                          datadata"
    )


def test_read_unprintable_and_empty(logged):
    tl, child, messages = logged
    child.read.return_value = b"a \x00\xff~"
    tl.read(5, None)
    assert (
        messages[-1] == "foo: read { None }    5 B -> [  5 B]: 61 20 00 ff 7e" + " " * 35 + "a...~"
    )
    child.read.return_value = b""
    tl.read(5, 1)
    assert messages[-1] == "foo: read { 1.00s}    5 B -> [  0 B]: "


def test_read_no_timeout_prints(logged):
    tl, child, messages = logged
    child.read.return_value = b"data"
    tl.read(15, None)
    assert messages[-1] == "foo: read { None }   15 B -> [  4 B]: 64 61 74 61" + " " * 38 + "data"


def test_read_io_timeout(logged):
    tl, child, messages = logged
    child.read.side_effect = IoTimeoutError
    with pytest.raises(IoTimeoutError):
        tl.read(23, 0.0)
    assert messages[-1] == "foo: read { 0.00s}   23 B -> [IoTimeoutError  0.00s]"


def test_read_other_exception(logged):
    tl, child, messages = logged
    child.read.side_effect = TransportClosedError
    with pytest.raises(TransportClosedError):
        tl.read(8, 0.0)
    assert messages[-1] == "foo: read { 0.00s}    8 B -> [err: TransportClosedError]"


def test_read_keyboard_interrupt(logged):
    tl, child, messages = logged
    child.read.side_effect = KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        tl.read(8, 0.0)
    assert messages == []


def test_write_normal(logged):
    tl, child, messages = logged
    tl.write(b"data", 3.0)
    child.write.assert_called_once_with(b"data", 3.0)
    assert messages[-1] == "foo: write { 3.00s}        <- [  4 B]: 64 61 74 61" + " " * 38 + "data"


def test_write_multiline(logged):
    tl, child, messages = logged
    tl.write(b"data" * 6, 3.0)
    assert messages[-1] == (
        "foo: write { 3.00s}        <- [ 24 B]:\n"
        "0000  64 61 74 61 64 61 74 61 64 61 74 61 64 61 74 61  datadatadatadata\n"
        "0010  64 61 74 61 64 61 74 61                          datadata"
    )


def test_write_no_timeout_prints(logged):
    tl, child, messages = logged
    tl.write(b"data", None)
    assert messages[-1] == "foo: write { None }        <- [  4 B]: 64 61 74 61" + " " * 38 + "data"


def test_write_io_timeout(logged):
    tl, child, messages = logged
    child.write.side_effect = IoTimeoutError
    with pytest.raises(IoTimeoutError):
        tl.write(b"data", 0.0)
    assert messages[-1] == "foo: write { 0.00s}       <- [  4 B]: [IoTimeoutError  0.00s]"


def test_write_other_exception(logged):
    tl, child, messages = logged
    child.write.side_effect = TransportClosedError
    with pytest.raises(TransportClosedError):
        tl.write(b"data", 0.0)
    assert messages[-1] == "foo: write { 0.00s}       <- [  4 B]: [err: TransportClosedError]"


def test_write_keyboard_interrupt(logged):
    tl, child, messages = logged
    child.write.side_effect = KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        tl.write(b"data", 0.0)
    assert messages == []


def test_debug_transport_logs_hex_dumps_at_debug(caplog):
    loop = transport.LoopTransport()
    wrapped = transport.debug_transport(loop, name="dbg")
    with caplog.at_level(logging.DEBUG, logger="project_api.api.transport"):
        with wrapped:
            wrapped.write(b"\x01\x02hi", 1.0)
            assert wrapped.read(10, 1.0) == b"\x01\x02hi"
    messages = [r.getMessage() for r in caplog.records if r.name == "project_api.api.transport"]
    assert messages == [
        "dbg: opening transport",
        "dbg: write { 1.00s}        <- [  4 B]: 01 02 68 69" + " " * 38 + "..hi",
        "dbg: read { 1.00s}   10 B -> [  4 B]: 01 02 68 69" + " " * 38 + "..hi",
        "dbg: closing transport",
    ]
    assert all(
        r.levelno == logging.DEBUG for r in caplog.records if r.name == "project_api.api.transport"
    )

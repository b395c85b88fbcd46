"""Issue 35: serial URLs come from an allowlist; spy:// with file= and hwgrep:// are refused before
pyserial runs their handler (which creates or truncates a file, or scans the machine's ports)."""

from __future__ import annotations

from pathlib import Path

import pytest

from project_api.api.transport import SerialTransport, serial_url_refusal
from project_api.errors import OptionValueError, TransportClosedError
from project_api.template.remote_serial import network_uart_link


def test_spy_file_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    url = f"spy:///dev/null?file={victim}"
    with pytest.raises(TransportClosedError) as exc:
        SerialTransport(url).open()
    reason = exc.value.data["reason"]
    assert "file=" in reason and "socket://" in reason and "rfc2217://" in reason
    assert victim.read_text() == "keep me"
    created = tmp_path / "new.txt"
    with pytest.raises(OptionValueError, match="-o serial_url"):
        network_uart_link(f"spy:///dev/null?file={created}", 115200)
    assert not created.exists()


def test_hwgrep_is_refused_unless_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROJECT_API_ALLOW_HWGREP", raising=False)
    assert "hwgrep:// is not accepted" in serial_url_refusal("hwgrep://.*")
    monkeypatch.setenv("PROJECT_API_ALLOW_HWGREP", "1")
    assert serial_url_refusal("hwgrep://.*") is None


@pytest.mark.parametrize("url", ["socket://localhost:4000", "rfc2217://h:1", "loop://",
                                 "/dev/ttyACM0", "COM3", "spy://loop://"])
def test_accepted_urls(url: str) -> None:
    assert serial_url_refusal(url) is None


@pytest.mark.parametrize("url", ["alt:///dev/ttyS0?class=PosixPollSerial", "cp2110://0001:0004",
                                 "ftp://x", "socket://h:1\n"])
def test_other_schemes_are_refused(url: str) -> None:
    assert "accepted: a device path" in serial_url_refusal(url)


def test_loop_url_still_opens_and_echoes() -> None:
    t = SerialTransport("loop://")
    t.open()
    try:
        t.write(b"abc", 1.0)
        assert t.read(3, 1.0) == b"abc"
    finally:
        t.close()


def test_long_url_is_quoted_short() -> None:
    reason = serial_url_refusal("ftp://" + "a" * 120_000)
    assert len(reason) < 500 and "120006 characters" in reason

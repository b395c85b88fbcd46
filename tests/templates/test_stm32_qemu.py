"""project_api/template/qemu.py on its own: the FIFO serial line, a QEMU that fails to start,
and a QEMU that cannot outlive the process that started it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import require_tool

from project_api.errors import ServerError
from project_api.template.qemu import QemuSerialLine, start_qemu, wait_for_banner


def test_serial_line_fifos_and_endpoint(tmp_path: Path) -> None:
    line = QemuSerialLine(directory=tmp_path)
    assert stat.S_ISFIFO(line.tx_path.stat().st_mode) and stat.S_ISFIFO(line.rx_path.stat().st_mode)
    assert line.qemu_args("uart") == ["-chardev", f"pipe,id=uart,path={line.dir / 'uart'}"]
    endpoint = line.to_json()
    assert endpoint["type"] == "fifo" and endpoint["tx_path"].endswith("uart.in")
    assert endpoint["rx_path"].endswith("uart.out") and endpoint["remove_after_open"] is True
    transport = line.open()
    transport.open()  # the spare ends let both ends open before any QEMU runs
    transport.close()
    line.close()
    line.close()
    assert not line.dir.exists()


def test_emulator_that_exits_is_one_clear_error(tmp_path: Path) -> None:
    require_tool("qemu-system-arm")
    line = QemuSerialLine(directory=tmp_path)
    log = tmp_path / "qemu.log"
    qemu = start_qemu(["qemu-system-arm", "-M", "netduinoplus2", "-nographic", "-monitor", "none",
                       "-kernel", str(tmp_path / "missing.elf"), *line.qemu_args("uart"),
                       "-serial", "chardev:uart"], cwd=tmp_path, log_path=log)
    transport = line.open()
    try:
        transport.open()
        with pytest.raises(ServerError) as info:
            wait_for_banner(transport, b"ready", 20.0, qemu, log, line)
        message = str(info.value)
        assert "emulator exited with status" in message and "missing.elf" in message
    finally:
        transport.close()
        qemu.close()
        line.close()


def test_qemu_refuses_to_start_when_its_parent_is_gone(tmp_path: Path) -> None:
    """The wrapper checks the parent after PR_SET_PDEATHSIG, closing the fork/exec race."""
    require_tool("qemu-system-arm")
    import project_api.template.qemu as qemu_mod

    out = subprocess.run(
        [sys.executable, "-c", qemu_mod._PDEATHSIG_WRAPPER, str(os.getpid() + 999999), "/bin/true"],
        capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "gone" in out.stderr
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", qemu_mod._PDEATHSIG_WRAPPER, str(os.getpid()), "/bin/true"],
        capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and time.monotonic() - started < 30

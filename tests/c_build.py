"""Building and running the C programs of ``crt/`` from pytest (shared by the test_crt_* modules).

``make -k`` with the ``test`` or ``run-<program>`` targets of ``crt/Makefile`` prints each
program's output between ``=== <name>`` and ``=== <name> exit <rc>``; every C test program ends
its output with ``N passed, M failed``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from conftest import require_tool

REPORT_RE = re.compile(r"^=== (\S+)\n(.*?)^=== \1 exit (-?\d+)$", re.S | re.M)
SUMMARY_RE = re.compile(r"(\d+) passed, (\d+) failed")


def run_make(directory: Path, build: Path, *args: str,
             timeout: float | None = 900) -> subprocess.CompletedProcess[str]:
    """``make -C directory BUILD=build -j2 args...`` with its output captured (not checked)."""
    make = require_tool("make")
    return subprocess.run(
        [make, "-C", str(directory), f"BUILD={build}", "-j2", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def program_reports(output: str) -> dict[str, tuple[int, str]]:
    """Each program's (exit code, output) from the ``=== <name>`` blocks in make's output."""
    return {m.group(1): (int(m.group(3)), m.group(2)) for m in REPORT_RE.finditer(output)}


def assert_program_passed(program: str, rc: int, output: str) -> None:
    """The program exited 0, its ``N passed, M failed`` lines show passes and no failure, and no
    sanitizer reported anything."""
    summaries = SUMMARY_RE.findall(output)
    assert summaries, f"{program} printed no 'N passed, M failed' line (exit {rc}):\n{output[-6000:]}"
    assert rc == 0, f"{program} exited {rc}:\n{output[-6000:]}"
    for passed, failed in summaries:
        assert int(passed) > 0 and int(failed) == 0, f"{program} failed:\n{output[-6000:]}"
    assert "runtime error" not in output and "AddressSanitizer" not in output, output[-4000:]

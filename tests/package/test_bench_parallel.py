"""scripts/bench_parallel.py: the counting benchmarks share the cores, their outputs stay whole
and in the order given, and one that fails fails the line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_parallel.py"


def _bench(path: Path, body: str) -> str:
    path.write_text(body)
    return str(path)


def test_outputs_come_whole_in_order_and_a_failure_fails(tmp_path):
    slow = _bench(tmp_path / "slow.py",
                  "import time\nprint('slow 1')\ntime.sleep(0.5)\nprint('slow 2')\n")
    fast = _bench(tmp_path / "fast.py", "print('fast')\n")
    bad = _bench(tmp_path / "bad.py", "import sys\nprint('bad ran')\nsys.exit(3)\n")
    r = subprocess.run([sys.executable, str(SCRIPT), "--jobs", "2", slow, fast],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "slow 1\nslow 2\nfast\n"
    assert f"bench: {slow} took" in r.stderr and f"bench: {fast} took" in r.stderr
    r = subprocess.run([sys.executable, str(SCRIPT), "--jobs", "2", fast, bad],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert r.stdout == "fast\nbad ran\n"
    assert f"{bad} took" in r.stderr and "exit 3" in r.stderr and f"failed: {bad}" in r.stderr


def test_a_missing_benchmark_is_named(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "nope.py")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no such benchmark" in r.stderr and "nope.py" in r.stderr

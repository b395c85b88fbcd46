"""libFuzzer runs of the device-side wire parsers (crt/fuzz): unframer, session, RPC decoder, whole server.

Each target is built with clang (-fsanitize=fuzzer,address,undefined) and run from seed corpora
written from the spec's golden frames, for a bounded time and memory. Any crash, sanitizer
report, leak, timeout or out-of-memory fails the test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from c_build import run_make
from conftest import require_tool

REPO_ROOT = Path(__file__).resolve().parents[2]
FUZZ_DIR = REPO_ROOT / "crt" / "fuzz"
TARGETS = ["fuzz_unframer", "fuzz_session", "fuzz_rpc_packet", "fuzz_rpc_server",
           "fuzz_mlperftiny"]
SECONDS = int(os.environ.get("CRT_FUZZ_SECONDS", "15"))
RSS_LIMIT_MB = 512


@pytest.fixture(scope="module")
def fuzz_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_tool("clang")
    build = tmp_path_factory.mktemp("crt_fuzz")
    result = run_make(FUZZ_DIR, build, f"PYTHON={sys.executable}", timeout=None)
    assert result.returncode == 0, f"fuzz build failed:\n{result.stdout}\n{result.stderr}"
    return build


def test_corpus_written_from_goldens(fuzz_build: Path) -> None:
    for name in ("unframer", "session", "rpc_packet", "rpc_server", "mlperftiny"):
        seeds = sorted((fuzz_build / "corpus" / name).glob("seed_*"))
        assert seeds, f"no seeds for {name}"
    # The spec's §4.8 request is among the RPC seeds, byte for byte (after the session header).
    golden = bytes.fromhex(
        "2500000000000000 09000000 01000000 0b000000 1100000000000000" + b"runtime.SystemLib".hex()
    )
    seeds = [p.read_bytes() for p in (fuzz_build / "corpus" / "rpc_packet").glob("seed_*")]
    assert golden in seeds


@pytest.mark.parametrize("target", TARGETS)
def test_fuzz_target_runs_clean(fuzz_build: Path, target: str) -> None:
    name = target.removeprefix("fuzz_")
    work = fuzz_build / "work" / name
    work.mkdir(parents=True, exist_ok=True)
    cmd = [
        str(fuzz_build / target),
        f"-max_total_time={SECONDS}",
        "-runs=5000000",
        f"-rss_limit_mb={RSS_LIMIT_MB}",
        f"-malloc_limit_mb={RSS_LIMIT_MB}",
        "-max_len=4096",
        "-timeout=10",
        "-print_final_stats=1",
        f"-artifact_prefix={fuzz_build / target}-",
        str(work),
        str(fuzz_build / "corpus" / name),
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=SECONDS + 120, check=False)
    log = result.stderr[-4000:]
    assert result.returncode == 0, f"{target} found a problem (exit {result.returncode}):\n{log}"
    assert "ERROR: " not in result.stderr, log
    assert "stat::number_of_executed_units" in result.stderr, log

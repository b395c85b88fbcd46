#!/usr/bin/env python3
"""Run benchmarks whose figures do not depend on the machine's load side by side, then print
their outputs whole, one after the other, in the order given.

Only for benchmarks that count (instructions under QEMU ``-icount``, bytes of code and RAM):
their figures are the same however busy the machine is. Benchmarks that time something run
alone (the Makefile's ``bench`` target runs them one by one before these).

Usage: python scripts/bench_parallel.py [--jobs N] SCRIPT [SCRIPT ...]
Each SCRIPT runs as ``python SCRIPT``; the exit status is 1 when any of them failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def _run(script: str) -> tuple[int, str, str, float]:
    start = time.monotonic()
    proc = subprocess.run([sys.executable, script], capture_output=True, text=True,
                          check=False)
    return proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                    help="benchmarks run at once (default: the number of cores)")
    ap.add_argument("scripts", nargs="+", metavar="SCRIPT")
    args = ap.parse_args(argv)
    missing = [s for s in args.scripts if not Path(s).is_file()]
    if missing:
        ap.error(f"no such benchmark: {', '.join(missing)}")
    print(f"bench: running {', '.join(args.scripts)}, {max(1, args.jobs)} at a time "
          "(each prints when all are done)", file=sys.stderr, flush=True)
    failed = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for script, (rc, out, err, took) in zip(args.scripts, pool.map(_run, args.scripts),
                                                strict=True):
            sys.stdout.write(out)
            sys.stdout.flush()
            sys.stderr.write(err)
            status = "" if rc == 0 else f", exit {rc}"
            print(f"bench: {script} took {took:.0f} s{status}", file=sys.stderr, flush=True)
            if rc != 0:
                failed.append(script)
    if failed:
        print(f"bench: failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Where the test suite's time goes: a pytest JUnit XML file's test times grouped by family.

    .venv/bin/python -m pytest --junitxml=build/junit.xml
    python scripts/durations.py build/junit.xml                   # one run
    python scripts/durations.py before.xml after.xml --markdown   # two runs side by side

A family is what dominates a test module's cost (a module is classified as a whole, by the
first rule of FAMILIES its file name matches): firmware builds run on the host, QEMU boots,
TFLite Micro reference runs of whole models, wheel builds, libFuzzer runs, randomized parity
cases (one emitted operator against TFLite Micro and LiteRT), and the rest. A test's time is
JUnit's: set-up, call and tear-down, so a module fixture's build is counted in the test that
first asked for it. Under pytest-xdist the sum of test times is the work the workers shared;
the wall time (the test suite's own figure) is what CI waits for.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

# (family, pattern on the test module's name): first match wins.
FAMILIES: list[tuple[str, str]] = [
    ("fuzzers", r"^test_crt_fuzz$"),
    ("wheel builds", r"^test_(wheel|extras)$"),
    ("parity cases", r"^test_(emit_random|emit_random_networks|ops_\w+|emit_coverage)$"),
    ("TFLM reference runs", r"^test_(emit_models|numpy_reference|builder|builder_reference"
                            r"|analyze|validate_references|validate_layers)$"),
    ("QEMU boots", r"^test_(stm32_\w+|labgrid|remote_serial|zephyr_qemu|emit_cortex_m"
                   r"|mlperftiny_runner|profile_stm32|mlperftiny_protocol)$"),
    ("firmware builds", r"^test_(e2e_host|host_\w+|cli_messages|cli_failures|recovery_\w+"
                        r"|mlperftiny_recovery|validate|tvm_corpus|tvm_graph_\w+|profile"
                        r"|kernel_targets|faults_host|device_lifecycle|reopen_build_hash"
                        r"|ai_api|crt_unit|crt_rpc\w*|crt_naming|crt_headers|micro_interop"
                        r"|zephyr_template|injection|project|client_subprocess|cli)$"),
    ("other", r""),
]


def family(module: str) -> str:
    """The family of a test module (``test_wheel``)."""
    for name, pattern in FAMILIES:
        if re.search(pattern, module):
            return name
    raise AssertionError("the last rule matches everything")


def read(path: Path) -> tuple[dict[str, float], float]:
    """Test id -> seconds, and the run's wall time (the test suite's ``time``)."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    times: dict[str, float] = {}
    for case in root.iter("testcase"):
        classname = case.get("classname", "")
        times[f"{classname}::{case.get('name')}"] = float(case.get("time") or 0)
    return times, sum(float(s.get("time") or 0) for s in suites)


def module_of(test_id: str) -> str:
    # classname is tests.test_x (or tests.test_x.TestClass)
    parts = test_id.split("::", 1)[0].split(".")
    return next((p for p in parts if p.startswith("test_")), parts[-1])


def group(times: dict[str, float]) -> dict[str, tuple[int, float]]:
    out: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for test_id, seconds in times.items():
        row = out[family(module_of(test_id))]
        row[0] += 1
        row[1] += seconds
    return {k: (v[0], v[1]) for k, v in out.items()}


def table(runs: list[tuple[str, dict[str, float], float]], markdown: bool) -> str:
    grouped = [group(times) for _, times, _ in runs]
    names = [n for n, _ in FAMILIES if any(n in g for g in grouped)]
    head = ["family"]
    for label, _, _ in runs:
        head += [f"tests ({label})", f"s ({label})"]
    rows = []
    for n in names:
        row = [n]
        for g in grouped:
            count, seconds = g.get(n, (0, 0.0))
            row += [f"{count:,}", f"{seconds:,.0f}"]
        rows.append(row)
    total = ["sum of test times"]
    wall = ["wall time of the run"]
    for (_, times, suite_time), _g in zip(runs, grouped, strict=True):
        total += [f"{len(times):,}", f"{sum(times.values()):,.0f}"]
        wall += ["", f"{suite_time:,.0f}"]
    rows += [total, wall]
    if markdown:
        lines = ["| " + " | ".join(head) + " |",
                 "|" + "|".join(["---"] + ["--:"] * (len(head) - 1)) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    fmt = "  ".join(f"{{:{'<' if i == 0 else '>'}{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*r) for r in [head, *rows])


def slowest_modules(times: dict[str, float], count: int) -> str:
    per: dict[str, float] = defaultdict(float)
    for test_id, seconds in times.items():
        per[module_of(test_id)] += seconds
    top = sorted(per.items(), key=lambda kv: -kv[1])[:count]
    return "\n".join(f"{s:8.1f} s  {m}  ({family(m)})" for m, s in top)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 2)[2])
    ap.add_argument("junit", type=Path, nargs="+",
                    help="JUnit XML files of pytest runs (--junitxml); two give before and after")
    ap.add_argument("--labels", help="comma-separated column labels (default: before,after)")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table (docs/testing.md)")
    ap.add_argument("--modules", type=int, default=0, metavar="N",
                    help="also list the N slowest test modules of the last run")
    a = ap.parse_args(argv)
    labels = a.labels.split(",") if a.labels else (
        ["before", "after"] if len(a.junit) == 2 else [p.stem for p in a.junit])
    if len(labels) != len(a.junit):
        ap.error(f"--labels names {len(labels)} runs, {len(a.junit)} files were given")
    runs = []
    for label, path in zip(labels, a.junit, strict=True):
        try:
            times, wall = read(path)
        except (OSError, ET.ParseError) as e:
            print(f"durations: cannot read {path}: {e}", file=sys.stderr)
            return 2
        runs.append((label, times, wall))
    print(table(runs, a.markdown))
    if a.modules:
        print()
        print(slowest_modules(runs[-1][1], a.modules))
    return 0


if __name__ == "__main__":
    sys.exit(main())

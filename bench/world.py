"""The world sweep: every ``.tflite`` in a folder of models other people made, run as a new user
runs them, ``project-api run --template host --model M --check``, and held against TFLite Micro.

Each model gets one verdict:

* ``bit-exact``: every output equal to TFLite Micro's (``--check``), and, where the folder holds
  TFLM's own golden output beside the model (``NAME_golden_*.csv``, run on its
  ``NAME_input0_*.csv``), equal to that too;
* ``differs``: it ran, and an output differs from TFLM's or from the golden;
* ``refused``: project-api gave its one-line reason (the reason's kind is kept: unsupported
  operator, custom operator, too big, ...);
* ``n/a``: project-api ran it but TFLM itself cannot, so nothing says what is right;
* ``broken``: an internal error, a traceback, or no answer within ``--timeout``: a bug of ours.

The baseline, measured in the same run, is TFLM's own interpreter on the same models (with an
arena of ``--tflm-arena`` bytes): how many of them it runs at all. A refusal is "shared" when
TFLM cannot run that model either. The sweep prints the totals, then every model that is
neither bit-exact nor refused for a reason TFLM shares.

The models are not part of the repository (they are other people's files): point it at a
folder, e.g. the ``.tflite`` files of the repositories listed in ``bench/world_models.md``.
A ``provenance.json`` in the folder (a list of ``{"file", "repo", "path", "commit"}``) names
each model by its repository in the report.

    python bench/world.py MODELS_DIR [--jobs N] [--timeout S] [--json OUT.json] [--markdown OUT.md]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import csv
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent

#: The kinds of refusal, from the first words of project-api's one-line error.
REASONS: list[tuple[str, re.Pattern[str]]] = [
    ("custom operator", re.compile(r"custom operator|custom op|ethos-u|edgetpu|vela", re.I)),
    ("unsupported operator", re.compile(r"unsupported|not supported|no kernel|has no .*kernel", re.I)),
    ("too big", re.compile(r"too (big|large)|does not fit|exceeds|out of memory|MiB|overflow", re.I)),
    ("not a model", re.compile(r"not a tflite|flatbuffer|truncated|malformed|invalid model", re.I)),
    ("dtype", re.compile(r"dtype|type .* not", re.I)),
]


@dataclass
class Verdict:
    file: str
    name: str
    sha256: str
    bytes: int
    verdict: str = ""
    reason: str = ""
    detail: str = ""
    tflm: str = ""  # "runs" or TFLM's error
    golden: str = ""  # "", "equal", "differs"
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def _one_line(text: str, limit: int = 240) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.lower().startswith("error")]
    line = (errors or lines or [""])[-1]
    return line if len(line) <= limit else line[: limit - 3] + "..."


_TFLM_PROBE = r"""
import sys, numpy as np
from tflite_micro.python.tflite_micro import runtime
model = open(sys.argv[1], "rb").read()
interp = runtime.Interpreter.from_bytes(model, arena_size=int(sys.argv[2]))
given = [np.load(f) for f in sys.argv[4:]] if len(sys.argv) > 3 else []
i = 0
while True:
    try:
        d = interp.get_input_details(i)
    except Exception:
        break
    x = given[i].reshape(d["shape"]).astype(d["dtype"]) if given else np.zeros(d["shape"], d["dtype"])
    interp.set_input(x, i)
    i += 1
interp.invoke()
if len(sys.argv) > 3:
    golden = np.load(sys.argv[3])
    out = np.asarray(interp.get_output(0)).astype(np.int64).ravel()
    print("runs, its golden " + ("equal" if np.array_equal(out, golden) else "differs"))
else:
    print("runs")
"""


def tflm_status(path: Path, arena: int, timeout: float, golden: list[Path] | None = None) -> str:
    """Whether TFLM's own interpreter runs ``path`` (in a child: TFLM may abort the process);
    with ``golden`` (the golden .npy, then the inputs' .npy files), whether it gives it."""
    try:
        proc = subprocess.run([sys.executable, "-c", _TFLM_PROBE, str(path), str(arena),
                               *map(str, golden or [])],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"no answer in {timeout:.0f}s"
    last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
    if proc.returncode == 0 and last.startswith("runs"):
        return last
    return _one_line(proc.stderr or proc.stdout) or f"exit {proc.returncode}"


def golden_files(path: Path) -> tuple[list[Path], Path] | None:
    """TFLM's integration-test files beside a model: ``NAME_input<i>_T.csv`` for each input, in
    order, and ``NAME_golden_T.csv``."""
    inputs = []
    while True:
        found = sorted(path.parent.glob(f"{path.stem}_input{len(inputs)}_*.csv"))
        if not found:
            break
        inputs.append(found[0])
    goldens = sorted(path.parent.glob(f"{path.stem}_golden_*.csv"))
    return (inputs, goldens[0]) if inputs and goldens else None


def _read_csv(path: Path) -> np.ndarray:
    with path.open() as f:
        return np.array([int(v) for row in csv.reader(f) for v in row if v.strip()], dtype=np.int64)


def classify_reason(message: str) -> str:
    for kind, pattern in REASONS:
        if pattern.search(message):
            return kind
    return "other"


def sweep_one(path: Path, name: str, timeout: float, arena: int) -> Verdict:
    data = path.read_bytes()
    v = Verdict(file=str(path), name=name, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    start = time.monotonic()
    cmd = [sys.executable, "-m", "project_api", "run", "--template", "host", "--model", str(path),
           "--check", "--json", "-q", "--repeat", "1", "--number", "1"]
    pair = golden_files(path)
    with tempfile.TemporaryDirectory(prefix="world-") as tmp:
        golden = None
        if pair is not None:
            # The input's dtype and shape are the model's: let project-api reshape a flat .npy.
            for index, csv_path in enumerate(pair[0]):
                dtype = {"int8": np.int8, "int16": np.int16, "int32": np.int32,
                         "int64": np.int64}.get(csv_path.stem.rpartition("_")[2], np.int16)
                npy = Path(tmp) / f"input{index}.npy"
                np.save(npy, _read_csv(csv_path).astype(dtype))
                cmd += ["--input", f"{index}={npy}"]
            cmd += ["--reshape"]
            golden = _read_csv(pair[1])
            np.save(Path(tmp) / "golden.npy", golden)
            v.tflm = tflm_status(path, arena, timeout, [Path(tmp) / "golden.npy", *(
                Path(tmp) / f"input{i}.npy" for i in range(len(pair[0])))])
        else:
            v.tflm = tflm_status(path, arena, timeout)
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  cwd=tmp, env={**os.environ, "PYTHONPATH": str(REPO)})
        except subprocess.TimeoutExpired:
            v.verdict, v.detail = "broken", f"no answer in {timeout:.0f}s"
            v.seconds = time.monotonic() - start
            return v
    v.seconds = time.monotonic() - start
    if proc.returncode != 0:
        message = _one_line(proc.stderr)
        if "internal error" in proc.stderr or "Traceback" in proc.stderr or not message:
            v.verdict, v.detail = "broken", message or f"exit {proc.returncode}"
        else:
            v.verdict, v.reason, v.detail = "refused", classify_reason(message), message
        return v
    try:
        result = json.loads(proc.stdout)
    except json.JSONDecodeError:
        v.verdict, v.detail = "broken", "no JSON on stdout"
        return v
    checks = result.get("check") or []
    if golden is not None:
        outputs = list(result.get("outputs", {}).values())
        got = np.asarray(outputs[0]).astype(np.int64).ravel() if outputs else np.array([])
        v.golden = "equal" if got.shape == golden.shape and np.array_equal(got, golden) else "differs"
    tflm_off_golden = v.tflm.endswith("golden differs")
    if checks and all(": OK" in c for c in checks) and (v.golden != "differs" or tflm_off_golden):
        # equal to TFLM; where TFLM itself is off its golden file, TFLM's output is the reference
        v.verdict = "bit-exact"
    elif any("cannot run" in c or "not run" in c or "unavailable" in c for c in checks) or (
            not checks and not v.tflm.startswith("runs")):
        v.verdict, v.detail = "n/a", "; ".join(checks) or "TFLM cannot run it"
    else:
        v.verdict, v.detail = "differs", "; ".join(c for c in checks if ": OK" not in c) or (
            "golden output differs" if v.golden == "differs" else "no check ran")
    return v


def models_in(folder: Path) -> list[tuple[Path, str]]:
    names: dict[str, str] = {}
    prov = folder / "provenance.json"
    if prov.is_file():
        for entry in json.loads(prov.read_text()):
            names[str(Path(entry["file"]).resolve())] = f"{entry['repo']}:{entry['path']}"
    seen: set[str] = set()
    found = []
    for path in sorted(folder.rglob("*.tflite")):
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        found.append((path, names.get(str(path.resolve()), str(path.relative_to(folder)))))
    return found


def shared(v: Verdict) -> bool:
    """A refusal TFLM shares: TFLM cannot run that model either."""
    return v.verdict == "refused" and not v.tflm.startswith("runs")


def report(verdicts: list[Verdict], wall: float) -> str:
    n = len(verdicts)
    by = {k: [v for v in verdicts if v.verdict == k]
          for k in ("bit-exact", "differs", "refused", "n/a", "broken")}
    tflm_runs = sum(v.tflm.startswith("runs") for v in verdicts)
    lines = [f"world sweep: {n} distinct models in {wall:.0f} s",
             f"  TFLite Micro alone (the baseline, same run): runs {tflm_runs} of {n}",
             f"  project-api --check: bit-exact {len(by['bit-exact'])}, differs {len(by['differs'])}, "
             f"refused {len(by['refused'])} ({sum(map(shared, by['refused']))} of them TFLM cannot run "
             f"either), n/a {len(by['n/a'])}, broken {len(by['broken'])}"]
    goldens = [v for v in verdicts if v.golden]
    if goldens:
        lines.append(f"  TFLM's golden outputs: ours equal {sum(v.golden == 'equal' for v in goldens)}"
                     f" of {len(goldens)}; TFLM's own interpreter equal "
                     f"{sum(v.tflm.endswith('golden equal') for v in goldens)} of {len(goldens)}")
    reasons: dict[str, int] = {}
    for v in by["refused"]:
        reasons[v.reason] = reasons.get(v.reason, 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        lines.append(f"    refused, {reason}: {count}")
    odd = [v for v in verdicts if v.verdict != "bit-exact" and not shared(v)]
    if odd:
        lines.append(f"neither bit-exact nor refused for a reason TFLM shares ({len(odd)}):")
        for v in odd:
            lines.append(f"  {v.verdict:8} {v.name}: {v.detail or v.reason}  [TFLM: {v.tflm}]")
    return "\n".join(lines)


def markdown(verdicts: list[Verdict]) -> str:
    rows = ["| model | bytes | verdict | TFLM alone | detail |", "| --- | ---: | --- | --- | --- |"]
    for v in sorted(verdicts, key=lambda v: v.name):
        detail = (v.detail or v.reason).replace("|", "\\|")[:160]
        tflm = v.tflm if v.tflm.startswith("runs") else "cannot: " + v.tflm.replace("|", "\\|")[:80]
        rows.append(f"| `{v.name}` | {v.bytes} | {v.verdict}"
                    f"{' (golden ' + v.golden + ')' if v.golden else ''} | {tflm} | {detail} |")
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folders", nargs="+", type=Path, help="folders searched for .tflite files")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="models at once")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per model and step")
    ap.add_argument("--tflm-arena", type=int, default=64 << 20,
                    help="TFLM's arena for the baseline probe, bytes (default 64 MiB)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N models (0: all)")
    ap.add_argument("--json", type=Path, help="write every verdict here")
    ap.add_argument("--markdown", type=Path, help="write the table of models here")
    args = ap.parse_args(argv)
    models = [m for folder in args.folders for m in models_in(folder)]
    if args.limit:
        models = models[: args.limit]
    if not models:
        print(f"world: no .tflite under {', '.join(map(str, args.folders))}", file=sys.stderr)
        return 2
    start = time.monotonic()
    verdicts: list[Verdict] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(sweep_one, p, name, args.timeout, args.tflm_arena): name
                   for p, name in models}
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            v = future.result()
            verdicts.append(v)
            if sys.stderr.isatty():
                print(f"\r[{done}/{len(models)}] {v.verdict:9} {v.name[:60]:60}", end="",
                      file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(report(verdicts, time.monotonic() - start))
    if args.json:
        args.json.write_text(json.dumps([asdict(v) for v in verdicts], indent=1))
    if args.markdown:
        args.markdown.write_text(markdown(verdicts))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Validation throughput: KWS samples per second through the host template.

Builds a host project of the shared MLPerf Tiny KWS int8 model (``kws_ref_model_int8.tflite``),
makes ``--samples`` inputs with a seeded RNG and measures, in the same run:

* ``validate()`` (what ``project-api validate`` runs): every sample through ONE session, the
  next sample's input copy sent while the previous sample's run and output copy are answered
  (the FIFO endpoint's pipeline depth); the whole call is timed, session start included, with
  no reference and no device timing so that only the device path is measured;
* the same with one request at a time (``pipeline=False``), still one session;
* the naive loop a user would write around ``project-api run``: per sample a new session
  (``project.session()``: start the device process, handshake), create the model, set the
  input, run, read the output, close; in process, with the project's server already running,
  so it is the cheapest form of that loop; on ``--naive-samples`` of the samples;
* a few literal ``project-api run PRJ --input input_1=x.npy`` processes (``--cli-samples``),
  which also start Python, the project's server and time 3 x 10 runs.

Every path's outputs are checked equal to the streamed ones. Prints samples/s of each and the
ratio of ``validate()`` to the naive loop.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
MODEL = "kws_ref_model_int8.tflite"


def _models_dir() -> Path:
    shared = os.environ.get("PROJECT_API_SHARED")
    return (Path(shared) if shared else REPO.parent / "shared") / "models"


def _naive(project: object, x: np.ndarray) -> np.ndarray:
    """One session per sample, as a loop over single ``run`` calls does."""
    out = []
    for sample in x:
        with project.session() as session:  # type: ignore[attr-defined]
            model = session.model()
            model.set_input("input_1", sample)
            model.run()
            out.append(model.get_output(0))
    return np.stack(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=1000, help="samples streamed (default 1000)")
    ap.add_argument("--naive-samples", type=int, default=200,
                    help="samples of the one-session-per-sample loop (default 200)")
    ap.add_argument("--cli-samples", type=int, default=5,
                    help="literal 'project-api run' processes (default 5; 0 skips)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of each streamed measurement, medians reported (default 3)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    tflite = _models_dir() / MODEL
    if not tflite.is_file():
        print(f"skip: {tflite} is missing (the shared models folder)", file=sys.stderr)
        return 1 if os.environ.get("CI", "").lower() in ("1", "true", "yes") else 0

    from project_api.api.project import generate_project
    from project_api.emit import emit
    from project_api.tools.validate import validate

    rng = np.random.default_rng(args.seed)
    x = rng.integers(-128, 128, (args.samples, 1, 49, 10, 1), dtype=np.int8)
    n_naive = min(args.naive_samples, args.samples)
    with tempfile.TemporaryDirectory(prefix="bench-validate-") as tmp:
        work = Path(tmp)
        emit(str(tflite), str(work / "kws.tar"), name="default")
        with generate_project("host", work / "kws.tar", work / "prj",
                              {"project_type": "host_driven"}) as project:
            project.build()
            validate(project, {"input_1": x[:20]}, number=0)  # warm-up (caches, page-ins)

            # Pipelined and one-at-a-time rounds alternate, so a swing in machine load (two
            # cores shared with other work) hits both alike; medians are reported.
            times: dict[bool, list[float]] = {True: [], False: []}
            reports = {}
            for _ in range(args.rounds):
                for pipeline in (True, False):
                    t0 = time.perf_counter()
                    reports[pipeline] = validate(project, {"input_1": x}, number=0,
                                                 pipeline=pipeline)
                    times[pipeline].append(time.perf_counter() - t0)
            report, serial = reports[True], reports[False]
            streamed_s = statistics.median(times[True])
            serial_s = statistics.median(times[False])
            t0 = time.perf_counter()
            naive = _naive(project, x[:n_naive])
            naive_s = time.perf_counter() - t0
            out = report.outputs[0]
            if not (np.array_equal(serial.outputs[0], out) and np.array_equal(naive, out[:n_naive])):
                print("error: the three paths gave different outputs", file=sys.stderr)
                return 1

            cli_s = None
            if args.cli_samples > 0:
                t0 = time.perf_counter()
                for i in range(args.cli_samples):
                    np.save(work / "x.npy", x[i])
                    done = subprocess.run(
                        [sys.executable, "-m", "project_api", "run", str(work / "prj"), "-q",
                         "--input", f"input_1={work / 'x.npy'}", "--output", str(work / "y.npz"),
                         "--force"], capture_output=True, text=True, timeout=120)
                    if done.returncode != 0:
                        print(f"error: project-api run failed: {done.stderr.strip()}",
                              file=sys.stderr)
                        return 1
                    with np.load(work / "y.npz") as y:
                        if not np.array_equal(y[y.files[0]], out[i]):
                            print("error: project-api run gave other outputs", file=sys.stderr)
                            return 1
                cli_s = time.perf_counter() - t0

    rows = {
        "samples": args.samples,
        "rounds": args.rounds,
        "validate_samples_per_s": args.samples / streamed_s,
        "validate_stream_samples_per_s": report.samples_per_second,
        "pipeline_depth": report.pipeline_depth,
        "one_at_a_time_samples_per_s": args.samples / serial_s,
        "naive_samples": n_naive,
        "naive_samples_per_s": n_naive / naive_s,
        "cli_samples": args.cli_samples,
        "cli_samples_per_s": args.cli_samples / cli_s if cli_s else None,
    }
    rows["ratio_validate_vs_naive"] = rows["validate_samples_per_s"] / rows["naive_samples_per_s"]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"KWS int8 ({MODEL}) on the host template, {args.samples} seeded samples")
    print(f"  validate(), one session, {report.pipeline_depth} requests in flight: "
          f"{rows['validate_samples_per_s']:8.0f} samples/s "
          f"(streaming alone {report.samples_per_second:.0f}/s; median of {args.rounds})")
    print(f"  validate(), one session, one request at a time: "
          f"{rows['one_at_a_time_samples_per_s']:8.0f} samples/s")
    print(f"  baseline: one session per sample ({n_naive} samples):  "
          f"{rows['naive_samples_per_s']:8.1f} samples/s")
    if cli_s:
        print(f"  baseline: 'project-api run' per sample ({args.cli_samples} processes): "
              f"{rows['cli_samples_per_s']:8.2f} samples/s")
    print(f"  ratio validate() / one session per sample: {rows['ratio_validate_vs_naive']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Long runs on a noisy link: ``validate`` of ``micro_speech_int8`` on the emulated STM32F405
(QEMU netduinoplus2) through the seeded fault proxy of the tests (bit flips, dropped bytes and
noise bursts in both directions), with recovery on, beside the same samples over a clean link
measured in the same run.

For each byte-error rate it prints samples/s with faults and without, the faults the proxy
injected, the link faults the client saw, the retries (reopened sessions), and three counts
that must be 0: samples lost (not answered), samples answered twice (the progress callback is
told of each answered sample once) and wrong results (outputs unequal to TFLite Micro's for the
same input). The closing note gives the recovery overhead as the ratio of clean to faulty
samples/s.

Usage: python bench/faults.py [--samples N] [--rates 1e-4,1e-3] [--models-dir DIR]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fault_proxy import FaultProxy  # noqa: E402

from project_api import mlf  # noqa: E402
from project_api.emit import emit  # noqa: E402
from project_api.emit.reference import run_tflm  # noqa: E402
from project_api.emit.target import for_cpu  # noqa: E402
from project_api.errors import ProjectAPIError  # noqa: E402
from project_api.micro import Session  # noqa: E402
from project_api.micro.recovery import RetryPolicy  # noqa: E402
from project_api.paths import template_dir  # noqa: E402
from project_api.project import generate_project  # noqa: E402
from project_api.template.targets import board_cpu  # noqa: E402
from project_api.validate import validate  # noqa: E402

_LOG = logging.getLogger("bench.faults")
_OUT = logging.getLogger("bench.faults.table")

BOARD = "qemu_netduinoplus2"
MODEL = "micro_speech_int8"
SEED = 20261202
#: The per-reply ceiling (as ``validate --timeout``): what a lost reply would cost without the
#: waits sized from measured times.
CEILING_SEC = 10.0


def _run(project: Any, info: Any, data: dict[str, np.ndarray], want: np.ndarray,
         rate: float) -> dict[str, Any]:
    """One validate run over a link with byte-error ``rate`` (0: no proxy)."""
    n = len(want)
    answered = np.zeros(n, dtype=np.int64)
    count = [0]

    def progress(label: str, total: int) -> Any:
        if label != "device":
            return None

        def advance(k: int = 1) -> None:
            for _ in range(k):
                if count[0] < n:
                    answered[count[0]] += 1
                count[0] += 1
        return advance

    transport = project.transport()
    proxy = FaultProxy(transport, rate, SEED) if rate > 0 else None
    link = proxy if proxy is not None else transport
    if proxy is not None:
        proxy.enabled = False  # the emulator's start-up is not under test
    link.open()
    link.is_open = True
    if proxy is not None:
        proxy.enabled = True
    error = None
    report = None
    began = time.monotonic()
    try:
        with Session(link, timeout_sec=CEILING_SEC, retry=RetryPolicy()) as session:
            report = validate(session, data, module=info, number=0, progress=progress)
    except ProjectAPIError as err:
        error = str(err).splitlines()[0]
    finally:
        link.close()
    seconds = time.monotonic() - began
    stats = report.recovery if report is not None else None
    wrong = n
    if report is not None:
        got = report.outputs[0].reshape(want.shape)
        wrong = int(np.count_nonzero((got != want).reshape(n, -1).any(axis=1)))
    return {"rate": rate, "samples": n, "seconds": report.stream_seconds if report else seconds,
            "sps": report.samples_per_second if report else 0.0,
            "injected": proxy.counts.total if proxy is not None else 0,
            "faults": stats.fault_count if stats else 0, "retries": stats.retries if stats else 0,
            "recovering_s": stats.recovery_seconds if stats else 0.0,
            "restarts": stats.restarts if stats else 0,
            "lost": int(np.count_nonzero(answered == 0)) if report else n,
            "twice": int(np.count_nonzero(answered > 1)), "wrong": wrong, "error": error}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000,
                        help="validate samples per run (default 10000)")
    parser.add_argument("--rates", default="1e-4,1e-3",
                        help="byte-error rates, comma-separated (default 1e-4,1e-3)")
    parser.add_argument("--models-dir", type=Path,
                        default=Path(os.environ.get("PROJECT_API_SHARED", REPO.parent / "shared"))
                        / "models")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    logging.getLogger("project_api").setLevel(logging.ERROR)
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm", "make"):
        if shutil.which(tool) is None:
            _LOG.error("skip bench/faults.py: %s is not installed", tool)
            return 1 if os.environ.get("CI") else 0
    tflite = args.models_dir / f"{MODEL}.tflite"
    work = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    try:
        kernels = for_cpu(board_cpu(template_dir("stm32"), BOARD))
        emitted = emit(tflite, work / f"{MODEL}.tar", name="default", target=kernels)
        with mlf.open_mlf(emitted.path) as library:
            info = library.module(None)
        t = emitted.inputs[0]
        rng = np.random.default_rng(SEED)
        xs = rng.integers(np.iinfo(t.dtype).min, np.iinfo(t.dtype).max, (args.samples, *t.shape),
                          dtype=t.dtype, endpoint=True)
        _LOG.info("TFLite Micro's outputs of %d samples...", args.samples)
        model_bytes = tflite.read_bytes()
        want = np.stack([run_tflm(model_bytes, [x])[0] for x in xs])
        data = {info.inputs[0].name: xs}
        with generate_project("stm32", emitted.path, work / "prj", {"board": BOARD},
                              build=True) as project:
            project.flash()
            results = []
            for rate in [0.0, *rates]:
                _LOG.info("%d samples at a byte-error rate of %g...", args.samples, rate)
                results.append(_run(project, info, data, want, rate))
                r = results[-1]
                _LOG.info("  %.1f samples/s, %d faults, %d retries, %.2f s recovering, %d lost, "
                          "%d twice, %d wrong%s", r["sps"], r["faults"], r["retries"],
                          r["recovering_s"], r["lost"], r["twice"], r["wrong"],
                          f" ({r['error']})" if r["error"] else "")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    clean = results[0]
    _OUT.info("")
    _OUT.info("validate %s, %d samples, QEMU netduinoplus2 UART through the fault proxy "
              "(seed %d); clean link in the same run: %.1f samples/s",
              MODEL, args.samples, SEED, clean["sps"])
    header = ("rate", "samples/s", "clean/s", "injected", "faults", "retries", "recovering s",
              "link reopened", "lost", "twice", "wrong")
    rows = [header]
    for r in results:
        rows.append((f"{r['rate']:g}", f"{r['sps']:.1f}", f"{clean['sps']:.1f}",
                     str(r["injected"]), str(r["faults"]), str(r["retries"]),
                     f"{r['recovering_s']:.2f}", str(r["restarts"]), str(r["lost"]),
                     str(r["twice"]), str(r["wrong"])))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        _OUT.info("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
    ok = True
    for r in results:
        if r["error"]:
            _OUT.info("rate %g: the run ended early: %s", r["rate"], r["error"])
        if r["lost"] or r["twice"] or r["wrong"] or r["error"]:
            ok = False
    for r in results[1:]:
        ratio = clean["sps"] / r["sps"] if r["sps"] else float("inf")
        _OUT.info("at %g: recovery overhead %.2fx the clean run's time per sample "
                  "(%d faults, %.2f s of %.2f s recovering)", r["rate"], ratio, r["faults"],
                  r["recovering_s"], r["seconds"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

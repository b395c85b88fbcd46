#!/usr/bin/env python3
"""Per-operator instructions of KWS on QEMU's STM32F405 (``-icount shift=0``), generic kernels
beside the Cortex-M4 (DSP) kernels, from ``project-api profile``; and what profiling costs.

KWS (``kws_ref_model_int8``, MLPerf Tiny's DS-CNN) is emitted four times: generic and
cortex-m4 kernels, each as a profile build (``emit --profile``) and as the plain build, and run
on the stm32 template's ``qemu_netduinoplus2`` board, where the device timer advances one tick per
nanosecond per instruction. Per operator: MACs, instructions and instructions per MAC with each
kernel set, and the speed-up. The baseline of each profile build is the plain build of the same
kernels, timed in the same run by the device's time evaluator: the whole model's instructions
with and without the profile hooks (the issue's 2 % bound), the operators' sum against the
whole (the unattributed rest: entry point, executor, the hooks' calls outside the operators),
and the outputs of all four builds compared with TFLite Micro's, bit for bit.

Usage: python bench/profile.py [--models-dir DIR] [--json FILE] [--plot DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from project_api.api.project import generate_project  # noqa: E402
from project_api.archive import mlf  # noqa: E402
from project_api.emit import emit  # noqa: E402
from project_api.emit.reference import run_tflm  # noqa: E402
from project_api.tools.profile import ICOUNT_INSTRUCTIONS_PER_SECOND, profile_session  # noqa: E402

_LOG = logging.getLogger("bench.profile")
BOARD = "qemu_netduinoplus2"
MODEL = "kws_ref_model_int8"
TARGETS = ("generic", "cortex-m4")


def _run(work: Path, tflite: Path, target: str, profile: bool, x: np.ndarray) -> dict:
    name = f"{target}-{'prof' if profile else 'plain'}"
    emit(tflite, work / f"{name}.tar", target=target, profile=profile)
    with generate_project("stm32", work / f"{name}.tar", work / name, {"board": BOARD},
                          build=True) as prj:
        prj.flash()
        with mlf.open_mlf(work / name / "model") as lib:
            module, metadata = lib.module(), lib.metadata
        with prj.session() as session:
            report = profile_session(session, module, metadata, [x], repeat=3, number=3,
                                     instructions_rate=ICOUNT_INSTRUCTIONS_PER_SECOND)
    return {"report": report, "output": report.outputs[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--models-dir", type=Path,
                        default=Path(os.environ.get("PROJECT_API_SHARED", REPO.parent / "shared"))
                        / "models")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--plot", type=Path, help="write the profile pictures into this folder")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    logging.getLogger("project_api").setLevel(logging.WARNING)
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm", "make"):
        if shutil.which(tool) is None:
            _LOG.error("bench/profile.py: %s is not installed; run 'make setup'", tool)
            return 1
    tflite = args.models_dir / f"{MODEL}.tflite"
    if not tflite.is_file():
        _LOG.error("bench/profile.py: %s is missing", tflite)
        return 1
    x = np.random.default_rng(0).integers(-128, 128, (1, 49, 10, 1), dtype=np.int8)
    want = run_tflm(tflite.read_bytes(), [x])[0]
    work = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    runs: dict[tuple[str, bool], dict] = {}
    try:
        for target in TARGETS:
            for profile in (True, False):
                _LOG.info("building and running %s (%s) on %s...", target,
                          "profile build" if profile else "plain build", BOARD)
                runs[(target, profile)] = _run(work, tflite, target, profile, x)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    exact = {k: bool(np.array_equal(v["output"], want.reshape(v["output"].shape)))
             for k, v in runs.items()}
    if not all(exact.values()):
        _LOG.error("outputs differ from TFLite Micro: %s", exact)
        return 1
    g, d = runs[("generic", True)]["report"], runs[("cortex-m4", True)]["report"]
    _LOG.info("")
    _LOG.info("== KWS per operator on QEMU netduinoplus2 (-icount shift=0: instructions), "
              "profile builds ==")
    head = (f"{'node':>4}  {'operator':<18} {'MACs':>9}  {'generic':>10} {'instr/MAC':>9}  "
            f"{'cortex-m4':>10} {'instr/MAC':>9}  {'speed-up':>8}  kernel")
    _LOG.info("%s", head)
    _LOG.info("%s", "-" * len(head))
    rows = []
    dsp_ops = {o.node: o for o in d.ops}
    for go in g.ops:
        do = dsp_ops[go.node]
        gi, di = go.instructions or 0.0, do.instructions or 0.0
        ipm = (f"{gi / go.macs:9.2f}" if go.macs else f"{'-':>9}",
               f"{di / do.macs:9.2f}" if do.macs else f"{'-':>9}")
        _LOG.info("%4d  %-18s %9s  %10.0f %s  %10.0f %s  %7.2fx  %s", go.node, go.op,
                  f"{go.macs:,}", gi, ipm[0], di, ipm[1], gi / di if di else 0.0, do.kernel)
        rows.append({"node": go.node, "op": go.op, "macs": go.macs, "generic": gi,
                     "cortex_m4": di, "kernel_cortex_m4": do.kernel})
    macs = sum(o.macs for o in g.ops)
    _LOG.info("%4s  %-18s %9s  %10.0f %9.2f  %10.0f %9.2f  %7.2fx", "", "all operators",
              f"{macs:,}", g.instructions(g.sum_seconds), g.sum_seconds * 1e9 / macs,
              d.instructions(d.sum_seconds), d.sum_seconds * 1e9 / macs,
              g.sum_seconds / d.sum_seconds)
    _LOG.info("")
    _LOG.info("== what profiling costs (baseline: the plain build, same kernels, same run) ==")
    cost = {}
    for target in TARGETS:
        prof, plain = runs[(target, True)]["report"], runs[(target, False)]["report"]
        change = (prof.whole_seconds - plain.whole_seconds) / plain.whole_seconds
        un = prof.unattributed_seconds
        _LOG.info("%-9s whole model: profile build %s instructions, plain build %s: %+.3f %% "
                  "(bound 2 %%); operators %s, unattributed %s (%.3f %% of the whole); hook "
                  "overhead subtracted %.0f instructions per operator", target,
                  f"{prof.whole_seconds * 1e9:,.0f}", f"{plain.whole_seconds * 1e9:,.0f}",
                  100 * change, f"{prof.sum_seconds * 1e9:,.0f}", f"{un * 1e9:,.0f}",
                  100 * un / prof.whole_seconds, prof.overhead_seconds * 1e9)
        cost[target] = {"profile_instructions": prof.whole_seconds * 1e9,
                        "plain_instructions": plain.whole_seconds * 1e9, "change": change,
                        "operators_instructions": prof.sum_seconds * 1e9,
                        "unattributed_instructions": un * 1e9,
                        "overhead_per_op": prof.overhead_seconds * 1e9}
    _LOG.info("outputs of all four builds: bit-exact with TFLite Micro")
    if args.plot:
        from project_api.tools.plot import PROFILE_PICTURES, write_pictures

        for target, report in (("generic", g), ("cortex-m4", d)):
            (args.plot / target).mkdir(parents=True, exist_ok=True)
            write_pictures(report, args.plot / target, PROFILE_PICTURES, force=True)
    if args.json:
        args.json.write_text(json.dumps({"per_op": rows, "cost": cost}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

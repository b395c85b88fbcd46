#!/usr/bin/env python3
"""Emitted C vs the TFLite Micro interpreter on every shared model: latency, memory, code size.

For each model in ../shared/models (or --models-dir):

* latency: the emitted C built for the host with ``gcc -O2`` and timed by a C loop of N
  inferences, beside TFLM's Python interpreter (its reference kernels) invoked N times on the
  same input in the same run; both outputs are checked to be identical first;
* memory: our activation pool (TVMGEN_<NAME>_WORKSPACE_SIZE), its lower bound (most bytes live
  during one op) and TFLM's arena (head = its planned activations, total = head + tail);
* size: ``.text`` and ``.rodata`` of the emitted C built for Cortex-M4 with
  ``arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -Os``.

Usage: python bench/models.py [--iters N] [--models-dir DIR] [--models NAME,...] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from project_api.emit import emit_sources, harness, reference  # noqa: E402
from project_api.system.paths import crt_dir  # noqa: E402

MODELS = ["hello_world_int8", "hello_world_float", "micro_speech_int8", "kws_ref_model_int8",
          "kws_ref_model_float32", "vww_96_int8", "ic_resnet8_int8", "ad01_int8"]


def inputs_for(gen) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(-128, 128, t.shape).astype(np.int8) if t.dtype == "int8"
            else rng.standard_normal(t.shape).astype(np.float32) for t in gen.inputs]


def tflm(model: bytes, ins: list[np.ndarray], iters: int) -> dict:
    """TFLM latency (ms), arena figures and output; None fields if TFLM cannot run it."""
    from tflite_micro.python.tflite_micro import runtime

    from project_api.emit import reference

    try:
        interp = runtime.Interpreter.from_bytes(model, arena_size=1 << 20)
    except RuntimeError as exc:
        return {"error": str(exc).splitlines()[0]}
    for i, x in enumerate(ins):
        interp.set_input(x, i)
    interp.invoke()
    out = np.array(interp.get_output(0), copy=True)
    t0 = time.perf_counter()
    for _ in range(iters):
        interp.invoke()
    ms = (time.perf_counter() - t0) / iters * 1e3
    arena = reference.tflm_arena(model)
    return {"ms": ms, "output": out, **arena}


def cortex_m4_sizes(gen, workdir: Path) -> dict | None:
    cc, size = shutil.which("arm-none-eabi-gcc"), shutil.which("arm-none-eabi-size")
    if not cc or not size:
        return None
    (workdir / f"tvmgen_{gen.name}.h").write_text(gen.header)
    src = workdir / "m4_lib0.c"
    src.write_text(gen.source)
    obj = workdir / "m4_lib0.o"
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-mcpu=cortex-m4", "-mthumb",
                    "-Os", f"-I{workdir}", f"-I{crt_dir() / 'include'}", "-c", str(src),
                    "-o", str(obj)], check=True)
    text = subprocess.run([size, "-A", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    sizes = {"text": 0, "rodata": 0}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            if parts[0].startswith(".text"):
                sizes["text"] += int(parts[1])
            elif parts[0].startswith(".rodata"):
                sizes["rodata"] += int(parts[1])
    return sizes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--models-dir", type=Path, default=REPO.parent / "shared" / "models")
    ap.add_argument("--models", help="comma-separated model names (default: every shared one)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(",") if args.models else MODELS:
            path = args.models_dir / f"{name}.tflite"
            if not path.is_file():
                if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
                    print(f"error: shared model {path} is missing (CI=true)", file=sys.stderr)
                    return 1
                print(f"skip {name}: {path} missing", file=sys.stderr)
                continue
            model = path.read_bytes()
            gen = emit_sources(model)
            work = Path(tmp) / name
            exe = harness.build(gen, work, cflags=("-O2",))
            ins = inputs_for(gen)
            ours = harness.run(exe, gen, ins)[0]
            ns = harness.time_ns(exe, gen, ins, args.iters)
            ref = tflm(model, ins, max(10, args.iters // 4))
            if "error" in ref and all(t.dtype == "float32" for t in gen.inputs):
                # TFLM refuses hybrid models (int8 weights, float activations); time it on the
                # same network with the weights dequantized, which is what the emitter runs.
                try:
                    rebuilt = reference.dequantized_rebuild(model)
                except ValueError:
                    rebuilt = None
                if rebuilt is not None:
                    error = ref["error"]
                    ref = tflm(rebuilt, ins, max(10, args.iters // 4))
                    ref["note"] = (f"TFLM refuses this hybrid model ({error}); its column is the "
                                   "same network with the int8 weights dequantized")
            same = None
            if "output" in ref:
                r = ref["output"].reshape(ours.shape)
                same = bool(np.array_equal(ours, r)) if ours.dtype == np.int8 else bool(
                    np.allclose(ours, r, rtol=1e-5, atol=1e-6))
            rows.append({
                "model": name, "ours_ms": ns / 1e6, "tflm_ms": ref.get("ms"),
                "ratio": (ns / 1e6) / ref["ms"] if "ms" in ref else None,
                "outputs_match": same, "pool": gen.workspace_size_bytes,
                "lower_bound": gen.lower_bound_bytes, "tflm_head": ref.get("head"),
                "tflm_total": ref.get("total"), "constants": gen.constants_size_bytes,
                "m4": cortex_m4_sizes(gen, work), "tflm_error": ref.get("error"),
                "note": ref.get("note"),
            })
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0

    def f(v, fmt):
        return "n/a" if v is None else format(v, fmt)

    print(f"latency: emitted C (host gcc -O2, C loop of {args.iters}) vs TFLM interpreter "
          "(reference kernels), same input, same run")
    hdr = (f"{'model':24} {'ours us':>8} {'TFLM us':>8} {'ratio':>6} {'match':>5} "
           f"{'pool B':>7} {'bound B':>7} {'TFLM head':>9} {'TFLM tot':>9} "
           f"{'M4 .text':>8} {'M4 .rodata':>10}")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        m4 = r["m4"] or {}
        tflm_us = None if r["tflm_ms"] is None else r["tflm_ms"] * 1e3
        print(f"{r['model']:24} {r['ours_ms'] * 1e3:8.1f} {f(tflm_us, '8.1f'):>8} "
              f"{f(r['ratio'], '6.2f'):>6} {str(r['outputs_match']) if r['outputs_match'] is not None else 'n/a':>5} "
              f"{r['pool']:7d} {r['lower_bound']:7d} {f(r['tflm_head'], 'd'):>9} "
              f"{f(r['tflm_total'], 'd'):>9} {f(m4.get('text'), 'd'):>8} "
              f"{f(m4.get('rodata'), 'd'):>10}")
    print("(TFLM times include one Python call per inference, about a microsecond; it only "
          "matters for hello_world)")
    for r in rows:
        if r["tflm_error"]:
            print(f"note: TFLM cannot run {r['model']}: {r['tflm_error']}")
        if r["note"]:
            print(f"note: {r['model']}: {r['note']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

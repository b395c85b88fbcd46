#!/usr/bin/env python3
"""Instructions per inference of every shared model on QEMU's Cortex-M4: generic vs DSP kernels.

Each model in ../shared/models (or --models-dir) is emitted twice, ``--target generic`` (the
portable C) and ``--target cortex-m4`` (the DSP-extension kernels), each built with
``arm-none-eabi-gcc -O2 -mcpu=cortex-m4 -mfloat-abi=hard -mfpu=fpv4-sp-d16`` into a bare-metal
firmware for QEMU ``mps2-an386`` (:mod:`project_api.emit.cortex_m_harness`) and run in the same
session on the same fixed input. Both outputs are checked against TFLite Micro first (int8:
bit-exact). Instructions are counted by the SysTick under ``-icount shift=0`` (1 ns of virtual
time per instruction, 25 MHz: 40 instructions per tick), calibrated by the firmware itself
against ``subs; bne`` loops of two known lengths; the calibration line is printed.

A synthetic network with ResNet-8's topology (``builder.resnet8_like_model``, random weights:
the real image-classification model is a third-party file not shipped here) is measured too,
for its 3x3 convolutions and residual ADDs.

Per model: instructions per inference (generic, target, speedup), the module's ``.text`` and
``.rodata`` (target build; generic in brackets), our activation pool, its lower bound and TFLM's
arena (its planned activations, "head"). Then TFLM+CMSIS-NN's figures for KWS as quoted in issue
#12 (an anchor: their source cannot be fetched here, they are not measured by this script), and
KWS per operator: nominal MACs and instructions per MAC, generic vs target (profile builds).

Usage: python bench/cortex_m.py [--models-dir DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from project_api.emit import cortex_m_harness as H  # noqa: E402
from project_api.emit import emit_sources, reference  # noqa: E402
from project_api.emit.builder import resnet8_like_model  # noqa: E402

MODELS = ["hello_world_int8", "hello_world_float", "micro_speech_int8", "kws_ref_model_int8",
          "kws_ref_model_float32", "ad01_int8"]
TARGET = "cortex-m4"
GOAL_KWS = 6.2e6
#: Issue #12's table (QEMU mps2-an386, -icount shift=0, gcc 12 -O2 -mcpu=cortex-m4): quoted.
ANCHORS = [
    ("TVM autotuned AOT (MLPerf Tiny v1.0)", 10.14e6, 146_448, "13.0 KB"),
    ("TFLite Micro + CMSIS-NN kernels", 7.70e6, 22_820, "95 KB"),
    ("TFLite Micro reference kernels", 43.10e6, 22_772, "51 KB"),
]


def fixed_inputs(gen) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(-128, 128, t.shape).astype(np.int8) if t.dtype == "int8"
            else rng.standard_normal(t.shape).astype(np.float32) for t in gen.inputs]


def check(name: str, data: bytes, inputs, outs, what: str) -> str:
    """'bit-exact' / 'close' vs TFLM, or why it could not be checked."""
    model = reference.dequantized_rebuild(data) if name == "kws_ref_model_float32" else data
    try:
        want = reference.run_tflm(model, inputs)
    except Exception as exc:  # noqa: BLE001 - TFLM refuses some models; say so
        return f"TFLM cannot run it ({str(exc).splitlines()[0][:40]})"
    for got, ref in zip(outs, want, strict=True):
        ref = np.asarray(ref).reshape(got.shape)
        if got.dtype == np.int8:
            if not np.array_equal(got, ref):
                raise SystemExit(f"{name} {what}: QEMU output differs from TFLM")
        elif not np.allclose(got, ref, rtol=1e-5, atol=1e-5):
            raise SystemExit(f"{name} {what}: QEMU output not within 1e-5 of TFLM")
    return "bit-exact" if all(o.dtype == np.int8 for o in outs) else "within 1e-5"


def macs(kernel) -> int:
    """Nominal multiply-accumulates of a kernel (every filter tap, padding included)."""
    p = kernel.params
    if kernel.op.opcode == "CONV_2D":
        return p["n"] * p["oh"] * p["ow"] * p["oc"] * p["kh"] * p["kw"] * p["c"]
    if kernel.op.opcode == "DEPTHWISE_CONV_2D":
        return p["n"] * p["oh"] * p["ow"] * p["oc"] * p["kh"] * p["kw"]
    if kernel.op.opcode == "FULLY_CONNECTED":
        return p["batches"] * p["out_ch"] * p["depth"]
    return 0


def fmt_m(v: float) -> str:
    return f"{v / 1e6:8.3f} M"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", type=Path, default=REPO.parent / "shared" / "models")
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    args = ap.parse_args()
    missing = H.tools_missing()
    if missing:
        print(f"cortex_m bench: missing tools {missing}; run 'make setup'", file=sys.stderr)
        return 1
    qemu = subprocess.run([H.QEMU, "--version"], capture_output=True, text=True).stdout
    print("== Cortex-M4 instructions per inference: QEMU mps2-an386, -icount shift=0 ==")
    print(f"compiler: {H.compiler_version()}; flags: {' '.join(H.CFLAGS)}")
    print(f"emulator: {qemu.splitlines()[0] if qemu else 'unknown'}")
    rows, cal_lines, report = [], set(), {"models": {}}
    with tempfile.TemporaryDirectory(prefix="bench_cortex_m_") as tmp:
        work = Path(tmp)
        for name in [*MODELS, "resnet8_like (synthetic)"]:
            if name.startswith("resnet8_like"):
                data = resnet8_like_model(0)
            else:
                path = args.models_dir / f"{name}.tflite"
                if not path.is_file():
                    print(f"{name}: missing ({path})")
                    continue
                data = path.read_bytes()
            res = {}
            for target in ("generic", TARGET):
                gen = emit_sources(data, target=target)
                inputs = fixed_inputs(gen)
                fw = H.build(gen, inputs, work / f"{name.split()[0]}_{target}")
                r = H.run(fw)
                cal_lines.add(r.calibration.line())
                res[target] = (gen, fw, r, check(name, data, inputs, r.outputs, target))
            g_gen, g_fw, g_r, _ = res["generic"]
            t_gen, t_fw, t_r, t_chk = res[TARGET]
            if [o.tobytes() for o in g_r.outputs] != [o.tobytes() for o in t_r.outputs] and \
                    t_chk == "bit-exact":
                raise SystemExit(f"{name}: generic and {TARGET} outputs differ")
            try:
                a = reference.tflm_arena(data)
                arena = f"{a['head']}/{a['total']}"
            except Exception:  # noqa: BLE001 - the hybrid float model does not run on TFLM
                arena = None
            rows.append((name, g_r.instructions, t_r.instructions, t_fw.model_sections,
                         g_fw.model_sections, t_gen.workspace_size_bytes, t_gen.lower_bound_bytes,
                         g_gen.workspace_size_bytes, arena, t_chk))
            report["models"][name] = {
                "instructions_generic": g_r.instructions, "instructions_target": t_r.instructions,
                "text_target": t_fw.model_sections["text"],
                "rodata_target": t_fw.model_sections["rodata"],
                "text_generic": g_fw.model_sections["text"],
                "rodata_generic": g_fw.model_sections["rodata"],
                "pool_target": t_gen.workspace_size_bytes, "lower_bound": t_gen.lower_bound_bytes,
                "pool_generic": g_gen.workspace_size_bytes, "tflm_arena_head_total": arena,
                "check": t_chk}

        for line in sorted(cal_lines):
            print(line)
        print()
        hdr = (f"{'model':24} {'generic':>10} {TARGET:>10} {'speedup':>7}  "
               f"{'.text':>13} {'.rodata':>15}  {'pool':>6} {'bound':>6} {'TFLM arena':>11}  vs TFLM")
        print(hdr)
        print("-" * len(hdr))
        for (name, gi, ti, ts, gs, pool, bound, _gpool, arena, chk) in rows:
            arena_s = f"{arena:>11}" if arena is not None else f"{'-':>11}"
            print(f"{name:24} {fmt_m(gi)} {fmt_m(ti)} {gi / ti:6.2f}x  "
                  f"{ts['text']:>6} ({gs['text']:>5}) {ts['rodata']:>7} ({gs['rodata']:>6})  "
                  f"{pool:>6} {bound:>6} {arena_s}  {chk}")
        print("(.text/.rodata: the emitted module alone, target build (generic build); pool: our "
              "activation pool (target build), bound: its lower bound; TFLM arena: its planned "
              "activations (head) / whole arena (total), reference kernels)")
        print()
        print("KWS (kws_ref_model_int8), anchors quoted from issue #12 (same setup, not measured "
              "here):")
        print(f"  {'implementation':40} {'instr/inference':>16} {'activation RAM':>15} "
              f"{'.text':>8}")
        kws = next((r for r in rows if r[0] == "kws_ref_model_int8"), None)
        if kws is not None:
            print(f"  {'emitted C, generic (measured)':40} {fmt_m(kws[1]):>16} {kws[7]:>13} B "
                  f"{kws[4]['text'] / 1024:>5.1f} KB")
            print(f"  {'emitted C, ' + TARGET + ' (measured)':40} {fmt_m(kws[2]):>16} "
                  f"{kws[5]:>13} B {kws[3]['text'] / 1024:>5.1f} KB")
        for label, instr, ram, text in ANCHORS:
            print(f"  {label:40} {fmt_m(instr):>16} {ram:>13} B {text:>8}")
        if kws is not None:
            cmsis = ANCHORS[1][1]
            verdict = "meets" if kws[2] <= GOAL_KWS else "MISSES"
            print(f"  {TARGET} / TFLM+CMSIS-NN = {kws[2] / cmsis:.3f} (goal <= 0.8, i.e. "
                  f"<= {GOAL_KWS / 1e6:.1f} M): {verdict} the goal")

            print()
            print("KWS per operator (profile builds; nominal MACs count every filter tap):")
            data = (args.models_dir / "kws_ref_model_int8.tflite").read_bytes()
            per = {}
            for target in ("generic", TARGET):
                gen = emit_sources(data, target=target)
                fw = H.build(gen, fixed_inputs(gen), work / f"kws_prof_{target}", profile=True)
                per[target] = (gen, H.run(fw).per_op)
            gen_t, prof_t = per[TARGET]
            gen_g, prof_g = per["generic"]
            kern_g = {k.op.index: k for k in gen_g.kernels}
            print(f"  {'node':>4} {'operator':18} {'kernel (' + TARGET + ')':28} {'MACs':>9} "
                  f"{'generic':>10} {TARGET:>10} {'instr/MAC':>9} {'->':>2} {'instr/MAC':>9}")
            report["kws_per_op"] = []
            for k in gen_t.kernels:
                if k.alias:
                    continue
                i = k.op.index
                m = macs(k)
                ig, it = prof_g.get(i, 0.0), prof_t.get(i, 0.0)
                ipm_g = f"{ig / m:9.2f}" if m else f"{'-':>9}"
                ipm_t = f"{it / m:9.2f}" if m else f"{'-':>9}"
                print(f"  {i:>4} {k.op.opcode:18} {k.template.replace('.c.j2', ''):28} {m:>9} "
                      f"{ig / 1e3:8.1f} k {it / 1e3:8.1f} k {ipm_g} -> {ipm_t}")
                report["kws_per_op"].append({"node": i, "op": k.op.opcode,
                                             "kernel": k.template,
                                             "generic_kernel": kern_g[i].template, "macs": m,
                                             "generic": ig, "target": it})
            tm = sum(macs(k) for k in gen_t.kernels if not k.alias)
            print(f"  all: {tm} MACs, {sum(prof_g.values()) / tm:.2f} -> "
                  f"{sum(prof_t.values()) / tm:.2f} instructions per MAC")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

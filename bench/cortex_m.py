#!/usr/bin/env python3
"""Instructions per inference of every shared model on QEMU's Cortex-M4 and on every other core.

Each int8 model in ../shared/models (or --models-dir) is emitted three times, ``--target
generic`` (the portable C), ``--target cortex-m4`` (the DSP-extension kernels, int8 weights, the
default) and ``--target cortex-m4 --weights int16`` (the int16-pair layout of the convolutions),
each built with ``arm-none-eabi-gcc -O2 -mcpu=cortex-m4 -mfloat-abi=hard -mfpu=fpv4-sp-d16`` into
a bare-metal firmware for QEMU ``mps2-an386`` (:mod:`project_api.emit.cortex_m_harness`) and run
in the same session on the same fixed input. Every output is checked against TFLite Micro first
(int8: bit-exact). Instructions are counted by the SysTick under ``-icount shift=0`` (1 ns of
virtual time per instruction, 25 MHz: 40 instructions per tick), calibrated by the firmware
itself against ``subs; bne`` loops of two known lengths; the calibration line is printed.

Per model: instructions per inference (generic, cortex-m4 with int8 and with int16 weights),
the module's ``.text`` and ``.rodata`` and our activation pool (with its lower bound and the
generic build's pool); the constants beside the ``.tflite``'s weight bytes (every constant
tensor's buffer plus 4 bytes per per-channel scale of its int8 weights) and their ratio; TFLM +
CMSIS-NN's instructions as quoted in issue #22 (same setup, measured by hand; ``--anchors FILE``
prints figures re-measured by hand, ``{"models": {NAME: {"instructions": N}}}``, beside them)
and our ratio to each. Then per model and per operator
(profile builds): nominal MACs and instructions per MAC, generic vs cortex-m4.

Then every core (``--cores``; :mod:`project_api.emit.machines`: micro:bit M0, AN385 M3, AN386
M4, AN500 M7, AN505 M33, AN547 M55) on its own machine with the fastest scheme offered there
(the M55: its DSP kernels, then Helium's mve-int8): one profile firmware per core and scheme holding every model that fits (one boot), outputs checked against
TFLM, instructions per inference beside that core's anchor from ``bench/anchors/cortex_m.json``
(``n/a (not measured)`` where it has none) and the ratio, then per operator (and per MAC).

Usage: python bench/cortex_m.py [--models-dir DIR] [--models NAME,...] [--anchors FILE]
                                [--json FILE] [--cores LIST] [--core-anchors FILE]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from project_api.emit import cortex_m_harness as H  # noqa: E402
from project_api.emit import emit_sources, read_tflite, reference  # noqa: E402
from project_api.emit.machines import MACHINES  # noqa: E402
from project_api.emit.target import RUN_ON  # noqa: E402

MODELS = ["kws_ref_model_int8", "vww_96_int8", "ic_resnet8_int8", "ad01_int8",
          "hello_world_int8", "micro_speech_int8"]
TARGET = "cortex-m4"
#: TFLM (commit 90b983c2) + CMSIS-NN on the same QEMU setup, quoted from issue #22 (and
#: ../shared/models/NOTICE.md): instructions per inference.
QUOTED_TFLM_CMSIS_NN = {"kws_ref_model_int8": 7.70e6, "vww_96_int8": 24.12e6,
                        "ic_resnet8_int8": 29.86e6, "ad01_int8": 0.58e6}
#: Issue #22's goals: at most this fraction of TFLM + CMSIS-NN's instructions.
GOAL = {"kws_ref_model_int8": 0.45}
GOAL_DEFAULT = 0.5
#: ... and constants at most this multiple of the .tflite's weight bytes.
GOAL_CONSTANTS = 1.02


#: The anchors measured by hand (TFLM + CMSIS-NN built for each core, same machine and
#: harness), with their provenance: ``{"cores": {core: {"models": {model: {"instructions":
#: N, ...}}, ...}}}`` (see docs/cores.md).
ANCHORS_FILE = REPO / "bench" / "anchors" / "cortex_m.json"
#: Issue 31's goals per core: at most this fraction of that core's anchor (KWS on the M4: 0.40).
CORE_GOAL = {"cortex-m0": 0.5, "cortex-m3": 0.5, "cortex-m4": 0.45, "cortex-m7": 0.5,
             "cortex-m33": 0.5, "cortex-m55": 0.6}


def core_schemes(core: str) -> list[tuple[str, str | None, str]]:
    """The schemes measured on ``core``, (kernel target, weights, scheme) each: the fastest
    offered there, after the DSP kernels where the fastest is Helium's (the figure before it)."""
    if ("mve-int8", core) in RUN_ON:
        return [(f"-mcpu={core}+nomve", "int8", "dsp-int8"), (core, "int8", "mve-int8")]
    if ("dsp-int8", core) in RUN_ON:
        return [(core, "int8", "dsp-int8")]
    return [("generic", None, "generic")]


def kernel_label(kernel) -> str:
    """The kernel's template, ``+mve`` where the portable loops are Helium's (a ``.mve``
    template is Helium's throughout)."""
    name = kernel.template.replace(".c.j2", "")
    return name + ("+mve" if kernel.params.get("mve") and ".mve" not in name else "")


def load_anchors(path: Path) -> dict[tuple[str, str], dict]:
    """(core, model) -> the anchor's record (``instructions`` and its provenance)."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {(core, model): rec for core, c in data.get("cores", {}).items()
            for model, rec in c.get("models", {}).items() if "instructions" in rec}


def measure_core(core: str, models: dict[str, bytes], work: Path, cal_lines: set,
                 spec: tuple[str, str | None, str]) -> dict:
    """Every model on ``core``'s machine with scheme ``spec`` (:func:`core_schemes`): one
    profile firmware for all that fit together (one boot), outputs checked against TFLM,
    instructions and per-operator instructions (the operator hooks, a few instructions each,
    are inside the total)."""
    target, weights, scheme = spec
    work = work / scheme
    cases = []
    for k, (name, data) in enumerate(models.items()):
        gen = emit_sources(data, name=f"m{k}", target=target, weights=weights)
        cases.append((name, gen, fixed_inputs(gen)))
    try:
        groups = [[c for c in cases]]
        suites = [H.build_suite([(g, x) for _, g, x in cases], work / core, core=core,
                                profile=True)]
    except H.DoesNotFit:
        groups, suites = [], []
        for name, g, x in cases:
            try:
                suites.append(H.build_suite([(g, x)], work / f"{core}_{name}", core=core,
                                            profile=True))
                groups.append([(name, g, x)])
            except H.DoesNotFit as exc:
                logging.debug("%s", exc)
    out: dict = {"scheme": scheme, "models": {}}
    for suite, group in zip(suites, groups, strict=True):
        for (name, gen, x), r in zip(group, H.run_suite(suite), strict=True):
            check(models[name], x, r.outputs, f"{name} on {core}")
            cal_lines.add(f"{MACHINES[core].name}: {r.calibration.line()}")
            ops = [{"node": k.op.index, "op": k.op.opcode,
                    "kernel": kernel_label(k), "macs": macs(k),
                    "instructions": r.per_op.get(k.op.index, 0.0)}
                   for k in gen.kernels if not k.alias]
            out["models"][name] = {"instructions": r.instructions, "ops": ops}
    return out


def print_cores(cores: dict, anchors: dict[tuple[str, str], dict]) -> None:
    print("\n== Every core: instructions per inference on its own QEMU machine (-icount shift=0),"
          " the fastest scheme offered there, outputs bit-exact with TFLM ==")
    print(f"  {'core':10} {'machine':11} {'scheme':9} {'model':20} {'ours':>10}  "
          f"{'anchor (TFLM+CMSIS-NN)':>24} {'ratio':>6} {'goal':>5}")
    runs = [(core, c, run) for core, c in cores.items() for run in c["runs"]]
    for core, c0, c in runs:
        goal = CORE_GOAL[core]
        for name in c0["all"]:
            r = c["models"].get(name)
            if r is None:
                print(f"  {core:10} {MACHINES[core].name:11} {c['scheme']:9} {name:20} "
                      f"{'does not fit the machine':>10}")
                continue
            a = anchors.get((core, name))
            if a is None and core == TARGET and name in QUOTED_TFLM_CMSIS_NN:  # the M4's, #22's
                a = {"instructions": QUOTED_TFLM_CMSIS_NN[name]}
            g = 0.40 if (core, name) == ("cortex-m4", "kws_ref_model_int8") else goal
            cell = (f"{fmt_m(a['instructions']):>24} {r['instructions'] / a['instructions']:6.3f}"
                    if a else f"{'n/a (not measured)':>24} {'-':>6}")
            print(f"  {core:10} {MACHINES[core].name:11} {c['scheme']:9} {name:20} "
                  f"{fmt_m(r['instructions'])}  {cell} {g:5.2f}")
    print(f"  (anchors from {ANCHORS_FILE.relative_to(REPO)}, the M4's quoted from issue #22 as"
          " above; ratio: ours / anchor)")
    print("\nInstructions per MAC per kernel on every core (all layers of the models above):")
    for core, _, c in runs:
        per: dict = {}
        for r in c["models"].values():
            for o in r["ops"]:
                if o["macs"]:
                    k = per.setdefault(o["kernel"], [0, 0.0])
                    k[0] += o["macs"]
                    k[1] += o["instructions"]
        for k, (m, n) in sorted(per.items()):
            print(f"  {core:10} {c['scheme']:9} {k:32} {n / m:6.2f}  ({m} MACs)")
    print("\nPer operator on every core (instructions, and per MAC where it has MACs):")
    for core, _, c in runs:
        for name, r in c["models"].items():
            tm = sum(o["macs"] for o in r["ops"])
            tot = sum(o["instructions"] for o in r["ops"])
            head = f"  {core} {c['scheme']} {name}: {len(r['ops'])} operators"
            print(head + (f", {tot / tm:.2f} instructions per MAC overall" if tm else ""))
            for o in r["ops"]:
                ipm = f"{o['instructions'] / o['macs']:7.2f}/MAC" if o["macs"] else ""
                print(f"    {o['node']:>4} {o['op']:18} {o['kernel']:28} "
                      f"{o['instructions'] / 1e3:10.1f} k {ipm}")


def fixed_inputs(gen) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    # the same bytes for an int8 or a uint8 input (converter-made image models keep uint8)
    return [rng.integers(-128, 128, t.shape).astype(np.int8).view(
        np.uint8 if t.dtype == "uint8" else np.int8) for t in gen.inputs]


def check(data: bytes, inputs, outs, what: str) -> None:
    want = reference.run_tflm(data, inputs)
    for got, ref in zip(outs, want, strict=True):
        if not np.array_equal(got, np.asarray(ref).reshape(got.shape)):
            raise SystemExit(f"{what}: QEMU output differs from TFLM")


def tflite_weight_bytes(data: bytes) -> int:
    """Bytes the .tflite spends on weights: every constant tensor's buffer, plus 4 bytes (a
    float32) per per-channel scale of its int8 weights."""
    g = read_tflite(data)
    total = 0
    for t in g.tensors:
        if not t.is_const or t.data is None:
            continue
        total += t.data.nbytes
        if t.dtype == "int8" and t.quant is not None and t.quant.per_channel:
            total += 4 * len(t.quant.scale)
    return total


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


def shape_of(kernel) -> str:
    p = kernel.params
    if kernel.op.opcode in ("CONV_2D", "DEPTHWISE_CONV_2D"):
        return (f"{p['h']}x{p['w']}x{p['c']} k{p['kh']}x{p['kw']}/{p['sh']} -> {p['oc']}")
    if kernel.op.opcode == "FULLY_CONNECTED":
        return f"{p['depth']} -> {p['out_ch']}"
    return ""


def fmt_m(v: float) -> str:
    return f"{v / 1e6:8.3f} M"


def measure(name: str, data: bytes, work: Path, cal_lines: set) -> dict:
    """Every build of one model: instructions, sizes, pools, per-operator profile."""
    builds = {"generic": {"target": "generic"}, "int8": {"target": TARGET, "weights": "int8"},
              "int16": {"target": TARGET, "weights": "int16"}}
    res: dict = {"weight_bytes": tflite_weight_bytes(data)}
    for label, kw in builds.items():
        gen = emit_sources(data, **kw)
        inputs = fixed_inputs(gen)
        fw = H.build(gen, inputs, work / f"{name}_{label}")
        r = H.run(fw)
        cal_lines.add(r.calibration.line())
        check(data, inputs, r.outputs, f"{name} ({label})")
        res[label] = {"instructions": r.instructions, "text": fw.model_sections["text"],
                      "rodata": fw.model_sections["rodata"], "constants": gen.constants_size_bytes,
                      "pool": gen.workspace_size_bytes, "lower_bound": gen.lower_bound_bytes,
                      "gen": gen}
    per = {}
    for label in ("generic", "int8"):
        gen = res[label]["gen"]
        fw = H.build(gen, fixed_inputs(gen), work / f"{name}_{label}_prof", profile=True)
        per[label] = H.run(fw).per_op
    ops = []
    kern_g = {k.op.index: k for k in res["generic"]["gen"].kernels}
    for k in res["int8"]["gen"].kernels:
        if k.alias:
            continue
        i = k.op.index
        ops.append({"node": i, "op": k.op.opcode, "kernel": k.template.replace(".c.j2", ""),
                    "generic_kernel": kern_g[i].template.replace(".c.j2", ""),
                    "shape": shape_of(k), "macs": macs(k), "generic": per["generic"].get(i, 0.0),
                    "target": per["int8"].get(i, 0.0)})
    res["ops"] = ops
    for label in builds:
        del res[label]["gen"]
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", type=Path, default=REPO.parent / "shared" / "models")
    ap.add_argument("--models", help="comma-separated model names (default: every shared one)")
    ap.add_argument("--anchors", type=Path,
                    help='M4 anchors re-measured by hand: {"models": {NAME: {"instructions": N}}}')
    ap.add_argument("--json", type=Path, help="also write the figures to this file")
    ap.add_argument("--cores", default=",".join(MACHINES),
                    help=f"comma-separated cores for the every-core table (default: "
                         f"{','.join(MACHINES)}; empty: the M4 tables only)")
    ap.add_argument("--core-anchors", type=Path, default=ANCHORS_FILE,
                    help="the anchors per core (default: bench/anchors/cortex_m.json)")
    args = ap.parse_args()
    missing = H.tools_missing()
    if missing:
        print(f"cortex_m bench: missing tools {missing}; run 'make setup'", file=sys.stderr)
        return 1
    remeasured = {}
    if args.anchors is not None:
        remeasured = {m: v["instructions"] for m, v in
                      json.loads(args.anchors.read_text())["models"].items()}
    names = args.models.split(",") if args.models else MODELS
    qemu = subprocess.run([H.QEMU, "--version"], capture_output=True, text=True).stdout
    print("== Cortex-M4 instructions per inference: QEMU mps2-an386, -icount shift=0 ==")
    print(f"compiler: {H.compiler_version()}; flags: {' '.join(H.CFLAGS)}")
    print(f"emulator: {qemu.splitlines()[0] if qemu else 'unknown'}")
    report: dict = {"models": {}}
    cal_lines: set = set()
    with tempfile.TemporaryDirectory(prefix="bench_cortex_m_") as tmp:
        for name in names:
            path = args.models_dir / f"{name}.tflite"
            if not path.is_file():
                print(f"{name}: missing ({path})")
                continue
            report["models"][name] = measure(name, path.read_bytes(), Path(tmp), cal_lines)
        models = {n: (args.models_dir / f"{n}.tflite").read_bytes() for n in names
                  if (args.models_dir / f"{n}.tflite").is_file()}
        cores = {}
        for core in [c for c in args.cores.split(",") if c]:
            if core not in MACHINES:
                print(f"unknown core {core!r}: one of {', '.join(MACHINES)}", file=sys.stderr)
                return 2
            cores[core] = {"all": list(models),
                           "runs": [measure_core(core, models, Path(tmp), cal_lines, spec)
                                    for spec in core_schemes(core)]}
        report["cores"] = cores
    for line in sorted(cal_lines):
        print(line)
    rows = report["models"]
    print("\nInstructions per inference (outputs bit-exact with TFLM in every build):")
    hdr = (f"  {'model':20} {'generic':>10} {'m4 int16 w':>10} {'m4 int8 w':>10}  "
           f"{'TFLM+CMSIS-NN':>13} {'ratio':>6} {'goal':>5}")
    print(hdr)
    for name, r in rows.items():
        anchor = QUOTED_TFLM_CMSIS_NN.get(name)
        goal = GOAL.get(name, GOAL_DEFAULT)
        a = f"{fmt_m(anchor):>13} {r['int8']['instructions'] / anchor:6.3f} {goal:5.2f}" \
            if anchor else f"{'-':>13} {'-':>6} {'-':>5}"
        print(f"  {name:20} {fmt_m(r['generic']['instructions'])} "
              f"{fmt_m(r['int16']['instructions'])} {fmt_m(r['int8']['instructions'])}  {a}")
        if name in remeasured:
            ra = remeasured[name]
            print(f"  {'':20} {'':10} {'':10} {'':10}  {fmt_m(ra):>13} "
                  f"{r['int8']['instructions'] / ra:6.3f}  (re-measured here)")
    print("  (TFLM+CMSIS-NN: quoted from issue #22, commit 90b983c2, same harness; ratio: "
          "m4 int8 w / TFLM+CMSIS-NN)")
    print("\nSizes in bytes (the emitted module alone; pool: activation pool / its lower bound; "
          "weights: the .tflite's):")
    print(f"  {'model':20} {'.text g/16/8':>22} {'.rodata g/16/8':>24} {'pool g/16/8 (bound)':>28} "
          f"{'weights':>8} {'consts int8 w':>13} {'ratio':>6} {'int16 w':>7}")
    for name, r in rows.items():
        g, a, b = r["generic"], r["int16"], r["int8"]
        w = r["weight_bytes"]
        print(f"  {name:20} {g['text']:>6} {a['text']:>7} {b['text']:>7} "
              f"{g['rodata']:>7} {a['rodata']:>7} {b['rodata']:>8} "
              f"{g['pool']:>7} {a['pool']:>6} {b['pool']:>6} ({b['lower_bound']:>6}) "
              f"{w:>8} {b['constants']:>13} {b['constants'] / w:6.3f} {a['constants'] / w:7.3f}")
    print(f"  (goal: constants <= {GOAL_CONSTANTS} x the weights, pool at its lower bound)")
    for name, r in rows.items():
        print(f"\n{name} per operator (profile builds; nominal MACs count every filter tap):")
        print(f"  {'node':>4} {'operator':18} {'shape':26} {'kernel (cortex-m4)':28} {'MACs':>9} "
              f"{'generic':>10} {TARGET:>10} {'instr/MAC':>9} {'->':>2} {'instr/MAC':>9}")
        for o in r["ops"]:
            m = o["macs"]
            ig, it = o["generic"], o["target"]
            ipm_g = f"{ig / m:9.2f}" if m else f"{'-':>9}"
            ipm_t = f"{it / m:9.2f}" if m else f"{'-':>9}"
            print(f"  {o['node']:>4} {o['op']:18} {o['shape']:26} {o['kernel']:28} {m:>9} "
                  f"{ig / 1e3:8.1f} k {it / 1e3:8.1f} k {ipm_g} -> {ipm_t}")
        tm = sum(o["macs"] for o in r["ops"])
        if tm:
            print(f"  all: {tm} MACs, {sum(o['generic'] for o in r['ops']) / tm:.2f} -> "
                  f"{sum(o['target'] for o in r['ops']) / tm:.2f} instructions per MAC")
    kernels: dict = {}
    for name, r in rows.items():
        for o in r["ops"]:
            if o["macs"]:
                k = kernels.setdefault(o["kernel"], {"macs": 0, "target": 0.0, "models": set()})
                k["macs"] += o["macs"]
                k["target"] += o["target"]
                k["models"].add(name.split("_")[0])
    if kernels:
        print("\nInstructions per MAC per cortex-m4 kernel (all layers of the models above):")
        for k, v in sorted(kernels.items()):
            print(f"  {k:32} {v['target'] / v['macs']:5.2f}  ({v['macs']} MACs; "
                  f"{', '.join(sorted(v['models']))})")
        report["kernels"] = {k: {"macs": v["macs"], "instructions": v["target"]}
                             for k, v in kernels.items()}
    if cores:
        print_cores(cores, load_anchors(args.core_anchors))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

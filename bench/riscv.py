#!/usr/bin/env python3
"""The riscv template on QEMU (``-icount shift=0``): instructions per inference of every shared
model, ours beside TFLite Micro's, each output compared byte for byte with TFLM's Python
interpreter.

* ours: each model emitted for ``riscv32`` (the generic kernels), built for the board
  (``qemu_virt_rv32``, rv32imafc, by default: its RAM holds every model; ``qemu_sifive_e``
  holds the ones that fit 16 KiB) and run host-driven on one seeded random input. Under
  ``-icount shift=0`` QEMU's ``mcycle`` is the instruction count, and the firmware reports
  cycles at the board's clock, so instructions = device seconds x that clock;
* the anchor: TFLite Micro built for ``riscv32_generic`` (its reference kernels) on the same
  machine, measured by hand from a fetched TFLM tree; only its figures and their provenance are
  kept, in ``bench/anchors/riscv32.json`` (no code, binary or build script of it). A model with
  no anchor figure prints n/a;
* the ratio ours / TFLM (goal: <= 0.5) and whether the outputs are byte-equal to TFLM's.

Usage: python bench/riscv.py [--models-dir DIR] [--board B] [--model NAME ...] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from project_api.api.project import generate_project  # noqa: E402
from project_api.emit import emit  # noqa: E402
from project_api.emit.reference import run_tflm  # noqa: E402
from project_api.emit.target import for_cpu  # noqa: E402
from project_api.system.paths import template_dir  # noqa: E402
from project_api.template.boards import board_entry  # noqa: E402

_LOG = logging.getLogger("bench.riscv")
ANCHORS = REPO / "bench" / "anchors" / "riscv32.json"
#: Room for the largest shared model on the big-RAM board (the defaults suit the FE310).
BIG_OPTIONS = {"workspace_size_bytes": 256 * 1024, "max_packet_size_bytes": 4096,
               "stack_size_bytes": 8192}


def seeded_inputs(mlf: Any, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for t in mlf.inputs:
        if t.dtype.startswith("int"):
            info = np.iinfo(t.dtype)
            out.append(rng.integers(info.min, info.max, t.shape, dtype=t.dtype, endpoint=True))
        else:
            out.append(rng.uniform(-1, 1, t.shape).astype(t.dtype))
    return out


def measure(tflite: Path, board: str, work: Path, opt_level: str | None = None) -> dict[str, Any]:
    entry = board_entry(template_dir("riscv"), board) or {}
    mlf = emit(tflite, work / f"{tflite.stem}.tar", name="default", target=for_cpu(entry["cpu"]))
    inputs = seeded_inputs(mlf)
    options = {"board": board, **(BIG_OPTIONS if entry["memory"]["ram"]["length"] > 1 << 20
                                  else {})}
    if opt_level is not None:
        options["opt_level"] = opt_level
    with generate_project("riscv", mlf.path, work / tflite.stem, options, build=True) as project:
        project.flash()
        with project.session() as session:
            model = session.model()
            for i, x in enumerate(inputs):
                model.set_input(i, x)
            model.run()
            ours = [model.get_output(i) for i in range(len(mlf.outputs))]
            seconds = session.time(model, number=1, repeat=3).min
    row: dict[str, Any] = {"instructions": round(seconds * entry["clock"]["hz"])}
    try:
        tflm = run_tflm(tflite.read_bytes(), inputs)
    except Exception as exc:  # noqa: BLE001 - TFLM refuses some models (hybrid float32)
        row["tflm_refused"] = str(exc).splitlines()[0]
        return row
    row["byte_equal"] = all(a.tobytes() == b.tobytes() for a, b in zip(ours, tflm, strict=True))
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models-dir", type=Path, default=REPO.parent / "shared" / "models")
    ap.add_argument("--board", default="qemu_virt_rv32")
    ap.add_argument("--model", action="append", help="only this model (stem); repeatable")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--opt-level", help="the template's opt_level option (default: its own)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    anchors = json.loads(ANCHORS.read_text()) if ANCHORS.is_file() else {"models": {}}
    rows = {}
    with tempfile.TemporaryDirectory(prefix="bench-riscv-") as tmp:
        for tflite in sorted(args.models_dir.glob("*.tflite")):
            if args.model and tflite.stem not in args.model:
                continue
            try:
                rows[tflite.stem] = measure(tflite, args.board, Path(tmp), args.opt_level)
            except Exception as exc:  # noqa: BLE001 - one line per model, the table goes on
                rows[tflite.stem] = {"error": str(exc).splitlines()[0]}
            tflm = anchors["models"].get(tflite.stem, {}).get("instructions")
            rows[tflite.stem]["tflm_instructions"] = tflm
    if args.json:
        print(json.dumps({"board": args.board, "anchor": anchors.get("provenance"),
                          "models": rows}, indent=2))
        return 0
    print(f"riscv32 on {args.board} (QEMU -icount shift=0): instructions per inference")
    print(f"{'model':<26}{'ours':>14}{'TFLM ref':>14}{'ratio':>8}  outputs vs TFLM")
    for name, row in rows.items():
        if "error" in row:
            print(f"{name:<26}{'error':>14}  {row['error']}")
            continue
        tflm = row["tflm_instructions"]
        ratio = f"{row['instructions'] / tflm:.2f}" if tflm else "n/a"
        verdict = (f"n/a: TFLM cannot run it ({row['tflm_refused']})" if "tflm_refused" in row
                   else "byte-equal" if row["byte_equal"] else "DIFFERENT")
        print(f"{name:<26}{row['instructions']:>14,}{(f'{tflm:,}' if tflm else 'n/a'):>14}"
              f"{ratio:>8}  {verdict}")
    if not anchors["models"]:
        why = anchors.get("why", f"no {ANCHORS.relative_to(REPO)}").split(":")[0]
        print(f"TFLM anchor: n/a ({why}; see {ANCHORS.relative_to(REPO)})")
    # Fails when a model does not run or differs from TFLM; one TFLM refuses is only reported.
    return 0 if all(r.get("byte_equal") or "tflm_refused" in r for r in rows.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

"""``project-api analyze MODEL``: where the memory goes, per layer, and whether it fits a board.

The logic is :func:`project_api.tools.analyze.analyze`; this verb parses the command line, prints the
table (or ``--json``) and writes the pictures of ``--plot`` (:mod:`project_api.tools.plot`). A model
that does not fit the board is reported in full, then the exit status is 1 with one line naming
the region, the bytes over and the largest parts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from project_api.cli.base import Subcommand, UsageError, add_option_argument

#: Widest tensor text in the table's shape column.
_SHAPE_WIDTH = 40


def _n(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def _shapes(facts: Any) -> str:
    return ", ".join(t.text() for t in facts) or "-"


def render(a: Any) -> str:
    """The analysis as a table and a few lines of totals, sizes and fit."""
    lines: list[str] = []
    counts = ", ".join(f"{n} {k}" for k, n in sorted(a.kernel_counts.items()))
    kind = {"tflite": "TFLite model, emitted in memory", "mlf": "archive of project-api emit",
            "tvm": "archive compiled by TVM"}[a.kind]
    weights = f", {a.weights} weights" if getattr(a, "weights", None) else ""
    lines.append(f"{a.title}: module {a.module} ({kind}), {a.target} kernels{weights}"
                 + (f" ({counts})" if counts else ""))
    measured = a.sizes is not None and a.sizes.measured
    if a.layers is not None:
        head = (f"{'node':>4}  {'operator':<18} {'kernel':<7} {'input -> output':<{_SHAPE_WIDTH}} "
                f"{'MACs':>10} {'weights':>8} {'scratch':>7} {'live pool':>9}")
        if measured:
            head += f" {'code':>6}"
        lines += [head, "-" * len(head)]
        for la in a.layers:
            io = f"{_shapes(la.inputs)} -> {_shapes(la.outputs)}"
            if len(io) > _SHAPE_WIDTH:
                io = io[:_SHAPE_WIDTH - 3] + "..."
            row = (f"{la.node:>4}  {la.op[:18]:<18} {la.kernel:<7} {io:<{_SHAPE_WIDTH}} "
                   f"{la.macs:>10,} {la.weight_bytes:>8,} {la.scratch_bytes:>7,} "
                   f"{la.live_bytes:>9,}")
            if measured:
                code, _ = a.sizes.layer_bytes(la)
                row += f" {_n(code):>6}"
            lines.append(row)
        shared = a.sizes.shared_code_bytes(a.layers) if measured else None
        if shared:
            lines.append(f"      (entry point and shared helpers: {shared:,} B of code)")
    else:
        lines.append("per layer: not known (" + "; ".join(a.unknown) + ")")
        for f in a.operator_functions:
            code = a.sizes.symbols.get(f["function"]) if measured else None
            lines.append(f"  fused function {f['function']}: workspace {f['workspace_bytes']:,} B"
                         + (f", code {code[1]:,} B" if code else ""))
    lines.append("")
    lines.append("inputs:  " + ", ".join(f"{t.name} {t.text()}" for t in a.inputs))
    lines.append("outputs: " + ", ".join(f"{t.name} {t.text()}" for t in a.outputs))
    bound = (f" (planner's lower bound {a.pool_plan.lower_bound:,} B)" if a.layers is not None
             else " (lower bound not known)")
    extra = (f"; pools in the model's C {a.internal_pool_bytes:,} B" if a.internal_pool_bytes
             else "")
    if a.external_pools:
        extra += "; pools the caller provides: " + ", ".join(
            f"{k} {_n(v)} B" for k, v in a.external_pools.items())
    lines.append(f"totals: {_n(a.macs)} MACs; weights {a.weight_bytes:,} B (as stored for "
                 f"{a.target}); activation pool {a.pool_plan.size:,} B{bound}{extra}; state "
                 f"{a.state_bytes:,} B")
    for c in a.comparisons:
        lines.append(f"  beside the pool: {c.label} {c.bytes:,} B" + (f" ({c.note})" if c.note
                                                                        else ""))
    if a.sizes is not None:
        s = a.sizes
        if s.measured:
            lines.append(f"sizes (measured: {s.how}): code {_n(s.code_bytes)} B, constants "
                         f"{s.constant_bytes:,} B" + (f", data {s.data_bytes:,} B" if s.data_bytes
                                                      else ""))
        else:
            lines.append(f"sizes ({s.how}): code {_n(s.code_bytes)} B, constants "
                         f"{s.constant_bytes:,} B; estimates: " + "; ".join(s.estimates))
    if a.fit is not None:
        f = a.fit
        parts = []
        for region, r in f.regions.items():
            name = "RAM" if region == "ram" else region
            split = ", ".join(f"{k} {v:,}" for k, v in r["split"].items() if v)
            of = f" of {r['length']:,}" if r.get("length") else ""
            share = f", {100.0 * r['used'] / r['length']:.1f} %" if r.get("length") else ""
            parts.append(f"{name} {r['used']:,}{of} B{share} ({split})")
        verdict = "fits" if f.fits else "DOES NOT FIT"
        lines.append(f"fit on {f.board} ({f.template} template, its build's memory report): "
                     f"{verdict}")
        lines += [f"  {p}" for p in parts]
        for region, top in f.largest.items():
            name = "RAM" if region == "ram" else region
            lines.append(f"  largest in {name}: " + "; ".join(
                f"{p['name']} {p['size']:,} B ({p['category']})" for p in top))
    elif a.fit_note:
        lines.append(f"fit: {a.fit_note}")
    return "\n".join(lines)


class AnalyzeCommand(Subcommand):
    NAMES = ["analyze"]
    HELP = "Show where a model's memory goes, per layer, and whether it fits a board."
    DESCRIPTION = (
        "Analyze a .tflite (emitted in memory) or an MLF archive: per layer the operator, its "
        "kernel (generic, DSP, view), input and output shapes, MACs, weight bytes as stored for "
        "the kernel target, scratch and the activation-pool bytes live while it runs; the "
        "totals (MACs, weights, pool beside the planner's lower bound, state); code and "
        "constant sizes measured by compiling the C for the CPU with its toolchain (else marked "
        "estimates); and with --template and -o board=B the whole firmware's flash and RAM "
        "against that board, from its build's memory report. Exit status 1 when it does not fit."
    )
    EPILOG = """\
examples:
  project-api analyze kws.tflite                          # generic kernels, host compiler
  project-api analyze kws.tflite --target cortex-m4       # DSP kernels, arm-none-eabi-gcc
  project-api analyze kws.tflite --template stm32 -o board=qemu_netduinoplus2
  project-api analyze ad01.tflite --template stm32 -o board=nucleo_l432kc   # exit 1: flash
  project-api analyze kws.tar --json > kws.json           # an archive (ours or TVM's)
  project-api analyze kws.tflite --target cortex-m4 --plot pictures/
  project-api analyze vww.tflite --target cortex-m4 --weights int16   # as emit --weights int16

--plot DIR writes pool.png (the activation pool: tensors as rectangles over layer x offset,
the planner's lower bound dashed), layers.png (MACs and weight bytes per layer) and
memory.png (flash and RAM split by part against the board's regions); matplotlib is the
'plot' extra. Existing pictures are replaced only with --force.

An MLF archive TVM compiled records no layers: its analysis shows the whole model, its pools
and sizes, and the fused functions its metadata lists, and says what is not known per layer.
--no-compile skips compiling and building: every size is then an estimate, and no fit."""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("model", metavar="MODEL", help="a .tflite, or an MLF .tar")
        parser.add_argument("--target", default=None, metavar="TARGET",
                            help="kernel target of a .tflite: generic, cortex-m0, cortex-m4, "
                                 "cortex-m7, cortex-m33, riscv32, rv32imafc or -mcpu=CPU (default: the board's CPU "
                                 "with --template, else generic)")
        parser.add_argument("--weights", default=None, choices=("int8", "int16"),
                            help="weight layout of a .tflite's DSP convolutions, as emit "
                                 "--weights: int8 (default) or int16; an archive records its own")
        parser.add_argument("--template", "-t", metavar="NAME|DIR",
                            help="check the fit against this template's board (-o board=B)")
        add_option_argument(parser)
        parser.add_argument("--module", default=None, help="module of the archive (default: "
                                                           "the only one)")
        parser.add_argument("--plot", metavar="DIR", help="write the pictures (PNG) into DIR")
        parser.add_argument("--force", action="store_true", help="replace pictures in --plot DIR")
        parser.add_argument("--no-compile", action="store_true",
                            help="measure nothing: no compiler, no build (estimates only)")

    def invoke(self) -> int:
        from project_api.tools.analyze import analyze

        a = self.args
        model = Path(a.model)
        if not model.is_file():
            what = "is not a file" if model.exists() else "does not exist"
            raise UsageError(f"model {model} {what}; pass a .tflite or an MLF .tar")
        if a.options and not a.template:
            raise UsageError("-o NAME=VALUE sets the options of --template's project; give "
                             "--template too (e.g. --template stm32 -o board=nucleo_f429zi)")
        if a.plot:
            from project_api.system import extras

            extras.require("matplotlib", "analyze --plot")
        options: dict[str, Any] = {}
        if a.template:
            from project_api.api.project import (
                TemplateProject,
                parse_option_assignments,
                resolve_template,
            )

            with TemplateProject.from_directory(resolve_template(a.template)) as tpl:
                options = parse_option_assignments(a.options, tpl.project_options, tpl.where)
        from project_api.errors import EmitError

        try:
            analysis = analyze(model, target=a.target, weights=a.weights, template=a.template,
                               options=options, module=a.module, compile=not a.no_compile,
                               progress=self.progress)
        except EmitError as exc:
            if a.target and "target" in str(exc).lower():
                raise UsageError(f"--target {a.target!r}: {exc}") from exc
            raise
        written: list[str] = []
        if a.plot:
            from project_api.tools.plot import ANALYZE_PICTURES, write_pictures

            written = [str(p) for p in write_pictures(analysis, a.plot, ANALYZE_PICTURES,
                                                      force=a.force)]
        data = analysis.to_json()
        data["pictures"] = written
        problem = analysis.fit.problem() if analysis.fit is not None else None
        if problem:
            data["error"] = problem

        def text() -> str:
            body = render(analysis)
            if written:
                body += "\npictures: " + ", ".join(written)
            return body

        self.output(data, text)
        if problem:
            sys.stderr.write(f"error: {problem}\n")
            return 1
        return 0


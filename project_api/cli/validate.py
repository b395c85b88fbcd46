"""``project-api validate``: run many samples on the device and compare with references.

The logic is :func:`project_api.tools.validate.validate`; this verb parses the command line, shows
progress on stderr (:mod:`project_api.cli.progress`) and prints a table (or ``--json``).
Thresholds given with ``--fail-under`` / ``--fail-over`` make the exit status 1 when a metric
falls short, for CI.
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

from project_api.cli.base import (
    Subcommand,
    UsageError,
    add_option_argument,
    add_retry_arguments,
    check_output_file,
    retry_policy,
)
from project_api.cli.run import _seconds
from project_api.errors import ProjectError
from project_api.system import extras

#: Comparison keys a threshold may name after ``@``.
_REFERENCE_KEYS = ("reference", "tflm", "litert")


def _metrics_help() -> str:
    from project_api.tools.metrics import METRICS

    lines = ["metrics (per output, over all samples):"]
    for name, (higher, text) in METRICS.items():
        gate = "--fail-under" if higher else "--fail-over "
        lines.append(f"  {name:<12} {gate}  {text}")
    return "\n".join(lines)


class ValidateCommand(Subcommand):
    NAMES = ["validate"]
    HELP = "Run many samples on the device and compare its outputs with a reference."
    DESCRIPTION = (
        "Run every sample of --data on the device of a built project, through one session, and "
        "compare each output with a reference: an .npz given with --reference, or TFLite Micro "
        "(bit-exact for int8) and LiteRT run on --model when it is a .tflite. Prints, per output, "
        "max and mean absolute error, RMSE, cosine similarity, L2 relative error, top-1 agreement "
        "(last axis > 1), the exact-match rate (integer outputs) and the device time per "
        "inference. With --template and --model instead of DIR the project is generated and "
        "built first. Thresholds (--fail-under / --fail-over) turn a shortfall into exit status 1."
    )
    EPILOG = """\
data: an .npz (or a folder of <input>.npy files) with one array per input, keyed by the
input's name, its C name or its index; the first axis is the sample:
  python -c "import numpy as np; np.savez('samples.npz', input_1=np.random.default_rng(0)
             .integers(-128, 128, (100, 1, 49, 10, 1), dtype=np.int8))"
A reference .npz has one array per output, keyed by output name, first axis = sample; a
one-input, one-output model also takes the pair published beside it as it is, e.g.
  project-api validate prj --data x.npy --reference y.npy
  project-api validate prj --data samples/dummy_input.h --reference samples/expected_output.h
(.txt: numbers separated by blanks or commas; .h: a C array initializer; shapes from the model)

thresholds: METRIC[@REF]=VALUE, repeatable, checked on every output that has the metric.
  --fail-under for agreements (fails when the metric is below VALUE),
  --fail-over for errors (fails when the metric is above VALUE).
  REF picks the reference: reference (--reference), tflm or litert; by default the first of
  --reference, then TFLite Micro.

examples:
  project-api validate prj --data samples.npz --model model.tflite --fail-under exact=1.0
  project-api validate prj --data samples.npz --reference ref.npz --fail-over max_abs=0.01
  project-api validate prj --data samples/ --model model.tflite --fail-under top1@litert=0.99
  project-api validate --template host --model model.tflite --data samples.npz --save out.npz
  project-api validate prj --data samples.npz --model model.tflite --json > report.json
  project-api validate prj --data frames.npz --model lstm.tflite --no-reset   # one stream

state: a model that keeps state from one run to the next (LSTM, SVDF, resource variables) has it
  reset before every sample, and the references start each sample afresh; --no-reset carries it
  instead (the samples are one stream, in order). The report (and --json "state") says which.

"""

    @classmethod
    def prepare_help(cls, parser: argparse.ArgumentParser, argv: list[str]) -> None:
        parser.epilog = (parser.epilog or "") + _metrics_help()

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project_dir", nargs="?", help="a generated, built and flashed project")
        parser.add_argument("--data", "-d", required=True, metavar="SAMPLES",
                            help="samples: .npz, or a folder of <input>.npy/.txt/.h, one array "
                                 "per input (first axis = sample); for a one-input model also "
                                 "one .npy, .txt or .h")
        parser.add_argument("--reference", "-r", metavar="REF",
                            help="expected outputs: .npz (or a folder of <output>.npy/.txt/.h) "
                                 "keyed by output name; for a one-output model also one .npy, "
                                 ".txt or .h (the sample output published beside a model)")
        parser.add_argument("--model", "-m", metavar="MODEL",
                            help="a .tflite: compare with TFLite Micro and LiteRT run on it "
                                 "(for a model TFLite Micro cannot run, such as one with TILE, "
                                 "LiteRT's reference kernels stand in for it, and the report "
                                 "says so; with --template: the model to build, .tflite or "
                                 "MLF .tar)")
        parser.add_argument("--no-litert", action="store_true",
                            help="with a .tflite --model, compare with TFLite Micro only")
        parser.add_argument("--fail-under", action="append", default=[], metavar="METRIC=VALUE",
                            help="exit 1 if an agreement metric (cosine, top1, exact) is below "
                                 "VALUE (repeatable; METRIC@REF=VALUE picks the reference)")
        parser.add_argument("--fail-over", action="append", default=[], metavar="METRIC=VALUE",
                            help="exit 1 if an error metric (max_abs, mean_abs, rmse, l2r, "
                                 "max_abs_int) is above VALUE (repeatable)")
        parser.add_argument("--save", metavar="OUT.npz",
                            help="write every device output to exactly this file (keyed by "
                                 "output name, first axis = sample)")
        parser.add_argument("--force", action="store_true",
                            help="overwrite --save / replace --out if they exist")
        parser.add_argument("--limit", type=int, metavar="N", help="only the first N samples")
        parser.add_argument("--module", default=None, help="model module name (default: the only one)")
        parser.add_argument("--repeat", type=int, default=3,
                            help="rounds of the device timing (default 3)")
        parser.add_argument("--number", type=int, default=10,
                            help="runs per timing round (default 10; 0 skips timing)")
        parser.add_argument("--no-pipeline", action="store_true",
                            help="one request at a time even where the link allows several")
        parser.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                            help="wait at most SECONDS for each reply of the device, the timing "
                                 "included (0: forever; default: the template's per-reply limit)")
        parser.add_argument("--no-reset", action="store_true",
                            help="a model that keeps state (LSTM, SVDF, resource variables) has it "
                                 "reset before every sample; with this, carry it from one sample to "
                                 "the next instead (the samples are the successive steps of one "
                                 "stream)")
        add_retry_arguments(parser)
        parser.add_argument("--quantize", action="store_true",
                            help="quantize float data for an integer input with the input's "
                                 "scale and zero point (as TFLite does) before sending it")
        layers = parser.add_argument_group("per layer (a debug build that hands back every "
                                           "intermediate tensor)")
        layers.add_argument("--per-layer", action="store_true",
                            help="compare every intermediate tensor with TFLite Micro's "
                                 "(needs a .tflite --model) and name the first layer over the "
                                 "thresholds; runs a debug build of the model on the project's "
                                 "template and board (first 8 samples unless --limit)")
        layers.add_argument("--layer-fail-over", action="append", default=[],
                            metavar="METRIC=VALUE",
                            help="a layer fails when METRIC is above VALUE (repeatable; default "
                                 "max_abs_int=0 and l2r=1e-05)")
        farm = parser.add_argument_group("boards on other machines (labgrid)")
        farm.add_argument("--places", metavar="PATTERN",
                          help="spread the samples over every free labgrid place matching "
                               "PATTERN (shell-style, e.g. 'nucleo-*'), one session per place")
        farm.add_argument("--coordinator", metavar="HOST:PORT",
                          help="labgrid coordinator (default: LG_COORDINATOR)")
        one_go = parser.add_argument_group("generate + build + validate in one go")
        one_go.add_argument("--template", help="template name or directory (e.g. host)")
        one_go.add_argument("--out", help="where to keep the generated project (default: a "
                                          "temporary directory, removed afterwards)")
        add_option_argument(one_go)

    # --- checks before anything runs -----------------------------------------------------------

    def _thresholds(self, tflite: bool) -> list[Any]:
        from project_api.tools.metrics import parse_thresholds
        from project_api.tools.validate import ValidationError

        a = self.args
        try:
            thresholds = parse_thresholds(a.fail_under, a.fail_over)
        except ValidationError as err:
            raise UsageError(str(err)) from None
        planned = (["reference"] if a.reference else []) + (
            ["tflm"] + ([] if a.no_litert else ["litert"]) if tflite else [])
        for th in thresholds:
            if not planned:
                raise UsageError(f"threshold {th} needs a reference; pass --reference REF.npz or "
                                 "a .tflite --model")
            if th.reference is not None and th.reference not in planned:
                known = ", ".join(k for k in _REFERENCE_KEYS if k in planned)
                raise UsageError(f"threshold {th}: there is no {th.reference!r} comparison in "
                                 f"this run (there is: {known})")
        return thresholds

    def invoke(self) -> int:
        a = self.args
        if a.repeat < 1 or a.number < 0:
            raise UsageError("--repeat must be at least 1 and --number at least 0")
        if a.limit is not None and a.limit < 1:
            raise UsageError("--limit must be at least 1")
        check_output_file(a.save, "--save", a.force, "out.npz")
        model = Path(a.model) if a.model else None
        if model is not None and not model.is_file():
            raise ProjectError(f"model {model} does not exist; check the path")
        is_tflite = model is not None and model.suffix == ".tflite"
        if is_tflite:
            extras.require("tflite_micro",
                           "validate --model X.tflite (its reference is TFLite Micro)")
        if a.per_layer:
            return self._per_layer(model if is_tflite else None)
        if a.layer_fail_over:
            raise UsageError("--layer-fail-over goes with --per-layer")
        if a.project_dir and a.template:
            raise UsageError("give either a project DIR or --template with --model, not both")
        if a.project_dir:
            if a.out:
                raise UsageError("--out goes with --template/--model")
            if a.places and a.options:
                raise UsageError("-o does not go with --places: each place gets its own "
                                 "labgrid_place")
            if model is not None and not is_tflite:
                raise UsageError("with a project DIR, --model is the .tflite to compare with")
            thresholds = self._thresholds(is_tflite)
            if a.places:
                if a.no_reset:
                    raise UsageError("--no-reset does not go with --places: one stream of "
                                     "samples cannot be shared out between boards")
                if not (a.coordinator or os.environ.get("LG_COORDINATOR")):
                    raise UsageError("--places needs the labgrid coordinator: pass --coordinator "
                                     "HOST:PORT or set LG_COORDINATOR")
                self._check_sources()
                return self._on_places(model if is_tflite else None, thresholds)
            self._check_sources()
            from project_api.api.project import GeneratedProject

            with GeneratedProject.from_directory(a.project_dir, debug=self.verbosity > 1) as project:
                if a.options:  # e.g. -o serial_url=... or -o labgrid_place=... for the session
                    from project_api.api.project import parse_option_assignments

                    project.override(parse_option_assignments(
                        a.options, project.project_options, project.where))
                return self._validate(project, model if is_tflite else None, thresholds)
        if a.places:
            raise UsageError("--places needs a built project DIR")
        if not (a.template and model):
            raise UsageError("give a project DIR, or --template and --model to do it all in one go")
        thresholds = self._thresholds(is_tflite)
        return self._one_go(model, is_tflite, thresholds)

    def _check_sources(self) -> None:
        """--data (and --reference) read as far as their headers, before any project is
        generated, built or opened: a wrong path or a damaged file is one line at once."""
        from project_api.tools.samples import check_source

        check_source(self.args.data, "data")
        if self.args.reference:
            check_source(self.args.reference, "reference")

    def _one_go(self, model: Path, is_tflite: bool, thresholds: list[Any]) -> int:
        self._check_sources()
        with self.one_go_project(model, "project-api-validate-") as project:
            return self._validate(project, model if is_tflite else None, thresholds)

    # --- per layer -------------------------------------------------------------------------------

    def _per_layer(self, tflite: Path | None) -> int:

        from project_api.api.project import (
            GeneratedProject,
            TemplateProject,
            generate_project,
            parse_option_assignments,
            resolve_template,
        )
        from project_api.tools.metrics import parse_thresholds
        from project_api.tools.validate_layers import (
            DEFAULT_THRESHOLDS,
            debug_archive,
            validate_layers,
        )

        a = self.args
        if tflite is None:
            raise UsageError("--per-layer compares with TFLite Micro: give the .tflite the "
                             "project was made from with --model")
        if a.reference or a.places or a.save or a.fail_under or a.fail_over:
            raise UsageError("--per-layer takes --data, --model, --limit and --layer-fail-over; "
                             "--reference, --places, --save, --fail-under and --fail-over go "
                             "with the plain validation")
        try:
            thresholds = (parse_thresholds([], a.layer_fail_over) if a.layer_fail_over
                          else list(DEFAULT_THRESHOLDS))
        except Exception as err:  # ValidationError: a bad METRIC=VALUE
            raise UsageError(f"--layer-fail-over: {err}") from None
        if a.project_dir and a.template:
            raise UsageError("give either a project DIR or --template with --model, not both")
        if not (a.project_dir or a.template):
            raise UsageError("--per-layer needs a project DIR (its template and board are used) "
                             "or --template")
        self._check_sources()
        from project_api.emit.target import for_cpu
        from project_api.template.targets import board_cpu

        if a.project_dir:
            with GeneratedProject.from_directory(a.project_dir) as project:
                platform, saved = project.platform_name, project.options
                kinds = _kernel_target(Path(project.directory))
            template = resolve_template(platform)
            with TemplateProject.from_directory(template) as tpl:
                generate_only = {o["name"] for o in tpl.project_options
                                 if set(o.get("optional") or []) <= {"generate_project"}}
            options = {k: v for k, v in saved.items() if k in generate_only
                       and k not in ("profile",)}
            target = kinds or for_cpu(board_cpu(template, options.get("board")))
        else:
            template = resolve_template(a.template)
            with TemplateProject.from_directory(template) as tpl:
                options = parse_option_assignments(a.options, tpl.project_options, tpl.where)
                default_board = next((o.get("default") for o in tpl.project_options
                                      if o["name"] == "board"), None)
            target = for_cpu(board_cpu(template, options.get("board", default_board)))
        options["project_type"] = "host_driven"
        with self.work_dir("project-api-layers-") as work:
            self.progress(f"emitting the debug build of {tflite} (every intermediate an output)")
            build = debug_archive(tflite.read_bytes(), work / "debug.tar", target)
            outputs = build.outputs
            if outputs > 255:
                raise ProjectError(f"the debug build of {tflite.name} has {outputs} outputs; the "
                                   "runtime takes at most 255 (TVM_CRT_MAX_ARGS)")
            if outputs > 10:  # the runtime's default TVM_CRT_MAX_ARGS
                more = f"-DTVM_CRT_MAX_ARGS={outputs}"
                options["compile_definitions"] = " ".join(
                    filter(None, [options.get("compile_definitions"), more]))
            self.progress(f"generating and building it on template {template.name}")
            bars, progress = self._bars()
            with generate_project(template, build.archive, work / "project", options,
                                  debug=self.verbosity > 1) as project:
                project.build()
                project.flash()
                try:
                    report = validate_layers(project, build, tflite.read_bytes(), a.data,
                                             thresholds=thresholds,
                                             limit=a.limit if a.limit is not None else 8,
                                             quantize=a.quantize, progress=progress,
                                             timeout_sec=a.timeout, debug=self.verbosity > 1)
                finally:
                    for bar in bars:
                        bar.close()
        self.output(report.to_json(), lambda: _layer_table(report, tflite, build.target))
        return 0 if report.first_failure is None else 1

    # --- the run ---------------------------------------------------------------------------------

    def _bars(self) -> tuple[list[Any], Any]:
        """The progress callback of validate(): one bar per step (device, each reference)."""
        bars: list[Any] = []

        def progress(label: str, total: int) -> Any:
            for bar in bars:
                bar.close()
            bar = self.bar(label, total)
            bars.append(bar)
            return bar.update
        return bars, progress

    def _retry(self) -> Any:
        """The recovery policy of ``--retries`` / ``--no-retry``."""
        return retry_policy(self.args)

    def _on_places(self, tflite: Path | None, thresholds: list[Any]) -> int:
        from project_api.tools.farm import validate_on_places
        from project_api.tools.validate import save_outputs

        a = self.args
        bars, progress = self._bars()
        self.progress(f"validating {a.project_dir} on the labgrid places matching {a.places!r}")
        try:
            sharded = validate_on_places(a.project_dir, a.data, a.places, a.reference,
                                         coordinator=a.coordinator, tflite=tflite,
                                         module=a.module, litert=not a.no_litert, limit=a.limit,
                                         progress=progress, quantize=a.quantize,
                                         timeout_sec=a.timeout,
                                         timeout_advice=self.timeout_advice,
                                         retry=self._retry())
        finally:
            for bar in bars:
                bar.close()
        report = sharded.validation
        failures = report.failures(thresholds) if thresholds else []
        if a.save:
            save_outputs(report, a.save, force=a.force)
        data = sharded.to_json()
        data.update(thresholds=[str(t) for t in thresholds], failures=failures, ok=not failures)
        if a.save:
            data["saved"] = str(a.save)
        self.output(data, lambda: _places_table(sharded) + "\n" +
                    _table(report, thresholds, failures, a.save).split("\n", 1)[1])
        return 1 if failures else 0

    def _validate(self, project: Any, tflite: Path | None, thresholds: list[Any]) -> int:
        from project_api.tools.validate import save_outputs, validate

        a = self.args
        bars, progress = self._bars()
        self.progress(f"validating on the device of {project.directory or 'the project'}")
        try:
            report = validate(project, a.data, a.reference, tflite=tflite, module=a.module,
                              litert=not a.no_litert, number=a.number, repeat=a.repeat,
                              pipeline=not a.no_pipeline, limit=a.limit, progress=progress,
                              debug=self.verbosity > 1, quantize=a.quantize,
                              timeout_sec=a.timeout, timeout_advice=self.timeout_advice,
                              reset_state=False if a.no_reset else None,
                              retry=self._retry())
        finally:
            for bar in bars:
                bar.close()
        failures = report.failures(thresholds) if thresholds else []
        if a.save:
            save_outputs(report, a.save, force=a.force)
        data = report.to_json()
        data["thresholds"] = [str(t) for t in thresholds]
        data["failures"] = failures
        data["ok"] = not failures and report.ok
        if a.save:
            data["saved"] = str(a.save)
        self.output(data, lambda: _table(report, thresholds, failures, a.save))
        return 0 if data["ok"] else 1


def _kernel_target(project_dir: Path) -> str | None:
    """The kernel target a project's archive was emitted with (None: not our emitter's)."""
    import json

    try:
        meta = json.loads((project_dir / "model" / "metadata.json").read_text())
    except (OSError, ValueError):
        return None
    targets = [m.get("kernel_target") for m in (meta.get("modules") or {}).values()
               if isinstance(m, dict)]
    return targets[0] if targets and isinstance(targets[0], str) else None


def _layer_table(report: Any, tflite: Path, target: str) -> str:
    lines = [f"per layer: {tflite.name} ({target} kernels) against TFLite Micro, "
             f"{report.samples} samples (a debug build: every intermediate an output)"]
    rows = [("node", "operator", "kernel", "tensor", "max_abs", "max_abs_int", "exact", "l2r",
             "")]
    for p, m in report.rows:
        bad = report.failures(p, m)
        rows.append((str(p.node), p.op, p.kernel,
                     f"{p.dtype}[{'x'.join(map(str, p.shape))}]", _fmt(m.max_abs),
                     _fmt(m.max_abs_int), _fmt(m.exact), _fmt(m.l2r), "OVER" if bad else ""))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        lines.append("  " + "  ".join(c.rjust(w) if i in (0, 4, 5, 6, 7) else c.ljust(w)
                                      for i, (c, w) in enumerate(zip(r, widths, strict=True))))
    first = report.first_failure
    limits = ", ".join(str(t) for t in report.thresholds)
    if first is None:
        lines.append(f"every layer within {limits}")
    else:
        p, _, bad = first
        lines.append(f"first layer over the thresholds ({limits}): node {p.node} {p.op} "
                     f"({p.kernel} kernel), tensor {p.name!r}: {'; '.join(bad)}")
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    if not math.isfinite(value):
        return str(value)  # nan, inf: a float output can hold them even from finite inputs
    if value == 0:
        return "0"
    if value == int(value) and abs(value) < 1e9:
        return str(int(value))
    return f"{value:.6g}" if abs(value) >= 1e-4 else f"{value:.3e}"


_COLUMNS = ("max_abs", "mean_abs", "rmse", "cosine", "l2r", "top1", "exact", "max_abs_int")


def _table(report: Any, thresholds: list[Any], failures: list[str], saved: str | None) -> str:
    lines = [
        f"model {report.module!r}: {report.samples} samples through one session, "
        f"{report.samples_per_second:.0f} samples/s ({report.pipeline_depth} request"
        f"{'s' if report.pipeline_depth != 1 else ''} in flight)",
    ]
    if report.state_note:
        lines.append(report.state_note)
    if report.recovery is not None:
        lines.append(f"link: {report.recovery.summary()}")
    if report.requested is not None and report.requested != report.samples:
        lines.append(f"{report.requested - report.samples} of {report.requested} samples were "
                     "not answered; the figures below are of the others")
    for sample, why in sorted(report.failed_samples.items()):
        lines.append(f"sample {sample} given up: {why}")
    if report.stopped is not None:
        lines.append(f"the run stopped early: {report.stopped}")
    t = report.timing
    if t is not None:
        lines.append(f"device time per inference: mean {t.mean * 1e3:.4f} ms, min "
                     f"{t.min * 1e3:.4f} ms (session.time on one sample, {len(t.results)} rounds)")
    if not report.comparisons:
        lines.append("no reference given (--reference or a .tflite --model): outputs not compared")
    for c in report.comparisons:
        took = f", computed in {c.seconds:.2f}s" if c.seconds else ""
        lines.append("")
        lines.append(f"against {c.reference} ({c.key}{took}):")
        rows = [("output", *_COLUMNS)] + [
            (m.name + (" (dequantized)" if m.dequantized else ""),
             *(_fmt(m.get(col)) for col in _COLUMNS)) for m in c.outputs]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            lines.append("  " + "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                                          for i, (cell, w) in enumerate(zip(r, widths, strict=True))))
    if thresholds:
        lines.append("")
        if failures:
            lines.append(f"FAILED {len(failures)} threshold check(s):")
            lines += [f"  {f}" for f in failures]
        else:
            lines.append("thresholds met: " + ", ".join(str(t) for t in thresholds))
    if saved:
        lines.append(f"device outputs saved to {saved}")
    return "\n".join(lines)


def _places_table(sharded: Any) -> str:
    """Samples and samples/s per place and in total, and what happened to each place."""
    report = sharded.validation
    lines = [f"model {report.module!r}: {report.samples} samples over "
             f"{sum(p.status in ('ok', 'failed') for p in sharded.places)} places, "
             f"{sharded.samples_per_second:.1f} samples/s in total ({sharded.wall_seconds:.1f} s "
             "with acquiring the places and opening the sessions)"]
    rows = [("place", "status", "samples", "samples/s", "")]
    for p in sharded.places:
        rows.append((p.name, p.status, str(p.samples), f"{p.samples_per_second:.1f}",
                     p.error or ""))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        lines.append("  " + "  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                                      for i, (c, w) in enumerate(zip(r[:4], widths, strict=True)))
                     + (f"  {r[4]}" if r[4] else ""))
    if sharded.retried_samples:
        failed = ", ".join(p.name for p in sharded.failed)
        lines.append(f"{sharded.retried_samples} samples of {failed} were run again on the others")
    return "\n".join(lines)

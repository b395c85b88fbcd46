"""``project-api profile PROJECT``: where the time goes, per operator, on the device.

The logic is :mod:`project_api.tools.profile`; this verb picks the inputs, opens the session (or reads
a standalone firmware's captured output with ``--log``), prints the table (or ``--json``) and
writes ``--plot``'s picture.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from project_api.cli.base import Subcommand, UsageError, add_option_argument, run_and_time
from project_api.cli.run import (
    DEFAULT_SEED,
    _bounded,
    _find,
    _load_input,
    _parse_inputs,
    _seconds,
    _seed,
    random_input,
)
from project_api.errors import ProjectError
from project_api.micro.timing import MAX_TIMING_NUMBER, MAX_TIMING_REPEAT


def _opt(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def render(report: Any, where: str) -> str:
    """The per-operator table and the lines on the whole, the overhead and the baseline."""
    r = report
    icount = r.instructions_per_second is not None
    lines = [f"profile of module {r.module!r} on {where}, {r.repeats} runs"
             + (" (QEMU -icount: 1 instruction per ns of device time)" if icount else "")]
    if r.ops:
        head = (f"{'node':>4}  {'operator':<18} {'kernel':<7} {'us':>10} "
                + (f"{'instructions':>13} " if icount else "")
                + f"{'share':>7} {'MACs':>10} {'MACs/us':>8}"
                + (f" {'instr/MAC':>9}" if icount else ""))
        lines += [head, "-" * len(head)]
        for o in r.ops:
            row = (f"{o.node:>4}  {o.op[:18]:<18} {o.kernel:<7} {o.seconds * 1e6:>10.2f} "
                   + (f"{o.instructions:>13,.0f} " if icount else "")
                   + f"{100 * o.share:>6.1f}% {o.macs:>10,} {_opt(o.macs_per_us, '8.1f'):>8}"
                   + (f" {_opt(o.instructions_per_mac, '9.2f'):>9}" if icount else ""))
            lines.append(row)
        total = r.sum_seconds
        lines.append(f"{'':>4}  {'all operators':<26} {total * 1e6:>10.2f} "
                     + (f"{r.instructions(total):>13,.0f} " if icount else "")
                     + f"{100 * total / r.whole_seconds if r.whole_seconds else 0:>6.1f}%")
    whole = f"{r.whole_seconds * 1e6:,.2f} us"
    if icount:
        whole += f" ({r.instructions(r.whole_seconds):,.0f} instructions)"
    lines.append(f"whole model: {whole} per run, by the device's time evaluator")
    if r.ops:
        un = r.unattributed_seconds
        lines.append(f"unattributed: {un * 1e6:,.2f} us ({100 * un / r.whole_seconds:.2f} % of "
                     "the whole: the entry point, the executor and the hooks' calls outside the "
                     "operators)")
        lines.append(f"overhead subtracted: {r.overhead_seconds * 1e6:.3f} us per operator, "
                     "measured on the device")
    if r.baseline_seconds is not None:
        change = r.baseline_change or 0.0
        lines.append(f"baseline (the plain build): {r.baseline_seconds * 1e6:,.2f} us per run; "
                     f"the profile build takes {100 * change:+.2f} %")
    if r.note:
        lines.append(f"note: {r.note}")
    return "\n".join(lines)


class ProfileCommand(Subcommand):
    NAMES = ["profile"]
    HELP = "Time every operator of a model on its device (a profile build)."
    DESCRIPTION = (
        "Run the model of a built project on its device --repeat times and read, after each "
        "run, the time of every operator from the profile build's table (emit --profile, or "
        "generate -o profile=true): the median per operator with the hooks' overhead (measured "
        "on the device) subtracted, its share of the whole model (timed by the device in the "
        "same session), MACs per microsecond and, on QEMU under -icount, instructions and "
        "instructions per MAC. An archive TVM compiled is timed whole, and the note says why. "
        "With --template and --model the project is generated (a profile build) and built first."
    )
    EPILOG = """\
examples:
  project-api emit kws.tflite --target cortex-m4 --profile --out kws-prof.tar
  project-api generate --template stm32 --model kws-prof.tar --out kws-prof
  project-api build kws-prof && project-api flash kws-prof
  project-api profile kws-prof --repeat 5 --plot pictures/
  project-api profile kws-prof --baseline kws-plain --json     # beside the unprofiled build
  project-api profile --template host --model kws.tflite       # one go: -o profile=true
  project-api profile kws-sa --log uart.txt                    # a standalone firmware's output

The device's table holds the last run only; the host reads it after each of --repeat runs.
--baseline DIR times a built project of the same model without profiling on the same inputs,
to show what profiling costs (on QEMU it is exact: instructions are counted).
--log FILE reads the 'ai: profile' lines a standalone firmware printed (project_type
standalone of a profile build) instead of opening a session; the whole is then the span from
the first operator to the last."""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project_dir", nargs="?", help="a built project of a profile build")
        parser.add_argument("--input", "-i", action="append", default=[], metavar="NAME=FILE",
                            help="an input: NAME (or index) = .npy file or raw .bin (repeatable)")
        parser.add_argument("--seed", type=_seed, default=DEFAULT_SEED,
                            help=f"seed of the random inputs, >= 0 (default {DEFAULT_SEED})")
        parser.add_argument("--repeat", type=_bounded("--repeat", MAX_TIMING_REPEAT), default=3,
                            help="profiled runs, and rounds of the whole-model timing "
                                 "(default 3)")
        parser.add_argument("--number", type=_bounded("--number", MAX_TIMING_NUMBER), default=10,
                            help="runs per round of the whole-model timing (default 10)")
        parser.add_argument("--module", default=None, help="model module (default: the only one)")
        parser.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                            help="wait at most SECONDS for each reply of the device")
        parser.add_argument("--baseline", metavar="DIR",
                            help="a built project of the same model without profiling: timed "
                                 "too, to show the profile build's cost")
        parser.add_argument("--log", metavar="FILE",
                            help="read a standalone firmware's captured output instead of "
                                 "running a session")
        parser.add_argument("--plot", metavar="DIR", help="write profile.png into DIR")
        parser.add_argument("--force", action="store_true",
                            help="replace the picture in --plot DIR / replace --out")
        one_go = parser.add_argument_group("generate (a profile build) + build + profile in "
                                           "one go")
        one_go.add_argument("--template", help="template name or directory (e.g. host, stm32)")
        one_go.add_argument("--model", help="model: .tflite or an MLF .tar of project-api emit")
        one_go.add_argument("--out", help="where to keep the generated project (default: a "
                                          "temporary directory, removed afterwards)")
        add_option_argument(one_go)

    def invoke(self) -> int:
        a = self.args
        if a.plot:
            from project_api.system import extras

            extras.require("matplotlib", "profile --plot")
        if a.project_dir and (a.template or a.model):
            raise UsageError("give either a project DIR or --template with --model, not both")
        if a.log:
            if not a.project_dir:
                raise UsageError("--log FILE needs the project DIR it was built from (for the "
                                 "model's layers)")
            return self._from_log(Path(a.project_dir), Path(a.log))
        from project_api.api.project import GeneratedProject

        if a.project_dir:
            with GeneratedProject.from_directory(a.project_dir, debug=self.verbosity > 1) as prj:
                if a.options:
                    from project_api.api.project import parse_option_assignments

                    prj.override(parse_option_assignments(a.options, prj.project_options,
                                                          prj.where))
                return self._profile(prj)
        if not (a.template and a.model):
            raise UsageError("give a project DIR, or --template and --model to do it all in one go")
        model = Path(a.model)
        if not model.is_file():
            what = "is not a file" if model.exists() else "does not exist"
            raise ProjectError(f"model {model} {what}; pass a .tflite or an MLF .tar")
        if not any(o.partition("=")[0] == "profile" for o in a.options) and _ours(model):
            a.options = [*a.options, "profile=true"]
        with self.one_go_project(model, "project-api-profile-") as project:
            return self._profile(project)

    def _library(self, project_dir: Path) -> Any:
        from project_api.archive import mlf

        extracted = project_dir / "model"
        if not (extracted / "metadata.json").is_file():
            raise ProjectError(f"{project_dir} holds no extracted model (model/metadata.json); "
                               "is it a project made by 'project-api generate'?")
        return mlf.open_mlf(extracted)

    def _inputs(self, module: Any) -> list[np.ndarray]:
        a = self.args
        given = {}
        for key, path in _parse_inputs(a.input):
            idx, tensor = _find(module.inputs, key, "input")
            given[idx] = _load_input(path, tensor)
        rng = np.random.default_rng(a.seed)
        inputs = [given[i] if i in given else random_input(t, rng)
                  for i, t in enumerate(module.inputs)]
        missing = [t.name for i, t in enumerate(module.inputs) if i not in given]
        if missing:
            self.progress(f"no --input for {', '.join(missing)}: seeded random inputs "
                          f"(seed {a.seed})")
        return inputs

    def _profile(self, project: Any) -> int:
        from project_api.tools.profile import instructions_per_second, profile_session

        a = self.args
        with self._library(Path(project.directory)) as lib:
            module = lib.module(a.module)
            metadata = lib.metadata
        inputs = self._inputs(module)
        rate = instructions_per_second(Path(project.directory), project.platform_name,
                                       project.options)
        self.progress(f"profiling {module.name!r} ({a.repeat} runs)")
        with project.session(debug=self.verbosity > 1, timeout_sec=a.timeout,
                             timeout_advice=self.timeout_advice) as session:
            report = profile_session(session, module, metadata, inputs, repeat=a.repeat,
                                     number=a.number, instructions_rate=rate)
        same = None
        if a.baseline:
            same = self._baseline(report, inputs)
        board = project.options.get("board")
        where = f"{project.platform_name}" + (f" ({board})" if board else "")
        return self._emit(report, where, same)

    def _baseline(self, report: Any, inputs: list[np.ndarray]) -> bool:
        from project_api.api.project import GeneratedProject

        a = self.args
        self.progress(f"timing the baseline {a.baseline}")
        with GeneratedProject.from_directory(a.baseline, debug=self.verbosity > 1) as base:
            with self._library(Path(base.directory)) as lib:
                module = lib.module(a.module)
            if module.profile:
                raise ProjectError(f"--baseline {a.baseline} is a profile build too; give the "
                                   "project of the plain build")
            with base.session(debug=self.verbosity > 1, timeout_sec=a.timeout,
                              timeout_advice=self.timeout_advice) as session:
                outputs, timing = run_and_time(session, module, inputs, a.number, a.repeat)
        report.baseline_seconds = timing.median
        return len(outputs) == len(report.outputs) and all(
            x.tobytes() == y.tobytes() for x, y in zip(outputs, report.outputs, strict=True))

    def _from_log(self, project_dir: Path, log: Path) -> int:
        from project_api.template.options import load_options
        from project_api.tools.profile import (
            build_report,
            instructions_per_second,
            module_layers,
            parse_log,
        )

        a = self.args
        if not log.is_file():
            raise ProjectError(f"--log {log} is not a file; capture the firmware's output first")
        with self._library(project_dir) as lib:
            module = lib.module(a.module)
            metadata = lib.metadata
        records = parse_log(log.read_text(errors="replace"), module.name)[module.name]
        options = load_options(project_dir)
        platform = "stm32" if (project_dir / "boards.yaml").is_file() and "board" in options \
            else ""
        rate = instructions_per_second(project_dir, platform, options)
        span = sorted(r.total_ticks for r in records)[len(records) // 2] / \
            max(records[0].ticks_per_second, 1)
        report = build_report(module.name, records, module_layers(metadata, module.name), span,
                              instructions_rate=rate,
                              note="from the firmware's output: the whole is the span from the "
                                   "first operator's hook to the last")
        return self._emit(report, f"the output in {log}", None)

    def _emit(self, report: Any, where: str, same: bool | None) -> int:
        a = self.args
        written: list[str] = []
        if a.plot:
            from project_api.tools.plot import PROFILE_PICTURES, write_pictures

            written = [str(p) for p in write_pictures(report, a.plot, PROFILE_PICTURES,
                                                      force=a.force)]
        data = report.to_json()
        data["where"] = where
        data["outputs"] = [o.tolist() for o in report.outputs]
        data["baseline_outputs_equal"] = same
        data["pictures"] = written

        def text() -> str:
            body = render(report, where)
            if same is not None:
                body += ("\noutputs: bit-exact with the baseline" if same
                         else "\noutputs: DIFFER from the baseline")
            if written:
                body += "\npictures: " + ", ".join(written)
            return body

        self.output(data, text)
        return 0 if same is not False else 1


def _ours(model: Path) -> bool:
    """A .tflite (emitted by the one-go path) or an archive of project-api emit: something
    ``-o profile=true`` can instrument."""
    if model.suffix == ".tflite":
        return True
    from project_api.archive import mlf

    try:
        with mlf.open_mlf(model) as lib:
            return all(isinstance(e, dict) and "layers" in e
                       for e in (lib.metadata.get("modules") or {}).values())
    except mlf.MLFError:
        return False

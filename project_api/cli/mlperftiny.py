"""``project-api mlperftiny``: the MLPerf Tiny benchmark's host side, open, over a project's own
transport (the logic is :mod:`project_api.tools.mlperftiny`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from project_api.cli.base import Subcommand, UsageError, add_retry_arguments, retry_policy
from project_api.errors import ProjectError


class MlperfTinyCommand(Subcommand):
    NAMES = ["mlperftiny"]
    HELP = "Run the MLPerf Tiny benchmark (performance or accuracy) on a mlperftiny project."
    DESCRIPTION = (
        "Drive the firmware of a project generated with -o project_type=mlperftiny through the "
        "benchmark's UART protocol, over the template's own transport (build/main, QEMU, the "
        "board's serial port). performance: for each of --windows inputs, 'infer N W' with N "
        "chosen so that each window lasts at least --min-window-seconds of device time (the "
        "benchmark's 10 s); reports the median throughput and inference time. accuracy: every "
        "sample of --data once; reports top-1 (KWS, VWW, IC) or the AUC of the reconstruction "
        "error (AD). On a noisy link the run recovers from faults (--retries): every load is "
        "checked (the firmware's 'db crc', else 'db print') and resumed after a fault, every "
        "result confirmed by a second 'results', performance laps checked against timestamps; "
        "the report, --json ('recovery') and --results say what it cost. A sample given up "
        "after its retries is named and the exit status is 1, the rest of the report written."
    )
    EPILOG = """\
data: a folder with y_labels.csv and the .bin files it names (the EnergyRunner's layout:
  file,classes,class[,window bytes,stride bytes]), or an .npz with 'x' (inputs, sample first;
  a sample may hold several inputs back to back, e.g. AD windows) and 'y' (true classes).
  Each input must have the model's input size (for an int8 model, float32 values are also
  taken and quantized on the device).

examples:
  project-api generate --template stm32 --model kws.tar --out prj -o project_type=mlperftiny
  project-api build prj && project-api flash prj
  project-api mlperftiny prj --mode performance --data kws01/
  project-api mlperftiny prj --mode accuracy --data kws01/ --results results.txt
  project-api mlperftiny prj --mode accuracy --data samples.npz --json
  project-api mlperftiny prj --mode accuracy --data kws01/ --retries 16   # a very noisy UART
"""

    @classmethod
    def add_arguments(cls, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("project_dir", help="a generated, built (and flashed) mlperftiny "
                                                "project")
        parser.add_argument("--mode", choices=["performance", "accuracy"], required=True)
        parser.add_argument("--data", "-d", required=True, metavar="DATA",
                            help="folder with y_labels.csv and .bin files, or .npz (x, y)")
        parser.add_argument("--windows", type=int, default=5,
                            help="performance: windows, one input each (default 5)")
        parser.add_argument("--warmups", type=int, default=10,
                            help="performance: warm-up inferences per window (default 10)")
        parser.add_argument("--min-window-seconds", type=float, default=10.0, metavar="S",
                            help="performance: device time each window lasts at least (the "
                                 "benchmark's rule: 10)")
        parser.add_argument("--limit", type=int, metavar="N",
                            help="accuracy: only the first N samples")
        parser.add_argument("--results", metavar="results.txt",
                            help="write the report laid out like a submission's results.txt")
        parser.add_argument("--force", action="store_true", help="overwrite --results")
        parser.add_argument("--no-reset", action="store_true",
                            help="a model that keeps state (LSTM, SVDF, resource variables) has it "
                                 "reset before every sample (window in performance mode); with "
                                 "this, carry it from one sample to the next (one stream)")
        parser.add_argument("--timeout", type=float, default=10.0, metavar="S",
                            help="seconds to wait for each reply line (default 10); with "
                                 "recovery on, a reply is given up sooner, after a wait sized "
                                 "from the replies measured so far, and this stays the ceiling")
        add_retry_arguments(
            parser, how="bring the device back in step (reopening the link if it stays "
                        "silent), check what it loaded and answered, and go on where the fault "
                        "cut the sample",
            without="only the benchmark's commands are sent, nothing is checked (no 'db crc', "
                    "no second 'results')")

    def invoke(self) -> int:
        from project_api.api.project import GeneratedProject
        from project_api.tools import mlperftiny

        a = self.args
        if a.windows < 1 or a.warmups < 0 or a.min_window_seconds <= 0 or a.timeout <= 0:
            raise UsageError("--windows must be >= 1, --warmups >= 0, --min-window-seconds and "
                             "--timeout > 0")
        if a.limit is not None and a.limit < 1:
            raise UsageError("--limit must be at least 1")
        retry = retry_policy(self.args)
        if a.results and Path(a.results).exists() and not a.force:
            raise ProjectError(f"{a.results} already exists; pass --force to overwrite it")
        project_dir = Path(a.project_dir)
        if not (project_dir / "model").is_dir():
            raise ProjectError(f"{project_dir} is not a generated project (no model/ folder)")
        facts = mlperftiny.model_facts(project_dir)
        samples = mlperftiny.load_dataset(a.data, facts)
        state = {"state_size_bytes": facts.state_size_bytes, "reset_state": not a.no_reset}
        if a.limit is not None:
            samples = samples[:a.limit]
        bars: list[Any] = []

        def progress(label: str, total: int) -> Any:
            bar = self.bar(label, total, "windows" if label == "performance" else "samples")
            bars.append(bar)
            return bar.set

        with GeneratedProject.from_directory(project_dir, debug=self.verbosity > 1) as project:
            project.require_link("mlperftiny")
            transport = project.transport(debug=self.verbosity > 1)
            transport.open()
            try:
                device = mlperftiny.Device(transport, timeout_sec=a.timeout,
                                           timeout_advice=self.timeout_advice)
                self.progress(f"{a.mode} on {_name(device, a.timeout, retry.enabled)} "
                              f"({project_dir})")
                try:
                    if a.mode == "performance":
                        report: Any = mlperftiny.performance(
                            device, samples, windows=a.windows, warmups=a.warmups,
                            min_window_seconds=a.min_window_seconds,
                            progress=progress("performance", a.windows), retry=retry, **state)
                    else:
                        report = mlperftiny.accuracy(device, samples,
                                                     progress=progress("accuracy", len(samples)),
                                                     retry=retry, **state)
                finally:
                    for bar in bars:
                        bar.close()
            finally:
                transport.close()
        text = mlperftiny.results_text(report)
        if a.results:
            Path(a.results).write_text(text)
        data = report.to_json()
        if a.results:
            data["results_file"] = str(a.results)
        self.output(data, lambda: _summary(report, text))
        return 0 if report.ok else 1

def _name(device: Any, timeout: float, recovering: bool) -> str:
    """The device's start-up lines read and its name asked. With recovery on, a noisy link
    may garble them: the run's set-up brings the device back in step, so the name is then
    left out."""
    from project_api.tools import mlperftiny

    try:
        device.start(min(timeout, 3.0))
        return str(device.name())
    except mlperftiny.MlperfTinyError as err:
        if not recovering or isinstance(err, mlperftiny.LinkClosedError):
            raise
        return "the device"


def _summary(report: Any, text: str) -> str:
    from project_api.tools import mlperftiny
    from project_api.tools.mlperftiny import PerformanceReport

    if isinstance(report, PerformanceReport):
        tail = (f"model {report.model}: median inference {report.median_inference_ms:.3f} ms, "
                f"median throughput {report.median_throughput:.3f} inf./s over "
                f"{len(report.windows)} windows (>= {report.min_window_seconds:g} s of device "
                "time each)")
        if not report.requirements_met:
            tail += (f"; the benchmark's rule of {mlperftiny.MIN_WINDOW_SECONDS:g} s per window "
                     "was NOT met, so this is no valid MLPerf Tiny result")
    else:
        parts = ([f"top-1 {100 * report.top1:.1f}%"] if report.top1 is not None else []) + (
            [f"AUC {report.auc:.3f}"] if report.auc is not None else [])
        tail = f"model {report.model}: {report.samples} samples, {', '.join(parts) or 'no figures'}"
        if report.samples != report.requested:
            tail += f" ({report.requested} asked for)"
    note = mlperftiny.state_line(report.state_size_bytes, report.reset_state)
    lines = [tail] + ([note] if note else [])
    if report.recovery is not None:
        lines.append(f"link: {report.recovery.summary()}")
    what = "window" if isinstance(report, PerformanceReport) else "sample"
    for f in report.failed:
        lines.append(f"FAILED {what} {f.name} (#{f.index}): {f.reason}")
    if report.stopped is not None:
        lines.append(f"the run stopped early: {report.stopped}")
    # results.txt's own recovery notes are left out here: the lines above say it
    body = text.splitlines(keepends=True)
    notes = len(mlperftiny.recovery_notes(report))
    return "".join(body[:len(body) - notes]) + "\n".join(lines)

"""The EnergyRunner's two modes, open: :func:`performance` (windows of at least 10 s of device
time, the median throughput) and :func:`accuracy` (every sample once: top-1, or the AUC of the
reconstruction error), their reports, and :func:`results_text`, laid out like a submission's
``results.txt``.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

import numpy as np

from project_api.micro.recovery import (
    RecoveryStats,
    RetryPolicy,
)
from project_api.tools.mlperftiny.data import Sample
from project_api.tools.mlperftiny.device import (
    Device,
    IntegrityError,
    MlperfTinyError,
    _infer_timeout,
)
from project_api.tools.mlperftiny.recovery import (
    PROBES,
    FailedSample,
    LinkRecovery,
    _Answers,
    _LoadState,
    _RunStopped,
    _SampleFailed,
)

_LOG = logging.getLogger(__name__)
T = TypeVar("T")

#: The benchmark's rule: each performance window runs at least this long on the device.
MIN_WINDOW_SECONDS = 10.0
#: Windows (one input each) of a performance run, as the benchmark's scripts loop.
WINDOWS = 5
#: Warm-up inferences before each window (the benchmark's scripts use 10 for KWS and AD).
WARMUPS = 10
#: Model versions scored by AUC of a reconstruction error rather than top-1.
ANOMALY_MODELS = ("ad01",)

Progress = Callable[[int, int], None]


@dataclass
class Window:
    """One performance window: one input, ``iterations`` timed inferences."""

    sample: str
    iterations: int
    warmups: int
    elapsed_us: int

    @property
    def seconds(self) -> float:
        return self.elapsed_us / 1e6

    @property
    def throughput(self) -> float:
        return self.iterations / self.seconds if self.elapsed_us > 0 else math.inf

    @property
    def inference_ms(self) -> float:
        return self.elapsed_us / 1e3 / self.iterations


def state_json(state_size_bytes: int, reset: bool) -> dict[str, Any]:
    """The ``state`` entry of a report's JSON: the model's state and whether it was reset
    before every sample (window)."""
    return {"size_bytes": state_size_bytes, "reset_between_samples": bool(reset)}


def state_line(state_size_bytes: int, reset: bool) -> str | None:
    """How a run met the model's state, in words (None for a stateless model)."""
    if not state_size_bytes:
        return None
    return (f"state: {state_size_bytes} B, " + ("reset before every sample" if reset else
                                                  "carried from sample to sample"))


class _Outcome:
    """What recovery did in a run (the fields each report declares last: ``recovery``, the
    counters, None when recovery was off; ``failed``, the samples (windows) given up and left
    out of the figures; ``stopped``, why the run stopped before its end; ``requested``, the
    samples (windows) asked for; ``resumed_loads``, loads resumed mid-way after a fault, as
    ``recovery.resumed`` counts them)."""

    recovery: RecoveryStats | None
    failed: list[FailedSample]
    stopped: str | None
    requested: int
    resumed_loads: int

    @property
    def ok(self) -> bool:
        """Every sample answered (none given up, the run not stopped)."""
        return not self.failed and self.stopped is None

    def recovery_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "recovery": None if self.recovery is None else self.recovery.to_json(),
            "samples_requested": self.requested,
            "samples_failed": [f.to_json() for f in self.failed],
            "stopped": self.stopped, "ok": self.ok}
        return data


@dataclass
class PerformanceReport(_Outcome):
    model: str
    windows: list[Window]
    min_window_seconds: float
    state_size_bytes: int = 0
    reset_state: bool = False  #: the state was reset before each window
    #: The recovery counters (None: recovery was off, ``RetryPolicy.disabled()``).
    recovery: RecoveryStats | None = None
    #: Samples (windows) given up after their retries, left out of the figures.
    failed: list[FailedSample] = field(default_factory=list)
    #: Why the run stopped before its end (None: it did not).
    stopped: str | None = None
    #: Samples (windows) the run was asked for.
    requested: int = 0
    #: Loads resumed mid-way after a fault.
    resumed_loads: int = 0

    @property
    def median_throughput(self) -> float:
        return statistics.median(w.throughput for w in self.windows) if self.windows else math.nan

    @property
    def median_inference_ms(self) -> float:
        return (statistics.median(w.inference_ms for w in self.windows) if self.windows
                else math.nan)

    @property
    def requirements_met(self) -> bool:
        """Whether every window lasted the benchmark's rule (:data:`MIN_WINDOW_SECONDS` of
        device time), whatever ``min_window_seconds`` this run asked for."""
        return bool(self.windows) and all(w.seconds >= MIN_WINDOW_SECONDS for w in self.windows)

    def to_json(self) -> dict[str, Any]:
        return {"mode": "performance", "model": self.model,
                "median_throughput_inf_per_s": self.median_throughput,
                "median_inference_ms": self.median_inference_ms,
                "min_window_seconds": self.min_window_seconds,
                "runtime_requirements_met": self.requirements_met,
                "windows": [{"sample": w.sample, "iterations": w.iterations,
                             "warmups": w.warmups, "runtime_s": w.seconds,
                             "throughput_inf_per_s": w.throughput,
                             "inference_ms": w.inference_ms} for w in self.windows],
                "state": state_json(self.state_size_bytes, self.reset_state),
                **self.recovery_json()}



def performance(device: Device, samples: Sequence[Sample], *, windows: int = WINDOWS,
                warmups: int = WARMUPS, min_window_seconds: float = MIN_WINDOW_SECONDS,
                progress: Progress | None = None, state_size_bytes: int = 0,
                reset_state: bool = True, retry: RetryPolicy | None = None,
                reopen: Callable[[], None] | None = None) -> PerformanceReport:
    """The benchmark's performance mode: for each of ``windows`` inputs (the samples' first
    windows, in turn), load it, measure one inference, then run ``infer N W`` with N chosen so
    the window lasts at least ``min_window_seconds`` of device time (re-run longer if not). A
    stateful model (``state_size_bytes``) has its state reset before each window unless
    ``reset_state`` is false.

    ``retry`` (default ``RetryPolicy()``) recovers from link faults as the module doc says
    (loads and laps checked; two probes); ``RetryPolicy.disabled()`` runs as before recovery,
    the first fault raising. ``reopen`` reopens the device's link (default: its transport's
    ``close()`` and ``open()``). The report's :attr:`~PerformanceReport.recovery`,
    :attr:`~PerformanceReport.failed` and :attr:`~PerformanceReport.stopped` say what recovery
    did; a window given up is left out of the median."""
    policy = retry if retry is not None else RetryPolicy()
    reset = bool(state_size_bytes) and reset_state
    if not policy.enabled:
        return _performance_plain(device, samples, windows, warmups, min_window_seconds,
                                  progress, state_size_bytes, reset)
    link = LinkRecovery(device, policy, windows, reopen)
    report = PerformanceReport("", [], min_window_seconds, state_size_bytes, reset,
                               recovery=link.stats, requested=windows)
    try:
        report.model = link.setup()
    except _RunStopped as err:
        report.stopped = str(err)
        return report
    for k in range(windows):
        sample = samples[k % len(samples)]
        st = _PerfWindow(_LoadState(sample.windows[0]))

        def body(st: _PerfWindow = st, name: str = sample.name) -> Window:
            return _performance_window(link, st, name, warmups, min_window_seconds, reset)

        def position(st: _PerfWindow = st) -> tuple[int, ...]:
            return (len(st.probes), st.tries, st.load.amount)

        if not _run_sample(link, report, k, sample.name, body, position, report.windows.append):
            break
        if progress is not None:
            progress(k + 1, windows)
    report.resumed_loads = link.resumed_loads
    return report


@dataclass
class _PerfWindow:
    """Where one performance window stands (kept over faults)."""

    load: _LoadState
    fresh: bool = False  #: the state was reset and no 'infer' was sent since
    reset_epoch: int | None = None
    probes: list[float] = field(default_factory=list)  #: seconds per inference of each probe
    per_inference: float | None = None
    iterations: int = 0
    tries: int = 0  #: windows found shorter than asked
    suspect: list[float] = field(default_factory=list)


def _performance_window(link: LinkRecovery, st: _PerfWindow, name: str, warmups: int,
                        min_window_seconds: float, reset: bool) -> Window:
    if reset and not (st.fresh and st.reset_epoch == link.epoch):
        link.reset()
        st.fresh, st.reset_epoch = True, link.epoch
    link.load(st.load)
    while len(st.probes) < PROBES:
        st.fresh = False
        probe = link.infer(1, 0)
        if probe.end_us < probe.start_us:
            raise IntegrityError("implausible laps", f"the probe's laps go back: "
                                                     f"{probe.start_us}..{probe.end_us} us")
        st.probes.append(max(probe.elapsed_us, 1) / 1e6)
    if st.per_inference is None:
        st.per_inference = max(st.probes)
        st.iterations = max(1, math.ceil(min_window_seconds * 1.05 / st.per_inference))
    while st.tries < 4:
        st.fresh = False
        res = link.timed_window(st.iterations, warmups, st.per_inference, st.suspect)
        if res.elapsed_us / 1e6 >= min_window_seconds:
            return Window(name, st.iterations, warmups, res.elapsed_us)
        st.tries += 1
        st.per_inference = max(res.elapsed_us, 1) / 1e6 / st.iterations
        st.iterations = max(st.iterations + 1,
                            math.ceil(min_window_seconds * 1.1 / st.per_inference))
    raise MlperfTinyError(f"the window of {name} stayed shorter than {min_window_seconds:g} s "
                          "of device time after 4 tries")


def _run_sample(link: LinkRecovery, report: _Outcome, index: int, name: str,
                body: Callable[[], T], position: Callable[[], tuple[int, ...]],
                done: Callable[[T], None],
                unrecoverable: Callable[[], str | None] | None = None) -> bool:
    """One sample through :meth:`LinkRecovery.attempt`; a sample given up is recorded. Returns
    False when the run stops."""
    try:
        done(link.attempt(index, body, position, unrecoverable))
        return True
    except _SampleFailed as err:
        _LOG.warning("sample %d (%s) given up: %s", index, name, err)
        report.failed.append(FailedSample(index, name, str(err)))
        link.stats.failed_samples[index] = str(err)
        return True
    except _RunStopped as err:
        _LOG.warning("the run stops at sample %d (%s): %s", index, name, err)
        report.failed.append(FailedSample(index, name, str(err)))
        link.stats.failed_samples[index] = str(err)
        report.stopped = str(err)
        return False


def _performance_plain(device: Device, samples: Sequence[Sample], windows: int, warmups: int,
                       min_window_seconds: float, progress: Progress | None,
                       state_size_bytes: int, reset: bool) -> PerformanceReport:
    """Performance mode as before recovery: nothing checked, the first fault raises."""
    model = device.profile()["model"]
    done: list[Window] = []
    for k in range(windows):
        sample = samples[k % len(samples)]
        if reset:
            device.reset()
        device.load(sample.windows[0])
        t0 = time.monotonic()
        probe = device.infer(1, 0, _infer_timeout(60.0, 1.0))
        per_inf = max(probe.elapsed_us, 1) / 1e6
        wall_ratio = max(1.0, (time.monotonic() - t0) / per_inf)
        iterations = max(1, math.ceil(min_window_seconds * 1.05 / per_inf))
        for _attempt in range(4):
            device_s = (iterations + warmups) * per_inf
            res = device.infer(iterations, warmups, _infer_timeout(device_s, wall_ratio))
            if res.elapsed_us / 1e6 >= min_window_seconds:
                break
            per_inf = max(res.elapsed_us, 1) / 1e6 / iterations
            iterations = max(iterations + 1, math.ceil(min_window_seconds * 1.1 / per_inf))
        else:
            raise MlperfTinyError(f"window {k + 1} stayed shorter than {min_window_seconds:g} s "
                                  f"of device time after 4 tries ({res.elapsed_us} us)")
        done.append(Window(sample.name, iterations, warmups, res.elapsed_us))
        if progress is not None:
            progress(k + 1, windows)
    return PerformanceReport(model=model, windows=done, min_window_seconds=min_window_seconds,
                             state_size_bytes=state_size_bytes, reset_state=reset,
                             requested=windows)


def roc_auc(y_true: Sequence[int], score: Sequence[float]) -> float:
    """Area under the ROC curve of ``score`` for the positive class 1 (ties counted half), as
    scikit-learn's ``roc_auc_score`` computes it."""
    y = np.asarray(y_true, dtype=bool)
    s = np.asarray(score, dtype=np.float64)
    pos, neg = int(y.sum()), int((~y).sum())
    if pos == 0 or neg == 0:
        raise MlperfTinyError("AUC needs samples of both classes")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=np.float64)
    sorted_s = s[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return float((ranks[y].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def _normalize(v: np.ndarray) -> np.ndarray:
    total = v.sum()
    return v / total if total > 0 else v


@dataclass
class AccuracyReport(_Outcome):
    model: str
    top1: float | None  #: share of samples whose class is right (classifiers)
    auc: float | None
    samples: int  #: samples answered (the figures' samples)
    scores: list[Any] = field(repr=False, default_factory=list)
    state_size_bytes: int = 0
    reset_state: bool = False  #: the state was reset before each sample
    #: Indices (in the run's samples) of the samples :attr:`scores` belong to, in order.
    answered: list[int] = field(repr=False, default_factory=list)
    #: The recovery counters (None: recovery was off, ``RetryPolicy.disabled()``).
    recovery: RecoveryStats | None = None
    #: Samples (windows) given up after their retries, left out of the figures.
    failed: list[FailedSample] = field(default_factory=list)
    #: Why the run stopped before its end (None: it did not).
    stopped: str | None = None
    #: Samples (windows) the run was asked for.
    requested: int = 0
    #: Loads resumed mid-way after a fault.
    resumed_loads: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"mode": "accuracy", "model": self.model, "samples": self.samples,
                "top1": self.top1, "auc": self.auc,
                "state": state_json(self.state_size_bytes, self.reset_state),
                **self.recovery_json()}


def scores_metrics(model: str, labels: Sequence[int],
                   scores: Sequence[Any]) -> tuple[float | None, float | None]:
    """The benchmark's metrics of per-sample scores: (top-1, AUC). AD: AUC of the
    reconstruction error; classifiers: top-1 of the averaged results and the mean one-vs-rest
    AUC of the normalized results over the classes present."""
    if model in ANOMALY_MODELS:
        return None, roc_auc(labels, [float(s) for s in scores])
    probs = np.array([_normalize(np.asarray(s, dtype=np.float64)) for s in scores])
    y = np.asarray(labels)
    top1 = float(np.mean(np.argmax(probs, axis=1) == y))
    aucs = [roc_auc(y == c, probs[:, c]) for c in sorted(set(y.tolist()))
            if 0 <= c < probs.shape[1] and 0 < np.sum(y == c) < len(y)]
    return top1, (float(np.mean(aucs)) if aucs else None)


def _score(model: str, results: Sequence[Sequence[float]]) -> Any:
    """A sample's score: the mean of its windows' results (AD: of their first value)."""
    if model in ANOMALY_MODELS:
        return float(np.mean([r[0] for r in results]))
    return np.mean(np.array(results, dtype=np.float64), axis=0).tolist()


def accuracy(device: Device, samples: Sequence[Sample],
             progress: Progress | None = None, *, state_size_bytes: int = 0,
             reset_state: bool = True, retry: RetryPolicy | None = None,
             reopen: Callable[[], None] | None = None) -> AccuracyReport:
    """The benchmark's accuracy mode: every window of every sample through ``infer 1 0``; a
    sample's score is the mean of its windows' results; metrics by :func:`scores_metrics`. A
    stateful model (``state_size_bytes``) has its state reset before each sample (its windows
    run in turn, state carried) unless ``reset_state`` is false (one stream of samples).

    ``retry`` (default ``RetryPolicy()``) recovers from link faults as the module doc says:
    every load checked (``db crc``, else ``db print``) and resumed after a fault, every result
    confirmed by a second ``results``, each sample answered once. ``RetryPolicy.disabled()``
    runs as before recovery, the first fault raising. ``reopen`` reopens the device's link
    (default: its transport's ``close()`` and ``open()``). A sample given up is named in
    :attr:`~AccuracyReport.failed` and left out of the figures; :attr:`~AccuracyReport.recovery`
    holds the counts. With a FaultProxy-wrapped transport::

        device = Device(proxy); device.start()
        report = accuracy(device, samples, retry=RetryPolicy())
        report.recovery.summary(), report.scores, report.failed
    """
    policy = retry if retry is not None else RetryPolicy()
    reset = bool(state_size_bytes) and reset_state
    carries = bool(state_size_bytes) and not reset_state
    if not policy.enabled:
        return _accuracy_plain(device, samples, progress, state_size_bytes, reset)
    link = LinkRecovery(device, policy, len(samples), reopen)
    report = AccuracyReport("", None, None, 0, state_size_bytes=state_size_bytes,
                            reset_state=reset, recovery=link.stats, requested=len(samples))
    try:
        report.model = link.setup()
    except _RunStopped as err:
        report.stopped = str(err)
        return report
    run_epoch = link.epoch
    scores: list[Any] = []
    for k, sample in enumerate(samples):
        st = _AccSample([_LoadState(w) for w in sample.windows],
                        [_Answers() for _ in sample.windows])

        def body(st: _AccSample = st) -> Any:
            if carries and link.epoch != run_epoch:
                raise _RunStopped("the device started again, losing the state carried from "
                                  "sample to sample (--no-reset)")
            return _accuracy_sample(link, st, report.model, reset)

        def position(st: _AccSample = st) -> tuple[int, ...]:
            j = min(len(st.done), len(st.loads) - 1)
            return (len(st.done), int(bool(st.answers[j].lines)), st.loads[j].amount)

        def unrecoverable(st: _AccSample = st, name: str = sample.name) -> str | None:
            if carries and st.infer_sent:
                return (f"the model carries its state from sample to sample (--no-reset): "
                        f"after a fault once 'infer' of {name} was sent, nobody knows whether "
                        "the state took it")
            return None

        def done(score: Any, k: int = k) -> None:
            scores.append(score)
            report.answered.append(k)

        if not _run_sample(link, report, k, sample.name, body, position, done, unrecoverable):
            break
        if progress is not None:
            progress(k + 1, len(samples))
    report.scores = scores
    report.samples = len(scores)
    report.resumed_loads = link.resumed_loads
    if scores:
        labels = [samples[i].label for i in report.answered]
        try:
            report.top1, report.auc = scores_metrics(report.model, labels, scores)
        except MlperfTinyError:
            if report.ok:
                raise
            report.top1 = None  # too few samples answered for the figure
    return report


@dataclass
class _AccSample:
    """Where one accuracy sample stands (kept over faults)."""

    loads: list[_LoadState]  #: one per window
    answers: list[_Answers]
    done: list[list[float]] = field(default_factory=list)  #: confirmed results per window
    infer_sent: bool = False  #: an 'infer' of this sample was sent
    fresh: bool = False  #: the state was reset and no 'infer' was sent since
    reset_epoch: int | None = None


def _accuracy_sample(link: LinkRecovery, st: _AccSample, model: str, reset: bool) -> Any:
    if reset and not (st.fresh and st.reset_epoch == link.epoch):
        st.done.clear()  # the state took some of the sample's windows: all of them again
        for answers in st.answers:
            answers.lines.clear()
        link.reset()
        st.fresh, st.reset_epoch = True, link.epoch
    while len(st.done) < len(st.loads):
        j = len(st.done)
        link.load(st.loads[j])
        st.fresh = False
        st.infer_sent = True
        st.done.append(link.confirmed_results(st.loads[j], st.answers[j]))
    return _score(model, st.done)


def _accuracy_plain(device: Device, samples: Sequence[Sample], progress: Progress | None,
                    state_size_bytes: int, reset: bool) -> AccuracyReport:
    """Accuracy mode as before recovery: nothing checked, the first fault raises."""
    model = device.profile()["model"]
    scores = []
    for k, sample in enumerate(samples):
        if reset:
            device.reset()
        results = []
        for w in sample.windows:
            device.load(w)
            results.append(device.infer(1, 0, _infer_timeout(60.0, 1.0)).results)
        scores.append(_score(model, results))
        if progress is not None:
            progress(k + 1, len(samples))
    top1, auc = scores_metrics(model, [s.label for s in samples], scores)
    return AccuracyReport(model=model, top1=top1, auc=auc, samples=len(samples), scores=scores,
                          state_size_bytes=state_size_bytes, reset_state=reset,
                          requested=len(samples), answered=list(range(len(samples))))


def _stamp(now: datetime | None = None) -> str:
    now = now or datetime.now()
    return now.strftime("%H%M%S.") + f"{now.microsecond // 1000:03d}"


def recovery_notes(report: PerformanceReport | AccuracyReport) -> list[str]:
    """What recovery did, in the lines ``results.txt`` notes (none when it was off): the faults
    by kind, the retries, the samples retried and the time spent recovering; each sample given
    up; why the run stopped early."""
    out: list[str] = []
    what = "window" if isinstance(report, PerformanceReport) else "sample"
    s = report.recovery
    if s is not None:
        kinds = ", ".join(f"{n} {k}" for k, n in s.faults.most_common())
        line = (f"Link faults: {s.fault_count}{f' ({kinds})' if kinds else ''}; retries: "
                f"{s.retries}; {what}s retried: {len(s.retried_samples)}; time recovering: "
                f"{s.recovery_seconds:.3f} sec.")
        if s.restarts:
            line += f" Device link reopened {s.restarts} time{'s' if s.restarts != 1 else ''}."
        out.append(line)
    for f in report.failed:
        label = f"window {f.index + 1} ({f.name})" if what == "window" else f"{f.name} (#{f.index})"
        out.append(f"FAILED {what} {label}, left out of the figures: {f.reason}")
    if report.stopped is not None:
        run = len(report.windows) if isinstance(report, PerformanceReport) else report.samples
        left = report.requested - run - len(report.failed)
        out.append(f"The run stopped early, {left} {what}{'s' if left != 1 else ''} not run: "
                   f"{report.stopped}")
    return out


def results_text(report: PerformanceReport | AccuracyReport, now: datetime | None = None) -> str:
    """``results.txt`` as a submission lays it out (``<time> ulp-mlperf: ...`` lines), then
    :func:`recovery_notes` when recovery was on."""
    head = f"{_stamp(now)} ulp-mlperf: "
    out: list[str] = []
    if isinstance(report, PerformanceReport):
        for i, w in enumerate(report.windows, 1):
            out += [f"Performance results for window {i}:",
                    f"  # Inferences : {w.iterations:>12}",
                    f"  Runtime      : {w.seconds:>12.3f} sec.",
                    f"  Throughput   : {w.throughput:>12.3f} inf./sec."]
            if w.seconds >= MIN_WINDOW_SECONDS:
                out.append("Runtime requirements have been met.")
            else:
                out.append(f"Runtime requirements have NOT been met (< {MIN_WINDOW_SECONDS:g} "
                           "sec., the benchmark's rule).")
        if report.windows:
            out += ["-" * 57, f"Median throughput is {report.median_throughput:.3f} inf./sec.",
                    "-" * 57]
        else:
            out.append("No window completed.")
    else:
        if report.top1 is not None:
            out.append(f"Top-1: {100 * report.top1:.1f}%")
        if report.auc is not None:
            out.append(f"AUC: {report.auc:.2f}")
        if not report.samples:
            out.append("No sample answered.")
    out += recovery_notes(report)
    return "".join(head + line + "\n" for line in out)

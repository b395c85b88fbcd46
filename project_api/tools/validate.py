"""Validate a model on its device: run many samples through one session, compare with references.

What ``project-api validate`` does, as a library independent of the command line::

    from project_api.api.project import GeneratedProject
    from project_api.tools.validate import validate

    with GeneratedProject.from_directory("prj") as project:
        report = validate(project, "samples.npz", tflite="model.tflite")
    for comparison in report.comparisons:
        for m in comparison.outputs:
            print(comparison.reference, m.name, m.max_abs, m.cosine, m.exact)
    print(report.failures(parse_thresholds(["exact=1.0"], [])))

**Data.** Samples are arrays whose first axis is the sample index, one per model input, keyed by
the input's name, its C name or its index (``"0"``): a mapping, an ``.npz`` file, or a folder of
``<name>.npy`` files. Every input must have the same number of samples; each sample must have
the input's dtype and shape (each sample may leave out size-1 axes, e.g. the batch axis; any other shape is refused).

Data may also come in the forms described for references below (a sample input published
beside a model: one ``.npy``, ``.txt`` or ``.h`` for a one-input model).

**References.** A reference is a mapping (or ``.npz`` / folder) keyed by output name in the same
layout, or is computed from a ``.tflite`` model by TFLite Micro (the bit-exact reference for
int8) and by LiteRT (:mod:`project_api.emit.reference`), one interpreter each for all samples.
Given as files (:func:`load_tensor_files`, for data too), the sample pair published beside a
model works as it is: for a one-output model a single ``.npy``, a ``.txt`` of numbers
separated by white space or commas, or a C header whose array initializer holds them
(``int8_t expected_output[] = {72, };``, as TVM's test utilities write); a folder of
``<output name>.npy`` / ``.txt`` / ``.h`` for several. A ``.npy`` holding exactly one sample's
worth of elements is that one sample whatever its shape; otherwise the first axis is the
sample. Text takes its shape from the model: ``samples x tensor shape`` numbers in C order.

**Metrics** (:func:`compute_metrics`, plain numpy, per output over all samples): ``max_abs``,
``mean_abs``, ``rmse`` and ``l2r`` (``||device - ref||_2 / ||ref||_2``) are errors, lower is
better; ``cosine`` (cosine similarity of the flattened outputs), ``top1`` (argmax agreement over
the last axis, for outputs whose last axis is > 1) and ``exact`` (the share of samples whose
integer output equals the reference exactly) are agreements, higher is better. Integer outputs
with per-tensor quantization parameters are dequantized (``(q - zero_point) * scale``) for the
error and cosine metrics, so those are in the model's real units; ``max_abs_int`` keeps the
largest difference in integer steps.

**Speed.** All samples stream through one session (:func:`project_api.micro.stream.
stream_samples`). Where the link allows several requests in flight
(:attr:`RPCClient.pipeline_depth`, e.g. a FIFO endpoint: the host template, QEMU), the next
sample's input copies are sent once the previous sample's inputs are answered, while its run
and output copies still are; on a link with depth 1 (a serial port) requests go strictly one
at a time. With recovery on, a link fault costs about one handshake and the request it hit.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from project_api.errors import (
    ProjectError,
    RetriesExhaustedError,
    ValidationError,
)
from project_api.micro.recovery import RecoveryStats, RetryPolicy
from project_api.micro.stream import stream_samples

if TYPE_CHECKING:
    from project_api.api.project import GeneratedProject
    from project_api.archive.model import ModuleInfo
    from project_api.micro.api import Session
    from project_api.micro.timing import TimingResult
from project_api.tools.metrics import (
    METRICS,
    Comparison,
    OutputMetrics,
    Threshold,
    compute_metrics,
    parse_thresholds,
)
from project_api.tools.references import (
    Progress,
    _tflite_bytes,
    litert_outputs,
    tflm_or_litert_ref,
    tflm_outputs,
)
from project_api.tools.samples import (
    TensorSpec,
    bind_inputs,
    bind_reference,
    check_finite,
    load_arrays,
    load_reference,
    load_tensor_files,
    quantize_inputs,
)

_LOG = logging.getLogger(__name__)


__all__ = [
    "METRICS",
    "Comparison",
    "OutputMetrics",
    "TensorSpec",
    "Threshold",
    "ValidationError",
    "ValidationReport",
    "bind_inputs",
    "bind_reference",
    "check_finite",
    "compute_metrics",
    "litert_outputs",
    "load_arrays",
    "load_reference",
    "load_tensor_files",
    "parse_thresholds",
    "plan_validation",
    "quantize_inputs",
    "stream_samples",
    "tflm_outputs",
    "validate",
]


@dataclass
class ValidationReport:
    """Everything :func:`validate` measured."""

    module: str
    samples: int
    inputs: list[TensorSpec]
    output_specs: list[TensorSpec]
    outputs: list[np.ndarray]  #: the device's outputs, each ``(samples, *shape)``
    comparisons: list[Comparison] = field(default_factory=list)
    timing: TimingResult | None = None  #: device-measured seconds per inference (one sample)
    stream_seconds: float = 0.0  #: wall time of streaming every sample through the session
    pipeline_depth: int = 1  #: requests kept in flight while streaming
    #: Bytes of state the model keeps from one run to the next (0: stateless).
    state_size_bytes: int = 0
    #: Whether the state was reset before every sample (else carried: one stream of samples).
    reset_state: bool = False
    #: What recovery from link faults did while streaming (None: recovery was off).
    recovery: RecoveryStats | None = None
    #: Samples the run was asked for (``samples`` counts those answered and compared).
    requested: int | None = None
    #: Index (in the data) of each sample compared, when some were not answered.
    answered: list[int] | None = None
    #: Samples given up after their retries: index -> why.
    failed_samples: dict[int, str] = field(default_factory=dict)
    #: Why the run stopped before its last sample (None: it did not).
    stopped: str | None = None

    @property
    def ok(self) -> bool:
        """Every sample asked for was answered and compared."""
        return not self.failed_samples and self.stopped is None

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.stream_seconds if self.stream_seconds > 0 else math.inf

    def comparison(self, key: str | None = None) -> Comparison:
        """The comparison named ``key``, or the primary one (the first) for None."""
        if not self.comparisons:
            raise ValidationError("there is no reference to compare with; pass a reference .npz "
                                  "or a .tflite model")
        if key is None:
            return self.comparisons[0]
        for c in self.comparisons:
            if c.key == key:
                return c
        raise ValidationError(f"there is no {key!r} comparison; there are: "
                              f"{', '.join(c.key for c in self.comparisons)}")

    def failures(self, thresholds: Sequence[Threshold]) -> list[str]:
        """One line per (threshold, output) that falls short; empty when all pass.

        A threshold applies to every output that has the metric; one that no output has is an
        error (e.g. ``top1`` on a model without a classifier output).
        """
        lines = []
        for th in thresholds:
            comparison = self.comparison(th.reference)
            applicable = [m for m in comparison.outputs if m.get(th.metric) is not None]
            if not applicable:
                raise ValidationError(f"threshold {th}: no output has {th.metric} "
                                      f"({METRICS[th.metric][1]}); drop it")
            for m in applicable:
                value = m.get(th.metric)
                assert value is not None
                ok = value >= th.value if th.higher else value <= th.value
                if not ok:
                    lines.append(f"{comparison.reference}: output {m.name!r}: {th.metric} = "
                                 f"{value:.6g}, wanted {'>=' if th.higher else '<='} {th.value:g}")
        return lines

    def to_json(self) -> dict[str, Any]:
        t = self.timing
        return {
            "module": self.module,
            "samples": self.samples,
            "inputs": [s.name for s in self.inputs],
            "outputs": [s.name for s in self.output_specs],
            "comparisons": [c.to_json() for c in self.comparisons],
            "device_seconds_per_inference": None if t is None else {
                "mean": t.mean, "min": t.min, "max": t.max, "results": list(t.results)},
            "stream_seconds": self.stream_seconds,
            "samples_per_second": self.samples_per_second,
            "pipeline_depth": self.pipeline_depth,
            "state": {"size_bytes": self.state_size_bytes,
                      "reset_between_samples": self.reset_state},
            "recovery": None if self.recovery is None else self.recovery.to_json(),
            "samples_requested": self.samples if self.requested is None else self.requested,
            "samples_failed": {str(k): v for k, v in sorted(self.failed_samples.items())},
            "stopped": self.stopped,
        }

    @property
    def state_note(self) -> str | None:
        """How the samples met the model's state, in words (None for a stateless model)."""
        if not self.state_size_bytes:
            return None
        if self.reset_state:
            return (f"state: {self.state_size_bytes} B, reset before every sample (each sample "
                    "is a sequence of its own)")
        return (f"state: {self.state_size_bytes} B, carried from sample to sample (the samples "
                "are one stream)")


def _module_info(project: GeneratedProject, module: str | None) -> ModuleInfo:
    from project_api.archive import mlf

    path = project.info().get("model_library_format_path")
    if not path:
        raise ProjectError("the project's server reports no model archive; regenerate the project")
    with mlf.open_mlf(path) as library:
        return library.module(module)


def validate(
    target: Session | GeneratedProject,
    data: str | Path | Mapping[str, Any],
    reference: str | Path | Mapping[str, Any] | None = None,
    *,
    tflite: bytes | str | Path | None = None,
    module: str | ModuleInfo | None = None,
    litert: bool = True,
    number: int = 10,
    repeat: int = 3,
    pipeline: bool = True,
    limit: int | None = None,
    progress: Callable[[str, int], Progress | None] | None = None,
    debug: bool = False,
    quantize: bool = False,
    timeout_sec: float | None = None,
    timeout_advice: str | None = None,
    reset_state: bool | None = None,
    retry: RetryPolicy | None = None,
) -> ValidationReport:
    """Run every sample of ``data`` on the device of ``target`` and compare with references.

    ``target`` is a built (and flashed) :class:`GeneratedProject`, whose session this opens
    and closes, or an open :class:`Session`. ``module`` names the model (default: the only one)
    or gives its :class:`ModuleInfo`; with a Session it must be a ModuleInfo (the device does
    not know output names). ``reference`` is a mapping / ``.npz`` / folder keyed by output
    name; ``tflite`` a ``.tflite`` model whose TFLite Micro outputs (and LiteRT's, unless
    ``litert`` is false or LiteRT is not installed) are computed as references. The first
    comparison is the primary one. ``limit`` keeps only the first samples. The device time per
    inference is ``session.time(model, number, repeat)`` on the last sample (``number=0``
    skips it). ``progress(label, total)`` may return a callback told of each sample done.
    ``quantize`` quantizes float data for quantized integer inputs with the input's scale and
    zero point (:func:`quantize_inputs`). ``timeout_sec`` and ``timeout_advice`` are the session's
    (:class:`~project_api.micro.Session`; used when ``target`` is a project). A model that keeps
    state (``info.state_size_bytes``) has it reset on the device before every sample, and the
    references start each sample from a fresh interpreter; ``reset_state=False`` carries it
    from sample to sample instead (the samples are the successive steps of one stream). The
    report says which (``state_note``, ``to_json()["state"]``). ``retry`` is the recovery from
    link faults (default :class:`RetryPolicy() <project_api.micro.recovery.RetryPolicy>`;
    ``RetryPolicy.disabled()`` ends the run at the first fault; used when ``target`` is a
    project: an open Session keeps its own); the report's ``recovery`` says what it did. A
    model whose state is carried is not retried (whether a lost sample reached the state is
    unknown).
    """
    from project_api.micro.api import Session as _Session

    if isinstance(module, str) or module is None:
        if isinstance(target, _Session):
            raise ValidationError("validating through an open Session needs the model's "
                                  "ModuleInfo (module=); or pass the GeneratedProject")
        info = _module_info(target, module)
    else:
        info = module
    plan = plan_validation(info, data, reference, tflite=tflite, limit=limit, quantize=quantize,
                           reset_state=reset_state)
    n = plan.samples

    def bar(label: str) -> Progress | None:
        return progress(label, n) if progress is not None else None

    carries = bool(plan.state_size_bytes) and not plan.reset_state  # no retry: see stream_samples
    if isinstance(target, _Session):
        got = _on_device(target, info.name, plan.inputs, plan.output_specs, bar, pipeline,
                         number, repeat, plan.reset_state, carries)
        stats = target.recovery.stats if target.recovery.enabled else None
    else:
        with target.session(debug=debug, timeout_sec=timeout_sec,
                            timeout_advice=timeout_advice,
                            retry=retry if retry is not None else RetryPolicy()) as session:
            got = _on_device(session, info.name, plan.inputs, plan.output_specs, bar, pipeline,
                             number, repeat, plan.reset_state, carries)
            stats = session.recovery.stats if session.recovery.enabled else None
    _LOG.info("streamed %d samples in %.3fs (%d in flight)", n, got.seconds, got.depth)
    if got.answered.all():
        report = plan.report(got.outputs, timing=got.timing, stream_seconds=got.seconds,
                             pipeline_depth=got.depth, litert=litert, progress=progress)
    else:
        # Compare what was answered; name what was not (the CLI exits 1).
        indices = np.flatnonzero(got.answered)
        report = plan.subset(indices).report(
            [o[indices] for o in got.outputs], timing=got.timing, stream_seconds=got.seconds,
            pipeline_depth=got.depth, litert=litert, progress=progress)
        report.requested, report.answered = n, indices.tolist()
    report.recovery = stats
    report.failed_samples = dict(stats.failed_samples) if stats is not None else {}
    report.stopped = got.stopped
    return report


@dataclass
class ValidationPlan:
    """What :func:`validate` checks before the device runs: the model's tensors, the bound
    input samples, the given reference and the ``.tflite`` to compute references from; and
    :meth:`report`, which compares outputs however they were obtained (one session, or many:
    :mod:`project_api.tools.farm`)."""

    info: Any  #: the model's ModuleInfo
    input_specs: list[TensorSpec]
    output_specs: list[TensorSpec]
    inputs: list[np.ndarray]  #: each ``(samples, *shape)``, in model input order
    reference_name: str | None = None
    reference: list[np.ndarray] | None = None
    model_bytes: bytes | None = None
    #: Reset the model's state before every sample (a stateful model, unless carried).
    reset_state: bool = False

    @property
    def samples(self) -> int:
        return int(self.inputs[0].shape[0])

    @property
    def state_size_bytes(self) -> int:
        return int(getattr(self.info, "state_size_bytes", 0) or 0)

    def subset(self, indices: Sequence[int]) -> ValidationPlan:
        """The same plan for the samples ``indices`` only (a run some samples of which were
        not answered is compared on the others)."""
        idx = np.asarray(indices, dtype=np.int64)
        return ValidationPlan(self.info, self.input_specs, self.output_specs,
                              [x[idx] for x in self.inputs], self.reference_name,
                              None if self.reference is None else [r[idx] for r in self.reference],
                              self.model_bytes, self.reset_state)

    def report(self, outputs: list[np.ndarray], *, timing: TimingResult | None = None,
               stream_seconds: float = 0.0, pipeline_depth: int = 1, litert: bool = True,
               progress: Callable[[str, int], Progress | None] | None = None) -> ValidationReport:
        """The :class:`ValidationReport` of ``outputs`` (each ``(samples, *shape)``)."""
        n = self.samples

        def bar(label: str) -> Progress | None:
            return progress(label, n) if progress is not None else None

        out_specs = self.output_specs
        report = ValidationReport(module=self.info.name, samples=n, inputs=self.input_specs,
                                  output_specs=out_specs, outputs=outputs, timing=timing,
                                  stream_seconds=stream_seconds, pipeline_depth=pipeline_depth,
                                  state_size_bytes=self.state_size_bytes,
                                  reset_state=self.reset_state)
        # how the references meet the state: as the device (a reset is a boot), or carried
        tflm_state = "reset"
        litert_state = "carry"
        if self.state_size_bytes:
            tflm_state = litert_state = "boot" if self.reset_state else "carry"
        if self.reference is not None:
            report.comparisons.append(Comparison("reference", self.reference_name or "reference",
                                                 _compare(outputs, self.reference, out_specs)))
        if self.model_bytes is not None:
            computed: list[tuple[str, str, Callable[..., list[np.ndarray]]]] = [
                ("tflm", "TFLite Micro", tflm_outputs)]
            if litert:
                computed.append(("litert", "LiteRT", litert_outputs))
            for key, label, fn in computed:
                began = time.monotonic()
                try:
                    if key == "tflm":  # the label names LiteRT's reference kernels where they
                        # stand in for TFLM (a model it cannot run); the key stays the slot
                        label, ref = tflm_or_litert_ref(self.model_bytes, self.inputs, bar(label),
                                                        state=tflm_state, litert_state=litert_state)
                    else:
                        ref = fn(self.model_bytes, self.inputs, bar(label), state=litert_state)
                except ImportError as err:  # ReferenceUnavailableError
                    if key == "litert":
                        _LOG.warning("skipping the LiteRT comparison: %s", err)
                        continue
                    raise
                seconds = time.monotonic() - began
                ref = _as_output_layout(ref, out_specs, label, n)
                report.comparisons.append(Comparison(key, label,
                                                     _compare(outputs, ref, out_specs), seconds))
        return report


def plan_validation(info: Any, data: str | Path | Mapping[str, Any],
                    reference: str | Path | Mapping[str, Any] | None = None, *,
                    tflite: bytes | str | Path | None = None,
                    limit: int | None = None, quantize: bool = False,
                    reset_state: bool | None = None) -> ValidationPlan:
    """Bind ``data`` (and ``reference``) to the model ``info``; see :func:`validate`."""
    in_specs = [TensorSpec.from_tensor_info(t) for t in info.inputs]
    out_specs = [TensorSpec.from_tensor_info(t) for t in info.outputs]
    arrays = load_tensor_files(data, in_specs, "input", "data")
    named = f"data {data}" if isinstance(data, str | Path) else "data"  # errors name the file
    if quantize:
        arrays = quantize_inputs(in_specs, arrays, named)
    inputs = bind_inputs(in_specs, arrays, named)
    if limit is not None:
        if limit < 1:
            raise ValidationError(f"limit {limit}: give at least 1 sample")
        inputs = [x[:limit] for x in inputs]
    n = int(inputs[0].shape[0])
    plan = ValidationPlan(info, in_specs, out_specs, inputs)
    plan.reset_state = bool(plan.state_size_bytes) and reset_state is not False
    if reference is not None:
        what = reference if isinstance(reference, str | Path) else "reference"
        ref_arrays = load_reference(reference, out_specs,
                                    f"reference {what}" if what != "reference" else what)
        if limit is not None:
            ref_arrays = {k: v[:limit] for k, v in ref_arrays.items()}
        plan.reference = bind_reference(out_specs, ref_arrays, n,
                                        what=f"reference {what}" if what != "reference" else what)
        plan.reference_name = str(reference) if isinstance(reference, str | Path) else "reference"
    plan.model_bytes = _tflite_bytes(tflite) if tflite is not None else None
    return plan


@dataclass
class _Streamed:
    """What one session's streaming gave :func:`validate`."""

    outputs: list[np.ndarray]
    depth: int
    seconds: float
    timing: TimingResult | None
    answered: np.ndarray  #: which samples' outputs arrived
    stopped: str | None = None  #: why the run ended before its last sample


def _on_device(session: Session, name: str, inputs: list[np.ndarray], out_specs: list[TensorSpec],
               bar: Callable[[str], Progress | None], pipeline: bool, number: int,
               repeat: int, reset: bool = False, carries_state: bool = False) -> _Streamed:
    n = int(inputs[0].shape[0]) if inputs else 0
    began = time.monotonic()
    session.recovery.begin_run(n)
    try:
        outputs, depth = stream_samples(session, name, inputs, out_specs, bar("device"),
                                        pipeline, reset, carries_state=carries_state,
                                        give_up_samples=True)
    except RetriesExhaustedError as err:
        partial = err.partial
        if partial is None or not partial.answered.any():
            raise
        _LOG.warning("the run stopped early: %s", str(err).splitlines()[0])
        return _Streamed(partial.outputs, 1, time.monotonic() - began, None, partial.answered,
                         str(err).splitlines()[0])
    stream_s = time.monotonic() - began
    answered = np.ones(n, dtype=bool)
    answered[list(session.recovery.stats.failed_samples)] = False
    timing = (session.time(session.model(name), number=number, repeat=repeat)
              if number > 0 else None)
    return _Streamed(outputs, depth, stream_s, timing, answered)


def _as_output_layout(ref: list[np.ndarray], specs: Sequence[TensorSpec], label: str,
                      n: int) -> list[np.ndarray]:
    if len(ref) != len(specs):
        raise ValidationError(f"{label} gives {len(ref)} outputs, the project's model "
                              f"{len(specs)}; pass the .tflite the project was made from")
    out = []
    for r, spec in zip(ref, specs, strict=True):
        if r[0].size != math.prod(spec.shape) or r.dtype != spec.dtype:
            raise ValidationError(f"{label} output is {r.dtype}{list(r.shape[1:])}, the project's "
                                  f"{spec.name!r} {spec.dtype}{list(spec.shape)}; pass the .tflite "
                                  "the project was made from")
        out.append(r.reshape((n, *spec.shape)))
    return out


def _compare(outputs: Sequence[np.ndarray], refs: Sequence[np.ndarray],
             specs: Sequence[TensorSpec]) -> list[OutputMetrics]:
    return [compute_metrics(o, r, s.name, scale=s.scale, zero_point=s.zero_point)
            for o, r, s in zip(outputs, refs, specs, strict=True)]


def save_outputs(report: ValidationReport, path: str | Path, force: bool = False) -> Path:
    """Write the device's outputs to exactly ``path`` (an ``.npz`` keyed by output name, first
    axis = sample); refuse an existing file unless ``force``."""
    path = Path(path)
    try:
        with open(path, "wb" if force else "xb") as f:
            np.savez(f, **{s.name: o for s, o in zip(report.output_specs, report.outputs, strict=True)})
    except FileExistsError:
        raise ValidationError(f"{path} already exists; pass --force to overwrite it") from None
    return path

"""Validate a model on its device: run many samples through one session, compare with references.

What ``project-api validate`` does, as a library independent of the command line::

    from project_api.project import GeneratedProject
    from project_api.validate import validate

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
import re
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
    from project_api.micro.api import Session, TimingResult
    from project_api.mlf import ModuleInfo
    from project_api.project import GeneratedProject

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

_LOG = logging.getLogger(__name__)

#: Metric name -> (higher is better, what it is). The direction decides which of
#: ``--fail-under`` (agreements) and ``--fail-over`` (errors) gates it.
METRICS: dict[str, tuple[bool, str]] = {
    "max_abs": (False, "largest |device - reference| over all elements"),
    "mean_abs": (False, "mean |device - reference|"),
    "rmse": (False, "root of the mean squared difference"),
    "l2r": (False, "L2 relative error ||device - reference|| / ||reference||"),
    "max_abs_int": (False, "largest difference in integer steps (integer outputs)"),
    "cosine": (True, "cosine similarity of the flattened outputs (1 = same direction)"),
    "top1": (True, "share of samples whose argmax over the last axis agrees (last axis > 1)"),
    "exact": (True, "share of samples whose integer output is bit-exact (integer outputs)"),
}


#: Metric name -> the values it can take (a threshold outside them is refused before the run).
METRIC_RANGES: dict[str, tuple[float, float]] = {
    "max_abs": (0.0, math.inf), "mean_abs": (0.0, math.inf), "rmse": (0.0, math.inf),
    "l2r": (0.0, math.inf), "max_abs_int": (0.0, math.inf),
    "cosine": (-1.0, 1.0), "top1": (0.0, 1.0), "exact": (0.0, 1.0),
}


# --- tensors and data ----------------------------------------------------------------------


@dataclass(frozen=True)
class TensorSpec:
    """What validation needs to know of one model input or output."""

    name: str
    c_name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    scale: float | None = None  #: per-tensor quantization scale, when the model records one
    zero_point: int | None = None

    @classmethod
    def from_tensor_info(cls, info: Any) -> TensorSpec:
        """From an :class:`project_api.mlf.TensorInfo`."""
        q = info.quantization or {}
        scales, zps = list(q.get("scale") or []), list(q.get("zero_point") or [])
        per_tensor = len(scales) == 1 and len(zps) == 1
        return cls(
            name=str(info.name), c_name=str(info.c_name), dtype=np.dtype(info.dtype),
            shape=tuple(int(s) for s in info.require_shape()),
            scale=float(scales[0]) if per_tensor else None,
            zero_point=int(zps[0]) if per_tensor else None,
        )

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def matches(self, key: str) -> bool:
        return key in (self.name, self.c_name)


def _squeeze(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(s) for s in shape if s != 1)


def _find_key(specs: Sequence[TensorSpec], key: str) -> int | None:
    for i, spec in enumerate(specs):
        if spec.matches(key):
            return i
    if key.isdigit() and int(key) < len(specs):
        return int(key)
    return None


def load_arrays(source: str | Path | Mapping[str, Any], what: str = "data") -> dict[str, np.ndarray]:
    """Arrays keyed by name from a mapping, an ``.npz`` file or a folder of ``.npy`` files."""
    if isinstance(source, Mapping):
        return {str(k): np.asarray(v) for k, v in source.items()}
    path = Path(source)
    if path.is_dir():
        files = sorted(path.glob("*.npy"))
        if not files:
            raise ValidationError(f"{what} folder {path} holds no .npy files; "
                                  "save one <input name>.npy per input (first axis = sample)")
        return {f.stem: np.load(f, allow_pickle=False) for f in files}
    if not path.is_file():
        raise ValidationError(f"{what} {path} does not exist; pass an .npz file or a folder of .npy files")
    if path.suffix == ".npy":
        # One tensor, keyed by index: the only input (or output) of the model.
        return {"0": _load_npy(path, what)}
    try:
        with np.load(path, allow_pickle=False) as npz:
            if not hasattr(npz, "files"):
                raise ValidationError(f"{what} {path} is not an .npz archive; "
                                      "write it with np.savez(path, name=array)")
            return {k: npz[k] for k in npz.files}
    except (OSError, ValueError) as err:
        raise ValidationError(f"{what} {path} cannot be read as an .npz ({err}); "
                              "write it with np.savez(path, name=array)") from None


def _load_npy(path: Path, what: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise ValidationError(f"{what} {path} cannot be read as a .npy ({err}); write it with "
                              "np.save(path, array)") from None


#: Text forms of one tensor: numbers, or a C array initializer (``int8_t x[] = {1, 2, };``).
_TEXT_SUFFIXES = (".txt", ".h", ".c")


def _number(word: str) -> float:
    """A decimal, hexadecimal (C ``0x1F``) or C float (``1.5f``) literal."""
    try:
        return float(int(word, 0))
    except ValueError:
        pass
    if word[-1:] in "fF" and not word.lower().startswith(("0x", "-0x")):
        word = word[:-1]
    return float(word)


def _load_text(path: Path, spec: TensorSpec, kind: str, what: str) -> np.ndarray:
    """Numbers separated by white space or commas (of a ``.h``/``.c``: those between the first
    ``{`` and the next ``}``), in C order, shaped by the model: one or more samples."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValidationError(f"{what} {path} cannot be read ({err}); give a text file of "
                              "numbers") from None
    if path.suffix in (".h", ".c"):
        text = re.sub(r"//[^\n]*", " ", re.sub(r"/\*.*?\*/", " ", text, flags=re.S))
        start, end = text.find("{"), text.find("}", text.find("{") + 1)
        if start < 0 or end < 0:
            raise ValidationError(f"{what} {path} holds no C array initializer {{...}}; give "
                                  "the numbers between braces, e.g. int8_t x[] = {1, 2};")
        text = text[start + 1 : end]
    words = text.replace(",", " ").split()
    try:
        values = np.array([_number(w) for w in words], dtype=np.float64)
    except ValueError:
        bad = next(w for w in words if not _is_number(w))
        raise ValidationError(f"{what} {path} holds {bad!r}, not a number; give numbers "
                              "separated by white space or commas") from None
    per = math.prod(spec.shape)
    if not values.size or values.size % per:
        raise ValidationError(
            f"{what} {path} holds {values.size} numbers; {kind} {spec.name!r} is "
            f"{spec.dtype}{list(spec.shape)}, so give a multiple of {per} (one sample each)")
    if spec.dtype.kind in "iub":
        info = np.iinfo(spec.dtype) if spec.dtype.kind != "b" else None
        if not np.all(np.round(values) == values) or (
                info is not None and (values.min() < info.min or values.max() > info.max)):
            raise ValidationError(f"{what} {path} holds values that are not {spec.dtype} "
                                  f"integers; {kind} {spec.name!r} is {spec.dtype}")
    return values.astype(spec.dtype).reshape((values.size // per, *spec.shape))


def _is_number(word: str) -> bool:
    try:
        _number(word)
    except ValueError:
        return False
    return True


def _one_sample_or_many(arr: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """An array of exactly one sample's elements (any shape) gets its sample axis."""
    if arr.size == math.prod(spec.shape) and tuple(arr.shape[1:]) != spec.shape:
        return arr.reshape((1, *spec.shape))
    return arr


def load_tensor_files(source: str | Path | Mapping[str, Any], specs: Sequence[TensorSpec],
                      kind: str = "output", what: str = "reference") -> dict[str, np.ndarray]:
    """The arrays of ``source`` keyed by tensor (see the module doc for the forms): a mapping,
    ``.npz``, a folder of ``<name>.npy`` / ``.txt`` / ``.h``, or, for a model with one such
    tensor, a single ``.npy``, ``.txt`` or ``.h``. ``kind`` is "input" or "output"."""
    if isinstance(source, Mapping):
        return load_arrays(source, what)
    path = Path(source)
    single = path.is_file() and path.suffix in (".npy", *_TEXT_SUFFIXES)
    if single and len(specs) != 1:
        names = ", ".join(s.name for s in specs)
        raise ValidationError(
            f"{what} {path} is one {path.suffix} but the model has {len(specs)} {kind}s "
            f"({names}); give an .npz keyed by {kind} name or a folder of <{kind} name>.npy")
    if single and path.suffix in _TEXT_SUFFIXES:
        return {specs[0].name: _load_text(path, specs[0], kind, what)}
    if single:
        return {specs[0].name: _one_sample_or_many(_load_npy(path, what), specs[0])}
    if path.is_dir():
        arrays = {f.stem: _load_npy(f, what) for f in sorted(path.glob("*.npy"))}
        for f in sorted(f for f in path.iterdir() if f.suffix in _TEXT_SUFFIXES):
            i = _find_key(specs, f.stem)
            if i is None:
                raise ValidationError(f"{what} folder {path} has {f.name} but the model has no "
                                      f"{kind} {f.stem!r}; its {kind}s: "
                                      + ", ".join(s.name for s in specs))
            if f.stem in arrays:
                raise ValidationError(f"{what} folder {path} has two files for {f.stem!r} "
                                      f"({f.name} and another); keep one")
            arrays[f.stem] = _load_text(f, specs[i], kind, what)
        if not arrays:
            raise ValidationError(f"{what} folder {path} holds no .npy, .txt or .h files; save "
                                  f"one <{kind} name>.npy per {kind} (first axis = sample)")
        out = {}
        for key, arr in arrays.items():
            i = _find_key(specs, key)
            out[key] = _one_sample_or_many(arr, specs[i]) if i is not None else arr
        return out
    return load_arrays(path, what)


def load_reference(source: str | Path | Mapping[str, Any], specs: Sequence[TensorSpec],
                   what: str = "reference") -> dict[str, np.ndarray]:
    """A reference's arrays keyed by output: :func:`load_tensor_files` for outputs."""
    return load_tensor_files(source, specs, "output", what)


def _bind(specs: Sequence[TensorSpec], arrays: Mapping[str, np.ndarray], kind: str, what: str,
          samples: int | None) -> list[np.ndarray]:
    """Arrays of ``arrays`` in ``specs`` order, shaped ``(samples, *spec.shape)``, checked."""
    bound: dict[int, tuple[str, np.ndarray]] = {}
    names = ", ".join(s.name for s in specs)
    for key, arr in arrays.items():
        i = _find_key(specs, key)
        if i is None:
            raise ValidationError(f"{what} has an array {key!r} but the model has no {kind} by that "
                                  f"name; its {kind}s: {names}")
        if i in bound:
            raise ValidationError(f"{what} has two arrays for {kind} {specs[i].name!r} "
                                  f"({bound[i][0]!r} and {key!r}); keep one")
        bound[i] = (key, arr)
    for i, spec in enumerate(specs):
        if i not in bound:
            raise ValidationError(f"{what} has no array for {kind} {spec.name!r} (it has: "
                                  f"{', '.join(arrays) or 'none'}); add one keyed by {spec.name!r}")
    out: list[np.ndarray] = []
    counts: dict[str, int] = {}
    for i, spec in enumerate(specs):
        key, arr = bound[i]
        if arr.ndim == 0:
            raise ValidationError(f"{what} array {key!r} is a scalar; its first axis must be the "
                                  f"sample index, then {kind} {spec.name!r}'s shape {list(spec.shape)}")
        per_sample = tuple(arr.shape[1:])
        if per_sample != spec.shape and (math.prod(per_sample) != math.prod(spec.shape)
                                         or _squeeze(per_sample) != _squeeze(spec.shape)):
            raise ValidationError(
                f"{what} array {key!r} has shape {list(arr.shape)}, i.e. samples of "
                f"{list(per_sample)}; {kind} {spec.name!r} is {list(spec.shape)}, so give "
                f"[samples, {', '.join(map(str, spec.shape))}]"
            )
        if arr.dtype != spec.dtype:
            raise ValidationError(f"{what} array {key!r} holds {arr.dtype}; {kind} {spec.name!r} is "
                                  f"{_conversion_hint(arr.dtype, spec, kind)}")
        check_finite(arr, f"{what} array {key!r}")
        counts[key] = int(arr.shape[0])
        out.append(np.ascontiguousarray(arr).reshape((arr.shape[0], *spec.shape)))
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"{k}: {n}" for k, n in counts.items())
        raise ValidationError(f"{what} arrays disagree on the number of samples ({listed}); "
                              "give every array the same first axis")
    n = next(iter(counts.values()), 0)
    if samples is not None and n != samples:
        raise ValidationError(f"{what} holds {n} samples but the data holds {samples}; "
                              "give one reference row per sample, in the same order")
    if samples is None and n == 0:
        raise ValidationError(f"{what} holds 0 samples; give at least one (first axis = sample)")
    return out


def _conversion_hint(have: np.dtype, spec: TensorSpec, kind: str) -> str:
    """``spec``'s dtype and how to give it: quantize floats for a quantized integer tensor
    (a plain ``astype`` would truncate them), else convert."""
    want = spec.dtype
    if have.kind == "f" and want.kind in "iu":
        if spec.scale is not None and spec.zero_point is not None:
            info = np.iinfo(want)
            q = f"x / {spec.scale:.9g}"
            how = (f"np.clip(np.trunc({q} + np.copysign(0.5, x)) + {spec.zero_point}, "
                   f"{info.min}, {info.max}).astype(np.{want.name})")
            flag = "pass --quantize (quantize= in Python), or " if kind == "input" else ""
            return (f"{want} quantized with scale {spec.scale:.9g} and zero point "
                    f"{spec.zero_point}: {flag}quantize it yourself, {how}")
        return (f"{want} with no one scale and zero point in the archive: give {want} values "
                "(a plain astype would truncate the floats)")
    return f"{want}: convert it with .astype(np.{want.name})"


def check_finite(arr: np.ndarray, what: str) -> None:
    """ValidationError naming the first NaN or infinity of a float ``arr`` (``(samples, ...)``)
    and where it is: neither quantizes nor compares to anything meaningful."""
    if arr.dtype.kind not in "fc" or arr.size == 0:
        return
    finite = np.isfinite(arr)
    if finite.all():
        return
    where = tuple(int(i) for i in np.argwhere(~finite)[0])
    count = int(arr.size - np.count_nonzero(finite))
    raise ValidationError(
        f"{what} holds {arr[where]} at index {list(where)} (sample {where[0]}; {count} "
        f"non-finite value{'s' if count != 1 else ''} in all); give finite numbers, e.g. drop "
        "those samples or replace the values with np.nan_to_num"
    )


def quantize_inputs(specs: Sequence[TensorSpec], arrays: Mapping[str, np.ndarray],
                    what: str = "data") -> dict[str, np.ndarray]:
    """Float arrays for quantized integer inputs, quantized with the input's scale and zero
    point as TFLite does (round half away from zero, then clamp); other arrays unchanged."""
    out: dict[str, np.ndarray] = {}
    for key, arr in arrays.items():
        i = _find_key(specs, key)
        arr = np.asarray(arr)
        if i is not None and arr.dtype.kind == "f" and specs[i].dtype.kind in "iu":
            spec = specs[i]
            if spec.scale is None or spec.zero_point is None:
                raise ValidationError(
                    f"--quantize: input {spec.name!r} is {spec.dtype} with no one scale and zero "
                    "point in the archive; give its values as integers")
            check_finite(arr, f"{what} array {key!r}")
            info = np.iinfo(spec.dtype)
            scaled = arr.astype(np.float64) / spec.scale
            rounded = np.trunc(scaled + np.copysign(0.5, scaled)) + spec.zero_point
            arr = np.clip(rounded, info.min, info.max).astype(spec.dtype)
        out[key] = arr
    return out


def bind_inputs(specs: Sequence[TensorSpec], arrays: Mapping[str, np.ndarray],
                what: str = "data") -> list[np.ndarray]:
    """The input arrays in model order, each ``(samples, *shape)``; :class:`ValidationError`
    for a missing, unknown, misshapen or mistyped array or disagreeing sample counts."""
    return _bind(specs, arrays, "input", what, None)


def bind_reference(specs: Sequence[TensorSpec], arrays: Mapping[str, np.ndarray], samples: int,
                   what: str = "reference") -> list[np.ndarray]:
    """The reference arrays in output order, each ``(samples, *shape)``.

    A reference of another dtype is converted when nothing is lost: integers whose values fit
    the output's integer type, floats to the output's float type.
    """
    cast = {}
    for key, arr in arrays.items():
        i = _find_key(specs, key)
        arr = np.asarray(arr)
        if i is not None and arr.dtype != specs[i].dtype:
            want = specs[i].dtype
            if arr.dtype.kind in "iu" and want.kind in "iu":
                converted = arr.astype(want)
                if np.array_equal(converted, arr):
                    arr = converted
            elif arr.dtype.kind == "f" and want.kind == "f":
                arr = arr.astype(want)
        cast[key] = arr
    return _bind(specs, cast, "output", what, samples)


# --- metrics -------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputMetrics:
    """Metrics of one output against one reference, over all samples (see the module doc)."""

    name: str
    samples: int
    dequantized: bool  #: whether the error/cosine metrics are on dequantized values
    max_abs: float
    mean_abs: float
    rmse: float
    cosine: float
    l2r: float
    top1: float | None = None  #: None unless the last axis is > 1
    exact: float | None = None  #: None unless the output is integer
    max_abs_int: float | None = None  #: None unless the output is integer

    def get(self, metric: str) -> float | None:
        if metric not in METRICS:
            raise ValidationError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
        value = getattr(self, metric)
        return None if value is None else float(value)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values; an infinite ``l2r`` (zero reference) becomes the string "inf"."""
        out: dict[str, Any] = {k: getattr(self, k) for k in ("name", "samples", "dequantized", *METRICS)}
        return {k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in out.items()}


def _dequantize(arr: np.ndarray, scale: float | None, zero_point: int | None) -> np.ndarray:
    values = arr.astype(np.float64)
    if scale is not None and zero_point is not None:
        values = (values - zero_point) * scale
    return values


def compute_metrics(device: np.ndarray, reference: np.ndarray, name: str = "output", *,
                    scale: float | None = None, zero_point: int | None = None) -> OutputMetrics:
    """Compare ``device`` with ``reference``, both ``(samples, ...)`` of the same shape.

    With ``scale`` and ``zero_point`` (integer outputs) the error and cosine metrics are on
    dequantized values. Empty vectors count as equal (cosine 1, errors 0); a zero reference
    gives ``l2r`` 0 when the device is zero too, else infinity; cosine is 0 when exactly one
    side is all zeros.
    """
    device, reference = np.asarray(device), np.asarray(reference)
    if device.shape != reference.shape:
        raise ValidationError(f"output {name!r}: the device gave shape {list(device.shape)}, the "
                              f"reference {list(reference.shape)}; give a reference of the same shape")
    if device.ndim == 0:
        raise ValidationError(f"output {name!r}: want (samples, ...) arrays, got scalars; "
                              "add the sample axis")
    n = int(device.shape[0])
    integer = device.dtype.kind in "iub" and reference.dtype.kind in "iub"
    dequantized = integer and scale is not None and zero_point is not None
    got = _dequantize(device, scale if dequantized else None, zero_point)
    want = _dequantize(reference, scale if dequantized else None, zero_point)
    diff = got - want
    if diff.size:
        abs_diff = np.abs(diff)
        max_abs, mean_abs = float(abs_diff.max()), float(abs_diff.mean())
        rmse = float(np.sqrt(np.mean(diff * diff)))
    else:
        max_abs = mean_abs = rmse = 0.0
    g, w = got.ravel(), want.ravel()
    ng, nw = float(np.linalg.norm(g)), float(np.linalg.norm(w))
    nd = float(np.linalg.norm(diff.ravel()))
    if nd == 0.0:
        cosine = 1.0  # identical (also when both are all zeros)
    elif ng == 0.0 or nw == 0.0:
        cosine = 0.0
    else:
        cosine = float(np.clip(np.dot(g, w) / (ng * nw), -1.0, 1.0))
    l2r = (0.0 if nd == 0.0 else math.inf) if nw == 0.0 else nd / nw
    top1 = None
    if device.ndim >= 2 and device.shape[-1] > 1 and n:
        top1 = float(np.mean(np.argmax(device, axis=-1) == np.argmax(reference, axis=-1)))
    exact = max_abs_int = None
    if integer:
        same = (device == reference).reshape(n, -1).all(axis=1) if n else np.ones(0, bool)
        exact = float(same.mean()) if n else 1.0
        steps = np.abs(device.astype(np.int64) - reference.astype(np.int64))
        max_abs_int = float(steps.max()) if steps.size else 0.0
    return OutputMetrics(name=name, samples=n, dequantized=dequantized, max_abs=max_abs,
                         mean_abs=mean_abs, rmse=rmse, cosine=cosine, l2r=l2r, top1=top1,
                         exact=exact, max_abs_int=max_abs_int)


# --- thresholds ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Threshold:
    """``metric`` must be >= ``value`` (``higher``) or <= ``value``, against ``reference``
    (a :attr:`Comparison.key`; None: the primary reference)."""

    metric: str
    value: float
    reference: str | None = None

    @property
    def higher(self) -> bool:
        return METRICS[self.metric][0]

    def __str__(self) -> str:
        at = f"@{self.reference}" if self.reference else ""
        return f"{self.metric}{at} {'>=' if self.higher else '<='} {self.value:g}"


def parse_thresholds(fail_under: Sequence[str], fail_over: Sequence[str]) -> list[Threshold]:
    """``METRIC[@REF]=VALUE`` items: ``fail_under`` for agreements (higher is better),
    ``fail_over`` for errors (lower is better); the wrong one for a metric is refused."""
    out = []
    for flag, items, higher in (("--fail-under", fail_under, True), ("--fail-over", fail_over, False)):
        for item in items:
            name, sep, text = item.partition("=")
            metric, _, ref = name.strip().partition("@")
            try:
                value = float(text)
            except ValueError:
                value = math.nan
            if not sep or math.isnan(value):
                raise ValidationError(f"{flag} {item!r}: want METRIC=NUMBER (e.g. "
                                      f"{'cosine=0.999' if higher else 'max_abs=0.01'})")
            if metric not in METRICS:
                raise ValidationError(f"{flag} {item!r}: unknown metric {metric!r}; known: "
                                      f"{', '.join(METRICS)}")
            if METRICS[metric][0] != higher:
                other = "--fail-over" if higher else "--fail-under"
                kind = "an error (lower is better)" if higher else "an agreement (higher is better)"
                raise ValidationError(f"{flag} {item!r}: {metric} is {kind}; gate it with "
                                      f"{other} {metric}={text}")
            low, high = METRIC_RANGES[metric]
            if not (math.isfinite(value) and low <= value <= high):
                span = f"in {low:g}..{high:g}" if math.isfinite(high) else f">= {low:g}"
                never = value > high if higher else value < low
                raise ValidationError(f"{flag} {item!r}: {metric} is always {span}, so this "
                                      f"gate {'can never pass' if never else 'always passes'}; "
                                      f"give a value {span}")
            out.append(Threshold(metric, value, ref.strip() or None))
    return out


# --- the report ----------------------------------------------------------------------------


@dataclass
class Comparison:
    """The device's outputs against one reference."""

    key: str  #: "reference", "tflm" or "litert" (what ``METRIC@KEY=...`` names)
    reference: str  #: a human name: the file, "TFLite Micro", "LiteRT"
    outputs: list[OutputMetrics]
    seconds: float = 0.0  #: how long computing the reference took (0 for a given one)

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "reference": self.reference, "seconds": self.seconds,
                "outputs": [m.to_json() for m in self.outputs]}


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


# --- references computed from a .tflite ----------------------------------------------------


Progress = Callable[[int], None]  #: called with how many more samples are done


def _tflite_bytes(model: bytes | str | Path) -> bytes:
    if isinstance(model, bytes | bytearray):
        return bytes(model)
    path = Path(model)
    if not path.is_file():
        raise ValidationError(f"model {path} does not exist; pass the .tflite the project was made from")
    return path.read_bytes()


def tflm_outputs(model: bytes, inputs: Sequence[np.ndarray], progress: Progress | None = None,
                 arena_size_bytes: int | None = None, *, state: str = "reset"
                 ) -> list[np.ndarray]:
    """Run every sample of ``inputs`` (each ``(samples, ...)``) in one TFLite Micro interpreter
    (reference kernels); return each output as ``(samples, *shape)``.

    ``state`` says what a stateful model's state does between samples: ``"reset"`` (the
    default; the interpreter's reset), ``"boot"`` (a new interpreter per sample: the state of a
    device just booted or reset, which runs CALL_ONCE init subgraphs again where TFLM's reset
    does not) or ``"carry"`` (one interpreter, never reset: the samples are one stream)."""
    from project_api.emit import reference

    runtime = reference._tflm_runtime()
    n_in, n_out = reference._subgraph_io_count(model)
    if len(inputs) != n_in:
        raise ValidationError(f"the .tflite has {n_in} inputs, the data {len(inputs)}; "
                              "pass the .tflite the project was made from")
    size = arena_size_bytes or reference.tflm_arena_size(model)
    interp = runtime.Interpreter.from_bytes(bytes(model), arena_size=size)
    shapes = [tuple(int(d) for d in interp.get_input_details(i)["shape"]) for i in range(n_in)]
    n = int(inputs[0].shape[0]) if inputs else 0
    outs: list[np.ndarray] = []
    for s in range(n):
        if state == "boot" and s:
            interp = runtime.Interpreter.from_bytes(bytes(model), arena_size=size)
        elif state == "reset":
            interp.reset()  # no state carried between samples (variable tensors)
        for i in range(n_in):
            interp.set_input(np.ascontiguousarray(inputs[i][s].reshape(shapes[i])), i)
        interp.invoke()
        for k in range(n_out):
            y = np.asarray(interp.get_output(k))
            if s == 0:
                outs.append(np.empty((n, *y.shape), dtype=y.dtype))
            outs[k][s] = y
        if progress is not None:
            progress(1)
    return outs


def litert_outputs(model: bytes, inputs: Sequence[np.ndarray],
                   progress: Progress | None = None, *, state: str = "carry") -> list[np.ndarray]:
    """Run every sample in one LiteRT interpreter (built-in kernels, no delegates, one thread);
    return each output as ``(samples, *shape)``. ``state``: ``"carry"`` (one interpreter, the
    default) or ``"boot"`` (a new one per sample, for a stateful model whose state is reset)."""
    from project_api.emit import reference

    def fresh() -> Any:
        mod = reference._litert_interpreter()
        interp = mod.Interpreter(
            model_content=bytes(model), num_threads=1,
            experimental_op_resolver_type=mod.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
        interp.allocate_tensors()
        return interp

    interp = fresh()
    ins, outs_d = interp.get_input_details(), interp.get_output_details()
    if len(inputs) != len(ins):
        raise ValidationError(f"the .tflite has {len(ins)} inputs, the data {len(inputs)}; "
                              "pass the .tflite the project was made from")
    n = int(inputs[0].shape[0]) if inputs else 0
    outs = [np.empty((n, *(int(d) for d in o["shape"])), dtype=o["dtype"]) for o in outs_d]
    for s in range(n):
        if state == "boot" and s:
            interp = fresh()
        for value, det in zip(inputs, ins, strict=True):
            interp.set_tensor(det["index"], np.ascontiguousarray(
                value[s].reshape(tuple(int(d) for d in det["shape"]))))
        interp.invoke()
        for k, det in enumerate(outs_d):
            outs[k][s] = interp.get_tensor(det["index"])
        if progress is not None:
            progress(1)
    return outs


# --- validate ------------------------------------------------------------------------------


def _module_info(project: GeneratedProject, module: str | None) -> ModuleInfo:
    from project_api import mlf

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
    :mod:`project_api.farm`)."""

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
                    ref = fn(self.model_bytes, self.inputs, bar(label),
                             state=tflm_state if key == "tflm" else litert_state)
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

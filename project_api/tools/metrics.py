"""How a device's outputs are held against a reference: the metrics of each output (exact match,
errors, top-1, SNR), the thresholds a user sets, and the comparison they give.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from project_api.errors import (
    ValidationError,
)

if TYPE_CHECKING:
    pass
from project_api.tools.samples import _dequantize

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

"""The facts a model builder writes about tensors: the schema's type, operator and option tables,
affine quantization (parameters, quantize and dequantize), and the references to tensors a
builder hands out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from project_api.tflite import schema

#: TensorType codes of the element types the builder writes.
TENSOR_TYPES: dict[str, int] = {name: schema.TENSOR_TYPE_CODES[name]
                                for name in ("float32", "int32", "int8", "int16", "uint8",
                                             "int64", "bool", "resource", "uint32", "uint64")}

_NP_DTYPES: dict[str, Any] = {name: schema.NUMPY_TYPES[name] for name in TENSOR_TYPES
                              if name in schema.NUMPY_TYPES}

#: Activation types quantized per tensor by default (the others are plain values).
_QUANTIZED = ("int8", "int16", "uint8")

#: BuiltinOperator codes (the schema's whole enum).
BUILTIN_OPS: dict[str, int] = schema.BUILTIN_OPERATORS

#: BuiltinOptions union tags.
BUILTIN_OPTIONS: dict[str, int] = schema.OPTIONS_TAGS

#: ActivationFunctionType enum values.
ACTIVATIONS: dict[str, int] = schema.ENUMS["ActivationFunctionType"]

#: Padding enum values.
PADDINGS: dict[str, int] = schema.ENUMS["Padding"]


def quantize_params(min_val: float, max_val: float, dtype: str = "int8",
                    symmetric: bool | None = None) -> tuple[float, int]:
    """``(scale, zero_point)`` covering ``[min_val, max_val]`` (widened to hold 0).

    Zero is then exactly representable, as TFLite requires for activations. Asymmetric, except
    ``symmetric`` (the default for int16, as TFLite's 16x8 quantization makes activations):
    zero point 0 and ``scale = max(|min|, |max|) / 32767``.
    """
    info = np.iinfo(_NP_DTYPES[dtype])
    lo = min(float(min_val), 0.0)
    hi = max(float(max_val), 0.0)
    if symmetric is None:
        symmetric = dtype == "int16"
    if symmetric:
        bound = max(-lo, hi, 1e-8)
        return float(np.float32(bound / float(info.max))), 0
    if hi - lo < 1e-8:
        hi = lo + 1e-8
    scale = (hi - lo) / float(info.max - info.min)
    zero_point = int(round(info.min - lo / scale))
    zero_point = max(int(info.min), min(int(info.max), zero_point))
    return float(np.float32(scale)), zero_point


def symmetric_scales(weights: np.ndarray, axis: int | None = None) -> np.ndarray:
    """Symmetric int8 scales (``max|w| / 127``), one per tensor or one per slice along ``axis``."""
    w = np.abs(np.asarray(weights, dtype=np.float64))
    if axis is None:
        absmax = np.array([w.max() if w.size else 0.0])
    else:
        absmax = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1).max(axis=1)
    absmax = np.where(absmax > 0, absmax, 1.0)
    return (absmax / 127.0).astype(np.float32)


def quantize_array(
    values: np.ndarray,
    scale: float | Sequence[float] | np.ndarray,
    zero_point: int | Sequence[int] | np.ndarray = 0,
    dtype: str = "int8",
    axis: int = 0,
) -> np.ndarray:
    """``round(values / scale) + zero_point`` saturated to ``dtype``; per channel along ``axis``."""
    v = np.asarray(values, dtype=np.float64)
    s = np.asarray(scale, dtype=np.float64).reshape(-1)
    z = np.asarray(zero_point, dtype=np.int64).reshape(-1)
    if s.size > 1:
        bshape = [1] * v.ndim
        bshape[axis] = s.size
        s = s.reshape(bshape)
        z = np.broadcast_to(z, (s.size,)).reshape(bshape) if z.size == 1 else z.reshape(bshape)
    info = np.iinfo(_NP_DTYPES[dtype])
    q = np.round(v / s) + z
    return np.clip(q, info.min, info.max).astype(_NP_DTYPES[dtype])


def dequantize_array(
    values: np.ndarray,
    scale: float | Sequence[float] | np.ndarray,
    zero_point: int | Sequence[int] | np.ndarray = 0,
    axis: int = 0,
) -> np.ndarray:
    """``scale * (values - zero_point)`` as float64; per channel along ``axis``."""
    v = np.asarray(values, dtype=np.float64)
    s = np.asarray(scale, dtype=np.float64).reshape(-1)
    z = np.asarray(zero_point, dtype=np.float64).reshape(-1)
    if s.size > 1:
        bshape = [1] * v.ndim
        bshape[axis] = s.size
        s = s.reshape(bshape)
        z = z.reshape(bshape) if z.size == s.size else z
    return s * (v - z)


@dataclass(frozen=True)
class TensorRef:
    """A tensor of the model under construction, as the builder's methods take and return it."""

    index: int
    shape: tuple[int, ...]
    dtype: str
    scale: tuple[float, ...] | None = None
    zero_point: tuple[int, ...] | None = None
    quantized_dimension: int = 0

    @property
    def quant(self) -> tuple[float, int] | None:
        """``(scale, zero_point)`` of a per-tensor quantized tensor, else None."""
        if self.scale is None or self.zero_point is None or len(self.scale) != 1:
            return None
        return self.scale[0], self.zero_point[0]


@dataclass
class _TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str
    buffer: int
    scale: tuple[float, ...] | None
    zero_point: tuple[int, ...] | None
    quantized_dimension: int
    is_variable: bool = False


@dataclass
class _OpSpec:
    opcode: str
    inputs: list[int]
    outputs: list[int]
    options: dict[str, Any] = field(default_factory=dict)  # fields of its options table
    custom_code: str | None = None  # a custom operator's name (opcode "CUSTOM")
    custom_options: bytes | None = None


def _pair(v: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    a, b = v
    return int(a), int(b)


def _out_size(size: int, k: int, stride: int, dilation: int, padding: str) -> int:
    eff = (k - 1) * dilation + 1
    if padding == "SAME":
        return (size + stride - 1) // stride
    if size < eff:
        raise ValueError(f"VALID padding: window {eff} is larger than the input size {size}")
    return (size - eff) // stride + 1


def _check_choice(value: str, choices: dict[str, int], what: str) -> str:
    if value not in choices:
        raise ValueError(f"unknown {what} {value!r}; choose one of {sorted(choices)}")
    return value


def _act_range(lo: float, hi: float, activation: str) -> tuple[float, float]:
    """The range ``[lo, hi]`` after ``activation``, never narrower than a quarter of the input's.

    The floor keeps int8 requantization multipliers sane when an estimate falls mostly outside
    the activation's range (a RELU after an all-negative estimate).
    """
    bounds = {"RELU": (0.0, math.inf), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}
    if activation not in bounds:
        return lo, hi
    floor, ceil = bounds[activation]
    width = max(hi - lo, 1e-6) / 4.0
    new_lo = min(max(lo, floor), ceil)
    new_hi = min(max(hi, floor), ceil)
    if new_hi - new_lo < width:
        new_hi = min(new_lo + width, ceil)
        new_lo = max(min(new_lo, new_hi - width), floor)
    return new_lo, new_hi


#: The comparison operators (:meth:`ModelBuilder.comparison`).
COMPARISONS = ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL")

"""Build small TFLite models in code, for tests, benchmarks and the demo.

The emitter is tested against models whose every option is chosen on purpose, so this module
writes TFLite flatbuffers directly with the ``flatbuffers`` runtime (a core dependency, where
the ``tflite`` package's generated builders would add one): :meth:`ModelBuilder.build` fills the
schema's tables by field slot number (``StartObject(n)`` / ``Prepend*Slot(slot, ...)``). The
tests check the layout by reading every model back with the ``tflite`` package's generated
reader and by running it in both TFLite Micro and LiteRT.

Usage::

    mb = ModelBuilder(seed=1)
    x = mb.input((1, 8, 8, 3), "int8", quant=(1 / 128, 0))
    y = mb.conv2d(x, filters=4, kernel_size=3, activation="RELU")
    y = mb.softmax(mb.reshape(y, (1, -1)))
    mb.output(y)
    model_bytes = mb.build()

Types: ``float32`` models, and ``int8`` models quantized the TFLite way: activations are
asymmetric int8 per tensor, weights symmetric int8 per tensor or per output channel
(``per_channel=True``), biases int32 with ``scale = input_scale * weight_scale`` and zero point 0.
Weights not given explicitly come from the builder's seeded ``numpy.random.Generator``, so a
seed always gives the same bytes. Output quantization of an int8 operator is taken from
``out_quant=(scale, zero_point)`` when given, else from a statistical estimate of its float range
(mean +- 3 standard deviations for a uniformly distributed input, clipped by the activation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flatbuffers
import numpy as np

__all__ = [
    "ACTIVATIONS",
    "BUILTIN_OPS",
    "BUILTIN_OPTIONS",
    "MODES",
    "ModelBuilder",
    "PADDINGS",
    "TENSOR_TYPES",
    "TensorRef",
    "demo_model",
    "dequantize_array",
    "quantize_array",
    "quantize_params",
    "single_op_model",
    "symmetric_scales",
]

# --- schema facts (tensorflow/lite/schema/schema.fbs) -----------------------------------------

#: TensorType enum values.
TENSOR_TYPES: dict[str, int] = {"float32": 0, "int32": 2, "int8": 9, "int16": 7, "uint8": 3}
_NP_DTYPES: dict[str, Any] = {
    "float32": np.float32, "int32": np.int32, "int8": np.int8, "int16": np.int16, "uint8": np.uint8,
}

#: BuiltinOperator enum values of the operators this builder writes.
BUILTIN_OPS: dict[str, int] = {
    "ADD": 0, "AVERAGE_POOL_2D": 1, "CONV_2D": 3, "DEPTHWISE_CONV_2D": 4, "DEQUANTIZE": 6,
    "FULLY_CONNECTED": 9, "MAX_POOL_2D": 17, "MUL": 18, "RESHAPE": 22, "SOFTMAX": 25,
    "QUANTIZE": 114,
}

#: BuiltinOptions union tags.
BUILTIN_OPTIONS: dict[str, int] = {
    "Conv2DOptions": 1, "DepthwiseConv2DOptions": 2, "Pool2DOptions": 5,
    "FullyConnectedOptions": 8, "SoftmaxOptions": 9, "AddOptions": 11, "ReshapeOptions": 17,
    "MulOptions": 21, "DequantizeOptions": 38, "QuantizeOptions": 89,
}

#: ActivationFunctionType enum values.
ACTIVATIONS: dict[str, int] = {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3}

#: Padding enum values.
PADDINGS: dict[str, int] = {"SAME": 0, "VALID": 1}

_SCHEMA_VERSION = 3
_FILE_IDENTIFIER = b"TFL3"
_BUFFER_ALIGNMENT_BYTES = 16


# --- quantization helpers -----------------------------------------------------------------------


def quantize_params(min_val: float, max_val: float, dtype: str = "int8") -> tuple[float, int]:
    """Asymmetric ``(scale, zero_point)`` covering ``[min_val, max_val]`` (widened to hold 0).

    Zero is then exactly representable, as TFLite requires for activations.
    """
    info = np.iinfo(_NP_DTYPES[dtype])
    lo = min(float(min_val), 0.0)
    hi = max(float(max_val), 0.0)
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


# --- model description --------------------------------------------------------------------------


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


@dataclass
class _OpSpec:
    opcode: str
    inputs: list[int]
    outputs: list[int]
    options_name: str | None
    options_fields: list[tuple[int, str, Any, Any]] = field(default_factory=list)
    options_num_fields: int = 0


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


class ModelBuilder:
    """Assemble a one-subgraph TFLite model operator by operator, then :meth:`build` it.

    ``seed`` (an int, or a sequence of ints as numpy takes) drives every generated weight.
    ``per_channel`` is the default weight quantization of int8 CONV_2D, DEPTHWISE_CONV_2D and
    FULLY_CONNECTED (each method can override it).
    """

    def __init__(self, seed: int | Sequence[int] = 0, per_channel: bool = False,
                 description: str = "project-api builder"):
        self.rng = np.random.default_rng(seed)
        self.per_channel = per_channel
        self.description = description
        self._tensors: list[_TensorSpec] = []
        self._buffers: list[bytes] = [b""]
        self._ops: list[_OpSpec] = []
        self._inputs: list[int] = []
        self._outputs: list[int] = []
        self._ranges: dict[int, tuple[float, float]] = {}
        #: Float values of every constant (weights as generated, before quantization), by index.
        self.float_values: dict[int, np.ndarray] = {}
        #: Stored values of every constant (quantized for int8 models), by tensor index.
        self.values: dict[int, np.ndarray] = {}
        self._counter = 0

    # -- tensors ------------------------------------------------------------------------------

    def _name(self, stem: str) -> str:
        self._counter += 1
        return f"{stem}_{self._counter}"

    def _add_tensor(
        self,
        name: str,
        shape: Sequence[int],
        dtype: str,
        data: np.ndarray | None = None,
        scale: Sequence[float] | None = None,
        zero_point: Sequence[int] | None = None,
        quantized_dimension: int = 0,
    ) -> TensorRef:
        _check_choice(dtype, TENSOR_TYPES, "dtype")
        shape = tuple(int(d) for d in shape)
        buffer = 0
        if data is not None:
            arr = np.ascontiguousarray(np.asarray(data, dtype=_NP_DTYPES[dtype]).reshape(shape))
            buffer = len(self._buffers)
            self._buffers.append(arr.astype(arr.dtype.newbyteorder("<")).tobytes())
        sc = tuple(float(np.float32(s)) for s in scale) if scale is not None else None
        zp = tuple(int(z) for z in zero_point) if zero_point is not None else None
        index = len(self._tensors)
        self._tensors.append(_TensorSpec(name, shape, dtype, buffer, sc, zp, quantized_dimension))
        if data is not None:
            self.values[index] = np.asarray(data, dtype=_NP_DTYPES[dtype]).reshape(shape)
        return TensorRef(index, shape, dtype, sc, zp, quantized_dimension)

    def _activation(
        self, stem: str, shape: Sequence[int], dtype: str, quant: tuple[float, int] | None,
        rng_estimate: tuple[float, float] | None = None,
    ) -> TensorRef:
        if dtype == "float32":
            ref = self._add_tensor(self._name(stem), shape, "float32")
        else:
            if quant is None:
                raise ValueError(f"{stem}: an {dtype} tensor needs quantization parameters")
            ref = self._add_tensor(self._name(stem), shape, dtype, scale=[quant[0]],
                                   zero_point=[quant[1]])
        if rng_estimate is not None:
            self._ranges[ref.index] = rng_estimate
        elif quant is not None:
            self._ranges[ref.index] = self._quant_range(dtype, quant)
        return ref

    @staticmethod
    def _quant_range(dtype: str, quant: tuple[float, int]) -> tuple[float, float]:
        info = np.iinfo(_NP_DTYPES[dtype])
        s, z = quant
        return s * (info.min - z), s * (info.max - z)

    def range_of(self, t: TensorRef) -> tuple[float, float]:
        """The builder's estimate of the float range of ``t`` (used to pick output quantization)."""
        return self._ranges.get(t.index, (-1.0, 1.0))

    def input(
        self,
        shape: Sequence[int],
        dtype: str = "float32",
        quant: tuple[float, int] | None = None,
        value_range: tuple[float, float] = (-1.0, 1.0),
        name: str | None = None,
    ) -> TensorRef:
        """A model input. An int8 input uses ``quant`` or, if None, one covering ``value_range``."""
        if dtype != "float32" and quant is None:
            quant = quantize_params(*value_range, dtype=dtype)
        ref = self._activation(name or "input", shape, dtype, quant,
                               value_range if dtype == "float32" else None)
        if name is not None:
            self._tensors[ref.index].name = name
        self._inputs.append(ref.index)
        return ref

    def constant(
        self,
        values: np.ndarray,
        dtype: str,
        quant: tuple[float, int] | None = None,
        name: str | None = None,
    ) -> TensorRef:
        """A constant tensor from float ``values``; an int8 one is quantized (``quant`` or min/max)."""
        values = np.asarray(values)
        if dtype in ("float32", "int32") and quant is None:
            ref = self._add_tensor(name or self._name("const"), values.shape, dtype, data=values)
        else:
            if quant is None:
                quant = quantize_params(float(values.min()), float(values.max()), dtype)
            q = quantize_array(values, quant[0], quant[1], dtype)
            ref = self._add_tensor(name or self._name("const"), values.shape, dtype, data=q,
                                   scale=[quant[0]], zero_point=[quant[1]])
        self.float_values[ref.index] = values.astype(np.float64)
        self._ranges[ref.index] = (float(values.min()), float(values.max()))
        return ref

    def output(self, t: TensorRef) -> TensorRef:
        """Mark ``t`` as a model output (in call order)."""
        self._outputs.append(t.index)
        return t

    # -- weights --------------------------------------------------------------------------------

    def _weights(
        self, stem: str, w: np.ndarray, x: TensorRef, per_channel: bool, channel_axis: int,
    ) -> tuple[TensorRef, np.ndarray]:
        """Store float weights ``w`` for input ``x``; returns (tensor, effective float weights)."""
        if x.dtype == "float32":
            ref = self._add_tensor(f"{stem}/weights", w.shape, "float32", data=w)
            self.float_values[ref.index] = w.astype(np.float64)
            return ref, w.astype(np.float64)
        scales = symmetric_scales(w, channel_axis if per_channel else None)
        q = quantize_array(w, scales, 0, "int8", axis=channel_axis)
        q = np.clip(q, -127, 127).astype(np.int8)
        ref = self._add_tensor(f"{stem}/weights", w.shape, "int8", data=q, scale=scales.tolist(),
                               zero_point=[0] * scales.size,
                               quantized_dimension=channel_axis if per_channel else 0)
        self.float_values[ref.index] = w.astype(np.float64)
        return ref, dequantize_array(q, scales, 0, axis=channel_axis)

    def _bias(self, stem: str, b: np.ndarray, x: TensorRef, w: TensorRef) -> TensorRef:
        if x.dtype == "float32":
            ref = self._add_tensor(f"{stem}/bias", b.shape, "float32", data=b)
        else:
            assert x.scale is not None and w.scale is not None
            scales = np.float64(x.scale[0]) * np.asarray(w.scale, dtype=np.float64)
            scales = scales.astype(np.float32)
            q = np.round(b / np.broadcast_to(scales.astype(np.float64), b.shape))
            q = np.clip(q, -(2**31) + 1, 2**31 - 1).astype(np.int32)
            ref = self._add_tensor(f"{stem}/bias", b.shape, "int32", data=q,
                                   scale=scales.tolist(), zero_point=[0] * scales.size)
        self.float_values[ref.index] = b.astype(np.float64)
        return ref

    def _random_weights(self, shape: Sequence[int], fan_in: int) -> np.ndarray:
        bound = math.sqrt(3.0 / max(fan_in, 1))
        return self.rng.uniform(-bound, bound, size=tuple(shape)).astype(np.float32)

    def _random_bias(self, n: int) -> np.ndarray:
        return self.rng.uniform(-0.3, 0.3, size=(n,)).astype(np.float32)

    def _out_quant(
        self, x: TensorRef, out_quant: tuple[float, int] | None, lo: float, hi: float,
        activation: str,
    ) -> tuple[tuple[float, int] | None, tuple[float, float]]:
        lo, hi = _act_range(lo, hi, activation)
        if x.dtype == "float32":
            return None, (lo, hi)
        if out_quant is None:
            out_quant = quantize_params(lo, hi, x.dtype)
        return out_quant, (lo, hi)

    def _linear_range(
        self, x: TensorRef, w_eff: np.ndarray, bias: np.ndarray | None, channel_axis: int,
    ) -> tuple[float, float]:
        """Mean +- 3 sigma of ``sum(w * x) + b`` per channel for x uniform over its range."""
        lo, hi = self.range_of(x)
        mean_x = (lo + hi) / 2.0
        var_x = (hi - lo) ** 2 / 12.0
        w = np.moveaxis(w_eff, channel_axis, 0).reshape(w_eff.shape[channel_axis], -1)
        mean = mean_x * w.sum(axis=1)
        std = np.sqrt(var_x * (w**2).sum(axis=1))
        if bias is not None:
            mean = mean + bias.astype(np.float64)
        return float((mean - 3 * std).min()), float((mean + 3 * std).max())

    # -- operators ----------------------------------------------------------------------------

    def _op(self, opcode: str, inputs: list[int], outputs: list[int], options_name: str | None,
            num_fields: int = 0, fields: list[tuple[int, str, Any, Any]] | None = None) -> None:
        self._ops.append(_OpSpec(opcode, inputs, outputs, options_name, fields or [], num_fields))

    def conv2d(
        self,
        x: TensorRef,
        filters: int | np.ndarray,
        kernel_size: int | Sequence[int] = 3,
        bias: bool | np.ndarray = True,
        stride: int | Sequence[int] = 1,
        padding: str = "SAME",
        dilation: int | Sequence[int] = 1,
        activation: str = "NONE",
        per_channel: bool | None = None,
        out_quant: tuple[float, int] | None = None,
    ) -> TensorRef:
        """CONV_2D over NHWC ``x``. ``filters``: output channels, or float weights [O, KH, KW, I]."""
        _check_choice(padding, PADDINGS, "padding")
        _check_choice(activation, ACTIVATIONS, "activation")
        c = x.shape[3]
        if isinstance(filters, np.ndarray):
            w = filters.astype(np.float32)
            if w.ndim != 4 or w.shape[3] != c:
                raise ValueError(f"conv2d weights must be [O, KH, KW, {c}], got {w.shape}")
        else:
            kh, kw = _pair(kernel_size)
            w = self._random_weights((int(filters), kh, kw, c), kh * kw * c)
        y, inputs = self._windowed("conv2d", x, w, 0, bias, stride, padding, dilation,
                                   activation, per_channel, out_quant)
        sh, sw = _pair(stride)
        dh, dw = _pair(dilation)
        self._op("CONV_2D", inputs, [y.index], "Conv2DOptions", 7, [
            (0, "i8", PADDINGS[padding], 0), (1, "i32", sw, 0), (2, "i32", sh, 0),
            (3, "i8", ACTIVATIONS[activation], 0), (4, "i32", dw, 1), (5, "i32", dh, 1),
        ])
        return y

    def _windowed(
        self,
        stem_prefix: str,
        x: TensorRef,
        w: np.ndarray,
        axis: int,
        bias: bool | np.ndarray,
        stride: int | Sequence[int],
        padding: str,
        dilation: int | Sequence[int],
        activation: str,
        per_channel: bool | None,
        out_quant: tuple[float, int] | None,
    ) -> tuple[TensorRef, list[int]]:
        """Weights, bias and NHWC output of CONV_2D (``axis`` 0) or DEPTHWISE_CONV_2D (``axis``
        3: the output channel axis of ``w``, also its per-channel quantization axis); returns the
        output and the op's input indices."""
        n, h, wd, _ = x.shape
        _, kh, kw, _ = w.shape
        o = w.shape[axis]
        sh, sw = _pair(stride)
        dh, dw = _pair(dilation)
        stem = self._name(stem_prefix)
        pc = self.per_channel if per_channel is None else per_channel
        wref, w_eff = self._weights(stem, w, x, pc, axis)
        b = self._bias_values(bias, o)
        oh = _out_size(h, kh, sh, dh, padding)
        ow = _out_size(wd, kw, sw, dw, padding)
        lo, hi = self._linear_range(x, w_eff, b, axis)
        q, est = self._out_quant(x, out_quant, lo, hi, activation)
        inputs = [x.index, wref.index]
        if b is not None:
            inputs.append(self._bias(stem, b, x, wref).index)
        y = self._activation(stem, (n, oh, ow, o), x.dtype, q, est)
        return y, inputs

    def _bias_values(self, bias: bool | np.ndarray, n: int) -> np.ndarray | None:
        if isinstance(bias, np.ndarray):
            if bias.shape != (n,):
                raise ValueError(f"bias must have shape ({n},), got {bias.shape}")
            return bias.astype(np.float32)
        return self._random_bias(n) if bias else None

    def depthwise_conv2d(
        self,
        x: TensorRef,
        kernel_size: int | Sequence[int] = 3,
        depth_multiplier: int = 1,
        weights: np.ndarray | None = None,
        bias: bool | np.ndarray = True,
        stride: int | Sequence[int] = 1,
        padding: str = "SAME",
        dilation: int | Sequence[int] = 1,
        activation: str = "NONE",
        per_channel: bool | None = None,
        out_quant: tuple[float, int] | None = None,
    ) -> TensorRef:
        """DEPTHWISE_CONV_2D; ``weights`` (float, [1, KH, KW, C * depth_multiplier]) or generated."""
        _check_choice(padding, PADDINGS, "padding")
        _check_choice(activation, ACTIVATIONS, "activation")
        c = x.shape[3]
        oc = c * depth_multiplier
        if weights is not None:
            w = weights.astype(np.float32)
            if w.ndim != 4 or w.shape[0] != 1 or w.shape[3] != oc:
                raise ValueError(f"depthwise weights must be [1, KH, KW, {oc}], got {w.shape}")
        else:
            kh, kw = _pair(kernel_size)
            w = self._random_weights((1, kh, kw, oc), kh * kw)
        y, inputs = self._windowed("depthwise_conv2d", x, w, 3, bias, stride, padding, dilation,
                                   activation, per_channel, out_quant)
        sh, sw = _pair(stride)
        dh, dw = _pair(dilation)
        self._op("DEPTHWISE_CONV_2D", inputs, [y.index], "DepthwiseConv2DOptions", 7, [
            (0, "i8", PADDINGS[padding], 0), (1, "i32", sw, 0), (2, "i32", sh, 0),
            (3, "i32", depth_multiplier, 0), (4, "i8", ACTIVATIONS[activation], 0),
            (5, "i32", dw, 1), (6, "i32", dh, 1),
        ])
        return y

    def fully_connected(
        self,
        x: TensorRef,
        units: int | np.ndarray,
        bias: bool | np.ndarray = True,
        activation: str = "NONE",
        keep_num_dims: bool = False,
        per_channel: bool | None = None,
        out_quant: tuple[float, int] | None = None,
    ) -> TensorRef:
        """FULLY_CONNECTED: ``units`` outputs, or float weights [units, last dim of x]."""
        _check_choice(activation, ACTIVATIONS, "activation")
        depth = x.shape[-1]
        if isinstance(units, np.ndarray):
            w = units.astype(np.float32)
            if w.ndim != 2 or w.shape[1] != depth:
                raise ValueError(f"fully_connected weights must be [units, {depth}], got {w.shape}")
        else:
            w = self._random_weights((int(units), depth), depth)
        nu = w.shape[0]
        stem = self._name("fully_connected")
        pc = self.per_channel if per_channel is None else per_channel
        wref, w_eff = self._weights(stem, w, x, pc, 0)
        b = self._bias_values(bias, nu)
        lo, hi = self._linear_range(x, w_eff, b, 0)
        q, est = self._out_quant(x, out_quant, lo, hi, activation)
        inputs = [x.index, wref.index, -1]
        if b is not None:
            inputs[2] = self._bias(stem, b, x, wref).index
        batch = int(np.prod(x.shape)) // depth
        shape = (*x.shape[:-1], nu) if keep_num_dims else (batch, nu)
        y = self._activation(stem, shape, x.dtype, q, est)
        self._op("FULLY_CONNECTED", inputs, [y.index], "FullyConnectedOptions", 5, [
            (0, "i8", ACTIVATIONS[activation], 0), (2, "bool", bool(keep_num_dims), False),
        ])
        return y

    def _pool(self, opcode: str, x: TensorRef, filter_size: int | Sequence[int],
              stride: int | Sequence[int] | None, padding: str, activation: str) -> TensorRef:
        _check_choice(padding, PADDINGS, "padding")
        _check_choice(activation, ACTIVATIONS, "activation")
        n, h, wd, c = x.shape
        fh, fw = _pair(filter_size)
        sh, sw = _pair(filter_size if stride is None else stride)
        oh = _out_size(h, fh, sh, 1, padding)
        ow = _out_size(wd, fw, sw, 1, padding)
        est = _act_range(*self.range_of(x), activation)
        y = self._activation(opcode.lower(), (n, oh, ow, c), x.dtype, x.quant, est)
        self._op(opcode, [x.index], [y.index], "Pool2DOptions", 6, [
            (0, "i8", PADDINGS[padding], 0), (1, "i32", sw, 0), (2, "i32", sh, 0),
            (3, "i32", fw, 0), (4, "i32", fh, 0), (5, "i8", ACTIVATIONS[activation], 0),
        ])
        return y

    def average_pool2d(self, x: TensorRef, filter_size: int | Sequence[int] = 2,
                       stride: int | Sequence[int] | None = None, padding: str = "VALID",
                       activation: str = "NONE") -> TensorRef:
        """AVERAGE_POOL_2D (int8 output keeps the input's quantization, as TFLite requires)."""
        return self._pool("AVERAGE_POOL_2D", x, filter_size, stride, padding, activation)

    def max_pool2d(self, x: TensorRef, filter_size: int | Sequence[int] = 2,
                   stride: int | Sequence[int] | None = None, padding: str = "VALID",
                   activation: str = "NONE") -> TensorRef:
        """MAX_POOL_2D (int8 output keeps the input's quantization)."""
        return self._pool("MAX_POOL_2D", x, filter_size, stride, padding, activation)

    def _operand(self, b: TensorRef | np.ndarray, like: TensorRef) -> TensorRef:
        if isinstance(b, TensorRef):
            return b
        return self.constant(np.asarray(b, dtype=np.float32), like.dtype)

    def _binary(self, opcode: str, a: TensorRef, b: TensorRef | np.ndarray, activation: str,
                out_quant: tuple[float, int] | None) -> TensorRef:
        _check_choice(activation, ACTIVATIONS, "activation")
        b = self._operand(b, a)
        if a.dtype != b.dtype:
            raise ValueError(f"{opcode}: operand types differ ({a.dtype} and {b.dtype})")
        shape = tuple(np.broadcast_shapes(a.shape, b.shape))
        (alo, ahi), (blo, bhi) = self.range_of(a), self.range_of(b)
        if opcode == "ADD":
            lo, hi = alo + blo, ahi + bhi
        else:
            corners = [alo * blo, alo * bhi, ahi * blo, ahi * bhi]
            lo, hi = min(corners), max(corners)
        q, est = self._out_quant(a, out_quant, lo, hi, activation)
        y = self._activation(opcode.lower(), shape, a.dtype, q, est)
        if opcode == "ADD":
            self._op("ADD", [a.index, b.index], [y.index], "AddOptions", 2,
                     [(0, "i8", ACTIVATIONS[activation], 0)])
        else:
            self._op("MUL", [a.index, b.index], [y.index], "MulOptions", 1,
                     [(0, "i8", ACTIVATIONS[activation], 0)])
        return y

    def add(self, a: TensorRef, b: TensorRef | np.ndarray, activation: str = "NONE",
            out_quant: tuple[float, int] | None = None) -> TensorRef:
        """ADD with numpy broadcasting; ``b`` may be a float array (made a constant)."""
        return self._binary("ADD", a, b, activation, out_quant)

    def mul(self, a: TensorRef, b: TensorRef | np.ndarray, activation: str = "NONE",
            out_quant: tuple[float, int] | None = None) -> TensorRef:
        """MUL with numpy broadcasting; ``b`` may be a float array (made a constant)."""
        return self._binary("MUL", a, b, activation, out_quant)

    def reshape(self, x: TensorRef, shape: Sequence[int], shape_input: bool = True) -> TensorRef:
        """RESHAPE to ``shape`` (one -1 allowed), given as a shape tensor and in the options."""
        new = [int(d) for d in shape]
        size = int(np.prod(x.shape))
        if new.count(-1) > 1:
            raise ValueError("reshape: at most one -1")
        if -1 in new:
            known = int(np.prod([d for d in new if d != -1]))
            new[new.index(-1)] = size // known
        if int(np.prod(new)) != size:
            raise ValueError(f"reshape: cannot reshape {x.shape} to {tuple(shape)}")
        inputs = [x.index]
        if shape_input:
            inputs.append(self._add_tensor(self._name("reshape/shape"), (len(new),), "int32",
                                           data=np.asarray(shape, dtype=np.int32)).index)
        y = self._activation("reshape", new, x.dtype, x.quant, self.range_of(x))
        self._op("RESHAPE", inputs, [y.index], "ReshapeOptions", 1,
                 [(0, "ivec", np.asarray(shape, dtype=np.int32), None)])
        return y

    def softmax(self, x: TensorRef, beta: float = 1.0) -> TensorRef:
        """SOFTMAX; an int8 output uses scale 1/256 and zero point -128, as TFLite requires."""
        q = (1.0 / 256.0, -128) if x.dtype == "int8" else None
        y = self._activation("softmax", x.shape, x.dtype, q, (0.0, 1.0))
        self._op("SOFTMAX", [x.index], [y.index], "SoftmaxOptions", 1,
                 [(0, "f32", float(beta), 0.0)])
        return y

    def quantize(self, x: TensorRef, quant: tuple[float, int] | None = None,
                 dtype: str = "int8") -> TensorRef:
        """QUANTIZE float32 -> int8, or requantize int8 -> int8 (``quant`` or from the range)."""
        if quant is None:
            quant = quantize_params(*self.range_of(x), dtype=dtype)
        y = self._activation("quantize", x.shape, dtype, quant)
        self._op("QUANTIZE", [x.index], [y.index], "QuantizeOptions", 0)
        return y

    def dequantize(self, x: TensorRef) -> TensorRef:
        """DEQUANTIZE int8 -> float32."""
        y = self._activation("dequantize", x.shape, "float32", None, self.range_of(x))
        self._op("DEQUANTIZE", [x.index], [y.index], "DequantizeOptions", 0)
        return y

    def single_op(
        self,
        op: str,
        dtype: str = "int8",
        input_shape: Sequence[int] | None = None,
        name: str = "input",
        value_range: tuple[float, float] | None = None,
        **options: Any,
    ) -> TensorRef:
        """A new model input named ``name`` feeding one operator ``op``; returns its output.

        The input's float range (hence an int8 input's scale and zero point) is ``value_range``
        or drawn from the builder's generator. ``options`` go to the operator's method, plus:
        ADD/MUL ``b_shape`` (shape of the second operand, default the input's), ``b_input``
        (True: the second operand is another model input, ``name + "_b"``; False: a constant)
        and ``b_range`` (the second input's float range, default drawn). QUANTIZE with a
        float32 ``dtype`` quantizes to int8, with int8 it requantizes (``quant`` defaults to a
        range different from the input's). DEQUANTIZE needs ``dtype="int8"``.
        """
        _check_choice(op, BUILTIN_OPS, "operator")
        if op == "DEQUANTIZE" and dtype != "int8":
            raise ValueError("DEQUANTIZE takes an int8 input: use dtype 'int8'")
        shape = tuple(input_shape or _DEFAULT_SHAPES[op])
        drawn = (-float(self.rng.uniform(0.2, 3.0)), float(self.rng.uniform(0.2, 3.0)))
        value_range = drawn if value_range is None else value_range
        x = self.input(shape, dtype, value_range=value_range, name=name)
        if op == "CONV_2D":
            return self.conv2d(x, options.pop("filters", 4), **options)
        if op == "DEPTHWISE_CONV_2D":
            return self.depthwise_conv2d(x, **options)
        if op == "FULLY_CONNECTED":
            return self.fully_connected(x, options.pop("units", 5), **options)
        if op == "AVERAGE_POOL_2D":
            return self.average_pool2d(x, **options)
        if op == "MAX_POOL_2D":
            return self.max_pool2d(x, **options)
        if op in ("ADD", "MUL"):
            b_shape = tuple(options.pop("b_shape", shape))
            b_drawn = (-float(self.rng.uniform(0.2, 3.0)), float(self.rng.uniform(0.2, 3.0)))
            b_range = options.pop("b_range", None) or b_drawn
            if options.pop("b_input", True):
                b: TensorRef | np.ndarray = self.input(b_shape, dtype, value_range=b_range,
                                                       name=f"{name}_b")
            else:
                b = self.rng.uniform(-2.0, 2.0, size=b_shape).astype(np.float32)
            return self.add(x, b, **options) if op == "ADD" else self.mul(x, b, **options)
        if op == "RESHAPE":
            return self.reshape(x, options.pop("shape", (1, -1)), **options)
        if op == "SOFTMAX":
            return self.softmax(x, **options)
        if op == "QUANTIZE":
            if "quant" not in options:
                lo, hi = value_range
                options["quant"] = quantize_params(lo * float(self.rng.uniform(0.5, 1.5)),
                                                   hi * float(self.rng.uniform(0.5, 1.5)))
            return self.quantize(x, **options)
        return self.dequantize(x, **options)

    # -- serialization ------------------------------------------------------------------------

    def build(self) -> bytes:
        """Serialize the model as a TFLite flatbuffer (schema version 3, identifier ``TFL3``)."""
        if not self._inputs or not self._outputs:
            raise ValueError("a model needs at least one input() and one output()")
        b = flatbuffers.Builder(1024)

        buffer_offsets = []
        for data in self._buffers:
            data_off = _byte_vector(b, data, _BUFFER_ALIGNMENT_BYTES) if data else None
            b.StartObject(3)
            if data_off is not None:
                b.PrependUOffsetTRelativeSlot(0, data_off, 0)
            buffer_offsets.append(b.EndObject())

        tensor_offsets = []
        for t in self._tensors:
            shape_off = b.CreateNumpyVector(np.asarray(t.shape, dtype=np.int32))
            name_off = b.CreateString(t.name)
            quant_off = None
            if t.scale is not None:
                scale_off = b.CreateNumpyVector(np.asarray(t.scale, dtype=np.float32))
                zp_off = b.CreateNumpyVector(np.asarray(t.zero_point, dtype=np.int64))
                b.StartObject(7)
                b.PrependUOffsetTRelativeSlot(2, scale_off, 0)
                b.PrependUOffsetTRelativeSlot(3, zp_off, 0)
                b.PrependInt32Slot(6, t.quantized_dimension, 0)
                quant_off = b.EndObject()
            b.StartObject(10)
            b.PrependUOffsetTRelativeSlot(0, shape_off, 0)
            b.PrependInt8Slot(1, TENSOR_TYPES[t.dtype], 0)
            b.PrependUint32Slot(2, t.buffer, 0)
            b.PrependUOffsetTRelativeSlot(3, name_off, 0)
            if quant_off is not None:
                b.PrependUOffsetTRelativeSlot(4, quant_off, 0)
            tensor_offsets.append(b.EndObject())

        opcodes: list[str] = []
        op_offsets = []
        for op in self._ops:
            if op.opcode not in opcodes:
                opcodes.append(op.opcode)
            in_off = b.CreateNumpyVector(np.asarray(op.inputs, dtype=np.int32))
            out_off = b.CreateNumpyVector(np.asarray(op.outputs, dtype=np.int32))
            options_off = _options_table(b, op) if op.options_name else None
            b.StartObject(14)
            b.PrependUint32Slot(0, opcodes.index(op.opcode), 0)
            b.PrependUOffsetTRelativeSlot(1, in_off, 0)
            b.PrependUOffsetTRelativeSlot(2, out_off, 0)
            if options_off is not None:
                b.PrependUint8Slot(3, BUILTIN_OPTIONS[op.options_name], 0)
                b.PrependUOffsetTRelativeSlot(4, options_off, 0)
            op_offsets.append(b.EndObject())

        tensors_vec = _table_vector(b, tensor_offsets)
        inputs_vec = b.CreateNumpyVector(np.asarray(self._inputs, dtype=np.int32))
        outputs_vec = b.CreateNumpyVector(np.asarray(self._outputs, dtype=np.int32))
        ops_vec = _table_vector(b, op_offsets)
        sg_name = b.CreateString("main")
        b.StartObject(6)
        b.PrependUOffsetTRelativeSlot(0, tensors_vec, 0)
        b.PrependUOffsetTRelativeSlot(1, inputs_vec, 0)
        b.PrependUOffsetTRelativeSlot(2, outputs_vec, 0)
        b.PrependUOffsetTRelativeSlot(3, ops_vec, 0)
        b.PrependUOffsetTRelativeSlot(4, sg_name, 0)
        subgraph = b.EndObject()

        code_offsets = []
        for name in opcodes:
            code = BUILTIN_OPS[name]
            b.StartObject(4)
            b.PrependInt8Slot(0, min(code, 127), 0)
            b.PrependInt32Slot(2, 1, 1)
            b.PrependInt32Slot(3, code, 0)
            code_offsets.append(b.EndObject())

        codes_vec = _table_vector(b, code_offsets)
        subgraphs_vec = _table_vector(b, [subgraph])
        desc = b.CreateString(self.description)
        buffers_vec = _table_vector(b, buffer_offsets)
        b.StartObject(8)
        b.PrependUint32Slot(0, _SCHEMA_VERSION, 0)
        b.PrependUOffsetTRelativeSlot(1, codes_vec, 0)
        b.PrependUOffsetTRelativeSlot(2, subgraphs_vec, 0)
        b.PrependUOffsetTRelativeSlot(3, desc, 0)
        b.PrependUOffsetTRelativeSlot(4, buffers_vec, 0)
        model = b.EndObject()
        b.Finish(model, file_identifier=_FILE_IDENTIFIER)
        return bytes(b.Output())


def _byte_vector(b: flatbuffers.Builder, data: bytes, alignment: int) -> int:
    b.StartVector(1, len(data), alignment)
    b.head = b.head - len(data)
    b.Bytes[b.head:b.head + len(data)] = data
    return b.EndVector()


def _table_vector(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()


_PREPEND = {
    "i8": "PrependInt8Slot", "i32": "PrependInt32Slot", "bool": "PrependBoolSlot",
    "f32": "PrependFloat32Slot",
}


def _options_table(b: flatbuffers.Builder, op: _OpSpec) -> int:
    vectors = {slot: b.CreateNumpyVector(value) for slot, kind, value, _ in op.options_fields
               if kind == "ivec"}
    b.StartObject(op.options_num_fields)
    for slot, kind, value, default in op.options_fields:
        if kind == "ivec":
            b.PrependUOffsetTRelativeSlot(slot, vectors[slot], 0)
        else:
            getattr(b, _PREPEND[kind])(slot, value, default)
    return b.EndObject()


def demo_model(seed: int = 0) -> bytes:
    """The demo network: int8, input 1x16x16x1 -> 10 class probabilities.

    CONV_2D 3x3 (8 channels, RELU) -> DEPTHWISE_CONV_2D 3x3 (RELU6) -> ADD (residual with the
    conv output) -> AVERAGE_POOL_2D 4x4 -> RESHAPE [1, 128] -> FULLY_CONNECTED 10 -> SOFTMAX.
    Weights are per-channel int8 drawn from ``numpy.random.default_rng(seed)``.
    """
    mb = ModelBuilder(seed=seed, per_channel=True, description="project-api demo model")
    x = mb.input((1, 16, 16, 1), "int8", value_range=(-1.0, 1.0), name="input")
    c = mb.conv2d(x, filters=8, kernel_size=3, activation="RELU")
    d = mb.depthwise_conv2d(c, kernel_size=3, activation="RELU6")
    s = mb.add(c, d)
    p = mb.average_pool2d(s, filter_size=4, stride=4)
    r = mb.reshape(p, (1, 128))
    f = mb.fully_connected(r, 10)
    mb.output(mb.softmax(f))
    return mb.build()


def resnet8_like_model(seed: int = 0) -> bytes:
    """A network with the topology of MLPerf Tiny's image-classification ResNet-8 (int8,
    1x32x32x3 -> 10): CONV_2D 3x3 16 -> three residual stages of 16, 32 and 64 channels (the last
    two stride 2 with a 1x1 shortcut), AVERAGE_POOL_2D 8x8, FULLY_CONNECTED 10, SOFTMAX. Random
    per-channel weights from ``seed``: a stand-in for the real model's shapes and arithmetic
    (its trained weights are a third-party file that is not shipped here)."""
    mb = ModelBuilder(seed=seed, per_channel=True, description="resnet8-like")
    x = mb.input((1, 32, 32, 3), "int8", name="input")
    y = mb.conv2d(x, 16, 3, activation="RELU")
    for filters, stride in ((16, 1), (32, 2), (64, 2)):
        z = mb.conv2d(y, filters, 3, stride=stride, activation="RELU")
        z = mb.conv2d(z, filters, 3)
        short = y if stride == 1 else mb.conv2d(y, filters, 1, stride=stride)
        y = mb.add(z, short, activation="RELU")
    y = mb.average_pool2d(y, 8, stride=8)
    y = mb.reshape(y, (1, 64))
    mb.output(mb.softmax(mb.fully_connected(y, 10)))
    return mb.build()


#: Weight/activation types of :func:`single_op_model`.
MODES = ("int8", "int8_per_channel", "float32")

_DEFAULT_SHAPES: dict[str, tuple[int, ...]] = {
    "CONV_2D": (1, 9, 9, 3), "DEPTHWISE_CONV_2D": (1, 9, 9, 3), "FULLY_CONNECTED": (1, 12),
    "AVERAGE_POOL_2D": (1, 8, 8, 3), "MAX_POOL_2D": (1, 8, 8, 3), "ADD": (1, 4, 4, 3),
    "MUL": (1, 4, 4, 3), "RESHAPE": (1, 4, 4, 3), "SOFTMAX": (1, 10), "QUANTIZE": (1, 4, 4, 3),
    "DEQUANTIZE": (1, 4, 4, 3),
}


def single_op_model(
    op: str,
    mode: str = "int8",
    seed: int = 0,
    input_shape: Sequence[int] | None = None,
    **options: Any,
) -> bytes:
    """A model made of one operator ``op`` (a :data:`BUILTIN_OPS` name) with ``options``.

    ``mode`` is one of :data:`MODES`; int8 weights are per-channel in "int8_per_channel". The
    input range (hence an int8 input's scale and zero point) and every weight are drawn from
    ``seed``. See :meth:`ModelBuilder.single_op` for ``options``.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {list(MODES)}")
    mb = ModelBuilder(seed=seed, per_channel=mode == "int8_per_channel",
                      description=f"{op} {mode} seed {seed}")
    dtype = "float32" if mode == "float32" else "int8"
    mb.output(mb.single_op(op, dtype, input_shape, **options))
    return mb.build()

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

Types (``mode`` of :func:`single_op_model`, the ``dtype`` of the inputs): ``float32`` models;
``int8`` models quantized the TFLite way: activations are asymmetric int8 per tensor, weights
symmetric int8 per tensor or per output channel (``per_channel=True``), biases int32 with
``scale = input_scale * weight_scale`` and zero point 0; and ``int16`` ("16x8") models as
TFLite's converter writes them: activations symmetric int16 (zero point 0), weights symmetric
int8, biases int64 (``bias_dtype="int32"`` for the int32 form TFLM also takes), ADD with
``pot_scale_int16`` false. Weights not given explicitly come from the builder's seeded
``numpy.random.Generator``, so a seed always gives the same bytes. Output quantization of a
quantized operator is taken from ``out_quant=(scale, zero_point)`` when given, else from a
statistical estimate of its float range (mean +- 3 standard deviations for a uniformly
distributed input, clipped by the activation).

Every table is written from :mod:`.schema`'s field lists (:func:`write_table`): an operator's
options are a dict of its options table's field names (``{"stride_w": 2, "padding": "SAME"}``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import flatbuffers
import numpy as np
from flatbuffers import flexbuffers

from . import schema, signal_tables

__all__ = [
    "ACTIVATIONS",
    "BUILTIN_OPS",
    "BUILTIN_OPTIONS",
    "MODES",
    "SINGLE_OPS",
    "ModelBuilder",
    "PADDINGS",
    "Ref",
    "TENSOR_TYPES",
    "TensorRef",
    "demo_model",
    "dequantize_array",
    "mode_dtype",
    "quantize_array",
    "quantize_params",
    "single_op_model",
    "symmetric_scales",
    "write_table",
]

# --- schema facts (all from .schema) ----------------------------------------------------------

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

_SCHEMA_VERSION = 3
#: Operator versions as TFLite's converter writes them where a runtime refuses version 1
#: (LiteRT registers BROADCAST_TO from version 2); every other operator is written as 1.
_OPCODE_VERSIONS = {"BROADCAST_TO": 2}
_FILE_IDENTIFIER = b"TFL3"
_BUFFER_ALIGNMENT_BYTES = 16


# --- quantization helpers -----------------------------------------------------------------------


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
    is_variable: bool = False


@dataclass
class _OpSpec:
    opcode: str
    inputs: list[int]
    outputs: list[int]
    options: dict[str, Any] = field(default_factory=dict)  # fields of its options table
    custom_code: str | None = None  # a custom operator's name (opcode "CUSTOM")
    custom_options: bytes | None = None


@dataclass
class _Shared:
    """What the subgraphs of one model share: the buffers and the subgraph list."""

    buffers: list[bytes]
    subgraphs: list[ModelBuilder]
    description: str


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
                 description: str = "project-api builder", *, _shared: _Shared | None = None,
                 _rng: np.random.Generator | None = None, name: str = "main"):
        self.rng = _rng if _rng is not None else np.random.default_rng(seed)
        self.per_channel = per_channel
        self._shared = _shared or _Shared([b""], [], description)
        #: This subgraph's index in the model (0: the main one) and its name.
        self.index = len(self._shared.subgraphs)
        self.name = name
        self._shared.subgraphs.append(self)
        self._tensors: list[_TensorSpec] = []
        self._buffers = self._shared.buffers
        self._ops: list[_OpSpec] = []
        self._inputs: list[int] = []
        self._outputs: list[int] = []
        self._ranges: dict[int, tuple[float, float]] = {}
        #: Float values of every constant (weights as generated, before quantization), by index.
        self.float_values: dict[int, np.ndarray] = {}
        #: Stored values of every constant (quantized for int8 models), by tensor index.
        self.values: dict[int, np.ndarray] = {}
        self._counter = 0

    @property
    def description(self) -> str:
        return self._shared.description

    def subgraph(self, name: str) -> ModelBuilder:
        """A new subgraph of the same model (for IF/WHILE/CALL_ONCE bodies), built with the same
        methods; its :attr:`index` is what those operators' options refer to. ``build()`` on
        any subgraph writes the whole model."""
        return ModelBuilder(per_channel=self.per_channel, _shared=self._shared, _rng=self.rng,
                            name=name)

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
        if dtype == "float32" or (quant is None and dtype not in _QUANTIZED):
            ref = self._add_tensor(self._name(stem), shape, dtype)
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
        plain: bool = False,
    ) -> TensorRef:
        """A model input. An int8 or int16 input uses ``quant`` or, if None, one covering
        ``value_range`` (int16: symmetric); other integer types are plain values, and so is an
        int8 or int16 one with ``plain``."""
        if plain:
            ref = self._add_tensor(name or self._name("input"), shape, dtype)
            self._ranges[ref.index] = value_range
        else:
            if dtype in _QUANTIZED and quant is None:
                quant = quantize_params(*value_range, dtype=dtype)
            ref = self._activation(name or "input", shape, dtype, quant,
                                   None if quant is not None else value_range)
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
        """A constant tensor from float ``values``; an int8/int16 one is quantized (``quant`` or
        min/max; int16 symmetric)."""
        values = np.asarray(values)
        if dtype not in _QUANTIZED and quant is None:
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

    def output(self, t: TensorRef, name: str | None = None) -> TensorRef:
        """Mark ``t`` as a model output (in call order); ``name`` renames its tensor."""
        if name is not None:
            self._tensors[t.index].name = name
        self._outputs.append(t.index)
        return t

    def variable(self, shape: Sequence[int], dtype: str = "float32",
                 quant: tuple[float, int] | None = None, name: str | None = None,
                 initial: np.ndarray | None = None) -> TensorRef:
        """A variable tensor (``is_variable``: state kept across invocations), zero at start
        unless ``initial`` (stored values) is given."""
        if dtype in _QUANTIZED and quant is None:
            raise ValueError(f"a {dtype} variable needs quantization parameters")
        ref = self._add_tensor(name or self._name("variable"), shape, dtype, data=initial,
                               scale=None if quant is None else [quant[0]],
                               zero_point=None if quant is None else [quant[1]])
        self._tensors[ref.index].is_variable = True
        if quant is not None:
            self._ranges[ref.index] = self._quant_range(dtype, quant)
        return ref

    # -- state and control flow (issue 20, state family) --------------------------------------

    def var_handle(self, shared_name: str, container: str | None = None) -> TensorRef:
        """VAR_HANDLE: a resource tensor naming the variable ``(container, shared_name)``."""
        ref = self._add_tensor(self._name("var_handle"), (), "resource")
        options: dict[str, Any] = {"shared_name": shared_name}
        if container is not None:
            options["container"] = container
        self._op("VAR_HANDLE", [], [ref.index], options)
        return ref

    def read_variable(self, handle: TensorRef, shape: Sequence[int], dtype: str = "float32",
                      quant: tuple[float, int] | None = None) -> TensorRef:
        """READ_VARIABLE of the variable ``handle`` names, a ``dtype`` tensor of ``shape``."""
        y = self._activation("read_variable", shape, dtype, quant)
        self._op("READ_VARIABLE", [handle.index], [y.index])
        return y

    def assign_variable(self, handle: TensorRef, value: TensorRef) -> None:
        """ASSIGN_VARIABLE: ``value`` (an activation or a constant) into the variable."""
        self._op("ASSIGN_VARIABLE", [handle.index, value.index], [])

    def call_once(self, init: ModelBuilder) -> None:
        """CALL_ONCE of subgraph ``init`` (from :meth:`subgraph`; no inputs)."""
        self._op("CALL_ONCE", [], [], {"init_subgraph_index": init.index})

    def _result_like(self, sg: ModelBuilder, index: int) -> TensorRef:
        """A new activation of this subgraph shaped, typed and quantized as ``sg``'s tensor."""
        t = sg._tensors[index]
        quant = (t.scale[0], t.zero_point[0]) if t.scale and t.zero_point else None
        return self._activation("result", t.shape, t.dtype, quant, sg._ranges.get(index))

    def if_(self, cond: TensorRef, then: ModelBuilder, orelse: ModelBuilder,
            inputs: Sequence[TensorRef]) -> list[TensorRef]:
        """IF on bool ``cond`` (one element): subgraph ``then`` or ``orelse`` on ``inputs``;
        the outputs take the then branch's shapes and quantization."""
        outs = [self._result_like(then, t) for t in then._outputs]
        self._op("IF", [cond.index, *(t.index for t in inputs)], [t.index for t in outs],
                 {"then_subgraph_index": then.index, "else_subgraph_index": orelse.index})
        return outs

    def while_(self, cond: ModelBuilder, body: ModelBuilder,
               inputs: Sequence[TensorRef]) -> list[TensorRef]:
        """WHILE ``cond`` (a subgraph giving one bool) runs ``body`` on the loop-carried
        ``inputs``; the outputs are the final values, typed as the inputs."""
        outs = [self._result_like(self, t.index) for t in inputs]
        self._op("WHILE", [t.index for t in inputs], [t.index for t in outs],
                 {"cond_subgraph_index": cond.index, "body_subgraph_index": body.index})
        return outs

    # -- sequence models (issue 20, state family) ----------------------------------------------

    def logistic(self, x: TensorRef, out_quant: tuple[float, int] | None = None) -> TensorRef:
        """LOGISTIC; a quantized output takes TFLite's int8 1/256, -128 or int16 1/32768, 0."""
        q = out_quant or {"int8": (1.0 / 256.0, -128), "int16": (1.0 / 32768.0, 0)}.get(x.dtype)
        y = self._activation("logistic", x.shape, x.dtype, q, (0.0, 1.0))
        self._op("LOGISTIC", [x.index], [y.index])
        return y

    def tanh(self, x: TensorRef, out_quant: tuple[float, int] | None = None) -> TensorRef:
        """TANH; a quantized output takes TFLite's int8 1/128, 0 or int16 1/32768, 0."""
        q = out_quant or {"int8": (1.0 / 128.0, 0), "int16": (1.0 / 32768.0, 0)}.get(x.dtype)
        y = self._activation("tanh", x.shape, x.dtype, q, (-1.0, 1.0))
        self._op("TANH", [x.index], [y.index])
        return y

    def svdf(self, x: TensorRef, units: int, rank: int = 1, memory: int = 4,
             activation: str = "NONE", state_dtype: str | None = None,
             bias: bool = True, out_quant: tuple[float, int] | None = None,
             state_data: bool = False) -> TensorRef:
        """SVDF on ``x`` [batch, input]: ``units * rank`` filters over ``memory`` steps, its
        state a variable tensor [batch, memory * filters] (zero at start). int8 as the converter
        writes the keyword model: int8 weights_feature, ``state_dtype`` (default int16) time
        weights and state, symmetric, an int32 bias of scale state x time weights.
        ``state_data``: the state tensor also holds (random) data, which TFLM ignores."""
        _check_choice(activation, ACTIVATIONS, "activation")
        batch, n_in = x.shape
        filters = units * rank
        stem = self._name("svdf")
        wf = self._random_weights((filters, n_in), n_in)
        wt = self._random_weights((filters, memory), memory)
        b = self._random_bias(units) if bias else None
        lo, hi = self._linear_range(x, wf.astype(np.float64), None, 0)
        if x.dtype == "float32":
            wf_ref = self._add_tensor(f"{stem}/weights_feature", wf.shape, "float32", data=wf)
            wt_ref = self._add_tensor(f"{stem}/weights_time", wt.shape, "float32", data=wt)
            init = self.rng.uniform(-1, 1, (batch, memory * filters)) if state_data else None
            state = self.variable((batch, memory * filters), "float32", name=f"{stem}/state",
                                  initial=init)
            b_ref = (self._add_tensor(f"{stem}/bias", (units,), "float32", data=b)
                     if b is not None else None)
            y = self._activation(stem, (batch, units), "float32", None, None)
        else:
            sdt = state_dtype or "int16"
            wf_ref, _ = self._weights(f"{stem}/feature", wf, x, False, 0)
            wscale = float(np.float32(max(float(np.abs(wt).max()), 1e-8)
                                      / (32767.0 if sdt == "int16" else 127.0)))
            wt_ref = self._add_tensor(f"{stem}/weights_time", wt.shape, sdt,
                                      data=quantize_array(wt, wscale, 0, sdt),
                                      scale=[wscale], zero_point=[0])
            squant = quantize_params(lo, hi, sdt)
            init = (self.rng.integers(-100, 100, (batch, memory * filters)) if state_data
                    else None)
            state = self.variable((batch, memory * filters), sdt, quant=squant,
                                  name=f"{stem}/state", initial=init)
            bscale = float(np.float32(squant[0]) * np.float32(wscale))
            bvals = b if b is not None else np.zeros(units, np.float32)
            b_ref = self._add_tensor(f"{stem}/bias", (units,), "int32",
                                     data=np.round(bvals / bscale).astype(np.int32),
                                     scale=[bscale], zero_point=[0]) if bias else None
            reach = max(abs(lo), abs(hi)) * float(np.abs(wt).sum(axis=1).reshape(
                units, rank).sum(axis=1).max()) / 3.0 + float(np.abs(bvals).max(initial=0))
            q = out_quant or quantize_params(-reach, reach, x.dtype)
            y = self._activation(stem, (batch, units), x.dtype, q)
        inputs = [x.index, wf_ref.index, wt_ref.index, -1 if b_ref is None else b_ref.index,
                  state.index]
        self._op("SVDF", inputs, [y.index], {"rank": rank,
                                              "fused_activation_function": activation})
        return y

    def lstm(self, x: TensorRef, units: int, time_major: bool = False, cell_clip: float = 0.0,
             cell_scale: float = 2.0 ** -11, hidden_quant: tuple[float, int] | None = None
             ) -> TensorRef:
        """UNIDIRECTIONAL_SEQUENCE_LSTM on ``x`` ([batch, time, input], or [time, batch, input]
        when ``time_major``) with ``units`` cells: all four gates, TANH cell activation, hidden
        and cell state variable tensors (zero at start); the output is every step's hidden
        state. Quantized as TFLite's converter writes the integer LSTM: int8 (or int16)
        activations, symmetric int8 weights per tensor, int32 (int16: int64) biases of scale
        input x weights, an int16 cell state of the power-of-two ``cell_scale``, the hidden
        state and the output in ``hidden_quant`` (default: covering [-1, 1])."""
        b_dim, n_in = (x.shape[1], x.shape[2]) if time_major else (x.shape[0], x.shape[2])
        stem = self._name("lstm")
        dt = x.dtype
        refs: dict[int, int] = {}
        hq = None
        if dt != "float32":
            hq = hidden_quant or quantize_params(-1.0, 1.0, dt)
        hidden = self.variable((b_dim, units), dt, quant=hq, name=f"{stem}/hidden")
        cell = self.variable((b_dim, units), "float32" if dt == "float32" else "int16",
                             quant=None if dt == "float32" else (float(cell_scale), 0),
                             name=f"{stem}/cell")
        for gate, wx_i, wh_i, b_i in (("input", 1, 5, 12), ("forget", 2, 6, 13),
                                      ("cell", 3, 7, 14), ("output", 4, 8, 15)):
            wx = self._random_weights((units, n_in), n_in)
            wh = self._random_weights((units, units), units)
            bias = self._random_bias(units) + (1.0 if gate == "forget" else 0.0)
            wx_ref, _ = self._weights(f"{stem}/{gate}_x", wx, x, False, 0)
            wh_ref, _ = self._weights(f"{stem}/{gate}_h", wh, hidden, False, 0)
            refs[wx_i], refs[wh_i] = wx_ref.index, wh_ref.index
            if dt == "float32":
                b_ref = self._add_tensor(f"{stem}/{gate}_bias", (units,), "float32", data=bias)
            else:
                bdt = "int32" if dt == "int8" else "int64"
                bscale = float(np.float32(x.scale[0]) * np.float32(wx_ref.scale[0]))
                b_ref = self._add_tensor(f"{stem}/{gate}_bias", (units,), bdt,
                                         data=np.round(bias / bscale).astype(_NP_DTYPES[bdt]),
                                         scale=[bscale], zero_point=[0])
            refs[b_i] = b_ref.index
        refs[18], refs[19] = hidden.index, cell.index
        inputs = [x.index] + [refs.get(i, -1) for i in range(1, 24)]
        shape = (*x.shape[:2], units)
        y = self._activation(stem, shape, dt, hq, (-1.0, 1.0))
        self._op("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [y.index], {
            "fused_activation_function": "TANH", "cell_clip": float(cell_clip),
            "time_major": bool(time_major)})
        return y

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

    @staticmethod
    def _bias_dtype(x: TensorRef, bias_dtype: str | None) -> str:
        """The bias type of a layer on ``x``: float32, int32 (int8 layers), int64 (int16 layers,
        as TFLite's 16x8 quantization writes it) unless ``bias_dtype`` says otherwise."""
        if x.dtype == "float32":
            return "float32"
        if bias_dtype is not None:
            _check_choice(bias_dtype, {"int32": 0, "int64": 0}, "bias dtype")
            return bias_dtype
        return "int64" if x.dtype == "int16" else "int32"

    def _bias(self, stem: str, b: np.ndarray, x: TensorRef, w: TensorRef,
              bias_dtype: str | None = None) -> TensorRef:
        dtype = self._bias_dtype(x, bias_dtype)
        if dtype == "float32":
            ref = self._add_tensor(f"{stem}/bias", b.shape, "float32", data=b)
        else:
            assert x.scale is not None and w.scale is not None
            scales = np.float64(x.scale[0]) * np.asarray(w.scale, dtype=np.float64)
            scales = scales.astype(np.float32)
            q = np.round(b / np.broadcast_to(scales.astype(np.float64), b.shape))
            limit = 2**31 - 1 if dtype == "int32" else 2**47 - 1
            q = np.clip(q, -limit, limit).astype(_NP_DTYPES[dtype])
            ref = self._add_tensor(f"{stem}/bias", b.shape, dtype, data=q,
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

    def _op(self, opcode: str, inputs: list[int], outputs: list[int],
            options: dict[str, Any] | None = None) -> None:
        """Append operator ``opcode``; ``options``: fields of its options table (by name)."""
        if opcode not in BUILTIN_OPS or opcode == "CUSTOM":
            raise ValueError(f"unknown operator {opcode!r}")
        table = schema.OPERATOR_OPTIONS.get(opcode)
        if options and table is None:
            raise ValueError(f"{opcode} has no options table, but options {sorted(options)}")
        self._ops.append(_OpSpec(opcode, inputs, outputs, dict(options or {})))

    def operator(self, opcode: str, inputs: Sequence[TensorRef | None],
                 outputs: Sequence[tuple[Sequence[int], str, tuple[float, int] | None]],
                 options: dict[str, Any] | None = None) -> list[TensorRef]:
        """Any builtin operator, as it stands in the model: ``inputs`` (None: an absent optional
        input), new outputs given as ``(shape, dtype, quant)``, ``options`` by the field names
        of its options table (:mod:`.schema`). Returns the outputs. The operator-specific
        methods compute shapes and quantization; this one writes what it is given."""
        outs = [self._activation(opcode.lower(), shape, dtype, quant)
                for shape, dtype, quant in outputs]
        self._op(opcode, [-1 if t is None else t.index for t in inputs],
                 [t.index for t in outs], options)
        return outs

    def custom(self, name: str, inputs: Sequence[TensorRef | None],
               outputs: Sequence[tuple[Sequence[int], str, tuple[float, int] | None]],
               custom_options: bytes = b"") -> list[TensorRef]:
        """A custom operator ``name`` (its ``custom_code``) with raw ``custom_options`` bytes
        (flexbuffers, as TFLM's signal library writes them); outputs as :meth:`operator`."""
        outs = [self._activation(name.lower(), shape, dtype, quant)
                for shape, dtype, quant in outputs]
        self._ops.append(_OpSpec("CUSTOM", [-1 if t is None else t.index for t in inputs],
                                 [t.index for t in outs], {}, name, bytes(custom_options)))
        return outs

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
        bias_dtype: str | None = None,
    ) -> TensorRef:
        """CONV_2D over NHWC ``x``. ``filters``: output channels, or float weights [O, KH, KW, I].

        ``bias_dtype`` (int16 layers): ``int64`` (default) or ``int32``; without a bias, an
        ``int32`` one is recorded as the options' ``quantized_bias_type`` (TFLM then
        accumulates in int32)."""
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
                                   activation, per_channel, out_quant, bias_dtype)
        sh, sw = _pair(stride)
        dh, dw = _pair(dilation)
        options = {"padding": padding, "stride_w": sw, "stride_h": sh,
                   "fused_activation_function": activation, "dilation_w_factor": dw,
                   "dilation_h_factor": dh}
        options.update(self._bias_type_option(x, inputs, bias_dtype))
        self._op("CONV_2D", inputs, [y.index], options)
        return y

    def _bias_type_option(self, x: TensorRef, inputs: list[int],
                          bias_dtype: str | None) -> dict[str, str]:
        """``quantized_bias_type`` for an int16 layer without a bias asked to use int32."""
        has_bias = len(inputs) > 2 and inputs[2] >= 0
        if x.dtype == "int16" and not has_bias and bias_dtype == "int32":
            return {"quantized_bias_type": "int32"}
        return {}

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
        bias_dtype: str | None = None,
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
            inputs.append(self._bias(stem, b, x, wref, bias_dtype).index)
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
        bias_dtype: str | None = None,
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
                                   activation, per_channel, out_quant, bias_dtype)
        sh, sw = _pair(stride)
        dh, dw = _pair(dilation)
        self._op("DEPTHWISE_CONV_2D", inputs, [y.index], {
            "padding": padding, "stride_w": sw, "stride_h": sh,
            "depth_multiplier": depth_multiplier, "fused_activation_function": activation,
            "dilation_w_factor": dw, "dilation_h_factor": dh})
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
        bias_dtype: str | None = None,
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
            inputs[2] = self._bias(stem, b, x, wref, bias_dtype).index
        batch = int(np.prod(x.shape)) // depth
        shape = (*x.shape[:-1], nu) if keep_num_dims else (batch, nu)
        y = self._activation(stem, shape, x.dtype, q, est)
        options = {"fused_activation_function": activation, "keep_num_dims": bool(keep_num_dims)}
        options.update(self._bias_type_option(x, inputs, bias_dtype))
        self._op("FULLY_CONNECTED", inputs, [y.index], options)
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
        self._op(opcode, [x.index], [y.index], {
            "padding": padding, "stride_w": sw, "stride_h": sh, "filter_width": fw,
            "filter_height": fh, "fused_activation_function": activation})
        return y

    def average_pool2d(self, x: TensorRef, filter_size: int | Sequence[int] = 2,
                       stride: int | Sequence[int] | None = None, padding: str = "VALID",
                       activation: str = "NONE") -> TensorRef:
        """AVERAGE_POOL_2D (a quantized output keeps the input's quantization, as TFLite
        requires)."""
        return self._pool("AVERAGE_POOL_2D", x, filter_size, stride, padding, activation)

    def max_pool2d(self, x: TensorRef, filter_size: int | Sequence[int] = 2,
                   stride: int | Sequence[int] | None = None, padding: str = "VALID",
                   activation: str = "NONE") -> TensorRef:
        """MAX_POOL_2D (a quantized output keeps the input's quantization)."""
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
        if a.quant is None and a.dtype == "int32":
            q = None  # plain int32 values (TFLM's int32 ADD and MUL) stay plain
        y = self._activation(opcode.lower(), shape, a.dtype, q, est)
        options: dict[str, Any] = {"fused_activation_function": activation}
        if opcode == "ADD" and a.dtype == "int16":
            options["pot_scale_int16"] = False  # general scales, as the converter writes them
        self._op(opcode, [a.index, b.index], [y.index], options)
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
        if x.quant is None and x.dtype in _QUANTIZED:  # plain int8/int16 values stay plain
            y = self._add_tensor(self._name("reshape"), new, x.dtype)
        else:
            y = self._activation("reshape", new, x.dtype, x.quant, self.range_of(x))
        self._op("RESHAPE", inputs, [y.index], {"new_shape": [int(d) for d in shape]})
        return y

    def squeeze(self, x: TensorRef, dims: Sequence[int] | None = None) -> TensorRef:
        """SQUEEZE: drop the size-1 dimensions ``dims`` (negative counts from the end), or every
        size-1 dimension when ``dims`` is None or empty (as TFLite)."""
        rank = len(x.shape)
        if dims:
            axes = {d + rank if d < 0 else d for d in dims}
            for d in axes:
                if not 0 <= d < rank or x.shape[d] != 1:
                    raise ValueError(f"squeeze: dimension {d} of {x.shape} is not of size 1")
        else:
            axes = {d for d, n in enumerate(x.shape) if n == 1}
        shape = [n for d, n in enumerate(x.shape) if d not in axes]
        y = self._activation("squeeze", shape, x.dtype, x.quant, self.range_of(x))
        self._op("SQUEEZE", [x.index], [y.index],
                 {"squeeze_dims": [int(d) for d in dims]} if dims else {})
        return y

    def expand_dims(self, x: TensorRef, axis: int) -> TensorRef:
        """EXPAND_DIMS: a size-1 dimension inserted at ``axis`` (negative: from the end, -1
        appends), given as a constant int32 axis tensor."""
        rank = len(x.shape)
        at = axis + rank + 1 if axis < 0 else axis
        if not 0 <= at <= rank:
            raise ValueError(f"expand_dims: axis {axis} is out of range for rank {rank}")
        shape = [*x.shape[:at], 1, *x.shape[at:]]
        ax = self._add_tensor(self._name("expand_dims/axis"), (1,), "int32",
                              data=np.asarray([axis], dtype=np.int32))
        y = self._activation("expand_dims", shape, x.dtype, x.quant, self.range_of(x))
        self._op("EXPAND_DIMS", [x.index, ax.index], [y.index])
        return y

    def softmax(self, x: TensorRef, beta: float = 1.0, out_dtype: str | None = None) -> TensorRef:
        """SOFTMAX; a quantized output uses the scale and zero point TFLite requires: int8
        1/256 and -128, int16 1/32768 and 0; ``out_dtype="int16"`` on an int8 input (as TFLM's
        keyword model ends) 1/65536 and -32768."""
        dtype = out_dtype or x.dtype
        q = {"int8": (1.0 / 256.0, -128), "int16": (1.0 / 32768.0, 0)}.get(dtype)
        if x.dtype == "int8" and dtype == "int16":
            q = (1.0 / 65536.0, -32768)
        y = self._activation("softmax", x.shape, dtype, q, (0.0, 1.0))
        self._op("SOFTMAX", [x.index], [y.index], {"beta": float(beta)})
        return y

    def quantize(self, x: TensorRef, quant: tuple[float, int] | None = None,
                 dtype: str = "int8") -> TensorRef:
        """QUANTIZE float32 -> int8/int16, or requantize between int8, int16 and int32
        (``quant`` or from the range; int16 symmetric)."""
        if quant is None:
            quant = quantize_params(*self.range_of(x), dtype=dtype)
        y = self._activation("quantize", x.shape, dtype, quant)
        self._op("QUANTIZE", [x.index], [y.index])
        return y

    def dequantize(self, x: TensorRef) -> TensorRef:
        """DEQUANTIZE int8/int16 -> float32."""
        y = self._activation("dequantize", x.shape, "float32", None, self.range_of(x))
        self._op("DEQUANTIZE", [x.index], [y.index])
        return y

    # -- shape and data movement (issue 20) -------------------------------------------------
    # Outputs keep the input's type, quantization and range estimate (they only move codes).

    def _like(self, stem: str, x: TensorRef, shape: Sequence[int],
              dtype: str | None = None) -> TensorRef:
        """A new activation of ``shape`` with ``x``'s type, quantization and range."""
        return self._activation(stem, shape, dtype or x.dtype, x.quant, self.range_of(x))

    def _ints(self, stem: str, values: Any, dtype: str = "int32") -> TensorRef:
        """A constant integer tensor (shape as given)."""
        arr = np.asarray(values, dtype=_NP_DTYPES[dtype])
        return self._add_tensor(self._name(stem), arr.shape, dtype, data=arr)

    def _operand_of(self, v: TensorRef | np.ndarray, dtype: str,
                    quant: tuple[float, int] | None) -> TensorRef:
        """``v`` itself, or a constant of float values ``v`` (quantized with ``quant``)."""
        if isinstance(v, TensorRef):
            return v
        return self.constant(np.asarray(v, dtype=np.float64), dtype, quant=quant)

    def pad(self, x: TensorRef, paddings: Sequence[Sequence[int]],
            value: float | TensorRef | None = None, v2: bool | None = None,
            paddings_dtype: str = "int32") -> TensorRef:
        """PAD (or PADV2 when ``value`` is given or ``v2``): ``paddings`` ``[[before, after],
        ...]`` per dimension; ``value`` a float (a constant in ``x``'s type and quantization)
        or a one-element tensor."""
        pads = np.asarray(paddings, dtype=np.int64).reshape(len(x.shape), 2)
        shape = [n + int(a) + int(b) for n, (a, b) in zip(x.shape, pads, strict=True)]
        inputs = [x.index, self._ints("pad/paddings", pads, paddings_dtype).index]
        v2 = value is not None if v2 is None else v2
        if value is not None:
            inputs.append(self._operand_of(np.asarray(value) if not isinstance(value, TensorRef)
                                           else value, x.dtype, x.quant).index)
        y = self._like("pad", x, shape)
        self._op("PADV2" if v2 else "PAD", inputs, [y.index])
        return y

    def mirror_pad(self, x: TensorRef, paddings: Sequence[Sequence[int]],
                   padding_mode: str = "REFLECT", paddings_dtype: str = "int32") -> TensorRef:
        """MIRROR_PAD, ``padding_mode`` (the options' ``mode``) REFLECT or SYMMETRIC."""
        _check_choice(padding_mode, schema.ENUMS["MirrorPadMode"], "mirror pad mode")
        pads = np.asarray(paddings, dtype=np.int64).reshape(len(x.shape), 2)
        shape = [n + int(a) + int(b) for n, (a, b) in zip(x.shape, pads, strict=True)]
        p = self._ints("mirror_pad/paddings", pads, paddings_dtype)
        y = self._like("mirror_pad", x, shape)
        self._op("MIRROR_PAD", [x.index, p.index], [y.index], {"mode": padding_mode})
        return y

    def concatenation(self, xs: Sequence[TensorRef | np.ndarray], axis: int = -1,
                      activation: str = "NONE") -> TensorRef:
        """CONCATENATION along ``axis``; float arrays become constants in the first input's type
        and quantization (the output keeps it, as TFLM requires for int8)."""
        first = next(t for t in xs if isinstance(t, TensorRef))
        refs = [self._operand_of(t, first.dtype, first.quant) for t in xs]
        rank = len(first.shape)
        a = axis + rank if axis < 0 else axis
        shape = list(first.shape)
        shape[a] = sum(t.shape[a] for t in refs)
        y = self._like("concatenation", first, shape)
        self._op("CONCATENATION", [t.index for t in refs], [y.index],
                 {"axis": axis, "fused_activation_function": activation})
        return y

    def split(self, x: TensorRef, num_splits: int, axis: int = 0) -> list[TensorRef]:
        """SPLIT into ``num_splits`` equal pieces along ``axis`` (a constant axis input)."""
        a = axis + len(x.shape) if axis < 0 else axis
        if x.shape[a] % num_splits:
            raise ValueError(f"split: {x.shape[a]} is not a multiple of {num_splits}")
        shape = list(x.shape)
        shape[a] //= num_splits
        ax = self._ints("split/axis", [axis])
        ys = [self._like("split", x, shape) for _ in range(num_splits)]
        self._op("SPLIT", [ax.index, x.index], [y.index for y in ys], {"num_splits": num_splits})
        return ys

    def split_v(self, x: TensorRef, sizes: Sequence[int], axis: int = 0) -> list[TensorRef]:
        """SPLIT_V into pieces of ``sizes`` along ``axis`` (one size may be -1)."""
        a = axis + len(x.shape) if axis < 0 else axis
        known = [int(s) for s in sizes]
        if known.count(-1):
            known[known.index(-1)] = x.shape[a] - sum(s for s in known if s != -1)
        ys = []
        for s in known:
            shape = list(x.shape)
            shape[a] = s
            ys.append(self._like("split_v", x, shape))
        sz = self._ints("split_v/sizes", [int(s) for s in sizes])
        ax = self._ints("split_v/axis", [axis])
        self._op("SPLIT_V", [x.index, sz.index, ax.index], [y.index for y in ys],
                 {"num_splits": len(ys)})
        return ys

    def slice(self, x: TensorRef, begin: Sequence[int], size: Sequence[int],
              index_dtype: str = "int32") -> TensorRef:
        """SLICE of ``size`` elements (-1: to the end) from ``begin``."""
        shape = [n - b if s == -1 else s for n, b, s in zip(x.shape, begin, size, strict=True)]
        bt = self._ints("slice/begin", list(begin), index_dtype)
        st = self._ints("slice/size", list(size), index_dtype)
        y = self._like("slice", x, shape)
        self._op("SLICE", [x.index, bt.index, st.index], [y.index])
        return y

    def strided_slice(self, x: TensorRef, begin: Sequence[int], end: Sequence[int],
                      strides: Sequence[int] | None = None, begin_mask: int = 0,
                      end_mask: int = 0, shrink_axis_mask: int = 0) -> TensorRef:
        """STRIDED_SLICE; the output shape is numpy's for the same slices (a mask bit: that side
        open; a shrink bit: index ``begin``, the dimension dropped)."""
        steps = [1] * len(begin) if strides is None else [int(s) for s in strides]
        index: list[Any] = []
        for d in range(len(x.shape)):
            if shrink_axis_mask >> d & 1:
                index.append(int(begin[d]))
                continue
            index.append(slice(None if begin_mask >> d & 1 else int(begin[d]),
                               None if end_mask >> d & 1 else int(end[d]), steps[d]))
        shape = np.empty(x.shape, dtype=np.int8)[tuple(index)].shape
        ins = [x.index] + [self._ints(f"strided_slice/{k}", list(v)).index
                           for k, v in (("begin", begin), ("end", end), ("strides", steps))]
        y = self._like("strided_slice", x, shape)
        self._op("STRIDED_SLICE", ins, [y.index], {
            "begin_mask": begin_mask, "end_mask": end_mask, "shrink_axis_mask": shrink_axis_mask})
        return y

    def transpose(self, x: TensorRef, perm: Sequence[int]) -> TensorRef:
        """TRANSPOSE: output dimension k is input dimension ``perm[k]``."""
        p = self._ints("transpose/perm", list(perm))
        y = self._like("transpose", x, [x.shape[k] for k in perm])
        self._op("TRANSPOSE", [x.index, p.index], [y.index])
        return y

    def pack(self, xs: Sequence[TensorRef | np.ndarray], axis: int = 0) -> TensorRef:
        """PACK: the inputs (one shape) stacked along a new dimension ``axis``."""
        first = next(t for t in xs if isinstance(t, TensorRef))
        refs = [self._operand_of(t, first.dtype, first.quant) for t in xs]
        rank = len(first.shape) + 1
        a = axis + rank if axis < 0 else axis
        shape = [*first.shape[:a], len(refs), *first.shape[a:]]
        y = self._like("pack", first, shape)
        self._op("PACK", [t.index for t in refs], [y.index],
                 {"values_count": len(refs), "axis": axis})
        return y

    def unpack(self, x: TensorRef, axis: int = 0) -> list[TensorRef]:
        """UNPACK: the slices of ``x`` along ``axis``, that dimension dropped."""
        a = axis + len(x.shape) if axis < 0 else axis
        shape = [n for d, n in enumerate(x.shape) if d != a]
        ys = [self._like("unpack", x, shape) for _ in range(x.shape[a])]
        self._op("UNPACK", [x.index], [y.index for y in ys], {"num": len(ys), "axis": axis})
        return ys

    def gather(self, x: TensorRef | np.ndarray, indices: TensorRef | np.ndarray, axis: int = 0,
               batch_dims: int = 0, dtype: str | None = None) -> TensorRef:
        """GATHER; ``x`` a tensor or float values (a constant of ``dtype``, int8: quantized
        from its range), ``indices`` an int32 tensor or constant values."""
        if not isinstance(x, TensorRef):
            x = self.constant(np.asarray(x, dtype=np.float64), dtype or "float32")
        idx = indices if isinstance(indices, TensorRef) else self._ints("gather/indices",
                                                                        indices)
        a = axis + len(x.shape) if axis < 0 else axis
        bd = batch_dims + len(idx.shape) if batch_dims < 0 else batch_dims
        shape = [*x.shape[:a], *idx.shape[bd:], *x.shape[a + 1:]]
        y = self._like("gather", x, shape)
        self._op("GATHER", [x.index, idx.index], [y.index], {"axis": axis,
                                                              "batch_dims": batch_dims})
        return y

    def gather_nd(self, x: TensorRef | np.ndarray, indices: TensorRef | np.ndarray,
                  dtype: str | None = None) -> TensorRef:
        """GATHER_ND: slices of ``x`` at the index tuples of the last dimension of
        ``indices``."""
        if not isinstance(x, TensorRef):
            x = self.constant(np.asarray(x, dtype=np.float64), dtype or "float32")
        idx = indices if isinstance(indices, TensorRef) else self._ints("gather_nd/indices",
                                                                        indices)
        shape = [*idx.shape[:-1], *x.shape[idx.shape[-1]:]]
        y = self._like("gather_nd", x, shape)
        self._op("GATHER_ND", [x.index, idx.index], [y.index])
        return y

    def shape(self, x: TensorRef, out_type: str = "int32") -> TensorRef:
        """SHAPE: ``x``'s dimensions as an ``out_type`` vector."""
        y = self._activation("shape", [len(x.shape)], out_type, None, (0.0, 1.0))
        self._op("SHAPE", [x.index], [y.index], {"out_type": out_type})
        return y

    def broadcast_to(self, x: TensorRef, shape: Sequence[int],
                     shape_dtype: str = "int32") -> TensorRef:
        """BROADCAST_TO ``shape`` (a constant shape input)."""
        s = self._ints("broadcast_to/shape", list(shape), shape_dtype)
        y = self._like("broadcast_to", x, list(np.broadcast_shapes(x.shape, tuple(shape))))
        self._op("BROADCAST_TO", [x.index, s.index], [y.index])
        return y

    def depth_to_space(self, x: TensorRef, block_size: int) -> TensorRef:
        n, h, w, c = x.shape
        y = self._like("depth_to_space", x, [n, h * block_size, w * block_size,
                                             c // (block_size * block_size)])
        self._op("DEPTH_TO_SPACE", [x.index], [y.index], {"block_size": block_size})
        return y

    def space_to_depth(self, x: TensorRef, block_size: int) -> TensorRef:
        n, h, w, c = x.shape
        y = self._like("space_to_depth", x, [n, h // block_size, w // block_size,
                                             c * block_size * block_size])
        self._op("SPACE_TO_DEPTH", [x.index], [y.index], {"block_size": block_size})
        return y

    def batch_to_space_nd(self, x: TensorRef, block: Sequence[int],
                          crops: Sequence[Sequence[int]]) -> TensorRef:
        """BATCH_TO_SPACE_ND (NHWC, or NHC with one block value and one crop pair)."""
        c = np.asarray(crops, dtype=np.int64).reshape(len(block), 2)
        spatial = [int(x.shape[1 + d]) * int(block[d]) - int(c[d].sum())
                   for d in range(len(block))]
        shape = [x.shape[0] // int(np.prod(block)), *spatial, *x.shape[1 + len(block):]]
        ins = [x.index, self._ints("batch_to_space_nd/block", list(block)).index,
               self._ints("batch_to_space_nd/crops", c).index]
        y = self._like("batch_to_space_nd", x, shape)
        self._op("BATCH_TO_SPACE_ND", ins, [y.index])
        return y

    def space_to_batch_nd(self, x: TensorRef, block: Sequence[int],
                          paddings: Sequence[Sequence[int]]) -> TensorRef:
        """SPACE_TO_BATCH_ND (NHWC, or NHC with one block value and one padding pair)."""
        p = np.asarray(paddings, dtype=np.int64).reshape(len(block), 2)
        spatial = [(int(x.shape[1 + d]) + int(p[d].sum())) // int(block[d])
                   for d in range(len(block))]
        shape = [x.shape[0] * int(np.prod(block)), *spatial, *x.shape[1 + len(block):]]
        ins = [x.index, self._ints("space_to_batch_nd/block", list(block)).index,
               self._ints("space_to_batch_nd/paddings", p).index]
        y = self._like("space_to_batch_nd", x, shape)
        self._op("SPACE_TO_BATCH_ND", ins, [y.index])
        return y

    def _resize(self, opcode: str, x: TensorRef, size: Sequence[int], align_corners: bool,
                half_pixel_centers: bool) -> TensorRef:
        s = self._ints(f"{opcode.lower()}/size", [int(v) for v in size])
        y = self._like(opcode.lower(), x, [x.shape[0], int(size[0]), int(size[1]), x.shape[3]])
        self._op(opcode, [x.index, s.index], [y.index], {
            "align_corners": bool(align_corners), "half_pixel_centers": bool(half_pixel_centers)})
        return y

    def resize_nearest_neighbor(self, x: TensorRef, size: Sequence[int],
                                align_corners: bool = False,
                                half_pixel_centers: bool = False) -> TensorRef:
        """RESIZE_NEAREST_NEIGHBOR of NHWC ``x`` to ``size`` (height, width)."""
        return self._resize("RESIZE_NEAREST_NEIGHBOR", x, size, align_corners,
                            half_pixel_centers)

    def resize_bilinear(self, x: TensorRef, size: Sequence[int], align_corners: bool = False,
                        half_pixel_centers: bool = False) -> TensorRef:
        """RESIZE_BILINEAR of NHWC ``x`` to ``size`` (height, width); a quantized output keeps
        the input's quantization."""
        return self._resize("RESIZE_BILINEAR", x, size, align_corners, half_pixel_centers)

    def zeros_like(self, x: TensorRef) -> TensorRef:
        y = self._like("zeros_like", x, x.shape)
        self._op("ZEROS_LIKE", [x.index], [y.index])
        return y

    def fill(self, dims: Sequence[int], value: float | TensorRef, dtype: str = "float32",
             quant: tuple[float, int] | None = None, dims_dtype: str = "int32") -> TensorRef:
        """FILL a tensor of shape ``dims`` with ``value``: a float (a scalar constant of
        ``dtype``, quantized with ``quant``) or a scalar tensor."""
        if isinstance(value, TensorRef):
            v = value
        else:
            v = self._operand_of(np.asarray(value, dtype=np.float64), dtype, quant)
        d = self._ints("fill/dims", [int(n) for n in dims], dims_dtype)
        y = self._activation("fill", [int(n) for n in dims], v.dtype, v.quant, self.range_of(v))
        self._op("FILL", [d.index, v.index], [y.index])
        return y

    # -- reductions, comparisons, types and compute (issue 20: the ops-reduce family) --------

    def _axes_tensor(self, stem: str, axes: Sequence[int]) -> TensorRef:
        return self._add_tensor(self._name(stem), (len(axes),), "int32",
                                data=np.asarray(axes, dtype=np.int32))

    def _reduce(self, opcode: str, x: TensorRef, axes: int | Sequence[int], keep_dims: bool,
                out_quant: tuple[float, int] | None) -> TensorRef:
        rank = len(x.shape)
        axes = [int(a) for a in np.atleast_1d(np.asarray(axes, dtype=np.int64))]
        resolved = set()
        for a in axes:
            if not -rank <= a < rank:
                raise ValueError(f"{opcode.lower()}: axis {a} is out of range for rank {rank}")
            resolved.add(a + rank if a < 0 else a)
        shape = [1 if i in resolved else d for i, d in enumerate(x.shape)
                 if keep_dims or i not in resolved]
        n = int(np.prod([x.shape[i] for i in resolved])) if resolved else 1
        lo, hi = self.range_of(x)
        mean, std = (lo + hi) / 2.0, (hi - lo) / math.sqrt(12.0)
        if opcode == "MEAN":  # the mean of n values: mean +- 3 sigma / sqrt(n), within the input's
            lo, hi = max(lo, mean - 3 * std / math.sqrt(n)), min(hi, mean + 3 * std / math.sqrt(n))
        elif opcode == "SUM":
            lo, hi = n * mean - 3 * std * math.sqrt(n), n * mean + 3 * std * math.sqrt(n)
        if x.dtype == "float32":
            q = None
        elif opcode in ("REDUCE_MAX", "REDUCE_MIN"):  # TFLM: the input's quantization
            q = x.quant
        else:
            q = out_quant or quantize_params(lo, hi, x.dtype)
        y = self._activation(opcode.lower(), shape, x.dtype, q, (lo, hi))
        ax = self._axes_tensor(f"{opcode.lower()}/axes", axes)
        self._op(opcode, [x.index, ax.index], [y.index], {"keep_dims": bool(keep_dims)})
        return y

    def mean(self, x: TensorRef, axes: int | Sequence[int], keep_dims: bool = False,
             out_quant: tuple[float, int] | None = None) -> TensorRef:
        """MEAN over ``axes`` (negative: from the end; repeats allowed, as TFLite), given as a
        constant int32 tensor; a quantized output gets ``out_quant`` or the mean's range
        estimate."""
        return self._reduce("MEAN", x, axes, keep_dims, out_quant)

    def sum(self, x: TensorRef, axes: int | Sequence[int], keep_dims: bool = False,
            out_quant: tuple[float, int] | None = None) -> TensorRef:
        """SUM over ``axes`` (as :meth:`mean`)."""
        return self._reduce("SUM", x, axes, keep_dims, out_quant)

    def reduce_max(self, x: TensorRef, axes: int | Sequence[int],
                   keep_dims: bool = False) -> TensorRef:
        """REDUCE_MAX over ``axes``; a quantized output keeps the input's quantization (TFLM
        requires it)."""
        return self._reduce("REDUCE_MAX", x, axes, keep_dims, None)

    def reduce_min(self, x: TensorRef, axes: int | Sequence[int],
                   keep_dims: bool = False) -> TensorRef:
        """REDUCE_MIN over ``axes`` (as :meth:`reduce_max`)."""
        return self._reduce("REDUCE_MIN", x, axes, keep_dims, None)

    def _arg(self, opcode: str, x: TensorRef, axis: int, output_type: str) -> TensorRef:
        rank = len(x.shape)
        if not -rank <= axis < rank:
            raise ValueError(f"{opcode.lower()}: axis {axis} is out of range for rank {rank}")
        _check_choice(output_type, {"int32": 0, "int64": 0}, "output type")
        a = axis + rank if axis < 0 else axis
        shape = [d for i, d in enumerate(x.shape) if i != a]
        y = self._activation(opcode.lower(), shape, output_type, None, (0.0, x.shape[a] - 1.0))
        ax = self._axes_tensor(f"{opcode.lower()}/axis", [axis])
        self._op(opcode, [x.index, ax.index], [y.index], {"output_type": output_type})
        return y

    def arg_max(self, x: TensorRef, axis: int = -1, output_type: str = "int32") -> TensorRef:
        """ARG_MAX along ``axis`` (a constant int32 tensor of one element); ``output_type``
        int32 or int64 (written in the options and as the output's type)."""
        return self._arg("ARG_MAX", x, axis, output_type)

    def arg_min(self, x: TensorRef, axis: int = -1, output_type: str = "int32") -> TensorRef:
        """ARG_MIN along ``axis`` (as :meth:`arg_max`)."""
        return self._arg("ARG_MIN", x, axis, output_type)

    def _operand_like(self, b: TensorRef | np.ndarray, like: TensorRef) -> TensorRef:
        """``b``, or a constant of ``like``'s type from values ``b`` (quantized: float values
        under ``like``'s quantization)."""
        if isinstance(b, TensorRef):
            return b
        b = np.asarray(b)
        if like.dtype in _QUANTIZED:
            return self.constant(b.astype(np.float32), like.dtype, quant=like.quant)
        return self.constant(b.astype(_NP_DTYPES[like.dtype]), like.dtype)

    def comparison(self, opcode: str, a: TensorRef, b: TensorRef | np.ndarray) -> TensorRef:
        """EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER or GREATER_EQUAL with numpy
        broadcasting; bool output. ``b`` may be values (a constant of ``a``'s type and, quantized,
        of ``a``'s quantization)."""
        _check_choice(opcode, dict.fromkeys(COMPARISONS, 0), "comparison")
        b = self._operand_like(b, a)
        shape = tuple(np.broadcast_shapes(a.shape, b.shape))
        y = self._activation(opcode.lower(), shape, "bool", None, (0.0, 1.0))
        self._op(opcode, [a.index, b.index], [y.index], {})
        return y

    def logical(self, opcode: str, a: TensorRef, b: TensorRef | np.ndarray | None = None
                ) -> TensorRef:
        """LOGICAL_AND or LOGICAL_OR of bool ``a`` and ``b`` (broadcasting; values: a constant),
        or LOGICAL_NOT of ``a``."""
        _check_choice(opcode, {"LOGICAL_AND": 0, "LOGICAL_OR": 0, "LOGICAL_NOT": 0}, "operator")
        inputs = [a]
        if opcode != "LOGICAL_NOT":
            if b is None:
                raise ValueError(f"{opcode} takes two operands")
            inputs.append(self._operand_like(b, a))
        shape = tuple(np.broadcast_shapes(*(t.shape for t in inputs)))
        y = self._activation(opcode.lower(), shape, "bool", None, (0.0, 1.0))
        self._op(opcode, [t.index for t in inputs], [y.index], {})
        return y

    def select_v2(self, condition: TensorRef | np.ndarray, x: TensorRef,
                  y: TensorRef | np.ndarray) -> TensorRef:
        """SELECT_V2: ``x`` where ``condition`` (bool), else ``y``, the three broadcast together;
        ``y`` (and ``condition``) may be values, made constants (``y`` of ``x``'s type and
        quantization). The output has ``x``'s quantization."""
        cond = condition if isinstance(condition, TensorRef) else self.constant(
            np.asarray(condition, dtype=bool), "bool")
        y = self._operand_like(y, x)
        shape = tuple(np.broadcast_shapes(cond.shape, x.shape, y.shape))
        lo = min(self.range_of(x)[0], self.range_of(y)[0])
        hi = max(self.range_of(x)[1], self.range_of(y)[1])
        out = self._activation("select_v2", shape, x.dtype, x.quant, (lo, hi))
        self._op("SELECT_V2", [cond.index, x.index, y.index], [out.index], {})
        return out

    def cast(self, x: TensorRef, dtype: str) -> TensorRef:
        """CAST to ``dtype``: values converted as numbers (quantization plays no part, so an
        integer output has none)."""
        _check_choice(dtype, TENSOR_TYPES, "dtype")
        y = self._add_tensor(self._name("cast"), x.shape, dtype)
        self._ranges[y.index] = self.range_of(x)
        self._op("CAST", [x.index], [y.index], {"in_data_type": x.dtype, "out_data_type": dtype})
        return y

    def transpose_conv(
        self,
        x: TensorRef,
        filters: int | np.ndarray,
        kernel_size: int | Sequence[int] = 3,
        stride: int | Sequence[int] = 2,
        padding: str = "SAME",
        bias: bool | np.ndarray = True,
        activation: str = "NONE",
        output_shape: Sequence[int] | None = None,
        per_channel: bool | None = None,
        out_quant: tuple[float, int] | None = None,
        bias_dtype: str | None = None,
        shape_input: bool = False,
    ) -> TensorRef:
        """TRANSPOSE_CONV over NHWC ``x``: inputs (output shape, weights [O, KH, KW, I], ``x``,
        optional bias) as the converter writes them. ``filters``: output channels, or float
        weights. The output is ``in * stride`` (SAME) or ``(in - 1) * stride + k`` (VALID) unless
        ``output_shape`` says. int16 layers: ``bias_dtype`` int64 (default), int32 or int16.
        ``shape_input``: the output shape is a model input (as when the graph computes it; TFLM
        never reads its values), not a constant."""
        _check_choice(padding, PADDINGS, "padding")
        _check_choice(activation, ACTIVATIONS, "activation")
        n, h, wd, c = x.shape
        sh, sw = _pair(stride)
        if isinstance(filters, np.ndarray):
            w = filters.astype(np.float32)
            if w.ndim != 4 or w.shape[3] != c:
                raise ValueError(f"transpose_conv weights must be [O, KH, KW, {c}], got {w.shape}")
        else:
            kh, kw = _pair(kernel_size)
            w = self._random_weights((int(filters), kh, kw, c),
                                     max(1, kh * kw * c // (sh * sw)))
        o, kh, kw = w.shape[0], w.shape[1], w.shape[2]
        if output_shape is None:
            oh = h * sh if padding == "SAME" else (h - 1) * sh + kh
            ow = wd * sw if padding == "SAME" else (wd - 1) * sw + kw
            output_shape = (n, oh, ow, o)
        output_shape = tuple(int(d) for d in output_shape)
        stem = self._name("transpose_conv")
        pc = self.per_channel if per_channel is None else per_channel
        wref, w_eff = self._weights(stem, w, x, pc, 0)
        b = self._bias_values(bias, o)
        lo, hi = self._linear_range(x, w_eff, b, 0)
        q, est = self._out_quant(x, out_quant, lo, hi, activation)
        if shape_input:
            shape_t = self.input((4,), "int32", name=f"{stem}/output_shape")
        else:
            shape_t = self._add_tensor(self._name("transpose_conv/output_shape"), (4,), "int32",
                                       data=np.asarray(output_shape, dtype=np.int32))
        inputs = [shape_t.index, wref.index, x.index]
        if b is not None:
            if x.dtype == "int16" and bias_dtype == "int16":
                assert x.scale is not None and wref.scale is not None
                scales = (np.float64(x.scale[0]) * np.asarray(wref.scale)).astype(np.float32)
                qb = np.clip(np.round(b / scales.astype(np.float64)), -32767, 32767)
                bref = self._add_tensor(f"{stem}/bias", b.shape, "int16", data=qb,
                                        scale=scales.tolist(), zero_point=[0] * scales.size)
                self.float_values[bref.index] = b.astype(np.float64)
            else:
                bref = self._bias(stem, b, x, wref, bias_dtype)
            inputs.append(bref.index)
        y = self._activation(stem, output_shape, x.dtype, q, est)
        self._op("TRANSPOSE_CONV", inputs, [y.index], {
            "padding": padding, "stride_w": sw, "stride_h": sh,
            "fused_activation_function": activation})
        return y

    def batch_matmul(self, a: TensorRef, b: TensorRef | np.ndarray, adj_x: bool = False,
                     adj_y: bool = False, out_quant: tuple[float, int] | None = None
                     ) -> TensorRef:
        """BATCH_MATMUL ``a @ b`` (``adj_x``/``adj_y``: the last two dimensions of ``a``/``b``
        transposed first), batch dimensions broadcast. ``b`` may be float values, made a
        constant of ``a``'s type (quantized per tensor as an activation; int16 symmetric)."""
        if not isinstance(b, TensorRef):
            values = np.asarray(b, dtype=np.float32)
            b = self.constant(values, a.dtype) if a.dtype != "float32" else self.constant(
                values, "float32")
        if len(a.shape) < 2 or len(b.shape) < 2:
            raise ValueError("batch_matmul: both operands need at least two dimensions")
        rows, depth = (a.shape[-1], a.shape[-2]) if adj_x else (a.shape[-2], a.shape[-1])
        depth_b, cols = (b.shape[-1], b.shape[-2]) if adj_y else (b.shape[-2], b.shape[-1])
        if depth != depth_b:
            raise ValueError(f"batch_matmul: {a.shape} and {b.shape} do not multiply "
                             f"(adj_x={adj_x}, adj_y={adj_y})")
        batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
        shape = (*batch, rows, cols)
        (alo, ahi), (blo, bhi) = self.range_of(a), self.range_of(b)
        ma, mb_ = (alo + ahi) / 2, (blo + bhi) / 2
        va, vb = (ahi - alo) ** 2 / 12, (bhi - blo) ** 2 / 12
        std = math.sqrt(depth * (va * vb + va * mb_ ** 2 + vb * ma ** 2))
        lo, hi = depth * ma * mb_ - 3 * std, depth * ma * mb_ + 3 * std
        q, est = self._out_quant(a, out_quant, lo, hi, "NONE")
        y = self._activation("batch_matmul", shape, a.dtype, q, est)
        self._op("BATCH_MATMUL", [a.index, b.index], [y.index],
                 {"adj_x": bool(adj_x), "adj_y": bool(adj_y)})
        return y

    def _single_op_reduce_family(self, op: str, dtype: str, shape: tuple[int, ...], name: str,
                                 value_range: tuple[float, float], options: dict[str, Any]
                                 ) -> TensorRef:
        """:meth:`single_op` for the reductions, comparisons, types and compute ops."""
        if op in ("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT"):
            x = self.input(shape, "bool", name=name)
            if op == "LOGICAL_NOT":
                return self.logical(op, x)
            b_shape = tuple(options.pop("b_shape", shape))
            b = self.input(b_shape, "bool", name=f"{name}_b")
            return self.logical(op, x, b)
        if op == "SELECT_V2":
            cond = self.input(tuple(options.pop("cond_shape", shape)), "bool", name=f"{name}_c")
            x = self.input(shape, dtype, value_range=value_range, name=name)
            y_shape = tuple(options.pop("y_shape", shape))
            if options.pop("y_input", True):
                y = self.input(y_shape, dtype, quant=x.quant, value_range=value_range,
                               name=f"{name}_y")
            else:
                y = self._operand_like(self.rng.uniform(*value_range, size=y_shape), x)
            return self.select_v2(cond, x, y)
        x = self.input(shape, dtype, value_range=value_range, name=name)
        if op in ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN"):
            axes = options.pop("axes", (1, 2))
            keep = options.pop("keep_dims", False)
            if op in ("MEAN", "SUM"):
                return self._reduce(op, x, axes, keep, options.pop("out_quant", None))
            return self._reduce(op, x, axes, keep, None)
        if op in ("ARG_MAX", "ARG_MIN"):
            return self._arg(op, x, options.pop("axis", -1), options.pop("output_type", "int32"))
        if op in COMPARISONS:
            b_shape = tuple(options.pop("b_shape", shape))
            b_drawn = (-float(self.rng.uniform(0.2, 3.0)), float(self.rng.uniform(0.2, 3.0)))
            if options.pop("b_input", True):
                b: TensorRef | np.ndarray = self.input(
                    b_shape, dtype, value_range=options.pop("b_range", None) or b_drawn,
                    name=f"{name}_b")
            else:
                b = self.rng.uniform(*value_range, size=b_shape)
            return self.comparison(op, x, b)
        if op == "CAST":
            return self.cast(x, options.pop("to"))
        if op == "TRANSPOSE_CONV":
            return self.transpose_conv(x, options.pop("filters", 4), **options)
        b_shape = tuple(options.pop("b_shape", (shape[-1], 5)))
        if options.pop("b_input", False):
            rhs: TensorRef | np.ndarray = self.input(b_shape, dtype, value_range=value_range,
                                                     name=f"{name}_b")
        else:
            rhs = self.rng.uniform(-1.0, 1.0, size=b_shape).astype(np.float32)
        return self.batch_matmul(x, rhs, **options)


    # -- arithmetic and activations (issue 20: the ops-math family) ----------------------------

    def _math_quant(self, x: TensorRef, out_quant: tuple[float, int] | None, lo: float,
                    hi: float) -> tuple[tuple[float, int] | None, tuple[float, float]]:
        """Output quantization of an arithmetic op on ``x``: ``out_quant``, or one covering the
        estimated range ``[lo, hi]``; None for float32 and plain integers."""
        if x.dtype not in _QUANTIZED or x.quant is None:
            return None, (lo, hi)
        if out_quant is None:
            out_quant = quantize_params(lo, hi, x.dtype)
        return out_quant, (lo, hi)

    def _math_binary(self, opcode: str, a: TensorRef, b: TensorRef | np.ndarray,
                     lo: float, hi: float, out_quant: tuple[float, int] | None,
                     options: dict[str, Any] | None = None,
                     keep_quant: bool = False) -> TensorRef:
        """A broadcasting binary op; ``keep_quant``: the output takes ``a``'s quantization (an
        op that compares raw values)."""
        if a.dtype != b.dtype:
            raise ValueError(f"{opcode}: operand types differ ({a.dtype} and {b.dtype})")
        shape = tuple(np.broadcast_shapes(a.shape, b.shape))
        if keep_quant:
            q, est = a.quant, (lo, hi)
        else:
            q, est = self._math_quant(a, out_quant, lo, hi)
        y = self._activation(opcode.lower(), shape, a.dtype, q, est)
        self._op(opcode, [a.index, b.index], [y.index], options)
        return y

    def _constant_like(self, b: TensorRef | np.ndarray, like: TensorRef,
                       same_quant: bool = False) -> TensorRef:
        """``b``, or a constant from float values ``b`` of ``like``'s type (quantized with its
        own range, or with ``like``'s quantization when ``same_quant``)."""
        if isinstance(b, TensorRef):
            return b
        values = np.asarray(b, dtype=np.float32)
        if like.dtype == "int32":
            return self.constant(np.rint(values).astype(np.int32), "int32")
        return self.constant(values, like.dtype, quant=like.quant if same_quant else None)

    def sub(self, a: TensorRef, b: TensorRef | np.ndarray, activation: str = "NONE",
            out_quant: tuple[float, int] | None = None) -> TensorRef:
        """SUB ``a - b`` with numpy broadcasting; ``b`` may be a float array (a constant)."""
        _check_choice(activation, ACTIVATIONS, "activation")
        b = self._constant_like(b, a)
        (alo, ahi), (blo, bhi) = self.range_of(a), self.range_of(b)
        lo, hi = _act_range(alo - bhi, ahi - blo, activation)
        options: dict[str, Any] = {"fused_activation_function": activation}
        if a.dtype == "int16":
            options["pot_scale_int16"] = False  # general scales, as the converter writes them
        return self._math_binary("SUB", a, b, lo, hi, out_quant, options)

    def div(self, a: TensorRef, b: TensorRef | np.ndarray, activation: str = "NONE",
            out_quant: tuple[float, int] | None = None) -> TensorRef:
        """DIV ``a / b`` with numpy broadcasting; ``b`` may be a float array (a constant). The
        output range is estimated with divisors no smaller than a quarter of the largest."""
        _check_choice(activation, ACTIVATIONS, "activation")
        b = self._constant_like(b, a)
        (alo, ahi), (blo, bhi) = self.range_of(a), self.range_of(b)
        big = max(abs(blo), abs(bhi), 1e-6)
        divisors = [d for d in (blo, bhi, big / 4, -big / 4) if blo <= d <= bhi and d != 0]
        ratios = [n / d for n in (alo, ahi) for d in divisors] or [alo, ahi]
        lo, hi = _act_range(min(ratios), max(ratios), activation)
        return self._math_binary("DIV", a, b, lo, hi, out_quant,
                                 {"fused_activation_function": activation})

    def squared_difference(self, a: TensorRef, b: TensorRef | np.ndarray,
                           out_quant: tuple[float, int] | None = None) -> TensorRef:
        """SQUARED_DIFFERENCE ``(a - b)^2`` with numpy broadcasting."""
        b = self._constant_like(b, a)
        (alo, ahi), (blo, bhi) = self.range_of(a), self.range_of(b)
        hi = max((alo - bhi) ** 2, (ahi - blo) ** 2)
        return self._math_binary("SQUARED_DIFFERENCE", a, b, 0.0, hi / 2, out_quant)

    def maximum(self, a: TensorRef, b: TensorRef | np.ndarray) -> TensorRef:
        """MAXIMUM with numpy broadcasting. TFLM compares the stored values: a quantized ``b``
        (a float array becomes a constant) and the output take ``a``'s quantization, as
        TFLite's converter writes them."""
        b = self._constant_like(b, a, same_quant=True)
        (alo, ahi), (blo, bhi) = self.range_of(a), self.range_of(b)
        return self._math_binary("MAXIMUM", a, b, max(alo, blo), max(ahi, bhi), None,
                                 keep_quant=True)

    def minimum(self, a: TensorRef, b: TensorRef | np.ndarray) -> TensorRef:
        """MINIMUM with numpy broadcasting; quantization as :meth:`maximum`."""
        b = self._constant_like(b, a, same_quant=True)
        (alo, ahi), (blo, bhi) = self.range_of(a), self.range_of(b)
        return self._math_binary("MINIMUM", a, b, min(alo, blo), min(ahi, bhi), None,
                                 keep_quant=True)

    def prelu(self, x: TensorRef, alpha: TensorRef | np.ndarray,
              out_quant: tuple[float, int] | None = None) -> TensorRef:
        """PRELU ``x >= 0 ? x : x * alpha``, ``alpha`` broadcast against ``x`` (a float array
        becomes a constant: int8 per tensor for int8 and int16 activations, as TFLM takes it)."""
        if not isinstance(alpha, TensorRef):
            values = np.asarray(alpha, dtype=np.float32)
            alpha = self.constant(values, "float32" if x.dtype == "float32" else "int8")
        (lo, hi), (alo, ahi) = self.range_of(x), self.range_of(alpha)
        neg = [min(lo, 0.0) * a for a in (alo, ahi)]
        y_lo, y_hi = min([0.0, *neg]), max([hi, 0.0, *neg])
        shape = tuple(np.broadcast_shapes(x.shape, alpha.shape))
        q, est = self._math_quant(x, out_quant, y_lo, y_hi)
        y = self._activation("prelu", shape, x.dtype, q, est)
        self._op("PRELU", [x.index, alpha.index], [y.index])
        return y

    def _unary(self, opcode: str, x: TensorRef, lo: float, hi: float,
               out_quant: tuple[float, int] | None = None,
               options: dict[str, Any] | None = None, keep_quant: bool = False) -> TensorRef:
        """A one-input op whose output has ``x``'s shape and the range ``[lo, hi]``."""
        if keep_quant:
            q, est = x.quant, (lo, hi)
        else:
            q, est = self._math_quant(x, out_quant, lo, hi)
        if q is None and x.dtype in _QUANTIZED:  # plain integers in, plain integers out
            y = self._add_tensor(self._name(opcode.lower()), x.shape, x.dtype)
            self._ranges[y.index] = est
        else:
            y = self._activation(opcode.lower(), x.shape, x.dtype, q, est)
        self._op(opcode, [x.index], [y.index], options)
        return y

    def abs(self, x: TensorRef, out_quant: tuple[float, int] | None = None) -> TensorRef:
        """ABS (a quantized output with its own range: TFLM requantizes)."""
        lo, hi = self.range_of(x)
        return self._unary("ABS", x, 0.0, max(abs(lo), abs(hi)), out_quant)

    def neg(self, x: TensorRef) -> TensorRef:
        """NEG (float32 in TFLM)."""
        lo, hi = self.range_of(x)
        return self._unary("NEG", x, -hi, -lo)

    def sqrt(self, x: TensorRef) -> TensorRef:
        """SQRT (float32 in TFLM)."""
        return self._unary("SQRT", x, 0.0, math.sqrt(max(self.range_of(x)[1], 0.0)))

    def rsqrt(self, x: TensorRef, out_quant: tuple[float, int] | None = None) -> TensorRef:
        """RSQRT ``1 / sqrt(x)``; the output range is estimated from the input's upper half."""
        hi = max(self.range_of(x)[1], 1e-6)
        return self._unary("RSQRT", x, 0.0, 1.0 / math.sqrt(hi / 8), out_quant)

    def exp(self, x: TensorRef) -> TensorRef:
        """EXP (float32 in TFLM)."""
        lo, hi = self.range_of(x)
        return self._unary("EXP", x, math.exp(min(lo, 30.0)), math.exp(min(hi, 30.0)))

    def log(self, x: TensorRef) -> TensorRef:
        """LOG (float32 in TFLM)."""
        hi = max(self.range_of(x)[1], 1e-6)
        return self._unary("LOG", x, math.log(hi) - 5.0, math.log(hi))

    def floor(self, x: TensorRef) -> TensorRef:
        """FLOOR (float32)."""
        lo, hi = self.range_of(x)
        return self._unary("FLOOR", x, math.floor(lo), math.floor(hi))

    def ceil(self, x: TensorRef) -> TensorRef:
        """CEIL (float32)."""
        lo, hi = self.range_of(x)
        return self._unary("CEIL", x, math.ceil(lo), math.ceil(hi))

    def round(self, x: TensorRef) -> TensorRef:
        """ROUND, half to even (float32)."""
        lo, hi = self.range_of(x)
        return self._unary("ROUND", x, round(lo), round(hi))

    def relu(self, x: TensorRef, out_quant: tuple[float, int] | None = None) -> TensorRef:
        """RELU (a quantized output with its own range: TFLM requantizes)."""
        lo, hi = self.range_of(x)
        return self._unary("RELU", x, *_act_range(lo, hi, "RELU"), out_quant)

    def relu6(self, x: TensorRef) -> TensorRef:
        """RELU6; a quantized output keeps the input's quantization (TFLM clamps the stored
        values without requantizing)."""
        lo, hi = self.range_of(x)
        return self._unary("RELU6", x, *_act_range(lo, hi, "RELU6"), keep_quant=True)

    def relu_n1_to_1(self, x: TensorRef,
                     out_quant: tuple[float, int] | None = None) -> TensorRef:
        """RELU_N1_TO_1 (clamp to [-1, 1]; LiteRT requantizes a quantized output)."""
        lo, hi = self.range_of(x)
        return self._unary("RELU_N1_TO_1", x, *_act_range(lo, hi, "RELU_N1_TO_1"), out_quant)

    def leaky_relu(self, x: TensorRef, alpha: float = 0.2,
                   out_quant: tuple[float, int] | None = None) -> TensorRef:
        """LEAKY_RELU ``x > 0 ? x : alpha * x``."""
        lo, hi = self.range_of(x)
        vals = [v if v > 0 else v * alpha for v in (lo, hi)] + [0.0]
        return self._unary("LEAKY_RELU", x, min(vals), max(vals), out_quant,
                           {"alpha": float(alpha)})

    def hard_swish(self, x: TensorRef, out_quant: tuple[float, int] | None = None) -> TensorRef:
        """HARD_SWISH ``x * relu6(x + 3) / 6``."""
        lo, hi = self.range_of(x)

        def hs(v: float) -> float:
            return v * min(6.0, max(0.0, v + 3.0)) / 6.0

        vals = [hs(lo), hs(hi)] + ([-0.375] if lo < -1.5 < hi else [])
        return self._unary("HARD_SWISH", x, min(vals), max(vals), out_quant)

    def elu(self, x: TensorRef, out_quant: tuple[float, int] | None = None) -> TensorRef:
        """ELU ``x < 0 ? exp(x) - 1 : x``."""
        lo, hi = self.range_of(x)
        return self._unary("ELU", x, math.expm1(min(lo, 0.0)), max(hi, 0.0), out_quant)

    def log_softmax(self, x: TensorRef) -> TensorRef:
        """LOG_SOFTMAX over the last dimension; a quantized output has the scale and zero point
        TFLM requires (int8: 16/256, 127)."""
        lo, hi = self.range_of(x)
        q = (16.0 / 256.0, 127) if x.dtype == "int8" else None
        est = (lo - hi - math.log(max(x.shape[-1], 1)), 0.0)
        return self._unary("LOG_SOFTMAX", x, *est, out_quant=q, keep_quant=False)

    def l2_normalization(self, x: TensorRef) -> TensorRef:
        """L2_NORMALIZATION over the last dimension; a quantized output has the scale and zero
        point TFLite requires (int8: 1/128, 0)."""
        q = (1.0 / 128.0, 0) if x.dtype == "int8" else None
        return self._unary("L2_NORMALIZATION", x, -1.0, 1.0, out_quant=q,
                           options={"fused_activation_function": "NONE"})

    def single_op(
        self,
        op: str,
        dtype: str = "int8",
        input_shape: Sequence[int] | None = None,
        name: str = "input",
        value_range: tuple[float, float] | None = None,
        **options: Any,
    ) -> TensorRef | list[TensorRef]:
        """A new model input named ``name`` feeding one operator ``op``; returns its output
        (SPLIT, SPLIT_V, UNPACK: the list of outputs).

        The input's float range (hence a quantized input's scale and zero point) is
        ``value_range`` or drawn from the builder's generator. ``options`` go to the operator's
        method, plus: ADD/MUL ``b_shape`` (shape of the second operand, default the input's),
        ``b_input`` (True: the second operand is another model input, ``name + "_b"``; False:
        a constant) and ``b_range`` (the second input's float range, default drawn). QUANTIZE
        with a float32 ``dtype`` quantizes (to ``to``, default int8), with a quantized one it
        requantizes (``to`` defaults to the input's type; ``quant`` to a range different from
        the input's). DEQUANTIZE needs a quantized ``dtype``. The shape and data movement
        operators take their method's options over the defaults of :data:`_MOVERS` (see
        :meth:`_single_mover`). MEAN, SUM, REDUCE_MAX,
        REDUCE_MIN: ``axes`` (default (1, 2)), ``keep_dims``, MEAN/SUM ``out_quant``; ARG_MAX,
        ARG_MIN: ``axis``, ``output_type``; the comparisons as ADD (``b_shape``, ``b_input``,
        ``b_range``); LOGICAL_AND/OR/NOT take bool inputs (``b_shape``); SELECT_V2: a bool
        condition input (``cond_shape``), ``y_shape``, ``y_input``; CAST: ``to``;
        TRANSPOSE_CONV: as :meth:`transpose_conv`; BATCH_MATMUL: ``b_shape`` (default
        ``(last dim, 5)``), ``b_input`` (default False: a constant right-hand side), ``adj_x``,
        ``adj_y``.
        SUB, DIV, SQUARED_DIFFERENCE, MAXIMUM and MINIMUM take ``b_shape``, ``b_input`` and
        ``b_range`` as ADD; PRELU ``alpha_shape`` (default: the last dimension), alphas drawn
        in [-0.5, 0.5].
        """
        if op not in SINGLE_OPS:
            raise ValueError(f"unknown operator {op!r}; choose one of {sorted(SINGLE_OPS)}")
        if op == "DEQUANTIZE" and dtype not in _QUANTIZED:
            raise ValueError("DEQUANTIZE takes a quantized input: use dtype 'int8' or 'int16'")
        shape = tuple(input_shape or _DEFAULT_SHAPES[op])
        drawn = (-float(self.rng.uniform(0.2, 3.0)), float(self.rng.uniform(0.2, 3.0)))
        value_range = drawn if value_range is None else value_range
        in_quant = None
        if op == "QUANTIZE" and dtype == "int32":  # a quantized int32 input (+-2^20 spans it)
            in_quant = (float(np.float32(max(map(abs, value_range)) / (1 << 20))), 0)
        if op in REDUCE_FAMILY_OPS:
            return self._single_op_reduce_family(op, dtype, shape, name, value_range, options)
        x = self.input(shape, dtype, quant=in_quant, value_range=value_range, name=name)
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
        if op in _MOVERS:  # shape and data movement (issue 20)
            return self._single_mover(op, x, name, dtype, options)
        if op == "RESHAPE":
            return self.reshape(x, options.pop("shape", (1, -1)), **options)
        if op == "SQUEEZE":
            return self.squeeze(x, **options)
        if op == "EXPAND_DIMS":
            return self.expand_dims(x, options.pop("axis", 0), **options)
        if op == "SOFTMAX":
            return self.softmax(x, **options)
        if op == "LOGISTIC":
            return self.logistic(x, **options)
        if op == "TANH":
            return self.tanh(x, **options)
        if op == "QUANTIZE":
            to = options.pop("to", "int8" if dtype in ("float32", "int32") else dtype)
            if "quant" not in options:
                lo, hi = value_range
                options["quant"] = quantize_params(lo * float(self.rng.uniform(0.5, 1.5)),
                                                   hi * float(self.rng.uniform(0.5, 1.5)),
                                                   dtype=to if to in _QUANTIZED else "int16")
                if to not in _QUANTIZED:  # int32: a finer scale than int16's
                    options["quant"] = (options["quant"][0] / 64, 0)
            return self.quantize(x, dtype=to, **options)
        if op in _MATH_BINARY:
            return self._single_math_binary(op, x, name, **options)
        if op == "PRELU":
            alpha_shape = tuple(options.pop("alpha_shape", shape[-1:]))
            alpha = self.rng.uniform(-0.5, 0.5, size=alpha_shape).astype(np.float32)
            return self.prelu(x, alpha, **options)
        if op in _MATH_UNARY:
            return getattr(self, _MATH_UNARY[op])(x, **options)
        return self.dequantize(x, **options)

    def _single_mover(self, op: str, x: TensorRef, name: str, dtype: str,
                      options: dict[str, Any]) -> TensorRef | list[TensorRef]:
        """The shape and data movement operators of :meth:`single_op`: ``options`` over the
        defaults of :data:`_MOVERS`; CONCATENATION and PACK take a second input
        ``name + "_b"`` (shape ``b_shape``, default the input's; ``b_input`` False: a
        constant), FILL fills ``dims`` with the one-element input made a scalar by a RESHAPE
        (TFLM's interpreter takes no scalar model input)."""
        opts = {**_MOVERS[op], **options}
        if op in ("CONCATENATION", "PACK"):
            b_shape = tuple(opts.pop("b_shape", x.shape))
            if opts.pop("b_input", True):
                b: TensorRef | np.ndarray = self.input(b_shape, dtype, quant=x.quant,
                                                       name=f"{name}_b")
            else:
                b = self.rng.uniform(-1.0, 1.0, size=b_shape)
            return getattr(self, op.lower())([x, b], **opts)
        if op == "FILL":  # the value: the one-element input as a scalar
            return self.fill(opts.pop("dims"), self.reshape(x, ()), **opts)
        return getattr(self, "pad" if op == "PADV2" else op.lower())(x, **opts)

    def _single_math_binary(self, op: str, x: TensorRef, name: str, b_shape: Sequence[int] |
                            None = None, b_input: bool = True,
                            b_range: tuple[float, float] | None = None,
                            **options: Any) -> TensorRef:
        """The second operand of a binary op of the ops-math family (see :meth:`single_op`):
        another input (for MAXIMUM/MINIMUM with ``x``'s quantization) or a constant (a DIV
        divisor never zero)."""
        shape = tuple(x.shape if b_shape is None else b_shape)
        drawn = (-float(self.rng.uniform(0.2, 3.0)), float(self.rng.uniform(0.2, 3.0)))
        b_range = b_range or drawn
        if b_input:
            same = op in ("MAXIMUM", "MINIMUM") and x.quant is not None
            b: TensorRef | np.ndarray = self.input(shape, x.dtype, quant=x.quant if same else None,
                                                   value_range=b_range, name=f"{name}_b")
        elif op == "DIV":
            sign = self.rng.choice(np.array([-1.0, 1.0]), size=shape)
            if x.dtype == "int32":
                b = (sign * self.rng.integers(1, 100, size=shape)).astype(np.float32)
            else:
                b = (sign * self.rng.uniform(0.25, 2.0, size=shape)).astype(np.float32)
        elif x.dtype == "int32":
            b = self.rng.integers(-(1 << 20), 1 << 20, size=shape).astype(np.float32)
        else:
            b = self.rng.uniform(-2.0, 2.0, size=shape).astype(np.float32)
        return getattr(self, _MATH_BINARY[op])(x, b, **options)

    # -- TFLM's signal library (issue 20: the ops-signal family) --------------------------------

    def signal_op(self, name: str, inputs: Sequence[TensorRef],
                  outputs: Sequence[tuple[Sequence[int], str]],
                  options: dict[str, Any] | bytes) -> list[TensorRef]:
        """Custom operator ``name`` of TFLM's signal library, written as TFLite's converter
        writes a TensorFlow custom op: plain (unquantized) outputs ``(shape, dtype)`` named
        after the op, the op's attributes as a FlexBuffers map in ``custom_options`` (or
        ``options`` bytes as they are)."""
        stem = "signal_" + "".join("_" + c.lower() if c.isupper() else c
                                   for c in name[len("Signal"):]).lstrip("_")
        outs = [self._add_tensor(self._name(stem), shape, dtype) for shape, dtype in outputs]
        raw = options if isinstance(options, bytes) else bytes(flexbuffers.Dumps(options))
        self._ops.append(_OpSpec("CUSTOM", [t.index for t in inputs], [t.index for t in outs],
                                 {}, name, raw))
        return outs

    def _int16_constant(self, values: np.ndarray | Sequence[int], stem: str) -> TensorRef:
        return self._add_tensor(self._name(stem), np.shape(values), "int16",
                                data=np.asarray(values, np.int16))

    def signal_window(self, x: TensorRef, weights: np.ndarray | TensorRef | None = None,
                      shift: int = 12) -> TensorRef:
        """SignalWindow: ``(x * w) >> shift`` saturated to int16 along the innermost
        dimension; ``weights`` default to a Hann window in Q``shift``."""
        if weights is None:
            weights = signal_tables.hann_window(x.shape[-1], shift)
        w = weights if isinstance(weights, TensorRef) else self._int16_constant(weights, "window")
        return self.signal_op("SignalWindow", [x, w], [(x.shape, "int16")], {"shift": shift})[0]

    def signal_fft_auto_scale(self, x: TensorRef) -> tuple[TensorRef, TensorRef]:
        """SignalFftAutoScale: ``x`` shifted left as far as its largest magnitude allows, and
        the shift (an int32 scalar)."""
        y, s = self.signal_op("SignalFftAutoScale", [x], [(x.shape, "int16"), ((), "int32")], {})
        return y, s

    def _fft_options(self, x: TensorRef, fft_length: int) -> dict[str, Any]:
        return {"T": TENSOR_TYPES[x.dtype], "fft_length": int(fft_length)}

    def signal_rfft(self, x: TensorRef, fft_length: int) -> TensorRef:
        """SignalRfft of the innermost dimension (zero-padded to ``fft_length``): the
        ``fft_length / 2 + 1`` complex bins as (real, imaginary) pairs, of ``x``'s type."""
        shape = (*x.shape[:-1], (fft_length // 2 + 1) * 2)
        return self.signal_op("SignalRfft", [x], [(shape, x.dtype)],
                            self._fft_options(x, fft_length))[0]

    def signal_irfft(self, x: TensorRef, fft_length: int) -> TensorRef:
        """SignalIrfft: ``fft_length`` real samples from ``fft_length / 2 + 1`` complex bins."""
        shape = (*x.shape[:-1], int(fft_length))
        return self.signal_op("SignalIrfft", [x], [(shape, x.dtype)],
                            self._fft_options(x, fft_length))[0]

    def signal_energy(self, x: TensorRef, start_index: int = 0,
                      end_index: int | None = None) -> TensorRef:
        """SignalEnergy: ``re^2 + im^2`` (uint32) of the complex bins ``[start, end)``."""
        bins = x.shape[0] // 2
        end = bins if end_index is None else end_index
        return self.signal_op("SignalEnergy", [x], [((bins,), "uint32")],
                            {"end_index": int(end), "start_index": int(start_index)})[0]

    def signal_filter_bank(self, x: TensorRef, num_channels: int = 40,
                           sample_rate: float = 16000.0, lower_band_limit: float = 125.0,
                           upper_band_limit: float = 7500.0,
                           tables: signal_tables.FilterBankTables | None = None) -> TensorRef:
        """SignalFilterBank: ``num_channels`` mel channels (uint64) of the energy spectrum
        ``x``, the weight and channel tables from :func:`.signal_tables.filter_bank_tables`
        unless ``tables`` are given."""
        if tables is None:
            tables = signal_tables.filter_bank_tables(x.shape[0], sample_rate, num_channels,
                                                      lower_band_limit, upper_band_limit)
        consts = [self._int16_constant(v, f"signal_filter_bank/{stem}") for v, stem in (
            (tables.weights, "weights"), (tables.unweights, "unweights"),
            (tables.freq_starts, "channel_frequency_starts"),
            (tables.weight_starts, "channel_weight_starts"), (tables.widths, "channel_widths"))]
        return self.signal_op("SignalFilterBank", [x, *consts], [((num_channels,), "uint64")],
                            {"num_channels": int(num_channels)})[0]

    def signal_filter_bank_square_root(self, x: TensorRef,
                                       scale_bits: int | TensorRef = 0) -> TensorRef:
        """SignalFilterBankSquareRoot: ``sqrt(x) >> scale_bits`` (uint32); ``scale_bits`` an
        int32 scalar tensor (the FFT auto scale's shift) or a constant."""
        s = scale_bits if isinstance(scale_bits, TensorRef) else self._add_tensor(
            self._name("scale_bits"), (), "int32", data=np.int32(scale_bits))
        return self.signal_op("SignalFilterBankSquareRoot", [x, s], [(x.shape, "uint32")], {})[0]

    def signal_filter_bank_spectral_subtraction(
            self, x: TensorRef, smoothing: float = 0.025, alternate_smoothing: float = 0.06,
            smoothing_bits: int = 10, min_signal_remaining: float = 0.05,
            clamping: bool = False, spectral_subtraction_bits: int = 14,
            coefficients: dict[str, int] | None = None) -> tuple[TensorRef, TensorRef]:
        """SignalFilterBankSpectralSubtraction: the channels less their running noise
        estimate, and the estimate (both uint32); the coefficients in
        Q``spectral_subtraction_bits`` as TFLM's wrapper computes them, or ``coefficients``."""
        coeffs = coefficients or signal_tables.spectral_subtraction_coefficients(
            smoothing, alternate_smoothing, min_signal_remaining, spectral_subtraction_bits)
        opts = {**coeffs, "num_channels": int(x.shape[0]), "smoothing_bits": int(smoothing_bits),
                "clamping": bool(clamping),
                "spectral_subtraction_bits": int(spectral_subtraction_bits)}
        y, noise = self.signal_op("SignalFilterBankSpectralSubtraction", [x],
                                [(x.shape, "uint32"), (x.shape, "uint32")], opts)
        return y, noise

    def signal_pcan(self, x: TensorRef, noise_estimate: TensorRef, strength: float = 0.95,
                    offset: float = 80.0, gain_bits: int = 21, smoothing_bits: int = 10,
                    input_correction_bits: int = 3, snr_shift: int = 6,
                    gain_lut: np.ndarray | None = None) -> TensorRef:
        """SignalPCAN: per-channel gain control of ``x`` by ``noise_estimate`` through the
        gain table of :func:`.signal_tables.pcan_gain_lut` (or ``gain_lut``); ``snr_shift`` 6
        as TFLM's wrapper writes it."""
        if gain_lut is None:
            gain_lut = signal_tables.pcan_gain_lut(strength, offset,
                                                   smoothing_bits - input_correction_bits,
                                                   gain_bits)
        lut = self._int16_constant(gain_lut, "signal_pcan/gain_lut")
        return self.signal_op("SignalPCAN", [x, noise_estimate, lut], [(x.shape, "uint32")],
                            {"snr_shift": int(snr_shift)})[0]

    def signal_filter_bank_log(self, x: TensorRef, output_scale: int = 64,
                               input_correction_bits: int = 3) -> TensorRef:
        """SignalFilterBankLog: ``log(x << input_correction_bits) * output_scale`` (int16)."""
        return self.signal_op("SignalFilterBankLog", [x], [(x.shape, "int16")],
                            {"input_correction_bits": int(input_correction_bits),
                             "output_scale": int(output_scale)})[0]

    def signal_framer(self, x: TensorRef, frame_size: int, frame_step: int,
                      prefill: bool = False) -> tuple[TensorRef, TensorRef]:
        """SignalFramer: overlapping frames of ``frame_size`` every ``frame_step`` samples of
        the innermost dimension (state kept across invocations), and whether they are valid."""
        shape = (*x.shape[:-1], x.shape[-1] // frame_step, frame_size)
        y, valid = self.signal_op("SignalFramer", [x], [(shape, "int16"), ((), "bool")],
                                {"frame_size": int(frame_size), "frame_step": int(frame_step),
                                 "prefill": bool(prefill)})
        return y, valid

    def signal_stacker(self, x: TensorRef, left_context: int = 0, right_context: int = 0,
                       step: int = 1) -> tuple[TensorRef, TensorRef]:
        """SignalStacker: ``left + 1 + right`` successive frames ``x`` stacked (state kept
        across invocations), and whether the output is valid."""
        n = x.shape[0]
        shape = (n * (left_context + 1 + right_context),)
        y, valid = self.signal_op("SignalStacker", [x], [(shape, "int16"), ((), "bool")],
                                {"num_channels": int(n),
                                 "stacker_left_context": int(left_context),
                                 "stacker_right_context": int(right_context),
                                 "stacker_step": int(step)})
        return y, valid

    def signal_delay(self, x: TensorRef, delay_length: int) -> TensorRef:
        """SignalDelay: the innermost dimension delayed by ``delay_length`` samples."""
        return self.signal_op("SignalDelay", [x], [(x.shape, "int16")],
                            {"delay_length": int(delay_length)})[0]

    def signal_overlap_add(self, x: TensorRef, frame_step: int) -> TensorRef:
        """SignalOverlapAdd: frames ``[..., n, size]`` overlapped every ``frame_step`` samples
        and added, ``[..., n * frame_step]`` (state kept across invocations)."""
        shape = (*x.shape[:-2], x.shape[-2] * frame_step)
        return self.signal_op("SignalOverlapAdd", [x], [(shape, x.dtype)],
                            {"T": TENSOR_TYPES[x.dtype], "frame_step": int(frame_step)})[0]

    # -- serialization ------------------------------------------------------------------------

    def build(self) -> bytes:
        """Serialize the whole model (every subgraph) as a TFLite flatbuffer (schema version 3,
        identifier ``TFL3``)."""
        main = self._shared.subgraphs[0]
        if not main._inputs or not main._outputs:
            raise ValueError("a model needs at least one input() and one output()")
        b = flatbuffers.Builder(1024)

        buffer_offsets = []
        for data in self._buffers:
            values: dict[str, Any] = {}
            if data:
                values["data"] = Ref(_byte_vector(b, data, _BUFFER_ALIGNMENT_BYTES))
            buffer_offsets.append(write_table(b, "Buffer", values))

        opcodes: list[tuple[str, str | None]] = []
        subgraph_offsets = [sg._write_subgraph(b, opcodes) for sg in self._shared.subgraphs]

        code_offsets = []
        for name, custom_code in opcodes:
            code = BUILTIN_OPS[name]
            values = {"deprecated_builtin_code": min(code, 127),
                      "version": _OPCODE_VERSIONS.get(name, 1), "builtin_code": name}
            if custom_code is not None:
                values = {"deprecated_builtin_code": code, "custom_code": custom_code,
                          "version": 1, "builtin_code": name}
            code_offsets.append(write_table(b, "OperatorCode", values))

        codes_vec = _table_vector(b, code_offsets)
        subgraphs_vec = _table_vector(b, subgraph_offsets)
        desc = b.CreateString(self.description)
        buffers_vec = _table_vector(b, buffer_offsets)
        model = write_table(b, "Model", {
            "version": _SCHEMA_VERSION, "operator_codes": Ref(codes_vec),
            "subgraphs": Ref(subgraphs_vec), "description": Ref(desc),
            "buffers": Ref(buffers_vec)})
        b.Finish(model, file_identifier=_FILE_IDENTIFIER)
        return bytes(b.Output())

    def _write_subgraph(self, b: flatbuffers.Builder, opcodes: list[tuple[str, str | None]]
                        ) -> int:
        tensor_offsets = []
        for t in self._tensors:
            shape_off = b.CreateNumpyVector(np.asarray(t.shape, dtype=np.int32))
            name_off = b.CreateString(t.name)
            values: dict[str, Any] = {"shape": Ref(shape_off), "type": t.dtype,
                                      "buffer": t.buffer, "name": Ref(name_off)}
            if t.scale is not None:
                values["quantization"] = Ref(write_table(b, "QuantizationParameters", {
                    "scale": t.scale, "zero_point": t.zero_point,
                    "quantized_dimension": t.quantized_dimension}))
            if t.is_variable:
                values["is_variable"] = True
            tensor_offsets.append(write_table(b, "Tensor", values))

        op_offsets = []
        for op in self._ops:
            key = (op.opcode, op.custom_code)
            if key not in opcodes:
                opcodes.append(key)
            in_off = b.CreateNumpyVector(np.asarray(op.inputs, dtype=np.int32))
            out_off = b.CreateNumpyVector(np.asarray(op.outputs, dtype=np.int32))
            table = schema.OPERATOR_OPTIONS.get(op.opcode)
            values = {"opcode_index": opcodes.index(key), "inputs": Ref(in_off),
                      "outputs": Ref(out_off)}
            if table is not None:
                options_off = write_table(b, table, op.options)
                values["builtin_options_type"] = schema.OPTIONS_TAGS[table]
                values["builtin_options"] = Ref(options_off)
            if op.custom_options:
                values["custom_options"] = Ref(_byte_vector(b, op.custom_options, 1))
            op_offsets.append(write_table(b, "Operator", values))

        tensors_vec = _table_vector(b, tensor_offsets)
        inputs_vec = b.CreateNumpyVector(np.asarray(self._inputs, dtype=np.int32))
        outputs_vec = b.CreateNumpyVector(np.asarray(self._outputs, dtype=np.int32))
        ops_vec = _table_vector(b, op_offsets)
        sg_name = b.CreateString(self.name)
        return write_table(b, "SubGraph", {
            "tensors": Ref(tensors_vec), "inputs": Ref(inputs_vec), "outputs": Ref(outputs_vec),
            "operators": Ref(ops_vec), "name": Ref(sg_name)})


# --- writing tables from the schema -----------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """An offset already written to the builder (a vector, string or table), for
    :func:`write_table`."""

    offset: int


#: numpy element type of each scalar vector element type of the schema.
_VECTOR_DTYPES = {"int": np.int32, "uint": np.uint32, "long": np.int64, "ulong": np.uint64,
                  "float": np.float32, "double": np.float64, "byte": np.int8, "ubyte": np.uint8,
                  "bool": np.uint8, "short": np.int16, "ushort": np.uint16}
#: flatbuffers' Prepend*Slot of each scalar storage type.
_PREPEND = {"bool": "PrependBoolSlot", "byte": "PrependInt8Slot", "int8": "PrependInt8Slot",
            "ubyte": "PrependUint8Slot", "uint8": "PrependUint8Slot",
            "short": "PrependInt16Slot", "ushort": "PrependUint16Slot",
            "int": "PrependInt32Slot", "int32": "PrependInt32Slot", "uint": "PrependUint32Slot",
            "long": "PrependInt64Slot", "ulong": "PrependUint64Slot",
            "float": "PrependFloat32Slot", "double": "PrependFloat64Slot"}


def write_table(b: flatbuffers.Builder, table: str, values: dict[str, Any]) -> int:
    """Write schema table ``table`` (an options table or a structural one) with ``values``
    (field name -> decoded value: enum member names, dtype names for ``TensorType``, lists for
    vectors, str for strings, :class:`Ref` for anything already written); returns its offset.
    Fields equal to their default are left out, as flatbuffers does."""
    fields = schema.table_fields(table)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"{table} has no field {', '.join(unknown)}")
    offsets: dict[str, int] = {}
    for name, value in values.items():
        f = fields[name]
        if isinstance(value, Ref):
            offsets[name] = value.offset
        elif f.kind == "vector":
            if f.type not in _VECTOR_DTYPES:
                raise ValueError(f"{table}.{name}: pass a Ref to the written vector")
            offsets[name] = b.CreateNumpyVector(np.asarray(value, dtype=_VECTOR_DTYPES[f.type]))
        elif f.kind == "string":
            offsets[name] = b.CreateString(value)
        elif f.kind in ("table", "union"):
            raise ValueError(f"{table}.{name}: pass a Ref to the written table")
    b.StartObject(len(fields))
    for f in sorted((fields[n] for n in values), key=lambda f: f.slot):
        if f.name in offsets:
            b.PrependUOffsetTRelativeSlot(f.slot, offsets[f.name], 0)
            continue
        value, default = f.encode(values[f.name]), f.encode(f.default)
        if f.storage == "bool":
            value, default = bool(value), bool(default)
        getattr(b, _PREPEND[f.storage])(f.slot, value, default)
    return b.EndObject()


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


#: Weight/activation types of :func:`single_op_model`: int8 (weights per tensor or per channel),
#: float32, int16x8 (int16 activations, int8 weights per tensor or per channel), int32 (plain
#: int32 inputs; for QUANTIZE a quantized int32 input), and for the operators that only move
#: data int64 and bool inputs.
MODES = ("int8", "int8_per_channel", "float32", "int16x8", "int16x8_per_channel", "int32",
         "int64", "bool")

_DEFAULT_SHAPES: dict[str, tuple[int, ...]] = {
    "CONV_2D": (1, 9, 9, 3), "DEPTHWISE_CONV_2D": (1, 9, 9, 3), "FULLY_CONNECTED": (1, 12),
    "AVERAGE_POOL_2D": (1, 8, 8, 3), "MAX_POOL_2D": (1, 8, 8, 3), "ADD": (1, 4, 4, 3),
    "MUL": (1, 4, 4, 3), "RESHAPE": (1, 4, 4, 3), "SOFTMAX": (1, 10), "QUANTIZE": (1, 4, 4, 3),
    "DEQUANTIZE": (1, 4, 4, 3), "SQUEEZE": (1, 4, 1, 3), "EXPAND_DIMS": (1, 4, 3),
    # shape and data movement (issue 20)
    "PAD": (1, 4, 4, 3), "PADV2": (1, 4, 4, 3), "MIRROR_PAD": (1, 4, 4, 3),
    "CONCATENATION": (1, 4, 4, 3), "SPLIT": (1, 4, 4, 6), "SPLIT_V": (1, 4, 4, 6),
    "SLICE": (1, 4, 4, 3), "STRIDED_SLICE": (1, 4, 4, 3), "TRANSPOSE": (1, 4, 4, 3),
    "PACK": (2, 3), "UNPACK": (3, 2, 4), "GATHER": (5, 3), "GATHER_ND": (4, 3, 2),
    "SHAPE": (1, 4, 4, 3), "BROADCAST_TO": (1, 1, 3), "DEPTH_TO_SPACE": (1, 2, 3, 8),
    "SPACE_TO_DEPTH": (1, 4, 6, 2), "BATCH_TO_SPACE_ND": (4, 2, 3, 2),
    "SPACE_TO_BATCH_ND": (1, 4, 6, 2), "RESIZE_NEAREST_NEIGHBOR": (1, 3, 4, 2),
    "RESIZE_BILINEAR": (1, 3, 4, 2), "ZEROS_LIKE": (1, 4, 4, 3), "FILL": (1,),
    # reductions, comparisons, types and compute (the ops-reduce family)
    "MEAN": (1, 4, 4, 3), "SUM": (1, 4, 4, 3), "REDUCE_MAX": (1, 4, 4, 3),
    "REDUCE_MIN": (1, 4, 4, 3), "ARG_MAX": (2, 5), "ARG_MIN": (2, 5), "EQUAL": (2, 3, 4),
    "NOT_EQUAL": (2, 3, 4), "LESS": (2, 3, 4), "LESS_EQUAL": (2, 3, 4), "GREATER": (2, 3, 4),
    "GREATER_EQUAL": (2, 3, 4), "LOGICAL_AND": (2, 3, 4), "LOGICAL_OR": (2, 3, 4),
    "LOGICAL_NOT": (2, 3, 4), "SELECT_V2": (2, 3, 4), "CAST": (2, 3, 4),
    "TRANSPOSE_CONV": (1, 4, 4, 3), "BATCH_MATMUL": (1, 3, 4),
    # the ops-math family (issue 20)
    "SUB": (1, 4, 4, 3), "DIV": (1, 4, 4, 3), "SQUARED_DIFFERENCE": (1, 4, 4, 3),
    "MAXIMUM": (1, 4, 4, 3), "MINIMUM": (1, 4, 4, 3), "PRELU": (1, 4, 4, 3), "ABS": (1, 4, 4, 3),
    "NEG": (1, 4, 4, 3), "SQRT": (1, 4, 4, 3), "RSQRT": (1, 4, 4, 3), "EXP": (1, 4, 4, 3),
    "LOG": (1, 4, 4, 3), "FLOOR": (1, 4, 4, 3), "CEIL": (1, 4, 4, 3), "ROUND": (1, 4, 4, 3),
    "RELU": (1, 4, 4, 3), "RELU6": (1, 4, 4, 3), "RELU_N1_TO_1": (1, 4, 4, 3),
    "LEAKY_RELU": (1, 4, 4, 3), "HARD_SWISH": (1, 4, 4, 3), "LOG_SOFTMAX": (1, 10),
    "ELU": (1, 4, 4, 3), "L2_NORMALIZATION": (1, 10),
    # sequence models (issue 20, state family)
    "LOGISTIC": (1, 4, 4, 3), "TANH": (1, 4, 4, 3),
}
#: Default options of the shape and data movement operators in :meth:`ModelBuilder.single_op`.
_MOVERS: dict[str, dict[str, Any]] = {
    "PAD": {"paddings": ((0, 0), (1, 2), (2, 0), (0, 1))},
    "PADV2": {"paddings": ((0, 0), (1, 2), (2, 0), (0, 1)), "value": 0.5},
    "MIRROR_PAD": {"paddings": ((0, 0), (1, 2), (2, 0), (0, 1))},
    "CONCATENATION": {"axis": -1}, "SPLIT": {"num_splits": 2, "axis": -1},
    "SPLIT_V": {"sizes": (1, -1, 2), "axis": -1},
    "SLICE": {"begin": (0, 1, 0, 1), "size": (1, 2, -1, 2)},
    "STRIDED_SLICE": {"begin": (0, 1, 3, 0), "end": (1, 4, 0, 3), "strides": (1, 2, -1, 1)},
    "TRANSPOSE": {"perm": (0, 3, 1, 2)}, "PACK": {"axis": 0}, "UNPACK": {"axis": 1},
    "GATHER": {"indices": (4, 0, 2, 2)}, "GATHER_ND": {"indices": ((0, 1), (3, 2), (1, 0))},
    "SHAPE": {}, "BROADCAST_TO": {"shape": (2, 4, 3)}, "DEPTH_TO_SPACE": {"block_size": 2},
    "SPACE_TO_DEPTH": {"block_size": 2},
    "BATCH_TO_SPACE_ND": {"block": (2, 2), "crops": ((0, 1), (1, 0))},
    "SPACE_TO_BATCH_ND": {"block": (2, 2), "paddings": ((1, 1), (0, 2))},
    "RESIZE_NEAREST_NEIGHBOR": {"size": (5, 7)}, "RESIZE_BILINEAR": {"size": (5, 7)},
    "ZEROS_LIKE": {}, "FILL": {"dims": (2, 3)},
}
#: The comparison operators (:meth:`ModelBuilder.comparison`).
COMPARISONS = ("EQUAL", "NOT_EQUAL", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL")
#: The single_op operators of the reductions, comparisons, types and compute family.
REDUCE_FAMILY_OPS = ("MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "ARG_MAX", "ARG_MIN",
                     *COMPARISONS, "LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT", "SELECT_V2",
                     "CAST", "TRANSPOSE_CONV", "BATCH_MATMUL")
#: The ops-math family's binary operators and unary ones, by their builder method.
_MATH_BINARY = {"SUB": "sub", "DIV": "div", "SQUARED_DIFFERENCE": "squared_difference",
                "MAXIMUM": "maximum", "MINIMUM": "minimum"}
_MATH_UNARY = {"ABS": "abs", "NEG": "neg", "SQRT": "sqrt", "RSQRT": "rsqrt", "EXP": "exp",
               "LOG": "log", "FLOOR": "floor", "CEIL": "ceil", "ROUND": "round", "RELU": "relu",
               "RELU6": "relu6", "RELU_N1_TO_1": "relu_n1_to_1", "LEAKY_RELU": "leaky_relu",
               "HARD_SWISH": "hard_swish", "LOG_SOFTMAX": "log_softmax", "ELU": "elu",
               "L2_NORMALIZATION": "l2_normalization"}
#: The operators :meth:`ModelBuilder.single_op` builds.
SINGLE_OPS = tuple(_DEFAULT_SHAPES)


def mode_dtype(mode: str) -> str:
    """The activation type of a :data:`MODES` entry (``int16x8_per_channel`` -> ``int16``)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {list(MODES)}")
    return {"float32": "float32", "int8": "int8", "int8_per_channel": "int8",
            "int32": "int32", "int64": "int64", "bool": "bool"}.get(mode, "int16")


def single_op_model(
    op: str,
    mode: str = "int8",
    seed: int = 0,
    input_shape: Sequence[int] | None = None,
    **options: Any,
) -> bytes:
    """A model made of one operator ``op`` (one of :data:`SINGLE_OPS`) with ``options``.

    ``mode`` is one of :data:`MODES`; weights are per-channel in the ``*_per_channel`` modes.
    The input range (hence a quantized input's scale and zero point) and every weight are drawn
    from ``seed``. See :meth:`ModelBuilder.single_op` for ``options``.
    """
    dtype = mode_dtype(mode)
    mb = ModelBuilder(seed=seed, per_channel=mode.endswith("_per_channel"),
                      description=f"{op} {mode} seed {seed}")
    out = mb.single_op(op, dtype, input_shape, **options)
    for t in out if isinstance(out, list) else [out]:
        mb.output(t)
    return mb.build()

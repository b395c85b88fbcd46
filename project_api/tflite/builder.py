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
from dataclasses import dataclass
from typing import Any

import flatbuffers
import numpy as np

from project_api.tflite import schema
from project_api.tflite.build_elementwise import ElementwiseOps
from project_api.tflite.build_shape import ShapeOps
from project_api.tflite.build_signal import SignalOps

# The parts' private names the tests reach through this module.
from project_api.tflite.build_single import _MATH_BINARY as _MATH_BINARY
from project_api.tflite.build_single import _MOVERS as _MOVERS
from project_api.tflite.build_single import MODES, SINGLE_OPS, SingleOpModels, mode_dtype
from project_api.tflite.build_weighted import WeightedLayers
from project_api.tflite.flatbuffer import (
    _BUFFER_ALIGNMENT_BYTES,
    _FILE_IDENTIFIER,
    _OPCODE_VERSIONS,
    _SCHEMA_VERSION,
    Ref,
    _byte_vector,
    _table_vector,
    write_table,
)
from project_api.tflite.tensors import (
    _NP_DTYPES,
    _QUANTIZED,
    ACTIVATIONS,
    BUILTIN_OPS,
    BUILTIN_OPTIONS,
    COMPARISONS,
    PADDINGS,
    TENSOR_TYPES,
    TensorRef,
    _act_range,
    _check_choice,
    _OpSpec,
    _TensorSpec,
    dequantize_array,
    quantize_array,
    quantize_params,
    symmetric_scales,
)
from project_api.tflite.tensors import _pair as _pair

__all__ = [
    "COMPARISONS",
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


@dataclass
class _Shared:
    """What the subgraphs of one model share: the buffers and the subgraph list."""

    buffers: list[bytes]
    subgraphs: list[ModelBuilder]
    description: str


class ModelBuilder(WeightedLayers, ElementwiseOps, ShapeOps, SignalOps, SingleOpModels):
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

    def _operand(self, b: TensorRef | np.ndarray, like: TensorRef) -> TensorRef:
        if isinstance(b, TensorRef):
            return b
        return self.constant(np.asarray(b, dtype=np.float32), like.dtype)

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

    def _operand_like(self, b: TensorRef | np.ndarray, like: TensorRef) -> TensorRef:
        """``b``, or a constant of ``like``'s type from values ``b`` (quantized: float values
        under ``like``'s quantization)."""
        if isinstance(b, TensorRef):
            return b
        b = np.asarray(b)
        if like.dtype in _QUANTIZED:
            return self.constant(b.astype(np.float32), like.dtype, quant=like.quant)
        return self.constant(b.astype(_NP_DTYPES[like.dtype]), like.dtype)

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

"""Building the elementwise operators: activations, arithmetic, comparisons and logic, casts and
(de)quantization, softmax and normalization.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from project_api.tflite.tensors import (
    _QUANTIZED,
    ACTIVATIONS,
    COMPARISONS,
    TENSOR_TYPES,
    TensorRef,
    _act_range,
    _check_choice,
    quantize_params,
)


class ElementwiseOps:
    """The elementwise operators of :class:`~project_api.tflite.builder.ModelBuilder`."""

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

"""Shared preparation of the ops with constant weights and an optional bias: CONV_2D,
DEPTHWISE_CONV_2D and FULLY_CONNECTED (operands, float32 weights and bias, int8 requantization)."""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator, Tensor

from ...errors import UnsupportedOperatorError
from .. import quantize as q
from .common import (
    ConstArray,
    check_activation,
    check_counts,
    check_dtype,
    check_symmetric,
    per_tensor,
    quantized_range,
    tensor_in,
    tensor_out,
    unsupported,
)


def weighted_operands(op: Operator,
                      graph: Graph) -> tuple[Tensor, Tensor, Tensor | None, Tensor, str]:
    """(input, constant weights, constant bias or None, output, fused activation)."""
    check_counts(op, (2, 3))
    x = tensor_in(graph, op, 0, const=False)
    w = tensor_in(graph, op, 1, const=True)
    b = tensor_in(graph, op, 2, const=True, optional=True)
    y = tensor_out(graph, op)
    act = check_activation(op)
    return x, w, b, y, act


def dequantized_weights(op: Operator | None, w: Tensor, axis: int) -> np.ndarray:
    """float32 weights of a hybrid op: ``float32(scale) * float32(q - zero_point)``."""
    if w.quant is None or w.data is None:
        what = f"weights '{w.name}' are {w.dtype} without quantization"
        raise unsupported(op, what) if op is not None else UnsupportedOperatorError(what)
    scale = np.asarray(w.quant.scale, dtype=np.float32)
    zp = np.asarray(w.quant.zero_point, dtype=np.float32)
    shape = [1] * w.data.ndim
    if len(scale) > 1:
        shape[axis] = len(scale)
    return ((w.data.astype(np.float32) - zp.reshape(shape)) * scale.reshape(shape)).astype(
        np.float32)


def float_weights_and_bias(op: Operator, w: Tensor, b: Tensor | None, out_ch: int, axis: int,
                           what: str) -> tuple[np.ndarray, np.ndarray]:
    """float32 weights (float32 or int8 hybrid, ``axis`` the per-channel axis) and the bias
    (zeros when absent) of a float32 op; ``what`` names the weights in errors."""
    if w.dtype == "float32":
        wf = w.data.astype(np.float32)
    elif w.dtype == "int8":
        wf = dequantized_weights(op, w, axis)
    else:
        raise unsupported(op, f"{what} type {w.dtype} not supported with float32 input")
    bias = np.zeros(out_ch, np.float32)
    if b is not None:
        check_dtype(op, b, ("float32",))
        bias = b.data.astype(np.float32).reshape(-1)
    return wf, bias


def int32_bias(op: Operator, b: Tensor | None, out_ch: int) -> np.ndarray:
    """The int32 bias of an int8 op as int64 (zeros when absent), ready for folding."""
    bias = np.zeros(out_ch, np.int64)
    if b is not None:
        check_dtype(op, b, ("int32",))
        bias = b.data.astype(np.int64).reshape(-1)
    return bias


def int8_requant(op: Operator, x: Tensor, w: Tensor, y: Tensor, out_ch: int, axis: int,
                 act: str) -> tuple[dict, list[ConstArray]]:
    """Per-channel multipliers/shifts (constants ``m`` and ``s``, one per output channel) and
    the output zero point and activation clamp of an int8 op with symmetric int8 weights."""
    in_scale, _ = per_tensor(op, x)
    out_scale, out_zp = per_tensor(op, y)
    if w.quant is None:
        raise unsupported(op, f"weights '{w.name}' have no quantization parameters")
    if any(z != 0 for z in w.quant.zero_point):
        raise unsupported(op, "int8 weights must be symmetric (zero point 0)")
    if w.quant.per_channel and (len(w.quant.scale) != out_ch or w.quant.axis != axis):
        raise unsupported(op, f"per-channel weights need {out_ch} scales on axis {axis}")
    scales = w.quant.scale if w.quant.per_channel else w.quant.scale * out_ch
    mults = [q.conv_multiplier(in_scale, s, out_scale) for s in scales]
    lo, hi = q.activation_range_quantized(act, out_scale, out_zp, *quantized_range(y))
    params = {"out_zp": out_zp, "act_min": lo, "act_max": hi}
    consts = [ConstArray("m", "int32_t", np.array([m for m, _ in mults], np.int32)),
              ConstArray("s", "int8_t", np.array([s for _, s in mults], np.int8))]
    return params, consts


#: Accumulators of the int16x8 ops: TFLM sums in int64, or in int32 with an int32 bias; TFLM
#: asserts an int64 accumulator stays within +-2^47 (its requantization's input range).
_ACC_LIMITS = {"int64": 1 << 47, "int32": 1 << 31}


def int16_weighted(op: Operator, x: Tensor, w: Tensor, b: Tensor | None, y: Tensor,
                   out_ch: int, axis: int, act: str, wi: np.ndarray,
                   int64_only: bool = False) -> tuple[dict, list[ConstArray]]:
    """Requantization and bias of an int16x8 op (int16 activations, symmetric int8 weights
    ``w``; ``wi`` its values as [out_ch, ...]): the accumulator type (``params["acc"]``: int64
    with an int64 bias, int32 with an int32 one; without a bias, int32 only if the options'
    ``quantized_bias_type`` says so, as TFLM decides) and the constants ``b`` (the bias in the
    accumulator's type, zeros when absent), ``m`` and ``s`` (int64: the Q15 multipliers and
    total right shifts of TFLM's int64 requantization; int32: its Q31 ones)."""
    check_dtype(op, w, ("int8",))
    check_symmetric(op, x, y)
    if b is not None:
        check_dtype(op, b, ("int64",) if int64_only else ("int64", "int32"))
        acc = b.dtype
        bias = b.data.astype(np.int64).reshape(-1)
    else:
        acc = "int32" if op.options.get("quantized_bias_type") == "int32" and not int64_only \
            else "int64"
        bias = np.zeros(out_ch, np.int64)
    bound = np.abs(bias) + 32768 * np.abs(wi.astype(np.int64)).reshape(out_ch, -1).sum(axis=1)
    if bound.max(initial=0) >= _ACC_LIMITS[acc]:
        raise unsupported(op, f"the {acc} accumulator can exceed +-2^"
                              f"{_ACC_LIMITS[acc].bit_length() - 1} with these weights and "
                              f"bias '{b.name if b is not None else ''}'")
    params, (m, s) = int8_requant(op, x, w, y, out_ch, axis, act)
    params["acc"] = acc
    if acc == "int64":
        if int(s.values.max(initial=0)) > 7:
            raise unsupported(op, "a requantization multiplier of 2^8 or more is outside "
                                  "TFLM's int64 requantization (its shift is at most 7)")
        red = [q.reduced_multiplier(int(mm), int(ss)) for mm, ss in zip(m.values, s.values,
                                                                         strict=True)]
        m = ConstArray("m", "int32_t", np.array([r for r, _ in red], np.int32))
        s = ConstArray("s", "uint8_t", np.array([t for _, t in red], np.uint8))
    ctype = "int64_t" if acc == "int64" else "int32_t"
    return params, [ConstArray("b", ctype, bias.astype(np.int64)), m, s]

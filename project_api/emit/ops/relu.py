"""RELU, RELU6 and (through ``relu_n1_to_1.py``, which takes fewer types) RELU_N1_TO_1.

RELU and RELU6 as TFLM's ``activations.cc``: float32 (``x < 0 ? 0 : x``; RELU6 also ``x > 6 ? 6``);
int8 and int16 RELU requantize (``zp_out + (x - zp_in) * s_in / s_out``, clamped below at the
output's zero point; int16 with zero points 0); int8 and int16 RELU6 clamp the stored values
to ``[zp, q(6)]`` of the input's quantization, without requantizing (the output is taken to
share it).

TFLM has no RELU_N1_TO_1 kernel; it follows LiteRT's: float32 clamps to [-1, 1], int8
requantizes as RELU and clamps to the quantized [-1, 1] of the output."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from ._math import f32, multiplier
from .common import (
    C_TYPES,
    Kernel,
    OpSpec,
    check_dtype,
    check_same_type,
    per_tensor,
    quantized_range,
    unary_operands,
    unsupported,
)

SPEC = OpSpec(opcodes=("RELU", "RELU6"), schemes=("float32", "int8", "int16x8"))


def _quantized(value: float, scale: float) -> int:
    """``roundf(value / scale)``, the float32 division as TFLM."""
    return q.round_half_away(float(f32(value) / f32(scale)))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    n1_to_1 = op.opcode == "RELU_N1_TO_1"
    check_dtype(op, x, ("float32", "int8") if n1_to_1 else ("float32", "int8", "int16"))
    check_same_type(op, x, y)
    params = {"size": x.num_elements, "dtype": x.dtype, "T": C_TYPES[x.dtype], "op": op.opcode,
              "requantize": False}
    if x.dtype == "float32":
        return Kernel(op, "relu.c.j2", params, [x.index], [y.index])
    sx, zx = per_tensor(op, x)
    qmin, qmax = quantized_range(x)
    if op.opcode == "RELU6":  # any zero point, int16 too (TFLM's RELU6 does not check)
        params.update(lo=zx, hi=min(max(_quantized(6.0, sx) + zx, qmin), qmax))
        return Kernel(op, "relu.c.j2", params, [x.index], [y.index])
    sy, zy = per_tensor(op, y)
    if x.dtype == "int16" and (zx, zy) != (0, 0):
        raise unsupported(op, f"int16 zero points {zx} -> {zy}; TFLM's int16 RELU takes zero "
                              "points 0 only")
    m, s = multiplier(op, float(sx) / float(sy), "output")
    lo = max(qmin, zy + (_quantized(-1.0, sy) if n1_to_1 else 0))
    hi = min(qmax, zy + _quantized(1.0, sy)) if n1_to_1 else qmax
    params.update(in_zp=zx, out_zp=zy, m=m, s=s, lo=lo, hi=hi, requantize=True)
    return Kernel(op, "relu.c.j2", params, [x.index], [y.index])

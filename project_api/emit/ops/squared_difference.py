"""SQUARED_DIFFERENCE with broadcasting, as TFLM's ``squared_difference.cc``: float32 and int32
(``(a - b)^2``, int32 wrapping where TFLM's int32 arithmetic would) and int8/int16 (both inputs
shifted left 7 bits, 0 for int16, rescaled to twice the larger input scale, the difference
squared and requantized by ``(2 max)^2 / (2^14 s_out)``, all in double as TFLM; int16 with zero
points 0)."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._binary import operands
from ._math import check_unquantized, multiplier
from .common import Kernel, OpSpec, per_tensor, quantized_range, unsupported

SPEC = OpSpec(opcodes=("SQUARED_DIFFERENCE",), schemes=("float32", "int8", "int16x8", "int32"))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    a, b, y, _, params, inputs, consts = operands(op, graph, ("int8", "int16", "int32", "float32"))
    if y.dtype in ("int8", "int16"):
        sa, za = per_tensor(op, a)
        sb, zb = per_tensor(op, b)
        so, zo = per_tensor(op, y)
        if y.dtype == "int16" and (za, zb, zo) != (0, 0, 0):
            raise unsupported(op, f"int16 zero points {za}, {zb} -> {zo}; TFLM's int16 "
                                  "SQUARED_DIFFERENCE takes zero points 0 only")
        left_shift = 7 if y.dtype == "int8" else 0
        twice_max = 2.0 * max(float(sa), float(sb))
        m1, s1 = multiplier(op, float(sa) / twice_max, "first input")
        m2, s2 = multiplier(op, float(sb) / twice_max, "second input")
        mo, sho = multiplier(op, twice_max * twice_max / ((1 << 2 * left_shift) * float(so)),
                             "output")
        lo, hi = quantized_range(y)
        params.update(a_off=-za, b_off=-zb, left_shift=left_shift, m1=m1, s1=s1, m2=m2, s2=s2,
                      mo=mo, so=sho, out_zp=zo, act_min=lo, act_max=hi)
    elif y.dtype == "int32":
        check_unquantized(op, a, b, y)
    return Kernel(op, "squared_difference.c.j2", params, inputs, [y.index], consts)

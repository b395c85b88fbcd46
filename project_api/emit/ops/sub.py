"""SUB with broadcasting, as TFLM's ``sub.cc``: float32 and int32 (``a - b`` clamped to the fused
activation's range; int32 wraps where TFLM's int32 arithmetic would) and int8/int16 like ADD
(both inputs shifted left 20 bits, 15 for int16, rescaled to twice the larger input scale in
double, subtracted, requantized to the output; int16 whatever ``pot_scale_int16`` says)."""

from __future__ import annotations

from .. import quantize as q
from ..graph import Graph, Operator
from ..target import GENERIC, Target
from ._binary import operands
from ._math import check_unquantized, int32_activation
from .common import Kernel, OpSpec, per_tensor, quantized_range, unsupported

SPEC = OpSpec(opcodes=("SUB",), schemes=("float32", "int8", "int16x8", "int32"))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    a, b, y, act, params, inputs, consts = operands(
        op, graph, ("int8", "int16", "int32", "float32"))
    if y.dtype in ("int8", "int16"):
        sa, za = per_tensor(op, a)
        sb, zb = per_tensor(op, b)
        so, zo = per_tensor(op, y)
        left_shift = 20 if y.dtype == "int8" else 15
        twice_max = 2 * max(q.f32(sa), q.f32(sb))
        try:
            m1, s1 = q.quantize_multiplier_smaller_than_one(q.f32(sa) / twice_max)
            m2, s2 = q.quantize_multiplier_smaller_than_one(q.f32(sb) / twice_max)
            mo, sho = q.quantize_multiplier_smaller_than_one(
                twice_max / ((1 << left_shift) * q.f32(so)))
        except ValueError as e:
            raise unsupported(op, f"scales cannot be requantized: {e}") from None
        lo, hi = q.activation_range_quantized(act, so, zo, *quantized_range(y))
        params.update(a_off=-za, b_off=-zb, left_shift=left_shift, m1=m1, s1=s1, m2=m2, s2=s2,
                      mo=mo, so=sho, out_zp=zo, act_min=lo, act_max=hi)
    elif y.dtype == "int32":
        check_unquantized(op, a, b, y)
        params["clamp"] = int32_activation(act)
    else:
        params["act_min"], params["act_max"] = q.activation_range_float(act)
    return Kernel(op, "sub.c.j2", params, inputs, [y.index], consts)

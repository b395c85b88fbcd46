"""ADD with broadcasting: int8 (TFLM reference: both inputs rescaled to a common scale with a
20-bit left shift, summed, requantized) and float32."""

from __future__ import annotations

from .. import quantize as q
from ..graph import Graph, Operator
from ._binary import operands
from .common import Kernel, per_tensor, unsupported


def prepare(op: Operator, graph: Graph) -> Kernel:
    a, b, y, act, params, inputs, consts = operands(op, graph)
    params["kind"] = "add"
    if y.dtype == "int8":
        sa, za = per_tensor(op, a)
        sb, zb = per_tensor(op, b)
        so, zo = per_tensor(op, y)
        left_shift = 20
        twice_max = 2 * max(q.f32(sa), q.f32(sb))
        try:
            m1, s1 = q.quantize_multiplier_smaller_than_one(q.f32(sa) / twice_max)
            m2, s2 = q.quantize_multiplier_smaller_than_one(q.f32(sb) / twice_max)
            mo, sho = q.quantize_multiplier_smaller_than_one(
                twice_max / ((1 << left_shift) * q.f32(so)))
        except ValueError as e:
            raise unsupported(op, f"scales cannot be requantized: {e}") from None
        lo, hi = q.activation_range_int8(act, so, zo)
        params.update(a_off=-za, b_off=-zb, left_shift=left_shift, m1=m1, s1=s1, m2=m2, s2=s2,
                      mo=mo, so=sho, out_zp=zo, act_min=lo, act_max=hi)
    else:
        lo, hi = q.activation_range_float(act)
        params.update(act_min=lo, act_max=hi)
    return Kernel(op, "add.c.j2", params, inputs, [y.index], consts)

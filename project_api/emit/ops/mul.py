"""MUL with broadcasting: int8 (TFLM reference: ``(a - za) * (b - zb)`` requantized by
``sa * sb / so``) and float32."""

from __future__ import annotations

from .. import quantize as q
from ..graph import Graph, Operator
from ..target import GENERIC, Target
from ._binary import operands
from .common import Kernel, OpSpec, per_tensor

SPEC = OpSpec(opcodes=("MUL",), schemes=("float32", "int8"))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    a, b, y, act, params, inputs, consts = operands(op, graph)
    params["kind"] = "mul"
    if y.dtype == "int8":
        sa, za = per_tensor(op, a)
        sb, zb = per_tensor(op, b)
        so, zo = per_tensor(op, y)
        mo, sho = q.quantize_multiplier(q.f32(sa) * q.f32(sb) / q.f32(so))
        lo, hi = q.activation_range_int8(act, so, zo)
        params.update(a_off=-za, b_off=-zb, mo=mo, so=sho, out_zp=zo, act_min=lo, act_max=hi)
    else:
        lo, hi = q.activation_range_float(act)
        params.update(act_min=lo, act_max=hi)
    return Kernel(op, "mul.c.j2", params, inputs, [y.index], consts)

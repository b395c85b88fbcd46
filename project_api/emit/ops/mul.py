"""MUL with broadcasting: int8 and int16 (TFLM reference: ``(a - za) * (b - zb)`` requantized by
``sa * sb / so``; int16 with zero points 0), float32, and int32 (plain values, the product
wrapping as TFLM's int32 arithmetic, clamped to the fused activation's range).

On Helium an int8 MUL of two inputs of the output's shape gets ``mul.mve.c.j2`` (four lanes a
step)."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from ._binary import operands
from ._math import check_unquantized, int32_activation
from .common import Kernel, OpSpec, check_symmetric, per_tensor, quantized_range

SPEC = OpSpec(opcodes=("MUL",), schemes=("float32", "int8", "int16x8", "int32"))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    a, b, y, act, params, inputs, consts = operands(op, graph,
                                                    ("int8", "int16", "int32", "float32"))
    params["kind"] = "mul"
    if y.dtype in ("int8", "int16"):
        check_symmetric(op, a, b, y)  # TFLM's int16 MUL takes zero points 0 only
        sa, za = per_tensor(op, a)
        sb, zb = per_tensor(op, b)
        so, zo = per_tensor(op, y)
        mo, sho = q.quantize_multiplier(q.f32(sa) * q.f32(sb) / q.f32(so))
        lo, hi = q.activation_range_quantized(act, so, zo, *quantized_range(y))
        params.update(a_off=-za, b_off=-zb, mo=mo, so=sho, out_zp=zo, act_min=lo, act_max=hi)
        if target.mve and y.dtype == "int8" and params["flat"]:
            params["mve"] = True
            return Kernel(op, "mul.mve.c.j2", params, inputs, [y.index], consts,
                          headers=("mve.h.j2",))
    elif y.dtype == "int32":
        check_unquantized(op, a, b, y)
        params["clamp"] = int32_activation(act)
    else:
        lo, hi = q.activation_range_float(act)
        params.update(act_min=lo, act_max=hi)
    return Kernel(op, "mul.c.j2", params, inputs, [y.index], consts)

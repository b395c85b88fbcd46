"""PRELU ``x >= 0 ? x : x * alpha`` with ``alpha`` broadcast, as TFLM's ``prelu.cc``: float32 (up to
rank 4, as TFLM's float kernel), int8 and int16 activations with an int8 ``alpha`` (two
requantizations: ``s_in / s_out`` for the positive side, ``s_in s_alpha / s_out`` for the
product on the negative side, in double as TFLM)."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._binary import operands
from ._math import multiplier
from .common import Kernel, OpSpec, check_dtype, per_tensor, quantized_range, unsupported

SPEC = OpSpec(opcodes=("PRELU",), schemes=("float32", "int8", "int16x8"))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, alpha, y, _, params, inputs, consts = operands(op, graph, ("int8", "int16", "float32"),
                                                      same_types=False)
    if x.is_const:
        raise unsupported(op, f"input 0 '{x.name}' is a constant; only activations are "
                              "supported here")
    if y.dtype != x.dtype:
        raise unsupported(op, f"output type {y.dtype} differs from input type {x.dtype}")
    check_dtype(op, alpha, ("float32",) if x.dtype == "float32" else ("int8",))
    if x.dtype == "float32":
        if params["rank"] > 4:
            raise unsupported(op, f"rank {params['rank']} float32 PRELU not supported (TFLM's "
                                  "float kernel takes up to 4 dimensions)")
    else:
        sx, zx = per_tensor(op, x)
        sa, za = per_tensor(op, alpha)
        so, zo = per_tensor(op, y)
        m1, s1 = multiplier(op, float(sx) / float(so), "identity")
        m2, s2 = multiplier(op, float(sx) * float(sa) / float(so), "alpha")
        lo, hi = quantized_range(y)
        params.update(x_off=-zx, alpha_off=-za, m1=m1, s1=s1, m2=m2, s2=s2, out_zp=zo,
                      act_min=lo, act_max=hi)
    return Kernel(op, "prelu.c.j2", params, inputs, [y.index], consts)

"""SUB with broadcasting, as TFLM's ``sub.cc``: float32 and int32 (``a - b`` clamped to the fused
activation's range; int32 wraps where TFLM's int32 arithmetic would) and int8/int16 like ADD
(both inputs shifted left 20 bits, 15 for int16, rescaled to twice the larger input scale in
double, subtracted, requantized to the output; int16 whatever ``pot_scale_int16`` says)."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from ._binary import operands, rescaled_sum_params
from ._math import check_unquantized, int32_activation
from .common import Kernel, OpSpec

SPEC = OpSpec(opcodes=("SUB",), schemes=("float32", "int8", "int16x8", "int32"))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    a, b, y, act, params, inputs, consts = operands(
        op, graph, ("int8", "int16", "int32", "float32"))
    if y.dtype in ("int8", "int16"):
        params.update(rescaled_sum_params(op, a, b, y, act))
    elif y.dtype == "int32":
        check_unquantized(op, a, b, y)
        params["clamp"] = int32_activation(act)
    else:
        params["act_min"], params["act_max"] = q.activation_range_float(act)
    return Kernel(op, "sub.c.j2", params, inputs, [y.index], consts)

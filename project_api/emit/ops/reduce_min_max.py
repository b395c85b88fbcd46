"""REDUCE_MAX and REDUCE_MIN: float32 and int8 (TFLM's ``reduce.cc``, ``ReduceGeneric``).

Each output starts at the type's lowest (max) or highest (min) value and takes an input when it
is strictly greater (less), as TFLM's reducer: a NaN never replaces a number. int8 moves values
as they are, so TFLM requires the output's scale and zero point to be the input's; int16 TFLM
refuses.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from ._reduce import reduction
from .common import Kernel, OpSpec, check_dtype, per_tensor, unsupported

SPEC = OpSpec(opcodes=("REDUCE_MAX", "REDUCE_MIN"), schemes=("float32", "int8"))

#: The start value of each output: (max, min) per type.
_INIT = {"float32": ("-FLT_MAX", "FLT_MAX"), "int8": ("-128", "127")}


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    r = reduction(op, graph)
    x, y = r.x, r.y
    check_dtype(op, x, ("float32", "int8"))
    if x.dtype == "int8":
        (si, zi), (so, zo) = per_tensor(op, x), per_tensor(op, y)
        if q.f32(si) != q.f32(so) or zi != zo:
            raise unsupported(op, f"output '{y.name}' (scale {so}, zero point {zo}) must have "
                                  f"the quantization of input '{x.name}' (scale {si}, zero "
                                  f"point {zi}), as TFLM requires")
    kind = "max" if op.opcode == "REDUCE_MAX" else "min"
    params = dict(r.params(), kind=kind, init=_INIT[x.dtype][kind == "min"])
    return Kernel(op, "reduce.c.j2", params, [x.index], [y.index])

"""ABS as TFLM's ``elementwise.cc``: float32 (``fabsf``), int8 and int16 (``|x - zp_in|``,
requantized by ``s_in / s_out`` unless the scales are equal, plus ``zp_out``, clamped; int16 with
zero points 0), and plain (unquantized) int16 (``abs``, ``-32768`` staying ``-32768``)."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

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

SPEC = OpSpec(opcodes=("ABS",), schemes=("float32", "int8", "int16x8"))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    check_dtype(op, x, ("float32", "int8", "int16"))
    check_same_type(op, x, y)
    params = {"size": x.num_elements, "dtype": x.dtype, "T": C_TYPES[x.dtype],
              "quantized": x.dtype == "int8" or (x.dtype == "int16" and x.quant is not None)}
    if params["quantized"]:
        sx, zx = per_tensor(op, x)
        sy, zy = per_tensor(op, y)
        if x.dtype == "int16" and (zx, zy) != (0, 0):
            raise unsupported(op, f"int16 zero points {zx} -> {zy}; TFLM's int16 ABS takes "
                                  "zero points 0 only")
        rescale = f32(sx) != f32(sy)
        m, s = multiplier(op, float(sx) / float(sy), "output") if rescale else (0, 0)
        lo, hi = quantized_range(y)
        params.update(in_zp=zx, out_zp=zy, rescale=rescale, m=m, s=s, qmin=lo, qmax=hi)
    return Kernel(op, "abs.c.j2", params, [x.index], [y.index])

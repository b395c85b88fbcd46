"""HARD_SWISH ``x relu6(x + 3) / 6`` as TFLM's ``hard_swish.cc``: float32 (that expression in float,
in that order), and int8 by TFLM's 16-bit fixed-point recipe: the input on a "hires" scale
(``s_in / 128``, shifted left 7 bits), once rescaled to the output scale and once to the
"reluish" scale (3 / 32768, so that [-3, 3] spans int16), the reluish value mapped to [0, 1] and
multiplied in, both multipliers (divided in double) rounded from Q31 to Q15."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._math import f32, multiplier
from .common import (
    Kernel,
    OpSpec,
    check_dtype,
    check_same_type,
    per_tensor,
    unary_operands,
    unsupported,
)

SPEC = OpSpec(opcodes=("HARD_SWISH",), schemes=("float32", "int8"))


def q15(m: int) -> int:
    """TFLM's ``DownScaleInt32ToInt16Multiplier``: a Q31 multiplier rounded to Q15."""
    return 32767 if m >= (1 << 31) - 1 - (1 << 15) else (m + (1 << 15)) >> 16


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    check_dtype(op, x, ("float32", "int8"))
    check_same_type(op, x, y)
    params = {"size": x.num_elements, "dtype": x.dtype}
    if x.dtype == "int8":
        sx, zx = per_tensor(op, x)
        sy, zy = per_tensor(op, y)
        hires = float(f32(1.0 / 128.0) * f32(sx))
        mo, eo = multiplier(op, hires / float(sy), "output")
        if eo > 0:
            raise unsupported(op, f"scales {sx} -> {sy}: TFLM's int8 HARD_SWISH needs the output "
                                  "scale at least 1/128 of the input's")
        mr, er = multiplier(op, hires / (3.0 / 32768.0), "reluish")
        params.update(in_zp=zx, out_zp=zy, mo=q15(mo), eo=eo, mr=q15(mr), er=er)
        return Kernel(op, "hard_swish.c.j2", params, [x.index], [y.index],
                      headers=("fixedpoint.h.j2",))
    return Kernel(op, "hard_swish.c.j2", params, [x.index], [y.index])

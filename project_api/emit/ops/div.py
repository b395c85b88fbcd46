"""DIV with broadcasting, as TFLM's ``div.cc``: float32 and int32 (``a / b`` clamped to the fused
activation's range) and int8 (both inputs offset by their zero points, the quotient through
``GetReciprocal`` of the divisor and the dividend's headroom, requantized by ``s1 / (s2 so)``).

TFLM's int8 quotient shifts right by up to ``31 + 7 - output_shift`` bits, past the 31 its
``RoundingDivideByPOT`` defines; the kernel reproduces what TFLM's reference build computes on
the host there (``q_rdbpot_wide``), the results TFLM's Python interpreter gives. An int32
division by zero (undefined in TFLM) gives 0 and ``INT32_MIN / -1`` gives ``INT32_MIN``, what a
Cortex-M ``SDIV`` gives."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from ._binary import operands
from ._math import check_unquantized, int32_activation, multiplier
from .common import Kernel, OpSpec, per_tensor, quantized_range, unsupported

SPEC = OpSpec(opcodes=("DIV",), schemes=("float32", "int8", "int32"))

#: The fewest redundant sign bits an int8 difference (-255..255) has.
MIN_HEADROOM = 23


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    a, b, y, act, params, inputs, consts = operands(op, graph, ("int8", "int32", "float32"))
    headers: tuple[str, ...] = ()
    if y.dtype == "int8":
        sa, za = per_tensor(op, a)
        sb, zb = per_tensor(op, b)
        so, zo = per_tensor(op, y)
        # in double, as the scales of TFLM's other kernels (the tests cannot tell float32 apart)
        mo, sho = multiplier(op, float(sa) / (float(sb) * float(so)), "output")
        if sho > MIN_HEADROOM:
            raise unsupported(op, f"scales {sa} / ({sb} * {so}) give an output multiplier of "
                                  f"2^{sho}, beyond what TFLM's int8 DIV computes")
        lo, hi = q.activation_range_quantized(act, so, zo, *quantized_range(y))
        params.update(a_off=-za, b_off=-zb, mo=mo, so=sho, out_zp=zo, act_min=lo, act_max=hi)
        headers = ("fixedpoint.h.j2",)
    elif y.dtype == "int32":
        check_unquantized(op, a, b, y)
        params["clamp"] = int32_activation(act)
    else:
        params["act_min"], params["act_max"] = q.activation_range_float(act)
    return Kernel(op, "div.c.j2", params, inputs, [y.index], consts, headers=headers)

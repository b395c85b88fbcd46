"""SOFTMAX over the last dimension: int8 -> int8 or int16 (TFLM fixed-point) and float32.

int8 follows TFLM exactly: differences to the row maximum are rescaled to Q5.26 with a multiplier
from ``PreprocessSoftmaxScaling``, exponentiated with gemmlowp's fixed-point
``exp_on_negative_values``, summed in Q12.19, inverted with ``one_over_one_plus_x_for_x_in_0_1``
and scaled to the output (which TFLM requires to be scale 1/256, zero point -128; or, for an int16
output as TFLM's keyword model ends, 1/65536 and -32768).

int16 follows TFLM's ``SoftmaxInt16``: differences to the row maximum rescaled so that
``[-65535, 0]`` spans ``[-10, 0]``, exponentiated through TFLM's 513-entry exp table, summed,
inverted through its ``1 / (1 + x)`` table (both tables computed here exactly as TFLM's
``LUTPopulateInt16`` does, :func:`..quantize.softmax_luts`), output scale 1/32768, zero point 0.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from .common import (
    ConstArray,
    Kernel,
    OpSpec,
    check_dtype,
    check_same_type,
    check_symmetric,
    per_tensor,
    unary_operands,
    unsupported,
)

SPEC = OpSpec(opcodes=("SOFTMAX",), schemes=("float32", "int8", "int16x8"))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    check_dtype(op, x, ("int8", "int16", "float32"))
    if not (x.dtype == "int8" and y.dtype == "int16"):  # int8 -> int16: the keyword model's
        check_same_type(op, x, y)
    if len(x.shape) < 1 or x.shape != y.shape:
        raise unsupported(op, "input and output shapes must match and be at least 1-D")
    depth = x.shape[-1]
    if depth < 1:
        raise unsupported(op, "empty last dimension")
    beta = op.options.get("beta", 1.0)
    params = {"rows": x.num_elements // depth, "depth": depth, "dtype": x.dtype,
              "beta": beta}
    if x.dtype == "int8":
        xs, _ = per_tensor(op, x)
        ys, yz = per_tensor(op, y)
        if y.dtype == "int16":
            if yz != -32768 or abs(q.f32(ys) - 1.0 / 65536) > 0.001 / 65536:
                raise unsupported(op, "int16 output of an int8 input must have scale 1/65536 "
                                      "and zero point -32768")
            params.update(out_ctype="int16_t", out_bits=16, out_min=-32768, out_max=32767)
        elif yz != -128 or q.f32(ys) != 1.0 / 256:
            raise unsupported(op, "int8 output must have scale 1/256 and zero point -128")
        mult, shift, diff_min = q.softmax_params(xs, beta)
        params.update(mult=mult, shift=shift, diff_min=diff_min)
    elif x.dtype == "int16":
        check_symmetric(op, x, y)
        ys, _ = per_tensor(op, y)
        if abs(q.f32(ys) - 1.0 / 32768) > 0.001 / 32768:
            raise unsupported(op, "int16 output must have scale 1/32768 and zero point 0")
        xs, _ = per_tensor(op, x)
        mult, shift = q.softmax_int16_params(xs, beta)
        params.update(mult=mult, shift=shift)
        exp_lut, inv_lut = q.softmax_luts()
        return Kernel(op, "softmax.c.j2", params, [x.index], [y.index],
                      [ConstArray("exp", "int16_t", exp_lut), ConstArray("inv", "int16_t", inv_lut)],
                      headers=("int16.h.j2",))
    return Kernel(op, "softmax.c.j2", params, [x.index], [y.index])

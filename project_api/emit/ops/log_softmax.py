"""LOG_SOFTMAX over the last dimension as TFLM's ``log_softmax.cc``: float32 (row maximum, the sum
of ``expf`` of the differences, ``x - max - logf(sum)``) and int8 (differences rescaled to Q5.26
by ``PreprocessLogSoftmaxScalingExp`` with beta 1, gemmlowp's ``exp_on_negative_values`` summed in
Q12.19, TFLM's fixed-point log of the sum, the output at the scale 16/256 and zero point 127
TFLM requires)."""

from __future__ import annotations

import math

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from .common import (
    Kernel,
    OpSpec,
    check_dtype,
    check_same_type,
    per_tensor,
    unary_operands,
    unsupported,
)

SPEC = OpSpec(opcodes=("LOG_SOFTMAX",), schemes=("float32", "int8"))

#: Integer bits of the scaled differences (Q5.26), as TFLM.
DIFF_INTEGER_BITS = 5


def scaling(input_scale: float) -> tuple[int, int, int, int, int]:
    """TFLM's int8 LOG_SOFTMAX parameters: (input multiplier, input left shift, reverse scaling
    divisor, its right shift, diff_min)."""
    real = min(1.0 * float(input_scale) * (1 << (31 - DIFF_INTEGER_BITS)), (1 << 31) - 1.0)
    mult, left = q.quantize_multiplier_greater_than_one(real)
    reverse = (1 << (31 - left)) / float(mult)
    rmult, rshift = q.quantize_multiplier_smaller_than_one(reverse)
    radius = math.floor(1.0 * ((1 << DIFF_INTEGER_BITS) - 1)
                        * (1 << (31 - DIFF_INTEGER_BITS)) / (1 << left))
    return mult, left, rmult, -rshift, -radius


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    check_dtype(op, x, ("float32", "int8"))
    check_same_type(op, x, y)
    if len(x.shape) < 1 or tuple(x.shape) != tuple(y.shape):
        raise unsupported(op, "input and output shapes must match and be at least 1-D")
    depth = x.shape[-1]
    if depth < 1:
        raise unsupported(op, "empty last dimension")
    params = {"rows": x.num_elements // depth, "depth": depth, "dtype": x.dtype}
    if x.dtype == "float32":
        return Kernel(op, "log_softmax.c.j2", params, [x.index], [y.index])
    sx, _ = per_tensor(op, x)
    sy, zy = per_tensor(op, y)
    if q.f32(sy) != 16.0 / 256.0 or zy != 127:
        raise unsupported(op, f"int8 output '{y.name}' has scale {sy} and zero point {zy}; TFLM "
                              "requires 16/256 and 127")
    try:
        mult, left, rmult, rshift, diff_min = scaling(q.f32(sx))
    except ValueError as e:
        raise unsupported(op, f"input scale {sx} cannot be rescaled: {e}") from None
    params.update(mult=mult, left=left, rmult=rmult, rshift=rshift, diff_min=diff_min)
    return Kernel(op, "log_softmax.c.j2", params, [x.index], [y.index],
                  headers=("fixedpoint.h.j2",))

"""LEAKY_RELU ``x > 0 ? x : alpha x`` as TFLM's ``leaky_relu.cc``: float32, and int8 and int16 with
two requantizations (identity ``s_in / s_out`` for ``x - zp_in >= 0``, ``s_in alpha / s_out`` for
the rest, both divided in float32 as TFLM; a negative alpha multiplies by its magnitude and
negates)."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from ._math import f32, multiplier
from .common import (
    C_TYPES,
    Kernel,
    OpSpec,
    check_dtype,
    check_same_type,
    float_literal,
    per_tensor,
    quantized_range,
    unary_operands,
    unsupported,
)

SPEC = OpSpec(opcodes=("LEAKY_RELU",), schemes=("float32", "int8", "int16x8"))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    check_dtype(op, x, ("float32", "int8", "int16"))
    check_same_type(op, x, y)
    alpha = f32(op.options.get("alpha", 0.0))
    params = {"size": x.num_elements, "dtype": x.dtype, "T": C_TYPES[x.dtype],
              "alpha": float_literal(float(alpha))}
    if x.dtype != "float32":
        sx, zx = per_tensor(op, x)
        sy, zy = per_tensor(op, y)
        ma, sa = multiplier(op, float(sx) * float(alpha) / float(sy), "alpha")
        mi, si = multiplier(op, float(sx) / float(sy), "identity")
        if ma == q.INT32_MIN:
            raise unsupported(op, f"alpha {float(alpha)} gives the multiplier -2^31, which "
                                  "TFLM cannot negate")
        qmin, qmax = quantized_range(y)
        params.update(in_zp=zx, out_zp=zy, ma=abs(ma), sa=sa, negate=ma < 0, mi=mi, si=si,
                      qmin=qmin, qmax=qmax)
    return Kernel(op, "leaky_relu.c.j2", params, [x.index], [y.index])

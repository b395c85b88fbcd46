"""ELU ``x < 0 ? exp(x) - 1 : x`` as TFLM's ``elu.cc``: float32 (``expm1f``) and int8 through TFLM's
256-entry table, computed here as its Prepare does (``expf(x) - 1`` in float32 on each
dequantized input, rescaled and rounded, :func:`..quantize.lut_int8`)."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from ._math import f32
from .common import (
    ConstArray,
    Kernel,
    OpSpec,
    check_dtype,
    check_same_type,
    per_tensor,
    unary_operands,
)

SPEC = OpSpec(opcodes=("ELU",), schemes=("float32", "int8"))


def _elu(v: f32) -> f32:
    return q.expf(v) - f32(1.0) if v < f32(0.0) else v


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    check_dtype(op, x, ("float32", "int8"))
    check_same_type(op, x, y)
    params = {"size": x.num_elements, "dtype": x.dtype}
    if x.dtype == "int8":
        sx, zx = per_tensor(op, x)
        sy, zy = per_tensor(op, y)
        table = q.lut_int8(_elu, sx, zx, sy, zy)
        return Kernel(op, "elu.c.j2", params, [x.index], [y.index],
                      [ConstArray("table", "int8_t", table)])
    return Kernel(op, "elu.c.j2", params, [x.index], [y.index])

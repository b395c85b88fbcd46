"""QUANTIZE: float32 -> int8 (``round(x / scale) + zp``, float division, ties away from zero)
and int8 -> int8 requantization (TFLM ``Requantize``)."""

from __future__ import annotations

from .. import quantize as q
from ..graph import Graph, Operator
from ..target import GENERIC, Target
from .common import (
    Kernel,
    OpSpec,
    check_dtype,
    conversion_scheme,
    per_tensor,
    unary_operands,
    unsupported,
)

SPEC = OpSpec(opcodes=("QUANTIZE",), schemes=("float32->int8", "int8->int8"),
              classify=conversion_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    check_dtype(op, x, ("float32", "int8"))
    check_dtype(op, y, ("int8",))
    if x.num_elements != y.num_elements:
        raise unsupported(op, "input and output sizes differ")
    ys, yz = per_tensor(op, y)
    params = {"size": x.num_elements, "src": x.dtype, "dst": y.dtype, "out_zp": yz,
              "scale": ys}
    if x.dtype == "int8":
        xs, xz = per_tensor(op, x)
        m, s = q.quantize_multiplier(q.f32(xs) / q.f32(ys))
        params.update(in_zp=xz, mult=m, shift=s)
    return Kernel(op, "quantize.c.j2", params, [x.index], [y.index])

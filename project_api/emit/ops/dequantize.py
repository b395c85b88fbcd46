"""DEQUANTIZE: int8/int16 -> float32, ``(float)(scale * (x - zp))`` computed in double as TFLM
does."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from .common import (
    Kernel,
    OpSpec,
    conversion_scheme,
    per_tensor,
    unary_operands,
    unsupported,
)

SPEC = OpSpec(opcodes=("DEQUANTIZE",), schemes=("int8->float32", "int16->float32"),
              classify=conversion_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    if x.num_elements != y.num_elements:
        raise unsupported(op, "input and output sizes differ")
    xs, xz = per_tensor(op, x)
    return Kernel(op, "dequantize.c.j2", {"size": x.num_elements, "scale": q.f32(xs),
                                          "zp": xz}, [x.index], [y.index])

"""DEQUANTIZE: int8 -> float32, ``(float)(scale * (x - zp))`` computed in double as TFLM does."""

from __future__ import annotations

from .. import quantize as q
from ..graph import Graph, Operator
from .common import (
    Kernel,
    check_counts,
    check_dtype,
    per_tensor,
    tensor_in,
    tensor_out,
    unsupported,
)


def prepare(op: Operator, graph: Graph) -> Kernel:
    check_counts(op, (1,))
    x = tensor_in(graph, op, 0, const=False)
    y = tensor_out(graph, op)
    check_dtype(op, x, ("int8",))
    check_dtype(op, y, ("float32",))
    if x.num_elements != y.num_elements:
        raise unsupported(op, "input and output sizes differ")
    xs, xz = per_tensor(op, x)
    return Kernel(op, "dequantize.c.j2", {"size": x.num_elements, "scale": q.f32(xs),
                                          "zp": xz}, [x.index], [y.index])

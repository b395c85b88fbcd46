"""What the two RESIZE operators share: operands (NHWC input, a constant int32 ``size`` of two
values equal to the output's height and width, as TFLM reads it) and C-style integer
division."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator, Tensor

from ._movement import check_rank, check_types, const_ints, expect_shape
from .common import check_counts, tensor_in, tensor_out, unsupported


def operands(op: Operator, graph: Graph, types: tuple[str, ...]
             ) -> tuple[Tensor, Tensor, int, int, bool, bool]:
    """(x, y, output height, output width, align_corners, half_pixel_centers)."""
    check_counts(op, (2,))
    x = tensor_in(graph, op, 0)
    y = tensor_out(graph, op)
    check_types(op, types, x, y)
    check_rank(op, x, 4, 4)
    size = const_ints(op, graph, 1, "size")
    if len(size) != 2 or min(size) < 1:
        raise unsupported(op, f"size {size} must be two positive values (height, width)")
    oh, ow = size
    n, _, _, c = x.shape
    expect_shape(op, y, [n, oh, ow, c], f"resizing '{x.name}' {list(x.shape)} to {size}")
    ac = bool(op.options.get("align_corners", False))
    hpc = bool(op.options.get("half_pixel_centers", False))
    return x, y, oh, ow, ac, hpc


def cdiv(a: int, b: int) -> int:
    """C's integer division (truncating towards zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q

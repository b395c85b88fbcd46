"""What BATCH_TO_SPACE_ND and SPACE_TO_BATCH_ND share: their operands and TFLM's view of a
rank-3 tensor ``[B, H, C]`` as ``[B, H, 1, C]`` with a block width of 1."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator, Tensor

from ._movement import check_rank, check_types, const_ints
from .common import check_counts, tensor_in, tensor_out, unsupported

TYPES = ("float32", "int8")


def operands(op: Operator, graph: Graph, what: str
             ) -> tuple[Tensor, Tensor, list[int], list[int], list[int], list[int]]:
    """(x, y, x as 4-D, y as 4-D, block [h, w], ``what`` (crops or paddings) [top, bottom,
    left, right]) of either op; block and ``what`` constant int32, as TFLM reads them."""
    check_counts(op, (3,))
    x = tensor_in(graph, op, 0)
    y = tensor_out(graph, op)
    check_types(op, TYPES, x, y)
    check_rank(op, x, 4, 3)
    if len(y.shape) != len(x.shape):
        raise unsupported(op, f"output '{y.name}' has rank {len(y.shape)}, the input "
                              f"{len(x.shape)}")
    spatial = len(x.shape) - 2
    block = const_ints(op, graph, 1, "block_shape")
    edges = const_ints(op, graph, 2, what)
    if len(block) != spatial or len(edges) != 2 * spatial:
        raise unsupported(op, f"block_shape {block} and {what} {edges} must cover the "
                              f"{spatial} spatial dimensions of '{x.name}' {list(x.shape)}")
    if min(block) < 1 or min(edges) < 0:
        raise unsupported(op, f"block_shape {block} must be >= 1 and {what} {edges} >= 0")
    if spatial == 1:
        block, edges = [block[0], 1], [edges[0], edges[1], 0, 0]
    return x, y, _four(x.shape), _four(y.shape), block, edges


def _four(shape: tuple[int, ...]) -> list[int]:
    return list(shape) if len(shape) == 4 else [shape[0], shape[1], 1, shape[2]]


def valid_run(count: int, block: int, shift: int, before: int, limit: int) -> tuple[int, int]:
    """(first, number) of the ``i < count`` with ``0 <= i * block + shift - before < limit``
    (they are consecutive)."""
    ok = [i for i in range(count) if 0 <= i * block + shift - before < limit]
    return (ok[0], len(ok)) if ok else (0, 0)

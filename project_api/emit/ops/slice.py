"""SLICE (TFLM ``slice.cc``, ``reference_ops::Slice``): the box ``[begin, begin + size)`` of the
input (a size of -1: to the end), rank at most 5.

``begin`` and ``size`` are constant int32 or int64 vectors of the input's rank (TFLM reads them
at Eval; the emitter needs them at emit time, and refuses activations). Types: float32, int8,
int16, int32, bool; the codes are copied as they are.

**A view where provable.** The begin and size are constants, so whether the box is one
contiguous run of the input is known at emit time: it is when, after the first dimension whose
size is not 1 in the box, every dimension is whole. Then the output aliases the input at the
run's offset (no code), unless it is a graph output or the input's longer life would raise the
pool's lower bound.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import (
    Sources,
    box,
    check_rank,
    check_types,
    const_ints,
    expect_shape,
    move_kernel,
    strides,
    view_offsets,
)
from .common import (
    Kernel,
    OpSpec,
    check_counts,
    dtype_scheme,
    tensor_in,
    tensor_out,
    unsupported,
)

SPEC = OpSpec(opcodes=("SLICE",), schemes=("float32", "int8", "int16", "int32", "bool"),
              classify=dtype_scheme, offset_view=True)

#: TFLM's kMaxDim.
MAX_RANK = 5


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (3,))
    x = tensor_in(graph, op, 0)
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, x, y)
    check_rank(op, x, MAX_RANK)
    b_t, s_t = tensor_in(graph, op, 1), tensor_in(graph, op, 2)
    if b_t.dtype != s_t.dtype:
        raise unsupported(op, f"begin '{b_t.name}' is {b_t.dtype}, size '{s_t.name}' "
                              f"{s_t.dtype}; TFLM requires one type")
    begin = const_ints(op, graph, 1, "begin", ("int32", "int64"))
    size = const_ints(op, graph, 2, "size", ("int32", "int64"))
    rank = len(x.shape)
    if len(begin) != rank or len(size) != rank:
        raise unsupported(op, f"begin {begin} and size {size} must have one value per "
                              f"dimension of '{x.name}' {list(x.shape)}")
    counts = []
    for d, (b, s, n) in enumerate(zip(begin, size, x.shape, strict=True)):
        stop = n if s == -1 else b + s
        if not (0 <= b <= stop <= n):
            raise unsupported(op, f"begin {begin}, size {size} leave '{x.name}' "
                                  f"{list(x.shape)} in dimension {d}")
        counts.append(stop - b)
    expect_shape(op, y, counts, f"slicing {list(x.shape)} at {begin} by {size}")
    src = Sources()
    name, const = src.add(x, "input")
    xst = strides(list(x.shape))
    moves = [box("out0", counts, strides(counts), name, xst,
                 src_offset=sum(b * s for b, s in zip(begin, xst, strict=True)), const=const)]
    return move_kernel(op, moves, src, [y.index], view_offsets([moves], x))

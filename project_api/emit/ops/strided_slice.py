"""STRIDED_SLICE (TFLM ``strided_slice.cc``, ``reference_ops::StridedSlice``): every
``stride``-th element from ``begin`` towards ``end`` along each dimension, rank at most 4.

``begin``, ``end`` and ``strides`` are constant int32 vectors of the input's rank (TFLM reads
them as int32 and requires constants); no stride may be 0. ``begin_mask`` and ``end_mask``
take the whole dimension on that side, ``shrink_axis_mask`` keeps one element and drops the
dimension. As TFLM, ``ellipsis_mask``, ``new_axis_mask`` and ``offset`` are not implemented:
TFLM computes as if they were 0 and false, and so does the emitter (the output shape check
then refuses most models that set them). The output shape is checked as TFLM's Prepare does,
and the elements are those of TFLM's Eval (its start and stop rules: indices clamped to the
dimension, negative ones from the end). Types: float32, int8, int16, int32, bool; the codes are
copied as they are.

**A view where provable.** The attributes are constants, so whether the selected elements are
one contiguous run of the input (stride 1 wherever more than one element is taken, every
dimension after the first one taking several elements whole) is known at emit time; then the
output aliases the input at the run's offset (no code), unless it is a graph output or the
input's longer life would raise the pool's lower bound.
"""

from __future__ import annotations

import math

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

SPEC = OpSpec(opcodes=("STRIDED_SLICE",), schemes=("float32", "int8", "int16", "int32", "bool"),
              classify=dtype_scheme, offset_view=True)

#: TFLM's kMaxDim (Prepare); the reference kernel pads every slice to 5 dimensions.
MAX_RANK = 4
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


def _clamp(v: int, lo: int, hi: int) -> int:
    return hi if v > hi else lo if v < lo else v


def _prepare_span(begin: int, end: int, stride: int, size: int, bmask: bool, emask: bool,
                  shrink: bool) -> tuple[int, int]:
    """TFLM's StartForAxis / StopForAxis, as its Prepare checks the output shape."""
    if size == 0:
        return 0, 0
    start = (_INT_MIN if stride > 0 else _INT_MAX) if bmask else begin
    if start < 0:
        start += size
    start = _clamp(start, 0, size) if stride > 0 else _clamp(start, -1, size - 1)
    if shrink:
        return start, start + 1
    stop = (_INT_MAX if stride > 0 else _INT_MIN) if emask else end
    if stop < 0:
        stop += size
    stop = _clamp(stop, 0, size) if stride > 0 else _clamp(stop, -1, size - 1)
    return start, stop


def _eval_span(begin: int, end: int, stride: int, size: int, bmask: bool, emask: bool,
               shrink: bool) -> tuple[int, int]:
    """TFLM's StridedSliceStartForAxis / StridedSliceEndForAxis, as its Eval walks."""
    start = begin + size if begin < 0 else begin
    start = _clamp(start, 0, size) if stride > 0 else _clamp(start, -1, size - 1)
    if bmask:
        start = 0 if stride > 0 else size - 1
    if shrink:
        return start, start if start >= size else start + 1
    stop = end + size if end < 0 else end
    stop = _clamp(stop, 0, size) if stride > 0 else _clamp(stop, -1, size - 1)
    if emask:
        stop = size if stride > 0 else -1
    return start, stop


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (4,))
    x = tensor_in(graph, op, 0)
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, x, y)
    check_rank(op, x, MAX_RANK)
    rank = len(x.shape)
    begin = const_ints(op, graph, 1, "begin")
    end = const_ints(op, graph, 2, "end")
    step = const_ints(op, graph, 3, "strides")
    if not len(begin) == len(end) == len(step) == rank:
        raise unsupported(op, f"begin {begin}, end {end} and strides {step} must have one value "
                              f"per dimension of '{x.name}' {list(x.shape)}")
    if 0 in step:
        raise unsupported(op, f"strides {step}: a stride must not be 0")
    o = op.options
    bm, em, sm = (int(o.get(k, 0)) for k in ("begin_mask", "end_mask", "shrink_axis_mask"))
    expected, counts, starts = [], [], []
    for d in range(rank):
        bit = 1 << d
        flags = (bool(bm & bit), bool(em & bit), bool(sm & bit))
        a, b = _prepare_span(begin[d], end[d], step[d], x.shape[d], *flags)
        if not flags[2]:
            expected.append(max(0, math.ceil((b - a) / step[d])))
        a, b = _eval_span(begin[d], end[d], step[d], x.shape[d], *flags)
        counts.append(len(range(a, b, step[d])))
        starts.append(a)
    how = f"slicing {list(x.shape)} from {begin} to {end} by {step} (masks {bm}, {em}, {sm})"
    expect_shape(op, y, expected, how)
    kept = [c for d, c in enumerate(counts) if not sm & (1 << d)]
    if kept != list(y.shape):
        raise unsupported(op, f"{how}: TFLM's Eval takes {counts} elements per dimension, not "
                              f"the output's {list(y.shape)}")
    src = Sources()
    name, const = src.add(x, "input")
    xst = strides(list(x.shape))
    first = sum(a * s for a, s in zip(starts, xst, strict=True)) if all(counts) else 0
    moves = [box("out0", counts, strides(counts), name,
                 [s * t for s, t in zip(step, xst, strict=True)], src_offset=first, const=const)]
    return move_kernel(op, moves, src, [y.index], view_offsets([moves], x))

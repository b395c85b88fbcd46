"""UNPACK (TFLM ``unpack.cc``): the input cut into its ``num`` slices along ``axis``
(negative: from the end), each output one slice without that dimension.

Types: float32, int8, int16, int32; the codes are copied as they are.

**A view where provable.** When every dimension before ``axis`` has size 1, each slice is one
contiguous run of the input (known at emit time from the static shapes), so the outputs alias
it at their offsets (no code) unless one is a graph output or the input's longer life would
raise the pool's lower bound; otherwise every output is copied.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import (
    Sources,
    axis_of,
    box,
    check_types,
    move_kernel,
    strides,
    view_offsets,
)
from .common import Kernel, OpSpec, dtype_scheme, tensor_in, tensor_out, unsupported

SPEC = OpSpec(opcodes=("UNPACK",), schemes=("float32", "int8", "int16", "int32"),
              classify=dtype_scheme, offset_view=True)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    if len(op.inputs) != 1:
        raise unsupported(op, f"expects one input, has {len(op.inputs)}")
    x = tensor_in(graph, op, 0)
    rank = len(x.shape)
    if rank < 1:
        raise unsupported(op, f"input '{x.name}' is a scalar; UNPACK needs rank 1 or more")
    axis = axis_of(op, int(op.options.get("axis", 0)), rank)
    n = int(op.options.get("num", 0))
    if n != x.shape[axis] or len(op.outputs) != n:
        raise unsupported(op, f"num {n}: dimension {axis} of '{x.name}' {list(x.shape)} must be "
                              f"that long, with as many outputs (has {len(op.outputs)})")
    ys = [tensor_out(graph, op, i) for i in range(n)]
    check_types(op, SPEC.schemes, x, *ys)
    piece = [d for k, d in enumerate(x.shape) if k != axis]
    for y in ys:
        if list(y.shape) != piece:
            raise unsupported(op, f"output '{y.name}' has shape {list(y.shape)}; unpacking "
                                  f"{list(x.shape)} along axis {axis} gives {piece}")
    xst = strides(list(x.shape))
    src = Sources()
    name, const = src.add(x, "input")
    per_output = [[box(f"out{k}", piece, strides(piece), name, xst[:axis] + xst[axis + 1:],
                       src_offset=k * xst[axis], const=const)] for k in range(n)]
    return move_kernel(op, [m for ms in per_output for m in ms], src, [y.index for y in ys],
                       view_offsets(per_output, x))

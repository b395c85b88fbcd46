"""SPLIT and SPLIT_V (TFLM ``split.cc``, ``split_v.cc``): the input cut along ``axis`` into the
outputs, in order.

The axis is a constant int32 tensor (SPLIT: input 0, the data input 1; SPLIT_V: input 2, the
sizes input 1), negative from the end, as TFLM requires. The outputs' static shapes give the
pieces: equal for SPLIT (``num_splits`` of them), SPLIT_V's ``size_splits`` (one -1 allowed) must
agree. Types: float32, int8, int16, int32; the codes are copied as they are.

**A view where provable.** When every dimension before ``axis`` has size 1, each output is one
contiguous run of the input, so the outputs alias it at their offsets (no code) unless an output
is a graph output or the input's longer life would raise the pool's lower bound; the shapes are
static, so this is decided exactly at emit time. Otherwise every output is copied.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import (
    Sources,
    axis_of,
    box,
    check_types,
    const_ints,
    move_kernel,
    strides,
    view_offsets,
)
from .common import Kernel, OpSpec, dtype_scheme, tensor_in, tensor_out, unsupported

SPEC = OpSpec(opcodes=("SPLIT", "SPLIT_V"), schemes=("float32", "int8", "int16", "int32"),
              classify=dtype_scheme, offset_view=True)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    split_v = op.opcode == "SPLIT_V"
    if len(op.inputs) != (3 if split_v else 2) or not op.outputs:
        raise unsupported(op, f"expects {3 if split_v else 2} inputs and at least one output, "
                              f"has {len(op.inputs)} and {len(op.outputs)}")
    x = tensor_in(graph, op, 0 if split_v else 1)
    axis_t = tensor_in(graph, op, 2 if split_v else 0)
    ys = [tensor_out(graph, op, i) for i in range(len(op.outputs))]
    check_types(op, SPEC.schemes, x, *ys)
    values = const_ints(op, graph, 2 if split_v else 0, "axis")
    if len(values) != 1:
        raise unsupported(op, f"axis '{axis_t.name}' must hold one value, has {len(values)}")
    rank = len(x.shape)
    axis = axis_of(op, values[0], rank)
    for y in ys:
        if len(y.shape) != rank or any(y.shape[d] != x.shape[d] for d in range(rank)
                                       if d != axis):
            raise unsupported(op, f"output '{y.name}' {list(y.shape)} does not match the input "
                                  f"{list(x.shape)} outside axis {axis}")
    pieces = [y.shape[axis] for y in ys]
    if sum(pieces) != x.shape[axis]:
        raise unsupported(op, f"the outputs' sizes {pieces} along axis {axis} do not add up to "
                              f"the input's {x.shape[axis]}")
    if not split_v:
        n = op.options.get("num_splits", len(ys))
        if n != len(ys) or len(set(pieces)) > 1:
            raise unsupported(op, f"num_splits {n}: expects that many equal outputs, has "
                                  f"{pieces}")
    else:
        sizes = const_ints(op, graph, 1, "size_splits", ("int32", "int64"))
        if len(sizes) != len(ys) or any(s not in (-1, p) for s, p in zip(sizes, pieces,
                                                                         strict=True)):
            raise unsupported(op, f"size_splits {sizes} do not match the outputs' sizes "
                                  f"{pieces} along axis {axis}")
    src = Sources()
    name, const = src.add(x, "input")
    xst = strides(list(x.shape))
    per_output, at = [], 0
    for k, y in enumerate(ys):
        per_output.append([box(f"out{k}", list(y.shape), strides(list(y.shape)), name, xst,
                               src_offset=at * xst[axis], const=const)])
        at += y.shape[axis]
    moves = [m for ms in per_output for m in ms]
    return move_kernel(op, moves, src, [y.index for y in ys], view_offsets(per_output, x))

"""PACK (TFLM ``pack.cc``): ``values_count`` inputs of one shape stacked along a new dimension
``axis`` of the output (negative: from the end of the output's rank).

Types: float32, int8, int16, int32, int64, the same for all; the codes are copied as they are
(TFLM checks no quantization). Inputs may be constants.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import (
    Sources,
    axis_of,
    box,
    check_types,
    expect_shape,
    input0_scheme,
    move_kernel,
    strides,
)
from .common import Kernel, OpSpec, tensor_in, tensor_out, unsupported

SPEC = OpSpec(opcodes=("PACK",), schemes=("float32", "int8", "int16", "int32", "int64"),
              classify=input0_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    n = int(op.options.get("values_count", len(op.inputs)))
    if len(op.inputs) != n or n < 1 or len(op.outputs) != 1:
        raise unsupported(op, f"values_count {n}: expects that many inputs and one output, has "
                              f"{len(op.inputs)} and {len(op.outputs)}")
    xs = [tensor_in(graph, op, i) for i in range(n)]
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, y, *xs)
    shape = list(xs[0].shape)
    for t in xs[1:]:
        if list(t.shape) != shape:
            raise unsupported(op, f"input '{t.name}' {list(t.shape)} differs from "
                                  f"'{xs[0].name}' {shape}; PACK takes one shape")
    axis = axis_of(op, int(op.options.get("axis", 0)), len(shape) + 1)
    out = [*shape[:axis], n, *shape[axis:]]
    expect_shape(op, y, out, f"stacking {n} x {shape} along axis {axis}")
    ost = strides(out)
    src = Sources()
    moves = []
    for k, t in enumerate(xs):
        name, const = src.add(t, f"value{k}")
        moves.append(box("out0", shape, ost[:axis] + ost[axis + 1:], name, strides(shape),
                         dst_offset=k * ost[axis], const=const))
    return move_kernel(op, moves, src, [y.index])

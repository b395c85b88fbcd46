"""SHAPE (TFLM ``shape.cc``): the input's dimensions as an int32 vector.

Shapes are static, so the output is a constant written by a ``memcpy``; the input is not read
(it may be of any type). TFLM writes int32 only and refuses an int64 output, so does the
emitter.
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import Sources, box, expect_shape, move_kernel, output_scheme
from .common import ConstArray, Kernel, OpSpec, check_counts, tensor_in, tensor_out

SPEC = OpSpec(opcodes=("SHAPE",), schemes=("int32",), classify=output_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (1,))
    x = tensor_in(graph, op, 0)
    y = tensor_out(graph, op)
    expect_shape(op, y, [len(x.shape)], f"the shape of '{x.name}' {list(x.shape)}")
    src = Sources()
    moves = []
    if x.shape:  # a scalar's shape is empty: nothing to write
        src.constants.append(ConstArray("dims", "int32_t", np.asarray(x.shape, np.int32)))
        moves.append(box("out0", [len(x.shape)], [1], "dims", [1], const=True))
    return move_kernel(op, moves, src, [y.index])

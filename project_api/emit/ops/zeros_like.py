"""ZEROS_LIKE (TFLM ``zeros_like.cc``): an output of the input's shape and type, all 0 (the code
0 for int8, not the zero point, as TFLM writes it). The input is not read.

Types: float32, int8, int32, int64 (TFLM's list).
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import Sources, box, check_types, expect_shape, literal, move_kernel, strides
from .common import Kernel, OpSpec, check_counts, dtype_scheme, tensor_in, tensor_out

SPEC = OpSpec(opcodes=("ZEROS_LIKE",), schemes=("float32", "int8", "int32", "int64"),
              classify=dtype_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (1,))
    x = tensor_in(graph, op, 0)
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, x, y)
    expect_shape(op, y, list(x.shape), "ZEROS_LIKE")
    shape = list(y.shape)
    moves = [box("out0", shape, strides(shape), value=literal(0, y.dtype))]
    return move_kernel(op, moves, Sources(), [y.index])

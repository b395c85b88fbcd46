"""BROADCAST_TO (TFLM ``broadcast_to.cc``, ``reference_ops::BroadcastTo``): the input repeated
along its size-1 dimensions (and new leading ones) to ``shape``, rank at most 5.

``shape`` is a constant int32 or int64 vector (TFLM requires a constant), the output's static
shape. TFLM copies raw bytes, so any element type goes: float32, int8, int16, int32, int64,
bool. One loop nest that reads a broadcast dimension with stride 0.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import (
    MOVER_TYPES,
    Sources,
    box,
    check_rank,
    check_types,
    const_ints,
    expect_shape,
    move_kernel,
    strides,
)
from .common import Kernel, OpSpec, check_counts, dtype_scheme, tensor_in, tensor_out, unsupported

SPEC = OpSpec(opcodes=("BROADCAST_TO",), schemes=MOVER_TYPES, classify=dtype_scheme)

#: TFLM's kMaxDims.
MAX_RANK = 5


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (2,))
    x = tensor_in(graph, op, 0)
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, x, y)
    check_rank(op, x, MAX_RANK)
    shape = const_ints(op, graph, 1, "shape", ("int32", "int64"))
    if len(shape) > MAX_RANK:
        raise unsupported(op, f"shape {shape} has rank {len(shape)}; TFLM takes at most "
                              f"{MAX_RANK}")
    extra = len(shape) - len(x.shape)
    if extra < 0 or any(n not in (1, shape[extra + d]) for d, n in enumerate(x.shape)):
        raise unsupported(op, f"'{x.name}' {list(x.shape)} does not broadcast to {shape}")
    expect_shape(op, y, shape, f"broadcasting {list(x.shape)}")
    full = [1] * extra + list(x.shape)
    xst = strides(full)
    src = Sources()
    name, const = src.add(x, "input")
    moves = [box("out0", shape, strides(shape), name,
                 [0 if full[d] == 1 else xst[d] for d in range(len(shape))], const=const)]
    return move_kernel(op, moves, src, [y.index])

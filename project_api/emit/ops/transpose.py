"""TRANSPOSE (TFLM ``transpose.cc``, ``reference_ops::Transpose``): output dimension ``k`` is
input dimension ``perm[k]``, rank 1 to 5.

``perm`` is a constant int32 vector of the input's rank, a permutation (TFLM requires a
constant and checks the range). Types: float32, int8, int16; the codes are copied as they are.
One loop nest: the output in order, the input read with the permuted strides (its innermost
contiguous run, if the permutation keeps one, as ``memcpy``).
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
)
from .common import Kernel, OpSpec, check_counts, dtype_scheme, tensor_in, tensor_out, unsupported

SPEC = OpSpec(opcodes=("TRANSPOSE",), schemes=("float32", "int8", "int16"),
              classify=dtype_scheme)

#: TFLM's limit on the rank.
MAX_RANK = 5


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (2,))
    x = tensor_in(graph, op, 0)
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, x, y)
    check_rank(op, x, MAX_RANK, 1)
    perm = const_ints(op, graph, 1, "perm")
    rank = len(x.shape)
    if sorted(perm) != list(range(rank)):
        raise unsupported(op, f"perm {perm} is not a permutation of the {rank} dimensions of "
                              f"'{x.name}'")
    out = [x.shape[p] for p in perm]
    expect_shape(op, y, out, f"transposing {list(x.shape)} by {perm}")
    src = Sources()
    name, const = src.add(x, "input")
    xst = strides(list(x.shape))
    moves = [box("out0", out, strides(out), name, [xst[p] for p in perm], const=const)]
    return move_kernel(op, moves, src, [y.index])

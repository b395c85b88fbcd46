"""MIRROR_PAD (TFLM ``mirror_pad.cc``): the input padded with its own reflection, ``REFLECT``
(the edge element not repeated) or ``SYMMETRIC`` (repeated).

The paddings are a constant int32 or int64 ``[rank, 2]`` tensor, each side at most the
dimension minus 1 (REFLECT) or the dimension (SYMMETRIC): beyond that TFLM's index arithmetic
leaves the input. Types: float32, int8 (TFLM's list), the codes copied as they are.

Computed separably, as the per-element index TFLM takes is a reflection per dimension: the
input is copied into the middle, then, from the innermost dimension out, each dimension's
borders are copied (reversed) from what is already written, the dimensions before it taken
inside the input's box, the ones after it whole.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import (
    Sources,
    box,
    check_types,
    expect_shape,
    move_kernel,
    strides,
)
from .common import Kernel, OpSpec, check_counts, dtype_scheme, tensor_in, tensor_out, unsupported
from .pad import paddings

SPEC = OpSpec(opcodes=("MIRROR_PAD",), schemes=("float32", "int8"), classify=dtype_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (2,))
    x = tensor_in(graph, op, 0)
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, x, y)
    rank = len(x.shape)
    pads = paddings(op, graph, rank, types=("int32", "int64"))
    mode = op.options.get("mode", "REFLECT")
    if mode not in ("REFLECT", "SYMMETRIC"):
        raise unsupported(op, f"mode {mode} not supported (REFLECT, SYMMETRIC)")
    edge = 1 if mode == "REFLECT" else 0  # TFLM's offset: the edge element is not repeated
    for d, ((a, b), n) in enumerate(zip(pads, x.shape, strict=True)):
        if max(a, b) > n - edge:
            raise unsupported(op, f"paddings {pads}: dimension {d} of '{x.name}' "
                                  f"{list(x.shape)} takes at most {n - edge} on each side in "
                                  f"{mode} mode")
    out = [n + a + b for n, (a, b) in zip(x.shape, pads, strict=True)]
    expect_shape(op, y, out, f"{mode} padding {list(x.shape)} by {pads}")
    ost = strides(out)
    lo = [a for a, _ in pads]
    src = Sources()
    name, const = src.add(x, "input")
    moves = [box("out0", list(x.shape), ost, name, strides(list(x.shape)), const=const,
                 dst_offset=sum(a * s for a, s in zip(lo, ost, strict=True)))]
    for d in range(rank - 1, -1, -1):
        a, b = pads[d]
        n = x.shape[d]
        inside = [x.shape[k] for k in range(d)]
        corner = sum(lo[k] * ost[k] for k in range(d))
        rest = out[d + 1:]
        for count, first_dst, first_src in ((a, 0, 2 * a - 1 + edge),
                                            (b, a + n, a + n - 1 - edge)):
            if count:
                moves.append(box("out0", [*inside, count, *rest], ost, "out0",
                                 [*ost[:d], -ost[d], *ost[d + 1:]],
                                 dst_offset=corner + first_dst * ost[d],
                                 src_offset=corner + first_src * ost[d]))
    return move_kernel(op, moves, src, [y.index])

"""DEPTH_TO_SPACE (TFLM ``depth_to_space.cc``, ``reference_ops::DepthToSpace``): NHWC; each
input pixel's ``block_size * block_size * C`` channels become a ``block_size`` square of
pixels with ``C`` channels (``out[b, h, w, d] = in[b, h / bs, w / bs, ((h % bs) * bs + w % bs)
* C + d]``).

Rank 4, ``block_size`` >= 1; float32 and int8 (TFLM's list), the codes copied as they are. One
loop nest over ``(b, h / bs, h % bs, w / bs, w % bs, d)``.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import (
    Sources,
    box,
    check_rank,
    check_types,
    expect_shape,
    move_kernel,
    strides,
)
from .common import Kernel, OpSpec, check_counts, dtype_scheme, tensor_in, tensor_out, unsupported

SPEC = OpSpec(opcodes=("DEPTH_TO_SPACE",), schemes=("float32", "int8"), classify=dtype_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (1,))
    x = tensor_in(graph, op, 0)
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, x, y)
    check_rank(op, x, 4, 4)
    bs = int(op.options.get("block_size", 0))
    n, h, w, c = x.shape
    if bs < 1 or c % (bs * bs):
        raise unsupported(op, f"block_size {bs} must be >= 1 and its square divide the "
                              f"{c} channels of '{x.name}'")
    oc = c // (bs * bs)
    expect_shape(op, y, [n, h * bs, w * bs, oc], f"DEPTH_TO_SPACE by {bs}")
    ow = w * bs
    src = Sources()
    name, const = src.add(x, "input")
    xst = strides(list(x.shape))
    # output loops (b, ih, sh, iw, sw, d)
    dst = [h * bs * ow * oc, bs * ow * oc, ow * oc, bs * oc, oc, 1]
    srs = [xst[0], xst[1], bs * oc, xst[2], oc, 1]
    moves = [box("out0", [n, h, bs, w, bs, oc], dst, name, srs, const=const)]
    return move_kernel(op, moves, src, [y.index])

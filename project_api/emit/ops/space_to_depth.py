"""SPACE_TO_DEPTH (TFLM ``space_to_depth.cc``, ``reference_ops::SpaceToDepth``): NHWC; each
``block_size`` square of pixels becomes one pixel with ``block_size * block_size * C``
channels (the inverse of DEPTH_TO_SPACE: ``out[b, h, w, (sh * bs + sw) * C + d] = in[b, h * bs
+ sh, w * bs + sw, d]``).

Rank 4, height and width multiples of ``block_size``; float32 and int8 (TFLM's list), the codes
copied as they are.
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

SPEC = OpSpec(opcodes=("SPACE_TO_DEPTH",), schemes=("float32", "int8"), classify=dtype_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (1,))
    x = tensor_in(graph, op, 0)
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, x, y)
    check_rank(op, x, 4, 4)
    bs = int(op.options.get("block_size", 0))
    n, h, w, c = x.shape
    if bs < 1 or h % bs or w % bs:
        raise unsupported(op, f"block_size {bs} must be >= 1 and divide the height {h} and "
                              f"width {w} of '{x.name}'")
    oh, ow, oc = h // bs, w // bs, c * bs * bs
    expect_shape(op, y, [n, oh, ow, oc], f"SPACE_TO_DEPTH by {bs}")
    src = Sources()
    name, const = src.add(x, "input")
    xst = strides(list(x.shape))
    # output loops (b, oh, ow, sh, sw, d)
    dst = [oh * ow * oc, ow * oc, oc, bs * c, c, 1]
    srs = [xst[0], bs * xst[1], bs * xst[2], xst[1], xst[2], 1]
    moves = [box("out0", [n, oh, ow, bs, bs, c], dst, name, srs, const=const)]
    return move_kernel(op, moves, src, [y.index])

"""BATCH_TO_SPACE_ND (TFLM ``batch_to_space_nd.cc``, ``reference_ops::BatchToSpaceND``): NHWC
(or NHC, as ``[N, H, 1, C]``); the batch is cut into ``block_h * block_w`` groups interleaved
into the pixels of the output, then ``crops`` trimmed from the borders.

``block_shape`` and ``crops`` are constant int32 tensors (``[2]`` and ``[2, 2]``, rank 3:
``[1]`` and ``[1, 2]``), as TFLM reads them; the output shape must be the input's spatial
dimensions times the block minus the crops. Types: float32, int8 (TFLM's list), the codes copied
as they are. One move per block offset.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._batch_space import TYPES, operands, valid_run
from ._movement import Sources, box, move_kernel, strides
from .common import Kernel, OpSpec, dtype_scheme, unsupported

SPEC = OpSpec(opcodes=("BATCH_TO_SPACE_ND",), schemes=TYPES, classify=dtype_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y, (ib, ih, iw, c), out, (bh, bw), (ct, cb, cl, cr) = operands(op, graph, "crops")
    expect = [ib // (bh * bw), ih * bh - ct - cb, iw * bw - cl - cr, c]
    if ib % (bh * bw) or out != expect or min(expect) < 0:
        raise unsupported(op, f"output '{y.name}' has shape {list(y.shape)}; batch {ib}, "
                              f"block [{bh}, {bw}] and crops [{ct}, {cb}, {cl}, {cr}] of "
                              f"'{x.name}' {list(x.shape)} give {expect}")
    ob, oh, ow, _ = out
    xst, ost = strides([ib, ih, iw, c]), strides(out)
    src = Sources()
    name, const = src.add(x, "input")
    moves = []
    for so in range(bh * bw):
        sh, sw = so // bw, so % bw
        h0, nh = valid_run(ih, bh, sh, ct, oh)
        w0, nw = valid_run(iw, bw, sw, cl, ow)
        moves.append(box("out0", [ob, nh, nw, c], [ost[0], bh * ost[1], bw * ost[2], 1], name,
                         xst, const=const,
                         dst_offset=(h0 * bh + sh - ct) * ost[1] + (w0 * bw + sw - cl) * ost[2],
                         src_offset=so * ob * xst[0] + h0 * xst[1] + w0 * xst[2]))
    return move_kernel(op, moves, src, [y.index])

"""SPACE_TO_BATCH_ND (TFLM ``space_to_batch_nd.cc``, ``reference_ops::SpaceToBatchND``): NHWC
(or NHC, as ``[N, H, 1, C]``); the input padded by ``paddings``, then each ``block_h *
block_w`` offset of its pixels becomes one group of output batches.

``block_shape`` and ``paddings`` are constant int32 tensors (``[2]`` and ``[2, 2]``, rank 3:
``[1]`` and ``[1, 2]``), as TFLM reads them; the output shape must be the padded spatial
dimensions divided by the block. Types: float32, int8 (TFLM's list).

The padding is the real value 0 (int8: the output zero point), as TFLite's kernel (LiteRT)
pads. TFLM's result there is undefined: its kernel pads with its parameters'
``output_offset``, which its Prepare never sets, so the padding is whatever the arena held
(zero bytes in a fresh arena, the bytes of earlier tensors after that).
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._batch_space import TYPES, operands, valid_run
from ._movement import Sources, box, fill_outside, literal, move_kernel, strides
from .common import Kernel, OpSpec, dtype_scheme, per_tensor, unsupported

SPEC = OpSpec(opcodes=("SPACE_TO_BATCH_ND",), schemes=TYPES, classify=dtype_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y, (ib, ih, iw, c), out, (bh, bw), (pt, pb, pl, pr) = operands(op, graph, "paddings")
    ph, pw = ih + pt + pb, iw + pl + pr
    expect = [ib * bh * bw, ph // bh, pw // bw, c]
    if ph % bh or pw % bw or out != expect:
        raise unsupported(op, f"output '{y.name}' has shape {list(y.shape)}; batch {ib}, "
                              f"block [{bh}, {bw}] and paddings [{pt}, {pb}, {pl}, {pr}] of "
                              f"'{x.name}' {list(x.shape)} give {expect}")
    _, oh, ow, _ = out
    xst, ost = strides([ib, ih, iw, c]), strides(out)
    zero = literal(0.0, "float32") if y.dtype == "float32" else str(per_tensor(op, y)[1])
    src = Sources()
    name, const = src.add(x, "input")
    moves = []
    for shift in range(bh * bw):
        sh, sw = shift // bw, shift % bw
        h0, nh = valid_run(oh, bh, sh, pt, ih)
        w0, nw = valid_run(ow, bw, sw, pl, iw)
        base = shift * ib * ost[0]
        moves += fill_outside("out0", [ib, oh, ow, c], [0, h0, w0, 0],
                              [ib, h0 + nh, w0 + nw, c], zero, base, ost)
        moves.append(box("out0", [ib, nh, nw, c], [ost[0], ost[1], ost[2], 1], name,
                         [xst[0], bh * xst[1], bw * xst[2], 1], const=const,
                         dst_offset=base + h0 * ost[1] + w0 * ost[2],
                         src_offset=(h0 * bh + sh - pt) * xst[1] + (w0 * bw + sw - pl) * xst[2]))
    return move_kernel(op, moves, src, [y.index])

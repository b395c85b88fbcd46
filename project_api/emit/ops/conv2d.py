"""CONV_2D: int8 per-channel (TFLM ``ConvPerChannel``), int16x8 (its int16 form: no offsets, an
int64 accumulator with an int64 bias or an int32 one with an int32 bias) and float32, any
stride/padding/dilation.

Two loop forms are generated, both exact:

* ``dot``: when no filter tap ever falls outside the input (VALID, or SAME that needs no
  padding, e.g. 1x1), the input offset is folded into the bias at emit time and each output is
  ``bias' + sum(w * x)`` over contiguous input channels (a dot product the compiler vectorises).
* ``tap``: otherwise, the weights are re-laid out as ``[ky][kx][ic][oc]`` and every output pixel
  accumulates all output channels at once over the in-bounds taps, with
  ``w * (x - zp_in)`` as in TFLM (padding reads as the zero point, i.e. contributes nothing).
  Also where the folded bias of the dot form would overflow int32 (TFLM's real accumulators
  may all fit while that term alone does not).

On a DSP target (``cortex-m4``, ``m7``, ``m33``) an int8 convolution instead gets one of two
SIMD kernels (``kernels/*.dsp.c.j2``, see :mod:`._dsp`):

* ``conv2d_1x1.dsp``: a 1x1 filter with no padding and an input depth that is a multiple of 4,
  on the raw input with the input offset folded into the bias (unless that overflows int32);
* ``conv2d_im2col.dsp``: everything else, through two int16 columns in the pool (scratch).
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator, Tensor

from .. import quantize as q
from ..target import GENERIC, Target
from . import _dsp
from ._weighted import (
    float_weights_and_bias,
    int8_requant,
    int16_weighted,
    int32_bias,
    weighted_operands,
)
from .common import (
    ConstArray,
    Kernel,
    OpSpec,
    accumulator,
    check_dtype,
    check_same_type,
    check_shape,
    check_spatial,
    compute_padding,
    per_tensor,
    unsupported,
)

SPEC = OpSpec(opcodes=("CONV_2D",), schemes=("float32", "int8", "int16x8"), dsp=("int8",))

#: Output channels per pass of the portable int8 loops, where the channel count is a multiple of
#: it: their accumulators stay in registers and share each input load (on RV32, the weights of
#: the pass are at immediate offsets from one pointer).
ROWS = 4
#: Helium gathers a padded convolution's window into a column and takes the dot products of
#: four output channels at a time with it where the window holds at least this many bytes (on
#: mps3-an547, lowering this from 32 to 16 took the 3x3x3 first layers, 27 bytes, from the DSP
#: kernel: VWW 7.867 M -> 7.687 M, IC 4.949 M -> 4.677 M instructions).
MVE_COL_MIN = 16

def conv_geometry(op: Operator, x: Tensor, kh: int, kw: int) -> dict:
    check_spatial(op)
    if len(x.shape) != 4:
        raise unsupported(op, f"input '{x.name}' must be 4-D NHWC, shape {list(x.shape)}")
    n, h, w, c = x.shape
    sh, sw = op.options["stride_h"], op.options["stride_w"]
    dh, dw = op.options.get("dilation_h_factor", 1), op.options.get("dilation_w_factor", 1)
    oh, pad_h = compute_padding(h, kh, sh, dh, op.options["padding"])
    ow, pad_w = compute_padding(w, kw, sw, dw, op.options["padding"])
    if oh < 1 or ow < 1:
        raise unsupported(op, "the filter is larger than the input")
    inside = (pad_h == 0 and pad_w == 0 and (oh - 1) * sh + (kh - 1) * dh + 1 <= h
              and (ow - 1) * sw + (kw - 1) * dw + 1 <= w)
    return {"n": n, "h": h, "w": w, "c": c, "oh": oh, "ow": ow, "kh": kh, "kw": kw,
            "sh": sh, "sw": sw, "dh": dh, "dw": dw, "pad_h": pad_h, "pad_w": pad_w,
            "inside": inside}


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, w, b, y, act = weighted_operands(op, graph)
    check_dtype(op, x, ("int8", "float32", "int16"))
    check_same_type(op, x, y)
    if len(w.shape) != 4:
        raise unsupported(op, f"filter '{w.name}' must be 4-D OHWI")
    oc, kh, kw, ic = w.shape
    g = conv_geometry(op, x, kh, kw)
    if ic != g["c"]:
        raise unsupported(op, f"grouped convolution (filter depth {ic}, input depth {g['c']}) "
                              "not supported")
    check_shape(op, y, (g["n"], g["oh"], g["ow"], oc))
    params = dict(g, oc=oc, dtype=x.dtype, form="dot" if g["inside"] else "tap")
    if params["form"] == "dot" and x.dtype == "int8" and _folded_overflows(op, graph, w, b, oc):
        params["form"] = "tap"  # keeps the input offset apart, as TFLM does
    scratch = accumulator(params, oc) if params["form"] == "tap" else 0
    params.setdefault("scratch", False)

    if x.dtype == "float32":
        wf, bias = float_weights_and_bias(op, w, b, oc, 0, "filter")
        lo, hi = q.activation_range_float(act)
        params.update(act_min=lo, act_max=hi)
        wl = wf if params["form"] == "dot" else wf.transpose(1, 2, 3, 0)
        return Kernel(op, "conv2d.c.j2", params, [x.index], [y.index],
                      [ConstArray("w", "float", np.ascontiguousarray(wl).reshape(-1)),
                       ConstArray("b", "float", bias)], scratch_bytes=scratch)

    if x.dtype == "int16":
        return _prepare_int16(op, x, w, b, y, act, params)

    check_dtype(op, w, ("int8",))
    _, in_zp = per_tensor(op, x)
    rq, consts = int8_requant(op, x, w, y, oc, 0, act)
    params.update(rq, in_off=-in_zp)
    bias = int32_bias(op, b, oc)
    mve = target.mve and _mve_wins(params)
    col = (target.mve and not mve and params["kh"] * params["kw"] * params["c"] >= MVE_COL_MIN
           and not _folded_overflows(op, graph, w, b, oc))
    if col:  # the tap form's window gathered into a column: a dot product on Helium
        params.update(form="dot", col=True, scratch=False,
                      direct=params["dw"] == 1 and params["kw"] * params["c"] % 16 == 0)
        mve, scratch = True, params["kh"] * params["kw"] * params["c"]
    if target.dsp and not mve:
        if target.weights == "int8":
            kernel = prepare_dsp8(op, x, w, y, params, bias, consts)
            if kernel is not None:
                return kernel
        return prepare_dsp(op, x, w, y, params, bias, consts)
    if params["form"] == "dot":
        bias = bias + (-in_zp) * w.data.astype(np.int64).reshape(oc, -1).sum(axis=1)
        wl = w.data
        bound = _dsp.acc_bound(w.data, bias, 128)
    else:
        wl = w.data.transpose(1, 2, 3, 0)
        bound = _dsp.acc_bound(w.data, bias, 255)
    if mve and params["form"] == "dot":  # four filters a pass, interleaved run by run
        run = (params["kh"] * params["kw"] * params["c"] if params.get("col")
               else params["kw"] * params["c"] if params["dw"] == 1 else params["c"])
        wl = _dsp.interleave4(w.data.reshape(oc, -1), run)
    rq = _dsp.mve_requant(params, *consts) if mve else _dsp.requant(params, *consts, bound)
    consts = [ConstArray("w", "int8_t", np.ascontiguousarray(wl).astype(np.int8).reshape(-1)),
              ConstArray("b", "int32_t", bias.astype(np.int32))] + rq
    params["mve"] = mve  # the portable loops with their dot products on Helium
    params["pair"] = _pair_geometry(params) if mve else None
    if not mve and oc % ROWS == 0:
        params["rows"] = ROWS  # ROWS channels a pass, in registers: no accumulator array
        scratch, params["scratch"] = 0, False
    return Kernel(op, "conv2d.c.j2", params, [x.index], [y.index], consts,
                  scratch_bytes=scratch, headers=("mve.h.j2",) if mve else ())


def _pair_geometry(params: dict) -> dict | None:
    """M_DOT4X2's literals (mve.h) where Helium's dot form takes two output pixels a pass, else
    None: filter rows of whole vectors (kw x c contiguous bytes, a multiple of 16; nv vectors
    each), at least three in the window, the second pixel's input dx <= 127 bytes on (an
    immediate offset), the skip from a row's end to the next row's an immediate of ADDW (at
    most 4095), at least four output channels; xb: the input bytes the two windows read."""
    run = params["kw"] * params["c"]
    dx = params["sw"] * params["c"]
    skip = params["dh"] * params["w"] * params["c"] - run
    if not (params["dw"] == 1 and run % 16 == 0 and dx <= 127 and 0 <= skip <= 4095
            and params["oc"] >= 4 and params["ow"] >= 2 and params["kh"] * run >= 48):
        return None
    return {"nv": run // 16, "dx": dx, "skip": skip,
            "xb": (params["kh"] - 1) * (run + skip) + run + dx}


def _mve_wins(params: dict) -> bool:
    """Whether the Helium kernel beats the DSP ones (measured on mps3-an547, bench/cortex_m.py):
    the dot form (no tap in the padding) with at least 8 bytes per dot product (a filter row of
    kw x c contiguous bytes, or c per tap when dilated): VWW's 1x1 layer over 8 channels, one
    tail-predicated vector per dot product, ran at 1.46 instructions per MAC against the DSP
    kernel's 2.75. The padded "tap" form, its accumulators in memory, and shallower runs stay
    with the DSP kernels."""
    run = params["kw"] * params["c"] if params["dw"] == 1 else params["c"]
    return params["form"] == "dot" and run >= 8


def _folded_overflows(op: Operator, graph: Graph, w: Tensor, b: Tensor | None, oc: int) -> bool:
    """Whether bias + input offset x the weight sum, the dot form's folded bias, leaves int32
    for some channel (TFLM never holds that term alone: its real accumulators may all fit)."""
    x = graph.tensor(op.inputs[0])
    if w.dtype != "int8" or not x.quant or not x.quant.zero_point:
        return False
    in_zp = int(x.quant.zero_point[0])
    bias = int32_bias(op, b, oc)
    folded = bias - in_zp * w.data.astype(np.int64).reshape(oc, -1).sum(axis=1)
    return bool(np.abs(folded).max(initial=0) > _dsp.INT32_MAX)


def _prepare_int16(op: Operator, x: Tensor, w: Tensor, b: Tensor | None, y: Tensor, act: str,
                   params: dict) -> Kernel:
    """int16x8 (TFLM's int16 ``ConvPerChannel``): no input or output offset, an int64 (or
    int32) accumulator, TFLM's requantization for it."""
    oc = params["oc"]
    rq, consts = int16_weighted(op, x, w, b, y, oc, 0, act, w.data)
    params.update(rq)
    scratch = 0
    if params["form"] == "tap":
        scratch = accumulator(params, oc, 8 if params["acc"] == "int64" else 4)
    wl = w.data if params["form"] == "dot" else w.data.transpose(1, 2, 3, 0)
    consts = [ConstArray("w", "int8_t", np.ascontiguousarray(wl).astype(np.int8).reshape(-1)),
              *consts]
    return Kernel(op, "conv2d.c.j2", params, [x.index], [y.index], consts,
                  scratch_bytes=scratch, headers=("int16.h.j2",) if params["acc"] == "int64"
                  else ())


def prepare_dsp(op: Operator, x: Tensor, w: Tensor, y: Tensor, params: dict,
                bias: np.ndarray, rq_consts: list[ConstArray]) -> Kernel:
    """The DSP-extension kernel of an int8 CONV_2D (``bias``: int64, offset not folded; ``w``:
    anything with ``shape`` OHWI and int8 ``data``; ``params``: the geometry, ``oc``, ``in_off``
    and the requantization's ``out_zp``/``act_min``/``act_max``). Also used by
    DEPTHWISE_CONV_2D with one input channel."""
    oc, kh, kw, ic = w.shape
    in_off = params["in_off"]
    wi = w.data.astype(np.int64)
    params = dict(params, scratch=False)
    folded = bias + in_off * wi.reshape(oc, -1).sum(axis=1)
    if (kh == 1 and kw == 1 and params["inside"] and ic % 4 == 0
            and np.abs(folded).max(initial=0) <= _dsp.INT32_MAX):
        bound = _dsp.acc_bound(wi, folded, 128)
        lanes = _dsp.pair_lanes(wi.reshape(oc, ic))  # [oc][ic/4][2]
        template, scratch, b_out = "conv2d_1x1.dsp.c.j2", 0, folded
    else:
        k = kh * kw * ic
        k2 = k + k % 2
        if ic % 4 == 0 or (params["dw"] == 1 and (kw * ic) % 4 == 0):
            # within each group of 4 consecutive column elements: 0, 2, 1, 3
            order = "lanes" if ic % 4 == 0 else "rows"
            flat = wi.reshape(oc, k // 4, 4)[..., [0, 2, 1, 3]].reshape(oc, k)
        else:
            order = "scalar"
            flat = wi.reshape(oc, k)
        if k2 != k:
            flat = np.concatenate([flat, np.zeros((oc, 1), np.int64)], axis=1)
        lanes = _dsp.pair_consecutive(flat)[..., None]  # [oc][k2/2][1]
        bound = _dsp.acc_bound(wi, bias, 255)
        template, b_out = "conv2d_im2col.dsp.c.j2", bias
        scratch = 2 * k2 * 2
        params.update(k2=k2, order=order, scratch=True)
    oc2 = oc - oc % 2
    # per pair of output channels, per column word (1x1: per half of a group of 4 inputs):
    # [oc0, oc1], adjacent so that one LDRD fetches both
    pairs = lanes[:oc2].reshape(oc2 // 2, 2, *lanes.shape[1:]).transpose(0, 2, 3, 1)
    wl = np.concatenate([pairs.reshape(-1), lanes[oc2:].reshape(-1)]).astype(np.int32)
    m, s = rq_consts
    params["off2"] = _dsp.offset_pair(in_off)
    rq = _dsp.requant(params, m, s, bound)
    consts = [ConstArray("w", "int32_t", wl), ConstArray("b", "int32_t", b_out.astype(np.int32))]
    return Kernel(op, template, params, [x.index], [y.index], consts + rq,
                  scratch_bytes=scratch)


#: Bytes of the two pixels' P/Q columns an int8 DSP convolution keeps on the stack; larger ones
#: are planned in the pool (scratch), like the accumulators of ``common.STACK_ACC_LIMIT_BYTES``.
MAX_STACK_COLUMN_BYTES = 512
#: Groups of 4 column elements the 2x2 block unrolls at constant offsets (else a loop whose
#: body is the largest divisor of the groups up to that many, at least MIN_GROUPS_PER_ITERATION).
MAX_UNROLLED_GROUPS = 16
MIN_GROUPS_PER_ITERATION = 4


def groups_per_iteration(k4: int) -> int:
    """Groups of 4 per loop iteration: the largest divisor of ``k4`` up to
    :data:`MAX_UNROLLED_GROUPS`, or :data:`MIN_GROUPS_PER_ITERATION` (plus a tail)."""
    best = max(d for d in range(1, MAX_UNROLLED_GROUPS + 1) if k4 % d == 0)
    return best if best >= MIN_GROUPS_PER_ITERATION else MIN_GROUPS_PER_ITERATION


def column_segments(g: dict, ic: int) -> list[tuple[int, int, int]]:
    """The runs of contiguous input bytes one output pixel's receptive field is read as:
    (filter row offset dy, filter column offset kx0, length in bytes). A 1x1 filter is one run
    of the input depth; with dilation 1 across, each filter row is one run of kw x depth
    bytes ("rows"); otherwise each tap is one run of the depth."""
    if g["kh"] == 1 and g["kw"] == 1:
        return [(0, 0, ic)]
    if g["dw"] == 1:
        return [(ky * g["dh"], 0, g["kw"] * ic) for ky in range(g["kh"])]
    return [(ky * g["dh"], kx * g["dw"], ic) for ky in range(g["kh"]) for kx in range(g["kw"])]


def column_order(segments: list[tuple[int, int, int]]) -> tuple[list[int], list[dict]]:
    """The column's element order: every run's whole words of 4 bytes, then the bytes left over
    from each run (in run order), padded to a multiple of 4 (-1: a zero weight). Returns the
    order as indices into the flattened filter [ky][kx][c] (a run starts at its row and column's
    element) and each run's layout (``dy``, ``kx0``, ``n``: its words, ``word``: the first one,
    ``left``: its leftover bytes' positions in the column)."""
    order: list[int] = []
    runs = []
    start = 0
    for dy, kx0, length in segments:
        runs.append({"dy": dy, "kx0": kx0, "len": length, "n": length // 4,
                     "word": len(order) // 4, "start": start})
        order += range(start, start + length // 4 * 4)
        start += length
    for r in runs:
        r["left"] = list(range(len(order), len(order) + r["len"] % 4))
        order += range(r["start"] + r["n"] * 4, r["start"] + r["len"])
    order += [-1] * (-len(order) % 4)
    return order, runs


def prepare_dsp8(op: Operator, x: Tensor, w: Tensor, y: Tensor, params: dict,
                 bias: np.ndarray, rq_consts: list[ConstArray]) -> Kernel | None:
    """The int8-weight DSP kernel of an int8 CONV_2D (``conv2d_pq.dsp.c.j2``), or None where
    the PQ form of :mod:`._dsp` cannot hold it (a weight of -128 beside a negative one, or a sum
    beyond +-2^23): then the int16-pair kernels serve. Arguments as :func:`prepare_dsp`.

    Each output pixel's receptive field becomes a column of P/Q word pairs (two pixels at a
    time; padding reads as the input zero point, the offset folded into the bias), then two
    pixels x two output channels per step: each weight word feeds four SMLADs after one
    SXTB16, each column pair two weight words."""
    oc, kh, kw, ic = w.shape
    g = dict(params)
    segs = column_segments(g, ic)
    order, runs = column_order(segs)
    k4 = len(order) // 4
    wi = w.data.astype(np.int64).reshape(oc, -1)
    idx = np.array([max(i, 0) for i in order])
    wperm = np.where(np.array(order) >= 0, wi[:, idx], 0)
    folded = bias + params["in_off"] * wi.sum(axis=1)
    folded, m, s = _dsp.constant_channels(wi, folded, *rq_consts, params)
    bound = _dsp.acc_bound(wi, folded, 128)
    pq = _dsp.pq_bytes(wperm)
    if pq is None or bound.max(initial=0) >= _dsp.PQ_LIMIT:
        return None
    col_bytes = 2 * 8 * k4
    lw0 = sum(r["n"] for r in runs)
    left = [(i, r["n"] * 4 + t) for i, r in enumerate(runs) for t in range(r["len"] % 4)]
    left += [None] * (4 * k4 - 4 * lw0 - len(left))
    g.update(left_words=[left[j:j + 4] for j in range(0, len(left), 4)], lw0=lw0,
             pads=[4 * lw0 + j for j, src in enumerate(left) if src is None])
    zpb = (-params["in_off"]) & 0xFF
    g.update(k4=k4, runs=runs, pq=True, zpw=zpb * 0x01010101, offp=_dsp.pq_offset(), zp=-params["in_off"],
             one_by_one=kh == 1 and kw == 1 and params["inside"],
             stack=col_bytes <= MAX_STACK_COLUMN_BYTES, scratch=col_bytes > MAX_STACK_COLUMN_BYTES,
             unroll=k4 <= MAX_UNROLLED_GROUPS, per_iter=groups_per_iteration(k4))
    rq, low = _dsp.rq_params(g, m, s, bound, packed=True)
    wl = _dsp.blocked(_dsp.words(pq).reshape(oc, k4), 2)
    consts = [ConstArray("w", "int32_t", wl),
              ConstArray("b", "int32_t", _dsp.pq_init(folded, wperm, low))] + rq
    return Kernel(op, "conv2d_pq.dsp.c.j2", g, [x.index], [y.index], consts,
                  scratch_bytes=0 if g["stack"] else col_bytes)

"""DEPTHWISE_CONV_2D: int8 per-channel (TFLM ``DepthwiseConvPerChannel``), int16x8 (its int16
form: int64 accumulator and bias) and float32.

Output channel ``oc = ic * depth_multiplier + m``. Each output pixel accumulates every channel at
once over the in-bounds taps (``w * (x - zp_in)``, as TFLM), so the channel loop is contiguous.

On a DSP target an int8 depthwise convolution with depth multiplier 1 and a multiple of 4
channels gets ``depthwise_conv2d.dsp.c.j2``: four channels per input word, weights stored as
16-bit pairs in the lane order of ``SXTAB16`` (see :mod:`._dsp`). One with a single input
channel (any multiplier) is a plain convolution with one input channel, and gets CONV_2D's
im2col kernel.
"""

from __future__ import annotations

from types import SimpleNamespace

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
    per_tensor,
    unsupported,
)
from .conv2d import ROWS, conv_geometry, prepare_dsp, prepare_dsp8

SPEC = OpSpec(opcodes=("DEPTHWISE_CONV_2D",), schemes=("float32", "int8", "int16x8"),
              dsp=("int8",))

def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, w, b, y, act = weighted_operands(op, graph)
    check_dtype(op, x, ("int8", "float32", "int16"))
    check_same_type(op, x, y)
    if len(w.shape) != 4 or w.shape[0] != 1:
        raise unsupported(op, f"filter '{w.name}' must be [1, H, W, C*M], shape {list(w.shape)}")
    _, kh, kw, oc = w.shape
    g = conv_geometry(op, x, kh, kw)
    if oc % g["c"]:
        raise unsupported(op, f"filter channels {oc} are not a multiple of input channels "
                              f"{g['c']}")
    dm = oc // g["c"]
    opt_dm = op.options.get("depth_multiplier", 0)
    if opt_dm not in (0, dm):
        raise unsupported(op, f"depth_multiplier {opt_dm} does not match the filter ({dm})")
    check_shape(op, y, (g["n"], g["oh"], g["ow"], oc))
    params = dict(g, oc=oc, dm=dm, dtype=x.dtype)
    scratch = accumulator(params, oc)

    if x.dtype == "float32":
        wf, bias = float_weights_and_bias(op, w, b, oc, 3, "filter")
        lo, hi = q.activation_range_float(act)
        params.update(act_min=lo, act_max=hi)
        return Kernel(op, "depthwise_conv2d.c.j2", params, [x.index], [y.index],
                      [ConstArray("w", "float", wf.reshape(-1)), ConstArray("b", "float", bias)],
                      scratch_bytes=scratch)

    if x.dtype == "int16":
        # TFLM's int16 DepthwiseConvPerChannel: int64 accumulator, int64 bias only
        rq, consts = int16_weighted(op, x, w, b, y, oc, 3, act,
                                    w.data.reshape(kh * kw, oc).T, int64_only=True)
        params.update(rq)
        scratch = accumulator(params, oc, 8)
        return Kernel(op, "depthwise_conv2d.c.j2", params, [x.index], [y.index],
                      [ConstArray("w", "int8_t", w.data.astype(np.int8).reshape(-1)), *consts],
                      scratch_bytes=scratch, headers=("int16.h.j2",))

    check_dtype(op, w, ("int8",))
    _, in_zp = per_tensor(op, x)
    rq, consts = int8_requant(op, x, w, y, oc, 3, act)
    params.update(rq, in_off=-in_zp)
    bias = int32_bias(op, b, oc).astype(np.int32)
    if target.mve and dm == 1 and oc % 4 == 0 and oc >= MVE_LANES_MIN:
        kernel = _prepare_mve_lanes(op, x, w, y, params, bias, consts, in_zp)
        if kernel is not None:
            return kernel
    if target.dsp and g["c"] == 1:
        # out[.., o] = sum over taps of w[ky, kx, o] * x[.., 0]: CONV_2D weights [o, ky, kx, 1]
        as_conv = SimpleNamespace(shape=(oc, kh, kw, 1),
                                  data=np.ascontiguousarray(w.data.transpose(3, 1, 2, 0)))
        if target.weights == "int8":
            kernel = prepare_dsp8(op, x, as_conv, y, dict(params, in_off=-in_zp),
                                  bias.astype(np.int64), consts)
            if kernel is not None:
                return kernel
        return prepare_dsp(op, x, as_conv, y, dict(params, in_off=-in_zp),
                           bias.astype(np.int64), consts)
    if target.dsp and dm == 1 and oc % 4 == 0 and target.weights == "int8":
        kernel = _prepare_dsp8(op, x, w, y, params, bias, consts)
        if kernel is not None:
            return kernel
    if target.dsp and dm == 1 and oc % 4 == 0:
        wi = w.data.astype(np.int64).reshape(kh * kw, oc)
        m, s = consts
        rq = _dsp.requant(params, m, s, _dsp.acc_bound(wi.T, bias, 255))
        params.update(scratch=False, off2=_dsp.offset_pair(-in_zp))
        consts = [ConstArray("w", "int32_t", _dsp.pair_lanes(wi).reshape(-1)),
                  ConstArray("b", "int32_t", bias)] + rq + _tap_classes(params)
        return Kernel(op, "depthwise_conv2d.dsp.c.j2", params, [x.index], [y.index], consts)
    bound = _dsp.acc_bound(w.data.reshape(kh * kw, oc).T, bias, 255)
    consts = [ConstArray("w", "int8_t", w.data.astype(np.int8).reshape(-1)),
              ConstArray("b", "int32_t", bias)] + _dsp.requant(params, *consts, bound)
    # where no DSP kernel applies, Helium's taps (where the DSP ones do, they beat these:
    # bench/cortex_m.py on mps3-an547)
    params["mve"] = target.mve and dm == 1
    if not params["mve"] and dm == 1 and oc % ROWS == 0:
        params["rows"] = ROWS  # ROWS channels a pass, in registers: no accumulator array
        scratch, params["scratch"] = 0, False
    return Kernel(op, "depthwise_conv2d.c.j2", params, [x.index], [y.index], consts,
                  scratch_bytes=scratch, headers=("mve.h.j2",) if params["mve"] else ())


#: Most taps the DSP kernel unrolls over all its pixel classes (else it loops with bounds checks).
MAX_UNROLLED_TAPS = 256
#: Bytes of one channel group's widened weights the int8 kernel keeps on the stack (8 per tap).
MAX_STACK_WEIGHT_BYTES = 512


def _valid_taps(out: int, stride: int, pad: int, k: int, dil: int, size: int) -> list[tuple]:
    """Per output row (column): the filter rows (columns) that fall inside the input."""
    return [tuple(t for t in range(k) if 0 <= o * stride - pad + t * dil < size)
            for o in range(out)]


def _tap_classes(params: dict) -> list[ConstArray]:
    """Group the output rows and columns by their in-bounds taps; sets ``params`` ``classes``,
    ``rows`` and ``cols`` and returns the per-row/per-column class constants ``rc``/``cc``."""
    g = params
    rows = _valid_taps(g["oh"], g["sh"], g["pad_h"], g["kh"], g["dh"], g["h"])
    cols = _valid_taps(g["ow"], g["sw"], g["pad_w"], g["kw"], g["dw"], g["w"])
    urows, ucols = sorted(set(rows)), sorted(set(cols))
    taps = sum(len(r) for r in urows) * sum(len(c) for c in ucols)
    if not all(urows) or not all(ucols) or taps > MAX_UNROLLED_TAPS:
        params.update(classes=False)
        return []
    params.update(classes=True, rows=[list(r) for r in urows], cols=[list(c) for c in ucols])
    return [ConstArray("rc", "uint8_t", np.array([urows.index(r) for r in rows], np.uint8)),
            ConstArray("cc", "uint8_t", np.array([ucols.index(c) for c in cols], np.uint8))]


def _ranges(taps: list[tuple]) -> list[dict]:
    """Consecutive output rows (columns) with the same in-bounds filter rows (columns)."""
    out: list[dict] = []
    for i, t in enumerate(taps):
        if out and out[-1]["taps"] == list(t):
            out[-1]["end"] = i + 1
        else:
            out.append({"start": i, "end": i + 1, "taps": list(t)})
    return out


def _prepare_dsp8(op: Operator, x: Tensor, w: Tensor, y: Tensor, params: dict,
                  bias: np.ndarray, consts: list[ConstArray]) -> Kernel | None:
    """``depthwise_conv2d_i8.dsp.c.j2``: int8 weights as the .tflite stores them ([tap][channel],
    4 channels per word), widened once per group of 4 channels; None where a range of output
    rows or columns has no tap inside the input or the unrolled taps would exceed
    :data:`MAX_UNROLLED_TAPS`, or the widened weights of a group would pass
    :data:`MAX_STACK_WEIGHT_BYTES` (the int16-pair kernel then serves)."""
    g = params
    rows = _ranges(_valid_taps(g["oh"], g["sh"], g["pad_h"], g["kh"], g["dh"], g["h"]))
    cols = _ranges(_valid_taps(g["ow"], g["sw"], g["pad_w"], g["kw"], g["dw"], g["w"]))
    taps = sum(len(r["taps"]) for r in rows) * sum(len(c["taps"]) for c in cols)
    if not all(r["taps"] for r in rows + cols) or taps > MAX_UNROLLED_TAPS or \
            8 * g["kh"] * g["kw"] > MAX_STACK_WEIGHT_BYTES:
        return None
    widest = max(cols, key=lambda c: c["end"] - c["start"])
    for c in cols:
        c["pair"] = c is widest and c["end"] - c["start"] >= 2
    _, kh, kw, oc = w.shape
    wi = w.data.astype(np.int64).reshape(kh * kw, oc)
    b, m, s = _dsp.constant_channels(wi.T, bias.astype(np.int64), *consts, params)
    p = dict(params, scratch=False, off2=_dsp.offset_pair(params["in_off"]), pq=False,
             row_ranges=rows, col_ranges=cols)
    rq, _ = _dsp.rq_params(p, m, s, _dsp.acc_bound(wi.T, b, 255), packed=False)
    return Kernel(op, "depthwise_conv2d_i8.dsp.c.j2", p, [x.index], [y.index],
                  [ConstArray("w", "int32_t", _dsp.words(wi)),
                   ConstArray("b", "int32_t", b.astype(np.int32))] + rq)


#: Helium's depthwise kernel from this many channels (a full block of 16): on mps3-an547,
#: VWW's 8-channel layer (two blocks of 4) ran at 3.07 instructions per MAC against the DSP
#: kernel's 3.03, its 16- to 256-channel ones (m_dw16) at 1.2-1.3 against 2.6-3.6.
MVE_LANES_MIN = 16


def _block_constants(b: np.ndarray, m: np.ndarray, s: np.ndarray, c16: int) -> np.ndarray:
    """Helium's depthwise constants block by block, each block's biases, multipliers and shifts
    (int8, four to a word) one after another, so that one pointer reaches them all: 36 words a
    block of 16 channels, then 9 a block of 4."""
    parts = []
    for o, n in [(o, 16) for o in range(0, c16, 16)] + [(o, 4) for o in range(c16, len(b), 4)]:
        packed = np.ascontiguousarray(s[o:o + n].astype(np.int8)).view(np.int32)
        parts += [b[o:o + n].astype(np.int32), m[o:o + n].astype(np.int32), packed]
    return np.concatenate(parts)


#: The channels of a block of 16 in the order of m_dw16's accumulators (VMULLB/VMULLT.S8 split
#: even and odd channels, VMOVLB/VMOVLT.S16 each of those again).
_DW16_LANES = np.array([0, 4, 8, 12, 2, 6, 10, 14, 1, 5, 9, 13, 3, 7, 11, 15])


def _prepare_mve_lanes(op: Operator, x: Tensor, w: Tensor, y: Tensor, params: dict,
                       bias: np.ndarray, consts: list, in_zp: int) -> Kernel | None:
    """Helium's depthwise kernel (multiplier 1, channels a multiple of 4): the input offset
    folded into the bias over every tap, a padded tap reading a row of the zero point, 16
    channels a block (weights [block][tap][16], each block's constants in its accumulators'
    order, the blocks' constants in one array), the rest 4 at a time in channel order. None
    where that folded bias leaves int32 (the DSP kernel keeps the offset apart)."""
    _, kh, kw, oc = w.shape
    m, s = consts
    wi = w.data.astype(np.int64).reshape(kh * kw, oc)
    folded = bias.astype(np.int64) - in_zp * wi.sum(axis=0)
    if np.abs(folded).max(initial=0) > _dsp.INT32_MAX:
        return None
    c16 = oc - oc % 16
    order = np.concatenate([o + _DW16_LANES for o in range(0, c16, 16)]
                           + [np.arange(c16, oc)]).astype(np.int64)
    wl = np.concatenate([wi[:, o:o + 16].reshape(-1) for o in range(0, c16, 16)]
                        + [wi[:, o:o + 4].reshape(-1) for o in range(c16, oc, 4)])
    p = dict(params, lanes=True, scratch=False, mve=True)
    _dsp.mve_requant(p, m, s)
    consts = [ConstArray("w", "int8_t", wl.astype(np.int8)),
              ConstArray("q", "int32_t", _block_constants(folded[order], m.values[order],
                                                          s.values[order], c16)),
              ConstArray("z", "int8_t", np.full(params["c"], in_zp, np.int8))]
    return Kernel(op, "depthwise_conv2d.c.j2", p, [x.index], [y.index], consts,
                  headers=("mve.h.j2",))


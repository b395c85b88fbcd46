"""Shared preparation of the DSP-extension kernels (target ``cortex-m4``/``m7``/``m33``).

The kernels consume int8 data four bytes at a time: ``SXTB16``/``SXTAB16`` of a word gives its
bytes 0 and 2 as two 16-bit lanes, the same of the word rotated by 8 gives bytes 1 and 3. The
weights are therefore stored offline as 16-bit pairs in exactly that lane order (``pair_lanes``),
so one ``SMLAD`` does two multiply-accumulates with no shuffling at run time.

Requantization uses ``d_requant`` (one 32x32->64 multiply and two adds per output) where the
emitter proves that no accumulator the op can produce overflows its left shift or rounding add
(``fast_requant``); otherwise the op keeps TFLM's general ``q_mbqm``.
"""

from __future__ import annotations

import numpy as np

from .. import quantize as q
from .common import ConstArray

INT32_MAX = (1 << 31) - 1


def wrap32(v: np.ndarray) -> np.ndarray:
    """``v`` modulo 2^32 as int32 (two's complement), the value a wrapping C sum holds."""
    v = np.asarray(v, dtype=np.int64)
    return ((v + (1 << 31)) % (1 << 32) - (1 << 31)).astype(np.int32)


def pack16(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Words holding ``lo`` in bits 0..15 and ``hi`` in bits 16..31 (as int32 values)."""
    v = (lo.astype(np.int64) & 0xFFFF) | ((hi.astype(np.int64) & 0xFFFF) << 16)
    return v.astype(np.uint32).view(np.int32)


def pair_lanes(w: np.ndarray) -> np.ndarray:
    """``w[..., 4k + i]`` (last axis a multiple of 4) as words ``[..., k, 2]``: word 0 holds
    elements 0 and 2 of each group of four, word 1 elements 1 and 3 (the lanes ``SXTB16`` of a
    word and of the word rotated by 8 produce)."""
    g = w.astype(np.int64).reshape(*w.shape[:-1], w.shape[-1] // 4, 4)
    return np.stack([pack16(g[..., 0], g[..., 2]), pack16(g[..., 1], g[..., 3])], axis=-1)


def pair_consecutive(w: np.ndarray) -> np.ndarray:
    """``w[..., 2k], w[..., 2k + 1]`` (last axis even) as one word each: ``[..., k]``."""
    g = w.astype(np.int64).reshape(*w.shape[:-1], w.shape[-1] // 2, 2)
    return pack16(g[..., 0], g[..., 1])


def fast_requant(mults: np.ndarray, shifts: np.ndarray, acc_bound: np.ndarray) -> bool:
    """Whether ``d_requant`` equals TFLM's requantization for every accumulator of magnitude
    at most ``acc_bound`` (per channel, bias included) with these multipliers and shifts."""
    m = mults.astype(np.int64)
    s = shifts.astype(np.int64)
    bound = acc_bound.astype(np.int64)
    if (m <= 0).any():
        return False
    left = np.maximum(s, 0)
    right = np.maximum(-s, 0)
    if (right > 30).any() or (left > 30).any():
        return False
    shifted = [int(b) << (int(lft) + 1) for b, lft in zip(bound, left, strict=True)]
    if max(shifted, default=0) > INT32_MAX:
        return False
    for xs, mm, r in zip(shifted, m.tolist(), right.tolist(), strict=True):
        v = ((xs * mm + (1 << 31)) >> 32) + 1
        if v + (1 << r) > INT32_MAX:
            return False
    return True


def mve_requant(params: dict, m: ConstArray, s: ConstArray) -> list[ConstArray]:
    """Choose the requantization of a Helium kernel: TFLM's own, four lanes at a time
    (``m_mbqm4``), in the form its shifts allow (``params["rq_form"]``: a left shift somewhere,
    a right shift in every channel, or right shifts and zeros); exact for every accumulator, so
    nothing to prove. Returns TFLM's ``m`` and ``s``."""
    shifts = s.values
    params["fast_rq"] = False
    params["rq_form"] = ("M_RQ_LEFT" if (shifts > 0).any()
                         else "M_RQ_RIGHT" if (shifts < 0).all() else "M_RQ_ANY")
    return [m, s]


def interleave4(w: np.ndarray, run: int) -> np.ndarray:
    """Filters ``w`` ([oc][k], k a multiple of ``run``) in the order Helium's ``m_dot8x4`` reads
    them: each block of four filters run by run, each run's full 16-byte vectors as the four
    rows' vectors one after another, then the four rows' last ``run % 16`` bytes one after
    another; the last ``oc % 4`` filters as they are. A permutation: the size is unchanged."""
    oc, k = w.shape
    full = run - run % 16
    parts = []
    for o in range(0, oc - oc % 4, 4):
        rows = w[o:o + 4]
        for s in range(0, k, run):
            seg = rows[:, s:s + run]
            parts.append(seg[:, :full].reshape(4, -1, 16).transpose(1, 0, 2).reshape(-1))
            parts.append(seg[:, full:].reshape(-1))
    parts.append(w[oc - oc % 4:].reshape(-1))
    return np.concatenate(parts)


def requant(params: dict, m: ConstArray, s: ConstArray,
            acc_bound: np.ndarray) -> list[ConstArray]:
    """Choose the requantization of a DSP kernel: sets ``params`` ``fast_rq`` and ``no_left``
    and returns the constants it reads: for ``d_requant`` ``m``, the right shifts ``r``, their
    powers of two ``e`` and the left shifts ``l`` (left out when every shift is to the right),
    else TFLM's ``m`` and ``s``."""
    shifts = s.values.astype(np.int64)
    params["fast_rq"] = fast_requant(m.values, shifts, acc_bound)
    params["no_left"] = bool((shifts <= 0).all())
    if not params["fast_rq"]:
        return [m, s]
    right = np.maximum(-shifts, 0)
    consts = [m, ConstArray("r", "uint8_t", right.astype(np.uint8)),
              ConstArray("e", "int32_t", (1 << right).astype(np.int32))]
    if not params["no_left"]:
        consts.append(ConstArray("l", "uint8_t", np.maximum(shifts, 0).astype(np.uint8)))
    return consts


def offset_pair(in_off: int) -> int:
    """The input offset in both 16-bit lanes of a word (the addend of ``SXTAB16``)."""
    return (in_off & 0xFFFF) * 0x10001


def acc_bound(w: np.ndarray, bias: np.ndarray, x_max: int) -> np.ndarray:
    """Per output channel (axis 0 of ``w``): ``|bias| + x_max * sum |w|``."""
    wa = np.abs(w.astype(np.int64)).reshape(w.shape[0], -1).sum(axis=1)
    return np.abs(bias.astype(np.int64)) + x_max * wa


def interleave_pairs(w: np.ndarray) -> np.ndarray:
    """int8 weights ``[out, depth]`` (depth a multiple of 4) in the order the FULLY_CONNECTED
    DSP kernel reads them: per pair of outputs, per group of 4 inputs, 4 bytes of output 0 then 4
    of output 1; an odd last output's bytes in order after the pairs."""
    out_ch, depth = w.shape
    oc2 = out_ch - out_ch % 2
    groups = w.astype(np.int64).reshape(out_ch, depth // 4, 4)
    pairs = groups[:oc2].reshape(oc2 // 2, 2, depth // 4, 4).transpose(0, 2, 1, 3)
    return np.concatenate([pairs.reshape(-1), groups[oc2:].reshape(-1)]).astype(np.int8)


# --- int8 weights widened in registers: the "PQ" lane pairing ---------------------------------
#
# A word of 4 int8 weights w (bytes b0..b3) gives two SMLAD operands with one instruction: the
# word itself, whose 16-bit lanes are b0 + 256 b1 and b2 + 256 b3 once each high byte is stored
# minus the borrow of its low byte (b1' = b1 - [b0 < 0]), and SXTB16(w) = (b0, b2). A word of 4
# int8 inputs x (x0..x3) gives the matching pair, also one instruction each: P = SXTAB16(-127, x)
# = (x0 - 127, x2 - 127) and Q = x ^ 0x007F007F, whose lanes read as int16 are
# 256 x1 - x0 + 127 = 256 x1 - P0 (and 256 x3 - P1), exactly the int16 range. Then
#     SMLAD(P, w) + SMLAD(Q, SXTB16(w)) = 256 (x1 b0 + x0 b1 + x3 b2 + x2 b3 - 127 (b1 + b3)),
# so storing the weight of input k+1 in byte 0 and of input k in byte 1 (and likewise 3/2) makes
# every group of 4 multiply-accumulates cost one SXTB16 and two SMLADs, and the weights keep
# their int8 size. The accumulator holds 256 x the exact sum (plus 127 x the even-input weights,
# put back in the initial value), which is exact as long as the sum stays within +-2^23 (checked
# per output channel from the weights, else the op keeps the int16-pair kernel); its low byte is
# free and carries the channel's right shift minus one.

PQ_DELTA = 127
PQ_LIMIT = 1 << 23


def pq_offset() -> int:
    """The SXTAB16 addend that makes P: -127 in both lanes."""
    return offset_pair(-PQ_DELTA)


def pq_bytes(w: np.ndarray) -> np.ndarray | None:
    """Weights ``[R, 4 * K4]`` as int8 bytes ``[R, K4, 4]`` in PQ order (byte 0: input 1, byte 1:
    input 0 minus the borrow of byte 0, byte 2: input 3, byte 3: input 2 minus the borrow), or
    None when a high byte would fall below -128 (a weight of -128 beside a negative one)."""
    g = w.astype(np.int64).reshape(w.shape[0], -1, 4)
    out = np.stack([g[..., 1], g[..., 0] - (g[..., 1] < 0), g[..., 3], g[..., 2] - (g[..., 3] < 0)],
                   axis=-1)
    if out.min(initial=0) < -128:
        return None
    return out.astype(np.int8)


def words(b: np.ndarray) -> np.ndarray:
    """int8 bytes (any shape, a multiple of 4 in all) as little-endian int32 words."""
    return np.ascontiguousarray(b.astype(np.int8).reshape(-1)).view("<i4").astype(np.int32)


def blocked(rows: np.ndarray, block: int) -> np.ndarray:
    """Per-row words ``[R, K4]`` laid out for a kernel that takes ``block`` rows per pass: for
    each block of rows, group by group, the block's words side by side (one LDRD/LDM apart);
    the rows past the last whole block follow one by one, each row's words in order."""
    r = rows.shape[0]
    whole = r - r % block
    k4 = rows.shape[1]
    head = rows[:whole].reshape(whole // block, block, k4).transpose(0, 2, 1).reshape(-1)
    return np.concatenate([head, rows[whole:].reshape(-1)]).astype(np.int32)


def pq_init(bias: np.ndarray, w: np.ndarray, low: np.ndarray) -> np.ndarray:
    """The initial accumulators of the PQ form: 256 (bias + 127 x the weights of the even
    inputs) + ``low`` (the byte it carries), modulo 2^32."""
    g = w.astype(np.int64).reshape(w.shape[0], -1, 4)
    even = g[..., 0].sum(axis=1) + g[..., 2].sum(axis=1)
    return wrap32(256 * (bias.astype(np.int64) + PQ_DELTA * even) + low.astype(np.int64))


def fast_rq(mults: np.ndarray, shifts: np.ndarray, acc_bound: np.ndarray, out_zp: int) -> bool:
    """Whether ``d_rq`` (one SMMLAR that also adds the rounding half and the output zero point,
    then the right shift) equals TFLM's requantization plus ``out_zp`` for every accumulator of
    magnitude at most ``acc_bound`` (per channel): every multiplier positive, every shift to the
    right by 1 to 31, and no intermediate overflows int32."""
    m = mults.astype(np.int64)
    s = shifts.astype(np.int64)
    if (m <= 0).any() or (s > -1).any() or (s < -31).any():
        return False
    for b, mm, e in zip(acc_bound.astype(np.int64).tolist(), m.tolist(), (-s).tolist(),
                        strict=True):
        x2 = 2 * b
        if x2 > INT32_MAX:
            return False
        hi = ((x2 * mm + (1 << 31)) >> 32) + 1
        z = abs(2 * out_zp + 1) << (e - 1)
        c = abs(out_zp) * (1 << e) + (1 << (e - 1)) + 1
        if z > INT32_MAX or hi + c > INT32_MAX:
            return False
    return True


def rq_params(params: dict, m: ConstArray, s: ConstArray, acc_bound: np.ndarray,
              packed: bool) -> tuple[list[ConstArray], np.ndarray]:
    """The requantization of a DSP kernel. Sets ``params["rq"]``: ``smmlar`` (:func:`fast_rq`
    holds; ``per_tensor`` with the literals ``m0``/``e0``/``hz0``, else the constants ``m`` and,
    unless ``packed`` (the shift rides in the accumulator's low byte), ``em`` = shift - 1), else
    the older ``d_requant``/``q_mbqm`` forms of :func:`requant`. Returns the constants and the
    per-channel bytes a packed accumulator carries (zeros when it carries none)."""
    mults = m.values.astype(np.int64)
    shifts = s.values.astype(np.int64)
    zp = int(params["out_zp"])
    n = len(mults)
    low = np.zeros(n, np.int64)
    if fast_rq(mults, shifts, acc_bound, zp):
        params["rq"] = "smmlar"
        params["z"] = 2 * zp + 1
        e = -shifts
        if n and (mults == mults[0]).all() and (shifts == shifts[0]).all():
            params.update(per_tensor=True, m0=int(mults[0]), e0=int(e[0]),
                          hz0=(2 * zp + 1) * (1 << int(e[0] - 1)))
            return [], low
        params["per_tensor"] = False
        if packed:
            return [m], e - 1
        return [m, ConstArray("em", "uint8_t", (e - 1).astype(np.uint8))], low
    consts = requant(params, m, s, acc_bound)
    params["rq"] = "d" if params["fast_rq"] else "q"
    params["per_tensor"] = False
    return consts, low


def constant_channels(w: np.ndarray, bias: np.ndarray, m: ConstArray, s: ConstArray,
                      params: dict) -> tuple[np.ndarray, ConstArray, ConstArray]:
    """Channels whose weights are all zero compute one constant, whatever the input: TFLM's
    requantization of their bias (trained models have such dead channels, with biases near
    2^30 and tiny scales that no fast form could hold). Give each an equal small form: bias
    4 (v - zp), multiplier 2^30 and shift -1 requantize to exactly v, its constant output.
    ``w``: the weights [channel, ...], ``bias``: with any input offset folded in."""
    dead = np.abs(w.astype(np.int64)).reshape(w.shape[0], -1).sum(axis=1) == 0
    if not dead.any():
        return bias, m, s
    bias = bias.astype(np.int64).copy()
    mv = m.values.astype(np.int64).copy()
    sv = s.values.astype(np.int64).copy()
    zp = int(params["out_zp"])
    for c in np.nonzero(dead)[0]:
        v = q.multiply_by_quantized_multiplier(int(bias[c]), int(mv[c]), int(sv[c])) + zp
        v = min(max(v, int(params["act_min"])), int(params["act_max"]))
        bias[c], mv[c], sv[c] = 4 * (v - zp), 1 << 30, -1
    return (bias, ConstArray(m.suffix, m.ctype, mv.astype(m.values.dtype)),
            ConstArray(s.suffix, s.ctype, sv.astype(s.values.dtype)))

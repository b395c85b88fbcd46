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

from .common import ConstArray

INT32_MAX = (1 << 31) - 1


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

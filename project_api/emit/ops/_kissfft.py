"""The KISS FFT that TFLM's SignalRfft and SignalIrfft run (kissfft v130 as TFLM patches it,
``signal/src/kiss_fft_wrappers``), planned at emit time.

A real FFT of ``n`` points is a complex FFT of ``n / 2`` points (the even and odd samples as
real and imaginary parts) and a pass that splits the two spectra with the "super twiddles".
KISS FFT factors ``n / 2`` into radices (4 first, then 2, then odd primes), decimates in time
recursively and recombines each level with that radix's butterfly, scaling each butterfly's
inputs by ``1 / radix`` in fixed point (so the integer transforms come out divided by ``n / 2``;
the split pass halves once more). The emitted C does the same arithmetic without the recursion:
the leaf order of the recursion as a permutation table, then every level's butterflies bottom
up (butterflies of one level touch disjoint blocks, so their order does not matter).

Twiddles are computed here as KISS FFT computes them in double (``cos``/``sin`` of the C
library: Python's ``math`` calls the same functions): ``floor(0.5 + SAMP_MAX * cos(phase))``
for int16 (``SAMP_MAX`` 32767) and int32 (2147483647), ``(float)cos(phase)`` for float32.
Radices above 5 take KISS FFT's generic butterfly, whose scratch TFLM's patch allocates as a
null pointer (TFLM crashes): such lengths are refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from project_api.tflite.graph import Graph, Operator

from . import _signal
from .common import C_TYPES, ConstArray, Kernel, unsupported

#: SAMP_MAX of each fixed-point flavour.
SAMP_MAX = {"int16": 32767, "int32": 2147483647}

#: The radices with their own butterfly.
RADICES = (2, 3, 4, 5)

_PI = 3.141592653589793238462643383279502884197169399375105820974944
_PI_SUPER = 3.14159265358979323846264338327


def factors(n: int) -> list[tuple[int, int]]:
    """KISS FFT's ``kf_factor``: ``(radix, remaining length)`` per level, powers of 4 first,
    then 2, then odd numbers up to ``floor(sqrt(n))``, then what is left."""
    out = []
    p = 4
    floor_sqrt = math.floor(math.sqrt(float(n)))
    while True:
        while n % p:
            p = {4: 2, 2: 3}.get(p, p + 2)
            if p > floor_sqrt:
                p = n
        n //= p
        out.append((p, n))
        if n <= 1:
            return out


@dataclass
class Stage:
    """One level of butterflies: ``blocks`` butterflies of radix ``p`` over ``p * m`` points
    each, twiddle stride ``fstride``."""

    p: int
    m: int
    fstride: int
    blocks: int


def plan(n: int) -> tuple[list[int], list[Stage]]:
    """(permutation, stages) of a complex FFT of ``n`` points: ``work[j] = input[perm[j]]``,
    then the stages in order (deepest level first)."""
    levels = factors(n)
    perm = [0] * n

    def leaves(out: int, src: int, fstride: int, level: int) -> None:
        p, m = levels[level]
        if m == 1:
            for j in range(p):
                perm[out + j] = src + j * fstride
        else:
            for j in range(p):
                leaves(out + j * m, src + j * fstride, fstride * p, level + 1)

    leaves(0, 0, 1, 0)
    stages = []
    fstride = 1
    for p, m in levels:
        stages.append(Stage(p, m, fstride, fstride))
        fstride *= p
    return perm, stages[::-1]


def _cexp(phase: float, dtype: str) -> tuple[float, float]:
    if dtype == "float32":
        return float(np.float32(math.cos(phase))), float(np.float32(math.sin(phase)))
    top = SAMP_MAX[dtype]
    return (float(math.floor(0.5 + top * math.cos(phase))),
            float(math.floor(0.5 + top * math.sin(phase))))


def twiddles(n: int, inverse: bool, dtype: str) -> np.ndarray:
    """The ``n`` twiddles of a complex FFT of ``n`` points, (re, im) interleaved."""
    out = []
    for i in range(n):
        phase = -2 * _PI * i / n
        if inverse:
            phase *= -1
        out.extend(_cexp(phase, dtype))
    return np.array(out, dtype=_NUMPY[dtype])


def super_twiddles(ncfft: int, inverse: bool, dtype: str) -> np.ndarray:
    """The ``ncfft / 2`` twiddles of the real FFT's split pass, (re, im) interleaved."""
    out = []
    for i in range(ncfft // 2):
        phase = -_PI_SUPER * (float(i + 1) / ncfft + 0.5)
        if inverse:
            phase *= -1
        out.extend(_cexp(phase, dtype))
    return np.array(out, dtype=_NUMPY[dtype])


_NUMPY = {"int16": np.int16, "int32": np.int32, "float32": np.float32}

#: The C prefix of each flavour's helpers (``kissfft.h.j2``).
PREFIX = {"int16": "kf16", "int32": "kf32", "float32": "kff"}


def unsupported_length(fft_length: int) -> str | None:
    """Why TFLM cannot run a real FFT of ``fft_length`` points (None: it can)."""
    if fft_length < 4 or fft_length % 2:
        return ("an even length of at least 4 (TFLM's kissfft refuses odd lengths and crashes "
                "on 2)")
    if fft_length > 1 << 16:
        return "at most 65536 points"
    bad = [p for p, _ in factors(fft_length // 2) if p not in RADICES]
    if bad:
        return (f"a length whose half has only the factors 2, 3 and 5 (half of {fft_length} "
                f"has the factor {bad[0]}, for which TFLM's kissfft crashes)")
    return None


def prepare_fft(op: Operator, graph: Graph, inverse: bool) -> Kernel:
    """SignalRfft (``inverse`` False) or SignalIrfft: TFLM's ``rfft.cc``/``irfft.cc`` checks,
    then the plan, the twiddles and the permutation as constants of the kernel."""
    (x,), (y,) = _signal.operands(op, graph, 1, 1)
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant; fold the transform before export")
    opts = _signal.options(op, {"T": "int", "fft_length": "int"})
    _signal.typed(op, opts, x, ("int16", "int32", "float32"))
    if y.dtype != x.dtype:
        raise unsupported(op, f"output '{y.name}' is {y.dtype}, input '{x.name}' {x.dtype}; "
                              "TFLM's kernel takes one type")
    n = _signal.int32(op, opts, "fft_length", 2, 1 << 30, "the transform's length")
    why = unsupported_length(n)
    if why is not None:
        raise unsupported(op, f"fft_length {n} is not supported: it takes {why}")
    if not x.shape or len(x.shape) != len(y.shape) or tuple(x.shape[:-1]) != tuple(y.shape[:-1]):
        raise unsupported(op, f"input '{x.name}' {list(x.shape)} and output '{y.name}' "
                              f"{list(y.shape)} must agree but in their innermost dimension")
    ncfft = n // 2
    bins = 2 * (ncfft + 1)
    inner_in, inner_out = (bins, n) if inverse else (x.shape[-1], bins)
    if inverse and x.shape[-1] != bins:
        raise unsupported(op, f"input '{x.name}' has {x.shape[-1]} values per row; an inverse "
                              f"FFT of {n} points takes {bins} (n/2 + 1 complex bins)")
    if not inverse and not 0 < x.shape[-1] <= n:
        raise unsupported(op, f"input '{x.name}' has {x.shape[-1]} samples per row, more than "
                              f"fft_length {n} (TFLM copies them into an {n}-sample buffer)")
    if y.shape[-1] != inner_out:
        raise unsupported(op, f"output '{y.name}' has {y.shape[-1]} values per row; "
                              f"{'an inverse' if inverse else 'an'} FFT of {n} points gives "
                              f"{inner_out}")
    perm, stages = plan(ncfft)
    kind = x.dtype
    params = {"P": PREFIX[kind], "T": C_TYPES[kind], "kind": kind, "n": n, "ncfft": ncfft,
              "rows": x.num_elements // x.shape[-1], "inner_in": inner_in,
              "inner_out": inner_out, "inverse": int(inverse),
              "stages": [vars(s) for s in stages]}
    consts = [ConstArray("tw", C_TYPES[kind], twiddles(ncfft, inverse, kind)),
              ConstArray("st", C_TYPES[kind], super_twiddles(ncfft, inverse, kind))]
    if inverse:
        iperm = np.zeros(ncfft, np.uint16)
        iperm[np.array(perm)] = np.arange(ncfft)
        consts.append(ConstArray("iperm", "uint16_t", iperm))
    else:
        consts.append(ConstArray("perm", "uint16_t", np.array(perm, np.uint16)))
    if not len(consts[1].values):  # ncfft 1 has no super twiddle; keep the C array non-empty
        consts[1] = ConstArray("st", C_TYPES[kind], np.zeros(2, _NUMPY[kind]))
    header = f"kissfft_{'float' if kind == 'float32' else kind}.h.j2"
    return Kernel(op, "signal_fft.c.j2", params, [x.index], [y.index], consts,
                  scratch_bytes=ncfft * 2 * np.dtype(_NUMPY[kind]).itemsize, headers=(header,))

"""SignalFilterBankSpectralSubtraction (TFLM
``signal/micro/kernels/filter_bank_spectral_subtraction.cc``,
``signal/src/filter_bank_spectral_subtraction.cc``): each uint32 channel less its running noise
estimate (a low-pass filter of the channel in Q``smoothing_bits``, even and odd channels with
their own coefficients in Q``spectral_subtraction_bits``), kept above ``min_signal_remaining``
of the channel; outputs the result and the estimate.

The estimate is state kept from one invocation to the next (TFLM's persistent buffer, zero
after Prepare and after a reset): ``4 * num_channels`` bytes of the module's state.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from .common import Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=(), custom=("SignalFilterBankSpectralSubtraction",), schemes=("uint32",),
              classify=_signal.classify)

_KEYS = {"alternate_one_minus_smoothing": "int", "alternate_smoothing": "int",
         "clamping": "bool", "min_signal_remaining": "int", "num_channels": "int",
         "one_minus_smoothing": "int", "smoothing": "int", "smoothing_bits": "int",
         "spectral_subtraction_bits": "int"}


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    (x,), (y, noise) = _signal.operands(op, graph, 1, 2)
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant; spectral subtraction takes an "
                              "activation")
    for t, what in ((x, "input"), (y, "output"), (noise, "output 1 (the noise estimate)")):
        _signal.dtype(op, t, "uint32", what)
        _signal.rank(op, t, 1, what)
    opts = _signal.options(op, _KEYS)
    nc = _signal.int32(op, opts, "num_channels", 0, 1 << 20, "the number of channels")
    for t in (x, y, noise):
        if t.shape[0] != nc:
            raise unsupported(op, f"'{t.name}' has {t.shape[0]} channels, num_channels is {nc}; "
                                  "they must match")
    sbits = _signal.int32(op, opts, "smoothing_bits", 0, 31, "a left shift of a uint32")
    ssbits = _signal.int32(op, opts, "spectral_subtraction_bits", 0, 63,
                           "a right shift of a uint64")
    coeff = {k: _signal.int32(op, opts, k, -(1 << 31), (1 << 31) - 1, "an int32") & 0xFFFFFFFF
             for k in ("smoothing", "one_minus_smoothing", "alternate_smoothing",
                       "alternate_one_minus_smoothing", "min_signal_remaining")}
    params = {"n": nc, "sbits": sbits, "ssbits": ssbits, "clamping": bool(opts["clamping"]),
              **coeff}
    return Kernel(op, "signal_filter_bank_spectral_subtraction.c.j2", params, [x.index],
                  [y.index, noise.index], persistent_bytes=4 * nc)

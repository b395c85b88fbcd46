"""SignalPCAN (TFLM ``signal/micro/kernels/pcan.cc``, ``signal/src/pcan_argc_fixed.cc``):
per-channel amplitude normalization. Each uint32 channel times the gain its noise estimate
reads from the int16 gain table (a quadratic per power of two of the estimate; the int16 gain
widened to uint32 as TFLM's), shifted right by ``snr_shift``, then shrunk (``x^2/4`` below 2,
``x - 1`` above; Q12 in, Q6 out).

The gain table must be a constant of at least 125 entries (the most TFLM's lookup reads); the
noise estimate is an activation (the spectral subtraction's second output).
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from .common import ConstArray, Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=(), custom=("SignalPCAN",), schemes=("uint32",),
              classify=_signal.classify)

#: Entries of the gain table TFLM's lookup can read (4 per bit of a uint32, less 3).
LUT_ENTRIES = 4 * 32 - 3


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    (x, noise, lut), (y,) = _signal.operands(op, graph, 3, 1)
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant; fold PCAN before export")
    for t, want, what in ((x, "uint32", "input"), (noise, "uint32", "noise_estimate"),
                          (lut, "int16", "gain_lut"), (y, "uint32", "output")):
        _signal.dtype(op, t, want, what)
        _signal.rank(op, t, 1, what)
    _signal.same_shape(op, x, y)
    _signal.same_shape(op, x, noise)
    if not lut.is_const:
        raise unsupported(op, f"gain_lut '{lut.name}' is an activation; the emitter takes it as "
                              "a constant")
    if lut.shape[0] < LUT_ENTRIES:
        raise unsupported(op, f"gain_lut '{lut.name}' has {lut.shape[0]} entries; TFLM's lookup "
                              f"reads up to {LUT_ENTRIES}")
    opts = _signal.options(op, {"snr_shift": "int"})
    shift = _signal.int32(op, opts, "snr_shift", 0, 63, "a right shift of a uint64")
    inputs = [x.index] if noise.is_const else [x.index, noise.index]
    consts = [ConstArray("lut", "int16_t", lut.data)]
    if noise.is_const:
        consts.append(ConstArray("noise", "uint32_t", noise.data))
    return Kernel(op, "signal_pcan.c.j2",
                  {"n": x.shape[0], "shift": shift, "noise_const": noise.is_const},
                  inputs, [y.index], consts, headers=("signal.h.j2",))

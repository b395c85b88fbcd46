"""SignalFilterBankLog (TFLM ``signal/micro/kernels/filter_bank_log.cc``,
``signal/src/filter_bank_log.cc``, ``signal/src/log.cc``): ``min(log(x << input_correction_bits)
* output_scale, 32767)`` as int16, 0 where the shifted value is 0 or 1; the log in TFLM's fixed
point (log2 by a 128-segment table of its fractional part, times ln 2 in Q16, uint32
arithmetic that wraps as TFLM's). The table is computed here from its definition,
``round(2^16 (log2(1 + i/128) - i/128))``.
"""

from __future__ import annotations

import math

import numpy as np

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from .common import ConstArray, Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=(), custom=("SignalFilterBankLog",), schemes=("uint32",),
              classify=_signal.classify)


def log_table() -> np.ndarray:
    """TFLM's log2 interpolation table: 129 segment ends and one entry of padding."""
    return np.array([round(65536 * (math.log2(1 + i / 128) - i / 128)) for i in range(129)]
                    + [0], np.uint16)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    (x,), (y,) = _signal.operands(op, graph, 1, 1)
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant; fold the log before export")
    _signal.dtype(op, x, "uint32", "input")
    _signal.dtype(op, y, "int16", "output")
    _signal.rank(op, x, 1, "input")
    _signal.rank(op, y, 1, "output")
    _signal.same_shape(op, x, y)
    opts = _signal.options(op, {"input_correction_bits": "int", "output_scale": "int"})
    bits = _signal.int32(op, opts, "input_correction_bits", 0, 31, "a left shift of a uint32")
    scale = _signal.int32(op, opts, "output_scale", -(1 << 31), (1 << 31) - 1, "an int32")
    params = {"n": x.shape[0], "bits": bits, "scale": scale & 0xFFFFFFFF}
    return Kernel(op, "signal_filter_bank_log.c.j2", params, [x.index], [y.index],
                  [ConstArray("lut", "uint16_t", log_table())], headers=("signal.h.j2",))

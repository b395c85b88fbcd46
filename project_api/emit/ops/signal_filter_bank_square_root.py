"""SignalFilterBankSquareRoot (TFLM ``signal/micro/kernels/filter_bank_square_root.cc``,
``signal/src/filter_bank_square_root.cc``): the integer square root of each uint64 channel
(TFLM's Sqrt64, rounded; 32-bit arithmetic below 2^32) shifted right by ``scale_bits`` (an
int32 scalar: a constant, or an activation such as the FFT auto scale's shift), uint32.

A constant shift is checked at emit time; a shift from an activation outside [0, 31] (TFLM's
shift would be undefined) makes ``tvmgen_<name>_run`` return -1. The op reads no options.
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from .common import Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=(), custom=("SignalFilterBankSquareRoot",), schemes=("uint64",),
              classify=_signal.classify)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    (x, s), (y,) = _signal.operands(op, graph, 2, 1)
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant; fold the square root before "
                              "export")
    _signal.dtype(op, x, "uint64", "input")
    _signal.dtype(op, s, "int32", "scale_bits")
    _signal.dtype(op, y, "uint32", "output")
    _signal.rank(op, x, 1, "input")
    _signal.rank(op, s, 0, "scale_bits")
    _signal.same_shape(op, x, y)
    params = {"n": x.shape[0], "shift": None}
    inputs = [x.index]
    if s.is_const:
        shift = int(np.asarray(s.data).reshape(-1)[0])
        if not 0 <= shift <= 31:
            raise unsupported(op, f"scale_bits '{s.name}' is {shift}; a right shift of a uint32 "
                                  "takes [0, 31]")
        params["shift"] = shift
    else:
        inputs.append(s.index)
    return Kernel(op, "signal_filter_bank_square_root.c.j2", params, inputs, [y.index],
                  headers=("signal.h.j2",), status=not s.is_const)

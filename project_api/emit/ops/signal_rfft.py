"""SignalRfft (TFLM ``signal/micro/kernels/rfft.cc``, ``signal/src/rfft_*.cc``): the real FFT
of the innermost dimension, zero-padded to ``fft_length``, as ``fft_length / 2 + 1`` complex
bins stored as (real, imaginary) pairs of the input's type: int16 and int32 through TFLM's
fixed-point kissfft (scaled by ``1 / fft_length``), float32 through its float kissfft
(unscaled). See :mod:`._kissfft` for the arithmetic.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from ._kissfft import prepare_fft
from .common import Kernel, OpSpec

SPEC = OpSpec(opcodes=(), custom=("SignalRfft",), schemes=("int16", "int32", "float32"),
              classify=_signal.classify)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    return prepare_fft(op, graph, inverse=False)

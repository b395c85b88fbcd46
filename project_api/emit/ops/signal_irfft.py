"""SignalIrfft (TFLM ``signal/micro/kernels/irfft.cc``, ``signal/src/irfft_*.cc``): the inverse
real FFT of ``fft_length / 2 + 1`` complex bins ((real, imaginary) pairs) into ``fft_length``
samples of the same type: int16 and int32 through TFLM's fixed-point kissfft (each butterfly
scaling by its radix, as the forward transform), float32 through its float kissfft divided by
``fft_length`` as TFLM does. See :mod:`._kissfft` for the arithmetic.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from ._kissfft import prepare_fft
from .common import Kernel, OpSpec

SPEC = OpSpec(opcodes=(), custom=("SignalIrfft",), schemes=("int16", "int32", "float32"),
              classify=_signal.classify)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    return prepare_fft(op, graph, inverse=True)

"""RELU_N1_TO_1, which TFLM has no kernel for, as LiteRT computes it: float32 clamped to [-1, 1],
int8 requantized as RELU and clamped to the quantized [-1, 1] of the output (the kernel and its
preparation are RELU's, ``relu.py``)."""

from __future__ import annotations

from .common import OpSpec
from .relu import prepare

SPEC = OpSpec(opcodes=("RELU_N1_TO_1",), schemes=("float32", "int8"))

__all__ = ["SPEC", "prepare"]

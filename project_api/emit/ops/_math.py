"""What the arithmetic and activation ops (SUB, DIV, SQUARED_DIFFERENCE, MAXIMUM, MINIMUM, the
element-wise math and the activations) share: int32 activation clamps, and TFLM's float32
scale arithmetic done in float32 where TFLM does it so."""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Operator, Tensor

from .. import quantize as q
from .common import unsupported

f32 = np.float32

#: ``CalculateActivationRange<int32_t>`` of each fused activation.
_INT32_RANGES = {"NONE": (q.INT32_MIN, q.INT32_MAX), "RELU": (0, q.INT32_MAX), "RELU6": (0, 6),
                 "RELU_N1_TO_1": (-1, 1)}


def c_int32(v: int) -> str:
    """A C literal of an int32 value (the extremes by their macros)."""
    return {q.INT32_MIN: "INT32_MIN", q.INT32_MAX: "INT32_MAX"}.get(v, str(v))


def int32_activation(act: str) -> tuple[str, str] | None:
    """The int32 clamp of fused activation ``act`` as C literals, None for NONE (no clamp)."""
    if act == "NONE":
        return None
    lo, hi = _INT32_RANGES[act]
    return c_int32(lo), c_int32(hi)


def check_unquantized(op: Operator, *tensors: Tensor) -> None:
    """int32 arithmetic takes plain (unquantized) tensors, as TFLM's int32 kernels."""
    for t in tensors:
        if t.quant is not None:
            raise unsupported(op, f"int32 tensor '{t.name}' is quantized; {op.name} takes plain "
                                  "int32 values only")


def multiplier(op: Operator, real: float | np.floating, what: str) -> tuple[int, int]:
    """TFLM's ``QuantizeMultiplier`` of ``real`` (widened to double), refused in one line when it
    cannot be represented."""
    try:
        return q.quantize_multiplier(float(real))
    except ValueError as e:
        raise unsupported(op, f"the {what} multiplier cannot be quantized: {e}") from None

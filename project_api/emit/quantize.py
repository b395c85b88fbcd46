"""TFLite/TFLM quantization arithmetic, in Python, bit for bit.

The generated C reproduces TFLM's reference kernels exactly only if every parameter computed at
emit time ("Prepare") is the same integer TFLM computes. These functions follow TFLM's
``quantization_util`` facts: scales are float32 values widened to double, multipliers come from
``frexp`` of a double and are rounded half away from zero to Q31 (the "double rounding"
build, which is what the TFLM interpreter uses). The integer helpers at the bottom mirror the C
ones in ``kernels/common.h.j2``; tests use them as an independent reference.
"""

from __future__ import annotations

import math

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def round_half_away(x: float) -> int:
    """C ``round()``: halves go away from zero."""
    return int(math.floor(x + 0.5)) if x >= 0 else -int(math.floor(-x + 0.5))


def quantize_multiplier(real: float) -> tuple[int, int]:
    """Split a positive double into ``(q31 multiplier, shift)`` with ``real ~= m * 2**(shift-31)``.

    Exactly TFLM's ``QuantizeMultiplier``: zero maps to ``(0, 0)``; a mantissa that rounds up to
    ``2**31`` is halved with ``shift + 1``; a shift below -31 flushes to ``(0, 0)``.
    """
    if real == 0.0:
        return 0, 0
    mantissa, shift = math.frexp(real)
    q = round_half_away(mantissa * (1 << 31))
    if q > (1 << 31):
        raise ValueError(f"multiplier {real!r} cannot be quantized")
    if q == 1 << 31:
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return int(q), int(shift)


def quantize_multiplier_smaller_than_one(real: float) -> tuple[int, int]:
    """``QuantizeMultiplierSmallerThanOneExp``: requires ``0 < real < 1``; shift is <= 0."""
    if not 0.0 < real < 1.0:
        raise ValueError(f"multiplier {real!r} is not in (0, 1)")
    return quantize_multiplier(real)


def quantize_multiplier_greater_than_one(real: float) -> tuple[int, int]:
    """``QuantizeMultiplierGreaterThanOne``: requires ``real > 1``; shift is >= 0."""
    if not real > 1.0:
        raise ValueError(f"multiplier {real!r} is not > 1")
    return quantize_multiplier(real)


def f32(x: float) -> float:
    """``x`` rounded to float32 and widened back to a Python float (double)."""
    return float(np.float32(x))


def conv_multiplier(input_scale: float, filter_scale: float, output_scale: float) -> tuple[int, int]:
    """The requantization multiplier of CONV/DEPTHWISE/FC: ``(in * filter) / out`` in double."""
    return quantize_multiplier(f32(input_scale) * f32(filter_scale) / f32(output_scale))


def quantize_value(value: float, scale: float, zero_point: int) -> int:
    """TFLite ``Quantize``: ``zero_point + round(value / scale)`` with a float32 division."""
    return zero_point + round_half_away(float(np.float32(value) / np.float32(scale)))


def activation_range_int8(activation: str, scale: float, zero_point: int) -> tuple[int, int]:
    """``CalculateActivationRangeQuantized`` for int8 outputs."""
    lo, hi = -128, 127
    if activation == "RELU":
        lo = max(lo, quantize_value(0.0, scale, zero_point))
    elif activation == "RELU6":
        lo = max(lo, quantize_value(0.0, scale, zero_point))
        hi = min(hi, quantize_value(6.0, scale, zero_point))
    elif activation == "RELU_N1_TO_1":
        lo = max(lo, quantize_value(-1.0, scale, zero_point))
        hi = min(hi, quantize_value(1.0, scale, zero_point))
    elif activation != "NONE":
        raise ValueError(activation)
    return lo, hi


def activation_range_float(activation: str) -> tuple[float | None, float | None]:
    """Float clamp bounds; ``None`` means the float32 limit (TFLM clamps to +-FLT_MAX)."""
    return {"NONE": (None, None), "RELU": (0.0, None), "RELU6": (0.0, 6.0),
            "RELU_N1_TO_1": (-1.0, 1.0)}[activation]


def softmax_params(input_scale: float, beta: float) -> tuple[int, int, int]:
    """``(input_multiplier, input_left_shift, diff_min)`` of TFLM's int8 softmax (Q5.26 diffs)."""
    scaled_diff_integer_bits = 5
    real = min(f32(beta) * f32(input_scale) * (1 << (31 - scaled_diff_integer_bits)),
               float((1 << 31) - 1))
    multiplier, left_shift = quantize_multiplier_greater_than_one(real)
    max_input_rescaled = (1.0 * ((1 << scaled_diff_integer_bits) - 1)
                          * (1 << (31 - scaled_diff_integer_bits)) / (1 << left_shift))
    diff_min = -int(math.floor(max_input_rescaled))
    return multiplier, left_shift, diff_min


# --- integer reference helpers (mirrors of kernels/common.h.j2, for tests) -------------------


def saturating_rounding_doubling_high_mul(a: int, b: int) -> int:
    if a == b == INT32_MIN:
        return INT32_MAX
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    return _trunc_div(ab + nudge, 1 << 31)


def _trunc_div(n: int, d: int) -> int:
    q = abs(n) // d
    return q if n >= 0 else -q


def rounding_divide_by_pot(x: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def multiply_by_quantized_multiplier(x: int, multiplier: int, shift: int) -> int:
    left = shift if shift > 0 else 0
    right = 0 if shift > 0 else -shift
    shifted = ((x << left) + (1 << 31)) % (1 << 32) - (1 << 31)  # int32 wrap like the C
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, multiplier), right)

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
from typing import Any

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
    return activation_range_quantized(activation, scale, zero_point, -128, 127)


def activation_range_quantized(activation: str, scale: float, zero_point: int, qmin: int,
                               qmax: int) -> tuple[int, int]:
    """``CalculateActivationRangeQuantized`` for an output of integer range ``[qmin, qmax]``."""
    lo, hi = qmin, qmax
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


def reduced_multiplier(multiplier: int, shift: int) -> tuple[int, int]:
    """``(multiplier, total right shift)`` of TFLM's ``MultiplyByQuantizedMultiplier`` for an
    int64 accumulator (the int16 kernels): the Q31 multiplier rounded to Q15 (saturating at
    0x7FFF), shifted right by ``15 - shift``."""
    reduced = (multiplier + (1 << 15)) >> 16 if multiplier < 0x7FFF0000 else 0x7FFF
    return reduced, 15 - shift


def softmax_int16_params(input_scale: float, beta: float) -> tuple[int, int]:
    """``(input_multiplier, input_left_shift)`` of TFLM's int16 softmax: input differences
    rescaled so that ``[-65535, 0]`` spans ``[-10, 0]``, the domain of its exp table."""
    return quantize_multiplier(f32(input_scale) * f32(beta) / (10.0 / 65535.0))


def lut_int16(transform: Any, input_scale: float, input_zero_point: int,
              output_scale: float, output_zero_point: int) -> np.ndarray:
    """TFLM's ``LUTPopulateInt16<float>``: the 513-entry table of ``transform`` (a float32 ->
    float32 function) for int16 inputs, every step in float32 as TFLM computes it; the last
    entry only gives the slope of the one before."""
    f = np.float32
    in_min = f(input_scale) * f(-32768 - input_zero_point)
    in_max = f(input_scale) * f(32767 - input_zero_point)
    out_min = f(output_scale) * f(-32768 - output_zero_point)
    out_max = f(output_scale) * f(32767 - output_zero_point)
    steps = 512
    step = (in_max - in_min) / f(steps)
    half_step = step / f(2)
    scaling_inv = f(65536) / (out_max - out_min)
    lut = np.zeros(steps + 1, np.int16)

    def rnd(v: np.float32) -> np.float32:
        return f(round_half_away(float(v)))

    def sat(v: np.float32) -> int:
        return int(min(max(float(v), -32768.0), 32767.0))

    for i in range(steps):
        val = transform(in_min + f(i) * step)
        val_mid = transform(in_min + f(i) * step + half_step)
        val_next = transform(in_min + f(i + 1) * step)
        sample = rnd(val * scaling_inv)
        mid_interp = rnd((val_next * scaling_inv + rnd(val * scaling_inv)) / f(2))
        mid = rnd(val_mid * scaling_inv)
        bias = rnd((mid_interp - mid) / f(2))
        lut[i] = sat(sample - bias)
    lut[steps] = sat(rnd(transform(in_max) * scaling_inv))
    return lut


def lut_int8(transform: Any, input_scale: float, input_zero_point: int, output_scale: float,
             output_zero_point: int) -> np.ndarray:
    """TFLM's int8 ``LUTPopulate`` (and ELU's ``PopulateLookupTable``): the 256-entry table of
    ``transform`` (float32 -> float32) indexed by the input's byte (``(uint8_t)x``), every step
    in float32 as TFLM computes it. A value beyond int32 becomes ``INT32_MIN`` before the
    clamp, as TFLM's float-to-int conversion gives on the host."""
    f = np.float32
    inverse_scale = f(1) / f(output_scale)
    lut = np.zeros(256, np.int8)
    for val in range(-128, 128):
        dequantized = f(input_scale) * f(val - input_zero_point)
        rescaled = f(round_half_away(float(transform(dequantized) * inverse_scale)))
        total = rescaled + f(output_zero_point)
        quantized = int(total) if abs(float(total)) < 2.0**31 else INT32_MIN
        lut[val & 0xFF] = min(max(quantized, -128), 127)
    return lut


def expf(x: np.float32) -> np.float32:
    """float32 ``exp``, correctly rounded (what glibc's ``expf``, TFLM's, returns)."""
    return np.float32(math.exp(float(x)))


def softmax_luts() -> tuple[np.ndarray, np.ndarray]:
    """TFLM's two int16 softmax tables: exp on ``[-10, 0]`` and ``1 / (1 + x)`` on ``[0, 1]``."""
    span = np.float32(65535)  # int16 max - min, as TFLM's float
    exp_lut = lut_int16(expf, np.float32(10.0) / span, 32767, np.float32(2.0) / span, 0)
    inv_lut = lut_int16(lambda v: np.float32(1.0) / (np.float32(1.0) + v),
                        np.float32(1.0) / span, -32768, np.float32(2.0) / span, 0)
    return exp_lut, inv_lut


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


#: TFLM's ``sigmoid_table_uint16``: sigmoid(i / 24) in Q0.16 for i in 0..255, the table its int16
#: LOGISTIC and TANH (and the LSTM's gates) interpolate. Its values are TFLM's own: 43 of them are
#: one above round(65536 sigmoid(i / 24)) and the last is 65535, so no formula reproduces them
#: (``tests/emit/test_ops_sequence.py`` reads every entry back through TFLM's int16 TANH).
SIGMOID_TABLE_Q16: tuple[int, ...] = (
    32768, 33451, 34133, 34813, 35493, 36169, 36843, 37513, 38180, 38841, 39498, 40149,
    40794, 41432, 42064, 42688, 43304, 43912, 44511, 45102, 45683, 46255, 46817, 47369,
    47911, 48443, 48964, 49475, 49975, 50464, 50942, 51409, 51865, 52311, 52745, 53169,
    53581, 53983, 54374, 54755, 55125, 55485, 55834, 56174, 56503, 56823, 57133, 57433,
    57724, 58007, 58280, 58544, 58800, 59048, 59288, 59519, 59743, 59959, 60168, 60370,
    60565, 60753, 60935, 61110, 61279, 61441, 61599, 61750, 61896, 62036, 62172, 62302,
    62428, 62549, 62666, 62778, 62886, 62990, 63090, 63186, 63279, 63368, 63454, 63536,
    63615, 63691, 63765, 63835, 63903, 63968, 64030, 64090, 64148, 64204, 64257, 64308,
    64357, 64405, 64450, 64494, 64536, 64576, 64614, 64652, 64687, 64721, 64754, 64786,
    64816, 64845, 64873, 64900, 64926, 64950, 64974, 64997, 65019, 65039, 65060, 65079,
    65097, 65115, 65132, 65149, 65164, 65179, 65194, 65208, 65221, 65234, 65246, 65258,
    65269, 65280, 65291, 65301, 65310, 65319, 65328, 65337, 65345, 65352, 65360, 65367,
    65374, 65381, 65387, 65393, 65399, 65404, 65410, 65415, 65420, 65425, 65429, 65433,
    65438, 65442, 65445, 65449, 65453, 65456, 65459, 65462, 65465, 65468, 65471, 65474,
    65476, 65479, 65481, 65483, 65485, 65488, 65489, 65491, 65493, 65495, 65497, 65498,
    65500, 65501, 65503, 65504, 65505, 65507, 65508, 65509, 65510, 65511, 65512, 65513,
    65514, 65515, 65516, 65517, 65517, 65518, 65519, 65520, 65520, 65521, 65522, 65522,
    65523, 65523, 65524, 65524, 65525, 65525, 65526, 65526, 65526, 65527, 65527, 65528,
    65528, 65528, 65529, 65529, 65529, 65529, 65530, 65530, 65530, 65530, 65531, 65531,
    65531, 65531, 65531, 65532, 65532, 65532, 65532, 65532, 65532, 65533, 65533, 65533,
    65533, 65533, 65533, 65533, 65533, 65534, 65534, 65534, 65534, 65534, 65534, 65534,
    65534, 65534, 65534, 65535,
)


def sigmoid_table_rows(per_line: int = 16) -> str:
    """:data:`SIGMOID_TABLE_Q16` as the rows of a C initializer."""
    t = SIGMOID_TABLE_Q16
    return ",\n".join("  " + ", ".join(str(v) for v in t[i:i + per_line])
                       for i in range(0, len(t), per_line))


def log2_rounded(x: float) -> tuple[int, bool]:
    """TFLM's ``CheckedLog2`` of a float32 scale: (log2 rounded half away from zero, whether
    ``x`` is within 1e-3 of that power of two), computed in float32 as TFLM does."""
    f = np.float32
    v = f(math.log(f(x))) * (f(1.0) / f(math.log(f(2.0))))
    r = round_half_away(float(v))
    return r, abs(float(v - f(r))) < 1e-3


def fixed_point_input(scale: float, integer_bits: int = 4) -> tuple[int, int, int]:
    """``(multiplier, left shift, radius)`` of TFLM's int8 LOGISTIC/TANH: the input scale times
    ``2^(31 - integer_bits)`` split by frexp and rounded to Q31, and ``CalculateInputRadius``
    (inputs beyond it saturate)."""
    mantissa, shift = math.frexp(f32(scale) * float(1 << (31 - integer_bits)))
    multiplier = round_half_away(mantissa * (1 << 31))
    if shift < 0:
        raise ValueError(f"input scale {scale!r} is too small for TFLM's fixed-point input")
    radius = math.floor(1.0 * ((1 << integer_bits) - 1) * (1 << (31 - integer_bits))
                        / (1 << shift))
    return multiplier, shift, radius


def lut16_input(scale: float, pot_shifts: tuple[int, ...]) -> tuple[int, int]:
    """``(multiplier, shift)`` of TFLM's int16 LOGISTIC (``pot_shifts`` (0,)) or TANH ((0, 1)):
    a power-of-two input scale whose shift (12 + log2 scale) is in ``pot_shifts`` gives
    ``3 << shift, 0``; any other scale a multiplier to 1/(3*4096) per unit, doubled while at most
    32767 / 2, with its shift."""
    log2, exact = log2_rounded(scale)
    shift = 12 + log2
    if exact and shift in pot_shifts:
        return 3 << shift, 0
    multiplier = f32(scale) * 4096.0 * 3.0
    shift = 0
    while multiplier <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        multiplier *= 2.0
    return int(multiplier), shift


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

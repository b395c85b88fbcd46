"""An int8 TFLite model evaluated in numpy with TFLite Micro's integer arithmetic, bit for bit.

The reference that needs no interpreter package: the demo checks the device against it when
``tflite-micro`` is not installed. It follows TFLM's reference kernels (``reference_integer_ops``
and gemmlowp's fixed-point softmax) operator by operator: int64 accumulation in numpy, then the
same requantization integers (:mod:`.quantize`, TFLM's ``Prepare``) and rounding helpers. It
shares nothing with the generated C but the TFLite reader: the C kernels come from the Jinja2
templates in ``kernels/``, this evaluation from the formulas.

Operators: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED (per-tensor or per-channel symmetric int8
weights, int32 bias), ADD (with broadcasting), AVERAGE_POOL_2D, MAX_POOL_2D, RESHAPE and SOFTMAX;
every tensor int8 but biases. Anything else raises :class:`ValueError` naming the operator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from project_api.tflite.graph import Graph, Operator, Tensor
from project_api.tflite.reader import read_tflite

from . import quantize as q

__all__ = ["OPERATORS", "evaluate", "run_numpy"]

_INT8_MIN, _INT8_MAX = -128, 127

_Values = dict[int, np.ndarray]  #: tensor index -> int8 value computed so far


def run_numpy(model: bytes, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run the int8 TFLite ``model`` once on ``inputs`` (in order); return its outputs in order."""
    return evaluate(read_tflite(model), inputs)


def evaluate(graph: Graph, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Evaluate ``graph`` (from :func:`~project_api.emit.read_tflite`) on ``inputs``."""
    if len(inputs) != len(graph.inputs):
        raise ValueError(f"the model has {len(graph.inputs)} inputs, {len(inputs)} given")
    values: dict[int, np.ndarray] = {}
    for k, (index, value) in enumerate(zip(graph.inputs, inputs, strict=True)):
        t = graph.tensor(index)
        arr = np.asarray(value)
        if t.dtype != "int8" or arr.dtype != np.int8:
            raise ValueError(f"input {k}: the numpy reference takes int8 tensors "
                             f"(model {t.dtype}, given {arr.dtype})")
        if arr.size != t.num_elements:
            raise ValueError(f"input {k}: {arr.size} elements given, the model wants shape "
                             f"{list(t.shape)}")
        values[index] = arr.reshape(t.shape)
    for op in graph.operators:
        run = OPERATORS.get(op.opcode)
        if run is None:
            raise ValueError(f"the numpy reference does not evaluate {op.describe()}; "
                             f"it knows {', '.join(sorted(OPERATORS))}")
        y = graph.tensor(op.outputs[0])
        result = run(op, graph, values)
        if result.shape != y.shape:
            raise ValueError(f"{op.describe()}: computed shape {list(result.shape)}, the model "
                             f"says {list(y.shape)}")
        values[y.index] = result.astype(np.int8)
    return [values[i].copy() for i in graph.outputs]


# --- helpers ----------------------------------------------------------------------------------


def _quant(t: Tensor) -> tuple[float, int]:
    """(scale, zero point) of a per-tensor quantized int8 activation."""
    if t.dtype != "int8" or t.quant is None or len(t.quant.scale) != 1:
        raise ValueError(f"tensor '{t.name}' is not a per-tensor quantized int8 tensor")
    return t.quant.scale[0], t.quant.zero_point[0]


def _operand(t: Tensor, values: _Values) -> np.ndarray:
    """An operator's input: computed before, or a constant of the model."""
    if t.data is not None:
        return t.data
    return values[t.index]


def _activation(op: Operator, y: Tensor) -> tuple[int, int]:
    scale, zp = _quant(y)
    return q.activation_range_int8(op.options.get("fused_activation_function", "NONE"), scale, zp)


#: MultiplyByQuantizedMultiplier over arrays (multiplier and shift broadcast per channel).
_requantize = np.vectorize(
    lambda x, m, s: q.multiply_by_quantized_multiplier(int(x), int(m), int(s)), otypes=[np.int64])


def _output(acc: np.ndarray, mults: Sequence[tuple[int, int]], out: Tensor,
            bounds: tuple[int, int]) -> np.ndarray:
    """int64 accumulators (last axis: channels) requantized to ``out``'s int8 values."""
    m = np.array([a for a, _ in mults], np.int64)
    s = np.array([b for _, b in mults], np.int64)
    _, zp = _quant(out)
    return np.clip(_requantize(acc, m, s) + zp, *bounds)


def _weights(op: Operator, graph: Graph, out_ch: int, axis: int) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """(int64 weights, int64 bias, one weight scale per output channel) of a weighted op."""
    w = graph.tensor(op.inputs[1])
    if w.data is None or w.dtype != "int8" or w.quant is None:
        raise ValueError(f"{op.describe()}: weights must be constant quantized int8")
    if any(z != 0 for z in w.quant.zero_point):
        raise ValueError(f"{op.describe()}: weights must be symmetric (zero point 0)")
    scales = list(w.quant.scale)
    if len(scales) == 1:
        scales = scales * out_ch
    elif len(scales) != out_ch or w.quant.axis != axis:
        raise ValueError(f"{op.describe()}: per-channel weights need {out_ch} scales on axis {axis}")
    bias = np.zeros(out_ch, np.int64)
    if len(op.inputs) > 2 and op.inputs[2] >= 0:
        b = graph.tensor(op.inputs[2])
        if b.data is None or b.dtype != "int32":
            raise ValueError(f"{op.describe()}: the bias must be constant int32")
        bias = b.data.astype(np.int64).reshape(-1)
    return w.data.astype(np.int64), bias, scales


def _padding(size: int, kernel: int, stride: int, dilation: int, padding: str) -> tuple[int, int]:
    """(output size, padding before) as TFLite's ``ComputePaddingHeightWidth`` (the odd pixel
    of SAME padding goes after)."""
    effective = (kernel - 1) * dilation + 1
    if padding == "SAME":
        out = (size + stride - 1) // stride
    elif padding == "VALID":
        out = (size - effective + stride) // stride
    else:
        raise ValueError(f"padding {padding!r} is not SAME or VALID")
    total = max((out - 1) * stride + effective - size, 0)
    return out, total // 2


def _windows(op: Operator, x: np.ndarray, kh: int, kw: int, dilation: tuple[int, int],
             fill: int) -> tuple[np.ndarray, list[tuple[int, int, np.ndarray]]]:
    """For an NHWC ``x``: the input padded with ``fill`` and, per kernel tap (ky, kx), the
    strided view of the rows and columns that tap reads, shape (N, OH, OW, C)."""
    o = op.options
    sh, sw = o["stride_h"], o["stride_w"]
    dh, dw = dilation
    n, h, w, c = x.shape
    oh, ph = _padding(h, kh, sh, dh, o["padding"])
    ow, pw = _padding(w, kw, sw, dw, o["padding"])
    if oh < 1 or ow < 1:
        raise ValueError(f"{op.describe()}: the window is larger than the input")
    rows, cols = (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1
    padded = np.full((n, max(rows, h + ph), max(cols, w + pw), c), fill, np.int64)
    padded[:, ph:ph + h, pw:pw + w, :] = x
    taps = [(ky, kx, padded[:, ky * dh:ky * dh + (oh - 1) * sh + 1:sh,
                            kx * dw:kx * dw + (ow - 1) * sw + 1:sw, :])
            for ky in range(kh) for kx in range(kw)]
    return padded, taps


# --- operators --------------------------------------------------------------------------------


def _conv2d(op: Operator, graph: Graph, values: _Values) -> np.ndarray:
    x_t, y_t = graph.tensor(op.inputs[0]), graph.tensor(op.outputs[0])
    in_scale, in_zp = _quant(x_t)
    out_scale, _ = _quant(y_t)
    out_ch, kh, kw, _ = graph.tensor(op.inputs[1]).shape
    w, bias, scales = _weights(op, graph, out_ch, 0)
    dilation = (op.options["dilation_h_factor"], op.options["dilation_w_factor"])
    # Padding holds the input zero point, so (x - zp) is 0 there: TFLM skips those taps.
    _, taps = _windows(op, _operand(x_t, values), kh, kw, dilation, in_zp)
    acc = sum(np.einsum("nhwc,oc->nhwo", patch - in_zp, w[:, ky, kx, :]) for ky, kx, patch in taps)
    mults = [q.conv_multiplier(in_scale, s, out_scale) for s in scales]
    return _output(acc + bias, mults, y_t, _activation(op, y_t))


def _depthwise_conv2d(op: Operator, graph: Graph, values: _Values) -> np.ndarray:
    x_t, y_t = graph.tensor(op.inputs[0]), graph.tensor(op.outputs[0])
    in_scale, in_zp = _quant(x_t)
    out_scale, _ = _quant(y_t)
    _, kh, kw, out_ch = graph.tensor(op.inputs[1]).shape
    w, bias, scales = _weights(op, graph, out_ch, 3)
    channels = x_t.shape[3]
    if out_ch % channels:
        raise ValueError(f"{op.describe()}: {out_ch} output channels for {channels} inputs")
    multiplier = out_ch // channels  # output channel ic * multiplier + m reads input channel ic
    dilation = (op.options["dilation_h_factor"], op.options["dilation_w_factor"])
    _, taps = _windows(op, _operand(x_t, values), kh, kw, dilation, in_zp)
    acc = sum(np.repeat(patch - in_zp, multiplier, axis=3) * w[0, ky, kx, :]
              for ky, kx, patch in taps)
    mults = [q.conv_multiplier(in_scale, s, out_scale) for s in scales]
    return _output(acc + bias, mults, y_t, _activation(op, y_t))


def _fully_connected(op: Operator, graph: Graph, values: _Values) -> np.ndarray:
    x_t, y_t = graph.tensor(op.inputs[0]), graph.tensor(op.outputs[0])
    if op.options.get("weights_format", "DEFAULT") != "DEFAULT":
        raise ValueError(f"{op.describe()}: shuffled weights are not evaluated")
    in_scale, in_zp = _quant(x_t)
    out_scale, _ = _quant(y_t)
    out_ch, depth = graph.tensor(op.inputs[1]).shape
    w, bias, scales = _weights(op, graph, out_ch, 0)
    x = _operand(x_t, values).astype(np.int64).reshape(-1, depth)
    acc = (x - in_zp) @ w.T + bias
    mults = [q.conv_multiplier(in_scale, s, out_scale) for s in scales]
    return _output(acc, mults, y_t, _activation(op, y_t)).reshape(y_t.shape)


def _add(op: Operator, graph: Graph, values: _Values) -> np.ndarray:
    a_t, b_t, y_t = (graph.tensor(i) for i in (op.inputs[0], op.inputs[1], op.outputs[0]))
    (sa, za), (sb, zb), (so, zo) = _quant(a_t), _quant(b_t), _quant(y_t)
    # TFLM's int8 ADD: both inputs to a common scale (twice the larger one) after a 20-bit left
    # shift, summed, then to the output scale; every multiplier below one.
    left_shift = 20
    twice_max = 2 * max(q.f32(sa), q.f32(sb))
    m1, s1 = q.quantize_multiplier_smaller_than_one(q.f32(sa) / twice_max)
    m2, s2 = q.quantize_multiplier_smaller_than_one(q.f32(sb) / twice_max)
    mo, s_out = q.quantize_multiplier_smaller_than_one(
        twice_max / ((1 << left_shift) * q.f32(so)))
    a = _operand(a_t, values).astype(np.int64).reshape(a_t.shape)
    b = _operand(b_t, values).astype(np.int64).reshape(b_t.shape)
    a, b = np.broadcast_arrays(a, b)
    total = (_requantize((a - za) << left_shift, m1, s1)
             + _requantize((b - zb) << left_shift, m2, s2))
    return np.clip(_requantize(total, mo, s_out) + zo, *_activation(op, y_t))


def _pool2d(op: Operator, graph: Graph, values: _Values) -> np.ndarray:
    x_t, y_t = graph.tensor(op.inputs[0]), graph.tensor(op.outputs[0])
    if (q.f32(_quant(x_t)[0]), _quant(x_t)[1]) != (q.f32(_quant(y_t)[0]), _quant(y_t)[1]):
        raise ValueError(f"{op.describe()}: int8 pooling needs the same quantization in and out")
    kh, kw = op.options["filter_height"], op.options["filter_width"]
    x = _operand(x_t, values)
    # Padding is marked by a sentinel below int8: it neither counts nor wins a maximum.
    sentinel = _INT8_MIN - 1
    _, taps = _windows(op, x, kh, kw, (1, 1), sentinel)
    stack = np.stack([patch for _, _, patch in taps])
    inside = stack != sentinel
    if op.opcode == "MAX_POOL_2D":
        result = stack.max(axis=0)
    else:
        total = np.where(inside, stack, 0).sum(axis=0)
        count = inside.sum(axis=0)
        # Round half away from zero with C's truncating division, as TFLM does.
        num = np.where(total > 0, total + count // 2, total - count // 2)
        result = np.sign(num) * (np.abs(num) // count)
    return np.clip(result, *_activation(op, y_t))


def _reshape(op: Operator, graph: Graph, values: _Values) -> np.ndarray:
    return _operand(graph.tensor(op.inputs[0]), values).reshape(graph.tensor(op.outputs[0]).shape)


def _softmax(op: Operator, graph: Graph, values: _Values) -> np.ndarray:
    x_t, y_t = graph.tensor(op.inputs[0]), graph.tensor(op.outputs[0])
    in_scale, _ = _quant(x_t)
    out_scale, out_zp = _quant(y_t)
    if out_zp != -128 or q.f32(out_scale) != 1.0 / 256:
        raise ValueError(f"{op.describe()}: the int8 output must have scale 1/256, zero point -128")
    params = q.softmax_params(in_scale, op.options.get("beta", 1.0))
    x = _operand(x_t, values)
    rows = x.reshape(-1, x.shape[-1])
    out = np.array([_softmax_row([int(v) for v in row], *params) for row in rows], np.int64)
    return out.reshape(x.shape)


# --- gemmlowp fixed point (int32 raw values; Q<i>.<31-i> with i integer bits) -----------------

_INT32_MIN, _INT32_MAX = q.INT32_MIN, q.INT32_MAX
_srdhm = q.saturating_rounding_doubling_high_mul  # the product of two fixed-point numbers
_rdbpot = q.rounding_divide_by_pot


def _wrap(x: int) -> int:
    """``x`` as an int32 wraps (the raw addition of two fixed-point numbers)."""
    return (x + (1 << 31)) % (1 << 32) - (1 << 31)


def _rescale(x: int, src_bits: int, dst_bits: int) -> int:
    """gemmlowp ``Rescale``: the same value with ``dst_bits`` integer bits (saturating)."""
    exponent = src_bits - dst_bits
    if exponent < 0:
        return _rdbpot(x, -exponent)
    if exponent > 0:
        threshold = (1 << (31 - exponent)) - 1
        if x > threshold:
            return _INT32_MAX
        if x < -threshold:
            return _INT32_MIN
        return x << exponent
    return x


def _exp_on_quarter_interval(a: int) -> int:
    """exp(a) for a in [-1/4, 0), Q0.31 in and out: Taylor series around -1/8 to 4th order."""
    exp_minus_one_eighth, one_third = 1895147668, 715827883  # exp(-1/8), 1/3 in Q0.31
    x = _wrap(a + (1 << 28))  # a + 1/8
    x2 = _srdhm(x, x)
    x3 = _srdhm(x2, x)
    x4 = _srdhm(x2, x2)
    x4_over_4 = _rdbpot(x4, 2)
    poly = _rdbpot(_wrap(_srdhm(_wrap(x4_over_4 + x3), one_third) + x2), 1)
    return _wrap(exp_minus_one_eighth + _srdhm(exp_minus_one_eighth, _wrap(x + poly)))


#: exp(-2**k) in Q0.31 for the bits of the remainder, k = -2 .. 4.
_EXP_OF_POWERS = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
                  (2, 39332535), (3, 720401), (4, 242))


def _exp_on_negative_values(a: int, integer_bits: int) -> int:
    """exp(a) for a <= 0 with ``integer_bits`` integer bits, as Q0.31."""
    fractional = 31 - integer_bits
    quarter = 1 << (fractional - 2)
    a_mod_quarter_minus_quarter = (a & (quarter - 1)) - quarter
    result = _exp_on_quarter_interval(_rescale(a_mod_quarter_minus_quarter, integer_bits, 0))
    remainder = a_mod_quarter_minus_quarter - a
    for k, factor in _EXP_OF_POWERS:
        if integer_bits > k and remainder & (1 << (fractional + k)):
            result = _srdhm(result, factor)
    if integer_bits > 5 and a < -(1 << (36 - integer_bits)):  # below -32: zero
        result = 0
    return _INT32_MAX if a == 0 else result


def _rounding_half_sum(a: int, b: int) -> int:
    total = a + b
    t = total + (1 if total >= 0 else -1)
    return t // 2 if t >= 0 else -((-t) // 2)


def _one_over_one_plus_x(a: int) -> int:
    """1 / (1 + a) for a in [0, 1), Q0.31 in and out: three Newton-Raphson steps in Q2.29."""
    half_denominator = _rounding_half_sum(a, _INT32_MAX)
    x = _wrap(1515870810 + _srdhm(half_denominator, -1010580540))  # 48/17 - 32/17 * d
    one = 1 << 29
    for _ in range(3):
        error = _wrap(one - _srdhm(half_denominator, x))
        x = _wrap(x + _rescale(_srdhm(x, error), 4, 2))
    return _rescale(x, 1, 0)  # x / 2 as Q1.30 is the same raw value, then Q0.31


def _softmax_row(row: list[int], input_multiplier: int, input_left_shift: int,
                 diff_min: int) -> list[int]:
    """TFLM's int8 softmax of one row: differences to the maximum as Q5.26, their
    exponentials summed as Q12.19, scaled by the reciprocal of the sum to int8 (zero point -128)."""
    top = max(row)

    def exp_of(v: int) -> int | None:
        diff = v - top
        if diff < diff_min:
            return None
        scaled = _srdhm(_wrap(diff * (1 << input_left_shift)), input_multiplier)
        return _exp_on_negative_values(scaled, 5)

    exps = [exp_of(v) for v in row]
    total = 0
    for e in exps:
        if e is not None:
            total = _wrap(total + _rescale(e, 0, 12))
    headroom = 32 - total.bit_length()  # leading zeros of the positive int32 sum
    bits_over_unit = 12 - headroom
    reciprocal = _one_over_one_plus_x(_wrap((total << headroom) - (1 << 31)))
    out = []
    for e in exps:
        if e is None:
            out.append(_INT8_MIN)
            continue
        value = _rdbpot(_srdhm(reciprocal, e), bits_over_unit + 31 - 8) + _INT8_MIN
        out.append(min(max(value, _INT8_MIN), _INT8_MAX))
    return out


#: The operators :func:`evaluate` knows, by TFLite builtin name.
OPERATORS: dict[str, Callable[[Operator, Graph, _Values], np.ndarray]] = {
    "CONV_2D": _conv2d,
    "DEPTHWISE_CONV_2D": _depthwise_conv2d,
    "FULLY_CONNECTED": _fully_connected,
    "ADD": _add,
    "AVERAGE_POOL_2D": _pool2d,
    "MAX_POOL_2D": _pool2d,
    "RESHAPE": _reshape,
    "SOFTMAX": _softmax,
}

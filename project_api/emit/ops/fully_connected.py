"""FULLY_CONNECTED: int8 (per-tensor or per-channel weights), int16x8 (an int64 accumulator with
an int64 bias, an int32 one with an int32 bias, as TFLM chooses) and float32.

int8 follows TFLM's reference ``FullyConnected``: ``acc = bias + sum((x - zp_in) * w)``, then
``MultiplyByQuantizedMultiplier``, plus the output zero point, clamped to the activation range.
The input offset term ``-zp_in * sum(w)`` is folded into the bias here, so the C inner loop is a
plain int8 dot product. Where the folded term overflows int32 (while TFLM's real accumulators
fit), it is stored modulo 2^32 and added with wrapping arithmetic (the portable kernel, also on
DSP targets). float32 weights stored as int8 with a scale (a "hybrid" model) are
dequantized here into float32 weights.
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator, Tensor

from .. import quantize as q
from ..target import GENERIC, Target
from . import _dsp
from ._weighted import (
    dequantized_weights,
    float_weights_and_bias,
    int8_requant,
    int16_weighted,
    int32_bias,
    weighted_operands,
)
from .common import (
    ConstArray,
    Kernel,
    OpSpec,
    check_dtype,
    check_same_type,
    per_tensor,
    unsupported,
)

__all__ = ["dequantized_weights", "prepare"]  # dequantized_weights: imported from here by tests


SPEC = OpSpec(opcodes=("FULLY_CONNECTED",), schemes=("float32", "int8", "int16x8"),
              dsp=("int8",))

def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, w, b, y, act = weighted_operands(op, graph)
    if op.options.get("weights_format", "DEFAULT") != "DEFAULT":
        raise unsupported(op, "shuffled weights format not supported")
    check_dtype(op, x, ("int8", "float32", "int16"))
    if len(w.shape) != 2:
        raise unsupported(op, f"weights '{w.name}' must be 2-D, shape {list(w.shape)}")
    out_ch, depth = w.shape
    if depth == 0 or x.num_elements % depth:
        raise unsupported(op, f"input of {x.num_elements} elements is not a multiple of the "
                              f"weights depth {depth}")
    batches = x.num_elements // depth
    if y.num_elements != batches * out_ch:
        raise unsupported(op, f"output '{y.name}' has {y.num_elements} elements, expected "
                              f"{batches * out_ch}")
    check_same_type(op, x, y)
    params = {"batches": batches, "depth": depth, "out_ch": out_ch, "dtype": x.dtype}

    if x.dtype == "float32":
        wf, bias = float_weights_and_bias(op, w, b, out_ch, 0, "weights")
        lo, hi = q.activation_range_float(act)
        params.update(act_min=lo, act_max=hi, has_bias=b is not None)
        return Kernel(op, "fully_connected.c.j2", params, [x.index], [y.index],
                      [ConstArray("w", "float", wf.reshape(-1)),
                       ConstArray("b", "float", bias)])

    if x.dtype == "int16":
        rq, consts = int16_weighted(op, x, w, b, y, out_ch, 0, act, w.data)
        params.update(rq, per_channel=w.quant.per_channel)
        return Kernel(op, "fully_connected.c.j2", params, [x.index], [y.index],
                      [ConstArray("w", "int8_t", w.data.astype(np.int8).reshape(-1)), *consts],
                      headers=("int16.h.j2",) if params["acc"] == "int64" else ())

    check_dtype(op, w, ("int8",))
    _, in_zp = per_tensor(op, x)
    rq, per_channel_consts = int8_requant(op, x, w, y, out_ch, 0, act)
    bias = int32_bias(op, b, out_ch)
    wi = w.data.astype(np.int64)
    folded = bias + (-in_zp) * wi.sum(axis=1)
    # The folded term alone may overflow int32 where every real accumulator (TFLM's int32 sum
    # of w * (x + offset), plus the bias) fits: then it is kept modulo 2^32 and added with
    # wrapping arithmetic, which gives the real accumulator whenever that fits.
    wrap = bool(np.abs(folded).max(initial=0) > _dsp.INT32_MAX)
    m, s = per_channel_consts
    params.update(rq, per_channel=w.quant.per_channel, mult=int(m.values[0]),
                  shift=int(s.values[0]), wrap=wrap)
    if target.dsp and not target.mve and depth % 4 == 0 and not wrap:
        return prepare_dsp(op, x, y, params, wi, folded, m, s)
    params["mve"] = target.mve  # four rows a pass of Helium dot products (m_dot8x4)
    wl = _dsp.interleave4(w.data, depth) if target.mve else w.data
    consts = [ConstArray("w", "int8_t", wl.astype(np.int8).reshape(-1)),
              ConstArray("b", "int32_t", _dsp.wrap32(folded))]
    # wrapping: nothing bounds the accumulator below int32, so TFLM's general requantization
    bound = (np.full(out_ch, _dsp.INT32_MAX, np.int64) if wrap
             else _dsp.acc_bound(wi, folded, 128))
    rq = _dsp.mve_requant(params, m, s) if target.mve else _dsp.requant(params, m, s, bound)
    if w.quant.per_channel:
        consts += rq
    return Kernel(op, "fully_connected.c.j2", params, [x.index], [y.index], consts,
                  headers=("mve.h.j2",) if target.mve else ())


#: Output rows per pass of the DSP kernel (4 accumulators, the input's P/Q pair, a weight word
#: and its SXTB16 stay in registers with the pointers).
ROWS = 4
#: The DSP kernel unrolls the reduction at constant offsets up to this many groups of 4 inputs.
MAX_UNROLLED_GROUPS = 32
#: Beyond that, groups per loop iteration.
GROUPS_PER_ITERATION = 4
#: Bytes of the input's P/Q words on the stack (else they are remade on every pass).
MAX_STACK_COLUMN_BYTES = 512


def prepare_dsp(op: Operator, x: Tensor, y: Tensor, params: dict, wi: np.ndarray,
                folded: np.ndarray, m: ConstArray, s: ConstArray) -> Kernel:
    """The DSP kernel of an int8 FULLY_CONNECTED with depth a multiple of 4 (``wi``: the weights
    [out, depth] as int64, ``folded``: the bias with the input offset folded in): int8 weights
    in the PQ order of :mod:`._dsp`, or, where that form cannot hold the sums (a weight of -128
    beside a negative one, or sums beyond +-2^23), the weights in input order, each word
    widened twice."""
    out_ch, depth = wi.shape
    folded, m, s = _dsp.constant_channels(wi, folded, m, s, params)
    bound = _dsp.acc_bound(wi, folded, 128)
    pq = _dsp.pq_bytes(wi)
    params = dict(params)
    if pq is None or bound.max(initial=0) >= _dsp.PQ_LIMIT:
        rq = _dsp.requant(params, m, s, bound)
        oc2 = out_ch - out_ch % 2
        groups = wi.reshape(out_ch, depth // 4, 4)
        pairs = groups[:oc2].reshape(oc2 // 2, 2, depth // 4, 4).transpose(0, 2, 1, 3)
        wl = np.concatenate([pairs.reshape(-1), groups[oc2:].reshape(-1)]).astype(np.int8)
        consts = [ConstArray("w", "int8_t", wl),
                  ConstArray("b", "int32_t", folded.astype(np.int32))] + rq
        return Kernel(op, "fully_connected_sxtb.dsp.c.j2", params, [x.index], [y.index], consts)
    k4 = depth // 4
    params.update(k4=k4, rows=ROWS, pq=True, offp=_dsp.pq_offset(),
                  col="stack" if 8 * k4 <= MAX_STACK_COLUMN_BYTES else "reg",
                  unroll=k4 <= MAX_UNROLLED_GROUPS, per_iter=GROUPS_PER_ITERATION)
    rq, low = _dsp.rq_params(params, m, s, bound, packed=True)
    wl = _dsp.blocked(_dsp.words(pq).reshape(out_ch, k4), ROWS)
    consts = [ConstArray("w", "int32_t", wl),
              ConstArray("b", "int32_t", _dsp.pq_init(folded, wi, low))] + rq
    return Kernel(op, "fully_connected.dsp.c.j2", params, [x.index], [y.index], consts)

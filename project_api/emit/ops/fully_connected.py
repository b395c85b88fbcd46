"""FULLY_CONNECTED: int8 (per-tensor or per-channel weights) and float32.

int8 follows TFLM's reference ``FullyConnected``: ``acc = bias + sum((x - zp_in) * w)``, then
``MultiplyByQuantizedMultiplier``, plus the output zero point, clamped to the activation range.
The input offset term ``-zp_in * sum(w)`` is folded into the bias here, so the C inner loop is a
plain int8 dot product. float32 weights stored as int8 with a scale (a "hybrid" model) are
dequantized here into float32 weights.
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedOperatorError
from .. import quantize as q
from ..graph import Graph, Operator, Tensor
from .common import (
    ConstArray,
    Kernel,
    check_activation,
    check_counts,
    check_dtype,
    per_tensor,
    tensor_in,
    tensor_out,
    unsupported,
)


def dequantized_weights(op: Operator | None, w: Tensor, axis: int) -> np.ndarray:
    """float32 weights of a hybrid op: ``float32(scale) * float32(q - zero_point)``."""
    if w.quant is None or w.data is None:
        what = f"weights '{w.name}' are {w.dtype} without quantization"
        raise unsupported(op, what) if op is not None else UnsupportedOperatorError(what)
    scale = np.asarray(w.quant.scale, dtype=np.float32)
    zp = np.asarray(w.quant.zero_point, dtype=np.float32)
    shape = [1] * w.data.ndim
    if len(scale) > 1:
        shape[axis] = len(scale)
    return ((w.data.astype(np.float32) - zp.reshape(shape)) * scale.reshape(shape)).astype(
        np.float32)


def prepare(op: Operator, graph: Graph) -> Kernel:
    check_counts(op, (2, 3))
    x = tensor_in(graph, op, 0, const=False)
    w = tensor_in(graph, op, 1, const=True)
    b = tensor_in(graph, op, 2, const=True, optional=True)
    y = tensor_out(graph, op)
    act = check_activation(op)
    if op.options.get("weights_format", 0) != 0:
        raise unsupported(op, "shuffled weights format not supported")
    check_dtype(op, x, ("int8", "float32"))
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
    if y.dtype != x.dtype:
        raise unsupported(op, f"output type {y.dtype} differs from input type {x.dtype}")
    params = {"batches": batches, "depth": depth, "out_ch": out_ch, "dtype": x.dtype}

    if x.dtype == "float32":
        if w.dtype == "float32":
            wf = w.data.astype(np.float32)
        elif w.dtype == "int8":
            wf = dequantized_weights(op, w, 0)
        else:
            raise unsupported(op, f"weights type {w.dtype} not supported with float32 input")
        bias = np.zeros(out_ch, np.float32)
        if b is not None:
            check_dtype(op, b, ("float32",))
            bias = b.data.astype(np.float32).reshape(-1)
        lo, hi = q.activation_range_float(act)
        params.update(act_min=lo, act_max=hi, has_bias=b is not None)
        return Kernel(op, "fully_connected.c.j2", params, [x.index], [y.index],
                      [ConstArray("w", "float", wf.reshape(-1)),
                       ConstArray("b", "float", bias)])

    check_dtype(op, w, ("int8",))
    in_scale, in_zp = per_tensor(op, x)
    out_scale, out_zp = per_tensor(op, y)
    if w.quant is None:
        raise unsupported(op, f"weights '{w.name}' have no quantization parameters")
    if any(z != 0 for z in w.quant.zero_point):
        raise unsupported(op, "int8 weights must be symmetric (zero point 0)")
    if w.quant.per_channel and (len(w.quant.scale) != out_ch or w.quant.axis != 0):
        raise unsupported(op, "per-channel weights must have one scale per output channel")
    scales = w.quant.scale if w.quant.per_channel else w.quant.scale * out_ch
    mults = [q.conv_multiplier(in_scale, s, out_scale) for s in scales]
    bias = np.zeros(out_ch, np.int64)
    if b is not None:
        check_dtype(op, b, ("int32",))
        bias = b.data.astype(np.int64).reshape(-1)
    wi = w.data.astype(np.int64)
    folded = bias + (-in_zp) * wi.sum(axis=1)
    if np.abs(folded).max(initial=0) >= (1 << 31):
        raise unsupported(op, "bias plus input offset overflows int32")
    lo, hi = q.activation_range_int8(act, out_scale, out_zp)
    params.update(out_zp=out_zp, act_min=lo, act_max=hi, per_channel=w.quant.per_channel,
                  mult=mults[0][0], shift=mults[0][1])
    consts = [ConstArray("w", "int8_t", w.data.astype(np.int8).reshape(-1)),
              ConstArray("b", "int32_t", folded.astype(np.int32))]
    if w.quant.per_channel:
        consts += [ConstArray("m", "int32_t", np.array([m for m, _ in mults], np.int32)),
                   ConstArray("s", "int8_t", np.array([s for _, s in mults], np.int8))]
    return Kernel(op, "fully_connected.c.j2", params, [x.index], [y.index], consts)

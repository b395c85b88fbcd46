"""TRANSPOSE_CONV: float32, int8 (weights per tensor or per channel; int32 bias) and int16x8
(int8 weights; an int64 accumulator, the bias int64 or int16 as TFLM widens it), as TFLM's
``transpose_conv.cc`` and its reference kernels compute them.

Inputs as the converter writes them: the output shape (int32 [4]: a constant, or computed in
the graph, which TFLM never reads: the output tensor's static shape decides), the weights
``[O, KH, KW, I]``, the input, an optional bias; the scheme is the input's (input 2). The padding is TFLM's: a convolution's padding
computed from the *output* size (``ComputePaddingHeightWidth`` with dilation 1).

TFLM scatters every input pixel into an output-sized accumulator buffer. The kernel here
gathers instead: each output pixel sums, for every input pixel that reaches it, ``x * w`` over
the input channels (int8: ``(x - zp_in) * w``), in the order TFLM's scatter adds them (input
row, column, channel), so float32 is TFLM's bit for bit too, and needs no buffer. The bias is
added after the sum, then TFLM's requantization (int16: ``MultiplyByQuantizedMultiplier`` of
int64) and the fused activation.

TFLM reads an int32 bias of an int16x8 layer as int64 (its kernel takes int16 or int64 only):
refused here. Hybrid models (float32 input, int8 weights) TFLM refuses, and so does this.
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator, Tensor

from .. import quantize as q
from ..target import GENERIC, Target
from . import _dsp
from ._weighted import int8_requant, int16_weighted
from .common import (
    ConstArray,
    Kernel,
    OpSpec,
    check_activation,
    check_dtype,
    check_same_type,
    compute_padding,
    per_tensor,
    tensor_in,
    tensor_out,
    unsupported,
)


def classify(op: Operator, graph: Graph) -> tuple[str, str]:
    """The scheme of a TRANSPOSE_CONV node: its data input's (input 2; input 0, the output
    shape, is int32 and may be an activation)."""
    if len(op.inputs) < 3 or op.inputs[2] < 0:
        return "none", "the node lacks its input 2 (the data)"
    x = graph.tensor(op.inputs[2])
    return ("int16x8" if x.dtype == "int16" else x.dtype), f"input 2 '{x.name}' is {x.dtype}"


SPEC = OpSpec(opcodes=("TRANSPOSE_CONV",), schemes=("float32", "int8", "int16x8"),
              classify=classify)


def _geometry(op: Operator, x: Tensor, w: Tensor, y: Tensor, shape_t: Tensor) -> dict:
    for k in ("stride_w", "stride_h"):
        if op.options.get(k, 0) < 1:
            raise unsupported(op, f"{k} = {op.options.get(k)} must be >= 1")
    padding = op.options.get("padding")
    if padding not in ("SAME", "VALID"):
        raise unsupported(op, f"padding {padding} not supported")
    if shape_t.dtype != "int32" or shape_t.num_elements != 4:
        raise unsupported(op, f"output shape '{shape_t.name}' must be 4 int32 values, it is "
                              f"{shape_t.dtype} {list(shape_t.shape)}")
    if shape_t.is_const:  # (an activation: TFLM never reads it, the output's shape decides)
        want = [int(v) for v in np.asarray(shape_t.data).reshape(-1)]
        if list(y.shape) != want:
            raise unsupported(op, f"output '{y.name}' has shape {list(y.shape)}, the output "
                                  f"shape input says {want}")
    if len(x.shape) != 4 or len(w.shape) != 4:
        raise unsupported(op, f"input '{x.name}' {list(x.shape)} and weights '{w.name}' "
                              f"{list(w.shape)} must be 4-D (NHWC, OHWI)")
    n, h, wd, c = x.shape
    oc, kh, kw, ic = w.shape
    if ic != c or y.shape[0] != n or y.shape[3] != oc:
        raise unsupported(op, f"weights '{w.name}' {list(w.shape)} do not map input "
                              f"{list(x.shape)} to output {list(y.shape)}")
    sh, sw = op.options["stride_h"], op.options["stride_w"]
    oh, ow = y.shape[1], y.shape[2]
    _, pad_h = compute_padding(oh, kh, sh, 1, padding)
    _, pad_w = compute_padding(ow, kw, sw, 1, padding)
    return {"n": n, "h": h, "w": wd, "c": c, "oh": oh, "ow": ow, "oc": oc, "kh": kh, "kw": kw,
            "sh": sh, "sw": sw, "pad_h": pad_h, "pad_w": pad_w}


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    if len(op.inputs) not in (3, 4) or len(op.outputs) != 1:
        raise unsupported(op, f"expects 3 or 4 inputs and 1 output, has {len(op.inputs)} and "
                              f"{len(op.outputs)}")
    shape_t = tensor_in(graph, op, 0)
    w = tensor_in(graph, op, 1, const=True)
    x = tensor_in(graph, op, 2, const=False)
    b = tensor_in(graph, op, 3, const=True, optional=True)
    y = tensor_out(graph, op)
    act = check_activation(op)
    check_dtype(op, x, ("float32", "int8", "int16"))
    check_same_type(op, x, y)
    params = _geometry(op, x, w, y, shape_t)
    oc = params["oc"]
    params.update(dtype=x.dtype, has_bias=b is not None)

    if x.dtype == "float32":
        if w.dtype != "float32":
            raise unsupported(op, f"weights '{w.name}' are {w.dtype} with a float32 input: "
                                  "hybrid models are not supported (TFLM refuses them too)")
        consts = [ConstArray("w", "float", w.data.astype(np.float32).reshape(-1))]
        if b is not None:  # TFLM adds no bias when there is none (not even +0.0)
            check_dtype(op, b, ("float32",))
            consts.append(ConstArray("b", "float", b.data.astype(np.float32).reshape(-1)))
        lo, hi = q.activation_range_float(act)
        params.update(act_min=lo, act_max=hi)
        return Kernel(op, "transpose_conv.c.j2", params, [x.index], [y.index], consts)

    check_dtype(op, w, ("int8",))
    if b is not None and b.num_elements != oc:
        raise unsupported(op, f"bias '{b.name}' has {b.num_elements} values for {oc} output "
                              "channels")
    if x.dtype == "int16":
        if b is not None:
            check_dtype(op, b, ("int64", "int16"))
            if b.dtype == "int16":  # TFLM widens an int16 bias to int64
                b = Tensor(b.index, b.name, "int64", b.shape, b.quant,
                           b.data.astype(np.int64))
        rq, consts = int16_weighted(op, x, w, b, y, oc, 0, act, w.data, int64_only=True)
        params.update(rq)
        return Kernel(op, "transpose_conv.c.j2", params, [x.index], [y.index],
                      [ConstArray("w", "int8_t", w.data.astype(np.int8).reshape(-1)), *consts],
                      headers=("int16.h.j2",))

    _, in_zp = per_tensor(op, x)
    rq, (m, s) = int8_requant(op, x, w, y, oc, 0, act)
    params.update(rq, in_off=-in_zp)
    bias = np.zeros(oc, np.int64)
    if b is not None:
        check_dtype(op, b, ("int32",))
        bias = b.data.astype(np.int64).reshape(-1)
    consts = [ConstArray("w", "int8_t", w.data.astype(np.int8).reshape(-1)),
              ConstArray("b", "int32_t", bias.astype(np.int32))]
    consts += _dsp.requant(params, m, s, _dsp.acc_bound(w.data, bias, 255))
    return Kernel(op, "transpose_conv.c.j2", params, [x.index], [y.index], consts)

"""CONV_2D: int8 per-channel (TFLM ``ConvPerChannel``) and float32, any stride/padding/dilation.

Two loop forms are generated, both exact:

* ``dot``: when no filter tap ever falls outside the input (VALID, or SAME that needs no
  padding, e.g. 1x1), the input offset is folded into the bias at emit time and each output is
  ``bias' + sum(w * x)`` over contiguous input channels (a dot product the compiler vectorises).
* ``tap``: otherwise, the weights are re-laid out as ``[ky][kx][ic][oc]`` and every output pixel
  accumulates all output channels at once over the in-bounds taps, with
  ``w * (x - zp_in)`` as in TFLM (padding reads as the zero point, i.e. contributes nothing).
"""

from __future__ import annotations

import numpy as np

from .. import quantize as q
from ..graph import Graph, Operator, Tensor
from .common import (
    ConstArray,
    Kernel,
    accumulator,
    check_activation,
    check_counts,
    check_dtype,
    check_shape,
    check_spatial,
    compute_padding,
    per_tensor,
    tensor_in,
    tensor_out,
    unsupported,
)
from .fully_connected import dequantized_weights


def conv_geometry(op: Operator, x: Tensor, kh: int, kw: int) -> dict:
    check_spatial(op)
    if len(x.shape) != 4:
        raise unsupported(op, f"input '{x.name}' must be 4-D NHWC, shape {list(x.shape)}")
    n, h, w, c = x.shape
    sh, sw = op.options["stride_h"], op.options["stride_w"]
    dh, dw = op.options.get("dilation_h", 1), op.options.get("dilation_w", 1)
    oh, pad_h = compute_padding(h, kh, sh, dh, op.options["padding"])
    ow, pad_w = compute_padding(w, kw, sw, dw, op.options["padding"])
    if oh < 1 or ow < 1:
        raise unsupported(op, "the filter is larger than the input")
    inside = (pad_h == 0 and pad_w == 0 and (oh - 1) * sh + (kh - 1) * dh + 1 <= h
              and (ow - 1) * sw + (kw - 1) * dw + 1 <= w)
    return {"n": n, "h": h, "w": w, "c": c, "oh": oh, "ow": ow, "kh": kh, "kw": kw,
            "sh": sh, "sw": sw, "dh": dh, "dw": dw, "pad_h": pad_h, "pad_w": pad_w,
            "inside": inside}


def int8_requant(op: Operator, x: Tensor, w: Tensor, y: Tensor, out_ch: int, axis: int,
                 act: str) -> tuple[dict, list[ConstArray]]:
    """Per-channel multipliers/shifts and the activation clamp shared by CONV and DEPTHWISE."""
    in_scale, _ = per_tensor(op, x)
    out_scale, out_zp = per_tensor(op, y)
    if w.quant is None:
        raise unsupported(op, f"weights '{w.name}' have no quantization parameters")
    if any(z != 0 for z in w.quant.zero_point):
        raise unsupported(op, "int8 weights must be symmetric (zero point 0)")
    if w.quant.per_channel and (len(w.quant.scale) != out_ch or w.quant.axis != axis):
        raise unsupported(op, f"per-channel weights need {out_ch} scales on axis {axis}")
    scales = w.quant.scale if w.quant.per_channel else w.quant.scale * out_ch
    mults = [q.conv_multiplier(in_scale, s, out_scale) for s in scales]
    lo, hi = q.activation_range_int8(act, out_scale, out_zp)
    params = {"out_zp": out_zp, "act_min": lo, "act_max": hi}
    consts = [ConstArray("m", "int32_t", np.array([m for m, _ in mults], np.int32)),
              ConstArray("s", "int8_t", np.array([s for _, s in mults], np.int8))]
    return params, consts


def prepare(op: Operator, graph: Graph) -> Kernel:
    check_counts(op, (2, 3))
    x = tensor_in(graph, op, 0, const=False)
    w = tensor_in(graph, op, 1, const=True)
    b = tensor_in(graph, op, 2, const=True, optional=True)
    y = tensor_out(graph, op)
    act = check_activation(op)
    check_dtype(op, x, ("int8", "float32"))
    if y.dtype != x.dtype:
        raise unsupported(op, f"output type {y.dtype} differs from input type {x.dtype}")
    if len(w.shape) != 4:
        raise unsupported(op, f"filter '{w.name}' must be 4-D OHWI")
    oc, kh, kw, ic = w.shape
    g = conv_geometry(op, x, kh, kw)
    if ic != g["c"]:
        raise unsupported(op, f"grouped convolution (filter depth {ic}, input depth {g['c']}) "
                              "not supported")
    check_shape(op, y, (g["n"], g["oh"], g["ow"], oc))
    params = dict(g, oc=oc, dtype=x.dtype, form="dot" if g["inside"] else "tap")
    scratch = accumulator(params, oc) if params["form"] == "tap" else 0
    params.setdefault("scratch", False)

    if x.dtype == "float32":
        if w.dtype == "float32":
            wf = w.data.astype(np.float32)
        elif w.dtype == "int8":
            wf = dequantized_weights(op, w, 0)
        else:
            raise unsupported(op, f"filter type {w.dtype} not supported with float32 input")
        bias = np.zeros(oc, np.float32)
        if b is not None:
            check_dtype(op, b, ("float32",))
            bias = b.data.astype(np.float32).reshape(-1)
        lo, hi = q.activation_range_float(act)
        params.update(act_min=lo, act_max=hi)
        wl = wf if params["form"] == "dot" else wf.transpose(1, 2, 3, 0)
        return Kernel(op, "conv2d.c.j2", params, [x.index], [y.index],
                      [ConstArray("w", "float", np.ascontiguousarray(wl).reshape(-1)),
                       ConstArray("b", "float", bias)], scratch_bytes=scratch)

    check_dtype(op, w, ("int8",))
    _, in_zp = per_tensor(op, x)
    rq, consts = int8_requant(op, x, w, y, oc, 0, act)
    params.update(rq, in_off=-in_zp)
    bias = np.zeros(oc, np.int64)
    if b is not None:
        check_dtype(op, b, ("int32",))
        bias = b.data.astype(np.int64).reshape(-1)
    if params["form"] == "dot":
        bias = bias + (-in_zp) * w.data.astype(np.int64).reshape(oc, -1).sum(axis=1)
        wl = w.data
    else:
        wl = w.data.transpose(1, 2, 3, 0)
    if np.abs(bias).max(initial=0) >= (1 << 31):
        raise unsupported(op, "bias plus input offset overflows int32")
    consts = [ConstArray("w", "int8_t", np.ascontiguousarray(wl).astype(np.int8).reshape(-1)),
              ConstArray("b", "int32_t", bias.astype(np.int32))] + consts
    return Kernel(op, "conv2d.c.j2", params, [x.index], [y.index], consts,
                  scratch_bytes=scratch)

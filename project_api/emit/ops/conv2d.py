"""CONV_2D: int8 per-channel (TFLM ``ConvPerChannel``), int16x8 (its int16 form: no offsets, an
int64 accumulator with an int64 bias or an int32 one with an int32 bias) and float32, any
stride/padding/dilation.

Two loop forms are generated, both exact:

* ``dot``: when no filter tap ever falls outside the input (VALID, or SAME that needs no
  padding, e.g. 1x1), the input offset is folded into the bias at emit time and each output is
  ``bias' + sum(w * x)`` over contiguous input channels (a dot product the compiler vectorises).
* ``tap``: otherwise, the weights are re-laid out as ``[ky][kx][ic][oc]`` and every output pixel
  accumulates all output channels at once over the in-bounds taps, with
  ``w * (x - zp_in)`` as in TFLM (padding reads as the zero point, i.e. contributes nothing).

On a DSP target (``cortex-m4``, ``m7``, ``m33``) an int8 convolution instead gets one of two
SIMD kernels (``kernels/*.dsp.c.j2``, see :mod:`._dsp`):

* ``conv2d_1x1.dsp``: a 1x1 filter with no padding and an input depth that is a multiple of 4,
  on the raw input with the input offset folded into the bias;
* ``conv2d_im2col.dsp``: everything else, through two int16 columns in the pool (scratch).
"""

from __future__ import annotations

import numpy as np

from .. import quantize as q
from ..graph import Graph, Operator, Tensor
from ..target import GENERIC, Target
from . import _dsp
from ._weighted import (
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
    accumulator,
    check_dtype,
    check_same_type,
    check_shape,
    check_spatial,
    compute_padding,
    per_tensor,
    unsupported,
)

SPEC = OpSpec(opcodes=("CONV_2D",), schemes=("float32", "int8", "int16x8"), dsp=("int8",))

def conv_geometry(op: Operator, x: Tensor, kh: int, kw: int) -> dict:
    check_spatial(op)
    if len(x.shape) != 4:
        raise unsupported(op, f"input '{x.name}' must be 4-D NHWC, shape {list(x.shape)}")
    n, h, w, c = x.shape
    sh, sw = op.options["stride_h"], op.options["stride_w"]
    dh, dw = op.options.get("dilation_h_factor", 1), op.options.get("dilation_w_factor", 1)
    oh, pad_h = compute_padding(h, kh, sh, dh, op.options["padding"])
    ow, pad_w = compute_padding(w, kw, sw, dw, op.options["padding"])
    if oh < 1 or ow < 1:
        raise unsupported(op, "the filter is larger than the input")
    inside = (pad_h == 0 and pad_w == 0 and (oh - 1) * sh + (kh - 1) * dh + 1 <= h
              and (ow - 1) * sw + (kw - 1) * dw + 1 <= w)
    return {"n": n, "h": h, "w": w, "c": c, "oh": oh, "ow": ow, "kh": kh, "kw": kw,
            "sh": sh, "sw": sw, "dh": dh, "dw": dw, "pad_h": pad_h, "pad_w": pad_w,
            "inside": inside}


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, w, b, y, act = weighted_operands(op, graph)
    check_dtype(op, x, ("int8", "float32", "int16"))
    check_same_type(op, x, y)
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
        wf, bias = float_weights_and_bias(op, w, b, oc, 0, "filter")
        lo, hi = q.activation_range_float(act)
        params.update(act_min=lo, act_max=hi)
        wl = wf if params["form"] == "dot" else wf.transpose(1, 2, 3, 0)
        return Kernel(op, "conv2d.c.j2", params, [x.index], [y.index],
                      [ConstArray("w", "float", np.ascontiguousarray(wl).reshape(-1)),
                       ConstArray("b", "float", bias)], scratch_bytes=scratch)

    if x.dtype == "int16":
        return _prepare_int16(op, x, w, b, y, act, params)

    check_dtype(op, w, ("int8",))
    _, in_zp = per_tensor(op, x)
    rq, consts = int8_requant(op, x, w, y, oc, 0, act)
    params.update(rq, in_off=-in_zp)
    bias = int32_bias(op, b, oc)
    if target.dsp:
        return prepare_dsp(op, x, w, y, params, bias, consts)
    if params["form"] == "dot":
        bias = bias + (-in_zp) * w.data.astype(np.int64).reshape(oc, -1).sum(axis=1)
        wl = w.data
        bound = _dsp.acc_bound(w.data, bias, 128)
    else:
        wl = w.data.transpose(1, 2, 3, 0)
        bound = _dsp.acc_bound(w.data, bias, 255)
    if np.abs(bias).max(initial=0) >= (1 << 31):
        raise unsupported(op, "bias plus input offset overflows int32")
    consts = [ConstArray("w", "int8_t", np.ascontiguousarray(wl).astype(np.int8).reshape(-1)),
              ConstArray("b", "int32_t", bias.astype(np.int32))] + _dsp.requant(params, *consts,
                                                                               bound)
    return Kernel(op, "conv2d.c.j2", params, [x.index], [y.index], consts,
                  scratch_bytes=scratch)


def _prepare_int16(op: Operator, x: Tensor, w: Tensor, b: Tensor | None, y: Tensor, act: str,
                   params: dict) -> Kernel:
    """int16x8 (TFLM's int16 ``ConvPerChannel``): no input or output offset, an int64 (or
    int32) accumulator, TFLM's requantization for it."""
    oc = params["oc"]
    rq, consts = int16_weighted(op, x, w, b, y, oc, 0, act, w.data)
    params.update(rq)
    scratch = 0
    if params["form"] == "tap":
        scratch = accumulator(params, oc, 8 if params["acc"] == "int64" else 4)
    wl = w.data if params["form"] == "dot" else w.data.transpose(1, 2, 3, 0)
    consts = [ConstArray("w", "int8_t", np.ascontiguousarray(wl).astype(np.int8).reshape(-1)),
              *consts]
    return Kernel(op, "conv2d.c.j2", params, [x.index], [y.index], consts,
                  scratch_bytes=scratch, headers=("int16.h.j2",) if params["acc"] == "int64"
                  else ())


def prepare_dsp(op: Operator, x: Tensor, w: Tensor, y: Tensor, params: dict,
                bias: np.ndarray, rq_consts: list[ConstArray]) -> Kernel:
    """The DSP-extension kernel of an int8 CONV_2D (``bias``: int64, offset not folded; ``w``:
    anything with ``shape`` OHWI and int8 ``data``; ``params``: the geometry, ``oc``, ``in_off``
    and the requantization's ``out_zp``/``act_min``/``act_max``). Also used by
    DEPTHWISE_CONV_2D with one input channel."""
    oc, kh, kw, ic = w.shape
    in_off = params["in_off"]
    wi = w.data.astype(np.int64)
    params = dict(params, scratch=False)
    if kh == 1 and kw == 1 and params["inside"] and ic % 4 == 0:
        folded = bias + in_off * wi.reshape(oc, -1).sum(axis=1)
        bound = _dsp.acc_bound(wi, folded, 128)
        lanes = _dsp.pair_lanes(wi.reshape(oc, ic))  # [oc][ic/4][2]
        template, scratch, b_out = "conv2d_1x1.dsp.c.j2", 0, folded
    else:
        k = kh * kw * ic
        k2 = k + k % 2
        if ic % 4 == 0 or (params["dw"] == 1 and (kw * ic) % 4 == 0):
            # within each group of 4 consecutive column elements: 0, 2, 1, 3
            order = "lanes" if ic % 4 == 0 else "rows"
            flat = wi.reshape(oc, k // 4, 4)[..., [0, 2, 1, 3]].reshape(oc, k)
        else:
            order = "scalar"
            flat = wi.reshape(oc, k)
        if k2 != k:
            flat = np.concatenate([flat, np.zeros((oc, 1), np.int64)], axis=1)
        lanes = _dsp.pair_consecutive(flat)[..., None]  # [oc][k2/2][1]
        bound = _dsp.acc_bound(wi, bias, 255)
        template, b_out = "conv2d_im2col.dsp.c.j2", bias
        scratch = 2 * k2 * 2
        params.update(k2=k2, order=order, scratch=True)
    if np.abs(b_out).max(initial=0) >= (1 << 31):
        raise unsupported(op, "bias plus input offset overflows int32")
    oc2 = oc - oc % 2
    # per pair of output channels, per column word (1x1: per half of a group of 4 inputs):
    # [oc0, oc1], adjacent so that one LDRD fetches both
    pairs = lanes[:oc2].reshape(oc2 // 2, 2, *lanes.shape[1:]).transpose(0, 2, 3, 1)
    wl = np.concatenate([pairs.reshape(-1), lanes[oc2:].reshape(-1)]).astype(np.int32)
    m, s = rq_consts
    params["off2"] = _dsp.offset_pair(in_off)
    rq = _dsp.requant(params, m, s, bound)
    consts = [ConstArray("w", "int32_t", wl), ConstArray("b", "int32_t", b_out.astype(np.int32))]
    return Kernel(op, template, params, [x.index], [y.index], consts + rq,
                  scratch_bytes=scratch)

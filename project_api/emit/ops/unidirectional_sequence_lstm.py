"""UNIDIRECTIONAL_SEQUENCE_LSTM as TFLM's ``unidirectional_sequence_lstm.cc`` and
``lstm_eval.h`` / ``lstm_eval_common.cc``: float32, int8 (8x8_16: int8 activations and
weights, int32 bias, int16 cell state) and int16x8 (int16 activations, int8 weights, int64 bias,
int16 cell state).

TFLM's kernel takes the standard LSTM only: all four gates (no CIFG: the input gate's weights
and bias are required), no peephole, no projection, no layer norm; the hidden state (input 18)
and the cell state (input 19) are variable tensors, kept in the state region and updated in
place, so they carry over from one invocation to the next. Each time step (per batch when not
time-major, all batches at once when time-major) computes, in TFLM's order and scratch reuse:
the forget, input and cell gates (``act(FC(x) + FC(h))``, sigmoid, sigmoid and the cell gate's
activation, which TFLM takes as TANH), the cell ``c = f * c + i * g`` (clipped when
``cell_clip`` > 0), the output gate, the hidden state ``h = o * tanh(c)`` and its copy to the
output.

Integer gates are int16 at scale 2^-12 (the FC requantization targets it), their activations
TFLM's int16 sigmoid and tanh tables (``kernels/sigmoid.h.j2``) give Q0.15; the cell's tanh
takes the cell scale's power of two; the element-wise products are TFLM's MulElementwise with
multipliers of 2^-15 x 2^-15 (or x cell scale) over the output scale. int8 accumulates the FCs
in int32, int16x8 in int64 with TFLM's int64 requantization. The input offsets are folded into
the biases; on a DSP target the int8 gates run the FULLY_CONNECTED DSP kernel's SMLAD loop
(``unidirectional_sequence_lstm.dsp.c.j2``), the same integers.
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator, Tensor

from .. import quantize as q
from ..target import GENERIC, Target
from . import _dsp
from .common import (
    C_TYPES,
    ConstArray,
    Kernel,
    OpSpec,
    check_dtype,
    per_tensor,
    quantized_range,
    unsupported,
)

SPEC = OpSpec(opcodes=("UNIDIRECTIONAL_SEQUENCE_LSTM",), schemes=("float32", "int8", "int16x8"),
              dsp=("int8",), state=True)

#: The gates in TFLM's order of computation, with the inputs of their weights and bias.
GATES = (("forget", 2, 6, 13), ("input", 1, 5, 12), ("cell", 3, 7, 14), ("output", 4, 8, 15))
#: Inputs TFLM's kernel requires absent: peephole, projection, layer norm.
ABSENT = {9: "peephole", 10: "peephole", 11: "peephole", 16: "projection", 17: "projection",
          20: "layer norm", 21: "layer norm", 22: "layer norm", 23: "layer norm"}
#: The scale of the gates' FC outputs (the activations' input: Q3.12) and of their outputs.
GATE_SCALE = 2.0 ** -12
ACT_SCALE = 2.0 ** -15


def _fc_multiplier(op: Operator, x: Tensor, w: Tensor, acc: str) -> tuple[int, int]:
    """TFLM's FC requantization of a gate: the product of the scales over 2^-12, in double as
    the installed TFLM computes it (a float32 product differs by one LSB now and then, found by
    the parity cases), as the accumulator's form needs it."""
    xs, _ = per_tensor(op, x)
    ws, _ = per_tensor(op, w)
    m, s = q.quantize_multiplier(float(np.float32(xs)) * float(np.float32(ws)) / GATE_SCALE)
    if acc == "int64":
        if s > 7:
            raise unsupported(op, f"the requantization of '{w.name}' is 2^8 or more, outside "
                                  "TFLM's int64 requantization (its shift is at most 7)")
        return q.reduced_multiplier(m, s)
    return m, s


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    if len(op.inputs) != 24 or len(op.outputs) != 1:
        raise unsupported(op, f"expects 24 inputs and 1 output (TFLM's layout), has "
                              f"{len(op.inputs)} and {len(op.outputs)}")

    def tensor(i: int, what: str) -> Tensor:
        if op.inputs[i] < 0:
            raise unsupported(op, f"input {i} ({what}) is missing; TFLM's LSTM needs all four "
                                  "gates (no CIFG)")
        return graph.tensor(op.inputs[i])

    for i, what in ABSENT.items():
        if op.inputs[i] >= 0:
            raise unsupported(op, f"input {i} '{graph.tensor(op.inputs[i]).name}' ({what}) is "
                                  f"given; TFLM's LSTM takes no {what}")
    x = tensor(0, "input")
    h = tensor(18, "hidden state")
    c = tensor(19, "cell state")
    y = graph.tensor(op.outputs[0])
    for t, what in ((h, "hidden state"), (c, "cell state")):
        if not t.is_variable:
            raise unsupported(op, f"{what} '{t.name}' must be a variable tensor")
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant")
    time_major = bool(op.options.get("time_major"))
    if len(x.shape) != 3 or len(h.shape) != 2 or len(y.shape) != 3:
        raise unsupported(op, f"input '{x.name}' {list(x.shape)} and output '{y.name}' "
                              f"{list(y.shape)} must be 3-D, hidden state '{h.name}' 2-D")
    steps, batch = (x.shape[0], x.shape[1]) if time_major else (x.shape[1], x.shape[0])
    n_in, n_state = x.shape[2], h.shape[1]
    if tuple(y.shape) != (x.shape[0], x.shape[1], n_state):
        raise unsupported(op, f"output '{y.name}' {list(y.shape)}, expected "
                              f"{[x.shape[0], x.shape[1], n_state]}")
    for t, what in ((h, "hidden state"), (c, "cell state")):
        if t.num_elements != batch * n_state:
            raise unsupported(op, f"{what} '{t.name}' has {t.num_elements} elements, expected "
                                  f"{batch * n_state}")
    if h.dtype != x.dtype or y.dtype != x.dtype:
        raise unsupported(op, f"input '{x.name}', hidden state '{h.name}' and output '{y.name}' "
                              "must have one type")
    check_dtype(op, x, ("float32", "int8", "int16"))
    weights = {}
    for gate, wx_i, wh_i, b_i in GATES:
        wx, wh, b = tensor(wx_i, f"{gate} gate weights"), tensor(wh_i, "recurrent weights"), \
            tensor(b_i, f"{gate} gate bias")
        for t in (wx, wh, b):
            if not t.is_const:
                raise unsupported(op, f"'{t.name}' must be a constant")
        if tuple(wx.shape) != (n_state, n_in) or tuple(wh.shape) != (n_state, n_state) or \
                tuple(b.shape) != (n_state,):
            raise unsupported(op, f"the {gate} gate's weights '{wx.name}' {list(wx.shape)}, "
                                  f"'{wh.name}' {list(wh.shape)} and bias '{b.name}' "
                                  f"{list(b.shape)} do not fit input {n_in} and state {n_state}")
        weights[gate] = (wx, wh, b)
    act = op.options.get("fused_activation_function", "NONE")
    if act != "TANH":
        raise unsupported(op, f"cell gate activation {act}; TFLM's LSTM takes TANH")
    cell_clip = float(np.float32(op.options.get("cell_clip") or 0.0))
    step_batch = batch if time_major else 1
    params = {"dtype": x.dtype, "time_major": time_major, "batch": batch, "steps": steps,
              "input": n_in, "state": n_state, "step_batch": step_batch,
              "clip": cell_clip > 0}
    consts: list[ConstArray] = []

    if x.dtype == "float32":
        for t in (c, *(t for g in weights.values() for t in g)):
            if t.dtype != "float32":
                raise unsupported(op, f"'{t.name}' is {t.dtype}; TFLM's float32 LSTM reads every "
                                      "weight, bias and the cell state as float32")
        for gate, (wx, wh, b) in weights.items():
            consts += [ConstArray(f"wx_{gate}", "float", wx.data.astype(np.float32).reshape(-1)),
                       ConstArray(f"wh_{gate}", "float", wh.data.astype(np.float32).reshape(-1)),
                       ConstArray(f"b_{gate}", "float", b.data.astype(np.float32).reshape(-1))]
        params["cell_clip"] = cell_clip
        return Kernel(op, "unidirectional_sequence_lstm.c.j2", params, [x.index, h.index, c.index],
                      [y.index], consts, scratch_bytes=4 * 4 * step_batch * n_state,
                      mutable_inputs=(1, 2))

    acc = "int32" if x.dtype == "int8" else "int64"
    bias_type = "int32" if x.dtype == "int8" else "int64"
    check_dtype(op, c, ("int16",))
    for wx, wh, b in weights.values():
        for w in (wx, wh):
            check_dtype(op, w, ("int8",))
            if w.quant is None or w.quant.per_channel or w.quant.zero_point[0] != 0:
                raise unsupported(op, f"weights '{w.name}' must be quantized per tensor, "
                                      "symmetric, as TFLM's LSTM takes them")
        check_dtype(op, b, (bias_type,))
    _, xzp = per_tensor(op, x)
    hs, hzp = per_tensor(op, h)
    cs, _ = per_tensor(op, c)
    if x.dtype == "int16" and (xzp or hzp):
        raise unsupported(op, f"int16 input '{x.name}' and hidden state '{h.name}' need zero "
                              "point 0")
    # on the DSP extension, the int8 gates take the FULLY_CONNECTED DSP kernel's weight layout
    # and SMLAD loop over their first multiple-of-4 inputs, the rest (the tail) one by one:
    # the same integers (the offsets are folded into the biases)
    dsp_x = target.dsp and acc == "int32" and n_in >= 4
    dsp_h = target.dsp and acc == "int32" and n_state >= 4
    params.update(dsp_x=dsp_x, dsp_h=dsp_h)
    params["gates"] = {}
    for gate, (wx, wh, b) in weights.items():
        mx, sx = _fc_multiplier(op, x, wx, acc)
        mh, sh = _fc_multiplier(op, h, wh, acc)
        params["gates"][gate] = {"mx": mx, "sx": sx, "mh": mh, "sh": sh}
        # the input offsets folded into the biases: sum(w * (x + off)) + b is
        # sum(w * x) + (b + off * sum(w)), the same integers with one add less per product
        bx = b.data.astype(np.int64).reshape(-1) - xzp * wx.data.astype(np.int64).sum(axis=1)
        bh = -hzp * wh.data.astype(np.int64).sum(axis=1)
        limit = (1 << 31) if acc == "int32" else (1 << 47)
        if max(np.abs(bx).max(initial=0), np.abs(bh).max(initial=0)) >= limit:
            raise unsupported(op, f"the {gate} gate's bias plus input offsets overflow its "
                                  f"{acc} accumulator")
        consts += [*_layout(f"wx_{gate}", wx.data, dsp_x), *_layout(f"wh_{gate}", wh.data, dsp_h),
                   ConstArray(f"b_{gate}", C_TYPES[bias_type], bx)]
        if hzp:
            consts.append(ConstArray(f"bh_{gate}", C_TYPES[bias_type], bh))
    power, _ = q.log2_rounded(cs)
    tanh_shift = 15 + power - 3
    cell_tanh = (3, -tanh_shift) if tanh_shift < 0 else (3 << tanh_shift, 0)
    fm, fs = q.quantize_multiplier(ACT_SCALE * float(np.float32(cs)) / float(np.float32(cs)))
    im, is_ = q.quantize_multiplier(ACT_SCALE * ACT_SCALE / float(np.float32(cs)))
    om, os_ = q.quantize_multiplier(ACT_SCALE * ACT_SCALE / float(np.float32(hs)))
    lo, hi = quantized_range(h)
    clip = int(np.trunc(min(max(float(np.float32(cell_clip)) / float(np.float32(cs)), -32768.0),
                            32767.0)))
    params.update(acc=acc, h_zp=hzp, h_min=lo, h_max=hi,
                  h_ctype=C_TYPES[h.dtype], x_ctype=C_TYPES[x.dtype], tanh_m=cell_tanh[0],
                  tanh_s=cell_tanh[1], fm=fm, fs=fs, im=im, is_=is_, om=om, os_=os_,
                  cell_clip=clip)
    template = "unidirectional_sequence_lstm.dsp.c.j2" if dsp_x or dsp_h else \
        "unidirectional_sequence_lstm.c.j2"
    headers: tuple[str, ...] = ("sigmoid.h.j2",) + (("int16.h.j2",) if acc == "int64" else ())
    return Kernel(op, template, params, [x.index, h.index, c.index], [y.index], consts,
                  scratch_bytes=4 * 2 * step_batch * n_state, mutable_inputs=(1, 2),
                  headers=headers)


def _layout(suffix: str, w: np.ndarray, dsp: bool) -> list[ConstArray]:
    """Row-major int8 weights; for the DSP kernel its pair-interleaved order of the first
    multiple-of-4 columns, and the remaining columns (``<suffix>t``) row-major."""
    if not dsp:
        return [ConstArray(suffix, "int8_t", w.astype(np.int8).reshape(-1))]
    k4 = w.shape[1] - w.shape[1] % 4
    out = [ConstArray(suffix, "int8_t", _dsp.interleave_pairs(w[:, :k4]))]
    if k4 < w.shape[1]:
        out.append(ConstArray(f"{suffix}t", "int8_t", w[:, k4:].astype(np.int8).reshape(-1)))
    return out

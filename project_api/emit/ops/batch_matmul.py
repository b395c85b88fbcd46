"""BATCH_MATMUL: ``lhs @ rhs`` over broadcast batch dimensions (ranks 2 to 5), ``adj_x`` /
``adj_y`` transposing the last two dimensions of an operand first; float32, int8 (per-tensor
scales, any zero points) and int16 (zero points 0, an int64 accumulator), as TFLM's
``batch_matmul.cc`` and its reference ``BatchMatMul`` compute them. No fused activation; the
requantization multiplier is ``scale_lhs * scale_rhs / scale_out`` with each float32 scale
widened to double first, as the TFLM that the tests run computes it (a product that is a power
of two in float32 need not be one in double, and the int64 requantization of int16 then rounds
differently).

The operands are read in place through strides (TFLM first copies a transposed operand): an
``adj_x`` left-hand side is read column-wise. Each output sums over the depth in order from 0,
as TFLM, so float32 is TFLM's bit for bit.

**A constant right-hand side** (the weights of a matmul layer) is laid out at emit time as
FULLY_CONNECTED lays out its weights, ``w[rhs batch][out column][depth]`` (contiguous over the
depth), with int8 zero points folded into a per-column ``b`` (``-zp_lhs * sum(w)``; an rhs zero
point is folded into ``w`` itself, which is then int16): each output is then ``b[c] + dot(lhs
row, w[c])``, FULLY_CONNECTED's inner loop. :func:`fc_layout` is that layout, for kernels that
reuse FULLY_CONNECTED's (DSP targets).
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator, Tensor

from .. import quantize as q
from ..target import GENERIC, Target
from .common import (
    C_TYPES,
    ConstArray,
    Kernel,
    OpSpec,
    check_counts,
    check_dtype,
    per_tensor,
    quantized_range,
    tensor_in,
    tensor_out,
    unsupported,
)

SPEC = OpSpec(opcodes=("BATCH_MATMUL",), schemes=("float32", "int8", "int16x8"))

#: TFLM's ranks of the operands.
MIN_RANK, MAX_RANK = 2, 5
#: TFLM's int64 requantization takes accumulators within +-2^47.
INT64_ACC_LIMIT = 1 << 47


def _matrix(t: Tensor, adj: bool) -> tuple[int, int, int, int]:
    """(rows, cols, row stride, col stride) of ``t``'s matrices as the product reads them."""
    r, c = t.shape[-2], t.shape[-1]
    return (c, r, 1, c) if adj else (r, c, c, 1)


def geometry(op: Operator, lhs: Tensor, rhs: Tensor, y: Tensor) -> dict:
    """Matrix sizes, strides and the broadcast batch loops of a BATCH_MATMUL node."""
    for t in (lhs, rhs):
        if not MIN_RANK <= len(t.shape) <= MAX_RANK:
            raise unsupported(op, f"'{t.name}' has rank {len(t.shape)}; TFLM takes ranks "
                                  f"{MIN_RANK} to {MAX_RANK}")
    adj_x, adj_y = bool(op.options.get("adj_x")), bool(op.options.get("adj_y"))
    a, depth, la, lb = _matrix(lhs, adj_x)
    depth_r, c, rb, rc = _matrix(rhs, adj_y)
    if depth != depth_r:
        raise unsupported(op, f"'{lhs.name}' {list(lhs.shape)} and '{rhs.name}' "
                              f"{list(rhs.shape)} do not multiply (adj_x={adj_x}, "
                              f"adj_y={adj_y})")
    rank = max(len(lhs.shape), len(rhs.shape))
    lb_dims = (1,) * (rank - len(lhs.shape)) + tuple(lhs.shape[:-2])
    rb_dims = (1,) * (rank - len(rhs.shape)) + tuple(rhs.shape[:-2])
    batch, loops = [], []
    l_acc, r_acc = a * depth, depth * c
    l_strides, r_strides = [], []
    for dl, dr in zip(reversed(lb_dims), reversed(rb_dims), strict=True):
        if dl != dr and 1 not in (dl, dr):
            raise unsupported(op, f"batch dimensions of '{lhs.name}' {list(lhs.shape)} and "
                                  f"'{rhs.name}' {list(rhs.shape)} do not broadcast")
        l_strides.append(0 if dl == 1 else l_acc)
        r_strides.append(0 if dr == 1 else r_acc)
        l_acc *= dl
        r_acc *= dr
        batch.append(max(dl, dr))
    batch.reverse()
    l_strides.reverse()
    r_strides.reverse()
    for size, ls, rs in zip(batch, l_strides, r_strides, strict=True):
        if size > 1:
            loops.append([size, ls, rs])
    expected = [*batch, a, c]
    if list(y.shape) != expected:
        raise unsupported(op, f"output '{y.name}' has shape {list(y.shape)}, expected "
                              f"{expected}")
    return {"a": a, "depth": depth, "c": c, "la": la, "lb": lb, "rb": rb, "rc": rc,
            "loops": loops, "rhs_batches": int(np.prod(rb_dims)) if rb_dims else 1}


def fc_layout(rhs: np.ndarray, g: dict) -> np.ndarray:
    """A constant right-hand side as ``[rhs batch][column][depth]`` (FULLY_CONNECTED's
    ``[out_ch][depth]`` per batch), from its stored ``[..., depth, c]`` (or, ``adj_y``,
    ``[..., c, depth]``) values."""
    m = rhs.reshape(g["rhs_batches"], *rhs.shape[-2:])
    if g["rb"] != 1:  # stored [depth][c]: transpose each matrix
        m = m.transpose(0, 2, 1)
    return np.ascontiguousarray(m)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (2,))
    lhs = tensor_in(graph, op, 0)
    rhs = tensor_in(graph, op, 1)
    y = tensor_out(graph, op)
    if lhs.is_const and rhs.is_const:
        raise unsupported(op, "both inputs are constants (fold them before export)")
    check_dtype(op, lhs, ("float32", "int8", "int16"))
    if rhs.dtype != lhs.dtype or y.dtype != lhs.dtype:
        raise unsupported(op, f"'{lhs.name}' ({lhs.dtype}), '{rhs.name}' ({rhs.dtype}) and the "
                              f"output '{y.name}' ({y.dtype}) must have one type (TFLM takes no "
                              "hybrid or int32-output BATCH_MATMUL)")
    g = geometry(op, lhs, rhs, y)
    params = dict(g, dtype=lhs.dtype, T=C_TYPES[lhs.dtype], l_off=0, r_off=0, fold=False,
                  wtype=C_TYPES[lhs.dtype])
    if lhs.dtype != "float32":
        for t in (lhs, rhs, y):
            if t.quant is not None and t.quant.per_channel:
                raise unsupported(op, f"'{t.name}' is quantized per channel; TFLM's "
                                      "BATCH_MATMUL takes one scale per tensor")
        (sl, zl), (sr, zr), (so, zo) = (per_tensor(op, t) for t in (lhs, rhs, y))
        if lhs.dtype == "int16" and (zl, zr, zo) != (0, 0, 0):
            raise unsupported(op, f"int16 zero points {zl}, {zr}, {zo} of '{lhs.name}', "
                                  f"'{rhs.name}', '{y.name}' must be 0, as TFLM requires")
        m, s = q.conv_multiplier(sl, sr, so)
        lo, hi = quantized_range(y)
        params.update(mult=m, shift=s, out_zp=zo, qmin=lo, qmax=hi, l_off=-zl, r_off=-zr)
        if lhs.dtype == "int16":
            bound = g["depth"] * 32768 * 32768
            if bound >= INT64_ACC_LIMIT:
                raise unsupported(op, f"a depth of {g['depth']} can take the int64 accumulator "
                                      "beyond TFLM's +-2^47")
            if s > 7:
                raise unsupported(op, "a requantization multiplier of 2^8 or more is outside "
                                      "TFLM's int64 requantization (its shift is at most 7)")
            params["reduced"], params["total_shift"] = q.reduced_multiplier(m, s)
    inputs, consts = [], []
    if lhs.is_const:
        consts.append(ConstArray("l", C_TYPES[lhs.dtype], lhs.data.reshape(-1)))
        params["l_src"] = None
    else:
        params["l_src"] = f"in{len(inputs)}"
        inputs.append(lhs.index)
    if rhs.is_const:
        consts += _constant_rhs(op, rhs, params)
        params["r_src"] = None
    else:
        params["r_src"] = f"in{len(inputs)}"
        inputs.append(rhs.index)
    headers = ("int16.h.j2",) if lhs.dtype == "int16" else ()
    return Kernel(op, "batch_matmul.c.j2", params, inputs, [y.index], consts, headers=headers)


def _constant_rhs(op: Operator, rhs: Tensor, params: dict) -> list[ConstArray]:
    """The constant right-hand side in FULLY_CONNECTED's layout (:func:`fc_layout`; each matrix
    keeps its size, so the batch strides hold), its strides set to match; int8: the zero
    points folded into ``w`` (``r - zp_rhs``: int8 when that zero point is 0, else int16) and
    the per-column ``b`` (``-zp_lhs * sum(w)``, its batch strides ``rs / depth``)."""
    w = fc_layout(rhs.data, params)
    params.update(rb=1, rc=params["depth"])
    params["loops"] = [[size, ls, rs, rs // params["depth"]]
                       for size, ls, rs, *_ in params["loops"]]
    if params["dtype"] == "float32":
        return [ConstArray("w", "float", w.astype(np.float32))]
    if params["dtype"] == "int16":
        return [ConstArray("w", "int16_t", w.astype(np.int16))]
    wi = w.astype(np.int64) + params["r_off"]
    bias = params["l_off"] * wi.sum(axis=2)
    if np.abs(bias).max(initial=0) + 128 * np.abs(wi).sum(axis=2).max(initial=0) >= 1 << 31:
        raise unsupported(op, f"constant '{rhs.name}' and the zero points can take the int32 "
                              "accumulator beyond its range")
    wtype = "int8_t" if -128 <= wi.min() and wi.max() <= 127 else "int16_t"
    params.update(fold=True, r_off=0, wtype=wtype)
    return [ConstArray("w", wtype, wi), ConstArray("b", "int32_t", bias.astype(np.int32))]

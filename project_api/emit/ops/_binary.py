"""Shared preparation of the elementwise binary ops (ADD, MUL, SUB, DIV, SQUARED_DIFFERENCE,
MAXIMUM, MINIMUM, PRELU): shapes and broadcasting, operand types, constant operands."""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator, Tensor

from .. import quantize as q
from .common import (
    C_TYPES,
    ConstArray,
    check_activation,
    check_counts,
    check_dtype,
    per_tensor,
    quantized_range,
    tensor_in,
    tensor_out,
    unsupported,
)

MAX_RANK = 6


def broadcast(op: Operator, a: Tensor, b: Tensor, y: Tensor) -> dict:
    """Output dims and per-input element strides (0 on broadcast dims), NumPy/TFLite rules."""
    rank = max(len(a.shape), len(b.shape), 1)
    if rank > MAX_RANK:
        raise unsupported(op, f"rank {rank} broadcasting not supported (max {MAX_RANK})")
    sa = (1,) * (rank - len(a.shape)) + tuple(a.shape)
    sb = (1,) * (rank - len(b.shape)) + tuple(b.shape)
    dims = []
    for da, db in zip(sa, sb, strict=True):
        if da != db and 1 not in (da, db):
            raise unsupported(op, f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast")
        dims.append(max(da, db))
    if int(np.prod(dims)) != y.num_elements:
        raise unsupported(op, f"output '{y.name}' shape {list(y.shape)} does not match the "
                              f"broadcast shape {dims}")

    def strides(shape: tuple[int, ...]) -> list[int]:
        st, acc = [0] * rank, 1
        for i in range(rank - 1, -1, -1):
            st[i] = 0 if shape[i] == 1 and dims[i] != 1 else acc
            acc *= shape[i]
        return st

    return {"rank": rank, "dims": dims, "sa": strides(sa), "sb": strides(sb),
            "flat": sa == sb, "size": int(np.prod(dims))}


def operands(op: Operator, graph: Graph,
             dtypes: tuple[str, ...] = ("int8", "int16", "float32"),
             same_types: bool = True) -> tuple[Tensor, Tensor, Tensor, str, dict, list, list]:
    """(a, b, y, activation, params, activation inputs, constant arrays) of a binary op whose
    inputs are of ``dtypes`` (and, with ``same_types``, of the output's type)."""
    check_counts(op, (2,))
    a = tensor_in(graph, op, 0)
    b = tensor_in(graph, op, 1)
    y = tensor_out(graph, op)
    act = check_activation(op)
    if a.is_const and b.is_const:
        raise unsupported(op, "both inputs are constants (fold them before export)")
    for t in (a, b):
        check_dtype(op, t, dtypes)
    if same_types and not (a.dtype == b.dtype == y.dtype):
        raise unsupported(op, f"mixed types {a.dtype}, {b.dtype} -> {y.dtype}")
    params = broadcast(op, a, b, y)
    params["dtype"] = y.dtype
    params["T"] = C_TYPES[y.dtype]
    inputs, consts = [], []
    for key, t in (("a", a), ("b", b)):
        if t.is_const:
            consts.append(ConstArray(key, C_TYPES[t.dtype], t.data.reshape(-1)))
            params[f"{key}_src"] = None
        else:
            params[f"{key}_src"] = f"in{len(inputs)}"
            inputs.append(t.index)
    return a, b, y, act, params, inputs, consts


def rescaled_sum_params(op: Operator, a: Tensor, b: Tensor, y: Tensor, act: str) -> dict:
    """The kernel parameters of an int8/int16 ADD or SUB as TFLM computes them: both inputs
    shifted left (20 bits, int16 15) and rescaled to twice the larger input scale, combined,
    then requantized to the output and clamped to the fused activation."""
    sa, za = per_tensor(op, a)
    sb, zb = per_tensor(op, b)
    so, zo = per_tensor(op, y)
    left_shift = 20 if y.dtype == "int8" else 15
    twice_max = 2 * max(q.f32(sa), q.f32(sb))
    try:
        m1, s1 = q.quantize_multiplier_smaller_than_one(q.f32(sa) / twice_max)
        m2, s2 = q.quantize_multiplier_smaller_than_one(q.f32(sb) / twice_max)
        mo, sho = q.quantize_multiplier_smaller_than_one(
            twice_max / ((1 << left_shift) * q.f32(so)))
    except ValueError as e:
        raise unsupported(op, f"scales cannot be requantized: {e}") from None
    lo, hi = q.activation_range_quantized(act, so, zo, *quantized_range(y))
    return {"a_off": -za, "b_off": -zb, "left_shift": left_shift, "m1": m1, "s1": s1,
            "m2": m2, "s2": s2, "mo": mo, "so": sho, "out_zp": zo, "act_min": lo,
            "act_max": hi}

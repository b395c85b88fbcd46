"""Shared preparation of the comparisons (EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER,
GREATER_EQUAL; TFLM's ``comparisons.cc``): two operands of one type, broadcast (numpy rules,
:func:`._binary.broadcast`), a bool output.

float32, int32, int64 and bool compare the values. int8 compares, as TFLM, each operand
rescaled on its own: ``(q - zero_point) * 2^8`` times its scale (a multiplier smaller than one,
``QuantizeMultiplierSmallerThanOneExp``: scales of 1 or more TFLM cannot take), so operands of
different scales compare by their real values up to that fixed-point precision.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator, Tensor

from .. import quantize as q
from ._binary import broadcast
from .common import (
    C_TYPES,
    ConstArray,
    Kernel,
    check_counts,
    check_dtype,
    per_tensor,
    tensor_in,
    tensor_out,
    unsupported,
)

#: The C operator of each comparison.
OPERATORS = {"EQUAL": "==", "NOT_EQUAL": "!=", "LESS": "<", "LESS_EQUAL": "<=", "GREATER": ">",
             "GREATER_EQUAL": ">="}
#: TFLM's left shift of int8 operands before rescaling.
LEFT_SHIFT = 8


def _rescale(op: Operator, t: Tensor) -> tuple[int, int, int]:
    """(offset, multiplier, shift) of an int8 operand: TFLM's rescaling by its scale."""
    scale, zp = per_tensor(op, t)
    try:
        m, s = q.quantize_multiplier_smaller_than_one(q.f32(scale))
    except ValueError:
        m, s = 0, 1
    if s > 0 or m == 0:
        raise unsupported(op, f"int8 operand '{t.name}' has scale {scale}; TFLM rescales each "
                              "operand by its scale as a multiplier in (0, 1), so it takes "
                              "scales below 1 only")
    return -zp, m, s


def prepare_comparison(op: Operator, graph: Graph, types: tuple[str, ...]) -> Kernel:
    """The kernel of comparison ``op`` on operands of one of ``types``."""
    check_counts(op, (2,))
    a = tensor_in(graph, op, 0)
    b = tensor_in(graph, op, 1)
    y = tensor_out(graph, op)
    if a.is_const and b.is_const:
        raise unsupported(op, "both inputs are constants (fold them before export)")
    check_dtype(op, a, types)
    if b.dtype != a.dtype:
        raise unsupported(op, f"operands '{a.name}' ({a.dtype}) and '{b.name}' ({b.dtype}) "
                              "differ in type")
    if y.dtype != "bool":
        raise unsupported(op, f"output '{y.name}' is {y.dtype}; a comparison writes bool")
    params = broadcast(op, a, b, y)
    params.update(T=C_TYPES[a.dtype], op=OPERATORS[op.opcode], scaled=a.dtype == "int8")
    if a.dtype == "int8":
        for key, t in (("a", a), ("b", b)):
            off, m, s = _rescale(op, t)
            params.update({f"{key}_off": off, f"{key}_m": m, f"{key}_s": s})
        params["left_shift"] = LEFT_SHIFT
    inputs, consts = [], []
    for key, t in (("a", a), ("b", b)):
        if t.is_const:
            consts.append(ConstArray(key, C_TYPES[t.dtype], t.data.reshape(-1)))
            params[f"{key}_src"] = None
        else:
            params[f"{key}_src"] = f"in{len(inputs)}"
            inputs.append(t.index)
    return Kernel(op, "compare.c.j2", params, inputs, [y.index], consts)

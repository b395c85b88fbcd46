"""LOGICAL_AND, LOGICAL_OR (with broadcasting) and LOGICAL_NOT on bool tensors (TFLM's
``logical.cc`` and ``elementwise.cc``). TFLM's AND/OR read any input as bool without checking;
the types are bool in every model TFLite writes, and anything else is refused here."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._binary import broadcast
from .common import (
    ConstArray,
    Kernel,
    OpSpec,
    check_counts,
    check_dtype,
    dtype_scheme,
    tensor_in,
    tensor_out,
    unsupported,
)

SPEC = OpSpec(opcodes=("LOGICAL_AND", "LOGICAL_OR", "LOGICAL_NOT"), schemes=("bool",),
              classify=dtype_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    unary = op.opcode == "LOGICAL_NOT"
    check_counts(op, (1,) if unary else (2,))
    y = tensor_out(graph, op)
    check_dtype(op, y, ("bool",))
    if unary:
        x = tensor_in(graph, op, 0, const=False)
        check_dtype(op, x, ("bool",))
        if x.shape != y.shape:
            raise unsupported(op, f"output '{y.name}' {list(y.shape)} differs from input "
                                  f"'{x.name}' {list(x.shape)}")
        return Kernel(op, "logical.c.j2", {"unary": True, "size": x.num_elements},
                      [x.index], [y.index])
    a = tensor_in(graph, op, 0)
    b = tensor_in(graph, op, 1)
    if a.is_const and b.is_const:
        raise unsupported(op, "both inputs are constants (fold them before export)")
    for t in (a, b):
        check_dtype(op, t, ("bool",))
    params = broadcast(op, a, b, y)
    params.update(unary=False, op="&&" if op.opcode == "LOGICAL_AND" else "||")
    inputs, consts = [], []
    for key, t in (("a", a), ("b", b)):
        if t.is_const:
            consts.append(ConstArray(key, "uint8_t", t.data.reshape(-1)))
            params[f"{key}_src"] = None
        else:
            params[f"{key}_src"] = f"in{len(inputs)}"
            inputs.append(t.index)
    return Kernel(op, "logical.c.j2", params, inputs, [y.index], consts)

"""SELECT_V2: ``x`` where the bool ``condition`` is true, else ``y``, the three broadcast
together (numpy rules; TFLM's ``select.cc``), for float32, int8 and int16 values (TFLM refuses
the other types). Values are moved as stored: like TFLM, the output is not requantized, so
``x``, ``y`` and the output share one quantization in the models TFLite writes."""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator, Tensor

from ..target import GENERIC, Target
from .common import (
    C_TYPES,
    ConstArray,
    Kernel,
    OpSpec,
    check_counts,
    check_dtype,
    tensor_in,
    tensor_out,
    unsupported,
)

#: TFLM's limit on the rank of a broadcast select.
MAX_RANK = 8


def classify(op: Operator, graph: Graph) -> tuple[str, str]:
    """The scheme of a SELECT_V2 node: the element type of ``x`` (input 1)."""
    if len(op.inputs) < 2 or op.inputs[1] < 0:
        return "none", "the node lacks its input x"
    x = graph.tensor(op.inputs[1])
    return x.dtype, f"input 1 '{x.name}' is {x.dtype}"


SPEC = OpSpec(opcodes=("SELECT_V2",), schemes=("float32", "int8", "int16"), classify=classify)


def broadcast3(op: Operator, tensors: list[Tensor], y: Tensor) -> dict:
    """Output dims and each operand's element strides (0 on its broadcast dims)."""
    rank = max(max(len(t.shape) for t in tensors), 1)
    if rank > MAX_RANK:
        raise unsupported(op, f"rank {rank} is above TFLM's {MAX_RANK}")
    shapes = [(1,) * (rank - len(t.shape)) + tuple(t.shape) for t in tensors]
    dims = []
    for ds in zip(*shapes, strict=True):
        big = max(ds)
        if any(d not in (1, big) for d in ds):
            raise unsupported(op, "shapes " + ", ".join(str(list(t.shape)) for t in tensors)
                              + " do not broadcast")
        dims.append(big)
    scalars = int(np.prod(dims)) == y.num_elements == 1  # TFLM's mixed scalar shapes
    if tuple(y.shape) != tuple(dims) and not scalars:
        raise unsupported(op, f"output '{y.name}' shape {list(y.shape)} is not the broadcast "
                              f"shape {dims}")

    def strides(shape: tuple[int, ...]) -> list[int]:
        st, acc = [0] * rank, 1
        for i in range(rank - 1, -1, -1):
            st[i] = 0 if shape[i] == 1 and dims[i] != 1 else acc
            acc *= shape[i]
        return st

    return {"rank": rank, "dims": dims, "strides": [strides(s) for s in shapes],
            "flat": all(s == shapes[0] for s in shapes), "size": int(np.prod(dims))}


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (3,))
    cond, x, yv = (tensor_in(graph, op, i) for i in range(3))
    out = tensor_out(graph, op)
    check_dtype(op, cond, ("bool",))
    check_dtype(op, x, ("float32", "int8", "int16"))
    if yv.dtype != x.dtype or out.dtype != x.dtype:
        raise unsupported(op, f"x '{x.name}' ({x.dtype}), y '{yv.name}' ({yv.dtype}) and the "
                              f"output '{out.name}' ({out.dtype}) must have one type")
    if cond.is_const and x.is_const and yv.is_const:
        raise unsupported(op, "all inputs are constants (fold them before export)")
    params = broadcast3(op, [cond, x, yv], out)
    params["T"] = C_TYPES[x.dtype]
    inputs, consts, srcs = [], [], []
    for key, t in (("c", cond), ("x", x), ("y", yv)):
        if t.is_const:
            consts.append(ConstArray(key, C_TYPES[t.dtype], t.data.reshape(-1)))
            srcs.append(None)
        else:
            srcs.append(f"in{len(inputs)}")
            inputs.append(t.index)
    params["srcs"] = srcs
    return Kernel(op, "select_v2.c.j2", params, inputs, [out.index], consts)

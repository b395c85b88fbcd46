"""EXPAND_DIMS: no code, a view. The output aliases the input (TFLM copies the elements).

The axis is a constant int32 tensor of one element (negative: from the end, ``-1`` appends), as
TFLM requires; the output tensor's static shape must be the input's with a 1 inserted there.
TFLM's kernel takes float32, int8 and int16.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._view import view_kernel
from .common import (
    Kernel,
    OpSpec,
    check_counts,
    check_dtype,
    dtype_scheme,
    tensor_in,
    tensor_out,
    unsupported,
)

SPEC = OpSpec(opcodes=("EXPAND_DIMS",), schemes=("float32", "int8", "int16"), view=True,
              classify=dtype_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (2,))
    x = tensor_in(graph, op, 0, const=False)
    axis_t = tensor_in(graph, op, 1, const=True)
    y = tensor_out(graph, op)
    check_dtype(op, axis_t, ("int32",))
    if axis_t.num_elements != 1 or len(axis_t.shape) > 1:
        raise unsupported(op, f"axis '{axis_t.name}' must hold one value, shape "
                              f"{list(axis_t.shape)}")
    axis = int(axis_t.data.reshape(-1)[0])
    rank = len(x.shape)
    at = axis + rank + 1 if axis < 0 else axis
    if not 0 <= at <= rank:
        raise unsupported(op, f"axis {axis} is out of range for '{x.name}' of rank {rank}")
    expected = [*x.shape[:at], 1, *x.shape[at:]]
    if list(y.shape) != expected:
        raise unsupported(op, f"output '{y.name}' has shape {list(y.shape)}; expanding "
                              f"{list(x.shape)} at axis {axis} gives {expected}")
    return view_kernel(op, graph)

"""ARG_MAX and ARG_MIN: float32 and int8 inputs, int32 output (TFLM's ``arg_min_max.cc``).

Along the constant axis, the first element is the candidate and a later one replaces it only
when strictly greater (less), so ties keep the lowest index and a NaN never wins, as TFLM's
``GreaterFn``/``LessFn``. TFLM's kernel writes int32 only: an int64 output (the converter's
default ``output_type``) is refused, as TFLM refuses it at its first invocation; int16 and the
other input types it refuses too.
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from .common import (
    C_TYPES,
    Kernel,
    OpSpec,
    check_counts,
    check_dtype,
    dtype_scheme,
    tensor_in,
    tensor_out,
    unsupported,
)

SPEC = OpSpec(opcodes=("ARG_MAX", "ARG_MIN"), schemes=("float32", "int8"), classify=dtype_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (2,))
    x = tensor_in(graph, op, 0, const=False)
    axis_t = tensor_in(graph, op, 1, const=True)
    y = tensor_out(graph, op)
    check_dtype(op, x, ("float32", "int8"))
    if axis_t.dtype != "int32" or axis_t.num_elements != 1:
        raise unsupported(op, f"axis '{axis_t.name}' must be one int32 value (TFLM takes int32), "
                              f"it is {axis_t.dtype} {list(axis_t.shape)}")
    if y.dtype != "int32":
        raise unsupported(op, f"output '{y.name}' is {y.dtype}; TFLM's {op.opcode} writes int32 "
                              "only (convert with output_type=tf.int32)")
    rank = len(x.shape)
    a = int(np.asarray(axis_t.data).reshape(-1)[0])
    axis = a + rank if a < 0 else a
    if not 0 <= axis < rank:
        raise unsupported(op, f"axis {a} is out of range for '{x.name}' of rank {rank}")
    expected = [d for i, d in enumerate(x.shape) if i != axis]
    if list(y.shape) != expected:
        raise unsupported(op, f"output '{y.name}' has shape {list(y.shape)}, expected {expected}")
    params = {"outer": int(np.prod(x.shape[:axis])), "size": x.shape[axis],
              "inner": int(np.prod(x.shape[axis + 1:])), "T": C_TYPES[x.dtype],
              "cmp": ">" if op.opcode == "ARG_MAX" else "<"}
    if params["size"] < 1:
        raise unsupported(op, f"axis {a} of '{x.name}' is empty")
    return Kernel(op, "arg_min_max.c.j2", params, [x.index], [y.index])

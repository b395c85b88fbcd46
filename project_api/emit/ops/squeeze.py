"""SQUEEZE: no code, a view. The output aliases the input (TFLM copies the bytes).

``squeeze_dims`` (negative counts from the end) must name size-1 dimensions; empty, every
size-1 dimension goes. The output tensor's static shape must be the result.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._view import VIEW_SCHEMES, view_kernel
from .common import Kernel, OpSpec, check_counts, dtype_scheme, tensor_in, tensor_out, unsupported

SPEC = OpSpec(opcodes=("SQUEEZE",), schemes=VIEW_SCHEMES, view=True, classify=dtype_scheme)

#: TFLM's limit on the input rank.
MAX_RANK = 8


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (1,))
    x = tensor_in(graph, op, 0, const=False)
    y = tensor_out(graph, op)
    rank = len(x.shape)
    if rank > MAX_RANK:
        raise unsupported(op, f"input '{x.name}' has rank {rank}; at most {MAX_RANK}")
    dims = op.options.get("squeeze_dims") or []
    if dims:
        axes = set()
        for d in dims:
            a = d + rank if d < 0 else d
            if not 0 <= a < rank or x.shape[a] != 1:
                raise unsupported(op, f"squeeze_dims {list(dims)}: dimension {d} of '{x.name}' "
                                      f"{list(x.shape)} is not of size 1")
            axes.add(a)
    else:
        axes = {a for a, n in enumerate(x.shape) if n == 1}
    expected = [n for a, n in enumerate(x.shape) if a not in axes]
    if list(y.shape) != expected:
        raise unsupported(op, f"output '{y.name}' has shape {list(y.shape)}; squeezing "
                              f"{list(x.shape)} gives {expected}")
    return view_kernel(op, graph)

"""RESHAPE: no code. The output aliases the input's storage (the planner gives both one buffer).

A copy is emitted only when both tensors are the caller's buffers (a graph input reshaped
straight into a graph output); the code generator decides that, not this module.
"""

from __future__ import annotations

from ..graph import Graph, Operator
from .common import Kernel, check_counts, check_same_type, tensor_in, tensor_out, unsupported


def prepare(op: Operator, graph: Graph) -> Kernel:
    check_counts(op, (1, 2))
    x = tensor_in(graph, op, 0, const=False)
    y = tensor_out(graph, op)
    check_same_type(op, x, y)
    if x.num_elements != y.num_elements:
        raise unsupported(op, f"reshape from {list(x.shape)} to {list(y.shape)} changes the "
                              "element count")
    return Kernel(op, "reshape.c.j2", {"size_bytes": x.size_bytes}, [x.index], [y.index],
                  alias=True)

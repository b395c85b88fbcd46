"""Shared preparation of the view ops: operators whose output is a byte-identical view of their
input (RESHAPE, SQUEEZE, EXPAND_DIMS, ...). They declare ``view=True``; their kernel emits no
code, the output aliases the input's storage (the code generator gives both one buffer and
copies only between two caller buffers, with ``copy.c.j2``)."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .common import Kernel, check_same_type, tensor_in, tensor_out, unsupported

#: The element types a view op moves (any the graph's I/O and the tests can carry).
VIEW_SCHEMES = ("float32", "int8", "int16", "int32", "bool")


def view_kernel(op: Operator, graph: Graph) -> Kernel:
    """The aliasing kernel of a view op (input 0 -> output 0): same type, same element
    count. The caller has checked the op's own attributes against the shapes."""
    x = tensor_in(graph, op, 0, const=False)
    y = tensor_out(graph, op)
    check_same_type(op, x, y)
    if x.num_elements != y.num_elements:
        raise unsupported(op, f"'{y.name}' {list(y.shape)} has {y.num_elements} elements, "
                              f"'{x.name}' {list(x.shape)} has {x.num_elements}")
    return Kernel(op, "copy.c.j2", {"size_bytes": x.size_bytes}, [x.index], [y.index],
                  alias=True)

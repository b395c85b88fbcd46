"""READ_VARIABLE, as TFLM's ``read_variable.cc``: the variable's bytes (its slot of the state
region, see ``_resource.py``) copied to the output."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._resource import VALUE_TYPES, resource_input, value_scheme
from .common import Kernel, OpSpec, check_counts, tensor_out

SPEC = OpSpec(opcodes=("READ_VARIABLE",), schemes=VALUE_TYPES, classify=value_scheme,
              state=True)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (1,))
    y = tensor_out(graph, op)
    return Kernel(op, "read_variable.c.j2", {"size_bytes": y.size_bytes},
                  [resource_input(op, graph)], [y.index])

"""ASSIGN_VARIABLE, as TFLM's ``assign_variable.cc``: the value (an activation or a constant)
copied into the variable's bytes (its slot of the state region, see ``_resource.py``)."""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._resource import VALUE_TYPES, resource_input, value_scheme
from .common import C_TYPES, ConstArray, Kernel, OpSpec, check_counts, unsupported

SPEC = OpSpec(opcodes=("ASSIGN_VARIABLE",), schemes=VALUE_TYPES, classify=value_scheme,
              state=True)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (2,), 0)
    resource = resource_input(op, graph)
    if op.inputs[1] < 0:
        raise unsupported(op, "input 1 (the value) is missing")
    x = graph.tensor(op.inputs[1])
    params = {"size_bytes": x.size_bytes, "const": x.is_const}
    if x.is_const:
        values = np.asarray(x.data).reshape(-1)
        return Kernel(op, "assign_variable.c.j2", params, [resource], [],
                      [ConstArray("value", C_TYPES[x.dtype], values)], mutable_inputs=(0,))
    return Kernel(op, "assign_variable.c.j2", params, [resource, x.index], [],
                  mutable_inputs=(0,))

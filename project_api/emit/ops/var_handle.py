"""VAR_HANDLE, as TFLM's ``var_handle.cc``: its resource output names a variable, here a slot of
the state region (see ``_resource.py``). It computes nothing at run time."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from .common import Kernel, OpSpec, check_counts, dtype_scheme, tensor_out, unsupported

SPEC = OpSpec(opcodes=("VAR_HANDLE",), schemes=("resource",), classify=dtype_scheme, state=True)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (0,))
    y = tensor_out(graph, op)
    if y.dtype != "resource":
        raise unsupported(op, f"output '{y.name}' is {y.dtype}, expected a resource")
    return Kernel(op, "", {}, [], [y.index], no_code=True)

"""RESHAPE: no code. The output aliases the input's storage (the planner gives both one buffer).

A copy is emitted only when both tensors are the caller's buffers (a graph input reshaped
straight into a graph output); the code generator decides that, not this module. The new shape
is the output tensor's (static shapes only), whether the model also gives it as a shape tensor
or in the options.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._view import VIEW_SCHEMES, view_kernel
from .common import Kernel, OpSpec, check_counts, dtype_scheme

SPEC = OpSpec(opcodes=("RESHAPE",), schemes=VIEW_SCHEMES, view=True, classify=dtype_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (1, 2))
    return view_kernel(op, graph)

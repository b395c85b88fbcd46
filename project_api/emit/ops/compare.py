"""LESS, LESS_EQUAL, GREATER and GREATER_EQUAL: float32, int32, int64 and int8 (rescaled as
TFLM, :mod:`._compare`), with broadcasting; bool output.

TFLM's GREATER also dispatches int16, but its Prepare computes the rescaling for int8 only, so
int16 operands are compared through parameters it never set (every result false in practice):
int16 is refused here, as are bool and uint8, which TFLM refuses.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._compare import prepare_comparison
from .common import Kernel, OpSpec, dtype_scheme

SCHEMES = ("float32", "int8", "int32", "int64")
SPEC = OpSpec(opcodes=("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL"), schemes=SCHEMES,
              classify=dtype_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    return prepare_comparison(op, graph, SCHEMES)

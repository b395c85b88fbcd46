"""EQUAL and NOT_EQUAL: bool, float32, int32, int64 and int8 (rescaled as TFLM,
:mod:`._compare`), with broadcasting; bool output. TFLM refuses int16 and uint8."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._compare import prepare_comparison
from .common import Kernel, OpSpec, dtype_scheme

SCHEMES = ("bool", "float32", "int8", "int32", "int64")
SPEC = OpSpec(opcodes=("EQUAL", "NOT_EQUAL"), schemes=SCHEMES, classify=dtype_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    return prepare_comparison(op, graph, SCHEMES)

"""MAXIMUM and MINIMUM with broadcasting, as TFLM's ``maximum_minimum.cc``: the stored values
compared as they are (``a > b ? a : b``, ``a < b ? a : b``, NaNs as that comparison takes
them), no requantization, in float32, int8, int16 and int32."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._binary import operands
from .common import Kernel, OpSpec

SPEC = OpSpec(opcodes=("MAXIMUM", "MINIMUM"), schemes=("float32", "int8", "int16x8", "int32"))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    a, b, y, _, params, inputs, consts = operands(op, graph, ("int8", "int16", "int32", "float32"))
    params["cmp"] = ">" if op.opcode == "MAXIMUM" else "<"
    return Kernel(op, "maximum_minimum.c.j2", params, inputs, [y.index], consts)

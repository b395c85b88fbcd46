"""The element-wise math operators TFLM computes in float32 only, each as its TFLM kernel does:
NEG (``-x``), SQRT (``sqrtf``), EXP (``expf``), LOG (``logf``), FLOOR (``floorf``), CEIL
(``ceilf``) and ROUND (half to even, TFLM's ``RoundToNearest`` from ``floorf``). Bit for bit
TFLM's on the same C library (the host's, in the parity tests)."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from .common import Kernel, OpSpec, check_same_type, unary_operands, unsupported

SPEC = OpSpec(opcodes=("NEG", "SQRT", "EXP", "LOG", "FLOOR", "CEIL", "ROUND"),
              schemes=("float32",))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    check_same_type(op, x, y)
    if tuple(x.shape) != tuple(y.shape):
        raise unsupported(op, f"output '{y.name}' shape {list(y.shape)} differs from the "
                              f"input's {list(x.shape)}")
    params = {"size": x.num_elements, "op": op.opcode}
    return Kernel(op, "float_math.c.j2", params, [x.index], [y.index])

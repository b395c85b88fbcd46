"""TANH as TFLM's ``tanh.cc``: float32, int8 and int16 (see ``_sigmoid.py``)."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._sigmoid import prepare_activation
from .common import Kernel, OpSpec

SPEC = OpSpec(opcodes=("TANH",), schemes=("float32", "int8", "int16x8"))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    return prepare_activation(op, graph, "tanh.c.j2")

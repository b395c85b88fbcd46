"""The emitter's intermediate representation: one subgraph of tensors and operators.

A :class:`Graph` is what :mod:`.tflite_reader` produces and what the op modules, the planner
and the code generator consume. It carries only facts from the model; nothing here knows about
C. Constant tensors hold their data as a numpy array in ``data``; activations have ``data is
None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import dtypes

# TFLite TensorType enum value -> (our dtype name, numpy dtype)
TFLITE_TYPES: dict[int, tuple[str, Any]] = {
    0: ("float32", np.float32),
    1: ("float16", np.float16),
    2: ("int32", np.int32),
    3: ("uint8", np.uint8),
    4: ("int64", np.int64),
    6: ("bool", np.bool_),
    7: ("int16", np.int16),
    9: ("int8", np.int8),
    10: ("float64", np.float64),
}



@dataclass
class Quantization:
    """Affine quantization: ``real = scale * (q - zero_point)``, per tensor or per channel."""

    scale: list[float]
    zero_point: list[int]
    axis: int = 0

    @property
    def per_channel(self) -> bool:
        return len(self.scale) > 1


@dataclass
class Tensor:
    """A tensor of the model: an activation (``data is None``) or a constant."""

    index: int
    name: str
    dtype: str
    shape: tuple[int, ...]
    quant: Quantization | None = None
    data: np.ndarray | None = None

    @property
    def num_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def size_bytes(self) -> int:
        return dtypes.parse(self.dtype).size_bytes(self.num_elements)

    @property
    def is_const(self) -> bool:
        return self.data is not None


@dataclass
class Operator:
    """One node: a TFLite builtin operator with its tensor indices (-1 = absent) and options."""

    index: int
    opcode: str
    inputs: list[int]
    outputs: list[int]
    options: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        return f"{self.opcode} (node {self.index})"


@dataclass
class Graph:
    """A single-subgraph model: tensors, operators in execution order, graph inputs/outputs."""

    tensors: list[Tensor]
    operators: list[Operator]
    inputs: list[int]
    outputs: list[int]
    description: str = ""

    def tensor(self, index: int) -> Tensor:
        return self.tensors[index]

"""The emitter's intermediate representation: a model's subgraphs of tensors and operators.

A :class:`Graph` is what :mod:`.tflite_reader` produces and what the op modules, the planner
and the code generator consume: the model's main subgraph (index 0), with every subgraph of the
model in :attr:`Graph.subgraphs` (``IF``/``WHILE``/``CALL_ONCE`` refer to them by index). It
carries only facts from the model; nothing here knows about C. Constant tensors hold their data
as a numpy array in ``data``; activations have ``data is None``. Tensor element types are the
dtype names of :data:`.schema.TENSOR_TYPES` (``float32``, ``int8``, ``int16``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from project_api.archive import dtypes


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
    """A tensor of the model: an activation (``data is None``) or a constant.

    ``is_variable``: the model marks it a variable tensor, state that persists from one
    invocation to the next (RNN/SVDF state, ``VAR_HANDLE`` resources)."""

    index: int
    name: str
    dtype: str
    shape: tuple[int, ...]
    quant: Quantization | None = None
    data: np.ndarray | None = None
    is_variable: bool = False

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
    """One node: an operator with its tensor indices (-1 = absent) and decoded options.

    ``opcode`` is the ``BuiltinOperator`` name (``"CUSTOM"`` for a custom operator, whose name
    is ``custom_code`` and whose raw options are ``custom_options``; ``""`` for a code newer
    than the emitter's schema, kept in ``code``). ``options`` maps every field of the op's
    options table (schema names, e.g. ``fused_activation_function``) to its decoded value,
    defaults filled in; ``options_table`` names the table the model stored (None if none)."""

    index: int
    opcode: str
    inputs: list[int]
    outputs: list[int]
    options: dict[str, Any] = field(default_factory=dict)
    code: int = -1
    custom_code: str | None = None
    custom_options: bytes | None = None
    options_table: str | None = None
    version: int = 1
    intermediates: list[int] = field(default_factory=list)
    mutating_variable_inputs: list[bool] = field(default_factory=list)

    @property
    def name(self) -> str:
        """What messages call the operator: its name, never only its number."""
        if self.opcode == "CUSTOM":
            return f"custom operator {self.custom_code!r}"
        if not self.opcode:
            return f"operator code {self.code} (not in the TFLite schema this emitter knows)"
        return self.opcode

    def describe(self) -> str:
        return f"{self.name} (node {self.index})"


@dataclass
class Graph:
    """One subgraph: tensors, operators in execution order, inputs/outputs; ``subgraphs`` are
    all the model's subgraphs by index (``subgraphs[0]`` is the main one)."""

    tensors: list[Tensor]
    operators: list[Operator]
    inputs: list[int]
    outputs: list[int]
    description: str = ""
    name: str = ""
    index: int = 0
    subgraphs: list[Graph] = field(default_factory=list, repr=False, compare=False)

    def tensor(self, index: int) -> Tensor:
        return self.tensors[index]


#: The options naming the subgraphs each control-flow operator calls.
CALLEE_OPTIONS: dict[str, tuple[str, ...]] = {
    "IF": ("then_subgraph_index", "else_subgraph_index"),
    "WHILE": ("cond_subgraph_index", "body_subgraph_index"),
    "CALL_ONCE": ("init_subgraph_index",),
}


def callees(op: Operator) -> list[int]:
    """The subgraphs ``op`` calls, by index, as its options name them (empty for other ops)."""
    return [int(op.options[k]) for k in CALLEE_OPTIONS.get(op.opcode, ())
            if op.options.get(k) is not None]


def reachable_subgraphs(subgraphs: list[Graph]) -> list[int]:
    """The main subgraph and those its control flow calls, transitively, in index order
    (indices out of range are left to the op modules to refuse)."""
    seen = {0}
    todo = [0]
    while todo:
        for op in subgraphs[todo.pop()].operators:
            for c in callees(op):
                if 0 <= c < len(subgraphs) and c not in seen:
                    seen.add(c)
                    todo.append(c)
    return sorted(seen)

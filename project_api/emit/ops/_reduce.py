"""Shared preparation of the reductions MEAN, SUM, REDUCE_MAX and REDUCE_MIN (TFLM's
``reduce.cc``): the operands, the axes resolved as TFLM's ``ResolveAxis`` does (negative axes
count from the end, repeats count once), the output shape checked against ``keep_dims``, and the
loop nest of ``kernels/reduce.c.j2``.

TFLM walks the input in order and adds each element into its output's slot. The kernel instead
loops over the kept dimensions outside and the reduced ones inside, with one accumulator in a
register: each output still receives its inputs in the same order (its reduced indices in
row-major order), so even float32 sums are TFLM's bit for bit, and no scratch is needed.
Adjacent dimensions of the same kind are merged first, so the loop nest is as shallow as the
reduction allows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from project_api.tflite.graph import Graph, Operator, Tensor

from .common import C_TYPES, check_counts, check_same_type, tensor_in, tensor_out, unsupported


@dataclass
class Reduction:
    """A reduction's operands and geometry."""

    x: Tensor
    y: Tensor
    axes: list[int]  # resolved, each once, in the order the model gives them
    count: int  # input elements per output
    kept: list[tuple[int, int]]  # merged kept dimensions: (size, input stride), outer first
    reduced: list[tuple[int, int]]  # merged reduced dimensions: (size, input stride)

    def params(self) -> dict:
        return {"kept": [list(d) for d in self.kept], "reduced": [list(d) for d in self.reduced],
                "count": self.count, "dtype": self.x.dtype, "T": C_TYPES[self.x.dtype]}


def resolve_axes(op: Operator, x: Tensor, axis: Tensor) -> list[int]:
    """The constant int32 axis tensor of ``op`` resolved against ``x``'s rank."""
    if axis.dtype != "int32":
        raise unsupported(op, f"axis tensor '{axis.name}' is {axis.dtype}; TFLM takes int32")
    rank = len(x.shape)
    axes: list[int] = []
    for a in (int(v) for v in np.asarray(axis.data).reshape(-1)):
        r = a + rank if a < 0 else a
        if not 0 <= r < rank:
            raise unsupported(op, f"axis {a} is out of range for '{x.name}' of rank {rank}")
        if r not in axes:
            axes.append(r)
    return axes


def reduction(op: Operator, graph: Graph) -> Reduction:
    """Operands and geometry of a reduction node: input, constant axes, output."""
    check_counts(op, (2,))
    x = tensor_in(graph, op, 0, const=False)
    axis = tensor_in(graph, op, 1, const=True)
    y = tensor_out(graph, op)
    check_same_type(op, x, y)
    axes = resolve_axes(op, x, axis)
    keep = bool(op.options.get("keep_dims", False))
    expected = [1 if i in axes else d for i, d in enumerate(x.shape) if keep or i not in axes]
    if list(y.shape) != expected:
        raise unsupported(op, f"output '{y.name}' has shape {list(y.shape)}; reducing "
                              f"{list(x.shape)} over axes {sorted(axes)} with keep_dims={keep} "
                              f"gives {expected}")
    if x.num_elements == 0:
        raise unsupported(op, f"input '{x.name}' {list(x.shape)} is empty")
    strides, acc = [0] * len(x.shape), 1
    for i in range(len(x.shape) - 1, -1, -1):
        strides[i] = acc
        acc *= x.shape[i]
    kept: list[tuple[int, int]] = []
    reduced: list[tuple[int, int]] = []
    last_kind = None
    for i, d in enumerate(x.shape):
        if d == 1:
            continue  # a size-1 dimension adds no loop
        kind = i in axes
        group = reduced if kind else kept
        if kind == last_kind and group:
            size, _ = group[-1]
            group[-1] = (size * d, strides[i])  # merge with the previous dimension
        else:
            group.append((d, strides[i]))
        last_kind = kind
    count = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    return Reduction(x, y, axes, count, kept, reduced)

"""CONCATENATION (TFLM ``concatenation.cc``, ``reference_ops::Concatenation``): up to 10 inputs
(activations or constants) joined along ``axis`` (negative: from the end), rank at most 6.

Types: float32, int8, int16, int32, int64, bool, the same for every input and the output. TFLM
copies the codes without requantizing: int8 inputs must have the output's scale and zero point,
int16 ones zero point 0 (scales unchecked, as TFLM). The fused activation must be NONE.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import (
    MOVER_TYPES,
    Sources,
    axis_of,
    box,
    check_rank,
    check_types,
    expect_shape,
    input0_scheme,
    move_kernel,
    strides,
)
from .common import Kernel, OpSpec, per_tensor, tensor_in, tensor_out, unsupported

SPEC = OpSpec(opcodes=("CONCATENATION",), schemes=MOVER_TYPES, classify=input0_scheme)

#: TFLM's kMaxInputNum and RuntimeShape::kMaxSmallSize.
MAX_INPUTS = 10
MAX_RANK = 6


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    if not 1 <= len(op.inputs) <= MAX_INPUTS or len(op.outputs) != 1:
        raise unsupported(op, f"takes 1 to {MAX_INPUTS} inputs and one output, has "
                              f"{len(op.inputs)} and {len(op.outputs)}")
    xs = [tensor_in(graph, op, i) for i in range(len(op.inputs))]
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, y, *xs)
    if op.options.get("fused_activation_function", "NONE") != "NONE":
        raise unsupported(op, f"fused activation {op.options['fused_activation_function']}: "
                              "TFLM takes NONE only")
    for t in xs:
        check_rank(op, t, MAX_RANK)
        if len(t.shape) != len(y.shape):
            raise unsupported(op, f"input '{t.name}' has rank {len(t.shape)}, the output "
                                  f"{len(y.shape)}")
    if y.dtype == "int8":
        for t in xs:
            if per_tensor(op, t) != per_tensor(op, y):
                raise unsupported(op, f"int8 input '{t.name}' is quantized {per_tensor(op, t)}, "
                                      f"the output {per_tensor(op, y)}; TFLM requires the same "
                                      "scale and zero point")
    if y.dtype == "int16":
        for t in (*xs, y):
            if per_tensor(op, t)[1] != 0:
                raise unsupported(op, f"int16 tensor '{t.name}' has zero point "
                                      f"{per_tensor(op, t)[1]}; TFLM requires 0")
    rank = len(y.shape)
    axis = axis_of(op, int(op.options.get("axis", 0)), rank)
    for t in xs:
        if [n for d, n in enumerate(t.shape) if d != axis] != [
                n for d, n in enumerate(y.shape) if d != axis]:
            raise unsupported(op, f"input '{t.name}' {list(t.shape)} does not match the output "
                                  f"{list(y.shape)} outside axis {axis}")
    expect_shape(op, y, [*y.shape[:axis], sum(t.shape[axis] for t in xs), *y.shape[axis + 1:]],
                 f"joining along axis {axis}")
    src = Sources()
    ost = strides(list(y.shape))
    moves, at = [], 0
    for k, t in enumerate(xs):
        name, const = src.add(t, f"value{k}")
        moves.append(box("out0", list(t.shape), ost, name, strides(list(t.shape)),
                         dst_offset=at * ost[axis], const=const))
        at += t.shape[axis]
    return move_kernel(op, moves, src, [y.index])

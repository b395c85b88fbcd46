"""FILL (TFLM ``fill.cc``, ``reference_ops::Fill``): an output of shape ``dims`` with every
element ``value``.

``dims`` is a constant int8/int16/int32/int64 vector equal to the output's static shape (TFLM
requires a constant and checks it), or one the model computes from shapes, as LSTMs build their
zero state (``PACK(STRIDED_SLICE(SHAPE(x)), units)``): evaluated at emit time
(:mod:`._fold`; TFLM refuses such a model, LiteRT runs it); ``value`` a scalar (rank 0) of the output's type, a constant
or an activation read when the model runs. Types: float32, int8, int32 (TFLM's list); the value's
code is written as it is (TFLM checks no quantization).
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._fold import static_ints
from ._movement import (
    Sources,
    box,
    check_types,
    const_ints,
    const_value,
    expect_shape,
    literal,
    move_kernel,
    output_scheme,
    strides,
)
from .common import Kernel, OpSpec, check_counts, tensor_in, tensor_out, unsupported

SPEC = OpSpec(opcodes=("FILL",), schemes=("float32", "int8", "int32"), classify=output_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (2,))
    y = tensor_out(graph, op)
    v = tensor_in(graph, op, 1)
    check_types(op, SPEC.schemes, y, v)
    if len(v.shape) != 0:
        raise unsupported(op, f"value '{v.name}' has shape {list(v.shape)}; TFLM takes a scalar "
                              "(rank 0)")
    d = tensor_in(graph, op, 0)
    folded = None if d.is_const else static_ints(graph, op.inputs[0])
    if folded is not None:  # computed from shapes (SHAPE -> STRIDED_SLICE -> PACK): static
        dims = [int(v) for v in folded.reshape(-1)]
    else:
        dims = const_ints(op, graph, 0, "dims", ("int8", "int16", "int32", "int64"))
    expect_shape(op, y, dims, f"dims {dims}")
    src = Sources()
    if v.is_const:
        value = literal(const_value(v), y.dtype)
    else:
        value = f"{src.add(v, 'value')[0]}[0]"
    shape = list(y.shape)
    moves = [box("out0", shape, strides(shape), value=value)]
    return move_kernel(op, moves, src, [y.index])

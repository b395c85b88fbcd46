"""TILE (LiteRT ``tile.cc``; TFLM has no TILE kernel): the input repeated ``multiples[d]``
times along each dimension ``d``, as SSD detectors' anchor and box layers write it.

``multiples`` is an int32 or int64 vector, one entry >= 1 per input dimension (a multiple of 0
would make an empty output, which static C plans do not hold). Where the model computes it
(SSD detectors take it from a SHAPE), it is evaluated at emit time (:mod:`._fold`), else the
static shapes say what it is: the output's size over the input's, per dimension. LiteRT copies
elements, so any element type goes and a quantized output keeps the input's values: the
output's scale and zero point must be the input's. One move per output: the output seen as
``(m0, n0, m1, n1, ...)`` (``m`` the multiples, ``n`` the input's sizes) reads the input with
stride 0 along every ``m``.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator, Tensor

from ..target import GENERIC, Target
from ._fold import static_ints
from ._movement import (
    MOVER_TYPES,
    Sources,
    box,
    check_types,
    const_ints,
    expect_shape,
    move_kernel,
    strides,
)
from .common import Kernel, OpSpec, check_counts, dtype_scheme, tensor_in, tensor_out, unsupported

#: LiteRT's TILE list: every mover type and uint8 (string tensors have no static C plan).
SPEC = OpSpec(opcodes=("TILE",), schemes=(*MOVER_TYPES, "uint8"), classify=dtype_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (2,))
    x = tensor_in(graph, op, 0)
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, x, y)
    m = tensor_in(graph, op, 1)
    folded = None if m.is_const else static_ints(graph, op.inputs[1])
    if m.is_const:
        multiples = const_ints(op, graph, 1, "multiples", ("int32", "int64"))
    elif folded is not None:  # computed from shapes: evaluated at emit time
        multiples = [int(v) for v in folded.reshape(-1)]
    else:
        multiples = _static_multiples(op, m, x, y)
    if len(multiples) != len(x.shape):
        raise unsupported(op, f"multiples {multiples} has {len(multiples)} entries for the "
                              f"{len(x.shape)} dimensions of '{x.name}' {list(x.shape)}")
    if any(m < 1 for m in multiples):
        raise unsupported(op, f"multiples {multiples}: every entry must be at least 1")
    if x.quant != y.quant:
        raise unsupported(op, f"'{y.name}' must keep the quantization of '{x.name}' (TILE "
                              "copies values)")
    shape = [n * m for n, m in zip(x.shape, multiples, strict=True)]
    expect_shape(op, y, shape, f"tiling {list(x.shape)} by {multiples}")
    yst, xst = strides(shape), strides(list(x.shape))
    counts: list[int] = []
    dst: list[int] = []
    srcs: list[int] = []
    for d, (n, m) in enumerate(zip(x.shape, multiples, strict=True)):
        counts += [m, n]
        dst += [n * yst[d], yst[d]]
        srcs += [0, xst[d]]
    src = Sources()
    name, const = src.add(x, "input")
    return move_kernel(op, [box("out0", counts, dst, name, srcs, const=const)], src, [y.index])


def _static_multiples(op: Operator, m: Tensor, x: Tensor, y: Tensor) -> list[int]:
    """The multiples a computed ``multiples`` input must hold, from the static shapes."""
    if len(x.shape) != len(y.shape) or any(
            n <= 0 or t % n for n, t in zip(x.shape, y.shape, strict=True)):
        raise unsupported(op, f"multiples '{m.name}' is computed and '{y.name}' "
                              f"{list(y.shape)} is no tiling of '{x.name}' {list(x.shape)}; "
                              "make the multiples a constant")
    return [t // n for n, t in zip(x.shape, y.shape, strict=True)]

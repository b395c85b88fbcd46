"""PAD and PADV2 (TFLM ``pad.cc``, ``reference_ops::Pad``): the input copied into the middle of
the output, the border filled with the pad value.

The paddings are a constant int32 ``[rank, 2]`` tensor (TFLM reads them as int32 at Prepare and
requires a constant), every output dimension ``input + before + after``; rank at most 5. The
pad value: PADV2's third input (a one-element tensor of the input's type, a constant or an
activation TFLM reads at Eval; int8: the output's scale and zero point), else 0, except int8
whose PAD pads with the output zero point (the real value 0). Types: float32, int8, int16,
int32. The data is copied as is: TFLM does not requantize (an int8 output with another scale
gets the input's codes).
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import (
    Sources,
    box,
    check_rank,
    check_types,
    const_ints,
    const_value,
    expect_shape,
    fill_outside,
    literal,
    move_kernel,
    strides,
)
from .common import (
    Kernel,
    OpSpec,
    check_counts,
    dtype_scheme,
    per_tensor,
    tensor_in,
    tensor_out,
    unsupported,
)

SPEC = OpSpec(opcodes=("PAD", "PADV2"), schemes=("float32", "int8", "int16", "int32"),
              classify=dtype_scheme)

#: TFLM's PadKernelMaxDimensionCount.
MAX_RANK = 5


def paddings(op: Operator, graph: Graph, rank: int, i: int = 1,
             types: tuple[str, ...] = ("int32",)) -> list[tuple[int, int]]:
    """The constant ``[rank, 2]`` paddings of input ``i``, each non-negative."""
    t = tensor_in(graph, op, i)
    flat = const_ints(op, graph, i, "paddings", types)
    if len(flat) != 2 * rank:
        raise unsupported(op, f"paddings '{t.name}' {list(t.shape)} must hold 2 values for each "
                              f"of the input's {rank} dimensions")
    pairs = [(flat[2 * d], flat[2 * d + 1]) for d in range(rank)]
    if any(a < 0 or b < 0 for a, b in pairs):
        raise unsupported(op, f"paddings {pairs} must not be negative")
    return pairs


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (2, 3))  # TFLM's Prepare takes the pad value on either operator
    x = tensor_in(graph, op, 0)
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, x, y)
    check_rank(op, x, MAX_RANK)
    pads = paddings(op, graph, len(x.shape))
    expect_shape(op, y, [n + a + b for n, (a, b) in zip(x.shape, pads, strict=True)],
                 f"padding {list(x.shape)} by {pads}")
    src = Sources()
    name, const = src.add(x, "input")
    value = "0" if x.dtype != "float32" else literal(0.0, "float32")
    v = tensor_in(graph, op, 2, optional=True) if len(op.inputs) > 2 else None
    if v is not None:
        check_types(op, SPEC.schemes, x, v)
        if v.num_elements != 1:
            raise unsupported(op, f"pad value '{v.name}' has {v.num_elements} elements; TFLM "
                                  "takes one")
        if x.dtype == "int8" and per_tensor(op, v) != per_tensor(op, y):
            raise unsupported(op, f"pad value '{v.name}' is quantized {per_tensor(op, v)}, the "
                                  f"output {per_tensor(op, y)}; TFLM requires the same scale "
                                  "and zero point")
        if v.is_const:
            value = literal(const_value(v), x.dtype)
        else:
            value = f"{src.add(v, 'value')[0]}[0]"
    elif x.dtype == "int8":
        value = str(per_tensor(op, y)[1])
    out = list(y.shape)
    lo = [a for a, _ in pads]
    hi = [a + n for a, n in zip(lo, x.shape, strict=True)]
    ost = strides(out)
    moves = fill_outside("out0", out, lo, hi, value)
    moves.append(box("out0", list(x.shape), ost, name, strides(list(x.shape)),
                     dst_offset=sum(a * s for a, s in zip(lo, ost, strict=True)), const=const))
    return move_kernel(op, moves, src, [y.index])

"""QUANTIZE: float32 -> int8/int16 (``round(x / scale) + zp``, float division, ties away from
zero) and requantization between int8, int16 and int32 (TFLM ``Requantize``: ``(x - zp_in)``
times the ratio of the scales by ``MultiplyByQuantizedMultiplier``, plus ``zp_out``, clamped to
the output type), the conversions TFLM's QUANTIZE takes: uint8 <-> int8 among them, the two ends
of image models whose converter kept a uint8 input or output (with equal scales and zero points
128 apart that is TFLM's sign-bit flip, which the same arithmetic gives exactly)."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from .common import (
    C_TYPES,
    Kernel,
    OpSpec,
    conversion_scheme,
    per_tensor,
    quantized_range,
    unary_operands,
    unsupported,
)

SPEC = OpSpec(opcodes=("QUANTIZE",),
              schemes=("float32->int8", "float32->int16", "int8->int8", "int8->int16",
                       "int8->int32", "int16->int8", "int16->int16", "int16->int32",
                       "int32->int8", "int32->int16", "uint8->int8", "int8->uint8"),
              classify=conversion_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    if x.num_elements != y.num_elements:
        raise unsupported(op, "input and output sizes differ")
    ys, yz = per_tensor(op, y)
    qmin, qmax = quantized_range(y)
    params = {"size": x.num_elements, "src": x.dtype, "dst": y.dtype, "out_zp": yz,
              "scale": ys, "T": C_TYPES[y.dtype], "qmin": qmin, "qmax": qmax}
    if x.dtype != "float32":
        xs, xz = per_tensor(op, x)
        m, s = q.quantize_multiplier(q.f32(xs) / q.f32(ys))
        params.update(in_zp=xz, mult=m, shift=s)
    return Kernel(op, "quantize.c.j2", params, [x.index], [y.index])

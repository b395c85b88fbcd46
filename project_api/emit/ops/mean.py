"""MEAN and SUM: float32, int8 and int16 (TFLM's ``reduce.cc``, ``QuantizedMeanOrSum``).

int8 and int16 have one path in TFLM, whatever the axes and ``keep_dims``: the inputs of each
output summed in int32 (wrapping, as TFLM's ``AddTensorValuesWithExpectedOverflow``), less
``zero_point_in * count``, requantized by ``MultiplyByQuantizedMultiplier`` with the multiplier
of ``scale_in / scale_out`` (for MEAN the 1/count folded in: the multiplier shifted left by
``min(floor(log2(count)), 32, 31 + shift)`` bits, divided by the count, and the shift lowered by
as many bits), plus ``zero_point_out``, clamped to the type. float32 sums in TFLM's order
(:mod:`._reduce`) and, for MEAN, divides by the count as a float.
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from . import _dsp
from ._reduce import reduction
from .common import (
    Kernel,
    OpSpec,
    check_dtype,
    per_tensor,
    quantized_range,
    unsupported,
)

SPEC = OpSpec(opcodes=("MEAN", "SUM"), schemes=("float32", "int8", "int16x8"))


def mean_multiplier(multiplier: int, shift: int, count: int) -> tuple[int, int]:
    """TFLM's multiplier and shift of a quantized MEAN: ``scale_in / scale_out`` (as
    ``multiplier``, ``shift``) with the division by ``count`` folded in."""
    bits = min(count.bit_length() - 1, 32, 31 + shift)
    return (multiplier << bits) // count, shift - bits


def int32_literal(v: int) -> str:
    """``v`` wrapped to int32, as a C literal."""
    w = (v + (1 << 31)) % (1 << 32) - (1 << 31)
    return "INT32_MIN" if w == -(1 << 31) else str(w)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    r = reduction(op, graph)
    x, y = r.x, r.y
    check_dtype(op, x, ("float32", "int8", "int16"))
    params = dict(r.params(), kind=op.opcode.lower())
    if x.dtype == "float32":
        params["init"] = "0.0f"
        return Kernel(op, "reduce.c.j2", params, [x.index], [y.index])
    si, zi = per_tensor(op, x)
    so, zo = per_tensor(op, y)
    if so <= 0 or si <= 0:
        raise unsupported(op, f"scales {si} of '{x.name}' and {so} of '{y.name}' must be > 0")
    m, s = q.quantize_multiplier(q.f32(si) / q.f32(so))
    if op.opcode == "MEAN":
        m, s = mean_multiplier(m, s, r.count)
    lo, hi = quantized_range(y)
    type_max = 128 if x.dtype == "int8" else 32768
    bound = r.count * (type_max + abs(zi))  # |sum - zp * count|
    offset = -zi * r.count
    params.update(mult=m, shift=s, out_zp=zo, qmin=lo, qmax=hi,
                  init=int32_literal(offset),
                  wrap=r.count * type_max + abs(offset) >= 1 << 31)
    params["fast_rq"] = not params["wrap"] and _dsp.fast_requant(
        np.array([m]), np.array([s]), np.array([bound]))
    params.update(left=max(s, 0), right=max(-s, 0))
    return Kernel(op, "reduce.c.j2", params, [x.index], [y.index])

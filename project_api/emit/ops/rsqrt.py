"""RSQRT as TFLM's ``elementwise.cc``: float32 (``1.f / sqrtf(x)``), int8 and int16 (``x - zp_in``
through TFLM's fixed-point ``GetInvSqrtQuantizedMultiplierExp``, scaled by ``2^20`` and
requantized by ``1 / (sqrtf(s_in) s_out)``; zero gives the type's maximum; int16 with zero points
0). TFLM refuses, at run time, an input below its zero point; the kernel computes one as an
input of 1."""

from __future__ import annotations

import math

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._math import multiplier
from .common import (
    C_TYPES,
    Kernel,
    OpSpec,
    check_dtype,
    check_same_type,
    per_tensor,
    quantized_range,
    unary_operands,
    unsupported,
)

SPEC = OpSpec(opcodes=("RSQRT",), schemes=("float32", "int8", "int16x8"))

#: TFLM's extra left shift of the inverse square root (``kShift``).
SHIFT = 20


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    check_dtype(op, x, ("float32", "int8", "int16"))
    check_same_type(op, x, y)
    params = {"size": x.num_elements, "dtype": x.dtype, "T": C_TYPES[x.dtype]}
    headers: tuple[str, ...] = ()
    if x.dtype != "float32":
        sx, zx = per_tensor(op, x)
        sy, zy = per_tensor(op, y)
        if x.dtype == "int16" and (zx, zy) != (0, 0):
            raise unsupported(op, f"int16 zero points {zx} -> {zy}; TFLM's int16 RSQRT takes "
                                  "zero points 0 only")
        # in double, as the scales of TFLM's other kernels (the tests cannot tell float32 apart)
        m, s = multiplier(op, 1.0 / (math.sqrt(float(sx)) * float(sy)), "output")
        if s - SHIFT < -31:
            raise unsupported(op, f"scales {sx} -> {sy} give an output multiplier below "
                                  f"2^{s - 1}, beyond what TFLM's quantized RSQRT computes")
        lo, hi = quantized_range(y)
        params.update(in_zp=zx, out_zp=zy, m=m, s=s - SHIFT, qmin=lo, qmax=hi, shift=SHIFT)
        headers = ("fixedpoint.h.j2",)
    return Kernel(op, "rsqrt.c.j2", params, [x.index], [y.index], headers=headers)

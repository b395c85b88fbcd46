"""L2_NORMALIZATION over the last dimension as TFLM's ``l2norm.cc`` (up to rank 4, no fused
activation): float32 (``x / max(sqrtf(sum x^2), 1e-6)``, summed in order) and int8 (the sum of
squared differences to the zero point through TFLM's fixed-point
``GetInvSqrtQuantizedMultiplierExp``, the output at scale 1/128 and zero point 0, as TFLM
assumes without checking)."""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from .common import (
    Kernel,
    OpSpec,
    check_dtype,
    check_same_type,
    per_tensor,
    unary_operands,
    unsupported,
)

SPEC = OpSpec(opcodes=("L2_NORMALIZATION",), schemes=("float32", "int8"))

MAX_RANK = 4


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    check_dtype(op, x, ("float32", "int8"))
    check_same_type(op, x, y)
    if not 1 <= len(x.shape) <= MAX_RANK or tuple(x.shape) != tuple(y.shape):
        raise unsupported(op, f"input '{x.name}' shape {list(x.shape)}: TFLM takes ranks 1 to "
                              f"{MAX_RANK}, the output of the same shape")
    act = op.options.get("fused_activation_function", "NONE")
    if act != "NONE":
        raise unsupported(op, f"fused activation {act} not supported (TFLM takes NONE)")
    depth = x.shape[-1]
    params = {"rows": x.num_elements // max(depth, 1), "depth": depth, "dtype": x.dtype}
    if x.dtype == "float32":
        return Kernel(op, "l2_normalization.c.j2", params, [x.index], [y.index])
    params["in_zp"] = per_tensor(op, x)[1]
    return Kernel(op, "l2_normalization.c.j2", params, [x.index], [y.index],
                  headers=("fixedpoint.h.j2",))

"""CAST between float32, int8, int16, int32, uint32 and bool, as TFLM's ``cast.cc`` converts
(values as numbers; quantization plays no part):

* to bool: ``x != 0`` (a NaN is true); from bool: 0 or 1;
* float32 to an integer: truncated toward zero and saturated to the type (NaN gives 0; uint32:
  to [0, 2^32 - 1], where TFLM's conversion is undefined outside it);
* integer to a narrower integer: the low bits (two's complement wrap; uint32 <-> int32 keep
  the bits, as TFLM's audio front end converts its energies); to float32: rounded to nearest.

TFLM refuses uint8 and int64 (in or out) and the other types.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from .common import C_TYPES, Kernel, OpSpec, conversion_scheme, unary_operands, unsupported

TYPES = ("float32", "int8", "int16", "int32", "bool", "uint32")
SPEC = OpSpec(opcodes=("CAST",), schemes=tuple(f"{a}->{b}" for a in TYPES for b in TYPES),
              classify=conversion_scheme)

#: Bits of each integer type.
BITS = {"int8": 8, "int16": 16, "int32": 32}


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    if x.num_elements != y.num_elements:
        raise unsupported(op, f"input '{x.name}' {list(x.shape)} and output '{y.name}' "
                              f"{list(y.shape)} differ in size")
    params = {"size": x.num_elements, "src": x.dtype, "dst": y.dtype, "T": C_TYPES[y.dtype]}
    if y.dtype in BITS:
        bits = BITS[y.dtype]
        params.update(lo=-(1 << (bits - 1)), hi=(1 << (bits - 1)) - 1,
                      lo_f=f"{-(2.0 ** (bits - 1))!r}f", hi_f=f"{2.0 ** (bits - 1)!r}f")
    elif y.dtype == "uint32":
        params.update(lo=0, hi="UINT32_MAX", lo_f="0.0f", hi_f="4294967296.0f")
    return Kernel(op, "cast.c.j2", params, [x.index], [y.index])

"""ADD with broadcasting: int8 and int16 (TFLM reference: both inputs rescaled to a common scale
with a 20-bit left shift (int16: 15), summed, requantized; int16 always TFLM's general-scale
path, whatever ``pot_scale_int16`` says), float32, and int32 (plain values, wrapping as TFLM's
int32 arithmetic, and no clamp: TFLM's int32 ADD sets the whole int32 range whatever the fused
activation).

On a DSP target an int8 ADD whose three requantizations the emitter proves exact in the SMMULR
form (:func:`._dsp.fast_requant`) gets ``add.dsp.c.j2``; on Helium an int8 ADD of two inputs of
the output's shape gets ``add.mve.c.j2`` (TFLM's arithmetic four lanes a step, any scales)."""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from . import _dsp
from ._binary import operands, rescaled_sum_params
from ._math import check_unquantized
from .common import Kernel, OpSpec

SPEC = OpSpec(opcodes=("ADD",), schemes=("float32", "int8", "int16x8", "int32"), dsp=("int8",))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    a, b, y, act, params, inputs, consts = operands(op, graph,
                                                    ("int8", "int16", "int32", "float32"))
    params["kind"] = "add"
    if y.dtype in ("int8", "int16"):
        params.update(rescaled_sum_params(op, a, b, y, act))
        if target.mve and y.dtype == "int8" and params["flat"] and _right_shifts(params):
            params["mve"] = True
            return Kernel(op, "add.mve.c.j2", params, inputs, [y.index], consts,
                          headers=("mve.h.j2",))
        if target.dsp and y.dtype == "int8" and _fast_add(params):
            return Kernel(op, "add.dsp.c.j2", params, inputs, [y.index], consts)
    elif y.dtype == "int32":
        check_unquantized(op, a, b, y)
    else:
        lo, hi = q.activation_range_float(act)
        params.update(act_min=lo, act_max=hi)
    return Kernel(op, "add.c.j2", params, inputs, [y.index], consts)


def _right_shifts(p: dict) -> bool:
    """Whether the three requantizations only shift right (multipliers below one), the form
    ``m_add8`` computes."""
    return max(p["s1"], p["s2"], p["so"]) <= 0


def _scaled_bound(bound: int, m: int, s: int) -> int:
    """An upper bound of |MultiplyByQuantizedMultiplier(x, m, s)| for |x| <= bound, s <= 0."""
    return (((bound * 2 * m + (1 << 31)) >> 32) + 1 >> -s) + 1


def _fast_add(p: dict) -> bool:
    """Whether the three requantizations of an int8 ADD are exact in ``d_requant`` form."""
    if max(p["s1"], p["s2"], p["so"]) > 0:
        return False
    ba = (128 + abs(p["a_off"])) << p["left_shift"]
    bb = (128 + abs(p["b_off"])) << p["left_shift"]
    ok = (_dsp.fast_requant(np.array([p["m1"]]), np.array([p["s1"]]), np.array([ba]))
          and _dsp.fast_requant(np.array([p["m2"]]), np.array([p["s2"]]), np.array([bb])))
    if not ok:
        return False
    bo = _scaled_bound(ba, p["m1"], p["s1"]) + _scaled_bound(bb, p["m2"], p["s2"])
    return _dsp.fast_requant(np.array([p["mo"]]), np.array([p["so"]]), np.array([bo]))

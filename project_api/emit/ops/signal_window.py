"""SignalWindow (TFLM ``signal/micro/kernels/window.cc``, ``signal/src/window.cc``): each row
of the innermost dimension times the int16 window, shifted right by ``shift`` and saturated to
int16 (``(int32 x * w) >> shift``).

The weights may be a constant (emitted with the kernel) or an activation; their length is the
innermost dimension, which TFLM steps through the input by.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from .common import ConstArray, Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=(), custom=("SignalWindow",), schemes=("int16",),
              classify=_signal.classify)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    (x, w), (y,) = _signal.operands(op, graph, 2, 1)
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant; fold the window before export")
    opts = _signal.options(op, {"shift": "int"})
    shift = _signal.int32(op, opts, "shift", 0, 31, "a right shift of an int32 product")
    for t, what in ((x, "input"), (w, "weights"), (y, "output")):
        _signal.dtype(op, t, "int16", what)
    _signal.rank(op, w, 1, "weights")
    if not x.shape:
        raise unsupported(op, f"input '{x.name}' is a scalar; TFLM's kernel takes rank >= 1")
    if x.shape[-1] != w.shape[0]:
        raise unsupported(op, f"weights '{w.name}' have {w.shape[0]} values, the innermost "
                              f"dimension of '{x.name}' {x.shape[-1]}; they must match")
    _signal.same_shape(op, x, y)
    params = {"rows": x.num_elements // w.shape[0], "n": w.shape[0], "shift": shift,
              "w_const": w.is_const}
    inputs, consts = [x.index], []
    if w.is_const:
        consts.append(ConstArray("w", "int16_t", w.data))
    else:
        inputs.append(w.index)
    return Kernel(op, "signal_window.c.j2", params, inputs, [y.index], consts)

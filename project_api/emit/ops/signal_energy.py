"""SignalEnergy (TFLM ``signal/micro/kernels/energy.cc``, ``signal/src/energy.cc``): the
squared magnitude ``re^2 + im^2`` (uint32, the int32 sum wrapping as in TFLM) of the complex
int16 bins ``[start_index, end_index)``.

TFLM leaves the other bins of its output as the arena had them (TFLM's audio front end
overwrites them with zeros by a slice and a concatenation); the emitted kernel writes zeros
there, as the TensorFlow op documents. Bins outside the input or output are refused (TFLM would
read or write past them).
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from .common import Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=(), custom=("SignalEnergy",), schemes=("int16",),
              classify=_signal.classify)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    (x,), (y,) = _signal.operands(op, graph, 1, 1)
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant; fold the energy before export")
    _signal.dtype(op, x, "int16", "input")
    _signal.dtype(op, y, "uint32", "output")
    _signal.rank(op, x, 1, "input")
    _signal.rank(op, y, 1, "output")
    opts = _signal.options(op, {"end_index": "int", "start_index": "int"})
    bins = min(x.shape[0] // 2, y.shape[0])
    start = _signal.int32(op, opts, "start_index", 0, bins, f"the {bins} bins of input "
                          f"'{x.name}' and output '{y.name}'")
    end = _signal.int32(op, opts, "end_index", -(1 << 31), bins, f"the {bins} bins of input "
                        f"'{x.name}' and output '{y.name}'")
    end = max(end, start)
    return Kernel(op, "signal_energy.c.j2", {"start": start, "end": end, "n": y.shape[0]},
                  [x.index], [y.index])

"""SignalDelay (TFLM ``signal/micro/kernels/delay.cc``): each row of the innermost dimension
delayed by ``delay_length`` samples, the last ``delay_length`` samples of each row kept from
one invocation to the next (zeros at first and after a reset: ``2 * rows * delay_length`` bytes
of the module's state). TFLM's circular buffer of ``frame + delay`` samples gives the same
stream.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from .common import Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=(), custom=("SignalDelay",), schemes=("int16",),
              classify=_signal.classify)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    (x,), (y,) = _signal.operands(op, graph, 1, 1)
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant; the delay takes an activation")
    _signal.dtype(op, x, "int16", "input")
    _signal.dtype(op, y, "int16", "output")
    if not x.shape or not x.shape[-1]:
        raise unsupported(op, f"input '{x.name}' has shape {list(x.shape)}; TFLM's delay takes "
                              "rows of at least one sample")
    _signal.same_shape(op, x, y)
    opts = _signal.options(op, {"delay_length": "int"})
    delay = _signal.int32(op, opts, "delay_length", 0, 1 << 20, "samples of delay")
    inner = x.shape[-1]
    rows = x.num_elements // inner
    params = {"rows": rows, "n": inner, "d": delay}
    return Kernel(op, "signal_delay.c.j2", params, [x.index], [y.index],
                  persistent_bytes=2 * rows * delay)

"""SignalFftAutoScale (TFLM ``signal/micro/kernels/fft_auto_scale_kernel.cc``,
``signal/src/fft_auto_scale.cc``): the int16 signal shifted left by as many bits as its largest
magnitude leaves free (``15 - msb(max |x|)``, at least 0), and that shift as an int32 scalar.

TFLM's running maximum is an int16 (``-(-32768)`` wraps back to -32768, whose msb, read as a
uint32, is 32: no shift), and its msb of 0 is 32 (GCC's path): reproduced as they are. The op
reads no options.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from .common import Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=(), custom=("SignalFftAutoScale",), schemes=("int16",),
              classify=_signal.classify)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    (x,), (y, s) = _signal.operands(op, graph, 1, 2)
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant; fold the scaling before export")
    _signal.dtype(op, x, "int16", "input")
    _signal.dtype(op, y, "int16", "output")
    _signal.dtype(op, s, "int32", "output 1 (the shift)")
    _signal.rank(op, x, 1, "input")
    _signal.rank(op, s, 0, "output 1 (the shift)")
    _signal.same_shape(op, x, y)
    return Kernel(op, "signal_fft_auto_scale.c.j2", {"n": x.num_elements}, [x.index],
                  [y.index, s.index], headers=("signal.h.j2",))

"""SignalStacker (TFLM ``signal/micro/kernels/stacker.cc``): ``left + 1 + right`` successive
input frames of ``num_channels`` stacked into one output, advancing ``stacker_step`` frames per
output; the first frame is repeated ``left`` times before it; ``output_valid`` is false (the
output left unwritten, as TFLM leaves it) until enough frames have arrived.

TFLM keeps the frames in a circular buffer of one output's size; the emitted kernel keeps them
as a queue at the front of a buffer of that size, with the number of samples queued and whether
the first frame has come: ``8 + 2 * size`` bytes of the module's state, all zero at a reset.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from .common import Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=(), custom=("SignalStacker",), schemes=("int16",),
              classify=_signal.classify)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    (x,), (y, valid) = _signal.operands(op, graph, 1, 2)
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant; the stacker takes an activation")
    _signal.dtype(op, x, "int16", "input")
    _signal.dtype(op, y, "int16", "output")
    _signal.dtype(op, valid, "bool", "output 1 (output_valid)")
    _signal.rank(op, x, 1, "input")
    _signal.rank(op, y, 1, "output")
    _signal.rank(op, valid, 0, "output 1 (output_valid)")
    opts = _signal.options(op, {"num_channels": "int", "stacker_left_context": "int",
                                "stacker_right_context": "int", "stacker_step": "int"})
    nc = _signal.int32(op, opts, "num_channels", 1, 1 << 20, "the channels of a frame")
    left = _signal.int32(op, opts, "stacker_left_context", 0, 1 << 10, "frames of context")
    right = _signal.int32(op, opts, "stacker_right_context", 0, 1 << 10, "frames of context")
    frames = left + 1 + right
    step = _signal.int32(op, opts, "stacker_step", 1, frames,
                         "frames an output advances by, at most the frames it holds")
    if x.shape[0] != nc:
        raise unsupported(op, f"input '{x.name}' has {x.shape[0]} values, num_channels is "
                              f"{nc}; they must match")
    if y.shape[0] != nc * frames:
        raise unsupported(op, f"output '{y.name}' has {y.shape[0]} values; {frames} frames of "
                              f"{nc} channels make {nc * frames}")
    params = {"nc": nc, "left": left, "size": nc * frames, "step": nc * step}
    return Kernel(op, "signal_stacker.c.j2", params, [x.index], [y.index, valid.index],
                  persistent_bytes=8 + 2 * nc * frames)

"""SignalFramer (TFLM ``signal/micro/kernels/framer.cc``): overlapping frames of
``frame_size`` samples every ``frame_step`` samples of each row of the innermost dimension, the
samples kept from one invocation to the next; ``output_valid`` is false (and the frames TFLM
cannot fill yet are left unwritten, as TFLM leaves them) until a row holds ``frame_size``
samples. ``prefill`` starts each row with ``frame_size - frame_step`` zeros.

TFLM keeps each row in a circular buffer of ``frame_size`` rounded up to a multiple of
``frame_step``; the emitted kernel keeps the same samples as a queue at the front of a buffer of
that capacity (the frames read from it are the same), and the number of samples queued beyond
the prefill: ``4 + 2 * rows * capacity`` bytes of the module's state, all zero at a reset.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from .common import Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=(), custom=("SignalFramer",), schemes=("int16",),
              classify=_signal.classify)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    (x,), (y, valid) = _signal.operands(op, graph, 1, 2)
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant; the framer takes an activation")
    _signal.dtype(op, x, "int16", "input")
    _signal.dtype(op, y, "int16", "output")
    _signal.dtype(op, valid, "bool", "output 1 (output_valid)")
    _signal.rank(op, valid, 0, "output 1 (output_valid)")
    if not x.shape:
        raise unsupported(op, f"input '{x.name}' is a scalar; TFLM's framer takes rank >= 1")
    opts = _signal.options(op, {"frame_size": "int", "frame_step": "int", "prefill": "bool"})
    size = _signal.int32(op, opts, "frame_size", 1, 1 << 20, "a frame of samples")
    step = _signal.int32(op, opts, "frame_step", 1, 1 << 20, "samples per frame")
    prefill = bool(opts["prefill"])
    inner = x.shape[-1]
    if inner < step or inner % step:
        raise unsupported(op, f"the innermost dimension of '{x.name}' ({inner}) is no multiple "
                              f"of frame_step {step} (TFLM's Prepare refuses it)")
    if prefill and step > size:
        raise unsupported(op, f"frame_step {step} exceeds frame_size {size} with prefill (TFLM "
                              "would prefill a negative number of zeros)")
    frames = inner // step
    want = (*x.shape[:-1], frames, size)
    if tuple(y.shape) != want:
        raise unsupported(op, f"output '{y.name}' has shape {list(y.shape)}; frames of {size} "
                              f"every {step} of '{x.name}' {list(x.shape)} give {list(want)}")
    capacity = (size + step - 1) // step * step
    rows = x.num_elements // inner
    params = {"rows": rows, "inner": inner, "frames": frames, "size": size, "step": step,
              "capacity": capacity, "prefill": size - step if prefill else 0}
    return Kernel(op, "signal_framer.c.j2", params, [x.index], [y.index, valid.index],
                  persistent_bytes=8 + 2 * rows * capacity)

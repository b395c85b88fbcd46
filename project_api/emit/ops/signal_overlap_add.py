"""SignalOverlapAdd (TFLM ``signal/micro/kernels/overlap_add.cc``, ``signal/src/overlap_add.cc``):
frames ``[..., n, frame_size]`` laid ``frame_step`` samples apart and summed, ``frame_step``
samples out per frame (``[..., n * frame_step]``); the frames' tails are kept from one
invocation to the next in a buffer of ``frame_size`` samples per row (zeros at first and after a
reset). int16 sums saturate, float32 sums are TFLM's in its order.
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from .common import C_TYPES, Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=(), custom=("SignalOverlapAdd",), schemes=("int16", "float32"),
              classify=_signal.classify)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    (x,), (y,) = _signal.operands(op, graph, 1, 1)
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant; overlap-add takes an activation")
    opts = _signal.options(op, {"T": "int", "frame_step": "int"})
    _signal.typed(op, opts, x, ("int16", "float32"))
    _signal.dtype(op, y, x.dtype, "output")
    if len(x.shape) < 2:
        raise unsupported(op, f"input '{x.name}' has shape {list(x.shape)}; TFLM's overlap-add "
                              "takes [..., frames, frame_size]")
    frames, size = x.shape[-2], x.shape[-1]
    if not frames or not size:
        raise unsupported(op, f"input '{x.name}' has shape {list(x.shape)}; TFLM's overlap-add "
                              "divides by frames * frame_size")
    step = _signal.int32(op, opts, "frame_step", 1, size,
                         f"samples per frame, at most frame_size {size}")
    want = (*x.shape[:-2], frames * step)
    if tuple(y.shape) != want:
        raise unsupported(op, f"output '{y.name}' has shape {list(y.shape)}; frames of '{x.name}' "
                              f"{list(x.shape)} every {step} samples give {list(want)}")
    rows = x.num_elements // (frames * size)
    params = {"rows": rows, "frames": frames, "size": size, "step": step,
              "T": C_TYPES[x.dtype], "kind": x.dtype}
    width = np.dtype(np.float32 if x.dtype == "float32" else np.int16).itemsize
    return Kernel(op, "signal_overlap_add.c.j2", params, [x.index], [y.index],
                  persistent_bytes=width * rows * size)

"""SignalFilterBank (TFLM ``signal/micro/kernels/filter_bank.cc``, ``signal/src/filter_bank.cc``):
mel filter-bank channels (uint64) of a uint32 energy spectrum. Each of the ``num_channels + 1``
table entries sums its band's bins times the weights into its channel and times the unweights
into the next (channel 0 is TFLM's scratch, dropped), in uint64 arithmetic (an int16 weight
widened to uint64, products and sums modulo 2^64, as TFLM's).

The five tables (weights, unweights, channel frequency starts, weight starts, widths) must be
constants: every band is checked at emit time to lie inside the spectrum and the weight arrays
(TFLM reads them unchecked).
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from . import _signal
from .common import ConstArray, Kernel, OpSpec, unsupported

SPEC = OpSpec(opcodes=(), custom=("SignalFilterBank",), schemes=("uint32",),
              classify=_signal.classify)

_TABLES = ("weights", "unweights", "channel_frequency_starts", "channel_weight_starts",
           "channel_widths")


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    ins, (y,) = _signal.operands(op, graph, 6, 1)
    x = ins[0]
    if x.is_const:
        raise unsupported(op, f"input '{x.name}' is a constant; fold the filter bank before "
                              "export")
    _signal.dtype(op, x, "uint32", "input")
    _signal.rank(op, x, 1, "input")
    _signal.dtype(op, y, "uint64", "output")
    _signal.rank(op, y, 1, "output")
    tables = {}
    for name, t in zip(_TABLES, ins[1:], strict=True):
        _signal.dtype(op, t, "int16", name)
        _signal.rank(op, t, 1, name)
        if not t.is_const:
            raise unsupported(op, f"{name} '{t.name}' is an activation; the emitter takes the "
                                  "filter bank's tables as constants (it checks every band)")
        tables[name] = np.asarray(t.data, np.int64).reshape(-1)
    opts = _signal.options(op, {"num_channels": "int"})
    nc = _signal.int32(op, opts, "num_channels", 0, 1 << 20, "the number of channels")
    if y.shape[0] != nc:
        raise unsupported(op, f"output '{y.name}' has {y.shape[0]} channels, num_channels is "
                              f"{nc}; they must match")
    for name in _TABLES[2:]:
        if tables[name].size < nc + 1:
            raise unsupported(op, f"{name} has {tables[name].size} entries; num_channels {nc} "
                                  f"needs {nc + 1}")
    n_weights = min(tables["weights"].size, tables["unweights"].size)
    for c in range(nc + 1):
        f0 = tables["channel_frequency_starts"][c]
        w0 = tables["channel_weight_starts"][c]
        width = tables["channel_widths"][c]
        if width > 0 and not (0 <= f0 and f0 + width <= x.shape[0]
                              and 0 <= w0 and w0 + width <= n_weights):
            raise unsupported(op, f"channel {c} reads bins [{f0}, {f0 + width}) and weights "
                                  f"[{w0}, {w0 + width}), outside the {x.shape[0]} bins of "
                                  f"'{x.name}' or the {n_weights} weights")
    consts = [ConstArray(s, "int16_t", tables[name].astype(np.int16)) for s, name in
              zip(("w", "u", "fs", "ws", "wd"), _TABLES, strict=True)]
    return Kernel(op, "signal_filter_bank.c.j2", {"channels": nc}, [x.index], [y.index], consts)

"""Integer tensors the model computes from shapes, evaluated at emit time.

Converters make shape operands out of the graph itself: an LSTM's zero state is a FILL whose
dims are ``PACK(STRIDED_SLICE(SHAPE(x)), units)``; an SSD detector's TILE takes its multiples
from a SHAPE. A tool that compiles ahead of time knows every shape, so such chains are
constants: :func:`static_ints` evaluates them (SHAPE, PACK, STRIDED_SLICE, CONCATENATION,
GATHER, CAST and the reshaping views, over constants), or says it cannot (None). The chain's
own operators still run on the device (they are cheap); the consumer reads the folded values.
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator

from .strided_slice import _eval_span

#: How deep a chain is followed.
MAX_DEPTH = 16
_INTS = ("int8", "int16", "int32", "int64", "uint8")


def _producer(graph: Graph, index: int) -> Operator | None:
    return next((op for op in graph.operators if index in op.outputs), None)


def static_ints(graph: Graph, index: int, depth: int = 0) -> np.ndarray | None:
    """The values of integer tensor ``index`` (shaped as the tensor) if the emitter can compute
    them at emit time, else None."""
    t = graph.tensor(index)
    if t.dtype not in _INTS or depth > MAX_DEPTH:
        return None
    if t.is_const:
        return np.asarray(t.data, dtype=np.int64).reshape(t.shape)
    op = _producer(graph, index)
    if op is None:
        return None
    value = _evaluate(graph, op, depth + 1)
    if value is None or value.size != int(np.prod(t.shape, dtype=np.int64)):
        return None
    return value.reshape(t.shape)


def _evaluate(graph: Graph, op: Operator, depth: int) -> np.ndarray | None:
    if len(op.outputs) != 1:
        return None
    o = op.options
    if op.opcode == "SHAPE":
        return np.asarray(graph.tensor(op.inputs[0]).shape, dtype=np.int64)
    ins = [static_ints(graph, i, depth) if i >= 0 else None for i in op.inputs]
    if any(v is None for v in ins):
        return None
    if op.opcode == "PACK":
        return np.stack(ins, axis=int(o.get("axis", 0)))
    if op.opcode == "CONCATENATION":
        return np.concatenate(ins, axis=int(o.get("axis", 0)))
    if op.opcode in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS", "CAST"):
        return ins[0]
    if op.opcode == "GATHER" and int(o.get("batch_dims", 0)) == 0:
        x, idx = ins[0], ins[1]
        axis = int(o.get("axis", 0)) % max(x.ndim, 1)
        if ((idx < 0) | (idx >= x.shape[axis])).any():
            return None
        return np.take(x, idx, axis=axis)
    if op.opcode == "STRIDED_SLICE" and len(ins) == 4:
        return _strided_slice(ins[0], *(v.reshape(-1).tolist() for v in ins[1:]), o)
    return None


def _strided_slice(x: np.ndarray, begin: list[int], end: list[int], step: list[int],
                   o: dict) -> np.ndarray | None:
    """TFLM's Eval of STRIDED_SLICE (its start/stop rules) on ``x``."""
    if not len(begin) == len(end) == len(step) == x.ndim or 0 in step:
        return None
    if any(int(o.get(k, 0)) for k in ("ellipsis_mask", "new_axis_mask")):
        return None
    bm, em, sm = (int(o.get(k, 0)) for k in ("begin_mask", "end_mask", "shrink_axis_mask"))
    index: list[int | slice] = []
    for d in range(x.ndim):
        bit = 1 << d
        a, b = _eval_span(begin[d], end[d], step[d], x.shape[d], bool(bm & bit), bool(em & bit),
                          bool(sm & bit))
        if sm & bit:
            if not 0 <= a < x.shape[d]:
                return None
            index.append(a)
        else:
            index.append(slice(a, b if b >= 0 else None, step[d]))
    return np.asarray(x[tuple(index)])

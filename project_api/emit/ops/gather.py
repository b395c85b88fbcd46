"""GATHER (TFLM ``gather.cc``): slices of ``params`` along ``axis`` picked by ``indices``, with
``batch_dims`` leading dimensions shared by both (``out[b.., o.., i.., n..] = params[b.., o..,
indices[b.., i..], n..]``).

``params`` float32 or int8 (an activation or a constant, as an embedding table), ``indices``
int32 (TFLM's lists; int64 indices are refused as TFLM refuses them), a constant or an
activation. Constant indices are checked at emit time; an index out of ``[0, axis size)`` at
run time, which TFLM does not check (its reads go out of bounds), makes ``tvmgen_<name>_run``
return -1 instead.
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import Sources, check_types, expect_shape, input0_scheme
from .common import Kernel, OpSpec, check_counts, tensor_in, tensor_out, unsupported

SPEC = OpSpec(opcodes=("GATHER",), schemes=("float32", "int8"), classify=input0_scheme)


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (2,))
    x = tensor_in(graph, op, 0)
    idx = tensor_in(graph, op, 1)
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, x, y)
    if idx.dtype != "int32":
        raise unsupported(op, f"indices '{idx.name}' are {idx.dtype}; TFLM's GATHER takes int32")
    rank, irank = len(x.shape), len(idx.shape)
    axis = int(op.options.get("axis", 0))
    axis = axis + rank if axis < 0 else axis
    bd = int(op.options.get("batch_dims", 0))
    bd = bd + irank if bd < 0 else bd
    if not (0 <= axis < rank and 0 <= bd <= axis and bd < rank and bd <= irank):
        raise unsupported(op, f"axis {op.options.get('axis', 0)} and batch_dims "
                              f"{op.options.get('batch_dims', 0)} do not fit params "
                              f"{list(x.shape)} and indices {list(idx.shape)}")
    if list(x.shape[:bd]) != list(idx.shape[:bd]):
        raise unsupported(op, f"the first {bd} (batch) dimensions of params {list(x.shape)} and "
                              f"indices {list(idx.shape)} differ")
    expect_shape(op, y, [*x.shape[:axis], *idx.shape[bd:], *x.shape[axis + 1:]], "gathering")
    batch = int(np.prod(x.shape[:bd]))
    params = {"batch": batch, "outer": int(np.prod(x.shape[bd:axis])),
              "coords": int(np.prod(idx.shape[bd:])), "axis": x.shape[axis],
              "inner": int(np.prod(x.shape[axis + 1:]))}
    src = Sources()
    params["x"], params["x_const"] = src.add(x, "params")
    if idx.is_const:
        values = np.asarray(idx.data).reshape(-1)
        bad = values[(values < 0) | (values >= x.shape[axis])]
        if bad.size:
            raise unsupported(op, f"index {int(bad[0])} of '{idx.name}' is out of range for "
                                  f"dimension {axis} of '{x.name}' ({x.shape[axis]})")
    params["idx"], params["idx_const"] = src.add(idx, "indices")
    return Kernel(op, "gather.c.j2", params, src.inputs, [y.index], src.constants,
                  status=not idx.is_const)

"""GATHER_ND (TFLM ``gather_nd.cc``): the slices of ``params`` at the index tuples in the last
dimension of ``indices`` (``out[i.., n..] = params[indices[i.., 0], ..., indices[i.., nd-1],
n..]``).

``params`` float32 or int8, ``indices`` int32 (TFLM's lists), with ``nd`` at most 5 and at most
the rank of ``params``. Constant indices become a table of element offsets at emit time (one
out of range is refused); activation indices are turned into offsets when the model runs, and
an offset outside ``params``, which TFLM's Eval reports as an error, makes
``tvmgen_<name>_run`` return -1 (TFLM checks the flat offset only, and so does the emitter).
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import Sources, check_types, expect_shape, input0_scheme
from .common import ConstArray, Kernel, OpSpec, check_counts, tensor_in, tensor_out, unsupported

SPEC = OpSpec(opcodes=("GATHER_ND",), schemes=("float32", "int8"), classify=input0_scheme)

#: TFLM's MAX_INDICES_ND.
MAX_ND = 5


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    check_counts(op, (2,))
    x = tensor_in(graph, op, 0)
    idx = tensor_in(graph, op, 1)
    y = tensor_out(graph, op)
    check_types(op, SPEC.schemes, x, y)
    if idx.dtype != "int32":
        raise unsupported(op, f"indices '{idx.name}' are {idx.dtype}; TFLM's GATHER_ND takes "
                              "int32")
    if len(x.shape) < 1 or len(idx.shape) < 1:
        raise unsupported(op, "params and indices must be at least vectors")
    nd = idx.shape[-1]
    if nd > len(x.shape) or nd > MAX_ND:
        raise unsupported(op, f"index tuples of {nd} values: at most the rank of params "
                              f"{list(x.shape)} and at most {MAX_ND}")
    expect_shape(op, y, [*idx.shape[:-1], *x.shape[nd:]], "gathering")
    n_slices = int(np.prod(idx.shape[:-1]))
    slice_size = int(np.prod(x.shape[nd:]))
    flat = x.num_elements
    counts, remain = [], flat
    for d in range(nd):
        remain //= x.shape[d]
        counts.append(remain)
    params = {"n": n_slices, "nd": nd, "slice": slice_size, "flat": flat, "counts": counts}
    src = Sources()
    params["x"], params["x_const"] = src.add(x, "params")
    params["idx_const"] = idx.is_const
    if idx.is_const:
        tuples = np.asarray(idx.data, dtype=np.int64).reshape(n_slices, nd)
        pos = tuples @ np.asarray(counts, dtype=np.int64) if nd else np.zeros(n_slices, np.int64)
        bad = np.flatnonzero((pos < 0) | (pos + slice_size > flat))
        if bad.size:
            raise unsupported(op, f"index {tuples[bad[0]].tolist()} of '{idx.name}' is outside "
                                  f"params '{x.name}' {list(x.shape)}")
        src.constants.append(ConstArray("offsets", "int32_t", pos.astype(np.int32)))
    else:
        params["idx"] = src.add(idx, "indices")[0]
    return Kernel(op, "gather_nd.c.j2", params, src.inputs, [y.index], src.constants,
                  status=not idx.is_const)

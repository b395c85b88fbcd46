"""SVDF as TFLM's ``svdf.cc`` / ``svdf_common.cc``: float32, and int8 with an int16 (the
keyword model's) or int8 time-weight and state type.

Per invocation, for each batch: the state (a variable tensor ``[batch, num_filters *
memory_size]``, each filter's ``memory_size`` values in time order) is shifted left by one value
over the whole buffer; every filter's feature dot product (``weights_feature`` on the input)
becomes its newest value; the time dot products (``weights_time`` on each filter's memory) are
summed over ``rank`` filters per unit, plus the bias, giving the output.

* float32: TFLM's float loops in its order, then the fused activation (NONE, RELU, RELU_N1_TO_1,
  RELU6, TANH, SIGN_BIT as ``ActivationValFloat``).
* int8: the feature product requantized by ``input * weights_feature / state`` scales (computed
  in float32 as TFLM does), clamped to the state type, plus the state zero point; the time
  product (minus the state zero point) plus the int32 bias requantized by ``state * weights_time /
  output``, plus the output zero point, clamped to int8. TFLM applies no fused activation there,
  takes a bias scale of ``state * weights_time`` (within 1e-5) and reads the state as the time
  weights' type, so both must have one type.

The bias is required (TFLM's Prepare dereferences it: a model without one crashes it). int16
input (int16x8) is refused as TFLM refuses it.
"""

from __future__ import annotations

import numpy as np

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from .common import (
    C_TYPES,
    ConstArray,
    Kernel,
    OpSpec,
    check_dtype,
    per_tensor,
    quantized_range,
    tensor_in,
    tensor_out,
    unsupported,
)

SPEC = OpSpec(opcodes=("SVDF",), schemes=("float32", "int8"), state=True)

#: The fused activations of TFLM's float SVDF (``ActivationValFloat``).
FLOAT_ACTIVATIONS = ("NONE", "RELU", "RELU_N1_TO_1", "RELU6", "TANH", "SIGN_BIT")


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    if len(op.inputs) != 5 or len(op.outputs) != 1:
        raise unsupported(op, f"expects 5 inputs (input, weights_feature, weights_time, bias, "
                              f"state) and 1 output, has {len(op.inputs)} and {len(op.outputs)}")
    x = tensor_in(graph, op, 0, const=False)
    wf = tensor_in(graph, op, 1, const=True)
    wt = tensor_in(graph, op, 2, const=True)
    b = tensor_in(graph, op, 3, const=True, optional=True)
    state = tensor_in(graph, op, 4)  # a variable: any data it holds is ignored, as TFLM does
    y = tensor_out(graph, op)
    if not state.is_variable:
        raise unsupported(op, f"state '{state.name}' (input 4) must be a variable tensor")
    rank = int(op.options.get("rank") or 0)
    if len(x.shape) != 2 or len(wf.shape) != 2 or len(wt.shape) != 2:
        raise unsupported(op, "input, weights_feature and weights_time must be 2-D")
    batch, n_input = x.shape
    n_filter, memory = wf.shape[0], wt.shape[1]
    if rank < 1 or n_filter % rank:
        raise unsupported(op, f"rank {rank} does not divide the {n_filter} filters")
    units = n_filter // rank
    if wf.shape[1] != n_input or wt.shape[0] != n_filter:
        raise unsupported(op, f"weights_feature {list(wf.shape)} and weights_time "
                              f"{list(wt.shape)} do not fit input {list(x.shape)}")
    if tuple(y.shape) != (batch, units):
        raise unsupported(op, f"output '{y.name}' {list(y.shape)}, expected [{batch}, {units}]")
    if tuple(state.shape) != (batch, memory * n_filter):
        raise unsupported(op, f"state '{state.name}' {list(state.shape)}, expected "
                              f"[{batch}, {memory * n_filter}]")
    if b is None:
        raise unsupported(op, "SVDF needs its bias (input 3): TFLM's Prepare dereferences it "
                              "(without one it crashes)")
    if tuple(b.shape) != (units,):
        raise unsupported(op, f"bias '{b.name}' {list(b.shape)}, expected [{units}]")
    params = {"batch": batch, "input": n_input, "filters": n_filter, "units": units,
              "rank": rank, "memory": memory, "dtype": x.dtype}
    act = op.options.get("fused_activation_function", "NONE")
    if x.dtype == "float32":
        for t in (wf, wt, state, y, b):
            check_dtype(op, t, ("float32",))
        if act not in FLOAT_ACTIVATIONS:
            raise unsupported(op, f"fused activation {act} not supported (supported: "
                                  f"{', '.join(FLOAT_ACTIVATIONS)})")
        params["act"] = act
        consts = [ConstArray("wf", "float", wf.data.astype(np.float32).reshape(-1)),
                  ConstArray("wt", "float", wt.data.astype(np.float32).reshape(-1)),
                  ConstArray("b", "float", b.data.astype(np.float32).reshape(-1))]
        return Kernel(op, "svdf.c.j2", params, [x.index, state.index], [y.index], consts,
                      scratch_bytes=4 * batch * n_filter, mutable_inputs=(1,))
    check_dtype(op, x, ("int8",))
    check_dtype(op, wf, ("int8",))
    check_dtype(op, wt, ("int16", "int8"))
    check_dtype(op, y, ("int8",))
    if state.dtype != wt.dtype:
        raise unsupported(op, f"state '{state.name}' is {state.dtype} but weights_time "
                              f"'{wt.name}' {wt.dtype}; TFLM reads the state as the time "
                              "weights' type, so they must match")
    check_dtype(op, b, ("int32",))
    xs, xzp = per_tensor(op, x)
    wfs, _ = per_tensor(op, wf)
    wts, _ = per_tensor(op, wt)
    ss, szp = per_tensor(op, state)
    ys, yzp = per_tensor(op, y)
    bs, _ = per_tensor(op, b)
    f = np.float32
    if abs(float(bs) - float(f(ss) * f(wts))) >= 1e-5:
        raise unsupported(op, f"bias '{b.name}' scale {bs!r} is not state scale x time weights "
                              f"scale ({float(f(ss) * f(wts))!r}), as TFLM requires")
    m1, s1 = q.quantize_multiplier(float(f(xs) * f(wfs) / f(ss)))
    m2, s2 = q.quantize_multiplier(float(f(ss) * f(wts) / f(ys)))
    lo, hi = quantized_range(state)
    params.update(in_zp=xzp, state_zp=szp, out_zp=yzp, m1=m1, s1=s1, m2=m2, s2=s2,
                  state_min=lo, state_max=hi, state_ctype=C_TYPES[state.dtype])
    consts = [ConstArray("wf", "int8_t", wf.data.astype(np.int8).reshape(-1)),
              ConstArray("wt", C_TYPES[wt.dtype], wt.data.reshape(-1)),
              ConstArray("b", "int32_t", b.data.astype(np.int32).reshape(-1))]
    return Kernel(op, "svdf.c.j2", params, [x.index, state.index], [y.index], consts,
                  scratch_bytes=4 * batch * (n_filter + units), mutable_inputs=(1,))

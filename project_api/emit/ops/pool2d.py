"""AVERAGE_POOL_2D and MAX_POOL_2D, int8, int16 and float32 (TFLM reference pooling).

The window is clipped to the input; a quantized average divides the int32 sum by the number of
in-bounds elements, rounding half away from zero. Quantized pooling does not requantize, so
input and output must share scale and zero point (as TFLite requires).

On a DSP target an int8 pool over a multiple of 4 channels (an average over at most 255
elements) gets ``pool2d.dsp.c.j2``: four channels per word (SXTAB16 sums, SSUB8/SEL maxima).
On Helium (an average over at most 255 elements, any channel count) ``pool2d.mve.c.j2``: 8
int16 sums or 16 int8 maxima a vector.
"""

from __future__ import annotations

from project_api.tflite.graph import Graph, Operator

from .. import quantize as q
from ..target import GENERIC, Target
from .common import (
    Kernel,
    OpSpec,
    accumulator,
    check_activation,
    check_dtype,
    check_same_type,
    check_shape,
    check_spatial,
    compute_padding,
    per_tensor,
    quantized_range,
    unary_operands,
    unsupported,
)

SPEC = OpSpec(opcodes=("AVERAGE_POOL_2D", "MAX_POOL_2D"),
              schemes=("float32", "int8", "int16x8"), dsp=("int8",))


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y = unary_operands(op, graph)
    check_spatial(op)
    act = check_activation(op)
    check_dtype(op, x, ("int8", "int16", "float32"))
    check_same_type(op, x, y)
    if len(x.shape) != 4:
        raise unsupported(op, f"input '{x.name}' must be 4-D NHWC")
    n, h, w, c = x.shape
    fh, fw = op.options["filter_height"], op.options["filter_width"]
    sh, sw = op.options["stride_h"], op.options["stride_w"]
    oh, pad_h = compute_padding(h, fh, sh, 1, op.options["padding"])
    ow, pad_w = compute_padding(w, fw, sw, 1, op.options["padding"])
    if oh < 1 or ow < 1:
        raise unsupported(op, "the pooling window is larger than the input")
    check_shape(op, y, (n, oh, ow, c))
    params = {"n": n, "h": h, "w": w, "c": c, "oh": oh, "ow": ow, "fh": fh, "fw": fw,
              "sh": sh, "sw": sw, "pad_h": pad_h, "pad_w": pad_w, "dtype": x.dtype,
              "kind": "avg" if op.opcode == "AVERAGE_POOL_2D" else "max", "scratch": False}
    if x.dtype != "float32":
        xs, xz = per_tensor(op, x)
        ys, yz = per_tensor(op, y)
        if (q.f32(xs), xz) != (q.f32(ys), yz):
            raise unsupported(op, f"{x.dtype} pooling needs the same scale and zero point on "
                                  "input and output")
        lo, hi = q.activation_range_quantized(act, ys, yz, *quantized_range(y))
        params["qmin"] = quantized_range(y)[0]
    else:
        lo, hi = q.activation_range_float(act)
    params.update(act_min=lo, act_max=hi)
    # an int8 average's sums of at most 255 elements fit 16 bits (the vector kernels' lanes)
    lanes16 = params["kind"] == "max" or fh * fw <= 255
    if target.mve and x.dtype == "int8" and lanes16:
        params["mve"] = True
        return Kernel(op, "pool2d.mve.c.j2", params, [x.index], [y.index],
                      headers=("mve.h.j2",))
    if target.dsp and x.dtype == "int8" and c % 4 == 0 and lanes16:
        return Kernel(op, "pool2d.dsp.c.j2", params, [x.index], [y.index])
    scratch = accumulator(params, c) if params["kind"] == "avg" else 0
    return Kernel(op, "pool2d.c.j2", params, [x.index], [y.index], scratch_bytes=scratch)

"""RESIZE_NEAREST_NEIGHBOR (TFLM ``resize_nearest_neighbor.cc``,
``reference_ops::ResizeNearestNeighbor``): NHWC; each output pixel copies its nearest input
pixel.

The source row and column of every output row and column are computed at emit time as TFLM
computes them, in float32: scale ``in / out`` (``(in - 1) / (out - 1)`` with
``align_corners``), ``(i + 0.5 if half_pixel_centers) * scale``, then floor (rounding half away
from zero with ``align_corners``), clamped to the input. The kernel is one ``memcpy`` of the
channels per output pixel from two offset tables. Types: float32, int8, int16 (TFLM's list),
the codes copied as they are.
"""

from __future__ import annotations

import math

import numpy as np

from project_api.tflite.graph import Graph, Operator

from ..target import GENERIC, Target
from ._movement import Sources
from ._resize import operands
from .common import ConstArray, Kernel, OpSpec, dtype_scheme

SPEC = OpSpec(opcodes=("RESIZE_NEAREST_NEIGHBOR",), schemes=("float32", "int8", "int16"),
              classify=dtype_scheme)


def nearest(out_size: int, in_size: int, align_corners: bool, half_pixel: bool) -> list[int]:
    """TFLM's GetNearestNeighbor for every output index."""
    f = np.float32
    if align_corners and out_size > 1:
        scale = f(in_size - 1) / f(out_size - 1)
    else:
        scale = f(in_size) / f(out_size)
    offset = f(0.5 if half_pixel else 0.0)
    result = []
    for i in range(out_size):
        v = float((f(i) + offset) * scale)
        k = int(math.copysign(math.floor(abs(v) + 0.5), v)) if align_corners else math.floor(v)
        k = min(k, in_size - 1)
        result.append(max(0, k) if half_pixel else k)
    return result


def prepare(op: Operator, graph: Graph, target: Target = GENERIC) -> Kernel:
    x, y, oh, ow, ac, hpc = operands(op, graph, SPEC.schemes)
    n, ih, iw, c = x.shape
    rows = np.asarray(nearest(oh, ih, ac, hpc), np.int64) * iw * c
    cols = np.asarray(nearest(ow, iw, ac, hpc), np.int64) * c
    src = Sources()
    name, const = src.add(x, "input")
    consts = [*src.constants, ConstArray("rows", "int32_t", rows.astype(np.int32)),
              ConstArray("cols", "int32_t", cols.astype(np.int32))]
    params = {"x": name, "x_const": const, "n": n, "oh": oh, "ow": ow, "c": c,
              "batch": ih * iw * c}
    return Kernel(op, "resize_nearest_neighbor.c.j2", params, src.inputs, [y.index], consts)

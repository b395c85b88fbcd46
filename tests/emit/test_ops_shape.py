"""Randomized parity of the shape and data movement operators against TFLite Micro and LiteRT.

Two groups, one machinery (``tests/helpers/emit_parity.py``: emit, compile under ASan and
UBSan, run, compare bit-exact with TFLM and within tolerance of LiteRT):

* **Views** (SQUEEZE, EXPAND_DIMS, and RESHAPE in the types its first cases lack), in every
  element type they declare, in two forms: ``direct`` (a graph input viewed straight into a
  graph output: the one case that copies) and ``chained`` (between two ADDs, so the view
  aliases a buffer of the activation pool and the second ADD reads it through the alias).
* **Movers** (PAD, PADV2, MIRROR_PAD, CONCATENATION, SPLIT, SPLIT_V, SLICE, STRIDED_SLICE,
  TRANSPOSE, PACK, UNPACK, GATHER, GATHER_ND, SHAPE, BROADCAST_TO, DEPTH_TO_SPACE,
  SPACE_TO_DEPTH, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, RESIZE_NEAREST_NEIGHBOR,
  RESIZE_BILINEAR, ZEROS_LIKE, FILL): one case per operator and element type TFLM takes, its
  branches the attribute variants (odd shapes, every rank the kernel takes, negative axes and
  strides, masks, constant operands, int8 zero points at both ends of the range). SLICE,
  STRIDED_SLICE, SPLIT, SPLIT_V and UNPACK also run ``chained`` where their outputs are
  contiguous runs of the input, so they are views at an offset into the pool.

Activation indices (GATHER, GATHER_ND) need in-range inputs, so they have their own test with
chosen inputs, including the out-of-range index that makes the run fail. The front of a
MobileNetV2 exported from PyTorch (NCHW input, TRANSPOSE, PAD, CONV_2D) runs bit-exact on the
host, and for int8 on QEMU's Cortex-M4.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import require_tool
from helpers.emit_parity import SEEDS, Case, Prefetcher, check_parity, run_built

from project_api.emit import emit_sources
from project_api.emit import reference as R
from project_api.tflite.builder import ModelBuilder
from project_api.tflite.tensors import TensorRef

pytest_plugins = ("helpers.emit_parity",)

# --- views ------------------------------------------------------------------------------------

#: (op, the view's options, input shape): several per op, each a branch of every case.
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "SQUEEZE": [{"input_shape": (1, 4, 1, 3)}, {"input_shape": (2, 1, 3), "dims": (-2,)},
                {"input_shape": (1, 5, 1, 1), "dims": (0, 3)}],
    "EXPAND_DIMS": [{"input_shape": (1, 4, 3), "axis": 0}, {"input_shape": (2, 5), "axis": -1},
                    {"input_shape": (3, 2, 2), "axis": 2}],
    "RESHAPE": [{"input_shape": (1, 4, 4, 3), "shape": (1, -1)},
                {"input_shape": (2, 6), "shape": (3, 4), "shape_input": False},
                {"input_shape": (1, 12), "shape": (2, 2, 3)}],
}
#: The builder modes of each op's element types (int16x8: int16, int32: plain int32).
MODES: dict[str, tuple[str, ...]] = {
    "SQUEEZE": ("float32", "int8", "int16x8", "int32"),
    "EXPAND_DIMS": ("float32", "int8", "int16x8"),
    "RESHAPE": ("int16x8", "int32"),  # float32 and int8: tests/emit/test_emit_random.py
}


def _view(mb: ModelBuilder, op: str, x: TensorRef, opts: dict[str, Any]) -> TensorRef:
    if op == "SQUEEZE":
        return mb.squeeze(x, opts.get("dims"))
    if op == "EXPAND_DIMS":
        return mb.expand_dims(x, opts["axis"])
    return mb.reshape(x, opts["shape"], opts.get("shape_input", True))


def _chained(op: str):
    """A branch ``input -> ADD (constant) -> <op> -> ADD (constant) -> output``."""

    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        x = mb.input(opts["input_shape"], dtype, value_range=(-2.0, 2.0), name=name)
        t = mb.add(x, mb.rng.uniform(-1.0, 1.0, size=x.shape[-1:]).astype(np.float32))
        t = _view(mb, op, t, opts)
        return mb.add(t, mb.rng.uniform(-1.0, 1.0, size=t.shape[-1:]).astype(np.float32))

    return branch


def _view_cases() -> list[Case]:
    cases = []
    for op, modes in MODES.items():
        for mode in modes:
            forms = ("direct",) if mode == "int32" else ("direct", "chained")  # no int32 ADD
            for form in forms:
                case = Case(op, mode, {"form": form},
                            branch=_chained(op) if form == "chained" else None)
                for s in SEEDS:
                    for v in VARIANTS[op]:
                        case.branches.append({**v, "seed": s})
                cases.append(case)
    return cases


# --- movers -----------------------------------------------------------------------------------

#: Builder mode of each element-type scheme.
MODE_OF = {"float32": "float32", "int8": "int8", "int16": "int16x8", "int32": "int32",
           "int64": "int64", "bool": "bool", "uint8": "uint8"}
#: int8 inputs whose zero point is at the ends of the range (-128 and 127).
ZP_LOW, ZP_HIGH = {"value_range": (0.0, 2.0)}, {"value_range": (-2.0, 0.0)}
PADS4 = ((0, 0), (1, 2), (2, 0), (0, 1))

#: Per operator: the element types TFLM takes (as the registry names them) and the branches.
MOVERS: dict[str, tuple[tuple[str, ...], list[dict[str, Any]]]] = {
    "PAD": (("float32", "int8", "int16", "int32"), [
        {"input_shape": (1, 4, 4, 3), "paddings": PADS4},
        {"input_shape": (1, 5, 5, 2), "paddings": ((0, 0), (1, 1), (1, 1), (0, 0)), **ZP_LOW},
        {"input_shape": (2, 3), "paddings": ((1, 0), (0, 2)), **ZP_HIGH},
        {"input_shape": (2, 1, 3, 2, 2), "paddings": ((0, 1), (0, 0), (1, 0), (0, 0), (2, 1))},
        {"input_shape": (3,), "paddings": ((2, 3),)}]),
    "PADV2": (("float32", "int8", "int16", "int32"), [
        {"input_shape": (1, 4, 4, 3), "paddings": PADS4, "value": 0.75},
        {"input_shape": (1, 3, 5, 2), "paddings": ((0, 0), (2, 1), (1, 1), (0, 0)),
         "value": -1.5, **ZP_LOW},
        {"input_shape": (2, 3), "paddings": ((1, 1), (3, 0)), "value": 1.25, **ZP_HIGH}]),
    "MIRROR_PAD": (("float32", "int8"), [
        {"input_shape": (1, 4, 4, 3), "paddings": ((0, 0), (1, 3), (3, 0), (0, 2))},
        {"input_shape": (1, 4, 4, 3), "paddings": ((0, 0), (1, 4), (4, 0), (0, 3)),
         "padding_mode": "SYMMETRIC"},
        {"input_shape": (3, 5), "paddings": ((2, 1), (1, 4)), "paddings_dtype": "int64"},
        {"input_shape": (2, 3, 2), "paddings": ((1, 2), (2, 3), (2, 1)), "padding_mode": "SYMMETRIC"}]),
    "CONCATENATION": (("float32", "int8", "int16", "int32", "int64", "bool"), [
        {"input_shape": (1, 4, 4, 3), "b_shape": (1, 4, 4, 5), "axis": -1},
        {"input_shape": (2, 3), "b_shape": (1, 3), "axis": 0, "b_input": False},
        {"input_shape": (1, 2, 3, 2), "b_shape": (1, 4, 3, 2), "axis": 1, **ZP_LOW},
        {"input_shape": (3, 1, 2), "b_shape": (3, 2, 2), "axis": -2, **ZP_HIGH}]),
    "SPLIT": (("float32", "int8", "int16", "int32"), [
        {"input_shape": (1, 4, 4, 6), "num_splits": 3, "axis": -1},
        {"input_shape": (4, 3), "num_splits": 2, "axis": 0},
        {"input_shape": (1, 6, 2), "num_splits": 2, "axis": 1}]),
    "SPLIT_V": (("float32", "int8", "int16", "int32"), [
        {"input_shape": (1, 4, 4, 6), "sizes": (1, -1, 2), "axis": -1},
        {"input_shape": (5, 3), "sizes": (3, 2), "axis": 0},
        {"input_shape": (2, 7, 1), "sizes": (4, 1, 2), "axis": -2}]),
    "SLICE": (("float32", "int8", "int16", "int32", "bool"), [
        {"input_shape": (1, 4, 4, 3), "begin": (0, 1, 0, 1), "size": (1, 2, -1, 2)},
        {"input_shape": (3, 5), "begin": (1, 0), "size": (2, 5), "index_dtype": "int64"},
        {"input_shape": (2, 3, 2, 2, 3), "begin": (1, 0, 1, 0, 2), "size": (1, 3, -1, 1, 1)},
        {"input_shape": (7,), "begin": (6,), "size": (1,)}]),
    "STRIDED_SLICE": (("float32", "int8", "int16", "int32", "bool"), [
        {"input_shape": (1, 4, 4, 3), "begin": (0, 1, 3, 0), "end": (1, 4, 0, 3),
         "strides": (1, 2, -1, 1)},
        {"input_shape": (1, 5, 6, 2), "begin": (0, -4, 1, 1), "end": (0, -1, 100, 2),
         "strides": (1, 1, 2, 1), "begin_mask": 1, "end_mask": 1, "shrink_axis_mask": 8},
        {"input_shape": (6, 4), "begin": (5, 0), "end": (0, 4), "strides": (-2, 1),
         "begin_mask": 1, "end_mask": 1},
        {"input_shape": (3, 4, 5), "begin": (1, -1, 0), "end": (2, 0, 5), "strides": (1, -1, 3),
         "shrink_axis_mask": 1, "end_mask": 2},
        {"input_shape": (4, 3), "begin": (-1, 0), "end": (0, 3), "strides": (1, 1),
         "shrink_axis_mask": 1},
        # as TFLite's converter writes a streaming model's slices (TFLM's seanet tests): the
        # masked dimensions' values are 0, the kept range from the end
        {"input_shape": (1, 8, 6, 2), "begin": (0, -6, 0, 0), "end": (0, 0, 0, 2),
         "strides": (1, 1, 1, 1), "begin_mask": 13, "end_mask": 15},
        {"input_shape": (1, 1, 12, 4), "begin": (0, 0, 1, 0), "end": (0, 0, -1, 0),
         "strides": (1, 1, 1, 1), "begin_mask": 9, "end_mask": 11}]),
    "TRANSPOSE": (("float32", "int8", "int16"), [
        {"input_shape": (1, 3, 4, 5), "perm": (0, 2, 3, 1)},
        {"input_shape": (2, 4, 3, 1), "perm": (0, 3, 1, 2)},
        {"input_shape": (3, 5), "perm": (1, 0)},
        {"input_shape": (2, 3, 1, 2, 3), "perm": (4, 2, 0, 1, 3)},
        {"input_shape": (4,), "perm": (0,)}]),
    "PACK": (("float32", "int8", "int16", "int32", "int64"), [
        {"input_shape": (2, 3), "axis": 0},
        {"input_shape": (1, 4, 3), "axis": -1, "b_input": False},
        {"input_shape": (3, 2, 2), "axis": 1, **ZP_LOW}]),
    "UNPACK": (("float32", "int8", "int16", "int32"), [
        {"input_shape": (3, 2, 4), "axis": 1},
        {"input_shape": (3, 4), "axis": 0},
        {"input_shape": (1, 2, 3), "axis": -1}]),
    "GATHER": (("float32", "int8"), [
        {"input_shape": (5, 3), "indices": (4, 0, 2, 2)},
        {"input_shape": (2, 4, 3), "indices": ((3, 0), (1, 1), (0, 2)), "axis": 1},
        {"input_shape": (2, 3, 4), "indices": ((2, 0), (1, 1)), "axis": -1, "batch_dims": 1},
        {"input_shape": (6,), "indices": 5, **ZP_LOW}]),
    "GATHER_ND": (("float32", "int8"), [
        {"input_shape": (4, 3, 2), "indices": ((0, 1), (3, 2), (1, 0))},
        {"input_shape": (3, 4), "indices": ((2,), (0,))},
        {"input_shape": (2, 3, 4), "indices": (((1, 2, 3), (0, 0, 0)), ((1, 0, 1), (0, 2, 2)))},
        {"input_shape": (2, 2, 2, 2, 2, 2), "indices": ((1, 0, 1, 1, 0),), **ZP_HIGH}]),
    "BROADCAST_TO": (("float32", "int8", "int16", "int32", "int64", "bool"), [
        {"input_shape": (1, 1, 3), "shape": (2, 4, 3)},
        {"input_shape": (3,), "shape": (2, 3)},
        {"input_shape": (2, 1), "shape": (3, 2, 4), "shape_dtype": "int64"},
        {"input_shape": (1, 2, 1, 1, 3), "shape": (2, 2, 2, 1, 3)}]),
    "DEPTH_TO_SPACE": (("float32", "int8"), [
        {"input_shape": (1, 2, 3, 8), "block_size": 2},
        {"input_shape": (2, 1, 2, 18), "block_size": 3},
        {"input_shape": (1, 2, 2, 3), "block_size": 1}]),
    "SPACE_TO_DEPTH": (("float32", "int8"), [
        {"input_shape": (1, 4, 6, 2), "block_size": 2},
        {"input_shape": (2, 3, 6, 1), "block_size": 3}]),
    "BATCH_TO_SPACE_ND": (("float32", "int8"), [
        {"input_shape": (4, 2, 3, 2), "block": (2, 2), "crops": ((0, 1), (1, 0))},
        {"input_shape": (6, 2, 2, 1), "block": (3, 2), "crops": ((1, 1), (0, 0))},
        {"input_shape": (4, 3, 2), "block": (2,), "crops": ((1, 2),)}]),
    "SPACE_TO_BATCH_ND": (("float32", "int8"), [
        {"input_shape": (1, 4, 6, 2), "block": (2, 2), "paddings": ((0, 0), (0, 0))},
        {"input_shape": (2, 6, 4, 1), "block": (3, 2), "paddings": ((0, 0), (0, 0))},
        {"input_shape": (1, 6, 2), "block": (2,), "paddings": ((0, 0),)}]),
    "RESIZE_NEAREST_NEIGHBOR": (("float32", "int8", "int16"), [
        {"input_shape": (1, 3, 4, 2), "size": (5, 7)},
        {"input_shape": (2, 5, 6, 3), "size": (3, 4), "align_corners": True},
        {"input_shape": (1, 3, 4, 2), "size": (7, 9), "half_pixel_centers": True},
        {"input_shape": (1, 4, 3, 1), "size": (6, 5), "align_corners": True,
         "half_pixel_centers": True},
        {"input_shape": (1, 2, 2, 1), "size": (1, 1), "align_corners": True},
        # source positions 0.5 and 2.5: TFLM rounds half away from zero
        {"input_shape": (1, 2, 4, 2), "size": (3, 7), "align_corners": True}]),
    "RESIZE_BILINEAR": (("float32", "int8"), [
        {"input_shape": (1, 3, 4, 2), "size": (5, 7)},
        {"input_shape": (2, 5, 6, 3), "size": (3, 4), "align_corners": True},
        {"input_shape": (1, 3, 4, 2), "size": (7, 9), "half_pixel_centers": True, **ZP_LOW},
        {"input_shape": (1, 4, 5, 1), "size": (8, 10), "half_pixel_centers": True, **ZP_HIGH},
        {"input_shape": (1, 2, 2, 3), "size": (1, 3), "align_corners": True}]),
    "ZEROS_LIKE": (("float32", "int8", "int32", "int64"), [
        {"input_shape": (1, 4, 4, 3)}, {"input_shape": (5,)}, {"input_shape": (2, 1, 3)}]),
    "FILL": (("float32", "int8", "int32"), [
        {"input_shape": (), "dims": (2, 3)}, {"input_shape": (), "dims": (1, 4, 1, 2)},
        {"input_shape": (), "dims": (5,), "dims_dtype": "int64"}]),
}

#: Where LiteRT cannot be the second reference, and why.
LITERT_DIFFERS = {
    # LiteRT's ZEROS_LIKE takes int32, int64 and float32 only.
    ("ZEROS_LIKE", "int8"),
}
#: SPACE_TO_BATCH_ND with padding: TFLM pads with memory its kernel never sets (its
#: output_offset), so only LiteRT checks these (the emitter pads with the real value 0).
S2B_PADDED = [
    {"input_shape": (1, 4, 6, 2), "block": (2, 2), "paddings": ((1, 1), (0, 2))},
    {"input_shape": (2, 3, 4, 1), "block": (3, 2), "paddings": ((2, 1), (1, 1)), **ZP_LOW},
    {"input_shape": (1, 5, 2), "block": (2,), "paddings": ((0, 1),), **ZP_HIGH}]


def _mover_cases() -> list[Case]:
    cases = []
    for op, (schemes, variants) in MOVERS.items():
        for scheme in schemes:
            cases.append(Case(op, MODE_OF[scheme], {}, _branches(variants, scheme),
                              litert=(op, scheme) not in LITERT_DIFFERS))
    for scheme in ("float32", "int8"):
        cases.append(Case("SPACE_TO_BATCH_ND", MODE_OF[scheme], {"padded": True},
                          _branches(S2B_PADDED, scheme), tflm=False))
    # SHAPE writes int32 whatever its input: one case per input type
    for mode in ("float32", "int8", "int16x8"):
        cases.append(Case("SHAPE", mode, {"input": mode}, [
            {"input_shape": (1, 4, 4, 3), "seed": 0}, {"input_shape": (7,), "seed": 1},
            {"input_shape": (2, 1, 3, 1, 2), "seed": 2}]))
    # PADV2 with the pad value an activation; FILL with a constant value
    for scheme in ("float32", "int8", "int16", "int32"):
        cases.append(Case("PADV2", MODE_OF[scheme], {"value": "input"}, [
            {"input_shape": (1, 3, 3, 2), "paddings": ((0, 0), (1, 0), (2, 1), (0, 1)),
             "seed": 0}, {"input_shape": (4, 2), "paddings": ((0, 2), (1, 1)), "seed": 1}],
            branch=_pad_value_input))
    for scheme in ("float32", "int8", "int32"):
        cases.append(Case("FILL", MODE_OF[scheme], {"value": "constant"}, [
            {"input_shape": (2, 2), "dims": (3, 2), "value": 1.5, "seed": 0},
            {"input_shape": (2, 2), "dims": (4,), "value": -0.5, "seed": 1}],
            branch=_fill_constant))
    # TILE: TFLM has no kernel, so LiteRT is the reference (as SSD detectors use it)
    for scheme in ("float32", "int8", "int16", "int32", "int64", "bool", "uint8"):
        cases.append(Case("TILE", MODE_OF[scheme], {}, [
            {"input_shape": (1, 2, 3), "multiples": (2, 1, 3), "seed": 0},
            {"input_shape": (4,), "multiples": (3,), "seed": 1},
            {"input_shape": (2, 1, 3, 2), "multiples": (1, 4, 1, 2), "multiples_dtype": "int64",
             "seed": 2}], branch=_tile, tflm=False))
        # the multiples computed in the model (SSD detectors take them from a SHAPE)
        cases.append(Case("TILE", MODE_OF[scheme], {"multiples": "computed"}, [
            {"input_shape": (1, 2, 3), "multiples": (2, 1, 3), "computed": True, "seed": 0},
            {"input_shape": (2, 1, 3, 2), "multiples": (1, 4, 1, 2), "computed": True,
             "seed": 1}], branch=_tile, tflm=False))
    # views at an offset: the contiguous cases between two ADDs, so the outputs live in the pool
    for op, variants in CHAINED.items():
        for scheme in ("float32", "int8", "int16"):
            cases.append(Case(op, MODE_OF[scheme], {"form": "chained"},
                              _branches(variants, scheme),
                              branch=_chained_mover(op)))
    return cases


def _branches(variants: list[dict[str, Any]], scheme: str) -> list[dict[str, Any]]:
    """One branch per variant, seeds in turn; the zero-point ranges only for int8."""
    out = []
    for k, v in enumerate(variants):
        br = {**v, "seed": SEEDS[k % len(SEEDS)]}
        if scheme != "int8":
            br.pop("value_range", None)
        out.append(br)
    return out


def _pad_value_input(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    x = mb.input(opts["input_shape"], dtype, name=name)
    v = mb.input((1,), dtype, quant=x.quant, name=f"{name}_value")
    return mb.pad(x, opts["paddings"], v)


def _tile(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    x = mb.input(opts["input_shape"], dtype, name=name)
    mult_dtype = opts.get("multiples_dtype", "int32")
    multiples = mb.constant(np.asarray(opts["multiples"]), mult_dtype)
    if opts.get("computed"):  # SHAPE of a constant of that shape: the multiples, computed
        multiples = mb.shape(mb.constant(np.zeros(opts["multiples"]), "float32"))
    shape = tuple(n * m for n, m in zip(opts["input_shape"], opts["multiples"], strict=True))
    (y,) = mb.operator("TILE", [x, multiples], [(shape, dtype, x.quant)])
    return y


def _fill_constant(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    x = mb.input(opts["input_shape"], dtype, name=name)  # the model's input, added to the fill
    q = x.quant
    filled = mb.fill(opts["dims"], opts["value"], dtype, quant=q)
    return mb.concatenation([mb.reshape(x, (-1,)), mb.reshape(filled, (-1,))], axis=0)


#: Contiguous variants of the slicing ops (each output one run of the input).
CHAINED: dict[str, list[dict[str, Any]]] = {
    "SLICE": [{"input_shape": (1, 4, 4, 3), "begin": (0, 1, 0, 0), "size": (1, 2, 4, 3)},
              {"input_shape": (6, 5), "begin": (2, 0), "size": (3, -1)},
              {"input_shape": (1, 1, 8), "begin": (0, 0, 3), "size": (1, 1, 4)}],
    "STRIDED_SLICE": [
        {"input_shape": (1, 6, 2, 3), "begin": (0, 1, 0, 0), "end": (1, 4, 2, 3),
         "strides": (1, 1, 1, 1)},
        {"input_shape": (5, 4), "begin": (3, 0), "end": (0, 4), "strides": (1, 1),
         "shrink_axis_mask": 1},
        {"input_shape": (1, 9), "begin": (0, 2), "end": (1, 7), "strides": (1, 1),
         "end_mask": 1},
        {"input_shape": (1, 8, 6, 2), "begin": (0, -6, 0, 0), "end": (0, 0, 0, 2),
         "strides": (1, 1, 1, 1), "begin_mask": 13, "end_mask": 15}],
    "SPLIT": [{"input_shape": (1, 6, 2, 3), "num_splits": 3, "axis": 1},
              {"input_shape": (4, 3), "num_splits": 2, "axis": 0},
              {"input_shape": (1, 1, 6), "num_splits": 2, "axis": -1}],
    "SPLIT_V": [{"input_shape": (1, 7, 3), "sizes": (2, -1, 1), "axis": 1},
                {"input_shape": (5, 2), "sizes": (1, 4), "axis": 0},
                {"input_shape": (1, 6), "sizes": (3, 3), "axis": 1}],
    "UNPACK": [{"input_shape": (3, 2, 4), "axis": 0},
               {"input_shape": (1, 2, 3), "axis": 1},
               {"input_shape": (2, 5), "axis": 0}],
}


def _chained_mover(op: str):
    """``input -> ADD -> <op> -> ADD (each output) -> outputs``."""

    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str):
        opts = dict(opts)
        x = mb.input(opts.pop("input_shape"), dtype, value_range=(-2.0, 2.0), name=name)
        t = mb.add(x, mb.rng.uniform(-1.0, 1.0, size=x.shape[-1:]).astype(np.float32))
        out = getattr(mb, op.lower())(t, **opts)
        outs = out if isinstance(out, list) else [out]
        return [mb.add(o, mb.rng.uniform(-1.0, 1.0, size=o.shape[-1:] or (1,)).astype(
            np.float32)) for o in outs]

    return branch


def _of_input(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str):
    """``input -> SPLIT (outermost axis) -> ADD each``: the pieces are views into the caller's
    input buffer at their offsets."""
    x = mb.input(opts["input_shape"], dtype, value_range=(-2.0, 2.0), name=name)
    return [mb.add(t, np.float32(0.5)) for t in mb.split(x, opts["num_splits"], 0)]


def _into_output(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    """``input -> ADD -> SLICE (contiguous: a view at an offset) -> RESHAPE -> output``: the
    caller's output buffer cannot hold the ADD's whole result, so the RESHAPE copies."""
    x = mb.input(opts["input_shape"], dtype, value_range=(-2.0, 2.0), name=name)
    t = mb.add(x, np.float32(0.25))
    return mb.reshape(mb.slice(t, opts["begin"], opts["size"]), (-1,))


def _long_lived(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    """A small slice of a large tensor that lives on while two other large tensors are made:
    aliasing it would keep the large one alive (a higher lower bound), so it is copied."""
    x = mb.input((1, 64), dtype, value_range=(-2.0, 2.0), name=name)
    s = mb.slice(mb.add(x, np.float32(0.5)), (0, 8), (1, 8))
    w = mb.add(mb.add(x, np.float32(-0.5)), np.float32(0.25))
    return mb.add(mb.slice(w, (0, 0), (1, 8)), s)


#: The storage decisions around views at an offset (test_offset_views checks them).
OFFSET_CASES = [
    *(Case("SPLIT", MODE_OF[sc], {"form": "of_input"}, [
        {"input_shape": (4, 3), "num_splits": 2, "seed": 0},
        {"input_shape": (3, 1, 2), "num_splits": 3, "seed": 1}], branch=_of_input)
      for sc in ("float32", "int8", "int16")),
    *(Case("SLICE", MODE_OF[sc], {"form": "into_output"}, [
        {"input_shape": (4, 6), "begin": (1, 0), "size": (2, 6), "seed": 0}],
        branch=_into_output) for sc in ("float32", "int8")),
    *(Case("SLICE", MODE_OF[sc], {"form": "long_lived"}, [{"seed": 0}], branch=_long_lived)
      for sc in ("float32", "int8")),
]

# --- the front of a MobileNetV2 exported from PyTorch ---------------------------------------------


def mobilenet_v2_front(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str
                       ) -> TensorRef:
    """What PyTorch's export makes of MobileNetV2's first layers: an NCHW input transposed to
    NHWC, the convolutions' padding as explicit PADs (VALID convolutions), and the result
    transposed back to NCHW (the model's MEAN comes after, in its own family)."""
    n, c, h, w = opts["input_shape"]
    x = mb.input((n, c, h, w), dtype, value_range=(-1.0, 1.0), name=name)
    t = mb.transpose(x, (0, 2, 3, 1))
    t = mb.conv2d(mb.pad(t, ((0, 0), (1, 1), (1, 1), (0, 0))), 16, 3, stride=2, padding="VALID",
                  activation="RELU6")
    t = mb.depthwise_conv2d(mb.pad(t, ((0, 0), (1, 1), (1, 1), (0, 0))), 3, padding="VALID",
                            activation="RELU6")
    t = mb.conv2d(t, 8, 1, padding="VALID")
    return mb.transpose(t, (0, 3, 1, 2))


MOBILENET = [Case("TRANSPOSE", mode, {"model": "mobilenet_v2_front"},
                  [{"input_shape": (1, 3, 32, 32), "seed": 0}], branch=mobilenet_v2_front)
             for mode in ("float32", "int8_per_channel", "int16x8_per_channel")]


CASES = _view_cases() + _mover_cases() + OFFSET_CASES + MOBILENET


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_matches_references(case: Case, builds: Prefetcher) -> None:
    check_parity(case, builds)


def test_views_alias_their_input():
    """A chained view costs no code and no pool bytes: its output is its input's buffer (at an
    offset for the slicing ops), and the pool stays at the planner's lower bound."""
    for case in (c for c in CASES if c.options.get("form") == "chained"):
        gen = emit_sources(case.build()[0])
        views = [k for k in gen.kernels if k.op.opcode == case.op]
        assert views and all(k.alias for k in views), case.id
        assert f"_{case.op.lower()}(" not in gen.source, case.id
        assert gen.workspace_size_bytes == gen.lower_bound_bytes, case.id


# --- activation indices -------------------------------------------------------------------------


def _indexed(op: str):
    """``params`` and ``indices`` both model inputs."""

    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        x = mb.input(opts["input_shape"], dtype, name=name)
        idx = mb.input(opts["indices_shape"], "int32", name=f"{name}_indices")
        if op == "GATHER":
            return mb.gather(x, idx, axis=opts.get("axis", 0), batch_dims=opts.get("batch_dims", 0))
        return mb.gather_nd(x, idx)

    return branch


INDEXED = [
    Case("GATHER", mode, {"indices": "input"}, [
        {"input_shape": (5, 3), "indices_shape": (4,), "seed": 0},
        {"input_shape": (2, 4, 3), "indices_shape": (2, 2), "axis": 1, "batch_dims": 1,
         "seed": 1}], branch=_indexed("GATHER")) for mode in ("float32", "int8")] + [
    Case("GATHER_ND", mode, {"indices": "input"}, [
        {"input_shape": (4, 3, 2), "indices_shape": (3, 2), "seed": 0},
        {"input_shape": (2, 3, 4), "indices_shape": (2, 2, 3), "seed": 1}],
        branch=_indexed("GATHER_ND")) for mode in ("float32", "int8")]


def _index_inputs(built, rng: np.random.Generator, bad: bool) -> list[np.ndarray]:
    """Random params, and indices in range (``bad``: one index past the end)."""
    dets = R.input_details(built.model)
    out = []
    for d, k in zip(dets, range(len(dets)), strict=True):
        if d["dtype"] != np.int32:
            out.append(rng.integers(-128, 128, d["shape"]).astype(d["dtype"]))
            continue
        params = dets[k - 1]["shape"]
        if built.case.op == "GATHER":
            br = built.case.branches[(k - 1) // 2]
            axis = br.get("axis", 0) % len(params)
            idx = rng.integers(0, params[axis], d["shape"]).astype(np.int32)
            if bad and k == len(dets) - 1:
                idx.reshape(-1)[-1] = params[axis]
        else:
            nd = d["shape"][-1]
            idx = np.stack([rng.integers(0, params[j], d["shape"][:-1]) for j in range(nd)],
                           axis=-1).astype(np.int32)
            if bad and k == len(dets) - 1:
                idx.reshape(-1, nd)[-1, 0] = params[0]
        out.append(idx)
    return out


@pytest.mark.parametrize("case", INDEXED, ids=[c.id for c in INDEXED])
def test_activation_indices(case: Case, builds: Prefetcher) -> None:
    """Indices from the model's inputs: equal to TFLM in range; an index out of range (TFLM:
    GATHER_ND fails the invocation, GATHER reads out of bounds) makes the run return -1."""
    built = builds.get(case)
    rng = np.random.default_rng(11)
    runs = [_index_inputs(built, rng, bad=False) for _ in range(3)]
    for inputs, got in zip(runs, run_built(built, runs), strict=True):
        for k, want in enumerate(R.run_tflm(built.model, inputs)):
            np.testing.assert_array_equal(got[k], want, err_msg=f"{case.id} {built.labels[k]}")
    with pytest.raises(AssertionError, match=r"returned -1"):
        run_built(built, [_index_inputs(built, rng, bad=True)])
    if case.op == "GATHER_ND":
        with pytest.raises(RuntimeError):
            R.run_tflm(built.model, _index_inputs(built, rng, bad=True))


def test_offset_views():
    """Split pieces of a graph input alias the caller's buffer at their byte offsets; a slice
    under a RESHAPE into a graph output aliases, the RESHAPE copies; a slice whose aliasing
    would raise the lower bound copies; every pool is at the lower bound."""
    for case in OFFSET_CASES:
        gen = emit_sources(case.build()[0])
        slicing = [k for k in gen.kernels if k.op.opcode == case.op]
        assert gen.workspace_size_bytes == gen.lower_bound_bytes, case.id
        form = case.options["form"]
        if form == "of_input":
            assert all(k.alias for k in slicing), case.id
            assert "((const uint8_t*)inputs->in0 + " in gen.source, case.id
        elif form == "into_output":
            assert slicing[0].alias, case.id
            reshape = next(k for k in gen.kernels if k.op.opcode == "RESHAPE")
            assert not reshape.alias and "memcpy(out0, in0" in gen.source, case.id
        else:
            assert [k.alias for k in slicing] == [False, True], case.id


# --- refusals -----------------------------------------------------------------------------------


def _refused_models() -> list[tuple[str, Any, str]]:
    """(label, builder, the refusal's pattern): what TFLM refuses, or what its result would be
    undefined for, in one line naming the operator, the node and the tensor or attribute."""

    def one(build):
        def make() -> bytes:
            mb = ModelBuilder(seed=0)
            mb.output(build(mb))
            return mb.build()
        return make

    def f32(mb, shape=(1, 4, 4, 3), dtype="float32"):
        return mb.input(shape, dtype)

    return [
        ("pad int64 paddings", one(lambda mb: mb.pad(f32(mb), PADS4, paddings_dtype="int64")),
         r"PAD \(node 0\): paddings '.*' is int64; supported: int32"),
        ("pad activation paddings", one(lambda mb: mb.operator(
            "PAD", [f32(mb), mb.input((4, 2), "int32")], [((1, 5, 5, 4), "float32", None)])[0]),
         r"PAD \(node 0\): paddings '.*' \(input 1\) must be a constant"),
        ("pad rank 6", one(lambda mb: mb.pad(f32(mb, (1, 1, 1, 1, 2, 2)), [(0, 0)] * 6)),
         r"PAD \(node 0\): '.*' has rank 6; TFLM's kernel takes at most 5"),
        ("padv2 int8 value of another scale", one(lambda mb: mb.pad(
            f32(mb, dtype="int8"), PADS4, mb.constant(np.zeros(1), "int8", (0.5, 3)))),
         r"PADV2 \(node 0\): pad value '.*' is quantized .*TFLM requires the same scale"),
        ("mirror pad too wide", one(lambda mb: mb.mirror_pad(f32(mb), ((0, 0), (4, 0), (0, 0),
                                                                      (0, 0)))),
         r"MIRROR_PAD \(node 0\): .*takes at most 3 on each side in REFLECT mode"),
        ("concatenation of int8 scales", one(lambda mb: mb.operator(
            "CONCATENATION", [x := f32(mb, dtype="int8"),
                              mb.input((1, 4, 4, 3), "int8", quant=(0.3, 1))],
            [((1, 4, 4, 6), "int8", x.quant)], {"axis": -1})[0]),
         r"CONCATENATION \(node 0\): int8 input '.*' is quantized .*the same scale"),
        ("concatenation activation", one(lambda mb: mb.concatenation(
            [f32(mb), f32(mb)], activation="RELU")),
         r"CONCATENATION \(node 0\): fused activation RELU: TFLM takes NONE only"),
        ("transpose int32", one(lambda mb: mb.transpose(f32(mb, (2, 3), "int32"), (1, 0))),
         r"TRANSPOSE \(node 0\): input 0 '.*' is int32: int32 is not supported \(supported: "
         r"float32, int8, int16\)"),
        ("strided slice activation begin", one(lambda mb: mb.operator(
            "STRIDED_SLICE", [f32(mb, (4, 3)), mb.input((2,), "int32"), mb._ints("e", [4, 3]),
                              mb._ints("s", [1, 1])], [((4, 3), "float32", None)])[0]),
         r"STRIDED_SLICE \(node 0\): begin '.*' \(input 1\) must be a constant, as TFLM"),
        ("strided slice stride 0", one(lambda mb: mb.operator(
            "STRIDED_SLICE", [f32(mb, (4, 3)), mb._ints("b", [0, 0]), mb._ints("e", [4, 3]),
                              mb._ints("s", [1, 0])], [((4, 3), "float32", None)])[0]),
         r"STRIDED_SLICE \(node 0\): strides \[1, 0\]: a stride must not be 0"),
        ("slice out of range", one(lambda mb: mb.operator(
            "SLICE", [f32(mb, (4, 3)), mb._ints("b", [3, 0]), mb._ints("s", [2, 3])],
            [((2, 3), "float32", None)])[0]),
         r"SLICE \(node 0\): begin \[3, 0\], size \[2, 3\] leave '.*' \[4, 3\] in dimension 0"),
        ("gather int64 indices", one(lambda mb: mb.gather(
            f32(mb, (5, 3)), mb.input((2,), "int64"))),
         r"GATHER \(node 0\): indices '.*' are int64; TFLM's GATHER takes int32"),
        ("gather index out of range", one(lambda mb: mb.gather(f32(mb, (5, 3)), [1, 5])),
         r"GATHER \(node 0\): index 5 of '.*' is out of range for dimension 0"),
        ("gather_nd outside params", one(lambda mb: mb.gather_nd(f32(mb, (4, 3)), [[4, 0]])),
         r"GATHER_ND \(node 0\): index \[4, 0\] of '.*' is outside params"),
        ("shape int64", one(lambda mb: mb.shape(f32(mb), "int64")),
         r"SHAPE \(node 0\): output '.*' is int64: int64 is not supported \(supported: int32\)"),
        ("resize both flags", one(lambda mb: mb.resize_bilinear(
            f32(mb), (5, 5), align_corners=True, half_pixel_centers=True)),
         r"RESIZE_BILINEAR \(node 0\): align_corners and half_pixel_centers are both set"),
        ("resize int16 bilinear", one(lambda mb: mb.resize_bilinear(
            f32(mb, dtype="int16"), (5, 5))),
         r"RESIZE_BILINEAR \(node 0\): input 0 '.*' is int16: int16 is not supported"),
        ("split activation axis", one(lambda mb: mb.operator(
            "SPLIT", [mb.input((1,), "int32"), f32(mb, (4, 2))], [((4, 2), "float32", None)],
            {"num_splits": 1})[0]),
         r"SPLIT \(node 0\): axis '.*' \(input 0\) must be a constant"),
        ("depth_to_space int16", one(lambda mb: mb.depth_to_space(f32(mb, (1, 2, 2, 4),
                                                                      "int16"), 2)),
         r"DEPTH_TO_SPACE \(node 0\): input 0 '.*' is int16: int16 is not supported"),
        ("zeros_like int16", one(lambda mb: mb.zeros_like(f32(mb, dtype="int16"))),
         r"ZEROS_LIKE \(node 0\): input 0 '.*' is int16: int16 is not supported"),
        ("fill non-scalar value", one(lambda mb: mb.fill((2, 2), mb.input((1,), "float32"))),
         r"FILL \(node 0\): value '.*' has shape \[1\]; TFLM takes a scalar"),
        ("space_to_batch bad output", one(lambda mb: mb.operator(
            "SPACE_TO_BATCH_ND", [f32(mb, (1, 4, 4, 1)), mb._ints("b", [2, 2]),
                                  mb._ints("p", [[0, 0], [0, 0]])],
            [((2, 2, 4, 1), "float32", None)])[0]),
         r"SPACE_TO_BATCH_ND \(node 0\): output '.*' has shape \[2, 2, 4, 1\]; .*give "
         r"\[4, 2, 2, 1\]"),
    ]


REFUSED = _refused_models()


@pytest.mark.parametrize(("make", "pattern"), [(m, p) for _, m, p in REFUSED],
                         ids=[label for label, _, _ in REFUSED])
def test_refusals_are_one_line(make, pattern) -> None:
    from project_api.errors import UnsupportedOperatorError

    with pytest.raises(UnsupportedOperatorError, match=pattern) as info:
        emit_sources(make())
    assert "\n" not in str(info.value)




def test_mobilenet_front_pool_at_lower_bound():
    for case in MOBILENET:
        gen = emit_sources(case.build()[0])
        assert [k.op.opcode for k in gen.kernels] == [
            "TRANSPOSE", "PAD", "CONV_2D", "PAD", "DEPTHWISE_CONV_2D", "CONV_2D", "TRANSPOSE"]
        assert gen.workspace_size_bytes == gen.lower_bound_bytes, case.id


@pytest.mark.parametrize("target", ["generic", "cortex-m4"])
def test_mobilenet_front_on_qemu_matches_tflm(tmp_path, target):
    """The int8 front on QEMU's Cortex-M4 (mps2-an386), bit-exact with TFLM."""
    from project_api.emit import cortex_m_harness as H

    for tool in (H.CC, H.QEMU):
        require_tool(tool)
    model = MOBILENET[1].build()[0]
    gen = emit_sources(model, name="front", target=target)
    rng = np.random.default_rng(5)
    inputs = [rng.integers(-128, 128, t.shape).astype(np.int8) for t in gen.inputs]
    result = H.run(H.build(gen, inputs, tmp_path), timeout=120)
    want = R.run_tflm(model, inputs)[0]
    np.testing.assert_array_equal(result.outputs[0], np.asarray(want).reshape(
        result.outputs[0].shape), err_msg=f"MobileNetV2 front ({target}) on QEMU vs TFLM")


def test_offset_views_whatever_the_tensor_order(tmp_path):
    """The split pieces of a graph input whose tensor index is the highest (the storage set's
    root is then a piece, at a negative offset from it) still alias it at their offsets, and
    compute what TFLM computes."""
    from project_api.emit import codegen, harness
    from project_api.tflite.graph import Graph, Operator, Tensor

    ts = [Tensor(0, "a", "float32", (2, 3)), Tensor(1, "b", "float32", (2, 3)),
          Tensor(2, "ya", "float32", (2, 3)), Tensor(3, "yb", "float32", (2, 3)),
          Tensor(4, "axis", "int32", (1,), data=np.array([0], np.int32)),
          Tensor(5, "x", "float32", (4, 3)),
          Tensor(6, "c", "float32", (3,), data=np.array([1.0, -2.0, 0.5], np.float32))]
    ops = [Operator(0, "SPLIT", [4, 5], [0, 1], {"num_splits": 2}),
           Operator(1, "ADD", [0, 6], [2], {"fused_activation_function": "NONE"}),
           Operator(2, "ADD", [1, 6], [3], {"fused_activation_function": "NONE"})]
    gen = codegen.generate(Graph(ts, ops, [5], [2, 3]), "order")
    assert [k.alias for k in gen.kernels] == [True, False, False]
    assert "((const uint8_t*)inputs->x + 24)" in gen.source
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    ya, yb = harness.run(harness.build(gen, tmp_path, cc=require_tool("gcc")), gen, [x])
    np.testing.assert_array_equal(ya, x[:2] + ts[6].data)
    np.testing.assert_array_equal(yb, x[2:] + ts[6].data)


def test_shape_of_a_scalar(tmp_path):
    """SHAPE of a scalar writes nothing (an empty vector) and still compiles warning-free."""
    from project_api.emit import harness

    mb = ModelBuilder(seed=0)
    x = mb.input((1,), "float32", name="x")
    mb.output(mb.shape(mb.reshape(x, ())))
    mb.output(mb.zeros_like(x))
    model = mb.build()
    gen = emit_sources(model)
    assert "(void)out0;" in gen.source
    feed = [np.ones((1,), np.float32)]
    got = harness.run(harness.build(gen, tmp_path, cc=require_tool("gcc")), gen, feed)
    want = R.run_tflm(model, feed)
    assert [g.shape for g in got] == [(0,), (1,)]
    np.testing.assert_array_equal(got[1], want[1])

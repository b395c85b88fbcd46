"""Building the operators that move data or change shapes, and the reductions: reshape, pad,
concatenate and split, slice, transpose, gather, space/depth/batch moves, resize, fill,
reductions and arg-min/max.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from project_api.tflite import schema
from project_api.tflite.tensors import _QUANTIZED, TensorRef, _check_choice, quantize_params


class ShapeOps:
    """The data-movement, shape and reduction operators of
    :class:`~project_api.tflite.builder.ModelBuilder`."""

    def reshape(self, x: TensorRef, shape: Sequence[int], shape_input: bool = True) -> TensorRef:
        """RESHAPE to ``shape`` (one -1 allowed), given as a shape tensor and in the options."""
        new = [int(d) for d in shape]
        size = int(np.prod(x.shape))
        if new.count(-1) > 1:
            raise ValueError("reshape: at most one -1")
        if -1 in new:
            known = int(np.prod([d for d in new if d != -1]))
            new[new.index(-1)] = size // known
        if int(np.prod(new)) != size:
            raise ValueError(f"reshape: cannot reshape {x.shape} to {tuple(shape)}")
        inputs = [x.index]
        if shape_input:
            inputs.append(self._add_tensor(self._name("reshape/shape"), (len(new),), "int32",
                                           data=np.asarray(shape, dtype=np.int32)).index)
        if x.quant is None and x.dtype in _QUANTIZED:  # plain int8/int16 values stay plain
            y = self._add_tensor(self._name("reshape"), new, x.dtype)
        else:
            y = self._activation("reshape", new, x.dtype, x.quant, self.range_of(x))
        self._op("RESHAPE", inputs, [y.index], {"new_shape": [int(d) for d in shape]})
        return y

    def squeeze(self, x: TensorRef, dims: Sequence[int] | None = None) -> TensorRef:
        """SQUEEZE: drop the size-1 dimensions ``dims`` (negative counts from the end), or every
        size-1 dimension when ``dims`` is None or empty (as TFLite)."""
        rank = len(x.shape)
        if dims:
            axes = {d + rank if d < 0 else d for d in dims}
            for d in axes:
                if not 0 <= d < rank or x.shape[d] != 1:
                    raise ValueError(f"squeeze: dimension {d} of {x.shape} is not of size 1")
        else:
            axes = {d for d, n in enumerate(x.shape) if n == 1}
        shape = [n for d, n in enumerate(x.shape) if d not in axes]
        y = self._activation("squeeze", shape, x.dtype, x.quant, self.range_of(x))
        self._op("SQUEEZE", [x.index], [y.index],
                 {"squeeze_dims": [int(d) for d in dims]} if dims else {})
        return y

    def expand_dims(self, x: TensorRef, axis: int) -> TensorRef:
        """EXPAND_DIMS: a size-1 dimension inserted at ``axis`` (negative: from the end, -1
        appends), given as a constant int32 axis tensor."""
        rank = len(x.shape)
        at = axis + rank + 1 if axis < 0 else axis
        if not 0 <= at <= rank:
            raise ValueError(f"expand_dims: axis {axis} is out of range for rank {rank}")
        shape = [*x.shape[:at], 1, *x.shape[at:]]
        ax = self._add_tensor(self._name("expand_dims/axis"), (1,), "int32",
                              data=np.asarray([axis], dtype=np.int32))
        y = self._activation("expand_dims", shape, x.dtype, x.quant, self.range_of(x))
        self._op("EXPAND_DIMS", [x.index, ax.index], [y.index])
        return y

    def pad(self, x: TensorRef, paddings: Sequence[Sequence[int]],
            value: float | TensorRef | None = None, v2: bool | None = None,
            paddings_dtype: str = "int32") -> TensorRef:
        """PAD (or PADV2 when ``value`` is given or ``v2``): ``paddings`` ``[[before, after],
        ...]`` per dimension; ``value`` a float (a constant in ``x``'s type and quantization)
        or a one-element tensor."""
        pads = np.asarray(paddings, dtype=np.int64).reshape(len(x.shape), 2)
        shape = [n + int(a) + int(b) for n, (a, b) in zip(x.shape, pads, strict=True)]
        inputs = [x.index, self._ints("pad/paddings", pads, paddings_dtype).index]
        v2 = value is not None if v2 is None else v2
        if value is not None:
            inputs.append(self._operand_of(np.asarray(value) if not isinstance(value, TensorRef)
                                           else value, x.dtype, x.quant).index)
        y = self._like("pad", x, shape)
        self._op("PADV2" if v2 else "PAD", inputs, [y.index])
        return y

    def mirror_pad(self, x: TensorRef, paddings: Sequence[Sequence[int]],
                   padding_mode: str = "REFLECT", paddings_dtype: str = "int32") -> TensorRef:
        """MIRROR_PAD, ``padding_mode`` (the options' ``mode``) REFLECT or SYMMETRIC."""
        _check_choice(padding_mode, schema.ENUMS["MirrorPadMode"], "mirror pad mode")
        pads = np.asarray(paddings, dtype=np.int64).reshape(len(x.shape), 2)
        shape = [n + int(a) + int(b) for n, (a, b) in zip(x.shape, pads, strict=True)]
        p = self._ints("mirror_pad/paddings", pads, paddings_dtype)
        y = self._like("mirror_pad", x, shape)
        self._op("MIRROR_PAD", [x.index, p.index], [y.index], {"mode": padding_mode})
        return y

    def concatenation(self, xs: Sequence[TensorRef | np.ndarray], axis: int = -1,
                      activation: str = "NONE") -> TensorRef:
        """CONCATENATION along ``axis``; float arrays become constants in the first input's type
        and quantization (the output keeps it, as TFLM requires for int8)."""
        first = next(t for t in xs if isinstance(t, TensorRef))
        refs = [self._operand_of(t, first.dtype, first.quant) for t in xs]
        rank = len(first.shape)
        a = axis + rank if axis < 0 else axis
        shape = list(first.shape)
        shape[a] = sum(t.shape[a] for t in refs)
        y = self._like("concatenation", first, shape)
        self._op("CONCATENATION", [t.index for t in refs], [y.index],
                 {"axis": axis, "fused_activation_function": activation})
        return y

    def split(self, x: TensorRef, num_splits: int, axis: int = 0) -> list[TensorRef]:
        """SPLIT into ``num_splits`` equal pieces along ``axis`` (a constant axis input)."""
        a = axis + len(x.shape) if axis < 0 else axis
        if x.shape[a] % num_splits:
            raise ValueError(f"split: {x.shape[a]} is not a multiple of {num_splits}")
        shape = list(x.shape)
        shape[a] //= num_splits
        ax = self._ints("split/axis", [axis])
        ys = [self._like("split", x, shape) for _ in range(num_splits)]
        self._op("SPLIT", [ax.index, x.index], [y.index for y in ys], {"num_splits": num_splits})
        return ys

    def split_v(self, x: TensorRef, sizes: Sequence[int], axis: int = 0) -> list[TensorRef]:
        """SPLIT_V into pieces of ``sizes`` along ``axis`` (one size may be -1)."""
        a = axis + len(x.shape) if axis < 0 else axis
        known = [int(s) for s in sizes]
        if known.count(-1):
            known[known.index(-1)] = x.shape[a] - sum(s for s in known if s != -1)
        ys = []
        for s in known:
            shape = list(x.shape)
            shape[a] = s
            ys.append(self._like("split_v", x, shape))
        sz = self._ints("split_v/sizes", [int(s) for s in sizes])
        ax = self._ints("split_v/axis", [axis])
        self._op("SPLIT_V", [x.index, sz.index, ax.index], [y.index for y in ys],
                 {"num_splits": len(ys)})
        return ys

    def slice(self, x: TensorRef, begin: Sequence[int], size: Sequence[int],
              index_dtype: str = "int32") -> TensorRef:
        """SLICE of ``size`` elements (-1: to the end) from ``begin``."""
        shape = [n - b if s == -1 else s for n, b, s in zip(x.shape, begin, size, strict=True)]
        bt = self._ints("slice/begin", list(begin), index_dtype)
        st = self._ints("slice/size", list(size), index_dtype)
        y = self._like("slice", x, shape)
        self._op("SLICE", [x.index, bt.index, st.index], [y.index])
        return y

    def strided_slice(self, x: TensorRef, begin: Sequence[int], end: Sequence[int],
                      strides: Sequence[int] | None = None, begin_mask: int = 0,
                      end_mask: int = 0, shrink_axis_mask: int = 0) -> TensorRef:
        """STRIDED_SLICE; the output shape is numpy's for the same slices (a mask bit: that side
        open; a shrink bit: index ``begin``, the dimension dropped)."""
        steps = [1] * len(begin) if strides is None else [int(s) for s in strides]
        index: list[Any] = []
        for d in range(len(x.shape)):
            if shrink_axis_mask >> d & 1:
                index.append(int(begin[d]))
                continue
            index.append(slice(None if begin_mask >> d & 1 else int(begin[d]),
                               None if end_mask >> d & 1 else int(end[d]), steps[d]))
        shape = np.empty(x.shape, dtype=np.int8)[tuple(index)].shape
        ins = [x.index] + [self._ints(f"strided_slice/{k}", list(v)).index
                           for k, v in (("begin", begin), ("end", end), ("strides", steps))]
        y = self._like("strided_slice", x, shape)
        self._op("STRIDED_SLICE", ins, [y.index], {
            "begin_mask": begin_mask, "end_mask": end_mask, "shrink_axis_mask": shrink_axis_mask})
        return y

    def transpose(self, x: TensorRef, perm: Sequence[int]) -> TensorRef:
        """TRANSPOSE: output dimension k is input dimension ``perm[k]``."""
        p = self._ints("transpose/perm", list(perm))
        y = self._like("transpose", x, [x.shape[k] for k in perm])
        self._op("TRANSPOSE", [x.index, p.index], [y.index])
        return y

    def pack(self, xs: Sequence[TensorRef | np.ndarray], axis: int = 0) -> TensorRef:
        """PACK: the inputs (one shape) stacked along a new dimension ``axis``."""
        first = next(t for t in xs if isinstance(t, TensorRef))
        refs = [self._operand_of(t, first.dtype, first.quant) for t in xs]
        rank = len(first.shape) + 1
        a = axis + rank if axis < 0 else axis
        shape = [*first.shape[:a], len(refs), *first.shape[a:]]
        y = self._like("pack", first, shape)
        self._op("PACK", [t.index for t in refs], [y.index],
                 {"values_count": len(refs), "axis": axis})
        return y

    def unpack(self, x: TensorRef, axis: int = 0) -> list[TensorRef]:
        """UNPACK: the slices of ``x`` along ``axis``, that dimension dropped."""
        a = axis + len(x.shape) if axis < 0 else axis
        shape = [n for d, n in enumerate(x.shape) if d != a]
        ys = [self._like("unpack", x, shape) for _ in range(x.shape[a])]
        self._op("UNPACK", [x.index], [y.index for y in ys], {"num": len(ys), "axis": axis})
        return ys

    def gather(self, x: TensorRef | np.ndarray, indices: TensorRef | np.ndarray, axis: int = 0,
               batch_dims: int = 0, dtype: str | None = None) -> TensorRef:
        """GATHER; ``x`` a tensor or float values (a constant of ``dtype``, int8: quantized
        from its range), ``indices`` an int32 tensor or constant values."""
        if not isinstance(x, TensorRef):
            x = self.constant(np.asarray(x, dtype=np.float64), dtype or "float32")
        idx = indices if isinstance(indices, TensorRef) else self._ints("gather/indices",
                                                                        indices)
        a = axis + len(x.shape) if axis < 0 else axis
        bd = batch_dims + len(idx.shape) if batch_dims < 0 else batch_dims
        shape = [*x.shape[:a], *idx.shape[bd:], *x.shape[a + 1:]]
        y = self._like("gather", x, shape)
        self._op("GATHER", [x.index, idx.index], [y.index], {"axis": axis,
                                                              "batch_dims": batch_dims})
        return y

    def gather_nd(self, x: TensorRef | np.ndarray, indices: TensorRef | np.ndarray,
                  dtype: str | None = None) -> TensorRef:
        """GATHER_ND: slices of ``x`` at the index tuples of the last dimension of
        ``indices``."""
        if not isinstance(x, TensorRef):
            x = self.constant(np.asarray(x, dtype=np.float64), dtype or "float32")
        idx = indices if isinstance(indices, TensorRef) else self._ints("gather_nd/indices",
                                                                        indices)
        shape = [*idx.shape[:-1], *x.shape[idx.shape[-1]:]]
        y = self._like("gather_nd", x, shape)
        self._op("GATHER_ND", [x.index, idx.index], [y.index])
        return y

    def shape(self, x: TensorRef, out_type: str = "int32") -> TensorRef:
        """SHAPE: ``x``'s dimensions as an ``out_type`` vector."""
        y = self._activation("shape", [len(x.shape)], out_type, None, (0.0, 1.0))
        self._op("SHAPE", [x.index], [y.index], {"out_type": out_type})
        return y

    def broadcast_to(self, x: TensorRef, shape: Sequence[int],
                     shape_dtype: str = "int32") -> TensorRef:
        """BROADCAST_TO ``shape`` (a constant shape input)."""
        s = self._ints("broadcast_to/shape", list(shape), shape_dtype)
        y = self._like("broadcast_to", x, list(np.broadcast_shapes(x.shape, tuple(shape))))
        self._op("BROADCAST_TO", [x.index, s.index], [y.index])
        return y

    def depth_to_space(self, x: TensorRef, block_size: int) -> TensorRef:
        n, h, w, c = x.shape
        y = self._like("depth_to_space", x, [n, h * block_size, w * block_size,
                                             c // (block_size * block_size)])
        self._op("DEPTH_TO_SPACE", [x.index], [y.index], {"block_size": block_size})
        return y

    def space_to_depth(self, x: TensorRef, block_size: int) -> TensorRef:
        n, h, w, c = x.shape
        y = self._like("space_to_depth", x, [n, h // block_size, w // block_size,
                                             c * block_size * block_size])
        self._op("SPACE_TO_DEPTH", [x.index], [y.index], {"block_size": block_size})
        return y

    def batch_to_space_nd(self, x: TensorRef, block: Sequence[int],
                          crops: Sequence[Sequence[int]]) -> TensorRef:
        """BATCH_TO_SPACE_ND (NHWC, or NHC with one block value and one crop pair)."""
        c = np.asarray(crops, dtype=np.int64).reshape(len(block), 2)
        spatial = [int(x.shape[1 + d]) * int(block[d]) - int(c[d].sum())
                   for d in range(len(block))]
        shape = [x.shape[0] // int(np.prod(block)), *spatial, *x.shape[1 + len(block):]]
        ins = [x.index, self._ints("batch_to_space_nd/block", list(block)).index,
               self._ints("batch_to_space_nd/crops", c).index]
        y = self._like("batch_to_space_nd", x, shape)
        self._op("BATCH_TO_SPACE_ND", ins, [y.index])
        return y

    def space_to_batch_nd(self, x: TensorRef, block: Sequence[int],
                          paddings: Sequence[Sequence[int]]) -> TensorRef:
        """SPACE_TO_BATCH_ND (NHWC, or NHC with one block value and one padding pair)."""
        p = np.asarray(paddings, dtype=np.int64).reshape(len(block), 2)
        spatial = [(int(x.shape[1 + d]) + int(p[d].sum())) // int(block[d])
                   for d in range(len(block))]
        shape = [x.shape[0] * int(np.prod(block)), *spatial, *x.shape[1 + len(block):]]
        ins = [x.index, self._ints("space_to_batch_nd/block", list(block)).index,
               self._ints("space_to_batch_nd/paddings", p).index]
        y = self._like("space_to_batch_nd", x, shape)
        self._op("SPACE_TO_BATCH_ND", ins, [y.index])
        return y

    def _resize(self, opcode: str, x: TensorRef, size: Sequence[int], align_corners: bool,
                half_pixel_centers: bool) -> TensorRef:
        s = self._ints(f"{opcode.lower()}/size", [int(v) for v in size])
        y = self._like(opcode.lower(), x, [x.shape[0], int(size[0]), int(size[1]), x.shape[3]])
        self._op(opcode, [x.index, s.index], [y.index], {
            "align_corners": bool(align_corners), "half_pixel_centers": bool(half_pixel_centers)})
        return y

    def resize_nearest_neighbor(self, x: TensorRef, size: Sequence[int],
                                align_corners: bool = False,
                                half_pixel_centers: bool = False) -> TensorRef:
        """RESIZE_NEAREST_NEIGHBOR of NHWC ``x`` to ``size`` (height, width)."""
        return self._resize("RESIZE_NEAREST_NEIGHBOR", x, size, align_corners,
                            half_pixel_centers)

    def resize_bilinear(self, x: TensorRef, size: Sequence[int], align_corners: bool = False,
                        half_pixel_centers: bool = False) -> TensorRef:
        """RESIZE_BILINEAR of NHWC ``x`` to ``size`` (height, width); a quantized output keeps
        the input's quantization."""
        return self._resize("RESIZE_BILINEAR", x, size, align_corners, half_pixel_centers)

    def zeros_like(self, x: TensorRef) -> TensorRef:
        y = self._like("zeros_like", x, x.shape)
        self._op("ZEROS_LIKE", [x.index], [y.index])
        return y

    def fill(self, dims: Sequence[int], value: float | TensorRef, dtype: str = "float32",
             quant: tuple[float, int] | None = None, dims_dtype: str = "int32") -> TensorRef:
        """FILL a tensor of shape ``dims`` with ``value``: a float (a scalar constant of
        ``dtype``, quantized with ``quant``) or a scalar tensor."""
        if isinstance(value, TensorRef):
            v = value
        else:
            v = self._operand_of(np.asarray(value, dtype=np.float64), dtype, quant)
        d = self._ints("fill/dims", [int(n) for n in dims], dims_dtype)
        y = self._activation("fill", [int(n) for n in dims], v.dtype, v.quant, self.range_of(v))
        self._op("FILL", [d.index, v.index], [y.index])
        return y

    def _axes_tensor(self, stem: str, axes: Sequence[int]) -> TensorRef:
        return self._add_tensor(self._name(stem), (len(axes),), "int32",
                                data=np.asarray(axes, dtype=np.int32))

    def _reduce(self, opcode: str, x: TensorRef, axes: int | Sequence[int], keep_dims: bool,
                out_quant: tuple[float, int] | None) -> TensorRef:
        rank = len(x.shape)
        axes = [int(a) for a in np.atleast_1d(np.asarray(axes, dtype=np.int64))]
        resolved = set()
        for a in axes:
            if not -rank <= a < rank:
                raise ValueError(f"{opcode.lower()}: axis {a} is out of range for rank {rank}")
            resolved.add(a + rank if a < 0 else a)
        shape = [1 if i in resolved else d for i, d in enumerate(x.shape)
                 if keep_dims or i not in resolved]
        n = int(np.prod([x.shape[i] for i in resolved])) if resolved else 1
        lo, hi = self.range_of(x)
        mean, std = (lo + hi) / 2.0, (hi - lo) / math.sqrt(12.0)
        if opcode == "MEAN":  # the mean of n values: mean +- 3 sigma / sqrt(n), within the input's
            lo, hi = max(lo, mean - 3 * std / math.sqrt(n)), min(hi, mean + 3 * std / math.sqrt(n))
        elif opcode == "SUM":
            lo, hi = n * mean - 3 * std * math.sqrt(n), n * mean + 3 * std * math.sqrt(n)
        if x.dtype == "float32":
            q = None
        elif opcode in ("REDUCE_MAX", "REDUCE_MIN"):  # TFLM: the input's quantization
            q = x.quant
        else:
            q = out_quant or quantize_params(lo, hi, x.dtype)
        y = self._activation(opcode.lower(), shape, x.dtype, q, (lo, hi))
        ax = self._axes_tensor(f"{opcode.lower()}/axes", axes)
        self._op(opcode, [x.index, ax.index], [y.index], {"keep_dims": bool(keep_dims)})
        return y

    def mean(self, x: TensorRef, axes: int | Sequence[int], keep_dims: bool = False,
             out_quant: tuple[float, int] | None = None) -> TensorRef:
        """MEAN over ``axes`` (negative: from the end; repeats allowed, as TFLite), given as a
        constant int32 tensor; a quantized output gets ``out_quant`` or the mean's range
        estimate."""
        return self._reduce("MEAN", x, axes, keep_dims, out_quant)

    def sum(self, x: TensorRef, axes: int | Sequence[int], keep_dims: bool = False,
            out_quant: tuple[float, int] | None = None) -> TensorRef:
        """SUM over ``axes`` (as :meth:`mean`)."""
        return self._reduce("SUM", x, axes, keep_dims, out_quant)

    def reduce_max(self, x: TensorRef, axes: int | Sequence[int],
                   keep_dims: bool = False) -> TensorRef:
        """REDUCE_MAX over ``axes``; a quantized output keeps the input's quantization (TFLM
        requires it)."""
        return self._reduce("REDUCE_MAX", x, axes, keep_dims, None)

    def reduce_min(self, x: TensorRef, axes: int | Sequence[int],
                   keep_dims: bool = False) -> TensorRef:
        """REDUCE_MIN over ``axes`` (as :meth:`reduce_max`)."""
        return self._reduce("REDUCE_MIN", x, axes, keep_dims, None)

    def _arg(self, opcode: str, x: TensorRef, axis: int, output_type: str) -> TensorRef:
        rank = len(x.shape)
        if not -rank <= axis < rank:
            raise ValueError(f"{opcode.lower()}: axis {axis} is out of range for rank {rank}")
        _check_choice(output_type, {"int32": 0, "int64": 0}, "output type")
        a = axis + rank if axis < 0 else axis
        shape = [d for i, d in enumerate(x.shape) if i != a]
        y = self._activation(opcode.lower(), shape, output_type, None, (0.0, x.shape[a] - 1.0))
        ax = self._axes_tensor(f"{opcode.lower()}/axis", [axis])
        self._op(opcode, [x.index, ax.index], [y.index], {"output_type": output_type})
        return y

    def arg_max(self, x: TensorRef, axis: int = -1, output_type: str = "int32") -> TensorRef:
        """ARG_MAX along ``axis`` (a constant int32 tensor of one element); ``output_type``
        int32 or int64 (written in the options and as the output's type)."""
        return self._arg("ARG_MAX", x, axis, output_type)

    def arg_min(self, x: TensorRef, axis: int = -1, output_type: str = "int32") -> TensorRef:
        """ARG_MIN along ``axis`` (as :meth:`arg_max`)."""
        return self._arg("ARG_MIN", x, axis, output_type)

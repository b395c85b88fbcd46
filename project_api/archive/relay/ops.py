"""Type relations of the Relay operators that TVM's TFLite, Keras, ONNX and PyTorch frontends
emit in small models: what each operator's result type is, given its argument types and printed
attributes.

Each relation follows the operator's ``*Rel`` function in TVM (``src/relay/op/...`` and
``src/relay/qnn/op/...``, same in substance from 0.8 to 0.15), with the attribute defaults of
``include/tvm/relay/attrs/*.h``: the printer writes only attributes that differ from their default
(``VisitNonDefaultAttrs``), so an absent attribute has its default value. A relation returns None
when an argument type it needs is unknown, or the attributes are outside what it reads; the
caller then treats the result as unknown.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from project_api.archive.relay.types import Dim, TensorType, TupleType, Type

Relation = Callable[[list[Type], dict[str, Any]], Type]

#: operator name -> relation
RELATIONS: dict[str, Relation] = {}


def _register(*names: str) -> Callable[[Relation], Relation]:
    def wrap(fn: Relation) -> Relation:
        for n in names:
            RELATIONS[n] = fn
        return fn

    return wrap


def result_type(op: str, args: list[Type], attrs: dict[str, Any]) -> Type:
    """The result type of ``op`` applied to ``args`` (None: unknown operator or argument)."""
    rel = RELATIONS.get(op)
    if rel is None:
        return None
    try:
        return rel(args, attrs)
    except (TypeError, ValueError, IndexError, KeyError, ZeroDivisionError, AttributeError,
            AssertionError):
        return None


# --- helpers -----------------------------------------------------------------------------------


def _tensor(t: Type) -> TensorType | None:
    return t if isinstance(t, TensorType) else None


def _shaped(t: Type) -> TensorType | None:
    t = _tensor(t)
    return t if t is not None and t.shape is not None else None


def _ints(value: Any, what: str) -> list[int]:
    """An attribute list of integers (a bare int is a list of one)."""
    if isinstance(value, bool):
        raise ValueError(what)
    if isinstance(value, int):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool)
                                              for v in value):
        raise ValueError(what)
    return list(value)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(what)
    return value


def _norm_axis(axis: int, ndim: int) -> int:
    a = axis + ndim if axis < 0 else axis
    if not 0 <= a < ndim:
        raise ValueError(f"axis {axis} of a {ndim}-d tensor")
    return a


def _dtype_attr(attrs: dict[str, Any], key: str = "out_dtype") -> str | None:
    """A dtype attribute; "" and "void" (unset) are None."""
    value = attrs.get(key)
    if isinstance(value, str) and value not in ("", "void"):
        return value
    return None


def _mul(a: Dim, b: Dim) -> Dim:
    return None if a is None or b is None else a * b


def _prod(dims: Sequence[Dim]) -> Dim:
    out: Dim = 1
    for d in dims:
        out = _mul(out, d)
    return out


def broadcast_shapes(a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """numpy broadcasting (``BroadcastRel``, src/relay/op/type_relations.cc)."""
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out: list[Dim] = []
    for x, y in zip(a, b, strict=True):
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif x is None or y is None:
            out.append(x if y is None else y)
        else:
            raise ValueError(f"shapes {a} and {b} do not broadcast")
    return tuple(out)


# --- element-wise ------------------------------------------------------------------------------

#: Unary operators whose result has the argument's type (``IdentityRel`` and relatives).
_SAME = (
    "nn.relu", "clip", "sigmoid", "tanh", "nn.softmax", "nn.log_softmax", "nn.fast_softmax",
    "exp", "fast_exp", "log", "sqrt", "rsqrt", "negative", "abs", "round", "floor", "ceil",
    "trunc", "sign", "erf", "fast_erf", "fast_tanh", "sin", "cos", "copy", "nn.leaky_relu",
    "nn.prelu", "fixed_point_multiply", "stop_gradient", "annotation.stop_fusion",
    "nn.lrn", "nn.l2_normalize", "zeros_like", "ones_like", "reverse", "nn.hardswish",
)


@_register(*_SAME)
def _same(args: list[Type], attrs: dict[str, Any]) -> Type:
    return _tensor(args[0])


@_register("cast")
def _cast(args: list[Type], attrs: dict[str, Any]) -> Type:
    t = _tensor(args[0])
    dtype = _dtype_attr(attrs, "dtype")
    return None if t is None or dtype is None else t.with_dtype(dtype)


@_register("cast_like")
def _cast_like(args: list[Type], attrs: dict[str, Any]) -> Type:
    t, like = _tensor(args[0]), _tensor(args[1])
    return None if t is None or like is None else t.with_dtype(like.dtype)


_BINARY = ("add", "subtract", "multiply", "divide", "floor_divide", "mod", "floor_mod",
           "maximum", "minimum", "power", "bitwise_and", "bitwise_or", "bitwise_xor",
           "left_shift", "right_shift", "squared_difference")
_COMPARE = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
            "logical_and", "logical_or", "logical_xor")


def _broadcast(args: list[Type], dtype: str | None) -> Type:
    a, b = _shaped(args[0]), _shaped(args[1])
    if a is None or b is None:
        return None
    return TensorType(broadcast_shapes(a.shape, b.shape), dtype)  # type: ignore[arg-type]


@_register(*_BINARY)
def _binary(args: list[Type], attrs: dict[str, Any]) -> Type:
    a = _tensor(args[0])
    return _broadcast(args, a.dtype if a else None)


@_register(*_COMPARE)
def _compare(args: list[Type], attrs: dict[str, Any]) -> Type:
    return _broadcast(args, "bool")


@_register("logical_not")
def _logical_not(args: list[Type], attrs: dict[str, Any]) -> Type:
    t = _tensor(args[0])
    return None if t is None else t.with_dtype("bool")


@_register("qnn.add", "qnn.subtract", "qnn.mul")
def _qnn_binary(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``QnnBroadcastRel`` (src/relay/qnn/op/op_common.h): lhs, rhs, then six scalars."""
    a = _tensor(args[0])
    return _broadcast(args[:2], a.dtype if a else None)


@_register("nn.bias_add")
def _bias_add(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``BiasAddRel``: the data's type (the bias is (channels,) at ``axis``, default 1)."""
    return _tensor(args[0])


# --- quantization ------------------------------------------------------------------------------


@_register("qnn.quantize")
def _quantize(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``QuantizeRel`` (src/relay/qnn/op/quantize.cc): the data's shape, ``out_dtype``."""
    t = _tensor(args[0])
    dtype = _dtype_attr(attrs)
    return None if t is None or dtype is None else t.with_dtype(dtype)


@_register("qnn.dequantize")
def _dequantize(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``DequantizeRel``: the data's shape, float32 (``out_dtype`` where a release has it)."""
    t = _tensor(args[0])
    return None if t is None else t.with_dtype(_dtype_attr(attrs) or "float32")


@_register("qnn.requantize")
def _requantize(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``RequantizeRel``: the data's shape, ``out_dtype`` (no default: always printed)."""
    t = _tensor(args[0])
    dtype = _dtype_attr(attrs)
    return None if t is None or dtype is None else t.with_dtype(dtype)


@_register("qnn.simulated_quantize", "qnn.simulated_dequantize")
def _simulated(args: list[Type], attrs: dict[str, Any]) -> Type:
    return _tensor(args[0])


# --- dense and matmul --------------------------------------------------------------------------


def _matmul(data: Type, weight: Type, attrs: dict[str, Any], transpose_a: bool,
            transpose_b: bool) -> Type:
    """``MatmulRel`` (src/relay/op/nn/nn.h): ``data[:-1] + [units]``, where units is the
    attribute or the weight's output dimension; dtype ``out_dtype`` or the data's."""
    d = _shaped(data)
    if d is None or not d.shape:
        return None
    w = _shaped(weight)
    units = attrs.get("units")
    if units is not None and not isinstance(units, bool) and isinstance(units, int):
        n: Dim = units
    elif w is not None and len(w.shape) == 2:  # type: ignore[arg-type]
        n = w.shape[0] if transpose_b else w.shape[1]  # type: ignore[index]
    else:
        return None
    if transpose_a:
        if len(d.shape) < 2:  # type: ignore[arg-type]
            return None
        shape = tuple(d.shape[:-2]) + (d.shape[-1], n)  # type: ignore[index]
    else:
        shape = tuple(d.shape[:-1]) + (n,)  # type: ignore[index]
    return TensorType(shape, _dtype_attr(attrs) or d.dtype)


@_register("nn.dense", "qnn.dense", "nn.contrib_dense_pack")
def _dense(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``nn.dense(data, weight, units, out_dtype)``; ``qnn.dense`` adds four scalars after
    the weight (``QnnDenseRel``, src/relay/qnn/op/dense.cc, then ``MatmulRel``)."""
    return _matmul(args[0], args[1] if len(args) > 1 else None, attrs, False, True)


@_register("nn.matmul")
def _nn_matmul(args: list[Type], attrs: dict[str, Any]) -> Type:
    return _matmul(args[0], args[1], attrs, bool(attrs.get("transpose_a", False)),
                   bool(attrs.get("transpose_b", False)))


@_register("nn.batch_matmul", "qnn.batch_matmul")
def _batch_matmul(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``BatchMatmulRel`` (src/relay/op/nn/nn.cc): x (b, m, k), y (b, n, k) by default
    (``transpose_b`` True, ``transpose_a`` False); the batch broadcasts from 1."""
    x, y = _shaped(args[0]), _shaped(args[1])
    if x is None or y is None or len(x.shape) != 3 or len(y.shape) != 3:  # type: ignore[arg-type]
        return None
    ta = bool(attrs.get("transpose_a", False))
    tb = bool(attrs.get("transpose_b", True))
    xs, ys = x.shape, y.shape
    m = xs[2] if ta else xs[1]  # type: ignore[index]
    n = ys[1] if tb else ys[2]  # type: ignore[index]
    b = xs[0] if ys[0] == 1 else ys[0] if xs[0] == 1 else xs[0]  # type: ignore[index]
    return TensorType((b, m, n), _dtype_attr(attrs) or x.dtype)


@_register("nn.batch_flatten")
def _batch_flatten(args: list[Type], attrs: dict[str, Any]) -> Type:
    t = _shaped(args[0])
    if t is None or not t.shape:
        return None
    return t.with_shape((t.shape[0], _prod(t.shape[1:])))  # type: ignore[index]


# --- shape manipulation ------------------------------------------------------------------------


def infer_newshape(ishape: Sequence[Dim], newshape: Sequence[int],
                   allowzero: bool = False) -> tuple[Dim, ...]:
    """``InferNewShape`` (src/relay/op/tensor/transform.cc): a positive value is that size,
    0 copies the input dimension (unless ``allowzero``), -1 is inferred from the rest, -2 copies
    every remaining input dimension, -3 merges the next two, -4 splits one into the next two
    values (one of them may be -1)."""
    oshape: list[Dim] = []
    used_in: set[int] = set()
    used_out: set[int] = set()
    src = 0
    infer = -1
    i = 0
    while i < len(newshape):
        v = newshape[i]
        if v > 0:
            oshape.append(v)
            src += 1
        elif v == 0:
            if allowzero:
                oshape.append(0)
                src += 1
            else:
                used_in.add(src)
                used_out.add(len(oshape))
                oshape.append(ishape[src])
                src += 1
        elif v == -1:
            if infer >= 0:
                raise ValueError("one and only one dimension can be inferred")
            infer = len(oshape)
            oshape.append(1)
            src += 1
        elif v == -2:
            while src < len(ishape):
                used_in.add(src)
                used_out.add(len(oshape))
                oshape.append(ishape[src])
                src += 1
        elif v == -3:
            used_in.update((src, src + 1))
            used_out.add(len(oshape))
            oshape.append(_mul(ishape[src], ishape[src + 1]))
            src += 2
        elif v == -4:
            d0 = ishape[src]
            used_in.add(src)
            src += 1
            d1, d2 = newshape[i + 1], newshape[i + 2]
            i += 2
            if d1 == -1 and d2 == -1:
                raise ValueError("split dims cannot both be -1")
            used_out.update((len(oshape), len(oshape) + 1))
            if d1 == -1:
                oshape += [None if d0 is None else d0 // d2, d2]
            elif d2 == -1:
                oshape += [d1, None if d0 is None else d0 // d1]
            else:
                oshape += [d1, d2]
        else:
            raise ValueError(f"unsupported newshape value {v}")
        i += 1
    if infer >= 0:
        num: Dim = _prod([d for k, d in enumerate(ishape) if k not in used_in])
        den: Dim = _prod([d for k, d in enumerate(oshape) if k not in used_out])
        oshape[infer] = None if num is None or den is None or den == 0 else num // den
    return tuple(oshape)


@_register("reshape")
def _reshape(args: list[Type], attrs: dict[str, Any]) -> Type:
    t = _shaped(args[0])
    if t is None:
        return None
    newshape = _ints(attrs.get("newshape"), "newshape")
    return t.with_shape(infer_newshape(t.shape, newshape,  # type: ignore[arg-type]
                                       bool(attrs.get("allowzero", False))))


@_register("reshape_like")
def _reshape_like(args: list[Type], attrs: dict[str, Any]) -> Type:
    t, like = _tensor(args[0]), _shaped(args[1])
    return None if t is None or like is None or attrs else t.with_shape(like.shape)


@_register("squeeze")
def _squeeze(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``SqueezeRel``: drop the listed axes (all of size 1 without ``axis``)."""
    t = _shaped(args[0])
    if t is None:
        return None
    axis = attrs.get("axis")
    shape = t.shape  # type: ignore[assignment]
    if axis is None:
        if any(d is None for d in shape):
            return None
        return t.with_shape(tuple(d for d in shape if d != 1))
    drop = {_norm_axis(a, len(shape)) for a in _ints(axis, "axis")}
    return t.with_shape(tuple(d for k, d in enumerate(shape) if k not in drop))


@_register("expand_dims")
def _expand_dims(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``ExpandDimsRel``: ``num_newaxis`` (default 1) ones at ``axis`` (negative counts from
    the end of the result)."""
    t = _shaped(args[0])
    if t is None:
        return None
    ndim = len(t.shape)  # type: ignore[arg-type]
    axis = _int(attrs.get("axis"), "axis")
    num = _int(attrs.get("num_newaxis", 1), "num_newaxis")
    pivot = axis + ndim + 1 if axis < 0 else axis
    if not 0 <= pivot <= ndim:
        return None
    shape = tuple(t.shape)  # type: ignore[arg-type]
    return t.with_shape(shape[:pivot] + (1,) * num + shape[pivot:])


@_register("transpose")
def _transpose(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``TransposeRel``: the axes reversed without ``axes``."""
    t = _shaped(args[0])
    if t is None:
        return None
    ndim = len(t.shape)  # type: ignore[arg-type]
    axes = attrs.get("axes")
    order = list(range(ndim))[::-1] if axes is None else [
        _norm_axis(a, ndim) for a in _ints(axes, "axes")]
    if sorted(order) != list(range(ndim)):
        return None
    return t.with_shape(tuple(t.shape[a] for a in order))  # type: ignore[index]


def _permutation(src: str, dst: str) -> list[int] | None:
    """Axes of ``src`` in ``dst`` order, for primal layouts (upper-case letters, each once)."""
    if not (src.isalpha() and dst.isalpha() and src.isupper() and dst.isupper()):
        return None
    if sorted(src) != sorted(dst) or len(set(src)) != len(src):
        return None
    return [src.index(c) for c in dst]


@_register("layout_transform")
def _layout_transform(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``LayoutTransformRel`` for layouts without split axes (``NHWC`` -> ``NCHW``,
    ``HWIO`` -> ``OIHW``); split layouts such as ``NCHW4c`` are not read."""
    t = _shaped(args[0])
    src, dst = attrs.get("src_layout"), attrs.get("dst_layout")
    if t is None or not isinstance(src, str) or not isinstance(dst, str):
        return None
    perm = _permutation(src, dst)
    if perm is None or len(perm) != len(t.shape):  # type: ignore[arg-type]
        return None
    return t.with_shape(tuple(t.shape[a] for a in perm))  # type: ignore[index]


@_register("concatenate", "qnn.concatenate")
def _concatenate(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``ConcatenateRel``: a tuple of tensors joined along ``axis`` (default 0); the dtype of
    the first. ``qnn.concatenate`` takes the same tuple first."""
    tup = args[0]
    if not isinstance(tup, TupleType) or not tup.fields:
        return None
    parts = [_shaped(f) for f in tup.fields]
    if any(p is None for p in parts):
        return None
    first = parts[0]
    assert first is not None and first.shape is not None
    ndim = len(first.shape)
    axis = _norm_axis(_int(attrs.get("axis", 0), "axis"), ndim)
    total: Dim = 0
    for p in parts:
        assert p is not None and p.shape is not None
        if len(p.shape) != ndim:
            return None
        total = None if total is None or p.shape[axis] is None else total + p.shape[axis]
    shape = list(first.shape)
    shape[axis] = total
    return TensorType(tuple(shape), first.dtype)


@_register("split")
def _split(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``SplitRel``: ``indices_or_sections`` an int (equal sections) or split points."""
    t = _shaped(args[0])
    if t is None:
        return None
    ndim = len(t.shape)  # type: ignore[arg-type]
    axis = _norm_axis(_int(attrs.get("axis", 0), "axis"), ndim)
    size = t.shape[axis]  # type: ignore[index]
    how = attrs.get("indices_or_sections")
    if isinstance(how, int) and not isinstance(how, bool):
        if size is None or how <= 0 or size % how:
            return None
        sizes: list[Dim] = [size // how] * how
    else:
        points = _ints(how, "indices_or_sections")
        bounds = [0, *points]
        sizes = [b - a for a, b in zip(bounds, bounds[1:], strict=False)]
        sizes.append(None if size is None else size - bounds[-1])
    fields = []
    for s in sizes:
        shape = list(t.shape)  # type: ignore[arg-type]
        shape[axis] = s
        fields.append(TensorType(tuple(shape), t.dtype))
    return TupleType(tuple(fields))


def _canonical(index: int, extent: int, stride: int) -> int:
    """``CanonicalizeIndex`` (include/tvm/topi/detail/strided_slice.h)."""
    lo, hi = (-1, extent - 1) if stride < 0 else (0, extent)
    if index < 0:
        index += extent
    return min(max(index, lo), hi)


@_register("strided_slice")
def _strided_slice(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``StridedSliceRel`` with topi's ``StridedSliceOutputShape``: ``begin``/``end``/
    ``strides`` per axis (missing trailing ones cover the whole axis; ``strides`` default 1),
    ``axes`` to name the sliced axes, ``slice_mode`` "end" (default) or "size"."""
    t = _shaped(args[0])
    if t is None:
        return None
    shape: list[Dim] = list(t.shape)  # type: ignore[arg-type]
    ndim = len(shape)
    big = (1 << 63) - 1
    mode = attrs.get("slice_mode", "end")

    def values(key: str, fill: int | None) -> list[int | None]:
        raw = attrs.get(key)
        if raw is None:
            return []
        if not isinstance(raw, list):
            raw = [raw]
        return [None if v is None else _int(v, key) for v in raw]

    begin, end, strides = values("begin", None), values("end", None), values("strides", 1)
    axes_raw = attrs.get("axes")
    if axes_raw is not None:
        axes = [_norm_axis(a, ndim) for a in _ints(axes_raw, "axes")]
    else:
        axes = list(range(ndim))
        strides += [1] * (ndim - len(strides))
    strides = [1 if mode == "size" or s is None else s for s in strides]
    strides += [1] * (len(axes) - len(strides))
    for k, axis in enumerate(axes):
        s = strides[k]
        b = begin[k] if k < len(begin) else None
        e = end[k] if k < len(end) else None
        if b is None:
            b = 0 if s > 0 else big
        if e is None:
            e = big if s > 0 else 0
        elif mode == "size":
            e = (big if s > 0 else 0) if e < 0 else b + e
        dim = shape[axis]
        if dim is None:
            continue
        b_c = _canonical(b, dim, s)
        e_c = _canonical(e, dim, s)
        if (s < 0 and e_c > b_c) or (s > 0 and b_c > e_c):
            return None
        shape[axis] = (abs(e_c - b_c) + abs(s) - 1) // abs(s)
    return t.with_shape(tuple(shape))


@_register("nn.pad")
def _pad(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``PadRel``: each dimension grows by ``pad_width[i] = [before, after]`` (the pad value
    is the second argument since TVM 0.8, an attribute before)."""
    t = _shaped(args[0])
    width = attrs.get("pad_width")
    if t is None or not isinstance(width, list) or len(width) != len(t.shape):  # type: ignore[arg-type]
        return None
    shape: list[Dim] = []
    for d, pair in zip(t.shape, width, strict=True):  # type: ignore[arg-type]
        before, after = _ints(pair, "pad_width")
        shape.append(None if d is None else d + before + after)
    return t.with_shape(tuple(shape))


_REDUCE = ("mean", "sum", "max", "min", "prod", "variance", "std", "all", "any")


@_register(*_REDUCE)
def _reduce(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``ReduceRel`` / ``ArgReduceRel`` (src/relay/op/tensor/reduce.cc): ``axis`` (None: all),
    ``keepdims``, ``exclude``; ``argmax``/``argmin`` give int32."""
    t = _shaped(args[0])
    if t is None:
        return None
    ndim = len(t.shape)  # type: ignore[arg-type]
    raw = attrs.get("axis")
    axes = set(range(ndim)) if raw is None else {_norm_axis(a, ndim) for a in _ints(raw, "axis")}
    if attrs.get("exclude", False):
        axes = set(range(ndim)) - axes
    keep = bool(attrs.get("keepdims", False))
    shape = tuple(1 if k in axes else d for k, d in enumerate(t.shape)) if keep else tuple(  # type: ignore[arg-type]
        d for k, d in enumerate(t.shape) if k not in axes)  # type: ignore[arg-type]
    return TensorType(shape, t.dtype)


@_register("argmax", "argmin")
def _arg_reduce(args: list[Type], attrs: dict[str, Any]) -> Type:
    t = _reduce(args, attrs)
    return t.with_dtype("int32") if isinstance(t, TensorType) else None


# --- convolution and pooling -------------------------------------------------------------------


def _pad_total(padding: Any, spatial: int) -> list[int]:
    """Total padding per spatial axis from the 1, ``spatial`` or ``2 * spatial`` forms
    (``GetPaddingHeightWidth``: one value for every side; one per axis for both of its sides;
    all the befores then all the afters, i.e. top, left, bottom, right in 2-D)."""
    pads = _ints(padding, "padding")
    if len(pads) == 1:
        return [2 * pads[0]] * spatial
    if len(pads) == spatial:
        return [2 * p for p in pads]
    if len(pads) == 2 * spatial:
        return [pads[k] + pads[k + spatial] for k in range(spatial)]
    raise ValueError(f"padding {pads}")


def _spatial(layout: str) -> str:
    return "".join(c for c in layout if c in "DHW")


def _conv(args: list[Type], attrs: dict[str, Any], dims: int, default_layout: str,
          default_kernel: str) -> Type:
    """``Conv1DRel``/``Conv2DRel`` (src/relay/op/nn/convolution.cc): the data read through
    ``data_layout``, the weight through ``kernel_layout`` (``O`` output channels, ``I`` input
    channels per group), ``channels``/``kernel_size`` when given, else the weight's; each spatial
    output is ``(in + pad - dilation * (k - 1) - 1) // stride + 1``, written in ``out_layout``
    (default ``data_layout``); dtype ``out_dtype`` or the data's."""
    data = _shaped(args[0])
    weight = _shaped(args[1]) if len(args) > 1 else None
    if data is None:
        return None
    layout = attrs.get("data_layout", default_layout)
    kernel_layout = attrs.get("kernel_layout", default_kernel)
    out_layout = attrs.get("out_layout") or layout
    if not all(isinstance(v, str) for v in (layout, kernel_layout, out_layout)):
        return None
    spatial = _spatial(default_layout)
    if (sorted(layout) != sorted("NC" + spatial) or sorted(out_layout) != sorted(layout)
            or len(data.shape) != len(layout)):  # type: ignore[arg-type]
        return None
    strides = _ints(attrs.get("strides", [1] * dims), "strides")
    dilation = _ints(attrs.get("dilation", [1] * dims), "dilation")
    pads = _pad_total(attrs.get("padding", [0] * dims), dims)
    if len(strides) == 1:
        strides = strides * dims
    if len(dilation) == 1:
        dilation = dilation * dims
    channels = attrs.get("channels")
    kernel = attrs.get("kernel_size")
    if isinstance(channels, int) and not isinstance(channels, bool) and kernel is not None:
        out_c: Dim = channels
        ksize: list[Dim] = list(_ints(kernel, "kernel_size"))
    else:
        if weight is None or sorted(kernel_layout) != sorted("OI" + spatial) or len(
                weight.shape) != len(kernel_layout):  # type: ignore[arg-type]
            return None
        w = dict(zip(kernel_layout, weight.shape, strict=True))  # type: ignore[arg-type]
        out_c = w["O"]
        ksize = [w[c] for c in spatial]
    shape = dict(zip(layout, data.shape, strict=True))  # type: ignore[arg-type]
    out = {"N": shape["N"], "C": out_c}
    for k, c in enumerate(spatial):
        d, kk = shape[c], ksize[k]
        if d is None or kk is None:
            out[c] = None
        else:
            out[c] = (d + pads[k] - dilation[k] * (kk - 1) - 1) // strides[k] + 1
    return TensorType(tuple(out[c] for c in out_layout), _dtype_attr(attrs) or data.dtype)


@_register("nn.conv2d", "qnn.conv2d")
def _conv2d(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``qnn.conv2d(data, weight, input_zp, kernel_zp, input_scale, kernel_scale, ...)`` has
    the attributes of ``nn.conv2d`` (``QnnConv2DRel``, src/relay/qnn/op/convolution.cc)."""
    return _conv(args, attrs, 2, "NCHW", "OIHW")


@_register("nn.conv1d")
def _conv1d(args: list[Type], attrs: dict[str, Any]) -> Type:
    return _conv(args, attrs, 1, "NCW", "OIW")


def _pool(args: list[Type], attrs: dict[str, Any], dims: int, default_layout: str) -> Type:
    """``Pool2DRel``/``Pool1DRel`` (src/relay/op/nn/pooling.cc, ``calculate_pool_dimension``):
    ``(in + pad - dilation * (pool - 1) - 1 [+ stride - 1 with ceil_mode]) // stride + 1``."""
    t = _shaped(args[0])
    if t is None:
        return None
    layout = attrs.get("layout", default_layout)
    out_layout = attrs.get("out_layout") or layout
    spatial = _spatial(default_layout)
    if (not isinstance(layout, str) or len(layout) != len(t.shape)  # type: ignore[arg-type]
            or any(c not in layout for c in spatial) or out_layout != layout):
        return None
    pool = _ints(attrs.get("pool_size"), "pool_size")
    strides = _ints(attrs.get("strides", [1] * dims), "strides")
    dilation = _ints(attrs.get("dilation", [1] * dims), "dilation")
    pads = _pad_total(attrs.get("padding", [0] * dims), dims)
    if len(pool) == 1:
        pool = pool * dims
    if len(strides) == 1:
        strides = strides * dims
    if len(dilation) == 1:
        dilation = dilation * dims
    ceil = bool(attrs.get("ceil_mode", False))
    shape = list(t.shape)  # type: ignore[arg-type]
    for k, c in enumerate(spatial):
        i = layout.index(c)
        d = shape[i]
        if d is None:
            continue
        num = d + pads[k] - ((pool[k] - 1) * dilation[k] + 1)
        if ceil:
            num += strides[k] - 1
        shape[i] = num // strides[k] + 1
    return t.with_shape(tuple(shape))


@_register("nn.max_pool2d", "nn.avg_pool2d")
def _pool2d(args: list[Type], attrs: dict[str, Any]) -> Type:
    return _pool(args, attrs, 2, "NCHW")


@_register("nn.max_pool1d", "nn.avg_pool1d")
def _pool1d(args: list[Type], attrs: dict[str, Any]) -> Type:
    return _pool(args, attrs, 1, "NCW")


@_register("nn.global_avg_pool2d", "nn.global_max_pool2d")
def _global_pool2d(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``GlobalPool2DRel``: H and W of ``layout`` (default NCHW) become 1."""
    return _adaptive(args, {**attrs, "output_size": [1, 1]})


@_register("nn.adaptive_avg_pool2d", "nn.adaptive_max_pool2d")
def _adaptive(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``AdaptivePool2DRel``: H and W become ``output_size`` (one value for both; a None
    entry keeps the input's)."""
    t = _shaped(args[0])
    layout = attrs.get("layout", "NCHW")
    if t is None or not isinstance(layout, str) or len(layout) != len(t.shape):  # type: ignore[arg-type]
        return None
    if "H" not in layout or "W" not in layout:
        return None
    size = attrs.get("output_size")
    if size is None:
        return t
    if isinstance(size, int) and not isinstance(size, bool):
        size = [size, size]
    if not isinstance(size, list) or len(size) not in (1, 2):
        return None
    if len(size) == 1:
        size = size * 2
    shape = list(t.shape)  # type: ignore[arg-type]
    for c, s in zip("HW", size, strict=True):
        if s is not None:
            shape[layout.index(c)] = _int(s, "output_size")
    return t.with_shape(tuple(shape))


@_register("nn.upsampling")
def _upsampling(args: list[Type], attrs: dict[str, Any]) -> Type:
    t = _shaped(args[0])
    layout = attrs.get("layout", "NCHW")
    if t is None or not isinstance(layout, str) or len(layout) != len(t.shape):  # type: ignore[arg-type]
        return None
    shape = list(t.shape)  # type: ignore[arg-type]
    for c, key in (("H", "scale_h"), ("W", "scale_w")):
        scale = attrs.get(key, 1.0)
        i = layout.index(c)
        if shape[i] is not None:
            shape[i] = int(math.floor(shape[i] * float(scale)))
    return t.with_shape(tuple(shape))


# --- operators that return tuples --------------------------------------------------------------


@_register("nn.dropout")
def _dropout(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``DropoutRel``: (the data's type, the mask of the same type)."""
    t = _tensor(args[0])
    return None if t is None else TupleType((t, t))


@_register("nn.batch_norm")
def _batch_norm(args: list[Type], attrs: dict[str, Any]) -> Type:
    """``BatchNormRel``: (the data's type, mean and variance shaped like the channel axis)."""
    t = _shaped(args[0])
    if t is None:
        return None
    axis = _norm_axis(_int(attrs.get("axis", 1), "axis"), len(t.shape))  # type: ignore[arg-type]
    stat = TensorType((t.shape[axis],), t.dtype)  # type: ignore[index]
    return TupleType((t, stat, stat))

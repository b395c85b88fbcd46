"""Shared preparation of the operators that only move data (PAD, CONCATENATION, SPLIT, SLICE,
TRANSPOSE, DEPTH_TO_SPACE, BATCH_TO_SPACE_ND, ...).

With static shapes and constant attributes, each such operator is a short list of
:class:`Move`\\ s computed at emit time: an affine loop nest copying a box of elements from a
source array (an input, a constant, or the output itself, as MIRROR_PAD reflects what it has
already written) to the output, or filling a box with one value. ``kernels/move.c.j2`` renders
them as nested ``for`` loops whose innermost contiguous run is one ``memcpy``; adjacent loop
dimensions that are contiguous in both arrays are merged first, so a slice of whole rows is one
``memcpy`` per row. The order of the element copies differs from TFLM's loops, the result does
not: every output element is written once (MIRROR_PAD: its reflections after their source).

An output that is one contiguous run of input 0 can be a view at that run's offset instead
(:func:`view_offsets`, ``OpSpec.offset_view``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from project_api.archive import dtypes
from project_api.tflite.graph import Graph, Operator, Tensor

from .common import ConstArray, Kernel, float_literal, tensor_in, unsupported

#: The element types TFLM's plain data movers take (each op narrows it to its kernel's list).
MOVER_TYPES = ("float32", "int8", "int16", "int32", "int64", "bool")


def ctype(dtype: str) -> str:
    """The C element type of ``dtype`` (``bool`` is a byte)."""
    return dtypes.parse(dtype).c_type


def strides(shape: tuple[int, ...] | list[int]) -> list[int]:
    """Row-major element strides of ``shape``."""
    out, acc = [0] * len(shape), 1
    for i in range(len(shape) - 1, -1, -1):
        out[i] = acc
        acc *= int(shape[i])
    return out


@dataclass
class Move:
    """``dst[dst_offset + sum(i_k * dst_stride_k)] = src[src_offset + sum(i_k * src_stride_k)]``
    for every ``i_k < count_k`` (``dims``: ``[count, dst_stride, src_stride]`` per loop,
    outermost first, in elements), or ``= value`` when ``src`` is None (a fill).

    ``src`` is a kernel argument (``in0``, ``out0``), or with ``const`` the suffix of one of the
    kernel's constant arrays."""

    dst: str
    dims: list[list[int]]
    src: str | None = None
    const: bool = False
    dst_offset: int = 0
    src_offset: int = 0
    value: str = ""

    @property
    def size(self) -> int:
        return int(np.prod([d[0] for d in self.dims])) if self.dims else 1

    def simplified(self) -> Move | None:
        """The same move with size-1 loops dropped and mergeable neighbours merged (None when
        it moves nothing)."""
        if any(d[0] <= 0 for d in self.dims):
            return None
        dims: list[list[int]] = []
        for count, ds, ss in (d for d in self.dims if d[0] != 1):
            if dims and dims[-1][1] == count * ds and dims[-1][2] == count * ss:
                dims[-1] = [dims[-1][0] * count, ds, ss]
            else:
                dims.append([count, ds, ss])
        return replace(self, dims=dims or [[1, 1, 1]])

    def contiguous(self) -> bool:
        """One run of consecutive elements in both arrays (after :meth:`simplified`)."""
        return len(self.dims) == 1 and self.dims[0][1] == 1 and self.dims[0][2] == 1

    def render(self) -> dict[str, Any]:
        """What ``move.c.j2`` needs: the outer loop counts, the index expressions of the
        innermost run's first element, its length and strides, and how to move it."""
        *outer, (n, ds, ss) = self.dims
        names = [f"i{k}" for k in range(len(outer))]
        kind = "fill" if self.src is None else "memcpy" if ds == ss == 1 else "loop"
        return {"counts": [d[0] for d in outer], "vars": names, "n": n, "ds": ds, "ss": ss,
                "dst": self.dst, "src": self.src, "const": self.const, "kind": kind,
                "value": self.value,
                "di": _index(self.dst_offset, names, [d[1] for d in outer]),
                "si": _index(self.src_offset, names, [d[2] for d in outer])}


def _index(offset: int, names: list[str], steps: list[int]) -> str:
    """``offset + i0 * s0 + ...`` as C (zero terms left out)."""
    terms = [str(offset)] if offset else []
    for name, step in zip(names, steps, strict=True):
        if step:
            term = name if abs(step) == 1 else f"{name} * {abs(step)}"
            terms.append(("- " if step < 0 else "+ ") + term if terms else
                         ("-" if step < 0 else "") + term)
    return " ".join(terms) or "0"


def box(dst: str, counts: list[int], dst_strides: list[int], src: str | None = None,
        src_strides: list[int] | None = None, dst_offset: int = 0, src_offset: int = 0,
        const: bool = False, value: str = "") -> Move:
    """A move over the box ``counts`` (one loop per dimension)."""
    ss = src_strides if src_strides is not None else [0] * len(counts)
    return Move(dst, [[int(c), int(d), int(s)] for c, d, s in zip(counts, dst_strides, ss,
                                                                  strict=True)],
                src, const, int(dst_offset), int(src_offset), value)


def fill_outside(dst: str, shape: list[int], lo: list[int], hi: list[int], value: str,
                 dst_offset: int = 0, dst_strides: list[int] | None = None) -> list[Move]:
    """The fills of every element of the array ``shape`` outside the box ``[lo, hi)``: per
    dimension ``d``, the slabs before ``lo[d]`` and from ``hi[d]`` on, inside the box along
    the dimensions before ``d`` and whole along the ones after (each element once)."""
    st = dst_strides if dst_strides is not None else strides(shape)
    moves = []
    for d in range(len(shape)):
        for start, stop in ((0, lo[d]), (hi[d], shape[d])):
            if stop <= start:
                continue
            counts = [hi[k] - lo[k] for k in range(d)] + [stop - start] + list(shape[d + 1:])
            offset = dst_offset + sum(lo[k] * st[k] for k in range(d)) + start * st[d]
            moves.append(box(dst, counts, st, dst_offset=offset, value=value))
    return moves


@dataclass
class Sources:
    """The kernel's activation inputs and constant arrays, as moves name them."""

    inputs: list[int] = field(default_factory=list)
    constants: list[ConstArray] = field(default_factory=list)

    def add(self, t: Tensor, suffix: str) -> tuple[str, bool]:
        """(name, is constant) of tensor ``t`` as a move source."""
        if t.is_const:
            data = np.asarray(t.data).reshape(-1)
            if data.dtype == np.bool_:
                data = data.astype(np.uint8)
            self.constants.append(ConstArray(suffix, ctype(t.dtype), data))
            return suffix, True
        if t.index in self.inputs:
            return f"in{self.inputs.index(t.index)}", False
        self.inputs.append(t.index)
        return f"in{len(self.inputs) - 1}", False


def move_kernel(op: Operator, moves: list[Move], sources: Sources, outputs: list[int],
                alias_offsets: tuple[int, ...] = (), template: str = "move.c.j2",
                params: dict[str, Any] | None = None) -> Kernel:
    """The kernel of ``moves`` (empty ones dropped); with ``alias_offsets``, a view of
    input 0 at those byte offsets where the code generator can alias it."""
    kept = [m for m in (mv.simplified() for mv in moves) if m is not None]
    p = dict(params or {})
    p["moves"] = [m.render() for m in kept]
    p["fill_loop"] = any(m["kind"] in ("fill", "loop") for m in p["moves"])
    used = {m.src for m in kept if m.src is not None and not m.const}
    used |= {m.value for m in kept if m.src is None}
    p["unused"] = [f"in{k}" for k in range(len(sources.inputs))
                   if f"in{k}" not in used and not any(f"in{k}[" in v for v in used)]
    written = {m.dst for m in kept}
    p["unused"] += [f"out{k}" for k in range(len(outputs)) if f"out{k}" not in written]
    return Kernel(op, template, p, list(sources.inputs), list(outputs),
                  list(sources.constants), alias=bool(alias_offsets),
                  alias_offsets=tuple(alias_offsets))


def view_offsets(moves_per_output: list[list[Move]], x: Tensor) -> tuple[int, ...]:
    """The byte offset of each output in activation input ``x`` (named ``in0``) if every
    output is one contiguous run of it (one move each), else ``()``."""
    if x.is_const:
        return ()
    offsets = []
    item = dtypes.parse(x.dtype).itemsize
    for moves in moves_per_output:
        kept = [m for m in (mv.simplified() for mv in moves) if m is not None]
        if len(kept) != 1:
            return ()
        m = kept[0]
        if m.src != "in0" or m.const or not m.contiguous() or m.dst_offset != 0:
            return ()
        offsets.append(m.src_offset * item)
    return tuple(offsets)


# --- classifiers and checks -------------------------------------------------------------------


def input0_scheme(op: Operator, graph: Graph) -> tuple[str, str]:
    """The element type of input 0, constant or not (GATHER's params, CONCATENATION's first
    value), as the scheme of an op that only moves data."""
    if not op.inputs or op.inputs[0] < 0:
        return "none", "the node has no input 0"
    x = graph.tensor(op.inputs[0])
    return x.dtype, f"input 0 '{x.name}' is {x.dtype}"


def output_scheme(op: Operator, graph: Graph) -> tuple[str, str]:
    """The element type of output 0 (SHAPE, FILL, ZEROS_LIKE: what the op writes)."""
    if not op.outputs:
        return "none", "the node has no output"
    y = graph.tensor(op.outputs[0])
    return y.dtype, f"output '{y.name}' is {y.dtype}"


def const_ints(op: Operator, graph: Graph, i: int, what: str,
               types: tuple[str, ...] = ("int32",)) -> list[int]:
    """The values of constant integer input ``i`` (``what`` names it in refusals)."""
    t = tensor_in(graph, op, i)
    if not t.is_const:
        raise unsupported(op, f"{what} '{t.name}' (input {i}) must be a constant, as TFLM "
                              "requires; it is an activation")
    if t.dtype not in types:
        raise unsupported(op, f"{what} '{t.name}' is {t.dtype}; supported: {', '.join(types)}")
    return [int(v) for v in np.asarray(t.data).reshape(-1)]


def check_types(op: Operator, allowed: tuple[str, ...], *tensors: Tensor) -> None:
    """Every tensor has the first one's element type, one of ``allowed``."""
    first = tensors[0]
    if first.dtype not in allowed:
        raise unsupported(op, f"'{first.name}' is {first.dtype}; supported: {', '.join(allowed)}")
    for t in tensors[1:]:
        if t.dtype != first.dtype:
            raise unsupported(op, f"'{t.name}' is {t.dtype}, '{first.name}' {first.dtype}; "
                                  "they must be the same type")


def check_rank(op: Operator, t: Tensor, most: int, least: int = 0) -> None:
    if not least <= len(t.shape) <= most:
        span = f"{least} to {most}" if least else f"at most {most}"
        raise unsupported(op, f"'{t.name}' has rank {len(t.shape)}; TFLM's kernel takes {span}")


def expect_shape(op: Operator, y: Tensor, shape: list[int] | tuple[int, ...], how: str) -> None:
    if list(y.shape) != [int(d) for d in shape]:
        raise unsupported(op, f"output '{y.name}' has shape {list(y.shape)}; {how} gives "
                              f"{[int(d) for d in shape]}")


def axis_of(op: Operator, axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` (negative: from the end) in ``[0, rank)``."""
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise unsupported(op, f"{what} {axis} is out of range for rank {rank}")
    return a


def literal(value: Any, dtype: str) -> str:
    """``value`` as a C constant of ``dtype``."""
    if dtype == "float32":
        return float_literal(float(value))
    v = int(value)
    if dtype == "bool":
        return "1" if v else "0"
    if dtype == "int64":
        return "(-INT64_MAX - 1)" if v == -(1 << 63) else f"INT64_C({v})"
    if dtype == "int32" and v == -(1 << 31):
        return "(-INT32_MAX - 1)"
    return str(v)


def const_value(t: Tensor) -> Any:
    """The single value of a one-element constant."""
    return np.asarray(t.data).reshape(-1)[0]

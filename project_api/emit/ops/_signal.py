"""What the operators of TFLM's signal library (``signal/micro/kernels``) share: their custom
options, read as TFLM reads them, and their tensor checks.

TFLM's signal kernels read their options (a FlexBuffers map written by TFLite's converter, one
entry per attribute of the TensorFlow op) not by key but by position: the i-th value of the
map's value vector, keys in sorted order, each value read as a signed integer of the vector's
byte width whatever its stored type (``FlexbufferWrapper::ElementAsInt32``/``ElementAsBool``).
:func:`options` does the same after checking, bounds first, that the bytes are a map of inline
scalars with exactly the keys the kernel expects (another key set would shift the positions
TFLM reads); anything else is one line naming the node and the problem. The typed ops (RFFT,
IRFFT, OVERLAP_ADD) also look up ``T`` by key, a TFLite ``TensorType``.
"""

from __future__ import annotations

from typing import Any

from flatbuffers import flexbuffers

from project_api.tflite.graph import Graph, Operator, Tensor

from ...errors import EmitError
from .common import check_counts, dtype_scheme, tensor_in, tensor_out, unsupported

#: Keys of at most this many entries (the largest signal op has 9).
MAX_KEYS = 64

#: TFLite ``TensorType`` codes of the element types the typed signal ops take (``T``).
TENSOR_TYPE_CODES = {"float32": 0, "int32": 2, "int16": 7}

#: The classifier of every signal op: the element type of its first activation input.
classify = dtype_scheme

_INLINE = (flexbuffers.Type.INT, flexbuffers.Type.UINT, flexbuffers.Type.BOOL)


def _uint(buf: bytes, pos: int, width: int) -> int:
    return int.from_bytes(buf[pos:pos + width], "little", signed=False)


def _sint(buf: bytes, pos: int, width: int) -> int:
    return int.from_bytes(buf[pos:pos + width], "little", signed=True)


def _packed(op: Operator, byte: int) -> tuple[int, Any]:
    """(byte width, type) of a FlexBuffers packed type byte."""
    try:
        return flexbuffers.Type.Unpack(byte)
    except ValueError:
        raise _fail(op, f"unknown value type {byte >> 2}") from None


def _fail(op: Operator, what: str) -> EmitError:
    return EmitError(f"{op.describe()}: custom options are not a valid FlexBuffers map ({what}); "
                     "re-export the model with TFLite's converter")


def _read_map(op: Operator, raw: bytes) -> tuple[list[str], list[int], list[Any]]:
    """(keys, values as TFLM reads them, value types) of the FlexBuffers map ``raw``, every
    offset checked against the buffer before it is followed."""
    n = len(raw)
    if n < 3:
        raise _fail(op, f"{n} bytes")
    root_width = raw[-1]
    if root_width not in (1, 2, 4, 8) or n < 2 + root_width:
        raise _fail(op, f"root byte width {root_width}")
    width, kind = _packed(op, raw[-2])
    if kind is not flexbuffers.Type.MAP:
        raise _fail(op, f"the root is a {kind.name}, not a map")
    root = n - 2 - root_width
    vec = root - _uint(raw, root, root_width)
    if vec - 3 * width < 0 or vec > root:
        raise _fail(op, "the map's offset points outside the buffer")
    size = _uint(raw, vec - width, width)
    if size > MAX_KEYS or vec + size * width + size > n:
        raise _fail(op, f"a map of {size} entries does not fit in {n} bytes")
    keys_at = vec - 3 * width
    keys_vec = keys_at - _uint(raw, keys_at, width)
    keys_width = _uint(raw, vec - 2 * width, width)
    if keys_width not in (1, 2, 4, 8) or keys_vec - keys_width < 0 or keys_vec > keys_at:
        raise _fail(op, "the keys' offset points outside the buffer")
    if _uint(raw, keys_vec - keys_width, keys_width) != size:
        raise _fail(op, "the keys and values differ in number")
    if keys_vec + size * keys_width > n:
        raise _fail(op, "the keys run past the buffer")
    keys = []
    for i in range(size):
        at = keys_vec + i * keys_width
        start = at - _uint(raw, at, keys_width)
        end = raw.find(b"\0", max(start, 0))
        if start < 0 or end < 0:
            raise _fail(op, f"key {i} points outside the buffer")
        try:
            keys.append(raw[start:end].decode("ascii"))
        except UnicodeDecodeError:
            raise _fail(op, f"key {i} is not ASCII") from None
    if keys != sorted(set(keys)):
        raise _fail(op, "the keys are not sorted and unique")
    # The map as flatbuffers.flexbuffers reads it (every offset it follows is checked above).
    try:
        m = flexbuffers.GetRoot(bytearray(raw)).AsMap
        if [k.AsKey for k in m.Keys] != keys:
            raise _fail(op, "inconsistent keys")
    except (IndexError, ValueError, TypeError, KeyError, UnicodeDecodeError) as exc:
        raise _fail(op, str(exc)) from None
    kinds = [_packed(op, raw[vec + size * width + i])[1] for i in range(size)]
    values = [_sint(raw, vec + i * width, width) for i in range(size)]
    return keys, values, kinds


def options(op: Operator, expected: dict[str, str]) -> dict[str, int]:
    """The custom options of signal op ``op`` as TFLM's kernel reads them: ``expected`` maps
    each key to ``"int"`` or ``"bool"``; the map must hold exactly those keys (TFLM reads the
    values by position), each an inline integer or bool."""
    raw = op.custom_options or b""
    keys, values, kinds = _read_map(op, bytes(raw))
    if set(keys) != set(expected):
        missing = sorted(set(expected) - set(keys))
        extra = sorted(set(keys) - set(expected))
        parts = ([f"missing {', '.join(missing)}"] if missing else []) + (
            [f"unexpected {', '.join(extra)}"] if extra else [])
        raise unsupported(op, f"custom options have keys {keys} ({'; '.join(parts)}); TFLM "
                              f"reads its options by position and needs exactly "
                              f"{sorted(expected)}")
    out = {}
    for key, value, kind in zip(keys, values, kinds, strict=True):
        if kind not in _INLINE:
            raise unsupported(op, f"custom option '{key}' is a {kind.name}; TFLM reads an "
                                  f"inline {expected[key]} there")
        out[key] = int(value != 0) if expected[key] == "bool" else value
    return out


def int32(op: Operator, opts: dict[str, int], key: str, lo: int, hi: int, why: str) -> int:
    """Option ``key`` as TFLM's ``ElementAsInt32`` truncates it, within ``[lo, hi]``."""
    v = opts[key] & 0xFFFFFFFF
    v = v - (1 << 32) if v >= 1 << 31 else v
    if not lo <= v <= hi:
        raise unsupported(op, f"custom option {key} = {v} is out of [{lo}, {hi}] ({why})")
    return v


def typed(op: Operator, opts: dict[str, int], x: Tensor, allowed: tuple[str, ...]) -> None:
    """The ``T`` option of a typed op names the type of its tensors (TFLM's Init picks the
    kernel by ``T``; its Prepare then requires the tensors to be of that type)."""
    names = {v: k for k, v in TENSOR_TYPE_CODES.items() if k in allowed}
    if opts["T"] not in names:
        raise unsupported(op, f"custom option T = {opts['T']} is no type TFLM's kernel takes "
                              f"({', '.join(f'{names[c]} = {c}' for c in sorted(names))})")
    if names[opts["T"]] != x.dtype:
        raise unsupported(op, f"custom option T = {opts['T']} ({names[opts['T']]}) differs "
                              f"from the type {x.dtype} of '{x.name}'")


def dtype(op: Operator, t: Tensor, want: str, what: str) -> None:
    if t.dtype != want:
        raise unsupported(op, f"{what} '{t.name}' is {t.dtype}; TFLM's kernel takes {want}")


def rank(op: Operator, t: Tensor, want: int, what: str) -> None:
    if len(t.shape) != want:
        raise unsupported(op, f"{what} '{t.name}' has shape {list(t.shape)}; TFLM's kernel "
                              f"takes rank {want}")


def same_shape(op: Operator, a: Tensor, b: Tensor) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise unsupported(op, f"'{b.name}' has shape {list(b.shape)}, '{a.name}' "
                              f"{list(a.shape)}; they must match")


def operands(op: Operator, graph: Graph, n_in: int, n_out: int
             ) -> tuple[list[Tensor], list[Tensor]]:
    """The inputs and outputs of a signal op, counted as TFLM's Prepare counts them (every
    input present)."""
    check_counts(op, (n_in,), n_out)
    ins = []
    for i in range(n_in):
        t = tensor_in(graph, op, i)
        assert t is not None  # tensor_in raises for an absent input that is not optional
        ins.append(t)
    return ins, [tensor_out(graph, op, i) for i in range(n_out)]

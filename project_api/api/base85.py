"""Tensor bytes on the wire: base85 (RFC 1924's alphabet) as microTVM's server writes it, with a
numpy fast path for large tensors and the JSON text that carries it.
"""

from __future__ import annotations

import base64
import json
import math
import re
from typing import Any

B85_ALPHABET = (
    b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"
)

# Below these sizes the stdlib codec beats numpy's per-call overhead.
_NUMPY_ENCODE_MIN_BYTES = 80

_NUMPY_DECODE_MIN_CHARS = 100

_np: Any = None

_np_tables: Any = None


def _numpy() -> Any:
    """numpy plus our lookup tables, imported on first use; None when numpy is missing."""
    global _np, _np_tables
    if _np is None:
        try:
            import numpy
        except ImportError:
            _np = False
            return None
        encode = numpy.frombuffer(B85_ALPHABET, dtype=numpy.uint8).copy()
        decode = numpy.full(256, 255, dtype=numpy.uint8)
        decode[encode] = numpy.arange(85, dtype=numpy.uint8)
        weights = numpy.array([85**4, 85**3, 85**2, 85, 1], dtype=numpy.uint64)
        _np_tables = (encode, decode, weights, weights.astype(numpy.uint32))
        _np = numpy
    return _np or None


def _b85encode_numpy(data: bytes | bytearray | memoryview) -> bytes:
    """Vectorised :func:`base64.b85encode` (no padding); identical output for every input."""
    np = _numpy()
    if np is None:
        return base64.b85encode(data)
    raw = bytes(data)
    pad = (-len(raw)) % 4
    if not raw:
        return b""
    words = np.frombuffer(raw + b"\0" * pad, dtype=">u4").astype(np.uint32)
    if words.size <= 1024:
        # Few calls: all five digits at once (dividing by an array is slow per element).
        digits = words[:, None] // _np_tables[3] % 85
    else:
        # Many elements: numpy divides by a scalar much faster.
        digits = np.empty((words.size, 5), dtype=np.uint8)
        for col in range(4, 0, -1):
            quotient = words // 85
            digits[:, col] = words - quotient * 85
            words = quotient
        digits[:, 0] = words
    out = _np_tables[0][digits].tobytes()
    return out[: len(out) - pad] if pad else out


def _b85decode_numpy(data: str | bytes | bytearray | memoryview) -> bytes:
    """Vectorised :func:`base64.b85decode`: identical output and identical ValueErrors."""
    np = _numpy()
    if np is None:
        return base64.b85decode(data)
    if isinstance(data, str):
        try:
            raw = data.encode("ascii")
        except UnicodeEncodeError:
            raise ValueError("string argument should contain only ASCII characters") from None
    else:
        raw = bytes(data)
    if not raw:
        return b""
    pad = (-len(raw)) % 5
    values = _np_tables[1][np.frombuffer(raw + b"~" * pad, dtype=np.uint8)]
    # Each 5-digit group is a base-85 number: one matrix-vector product (exact in uint64).
    acc = values.reshape(-1, 5).astype(np.uint64) @ _np_tables[2]
    if values.max() == 255 or acc.max() > 0xFFFFFFFF:
        _b85_raise_first_error(np, values, acc)
    out = acc.astype(">u4").tobytes()
    return out[: len(out) - pad] if pad else out


def _b85_raise_first_error(np: Any, values: Any, acc: Any) -> None:
    """Raise the ValueError base64.b85decode raises: the first bad hunk, in input order."""
    bad = values == 255
    first_bad = int(bad.argmax()) if bad.any() else None
    overflow = acc > 0xFFFFFFFF
    if first_bad is not None:
        overflow[first_bad // 5 :] = False  # a hunk with a bad character reports that first
    if overflow.any():
        raise ValueError(f"base85 overflow in hunk starting at byte {int(overflow.argmax()) * 5}")
    raise ValueError(f"bad base85 character at position {first_bad}")


def b85encode(data: bytes | bytearray | memoryview) -> bytes:
    """Base85-encode ``data`` exactly as ``base64.b85encode(data)`` does, only faster."""
    if len(data) < _NUMPY_ENCODE_MIN_BYTES:
        return base64.b85encode(data)
    return _b85encode_numpy(data)


def b85decode(data: str | bytes | bytearray | memoryview) -> bytes:
    """Decode base85 exactly as ``base64.b85decode(data)`` does (same errors), only faster."""
    if len(data) < _NUMPY_DECODE_MIN_CHARS:
        return base64.b85decode(data)
    return _b85decode_numpy(data)


class Base85Text(str):
    """Text from :func:`b85encode`: no character needs JSON escaping, so it is quoted as is."""

    __slots__ = ()


_SAFE_KEY = re.compile(r"[A-Za-z0-9_]+\Z").match


def _scalar_json(value: Any) -> str | None:
    if value is None:
        return "null"
    kind = type(value)
    if kind is int or (kind is float and math.isfinite(value)):
        return repr(value)
    if kind is Base85Text:
        return '"' + value + '"'
    return None


def json_dumps(value: Any) -> str:
    """Exactly ``json.dumps(value)`` (default separators); the shapes of the transport calls
    (flat objects of numbers, null and base85 text) skip the generic encoder."""
    text = _scalar_json(value)
    if text is not None:
        return text
    if type(value) is dict:
        parts = []
        for key, item in value.items():
            text = _scalar_json(item)
            if text is None or type(key) is not str or not _SAFE_KEY(key):
                return json.dumps(value)
            parts.append('"' + key + '": ' + text)
        return "{" + ", ".join(parts) + "}"
    return json.dumps(value)

"""The one table of tensor element types: names, DLPack codes, storage sizes, C and numpy types.

Every part of project-api that turns a dtype into something else goes through here: the MLF
reader (sizes), the template model glue (DLDataType codes), the device RPC client (DLPack types on
the wire) and the emitter (C types)::

    >>> from project_api import dtypes
    >>> t = dtypes.parse("int8")
    >>> (t.code, t.bits, t.lanes, t.c_type, t.itemsize)
    (0, 8, 1, 'int8_t', 1)
    >>> dtypes.from_dlpack(2, 32).name
    'float32'

Names follow TVM's spelling (``int8``, ``uint8``, ``float32``, ``bfloat16``, ``bool``, and vector
types such as ``int8x4``). DLPack codes are those of ``dlpack.h``: 0 int, 1 uint, 2 float,
4 bfloat (``bool`` is stored as a byte, DLPack code 1 with 8 bits, as TVM stores it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

#: DLPack type codes (``DLDataTypeCode`` in dlpack.h).
DL_INT = 0
DL_UINT = 1
DL_FLOAT = 2
DL_BFLOAT = 4

_KIND_CODES = {"int": DL_INT, "uint": DL_UINT, "float": DL_FLOAT, "bfloat": DL_BFLOAT}
_CODE_KINDS = {code: kind for kind, code in _KIND_CODES.items()}
_NAME_RE = re.compile(r"(bfloat|float|uint|int)(\d+)(?:x(\d+))?")
#: C spellings of the scalar types the generated C and our glue use.
_C_TYPES = {
    "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "float32": "float", "float64": "double", "bool": "uint8_t",
}
#: numpy kind letter per DLPack code (bfloat has no numpy type).
_NUMPY_KINDS = {DL_INT: "i", DL_UINT: "u", DL_FLOAT: "f"}


class DTypeError(ValueError):
    """A dtype name or DLPack triple this table does not know."""


@dataclass(frozen=True)
class DType:
    """One element type: its TVM name and its DLPack ``(code, bits, lanes)``."""

    name: str
    code: int
    bits: int
    lanes: int = 1

    @property
    def itemsize(self) -> int:
        """Bytes of storage per element (vector lanes included, rounded up to whole bytes)."""
        return (self.bits * self.lanes + 7) // 8

    @property
    def is_float(self) -> bool:
        return self.code in (DL_FLOAT, DL_BFLOAT)

    @property
    def is_integer(self) -> bool:
        return self.code in (DL_INT, DL_UINT)

    @property
    def c_type(self) -> str:
        """The C type of one element (``int8_t``, ``float``, ...); DTypeError if it has none."""
        try:
            return _C_TYPES[self.name]
        except KeyError:
            raise DTypeError(f"dtype {self.name!r} has no C scalar type") from None

    def to_numpy(self) -> Any:
        """The little-endian numpy dtype; DTypeError for bfloat and vector types."""
        import numpy as np

        if self.name == "bool":
            return np.dtype(np.bool_)
        kind = _NUMPY_KINDS.get(self.code)
        if kind is None or self.lanes != 1 or self.bits % 8 or not self.bits:
            raise DTypeError(f"dtype {self.name!r} has no numpy equivalent")
        return np.dtype(f"<{kind}{self.bits // 8}")

    def size_bytes(self, num_elements: int) -> int:
        """Bytes a dense tensor of ``num_elements`` elements occupies: ``ceil(n * bits / 8)``."""
        return (num_elements * self.bits * self.lanes + 7) // 8


def parse(name: str) -> DType:
    """The DType named ``name`` (``int8``, ``float32``, ``bool``, ``int8x4``, ...)."""
    if name == "bool":
        return DType("bool", DL_UINT, 8, 1)
    m = _NAME_RE.fullmatch(name) if isinstance(name, str) else None
    if m is None or int(m.group(2)) == 0 or (m.group(3) is not None and int(m.group(3)) == 0):
        raise DTypeError(f"unknown dtype {name!r}; expected e.g. int8, uint8, int32, float32")
    return DType(name, _KIND_CODES[m.group(1)], int(m.group(2)), int(m.group(3) or 1))


def from_dlpack(code: int, bits: int, lanes: int = 1) -> DType:
    """The DType of a DLPack ``(code, bits, lanes)`` triple."""
    kind = _CODE_KINDS.get(code)
    if kind is None or bits <= 0 or lanes <= 0:
        raise DTypeError(f"unknown DLPack data type (code {code}, bits {bits}, lanes {lanes})")
    return DType(f"{kind}{bits}" + (f"x{lanes}" if lanes != 1 else ""), code, bits, lanes)


def from_numpy(dtype: Any) -> DType:
    """The DType of a numpy dtype (int, uint, float or bool)."""
    import numpy as np

    dt = np.dtype(dtype)
    if dt.kind == "b":
        return parse("bool")
    kinds = {"i": "int", "u": "uint", "f": "float"}
    if dt.kind not in kinds:
        raise DTypeError(f"numpy dtype {dt} has no DLPack equivalent; use an int, uint or float type")
    return parse(f"{kinds[dt.kind]}{dt.itemsize * 8}")

"""Writing a built model as a TFLite flatbuffer: the schema version, the per-operator versions,
aligned buffers, and the table writer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import flatbuffers
import numpy as np

from project_api.tflite import schema

_SCHEMA_VERSION = 3

#: Operator versions as TFLite's converter writes them where a runtime refuses version 1
#: (LiteRT registers BROADCAST_TO from version 2); every other operator is written as 1.
_OPCODE_VERSIONS = {"BROADCAST_TO": 2}

_FILE_IDENTIFIER = b"TFL3"

_BUFFER_ALIGNMENT_BYTES = 16


@dataclass(frozen=True)
class Ref:
    """An offset already written to the builder (a vector, string or table), for
    :func:`write_table`."""

    offset: int


#: numpy element type of each scalar vector element type of the schema.
_VECTOR_DTYPES = {"int": np.int32, "uint": np.uint32, "long": np.int64, "ulong": np.uint64,
                  "float": np.float32, "double": np.float64, "byte": np.int8, "ubyte": np.uint8,
                  "bool": np.uint8, "short": np.int16, "ushort": np.uint16}

#: flatbuffers' Prepend*Slot of each scalar storage type.
_PREPEND = {"bool": "PrependBoolSlot", "byte": "PrependInt8Slot", "int8": "PrependInt8Slot",
            "ubyte": "PrependUint8Slot", "uint8": "PrependUint8Slot",
            "short": "PrependInt16Slot", "ushort": "PrependUint16Slot",
            "int": "PrependInt32Slot", "int32": "PrependInt32Slot", "uint": "PrependUint32Slot",
            "long": "PrependInt64Slot", "ulong": "PrependUint64Slot",
            "float": "PrependFloat32Slot", "double": "PrependFloat64Slot"}


def write_table(b: flatbuffers.Builder, table: str, values: dict[str, Any]) -> int:
    """Write schema table ``table`` (an options table or a structural one) with ``values``
    (field name -> decoded value: enum member names, dtype names for ``TensorType``, lists for
    vectors, str for strings, :class:`Ref` for anything already written); returns its offset.
    Fields equal to their default are left out, as flatbuffers does."""
    fields = schema.table_fields(table)
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ValueError(f"{table} has no field {', '.join(unknown)}")
    offsets: dict[str, int] = {}
    for name, value in values.items():
        f = fields[name]
        if isinstance(value, Ref):
            offsets[name] = value.offset
        elif f.kind == "vector":
            if f.type not in _VECTOR_DTYPES:
                raise ValueError(f"{table}.{name}: pass a Ref to the written vector")
            offsets[name] = b.CreateNumpyVector(np.asarray(value, dtype=_VECTOR_DTYPES[f.type]))
        elif f.kind == "string":
            offsets[name] = b.CreateString(value)
        elif f.kind in ("table", "union"):
            raise ValueError(f"{table}.{name}: pass a Ref to the written table")
    b.StartObject(len(fields))
    for f in sorted((fields[n] for n in values), key=lambda f: f.slot):
        if f.name in offsets:
            b.PrependUOffsetTRelativeSlot(f.slot, offsets[f.name], 0)
            continue
        value, default = f.encode(values[f.name]), f.encode(f.default)
        if f.storage == "bool":
            value, default = bool(value), bool(default)
        getattr(b, _PREPEND[f.storage])(f.slot, value, default)
    return b.EndObject()


def _byte_vector(b: flatbuffers.Builder, data: bytes, alignment: int) -> int:
    b.StartVector(1, len(data), alignment)
    b.head = b.head - len(data)
    b.Bytes[b.head:b.head + len(data)] = data
    return b.EndVector()


def _table_vector(b: flatbuffers.Builder, offsets: list[int]) -> int:
    b.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        b.PrependUOffsetTRelative(off)
    return b.EndVector()

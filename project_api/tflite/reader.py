"""Read a TFLite flatbuffer into the emitter's :class:`~.graph.Graph`.

This is a small, bounds-checked flatbuffer reader written for untrusted input: every offset and
length is checked against the buffer before use, vectors can never be longer than the bytes that
remain, and nothing recurses. Any malformed file (truncated, bit-flipped, not a TFLite model)
raises :class:`~project_api.errors.EmitError` with a one-line reason; it never crashes or hangs.

Which field sits in which slot, with which type and default, comes from :mod:`.schema`: tables
are read by field name, and every operator's options are decoded from its options table the
same way (enums to their member names), so no operator needs code here.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np

from project_api.errors import EmitError, UnsupportedOperatorError
from project_api.system import bounded
from project_api.tflite import schema
from project_api.tflite.graph import Graph, Operator, Quantization, Tensor

#: numpy element type of each scalar vector element type of the schema.
_VECTOR_DTYPES = {"int": "int32", "uint": "uint32", "long": "int64", "ulong": "uint64",
                  "float": "float32", "double": "float64", "byte": "int8", "ubyte": "uint8",
                  "bool": "uint8", "short": "int16", "ushort": "uint16"}


class _Buf:
    """Checked access to a flatbuffer's bytes."""

    def __init__(self, data: bytes):
        self.data = data
        self.size = len(data)

    def need(self, pos: int, n: int, what: str) -> None:
        if pos < 0 or n < 0 or pos + n > self.size:
            raise EmitError(f"corrupt TFLite file: {what} at byte {pos} runs past the end "
                            f"({self.size} bytes); re-export the model")

    def unpack(self, fmt: str, pos: int, what: str) -> Any:
        self.need(pos, struct.calcsize(fmt), what)
        return struct.unpack_from(fmt, self.data, pos)[0]

    def u16(self, pos: int) -> int:
        return self.unpack("<H", pos, "u16")

    def i32(self, pos: int) -> int:
        return self.unpack("<i", pos, "i32")

    def u32(self, pos: int) -> int:
        return self.unpack("<I", pos, "u32")


class _Table:
    """A flatbuffer table of schema type ``table`` at ``pos``, read by field name."""

    def __init__(self, buf: _Buf, pos: int, what: str, table: str):
        self.buf = buf
        self.pos = pos
        self.what = what
        self.type_name = table
        self.fields = schema.table_fields(table)
        vt = pos - buf.i32(pos)
        self.vt = vt
        self.vt_size = buf.u16(vt)
        if self.vt_size < 4 or self.vt_size % 2:
            raise EmitError(f"corrupt TFLite file: bad vtable for {what}")
        buf.need(vt, self.vt_size, f"vtable of {what}")

    def _field(self, name: str) -> tuple[schema.Field, int]:
        """The field and the position of its value (0 when the table does not store it)."""
        f = self.fields[name]
        slot = 4 + 2 * f.slot
        if slot + 2 > self.vt_size:
            return f, 0
        off = self.buf.u16(self.vt + slot)
        return f, (self.pos + off if off else 0)

    def has(self, name: str) -> bool:
        return self._field(name)[1] != 0

    def raw(self, name: str) -> int | float:
        """The stored number of a scalar, enum or union-tag field (its default if absent)."""
        f, p = self._field(name)
        if not p:
            return f.encode(f.default)
        fmt = schema.SCALARS[f.storage][0]
        return self.buf.unpack(fmt, p, f"{self.type_name}.{name} of {self.what}")

    def value(self, name: str) -> Any:
        """A scalar or enum field, decoded (enum member names, bools)."""
        return self.fields[name].decode(self.raw(name))

    def _indirect(self, name: str) -> int:
        """The position an offset field points to (0 when absent)."""
        _, p = self._field(name)
        return p + self.buf.u32(p) if p else 0

    def _vector(self, name: str, elem_size: int) -> tuple[int, int] | None:
        start = self._indirect(name)
        if not start:
            return None
        n = self.buf.u32(start)
        self.buf.need(start + 4, n * elem_size, f"vector {name} of {self.what}")
        return start + 4, n

    def array(self, name: str) -> np.ndarray | None:
        """A vector of scalars as a numpy array (None when absent)."""
        dtype = _VECTOR_DTYPES[self.fields[name].type]
        dt = np.dtype(dtype).newbyteorder("<")
        v = self._vector(name, dt.itemsize)
        if v is None:
            return None
        start, n = v
        return np.frombuffer(self.buf.data, dtype=dt, count=n, offset=start).astype(dtype)

    def string(self, name: str) -> str | None:
        start = self._indirect(name)
        if not start:
            return None
        n = self.buf.u32(start)
        self.buf.need(start + 4, n, f"string {name} of {self.what}")
        return self.buf.data[start + 4:start + 4 + n].decode("utf-8", errors="replace")

    def table(self, name: str, what: str) -> _Table | None:
        start = self._indirect(name)
        return _Table(self.buf, start, what, self.fields[name].type) if start else None

    def tables(self, name: str, what: str) -> list[_Table]:
        v = self._vector(name, 4)
        if v is None:
            return []
        start, n = v
        kind = self.fields[name].type
        return [_Table(self.buf, start + 4 * k + self.buf.u32(start + 4 * k), f"{what}[{k}]",
                       kind) for k in range(n)]

    def union(self, name: str, what: str) -> tuple[str | None, _Table | None]:
        """(member name, its table) of a ``BuiltinOptions`` union field; (None, None) if none.
        A tag this schema does not know gives (None, None) when no table is stored."""
        tag = int(self.raw(f"{name}_type"))
        member = schema.OPTIONS_BY_TAG.get(tag)
        start = self._indirect(name)
        if not start:
            return member, None
        if member is None:
            raise EmitError(f"corrupt TFLite file: {what} has options of an unknown union "
                            f"tag {tag}")
        return member, _Table(self.buf, start, what, member)

    def decode(self) -> dict[str, Any]:
        """Every (not deprecated) field as a plain value: scalars and enums decoded, vectors
        as lists, strings as str; absent vectors and strings are None."""
        out: dict[str, Any] = {}
        for name, f in self.fields.items():
            if f.deprecated:
                continue
            if f.kind in ("scalar", "enum"):
                out[name] = self.value(name)
            elif f.kind == "vector" and f.type in _VECTOR_DTYPES:
                a = self.array(name)
                out[name] = None if a is None else [
                    bool(x) if f.type == "bool" else (float(x) if a.dtype.kind == "f" else int(x))
                    for x in a]
            elif f.kind == "string":
                out[name] = self.string(name)
        return out


def _parse_quant(t: _Table | None, what: str) -> Quantization | None:
    if t is None:
        return None
    scale = t.array("scale")
    zp = t.array("zero_point")
    if scale is None or len(scale) == 0:
        return None
    if int(t.raw("details_type")) != 0:
        raise UnsupportedOperatorError(f"{what}: custom quantization details are not supported")
    zps = [int(z) for z in zp] if zp is not None and len(zp) else [0] * len(scale)
    if len(zps) != len(scale):
        if len(zps) == 1:
            zps = zps * len(scale)
        else:
            raise EmitError("corrupt TFLite file: quantization scale/zero_point lengths differ")
    return Quantization([float(s) for s in scale], zps, int(t.value("quantized_dimension")))


def read_tflite(model: bytes | bytearray | str | Path) -> Graph:
    """Parse a TFLite flatbuffer (bytes or a path) into the :class:`Graph` of its main
    subgraph; every subgraph is in ``graph.subgraphs``.

    Raises :class:`EmitError` for anything that is not a well-formed TFLite model, and
    :class:`UnsupportedOperatorError` for data the IR cannot hold (sparse or externally stored
    constants, tensor types newer than the schema, custom quantization).
    """
    if isinstance(model, (str, Path)):
        try:
            data = Path(model).read_bytes()
        except OSError as e:
            raise EmitError(f"cannot read model {model}: {e.strerror}") from None
    else:
        data = bytes(model)
    if len(data) < 8:
        raise EmitError(f"not a TFLite model: only {len(data)} bytes")
    if data[4:8] != b"TFL3":
        raise EmitError("not a TFLite model: file identifier is not 'TFL3' (expected a .tflite "
                        "flatbuffer)")
    try:
        return _read(data)
    except EmitError:
        raise
    except (struct.error, ValueError, IndexError, OverflowError, UnicodeDecodeError) as e:
        raise EmitError(f"corrupt TFLite file: {e}") from None


def _read(data: bytes) -> Graph:
    buf = _Buf(data)
    root = _Table(buf, buf.u32(0), "Model", "Model")
    version = int(root.value("version"))
    if version != 3:
        raise EmitError(f"unsupported TFLite schema version {version} (expected 3)")
    codes: list[tuple[str, int, str | None, int]] = []  # (name, code, custom name, version)
    for oc in root.tables("operator_codes", "OperatorCode"):
        code = max(int(oc.raw("deprecated_builtin_code")), int(oc.raw("builtin_code")))
        name = schema.operator_name(code) or ""
        custom = (oc.string("custom_code") or "") if code == schema.CUSTOM else None
        codes.append((name, code, custom, int(oc.value("version"))))
    buffers = root.tables("buffers", "Buffer")
    subgraph_tables = root.tables("subgraphs", "SubGraph")
    if not subgraph_tables:
        raise EmitError("the model has no subgraphs")
    description = root.string("description") or ""
    graphs = [_read_subgraph(buf, sg, k, codes, buffers, description)
              for k, sg in enumerate(subgraph_tables)]
    for g in graphs:
        g.subgraphs = graphs
    return graphs[0]


def _buffer_bytes(buf: _Buf, buffers: list[_Table], idx: int) -> bytes | None:
    if idx == 0:
        return None
    if idx >= len(buffers):
        raise EmitError(f"corrupt TFLite file: buffer index {idx} out of range")
    b = buffers[idx]
    arr = b.array("data")
    if arr is not None and len(arr):
        return arr.tobytes()
    off = int(b.raw("offset"))
    size = int(b.raw("size"))
    if off > 1:
        buf.need(off, size, f"buffer {idx}")
        return buf.data[off:off + size]
    return None


def _read_tensor(buf: _Buf, t: _Table, i: int, buffers: list[_Table]) -> Tensor:
    shape_arr = t.array("shape")
    shape = tuple(int(x) for x in shape_arr) if shape_arr is not None else ()
    name = t.string("name") or f"tensor_{i}"
    if any(d < 0 for d in shape):
        raise UnsupportedOperatorError(
            f"tensor {i} {bounded.quote(name)} has a dynamic shape "
            f"{bounded.quote(list(shape)).strip(chr(39))} ({len(shape)} dimensions); only "
            "static shapes are supported")
    code = int(t.raw("type"))
    if code not in schema.TENSOR_TYPES:
        raise UnsupportedOperatorError(
            f"tensor {i} '{name}' has tensor type code {code}, newer than the TFLite schema "
            "this emitter knows")
    dtype = schema.TENSOR_TYPES[code]
    if t.has("sparsity"):
        raise UnsupportedOperatorError(f"tensor {i} '{name}' is sparse; not supported")
    if int(t.raw("external_buffer")) != 0:
        raise UnsupportedOperatorError(
            f"tensor {i} '{name}' keeps its data in an external file; embed the weights in "
            "the .tflite")
    raw = _buffer_bytes(buf, buffers, int(t.raw("buffer")))
    arr = None
    if raw is not None:
        np_dtype = schema.NUMPY_TYPES.get(dtype)
        if np_dtype is None:
            raise UnsupportedOperatorError(
                f"tensor {i} '{name}' holds constant {dtype} data; constants of types "
                f"{', '.join(schema.NUMPY_TYPES)} are supported")
        n = 1
        for d in shape:
            n *= d
        itemsize = np.dtype(np_dtype).itemsize
        if len(raw) != n * itemsize:
            raise EmitError(f"corrupt TFLite file: tensor {i} '{name}' holds {len(raw)} "
                            f"bytes of data, shape {list(shape)} needs {n * itemsize}")
        arr = np.frombuffer(raw, dtype=np.dtype(np_dtype).newbyteorder("<")).astype(
            np_dtype).reshape(shape)
    quant = _parse_quant(t.table("quantization", f"quantization of tensor {i}"),
                         f"tensor {i} '{name}'")
    return Tensor(i, name, dtype, shape, quant, arr, bool(t.value("is_variable")))


def _read_subgraph(buf: _Buf, sg: _Table, k: int, codes: list[tuple[str, int, str | None, int]],
                   buffers: list[_Table], description: str) -> Graph:
    where = f"subgraph {k}: " if k else ""
    tensors = [_read_tensor(buf, t, i, buffers)
               for i, t in enumerate(sg.tables("tensors", "Tensor"))]

    def indices(a: np.ndarray | None, what: str, allow_absent: bool) -> list[int]:
        out = [] if a is None else [int(x) for x in a]
        for x in out:
            if not (0 <= x < len(tensors) or (allow_absent and x == -1)):
                raise EmitError(f"corrupt TFLite file: {where}{what} refers to tensor {x} of "
                                f"{len(tensors)}")
        return out

    operators: list[Operator] = []
    for n, o in enumerate(sg.tables("operators", "Operator")):
        oc = int(o.raw("opcode_index"))
        if oc >= len(codes):
            raise EmitError(f"corrupt TFLite file: {where}node {n} uses opcode {oc} of "
                            f"{len(codes)}")
        name, code, custom, version = codes[oc]
        what = f"{where}node {n} {name or 'operator code ' + str(code)}"
        member, table = o.union("builtin_options", what)
        expected = schema.OPERATOR_OPTIONS.get(name)
        if expected is not None and table is not None and member != expected:
            raise EmitError(f"corrupt TFLite file: {what} stores {member}, expected {expected}")
        options = schema.defaults(expected) if expected else {}
        if table is not None:
            options.update(table.decode())
        custom_options = None
        if custom is not None:
            raw = o.array("custom_options")
            custom_options = raw.tobytes() if raw is not None else None
            off, size = int(o.raw("large_custom_options_offset")), int(
                o.raw("large_custom_options_size"))
            if custom_options is None and off > 1:
                buf.need(off, size, f"custom options of {what}")
                custom_options = buf.data[off:off + size]
        mutating = o.array("mutating_variable_inputs")
        operators.append(Operator(
            n, name, indices(o.array("inputs"), f"node {n} inputs", True),
            indices(o.array("outputs"), f"node {n} outputs", False), options, code=code,
            custom_code=custom, custom_options=custom_options,
            options_table=member if table is not None else None, version=version,
            intermediates=indices(o.array("intermediates"), f"node {n} intermediates", True),
            mutating_variable_inputs=[] if mutating is None else [bool(x) for x in mutating]))

    return Graph(tensors, operators, indices(sg.array("inputs"), "subgraph inputs", False),
                 indices(sg.array("outputs"), "subgraph outputs", False), description,
                 sg.string("name") or "", k)

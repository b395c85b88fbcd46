"""The schema facts (``project_api.tflite.schema``) against the generated readers of TFLite's own
schema, from the ``tflite`` and ``tflite_micro`` packages: every enum value, every union tag,
and every field of every table we list (slot, type, default), written by our builder and read
back by theirs; and our reader decodes the same tables to the same values."""

from __future__ import annotations

import inspect
from typing import Any

import flatbuffers
import numpy as np
import pytest
import tflite
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as tflm_schema

from project_api.tflite import schema
from project_api.tflite.flatbuffer import Ref, write_table
from project_api.tflite.reader import _Buf, _Table

GENERATED = (tflm_schema, tflite)  # the TFLM copy is the newer schema


def _enum_members(name: str) -> dict[str, int]:
    """Members of enum ``name`` in the generated modules (union of both)."""
    out: dict[str, int] = {}
    for mod in GENERATED:
        cls = getattr(mod, name, None)
        if cls is None:
            continue
        for k, v in vars(cls).items():
            if not k.startswith("_") and isinstance(v, int):
                out.setdefault(k, v)
    return out


def _camel(field: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in field.split("_"))


def _generated_class(table: str) -> list[Any]:
    return [getattr(mod, table) for mod in GENERATED if hasattr(mod, table)]


#: Accessors that are not plain field reads: the ``tflite`` package's ``BuiltinCode()`` returns
#: ``deprecated_builtin_code`` below 127 (TFLite's compatibility rule, not a schema fact).
NOT_RAW = {("tflite", "OperatorCode", "builtin_code")}


def test_builtin_operators_match_the_schema() -> None:
    theirs = _enum_members("BuiltinOperator")
    assert theirs, "the generated schema has no BuiltinOperator"
    assert {k: v for k, v in schema.BUILTIN_OPERATORS.items() if k in theirs} == {
        k: theirs[k] for k in schema.BUILTIN_OPERATORS if k in theirs}
    missing = sorted(set(theirs) - set(schema.BUILTIN_OPERATORS))
    assert not missing, f"operators the generated schema has and ours lacks: {missing}"
    assert schema.OPERATOR_NAMES[45] == "STRIDED_SLICE"
    assert schema.operator_name(10_000) is None


def test_tensor_types_match_the_schema() -> None:
    theirs = _enum_members("TensorType")
    assert {name.upper(): code for code, name in schema.TENSOR_TYPES.items()
            if name.upper() in theirs} == {k: v for k, v in theirs.items()}
    for name, np_type in schema.NUMPY_TYPES.items():
        assert name in schema.TENSOR_TYPE_CODES and np.dtype(np_type).name == (
            "bool" if name == "bool" else name)


@pytest.mark.parametrize("enum", sorted(schema.ENUMS))
def test_enums_match_the_schema(enum: str) -> None:
    theirs = _enum_members(enum)
    assert theirs, f"no generated enum {enum}"
    assert schema.ENUMS[enum] == theirs


def test_builtin_options_union_tags_match_the_schema() -> None:
    theirs = {k: v for k, v in _enum_members("BuiltinOptions").items() if k != "NONE"}
    assert schema.OPTIONS_TAGS == theirs
    for op, table in schema.OPERATOR_OPTIONS.items():
        assert op in schema.BUILTIN_OPERATORS and table in schema.OPTIONS


_ACCESSOR_SUFFIXES = ("AsNumpy", "Length", "IsNone", "BufferHasIdentifier")


def _accessors(cls: Any) -> set[str]:
    return {n for n, _ in inspect.getmembers(cls, inspect.isfunction)
            if n[:1].isupper() and not n.startswith("GetRootAs") and n != "Init"
            and not n.endswith(_ACCESSOR_SUFFIXES)}


ALL_TABLES = sorted(schema.OPTIONS) + sorted(schema.TABLES)


@pytest.mark.parametrize("table", ALL_TABLES)
def test_every_field_of_the_table_is_known(table: str) -> None:
    """No generated accessor lacks a field here (a field missing at the end would shift
    nothing, so it is caught this way)."""
    ours = {_camel(f.name) for f in schema.table_fields(table).values()}
    for cls in _generated_class(table):
        extra = _accessors(cls) - ours
        assert not extra, f"{table}: the generated {cls.__module__} has fields {extra}"
    assert _generated_class(table), f"no generated class for {table}"


def _sample(f: schema.Field, b: flatbuffers.Builder) -> Any:
    """A value for ``f`` different from its default (written with :func:`write_table`)."""
    if f.kind == "scalar":
        if f.type == "bool":
            return not f.default
        if f.type in ("float", "double"):
            return 2.5
        return f.default + 3
    if f.kind == "enum":
        if f.type == "TensorType":
            return "int16"
        if f.type == "BuiltinOperator":
            return "STRIDED_SLICE"
        return next((k for k in schema.ENUMS[f.type] if k != f.default), None)
    if f.kind == "string":
        return "abc"
    if f.kind == "vector":
        if f.type == "bool":
            return [True, False, True]
        if f.type in ("float", "double"):
            return [0.5, -1.25]
        if f.type == "string":
            return None
        if f.type in schema.SCALARS:
            return [1, 2, 3]
        b.StartObject(0)
        elem = b.EndObject()
        b.StartVector(4, 1, 4)
        b.PrependUOffsetTRelative(elem)
        return Ref(b.EndVector())
    if f.kind in ("table", "union"):
        b.StartObject(0)
        return Ref(b.EndObject())
    if f.kind == "union_type":
        return 1
    raise AssertionError(f.kind)


def _written(table: str, values: dict[str, Any]) -> bytes:
    b = flatbuffers.Builder(256)
    resolved = {k: (v(b) if callable(v) else v) for k, v in values.items()}
    b.Finish(write_table(b, table, resolved))
    return bytes(b.Output())


def _their_value(obj: Any, f: schema.Field) -> Any:
    name = _camel(f.name)
    if f.kind == "vector" and f.type in schema.SCALARS and f.type != "string":
        arr = getattr(obj, name + "AsNumpy")()
        return [] if isinstance(arr, int) else arr.tolist()
    if f.kind == "vector":
        return getattr(obj, name + "Length")()
    value = getattr(obj, name)()
    if f.kind == "string":
        return None if value is None else value.decode()
    if f.kind in ("table", "union"):
        return value is not None
    return value


FIELD_CASES = [(t, f.name) for t in ALL_TABLES for f in schema.table_fields(t).values()
               if not f.deprecated and not (f.kind == "vector" and f.type == "string")]


@pytest.mark.parametrize("table,field", FIELD_CASES, ids=[f"{t}.{n}" for t, n in FIELD_CASES])
def test_field_slot_type_and_default(table: str, field: str) -> None:
    f = schema.table_fields(table)[field]
    classes = [c for c in _generated_class(table) if hasattr(c, _camel(f.name))
               and (c.__module__.split(".")[0], table, field) not in NOT_RAW]
    assert classes, f"{table}.{field} is in neither generated schema"
    sample = _sample(f, flatbuffers.Builder(256))  # a Ref only says "a table"
    data = _written(table, {field: lambda b: _sample(f, b)} if sample is not None else {})
    for cls in classes:
        obj = cls.GetRootAs(bytearray(data), 0)
        got = _their_value(obj, f)
        if sample is None:  # a one-member enum: only its default can be checked
            pass
        elif isinstance(sample, Ref):
            assert got in (True, 1), f"{table}.{field}: the table written is not read back"
        elif f.kind == "enum":
            assert got == f.encode(sample), f"{table}.{field}"
        elif f.kind == "scalar" and f.type in ("float", "double"):
            assert got == pytest.approx(sample)
        elif f.kind == "vector" and f.type == "bool":
            assert [bool(x) for x in got] == sample
        else:
            assert got == sample, f"{table}.{field}: wrote {sample!r}, {cls.__module__} read {got!r}"
        # the default: a table without the field
        empty = cls.GetRootAs(bytearray(_written(table, {})), 0)
        default = _their_value(empty, f)
        if f.kind in ("scalar", "enum", "union_type"):
            assert default == f.encode(f.default), f"{table}.{field} default"


@pytest.mark.parametrize("table", sorted(schema.OPTIONS))
def test_our_reader_decodes_what_the_builder_wrote(table: str) -> None:
    fields = [f for f in schema.OPTIONS[table] if not f.deprecated]
    b = flatbuffers.Builder(256)
    values = {f.name: _sample(f, b) for f in fields}
    values = {k: v for k, v in values.items() if v is not None}
    b.Finish(write_table(b, table, values))
    data = bytes(b.Output())
    buf = _Buf(data)
    t = _Table(buf, buf.u32(0), table, table)
    decoded = t.decode()
    assert set(decoded) == {f.name for f in fields}
    for f in fields:
        if f.name not in values:
            continue
        want = values[f.name]
        if f.kind == "scalar" and f.type in ("float", "double"):
            assert decoded[f.name] == pytest.approx(want)
        elif f.kind == "vector" and f.type in ("float", "double"):
            assert decoded[f.name] == pytest.approx(want)
        else:
            assert decoded[f.name] == want, f.name
    # and an empty table decodes to the defaults
    b = flatbuffers.Builder(64)
    b.Finish(write_table(b, table, {}))
    data = bytes(b.Output())
    buf = _Buf(data)
    assert _Table(buf, buf.u32(0), table, table).decode() == schema.defaults(table)


def test_write_table_refuses_unknown_fields() -> None:
    with pytest.raises(ValueError, match="no field stride"):
        write_table(flatbuffers.Builder(64), "Conv2DOptions", {"stride": 2})

"""TVM's graph-executor files: the graph JSON and the parameter dict, read strictly.

A graph-executor Model Library Format archive (TVM 0.8-0.15) holds its executor configuration
as ``executor-config/graph/graph.json`` (MLF 5) or ``executor-config/graph/<mod>.graph``
(MLF 7), written by ``src/relay/backend/graph_executor_codegen.cc`` (``GetJSON``), and its
weights as ``parameters/<mod>.params``, written by ``runtime::SaveParams``
(``src/runtime/file_utils.cc``; arrays by ``SaveDLTensor``, ``include/tvm/runtime/ndarray.h``).
:func:`read_graph` and :func:`read_params` turn them into :class:`Graph` and :class:`Param`
values, checking everything the static lowering relies on, and refuse in one line (an
:class:`~project_api.errors.MLFError` naming the file, the node or array, and what to do) what
they cannot run:

* an entry placed on another device than the CPU (``device_index`` other than 1, kDLCPU),
  a texture ``storage_scope``, a cross-device ``__copy`` node;
* a dynamic shape (a negative or non-integer dimension);
* an operator other than ``tvm_op``, inputs or outputs that do not match ``num_inputs`` /
  ``num_outputs``, references to nodes that come later or do not exist;
* a params file of another format version (list magic ``kTVMNDArrayListMagic``, array magic
  ``kTVMNDArrayMagic``, reserved fields 0) or whose arrays' byte counts disagree with their
  shapes and types.

The graph as the executor reads it (``src/runtime/graph_executor/graph_executor.cc``): node
``nid``'s outputs are entries ``node_row_ptr[nid] + index``; ``attrs`` holds one ``shape``,
``dltype`` and ``storage_id`` per entry; entries with the same storage id share memory, sized
as the largest of them. ``arg_nodes`` are the ``null`` nodes (inputs and parameters), ``heads``
the outputs. A ``__nop`` node (``reshape_nop``) runs nothing: its output shares its input's
storage.
"""

from __future__ import annotations

import hashlib
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from project_api.archive import dtypes
from project_api.errors import MLFError
from project_api.system import bounded

#: ``kTVMNDArrayListMagic`` and ``kTVMNDArrayMagic`` (include/tvm/runtime/ndarray.h).
PARAMS_LIST_MAGIC = 0xF7E58D4F05049CB7
NDARRAY_MAGIC = 0xDD5E40F096B4A13F
#: DLPack's kDLCPU.
CPU_DEVICE_TYPE = 1
#: ``kAllocAlignment`` (include/tvm/runtime/device_api.h): every storage pool entry of TVM's
#: graph executor starts at this alignment (NDArray::Empty through the device API).
ALLOC_ALIGNMENT = 64

#: Most elements one entry's shape may multiply to: a byte each fills a 32-bit address space.
MAX_ENTRY_ELEMENTS = (1 << 32) - 1

_DEVICE_NAMES = {1: "CPU", 2: "CUDA", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI",
                 10: "ROCm", 12: "ext_dev", 14: "oneAPI", 15: "WebGPU", 16: "Hexagon"}


@dataclass(frozen=True)
class Entry:
    """One data entry of the graph: a node output."""

    eid: int
    nid: int  #: the node whose output it is
    index: int  #: which output of that node
    sid: int  #: storage id
    dtype: str
    shape: tuple[int, ...]

    @property
    def size_bytes(self) -> int:
        """Bytes as TVM's executor sizes a pool entry: ``((bits + 7) / 8) * elements``."""
        dt = dtypes.parse(self.dtype)
        return (dt.bits * dt.lanes + 7) // 8 * math.prod(self.shape)


@dataclass(frozen=True)
class Op:
    """One ``tvm_op`` node, in execution order."""

    nid: int
    name: str  #: the node's name (unique, e.g. ``tvmgen_default_fused_add1``)
    func_name: str  #: the function it calls (``__nop`` for a reshape that shares storage)
    inputs: tuple[int, ...]  #: entry ids of its arguments
    outputs: tuple[int, ...]  #: entry ids it writes
    flatten_data: bool = False

    @property
    def is_nop(self) -> bool:
        return self.func_name == "__nop"


@dataclass(frozen=True)
class ArgNode:
    """A ``null`` node: a model input or a parameter."""

    nid: int
    name: str
    eid: int


@dataclass
class Graph:
    """A graph-executor configuration (see the module docstring)."""

    path: Path
    text: bytes  #: the file's bytes, as TVM hands them to an executor
    entries: list[Entry]
    ops: list[Op]
    args: list[ArgNode]  #: every null node, in node order
    heads: list[int]  #: entry id of each output, in order
    node_names: list[str]
    storage_scopes: list[str] = field(default_factory=list)

    @property
    def json_bytes(self) -> int:
        return len(self.text)

    @property
    def fingerprint(self) -> tuple[int, int]:
        """``(length, FNV-1a 64 of the bytes)``: what a device compares a received JSON with."""
        return len(self.text), fnv1a64(self.text)

    def storage_sizes(self) -> dict[int, int]:
        """Bytes of each storage id: the largest entry assigned to it (SetupStorage)."""
        sizes: dict[int, int] = {}
        for e in self.entries:
            sizes[e.sid] = max(sizes.get(e.sid, 0), e.size_bytes)
        return dict(sorted(sizes.items()))

    def entries_of(self, sid: int) -> list[Entry]:
        return [e for e in self.entries if e.sid == sid]

    def executor_storage_bytes(self) -> int:
        """What TVM's graph executor allocates for storage: one NDArray per storage id of
        ``(size + 3) / 4`` float32 elements (graph_executor.cc / crt graph_executor.c
        SetupStorage)."""
        return sum((n + 3) // 4 * 4 for n in self.storage_sizes().values())

    def func_names(self) -> list[str]:
        """The functions the graph calls, first use first (``__nop`` left out)."""
        seen: dict[str, None] = {}
        for op in self.ops:
            if not op.is_nop:
                seen.setdefault(op.func_name, None)
        return list(seen)

    def sha256(self) -> str:
        return hashlib.sha256(self.text).hexdigest()


def fnv1a64(data: bytes) -> int:
    """64-bit FNV-1a of ``data`` (the device computes the same over a received JSON)."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Reader:
    def __init__(self, path: Path, where: str):
        self.path = path
        self.label = f"{where}: {path.name}" if where else str(path)

    def error(self, what: str) -> MLFError:
        return MLFError(bounded.one_line(f"{self.label}: {what}"))

    def attr_list(self, attrs: dict[str, Any], key: str, kind: str,
                  required: bool = True) -> list[Any] | None:
        """``attrs[key]`` as TVM writes it: ``["list_int", [...]]`` (or a bare list)."""
        if key not in attrs:
            if required:
                raise self.error(f"attrs has no \"{key}\"; it is not a graph-executor JSON TVM "
                                 "wrote (re-export the model)")
            return None
        value = attrs[key]
        if (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)
                and isinstance(value[1], list)):
            if value[0] != kind:
                raise self.error(f"attrs \"{key}\" is a {value[0]}, expected {kind}")
            value = value[1]
        if not isinstance(value, list):
            raise self.error(f"attrs \"{key}\" must be a list")
        return value


def read_graph(path: str | Path, where: str = "") -> Graph:
    """The graph-executor JSON at ``path``, checked (see the module docstring).

    Raises:
        MLFError: the file is unreadable, malformed, or describes what cannot run on one CPU
            with static shapes; the message names the node and what to do.
    """
    path = Path(path)
    r = _Reader(path, where)
    try:
        text = path.read_bytes()
        doc = bounded.load_json(text)
    except OSError as exc:
        raise r.error(f"unreadable ({exc})") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise r.error(f"not valid JSON ({exc}); re-export the model") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise r.error("not a graph-executor JSON (no \"nodes\" list); re-export the model")
    nodes = doc["nodes"]
    names: list[str] = []
    outputs_per_node: list[int] = []
    for nid, node in enumerate(nodes):
        if not isinstance(node, dict) or not isinstance(node.get("op"), str):
            raise r.error(f"node {nid} is not an object with an \"op\"")
        name = node.get("name")
        if not isinstance(name, str) or not name or "\0" in name:
            raise r.error(f"node {nid} has no name")
        names.append(name)
        attrs = node.get("attrs", {}) or {}
        if not isinstance(attrs, dict):
            raise r.error(f"node {nid} ({name!r}): \"attrs\" must be an object")
        n_out = attrs.get("num_outputs", "1")
        try:
            count = int(n_out)
        except (TypeError, ValueError):
            raise r.error(f"node {nid} ({name!r}): num_outputs {n_out!r} is not a number") from None
        if count < 1 or (node["op"] == "null" and count != 1) or count > 1 << 16:
            raise r.error(f"node {nid} ({name!r}): num_outputs {count} is not possible")
        outputs_per_node.append(count)
    row_ptr = [0]
    for n in outputs_per_node:
        row_ptr.append(row_ptr[-1] + n)
    if "node_row_ptr" in doc:
        given = doc["node_row_ptr"]
        if given != row_ptr:
            raise r.error(f"node_row_ptr {given!r} does not match the nodes' outputs "
                          f"({row_ptr!r}); the file is corrupt, re-export the model")
    n_entries = row_ptr[-1]

    attrs = doc.get("attrs")
    if not isinstance(attrs, dict):
        raise r.error("no \"attrs\" object (shape, dltype, storage_id)")
    shapes = r.attr_list(attrs, "shape", "list_shape")
    dltypes = r.attr_list(attrs, "dltype", "list_str")
    sids = r.attr_list(attrs, "storage_id", "list_int")
    devices = r.attr_list(attrs, "device_index", "list_int", required=False)
    scopes = r.attr_list(attrs, "storage_scope", "list_str", required=False)
    for key, values in (("shape", shapes), ("dltype", dltypes), ("storage_id", sids),
                        ("device_index", devices), ("storage_scope", scopes)):
        if values is not None and len(values) != n_entries:
            raise r.error(f"attrs \"{key}\" has {len(values)} entries for {n_entries} node "
                          "outputs; the file is corrupt, re-export the model")

    node_of_entry = [nid for nid, n in enumerate(outputs_per_node) for _ in range(n)]

    def entry_where(eid: int) -> str:
        nid = node_of_entry[eid]
        return f"entry {eid} (output {eid - row_ptr[nid]} of node {nid}, {names[nid]!r})"

    entries: list[Entry] = []
    for eid in range(n_entries):
        nid = node_of_entry[eid]
        shape = shapes[eid]  # type: ignore[index]
        if not isinstance(shape, list) or not all(_int(d) for d in shape):
            raise r.error(f"{entry_where(eid)} has shape {shape!r}, which is not a list of "
                          "integers")
        if any(d < 0 for d in shape):
            raise r.error(f"{entry_where(eid)} has the dynamic shape {shape!r}; only static "
                          "shapes are lowered: rebuild the model with fixed input shapes")
        elements = math.prod(shape)
        if elements > MAX_ENTRY_ELEMENTS:
            raise r.error(f"{entry_where(eid)} has shape {shape!r}: {elements} elements, over "
                          f"the limit of {MAX_ENTRY_ELEMENTS} (a 32-bit address space)")
        dt = dltypes[eid]  # type: ignore[index]
        try:
            parsed = dtypes.parse(dt) if isinstance(dt, str) else None
        except dtypes.DTypeError:
            parsed = None
        if parsed is None:
            raise r.error(f"{entry_where(eid)} has dtype {dt!r}, which is not a TVM dtype")
        sid = sids[eid]  # type: ignore[index]
        if not _int(sid) or sid < 0:
            raise r.error(f"{entry_where(eid)} has storage id {sid!r}, not a non-negative "
                          "integer")
        if sid >= n_entries:
            raise r.error(f"{entry_where(eid)} has storage id {sid!r}, out of range: the graph "
                          f"has {n_entries} entries, so at most {n_entries} storages "
                          f"(ids 0..{n_entries - 1})")
        if devices is not None:
            dev = devices[eid]
            if dev != CPU_DEVICE_TYPE:
                name = _DEVICE_NAMES.get(dev, "unknown") if _int(dev) else "unknown"
                raise r.error(f"{entry_where(eid)} is placed on device type {dev!r} ({name}); "
                              "only the CPU (device type 1) is lowered: rebuild the model for "
                              "one CPU target, without heterogeneous execution")
        if scopes is not None and scopes[eid] not in ("", "global"):
            raise r.error(f"{entry_where(eid)} lives in memory scope {scopes[eid]!r}; only "
                          "global memory is lowered: rebuild without texture memory scopes")
        entries.append(Entry(eid, nid, eid - row_ptr[nid], sid, parsed.name, tuple(shape)))

    def ref(value: Any, what: str, before: int | None) -> int:
        if (not isinstance(value, list) or len(value) not in (2, 3)
                or not all(_int(v) for v in value)):
            raise r.error(f"{what}: {value!r} is not a [node, index, version] reference")
        nid, index = value[0], value[1]
        limit = len(nodes) if before is None else before
        if not 0 <= nid < limit or not 0 <= index < outputs_per_node[nid]:
            later = " or comes later" if before is not None else ""
            raise r.error(f"{what}: reference {value!r} names no output of an existing "
                          f"node{later}")
        return row_ptr[nid] + index

    ops: list[Op] = []
    args: list[ArgNode] = []
    for nid, node in enumerate(nodes):
        name = names[nid]
        inputs = node.get("inputs", [])
        if not isinstance(inputs, list):
            raise r.error(f"node {nid} ({name!r}): \"inputs\" must be a list")
        if node["op"] == "null":
            if inputs:
                raise r.error(f"node {nid} ({name!r}) is a null node with inputs")
            args.append(ArgNode(nid, name, row_ptr[nid]))
            continue
        if node["op"] != "tvm_op":
            raise r.error(f"node {nid} ({name!r}) has op {node['op']!r}; only tvm_op and null "
                          "nodes are lowered")
        attrs_n = node.get("attrs") or {}
        func = attrs_n.get("func_name")
        if not isinstance(func, str) or not func:
            raise r.error(f"node {nid} ({name!r}) has no func_name")
        if func == "__copy":
            raise r.error(f"node {nid} ({name!r}) copies between devices (__copy); only one "
                          "CPU is lowered: rebuild the model for one CPU target")
        in_eids = tuple(ref(v, f"node {nid} ({name!r}) input {i}", nid)
                        for i, v in enumerate(inputs))
        if "num_inputs" in attrs_n and str(attrs_n["num_inputs"]) != str(len(in_eids)):
            raise r.error(f"node {nid} ({name!r}): num_inputs {attrs_n['num_inputs']!r} but "
                          f"{len(in_eids)} inputs")
        flatten = str(attrs_n.get("flatten_data", "0"))
        if flatten not in ("0", "1"):
            raise r.error(f"node {nid} ({name!r}): flatten_data {flatten!r} is neither 0 nor 1")
        out_eids = tuple(range(row_ptr[nid], row_ptr[nid + 1]))
        if func == "__nop":
            if len(in_eids) != 1 or len(out_eids) != 1 or \
                    entries[in_eids[0]].sid != entries[out_eids[0]].sid:
                raise r.error(f"node {nid} ({name!r}) is a __nop whose output does not share "
                              "its one input's storage; TVM's executor would skip it and "
                              "compute nothing: re-export the model")
        ops.append(Op(nid, name, func, in_eids, out_eids, flatten == "1"))

    arg_nodes = doc.get("arg_nodes", [a.nid for a in args])
    if not isinstance(arg_nodes, list) or sorted(arg_nodes) != [a.nid for a in args]:
        raise r.error(f"arg_nodes {arg_nodes!r} are not the null nodes "
                      f"{[a.nid for a in args]!r}; the file is corrupt, re-export the model")
    heads_raw = doc.get("heads")
    if not isinstance(heads_raw, list) or not heads_raw:
        raise r.error("no \"heads\": the graph has no outputs")
    heads = [ref(h, f"heads[{i}]", None) for i, h in enumerate(heads_raw)]
    return Graph(path, text, entries, ops, args, heads, names,
                 storage_scopes=list(scopes or []))


# --- the parameter dict ------------------------------------------------------------------------


@dataclass(frozen=True)
class Param:
    """One array of a TVM param dict."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    data: bytes  #: little-endian, as saved

    @property
    def size_bytes(self) -> int:
        return len(self.data)


def read_params(path: str | Path, where: str = "") -> list[Param]:
    """Every array of the param dict at ``path`` (runtime::SaveParams' layout: list magic,
    reserved, the names, then each array as SaveDLTensor writes it: magic, reserved, device,
    ndim, DLDataType, shape, byte count, data).

    Raises:
        MLFError: the file is unreadable or truncated, of another format version, or an
            array's byte count disagrees with its shape and type.
    """
    path = Path(path)
    r = _Reader(path, where)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise r.error(f"unreadable ({exc})") from None
    return parse_params(data, r)


def parse_params(data: bytes, reader: Any = None) -> list[Param]:
    """:func:`read_params` for the bytes of a param dict."""
    r = reader or _Reader(Path("params"), "")
    pos = 0

    def take(fmt: str, what: str) -> tuple[Any, ...]:
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > len(data):
            raise r.error(f"ends inside {what} (byte {pos} of {len(data)}); the file is "
                          "truncated, re-export the model")
        values = struct.unpack_from(fmt, data, pos)
        pos += size
        return values

    magic, reserved = take("<QQ", "the header")
    if magic != PARAMS_LIST_MAGIC:
        raise r.error(f"magic {magic:#018x} is not TVM's param dict magic "
                      f"{PARAMS_LIST_MAGIC:#018x}; pass the parameters/<mod>.params TVM wrote")
    if reserved != 0:
        raise r.error(f"reserved field {reserved:#x}: a param dict version this reader does "
                      "not know (TVM 0.8-0.15 write 0); re-export with TVM 0.8-0.15")
    (count,) = take("<Q", "the name count")
    if count > len(data) // 8:
        raise r.error(f"{count} names cannot fit in {len(data)} bytes; the file is corrupt")
    names = []
    for i in range(count):
        (length,) = take("<Q", f"the length of name {i}")
        if pos + length > len(data):
            raise r.error(f"name {i} runs past the end; the file is truncated")
        try:
            names.append(data[pos : pos + length].decode("utf-8"))
        except UnicodeDecodeError:
            raise r.error(f"name {i} is not UTF-8") from None
        pos += length
    (arrays,) = take("<Q", "the array count")
    if arrays != count:
        raise r.error(f"{arrays} arrays for {count} names; the file is corrupt")
    params = []
    for name in names:
        what = f"array {name!r}"
        magic, reserved = take("<QQ", f"the header of {what}")
        if magic != NDARRAY_MAGIC:
            raise r.error(f"{what}: magic {magic:#018x} is not TVM's NDArray magic "
                          f"{NDARRAY_MAGIC:#018x}; the file is corrupt")
        if reserved != 0:
            raise r.error(f"{what}: reserved field {reserved:#x}: an array format version this "
                          "reader does not know; re-export with TVM 0.8-0.15")
        dev_type, _dev_id = take("<ii", f"the device of {what}")
        if dev_type != CPU_DEVICE_TYPE:
            raise r.error(f"{what} was saved for device type {dev_type}, not the CPU; the file "
                          "is corrupt")
        (ndim,) = take("<i", f"the rank of {what}")
        code, bits, lanes = take("<BBH", f"the dtype of {what}")
        if not 0 <= ndim <= 32:
            raise r.error(f"{what}: rank {ndim} is not possible; the file is corrupt")
        shape = take(f"<{ndim}q", f"the shape of {what}") if ndim else ()
        if any(d < 0 for d in shape):
            raise r.error(f"{what}: shape {list(shape)} has a negative dimension")
        try:
            dt = dtypes.from_dlpack(code, bits, lanes)
        except dtypes.DTypeError:
            raise r.error(f"{what}: DLPack type ({code}, {bits}, {lanes}) is not one TVM "
                          "writes") from None
        (nbytes,) = take("<q", f"the byte count of {what}")
        expected = (bits + 7) // 8 * lanes * math.prod(shape)
        if nbytes != expected:
            raise r.error(f"{what}: {nbytes} bytes of data for shape {list(shape)} x {dt.name} "
                          f"({expected} bytes); the file is corrupt, re-export the model")
        if pos + nbytes > len(data):
            raise r.error(f"{what}: its data runs past the end; the file is truncated")
        params.append(Param(name, dt.name, tuple(shape), data[pos : pos + nbytes]))
        pos += nbytes
    if pos != len(data):
        raise r.error(f"{len(data) - pos} bytes after the last array; the file is corrupt")
    return params

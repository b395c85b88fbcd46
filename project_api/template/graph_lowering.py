"""Graph-executor models lowered to static C at generate time: ``src/graph_model.c``.

TVM's graph executor parsed the graph JSON on the device, allocated one buffer per storage id,
loaded the params into RAM and looked each fused function up by name. The graph is static, so
:func:`plan` does all of that here, once, from the :class:`~project_api.archive.mlf.GraphModule` that
``mlf`` read, and ``jinja/graph_model.c.j2`` writes it down:

* **storage**: one static pool; each storage id that is not bound to an input, output or
  parameter gets the largest of its entries' sizes (shape x dtype), at an offset aligned to
  :data:`~project_api.archive.tvm_graph.ALLOC_ALIGNMENT` (``kAllocAlignment``, the executor's);
* **bindings**: a storage id whose entries all hold the same value (an entry and the ``__nop``
  reshapes of it) is bound to that value's home instead of the pool: the model input's buffer,
  the output's buffer (one per value), or the parameter's ``const`` array. What cannot be bound
  is copied: an input into its pool slot before the run, a parameter into a shared slot, an
  output out of the pool after it;
* **parameters**: ``const`` arrays (flash) from ``parameters/<mod>.params``; TVM 0.8's linked
  parameters (``--link-params``) are the archive's own arrays, found through its
  ``_lookup_linked_param`` called directly with the storage id;
* **calls**: each fused function in the graph's order, directly, with the packed convention
  (``TVMValue`` arguments of type ``kTVMDLTensorHandle`` pointing at static ``DLTensor``\\ s
  whose shape and strides are static; ``flatten_data`` nodes get one-dimensional views);
  ``__nop`` nodes run nothing. Workspace that a function takes with
  ``TVMBackendAllocWorkspace`` comes from the project's backend, as for AOT models.

The registry of the archive's C (``_tvm_func_registry``) is read only here: every function the
graph calls must be in it (when the C has one) and be defined in the C; nothing is looked up
by name at run time. The result is an entry point ``graph_<module>_run(inputs, outputs)`` that
the model glue wraps in the same ``TVMCrtAotModel`` as AOT archives, and a fingerprint of the
graph JSON (length, FNV-1a 64) with which the device recognises the JSON TVM's
``graph_executor.create`` sends (:func:`TVMCrtGraphModel_Match` in the C).

:func:`memory` gives the RAM of the lowered model beside what TVM's graph executor would have
allocated for the same archive (its storage pool, the JSON it parses and the params blob it
loads), for ``project-api info`` and ``analyze``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from project_api.archive import dtypes
from project_api.archive.tvm_graph import ALLOC_ALIGNMENT
from project_api.errors import ServerError
from project_api.template.quoting import Environments, c_identifier, check_c_identifier

#: The lowered code of every graph module of a project, relative to the project.
GRAPH_MODEL_SOURCE = "src/graph_model.c"
#: Bytes per line of a parameter's initializer.
_ROW = 16


def _fail(message: str) -> ServerError:
    return ServerError(message=message)


def is_graph(mod: Any) -> bool:
    """True for a module the graph executor was to run (and AOT not)."""
    return "graph" in mod.executors and "aot" not in mod.executors


def _align(n: int) -> int:
    return (n + ALLOC_ALIGNMENT - 1) // ALLOC_ALIGNMENT * ALLOC_ALIGNMENT


@dataclass
class Binding:
    """Where a storage id's memory is: ``pool`` (at ``offset``), ``input``/``output``/``param``
    (buffer ``index``), or ``linked`` (the archive's array for this storage id)."""

    kind: str
    index: int = 0
    offset: int = 0


@dataclass
class Plan:
    """The lowered form of one graph module (see the module docstring)."""

    name: str
    ident: str
    bindings: dict[int, Binding]
    pool_bytes: int
    input_copies: list[tuple[int, int]]  #: (input index, entry id) copied into the pool
    param_copies: list[tuple[int, int]]  #: (param index, entry id) copied into the pool
    output_copies: list[tuple[int, int]]  #: (output index, entry id) copied out after the run
    roots: dict[int, int]  #: entry id -> the entry whose value it views (itself unless __nop)
    const_bytes: int = 0  #: bytes of the parameters' const arrays
    table_bytes: int = 0  #: static DLTensors, shapes and argument arrays (32-bit target)
    notes: list[str] = field(default_factory=list)


def plan(mod: Any) -> Plan:
    """The storage plan of graph module ``mod`` (a :class:`~project_api.archive.mlf.ModuleInfo` whose
    ``graph`` is set)."""
    gm = mod.graph
    g = gm.graph
    roots = {e.eid: e.eid for e in g.entries}
    for op in g.ops:
        if op.is_nop:
            roots[op.outputs[0]] = roots[op.inputs[0]]
    input_of = {a.eid: i for i, a in enumerate(gm.input_nodes)}
    param_eids = {next(a.eid for a in g.args if a.name == p.name): k
                  for k, p in enumerate(gm.params)}
    heads_of: dict[int, list[int]] = {}
    for j, eid in enumerate(g.heads):
        heads_of.setdefault(roots[eid], []).append(j)

    bindings: dict[int, Binding] = {}
    taken_outputs: set[int] = set()
    for sid, entries in _entries_by_sid(g).items():
        values = {roots[e.eid] for e in entries}
        if sid in gm.linked_params:
            if len(values) != 1:
                raise _fail(f"module {mod.name!r}: linked parameter storage {sid} is shared "
                            "with other tensors; re-export without --link-params")
            bindings[sid] = Binding("linked")
            continue
        if len(values) == 1:
            (value,) = values
            if value in input_of:
                bindings[sid] = Binding("input", input_of[value])
                continue
            if value in param_eids:
                bindings[sid] = Binding("param", param_eids[value])
                continue
            free = [j for j in heads_of.get(value, []) if j not in taken_outputs
                    and g.entries[g.heads[j]].size_bytes == g.entries[value].size_bytes]
            if free:
                taken_outputs.add(free[0])
                bindings[sid] = Binding("output", free[0])
                continue
        bindings[sid] = Binding("pool")

    offset = 0
    for sid, size in g.storage_sizes().items():
        if bindings[sid].kind == "pool":
            bindings[sid].offset = offset
            offset = _align(offset + size)
    input_copies = [(i, a.eid) for i, a in enumerate(gm.input_nodes)
                    if bindings[g.entries[a.eid].sid].kind == "pool"]
    param_copies = [(k, eid) for eid, k in param_eids.items()
                    if bindings[g.entries[eid].sid].kind == "pool"]
    output_copies = [(j, eid) for j, eid in enumerate(g.heads)
                     if not (bindings[g.entries[eid].sid].kind == "output"
                             and bindings[g.entries[eid].sid].index == j)]
    result = Plan(mod.name, "graph_" + c_identifier(mod.name), bindings, offset, input_copies,
                  param_copies, output_copies, roots)
    emitted = {b.index for b in bindings.values() if b.kind == "param"} | {
        k for k, _ in param_copies}
    result.const_bytes = sum(_align(gm.params[k].size_bytes) for k in emitted)
    # RAM of the tables (32-bit target: a DLTensor is 40 bytes): the DLTensors whose data is
    # bound at run time, and the one-dimensional views of flatten_data calls with their
    # shapes and arguments; every other table is const.
    runtime = sum(1 for e in g.entries if bindings[e.sid].kind in ("input", "output", "linked"))
    flat = sum(len(op.inputs) + len(op.outputs) for op in g.ops
               if op.flatten_data and not op.is_nop)
    result.table_bytes = 40 * runtime + (40 + 8 + 8) * flat
    return result


def _entries_by_sid(g: Any) -> dict[int, list[Any]]:
    by_sid: dict[int, list[Any]] = {}
    for e in g.entries:
        by_sid.setdefault(e.sid, []).append(e)
    return dict(sorted(by_sid.items()))


# --- memory ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GraphMemory:
    """RAM of a graph model: lowered here versus TVM's graph executor (bytes)."""

    lowered_pool: int  #: the static pool of graph_model.c
    lowered_tables: int  #: its DLTensors and argument arrays in RAM (the others are const)
    lowered_const: int  #: parameters as const arrays (flash, not RAM)
    executor_storage: int  #: TVM's storage pool: every storage id, 4-byte rounded
    executor_json: int  #: the graph JSON TVM's executor parses on the device
    executor_params: int  #: the params blob TVM's executor loads

    @property
    def lowered_ram(self) -> int:
        return self.lowered_pool + self.lowered_tables

    @property
    def executor_ram(self) -> int:
        return self.executor_storage + self.executor_json + self.executor_params

    @property
    def saving(self) -> int:
        return self.executor_ram - self.lowered_ram

    def to_json(self) -> dict[str, int]:
        return {"lowered_pool": self.lowered_pool, "lowered_tables": self.lowered_tables,
                "lowered_const": self.lowered_const, "lowered_ram": self.lowered_ram,
                "executor_storage": self.executor_storage, "executor_json": self.executor_json,
                "executor_params": self.executor_params, "executor_ram": self.executor_ram,
                "saving": self.saving}

    def describe(self) -> str:
        """One line: the lowered RAM beside the executor's, with both breakdowns."""
        return (f"lowered RAM {self.lowered_ram} B (pool {self.lowered_pool} + tables "
                f"{self.lowered_tables}; params {self.lowered_const} B const) vs TVM's graph "
                f"executor {self.executor_ram} B (storage {self.executor_storage} + JSON "
                f"{self.executor_json} + params {self.executor_params}): "
                f"{self.saving} B less")


def memory(mod: Any) -> GraphMemory:
    """The memory figures of graph module ``mod`` (what ``info`` shows and ``analyze`` can
    call). The executor's params are the params file's bytes (TVMGraphExecutor_LoadParams reads
    the blob in RAM), or the linked arrays' for TVM 0.8's ``--link-params``."""
    p = plan(mod)
    gm = mod.graph
    params_blob = gm.params_file_bytes if not gm.linked_params else 0
    return GraphMemory(lowered_pool=p.pool_bytes, lowered_tables=p.table_bytes,
                       lowered_const=p.const_bytes,
                       executor_storage=gm.graph.executor_storage_bytes(),
                       executor_json=gm.graph.json_bytes, executor_params=params_blob)


# --- the glue's module context ----------------------------------------------------------------


def module_context(mod: Any, platform: str, tensors: Any) -> dict[str, Any]:
    """The model glue's context of graph module ``mod``; ``tensors(items, kind)`` is the glue's
    own tensor context builder. Checks every function the graph calls against the archive's
    C (and its registry) and builds the lowering context under ``"graph"``."""
    where = f"module {mod.name!r}"
    if getattr(mod, "graph", None) is None:
        raise _fail(f"{where} was built for the graph executor but its archive has no "
                    "executor-config/graph JSON; re-export the model")
    g = mod.graph.graph
    _check_functions(mod, where)
    p = plan(mod)
    ctx = {
        "name": mod.name, "prefix": None, "ident": "model_" + c_identifier(mod.name),
        "api": "graph", "run_function": f"{p.ident}_run",
        "inputs": tensors(mod.inputs, "input"), "outputs": tensors(mod.outputs, "output"),
        "workspace_size_bytes": workspace_bytes(mod), "data_alignment": ALLOC_ALIGNMENT,
        # TVM's operators have no profile hooks and keep no state
        "profile_read": None, "state_size_bytes": 0, "reset_function": None,
    }
    ctx["graph"] = _lowering_context(mod, p, g)
    return ctx


def workspace_bytes(mod: Any) -> int:
    """What the fused functions take through TVMBackendAllocWorkspace: the largest operator's
    workspace that metadata.json records (the graph's own tensors are static in the pool), or
    main's when it lists no operators."""
    graph = getattr(mod, "graph", None)
    ops = graph.operator_workspace_bytes if graph is not None else None
    if ops is not None:
        return ops
    return int(mod.workspace_size_bytes or 0)


def _defined(text: str, name: str) -> bool:
    return re.search(r"\b" + re.escape(name) + r"\s*\([^;{]*\)\s*\{", text) is not None


def _check_functions(mod: Any, where: str) -> None:
    """ServerError unless every function the graph calls (and ``_lookup_linked_param`` for
    linked parameters) is in the C's registry, when it has one, and defined in its C or in a
    prebuilt object's symbols."""
    gm = mod.graph
    wanted = gm.graph.func_names() + (["_lookup_linked_param"] if gm.linked_params else [])
    texts = [Path(s).read_text(encoding="utf-8", errors="replace") for s in mod.sources]
    objects = [Path(o).read_bytes() for o in mod.objects]
    for name in wanted:
        check_c_identifier(name, f"{where}: function of the graph JSON")
        if gm.registry is not None and name not in gm.registry:
            raise _fail(f"{where}: the graph calls {name}, which the system-library registry "
                        f"of its C does not list ({len(gm.registry)} functions); the graph "
                        "JSON and the C come from different builds: re-export the model")
        in_c = any(_defined(t, name) for t in texts)
        in_obj = any(b"\0" + name.encode() + b"\0" in o for o in objects)
        if not (in_c or in_obj):
            raise _fail(f"{where}: the graph calls {name}, which its generated C does not "
                        "define; the graph JSON and the C come from different builds: "
                        "re-export the model")


def _hex_rows(data: bytes) -> list[str]:
    return [", ".join(f"0x{b:02x}" for b in data[i : i + _ROW]) for i in range(0, len(data), _ROW)]


def _lowering_context(mod: Any, p: Plan, g: Any) -> dict[str, Any]:
    gm = mod.graph
    entries = []
    for e in g.entries:
        dt = dtypes.parse(e.dtype)
        b = p.bindings[e.sid]
        entries.append({
            "eid": e.eid, "bind": b.kind, "offset": b.offset, "index": b.index,
            "runtime": b.kind in ("input", "output", "linked"), "ndim": len(e.shape),
            "shape": list(e.shape) or [1], "code": dt.code, "bits": dt.bits, "lanes": dt.lanes,
            "size": e.size_bytes, "sid": e.sid,
        })
    runtime_binds = []  # (entry id, "inputs[i]" / "outputs[j]" / linked sid)
    for e in g.entries:
        b = p.bindings[e.sid]
        if b.kind == "input":
            runtime_binds.append({"eid": e.eid, "source": "inputs", "index": b.index})
        elif b.kind == "output":
            runtime_binds.append({"eid": e.eid, "source": "outputs", "index": b.index})
        elif b.kind == "linked":
            runtime_binds.append({"eid": e.eid, "source": "linked", "index": e.sid})
    calls = []
    for k, op in enumerate(g.ops):
        if op.is_nop:
            continue
        args = list(op.inputs) + list(op.outputs)
        calls.append({
            "k": k, "nid": op.nid, "name": op.name, "func": check_c_identifier(
                op.func_name, f"module {mod.name!r}: function of the graph JSON"),
            "args": args, "flatten": op.flatten_data,
            "flat_sizes": [max(1, _numel(g.entries[a].shape)) for a in args],
        })
    funcs = list(dict.fromkeys(c["func"] for c in calls))
    params = [{"index": k, "name": prm.name, "size": prm.size_bytes,
               "rows": _hex_rows(prm.data)} for k, prm in enumerate(gm.params)
              if any(b.kind == "param" and b.index == k for b in p.bindings.values())
              or any(pk == k for pk, _ in p.param_copies)]
    length, fnv = g.fingerprint
    return {
        "ident": p.ident, "pool_bytes": p.pool_bytes, "alignment": ALLOC_ALIGNMENT,
        "entries": entries, "runtime_binds": runtime_binds, "calls": calls, "funcs": funcs,
        "params": params, "linked": bool(gm.linked_params),
        "input_copies": [{"index": i, "eid": e, "size": g.entries[e].size_bytes}
                         for i, e in p.input_copies],
        "param_copies": [{"index": k, "eid": e, "size": g.entries[e].size_bytes}
                         for k, e in p.param_copies],
        "output_copies": [{"index": j, "eid": e, "size": g.entries[e].size_bytes}
                          for j, e in p.output_copies],
        "max_args": max((len(c["args"]) for c in calls), default=1),
        "json_length": length, "json_fnv": f"{fnv:016x}",
    }


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


# --- the source file ---------------------------------------------------------------------------


def render(env: Environments, modules: list[dict[str, Any]]) -> str | None:
    """``src/graph_model.c`` for the graph modules among the glue contexts ``modules``, or None
    when there is none."""
    graphs = [m for m in modules if m.get("api") == "graph"]
    if not graphs:
        return None
    return env.get_template("graph_model.c.j2").render(modules=graphs)


def write_sources(env: Environments, project_dir: Path, modules: list[dict[str, Any]]) -> list[str]:
    """Write ``src/graph_model.c`` when a module is a graph; the project-relative sources
    written (none for AOT-only projects)."""
    text = render(env, modules)
    if text is None:
        return []
    path = Path(project_dir) / GRAPH_MODEL_SOURCE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return [GRAPH_MODEL_SOURCE]

"""The graph executor's side of a module: its graph JSON and parameters, the workspace of each
operator, and the tensors the graph names, read as part of the module's parse.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from project_api.archive import tvm_graph
from project_api.archive.facts import (
    _Fact,
    _linked_params,
    _natural_key,
    _registry_names,
    _Relay,
    sanitize_c_name,
)
from project_api.archive.model import GraphModule, TensorInfo

_LOG = logging.getLogger(__name__)


class _GraphModuleReading:
    """The part of :class:`~project_api.archive.layouts._ModuleParser` that reads a graph-executor
    module."""

    def _graph_module(self, graph_path: Path, params_path: Path | None,
                      texts: dict[Path, str]) -> GraphModule:
        """The graph, its parameters (file and linked) and the registry of a graph module;
        MLFError for whatever cannot run (tvm_graph's refusals, a parameter that is no node of
        the graph or whose type or shape differs from its node's)."""
        graph = tvm_graph.read_graph(graph_path, self.where)
        params = tvm_graph.read_params(params_path, self.where) if params_path else []
        linked = _linked_params(texts)
        args = {a.name: a for a in graph.args}
        for p in params:
            node = args.get(p.name)
            if node is None:
                raise self.error(
                    f"{params_path.name if params_path else 'params'}: parameter {p.name!r} is "
                    f"no input node of {graph_path.name} (its inputs: "
                    f"{', '.join(args) or 'none'}); the params file belongs to another build")
            entry = graph.entries[node.eid]
            if (p.dtype, p.shape) != (entry.dtype, entry.shape):
                raise self.error(
                    f"parameter {p.name!r} is {p.dtype}{list(p.shape)} in the params file but "
                    f"{entry.dtype}{list(entry.shape)} in {graph_path.name}; re-export the model")
        names = {p.name for p in params}
        linked_sids = set(linked)
        inputs = [a for a in graph.args if a.name not in names
                  and graph.entries[a.eid].sid not in linked_sids]
        if not inputs:
            _LOG.debug("%s: the graph has no input that is not a parameter", self.where)
        return GraphModule(graph=graph, params=params, linked_params=linked,
                           registry=_registry_names(texts), input_nodes=inputs,
                           params_file_bytes=params_path.stat().st_size if params_path else 0,
                           operator_workspace_bytes=self._operator_workspace())

    def _operator_workspace(self) -> int | None:
        """The largest ``workspace_size_bytes`` of metadata.json's operator_functions."""
        functions = (self.raw.get("memory") or {}).get("functions") or {}
        ops = functions.get("operator_functions") if isinstance(functions, dict) else None
        if not isinstance(ops, list) or not ops:
            return None
        sizes = [w.get("workspace_size_bytes", 0) for op in ops if isinstance(op, dict)
                 for w in op.get("workspace") or [] if isinstance(w, dict)]
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in sizes):
            raise self.error("memory.functions.operator_functions[].workspace[]."
                             "workspace_size_bytes must be non-negative integers")
        return max(sizes, default=0)

    def _graph_tensors(self, gm: GraphModule, meta_in: list[_Fact] | None,
                       meta_out: list[_Fact] | None,
                       relay_info: _Relay) -> tuple[list[TensorInfo], list[TensorInfo]]:
        """Inputs and outputs from the graph's attrs (dtypes and shapes need no other source).
        Inputs keep their node names; outputs take Relay's ``output_tensor_names``, else the
        names metadata.json records (0.11+), else ``output`` / ``output<i>`` as TVM names them.
        metadata.json's sizes and dtypes, where recorded, must agree."""
        graph = gm.graph
        heads = [graph.entries[e] for e in graph.heads]
        names: list[str]
        if relay_info.output_names is not None and len(relay_info.output_names) == len(heads):
            names = list(relay_info.output_names)
        elif meta_out is not None and len(meta_out) == len(heads):
            names = [f.name for f in sorted(meta_out, key=lambda f: _natural_key(f.name))]
        else:
            names = ["output"] if len(heads) == 1 else [f"output{i}" for i in range(len(heads))]
        quant = {f.c: f.quantization for f in (meta_in or []) + (meta_out or [])
                 if f.quantization is not None}
        inputs = [self._graph_tensor(a.name, graph.entries[a.eid], quant)
                  for a in gm.input_nodes]
        outputs = [self._graph_tensor(n, e, quant) for n, e in zip(names, heads, strict=True)]
        for kind, tensors, meta in (("input", inputs, meta_in), ("output", outputs, meta_out)):
            if not meta:
                continue
            by_c = {f.c: f for f in meta}
            ordered = (sorted(meta, key=lambda f: _natural_key(f.name)) if kind == "output"
                       else None)
            for i, t in enumerate(tensors):
                f = by_c.get(t.c_name) or (ordered[i] if ordered and i < len(ordered) else None)
                if f is None:
                    continue
                for what, mine, theirs in (("dtype", t.dtype, f.dtype),
                                           ("size", t.size_bytes, f.size)):
                    if theirs is not None and theirs != mine:
                        raise self.error(
                            f"{kind} {t.name!r}: {what} {theirs} in metadata.json but {mine} in "
                            f"{graph.path.name}; the archive's files disagree, re-export it")
        c_names = [t.c_name for t in inputs + outputs]
        dup = sorted({c for c in c_names if c_names.count(c) > 1})
        if dup:
            raise self.error(f"two tensors share the C name {dup[0]!r} in {graph.path.name}; "
                             "rename them in the model")
        return inputs, outputs

    @staticmethod
    def _graph_tensor(name: str, entry: tvm_graph.Entry,
                      quant: dict[str, dict[str, Any]]) -> TensorInfo:
        """A tensor of the graph; quantization only from our emitter's metadata."""
        c_name = sanitize_c_name(name)
        return TensorInfo(name=name, c_name=c_name, dtype=entry.dtype,
                          size_bytes=entry.size_bytes, shape=entry.shape,
                          quantization=quant.get(c_name))

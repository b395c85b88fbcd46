"""Reading one module of an archive, whatever TVM release wrote it: the layout of each release
(where the header, sources, metadata, graph and Relay text sit) and the reconciliation of their
facts into one description.
"""

from __future__ import annotations

import json
import logging
import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from project_api.archive.facts import (
    _C_IDENTIFIER,
    _SOURCE_SUFFIXES,
    _bytes,
    _cpu_family,
    _Draft,
    _Fact,
    _fold_case,
    _Header,
    _int_field,
    _internal_pool_bytes,
    _natural_key,
    _parse_relay,
    _quantization_from_json,
    _Relay,
    _shape_from_json,
    _strip_c_comments,
    _unprinted_name,
    dtype_bits,
    sanitize_c_name,
    tensor_size_bytes,
)
from project_api.archive.graph_module import _GraphModuleReading
from project_api.archive.model import InputSpec, ModuleInfo, TensorInfo
from project_api.archive.params import read_param_dtypes, read_param_names
from project_api.errors import MLFError
from project_api.system import bounded

_LOG = logging.getLogger(__name__)

#: Most entries a module's metadata.json "target" may list (TVM writes one per target: a few).
MAX_TARGETS = 64


class _ModuleParser(_GraphModuleReading):
    def __init__(self, root: Path, source: Path, name: str, raw: dict[str, Any], single: bool,
                 specs: dict[str, InputSpec] | None = None):
        self.root = root
        self.source = source
        self.name = name
        self.raw = raw
        self.single = single
        self.where = f"{source}: module {name!r}"
        self.specs = specs or {}
        self.used_specs: set[str] = set()

    def error(self, what: str) -> MLFError:
        return MLFError(bounded.one_line(f"{self.where}: {what}"))

    def parse(self) -> ModuleInfo:
        raw = self.raw
        executors = raw.get("executors", raw.get("runtimes", []))
        if not isinstance(executors, list) or not all(isinstance(e, str) for e in executors):
            raise self.error("\"executors\" must be a list of names")
        unknown = [e for e in executors if e not in ("aot", "graph")]
        if unknown:
            raise self.error(f"unknown executor(s) {unknown}; expected \"aot\" or \"graph\"")
        style = raw.get("style", "full-model")
        if style != "full-model":
            raise self.error(f"style {style!r} is not supported; expected \"full-model\"")

        mains = self._main_entries()
        workspace = sum(_int_field(m, "workspace_size_bytes", self) for m in mains)
        constants = sum(_int_field(m, "constants_size_bytes", self) for m in mains)
        state = sum(_int_field(m, "state_size_bytes", self) for m in mains)
        io_sizes = [_int_field(m, "io_size_bytes", self, None) for m in mains]
        io = sum(io_sizes) if io_sizes and all(isinstance(x, int) for x in io_sizes) else None

        codegen = self.root / "codegen" / "host"
        sources = self._codegen_files(codegen / "src", _SOURCE_SUFFIXES)
        objects = self._codegen_files(codegen / "lib", (".o",))
        header = self._parse_header(codegen / "include" / f"tvmgen_{self.mangled}.h")
        relay_path = self._first_file(
            [self.root / "src" / f"{self.name}.relay"]
            + ([self.root / "src" / "relay.txt"] if self.single else [])
        )
        relay = _parse_relay(relay_path, self.where) if relay_path else _Relay()
        graph = self._first_file(
            [self.root / "executor-config" / "graph" / f"{self.name}.graph"]
            + ([self.root / "executor-config" / "graph" / "graph.json"] if self.single else [])
        )
        if "graph" in executors and graph is None:
            _LOG.warning("%s: graph executor module without executor-config/graph JSON", self.where)
        params = self._first_file([self.root / "parameters" / f"{self.name}.params"])
        param_names = read_param_names(params, self.where) if params else None

        meta_in, meta_out = self._metadata_tensors(mains)
        texts = {p: _strip_c_comments(p.read_text(encoding="utf-8", errors="replace"))
                 for p in sources}
        raw_texts = {p: p.read_text(encoding="utf-8", errors="replace") for p in sources}
        if "graph" in executors and graph is not None:
            graph_module = self._graph_module(graph, params, texts)
            inputs, outputs = self._graph_tensors(graph_module, meta_in, meta_out, relay)
            cpu, family, evidence = self._target(raw_texts)
            return ModuleInfo(
                name=self.name, executors=list(executors), style=style, inputs=inputs,
                outputs=outputs, workspace_size_bytes=workspace, constants_size_bytes=constants,
                io_size_bytes=io, interface_header=header.path if header else None,
                sources=sources, run_function=self._run_function(header, texts),
                objects=objects, relay_path=relay_path,
                graph_json_path=graph, params_path=params,
                param_names=[p.name for p in graph_module.params],
                internal_workspace_bytes=_internal_pool_bytes(texts),
                target_cpu=cpu, target_family=family, target_evidence=evidence,
                graph=graph_module,
            )
        relay_in = self._drop_weights(relay.inputs, param_names, header)
        relay_out_names = None
        if relay.output_names is not None and relay.outputs is not None:
            if len(relay.output_names) == len(relay.outputs):
                relay_out_names = relay.output_names
            else:
                _LOG.debug("%s: Relay output_tensor_names has %d names for %d outputs; ignored",
                           self.where, len(relay.output_names), len(relay.outputs))
        inputs = self._merge(
            "input", meta_in, relay_in,
            header.inputs if header else None,
            header.input_sizes if header else {}, header.input_names if header else {},
        )
        outputs = self._merge(
            "output", meta_out, relay.outputs,
            header.outputs if header else None,
            header.output_sizes if header else {}, header.output_names if header else {},
            relay_names=relay_out_names,
        )
        if not outputs:
            relay_name = f"src/{self.name}.relay" + (" or src/relay.txt" if self.single else "")
            raise self.error(
                "its inputs and outputs are recorded nowhere (no inputs/outputs in metadata.json, "
                f"no codegen/host/include/tvmgen_{self.mangled}.h, no readable Relay text "
                f"{relay_name}); re-export the model with its Relay text or with our emitter"
            )
        model_dtypes = self._model_dtypes(inputs + outputs, relay, params)
        # io_size_bytes counts every variable of main (unbound weights, TVM 0.11+ also other
        # buffers: 2059 for 6 bytes of tensors in a published 0.13 archive); it stands for the
        # inputs plus outputs only where the metadata has no per-tensor sizes (TVM 0.8-0.10).
        io_rest = io if meta_in is None and meta_out is None else None
        completed = self._complete(inputs + outputs, io_rest, relay, model_dtypes, header)
        inputs, outputs = completed[: len(inputs)], completed[len(inputs) :]
        if header and header.workspace_size is not None and not mains:
            workspace = header.workspace_size

        run_function = self._run_function(header, texts)
        cpu, family, evidence = self._target(raw_texts)
        return ModuleInfo(
            name=self.name, executors=list(executors), style=style, inputs=inputs,
            outputs=outputs, workspace_size_bytes=workspace, constants_size_bytes=constants,
            io_size_bytes=io, interface_header=header.path if header else None, sources=sources,
            run_function=run_function, objects=objects, relay_path=relay_path,
            graph_json_path=graph, params_path=params, param_names=param_names,
            internal_workspace_bytes=_internal_pool_bytes(texts),
            target_cpu=cpu, target_family=family, target_evidence=evidence,
            external_pools=dict(header.pools) if header else {},
            devices=list(header.devices) if header else [],
            io_in_pools=header.io_in_pools if header else False,
            profile=raw.get("profile") is True and any(
                re.search(rf"\btvmgen_{re.escape(self.mangled)}_profile_read\s*\(", t, re.I)
                for t in texts.values()),
            state_size_bytes=state,
        )

    @property
    def mangled(self) -> str:
        return sanitize_c_name(self.name).lower()

    @staticmethod
    def _first_file(candidates: list[Path]) -> Path | None:
        for c in candidates:
            if c.is_file():
                return c
        return None

    def _codegen_files(self, folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
        if not folder.is_dir():
            return []
        found = [p for p in folder.iterdir() if p.is_file() and p.suffix in suffixes]
        if not self.single:
            found = [p for p in found if p.name.startswith(f"{self.name}_")]
        return sorted(found, key=_natural_key)

    def _drop_weights(self, relay_inputs: list[_Fact] | None, param_names: list[str] | None,
                      header: _Header | None) -> list[_Fact] | None:
        """The Relay parameters that are real inputs: TVM printed @main before binding the
        weights, so every weight is a parameter too (``%v_param_1``: the printer puts ``v``
        before a name that does not start with a letter)."""
        if relay_inputs is None:
            return None
        kept = list(relay_inputs)
        if param_names:
            # Names as the frontend gave them (``_param_1``); a graph-executor or bound export
            # may name its params ``p0``.. instead, which then match nothing here.
            weights = set(param_names)
            kept = [f for f in kept if not (f.name in weights or _unprinted_name(f.name) in weights)]
        if header is not None and header.inputs:
            wanted = {c.lower() for c in header.inputs}
            kept = [f for f in kept if f.c.lower() in wanted]
        dropped = [f.name for f in relay_inputs if f not in kept]
        if dropped:
            _LOG.debug("%s: Relay parameters %s are weights, not inputs", self.where, dropped)
        return kept

    def _main_entries(self) -> list[dict[str, Any]]:
        memory = self.raw.get("memory")
        if memory is None:
            return []
        if not isinstance(memory, dict):
            raise self.error("\"memory\" must be an object")
        functions = memory.get("functions", {})
        mains = functions.get("main", []) if isinstance(functions, dict) else None
        if not isinstance(mains, list) or not all(isinstance(m, dict) for m in mains):
            raise self.error("memory.functions.main must be a list of objects")
        return mains

    def _metadata_tensors(self, mains: list[dict[str, Any]]) -> tuple[list[_Fact] | None, list[_Fact] | None]:
        result: list[list[_Fact] | None] = []
        for kind in ("inputs", "outputs"):
            facts: list[_Fact] | None = None
            for m in mains:
                if kind not in m:
                    continue
                table = m[kind]
                if not isinstance(table, dict):
                    raise self.error(f"memory.functions.main[].{kind} must be an object")
                facts = facts or []
                for tname, info in table.items():
                    facts.append(self._metadata_fact(kind[:-1], tname, info))
            result.append(facts)
        return result[0], result[1]

    def _metadata_fact(self, kind: str, tname: str, info: Any) -> _Fact:
        if not isinstance(info, dict):
            raise self.error(f"{kind} {tname!r}: metadata entry must be an object")
        fact = _Fact(tname)
        if "dtype" in info:
            if not isinstance(info["dtype"], str):
                raise self.error(f"{kind} {tname!r}: \"dtype\" must be a string")
            fact.dtype = info["dtype"]
            try:
                dtype_bits(fact.dtype)  # validates
            except MLFError as exc:
                raise self.error(f"{kind} {tname[:200]!r}: {exc}") from None
        if "size" in info:
            size = info["size"]
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise self.error(f"{kind} {tname!r}: \"size\" must be a non-negative integer")
            fact.size = size
        if "shape" in info:
            fact.shape = _shape_from_json(info["shape"], self, f"{kind} {tname!r}")
        if info.get("quantization") is not None:
            fact.quantization = _quantization_from_json(info["quantization"], self, f"{kind} {tname!r}")
        if "c_name" in info:
            c = info["c_name"]
            if not isinstance(c, str) or not _C_IDENTIFIER.fullmatch(c):
                raise self.error(f"{kind} {tname!r}: \"c_name\" must be a C identifier")
            fact.c_name = c
        return fact

    def _parse_header(self, path: Path) -> _Header | None:
        if not path.is_file():
            return None
        text = path.read_text(encoding="utf-8", errors="replace")
        prefix = f"tvmgen_{self.mangled}"
        macro = prefix.upper()

        # Doc comments name the tensor of each size macro.
        names: dict[str, dict[str, str]] = {"Input": {}, "Output": {}}
        sizes: dict[str, dict[str, int]] = {"Input": {}, "Output": {}}
        doc_re = re.compile(
            r"(Input|Output) tensor (.*?) size \(in bytes\) for TVM module \"[^\"]*\"\s*\*/\s*"
            r"#define\s+(\w+)\s+\(?(\d+)\)?"
        )
        for kind, tname, mname, value in doc_re.findall(text):
            if mname.startswith(macro + "_") and mname.endswith("_SIZE"):
                c_upper = mname[len(macro) + 1 : -len("_SIZE")]
                names[kind][c_upper] = tname
                sizes[kind][c_upper] = int(value)
        plain = _strip_c_comments(text)
        all_macros = {
            m.group(1): int(m.group(2))
            for m in re.finditer(r"#define\s+(\w+)\s+\(?(\d+)\)?", plain)
        }

        def members(kind: str) -> list[str]:
            m = re.search(r"struct\s+" + re.escape(f"{prefix}_{kind}") + r"\s*\{(.*?)\}", plain, re.S)
            if m is None:
                return []
            fields = re.findall(r"void\s*\*\s*(\w+)\s*;", m.group(1))
            leftovers = re.sub(r"void\s*\*\s*\w+\s*;", "", m.group(1)).strip()
            if leftovers:
                raise self.error(f"{path.name}: unexpected text in struct {prefix}_{kind}: {leftovers!r}")
            return fields

        def size_table(kind: str, c_names: list[str]) -> tuple[dict[str, int], dict[str, str]]:
            out_sizes: dict[str, int] = {}
            out_names: dict[str, str] = {}
            for c in c_names:
                key = c.upper()
                if key in sizes[kind]:
                    out_sizes[c] = sizes[kind][key]
                    out_names[c] = names[kind][key]
                elif f"{macro}_{key}_SIZE" in all_macros:
                    out_sizes[c] = all_macros[f"{macro}_{key}_SIZE"]
            return out_sizes, out_names

        ins, outs = members("inputs"), members("outputs")
        in_sizes, in_names = size_table("Input", ins)
        out_sizes, out_names = size_table("Output", outs)
        has_run = re.search(r"\b" + re.escape(prefix) + r"_run\s*\(", plain) is not None
        pools = {p: all_macros.get(f"{macro}_{sanitize_c_name(p).upper()}_WORKSPACE_POOL_SIZE")
                 for p in members("workspace_pools")}
        return _Header(
            path=path, inputs=ins, outputs=outs, input_sizes=in_sizes, output_sizes=out_sizes,
            input_names=in_names, output_names=out_names,
            workspace_size=all_macros.get(f"{macro}_WORKSPACE_SIZE"), has_run=has_run,
            pools=pools, devices=members("devices"),
            io_in_pools=re.search(r"\b" + re.escape(prefix) + r"_map_inputs\s*\(", plain)
            is not None,
        )

    def _run_function(self, header: _Header | None, texts: dict[Path, str]) -> str | None:
        """The entry point the C defines. A header's ``_run`` declaration is not enough: TVM 0.8
        era archives may define only the flat ``_run_model`` (lib0.c then holds a packed-API
        ``_run(void* args, void* type_code, ...)`` or nothing)."""
        prefix = re.escape(f"tvmgen_{self.mangled}")
        struct_def = re.compile(r"\b" + prefix + r"_run\s*\(\s*struct\b[^;{]*\)\s*\{")
        flat_def = re.compile(r"\b" + prefix + r"_run_model\s*\([^;{]*\)\s*\{")
        any_run = re.compile(r"\b" + prefix + r"_run\s*\(")
        if any(struct_def.search(t) for t in texts.values()):
            return f"tvmgen_{self.mangled}_run"
        if any(flat_def.search(t) for t in texts.values()):
            if header is not None and header.has_run:
                _LOG.debug("%s: the header declares %s_run but the C defines only the flat "
                           "%s_run_model; using that", self.where, prefix, prefix)
            return f"tvmgen_{self.mangled}_run_model"
        if header is not None and header.has_run:
            return f"tvmgen_{self.mangled}_run"  # e.g. defined in a prebuilt object
        if any(any_run.search(t) for t in texts.values()):
            return f"tvmgen_{self.mangled}_run"
        return None

    def _target(self, texts: dict[Path, str]) -> tuple[str | None, str | None, str | None]:
        """(cpu, family, evidence) from metadata ``target`` strings, ``// tvm target:`` lines and
        the Arm headers the generated C includes."""
        raw_target = self.raw.get("target")
        count = len(raw_target) if isinstance(raw_target, (list, dict)) else 1
        if count > MAX_TARGETS:
            raise self.error(f"metadata.json \"target\" has {count} entries, more than the "
                             f"limit of {MAX_TARGETS}; re-export the model")
        targets: list[str] = []
        if isinstance(raw_target, dict):
            targets = [str(v) for v in raw_target.values()]
        elif isinstance(raw_target, list):
            targets = [t if isinstance(t, str) else json.dumps(t) for t in raw_target]
        elif isinstance(raw_target, str):
            targets = [raw_target]
        candidates = [(t, f"metadata.json target {t!r}") for t in targets]
        for path, text in texts.items():
            for m in re.finditer(r"^//\s*tvm target:\s*(.+)$", text, re.M):
                candidates.append((m.group(1).strip(), f"{path.name}: '// tvm target: "
                                                       f"{m.group(1).strip()}'"))
        for target, evidence in candidates:
            m = re.search(r"-mcpu=([\w.+-]+)", target)
            if m:
                cpu = m.group(1).lower()
                return cpu, _cpu_family(cpu), evidence
        for target, evidence in candidates:
            m = re.search(r"-mtriple=(thumbv[678]\w*|armv[678]\w*|aarch64\w*)", target)
            if m:
                triple = m.group(1)
                family = ("cortex-m" if re.match(r"thumbv(6m|7m|7em|8m)", triple)
                          else "cortex-a" if triple.startswith("aarch64") else "arm")
                return None, family, evidence
        for path, text in texts.items():
            m = re.search(r"#\s*include\s*<(arm_math\.h|arm_nnsupportfunctions\.h|"
                          r"arm_nnfunctions\.h|cmsis_compiler\.h)>", text)
            if m:
                return None, "cortex-m", f"{path.name} includes <{m.group(1)}>"
        for path, text in texts.items():
            m = re.search(r"#\s*include\s*<(arm_acle\.h)>", text)
            if m:
                return None, "arm", f"{path.name} includes <{m.group(1)}>"
        for target, evidence in candidates:
            if re.search(r"-keys=[\w,]*\barm_cpu\b|-device=arm_cpu", target):
                return None, "arm", evidence
        return None, None, None

    def _merge(
        self,
        kind: str,
        meta: list[_Fact] | None,
        relay: list[_Fact] | None,
        header_order: list[str] | None,
        header_sizes: dict[str, int],
        header_names: dict[str, str],
        relay_names: list[str] | None = None,
    ) -> list[_Draft]:
        """One list of tensors from every source. metadata.json and the interface header are
        the authority (a disagreement between them is an error); the Relay text only adds
        dtypes and shapes and is ignored, with a debug line, where it does not fit."""
        meta_table = self._meta_table(kind, meta)
        if relay is not None and kind == "output" and relay_names is not None:
            relay = [replace(f, name=n) for f, n in zip(relay, relay_names, strict=True)]
        relay, relay_table = self._relay_table(kind, relay)
        positional = self._positional_order(kind, meta, relay, relay_table, header_order,
                                            header_names)
        if positional is None:
            return []
        order, names = positional
        _fold_case(meta_table, order)
        _fold_case(relay_table, order)
        meta_table = self._match_meta(kind, meta_table, order, names)
        relay_table = self._match_relay(kind, relay, relay_table, order, names)
        tensors: list[_Draft] = []
        for c in order:
            m = meta_table.get(c)
            r = relay_table.get(c)
            name = (m.name if m else None) or (r.name if r else None) or names.get(c) or c
            spec = self._spec_for(name, c)
            if spec is not None and name == c and sanitize_c_name(spec.name) == c:
                name = spec.name  # the archive knows only the C name; the user gave the real one
            tensors.append(self._tensor(kind, name, c, m, r, spec, header_sizes.get(c)))
        return tensors

    def _meta_table(self, kind: str, meta: list[_Fact] | None) -> dict[str, _Fact]:
        """metadata.json's tensors by C name; two that share one are an error."""
        table: dict[str, _Fact] = {}
        for f in meta or []:
            c = f.c
            if c in table:
                raise self.error(
                    f"{kind}s {table[c].name!r} and {f.name!r} in metadata.json share the "
                    f"C name {c!r}"
                )
            table[c] = f
        return table

    def _relay_table(self, kind: str, relay: list[_Fact] | None
                     ) -> tuple[list[_Fact] | None, dict[str, _Fact]]:
        """The Relay text's tensors by C name; when two share one, the Relay text is dropped
        (returned as None) with a debug line."""
        table: dict[str, _Fact] = {}
        for f in relay or []:
            c = f.c
            if c in table:
                _LOG.debug("%s: Relay %ss %r and %r share the C name %r; Relay text ignored",
                           self.where, kind, table[c].name, f.name, c)
                return None, {}
            table[c] = f
        return relay, table

    @staticmethod
    def _positional_order(kind: str, meta: list[_Fact] | None, relay: list[_Fact] | None,
                          relay_table: dict[str, _Fact], header_order: list[str] | None,
                          header_names: dict[str, str]
                          ) -> tuple[list[str], dict[str, str | None]] | None:
        """The tensors' C names in positional order with their names where known: the header's
        struct, else metadata.json (TVM sorted its keys, so Relay positions reorder inputs),
        else the Relay signature; None when no source lists any."""
        if header_order:
            return list(header_order), {c: header_names.get(c) for c in header_order}
        if meta is not None and (meta or not relay):
            facts = list(meta)
            if kind == "output":
                facts.sort(key=lambda f: _natural_key(f.name))
            elif relay:
                rank = {c: i for i, c in enumerate(relay_table)}
                facts.sort(key=lambda f: rank.get(f.c, len(rank)))
            return ([f.c for f in facts],
                    {f.c: f.name for f in facts})
        if relay:
            return list(relay_table), {c: f.name for c, f in relay_table.items()}
        return None

    def _match_meta(self, kind: str, meta_table: dict[str, _Fact], order: list[str],
                    names: dict[str, str | None]) -> dict[str, _Fact]:
        """metadata.json's tensors keyed by the positional C names; one the positional list
        lacks is an error, except outputs TVM 0.11 named apart from its header."""
        extra = set(meta_table) - set(order)
        if not extra:
            return meta_table
        if kind == "output" and len(meta_table) == len(order):
            # TVM 0.11 named metadata outputs "output"/"output0".. while its header used
            # output_tensor_names: same outputs, matched by position.
            _LOG.debug("%s: metadata.json output names %s differ from the header's %s; "
                       "matched by position", self.where, sorted(meta_table), order)
            ordered = sorted(meta_table.values(), key=lambda f: _natural_key(f.name))
            return {c: replace(f, name=names.get(c) or c)
                    for c, f in zip(order, ordered, strict=True)}
        raise self.error(
            f"metadata.json lists {kind}(s) {sorted(meta_table[c].name for c in extra)} "
            f"that the positional {kind} list ({', '.join(order)}) lacks"
        )

    def _match_relay(self, kind: str, relay: list[_Fact] | None, relay_table: dict[str, _Fact],
                     order: list[str], names: dict[str, str | None]) -> dict[str, _Fact]:
        """The Relay text's tensors keyed by the positional C names: outputs by position
        (Relay names them by position only, unless output_tensor_names does), inputs by name;
        what does not fit is ignored with a debug line."""
        if relay and kind == "output":
            if set(relay_table) == set(order):
                return relay_table
            if len(relay) == len(order):
                return {c: replace(f, name=names.get(c) or c)
                        for c, f in zip(order, relay, strict=True)}
            _LOG.debug("%s: Relay text returns %d output(s) but the module has %d (%s); "
                       "its output types are ignored", self.where, len(relay),
                       len(order), ", ".join(order))
            return {}
        unmatched = set(relay_table) - set(order)
        if unmatched:
            _LOG.debug("%s: Relay parameters %s are not inputs of the module; ignored",
                       self.where, sorted(relay_table[c].name for c in unmatched))
        return relay_table

    def _spec_for(self, name: str, c_name: str) -> InputSpec | None:
        for key in (name, c_name):
            if key in self.specs:
                self.used_specs.add(key)
                return self.specs[key]
        for key, spec in self.specs.items():
            if sanitize_c_name(key) == c_name:
                self.used_specs.add(key)
                return spec
        return None

    def _tensor(self, kind: str, name: str, c: str, m: _Fact | None, r: _Fact | None,
                spec: InputSpec | None, header_size: int | None) -> _Draft:
        """What the sources say about one tensor; a disagreement between metadata.json, the
        header and ``--input-spec`` is an error, facts still missing are left to
        :meth:`_complete`."""
        what = f"{kind} {name!r}"
        d = _Draft(kind, name, c, quantization=m.quantization if m else None,
                   relay_fact=r, spec=spec is not None)
        if m and m.dtype and r and r.dtype and m.dtype != r.dtype:
            _LOG.debug("%s: %s: dtype %s in metadata.json, %s in Relay text; using metadata.json",
                       self.where, what, m.dtype, r.dtype)
        if spec is not None and m and m.dtype and spec.dtype != m.dtype:
            raise self.error(
                f"{what}: --input-spec says {spec.dtype} but metadata.json records {m.dtype}; "
                "drop or correct the spec"
            )
        d.dtype = (spec.dtype if spec else None) or (m.dtype if m else None)
        if d.dtype is None and r is not None and r.dtype is not None:
            d.dtype = r.dtype
            if r.origin == "inferred":
                d.inferred.append("dtype")
        meta_shape = m.shape if m else None
        if spec is not None and meta_shape is not None and spec.shape != meta_shape:
            raise self.error(
                f"{what}: --input-spec says shape {list(spec.shape)} but metadata.json records "
                f"{list(meta_shape)}; drop or correct the spec"
            )
        d.shape = spec.shape if spec else meta_shape
        candidates: list[tuple[str, int]] = []
        if m and m.size is not None:
            candidates.append(("metadata.json", m.size))
        if header_size is not None:
            candidates.append(("the interface header", header_size))
        if d.shape is not None and d.dtype is not None:
            label = "--input-spec" if spec else "metadata.json"
            candidates.append((f"shape {list(d.shape)} x {d.dtype} ({label})",
                               tensor_size_bytes(d.shape, d.dtype)))
        if candidates:
            size = candidates[0][1]
            for label, value in candidates[1:]:
                if value != size:
                    raise self.error(
                        f"{what}: size {size} from {candidates[0][0]} disagrees with {value} from "
                        f"{label}; correct the archive{' or the --input-spec' if spec else ''}"
                    )
            d.size, d.size_from = size, candidates[0][0]
        if (d.shape is None and r is not None and r.shape is not None and d.dtype is not None
                and r.dtype in (None, d.dtype)):
            relay_size = tensor_size_bytes(r.shape, d.dtype)
            if d.size is None or relay_size == d.size:
                d.shape = r.shape
                if r.origin == "inferred":
                    d.inferred.append("shape")
                if d.size is None:
                    d.size, d.size_from = relay_size, "the Relay shape"
            else:
                _LOG.debug("%s: %s: Relay shape %s x %s is %d bytes, not %d; shape ignored",
                           self.where, what, list(r.shape), d.dtype, relay_size, d.size)
        return d

    def _model_dtypes(self, drafts: list[_Draft], relay_info: _Relay,
                      params: Path | None) -> dict[str, list[str]]:
        """Every dtype the archive records for the model's tensors and weights: dtype -> what
        records it (inputs, outputs, Relay parameters, the params file)."""
        found: dict[str, list[str]] = {}

        def add(dtype: str | None, what: str) -> None:
            if dtype and what not in found.setdefault(dtype, []):
                found[dtype].append(what)

        for d in drafts:
            if d.dtype is not None:
                add(d.dtype, d.kind)
        for f in relay_info.inputs or []:
            add(f.dtype, "Relay parameter")
        for _name, dtype in (read_param_dtypes(params) if params else None) or []:
            add(dtype, "weight")
        return found

    def _complete(self, drafts: list[_Draft], io_size: int | None, relay_info: _Relay,
                  model_dtypes: dict[str, list[str]], header: _Header | None) -> list[TensorInfo]:
        """Fill the facts the archive leaves out, in this order: the model's one dtype (when
        every tensor and weight that records a dtype records the same), the size that
        ``io_size_bytes`` leaves after the other tensors, a flat shape ``(size / itemsize,)``.
        A fact still missing is an MLFError that says what was tried."""
        only = next(iter(model_dtypes)) if len(model_dtypes) == 1 else None
        for d in drafts:
            if (d.dtype is None and only is not None and not d.spec
                    and (d.size is None or (d.size * 8) % dtype_bits(only) == 0)):
                d.dtype = only
                d.notes.append(f"dtype {only}: every {' and every '.join(model_dtypes[only])} of "
                               f"the model that records a dtype is {only}")
            if d.size is None and d.shape is not None and d.dtype is not None:
                d.size, d.size_from = tensor_size_bytes(d.shape, d.dtype), "its shape"
        missing = [d for d in drafts if d.size is None]
        if io_size is not None and len(missing) == 1:
            rest = io_size - sum(d.size for d in drafts if d.size is not None)  # type: ignore[misc]
            d = missing[0]
            bits = dtype_bits(d.dtype) if d.dtype else 8
            if rest > 0 and (rest * 8) % bits == 0:
                d.size, d.size_from = rest, "io_size_bytes"
                d.notes.append(f"{_bytes(rest)}: what io_size_bytes {io_size} leaves after the "
                               "other inputs and outputs")
            else:
                _LOG.debug("%s: io_size_bytes %d leaves %d bytes for %s %r; not used",
                           self.where, io_size, rest, d.kind, d.name)
        elif io_size is not None and not missing:
            total = sum(d.size for d in drafts)  # type: ignore[misc]
            if total == io_size:
                for d in drafts:
                    if d.inferred and d.size_from == "the Relay shape":
                        verb = "agrees" if d.size == 1 else "agree"
                        d.agrees = f"its {_bytes(d.size)} {verb} with io_size_bytes {io_size}"
            else:
                _LOG.debug("%s: the inputs and outputs hold %d bytes, io_size_bytes says %d",
                           self.where, total, io_size)
        for d in drafts:
            r = d.relay_fact
            if (d.shape is None and r is not None and r.partial is not None
                    and d.size is not None and d.dtype is not None and r.dtype in (None, d.dtype)
                    and sum(x is None for x in r.partial) == 1):
                known = math.prod(x for x in r.partial if x is not None)
                bits = dtype_bits(d.dtype)
                if known and (d.size * 8) % (bits * known) == 0:
                    d.shape = tuple((d.size * 8) // (bits * known) if x is None else x
                                    for x in r.partial)
                    printed = ", ".join("?" if x is None else str(x) for x in r.partial)
                    d.notes.append(f"shape {list(d.shape)}: the Relay type ({printed}) with its "
                                   f"? from the {_bytes(d.size)}")
            if d.shape is None and d.dtype is not None and d.size is not None:
                bits = dtype_bits(d.dtype)
                if (d.size * 8) % bits == 0:
                    d.shape = ((d.size * 8) // bits,)
                    d.notes.append(f"shape [{d.shape[0]}] (flat): {_bytes(d.size)} of {d.dtype}, "
                                   "from " + {"metadata.json": "metadata.json's size",
                                              "the interface header": "the header's size macro",
                                              "io_size_bytes": "io_size_bytes"}.get(
                                                  d.size_from or "", d.size_from or "its size")
                                   + "; the archive records no shape")
            if d.inferred:
                facts = " and ".join(d.inferred)
                shown = (f" {d.dtype}" if "dtype" in d.inferred else "") + (
                    f" {list(d.shape)}" if "shape" in d.inferred and d.shape is not None else "")
                body = relay_info.path.name if relay_info.path else "the Relay text"
                last = f", whose result is {relay_info.last_op}" if relay_info.last_op else ""
                d.notes.insert(0, f"{facts}{shown} inferred through the body of @main in "
                                  f"{body}{last}" + (f" ({d.agrees})" if d.agrees else ""))
        for d in drafts:
            if d.dtype is None:
                raise self.error(self._untyped(d, relay_info, model_dtypes, header))
            if d.size is None:
                raise self.error(
                    f"{d.kind} {d.name!r}: no size recorded and no shape to compute it from "
                    "(metadata.json has none, the header has no size macro"
                    + (f", and io_size_bytes {io_size} leaves it open: {len(missing)} tensors "
                       "lack a size" if io_size is not None else ", no io_size_bytes")
                    + f"); supply it with --input-spec {d.name}:{d.dtype}:D0xD1x..."
                )
        return [TensorInfo(name=d.name, c_name=d.c_name, dtype=d.dtype, size_bytes=d.size,
                           shape=d.shape, quantization=d.quantization,
                           note="; ".join(d.notes) or None)
                for d in drafts]  # type: ignore[arg-type]

    def _untyped(self, d: _Draft, relay_info: _Relay, model_dtypes: dict[str, list[str]],
                 header: _Header | None) -> str:
        tried = ["metadata.json lists none", "the interface header declares only void*"
                 if header else "there is no interface header"]
        if relay_info.path is None:
            tried.append("there is no Relay text")
        elif relay_info.failure:
            tried.append(relay_info.failure)
        elif d.relay_fact is None:
            tried.append(f"{relay_info.path.name} does not type it")
        if len(model_dtypes) > 1:
            tried.append(f"the model's other tensors and weights use {', '.join(model_dtypes)}, "
                         "not one dtype")
        else:
            tried.append("no other tensor or weight records a dtype")
        return (f"{d.kind} {d.name!r}: no dtype recorded ({'; '.join(tried)}); supply it with "
                f"--input-spec {d.name}:DTYPE:SHAPE, e.g. --input-spec {d.name}:int8:1x49x10x1")

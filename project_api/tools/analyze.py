"""Where the memory goes: a model's layers, sizes and fit against a board, as ``project-api
analyze`` shows it.

:func:`analyze` takes a ``.tflite`` (emitted in memory for the kernel target) or a Model Library
Format archive and returns an :class:`Analysis`:

* **per layer** (:mod:`project_api.emit.layers`): operator, kernel (generic, DSP, view), input
  and output shapes and dtypes, MACs, weight bytes as stored for the kernel target, scratch, and
  the bytes of the activation pool live while the layer runs; read from ``metadata.json`` for
  an archive of our emitter. An archive TVM compiled records no layers: its analysis holds what
  its metadata allows (the whole model, its pools and sizes, the fused operator functions and
  their workspace) and :attr:`Analysis.unknown` says what is not known per layer;
* **totals**: MACs, weights, the pool beside the planner's lower bound, state;
* **sizes** (:class:`Sizes`): code and constant bytes measured by compiling the module's C for
  the CPU (the board's, the kernel target's, or the archive's) with its toolchain, per function;
  without the toolchain the figures that could not be measured are marked estimates;
* **fit** (:class:`Fit`, with ``template`` and a ``board`` option): the project generated and
  built for that board in a temporary folder, and the build's own memory report
  (:mod:`project_api.template.memory`: runtime, RPC server, model code, weights, activations,
  application) against the board's regions; a model that does not fit names the region, the
  bytes over and its three largest parts.

**Hook for other figures.** :data:`COMPARISONS` holds functions ``f(module) -> list[Comparison]``
called for every module of an MLF archive; each :class:`Comparison` is a figure shown beside the
pool (table, JSON ``comparisons``, memory picture). The graph-executor lowering (issue 24) adds
"pool vs TVM graph executor RAM" for graph archives by appending its function there.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from project_api.emit.layers import Layer, PoolPlan, TensorFacts
from project_api.errors import ProjectAPIError, ProjectError

__all__ = ["COMPARISONS", "Analysis", "Comparison", "Fit", "Sizes", "analyze",
           "measure_sizes"]

_LOG = logging.getLogger(__name__)

#: How the model's C is compiled for measuring (the stm32 template's flags: -Os, one section per
#: function and per array, the generated code's warnings off).
MEASURE_CFLAGS = ("-Os", "-ffunction-sections", "-fdata-sections", "-w", "-fno-strict-aliasing")
ARM_CC = "arm-none-eabi-gcc"
ARM_SIZE = "arm-none-eabi-size"


@dataclass(frozen=True)
class Comparison:
    """A figure shown beside the activation pool (e.g. what another runtime would take)."""

    label: str
    bytes: int
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "bytes": self.bytes, "note": self.note}


#: Functions ``f(module: project_api.archive.mlf.ModuleInfo) -> list[Comparison]``, called for every
#: module of an MLF archive (see the module docstring).
COMPARISONS: list[Callable[[Any], list[Comparison]]] = []


@dataclass
class Sizes:
    """The model's code and constants, by compiling its C (``measured``) or not."""

    measured: bool
    how: str  #: the compiler and flags, or why nothing was compiled
    code_bytes: int | None  #: None: unknown (no compiler)
    constant_bytes: int
    data_bytes: int = 0
    bss_bytes: int = 0
    #: Per symbol: (kind, bytes), kind "code", "constants", "data" or "bss".
    symbols: dict[str, tuple[str, int]] = field(default_factory=dict)
    #: Which figures are estimates, in words (empty when everything is measured).
    estimates: list[str] = field(default_factory=list)

    def layer_bytes(self, layer: Layer) -> tuple[int | None, int | None]:
        """(code, constants) of one layer: its function and the arrays named after it."""
        if layer.function is None:
            return 0, 0
        if not self.measured:
            return None, None
        code = self.symbols.get(layer.function, ("code", 0))[1]
        prefix = layer.function + "_"
        const = sum(n for sym, (kind, n) in self.symbols.items()
                    if kind == "constants" and sym.startswith(prefix))
        return code, const

    def shared_code_bytes(self, layers: list[Layer]) -> int | None:
        """Code outside the layers' functions: the entry point and the shared helpers."""
        if self.code_bytes is None:
            return None
        own = {la.function for la in layers if la.function}
        return sum(n for sym, (kind, n) in self.symbols.items() if kind == "code"
                   and sym not in own)

    def to_json(self) -> dict[str, Any]:
        return {"measured": self.measured, "how": self.how, "code_bytes": self.code_bytes,
                "constant_bytes": self.constant_bytes, "data_bytes": self.data_bytes,
                "bss_bytes": self.bss_bytes, "estimates": list(self.estimates),
                "symbols": {k: {"kind": v[0], "bytes": v[1]} for k, v in
                            sorted(self.symbols.items())}}


@dataclass
class Fit:
    """Flash and RAM of the whole firmware against a board, from its build's memory report."""

    template: str
    board: str
    #: region ("flash", "ram") -> {"length": bytes, "used": bytes, "split": {part: bytes}}
    regions: dict[str, dict[str, Any]]
    overflow: dict[str, int]  #: region -> bytes over (empty: it fits)
    largest: dict[str, list[dict[str, Any]]]  #: region -> its three largest parts
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return not self.overflow

    def problem(self) -> str | None:
        """One line naming each overflowing region, the bytes over and its largest parts."""
        if self.fits:
            return None
        parts = []
        for region, over in self.overflow.items():
            name = "RAM" if region == "ram" else region
            length = self.regions.get(region, {}).get("length")
            top = ", ".join(f"{p['name']} {p['size']:,} B ({p['category']})"
                            for p in self.largest.get(region, [])[:3])
            parts.append(f"{name} by {over:,} bytes{f' of {length:,}' if length else ''}"
                         + (f" (largest: {top})" if top else ""))
        hints = []
        if "flash" in self.overflow:
            hints.append("pick a board with more flash, or a smaller model")
        if "ram" in self.overflow:
            hints.append("lower workspace_size_bytes, stack_size_bytes or "
                         "max_packet_size_bytes (-o) or pick a board with more RAM")
        return f"the firmware does not fit {self.board}: {'; '.join(parts)}; {'; '.join(hints)}"

    def to_json(self) -> dict[str, Any]:
        return {"template": self.template, "board": self.board, "fits": self.fits,
                "regions": self.regions, "overflow": self.overflow, "largest": self.largest,
                "options": self.options, "problem": self.problem()}


@dataclass
class Analysis:
    """Everything ``project-api analyze`` reports about one module."""

    title: str  #: the model's file name
    kind: str  #: "tflite", "mlf" (our emitter's archive) or "tvm" (an archive TVM compiled)
    module: str
    target: str  #: kernel target (or the CPU a TVM archive was compiled for)
    layers: list[Layer] | None  #: None: not known per layer (a TVM archive)
    pool_plan: PoolPlan
    inputs: list[TensorFacts]
    outputs: list[TensorFacts]
    weight_bytes: int
    state_bytes: int = 0
    sizes: Sizes | None = None
    fit: Fit | None = None
    #: Why there is no fit (no board given, a template without memory regions, no toolchain).
    fit_note: str | None = None
    unknown: list[str] = field(default_factory=list)  #: what is not known per layer, in words
    #: TVM archives: the fused operator functions metadata.json lists, with their workspace.
    operator_functions: list[dict[str, Any]] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)
    #: Extra pools a TVM archive's C declares itself (USMP), bytes.
    internal_pool_bytes: int = 0
    #: Pools a TVM archive's entry point takes from its caller (USMP): name -> bytes or None.
    external_pools: dict[str, int | None] = field(default_factory=dict)
    #: The DSP convolutions' weight layout (``emit --weights``: int8 or int16); None for an
    #: archive that does not record it (TVM's, or ours from before the option).
    weights: str | None = None

    @property
    def macs(self) -> int | None:
        return sum(la.macs for la in self.layers) if self.layers is not None else None

    @property
    def kernel_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for la in self.layers or []:
            counts[la.kernel] = counts.get(la.kernel, 0) + 1
        return counts

    def memory_regions(self) -> dict[str, dict[str, Any]]:
        """What the memory picture draws: the fit's regions, else the model's own parts."""
        if self.fit is not None:
            return self.fit.regions
        split_flash = {"model code": (self.sizes.code_bytes or 0) if self.sizes else 0,
                       "model weights": (self.sizes.constant_bytes if self.sizes
                                         else self.weight_bytes)}
        split_ram = {"model pool": self.pool_plan.size, "state": self.state_bytes}
        return {"flash": {"length": None, "used": sum(split_flash.values()),
                          "split": split_flash},
                "ram": {"length": None, "used": sum(split_ram.values()), "split": split_ram}}

    def to_json(self) -> dict[str, Any]:
        layers = None
        if self.layers is not None:
            layers = []
            for la in self.layers:
                entry = la.to_json()
                if self.sizes is not None and self.sizes.measured:
                    code, const = self.sizes.layer_bytes(la)
                    entry["code_bytes"], entry["constant_bytes_measured"] = code, const
                layers.append(entry)
        return {
            "model": self.title, "kind": self.kind, "module": self.module,
            "target": self.target, "weights": self.weights, "kernels": self.kernel_counts,
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
            "layers": layers,
            "totals": {"macs": self.macs, "weight_bytes": self.weight_bytes,
                       "pool_bytes": self.pool_plan.size,
                       "pool_lower_bound_bytes": self.pool_plan.lower_bound
                       if self.layers is not None else None,
                       "state_bytes": self.state_bytes,
                       "io_bytes": sum(_nbytes(t) for t in self.inputs + self.outputs),
                       "internal_pool_bytes": self.internal_pool_bytes,
                       "external_pools": dict(self.external_pools)},
            "pool_plan": self.pool_plan.to_json(),
            "sizes": self.sizes.to_json() if self.sizes else None,
            "fit": self.fit.to_json() if self.fit else None,
            "fit_note": self.fit_note,
            "unknown": list(self.unknown),
            "operator_functions": list(self.operator_functions),
            "comparisons": [c.to_json() for c in self.comparisons],
        }


def _nbytes(t: TensorFacts) -> int:
    from project_api.archive import dtypes

    n = 1
    for d in t.shape:
        n *= d
    return dtypes.parse(t.dtype).size_bytes(n)


# --- the model ---------------------------------------------------------------------------------


def _from_generated(gen: Any, title: str, kind: str) -> Analysis:
    from project_api.emit.layers import layers, pool_plan

    graph = gen.graph
    return Analysis(
        title=title, kind=kind, module=gen.name, target=gen.target.name,
        weights=gen.target.weights, layers=layers(gen, graph), pool_plan=pool_plan(gen, graph),
        inputs=[TensorFacts(t.name, t.dtype, tuple(t.shape)) for t in gen.inputs],
        outputs=[TensorFacts(t.name, t.dtype, tuple(t.shape)) for t in gen.outputs],
        weight_bytes=gen.constants_size_bytes,
        state_bytes=int(getattr(gen, "state_size_bytes", 0) or _variable_bytes(graph)))


def _variable_bytes(graph: Any) -> int:
    """Bytes of the variable tensors the operators use (the model's state)."""
    used = {t for op in graph.operators for t in (*op.inputs, *op.outputs) if t >= 0}
    return sum(graph.tensor(t).size_bytes for t in used if graph.tensor(t).is_variable)


def _from_mlf(lib: Any, module: str | None, title: str) -> Analysis:
    mod = lib.module(module)
    meta = lib.metadata if isinstance(lib.metadata, dict) else {}
    # MLF 7 keeps modules in a map; 5 and 6 are one module at the top level.
    entry = ((meta.get("modules") or {}).get(mod.name) if "modules" in meta else meta) or {}
    facts = [TensorFacts(t.name, t.dtype, tuple(t.shape or ())) for t in mod.inputs]
    out_facts = [TensorFacts(t.name, t.dtype, tuple(t.shape or ())) for t in mod.outputs]
    comparisons = [c for provider in COMPARISONS for c in provider(mod)]
    state = int(entry.get("state_size_bytes") or getattr(mod, "state_size_bytes", 0) or 0)
    if isinstance(entry.get("layers"), list) and isinstance(entry.get("pool_plan"), dict):
        return Analysis(
            title=title, kind="mlf", module=mod.name,
            target=str(entry.get("kernel_target") or mod.target_cpu or "generic"),
            weights=str(entry["weights"]) if entry.get("weights") else None,
            layers=[Layer.from_json(x) for x in entry["layers"]],
            pool_plan=PoolPlan.from_json(entry["pool_plan"]), inputs=facts, outputs=out_facts,
            weight_bytes=int(mod.constants_size_bytes or 0), state_bytes=state,
            comparisons=comparisons)
    functions = []
    memory = entry.get("memory") if isinstance(entry.get("memory"), dict) else {}
    for f in (memory.get("functions") or {}).get("operator_functions") or []:
        if not isinstance(f, dict):
            continue
        ws = sum(int(w.get("workspace_size_bytes", 0) or 0) for w in f.get("workspace") or []
                 if isinstance(w, dict))
        functions.append({"function": str(f.get("function_name", "?")), "workspace_bytes": ws})
    unknown = [
        "per layer: the operators TVM fused and their shapes, MACs and weights (metadata.json "
        "records no layers; TVM's fused functions are listed with their workspace where it "
        "records them)",
        "the planner's lower bound (TVM records its pool sizes, not the tensors' lifetimes)",
    ]
    return Analysis(
        title=title, kind="tvm", module=mod.name,
        target=mod.target_cpu or mod.target_family or "portable C",
        layers=None, pool_plan=PoolPlan(int(mod.workspace_size_bytes or 0), 0),
        inputs=facts, outputs=out_facts, weight_bytes=int(mod.constants_size_bytes or 0),
        state_bytes=state, unknown=unknown, operator_functions=functions,
        comparisons=comparisons, internal_pool_bytes=int(mod.internal_workspace_bytes or 0),
        external_pools=dict(mod.external_pools or {}))


# --- measuring -----------------------------------------------------------------------------------


def _compiler_for(cpu: str | None) -> tuple[list[str], str] | None:
    """(compiler argv prefix, size tool) for ``cpu`` (a Cortex-M name), or the host's for None;
    None when that toolchain is not installed."""
    if cpu is None:
        cc = shlex.split(os.environ.get("CC") or "cc")
        if shutil.which(cc[0]) is None or shutil.which("size") is None:
            return None
        return cc, "size"
    if shutil.which(ARM_CC) is None or shutil.which(ARM_SIZE) is None:
        return None
    return [ARM_CC, f"-mcpu={cpu}", "-mthumb"], ARM_SIZE


_SECTION = re.compile(r"^\.(text|rodata|data|bss)(?:\.(\S+))?\s+(\d+)")
_KIND = {"text": "code", "rodata": "constants", "data": "data", "bss": "bss"}


def measure_sizes(sources: list[Path], include_dirs: list[Path], cpu: str | None,
                  constant_estimate: int, float_abi: tuple[str, ...] = ()) -> Sizes:
    """Compile ``sources`` for ``cpu`` (None: this computer) and sum their sections per symbol;
    without the toolchain, the constants are ``constant_estimate`` (the emitter's arrays) and
    the code is unknown, both marked as estimates."""
    from project_api.system.paths import crt_dir

    tools = _compiler_for(cpu)
    target = cpu or "this computer"
    if tools is None:
        need = ARM_CC if cpu else "a C compiler (cc) and size"
        return Sizes(False, f"not compiled: {need} is not installed", None, constant_estimate,
                     estimates=[f"code: unknown without {need} for {target}",
                                "constants: the emitter's arrays, before the compiler's "
                                "alignment"])
    cc, size_tool = tools
    flags = [*cc, *float_abi, *MEASURE_CFLAGS, f"-I{crt_dir() / 'include'}",
             *[f"-I{d}" for d in include_dirs]]
    symbols: dict[str, tuple[str, int]] = {}
    totals = {"code": 0, "constants": 0, "data": 0, "bss": 0}
    with tempfile.TemporaryDirectory(prefix="project-api-analyze-") as tmp:
        for k, src in enumerate(sources):
            obj = Path(tmp) / f"{k}.o"
            proc = subprocess.run([*flags, "-c", str(src), "-o", str(obj)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                first = next((line for line in proc.stderr.splitlines() if "error" in line),
                             proc.stderr.strip()[:200])
                raise ProjectError(f"compiling {src.name} for {target} to measure it failed: "
                                   f"{first}; analyze with --no-compile to skip measuring")
            out = subprocess.run([size_tool, "-A", str(obj)], capture_output=True, text=True)
            for line in out.stdout.splitlines():
                m = _SECTION.match(line)
                if m is None or not int(m.group(3)):
                    continue
                kind = _KIND[m.group(1)]
                if m.group(1) == "rodata" and m.group(2) and m.group(2).startswith("str"):
                    kind = "constants"
                name = m.group(2) or f"{src.stem}.{m.group(1)}"
                prev = symbols.get(name, (kind, 0))[1]
                symbols[name] = (kind, prev + int(m.group(3)))
                totals[kind] += int(m.group(3))
    how = " ".join([Path(cc[0]).name, *cc[1:], *float_abi, "-Os", "-ffunction-sections",
                    "-fdata-sections"])
    version = _version(cc[0])
    return Sizes(True, f"{how} ({version})" if version else how, totals["code"],
                 totals["constants"], totals["data"], totals["bss"], symbols)


def _version(cc: str) -> str:
    try:
        proc = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout.splitlines()[0].strip() if proc.returncode == 0 and proc.stdout else ""


def _sizes_from_report(report: Any, layers: list[Layer] | None, how: str) -> Sizes:
    """Per-symbol model sizes from a firmware's memory report (its map file)."""
    symbols: dict[str, tuple[str, int]] = {}
    for p in report.parts:
        if p.category == "model code":
            symbols[p.name] = ("code", symbols.get(p.name, ("code", 0))[1] + p.size)
        elif p.category == "model weights":
            symbols[p.name] = ("constants", symbols.get(p.name, ("constants", 0))[1] + p.size)
    return Sizes(True, how, report.flash.get("model code", 0),
                 report.flash.get("model weights", 0), symbols=symbols)


# --- the fit -------------------------------------------------------------------------------------


def _board_regions(project_dir: Path, board: str) -> dict[str, int]:
    """Lengths of the board's flash and RAM from the project's boards.yaml (``memory``)."""
    import yaml

    path = project_dir / "boards.yaml"
    if not path.is_file():
        return {}
    entry = ((yaml.safe_load(path.read_text()) or {}).get("boards") or {}).get(board) or {}
    memory = entry.get("memory") or {}
    return {region: int(memory[region]["length"]) for region in ("flash", "ram")
            if isinstance(memory.get(region), dict) and "length" in memory[region]}


def _fit(archive: Path, template: str, options: Mapping[str, Any], layers: list[Layer] | None,
         progress: Callable[[str], None]) -> tuple[Fit | None, Sizes | None, str | None]:
    """Generate and build ``archive`` for ``template`` in a temporary folder; the fit from the
    build's memory report (None with the reason when the template writes none)."""
    import json

    from project_api.api.project import generate_project, resolve_template
    from project_api.template import memory

    template_dir = resolve_template(template)
    with tempfile.TemporaryDirectory(prefix="project-api-analyze-") as tmp:
        prj = Path(tmp) / "project"
        progress(f"generating and building a {template} project to measure the firmware")
        given = dict(options)
        failure: ProjectAPIError | None = None
        with generate_project(template_dir, archive, prj, given) as project:
            full = dict(project.options)
            platform = project.platform_name
            try:
                project.build()
            except ProjectAPIError as exc:
                failure = exc
        build = prj / "build"
        report_path = build / "memory.json"
        board = str(full.get("board") or platform)
        if not report_path.is_file():
            if failure is not None:
                text = " ".join(str(failure).split())
                return None, None, f"not checked: the {template} build failed ({text[:300]})"
            return None, None, (f"not checked: the {template} template writes no memory report "
                                "(it has no memory regions to fit)")
        saved = json.loads(report_path.read_text())
        report = memory.parse_map(build / "firmware.map")
        lengths = _board_regions(prj, board)
        regions = {region: {"length": lengths.get(region), "used": sum(saved[region].values()),
                            "split": dict(saved[region])} for region in ("flash", "ram")}
        overflow = {k.lower(): int(v) for k, v in (saved.get("overflow") or {}).items()}
        largest = {region: [{"name": p.name, "size": p.size, "category": p.category,
                             "object": p.obj} for p in report.largest(region)]
                   for region in ("flash", "ram")}
        if failure is not None and not overflow:
            raise failure
        keep = {k: full[k] for k in ("board", "project_type", "workspace_size_bytes",
                                     "stack_size_bytes", "max_packet_size_bytes", "opt_level")
                if k in full}
        fit = Fit(template, board, regions, overflow, largest, keep)
        how = (f"the {template} build for {board} (-O{full.get('opt_level', 's')}, "
               f"its memory report)")
        return fit, _sizes_from_report(report, layers, how), None


# --- the entry point -----------------------------------------------------------------------------


def _template_cpu(template: str, board: str | None) -> str | None:
    from project_api.api.project import resolve_template
    from project_api.template.targets import board_cpu

    return board_cpu(resolve_template(template), board)


def _default_board(template: str) -> str | None:
    from project_api.api.project import TemplateProject, resolve_template

    with TemplateProject.from_directory(resolve_template(template)) as tpl:
        return next((o.get("default") for o in tpl.project_options if o["name"] == "board"),
                    None)


def analyze(model: str | Path, *, target: str | None = None, weights: str | None = None,
            template: str | None = None,
            options: Mapping[str, Any] | None = None, module: str | None = None,
            compile: bool = True, progress: Callable[[str], None] | None = None) -> Analysis:
    """Analyze ``model`` (a ``.tflite`` or an MLF archive); see the module docstring.

    ``target``: the kernel target of a ``.tflite`` (default: the board's CPU with ``template``,
    else generic); ``weights``: its DSP convolutions' weight layout, ``int8`` (default) or
    ``int16`` (``emit --weights``). ``template``/``options``: check the fit against that template's board
    (``options["board"]``, else its default). ``compile=False`` measures nothing (every size
    is then an estimate, and there is no fit)."""
    from project_api.archive import mlf
    from project_api.emit import emit_sources
    from project_api.emit.mlf_writer import write_mlf
    from project_api.emit.target import for_cpu, resolve, with_weights

    say = progress or (lambda _m: None)
    path = Path(model)
    if not path.is_file():
        raise ProjectError(f"model {path} does not exist or is not a file; pass a .tflite or an "
                           "MLF .tar")
    opts = dict(options or {})
    board = opts.get("board")
    if template is not None and board is None:
        board = _default_board(template)
    cpu = _template_cpu(template, board) if template else None
    with tempfile.TemporaryDirectory(prefix="project-api-analyze-") as tmp:
        archive = path
        is_tflite = path.suffix == ".tflite" or _is_tflite(path)
        if is_tflite:
            kernels = with_weights(resolve(target) if target is not None else for_cpu(cpu),
                                   weights)
            gen = emit_sources(path.read_bytes(), target=kernels)
            analysis = _from_generated(gen, path.name, "tflite")
            archive = write_mlf(gen, Path(tmp) / "model.tar")
            sources, includes = None, None
        else:
            if target is not None:
                raise ProjectError(f"--target {target}: {path.name} is an MLF archive, whose "
                                   "kernels are already compiled; --target goes with a .tflite")
            if weights is not None:
                raise ProjectError(f"--weights {weights}: {path.name} is an MLF archive, whose "
                                   "weights are already laid out; --weights goes with a .tflite")
            with mlf.open_mlf(path) as lib:
                analysis = _from_mlf(lib, module, path.name)
                mod = lib.module(module)
                sources = [Path(tmp) / "src" / p.name for p in mod.sources]
                (Path(tmp) / "src").mkdir()
                for p, dest in zip(mod.sources, sources, strict=True):
                    shutil.copy2(p, dest)
                inc = lib.root / "codegen" / "host" / "include"
                includes = [Path(tmp) / "include"]
                if inc.is_dir():
                    shutil.copytree(inc, includes[0])
                else:
                    includes[0].mkdir()
                mcpu = mod.target_cpu
            if cpu is None and mcpu:
                cpu = mcpu
        if not compile:
            analysis.sizes = Sizes(False, "not compiled (--no-compile)", None,
                                   analysis.weight_bytes,
                                   estimates=["code: not measured (--no-compile)",
                                              "constants: the emitter's arrays, before the "
                                              "compiler's alignment"])
            analysis.fit_note = "not checked (--no-compile)" if template else None
            return analysis
        if template is not None:
            if _compiler_for(cpu) is None and cpu is not None:
                analysis.fit_note = (f"not checked: {ARM_CC} is not installed (install "
                                     "gcc-arm-none-eabi)")
            else:
                fit, sizes, note = _fit(Path(archive), template, opts, analysis.layers, say)
                analysis.fit, analysis.fit_note = fit, note
                if sizes is not None:
                    analysis.sizes = sizes
                    return analysis
        if cpu is None and is_tflite:
            cpu = _target_cpu(analysis.target)
        say(f"compiling the model's C for {cpu or 'this computer'} to measure it")
        if is_tflite:
            sources, includes = _write_sources(gen, Path(tmp))
        analysis.sizes = measure_sizes(sources or [], includes or [], cpu, analysis.weight_bytes,
                                       _float_flags(cpu))
    return analysis


def _is_tflite(path: Path) -> bool:
    """A TFLite flatbuffer: its file identifier ``TFL3`` at bytes 4..8."""
    try:
        with open(path, "rb") as f:
            return f.read(8)[4:8] == b"TFL3"
    except OSError:
        return False


def _target_cpu(target: str) -> str | None:
    """The CPU a kernel target's code is measured for (generic: this computer)."""
    from project_api.emit.machines import CORE_OF_TARGET

    return target if target in CORE_OF_TARGET else None


def _float_flags(cpu: str | None) -> tuple[str, ...]:
    """The float flags of the CPU's machine (:mod:`project_api.emit.machines`): hard float
    where it has an FPU, the boards' usual build."""
    from project_api.emit.machines import CORE_OF_TARGET, machine

    if cpu not in CORE_OF_TARGET:
        return ()
    return tuple(f for f in machine(cpu).cflags if f.startswith(("-mfloat-abi", "-mfpu")))


def _write_sources(gen: Any, where: Path) -> tuple[list[Path], list[Path]]:
    src, inc = where / "gen_src", where / "gen_include"
    src.mkdir()
    inc.mkdir()
    (inc / f"tvmgen_{gen.name}.h").write_text(gen.header)
    lib = src / f"{gen.name}_lib0.c"
    lib.write_text(gen.source)
    return [lib], [inc]

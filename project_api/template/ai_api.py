"""The ``ai_`` standalone API (X-CUBE-AI style ``ai_create`` / ``ai_run``) generated from MLFs.

Any template with a standalone project type uses this module: :func:`prepare` extracts the
extra archives beside the project's own ``model/``, renames a module whose name another archive
already took (its C is rewritten from ``tvmgen_<old>`` to ``tvmgen_<new>`` before anything is
compiled, so two ``default`` modules link together), and builds the contexts;
:func:`write_sources` renders ``model_glue.c`` (one ``TVMCrtAotModel`` per module) and the ai_
files from ``jinja/ai_*.j2``:

* ``ai_runtime.h`` / ``ai_runtime.c``: the API, no heap; the model workspace is served from the
  pool the application passes to ``ai_create`` (``TVMCrtWorkspace_Init`` before each run);
* ``ai_models.h`` / ``ai_models.c``: one const ``ai_model_info`` per model (names, version,
  sizes, per-tensor or per-channel quantization) and the table the model iterator walks;
* ``ai_sample.h`` / ``ai_sample.c``: activation pools (shared or one per model) and known
  inputs drawn from a seed (:func:`sample_input`), for a sample ``main``.

Only the backend C library (``crt/libraries.txt``, project type ``standalone``) is needed.
"""

from __future__ import annotations

import json
import logging
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from project_api import mlf
from project_api.errors import OptionValueError, ServerError
from project_api.template import glue, graph_lowering, quoting
from project_api.template.options import option

_LOG = logging.getLogger(__name__)

#: ai_runtime.h knobs.
MAX_NETWORKS = 8
ERROR_BYTES = 160
#: Alignment of pools and of the backend's blocks (TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES).
ALIGNMENT = 16
#: Per TVMBackendAllocWorkspace call site: block rounding (up to 15 bytes) + the 4-byte LIFO tag.
PER_ALLOCATION_BYTES = ALIGNMENT - 1 + 4
#: The generated C files of the API, relative to the project.
AI_DIR = "src/ai"
AI_SOURCES = (f"{AI_DIR}/ai_runtime.c", f"{AI_DIR}/ai_models.c", f"{AI_DIR}/ai_sample.c")


@dataclass
class AiProject:
    """The models of a standalone firmware."""

    modules: list[dict[str, Any]]  #: model glue contexts (glue.module_context)
    models: list[dict[str, Any]]  #: ai_ contexts, same order
    model_dirs: list[str]  #: project-relative folders holding each archive's codegen/
    shared_pool: bool = False
    seed: int = 0
    renamed: dict[str, str] = field(default_factory=dict)  #: "archive:old" -> new name

    @property
    def max_activations(self) -> int:
        return max(m["activations_size"] for m in self.models)

    @property
    def pools_size(self) -> int:
        """Bytes of every activation pool the sample application declares."""
        if self.shared_pool:
            return self.max_activations
        return sum(m["activations_size"] for m in self.models)

    #: The lowered graph models' source, when a model is a graph (graph_lowering).
    graph_sources: list[str] = field(default_factory=list)

    @property
    def sources(self) -> list[str]:
        return ["src/model_glue.c", *self.graph_sources, *AI_SOURCES]


def activations_bytes(workspace_bytes: int, allocation_sites: int) -> int:
    """The pool a model needs: its workspace plus, per TVMBackendAllocWorkspace call site, the
    stack allocator's rounding and tag, rounded up to :data:`ALIGNMENT` (at least one block)."""
    if workspace_bytes <= 0:
        return ALIGNMENT
    total = workspace_bytes + max(1, allocation_sites) * PER_ALLOCATION_BYTES
    return (total + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def sample_input(seed: int, model_index: int, input_index: int, dtype: str,
                 shape: Sequence[int]) -> np.ndarray:
    """The known input ``input_index`` of model ``model_index`` for ``seed`` (what the firmware
    embeds): uniform over the integer type's range, or over [-1, 1) for floats."""
    rng = np.random.default_rng([seed, model_index, input_index])
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return rng.uniform(-1.0, 1.0, size=tuple(shape)).astype(dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = (max(info.min, -1000), min(info.max, 1000)) if dt.itemsize > 2 else \
            (info.min, info.max)
        return rng.integers(lo, hi, size=tuple(shape), endpoint=True).astype(dt)
    raise ServerError(message=f"no sample input for dtype {dtype}")


def _fail(message: str) -> ServerError:
    return ServerError(message=message)


def _module_names(root: Path, archive: str) -> list[str]:
    meta = json.loads((root / "metadata.json").read_text())
    modules = meta.get("modules")
    if isinstance(modules, dict):
        return list(modules)
    name = meta.get("model_name")
    if not isinstance(name, str):
        raise _fail(f"{archive}: metadata.json names no module")
    return [name]


def rename_module(root: Path, old: str, new: str, archive: str) -> None:
    """Rename module ``old`` of the extracted archive at ``root`` to ``new`` in place: its
    metadata entry, its files (``<old>_*.c``, ``tvmgen_<old>.h``, ``<old>.graph``) and every
    ``tvmgen_<old>`` / ``TVMGEN_<OLD>`` identifier in its C and graph JSON, so its symbols no
    longer clash with another module."""
    meta_path = root / "metadata.json"
    meta = json.loads(meta_path.read_text())
    if isinstance(meta.get("modules"), dict):
        meta["modules"] = {(new if k == old else k): v for k, v in meta["modules"].items()}
        meta["modules"][new]["model_name"] = new
    else:
        meta["model_name"] = new
    codegen = root / "codegen" / "host"
    single = len(_module_names(root, archive)) == 1
    if (codegen / "lib").is_dir() and any(
            p.suffix == ".o" and (single or p.name.startswith(f"{old}_"))
            for p in (codegen / "lib").iterdir()):
        raise _fail(
            f"{archive}: module {old!r} clashes with a module of the same name in another archive "
            f"and ships prebuilt objects that cannot be renamed; emit it again with another name "
            f"(e.g. 'project-api emit --name {new}' or emit(..., name={new!r}))"
        )
    lo_old, lo_new = mlf.sanitize_c_name(old).lower(), mlf.sanitize_c_name(new).lower()
    pattern = re.compile(rf"\b(tvmgen|TVMGEN)_({re.escape(lo_old)}|{re.escape(lo_old.upper())})"
                         r"(?=_|\b|\.h)")

    def sub(m: re.Match[str]) -> str:
        return f"{m.group(1)}_{lo_new if m.group(1) == 'tvmgen' else lo_new.upper()}"

    files = [p for d in ("src", "include") if (codegen / d).is_dir()
             for p in sorted((codegen / d).iterdir()) if p.suffix in (".c", ".h", ".cc")]
    for path in files:
        if not single and not (path.name.startswith(f"{old}_") or
                               path.name == f"tvmgen_{lo_old}.h"):
            continue
        path.write_text(pattern.sub(sub, path.read_text(errors="replace")))
        name = path.name
        if name == f"tvmgen_{lo_old}.h":
            path.rename(path.with_name(f"tvmgen_{lo_new}.h"))
        elif name.startswith(f"{old}_"):
            path.rename(path.with_name(new + name[len(old):]))
    graph_dir = root / "executor-config" / "graph"
    for graph in ([graph_dir / f"{old}.graph"] + ([graph_dir / "graph.json"] if single else [])):
        if graph.is_file():  # a graph module's function names carry its name too
            graph.write_text(pattern.sub(sub, graph.read_text(errors="replace")))
    for extra in (root / "parameters" / f"{old}.params", root / "src" / f"{old}.relay",
                  graph_dir / f"{old}.graph"):
        if extra.is_file():
            extra.rename(extra.with_name(new + extra.name[len(old):]))
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def _float_literal(value: float) -> str:
    f = np.float32(value)
    if not np.isfinite(f):
        raise _fail(f"quantization scale {value!r} is not a finite number")
    return f"{float(f):.9g}f" if "e" in f"{float(f):.9g}" or "." in f"{float(f):.9g}" \
        else f"{float(f):.9g}.0f"


def quant_context(quant: dict[str, Any] | None, shape: Sequence[int],
                  where: str) -> dict[str, Any] | None:
    """The C view of a metadata.json ``quantization``: scales, zero points and the channel axis
    (``axis`` or ``quantized_dimension``; -1 for one scale per tensor)."""
    if not quant:
        return None
    scale, zero = list(quant["scale"]), [int(z) for z in quant["zero_point"]]
    if len(scale) != len(zero) or not scale:
        raise _fail(f"{where}: quantization has {len(scale)} scales and {len(zero)} zero points")
    if len(scale) == 1:
        axis = -1
    else:
        axis = int(quant.get("axis", quant.get("quantized_dimension", -1)))
        if axis < 0:
            axis += len(shape)
        if not 0 <= axis < len(shape) or shape[axis] != len(scale):
            raise _fail(f"{where}: {len(scale)} per-channel scales do not match axis "
                        f"{quant.get('axis', quant.get('quantized_dimension'))} of shape "
                        f"{list(shape)}")
    return {"axis": axis, "scale": scale, "zero_point": zero,
            "scale_literals": [_float_literal(s) for s in scale]}


def _hex_rows(data: bytes) -> list[str]:
    rows = [", ".join(f"0x{b:02x}" for b in data[i:i + 16]) + ","
            for i in range(0, len(data), 16)]
    return rows or ["0x00,"]


def prepare(project_dir: Path, extra_archives: Iterable[str | Path], platform: str,
            shared_pool: bool = False, seed: int = 0) -> AiProject:
    """Extract ``extra_archives`` under ``extra_models/<k>/`` of the project (whose own archive
    is in ``model/``), rename clashing modules, and gather every module's contexts."""
    roots: list[tuple[Path, str, str]] = [(project_dir / "model", "model", "model.tar")]
    own = project_dir / "model.tar"
    seen = {_digest(own): "the project's own model"} if own.is_file() else {}
    for k, raw in enumerate(extra_archives, 1):
        src = Path(raw).expanduser()
        _check_extra_archive(src, str(raw))
        digest = _digest(src)
        if digest in seen:
            raise _fail(f"extra_models: {raw} is the same archive as {seen[digest]}; each model "
                        "goes into the firmware once (its weights would be in flash twice): "
                        "drop the repeat")
        seen[digest] = str(raw)
        rel = f"extra_models/{k}"
        dest = project_dir / rel
        dest.mkdir(parents=True)
        try:
            mlf.safe_extract(src, dest / "model")
            mlf.open_mlf(dest / "model")  # the same checks as the project's own archive
        except mlf.MLFError as exc:  # named after the user's file, not the copy being made
            text = " ".join(str(exc).replace(str(dest / "model"), str(raw)).split())
            fix = "" if ";" in text else ("; pass a Model Library Format .tar (from TVM or "
                                          "'project-api emit')")
            raise _fail(f"extra_models: {text}{fix}") from None
        shutil.copy2(src, dest / "model.tar")
        glue.check_build_files(dest / "model", src.name)
        roots.append((dest / "model", f"{rel}/model", src.name))
    project = AiProject([], [], [], shared_pool=shared_pool, seed=seed)
    taken: set[str] = set()
    for root, rel, archive in roots:
        original: dict[str, str] = {}  # final name -> name in the archive
        for name in _module_names(root, archive):
            first = name
            if name in taken or mlf.sanitize_c_name(name).lower() in {
                    mlf.sanitize_c_name(t).lower() for t in taken}:
                k = 1
                while f"{name}_{k}" in taken:
                    k += 1
                rename_module(root, name, f"{name}_{k}", archive)
                project.renamed[f"{archive}:{name}"] = f"{name}_{k}"
                _LOG.info("%s: module %r renamed %r (another archive has a module %r)", archive,
                          name, f"{name}_{k}", name)
                name = f"{name}_{k}"
            taken.add(name)
            original[name] = first
        library = mlf.open_mlf(root)
        meta = library.metadata
        for mod in library.modules.values():
            ctx = glue.module_context(mod, platform)
            entry = (meta.get("modules") or {}).get(mod.name, {})
            stamp = entry.get("export_datetime", meta.get("export_datetime"))
            version = f"mlf-{meta.get('version', '?')}" + (f" {stamp}" if stamp else "")
            project.modules.append(ctx)
            project.models.append(_model_context(mod, ctx, original.get(mod.name, mod.name),
                                                 archive, version, len(project.models), seed))
        project.model_dirs.append(rel)
    idents = [m["cident"] for m in project.models]
    if len(set(idents)) != len(idents):
        raise _fail(f"module names {[m['name'] for m in project.models]} give the same C "
                    "identifier twice; emit one of them with another name")
    return project


def _check_extra_archive(src: Path, raw: str) -> None:
    """ServerError naming ``raw`` when it is no file, or a TFLite model rather than an MLF."""
    if not src.is_file():
        what = "is a directory" if src.is_dir() else "does not exist"
        raise _fail(f"extra_models: {raw} {what}; pass MLF .tar archives, separated by commas")
    with open(src, "rb") as f:
        head = f.read(8)
    if len(head) == 8 and head[4:8] == b"TFL3":
        raise _fail(f"extra_models: {raw} is a TFLite model, not a Model Library Format archive; "
                    f"emit it first ('project-api emit {raw} --out {src.with_suffix('.tar').name}"
                    f" --name {src.stem}') and pass the .tar")


def _digest(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _model_context(mod: Any, ctx: dict[str, Any], source_name: str, archive: str,
                   version: str, index: int, seed: int) -> dict[str, Any]:
    """The ai_ context of one module (see ai_models.c.j2)."""
    where = f"module {mod.name!r} of {archive}"
    sites = sum(p.read_text(errors="replace").count("TVMBackendAllocWorkspace(")
                for p in mod.sources)
    workspace = ctx["workspace_size_bytes"]
    inputs = []
    for i, (t, c) in enumerate(zip(mod.inputs, ctx["inputs"], strict=True)):
        data = sample_input(seed, index, i, t.dtype, t.shape).tobytes()
        inputs.append({**c, "quant": quant_context(t.quantization, t.shape, f"{where}, input "
                                                   f"{t.name!r}"), "sample_rows": _hex_rows(data)})
    outputs = [{**c, "quant": quant_context(t.quantization, t.shape,
                                            f"{where}, output {t.name!r}")}
               for t, c in zip(mod.outputs, ctx["outputs"], strict=True)]
    cident = quoting.c_identifier(mod.name).lower()
    return {
        "name": mod.name, "source_name": source_name, "archive": archive,
        "version": version, "cident": cident,
        "macro": cident.upper(), "inputs": inputs, "outputs": outputs,
        "workspace_size_bytes": workspace, "weights_size": int(mod.constants_size_bytes or 0),
        "activations_size": activations_bytes(workspace, sites),
    }


def write_sources(env: quoting.Environments, project_dir: Path, ai: AiProject) -> None:
    """Render ``src/model_glue.c`` and the ai_ files of :data:`AI_DIR` into the project."""
    out = project_dir / AI_DIR
    out.mkdir(parents=True, exist_ok=True)
    (project_dir / "src" / "model_glue.c").write_text(glue.render_model_glue(env, ai.modules))
    ai.graph_sources = graph_lowering.write_sources(env, project_dir, ai.modules)
    values = {
        "models": ai.models, "max_networks": max(MAX_NETWORKS, 2 * len(ai.models)),
        "max_io": max(max(len(m["inputs"]), len(m["outputs"])) for m in ai.models),
        "error_bytes": ERROR_BYTES, "max_activations": ai.max_activations,
        "shared_pool": ai.shared_pool, "seed": ai.seed, "pools_size": ai.pools_size,
    }
    for name in ("ai_runtime.h", "ai_runtime.c", "ai_models.h", "ai_models.c", "ai_sample.h",
                 "ai_sample.c"):
        (out / name).write_text(env.get_template(f"{name}.j2").render(values))


def generate(project: Any, extra_models: str | None, shared_pool: bool, seed: int) -> AiProject:
    """Everything a template's ``render`` needs for a standalone project: ``extra_models`` is the
    option's comma-separated archive list; ``project`` a :class:`~.handler.NewProject`."""
    extra = [p.strip() for p in (extra_models or "").split(",") if p.strip()]
    ai = prepare(project.dir, extra, project.platform, shared_pool=shared_pool, seed=seed)
    write_sources(project.env, project.dir, ai)
    _LOG.info("standalone firmware of %d models (%s pool%s, %d bytes)", len(ai.models),
              "one shared" if shared_pool else "one per model", "" if shared_pool else "s",
              ai.pools_size)
    return ai


#: MLPerf Tiny model versions (the benchmark's EE_MODEL_VERSION_*) and how each is scored.
MLPERFTINY_MODELS = {"kws01": "vector", "vww01": "vector", "ic01": "vector",
                     "ad01": "reconstruction"}
#: The ``mlperftiny_model`` option, declared once for every template with project type
#: mlperftiny (add it to the handler's OPTIONS).
#: The options of a standalone (ai_ API) project, for a template's ``OPTIONS``.
STANDALONE_OPTIONS = [
    option("extra_models", "str", optional=["generate_project"],
           help="standalone: more MLF archives in the firmware, comma-separated paths."),
    option("shared_pool", "bool", default=False, optional=["generate_project"],
           help="standalone: one activation pool sized to the largest model."),
    option("sample_seed", "int", default=0, minimum=0, maximum=(1 << 31) - 1,
           optional=["generate_project"], help="standalone: seed of the known inputs."),
]



def write_model_sources(project: Any) -> tuple[list[str], list[str]]:
    """The model's side of a firmware for ``project``'s ``project_type``: standalone, the ai_ API
    (:func:`generate`); otherwise the model glue and, for mlperftiny, the benchmark's model file.
    Returns the generated C sources and the model folders their code is in."""
    opts = project.options
    if opts["project_type"] == "standalone":
        ai = generate(project, opts["extra_models"], opts["shared_pool"], opts["sample_seed"])
        return list(ai.sources), list(ai.model_dirs)
    sources = project.write_model_glue()
    if opts["project_type"] == "mlperftiny":
        write_mlperftiny_model(project, opts["mlperftiny_model"])
        return [*sources, "src/mlperftiny_model.c"], ["model"]
    return sources, ["model"]


def check_standalone_options(options: Mapping[str, Any]) -> None:
    """ServerError when a project that is not standalone is given standalone-only options."""
    if options.get("project_type") != "standalone" and (options.get("extra_models")
                                                        or options.get("shared_pool")):
        raise OptionValueError("extra_models and shared_pool need project_type=standalone; "
                               "add -o project_type=standalone or drop them")


MLPERFTINY_MODEL_OPTION = option(
    "mlperftiny_model", "str", choices=list(MLPERFTINY_MODELS), optional=["generate_project"],
    help="mlperftiny: the benchmark's model (default: guessed from the outputs).")
#: Models whose data sets hold uint8 pixels that an int8 model takes less 128 (the benchmark's
#: reference firmware does so).
MLPERFTINY_UINT8_IMAGES = ("vww01", "ic01")
#: Output sizes that name a model version when the option does not.
_MLPERFTINY_BY_OUTPUTS = {12: "kws01", 2: "vww01", 10: "ic01"}


def mlperftiny_version(mod: Any, version: str | None) -> str:
    """The benchmark's model version of ``mod``: ``version`` if given, else guessed from the
    outputs (an output as large as the input: ad01; 12 classes: kws01; 2: vww01; 10: ic01)."""
    if version:
        return version
    in_n = int(np.prod(mod.inputs[0].shape)) if mod.inputs[0].shape else None
    out_n = int(np.prod(mod.outputs[0].shape)) if mod.outputs[0].shape else None
    if out_n is not None and out_n == in_n:
        return "ad01"
    if out_n in _MLPERFTINY_BY_OUTPUTS:
        return _MLPERFTINY_BY_OUTPUTS[out_n]
    raise _fail(f"module {mod.name!r}: cannot tell which MLPerf Tiny model this is ({out_n} "
                f"outputs); set -o mlperftiny_model={'|'.join(MLPERFTINY_MODELS)}")


def write_mlperftiny_model(project: Any, version: str | None,
                           dest: str = "src/mlperftiny_model.c") -> str:
    """Render ``src/mlperftiny_model.c`` (the ``TVMCrtMlperfTinyAotInfo`` of the project's one
    module, for ``crt/src/mlperftiny``) from the MLF's quantization; return the model version."""
    modules = list(project.library.modules.values())
    if len(modules) != 1:
        raise _fail(f"project type mlperftiny runs one model; the archive has {len(modules)} "
                    "modules")
    mod = modules[0]
    where = f"module {mod.name!r}"
    if len(mod.inputs) != 1 or len(mod.outputs) != 1:
        raise _fail(f"{where}: MLPerf Tiny models have one input and one output; this one has "
                    f"{len(mod.inputs)} and {len(mod.outputs)}")
    version = mlperftiny_version(mod, version)
    tensors = {}
    for kind, t in (("input", mod.inputs[0]), ("output", mod.outputs[0])):
        if t.dtype not in ("int8", "float32"):
            raise _fail(f"{where}, {kind} {t.name!r}: dtype {t.dtype} (MLPerf Tiny firmware "
                        "takes int8 or float32)")
        quant = quant_context(t.quantization, t.shape or (), f"{where}, {kind} {t.name!r}")
        if quant and quant["axis"] != -1:
            raise _fail(f"{where}, {kind} {t.name!r}: per-channel quantization of a model "
                        "input or output is not supported")
        tensors[kind] = {"quant": quant if t.dtype == "int8" else None,
                         "size_bytes": t.size_bytes}
    db_bytes = tensors["input"]["size_bytes"] * (4 if tensors["input"]["quant"] else 1)
    path = project.dir / dest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(project.env.get_template("mlperftiny_model.c.j2").render(
        module=mod.name, version=version, score=MLPERFTINY_MODELS[version], db_bytes=db_bytes,
        input_uint8=version in MLPERFTINY_UINT8_IMAGES and mod.inputs[0].dtype == "int8",
        input=tensors["input"], output=tensors["output"]))
    return version

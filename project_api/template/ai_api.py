"""The ``ai_`` standalone API (X-CUBE-AI style ``ai_create`` / ``ai_run``) generated from MLFs.

A project type whose ``model`` is ``ai_api`` gets it (:meth:`~.new_project.NewProject.
write_model_sources` calls :func:`generate`): :func:`prepare` extracts the extra archives beside
the project's own ``model/``, renames a module whose name another archive already took
(:func:`.symbols.rename_module`, before anything is compiled, so two ``default`` modules link
together), and builds the contexts; the model glue covers every module, and
:func:`write_sources` renders the ai_ files from ``jinja/ai_*.j2``:

* ``ai_runtime.h`` / ``ai_runtime.c``: the API, no heap; the model workspace is served from the
  pool the application passes to ``ai_create`` (``TVMCrtWorkspace_Init`` before each run);
* ``ai_models.h`` / ``ai_models.c``: one const ``ai_model_info`` per model (names, version,
  sizes, per-tensor or per-channel quantization) and the table the model iterator walks;
* ``ai_sample.h`` / ``ai_sample.c``: activation pools (shared or one per model) and known
  inputs drawn from a seed (:func:`sample_input`), for a sample ``main``.

Only the backend C library (``crt/libraries.txt``, project type ``standalone``) is needed.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from project_api.archive import mlf
from project_api.errors import OptionValueError, ServerError
from project_api.template import glue, quoting, symbols
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

    @property
    def sources(self) -> list[str]:
        return ["src/model_glue.c", *AI_SOURCES]


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
        for name in symbols.module_names(root, archive):
            first = name
            if name in taken or mlf.sanitize_c_name(name).lower() in {
                    mlf.sanitize_c_name(t).lower() for t in taken}:
                k = 1
                while f"{name}_{k}" in taken:
                    k += 1
                symbols.rename_module(root, name, f"{name}_{k}", archive)
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
        inputs.append({**c, "quant": glue.quant_context(t.quantization, t.shape, f"{where}, input "
                                                   f"{t.name!r}"), "sample_rows": _hex_rows(data)})
    outputs = [{**c, "quant": glue.quant_context(t.quantization, t.shape,
                                            f"{where}, output {t.name!r}")}
               for t, c in zip(mod.outputs, ctx["outputs"], strict=True)]
    cident = quoting.c_identifier(mod.name).lower()
    return {
        "name": mod.name, "source_name": source_name, "archive": archive,
        "version": version, "cident": cident,
        "macro": cident.upper(), "inputs": inputs, "outputs": outputs,
        "workspace_size_bytes": workspace, "weights_size": int(mod.constants_size_bytes or 0),
        "state_size": int(getattr(mod, "state_size_bytes", 0) or 0),
        "activations_size": activations_bytes(workspace, sites),
        "profile_bytes": _profile_record_bytes(mod),
    }


def _profile_record_bytes(mod: Any) -> int:
    """Bytes of a profile build's record (emit --profile), which the sample prints after each
    run; 0 for a plain build."""
    if not getattr(mod, "profile", False):
        return 0
    from project_api.template.profile_build import hook_nodes, record_bytes

    texts = [p.read_text(errors="replace") for p in mod.sources]
    return max(record_bytes(len(hook_nodes(t, mod.name))) for t in texts)


def write_sources(env: quoting.Environments, project_dir: Path, ai: AiProject) -> None:
    """Render the ai_ files of :data:`AI_DIR` into the project (the model glue of
    ``ai.modules`` is :meth:`~.new_project.NewProject.write_model_glue`'s)."""
    out = project_dir / AI_DIR
    out.mkdir(parents=True, exist_ok=True)
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


#: The options of a standalone (ai_ API) project, for a template's ``OPTIONS``.
STANDALONE_OPTIONS = [
    option("extra_models", "str", optional=["generate_project"],
           help="standalone: more MLF archives in the firmware, comma-separated paths."),
    option("shared_pool", "bool", default=False, optional=["generate_project"],
           help="standalone: one activation pool sized to the largest model."),
    option("sample_seed", "int", default=0, minimum=0, maximum=(1 << 31) - 1,
           optional=["generate_project"], help="standalone: seed of the known inputs."),
]


def check_standalone_options(options: Mapping[str, Any]) -> None:
    """OptionValueError when a project whose type has no ai_ API (not standalone) is given
    the ai_ API's options."""
    if options.get("project_type") != "standalone" and (options.get("extra_models")
                                                        or options.get("shared_pool")):
        raise OptionValueError("extra_models and shared_pool need project_type=standalone; "
                               "add -o project_type=standalone or drop them")

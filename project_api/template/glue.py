"""Model glue: the C that tells the runtime which models a firmware holds, from the MLF alone.

For each module of a Model Library Format archive, :func:`module_context` gathers what the glue
needs (entry point and its calling style, every input and output with DLPack dtype, shape and
size, the workspace), and :func:`render_model_glue` renders ``model_glue.c`` (one static
``TVMCrtAotModel`` per module plus ``TVMCrtAotModel_Lookup``; see ``crt/include/tvm/runtime/crt/
aot_model.h``). :func:`workspace_bytes` sizes the model workspace all modules share, and
:func:`render_crt_config` writes a ``crt_config.h`` holding only the knobs that differ from the
runtime's defaults (``crt/include/tvm/runtime/crt/config.h``).

What an archive names reaches C only as data: module and tensor names in C strings and comments
(:mod:`.quoting`), the entry point and the interface header's struct members as identifiers
checked against the C grammar (one line naming the header when one is not), and the files the
build compiles (:func:`check_build_files`) only when make and CMake can carry their names.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from project_api.archive import dtypes
from project_api.errors import ServerError
from project_api.system import paths
from project_api.template import graph_lowering
from project_api.template.quoting import (
    Environments,
    c_identifier,
    check_c_identifier,
    make_path_problem,
)

#: Added to the largest module workspace for the stack allocator's alignment padding and tags.
WORKSPACE_SLACK_BYTES = 1024
#: Smallest model workspace a project reserves (modules that allocate nothing still init one).
MIN_WORKSPACE_BYTES = 16


def _fail(message: str) -> ServerError:
    return ServerError(message=message)


def module_context(mod: Any, platform: str) -> dict[str, Any]:
    """What ``model_glue.c.j2`` needs about one :class:`~project_api.archive.mlf.ModuleInfo`.

    ``platform`` names the template in error messages ("the host template ...").
    """
    where = f"module {mod.name!r}"
    _check_name(mod.name, where, "its name")
    if graph_lowering.is_graph(mod):
        def graph_tensors(items: Iterable[Any], kind: str) -> list[dict[str, Any]]:
            return _tensor_contexts(items, kind, where, platform, "its graph JSON")
        return graph_lowering.module_context(mod, platform, graph_tensors)
    if "aot" not in mod.executors:
        raise _fail(
            f"{where} was built for the {'/'.join(mod.executors) or 'unknown'} executor; the "
            f"{platform} template runs AOT and graph-executor modules only: rebuild with the "
            "AOT or graph executor"
        )
    if mod.run_function is None:
        raise _fail(
            f"{where}: no entry point tvmgen_<name>_run or tvmgen_<name>_run_model in its "
            "interface header or generated C; export with the C interface API (interface-api=c)"
        )
    api = "flat" if mod.run_function.endswith("_run_model") else "struct"
    run_function = check_c_identifier(mod.run_function, f"{where}: entry point")
    prefix = check_c_identifier(mod.run_function[: -len("_run_model" if api == "flat" else "_run")],
                                f"{where}: entry point prefix")
    if api == "struct" and mod.interface_header is None:
        raise _fail(f"{where}: {mod.run_function} needs the interface header tvmgen_<name>.h")
    extra = [what for what, present in (
        ("external workspace pools " + ", ".join(getattr(mod, "external_pools", {}) or {}),
         bool(getattr(mod, "external_pools", None))),
        ("device contexts " + ", ".join(getattr(mod, "devices", []) or []),
         bool(getattr(mod, "devices", None))),
        ("inputs and outputs inside its pools", bool(getattr(mod, "io_in_pools", False))),
    ) if present]
    if extra:
        raise _fail(
            f"{where}: {mod.run_function} takes {' and '.join(extra)}, which the {platform} "
            "template does not provide; re-export without USMP external pools / devices "
            "(tir.usmp.use_workspace_io=0, no external pools)"
        )

    header = (f"codegen/host/include/{Path(mod.interface_header).name}" if mod.interface_header
              else "its generated C")

    def tensors(items: Iterable[Any], kind: str) -> list[dict[str, Any]]:
        return _tensor_contexts(items, kind, where, platform,
                                f"the member of struct {prefix}_{kind}s in {header}")

    state = int(getattr(mod, "state_size_bytes", 0) or 0)
    reset = getattr(mod, "reset_function", None) if state else None
    return {
        "name": mod.name, "prefix": prefix, "ident": "model_" + c_identifier(mod.name),
        "api": api, "run_function": run_function,
        "inputs": tensors(mod.inputs, "input"), "outputs": tensors(mod.outputs, "output"),
        "workspace_size_bytes": module_workspace_bytes(mod),
        # A profile build (emit --profile) exports <prefix>_profile_read: the glue answers
        # project_api.tools.profile with it.
        "profile_read": f"{prefix}_profile_read" if getattr(mod, "profile", False) else None,
        "state_size_bytes": state,
        "reset_function": check_c_identifier(reset, f"{where}: its reset function")
        if reset else None,
    }


def _tensor_contexts(items: Iterable[Any], kind: str, where: str, platform: str,
                     c_name_source: str) -> list[dict[str, Any]]:
    """The glue's context of each tensor: its name, C name (checked against the C grammar;
    ``c_name_source`` says where it comes from), size, shape and DLPack type."""
    out = []
    for t in items:
        what = f"{where}, {kind} {t.name!r}"
        _check_name(t.name, what, "its name")
        c_name = check_c_identifier(t.c_name, f"{what}: {c_name_source}")
        if t.shape is None:
            raise _fail(
                f"{what}: the archive records no shape; supply it with "
                f"--input-spec {t.name}:{t.dtype}:<shape, e.g. 1x49x10x1>"
            )
        try:
            dt = dtypes.parse(t.dtype)
        except dtypes.DTypeError:
            raise _fail(f"{what}: dtype {t.dtype!r} is not supported by the {platform} "
                        "template") from None
        out.append({
            "name": t.name, "c_name": c_name, "size_bytes": t.size_bytes,
            "shape": list(t.shape), "dtype_code": dt.code, "dtype_bits": dt.bits,
            "dtype_lanes": dt.lanes,
        })
    return out


def _check_name(name: str, where: str, what: str) -> None:
    """ServerError when an archive's name cannot be carried intact into the C strings that
    hold it (the device looks modules and tensors up by these names)."""
    if "\0" in name:
        raise _fail(f"{where}: {what} holds a NUL character, which a C string cannot carry; "
                    "rename it in the archive's metadata.json")


#: The folders of an archive whose every entry the build files name (make's $(wildcard ...),
#: CMake's file(GLOB ...)).
BUILD_FOLDERS = ("codegen/host/src", "codegen/host/lib")


def check_build_files(model_root: Path, archive: str) -> None:
    """ServerError naming the archive member when a file the build compiles or links (every
    entry of :data:`BUILD_FOLDERS`) has a name make and CMake cannot carry as data: a generated
    Makefile globs these folders, and a name such as ``x`touch${IFS}f`.c`` would reach the
    shell of the recipe that compiles it."""
    for folder in BUILD_FOLDERS:
        path = Path(model_root) / folder
        if not path.is_dir():
            continue
        for entry in sorted(path.iterdir()):
            problem = make_path_problem(entry.name)
            if problem is not None:
                raise _fail(f"{archive}: archive member {f'{folder}/{entry.name}'!r} {problem}; "
                            "rename it in the archive")


def module_workspace_bytes(mod: Any) -> int:
    """Bytes of workspace ``mod`` takes through TVMBackendAllocWorkspace.

    A module whose own C carries its memory pool (TVM's USMP) allocates nothing from ours, so it
    needs none, whatever ``workspace_size_bytes`` says.
    """
    if getattr(mod, "internal_workspace_bytes", 0):
        return 0
    if getattr(mod, "graph", None) is not None:
        return graph_lowering.workspace_bytes(mod)
    return int(mod.workspace_size_bytes or 0)


def workspace_bytes(modules: Iterable[Mapping[str, Any]]) -> int:
    """The model workspace a project reserves: the largest module's plus allocator slack.

    Modules run one at a time, so they share one workspace. With no module allocating anything
    the project reserves only :data:`MIN_WORKSPACE_BYTES`, not a second pool.
    """
    largest = max((m["workspace_size_bytes"] for m in modules), default=0)
    if largest == 0:
        return MIN_WORKSPACE_BYTES
    return (largest + WORKSPACE_SLACK_BYTES + 15) // 16 * 16


def render_model_glue(env: Environments, modules: list[dict[str, Any]],
                      build_hash: str | None = None) -> str:
    """``model_glue.c`` for the module contexts of :func:`module_context`; with ``build_hash``
    (hex, from :func:`compute_build_hash`) it defines ``TVMCrtAotModel_BuildHash``, which the
    device answers to the ``project_api.build_hash`` global function. When a module keeps state
    it defines ``TVMCrtAotModel_ResetState`` (``project_api.reset_state``, ``ai_reset``)."""
    if build_hash is not None and not _BUILD_HASH_RE.fullmatch(build_hash):
        raise ValueError(f"build hash {build_hash!r}: want {BUILD_HASH_DIGITS} hex digits")
    return env.get_template("model_glue.c.j2").render(modules=modules, build_hash=build_hash)


#: Where a generated project keeps the hash its firmware reports (one line of hex).
BUILD_HASH_FILE = "build_hash.txt"
#: Hex digits of the build hash: 60 bits, a positive int64 on the device.
BUILD_HASH_DIGITS = 15
_BUILD_HASH_RE = re.compile(f"[0-9a-f]{{{BUILD_HASH_DIGITS}}}")


def compute_build_hash(model_dirs: Iterable[Path], options: Mapping[str, Any],
                       template_dir: Path, platform: str) -> str:
    """A hash of what a firmware is generated from: every file of each extracted model archive
    (``model_dirs``, in order), the options (as sorted JSON) and every file of the template;
    :data:`BUILD_HASH_DIGITS` hex digits. Two projects generated alike from the same inputs get
    the same hash."""
    digest = hashlib.sha256(platform.encode() + b"\0")
    digest.update(json.dumps(dict(options), sort_keys=True, default=str).encode() + b"\0")
    for root in (*map(Path, model_dirs), Path(template_dir)):
        for path in sorted(p for p in root.rglob("*")
                           if p.is_file() and "__pycache__" not in p.parts):
            digest.update(path.relative_to(root).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:BUILD_HASH_DIGITS]


def read_build_hash(project_dir: Path) -> str | None:
    """The hash a generated project's firmware reports, or None for a project without one."""
    path = Path(project_dir) / BUILD_HASH_FILE
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return text if _BUILD_HASH_RE.fullmatch(text) else None


_DEFAULT_RE = re.compile(r"#ifndef\s+(\w+)\s*\n\s*#define\s+\1\s+(.+?)\s*\n\s*#endif")


def crt_defaults(config_header: Path | None = None) -> dict[str, str]:
    """The runtime's knob defaults, ``{macro: value text}``, read from its ``config.h``."""
    path = config_header or paths.crt_dir() / "include" / "tvm" / "runtime" / "crt" / "config.h"
    return {name: value for name, value in _DEFAULT_RE.findall(path.read_text())}


def render_crt_config(
    env: Environments,
    knobs: Mapping[str, tuple[Any, str]],
    *,
    title: str,
    config_header: Path | None = None,
) -> str:
    """``crt_config.h`` with the ``knobs`` (``{macro: (value, doc)}``) that differ from defaults.

    A knob whose value is the runtime's own default is left out, so the file lists only what
    this project changes; knobs that are not runtime knobs (the template's own) are kept.
    """
    defaults = crt_defaults(config_header)
    kept = [
        {"name": check_c_identifier(name, "crt_config.h knob"), "value": str(value), "doc": doc}
        for name, (value, doc) in knobs.items()
        if defaults.get(name) != str(value)
    ]
    return env.get_template("crt_config.h.j2").render(title=title, knobs=kept)


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

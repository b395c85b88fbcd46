"""The C symbols of an extracted Model Library Format archive: renaming a module.

Two archives whose modules share a name (two ``default`` models in one standalone firmware)
define the same ``tvmgen_<name>_*`` functions; :func:`rename_module` gives one of them a new
name before anything is compiled: its ``metadata.json`` entry, its files and every
``tvmgen_<old>`` / ``TVMGEN_<OLD>`` identifier in its C. A module name may hold any character
(``vision/kws``); the C identifier is its sanitized form (:func:`project_api.archive.mlf.sanitize_c_name`),
and files named after it may sit in a sub-folder, as the name's ``/`` makes them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from project_api.archive import mlf
from project_api.errors import ServerError

#: The suffixes of the generated code the renaming rewrites.
SOURCE_SUFFIXES = (".c", ".h", ".cc")


def module_names(root: Path, archive: str) -> list[str]:
    """The names of the modules of the extracted archive at ``root`` (``archive`` names it in
    messages)."""
    meta = json.loads((root / "metadata.json").read_text())
    modules = meta.get("modules")
    if isinstance(modules, dict):
        return list(modules)
    name = meta.get("model_name")
    if not isinstance(name, str):
        raise ServerError(message=f"{archive}: metadata.json names no module")
    return [name]


def _owned(rel: str, old: str, lo_old: str, single: bool) -> bool:
    """Whether the file at ``rel`` (relative to a codegen folder) belongs to module ``old``."""
    return single or rel.startswith(f"{old}_") or rel == f"tvmgen_{lo_old}.h"


def _renamed(rel: str, old: str, new: str, lo_old: str, lo_new: str) -> str:
    """``rel`` after the module is renamed (the same path when its name does not carry it)."""
    if rel == f"tvmgen_{lo_old}.h":
        return f"tvmgen_{lo_new}.h"
    if rel.startswith(f"{old}_"):
        return new + rel[len(old):]
    return rel


def rename_module(root: Path, old: str, new: str, archive: str) -> None:
    """Rename module ``old`` of the extracted archive at ``root`` to ``new`` in place: its
    metadata entry, its files (``<old>_*.c``, ``tvmgen_<old>.h``, ``parameters/<old>.params``,
    ``src/<old>.relay``, ``executor-config/graph/<old>.graph``) and every ``tvmgen_<old>`` /
    ``TVMGEN_<OLD>`` identifier in its C and graph JSON, so
    its symbols no longer clash with another module. ServerError when it ships prebuilt
    objects, which cannot be renamed."""
    meta_path = root / "metadata.json"
    meta = json.loads(meta_path.read_text())
    single = len(module_names(root, archive)) == 1
    if isinstance(meta.get("modules"), dict):
        meta["modules"] = {(new if k == old else k): v for k, v in meta["modules"].items()}
        meta["modules"][new]["model_name"] = new
    else:
        meta["model_name"] = new
    codegen = root / "codegen" / "host"
    lib = codegen / "lib"
    if lib.is_dir() and any(p.suffix == ".o" and (single or p.relative_to(lib).as_posix()
                                                  .startswith(f"{old}_"))
                            for p in lib.rglob("*") if p.is_file()):
        raise ServerError(message=(
            f"{archive}: module {old!r} clashes with a module of the same name in another archive "
            f"and ships prebuilt objects that cannot be renamed; emit it again with another name "
            f"(e.g. 'project-api emit --name {new}' or emit(..., name={new!r}))"))
    lo_old, lo_new = mlf.sanitize_c_name(old).lower(), mlf.sanitize_c_name(new).lower()
    pattern = re.compile(rf"\b(tvmgen|TVMGEN)_({re.escape(lo_old)}|{re.escape(lo_old.upper())})"
                         r"(?=_|\b|\.h)")

    def sub(m: re.Match[str]) -> str:
        return f"{m.group(1)}_{lo_new if m.group(1) == 'tvmgen' else lo_new.upper()}"

    for folder in (codegen / "src", codegen / "include"):
        if not folder.is_dir():
            continue
        for path in sorted(p for p in folder.rglob("*")
                           if p.is_file() and p.suffix in SOURCE_SUFFIXES):
            rel = path.relative_to(folder).as_posix()
            if not _owned(rel, old, lo_old, single):
                continue
            path.write_text(pattern.sub(sub, path.read_text(errors="replace")))
            _move(path, folder / _renamed(rel, old, new, lo_old, lo_new))
    graph_dir = root / "executor-config" / "graph"
    for graph in [graph_dir / f"{old}.graph", *([graph_dir / "graph.json"] if single else [])]:
        if graph.is_file():  # a graph module's function names carry its name too
            graph.write_text(pattern.sub(sub, graph.read_text(errors="replace")))
    for folder, suffix in ((root / "parameters", ".params"), (root / "src", ".relay"),
                           (graph_dir, ".graph")):
        _move(folder / f"{old}{suffix}", folder / f"{new}{suffix}")
    meta_path.write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def _move(src: Path, dest: Path) -> None:
    """Move file ``src`` to ``dest`` (making its folder) when it exists and the paths differ."""
    if src == dest or not src.is_file():
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    src.rename(dest)

"""The import graph of ``project_api/``, built with ``ast`` from every import statement (those
inside functions too): no circle, and every import runs down the layers, so a newcomer can
read the package bottom up.

Layers, bottom up (a module imports its own layer and those below):

0. shared facts: ``errors`` and ``system`` (installed data, optional extras, child processes);
1. the model formats: ``archive`` (Model Library Format, TVM's graph JSON and Relay) and
   ``tflite`` (the flatbuffer schema, reader, builder and the model as read);
2. the wire: ``api.server`` and ``api.transport``, and ``micro`` (the RPC session over it);
3. the template library (``project_api/template``): what a template server imports;
4. the host end of the wire: ``api.client`` (launches a server) and ``api.project`` (a
   generated project, driven through the library's project types and options);
5. the emitter (``project_api/emit``), which escapes C with the library's quoting;
6. the tools: ``project_api/tools`` (validate, analyze, profile, mlperftiny, farm, places, demo);
7. the command line (``project_api/cli``, ``__main__``).

Named exceptions, and only these:

- the re-export shims ``project_api.server``, ``project_api.client`` and ``project_api.project``
  (the public import paths, ``from project_api import server`` among them) are the modules of
  ``project_api/api`` under their old names, so they point up by design;
- the platform seam, in C: the runtime (``crt/``) calls the ``TVMPlatform*`` functions each
  template's ``platform.c`` defines. No Python module reaches up to ``templates/``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "project_api"
LAYERS: list[tuple[int, tuple[str, ...]]] = [
    (7, ("project_api.cli", "project_api.__main__")),
    (6, ("project_api.tools",)),
    (5, ("project_api.emit",)),
    (4, ("project_api.api.client", "project_api.api.project")),
    (3, ("project_api.template",)),
    (2, ("project_api.api", "project_api.micro")),
    (1, ("project_api.archive", "project_api.tflite")),
    (0, ("project_api",)),
]
#: The public import paths kept by re-export (each is its ``project_api.api`` module itself).
SHIMS = {"project_api.server": "project_api.api.server",
         "project_api.client": "project_api.api.client",
         "project_api.project": "project_api.api.project"}


def module_name(path: Path, root: Path = REPO_ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported_names(path: Path, name: str, known: set[str] | None = None) -> set[str]:
    """Every module name an import statement of ``path`` (module ``name``) refers to, relative
    imports resolved. ``from pkg import x`` refers to ``pkg.x`` when that is one of the
    ``known`` modules (a submodule), else to ``pkg`` (a name the package defines); without
    ``known``, to both."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                head = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*head, *([base] if base else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if known is None:
                    found.update((base, sub))
                else:
                    found.add(sub if sub in known else base)
    return found


def import_graph() -> dict[str, set[str]]:
    """``{module: the project_api modules it imports}``: ``from project_api.template import
    glue`` is an arrow to template.glue, ``import project_api.archive.mlf`` one to mlf."""
    mods = modules()
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        targets = {ref for ref in imported_names(path, name, set(mods)) if ref in mods}
        targets.discard(name)
        graph[name] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer(name: str) -> int:
    for rank, prefixes in LAYERS:
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            return rank
    raise AssertionError(f"{name} is in no layer; add it to LAYERS")


def test_the_graph_is_read_whole() -> None:
    graph = import_graph()
    assert "project_api.template.handler" in graph["project_api.template"]
    assert "project_api.template.link" in graph["project_api.template.handler"]
    assert "project_api.api.server" in graph["project_api.template.link"]
    assert len(graph) == len(list(PACKAGE.rglob("*.py")))


def test_no_import_circle() -> None:
    assert circles(import_graph()) == []


def test_circles_are_found() -> None:
    """The check itself: a made-up circle of three is reported."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def back_arrows(graph: dict[str, set[str]]) -> list[str]:
    """Every import that runs up the layers, the named shims aside."""
    return [f"{m} (layer {layer(m)}) imports {d} (layer {layer(d)})"
            for m, deps in sorted(graph.items()) if m not in SHIMS
            for d in sorted(deps) if layer(d) > layer(m)]


def test_every_import_runs_down_the_layers() -> None:
    assert back_arrows(import_graph()) == []


def test_a_back_import_is_caught() -> None:
    """The rule itself: the archive reader made to import the validator fails it, and so does
    the emitter importing the command line."""
    graph = import_graph()
    graph["project_api.archive.mlf"] = graph["project_api.archive.mlf"] | {"project_api.tools.validate"}
    graph["project_api.emit.codegen"] = graph["project_api.emit.codegen"] | {"project_api.cli.base"}
    assert back_arrows(graph) == [
        "project_api.archive.mlf (layer 1) imports project_api.tools.validate (layer 6)",
        "project_api.emit.codegen (layer 5) imports project_api.cli.base (layer 7)",
    ]


def test_the_shims_are_the_modules_they_name() -> None:
    """``from project_api import server`` (a TVM-written template server's line),
    ``project_api.client`` and ``project_api.project`` are the very modules of
    ``project_api/api``, and importing them imports nothing else of ours."""
    import importlib

    for old, new in SHIMS.items():
        assert importlib.import_module(old) is importlib.import_module(new)
        assert import_graph()[old] == {"project_api.api", new} or import_graph()[old] == {new}
    from project_api import server
    assert server.ProjectAPIHandler is importlib.import_module("project_api.api.server").ProjectAPIHandler


def test_no_loose_module_at_the_top() -> None:
    """``project_api/`` holds packages, plus only the package's own files and the shims."""
    loose = {p.stem for p in PACKAGE.glob("*.py")}
    assert loose == {"__init__", "__main__", "errors"} | {s.rpartition(".")[2] for s in SHIMS}


def test_the_template_library_reaches_neither_templates_nor_the_host_side() -> None:
    """A template server imports project_api.template; that library never imports back up:
    not templates/ (no package, no server script, no template's file paths), not the command
    line or the client."""
    for name, path in modules().items():
        if not name.startswith("project_api.template"):
            continue
        refs = imported_names(path, name)
        assert not [r for r in refs if r.startswith(("templates", "project_api.cli",
                                                     "project_api.api.client",
                                                     "project_api.api.project"))], name
        assert "microtvm_api_server" not in {r.rpartition(".")[2] for r in refs}, name
        assert not re.search(r"templates/(host|stm32|zephyr)\b", path.read_text()), \
            f"{path} refers to a template's files"


def test_templates_reach_the_library_not_each_other() -> None:
    servers = [*(REPO_ROOT / "templates").glob("*/microtvm_api_server.py"),
               REPO_ROOT / "tests" / "loopback_template" / "microtvm_api_server.py"]
    assert len(servers) >= 4
    for path in servers:
        refs = imported_names(path, "template_server")
        assert "project_api.template" in refs, f"{path} does not use the template library"
        assert not [r for r in refs if r.startswith(("templates", "project_api.cli"))], path


def test_crt_includes_nothing_from_templates() -> None:
    crt = REPO_ROOT / "crt"
    include = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
    for path in [*crt.rglob("*.c"), *crt.rglob("*.h")]:
        for target in include.findall(path.read_text(errors="replace")):
            resolved = (path.parent / target).resolve()
            assert "templates" not in target and resolved.is_relative_to(crt.resolve()) or \
                not target.startswith(".."), f"{path} includes {target}, outside crt/"


def test_no_module_is_over_800_lines() -> None:
    """A module a newcomer can read whole: none of ``project_api/`` is over 800 lines."""
    long = {name: n for name, p in modules().items()
            if (n := len(p.read_text().splitlines())) > 800}
    assert long == {}, f"split these modules: {long}"


def test_the_tflite_writer_lives_in_tflite_not_emit() -> None:
    """``project_api/emit`` turns a model into C; the flatbuffer writer (``ModelBuilder``) is
    ``project_api/tflite``'s, and no emitter module defines one or builds flatbuffers (the
    signal ops only read a custom op's flexbuffer options)."""
    for name, path in modules().items():
        if name.startswith("project_api.emit"):
            tree = ast.parse(path.read_text())
            classes = [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
            text = path.read_text()
            writes = ("flatbuffers.Builder", "from flatbuffers import Builder",
                      "from flatbuffers import builder", "flatbuffers.builder")
            assert "ModelBuilder" not in classes and not any(w in text for w in writes), name

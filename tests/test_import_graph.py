"""The import graph of ``project_api/``, built with ``ast`` from every import statement (those
inside functions too): no circle, and every import runs down the layers, so a newcomer can
read the package bottom up. The one dependency that runs back up is the platform seam, in C:
the runtime (``crt/``) calls the ``TVMPlatform*`` functions each template's ``platform.c``
defines; no Python module reaches up to ``templates/``.

Layers, bottom up (a module imports its own layer and those below):

0. shared facts: errors, dtypes, paths, processes, extras, crt_manifest, relay;
1. the wire and the archive: server, transport, mlf, micro;
2. the template library (``project_api/template``): what a template server imports;
3. the emitter (``project_api/emit``), which escapes C with the library's quoting;
4. the host side: client, project, validate, mlperftiny, farm, labgrid_places, demo, analyze,
   profile, validate_layers, plot;
5. the command line (``project_api/cli``, ``__main__``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "project_api"
LAYERS: list[tuple[int, tuple[str, ...]]] = [
    (5, ("project_api.cli", "project_api.__main__")),
    (4, ("project_api.client", "project_api.project", "project_api.validate",
         "project_api.mlperftiny", "project_api.farm", "project_api.labgrid_places",
         "project_api.demo", "project_api.analyze", "project_api.profile",
         "project_api.validate_layers", "project_api.plot")),
    (3, ("project_api.emit",)),
    (2, ("project_api.template",)),
    (1, ("project_api.server", "project_api.transport", "project_api.mlf", "project_api.micro")),
    (0, ("project_api",)),
]


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
    glue`` is an arrow to template.glue, ``import project_api.mlf`` one to mlf."""
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
    assert "project_api.server" in graph["project_api.template.link"]
    assert len(graph) == len(list(PACKAGE.rglob("*.py")))


def test_no_import_circle() -> None:
    assert circles(import_graph()) == []


def test_circles_are_found() -> None:
    """The check itself: a made-up circle of three is reported."""
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_import_runs_down_the_layers() -> None:
    up = [f"{m} (layer {layer(m)}) imports {d} (layer {layer(d)})"
          for m, deps in sorted(import_graph().items()) for d in sorted(deps)
          if layer(d) > layer(m)]
    assert up == []


def test_the_template_library_reaches_neither_templates_nor_the_host_side() -> None:
    """A template server imports project_api.template; that library never imports back up:
    not templates/ (no package, no server script, no template's file paths), not the command
    line or the client."""
    for name, path in modules().items():
        if not name.startswith("project_api.template"):
            continue
        refs = imported_names(path, name)
        assert not [r for r in refs if r.startswith(("templates", "project_api.cli",
                                                     "project_api.client",
                                                     "project_api.project"))], name
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

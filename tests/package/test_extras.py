"""Optional extras: the base install runs everything but what an extra brings, and every verb
that needs a missing extra names it in its one-line error. ``--version`` reports the package and
wire versions.

The optional packages are hidden the way a base install lacks them: an import blocker on
``sys.meta_path`` in a subprocess (:data:`BLOCKER`), or ``sys.modules[name] = None`` in-process.
The fresh-venv counterpart, with the packages really absent, is ``test_wheel.py``.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tomllib
from conftest import REPO_ROOT

from project_api.cli import main
from project_api.system import extras

#: ``python -c BLOCKER MODULES ARGS...``: ``project-api ARGS...`` with the comma-separated top-level
#: MODULES impossible to import, as on an install without the extras that bring them.
BLOCKER = """
import importlib.abc, runpy, sys
blocked = set(sys.argv.pop(1).split(","))
class Blocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Blocker())
sys.argv[0] = "project-api"
runpy.run_module("project_api", run_name="__main__", alter_sys=True)
"""

OPTIONAL = ",".join(extras.MODULES)


def _blocked(*args: str, cwd: Path | None = None, modules: str = OPTIONAL,
             timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", BLOCKER, modules, *args], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def _hide(monkeypatch: pytest.MonkeyPatch, module: str) -> None:
    """Make ``import module`` (and its submodules) fail in this process."""
    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)


def _requirement_name(text: str) -> str:
    return re.split(r"[\s<>=!~;\[]", text, maxsplit=1)[0].lower()


# --- the extras themselves ------------------------------------------------------------------


def test_extras_match_pyproject() -> None:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    declared = project["optional-dependencies"]
    for extra, dists in extras.EXTRAS.items():
        assert sorted(_requirement_name(r) for r in declared[extra]) == sorted(dists), extra
    # [test] is a superset: it pulls in every runtime extra through project-api[...].
    self_ref = [r for r in declared["test"] if _requirement_name(r) == "project-api"]
    assert len(self_ref) == 1
    pulled = set(re.search(r"\[(.*)\]", self_ref[0]).group(1).split(","))
    assert pulled == set(extras.EXTRAS) == set(declared) - {"test"}
    # None of them is needed by the base install.
    base = {_requirement_name(r) for r in project["dependencies"]}
    assert not base & {d for dists in extras.EXTRAS.values() for d in dists}


def test_each_module_comes_from_its_distribution() -> None:
    """The test environment has every extra: each module is provided by the named package."""
    providers = importlib.metadata.packages_distributions()
    for module, (dist, _) in extras.MODULES.items():
        names = {d.lower().replace("_", "-") for d in providers.get(module, [])}
        assert dist in names, f"{module} comes from {names}, not {dist}"


def test_no_optional_package_is_imported_at_module_level() -> None:
    """Every project_api module imports on the base install: optional packages are imported
    inside the functions that need them (through extras.require), never at the top."""
    offenders = []
    for path in sorted((REPO_ROOT / "project_api").rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in tree.body:
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(REPO_ROOT)}:{node.lineno} {n}" for n in names
                          if n.partition(".")[0] in extras.MODULES]
    assert offenders == []


def test_every_module_imports_without_the_extras() -> None:
    script = """
import importlib, pkgutil, project_api
failed = []
for info in pkgutil.walk_packages(project_api.__path__, "project_api."):
    try:
        importlib.import_module(info.name)
    except Exception as exc:
        failed.append(f"{info.name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed) or "all imported")
"""
    code = BLOCKER.replace('runpy.run_module("project_api", run_name="__main__", alter_sys=True)',
                           script)
    out = subprocess.run([sys.executable, "-c", code, OPTIONAL], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "all imported"


# --- the one-line errors ----------------------------------------------------------------------


def test_require_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for module, (dist, extra) in extras.MODULES.items():
        _hide(monkeypatch, module)
        with pytest.raises(extras.MissingExtraError) as info:
            extras.require(module, "the frobnicator")
        assert str(info.value) == (f"the frobnicator needs the '{dist}' package, which is not "
                                   f"installed; install it with: pip install 'project-api[{extra}]'")
        assert (info.value.module, info.value.extra) == (module, extra)
        assert isinstance(info.value, ImportError)


def test_require_reports_a_broken_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """A package that is there but fails to import itself is not called missing."""
    import importlib.abc

    class Broken(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201
            if name == "matplotlib":
                raise ModuleNotFoundError("No module named 'kiwisolver'", name="kiwisolver")
            return None

    for name in [n for n in sys.modules if n == "matplotlib" or n.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [Broken(), *sys.meta_path])
    with pytest.raises(extras.MissingExtraError,
                       match=r"^analyze --plot needs the 'matplotlib' package, which fails to import "
                             r"\(No module named 'kiwisolver'\); reinstall it with: "
                             r"pip install 'project-api\[plot\]'$"):
        extras.require("matplotlib", "analyze --plot")


def test_require_refuses_a_module_that_is_not_optional() -> None:
    with pytest.raises(ValueError, match="'numpy' is not an optional package"):
        extras.require("numpy", "x")


def _error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_run_check_names_the_reference_extra_before_building(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from project_api.tflite.builder import single_op_model

    model = tmp_path / "fc.tflite"
    model.write_bytes(single_op_model("FULLY_CONNECTED", "int8"))
    _hide(monkeypatch, "tflite_micro")
    monkeypatch.chdir(tmp_path)
    status = main(["run", "--template", "host", "--model", str(model), "--check",
                   "--out", str(tmp_path / "prj")])
    assert status == 1
    assert _error_line(capsys) == (
        "error: run --check (its reference is TFLite Micro) needs the 'tflite-micro' package, "
        "which is not installed; install it with: pip install 'project-api[reference]'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fc.tflite"]  # nothing generated


def test_validate_with_a_tflite_names_the_reference_extra(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from project_api.tflite.builder import single_op_model

    model = tmp_path / "fc.tflite"
    model.write_bytes(single_op_model("FULLY_CONNECTED", "int8"))
    np.save(tmp_path / "x.npy", np.zeros((2, 1, 12), np.int8))
    _hide(monkeypatch, "tflite_micro")
    status = main(["validate", "--template", "host", "--model", str(model),
                   "--data", str(tmp_path / "x.npy")])
    assert status == 1
    assert _error_line(capsys).endswith(
        "(its reference is TFLite Micro) needs the 'tflite-micro' package, which is not "
        "installed; install it with: pip install 'project-api[reference]'")


def test_the_validation_reference_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from project_api.tflite.builder import single_op_model
    from project_api.tools.references import litert_outputs, tflm_outputs

    model = single_op_model("FULLY_CONNECTED", "int8")
    x = [np.zeros((1, 1, 12), np.int8)]
    _hide(monkeypatch, "tflite_micro")
    _hide(monkeypatch, "ai_edge_litert")
    with pytest.raises(extras.MissingExtraError, match=r"project-api\[reference\]'$"):
        tflm_outputs(model, x)
    with pytest.raises(extras.MissingExtraError, match=r"project-api\[reference\]'$"):
        litert_outputs(model, x)


def test_devices_coordinator_names_the_labgrid_extra(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _hide(monkeypatch, "labgrid")
    status = main(["devices", "--no-probes", "--coordinator", "127.0.0.1:1"])
    assert status == 1
    assert _error_line(capsys) == (
        "error: listing labgrid places (--coordinator, LG_COORDINATOR) needs the 'labgrid' "
        "package, which is not installed; install it with: pip install 'project-api[labgrid]'")


def test_validate_on_places_names_the_labgrid_extra(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from project_api.tools.farm import validate_on_places

    _hide(monkeypatch, "labgrid")
    with pytest.raises(extras.MissingExtraError, match=r"^validating on labgrid places "
                                                        r"\(--places\) needs the 'labgrid' .*"
                                                        r"project-api\[labgrid\]'$"):
        validate_on_places(tmp_path, "place-*", {"x": np.zeros((1, 1))}, "127.0.0.1:1")


# --- the demo and --version on the base install ---------------------------------------------------


def test_demo_without_tflite_micro_checks_against_numpy(tmp_path: Path) -> None:
    from project_api.emit.reference import run_tflm

    out = _blocked("demo", "--out", str(tmp_path / "demo"), "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["ok"] is True and data["max_abs_error"] == 0
    assert data["reference_name"] == "numpy int8"
    assert data["note"] == ("tflite-micro is not installed, so the check is numpy's bit-exact "
                            "int8 evaluation; for the TFLite Micro comparison: "
                            "pip install 'project-api[reference]'")
    assert len(data["seconds_per_run"]) == 3 and all(s > 0 for s in data["seconds_per_run"])
    # TFLite Micro (here, in the test's own process) agrees with both the device and numpy.
    tflite = (tmp_path / "demo" / "model.tflite").read_bytes()
    x = np.array(data["inputs"]["input"], dtype=np.int8)
    (want,) = run_tflm(tflite, [x])
    np.testing.assert_array_equal(np.array(data["outputs"][0]).reshape(want.shape), want)
    np.testing.assert_array_equal(np.array(data["reference"][0]).reshape(want.shape), want)


def test_demo_text_without_tflite_micro(tmp_path: Path) -> None:
    out = _blocked("demo", "--out", str(tmp_path / "demo"), modules="tflite_micro", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("demo: int8 CNN")
    assert any(re.fullmatch(r"  output 0: +\[\[.*\]\]", line) for line in lines)
    assert any(re.fullmatch(r"  numpy int8: +\[\[.*\]\]", line) for line in lines)
    assert "  max |device - numpy int8| = 0: OK" in lines
    assert any(re.fullmatch(r"  device time per run: best [0-9.]+ us", line) for line in lines)
    assert lines[-1].startswith("  note: tflite-micro is not installed") and \
        lines[-1].endswith("pip install 'project-api[reference]'")
    quiet = _blocked("demo", "-q", "--out", str(tmp_path / "demo"), modules="tflite_micro",
                     cwd=tmp_path)  # -q hides progress, never the note
    assert quiet.returncode == 0 and quiet.stdout.splitlines()[-1] == lines[-1], quiet.stderr


def test_version_reports_the_package_and_wire_versions() -> None:
    out = _blocked("--version")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        f"project-api {importlib.metadata.version('project-api')}",
        "Project API protocol v1 (JSON-RPC 2.0, as microTVM 0.15.0)",
        "Model Library Format versions read: 5, 6, 7",
    ]

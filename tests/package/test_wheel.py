"""``pip install project-api`` works outside the repository: the sdist, the wheel built from it,
and a fresh virtual environment with the wheel and its base dependencies only (no extra).

From an empty folder outside the checkout, the installed command runs the demo (checked against
numpy's int8 evaluation: tflite-micro is absent), ``emit``/``generate``/``build``/``run`` on the
host template and ``generate``/``build`` for an STM32 board. Outputs are compared with TFLite
Micro in this test's own process (the test environment has every extra).

Besides running, the wheel's file list is compared with what run time needs: the package, the
templates and the C runtime that the manifest (``crt/libraries.txt``) and the project copier
name; and with the wheel built straight from the checkout (same files, same hashes), which shows
the sdist lost nothing. One build, one venv and one install per module keep CI's time down.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np
import pytest
from conftest import REPO_ROOT, missing, require_tool

from project_api.archive.crt_manifest import read_manifest
from project_api.emit import reference as R
from project_api.tflite import builder as B

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

DATA = "project_api/_data"


@dataclass
class Dist:
    sdist: Path
    wheel: Path  #: built from the sdist
    direct_wheel: Path  #: built from the checkout


def _run(argv: list[str], *, cwd: Path | None = None, env: dict[str, str] | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, (f"{' '.join(map(str, argv))} failed ({out.returncode}):\n"
                                 f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
    return out


def _tracked(prefix: str) -> list[str]:
    """The checkout's files under ``prefix`` that git tracks (what a fresh clone has)."""
    if not (REPO_ROOT / ".git").exists():
        missing("the wheel test compares with the checkout's git-tracked files; not a git checkout")
    out = _run(["git", "-C", str(REPO_ROOT), "ls-files", "-z", "--", prefix])
    return sorted(p for p in out.stdout.split("\0") if p)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """The sdist and the wheel ``python -m build`` makes from it (in isolated build
    environments, as pip would), and a wheel built straight from the checkout."""
    try:
        import build  # noqa: F401  (the build frontend of the test extra)
    except ImportError:
        missing("the 'build' package is not installed; run 'make setup'")
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out / "from-sdist"), str(REPO_ROOT)])
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out / "direct"),
          str(REPO_ROOT)])
    (sdist,) = (out / "from-sdist").glob("*.tar.gz")
    (wheel,) = (out / "from-sdist").glob("*.whl")
    (direct,) = (out / "direct").glob("*.whl")
    return Dist(sdist, wheel, direct)


def _clean_env(venv: Path) -> dict[str, str]:
    """The environment of a user's shell with ``venv`` activated: nothing points into the
    checkout (no PYTHONPATH, no PROJECT_API_* overrides)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "PROJECT_API_", "VIRTUAL_ENV", "PYTEST"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', os.defpath)}"
    env["VIRTUAL_ENV"] = str(venv)
    return env


@dataclass
class Install:
    venv: Path
    env: dict[str, str]

    def cli(self, *args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return _run([str(self.venv / "bin" / "project-api"), *args], cwd=cwd, env=self.env,
                    timeout=timeout)

    def python(self, code: str, cwd: Path) -> str:
        return _run([str(self.venv / "bin" / "python"), "-c", code], cwd=cwd,
                    env=self.env).stdout


@pytest.fixture(scope="module")
def installed(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Install]:
    """A fresh venv outside the checkout with the wheel and its base dependencies (from pip's
    cache or the registry), installed once for the module and removed after it."""
    root = tmp_path_factory.mktemp("user")
    venv = root / "venv"
    try:
        _run([sys.executable, "-m", "venv", str(venv)])
        env = _clean_env(venv)
        _run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(dist.wheel)],
             cwd=root, env=env, timeout=900)
        yield Install(venv, env)
    finally:
        shutil.rmtree(venv, ignore_errors=True)


@pytest.fixture
def empty(tmp_path: Path) -> Path:
    """An empty working folder outside the checkout; the test sees what the commands left."""
    assert not tmp_path.is_relative_to(REPO_ROOT)
    return tmp_path


# --- what the archives hold -----------------------------------------------------------------


def _record(wheel: Path) -> dict[str, str]:
    """name -> sha256 of every file of ``wheel`` (its RECORD, checked against the bytes)."""
    with zipfile.ZipFile(wheel) as z:
        (record_name,) = [n for n in z.namelist() if n.endswith(".dist-info/RECORD")]
        rows = list(csv.reader(io.StringIO(z.read(record_name).decode())))
        hashes = {}
        for name, digest, _ in rows:
            if name == record_name:
                continue
            data = z.read(name)
            want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(
                b"=").decode()
            assert digest == want, f"{name}: RECORD says {digest}, the file is {want}"
            hashes[name] = digest
        assert set(hashes) | {record_name} == set(z.namelist())
    return hashes


def _needed_at_run_time() -> set[str]:
    """The wheel paths generated projects and the package need: every tracked file of the
    package and of the templates, and of the C runtime what the manifest's project types
    compile, the private headers the manifest lists for them (the project copier takes those
    too), include/, the manifest itself and the porting template."""
    needed = set(_tracked("project_api"))
    needed |= {f"{DATA}/{p}" for p in _tracked("templates")}
    crt = REPO_ROOT / "crt"
    manifest = read_manifest(crt)
    files: set[PurePosixPath] = set()
    for project_type in manifest.projects:
        sources = manifest.project_sources(project_type)
        files.update(sources, manifest.private_headers(sources))
    for rel in files:
        needed.add(f"{DATA}/crt/{rel}")
    needed |= {f"{DATA}/{p}" for p in _tracked("crt/include") + _tracked("crt/port")}
    needed |= {f"{DATA}/crt/libraries.txt", f"{DATA}/crt/Makefile"}
    return needed


def test_wheel_holds_what_run_time_needs_and_nothing_else(dist: Dist) -> None:
    files = set(_record(dist.wheel))
    needed = _needed_at_run_time()
    assert sorted(needed - files) == [], "missing from the wheel"
    extra = sorted(f for f in files - needed if ".dist-info/" not in f)
    assert extra == [], "in the wheel but not needed (build output, tests?)"
    assert not [f for f in files if "__pycache__" in f or f.endswith((".pyc", ".o", ".a"))]


def test_wheel_metadata_names_the_extras(dist: Dist) -> None:
    with zipfile.ZipFile(dist.wheel) as z:
        meta = next(z.read(n).decode() for n in z.namelist() if n.endswith("/METADATA"))
        entry = next(z.read(n).decode() for n in z.namelist() if n.endswith("/entry_points.txt"))
    lines = meta.splitlines()
    assert {line.split(": ", 1)[1] for line in lines if line.startswith("Provides-Extra: ")} == {
        "reference", "labgrid", "plot", "test"}
    unconditional = [line for line in lines if line.startswith("Requires-Dist: ")
                     and "extra ==" not in line]
    for optional in ("tflite-micro", "ai-edge-litert", "labgrid", "matplotlib", "pytest"):
        assert not [line for line in unconditional if optional in line], optional
    assert "project-api = project_api.cli:main" in entry


def test_sdist_builds_the_same_wheel(dist: Dist) -> None:
    """The wheel made from the sdist equals the wheel made from the checkout, file by file: the
    sdist holds everything building the wheel needs."""
    assert _record(dist.wheel) == _record(dist.direct_wheel)
    with tarfile.open(dist.sdist) as tar:
        names = {PurePosixPath(*PurePosixPath(n).parts[1:]).as_posix() for n in tar.getnames()}
    for path in ["pyproject.toml", "README.md", "crt/libraries.txt", *_tracked("templates")]:
        assert path in names, f"{path} is not in the sdist"


# --- running the installed command ------------------------------------------------------------


def test_installed_outside_the_checkout_without_extras(installed: Install, empty: Path) -> None:
    where = json.loads(installed.python(
        "import importlib.util, json, project_api, project_api.system.paths as p; print(json.dumps({"
        "'package': project_api.__file__, 'crt': str(p.crt_dir()), "
        "'templates': str(p.templates_dir()), 'missing': [m for m in "
        "('tflite_micro', 'ai_edge_litert', 'labgrid', 'matplotlib') "
        "if importlib.util.find_spec(m) is None]}))", empty))
    for key in ("package", "crt", "templates"):
        assert Path(where[key]).is_relative_to(installed.venv), where
        assert not Path(where[key]).is_relative_to(REPO_ROOT), where
    assert where["missing"] == ["tflite_micro", "ai_edge_litert", "labgrid", "matplotlib"]
    out = installed.cli("--version", cwd=empty)
    lines = out.stdout.splitlines()
    assert lines[0] == f"project-api {_wheel_version(installed)}"
    assert lines[1:] == ["Project API protocol v1 (JSON-RPC 2.0, as microTVM 0.15.0)",
                         "Model Library Format versions read: 5, 6, 7"]
    templates = installed.cli("templates", "--json", cwd=empty)
    names = {t["name"] for t in json.loads(templates.stdout)}
    assert {"host", "stm32", "zephyr"} <= names


def _wheel_version(installed: Install) -> str:
    return installed.python("import importlib.metadata as m; print(m.version('project-api'))",
                            installed.venv).strip()


def test_demo_from_an_empty_folder(installed: Install, empty: Path) -> None:
    require_tool("make")
    out = installed.cli("demo", "--json", cwd=empty)
    data = json.loads(out.stdout)
    assert data["ok"] is True and data["reference_name"] == "numpy int8"
    assert data["note"].endswith("pip install 'project-api[reference]'"), data["note"]
    assert sorted(p.name for p in empty.iterdir()) == ["demo-out"]
    tflite = (empty / "demo-out" / "model.tflite").read_bytes()
    (want,) = R.run_tflm(tflite, [np.array(data["inputs"]["input"], dtype=np.int8)])
    np.testing.assert_array_equal(np.array(data["outputs"][0]).reshape(want.shape), want)


def _model(folder: Path) -> tuple[Path, np.ndarray, np.ndarray]:
    """A small int8 network written to ``folder``, an input, and TFLite Micro's output."""
    tflite = folder / "model.tflite"
    tflite.write_bytes(B.demo_model(7))
    x = np.random.default_rng(7).integers(-128, 127, (1, 16, 16, 1), dtype=np.int8,
                                          endpoint=True)
    (want,) = R.run_tflm(tflite.read_bytes(), [x])
    return tflite, x, want


def test_host_emit_generate_build_run(installed: Install, empty: Path) -> None:
    require_tool("make")
    tflite, x, want = _model(empty)
    np.save(empty / "x.npy", x)
    installed.cli("emit", "model.tflite", "--out", "model.tar", cwd=empty)
    installed.cli("generate", "--template", "host", "--model", "model.tar", "--out", "prj",
                  "-o", "project_type=host_driven", cwd=empty)
    installed.cli("build", "prj", cwd=empty)
    installed.cli("run", "prj", "--input", "input=x.npy", "--output", "y.npz", "--repeat", "1",
                  cwd=empty)
    with np.load(empty / "y.npz") as y:
        (got,) = [y[k] for k in y.files]
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    assert tflite.is_file()


def test_stm32_generate_build(installed: Install, empty: Path) -> None:
    require_tool("make")
    require_tool("arm-none-eabi-gcc")
    _model(empty)
    installed.cli("emit", "model.tflite", "--target", "cortex-m4", "--out", "m4.tar", cwd=empty)
    installed.cli("generate", "--template", "stm32", "--model", "m4.tar", "--out", "stm",
                  "-o", "board=qemu_netduinoplus2", cwd=empty)
    installed.cli("build", "stm", cwd=empty)
    elf = (empty / "stm" / "build" / "firmware.elf").read_bytes()
    # An ELF32 little-endian ARM executable.
    assert elf[:4] == b"\x7fELF" and elf[4] == 1 and elf[5] == 1
    assert int.from_bytes(elf[18:20], "little") == 40  # EM_ARM

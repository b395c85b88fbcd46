"""Host template: project generation, builds (incremental, template-independent) and options."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest
from conftest import require_tool
from mlf_kernels import (
    add_mlf,
    add_module,
    generate_host_project,
    v5_add_mlf,
    warning_module,
    write_mlf,
)

from project_api.errors import ProjectAPIError
from project_api.system import paths


@pytest.fixture(autouse=True)
def _toolchain() -> None:
    require_tool("make")
    require_tool("cc")


def _objects(project: Path) -> dict[str, int]:
    return {str(p.relative_to(project)): p.stat().st_mtime_ns for p in (project / "build").rglob("*.o")}


def test_generate_layout_host_driven(tmp_path: Path) -> None:
    mlf = add_mlf(tmp_path / "add.tar")
    with generate_host_project(mlf, tmp_path / "prj", build=False) as project:
        assert project.info()["platform_name"] == "host"
        assert project.info()["is_template"] is False
    prj = tmp_path / "prj"
    for rel in ("microtvm_api_server.py", "model.tar", "model/metadata.json", "Makefile",
                "crt_config/crt_config.h", "src/main.c", "src/platform.c", "src/model_glue.c",
                "crt/include/tvm/runtime/crt/platform.h"):
        assert (prj / rel).is_file(), rel
    assert not (prj / "src/standalone.c").exists()
    # host_driven carries the runtime libraries, not only the backend.
    libs = {p.name for p in (prj / "crt/src").iterdir()}
    assert {"backend", "common", "aot_executor", "rpc_server", "rpc_common"} <= libs
    glue = (prj / "src/model_glue.c").read_text()
    assert "tvmgen_default_run(&in, &out)" in glue
    assert '{ "a", { 0, 8, 1 }, 2,' in glue  # name, int8 dtype, rank from the MLF
    assert json.loads((prj / "project_options.json").read_text())["project_type"] == "host_driven"


def test_generate_standalone_copies_backend_only(tmp_path: Path) -> None:
    mlf = add_mlf(tmp_path / "add.tar")
    generate_host_project(mlf, tmp_path / "prj", build=False, project_type="standalone").close()
    prj = tmp_path / "prj"
    assert (prj / "src/standalone.c").is_file()
    assert not (prj / "src/main.c").exists()
    assert sorted(p.name for p in (prj / "crt/src").iterdir()) == ["backend", "memory"]
    assert [p.name for p in (prj / "crt/src/memory").iterdir()] == ["stack_allocator.c"]


def test_v5_archive_uses_flat_entry_point(tmp_path: Path) -> None:
    mlf = v5_add_mlf(tmp_path / "v5.tar")
    generate_host_project(mlf, tmp_path / "prj", build=False).close()
    glue = (tmp_path / "prj/src/model_glue.c").read_text()
    assert "return tvmgen_default_run_model(inputs[0], inputs[1], outputs[0]);" in glue
    assert "int64_t model_default_input0_shape[2] = { 1, 4 }" in glue  # shape from relay.txt


def test_generate_refuses_existing_dir(tmp_path: Path) -> None:
    mlf = add_mlf(tmp_path / "add.tar")
    (tmp_path / "prj").mkdir()
    (tmp_path / "prj" / "keep.txt").write_text("mine")
    with pytest.raises(ProjectAPIError, match="already exists"):
        generate_host_project(mlf, tmp_path / "prj", build=False)
    assert (tmp_path / "prj" / "keep.txt").read_text() == "mine"


def test_missing_dtype_is_an_error_and_leaves_nothing(tmp_path: Path) -> None:
    mod = add_module()
    # A v7 archive without our "shape" extension, without dtypes and without Relay text: sizes
    # give flat shapes, but nothing gives the dtypes.
    path = write_mlf(tmp_path / "noshape.tar", [mod])
    unpacked = tmp_path / "unpacked"
    with tarfile.open(path) as tar:
        tar.extractall(unpacked, filter="data")
    meta = json.loads((unpacked / "metadata.json").read_text())
    for table in ("inputs", "outputs"):
        for info in meta["modules"]["default"]["memory"]["functions"]["main"][0][table].values():
            del info["shape"]
            del info["dtype"]
    (unpacked / "metadata.json").write_text(json.dumps(meta))
    (unpacked / "src/default.relay").unlink()
    repacked = tmp_path / "repacked.tar"
    with tarfile.open(repacked, "w") as tar:
        tar.add(unpacked, arcname=".")
    with pytest.raises(ProjectAPIError, match="no dtype recorded.*--input-spec"):
        generate_host_project(repacked, tmp_path / "prj", build=False)
    assert not (tmp_path / "prj").exists()


def test_bundled_runtime_is_ignored(tmp_path: Path) -> None:
    extra = {"runtime/src/evil.c": b"#error the producer's runtime must not be built\n",
             "templates/crt_config.h.template": b"/* TVM's */\n"}
    mlf = write_mlf(tmp_path / "bundled.tar", [add_module()], extra_files=extra)
    with generate_host_project(mlf, tmp_path / "prj", project_type="standalone") as project:
        assert project.info()["is_template"] is False
    assert (tmp_path / "prj/build/main").is_file()


def test_bad_compile_definitions_rejected(tmp_path: Path) -> None:
    mlf = add_mlf(tmp_path / "add.tar")
    with pytest.raises(ProjectAPIError, match="compile_definitions"):
        generate_host_project(mlf, tmp_path / "prj", build=False, compile_definitions="-O0; rm -rf x")
    assert not (tmp_path / "prj").exists()


def test_incremental_build(tmp_path: Path) -> None:
    mlf = add_mlf(tmp_path / "add.tar")
    prj = tmp_path / "prj"
    with generate_host_project(mlf, prj) as project:
        main = prj / "build/main"
        first_main = main.stat().st_mtime_ns
        first = _objects(prj)
        assert len(first) >= 5
        project.build()  # nothing changed: nothing is rebuilt
        assert main.stat().st_mtime_ns == first_main
        assert _objects(prj) == first
        assert subprocess.run(["make", "-q", "-C", str(prj)], capture_output=True).returncode == 0

        platform_c = prj / "src/platform.c"
        platform_c.write_text(platform_c.read_text() + "\n/* touched */\n")
        project.build()  # one source changed: one object and the link
        second = _objects(prj)
        changed = {k for k in first if first[k] != second[k]}
        assert changed == {"build/obj/src/platform.o"}
        assert main.stat().st_mtime_ns != first_main


def test_build_after_template_and_runtime_are_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    template = tmp_path / "template"
    crt = tmp_path / "crt"
    shutil.copytree(paths.template_dir("host"), template)
    shutil.copytree(paths.crt_dir(), crt, ignore=shutil.ignore_patterns("build", "tests", "fuzz"))
    monkeypatch.setenv("PROJECT_API_CRT_DIR", str(crt))
    mlf = add_mlf(tmp_path / "add.tar")
    generate_host_project(mlf, tmp_path / "prj", template=template, build=False).close()
    shutil.rmtree(template)
    shutil.rmtree(crt)
    out = subprocess.run(["make", "-C", str(tmp_path / "prj"), "-j2"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "prj/build/main").is_file()


def test_warning_as_error(tmp_path: Path) -> None:
    mlf = write_mlf(tmp_path / "warn.tar", [warning_module()])
    with pytest.raises(ProjectAPIError, match="build failed"):
        generate_host_project(mlf, tmp_path / "strict", warning_as_error=True,
                              project_type="standalone")
    assert not (tmp_path / "strict/build/main").exists()
    with generate_host_project(mlf, tmp_path / "lax", warning_as_error=False,
                               project_type="standalone"):
        assert (tmp_path / "lax/build/main").is_file()


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_standalone_runs_on_files(tmp_path: Path, dtype: str) -> None:
    mlf = add_mlf(tmp_path / "add.tar", dtype=dtype, shape=(2, 3))
    prj = tmp_path / "prj"
    generate_host_project(mlf, prj, project_type="standalone").close()
    rng = np.random.default_rng(7)
    if dtype == "int8":
        a = rng.integers(-128, 127, (2, 3), dtype=np.int8, endpoint=True)
        b = rng.integers(-128, 127, (2, 3), dtype=np.int8, endpoint=True)
    else:
        a = rng.standard_normal((2, 3)).astype(np.float32)
        b = rng.standard_normal((2, 3)).astype(np.float32)
    (tmp_path / "a.bin").write_bytes(a.tobytes())
    (tmp_path / "b.bin").write_bytes(b.tobytes())
    out = subprocess.run(
        [str(prj / "build/main"), "-r", "5", "-o", str(tmp_path), str(tmp_path / "a.bin"),
         str(tmp_path / "b.bin")],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "5 run(s)" in out.stdout
    got = np.frombuffer((tmp_path / "output0.bin").read_bytes(), dtype=dtype).reshape(2, 3)
    np.testing.assert_array_equal(got, a + b)  # numpy int8 addition wraps like the C cast


def test_standalone_rejects_wrong_input_size(tmp_path: Path) -> None:
    mlf = add_mlf(tmp_path / "add.tar")
    prj = tmp_path / "prj"
    generate_host_project(mlf, prj, project_type="standalone").close()
    (tmp_path / "a.bin").write_bytes(b"\x01\x02\x03")
    (tmp_path / "b.bin").write_bytes(b"\x01\x02\x03\x04")
    out = subprocess.run([str(prj / "build/main"), str(tmp_path / "a.bin"), str(tmp_path / "b.bin")],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 1
    assert "must hold exactly 4 bytes" in out.stderr
    assert not (tmp_path / "output0.bin").exists()


def test_open_transport_refused_for_standalone(tmp_path: Path) -> None:
    mlf = add_mlf(tmp_path / "add.tar")
    with generate_host_project(mlf, tmp_path / "prj", project_type="standalone") as project:
        with pytest.raises(ProjectAPIError, match="standalone project"):
            with project.session():
                pass


def test_cc_env_is_honoured(tmp_path: Path) -> None:
    require_tool("clang")
    mlf = add_mlf(tmp_path / "add.tar")
    prj = tmp_path / "prj"
    generate_host_project(mlf, prj, build=False).close()
    env = dict(os.environ, CC="clang")
    out = subprocess.run(["make", "-C", str(prj), "-j2", "V=1"], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "clang " in out.stdout

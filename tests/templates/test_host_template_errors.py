"""Host template failure paths: each names the problem and the fix (issues #7 and #8).

Build errors show the first compiler error with its file and line and the full log's path;
options are checked against their declared bounds when the project is generated; a missing
program gets its install hint; flash on an unbuilt project fails; C that only builds for Arm is
refused on this computer with one line that names the CPU family.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO_ROOT, require_tool
from mlf_kernels import add_module, generate_host_project, write_mlf

from project_api.errors import BuildError, FlashError, MissingProgramError, ProjectAPIError


@pytest.fixture(autouse=True)
def _toolchain() -> None:
    require_tool("make")
    require_tool("cc")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "project_api", *args], capture_output=True,
                          text=True, cwd=REPO_ROOT, env=env, timeout=300)


def _broken_mlf(path: Path) -> Path:
    mod = add_module("default", "int8", (1, 4))
    mod.source = mod.source.replace("for (int32_t i = 0;", "for (int32_t i = 0 oops;", 1)
    assert "oops" in mod.source
    return write_mlf(path, [mod])


def test_build_failure_names_first_compiler_error_and_log(tmp_path: Path) -> None:
    project = generate_host_project(_broken_mlf(tmp_path / "m.tar"), tmp_path / "prj", build=False)
    with project, pytest.raises(BuildError) as info:
        project.build()
    log = tmp_path / "prj" / "build" / "build.log"
    message = str(info.value)
    assert re.search(r"build failed: model/codegen/host/src/default_lib0\.c:\d+:\d+: expected",
                     message), message
    assert message.endswith(f"; full log: {log}")
    assert "\n" not in message.split(": ", 1)[1]  # one line, not make's output squashed
    assert "oops" in log.read_text() and "Error" in log.read_text()  # the whole output is kept


def test_cli_build_failure_is_one_line_and_v_shows_the_compiler(tmp_path: Path) -> None:
    mlf = _broken_mlf(tmp_path / "m.tar")
    r = cli("generate", "--template", "host", "--model", str(mlf), "--out", str(tmp_path / "p"))
    assert r.returncode == 0, r.stderr
    r = cli("build", str(tmp_path / "p"))
    assert r.returncode == 1
    lines = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "default_lib0.c:" in lines[0] and "full log:" in lines[0], r.stderr
    assert "BuildError" not in lines[0]
    # -v shows what the compiler printed (the server logs each line at INFO).
    r = cli("build", "-v", str(tmp_path / "p"))
    assert r.returncode == 1 and "  CC      " in r.stderr and "oops" in r.stderr, r.stderr


def test_option_bounds_are_checked_at_generate_time(tmp_path: Path) -> None:
    mlf = write_mlf(tmp_path / "m.tar", [add_module()])
    r = cli("generate", "--template", "host", "--model", str(mlf), "--out", str(tmp_path / "p"),
            "-o", "max_packet_size_bytes=99999999999")
    assert r.returncode == 2  # a usage error, as our client's own option errors are
    assert "max_packet_size_bytes=99999999999 is above its maximum 16777216" in r.stderr
    assert "pass -o max_packet_size_bytes=N with N in 256..16777216" in r.stderr
    assert not (tmp_path / "p").exists()  # nothing half-made is left
    r = cli("generate", "--template", "host", "--help")
    assert "range 256..16777216" in r.stdout


def test_flash_before_build_fails(tmp_path: Path) -> None:
    mlf = write_mlf(tmp_path / "m.tar", [add_module()])
    with generate_host_project(mlf, tmp_path / "prj", build=False) as project:
        with pytest.raises(FlashError, match="build/main is not built; run 'project-api build'"):
            project.flash()
    r = cli("flash", str(tmp_path / "prj"))
    assert r.returncode == 1 and "not built" in r.stderr and "done" not in r.stdout


def test_corrupt_options_file_is_named(tmp_path: Path) -> None:
    mlf = write_mlf(tmp_path / "m.tar", [add_module()])
    generate_host_project(mlf, tmp_path / "prj", build=False).close()
    options = tmp_path / "prj" / "project_options.json"
    assert json.loads(options.read_text())["project_type"] == "host_driven"
    options.write_text("{broken")
    r = cli("build", str(tmp_path / "prj"))
    assert r.returncode == 1 and f"{options} is corrupt" in r.stderr, r.stderr


def test_missing_make_gets_the_install_hint(tmp_path: Path) -> None:
    mlf = write_mlf(tmp_path / "m.tar", [add_module()])
    project = generate_host_project(mlf, tmp_path / "prj", build=False)
    project.close()
    bin_dir = tmp_path / "bin"  # a PATH with python but neither make nor cc
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python3")
    env = {**os.environ, "PATH": str(bin_dir)}
    r = cli("build", str(tmp_path / "prj"), env=env)
    assert r.returncode == 1
    assert "'make' is not installed" in r.stderr and "apt-get install make" in r.stderr
    with pytest.raises(MissingProgramError):
        from project_api.template import require
        require("make-not-here", "install it")


ACLE_C = """\
#include <arm_acle.h>
#include <stdint.h>
int32_t tvmgen_default_dot(int32_t a, int32_t b) { return __smlad(a, b, 0); }
"""

CMSIS_C = """\
#include <arm_nnfunctions.h>
#include <stdint.h>
int32_t tvmgen_default_dot(int32_t a, int32_t b) { return a * b; }
"""


def test_arm_only_code_is_refused_in_one_line(tmp_path: Path) -> None:
    mod = add_module()
    mlf = write_mlf(tmp_path / "m.tar", [mod], extra_files={
        "codegen/host/src/default_lib1.c": CMSIS_C.encode()})
    r = cli("info", str(mlf))
    assert r.returncode == 0, r.stderr
    with generate_host_project(mlf, tmp_path / "prj", build=False) as project:
        with pytest.raises(BuildError) as info:
            project.build()
    message = str(info.value)
    assert "module 'default' targets Arm" in message
    assert "default_lib1.c includes <arm_nnfunctions.h>" in message
    assert "which the host template cannot build" in message
    assert not (tmp_path / "prj" / "build" / "main").exists()


def test_acle_code_builds_with_the_portable_header(tmp_path: Path) -> None:
    """<arm_acle.h> alone is no reason to refuse: the host template brings a portable one."""
    mlf = write_mlf(tmp_path / "m.tar", [add_module()], extra_files={
        "codegen/host/src/default_lib1.c": ACLE_C.encode()})
    with generate_host_project(mlf, tmp_path / "prj", build=False) as project:
        project.build()
    assert (tmp_path / "prj" / "build" / "main").is_file()


def test_generated_project_builds_without_the_template(tmp_path: Path) -> None:
    """The generated project reads nothing from the template folder at build time."""
    template = tmp_path / "host_copy"
    shutil.copytree(REPO_ROOT / "templates" / "host", template)
    mlf = write_mlf(tmp_path / "m.tar", [add_module()])
    project = generate_host_project(mlf, tmp_path / "prj", template=template, build=False)
    shutil.rmtree(template)
    with project:
        project.build()
    assert (tmp_path / "prj" / "build" / "main").is_file()
    with pytest.raises(ProjectAPIError):
        generate_host_project(mlf, tmp_path / "prj2", template=template, build=False)

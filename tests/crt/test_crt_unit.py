"""The C runtime's unit tests (crt/tests/test_*.c), run under ASan+UBSan by ``make -C crt test``.

One make run builds and runs every C test program; each program then gets its own pytest case,
which fails with that program's output. Further cases check that the runtime builds for a
Cortex-M4 with the same warning flags and that config.h's range checks reject bad settings.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from c_build import assert_program_passed, program_reports, run_make
from conftest import REPO_ROOT, require_tool

CRT_DIR = REPO_ROOT / "crt"
HELPERS = {"test_platform", "test_support_models"}
TEST_PROGRAMS = sorted(
    p.stem for p in (CRT_DIR / "tests").glob("test_*.c") if p.stem not in HELPERS
)


@pytest.fixture(scope="module")
def crt_test_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, str]]:
    """Run ``make -k -j2 -C crt test`` once; map each program to (exit code, its output)."""
    require_tool("cc")
    proc = run_make(CRT_DIR, tmp_path_factory.mktemp("crt-build"), "-k", "test")
    reports = program_reports(proc.stdout)
    reports["__make__"] = (proc.returncode, proc.stdout[-4000:] + proc.stderr[-4000:])
    return reports


@pytest.mark.parametrize("program", TEST_PROGRAMS)
def test_c_program(program: str, crt_test_run: dict[str, tuple[int, str]]) -> None:
    if program not in crt_test_run:
        pytest.fail(f"{program} did not build or run; make output:\n{crt_test_run['__make__'][1]}")
    assert_program_passed(program, *crt_test_run[program])


def test_make_test_succeeds_overall(crt_test_run: dict[str, tuple[int, str]]) -> None:
    rc, tail = crt_test_run["__make__"]
    assert rc == 0, f"make -C crt test failed:\n{tail}"


def test_libraries_build_for_cortex_m4(tmp_path: Path) -> None:
    """Both libraries compile with -std=c99 -Wall -Wextra -Werror for a Cortex-M4 (newlib)."""
    gcc = require_tool("arm-none-eabi-gcc")
    make = require_tool("make")
    ar = str(Path(gcc).with_name("arm-none-eabi-ar"))
    proc = subprocess.run(
        [
            make,
            "-j2",
            "-C",
            str(CRT_DIR),
            f"BUILD={tmp_path}",
            f"CC={gcc}",
            f"AR={ar}",
            "CFLAGS=-mcpu=cortex-m4 -mthumb -Os",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    for lib in ("libtvm_backend.a", "libtvm_runtime.a"):
        assert (tmp_path / lib).stat().st_size > 0


def _compile_config(tmp_path: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "use_config.c"
    src.write_text("#include <tvm/runtime/crt/config.h>\nint config_probe = TVM_CRT_MAX_NDIM;\n")
    return subprocess.run(
        [
            require_tool("cc"),
            "-std=c99",
            "-Wall",
            "-Werror",
            f"-I{CRT_DIR / 'include'}",
            *flags,
            "-fsyntax-only",
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_config_defaults_compile(tmp_path: Path) -> None:
    proc = _compile_config(tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_config_rejects_out_of_range_flag(tmp_path: Path) -> None:
    proc = _compile_config(tmp_path, "-DTVM_CRT_MAX_NDIM=0")
    assert proc.returncode != 0
    assert "TVM_CRT_MAX_NDIM must be between 1 and 32" in proc.stderr


def test_config_reads_project_crt_config(tmp_path: Path) -> None:
    (tmp_path / "crt_config.h").write_text("#define TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES 24\n")
    proc = _compile_config(tmp_path, "-DTVM_CRT_HAVE_CONFIG_H", f"-I{tmp_path}")
    assert proc.returncode != 0
    assert "TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES must be a power of two" in proc.stderr
    (tmp_path / "crt_config.h").write_text("#define TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES 32\n")
    proc = _compile_config(tmp_path, "-DTVM_CRT_HAVE_CONFIG_H", f"-I{tmp_path}")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("flags", "expected_on"),
    [
        ((), 1),
        (("-DTVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK=0",), 0),
        (("-DTVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK=",), 1),  # TVM style: defined, no value
        (("-DTVM_CRT_STACK_ALLOCATOR_ENABLE_FIFO_CHECK=0",), 0),  # TVM's misspelt knob
        (("-DTVM_CRT_STACK_ALLOCATOR_ENABLE_FIFO_CHECK",), 1),
    ],
)
def test_lifo_check_knob(tmp_path: Path, flags: tuple[str, ...], expected_on: int) -> None:
    src = tmp_path / "probe.c"
    src.write_text(
        "#include <tvm/runtime/crt/config.h>\n"
        f"#if TVM_CRT_STACK_ALLOCATOR_LIFO_CHECK_ON != {expected_on}\n"
        '#error "unexpected LIFO check setting"\n'
        "#endif\n"
        "int probe;\n"
    )
    proc = subprocess.run(
        [require_tool("cc"), "-std=c99", "-Wall", "-Werror", f"-I{CRT_DIR / 'include'}", *flags]
        + ["-fsyntax-only", str(src)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr


PORT_SOURCES = [CRT_DIR / "port" / "platform_template.c", *sorted((CRT_DIR / "src" / "platform").glob("*.c"))]


@pytest.mark.parametrize("source", PORT_SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
@pytest.mark.parametrize("compiler", ["cc", "arm-none-eabi-gcc"])
def test_port_template_and_platform_library_compile(tmp_path: Path, source: Path,
                                                    compiler: str) -> None:
    """The port template and the platform library build with -pedantic -Werror on the host and
    for a Cortex-M4 (newlib); test_port_template links and runs them under the sanitizers."""
    target = ["-mcpu=cortex-m4", "-mthumb", "-Os"] if compiler.startswith("arm") else ["-O2"]
    proc = subprocess.run(
        [require_tool(compiler), "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", *target,
         f"-I{CRT_DIR / 'include'}", "-c", str(source), "-o", str(tmp_path / "out.o")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("-DTVM_WORKSPACE_SIZE_BYTES=100", "TVM_WORKSPACE_SIZE_BYTES must be between"),
        ("-DTVM_CRT_PLATFORM_PAGE_SIZE_LOG2=2", "TVM_CRT_PLATFORM_PAGE_SIZE_LOG2 must be between"),
        ("-DTVM_CRT_MODEL_WORKSPACE_SIZE_BYTES=8", "TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES must be between"),
    ],
)
def test_config_rejects_bad_platform_and_workspace_sizes(tmp_path: Path, flag: str,
                                                         message: str) -> None:
    proc = _compile_config(tmp_path, flag)
    assert proc.returncode != 0
    assert message in proc.stderr

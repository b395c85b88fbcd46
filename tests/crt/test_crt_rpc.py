"""The device RPC C tests (crt/tests/test_framing.c, test_session.c, test_rpc_server.c) under ASan+UBSan.

Each C program checks golden wire bytes from the spec and prints "N passed, M failed"; a
nonzero exit or a sanitizer report fails the test here. The three are built once and run by
`make -k`, which prints each program's output between "=== <name>" and "=== <name> exit <rc>".
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from c_build import assert_program_passed, program_reports, run_make
from conftest import require_tool

CRT_DIR = Path(__file__).resolve().parents[2] / "crt"
PROGRAMS = ["test_framing", "test_session", "test_rpc_server"]
RPC_SOURCES = sorted((CRT_DIR / "src" / "rpc_common").glob("*.c")) + sorted(
    (CRT_DIR / "src" / "rpc_server").glob("*.c")
)
CORTEX_M4_FLAGS = [
    "-mcpu=cortex-m4",
    "-mthumb",
    "-Os",
    "-std=c99",
    "-Wall",
    "-Wextra",
    "-Werror",
    "-ffunction-sections",
    "-fdata-sections",
]


@pytest.fixture(scope="module")
def make_output(tmp_path_factory: pytest.TempPathFactory) -> str:
    require_tool("cc")
    build = tmp_path_factory.mktemp("crt_rpc")
    result = run_make(CRT_DIR, build, "-k", *(f"run-{p}" for p in PROGRAMS))
    return result.stdout + result.stderr


@pytest.mark.parametrize("program", PROGRAMS)
def test_crt_rpc_program(make_output: str, program: str) -> None:
    report = program_reports(make_output).get(program)
    assert report is not None, f"{program} did not run:\n{make_output[-6000:]}"
    assert_program_passed(program, *report)


@pytest.mark.parametrize("source", RPC_SOURCES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_rpc_sources_cross_compile_for_cortex_m4(tmp_path: Path, source: Path) -> None:
    gcc = require_tool("arm-none-eabi-gcc")
    result = subprocess.run(
        [gcc, *CORTEX_M4_FLAGS, f"-I{CRT_DIR / 'include'}", "-c", str(source)]
        + ["-o", str(tmp_path / "out.o")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr

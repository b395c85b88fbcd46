"""crt/include is a C99 API for freestanding targets: each public header compiles on its own with
only the headers a freestanding C99 implementation has (<stddef.h>, <stdint.h>, <stdarg.h>,
<stdbool.h>, ...), so no <sys/types.h> (ssize_t) or other POSIX or hosted header creeps in.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import REPO_ROOT, require_tool

INCLUDE = REPO_ROOT / "crt" / "include"
HEADERS = sorted(p.relative_to(INCLUDE).as_posix() for p in INCLUDE.rglob("*.h"))


def _freestanding_compile(cc: str, source: str) -> subprocess.CompletedProcess[str]:
    """Syntax-check ``source`` as C99 with the compiler's own (freestanding) headers only."""
    builtin = subprocess.run([cc, "-print-file-name=include"], capture_output=True, text=True,
                             check=True).stdout.strip()
    assert Path(builtin, "stddef.h").is_file(), f"{cc} has no built-in include directory"
    return subprocess.run(
        [cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-ffreestanding", "-nostdinc",
         "-isystem", builtin, f"-I{INCLUDE}", "-x", "c", "-fsyntax-only", "-"],
        input=source, capture_output=True, text=True, check=False,
    )


@pytest.mark.parametrize("header", HEADERS)
def test_public_header_compiles_alone_freestanding(header: str) -> None:
    proc = _freestanding_compile(require_tool("cc"), f"#include <{header}>\nint probe;\n")
    assert proc.returncode == 0, f"{header}:\n{proc.stderr}"


def test_a_hosted_header_is_caught() -> None:
    """The environment really lacks the hosted headers (the check above can fail)."""
    proc = _freestanding_compile(require_tool("cc"), "#include <sys/types.h>\nssize_t n;\n")
    assert proc.returncode != 0 and "sys/types.h" in proc.stderr

"""What the STM32 test modules share: the tool check with the no-QEMU-left guard, and building
a project for a board (the project is closed again if the build fails)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import require_tool

from project_api.api.project import GeneratedProject, generate_project

QEMU_BOARD = "qemu_netduinoplus2"
_OURS: list[str] = []  # the pytest base directory: QEMUs of other users' tests do not count


def qemu_pids() -> set[int]:
    """qemu-system-arm processes (pgrep) running a firmware of this test session."""
    out = subprocess.run(["pgrep", "-a", "-x", "qemu-system-arm"], capture_output=True,
                         text=True)
    return {int(line.split()[0]) for line in out.stdout.splitlines()
            if all(mark in line for mark in _OURS)}


@pytest.fixture(scope="module", autouse=True)
def stm32_tools_and_no_qemu_left(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Import into a test module: requires the tools (CI=true: fails if missing) and fails the
    module if it leaves a qemu-system-arm of this session running."""
    for tool in ("make", "arm-none-eabi-gcc", "qemu-system-arm", "pgrep"):
        require_tool(tool)
    # The trailing separator: xdist worker gw1's folder (.../popen-gw1) is a prefix of gw10's.
    _OURS[:] = [os.path.join(tmp_path_factory.getbasetemp(), "")]
    before = qemu_pids()
    yield
    deadline = time.monotonic() + 5
    while qemu_pids() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not qemu_pids() - before, "a qemu-system-arm process was left running"


def build_project(mlf: Path, where: Path, board: str = QEMU_BOARD,
                  **options: Any) -> GeneratedProject:
    """Generate and build an stm32 project (warnings are errors unless told otherwise)."""
    return generate_project("stm32", mlf, where,
                            {"board": board, "warning_as_error": True, **options}, build=True)

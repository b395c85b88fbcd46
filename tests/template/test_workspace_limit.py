"""Issue 35 item 2: a module whose workspace (metadata.json's ``workspace_size_bytes``) is larger
than the chosen board's RAM (boards.yaml), or on the host template than the option
``max_model_workspace_bytes`` (default 1 GiB), is refused at ``generate`` in one line naming the
module, the workspace bytes, the RAM or cap and what to change, not in the C build. Generation
only: nothing here needs a compiler."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from mlf_kernels import add_module, write_mlf

from project_api.api.project import generate_project
from project_api.errors import ProjectAPIError
from project_api.system import paths
from project_api.template.boards import read_boards

HUGE = 2 ** 31  # under the 32-bit bound the archive reader holds to, over the 1 GiB cap


def _mlf(tmp_path: Path, workspace: int) -> Path:
    mod = dataclasses.replace(add_module("big"), workspace_size_bytes=workspace)
    return write_mlf(tmp_path / f"ws{workspace}.tar", [mod])


def _refused(template: str, mlf: Path, out: Path, options: dict) -> str:
    with pytest.raises(ProjectAPIError) as exc:
        generate_project(template, mlf, out, options, build=False)
    text = str(exc.value)
    assert "\n" not in text, text
    assert not out.exists() or not any(out.iterdir()), "a half-made project was left"
    return text


def test_host_refuses_a_workspace_over_the_default_cap(tmp_path: Path) -> None:
    text = _refused("host", _mlf(tmp_path, HUGE), tmp_path / "prj", {})
    assert f"module 'big' needs a workspace of {HUGE} bytes" in text, text
    assert f"the cap of {1 << 30} bytes" in text and "max_model_workspace_bytes" in text, text


def test_host_cap_is_an_option(tmp_path: Path) -> None:
    mlf = _mlf(tmp_path, 1 << 20)
    text = _refused("host", mlf, tmp_path / "small", {"max_model_workspace_bytes": 65536})
    assert "needs a workspace of 1048576 bytes, more than the cap of 65536 bytes" in text, text
    with generate_project("host", mlf, tmp_path / "ok", {}, build=False):
        assert (tmp_path / "ok" / "model").is_dir()


@pytest.mark.parametrize(("template", "board"), [("stm32", "qemu_netduinoplus2"),
                                               ("stm32", "nucleo_l432kc"),
                                               ("riscv", "qemu_sifive_e")])
def test_boards_refuse_a_workspace_over_their_ram(tmp_path: Path, template: str,
                                                  board: str) -> None:
    boards = read_boards(paths.template_dir(template) / "boards.yaml")
    ram = boards[board]["memory"]["ram"]["length"]
    text = _refused(template, _mlf(tmp_path, ram + 1), tmp_path / "prj", {"board": board})
    assert f"module 'big' needs a workspace of {ram + 1} bytes" in text, text
    assert f"the RAM of board {board} ({ram} bytes, boards.yaml)" in text, text
    assert "-o board=" in text, text


def test_cli_generate_prints_the_one_line(tmp_path: Path) -> None:
    mlf = _mlf(tmp_path, HUGE)
    out = subprocess.run([sys.executable, "-m", "project_api", "generate", "--model", str(mlf),
                          "--out", str(tmp_path / "prj"), "--template", "host"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode != 0, out
    errors = [line for line in out.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 1 and "internal error" not in out.stderr, out.stderr
    assert f"needs a workspace of {HUGE} bytes" in errors[0], out.stderr
    assert not (tmp_path / "prj").exists()

"""Issue #17 on the stm32 template (QEMU netduinoplus2 and boards that are only built): a link
our client opens, project types without RPC, a damaged image, extra_models given every wrong
way, a firmware that does not fit, and an archive with kernels slower than the board's. Each
test runs the real command line on real projects and asserts the one line, the exit status and
the files written or not."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from stm32_support import (  # noqa: F401  (the fixture is autouse)
    QEMU_BOARD,
    qemu_pids,
    stm32_tools_and_no_qemu_left,
)

from project_api.emit import emit


def _cli(*args: str | Path, cwd: Path | None = None,
         timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "project_api", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def _one_line_error(out: subprocess.CompletedProcess[str], status: int = 1) -> str:
    assert out.returncode == status, (out.returncode, out.stdout, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, out.stderr
    line = lines[0]
    assert "internal error" not in line and "Traceback" not in out.stderr, out.stderr
    assert "; " in line, line
    return line


@pytest.fixture(scope="module")
def archives(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("stm32_messages")
    return {
        "work": work,
        "hello": emit(models_dir / "hello_world_int8.tflite", work / "hello.tar",
                      name="default", target="cortex-m4"),
        "hello_generic": emit(models_dir / "hello_world_int8.tflite", work / "hello_g.tar",
                              name="default"),
        "speech": emit(models_dir / "micro_speech_int8.tflite", work / "speech.tar",
                       name="speech", target="cortex-m4"),
        "ad": emit(models_dir / "ad01_int8.tflite", work / "ad.tar", name="default",
                   target="cortex-m4"),
        "tflite": models_dir / "hello_world_int8.tflite",
    }


@pytest.fixture(scope="module")
def built(archives: dict[str, Any]) -> Path:
    """A built host_driven project for QEMU."""
    prj = archives["work"] / "qemu"
    out = _cli("generate", "--template", "stm32", "--model", archives["hello"].path, "--out",
               prj, "-q")
    assert out.returncode == 0, out.stderr
    assert _cli("build", prj, "-q").returncode == 0
    return prj


# --- item 1: a link our client opens ------------------------------------------------------------


def _closed_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serial_url_refused_says_so_without_verbose(built: Path) -> None:
    port = _closed_port()
    out = _cli("run", built, "-o", f"serial_url=socket://127.0.0.1:{port}")
    line = _one_line_error(out)
    assert f"connection refused to socket://127.0.0.1:{port} (nothing listens there)" in line
    assert "TransportClosedError" not in line and "project server failed" not in line
    assert "-v to see the server's traceback" not in line  # there is none: our client failed
    assert not qemu_pids()


# --- item 3: project types without RPC ------------------------------------------------------------


def test_run_on_a_standalone_firmware_names_the_project_type(archives, tmp_path: Path) -> None:
    prj = tmp_path / "alone"
    assert _cli("generate", "--template", "stm32", "--model", archives["hello"].path, "--out",
                prj, "-o", "project_type=standalone", "-q").returncode == 0
    assert _cli("build", prj, "-q").returncode == 0
    line = _one_line_error(_cli("run", prj))
    assert "is a standalone project (project_type=standalone)" in line
    assert "emulator exited" not in line and "waiting for" not in line
    assert not (prj / "build" / "qemu.log").exists()  # no emulator was started


# --- item 4: the image is read as an ELF file -----------------------------------------------------


def test_a_truncated_image_is_refused_by_flash_and_run(built: Path, tmp_path: Path) -> None:
    prj = tmp_path / "cut"
    shutil.copytree(built, prj)
    elf = prj / "build" / "firmware.elf"
    whole = elf.read_bytes()
    for size in (100, len(whole) // 2):
        elf.write_bytes(whole[:size])
        for verb in ("flash", "run"):
            line = _one_line_error(_cli(verb, prj))
            assert f"{elf} is truncated" in line, line
            assert "rebuild it with 'project-api build'" in line
        assert not (prj / "build" / "qemu.log").exists()
    elf.write_bytes(whole)
    out = _cli("flash", prj)
    assert out.returncode == 0 and out.stdout.strip() == f"flashed {prj}"
    assert not (prj / "build" / "flashed.json").exists()  # nothing reads such a record


# --- extra_models: crashes 1 and 4, items 5 and 6 ------------------------------------------------


def _truncated_copies(tar_path: Path, where: Path) -> dict[str, Path]:
    """The archive cut at the header of metadata.json (a clean end: tarfile reads on, only the
    missing end-of-archive blocks tell) and in the middle of a member's data."""
    with tarfile.open(tar_path) as tar:
        offset = next(m.offset for m in tar.getmembers() if m.name.endswith("metadata.json"))
    data = tar_path.read_bytes()
    at_header, mid_member = where / "at_header.tar", where / "mid_member.tar"
    at_header.write_bytes(data[:offset])
    mid_member.write_bytes(data[:offset - 700])
    return {"at_header": at_header, "mid_member": mid_member}


def test_extra_models_that_are_no_archive_are_one_line_errors(archives, tmp_path: Path) -> None:
    cut = _truncated_copies(archives["speech"].path, tmp_path)
    rand = tmp_path / "random.bin"
    rand.write_bytes(os.urandom(4096))
    cases = {
        cut["at_header"]: "truncated tar archive (it ends after ",
        cut["mid_member"]: "corrupt tar archive",
        rand: "not a readable tar archive (no tar, gzip, bzip2 or xz header)",
        archives["tflite"]: "is a TFLite model, not a Model Library Format archive; emit it "
                            "first ('project-api emit",
    }
    for given, message in cases.items():
        out = _cli("generate", "--template", "stm32", "--model", archives["hello"].path, "--out",
                   tmp_path / "prj", "-o", "project_type=standalone", "-o",
                   f"extra_models={given}")
        line = _one_line_error(out)
        assert f"extra_models: {given}" in line and message in line, line
        assert line.count("calling method") == 0 and "generate_project: generate" not in line
        assert "FileNotFoundError" not in line
        assert not (tmp_path / "prj").exists()  # the half-made project is removed


def test_extra_models_relative_paths_are_the_current_directorys(archives, tmp_path) -> None:
    here = tmp_path / "cwd"
    here.mkdir()
    shutil.copy(archives["speech"].path, here / "b.tar")
    out = _cli("generate", "--template", "stm32", "--model", archives["hello"].path, "--out",
               tmp_path / "prj", "-o", "project_type=standalone", "-o", "extra_models=b.tar",
               cwd=here)
    assert out.returncode == 0, out.stderr
    models = (tmp_path / "prj" / "src" / "ai" / "ai_models.c").read_text()
    assert '"speech"' in models and '"default"' in models


def test_the_same_archive_twice_is_refused(archives, tmp_path: Path) -> None:
    speech = archives["speech"].path
    copy = tmp_path / "copy.tar"
    shutil.copy(speech, copy)
    for extra, first in ((f"{speech},{copy}", str(speech)),
                         (str(archives["hello"].path), "the project's own model")):
        out = _cli("generate", "--template", "stm32", "--model", archives["hello"].path,
                   "--out", tmp_path / "prj", "-o", "project_type=standalone", "-o",
                   f"extra_models={extra}")
        line = _one_line_error(out)
        assert f"is the same archive as {first}" in line and "drop the repeat" in line
        assert not (tmp_path / "prj").exists()


# --- item 7: a firmware that does not fit ---------------------------------------------------------


def _c_arrays(mlf_path: Path) -> dict[str, int]:
    """Every constant array of the archive's C (name -> bytes), read from the declarations."""
    with tarfile.open(mlf_path) as tar:
        text = "".join(tar.extractfile(m).read().decode() for m in tar.getmembers()
                       if m.name.endswith(".c"))
    sizes = {"int8_t": 1, "uint8_t": 1, "int16_t": 2, "int32_t": 4, "float": 4}
    return {name: int(n) * sizes[kind] for kind, name, n in
            re.findall(r"static const (\w+) (\w+)\[(\d+)\]", text)}


def test_flash_overflow_writes_the_report_and_names_the_largest_parts(archives,
                                                                        tmp_path: Path) -> None:
    prj = tmp_path / "l432"
    assert _cli("generate", "--template", "stm32", "--model", archives["ad"].path, "--out", prj,
                "-o", "board=nucleo_l432kc", "-o", "workspace_size_bytes=16384",
                "-q").returncode == 0
    line = _one_line_error(_cli("build", prj))
    assert "the firmware does not fit nucleo_l432kc: FLASH by " in line
    assert "RAM by" not in line and "workspace_size_bytes" not in line  # only flash overflows
    assert "pick a board with more flash" in line
    largest = re.search(r"FLASH by \d+ bytes of 262144 \(largest: (.*?)\)", line)
    assert largest is not None, line
    named = [(p.rsplit(" ", 1)[0], int(p.rsplit(" ", 1)[1])) for p in largest.group(1).split(", ")]
    arrays = _c_arrays(archives["ad"].path)
    want = sorted(arrays.values(), reverse=True)[:3]
    assert [size for _, size in named] == want
    assert all(arrays[name] == size for name, size in named)
    report = (prj / "build" / "memory.txt").read_text()
    assert "does not fit: FLASH overflows by" in report and "largest in flash:" in report
    assert (prj / "build" / "memory.json").is_file()


def test_ram_overflow_points_at_the_options_that_size_ram(archives, tmp_path: Path) -> None:
    prj = tmp_path / "ram"
    assert _cli("generate", "--template", "stm32", "--model", archives["hello"].path, "--out",
                prj, "-o", "workspace_size_bytes=200000", "-q").returncode == 0
    line = _one_line_error(_cli("build", prj))
    assert f"the firmware does not fit {QEMU_BOARD}: RAM by " in line
    assert "largest: g_pool 200000" in line  # the workspace_size_bytes pool, as asked
    assert "lower workspace_size_bytes (now 200000)" in line
    assert "FLASH by" not in line and "more flash" not in line
    assert "does not fit: RAM overflows by" in (prj / "build" / "memory.txt").read_text()


# --- item 8: kernels slower than the board's ------------------------------------------------------


def test_generate_warns_of_the_portable_kernels_on_a_dsp_board(archives, tmp_path: Path) -> None:
    out = _cli("generate", "--template", "stm32", "--model", archives["hello_generic"].path,
               "--out", tmp_path / "generic", "-q")
    assert out.returncode == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, out.stderr
    assert "emitted with the portable kernels" in warnings[0]
    assert f"{QEMU_BOARD} is a cortex-m4" in warnings[0]
    assert "--target cortex-m4" in warnings[0]
    out = _cli("generate", "--template", "stm32", "--model", archives["hello"].path, "--out",
               tmp_path / "dsp", "-q")
    assert out.returncode == 0 and "warning" not in out.stderr


# --- item 13: options that cannot change after generate ------------------------------------------


def test_a_board_given_to_run_is_refused_not_ignored(built: Path) -> None:
    line = _one_line_error(_cli("run", built, "-o", "board=nucleo_f429zi"), status=2)
    assert f"option board cannot change after generate: {built} was generated with " \
           f"board='{QEMU_BOARD}'; generate the project again with -o board=nucleo_f429zi" in line
    assert not qemu_pids()

"""Issue 35: --save / --output naming a FIFO, a device, a directory or an unwritable place fail at
once with one line; nothing blocks on opening a FIFO nobody reads."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from project_api.cli import main


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "out.npz"
    os.mkfifo(path)
    return path


def _run(capsys: pytest.CaptureFixture, argv: list[str]) -> tuple[int, str]:
    old = signal.signal(signal.SIGALRM, signal.default_int_handler)
    signal.alarm(20)  # a regression would block for ever on the FIFO
    try:
        rc = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err.strip()
    assert "internal error" not in err and len(err.splitlines()) == 1, err
    return rc, err


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_validate_save_fifo(tmp_path: Path, fifo: Path, capsys, force) -> None:
    rc, err = _run(capsys, ["validate", "--template", "host", "--model", str(tmp_path / "m.tar"),
                            "--data", str(tmp_path), "--save", str(fifo), *force])
    assert rc == 2 and "is a FIFO" in err


@pytest.mark.parametrize("force", [[], ["--force"]])
def test_run_output_fifo(tmp_path: Path, fifo: Path, capsys, force) -> None:
    rc, err = _run(capsys, ["run", str(tmp_path), "--output", str(fifo), *force])
    assert rc == 2 and "is a FIFO" in err


def test_run_output_device_and_directory(tmp_path: Path, capsys) -> None:
    rc, err = _run(capsys, ["run", str(tmp_path), "--output", "/dev/null", "--force"])
    assert rc == 2 and "is a device" in err
    rc, err = _run(capsys, ["run", str(tmp_path), "--output", str(tmp_path), "--force"])
    assert rc == 2 and "is a directory" in err


def test_output_in_missing_folder(tmp_path: Path, capsys) -> None:
    rc, err = _run(capsys, ["run", str(tmp_path), "--output", str(tmp_path / "no" / "y.npz")])
    assert rc == 2 and "folder does not exist" in err


def test_long_output_value_is_quoted_short(tmp_path: Path, capsys) -> None:
    long = tmp_path / ("a" * 200) / ("b" * 200) / "y.npz"
    rc, err = _run(capsys, ["run", str(tmp_path), "--output", str(long)])
    assert rc == 2 and len(err) < 400 and "characters)" in err

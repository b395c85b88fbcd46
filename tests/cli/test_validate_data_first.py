"""Issue 35: ``validate --data`` (and ``--reference``) is checked before anything is generated,
built or opened: a wrong path, an empty folder, a damaged .npz or .npy header, or a FIFO gets
one line at once, and no project is generated (no firmware build)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from mlf_kernels import add_mlf

from project_api.api import project as api_project
from project_api.cli import main


def _bad(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / {"missing": "nope.npz", "empty": "empty", "npz": "junk.npz",
                       "npy": "cut.npy", "fifo": "fifo.npz"}[kind]
    if kind == "empty":
        path.mkdir()
    elif kind == "npz":
        path.write_bytes(b"PK\x03\x04" + b"garbage" * 10)
    elif kind == "npy":
        np.save(path, np.zeros((3, 4), np.int8))
        path.write_bytes(path.read_bytes()[:20])
    elif kind == "fifo":
        os.mkfifo(path)
    return path


WORDS = {"missing": "does not exist", "empty": "holds no .npy, .txt or .h files",
         "npz": "cannot be read as an .npz", "npy": "cannot be read as a .npy",
         "fifo": "is neither a file nor a folder"}


def _run(capsys: pytest.CaptureFixture, argv: list[str]) -> tuple[int, str]:
    def no_generate(*args: object, **kwargs: object) -> None:
        raise AssertionError("a project was generated before --data was checked")

    old = signal.signal(signal.SIGALRM, signal.default_int_handler)
    signal.alarm(60)  # a regression could block on the FIFO
    try:
        with mock.patch.object(api_project, "generate_project", no_generate):
            rc = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err.strip()
    lines = [line for line in err.splitlines() if line.startswith("error")]
    assert len(lines) == 1 and "internal error" not in err, err
    return rc, lines[0]


@pytest.mark.parametrize("kind", list(WORDS))
def test_bad_data_fails_before_generate(tmp_path: Path, capsys, kind: str) -> None:
    mlf = add_mlf(tmp_path / "m.tar")
    data = _bad(tmp_path, kind)
    rc, line = _run(capsys, ["validate", "--template", "host", "--model", str(mlf), "--data",
                             str(data), "--out", str(tmp_path / "prj")])
    assert rc != 0
    assert line.startswith("error: data ") and str(data) in line and WORDS[kind] in line, line
    assert not (tmp_path / "prj").exists()


def test_bad_reference_fails_before_generate(tmp_path: Path, capsys) -> None:
    mlf = add_mlf(tmp_path / "m.tar")
    np.savez(tmp_path / "ok.npz", a=np.zeros((1, 1, 4), np.int8), b=np.zeros((1, 1, 4), np.int8))
    rc, line = _run(capsys, ["validate", "--template", "host", "--model", str(mlf), "--data",
                             str(tmp_path / "ok.npz"), "--reference", str(tmp_path / "no.npy"),
                             "--out", str(tmp_path / "prj")])
    assert rc != 0 and f"reference {tmp_path / 'no.npy'} does not exist" in line, line
    assert not (tmp_path / "prj").exists()


def test_bad_data_with_a_project_dir_fails_before_it_is_opened(tmp_path: Path, capsys) -> None:
    # tmp_path is no project: the data is refused first, so the line is about the data.
    rc, line = _run(capsys, ["validate", str(tmp_path), "--data", str(tmp_path / "nope.npz")])
    assert rc != 0 and "does not exist" in line and "nope.npz" in line, line

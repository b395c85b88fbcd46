"""Issue 35.6, the CLI's last line of defence: every command, given crafted bad input in-process,
exits non-zero with exactly one ``error:`` line on stderr that never says "internal error", and
an error line quotes at most about 200 characters of a user's value (a 120 KB ``-o`` value, a
y_labels.csv row of 10^6 columns, a path too long for the system).

Nothing here builds or starts a device: the inputs are refused before that, so the whole corpus
runs in a few seconds. The inputs are made in code (a real emitted archive, then damaged).
"""

from __future__ import annotations

import io
import json
import signal
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from mlf_factory import mlf_files, write_tar

from project_api.cli import MAX_ERROR_CHARS, main, shorten_values

BIG = "x" * 120_000


@pytest.fixture(scope="module")
def w(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A generated (not built) host project of a one-operator int8 model, its archive and
    model, and the hostile inputs of the corpus."""
    from project_api.tflite.builder import single_op_model

    tmp = tmp_path_factory.mktemp("hostile_corpus")
    tflite = tmp / "fc.tflite"
    tflite.write_bytes(single_op_model("FULLY_CONNECTED", "int8"))
    assert main(["emit", str(tflite), "--out", str(tmp / "fc.tar"), "-q"]) == 0
    assert main(["generate", "--template", "host", "--model", str(tmp / "fc.tar"),
                 "--out", str(tmp / "prj"), "-q"]) == 0
    paths = {"tmp": tmp, "tflite": tflite, "mlf": tmp / "fc.tar", "prj": tmp / "prj"}

    (tmp / "junk.tar").write_bytes(b"\x00garbage" * 100)
    (tmp / "trunc.tflite").write_bytes(tflite.read_bytes()[: len(tflite.read_bytes()) // 2])
    (tmp / "notprj").mkdir()
    files = mlf_files(7)
    files["metadata.json"] = b"[" * 100_000 + b"]" * 100_000
    write_tar(tmp / "deep.tar", files)
    files = mlf_files(7)
    meta = json.loads(files["metadata.json"])
    meta["modules"]["default"]["memory"]["functions"]["main"][0]["io_size_bytes"] = -8
    files["metadata.json"] = json.dumps(meta).encode()
    write_tar(tmp / "negative.tar", files)

    huge = io.BytesIO()  # a .npy header declaring float32[3e6, 4e6] (44.6 TiB)
    np.lib.format.write_array_header_1_0(
        huge, {"descr": "<f4", "fortran_order": False, "shape": (3_000_000, 4_000_000)})
    (tmp / "huge.npy").write_bytes(huge.getvalue() + bytes(16))
    (tmp / "hugedata").mkdir()
    (tmp / "hugedata" / "x.npy").write_bytes(huge.getvalue() + bytes(16))
    (tmp / "zipjunk.npz").write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)

    wide = tmp / "wide"  # a y_labels.csv row of a million columns
    wide.mkdir()
    (wide / "y_labels.csv").write_text(",".join(["a"] * 1_000_000) + "\n")
    longfield = tmp / "longfield"  # one field over the csv module's 128 KiB
    longfield.mkdir()
    (longfield / "y_labels.csv").write_text("a.bin,12," + "9" * 200_000 + "\n")
    return paths


def _one_error(capsys: pytest.CaptureFixture, argv: list[str]) -> tuple[int, str]:
    old = signal.signal(signal.SIGALRM, signal.default_int_handler)
    signal.alarm(30)  # a hang is a failure too
    try:
        rc = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert rc != 0, err[-500:]
    assert len(errors) == 1, err[-500:]
    assert "internal error" not in err and "Traceback" not in err, err[-500:]
    assert len(errors[0]) <= MAX_ERROR_CHARS + 100
    return rc, errors[0]


def _t(w: dict[str, Path], name: str) -> str:
    return str(w["tmp"] / name)


#: (id, argv from the fixture's paths, a text the error line must hold)
CORPUS: list[tuple[str, Callable[[dict[str, Path]], list[str]], str]] = [
    ("info-junk-tar", lambda w: ["info", _t(w, "junk.tar")], "not a readable tar"),
    ("info-deep-metadata", lambda w: ["info", _t(w, "deep.tar")], "nested more than"),
    ("info-not-a-project", lambda w: ["info", _t(w, "notprj")], "No Project API server"),
    ("generate-junk-tar", lambda w: ["generate", "--template", "host", "--model",
                                     _t(w, "junk.tar"), "--out", _t(w, "o1")],
     "not a readable tar"),
    ("generate-negative-io", lambda w: ["generate", "--template", "host", "--model",
                                        _t(w, "negative.tar"), "--out", _t(w, "o2")],
     "io_size_bytes must be a non-negative integer"),
    ("generate-deep", lambda w: ["generate", "--template", "host", "--model", _t(w, "deep.tar"),
                                 "--out", _t(w, "o3")], "nested more than"),
    ("generate-stm32-deep", lambda w: ["generate", "--template", "stm32", "--model",
                                       _t(w, "deep.tar"), "--out", _t(w, "o3s")],
     "nested more than"),
    ("emit-truncated", lambda w: ["emit", _t(w, "trunc.tflite"), "--out", _t(w, "e.tar")],
     "TFLite"),
    ("emit-bad-name", lambda w: ["emit", str(w["tflite"]), "--name", "$(touch X)",
                                 "--out", _t(w, "e2.tar")], "not a C identifier"),
    ("analyze-truncated", lambda w: ["analyze", _t(w, "trunc.tflite")], "TFLite"),
    ("validate-huge-npy", lambda w: ["validate", str(w["prj"]), "--data", _t(w, "hugedata")],
     "over the limit"),
    ("validate-huge-reference", lambda w: ["validate", str(w["prj"]), "--data",
                                           _t(w, "hugedata"), "--reference", _t(w, "huge.npy")],
     "over the limit"),
    ("validate-zip-junk", lambda w: ["validate", str(w["prj"]), "--data", _t(w, "zipjunk.npz")],
     "cannot be read as an .npz"),
    ("run-huge-input", lambda w: ["run", str(w["prj"]), "--input", f"x={_t(w, 'huge.npy')}"],
     ""),
    ("run-not-a-project", lambda w: ["run", _t(w, "notprj")], "No Project API server"),
    ("mlperftiny-not-a-project", lambda w: ["mlperftiny", _t(w, "notprj"), "--mode",
                                            "accuracy", "--data", _t(w, "wide")],
     "not a generated project"),
    ("mlperftiny-long-field", lambda w: ["mlperftiny", str(w["prj"]), "--mode", "accuracy",
                                         "--data", _t(w, "longfield")], "y_labels.csv:1"),
    ("profile-not-a-project", lambda w: ["profile", _t(w, "notprj")], "No Project API server"),
    ("build-not-a-project", lambda w: ["build", _t(w, "notprj")], "No Project API server"),
    ("flash-not-a-project", lambda w: ["flash", _t(w, "notprj")], "No Project API server"),
]


@pytest.mark.parametrize("argv, expect", [(c[1], c[2]) for c in CORPUS],
                         ids=[c[0] for c in CORPUS])
def test_corpus_gives_one_clear_line(w, capsys, argv, expect) -> None:
    _, line = _one_error(capsys, argv(w))
    assert expect in line
    assert not (Path.cwd() / "X").exists()


#: Commands given a 120 KB value: each line quotes at most 200 characters of it.
LONG: list[tuple[str, Callable[[dict[str, Path]], list[str]]]] = [
    ("generate-o", lambda w: ["generate", "--template", "host", "--model", str(w["mlf"]),
                              "--out", _t(w, "l1"), "-o", BIG]),
    ("generate-o-value", lambda w: ["generate", "--template", "host", "--model", str(w["mlf"]),
                                    "--out", _t(w, "l2"), "-o", "verbose=" + BIG]),
    ("generate-stm32-o-value", lambda w: ["generate", "--template", "stm32", "--model",
                                          str(w["mlf"]), "--out", _t(w, "l2s"),
                                          "-o", "board=" + BIG]),
    ("generate-template", lambda w: ["generate", "--template", BIG, "--model", str(w["mlf"]),
                                     "--out", _t(w, "l3")]),
    ("generate-model", lambda w: ["generate", "--template", "host", "--model", BIG,
                                  "--out", _t(w, "l4")]),
    ("generate-input-spec", lambda w: ["generate", "--template", "host", "--model",
                                       str(w["mlf"]), "--out", _t(w, "l5"),
                                       "--input-spec", BIG]),
    ("analyze-o", lambda w: ["analyze", str(w["tflite"]), "--template", "stm32", "-o", BIG]),
    ("run-input", lambda w: ["run", str(w["prj"]), "--input", BIG]),
    ("build-o", lambda w: ["build", str(w["prj"]), "-o", BIG]),
    ("info-path", lambda w: ["info", BIG]),
    ("unknown-command", lambda w: [BIG]),
    ("mlperftiny-wide-row", lambda w: ["mlperftiny", str(w["prj"]), "--mode", "accuracy",
                                       "--data", _t(w, "wide")]),
]


@pytest.mark.parametrize("argv", [c[1] for c in LONG], ids=[c[0] for c in LONG])
def test_long_values_are_quoted_short(w, capsys, argv) -> None:
    _, line = _one_error(capsys, argv(w))
    assert len(line) < 700, line[:300]
    assert "characters)" in line or "fields" in line


def test_wide_row_names_file_line_and_count(w, capsys) -> None:
    _, line = _one_error(capsys, ["mlperftiny", str(w["prj"]), "--mode", "accuracy",
                                  "--data", _t(w, "wide")])
    assert f"{w['tmp'] / 'wide' / 'y_labels.csv'}:1: expected file,classes,class" in line
    assert "got 1000000 fields" in line


def test_shorten_values_keeps_a_short_line_whole() -> None:
    line = "option 'verbose' expects a bool, got 'maybe'; pass true or false"
    assert shorten_values(line) == line
    cut = shorten_values("got " + "y" * 5000 + " there")
    assert cut == "got " + "y" * 200 + "... (5000 characters) there"
    assert len(shorten_values("a " * 50_000)) < MAX_ERROR_CHARS + 40

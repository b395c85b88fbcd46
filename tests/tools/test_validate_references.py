"""``validate --data/--reference`` from the files published projects ship beside a model: one
.npy, .txt or C header (.h) sample input and output, a folder of ``<name>.npy``/``.txt``/``.h``;
checked in one command on the published TVM archives rebuilt in tests/tvm_corpus.py (which need
no ``--input-spec``), among them the 2023 archive's own ``samples/*.h`` pair. The expected
outputs are numpy's, computed on the same network."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import require_tool
from tvm_corpus import build_archive

from project_api.tools.samples import TensorSpec, load_arrays, load_reference, load_tensor_files
from project_api.tools.validate import ValidationError


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "project_api", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def sine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The published sine archive generated and built on the host template, no --input-spec."""
    require_tool("make")
    require_tool("cc")
    work = tmp_path_factory.mktemp("sine")
    entry = build_archive("world-2021-keras-dense", work)
    out = _cli("generate", "-t", "host", "-m", entry.path, "--out", work / "prj", "-q")
    assert out.returncode == 0, out.stderr
    out = _cli("build", work / "prj", "-q")
    assert out.returncode == 0, out.stderr
    yield {"entry": entry, "project": work / "prj"}


def _validate(project: Path, *args: str | Path) -> dict:
    out = _cli("validate", project, *args, "--json", "-q", "--number", "0")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _max_abs(report: dict) -> float:
    (comparison,) = [c for c in report["comparisons"] if c["key"] == "reference"]
    (metrics,) = comparison["outputs"]
    return metrics["max_abs"]


def test_one_published_pair_in_one_command(sine: dict, tmp_path: Path) -> None:
    model = sine["entry"].model
    x = np.array([[0.75]], np.float32)  # one sample, no sample axis, as projects publish it
    (y,) = model.reference({"dense_4_input": x})
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    report = _validate(sine["project"], "--data", tmp_path / "x.npy",
                       "--reference", tmp_path / "y.npy", "--fail-over", "max_abs=1e-5")
    assert report["samples"] == 1 and _max_abs(report) <= 1e-5
    # The same pair as text: the output's numbers, the shape taken from the model.
    (tmp_path / "y.txt").write_text(f"{float(y[0, 0]):.9g}\n")
    report = _validate(sine["project"], "--data", tmp_path / "x.npy",
                       "--reference", tmp_path / "y.txt", "--fail-over", "max_abs=1e-5")
    assert _max_abs(report) <= 1e-5
    # A wrong reference fails its gate (exit 1): the comparison is real.
    np.save(tmp_path / "wrong.npy", y + np.float32(0.5))
    out = _cli("validate", sine["project"], "--data", tmp_path / "x.npy", "--reference",
               tmp_path / "wrong.npy", "--fail-over", "max_abs=1e-3", "-q", "--number", "0")
    assert out.returncode == 1 and "max_abs" in out.stdout + out.stderr


def test_many_samples_from_npy_txt_and_folders(sine: dict, tmp_path: Path) -> None:
    model = sine["entry"].model
    xs = np.random.default_rng(3).uniform(-3, 3, (12, 1, 1)).astype(np.float32)
    ys = np.concatenate([model.reference({"dense_4_input": x})[0][None] for x in xs])
    np.save(tmp_path / "xs.npy", xs)
    np.save(tmp_path / "ys.npy", ys)
    (tmp_path / "ys.txt").write_text(" ".join(f"{v:.9g}" for v in ys.reshape(-1)) + "\n")
    folder = tmp_path / "refs"
    folder.mkdir()
    (folder / "output.txt").write_text(",\n".join(f"{v:.9g}" for v in ys.reshape(-1)))
    for ref in (tmp_path / "ys.npy", tmp_path / "ys.txt", folder):
        report = _validate(sine["project"], "--data", tmp_path / "xs.npy", "--reference", ref)
        assert report["samples"] == 12 and _max_abs(report) <= 1e-5, ref


def _spec(shape: tuple[int, ...], dtype: str = "float32", name: str = "y") -> TensorSpec:
    return TensorSpec(name=name, c_name=name, dtype=np.dtype(dtype), shape=shape)


def test_the_archives_own_sample_pair(tmp_path: Path) -> None:
    """The 2023 archive carries samples/dummy_input.h and samples/expected_output.h: one command
    checks the device against them (the host template builds its Cortex-M DSP code)."""
    import tarfile

    entry = build_archive("world-2023-cortex-m7-int8", tmp_path)
    with tarfile.open(entry.path) as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    samples = tmp_path / "unpacked" / "samples"
    out = _cli("generate", "-t", "host", "-m", entry.path, "--out", tmp_path / "prj", "-q")
    assert out.returncode == 0, out.stderr
    assert _cli("build", tmp_path / "prj", "-q").returncode == 0
    report = _validate(tmp_path / "prj", "--data", samples / "dummy_input.h", "--reference",
                       samples / "expected_output.h", "--fail-under", "exact=1.0")
    (comparison,) = [c for c in report["comparisons"] if c["key"] == "reference"]
    assert report["samples"] == 1 and comparison["outputs"][0]["exact"] == 1.0
    # A wrong expected output fails the gate.
    wrong = (samples / "expected_output.h").read_text()
    value = int(wrong.split("{")[1].split(",")[0])
    (tmp_path / "wrong.h").write_text(wrong.replace(f"{{{value},", f"{{{value + 1},"))
    out = _cli("validate", tmp_path / "prj", "--data", samples / "dummy_input.h", "--reference",
               tmp_path / "wrong.h", "--fail-under", "exact=1.0", "-q", "--number", "0")
    assert out.returncode == 1


def _spec(shape: tuple[int, ...], dtype: str = "float32", name: str = "y") -> TensorSpec:
    return TensorSpec(name=name, c_name=name, dtype=np.dtype(dtype), shape=shape)


def test_reference_forms_and_their_errors(tmp_path: Path) -> None:
    one = [_spec((1, 4))]
    np.save(tmp_path / "flat.npy", np.arange(4, dtype=np.float32))  # one sample, any shape
    got = load_reference(tmp_path / "flat.npy", one)
    assert got["y"].shape == (1, 1, 4) and got["y"].tolist() == [[[0, 1, 2, 3]]]
    (tmp_path / "q.txt").write_text("1 -2\n3 127\n5 6 7 8\n")
    got = load_reference(tmp_path / "q.txt", [_spec((1, 4), "int8")])
    assert got["y"].dtype == np.int8 and got["y"].reshape(-1).tolist() == [1, -2, 3, 127, 5, 6, 7, 8]
    (tmp_path / "img.h").write_text("#include <stdint.h>\n/* {not this} */\n"
                                    "static const unsigned char IMG[] = {\n0x1f,0x80,\n3, 4,};\n")
    got = load_tensor_files(tmp_path / "img.h", [_spec((2, 2), "uint8", "x")], "input", "data")
    assert got["x"].tolist() == [[[31, 128], [3, 4]]]
    (tmp_path / "f.h").write_text("float y[4] = {0.5f, -1.25F, 1e-3f, 2};")
    assert load_reference(tmp_path / "f.h", one)["y"].reshape(-1).tolist() == [
        0.5, -1.25, np.float32(1e-3), 2.0]
    errors = {
        "bad.txt": ("1 2 x 4", [_spec((1, 4))], "holds 'x', not a number"),
        "short.txt": ("1 2 3", [_spec((1, 4))],
                      "holds 3 numbers; output 'y' is float32[1, 4], so give a multiple of 4"),
        "frac.txt": ("1 2.5 3 4", [_spec((1, 4), "int8")], "not int8 integers"),
        "range.txt": ("1 2 300 4", [_spec((1, 4), "int8")], "not int8 integers"),
        "two.txt": ("1 2 3 4", [_spec((4,), name="a"), _spec((4,), name="b")],
                    "is one .txt but the model has 2 outputs (a, b)"),
        "nobrace.h": ("int8_t x;", [_spec((1,))], "holds no C array initializer"),
    }
    for name, (text, specs, message) in errors.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ValidationError, match=re.escape(message)):
            load_reference(tmp_path / name, specs)
    folder = tmp_path / "both"
    folder.mkdir()
    np.save(folder / "y.npy", np.zeros(4, np.float32))
    (folder / "y.txt").write_text("0 0 0 0")
    with pytest.raises(ValidationError, match="has two files for 'y'"):
        load_reference(folder, one)
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    with pytest.raises(ValidationError, match="cannot be read as a .npy"):
        load_reference(tmp_path / "junk.npy", one)
    # Without the model's specs a single .npy is the one tensor, keyed by index 0.
    assert list(load_arrays(tmp_path / "flat.npy")) == ["0"]

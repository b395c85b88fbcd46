"""``project-api validate`` and :mod:`project_api.tools.validate`.

One host-template project of the shared KWS int8 model (MLPerf Tiny DS-CNN) is built per module
and shared: 200 seeded samples must match TFLite Micro bit for bit. The metrics are checked
against values computed by hand; thresholds, bad data and ``--save`` through the command line.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import require_tool

from project_api.tools.metrics import compute_metrics, parse_thresholds
from project_api.tools.samples import TensorSpec, bind_inputs, bind_reference
from project_api.tools.validate import ValidationError, ValidationReport, validate

KWS = "kws_ref_model_int8.tflite"
SAMPLES = 200


def _samples(n: int = SAMPLES, seed: int = 8) -> np.ndarray:
    """KWS inputs (n, 1, 49, 10, 1) int8: half full-range noise, half near the zero point (83)
    so that the softmax outputs are not all saturated."""
    rng = np.random.default_rng(seed)
    wide = rng.integers(-128, 128, (n // 2, 1, 49, 10, 1), dtype=np.int8)
    near = np.clip(rng.normal(83, 25, (n - n // 2, 1, 49, 10, 1)), -128, 127).astype(np.int8)
    return np.concatenate([wide, near])


@pytest.fixture(scope="module")
def kws(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    """The KWS int8 model emitted and built into a host project (once for the module)."""
    require_tool("make")
    require_tool("cc")
    from mlf_kernels import generate_host_project

    from project_api.emit import emit

    tflite = models_dir / KWS
    work = tmp_path_factory.mktemp("validate")
    mlf = work / "kws.tar"
    emit(str(tflite), str(mlf), name="default")
    generate_host_project(mlf, work / "prj").close()
    data = work / "samples.npz"
    np.savez(data, input_1=_samples())
    yield {"tflite": tflite, "project": work / "prj", "data": data, "work": work}


def _cli(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "project_api", "validate", *map(str, args)],
                          capture_output=True, text=True, timeout=300, cwd=cwd)


def _one_line_error(out: subprocess.CompletedProcess[str], rc: int = 1) -> str:
    assert out.returncode == rc, (out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "; " in lines[0], out.stderr
    return lines[0]


# --- on the device -------------------------------------------------------------------------


def test_kws_matches_tflite_micro_bit_for_bit(kws: dict[str, Path]) -> None:
    from project_api.api.project import GeneratedProject
    from project_api.emit.reference import run_tflm

    x = _samples()
    with GeneratedProject.from_directory(kws["project"]) as project:
        report = validate(project, {"input_1": x}, tflite=kws["tflite"], number=5, repeat=2)
        plain = validate(project, {"0": x[:20]}, pipeline=False, number=0)
    assert isinstance(report, ValidationReport) and report.samples == SAMPLES
    assert report.pipeline_depth > 1  # the host template's FIFO endpoint allows several
    assert [c.key for c in report.comparisons] == ["tflm", "litert"]
    (tflm,) = report.comparison("tflm").outputs
    assert tflm.exact == 1.0 and tflm.max_abs == 0.0 and tflm.max_abs_int == 0.0
    assert tflm.top1 == 1.0 and tflm.cosine == 1.0 and tflm.samples == SAMPLES
    assert report.timing is not None and all(t > 0 for t in report.timing.results)
    (out,) = report.outputs
    assert out.shape == (SAMPLES, 1, 12) and out.dtype == np.int8
    assert len({row.tobytes() for row in out}) > 10  # the samples really differ on the device
    # An independent check: TFLite Micro, one fresh interpreter per sample, on a few samples.
    tflite = kws["tflite"].read_bytes()
    for s in (0, 1, SAMPLES // 2, SAMPLES - 1):
        np.testing.assert_array_equal(out[s], run_tflm(tflite, [x[s]])[0].reshape(1, 12))
    # One request at a time gives the same outputs.
    np.testing.assert_array_equal(plain.outputs[0], out[:20])
    assert plain.pipeline_depth == 1 and plain.comparisons == [] and plain.timing is None


def test_cli_json_gates_and_save(kws: dict[str, Path], tmp_path: Path) -> None:
    save = tmp_path / "device_outputs"  # no .npz suffix: written exactly as named
    out = _cli(kws["project"], "--data", kws["data"], "--model", kws["tflite"], "--json",
               "--fail-under", "exact=1.0", "--fail-over", "max_abs=0", "--fail-under",
               "top1@litert=0.9", "--save", save, "--repeat", "1", "--number", "2")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)  # stdout holds the JSON only; progress goes to stderr
    assert "\r" not in out.stderr  # no bar redrawn in place off a terminal (issue 17)
    assert data["ok"] is True and data["failures"] == [] and data["samples"] == SAMPLES
    tflm = next(c for c in data["comparisons"] if c["key"] == "tflm")
    assert tflm["reference"] == "TFLite Micro"
    assert tflm["outputs"][0]["exact"] == 1.0 and tflm["outputs"][0]["max_abs"] == 0.0
    assert data["device_seconds_per_inference"]["mean"] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["device_outputs"]
    with np.load(save) as saved:
        assert saved.files == ["Identity"]
        outputs = saved["Identity"]
    assert outputs.shape == (SAMPLES, 1, 12) and outputs.dtype == np.int8

    # --save refuses to overwrite (before running anything) and keeps the file as it was.
    before = save.read_bytes()
    again = _cli(kws["project"], "--data", kws["data"], "--save", save, "-q")
    assert "--force" in _one_line_error(again)
    assert save.read_bytes() == before
    forced = _cli(kws["project"], "--data", kws["data"], "--save", save, "--force", "-q",
                  "--limit", "3", "--number", "0")
    assert forced.returncode == 0, forced.stderr
    with np.load(save) as saved:
        np.testing.assert_array_equal(saved["Identity"], outputs[:3])

    # The saved outputs are a reference: equal passes, a perturbed one fails the gates.
    ref = tmp_path / "ref.npz"
    np.savez(ref, Identity=outputs)
    ok = _cli(kws["project"], "--data", kws["data"], "--reference", ref, "--fail-under",
              "exact=1.0", "--number", "0", "-q")
    assert ok.returncode == 0, ok.stderr
    assert "thresholds met: exact >= 1" in ok.stdout
    perturbed = outputs.astype(np.int16)
    perturbed[7, 0, 3] += 1 if perturbed[7, 0, 3] < 127 else -1
    np.savez(ref, Identity=perturbed.astype(np.int8))
    bad = _cli(kws["project"], "--data", kws["data"], "--reference", ref, "--fail-under",
               "exact=1.0", "--number", "0", "-q")
    assert bad.returncode == 1, bad.stderr
    assert "FAILED 1 threshold check(s)" in bad.stdout
    assert f"exact = {1 - 1 / SAMPLES:.6g}, wanted >= 1" in bad.stdout
    bad = _cli(kws["project"], "--data", kws["data"], "--reference", ref, "--fail-over",
               "max_abs_int=0", "--number", "0", "-q", "--json")
    assert bad.returncode == 1
    data = json.loads(bad.stdout)
    assert data["ok"] is False and data["comparisons"][0]["outputs"][0]["max_abs_int"] == 1.0


def test_cli_bad_data_one_line_errors(kws: dict[str, Path], tmp_path: Path) -> None:
    x = _samples(10)
    cases = {
        "unknown.npz": ({"speech": x}, "has an array 'speech' but the model has no input"),
        "empty.npz": ({}, "has no array for input 'input_1'"),
        "shape.npz": ({"input_1": x.reshape(10, 49, 10)[:, :, :9]},
                      "input 'input_1' is [1, 49, 10, 1]"),
        "dtype.npz": ({"input_1": x.astype(np.float32)}, "astype(np.int8)"),
    }
    for name, (arrays, message) in cases.items():
        np.savez(tmp_path / name, **arrays)
        line = _one_line_error(_cli(kws["project"], "--data", tmp_path / name, "-q"))
        assert message in line, line
    # A reference whose sample count differs from the data's.
    np.savez(tmp_path / "ok.npz", input_1=x)
    np.savez(tmp_path / "ref.npz", Identity=np.zeros((9, 1, 12), np.int8))
    line = _one_line_error(_cli(kws["project"], "--data", tmp_path / "ok.npz", "--reference",
                                tmp_path / "ref.npz", "-q"))
    assert "holds 9 samples but the data holds 10" in line
    # A folder of .npy files keyed by file name, and its errors.
    folder = tmp_path / "samples"
    folder.mkdir()
    np.save(folder / "input_1.npy", x)
    ok = _cli(kws["project"], "--data", folder, "--number", "0", "-q", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["samples"] == 10
    (folder / "input_1.npy").rename(folder / "mfcc.npy")
    assert "no input by that name" in _one_line_error(_cli(kws["project"], "--data", folder, "-q"))
    # Usage errors (exit 2): a metric gated the wrong way round, an unknown metric.
    line = _one_line_error(_cli(kws["project"], "--data", folder, "--fail-under", "max_abs=0"), 2)
    assert "--fail-over max_abs=0" in line
    line = _one_line_error(_cli(kws["project"], "--data", folder, "--fail-under", "acc=1"), 2)
    assert "unknown metric 'acc'" in line
    line = _one_line_error(_cli(kws["project"], "--data", folder, "--fail-under", "exact=1"), 2)
    assert "needs a reference" in line


def test_cli_help_teaches_the_metrics() -> None:
    out = subprocess.run([sys.executable, "-m", "project_api", "validate", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for line in ("max_abs      --fail-over", "cosine       --fail-under", "np.savez('samples.npz'"):
        assert line in out.stdout


# --- metrics and data binding, no device ---------------------------------------------------


def test_metrics_float_by_hand() -> None:
    device = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=np.float32)
    ref = np.array([[1.0, 2.0, 4.0], [4.0, 7.0, 6.0]], dtype=np.float32)
    m = compute_metrics(device, ref, "y")
    # differences: 0 0 -1 / 0 -2 0
    assert m.max_abs == 2.0
    assert m.mean_abs == pytest.approx(3 / 6)
    assert m.rmse == pytest.approx(math.sqrt(5 / 6))
    # device . ref = 1+4+12+16+35+36 = 104; |device|^2 = 91; |ref|^2 = 122
    assert m.cosine == pytest.approx(104 / math.sqrt(91 * 122))
    assert m.l2r == pytest.approx(math.sqrt(5) / math.sqrt(122))
    assert m.top1 == 0.5  # argmax: device [2, 2], reference [2, 1]
    assert m.exact is None and m.max_abs_int is None and not m.dequantized
    assert m.samples == 2


def test_metrics_int8_dequantized_by_hand() -> None:
    device = np.array([[[-128, 10, 0]], [[5, 5, 5]]], dtype=np.int8)
    ref = np.array([[[-128, 12, 0]], [[5, 5, 5]]], dtype=np.int8)
    m = compute_metrics(device, ref, "y", scale=0.5, zero_point=-128)
    # dequantized: device [0, 69, 64], [66.5]*3; reference [0, 70, 64], [66.5]*3
    assert m.dequantized
    assert m.max_abs == 1.0 and m.max_abs_int == 2.0
    assert m.mean_abs == pytest.approx(1 / 6)
    assert m.rmse == pytest.approx(math.sqrt(1 / 6))
    d = np.array([0, 69, 64, 66.5, 66.5, 66.5])
    r = np.array([0, 70, 64, 66.5, 66.5, 66.5])
    assert m.cosine == pytest.approx(float(d @ r / math.sqrt((d @ d) * (r @ r))))
    assert m.l2r == pytest.approx(1 / math.sqrt(float(r @ r)))
    assert m.exact == 0.5  # sample 0 differs, sample 1 is bit-exact
    assert m.top1 == 1.0  # argmax over the last axis: index 1, then 0 (ties: the first)
    raw = compute_metrics(device, ref)  # no quantization parameters: integer units
    assert raw.max_abs == 2.0 and not raw.dequantized


def test_metrics_edge_cases() -> None:
    zeros = np.zeros((3, 4), np.float32)
    m = compute_metrics(zeros, zeros)
    assert (m.max_abs, m.cosine, m.l2r, m.rmse) == (0.0, 1.0, 0.0, 0.0)
    m = compute_metrics(np.ones((3, 4), np.float32), zeros)
    assert m.cosine == 0.0 and m.l2r == math.inf and m.to_json()["l2r"] == "inf"
    assert compute_metrics(np.ones((2, 1)), np.ones((2, 1))).top1 is None  # last axis 1
    m = compute_metrics(-np.ones((2, 3)), np.ones((2, 3)))
    assert m.cosine == -1.0 and m.l2r == 2.0
    with pytest.raises(ValidationError, match="same shape"):
        compute_metrics(np.ones((2, 3)), np.ones((3, 3)))


def test_thresholds() -> None:
    ths = parse_thresholds(["exact=1.0", "top1@litert=0.99"], ["max_abs=0.5"])
    assert [str(t) for t in ths] == ["exact >= 1", "top1@litert >= 0.99", "max_abs <= 0.5"]
    with pytest.raises(ValidationError, match="gate it with --fail-over max_abs=0"):
        parse_thresholds(["max_abs=0"], [])
    with pytest.raises(ValidationError, match="gate it with --fail-under cosine=0.9"):
        parse_thresholds([], ["cosine=0.9"])
    with pytest.raises(ValidationError, match="METRIC=NUMBER"):
        parse_thresholds(["exact"], [])
    with pytest.raises(ValidationError, match="unknown metric"):
        parse_thresholds(["accuracy=1"], [])

    from project_api.tools.metrics import Comparison

    spec = TensorSpec("y", "y", np.dtype(np.float32), (3,))
    device = np.array([[1.0, 2.0, 3.0]], np.float32)
    report = ValidationReport("m", 1, [], [spec], [device])
    report.comparisons.append(Comparison("reference", "ref.npz",
                                         [compute_metrics(device, device + 0.25, "y")]))
    assert report.failures(parse_thresholds(["cosine=0.99", "top1=1"], ["max_abs=0.25"])) == []
    (line,) = report.failures(parse_thresholds([], ["max_abs=0.1"]))
    assert line == "ref.npz: output 'y': max_abs = 0.25, wanted <= 0.1"
    with pytest.raises(ValidationError, match="no output has exact"):
        report.failures(parse_thresholds(["exact=1"], []))
    with pytest.raises(ValidationError, match="no 'tflm' comparison"):
        report.failures(parse_thresholds(["cosine@tflm=1"], []))


def test_bind_inputs_errors() -> None:
    specs = [TensorSpec("a", "a_c", np.dtype(np.int8), (1, 4)),
             TensorSpec("b:0", "b_0", np.dtype(np.float32), (2,))]
    a = np.zeros((5, 1, 4), np.int8)
    b = np.zeros((5, 2), np.float32)
    # By name, C name or index; a size-1 batch axis may be left out.
    for keys in (("a", "b:0"), ("a_c", "b_0"), ("0", "1")):
        bound = bind_inputs(specs, {keys[0]: a.reshape(5, 4), keys[1]: b})
        assert [x.shape for x in bound] == [(5, 1, 4), (5, 2)]
    cases = [
        ({"a": a}, "has no array for input 'b:0'"),
        ({"a": a, "b:0": b[:4]}, "disagree on the number of samples (a: 5, b:0: 4)"),
        ({"a": a, "b:0": np.zeros((5, 3), np.float32)}, "input 'b:0' is [2]"),
        ({"a": a, "b:0": b, "c": b}, "has an array 'c' but the model has no input"),
        ({"a": a, "a_c": a, "b:0": b}, "two arrays for input 'a'"),
        ({"a": a.astype(np.int16), "b:0": b}, "astype(np.int8)"),
        ({"a": np.int8(1), "b:0": b}, "is a scalar"),
        ({"a": a[:0], "b:0": b[:0]}, "holds 0 samples"),
    ]
    for arrays, message in cases:
        with pytest.raises(ValidationError) as err:
            bind_inputs(specs, arrays)
        assert message in str(err.value) and "\n" not in str(err.value)
        assert "; " in str(err.value)
    # References: any dtype castable without loss is accepted; the count must match the data.
    ref = bind_reference(specs[:1], {"a": a.astype(np.int16)[:, 0]}, 5)
    assert ref[0].dtype == np.int8 and ref[0].shape == (5, 1, 4)
    with pytest.raises(ValidationError, match="holds 4 samples but the data holds 5"):
        bind_reference(specs[:1], {"a": a[:4]}, 5)


def test_cli_one_go_template_and_model(kws: dict[str, Path], tmp_path: Path) -> None:
    """--template with a .tflite --model: emit, generate, build, validate; the work is temporary."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    out = _cli("--template", "host", "--model", kws["tflite"], "--data", kws["data"],
               "--limit", "30", "--fail-under", "exact=1.0", "--no-litert", "--number", "1",
               "--repeat", "1", "--json", cwd=cwd)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["samples"] == 30 and [c["key"] for c in data["comparisons"]] == ["tflm"]
    assert data["comparisons"][0]["outputs"][0]["exact"] == 1.0
    assert list(cwd.iterdir()) == []

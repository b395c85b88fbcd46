"""The reference runners (``project_api.emit.reference``) on real models and on built ones."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

from project_api.emit import reference as R
from project_api.tflite import builder as B


def test_hello_world_float_approximates_sine(models_dir: Path) -> None:
    model = (models_dir / "hello_world_float.tflite").read_bytes()
    xs = np.linspace(0.0, 2 * np.pi, 9, dtype=np.float32)
    for x in xs:
        inputs = [np.array([[x]], dtype=np.float32)]
        tflm = R.run_tflm(model, inputs)[0]
        lite = R.run_litert(model, inputs)[0]
        assert tflm.shape == (1, 1)
        assert abs(float(tflm[0, 0]) - np.sin(x)) < 0.15, f"sin({x}) -> {tflm}"
        np.testing.assert_allclose(tflm, lite, rtol=1e-5, atol=1e-6)


def test_hello_world_int8_tflm_matches_litert(models_dir: Path) -> None:
    model = (models_dir / "hello_world_int8.tflite").read_bytes()
    (det,) = R.input_details(model)
    assert det["dtype"] == np.int8 and det["shape"] == (1, 1) and len(det["scale"]) == 1
    for q in range(-128, 128, 17):
        inputs = [np.array([[q]], dtype=np.int8)]
        a, b = R.run_tflm(model, inputs)[0], R.run_litert(model, inputs)[0]
        assert abs(int(a[0, 0]) - int(b[0, 0])) <= 1


def test_io_details_of_a_shared_model(models_dir: Path) -> None:
    model = (models_dir / "micro_speech_int8.tflite").read_bytes()
    (inp,) = R.input_details(model)
    (out,) = R.output_details(model)
    assert inp["shape"] == (1, 1960) and inp["dtype"] == np.int8
    assert out["shape"] == (1, 4) and out["dtype"] == np.int8
    assert out["scale"] == [pytest.approx(1 / 256)] and out["zero_point"] == [-128]
    assert inp["name"] and out["name"] and inp["name"] != out["name"]


def test_io_details_name_the_builder_tensors() -> None:
    (inp,) = R.input_details(B.demo_model())
    assert inp["name"] == "input" and inp["shape"] == (1, 16, 16, 1)


def _conv_model(size: int) -> bytes:
    mb = B.ModelBuilder(seed=4)
    x = mb.input((1, size, size, 4), "int8")
    mb.output(mb.conv2d(x, 8, kernel_size=3))
    return mb.build()


def test_tflm_arena_grows_with_the_activations() -> None:
    small, large = R.tflm_arena(_conv_model(8)), R.tflm_arena(_conv_model(32))
    for arena in (small, large):
        assert arena["total"] == arena["head"] + arena["tail"]
        assert arena["head"] > 0 and arena["tail"] > 0
    # input 1xSxSx4 + output 1xSxSx8 int8 are live together in the head
    assert small["head"] >= 8 * 8 * 12
    assert large["head"] >= 32 * 32 * 12
    assert large["head"] - small["head"] >= (32 * 32 - 8 * 8) * 12


def test_tflm_arena_leaves_stdout_working(capfd: pytest.CaptureFixture[str]) -> None:
    R.tflm_arena(_conv_model(4))
    print("still here")
    os.write(2, b"fd 2 too\n")
    out, err = capfd.readouterr()
    assert "still here" in out and "fd 2 too" in err
    assert "RecordingMicroAllocator" not in out + err


@pytest.mark.parametrize("module,package,call", [
    ("tflite_micro", "tflite-micro", "run_tflm"),
    ("ai_edge_litert", "ai-edge-litert", "run_litert"),
])
def test_missing_package_names_it(monkeypatch: pytest.MonkeyPatch, module: str, package: str,
                                  call: str) -> None:
    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # makes "import <module>" raise ImportError
    with pytest.raises(R.ReferenceUnavailableError,
                       match=f"'{package}' package, which is not installed; install it with: "
                             r"pip install 'project-api\[reference\]'$"):
        getattr(R, call)(_conv_model(4), [np.zeros((1, 4, 4, 4), np.int8)])

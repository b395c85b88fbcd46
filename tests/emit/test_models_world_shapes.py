"""Issue 37 item 4: operators beyond TFLite Micro, and shape operands the model computes.

SSD detectors take TILE's multiples from a SHAPE; LSTM keyword spotters build their zero state
with a FILL whose dims are ``PACK(STRIDED_SLICE(SHAPE(x)), units)``. Every shape is static, so
the emitter evaluates those chains at emit time. TFLM runs neither model (it has no TILE and
wants FILL's dims constant), so the reference is LiteRT with its reference kernels
(``BUILTIN_REF``), and ``run --check`` says that is the reference it used.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import require_tool

from project_api.emit import emit_sources, harness, read_tflite
from project_api.emit.ops._fold import static_ints
from project_api.emit.reference import run_litert, run_tflm
from project_api.tflite.builder import ModelBuilder

UNITS = 12
QUANT = {"int8": (1 / 64, 3), "uint8": (1 / 64, 128), "int16": (1 / 1024, 0)}


def _inputs(gen, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for t in gen.inputs:
        if t.dtype == "float32":
            out.append(rng.standard_normal(t.shape).astype(np.float32))
        elif t.dtype == "bool":
            out.append(rng.integers(0, 2, t.shape).astype(np.bool_))
        else:
            info = np.iinfo(t.dtype)
            lo, hi = max(info.min, -1000), min(info.max, 1000)
            out.append(rng.integers(lo, hi + 1, t.shape).astype(t.dtype))
    return out


def zero_state_model(dtype: str) -> bytes:
    """An LSTM-style zero state: FILL(PACK(STRIDED_SLICE(SHAPE(x), [0], [1], shrink), units),
    value), added to the input's first frame."""
    mb = ModelBuilder(seed=4)
    q = QUANT.get(dtype)
    x = mb.input((1, 5, UNITS), dtype, quant=q, name="features")
    batch = mb.strided_slice(mb.shape(x), [0], [1], [1], shrink_axis_mask=1)
    dims = mb.pack([batch, np.asarray(UNITS)], axis=0)
    value = mb.constant(np.asarray(0.25, np.float32), dtype, quant=q)
    (state,) = mb.operator("FILL", [dims, value], [((1, UNITS), dtype, q)])
    frame = mb.reshape(mb.slice(x, [0, 0, 0], [1, 1, UNITS]), (1, UNITS))
    mb.output(mb.add(frame, state, out_quant=q) if q else mb.add(frame, state))
    return mb.build()


def tiled_model(dtype: str, chain: str) -> bytes:
    """TILE by multiples the model computes: ``shape`` (SHAPE of a constant, as SSD detectors)
    or ``pack`` (PACK of a SHAPE's sliced entries and constants)."""
    mb = ModelBuilder(seed=5)
    q = QUANT.get(dtype)
    x = mb.input((1, 3, 2), dtype, quant=q, plain=dtype not in QUANT, name="anchors")
    if chain == "shape":
        multiples = mb.shape(mb.constant(np.zeros((2, 1, 3)), "float32"))
    else:
        s = mb.shape(mb.constant(np.zeros((4, 2)), "float32"))
        first = mb.strided_slice(s, [1], [2], [1], shrink_axis_mask=1)  # 2
        multiples = mb.pack([first, np.asarray(1), np.asarray(3)], axis=0)
    (y,) = mb.operator("TILE", [x, multiples], [((2, 3, 6), dtype, q)])
    mb.output(y)
    return mb.build()


def _check_against_litert_ref(model: bytes, tmp_path, seeds=(0, 1)) -> None:
    require_tool("gcc")
    gen = emit_sources(model, name="m")
    exe = harness.build(gen, tmp_path)
    for seed in seeds:
        inputs = _inputs(gen, seed)
        got = harness.run(exe, gen, inputs)
        want = run_litert(model, inputs, reference_kernels=True)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, np.asarray(w).reshape(g.shape))


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_fill_with_dims_from_shape(dtype, tmp_path):
    model = zero_state_model(dtype)
    with pytest.raises(RuntimeError):  # TFLM wants FILL's dims constant
        run_tflm(model, [np.zeros((1, 5, UNITS), np.float32 if dtype == "float32" else np.int8)])
    _check_against_litert_ref(model, tmp_path)


@pytest.mark.parametrize("chain", ["shape", "pack"])
@pytest.mark.parametrize("dtype", ["float32", "uint8", "int8", "int16", "int32", "int64", "bool"])
def test_tile_with_computed_multiples(dtype, chain, tmp_path):
    _check_against_litert_ref(tiled_model(dtype, chain), tmp_path)


def test_the_chains_fold_as_numpy_computes_them():
    mb = ModelBuilder(seed=0)
    x = mb.input((3, 7, 5, 2), "float32")
    s = mb.shape(x)
    rev = mb.strided_slice(s, [-1], [0], [-1], end_mask=1)  # [2, 5, 7, 3]
    mid = mb.strided_slice(s, [1], [3], [1])  # [7, 5]
    both = mb.concatenation([rev, mid], axis=0)
    mb.output(mb.add(x, x))
    g = read_tflite(mb.build())
    assert static_ints(g, rev.index).tolist() == [2, 5, 7, 3]
    assert static_ints(g, mid.index).tolist() == [7, 5]
    assert static_ints(g, both.index).tolist() == [2, 5, 7, 3, 7, 5]
    assert static_ints(g, x.index) is None  # an input: not known at emit time


@pytest.mark.parametrize("which", ["fill", "tile"])
def test_run_check_says_which_reference_it_used(which, tmp_path):
    require_tool("gcc")
    path = tmp_path / f"{which}.tflite"
    path.write_bytes(zero_state_model("int8") if which == "fill" else tiled_model("int8", "pack"))
    out = subprocess.run([sys.executable, "-m", "project_api", "run", "--template", "host",
                          "--model", str(path), "--check", "--repeat", "1"],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    line = next(ln.strip() for ln in out.stdout.splitlines()
                if ln.strip().startswith("check output 0"))
    assert line.startswith("check output 0 against LiteRT's reference kernels (TFLite Micro "
                           "cannot run this model: "), line
    assert line.endswith("): OK (max abs difference 0)"), line
    assert ("Non-constant >dims<" if which == "fill" else "TILE") in line, line


def test_validate_says_which_reference_it_used(tmp_path):
    """``validate`` on a model TFLM cannot run: its first reference is LiteRT's reference
    kernels, named so, and the device matches them bit for bit; LiteRT's own kernels too."""
    require_tool("make")
    require_tool("gcc")
    path = tmp_path / "tile.tflite"
    path.write_bytes(tiled_model("int8", "pack"))

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "project_api", *map(str, args)],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path)

    x = np.random.default_rng(7).integers(-128, 128, (4, 1, 3, 2)).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    out = cli("validate", "--template", "host", "--model", path, "--data", tmp_path / "x.npy",
              "--json", "-q", "--number", "0")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    first = report["comparisons"][0]
    assert first["key"] == "tflm"
    assert first["reference"].startswith("LiteRT's reference kernels (TFLite Micro cannot run "
                                         "this model: "), first["reference"]
    assert "TILE" in first["reference"]
    (metrics,) = first["outputs"]
    assert metrics["max_abs"] == 0
    want = np.concatenate([run_litert(path.read_bytes(), [s], reference_kernels=True)[0][None]
                           for s in x])
    assert want.shape[0] == 4 and np.abs(want).max() > 0  # a real comparison, not of zeros

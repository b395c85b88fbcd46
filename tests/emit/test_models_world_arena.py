"""Issue 37 item 3: TFLite Micro's reference arena is sized from the model.

A small model (tens of KB) can need megabytes of activations: FOMO-style detectors keep a
full-resolution feature map. ``--check`` and ``validate`` size TFLM's arena from our planner's
figure with a margin and grow it on TFLM's "Failed to resize buffer", never at a fixed cap; a
model too big for the host is refused with the figure.
"""

from __future__ import annotations

import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import require_tool

from project_api.emit import emit_sources, harness, reference
from project_api.tflite.builder import ModelBuilder
from project_api.tools import validate

H = W = 160
C = 64


def big_activation_model() -> bytes:
    """A ~40 KB int8 model whose two 160x160x64 feature maps (1.6 MB each) are live together:
    about 3.3 MB of activations."""
    mb = ModelBuilder(seed=2)
    x = mb.input((1, H, W, 3), "int8", quant=(1 / 128, 0), name="image")
    y = mb.conv2d(x, C, 3, activation="RELU")
    y = mb.conv2d(y, C, 3, activation="RELU")
    mb.output(mb.average_pool2d(y, 16))
    return mb.build()


@pytest.fixture(scope="module")
def model() -> bytes:
    return big_activation_model()


def _input(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (1, H, W, 3)).astype(np.int8)


def test_the_old_fixed_arena_is_too_small(model):
    """The rule this replaces (max(1 MiB, 10 x the model)) cannot hold it."""
    assert len(model) < 100_000
    runtime = reference._tflm_runtime()
    with pytest.raises(RuntimeError):
        with reference._captured_fds((2,)):
            runtime.Interpreter.from_bytes(model, arena_size=max(1 << 20, 10 * len(model)))


def test_the_arena_comes_from_the_plan(model):
    planned = reference.planned_arena_bytes(model)
    pool = emit_sources(model).workspace_size_bytes
    assert pool >= 2 * H * W * C  # both feature maps
    assert planned > pool
    size = reference.tflm_arena_size(model)
    assert size >= 3_000_000
    used = reference.tflm_arena(model)["total"]
    assert used <= size  # what TFLM really used fits what was given


def test_checked_against_tflm_bit_exact(model, tmp_path):
    require_tool("gcc")
    gen = emit_sources(model, name="big")
    exe = harness.build(gen, tmp_path)
    x = _input()
    got = harness.run(exe, gen, [x])[0]
    want = reference.run_tflm(model, [x])[0]
    np.testing.assert_array_equal(got, want.reshape(got.shape))
    assert len(np.unique(got)) > 4
    # validate's reference path sizes its arena the same way
    outs = validate.tflm_outputs(model, [x[None]])
    np.testing.assert_array_equal(outs[0][0], want)


def test_the_arena_grows_on_tflms_failure(model, monkeypatch):
    """A plan that undershoots (here: forced to 1 KB, so the 1 MiB floor) is grown from what
    TFLM says is missing."""
    monkeypatch.setattr(reference, "planned_arena_bytes", lambda m: 1024)
    monkeypatch.setattr(reference, "_ARENA_SIZES", {})
    size = reference.tflm_arena_size(model)
    assert size >= 2 * H * W * C
    np.testing.assert_array_equal(reference.run_tflm(model, [_input(1)])[0],
                                  reference.run_tflm(model, [_input(1)], size)[0])


def test_a_model_too_big_for_the_host_says_so_with_the_figure(model, monkeypatch):
    monkeypatch.setattr(reference, "host_arena_limit", lambda: 1 << 20)
    monkeypatch.setattr(reference, "_ARENA_SIZES", {})
    with pytest.raises(reference.ReferenceArenaError,
                       match=r"needs an arena of at least \d+\.\d MiB \(\d+ bytes\) for this model, "
                             r"more than this host gives it \(1\.0 MiB"):
        reference.run_tflm(model, [_input()])


def test_run_check_on_the_host_template(model, tmp_path):
    require_tool("gcc")
    path = tmp_path / "fomo_like.tflite"
    path.write_bytes(model)
    out = subprocess.run([sys.executable, "-m", "project_api", "run", "--template", "host",
                          "--model", str(path), "--check", "--repeat", "1"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert re.search(r"check output 0 against TFLite Micro: OK", out.stdout), out.stdout

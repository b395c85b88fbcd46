"""TFLM quantization math in Python (``project_api.emit.quantize``), checked from first
principles and against the emitted C helpers."""

from __future__ import annotations

import math
import subprocess

import numpy as np
import pytest
from conftest import require_tool

from project_api.emit import quantize as q
from project_api.emit.codegen import KERNELS_DIR
from project_api.system.paths import crt_dir


@pytest.mark.parametrize("real, expected", [
    (0.0, (0, 0)),
    (0.5, (1 << 30, 0)),
    (1.0, (1 << 30, 1)),
    (0.25, (1 << 30, -1)),
    (0.75, (3 << 29, 0)),
    (2.0 ** -40, (0, 0)),  # below 2^-31: flushed to zero
])
def test_quantize_multiplier_known_values(real, expected):
    assert q.quantize_multiplier(real) == expected


def test_quantize_multiplier_rounds_up_to_next_power():
    # a mantissa that rounds to 2^31 becomes 2^30 with shift + 1
    real = 1.0 - 2.0 ** -40
    assert q.quantize_multiplier(real) == (1 << 30, 1)


@pytest.mark.parametrize("seed", range(5))
def test_quantize_multiplier_reconstructs(seed):
    rng = np.random.default_rng(seed)
    for real in rng.uniform(1e-6, 100.0, 200):
        m, s = q.quantize_multiplier(float(real))
        assert (1 << 30) <= m < (1 << 31)
        assert math.isclose(m * 2.0 ** (s - 31), real, rel_tol=2 ** -30)


def test_round_half_away():
    assert [q.round_half_away(v) for v in (0.5, 1.5, -0.5, -1.5, 2.4, -2.6)] == [1, 2, -1, -2, 2, -3]


def test_activation_ranges():
    assert q.activation_range_int8("NONE", 0.1, 3) == (-128, 127)
    assert q.activation_range_int8("RELU", 0.1, 3) == (3, 127)
    assert q.activation_range_int8("RELU6", 0.1, -10) == (-10, 50)
    assert q.activation_range_int8("RELU6", 0.01, -128) == (-128, 127)


def test_softmax_params_kws():
    # kws_ref_model_int8's softmax input scale
    mult, shift, diff_min = q.softmax_params(0.1, 1.0)
    assert mult * 2.0 ** (shift - 31) == pytest.approx(q.f32(0.1) * 2 ** 26, rel=1e-9)
    assert diff_min < 0


def test_python_mbqm_matches_emitted_c(tmp_path):
    """The Python mirror and the C helper agree on many (x, multiplier, shift) triples."""
    require_tool("gcc")
    rng = np.random.default_rng(0)
    xs = rng.integers(-(1 << 20), 1 << 20, 400).tolist() + [0, 1, -1, (1 << 31) - 1, -(1 << 31)]
    triples = []
    for x in xs:
        m, s = q.quantize_multiplier(float(rng.uniform(1e-4, 4.0)))
        if abs(x) >= (1 << 28):
            s = min(s, 0)
        triples.append((int(x), m, s))
    common = (KERNELS_DIR / "common.h.j2").read_text()
    lines = [common, "#include <stdio.h>", "int main(void) {"]
    for x, m, s in triples:
        lines.append(f"  printf(\"%ld\\n\", (long)q_mbqm((int32_t){x}LL, {m}, {s}));")
    lines += ["  return 0;", "}"]
    src = tmp_path / "t.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "t"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", f"-I{crt_dir() / 'include'}",
                    str(src), "-o", str(exe)], check=True)
    got = [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True,
                                          check=True).stdout.split()]
    assert got == [q.multiply_by_quantized_multiplier(x, m, s) for x, m, s in triples]

"""``validate --per-layer``: the debug build hands back every intermediate tensor, each equal to
TFLite Micro's (kPreserveAllTensors) on the host template; a layer corrupted on purpose in the
generated C (one bias value) is the first one reported, the layers before it stay exact and
the ones after differ; the command line's table, JSON and one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import require_tool

from project_api.api.project import generate_project
from project_api.cli import main
from project_api.emit import read_tflite
from project_api.tools.validate_layers import debug_archive, debug_graph, validate_layers


@pytest.fixture(autouse=True)
def _tools() -> None:
    require_tool("cc")
    require_tool("make")


def _samples(n: int = 3, seed: int = 5) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input_1": rng.integers(-128, 128, (n, 1, 49, 10, 1), dtype=np.int8)}


def test_debug_graph_outputs_every_intermediate(models_dir: Path) -> None:
    graph = read_tflite(models_dir / "kws_ref_model_int8.tflite")
    debug, probes = debug_graph(graph)
    written = [t for op in graph.operators for t in op.outputs]
    assert [t for _, _, t in probes] == written
    assert debug.outputs[: len(graph.outputs)] == graph.outputs
    assert set(debug.outputs) == set(written)
    assert graph.tensor(written[0]).name != debug.tensor(written[0]).name  # renamed copy
    assert read_tflite(models_dir / "kws_ref_model_int8.tflite").tensor(written[0]).name == \
        graph.tensor(written[0]).name  # the original is untouched


def _corrupt_bias(source: str, node: int) -> str:
    """The C with the first bias value of node ``node``'s kernel raised by 5000."""
    m = re.search(rf"(static const int32_t op{node}_\w+_b\[\d+\] = {{\n  )(-?\d+)", source)
    assert m is not None, f"no bias array of node {node}"
    return source[:m.start(2)] + str(int(m.group(2)) + 5000) + source[m.end(2):]


@pytest.mark.parametrize("corrupt", [None, 4])
def test_per_layer_finds_the_corrupted_layer(models_dir: Path, tmp_path: Path,
                                             corrupt: int | None) -> None:
    tflite = (models_dir / "kws_ref_model_int8.tflite").read_bytes()
    build = debug_archive(tflite, tmp_path / "debug.tar", "generic")
    assert build.outputs == 13
    opts = {"compile_definitions": "-DTVM_CRT_MAX_ARGS=13"}
    with generate_project("host", build.archive, tmp_path / "prj", opts) as prj:
        if corrupt is not None:
            src = tmp_path / "prj" / "model" / "codegen" / "host" / "src" / "default_lib0.c"
            src.write_text(_corrupt_bias(src.read_text(), corrupt))
        prj.build()
        report = validate_layers(prj, build, tflite, _samples())
    assert [p.node for p, _ in report.rows] == list(range(13))
    first = report.first_failure
    if corrupt is None:
        assert first is None
        assert all(m.exact == 1.0 for _, m in report.rows)
        return
    assert first is not None and first[0].node == corrupt
    assert any(f.startswith("max_abs_int ") for f in first[2])
    assert all(m.exact == 1.0 for p, m in report.rows if p.node < corrupt)
    assert report.rows[corrupt][1].max_abs_int > 0
    assert any(m.max_abs_int > 0 for p, m in report.rows if p.node > corrupt)


def test_per_layer_cli(models_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    np.savez(tmp_path / "s.npz", **_samples(2))
    model = str(models_dir / "kws_ref_model_int8.tflite")
    assert main(["validate", "--per-layer", "--template", "host", "--model", model, "--data",
                 str(tmp_path / "s.npz"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ok"] is True and data["samples"] == 2 and len(data["layers"]) == 13
    assert data["thresholds"] == ["max_abs_int <= 0", "l2r <= 1e-05"]
    assert all(la["metrics"]["exact"] == 1.0 for la in data["layers"])
    cases = [
        (["validate", "--per-layer", "--template", "host", "--data", str(tmp_path / "s.npz")],
         "give the .tflite"),
        (["validate", "--per-layer", "--template", "host", "--model", model, "--data",
          str(tmp_path / "s.npz"), "--fail-over", "max_abs=1"], "go with the plain validation"),
        (["validate", "--template", "host", "--model", model, "--data", str(tmp_path / "s.npz"),
          "--layer-fail-over", "l2r=1"], "goes with --per-layer"),
        (["validate", "--per-layer", "--template", "host", "--model", model, "--data",
          str(tmp_path / "s.npz"), "--layer-fail-over", "speed=1"], "--layer-fail-over"),
    ]
    for argv, text in cases:
        assert main(argv) == 2, argv
        err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
        assert len(err) == 1 and text in err[0], (argv, err)

"""``project-api emit``: writes the archive, one-line errors, never overwrites without --force."""

from __future__ import annotations

import json

from project_api.cli import main
from project_api.emit import archive_bytes
from project_api.tflite.builder import ModelBuilder


def model_file(tmp_path):
    b = ModelBuilder(seed=0)
    b.output(b.fully_connected(b.input((1, 8), "int8"), 4, activation="RELU"))
    path = tmp_path / "m.tflite"
    path.write_bytes(b.build())
    return path


def test_emit_writes_archive(tmp_path, capsys):
    model = model_file(tmp_path)
    out = tmp_path / "m.tar"
    assert main(["emit", str(model), "-o", str(out), "--name", "net"]) == 0
    assert out.read_bytes() == archive_bytes(model.read_bytes(), name="net")
    assert "wrote" in capsys.readouterr().out


def test_emit_json(tmp_path, capsys):
    model = model_file(tmp_path)
    assert main(["emit", str(model), "-o", str(tmp_path / "m.tar"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["name"] == "default" and data["operators"] == 1
    assert data["inputs"][0]["shape"] == [1, 8]


def test_emit_refuses_to_overwrite(tmp_path, capsys):
    model = model_file(tmp_path)
    out = tmp_path / "m.tar"
    out.write_bytes(b"precious")
    assert main(["emit", str(model), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--force" in err
    assert out.read_bytes() == b"precious"
    assert main(["emit", str(model), "-o", str(out), "--force"]) == 0
    assert out.read_bytes() != b"precious"


def test_emit_corrupt_model_one_line_no_output(tmp_path, capsys):
    bad = tmp_path / "bad.tflite"
    bad.write_bytes(model_file(tmp_path).read_bytes()[:100])
    out = tmp_path / "bad.tar"
    assert main(["emit", str(bad), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bad.tar")] == []


def test_emit_missing_model_is_usage_error(tmp_path, capsys):
    assert main(["emit", str(tmp_path / "nope.tflite"), "-o", str(tmp_path / "x.tar")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_emit_bad_name(tmp_path, capsys):
    model = model_file(tmp_path)
    assert main(["emit", str(model), "-o", str(tmp_path / "x.tar"), "--name", "a-b"]) == 1
    assert "C identifier" in capsys.readouterr().err


def _model(tmp_path, dtype):
    b = ModelBuilder(seed=1)
    y = b.fully_connected(b.input((1, 16), dtype), 8, activation="RELU")
    b.output(b.softmax(y))
    path = tmp_path / f"{dtype}.tflite"
    path.write_bytes(b.build())
    return path


def test_emit_on_a_dsp_target_reports_the_generic_kernels(tmp_path, capsys):
    """int8: FULLY_CONNECTED gets the DSP kernel, SOFTMAX the generic one, and both are said."""
    model = _model(tmp_path, "int8")
    assert main(["emit", str(model), "-o", str(tmp_path / "m.tar"), "--target", "cortex-m4"]) == 0
    out = capsys.readouterr().out
    assert "1 with cortex-m4 DSP kernels, generic kernels for SOFTMAX int8 (node 1)" in out
    assert main(["emit", str(model), "-o", str(tmp_path / "m.tar"), "--force", "--target",
                 "cortex-m4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(k["op"], k["kernel"]) for k in data["kernels"]] == [("FULLY_CONNECTED", "dsp"),
                                                                 ("SOFTMAX", "generic")]
    assert data["generic_on_dsp"] == [{"node": 1, "op": "SOFTMAX", "scheme": "int8"}]


def test_float_model_on_a_dsp_target_claims_no_dsp_kernels(tmp_path, capsys):
    model = _model(tmp_path, "float32")
    assert main(["emit", str(model), "-o", str(tmp_path / "f.tar"), "--target", "cortex-m4"]) == 0
    out = capsys.readouterr().out
    assert "cortex-m4 kernels" not in out and "with cortex-m4 DSP kernels" not in out
    assert ("no cortex-m4 DSP kernel applies, generic kernels for FULLY_CONNECTED float32 "
            "(node 0), SOFTMAX float32 (node 1)") in out
    assert main(["emit", str(model), "-o", str(tmp_path / "g.tar")]) == 0
    assert "generic kernels (portable C)" in capsys.readouterr().out


def test_emit_empty_target_is_a_usage_error(tmp_path, capsys):
    model = model_file(tmp_path)
    out = tmp_path / "e.tar"
    assert main(["emit", str(model), "-o", str(out), "--target", ""]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "empty target" in err and "generic" in err
    assert not out.exists()


def test_ops_lists_the_registry(capsys):
    from project_api.emit.ops import REGISTRY

    assert main(["ops", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == [e.name for e in REGISTRY.entries()]
    conv = next(r for r in rows if r["name"] == "CONV_2D")
    assert {"float32", "int8"} <= set(conv["schemes"])
    assert conv["dsp"]["cortex-m4"] == ["int8"] and conv["dsp"]["generic"] == []
    assert conv["dsp"]["cortex-m0"] == []
    assert next(r for r in rows if r["name"] == "RESHAPE")["view"] is True
    assert main(["ops"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].split()[:3] == ["operator", "schemes", "generic"]
    assert any(line.startswith("CONV_2D ") and "int8" in line for line in text.splitlines())


def test_emit_name_length_is_capped(tmp_path, capsys):
    """Issue 35: a 120 KB --name is refused in one short line before anything is written; a
    128-character name (the archive reader's limit) still emits and opens."""
    from project_api.archive.mlf import open_mlf

    model = model_file(tmp_path)
    out = tmp_path / "m.tar"
    assert main(["emit", str(model), "-o", str(out), "--name", "n" * 120_000]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 600
    assert "must have 1 to 128 characters (--name)" in err
    assert not out.exists()
    assert main(["emit", str(model), "-o", str(out), "--name", "n" * 128]) == 0
    with open_mlf(out) as lib:
        assert list(lib.modules) == ["n" * 128]

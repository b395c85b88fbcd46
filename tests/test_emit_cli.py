"""``project-api emit``: writes the archive, one-line errors, never overwrites without --force."""

from __future__ import annotations

import json

from project_api.cli import main
from project_api.emit import archive_bytes
from project_api.emit.builder import ModelBuilder


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

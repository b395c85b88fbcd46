"""Issue 37 item 2: any tensor name a converter writes.

PyTorch's exporters name tensors ``14`` or ``input.4``, TensorFlow ``serving_default_x:0``;
none of them is a C identifier, some are C keywords, two may sanitize alike. The emitter
derives the C identifiers (the header's struct members and size macros) and records them in
metadata.json where they differ from TVM's sanitized name; every name a user sees stays the
model's own: metadata.json's keys, ``info``, the Python API (``set_input("input.4", ...)``),
``run``'s output files and the ``ai_`` API's name tables.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tarfile

import numpy as np
import pytest
from conftest import require_tool
from mlf_kernels import generate_host_project

from project_api.archive import mlf
from project_api.emit import emit, emit_sources, harness
from project_api.emit.codegen import C_KEYWORDS, c_identifiers
from project_api.emit.reference import run_tflm
from project_api.tflite.builder import ModelBuilder

#: Inputs and outputs: names a converter writes, a C keyword, two that sanitize alike.
IN_NAMES = ["14", "input.4", "a/b:0", "x.y", "x:y"]
OUT_NAMES = ["int", "serving_default_out:0"]
C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def test_c_identifiers_are_valid_unique_and_keep_tvms_where_they_can():
    names = [*IN_NAMES, *OUT_NAMES, "", "t_14", "X_Y", "_Bool", "7up"]
    got = c_identifiers(names)
    assert got[:7] == ["t_14", "input_4", "a_b_0", "x_y", "x_y_2", "int_",
                       "serving_default_out_0"]
    assert got[7] == "tensor"
    assert got[8] == "t_14_2"  # taken by "14"'s identifier
    assert got[9] == "X_Y_3"  # case-insensitive: the size macros are upper case
    for c in got:
        assert C_IDENT.fullmatch(c) and c not in C_KEYWORDS, c
    assert len({c.upper() for c in got}) == len(got)


def names_model() -> bytes:
    mb = ModelBuilder(seed=3)
    ins = [mb.input((1, 6), "float32", name=n) for n in IN_NAMES]
    s = mb.add(mb.add(ins[0], ins[1]), ins[2])
    mb.output(mb.mul(s, ins[3]), name=OUT_NAMES[0])
    mb.output(mb.sub(ins[4], ins[0]), name=OUT_NAMES[1])
    return mb.build()


def _inputs(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, 6)).astype(np.float32) for _ in IN_NAMES]


def _metadata(tar_path) -> dict:
    with tarfile.open(tar_path) as tf:
        member = next(m for m in tf.getmembers() if m.name.lstrip("./") == "metadata.json")
        return json.loads(tf.extractfile(member).read())


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    d = tmp_path_factory.mktemp("names")
    (d / "m.tflite").write_bytes(names_model())
    emit(d / "m.tflite", d / "m.tar", name="names")
    return d


def test_metadata_keeps_the_names_and_records_the_c_names(archive):
    main = _metadata(archive / "m.tar")["modules"]["names"]["memory"]["functions"]["main"][0]
    assert sorted(main["inputs"]) == sorted(IN_NAMES)  # TVM sorts the keys
    assert sorted(main["outputs"]) == sorted(OUT_NAMES)
    assert main["inputs"]["14"]["c_name"] == "t_14"
    assert main["inputs"]["x:y"]["c_name"] == "x_y_2"
    assert main["outputs"]["int"]["c_name"] == "int_"
    assert "c_name" not in main["inputs"]["input.4"]  # TVM's sanitized name: nothing to say


def test_the_emitted_c_compiles_and_matches_tflm(tmp_path):
    require_tool("gcc")
    model = names_model()
    gen = emit_sources(model, name="names")
    assert "void* t_14;" in gen.header and "void* int_;" in gen.header
    exe = harness.build(gen, tmp_path)
    inputs = _inputs()
    for got, want in zip(harness.run(exe, gen, inputs), run_tflm(model, inputs), strict=True):
        np.testing.assert_array_equal(got, want)


def test_the_archive_reader_gives_the_models_names(archive):
    with mlf.open_mlf(archive / "m.tar") as lib:
        mod = lib.module(None)
        assert [t.name for t in mod.inputs] == IN_NAMES
        assert [t.c_name for t in mod.inputs] == ["t_14", "input_4", "a_b_0", "x_y", "x_y_2"]
        assert [t.name for t in mod.outputs] == OUT_NAMES
        assert [t.c_name for t in mod.outputs] == ["int_", "serving_default_out_0"]


def test_info_shows_the_models_names(archive):
    out = subprocess.run([sys.executable, "-m", "project_api", "info", str(archive / "m.tar"),
                          "--json"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for n in IN_NAMES + OUT_NAMES:
        assert json.dumps(n) in text, n


def test_python_api_by_name_on_the_host_template(archive, tmp_path):
    require_tool("gcc")
    model = names_model()
    inputs = _inputs(1)
    want = run_tflm(model, inputs)
    with generate_host_project(archive / "m.tar", tmp_path / "prj") as project, \
            project.session() as session:
        dev = session.model("names")
        assert dev.input_names == IN_NAMES
        # by the model's names, in an order of our own
        for name in reversed(IN_NAMES):
            dev.set_input(name, inputs[IN_NAMES.index(name)])
        dev.run()
        np.testing.assert_array_equal(dev.get_output(0), want[0].reshape(dev.get_output(0).shape))
        np.testing.assert_array_equal(dev.get_output(1), want[1].reshape(dev.get_output(1).shape))
        with pytest.raises(Exception, match="x.y|x:y|input"):
            dev.set_input("no such input", inputs[0])


def test_ai_api_name_tables_give_the_models_names(archive, tmp_path):
    """The ``ai_`` API's tables name the tensors as the model does; its C compiles with the
    emitted header's identifiers."""
    cc = require_tool("cc")
    from project_api.system import paths
    from project_api.template import ai_api, glue, quoting

    prj = tmp_path / "prj"
    prj.mkdir()
    mlf.safe_extract(archive / "m.tar", prj / "model")
    project = ai_api.prepare(prj, [], "test", shared_pool=True, seed=1)
    env = quoting.environment()
    (prj / "src").mkdir()
    (prj / "src" / "model_glue.c").write_text(glue.render_model_glue(env, project.modules))
    ai_api.write_sources(env, prj, project)
    sources = "\n".join((prj / s).read_text() for s in project.sources)
    sources += (prj / "src" / "model_glue.c").read_text()
    for n in IN_NAMES + OUT_NAMES:
        assert f'"{n}"' in sources, n
    (prj / "crt_config.h").write_text("/* defaults */\n")
    crt = paths.crt_dir()
    for src in [*(prj / s for s in project.sources), prj / "src" / "model_glue.c"]:
        subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-c", "-o",
                        str(tmp_path / (src.stem + ".o")), f"-I{prj / 'src/ai'}",
                        f"-I{crt / 'include'}", f"-I{prj}", "-include",
                        str(prj / "crt_config.h"),
                        *[f"-I{prj / d / 'codegen/host/include'}" for d in project.model_dirs],
                        str(src)], check=True, capture_output=True, text=True, timeout=120)

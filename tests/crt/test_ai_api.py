"""The generated ai_ API on the host: two emitted models whose modules are both named
``default`` (one renamed at generate time), built with cc -std=c99 -Wall -Wextra -Werror and
ASan+UBSan against the backend library only; every error path (NULL handle, index out of range,
too-small or misaligned pool, exhausted handles, destroyed handle) and its last-error string;
per-channel quantization as the MLF has it; outputs equal to TFLite Micro."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
from ai_api_helpers import (
    PER_CHANNEL,
    check_against_tflm,
    hex_of,
    scale_bits,
    with_per_channel_output,
)
from conftest import require_tool

from project_api.archive import mlf
from project_api.archive.crt_manifest import read_manifest
from project_api.emit import emit
from project_api.errors import ServerError
from project_api.system import paths
from project_api.template import ai_api, glue, quoting

UNIT_C = Path(__file__).resolve().parents[1] / "ai_api_unit.c"


@pytest.fixture(scope="module")
def archives(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("ai_archives")
    hello = emit(models_dir / "hello_world_int8.tflite", out / "hello.tar", name="default").path
    speech = emit(models_dir / "micro_speech_int8.tflite", out / "speech.tar",
                  name="default").path
    return {"hello": hello, "speech_pc": with_per_channel_output(speech, out / "speech_pc.tar")}


def _project(where: Path, main: Path, extra: list[Path], shared: bool) -> ai_api.AiProject:
    where.mkdir()
    mlf.safe_extract(main, where / "model")
    project = ai_api.prepare(where, extra, "test", shared_pool=shared, seed=3)
    env = quoting.environment()
    (where / "src").mkdir()
    (where / "src" / "model_glue.c").write_text(glue.render_model_glue(env, project.modules))
    ai_api.write_sources(env, where, project)
    return project


@pytest.fixture(scope="module")
def unit(archives: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    cc = require_tool("cc")
    prj = tmp_path_factory.mktemp("ai_unit") / "prj"
    project = _project(prj, archives["hello"], [archives["speech_pc"]], shared=True)
    (prj / "crt_config.h").write_text("/* defaults */\n")
    crt = paths.crt_dir()
    backend = [str(crt / p) for p in read_manifest(crt).project_sources("standalone")]
    models = [str(p) for d in project.model_dirs for p in sorted((prj / d).glob(
        "codegen/host/src/*.c"))]
    includes = [f"-I{prj / d / 'codegen/host/include'}" for d in project.model_dirs]
    exe = prj / "unit"
    cmd = [cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-g", "-O1",
           "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer",
           f"-I{prj / 'src/ai'}", f"-I{crt / 'include'}", f"-I{prj}", "-include",
           str(prj / "crt_config.h"), *includes, "-Wl,--wrap=tvmgen_default_run", "-o", str(exe),
           str(UNIT_C),
           *(str(prj / s) for s in project.sources), *backend, *models, "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120)
    return project, run


def test_unit_build_runs_clean_under_sanitizers(unit) -> None:
    _, run = unit
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FAILED" not in run.stdout and "status: ok" in run.stdout
    assert "runtime error" not in run.stderr and "AddressSanitizer" not in run.stderr


def test_error_strings(unit) -> None:
    lines = dict(line.split(": ", 1) for line in unit[1].stdout.splitlines() if ": " in line)
    assert lines["error create null handle"].startswith("ai_create: handle is NULL")
    assert lines["error create null info"].startswith("ai_create: model info is NULL")
    assert "needs an activation pool of 64 bytes; got NULL" in lines["error create null pool"]
    assert lines["error create small pool"] == (
        "ai_create: activation pool of 63 bytes is too small for model 'default', which needs "
        "64 bytes")
    assert "not 16-byte aligned" in lines["error create misaligned pool"]
    assert lines["error run null"] == "ai_run: network handle is NULL"
    assert lines["error null handle"] == "ai_get_info: network handle is NULL"
    assert lines["error input index"] == (
        "ai_get_input: index 1 out of range (model 'default' has 1 inputs)")
    assert lines["error output index"].startswith("ai_get_output: index 8 out of range")
    assert lines["error input no data"] == "ai_run: input 0 of model 'default' has no data"
    assert "not a live network handle" in lines["error destroyed"]
    assert "network handles are in use" in lines["error exhausted"]
    assert lines["error reentrant"] == (
        "ai_run: another ai_run is in progress; ai_run is not reentrant")


def test_models_names_sizes_and_per_channel_quantization(unit, archives) -> None:
    project, run = unit
    assert project.renamed == {"speech_pc.tar:default": "default_1"}
    assert "models: 2" in run.stdout
    hello, speech = project.models
    assert (hello["name"], speech["name"], speech["source_name"]) == ("default", "default_1",
                                                                      "default")
    assert "model default_1: source default archive speech_pc.tar version mlf-7" in run.stdout
    assert hello["activations_size"] == ai_api.activations_bytes(32, 1) == 64
    assert speech["weights_size"] > 10_000 and speech["activations_size"] >= 4008
    want = " ".join(f"{scale_bits(s)}/{z}" for s, z in zip(PER_CHANNEL["scale"],
                                                           PER_CHANNEL["zero_point"], strict=True))
    assert f"quant default_1 output 0: axis 1 count 4 {want}" in run.stdout
    assert "quant default input 0: axis -1 count 1 " in run.stdout


def test_outputs_equal_tflite_micro(unit, models_dir: Path) -> None:
    project, run = unit
    outputs = [line.split(": ", 1)[0].split(" ", 1)[1] + " " + line.split(": ", 1)[1]
               for line in run.stdout.splitlines() if line.startswith("output ")]
    for k, (m, tflite) in enumerate(zip(project.models, ("hello_world_int8",
                                                         "micro_speech_int8"), strict=True)):
        t = m["inputs"][0]
        x = ai_api.sample_input(3, k, 0, "int8", t["shape"])
        check_against_tflm(models_dir / f"{tflite}.tflite", "int8", tuple(t["shape"]),
                           x.tobytes(), hex_of(outputs, m["name"]))


def test_sample_inputs_are_deterministic() -> None:
    a = ai_api.sample_input(7, 1, 0, "int8", (1, 49, 40))
    assert a.dtype == np.int8 and a.shape == (1, 49, 40)
    np.testing.assert_array_equal(a, ai_api.sample_input(7, 1, 0, "int8", (1, 49, 40)))
    assert not np.array_equal(a, ai_api.sample_input(8, 1, 0, "int8", (1, 49, 40)))
    f = ai_api.sample_input(0, 0, 0, "float32", (3,))
    assert f.dtype == np.float32 and np.all(np.abs(f) <= 1)


def test_pool_sizes_shared_and_separate(archives, tmp_path: Path) -> None:
    shared = _project(tmp_path / "s", archives["hello"], [archives["speech_pc"]], shared=True)
    separate = _project(tmp_path / "p", archives["hello"], [archives["speech_pc"]], shared=False)
    sizes = [m["activations_size"] for m in separate.models]
    assert shared.pools_size == max(sizes) and separate.pools_size == sum(sizes)
    header = (tmp_path / "s/src/ai/ai_sample.h").read_text()
    assert f"#define AI_SAMPLE_POOLS_SIZE {max(sizes)}" in header
    assert "ai_activations_shared" in (tmp_path / "s/src/ai/ai_sample.c").read_text()
    assert "ai_activations_default_1[AI_DEFAULT_1_ACTIVATIONS_SIZE]" in (
        tmp_path / "p/src/ai/ai_sample.c").read_text()


def test_bad_per_channel_metadata_is_one_line() -> None:
    with pytest.raises(ServerError, match="4 per-channel scales do not match axis 0"):
        glue.quant_context({"scale": [1.0] * 4, "zero_point": [0] * 4, "axis": 0}, (1, 4), "t")
    q = glue.quant_context({"scale": [0.5, 0.25], "zero_point": [1, 2],
                              "quantized_dimension": -1}, (3, 2), "t")
    assert q["axis"] == 1 and q["scale_literals"] == ["0.5f", "0.25f"]


def test_missing_extra_archive(archives, tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="extra_models: .*nope.tar does not exist"):
        _project(tmp_path / "x", archives["hello"], [tmp_path / "nope.tar"], shared=False)


def test_clash_with_prebuilt_objects_is_refused(archives, tmp_path: Path) -> None:
    """A module that ships codegen/host/lib/*.o cannot be renamed: one line says to re-emit."""
    import tarfile

    src = tmp_path / "src"
    mlf.safe_extract(archives["hello"], src)
    (src / "codegen/host/lib").mkdir()
    (src / "codegen/host/lib/default_lib0.o").write_bytes(b"\x7fELF")
    prebuilt = tmp_path / "prebuilt.tar"
    with tarfile.open(prebuilt, "w") as tar:
        for path in sorted(src.rglob("*")):
            tar.add(path, arcname=str(path.relative_to(src)), recursive=False)
    with pytest.raises(ServerError, match=r"prebuilt.tar: module 'default' clashes .* emit it "
                                          r"again with another name"):
        _project(tmp_path / "x", archives["hello"], [prebuilt], shared=False)


def test_workspace_is_served_from_the_pool(unit) -> None:
    project, run = unit
    for m in project.models:
        line = next(x for x in run.stdout.splitlines() if x.startswith(f"workspace {m['name']}:"))
        peak, touched = int(line.split()[3]), int(line.split()[5])
        assert m["workspace_size_bytes"] <= peak <= m["activations_size"] and touched > 0


STATEFUL_MAIN = r"""
#include <stdio.h>
#include <string.h>
#include "ai_models.h"

static uint8_t g_pool[AI_MAX_ACTIVATIONS_SIZE] AI_ALIGNED(AI_ACTIVATIONS_ALIGNMENT);

static int run_all(ai_handle h, const uint8_t* in, size_t runs) {
  ai_tensor* x = ai_get_input(h, 0);
  ai_tensor* y = ai_get_output(h, 0);
  size_t r, i;
  for (r = 0; r < runs; r++) {
    memcpy(x->data, in + r * x->size_bytes, x->size_bytes);
    if (ai_run(h) != AI_STATUS_OK) return 1;
    printf("out ");
    for (i = 0; i < y->size_bytes; i++) printf("%02x", ((const uint8_t*)y->data)[i]);
    printf("\n");
  }
  return 0;
}

int main(void) {
  static uint8_t in[4096];
  const ai_model_info* info = ai_find_model("default");
  ai_handle h;
  size_t n = fread(in, 1, sizeof(in), stdin);
  size_t runs;
  if (info == NULL || ai_create(info, g_pool, sizeof(g_pool), &h) != AI_STATUS_OK) return 2;
  runs = n / ai_get_input(h, 0)->size_bytes;
  printf("state %lu api %d.%d\n", (unsigned long)info->state_size, AI_API_VERSION_MAJOR,
         AI_API_VERSION_MINOR);
  if (run_all(h, in, runs) != 0 || ai_reset(h) != AI_STATUS_OK) return 3;
  if (run_all(h, in, runs) != 0) return 4;
  printf("null %d %s\n", (int)ai_reset(NULL), ai_get_error(NULL));
  return 0;
}
"""


def test_ai_reset_restores_a_stateful_model(tmp_path: Path) -> None:
    """A streaming model (CALL_ONCE init, resource variable) through the ai_ API: info
    state_size is the archive's, successive ai_run outputs follow one TFLM interpreter, and
    after ai_reset the same inputs give the same outputs again."""
    from helpers.state_models import accumulate, model, streams

    from project_api.emit.reference import run_tflm_sequence

    cc = require_tool("cc")
    model_bytes = model(accumulate(True), "int8", (2, 3))
    tar = emit(model_bytes, tmp_path / "stream.tar", name="default").path
    prj = tmp_path / "prj"
    project = _project(prj, tar, [], shared=False)
    (prj / "crt_config.h").write_text("/* defaults */\n")
    (prj / "main.c").write_text(STATEFUL_MAIN)
    crt = paths.crt_dir()
    backend = [str(crt / p) for p in read_manifest(crt).project_sources("standalone")]
    models = [str(p) for d in project.model_dirs for p in sorted((prj / d).glob(
        "codegen/host/src/*.c"))]
    exe = prj / "stateful"
    subprocess.run([cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-g", "-O1",
                    "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                    f"-I{prj / 'src/ai'}", f"-I{crt / 'include'}", f"-I{prj}", "-include",
                    str(prj / "crt_config.h"),
                    *(f"-I{prj / d / 'codegen/host/include'}" for d in project.model_dirs),
                    "-o", str(exe), str(prj / "main.c"), *(str(prj / s) for s in project.sources),
                    *backend, *models, "-lm"], check=True, capture_output=True, timeout=300)
    runs = streams(model_bytes, 4, 5)
    data = b"".join(r[0].tobytes() for r in runs)
    out = subprocess.run([str(exe)], input=data, capture_output=True, timeout=60, check=True)
    lines = out.stdout.decode().splitlines()
    assert lines[0] == f"state {project.models[0]['state_size']} api 1.1"
    assert project.models[0]["state_size"] == 16
    want = [r[0].tobytes().hex() for r in run_tflm_sequence(model_bytes, runs)]
    got = [line.split()[1] for line in lines if line.startswith("out ")]
    assert got == want + want
    assert lines[-1] == "null 1 ai_reset: network handle is NULL"

"""project_api.template.glue: the model glue and crt_config.h generators, against golden C."""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path

import pytest
from conftest import require_tool

from project_api.archive.model import ModuleInfo, TensorInfo
from project_api.errors import ServerError
from project_api.system import paths
from project_api.template import glue, quoting

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _tensor(name: str, dtype: str, shape: tuple[int, ...], bits: int) -> TensorInfo:
    size = (bits * math.prod(shape) + 7) // 8
    return TensorInfo(name=name, c_name=quoting.c_identifier(name), dtype=dtype, size_bytes=size,
                      shape=shape)


def _module(name: str, run_function: str, inputs: list[TensorInfo], outputs: list[TensorInfo],
            workspace: int, header: bool = True) -> ModuleInfo:
    return ModuleInfo(
        name=name, executors=["aot"], style="full-model", inputs=inputs, outputs=outputs,
        workspace_size_bytes=workspace, constants_size_bytes=0, io_size_bytes=None,
        interface_header=Path(f"tvmgen_{name}.h") if header else None, sources=[],
        run_function=run_function,
    )


def _modules() -> list[ModuleInfo]:
    """Two modules: a TFLite-named int8 one (struct API) and an early-v5 float one (flat API)."""
    kws = _module(
        "default", "tvmgen_default_run",
        [_tensor("serving_default_input_1:0", "int8", (1, 49, 10, 1), 8)],
        [_tensor("StatefulPartitionedCall:0", "int8", (1, 12), 8)], workspace=16000,
    )
    sine = _module(
        "sine\"model*/", "tvmgen_sine_model___run_model",
        [_tensor("x", "float32", (1, 1), 32), _tensor("scale/é", "uint16", (), 16)],
        [_tensor("output", "float32", (1, 1), 32)], workspace=0, header=False,
    )
    return [kws, sine]


def test_model_glue_matches_golden() -> None:
    env = quoting.environment()
    contexts = [glue.module_context(m, "host") for m in _modules()]
    text = glue.render_model_glue(env, contexts, build_hash="0123456789abcde")
    golden = GOLDEN / "model_glue.c"
    if os.environ.get("PROJECT_API_UPDATE_GOLDEN"):
        golden.write_text(text)
    assert text == golden.read_text()


def test_model_glue_facts() -> None:
    kws, sine = (glue.module_context(m, "host") for m in _modules())
    assert (kws["api"], kws["prefix"], kws["ident"]) == ("struct", "tvmgen_default", "model_default")
    assert [(t["dtype_code"], t["dtype_bits"], t["dtype_lanes"]) for t in kws["inputs"]] == [(0, 8, 1)]
    assert kws["inputs"][0]["size_bytes"] == 490
    assert sine["api"] == "flat" and sine["ident"] == "model_sine_model__"
    assert [t["dtype_code"] for t in sine["inputs"]] == [2, 1]  # float, uint
    assert quoting.c_string('sine"model') == '"sine\\"model"'
    assert quoting.c_string("scale/é") == '"scale/\\303\\251"'  # UTF-8 bytes as octal escapes
    assert quoting.c_identifier("9lives") == "_9lives"


def test_workspace_sizing() -> None:
    contexts = [glue.module_context(m, "host") for m in _modules()]
    assert glue.workspace_bytes(contexts) == (16000 + glue.WORKSPACE_SLACK_BYTES + 15) // 16 * 16
    # Nothing allocated through TVMBackendAllocWorkspace: no second pool is reserved.
    assert glue.workspace_bytes([contexts[1]]) == glue.MIN_WORKSPACE_BYTES
    pooled = _modules()[0]
    pooled.internal_workspace_bytes = 16000  # type: ignore[attr-defined]  # USMP pool in its C
    assert glue.module_context(pooled, "host")["workspace_size_bytes"] == 0


def test_module_context_errors_name_the_fix() -> None:
    kws = _modules()[0]
    kws.executors = ["graph"]
    with pytest.raises(ServerError, match="built for the graph executor but its archive has no "
                                          "executor-config/graph JSON; re-export the model"):
        glue.module_context(kws, "host")
    kws.executors = ["vm"]
    with pytest.raises(ServerError, match="runs AOT and graph-executor modules only"):
        glue.module_context(kws, "host")
    shapeless = _module("m", "tvmgen_m_run",
                        [TensorInfo("in:0", "in_0", "int8", 4, None)], [], 0)
    with pytest.raises(ServerError, match=r"--input-spec in:0:int8:"):
        glue.module_context(shapeless, "host")
    pooled = _modules()[0]
    pooled.external_pools = {"sram": 1024}
    with pytest.raises(ServerError, match="takes external workspace pools sram, which the host"):
        glue.module_context(pooled, "host")
    odd = _module("m", "tvmgen_m_run", [TensorInfo("a", "a", "posit8", 1, (1,))], [], 0)
    with pytest.raises(ServerError, match="dtype 'posit8' is not supported by the host template"):
        glue.module_context(odd, "host")


def test_crt_config_lists_only_overrides() -> None:
    env = quoting.environment()
    defaults = glue.crt_defaults()
    assert defaults["TVM_CRT_MAX_PACKET_SIZE_BYTES"] == "2048"
    text = glue.render_crt_config(env, {
        "TVM_CRT_MAX_PACKET_SIZE_BYTES": (2048, "Largest RPC packet."),  # = default: left out
        "TVM_CRT_MAX_NDIM": (4, "Largest rank."),
        "TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES": (1024, "Model workspace."),  # a template knob: kept
    }, title="test")
    assert "TVM_CRT_MAX_PACKET_SIZE_BYTES" not in text
    assert "#define TVM_CRT_MAX_NDIM 4\n" in text
    assert "#define TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES 1024\n" in text


def test_golden_glue_compiles_against_the_runtime(tmp_path: Path) -> None:
    """The golden glue is valid C99 for the runtime's aot_model.h (with stand-in entry points)."""
    cc = require_tool("cc")
    (tmp_path / "tvmgen_default.h").write_text(
        "#include <stdint.h>\n"
        "struct tvmgen_default_inputs { void* serving_default_input_1_0; };\n"
        "struct tvmgen_default_outputs { void* StatefulPartitionedCall_0; };\n"
        "int32_t tvmgen_default_run(struct tvmgen_default_inputs* i, "
        "struct tvmgen_default_outputs* o);\n")
    main = tmp_path / "main.c"
    main.write_text(
        "#include <stdint.h>\n#include <stdio.h>\n#include <string.h>\n"
        "#include <tvm/runtime/crt/aot_model.h>\n"
        "struct tvmgen_default_inputs { void* serving_default_input_1_0; };\n"
        "struct tvmgen_default_outputs { void* StatefulPartitionedCall_0; };\n"
        "int32_t tvmgen_default_run(struct tvmgen_default_inputs* i, "
        "struct tvmgen_default_outputs* o) {\n"
        "  memcpy(o->StatefulPartitionedCall_0, i->serving_default_input_1_0, 12); return 0; }\n"
        "int32_t tvmgen_sine_model___run_model(void* a, void* b, void* c) {\n"
        "  (void)b; *(float*)c = *(float*)a * 2; return 0; }\n"
        "int main(void) {\n"
        "  const TVMCrtAotModel* m = TVMCrtAotModel_Lookup(\"default\");\n"
        "  const TVMCrtAotModel* s = TVMCrtAotModel_Lookup(\"sine\\\"model*/\");\n"
        "  void* in[2]; void* out[1]; float x = 1.5f;\n"
        "  if (!m || !s || TVMCrtAotModel_Lookup(\"nope\") || m->num_inputs != 1 ||\n"
        "      m->inputs[0].size_bytes != 490 || m->inputs[0].shape[1] != 49 ||\n"
        "      strcmp(m->outputs[0].name, \"StatefulPartitionedCall:0\") != 0) return 1;\n"
        "  memset(m->inputs[0].data, 7, 490);\n"
        "  in[0] = m->inputs[0].data; out[0] = m->outputs[0].data;\n"
        "  if (m->run(in, out) != 0 || ((int8_t*)m->outputs[0].data)[11] != 7) return 2;\n"
        "  in[0] = &x; in[1] = s->inputs[1].data; out[0] = s->outputs[0].data;\n"
        "  if (s->run(in, out) != 0 || *(float*)s->outputs[0].data != 3.0f) return 3;\n"
        "  if (s->inputs[1].dtype.code != 1 || s->inputs[1].dtype.bits != 16) return 4;\n"
        "  puts(\"ok\"); return 0; }\n")
    exe = tmp_path / "glue_test"
    include = paths.crt_dir() / "include"
    build = subprocess.run(
        [cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-I", str(include), "-I", str(tmp_path),
         "-o", str(exe), str(main), str(GOLDEN / "model_glue.c")],
        capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert (run.returncode, run.stdout) == (0, "ok\n")

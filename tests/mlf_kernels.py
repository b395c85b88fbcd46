"""Model Library Format archives built in code, for the host template's tests.

Each archive has TVM's AOT layout (spec §3.2/§3.3): ``metadata.json`` (version 7, with our
``shape`` extension), ``codegen/host/include/tvmgen_<name>.h`` written like TVM's interface
generator (spec §3.5), and ``codegen/host/src/<name>_lib0.c`` holding hand-written C kernels that
use the TVM backend API the way generated code does (``TVMBackendAllocWorkspace`` and friends).
A v5-style archive (flat ``tvmgen_<name>_run_model`` entry point, shapes only in the Relay text)
covers early exports. The numpy reference of each model is computed independently in the tests.
"""

from __future__ import annotations

import io
import json
import re
import tarfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from mlf_factory import tvm_interface_header

_C_TYPES = {
    "int8": "int8_t",
    "uint8": "uint8_t",
    "int16": "int16_t",
    "int32": "int32_t",
    "float32": "float",
}


@dataclass
class Tensor:
    """One model input or output: name as in metadata.json, dtype string, shape."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def size_bytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    @property
    def c_name(self) -> str:
        return re.sub(r"[^a-zA-Z0-9]", "_", self.name)

    @property
    def c_type(self) -> str:
        return _C_TYPES[self.dtype]


@dataclass
class Module:
    """One module of an archive: its interface and the C source of ``<name>_lib0.c``."""

    name: str
    inputs: list[Tensor]
    outputs: list[Tensor]
    source: str
    workspace_size_bytes: int = 0
    operator_functions: list[str] = field(default_factory=list)


def interface_header(mod: Module) -> str:
    """``tvmgen_<name>.h`` as TVM's C interface generator writes it (spec §3.5)."""
    return tvm_interface_header(mod.name, [(t.name, t.size_bytes) for t in mod.inputs],
                                [(t.name, t.size_bytes) for t in mod.outputs],
                                mod.workspace_size_bytes)


def _tensor_json(t: Tensor, with_shape: bool) -> dict:
    d: dict = {"dtype": t.dtype, "size": t.size_bytes}
    if with_shape:
        d["shape"] = list(t.shape)
    return d


def metadata_v7(modules: Sequence[Module], with_shapes: bool = True) -> dict:
    """metadata.json for a full-model AOT export (spec §3.3), plus our ``shape`` extension."""
    out: dict = {"modules": {}, "version": 7}
    for mod in modules:
        io_bytes = sum(t.size_bytes for t in mod.inputs + mod.outputs)
        out["modules"][mod.name] = {
            "executors": ["aot"],
            "export_datetime": time.strftime("%Y-%m-%d %H:%M:%SZ"),
            "memory": {
                "functions": {
                    "main": [
                        {
                            "constants_size_bytes": 0,
                            "device": 1,
                            "inputs": {t.name: _tensor_json(t, with_shapes) for t in mod.inputs},
                            "io_size_bytes": io_bytes,
                            "outputs": {t.name: _tensor_json(t, with_shapes) for t in mod.outputs},
                            "workspace_size_bytes": mod.workspace_size_bytes,
                        }
                    ],
                    "operator_functions": [
                        {
                            "function_name": f,
                            "workspace": [
                                {"device": 1, "workspace_size_bytes": mod.workspace_size_bytes}
                            ],
                        }
                        for f in mod.operator_functions
                    ],
                }
            },
            "model_name": mod.name,
            "style": "full-model",
            "target": ["c -keys=cpu "],
        }
    return out


def relay_text(mod: Module) -> str:
    """The ``str(ir_mod)`` form of a one-function module, enough to recover names and shapes."""

    def ty(t: Tensor) -> str:
        dims = ", ".join(str(d) for d in t.shape)
        if len(t.shape) == 1:
            dims += ","
        return f"Tensor[({dims}), {t.dtype}]"

    params = ", ".join(f"%{t.name}: {ty(t)}" for t in mod.inputs)
    ret = ty(mod.outputs[0]) if len(mod.outputs) == 1 else "(" + ", ".join(ty(t) for t in mod.outputs) + ")"
    return f"def @main({params}) -> {ret} {{\n  /* hand-written kernel */\n}}\n"


def _add_file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mtime = int(time.time())
    tar.addfile(info, io.BytesIO(data))


def _add_dir(tar: tarfile.TarFile, name: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = 0o755
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    tar.addfile(info)


def write_mlf(path: str | Path, modules: Sequence[Module], extra_files: dict[str, bytes] | None = None) -> Path:
    """Write a version-7 archive of ``modules`` to ``path`` (a plain tar, members under ``./``)."""
    path = Path(path)
    files: dict[str, bytes] = {
        "metadata.json": json.dumps(metadata_v7(modules), indent=2, sort_keys=True).encode(),
    }
    for mod in modules:
        files[f"codegen/host/include/tvmgen_{mod.name}.h"] = interface_header(mod).encode()
        files[f"codegen/host/src/{mod.name}_lib0.c"] = mod.source.encode()
        files[f"parameters/{mod.name}.params"] = _empty_params()
        files[f"src/{mod.name}.relay"] = relay_text(mod).encode()
    files.update(extra_files or {})
    _write_tar(path, files)
    return path


def _write_tar(path: Path, files: dict[str, bytes]) -> None:
    dirs = sorted({str(Path(n).parent) for n in files} - {"."})
    all_dirs: set[str] = set()
    for d in dirs:
        parts = Path(d).parts
        for i in range(1, len(parts) + 1):
            all_dirs.add("/".join(parts[:i]))
    with tarfile.open(path, "w") as tar:
        _add_dir(tar, ".")
        for d in sorted(all_dirs):
            _add_dir(tar, f"./{d}")
        for name, data in files.items():
            _add_file(tar, f"./{name}", data)


def _empty_params() -> bytes:
    """An empty TVM param dict (spec §3.6): list magic, reserved, 0 names, 0 arrays."""
    return (0xF7E58D4F05049CB7).to_bytes(8, "little") + bytes(24)


# --- kernels ------------------------------------------------------------------------------------

_PRELUDE = """\
// Hand-written stand-in for TVM-generated code: same includes, calling convention and
// backend API use as the C codegen's output.
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"
#include <math.h>
#include <stdint.h>
"""


def add_module(name: str = "default", dtype: str = "int8", shape: tuple[int, ...] = (1, 4)) -> Module:
    """``output = a + b`` element-wise (int8 wraps like numpy; float32 is exact)."""
    a, b, out = Tensor("a", dtype, shape), Tensor("b", dtype, shape), Tensor("output", dtype, shape)
    n = int(np.prod(shape))
    ct = a.c_type
    op = f"({ct})(p0[i] + p1[i])" if dtype != "float32" else "p0[i] + p1[i]"
    src = _PRELUDE + f"""#include "tvmgen_{name}.h"

TVM_DLL int32_t tvmgen_{name}_fused_add({ct}* p0, {ct}* p1, {ct}* T_add) {{
  for (int32_t i = 0; i < {n}; ++i) {{
    T_add[i] = {op};
  }}
  return 0;
}}

TVM_DLL int32_t tvmgen_{name}___tvm_main__({ct}* a_buffer_var, {ct}* b_buffer_var, {ct}* output_buffer_var) {{
  if (tvmgen_{name}_fused_add(a_buffer_var, b_buffer_var, output_buffer_var) != 0) {{
    return -1;
  }}
  return 0;
}}

int32_t tvmgen_{name}_run(struct tvmgen_{name}_inputs* inputs, struct tvmgen_{name}_outputs* outputs) {{
  return tvmgen_{name}___tvm_main__(({ct}*)inputs->a, ({ct}*)inputs->b, ({ct}*)outputs->output);
}}
"""
    return Module(name, [a, b], [out], src, 0, [f"tvmgen_{name}_fused_add"])


def _c_floats(values: np.ndarray) -> str:
    return ", ".join(f"{float(v)!r}f" for v in values.reshape(-1))


def dense_module(
    name: str = "default", in_features: int = 16, out_features: int = 8, seed: int = 0
) -> tuple[Module, np.ndarray, np.ndarray]:
    """``output = relu(x @ W.T + bias)`` in float32, with the pre-activation in a workspace.

    Returns the module and the weights ``W`` (out_features, in_features) and ``bias`` it bakes in,
    so a test can compute the reference with numpy.
    """
    rng = np.random.default_rng(seed)
    weight = rng.uniform(-1.0, 1.0, (out_features, in_features)).astype(np.float32)
    bias = rng.uniform(-0.5, 0.5, (out_features,)).astype(np.float32)
    x = Tensor("input_1", "float32", (1, in_features))
    out = Tensor("output", "float32", (1, out_features))
    ws = out_features * 4
    src = _PRELUDE + f"""#include "tvmgen_{name}.h"

static const float fused_nn_dense_weight[{out_features * in_features}] = {{ {_c_floats(weight)} }};
static const float fused_nn_dense_bias[{out_features}] = {{ {_c_floats(bias)} }};

TVM_DLL int32_t tvmgen_{name}_fused_nn_dense_add(float* p0, float* T_dense) {{
  for (int32_t j = 0; j < {out_features}; ++j) {{
    float acc = 0.0f;
    for (int32_t k = 0; k < {in_features}; ++k) {{
      acc = acc + p0[k] * fused_nn_dense_weight[j * {in_features} + k];
    }}
    T_dense[j] = acc + fused_nn_dense_bias[j];
  }}
  return 0;
}}

TVM_DLL int32_t tvmgen_{name}_fused_nn_relu(float* p0, float* T_relu) {{
  for (int32_t j = 0; j < {out_features}; ++j) {{
    T_relu[j] = p0[j] > 0.0f ? p0[j] : 0.0f;
  }}
  return 0;
}}

TVM_DLL int32_t tvmgen_{name}___tvm_main__(float* input_1_buffer_var, float* output_buffer_var) {{
  void* sid_1_let = TVMBackendAllocWorkspace(1, 0, (uint64_t){ws}, 2, 32);
  if (sid_1_let == NULL) {{
    return -1;
  }}
  if (tvmgen_{name}_fused_nn_dense_add(input_1_buffer_var, (float*)sid_1_let) != 0) {{
    return -1;
  }}
  if (tvmgen_{name}_fused_nn_relu((float*)sid_1_let, output_buffer_var) != 0) {{
    return -1;
  }}
  if (TVMBackendFreeWorkspace(1, 0, sid_1_let) != 0) {{
    return -1;
  }}
  return 0;
}}

int32_t tvmgen_{name}_run(struct tvmgen_{name}_inputs* inputs, struct tvmgen_{name}_outputs* outputs) {{
  return tvmgen_{name}___tvm_main__((float*)inputs->input_1, (float*)outputs->output);
}}
"""
    mod = Module(
        name, [x], [out], src, ws,
        [f"tvmgen_{name}_fused_nn_dense_add", f"tvmgen_{name}_fused_nn_relu"],
    )
    return mod, weight, bias


def exp_module(name: str = "default", shape: tuple[int, ...] = (2,)) -> Module:
    """``output = expf(a)`` in float32: generated code that needs the C math library."""
    a, out = Tensor("a", "float32", shape), Tensor("output", "float32", shape)
    n = int(np.prod(shape))
    src = _PRELUDE + f"""#include "tvmgen_{name}.h"

TVM_DLL int32_t tvmgen_{name}_fused_exp(float* p0, float* T_exp) {{
  for (int32_t i = 0; i < {n}; ++i) {{
    T_exp[i] = expf(p0[i]);
  }}
  return 0;
}}

int32_t tvmgen_{name}_run(struct tvmgen_{name}_inputs* inputs, struct tvmgen_{name}_outputs* outputs) {{
  return tvmgen_{name}_fused_exp((float*)inputs->a, (float*)outputs->output);
}}
"""
    return Module(name, [a], [out], src, 0, [f"tvmgen_{name}_fused_exp"])


def add_mlf(path: str | Path, dtype: str = "int8", shape: tuple[int, ...] = (1, 4), name: str = "default") -> Path:
    """An archive holding one element-wise add module."""
    return write_mlf(path, [add_module(name, dtype, shape)])


def dense_mlf(path: str | Path, name: str = "default", **kwargs: int) -> tuple[Path, np.ndarray, np.ndarray]:
    """An archive holding one dense+relu module; returns (path, weight, bias)."""
    mod, weight, bias = dense_module(name, **kwargs)
    return write_mlf(path, [mod]), weight, bias


def v5_add_mlf(path: str | Path, shape: tuple[int, ...] = (1, 4)) -> Path:
    """An early (version 5) archive: no interface header, no tensor facts in metadata.json.

    The entry point is the flat ``tvmgen_default_run_model(a, b, output)``; input names, dtypes
    and shapes are only in ``src/relay.txt``.
    """
    mod = add_module("default", "int8", shape)
    n = int(np.prod(shape))
    src = _PRELUDE + f"""
TVM_DLL int32_t tvmgen_default_fused_add(int8_t* p0, int8_t* p1, int8_t* T_add) {{
  for (int32_t i = 0; i < {n}; ++i) {{
    T_add[i] = (int8_t)(p0[i] + p1[i]);
  }}
  return 0;
}}

TVM_DLL int32_t tvmgen_default_run_model(void* arg0, void* arg1, void* arg2) {{
  return tvmgen_default_fused_add((int8_t*)arg0, (int8_t*)arg1, (int8_t*)arg2);
}}
"""
    io_bytes = sum(t.size_bytes for t in mod.inputs + mod.outputs)
    metadata = {
        "export_datetime": time.strftime("%Y-%m-%d %H:%M:%SZ"),
        "memory": {
            "functions": {
                "main": [
                    {
                        "constants_size_bytes": 0,
                        "device": 1,
                        "io_size_bytes": io_bytes,
                        "workspace_size_bytes": 0,
                    }
                ],
                "operator_functions": [
                    {
                        "function_name": "tvmgen_default_fused_add",
                        "workspace": [{"device": 1, "workspace_size_bytes": 0}],
                    }
                ],
            },
        },
        "model_name": "default",
        "runtimes": ["aot"],
        "style": "full-model",
        "target": {"1": "c -keys=cpu -link-params=0"},
        "version": 5,
    }
    files = {
        "metadata.json": json.dumps(metadata, indent=2, sort_keys=True).encode(),
        "codegen/host/src/lib0.c": src.encode(),
        "parameters/default.params": _empty_params(),
        "src/relay.txt": relay_text(mod).encode(),
    }
    _write_tar(Path(path), files)
    return Path(path)


# --- project helpers shared by the host-template tests -------------------------------------------


def generate_host_project(mlf_path: str | Path, project_dir: str | Path, template: str | Path = "host",
                          build: bool = True, **options: object):
    """Generate (and build) a host-template project; returns the open GeneratedProject."""
    from project_api.api.project import generate_project

    options = {"warning_as_error": True, **options}
    return generate_project(template, mlf_path, project_dir, options, build=build)


def add_host_project(tmp: Path, shape: tuple[int, ...], dtype: str = "int8"):
    """A built host-template project of an element-wise ``a + b`` model of ``shape`` (in ``tmp``)
    and the model's :class:`~project_api.archive.mlf.ModuleInfo`: the device of the link tests."""
    from project_api.archive import mlf

    path = add_mlf(Path(tmp) / "add.tar", dtype=dtype, shape=shape)
    with mlf.open_mlf(path) as library:
        info = library.module(None)
    return generate_host_project(path, Path(tmp) / "prj"), info


def add_samples(n: int, seed: int, shape: tuple[int, ...]) -> tuple[dict[str, np.ndarray],
                                                                    np.ndarray]:
    """``n`` seeded int8 samples of the ``a + b`` model of :func:`add_host_project`: the inputs
    by name and numpy's wrapped sums (the reference)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 127, (n, *shape), dtype=np.int8, endpoint=True)
    b = rng.integers(-128, 127, (n, *shape), dtype=np.int8, endpoint=True)
    return {"a": a, "b": b}, (a + b).astype(np.int8)


def device_pids(binary: str | Path) -> list[int]:
    """Ids of the running processes whose executable is ``binary`` (Linux /proc)."""
    want = str(Path(binary).resolve())
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            exe = Path(entry / "exe").resolve(strict=True)
        except (OSError, RuntimeError):
            continue
        if str(exe) == want:
            pids.append(int(entry.name))
    return pids


def warning_module(name: str = "default") -> Module:
    """An int8 add whose C draws a -Wextra warning (signed/unsigned comparison)."""
    mod = add_module(name, "int8", (1, 4))
    mod.source = mod.source.replace(
        "for (int32_t i = 0; i < 4; ++i) {",
        "for (int32_t i = 0; i < sizeof(int32_t); ++i) {",
    )
    assert "sizeof(int32_t)" in mod.source
    return mod

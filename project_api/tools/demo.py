"""The demo behind ``project-api demo``: generate, build and run a bundled model on the host.

Two bundled models, both deterministic (seeded weights and inputs):

* ``"int8"`` (the default): the emitter's demo network (:func:`project_api.tflite.builder.demo_model`,
  int8 conv -> depthwise conv -> residual add -> pool -> fully connected -> softmax), built as a
  TFLite model in code, emitted to MLF and checked bit for bit against TensorFlow Lite Micro,
  or, when ``tflite-micro`` is not installed (the base install), against the same network
  evaluated in numpy with TFLM's integer arithmetic (:mod:`project_api.emit.numpy_reference`);
* ``"mlp"``: a float32 multilayer perceptron (8 -> 16 -> 4, ReLU between the layers) written
  here as an MLF with plain C kernels that use the TVM backend API as generated code does (one
  activation pool from ``TVMBackendAllocWorkspace`` per run), checked against numpy. It needs
  nothing but this module, so it is also the fallback when the emitter cannot be imported.
"""

from __future__ import annotations

import io
import json
import logging
import shutil
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from project_api.errors import ProjectError
from project_api.system import extras

_LOG = logging.getLogger(__name__)

DEMO_MODULE = "default"
_LAYERS = (8, 16, 4)


@dataclass
class DemoResult:
    """What the demo ran and what came back."""

    project_dir: Path
    model_path: Path
    inputs: dict[str, np.ndarray]
    outputs: list[np.ndarray]
    reference: list[np.ndarray]
    max_abs_error: float
    run_seconds: tuple[float, ...]  #: device-timed seconds per run, one per repeat
    description: str = ""  #: what the model is
    reference_name: str = "numpy"  #: what the outputs were checked against
    output_info: list = field(default_factory=list)  #: the MLF's TensorInfo per output
    note: str = ""  #: how to get a stronger check, when one was not available

    @property
    def ok(self) -> bool:
        """Float outputs within 1e-4 of the reference; integer outputs identical."""
        return self.max_abs_error <= 1e-4


def _c_floats(values: np.ndarray) -> str:
    return ", ".join(f"{float(v)!r}f" for v in values.reshape(-1))


def _demo_weights(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    layers = []
    for n_in, n_out in zip(_LAYERS[:-1], _LAYERS[1:], strict=True):
        w = rng.uniform(-1.0, 1.0, (n_out, n_in)).astype(np.float32)
        b = rng.uniform(-0.25, 0.25, (n_out,)).astype(np.float32)
        layers.append((w, b))
    return layers


def demo_reference(x: np.ndarray, layers: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """The MLP in numpy: ReLU after every layer but the last."""
    h = x.astype(np.float32)
    for i, (w, b) in enumerate(layers):
        h = h @ w.T + b
        if i < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return h.astype(np.float32)


def _demo_source(layers: list[tuple[np.ndarray, np.ndarray]], pool_bytes: int) -> str:
    (w1, b1), (w2, b2) = layers
    hidden, n_in, n_out = w1.shape[0], w1.shape[1], w2.shape[0]
    return f"""\
// project-api demo model: dense({n_in}->{hidden}) + relu, dense({hidden}->{n_out}).
#include <stdint.h>
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/c_backend_api.h"
#include "tvmgen_{DEMO_MODULE}.h"

static const float demo_w1[{w1.size}] = {{ {_c_floats(w1)} }};
static const float demo_b1[{b1.size}] = {{ {_c_floats(b1)} }};
static const float demo_w2[{w2.size}] = {{ {_c_floats(w2)} }};
static const float demo_b2[{b2.size}] = {{ {_c_floats(b2)} }};

static void demo_dense(const float* x, const float* w, const float* b, float* y,
                       int32_t n_in, int32_t n_out, int32_t relu) {{
  for (int32_t j = 0; j < n_out; ++j) {{
    float acc = 0.0f;
    for (int32_t k = 0; k < n_in; ++k) {{
      acc += x[k] * w[j * n_in + k];
    }}
    acc += b[j];
    y[j] = (relu && acc < 0.0f) ? 0.0f : acc;
  }}
}}

int32_t tvmgen_{DEMO_MODULE}_run(struct tvmgen_{DEMO_MODULE}_inputs* inputs,
                               struct tvmgen_{DEMO_MODULE}_outputs* outputs) {{
  float* pool = (float*)TVMBackendAllocWorkspace(1, 0, (uint64_t){pool_bytes}, 0, 8);
  if (pool == NULL) {{
    return -1;
  }}
  demo_dense((const float*)inputs->input, demo_w1, demo_b1, pool, {n_in}, {hidden}, 1);
  demo_dense(pool, demo_w2, demo_b2, (float*)outputs->output, {hidden}, {n_out}, 0);
  return TVMBackendFreeWorkspace(1, 0, pool) == 0 ? 0 : -1;
}}
"""


def _demo_header(n_in: int, n_out: int, pool_bytes: int) -> str:
    m, up = DEMO_MODULE, DEMO_MODULE.upper()
    return f"""\
#ifndef TVMGEN_{up}_H_
#define TVMGEN_{up}_H_
#include <stdint.h>

#ifdef __cplusplus
extern "C" {{
#endif

/*!
 * \\brief Input tensor input size (in bytes) for TVM module "{m}"
 */
#define TVMGEN_{up}_INPUT_SIZE {n_in * 4}
/*!
 * \\brief Output tensor output size (in bytes) for TVM module "{m}"
 */
#define TVMGEN_{up}_OUTPUT_SIZE {n_out * 4}
struct tvmgen_{m}_inputs {{
  void* input;
}};

struct tvmgen_{m}_outputs {{
  void* output;
}};

int32_t tvmgen_{m}_run(
  struct tvmgen_{m}_inputs* inputs,
  struct tvmgen_{m}_outputs* outputs
);
#define TVMGEN_{up}_WORKSPACE_SIZE {pool_bytes}

#ifdef __cplusplus
}}
#endif

#endif // TVMGEN_{up}_H_
"""


def write_demo_mlf(path: str | Path, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Write the demo model's MLF archive to ``path``; return its (weight, bias) per layer."""
    layers = _demo_weights(seed)
    n_in, hidden, n_out = _LAYERS
    pool_bytes = hidden * 4
    tensor = {"input": (n_in,), "output": (n_out,)}
    meta = {
        "modules": {
            DEMO_MODULE: {
                "executors": ["aot"],
                "export_datetime": time.strftime("%Y-%m-%d %H:%M:%SZ"),
                "memory": {
                    "functions": {
                        "main": [{
                            "constants_size_bytes": 0,
                            "device": 1,
                            "inputs": {"input": {"dtype": "float32", "shape": [1, n_in], "size": n_in * 4}},
                            "io_size_bytes": (n_in + n_out) * 4,
                            "outputs": {"output": {"dtype": "float32", "shape": [1, n_out], "size": n_out * 4}},
                            "workspace_size_bytes": pool_bytes,
                        }],
                        "operator_functions": [],
                    }
                },
                "model_name": DEMO_MODULE,
                "style": "full-model",
                "target": ["c"],
            }
        },
        "version": 7,
    }
    files = {
        "./metadata.json": json.dumps(meta, indent=2, sort_keys=True),
        f"./codegen/host/include/tvmgen_{DEMO_MODULE}.h": _demo_header(n_in, n_out, pool_bytes),
        f"./codegen/host/src/{DEMO_MODULE}_lib0.c": _demo_source(layers, pool_bytes),
        f"./src/{DEMO_MODULE}.relay": (
            f"def @main(%input: Tensor[(1, {tensor['input'][0]}), float32]) "
            f"-> Tensor[(1, {tensor['output'][0]}), float32] {{\n}}\n"
        ),
    }
    with tarfile.open(path, "w") as tar:
        for d in (".", "./codegen", "./codegen/host", "./codegen/host/include",
                  "./codegen/host/src", "./src"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return layers


_MARKER = ".project-api-demo"


@dataclass
class _Model:
    """The demo's model archive and what its outputs are checked against."""

    path: Path
    reference: Callable[[list[np.ndarray]], list[np.ndarray]]
    description: str
    reference_name: str
    note: str = ""


def _prepare(out_dir: Path, force: bool) -> None:
    """Make room for the demo's output; only ever removes what an earlier demo run wrote."""
    if not out_dir.exists():
        return
    ours = {"model.tar", "model.tflite", "project", _MARKER}
    others = sorted(p.name for p in out_dir.iterdir() if p.name not in ours)
    if not (out_dir / _MARKER).is_file() and not force:
        raise ProjectError(f"{out_dir} already exists; choose another directory or pass --force")
    if others:
        raise ProjectError(
            f"refusing to replace {out_dir}: it holds files the demo did not write "
            f"({', '.join(others[:5])}); pick an empty or new directory"
        )
    shutil.rmtree(out_dir)


def _int8_model(out: Path, seed: int, say: Callable[[str], None]) -> _Model | None:
    """Emit the int8 demo network with its reference: TFLite Micro when installed, else numpy's
    evaluation of the same TFLite model. None when the emitter cannot be imported."""
    try:
        from project_api.emit import emit
        from project_api.tflite.builder import demo_model
    except ImportError as exc:
        say(f"the int8 demo needs the emitter ({exc}); running the float32 MLP")
        return None
    tflite = out / "model.tflite"
    tflite.write_bytes(demo_model(seed))
    model_path = out / "model.tar"
    emit(tflite, model_path, name=DEMO_MODULE)
    description = ("int8 CNN 16x16x1 -> conv 3x3 -> depthwise 3x3 -> add -> pool -> dense -> "
                   "softmax(10), built as TFLite and emitted to C")
    try:
        extras.require("tflite_micro", "the demo's TFLite Micro comparison")
    except extras.MissingExtraError:
        from project_api.emit.numpy_reference import run_numpy

        note = ("tflite-micro is not installed, so the check is numpy's bit-exact int8 "
                f"evaluation; for the TFLite Micro comparison: {extras.install_line('reference')}")
        return _Model(model_path, lambda inputs: run_numpy(tflite.read_bytes(), inputs),
                      description, "numpy int8", note)
    from project_api.emit.reference import run_tflm

    return _Model(model_path, lambda inputs: run_tflm(tflite.read_bytes(), inputs),
                  description, "TFLite Micro")


def run_demo(
    out_dir: str | Path,
    *,
    model: str = "int8",
    force: bool = False,
    seed: int = 0,
    repeat: int = 3,
    number: int = 100,
    progress: Callable[[str], None] | None = None,
) -> DemoResult:
    """Generate, build and run a demo model on the host template, and check its outputs.

    ``model`` is ``"int8"`` (emitted, checked bit for bit against TensorFlow Lite Micro, or
    against numpy's int8 evaluation when ``tflite-micro`` is not installed: ``note`` then says
    how to get the TFLite Micro comparison) or ``"mlp"`` (float32, checked against numpy).
    Writes the model (``out_dir/model.tar``, and ``model.tflite`` for int8) and the generated
    project ``out_dir/project``; a folder left by an earlier demo run is replaced, anything else
    needs ``force`` (and must hold only demo output). ``progress`` is called with a short line
    before each step (the CLI prints them; the ``note`` is part of the result).
    """
    from project_api.api.project import generate_project
    from project_api.archive import mlf

    if model not in ("int8", "mlp"):
        raise ProjectError(f"demo model {model!r} is unknown; choose int8 or mlp")
    say = progress or (lambda line: _LOG.info("%s", line))
    out = Path(out_dir)
    _prepare(out, force)
    out.mkdir(parents=True)
    (out / _MARKER).write_text("written by 'project-api demo'; the next demo run replaces this folder\n")
    chosen = _int8_model(out, seed, say) if model == "int8" else None
    if chosen is None:
        mlp_path = out / "model.tar"
        layers = write_demo_mlf(mlp_path, seed)
        chosen = _Model(mlp_path, lambda inputs: [demo_reference(inputs[0], layers)],
                        f"float32 MLP {' -> '.join(map(str, _LAYERS))}", "numpy")
    model_path, description = chosen.path, chosen.description
    say(f"model: {description} -> {model_path}")

    with mlf.open_mlf(model_path) as library:
        info = library.module(DEMO_MODULE)
    rng = np.random.default_rng(seed + 1)
    inputs = []
    for t in info.inputs:
        dtype = np.dtype(t.dtype)
        if dtype.kind == "f":
            inputs.append(rng.uniform(-1.0, 1.0, t.require_shape()).astype(dtype))
        else:
            lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
            inputs.append(rng.integers(lo, hi, t.require_shape(), dtype=dtype, endpoint=True))

    project_dir = out / "project"
    say(f"generating the host project in {project_dir}")
    with generate_project("host", model_path, project_dir, {"project_type": "host_driven"}) as project:
        say("building (make)")
        project.build()
        say("running on the host device process")
        with project.session() as session:
            device_model = session.model(DEMO_MODULE)
            for i, x in enumerate(inputs):
                device_model.set_input(i, x)
            device_model.run()
            outputs = [device_model.get_output(i) for i in range(len(info.outputs))]
            timing = session.time(device_model, number=number, repeat=repeat)
    refs = [np.asarray(r) for r in chosen.reference(inputs)]
    err = max(
        float(np.max(np.abs(y.reshape(r.shape).astype(np.float64) - r.astype(np.float64))))
        if r.size else 0.0
        for y, r in zip(outputs, refs, strict=True)
    )
    return DemoResult(project_dir, model_path, {t.name: x for t, x in zip(info.inputs, inputs, strict=True)},
                      outputs, refs, err, timing.results, description, chosen.reference_name,
                      list(info.outputs), chosen.note)

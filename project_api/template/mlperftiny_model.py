"""The MLPerf Tiny model file of a ``mlperftiny`` project: which benchmark model the archive
holds, and ``src/mlperftiny_model.c`` (its ``TVMCrtMlperfTinyAotInfo``: quantization, the size of
the benchmark's data buffer, how the score is read) for the runtime's ``crt/src/mlperftiny``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from project_api.errors import ServerError
from project_api.template import glue
from project_api.template.options import option

#: MLPerf Tiny model versions (the benchmark's EE_MODEL_VERSION_*) and how each is scored.
MLPERFTINY_MODELS = {"kws01": "vector", "vww01": "vector", "ic01": "vector",
                     "ad01": "reconstruction"}
#: The ``mlperftiny_model`` option, for the OPTIONS of a template with project type mlperftiny.
MLPERFTINY_MODEL_OPTION = option(
    "mlperftiny_model", "str", choices=list(MLPERFTINY_MODELS), optional=["generate_project"],
    help="mlperftiny: the benchmark's model (default: guessed from the outputs).")
#: Models whose data sets hold uint8 pixels that an int8 model takes less 128 (the benchmark's
#: reference firmware does so).
MLPERFTINY_UINT8_IMAGES = ("vww01", "ic01")
#: Output sizes that name a model version when the option does not.
_MLPERFTINY_BY_OUTPUTS = {12: "kws01", 2: "vww01", 10: "ic01"}
#: The generated model file, relative to the project.
MODEL_FILE = "src/mlperftiny_model.c"


def mlperftiny_version(mod: Any, version: str | None) -> str:
    """The benchmark's model version of ``mod``: ``version`` if given, else guessed from the
    outputs (an output as large as the input: ad01; 12 classes: kws01; 2: vww01; 10: ic01)."""
    if version:
        return version
    in_n = int(np.prod(mod.inputs[0].shape)) if mod.inputs[0].shape else None
    out_n = int(np.prod(mod.outputs[0].shape)) if mod.outputs[0].shape else None
    if out_n is not None and out_n == in_n:
        return "ad01"
    if out_n in _MLPERFTINY_BY_OUTPUTS:
        return _MLPERFTINY_BY_OUTPUTS[out_n]
    raise ServerError(message=f"module {mod.name!r}: cannot tell which MLPerf Tiny model this is ({out_n} "
                f"outputs); set -o mlperftiny_model={'|'.join(MLPERFTINY_MODELS)}")


def write_model_file(project: Any, version: str | None, dest: str = MODEL_FILE) -> str:
    """Render ``src/mlperftiny_model.c`` (the ``TVMCrtMlperfTinyAotInfo`` of ``project``'s one
    module, for ``crt/src/mlperftiny``) from the MLF's quantization; return the model version.
    ``project`` is a :class:`~.new_project.NewProject`."""
    modules = list(project.library.modules.values())
    if len(modules) != 1:
        raise ServerError(message=f"project type mlperftiny runs one model; the archive has {len(modules)} "
                    "modules")
    mod = modules[0]
    where = f"module {mod.name!r}"
    if len(mod.inputs) != 1 or len(mod.outputs) != 1:
        raise ServerError(message=f"{where}: MLPerf Tiny models have one input and one output; this one has "
                    f"{len(mod.inputs)} and {len(mod.outputs)}")
    version = mlperftiny_version(mod, version)
    tensors = {}
    for kind, t in (("input", mod.inputs[0]), ("output", mod.outputs[0])):
        if t.dtype not in ("int8", "float32"):
            raise ServerError(message=f"{where}, {kind} {t.name!r}: dtype {t.dtype} (MLPerf Tiny firmware "
                        "takes int8 or float32)")
        quant = glue.quant_context(t.quantization, t.shape or (), f"{where}, {kind} {t.name!r}")
        if quant and quant["axis"] != -1:
            raise ServerError(message=f"{where}, {kind} {t.name!r}: per-channel quantization of a model "
                        "input or output is not supported")
        tensors[kind] = {"quant": quant if t.dtype == "int8" else None,
                         "size_bytes": t.size_bytes}
    db_bytes = tensors["input"]["size_bytes"] * (4 if tensors["input"]["quant"] else 1)
    path = project.dir / dest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(project.env.get_template("mlperftiny_model.c.j2").render(
        module=mod.name, version=version, score=MLPERFTINY_MODELS[version], db_bytes=db_bytes,
        input_uint8=version in MLPERFTINY_UINT8_IMAGES and mod.inputs[0].dtype == "int8",
        input=tensors["input"], output=tensors["output"]))
    return version


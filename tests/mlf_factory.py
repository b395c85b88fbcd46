"""Build Model Library Format archives in code, laid out as TVM 0.8-0.15 wrote them (spec §3).

Used by the MLF, project and CLI tests; other helpers may reuse it::

    from mlf_factory import Tensor, Module, make_mlf
    tar = make_mlf(tmp_path / "model.tar", version=7,
                   modules=[Module("default", inputs=[Tensor("x", "float32", (1, 1))],
                                   outputs=[Tensor("output", "float32", (1, 1))])])

Layouts by version:

* 5: one module at the top level of metadata.json (``model_name``, ``memory``, ``executors``,
  ``target`` as a dict), Relay text in ``src/relay.txt``, graph JSON in
  ``executor-config/graph/graph.json``; ``flat_api=True`` gives the early
  ``tvmgen_<mod>_run_model(inputs..., outputs...)`` entry and no interface header.
* 6: ``"modules"``; ``src/<mod>.relay``; ``executor-config/graph/<mod>.graph``; no per-tensor facts.
  (Our reading, kept for the tests built on it: the real v6 of TVM's May-June 2022 nightlies
  still had one top-level module and ``src/relay.txt``; ``tests/tvm_corpus.py`` writes that.)
* 7: as 6, plus ``inputs``/``outputs`` (size, dtype; ``extended=True`` adds our emitter's
  ``shape`` and ``quantization``) in ``memory.functions.main[0]``.
"""

from __future__ import annotations

import io
import json
import math
import re
import string
import struct
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

_BITS = {"int8": 8, "uint8": 8, "int16": 16, "int32": 32, "int64": 64, "float32": 32,
         "float16": 16, "float64": 64, "bool": 8}


@dataclass
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]
    quantization: dict | None = None

    @property
    def size(self) -> int:
        return (math.prod(self.shape) * _BITS[self.dtype] + 7) // 8

    def relay_type(self) -> str:
        if not self.shape:
            return self.dtype
        dims = ", ".join(str(d) for d in self.shape)
        return f"Tensor[({dims}), {self.dtype}]"


@dataclass
class Module:
    name: str = "default"
    inputs: list[Tensor] = field(default_factory=lambda: [Tensor("x", "float32", (1, 1))])
    outputs: list[Tensor] = field(default_factory=lambda: [Tensor("output", "float32", (1, 1))])
    executor: str = "aot"
    workspace_size_bytes: int = 128
    constants_size_bytes: int = 64


def sanitize(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z]", "_", name)


#: ``tvmgen_<mod>.h`` as TVM 0.15's C interface generator (``interface_c.cc``) writes it for a
#: module with neither devices nor USMP pools, transcribed from its output (spec §3.5): the
#: oracle the MLF reader and our emitter are held against, so it is a text, not built the way
#: project_api/emit/codegen.py builds its header. ``\x20``: EmitBrief's trailing space.
TVM_INTERFACE_HEADER = string.Template("""\
#ifndef ${GUARD}_H_
#define ${GUARD}_H_
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

${sizes}/*!
 * \\brief Input tensor pointers for TVM module "${module}"\x20
 */
struct ${prefix}_inputs {
${input_members}};

/*!
 * \\brief Output tensor pointers for TVM module "${module}"\x20
 */
struct ${prefix}_outputs {
${output_members}};

/*!
 * \\brief entrypoint function for TVM module "${module}"
 * \\param inputs Input tensors for the module\x20
 * \\param outputs Output tensors for the module\x20
 */
int32_t ${prefix}_run(
  struct ${prefix}_inputs* inputs,
  struct ${prefix}_outputs* outputs
);
/*!
 * \\brief Workspace size for TVM module "${module}"\x20
 */
#define ${GUARD}_WORKSPACE_SIZE ${workspace}

#ifdef __cplusplus
}
#endif

#endif // ${GUARD}_H_
""")
#: One ``<KIND> tensor <name> size`` macro of the header, with its brief.
TVM_SIZE_MACRO = string.Template("""\
/*!
 * \\brief ${kind} tensor ${name} size (in bytes) for TVM module "${module}"\x20
 */
#define ${GUARD}_${NAME}_SIZE ${size}
""")


def tvm_interface_header(module: str, inputs: list[tuple[str, int]],
                         outputs: list[tuple[str, int]], workspace_bytes: int) -> str:
    """:data:`TVM_INTERFACE_HEADER` for ``module`` with ``(name, size in bytes)`` inputs and
    outputs: names sanitized as TVM's SanitizeName does, the prefix lower case, macros upper."""
    prefix = f"tvmgen_{sanitize(module).lower()}"
    guard = prefix.upper()
    sizes = "".join(TVM_SIZE_MACRO.substitute(kind=kind, name=name, module=module, GUARD=guard,
                                              NAME=sanitize(name).upper(), size=size)
                    for kind, tensors in (("Input", inputs), ("Output", outputs))
                    for name, size in tensors)

    def members(tensors: list[tuple[str, int]]) -> str:
        return "".join(f"  void* {sanitize(name)};\n" for name, _ in tensors)

    return TVM_INTERFACE_HEADER.substitute(
        GUARD=guard, prefix=prefix, module=module, sizes=sizes, input_members=members(inputs),
        output_members=members(outputs), workspace=workspace_bytes)


def interface_header(mod: Module) -> str:
    """``tvmgen_<mod>.h`` of ``mod`` (:func:`tvm_interface_header`)."""
    return tvm_interface_header(mod.name, [(t.name, t.size) for t in mod.inputs],
                                [(t.name, t.size) for t in mod.outputs], mod.workspace_size_bytes)


def relay_text(mod: Module) -> str:
    params = ", ".join(f"%{t.name}: {t.relay_type()}" for t in mod.inputs)
    # Relay has no output names: one output is a plain tensor type, several are a tuple.
    if len(mod.outputs) == 1:
        ret = mod.outputs[0].relay_type()
    else:
        ret = "(" + ", ".join(t.relay_type() for t in mod.outputs) + ")"
    body_arg = f"%{mod.inputs[0].name}" if mod.inputs else "0f"
    return (
        '#[version = "0.0.5"]\n'
        f"def @main({params}) -> {ret} {{\n"
        f"  nn.relu({body_arg}) /* ty={mod.outputs[0].relay_type()} */\n"
        "}\n"
    )


def c_sources(mod: Module, flat_api: bool) -> dict[str, str]:
    low = f"tvmgen_{sanitize(mod.name).lower()}"
    lib0 = (
        '#include "tvm/runtime/c_runtime_api.h"\n'
        '#include "tvm/runtime/c_backend_api.h"\n'
        f"TVM_DLL int32_t {low}_fused_nn_relu(void* arg0, void* arg1) {{\n  return 0;\n}}\n"
    )
    n_args = len(mod.inputs) + len(mod.outputs)
    args = ", ".join(f"void* arg{i}" for i in range(n_args))
    lib1 = f"TVM_DLL int32_t {low}_run_model({args}) {{\n  return 0;\n}}\n"
    if not flat_api:
        lib1 += (
            f"int32_t {low}_run(struct {low}_inputs* inputs, struct {low}_outputs* outputs) {{\n"
            f"  return {low}_run_model("
            + ", ".join([f"inputs->{sanitize(t.name)}" for t in mod.inputs]
                        + [f"outputs->{sanitize(t.name)}" for t in mod.outputs])
            + ");\n}\n"
        )
    return {f"{mod.name}_lib0.c": lib0, f"{mod.name}_lib1.c": lib1}


def empty_params() -> bytes:
    """A TVM param dict with no arrays (spec §3.6)."""
    return struct.pack("<QQQQ", 0xF7E58D4F05049CB7, 0, 0, 0)


def graph_json(mod: Module) -> str:
    nodes = [{"op": "null", "name": t.name, "inputs": []} for t in mod.inputs]
    nodes.append({"op": "tvm_op", "name": "fused", "attrs": {"func_name": "f", "num_inputs": "1",
                                                             "num_outputs": "1", "flatten_data": "0"},
                  "inputs": [[0, 0, 0]]})
    all_t = mod.inputs + mod.outputs[:1]
    return json.dumps({
        "nodes": nodes,
        "arg_nodes": list(range(len(mod.inputs))),
        "heads": [[len(nodes) - 1, 0, 0]],
        "attrs": {"storage_id": ["list_int", list(range(len(all_t)))],
                  "shape": ["list_shape", [list(t.shape) for t in all_t]],
                  "dltype": ["list_str", [t.dtype for t in all_t]]},
        "node_row_ptr": list(range(len(nodes) + 1)),
    })


def _io_table(tensors: list[Tensor], extended: bool) -> dict:
    table = {}
    for t in tensors:
        entry: dict = {"size": t.size, "dtype": t.dtype}
        if extended:
            entry["shape"] = list(t.shape)
            if t.quantization is not None:
                entry["quantization"] = t.quantization
        table[t.name] = entry
    return table


def module_metadata(mod: Module, version: int, extended: bool, runtime: bool) -> dict:
    main: dict = {
        "device": 1,
        "workspace_size_bytes": mod.workspace_size_bytes,
        "constants_size_bytes": mod.constants_size_bytes,
        "io_size_bytes": sum(t.size for t in mod.inputs + mod.outputs),
    }
    if version >= 7:
        main["inputs"] = _io_table(mod.inputs, extended)
        main["outputs"] = _io_table(mod.outputs, extended)
    memory: dict = {"functions": {
        "main": [main],
        "operator_functions": [{"function_name": f"tvmgen_{mod.name}_fused_nn_relu",
                                "workspace": [{"device": 1, "workspace_size_bytes": 0}]}],
    }}
    if mod.executor == "graph":
        memory["sids"] = [
            {"storage_id": i, "size_bytes": t.size, **({"input_binding": t.name} if i < len(mod.inputs) else {})}
            for i, t in enumerate(mod.inputs + mod.outputs)
        ]
    meta: dict = {
        "executors": [mod.executor],
        "export_datetime": "2021-11-05 10:00:00Z" if version == 5 else "2023-11-20 10:00:00Z",
        "memory": memory,
        "model_name": mod.name,
        "style": "full-model",
        "target": {"1": "c -keys=cpu -link-params=0"} if version == 5 else ["c -keys=cpu -link-params=0"],
    }
    if runtime and mod.executor == "aot":
        meta["external_dependencies"] = [{"short_name": "tvm_standalone_crt", "url": "./runtime",
                                          "url_type": "mlf_path", "version_spec": "0.15.0"}]
    return meta


def mlf_files(
    version: int = 7,
    modules: list[Module] | None = None,
    *,
    header: bool = True,
    relay: bool = True,
    flat_api: bool = False,
    extended: bool = False,
    runtime: bool = False,
) -> dict[str, bytes]:
    """The files of an MLF as {relative path: bytes}."""
    modules = modules if modules is not None else [Module()]
    files: dict[str, bytes] = {}
    if version == 5:
        if len(modules) != 1:
            raise ValueError("version 5 archives hold exactly one module")
        metadata: dict = {"version": 5, **module_metadata(modules[0], 5, extended, runtime)}
    else:
        metadata = {"modules": {m.name: module_metadata(m, version, extended, runtime) for m in modules},
                    "version": version}
    files["metadata.json"] = json.dumps(metadata, indent=2, sort_keys=True).encode()
    for mod in modules:
        for name, text in c_sources(mod, flat_api).items():
            files[f"codegen/host/src/{name}"] = text.encode()
        if header and not flat_api:
            files[f"codegen/host/include/tvmgen_{sanitize(mod.name).lower()}.h"] = interface_header(mod).encode()
        files[f"parameters/{mod.name}.params"] = empty_params()
        if relay:
            path = "src/relay.txt" if version == 5 else f"src/{mod.name}.relay"
            files[path] = relay_text(mod).encode()
        if mod.executor == "graph":
            path = ("executor-config/graph/graph.json" if version == 5
                    else f"executor-config/graph/{mod.name}.graph")
            files[path] = graph_json(mod).encode()
    if runtime:
        files["runtime/include/tvm/runtime/crt/platform.h"] = b"/* producer's runtime */\n"
        files["runtime/src/runtime/crt/common/crt_runtime_api.c"] = b"/* producer's runtime */\n"
        files["templates/crt_config.h.template"] = b"#define TVM_CRT_MAX_NDIM 6\n"
        files["templates/platform.c.template"] = b"/* platform template */\n"
    return files


def write_tar(path: Path, files: dict[str, bytes]) -> Path:
    """Write ``files`` as TVM does: plain tar, a ``.`` root entry, ``./``-prefixed names, root owner."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    dirs: set[str] = set()
    for name in files:
        parts = name.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    with tarfile.open(path, "w") as tar:
        def add_dir(name: str) -> None:
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            info.uname = info.gname = "root"
            tar.addfile(info)
        add_dir(".")
        for d in sorted(dirs):
            add_dir(f"./{d}")
        for name, data in files.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            info.mode = 0o644
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    return path


def write_dir(path: Path, files: dict[str, bytes]) -> Path:
    path = Path(path)
    for name, data in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return path


def make_mlf(path: Path, version: int = 7, modules: list[Module] | None = None, *,
             as_dir: bool = False, **kwargs) -> Path:
    """Write an MLF tar (or directory with ``as_dir=True``) at ``path``; see :func:`mlf_files`."""
    files = mlf_files(version, modules, **kwargs)
    return write_dir(path, files) if as_dir else write_tar(path, files)

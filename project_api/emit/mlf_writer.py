"""Write a Model Library Format (v7) archive, byte-for-byte deterministic.

Same model and name give the same bytes: members are sorted, every directory is listed, mtime is
0, uid/gid 0, uname/gname "root", modes 0755/0644, GNU tar format, and metadata.json carries a
fixed ``export_datetime``. The archive is written to a temporary file next to the target and
renamed into place, so a failure never leaves a half-written archive.
"""

from __future__ import annotations

import io
import json
import os
import struct
import tarfile
import tempfile
from pathlib import Path

from ..errors import EmitError
from .codegen import Generated, IOTensor, sanitize

MLF_VERSION = 7
# Fixed on purpose (the archive must not change from run to run); TVM writes the export time.
EXPORT_DATETIME = "1970-01-01 00:00:00Z"


def _io_entry(t: IOTensor) -> dict:
    entry: dict = {"dtype": t.dtype, "shape": list(t.shape), "size": t.size_bytes}
    if t.c_name != sanitize(t.name):
        # the header's member is not TVM's sanitized name (a leading digit, a C keyword, a
        # collision): say which it is, readers key the tensor by it
        entry["c_name"] = t.c_name
    if t.quantization is not None:
        entry["quantization"] = t.quantization
    return entry


def metadata(gen: Generated) -> dict:
    """The metadata.json document for one full-model AOT module."""
    io_size = sum(t.size_bytes for t in gen.inputs + gen.outputs)
    main = {
        "constants_size_bytes": gen.constants_size_bytes,
        "device": 1,
        "inputs": {t.name: _io_entry(t) for t in gen.inputs},
        "io_size_bytes": io_size,
        "outputs": {t.name: _io_entry(t) for t in gen.outputs},
        # the module's own static region kept across runs (tvmgen_<name>_reset), not workspace
        "state_size_bytes": gen.state_size_bytes,
        "workspace_size_bytes": gen.workspace_size_bytes,
    }
    return {
        "modules": {
            gen.name: {
                "executors": ["aot"],
                "export_datetime": EXPORT_DATETIME,
                "memory": {
                    "functions": {
                        "main": [main],
                        "operator_functions": [],
                    },
                },
                "model_name": gen.name,
                "style": "full-model",
                "target": [gen.target.metadata_target()],
                "kernel_target": gen.target.name,
                "weights": gen.target.weights,
                **_layer_facts(gen),
            },
        },
        "version": MLF_VERSION,
    }


def _layer_facts(gen: Generated) -> dict:
    """What :mod:`.layers` knows of each node and of the pool plan (``project-api analyze``
    and ``profile`` read it back), and whether this is a profile build."""
    if gen.graph is None:
        return {}
    from .layers import layers, pool_plan

    facts: dict = {"layers": [layer.to_json() for layer in layers(gen, gen.graph)],
                   "pool_plan": pool_plan(gen, gen.graph).to_json()}
    if gen.profile:
        facts["profile"] = True
    return facts


def empty_params() -> bytes:
    """A TVM param dict with no entries (weights are compiled into the C)."""
    return struct.pack("<QQQQ", 0xF7E58D4F05049CB7, 0, 0, 0)


def mlf_files(gen: Generated) -> dict[str, bytes]:
    """Archive member path (relative, no leading ./) -> content."""
    meta = json.dumps(metadata(gen), indent=2, sort_keys=True) + "\n"
    return {
        "metadata.json": meta.encode(),
        f"codegen/host/include/tvmgen_{gen.name}.h": gen.header.encode(),
        f"codegen/host/src/{gen.name}_lib0.c": gen.source.encode(),
        f"parameters/{gen.name}.params": empty_params(),
    }


def tar_bytes(files: dict[str, bytes]) -> bytes:
    """A deterministic uncompressed tar of ``files`` with TVM's ``./`` member names."""
    dirs = {"."}
    for path in files:
        parts = path.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("./" + "/".join(parts[:i]))
    entries = sorted([(d, None) for d in dirs] + [("./" + p, c) for p, c in files.items()],
                     key=lambda e: e[0])
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, content in entries:
            info = tarfile.TarInfo(name)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if content is None:
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                tar.addfile(info)
            else:
                info.mode = 0o644
                info.size = len(content)
                tar.addfile(info, io.BytesIO(content))
    return buf.getvalue()


def write_mlf(gen: Generated, out_path: str | Path, force: bool = False) -> Path:
    """Write the archive for ``gen`` to ``out_path`` atomically; refuse to overwrite unless
    ``force``."""
    out = Path(out_path)
    if out.exists() and not force:
        raise EmitError(f"{out} already exists; pass --force (force=True) to overwrite it")
    if out.exists() and out.is_dir():
        raise EmitError(f"{out} is a directory; give a file name such as model.tar")
    data = tar_bytes(mlf_files(gen))
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise EmitError(f"output directory {parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out

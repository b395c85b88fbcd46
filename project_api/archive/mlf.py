"""Model Library Format (MLF): read, validate and safely unpack a compiled model.

An MLF archive is a plain tar (or the directory it was made from) holding ``metadata.json``,
generated C under ``codegen/host/``, the model's parameters and the Relay text it was built from.
:func:`open_mlf` accepts either form and returns a :class:`ModelLibrary` with typed facts about
each module: executors, inputs and outputs (name, dtype, size, shape, quantization), workspace and
constants sizes, the C interface header and the entry point.

Layouts understood (what each TVM release wrote; ``tests/tvm_corpus.py`` rebuilds one of each):

* version 5 (TVM 0.8): one module at the top level of ``metadata.json`` (``target`` a dict);
  ``src/relay.txt``; no per-tensor facts in the metadata; the entry point may be the flat
  ``tvmgen_<mod>_run_model(inputs..., outputs...)`` even where the header declares ``_run``.
* version 6 (nightlies of May-June 2022 only): still one top-level module, ``target`` a list,
  ``src/relay.txt``, ``external_dependencies`` at the top level.
* version 7 (TVM 0.9-0.15): a ``"modules"`` map, ``src/<mod>.relay``. Per-tensor ``inputs`` and
  ``outputs`` (``size``, ``dtype``) only from TVM 0.11; 0.11 names outputs ``output``/``output0``
  while its header uses the model's output names; from 0.12 both use ``output_tensor_names``.
  Our emitter also writes ``"shape"`` and ``"quantization"``.

Graph-executor modules (``"executors": ["graph"]``, every release): the graph JSON
(``executor-config/graph/graph.json`` in MLF 5, ``<mod>.graph`` from 7) and the params file are
read strictly by :mod:`project_api.archive.tvm_graph` into :attr:`ModuleInfo.graph` (a
:class:`GraphModule`): the inputs are the graph's input nodes that are no parameter (nor a
parameter TVM 0.8's ``--link-params`` linked into the C, ``_lookup_linked_param``), with the
dtypes and shapes of the graph's attrs; the outputs its heads, named by Relay's
``output_tensor_names``, else metadata.json's names, else ``output``/``output<i>``. Whatever
metadata.json records must agree. What cannot run on one CPU with static shapes, and a params
file of another version or with wrong sizes, is an MLFError in one line; the template library
lowers the rest to C (``project_api.template.graph_lowering``).

Which source decides what: metadata.json and the interface header are the authority (a size or
name on which they disagree is an error). The Relay text (:mod:`project_api.archive.relay`) is a source
of dtypes and shapes: ``@main``'s parameter types, and its result type, printed (``-> T``,
``/* ty=T */``) or inferred through the body op by op. TVM printed ``@main`` before binding the
parameters, so every weight is a parameter too (``%v_param_1``; the names in
``parameters/<mod>.params`` and the header's input struct tell them apart);
``output_tensor_names=[...]`` names the outputs. Whatever of it cannot be read or inferred is
logged at debug level and stays unknown; it never rejects an archive that metadata and header
describe. Positional order comes from the header's ``struct tvmgen_<mod>_inputs`` when there is
one, else from the Relay signature, else from ``metadata.json`` (where TVM sorted the names).

What no source records is inferred where the archive determines it, and the tensor's
:attr:`TensorInfo.note` says how: the dtype every other tensor and weight of the model shares;
the size ``io_size_bytes`` leaves after the other inputs and outputs (only for archives without
per-tensor sizes: from TVM 0.11 it counts other buffers too); a Relay shape's one ``?`` from the
size; else the flat shape ``(size / itemsize,)``. :class:`InputSpec` (``NAME:DTYPE:SHAPE``, the
CLI's ``--input-spec``) overrides any of it; :func:`write_mlf_with_specs` writes a copy of the
archive whose metadata.json records the facts, for readers such as template servers. A fact
that nothing determines is an MLFError that names what was tried and the ``--input-spec`` that
supplies it.

Besides the tensors, :class:`ModuleInfo` records for the template build:

* ``internal_workspace_bytes`` / ``has_internal_workspace``: memory pools the module's own C
  declares (TVM's USMP writes ``static uint8_t <pool>[N]`` in section ``.bss.noinit.tvm``; the
  metadata then says ``workspace_size_bytes`` 0);
* ``target_cpu`` (``"cortex-m4"`` or None), ``target_family`` (``"cortex-m"``, ``"cortex-a"``,
  ``"arm"`` when only Arm is known, or None for portable C) and ``target_evidence`` (where it was
  read): from metadata ``target`` strings (``-mcpu=``, ``-mtriple=``, ``-keys=arm_cpu``), the
  ``// tvm target:`` line of generated sources, and Arm headers the C includes
  (``<arm_math.h>``, ``<arm_nnsupportfunctions.h>``, ``<arm_nnfunctions.h>``: Cortex-M;
  ``<arm_acle.h>``: Arm);
* ``param_names``: the names in ``parameters/<mod>.params`` (None when it is missing or corrupt);
* ``external_pools`` (pool -> bytes), ``devices`` and ``io_in_pools``: what the header's
  ``tvmgen_<mod>_run`` takes besides inputs and outputs (USMP pools the caller provides,
  device contexts), and whether the tensors live inside those pools.

Extraction is defensive: :func:`safe_extract` checks every member before it writes anything and
refuses absolute paths, ``..``, links that leave the archive, device files, FIFOs and members over
a size cap. Archives made by TVM for the C runtime also carry TVM's own runtime under
``./runtime`` and ``./templates``; :attr:`ModelLibrary.has_bundled_runtime` reports that, so a
template can say it uses ours instead.
"""

from __future__ import annotations

import io
import json
import logging
import re
import shutil
import tarfile
import tempfile
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from project_api.archive.facts import sanitize_c_name
from project_api.archive.layouts import _ModuleParser
from project_api.archive.model import InputSpec, ModuleInfo, _spec_table
from project_api.archive.unpack import safe_extract
from project_api.errors import MLFError
from project_api.system import bounded

#: The public names, those of the parts that callers reach as ``mlf.NAME`` included.
__all__ = [
    "ModelLibrary",
    "SUPPORTED_VERSIONS",
    "open_mlf",
    "safe_extract",
    "sanitize_c_name",
    "write_mlf_with_specs",
]


_LOG = logging.getLogger(__name__)


SUPPORTED_VERSIONS = (5, 6, 7)


class ModelLibrary:
    """An opened Model Library Format archive or directory. Use :func:`open_mlf`.

    When opened from a tar the archive is unpacked into a private temporary directory, removed by
    :meth:`close` (or when the object is garbage collected); ``with open_mlf(p) as lib:`` does
    that for you.
    """

    def __init__(self, root: Path, source: Path, metadata: dict[str, Any],
                 modules: dict[str, ModuleInfo], tempdir: Path | None = None):
        self.root = root  #: directory holding metadata.json
        self.path = source  #: what was opened (tar or directory)
        self.metadata = metadata  #: the raw metadata.json
        self.version: int = metadata["version"]
        self.modules = modules
        self._finalizer = (
            weakref.finalize(self, shutil.rmtree, str(tempdir), True) if tempdir else None
        )

    @property
    def is_archive(self) -> bool:
        return self.path.is_file()

    @property
    def has_bundled_runtime(self) -> bool:
        """True when the archive carries its producer's C runtime (``./runtime``, ``./templates``)."""
        return (self.root / "runtime").is_dir() or (self.root / "templates").is_dir()

    def module(self, name: str | None = None) -> ModuleInfo:
        """The module called ``name``; without a name, the only module (error if several)."""
        if name is None:
            if len(self.modules) == 1:
                return next(iter(self.modules.values()))
            raise MLFError(
                f"{self.path} holds {len(self.modules)} modules ({', '.join(self.modules)}); "
                "name the one you want"
            )
        try:
            return self.modules[name]
        except KeyError:
            raise MLFError(
                f"{self.path} has no module {name!r}; it has: {', '.join(self.modules)}"
            ) from None

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "version": self.version,
            "has_bundled_runtime": self.has_bundled_runtime,
            "modules": {n: m.to_json() for n, m in self.modules.items()},
        }

    def close(self) -> None:
        """Remove the temporary extraction directory, if any."""
        if self._finalizer is not None:
            self._finalizer()

    def __enter__(self) -> ModelLibrary:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ModelLibrary({str(self.path)!r}, version={self.version}, modules={list(self.modules)})"


def open_mlf(
    path: str | Path,
    *,
    extract_dir: str | Path | None = None,
    max_member_bytes: int | None = None,
    max_total_bytes: int | None = None,
    input_specs: Iterable[InputSpec | str] | None = None,
) -> ModelLibrary:
    """Open an MLF tar or directory, validate it and return its typed facts.

    A tar is unpacked with :func:`safe_extract` into ``extract_dir`` (which must be empty or not
    exist) or, without one, into a temporary directory owned by the returned object.
    ``input_specs`` (``NAME:DTYPE:SHAPE`` strings or :class:`InputSpec`) supply facts the archive
    lacks; they must agree with what metadata.json and the interface header record.

    Raises:
        MLFError: the path is missing, unsafe, malformed, of an unsupported version, lacks a
            fact (dtype, size) of some input or output, or a supplied spec names no tensor.
    """
    specs = _spec_table(input_specs)
    source = Path(path)
    if source.is_dir():
        return _load(source, source, None, specs)
    if not source.exists():
        raise MLFError(f"{source}: no such file or directory; pass an MLF .tar or its directory")
    tempdir: Path | None = None
    if extract_dir is None:
        tempdir = Path(tempfile.mkdtemp(prefix="project-api-mlf-"))
        root = tempdir
    else:
        root = Path(extract_dir)
    try:
        safe_extract(source, root, max_member_bytes=max_member_bytes,
                     max_total_bytes=max_total_bytes)
        return _load(root, source, tempdir, specs)
    except BaseException:
        if tempdir is not None:
            shutil.rmtree(tempdir, ignore_errors=True)
        raise


def write_mlf_with_specs(
    path: str | Path,
    input_specs: Iterable[InputSpec | str],
    dest_tar: str | Path,
) -> Path:
    """Write ``dest_tar``: a copy of the MLF at ``path`` whose metadata.json records every input
    and output of every module in full (``size``, ``dtype``, ``shape``), including the facts
    ``input_specs`` supply, so that any reader (a template server too) sees them.

    Everything else is copied unchanged; the tar is laid out as TVM writes one (``.`` root,
    ``./``-prefixed names, root owner).

    Raises:
        MLFError: as :func:`open_mlf`.
    """
    dest = Path(dest_tar)
    with open_mlf(path, input_specs=input_specs) as lib:
        metadata = json.loads(json.dumps(lib.metadata))
        raw_modules = metadata["modules"] if "modules" in metadata else {
            next(iter(lib.modules)): metadata}
        for name, mod in lib.modules.items():
            raw = raw_modules[name]
            memory = raw.setdefault("memory", {})
            functions = memory.setdefault("functions", {})
            mains = functions.get("main") or []
            if not mains:
                mains = [{"device": 1, "workspace_size_bytes": mod.workspace_size_bytes,
                          "constants_size_bytes": mod.constants_size_bytes,
                          "io_size_bytes": mod.io_size_bytes or sum(
                              t.size_bytes for t in mod.inputs + mod.outputs)}]
                functions["main"] = mains
            for other in mains[1:]:
                other.pop("inputs", None)
                other.pop("outputs", None)
            for kind, tensors in (("inputs", mod.inputs), ("outputs", mod.outputs)):
                table: dict[str, Any] = {}
                for t in tensors:
                    entry: dict[str, Any] = {"size": t.size_bytes, "dtype": t.dtype}
                    if t.shape is not None:
                        entry["shape"] = list(t.shape)
                    if t.quantization is not None:
                        entry["quantization"] = t.quantization
                    table[t.name] = entry
                mains[0][kind] = table
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(dest, "w") as tar:
            def reset(info: tarfile.TarInfo) -> tarfile.TarInfo:
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                return info

            tar.add(str(lib.root), arcname=".", recursive=False, filter=reset)
            for item in sorted(lib.root.iterdir()):
                if item.name != "metadata.json":
                    tar.add(str(item), arcname=f"./{item.name}", filter=reset)
            data = json.dumps(metadata, indent=2, sort_keys=True).encode()
            info = reset(tarfile.TarInfo("./metadata.json"))
            info.size = len(data)
            info.mode = 0o644
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    _LOG.info("wrote %s: %s with the supplied facts recorded in metadata.json", dest, path)
    return dest


#: A module name as TVM writes it (it is mangled into C names and file names): parts of letters,
#: digits, '_', '.' and '-' not starting with '.' or '-', joined by '/' (a slashed name keeps its
#: files in sub-folders), at most 128 characters.
_MODULE_NAME = re.compile(r"(?=.{1,128}\Z)[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")


def _load(root: Path, source: Path, tempdir: Path | None,
          specs: dict[str, InputSpec] | None = None) -> ModelLibrary:
    meta_path = root / "metadata.json"
    if not meta_path.is_file() and (root / "codegen").is_dir():
        raise MLFError(
            f"{source}: holds codegen/ but no metadata.json, so it is only the generated C of a "
            "Model Library Format archive (its tensors' dtypes are recorded nowhere in it); pass "
            "the whole .tar that 'tvmc compile --output-format mlf' or "
            "export_model_library_format wrote"
        )
    if not meta_path.is_file():
        raise MLFError(
            f"{source}: not a Model Library Format archive (no metadata.json at its root); "
            "pass the .tar written by export_model_library_format or 'project-api emit'"
        )
    try:
        metadata = bounded.load_json(meta_path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise MLFError(f"{source}: metadata.json is not valid JSON ({exc})") from None
    if not isinstance(metadata, dict):
        raise MLFError(f"{source}: metadata.json must hold a JSON object")
    version = metadata.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise MLFError(f"{source}: metadata.json has no integer \"version\"")
    if version not in SUPPORTED_VERSIONS:
        raise MLFError(
            f"{source}: MLF version {version} is not supported (supported: "
            f"{', '.join(map(str, SUPPORTED_VERSIONS))}); re-export with TVM 0.8-0.15 or our emitter"
        )
    if "modules" in metadata:
        raw_modules = metadata["modules"]
        if not isinstance(raw_modules, dict) or not raw_modules:
            raise MLFError(f"{source}: metadata.json \"modules\" must be a non-empty object")
    else:
        style = metadata.get("style")
        if style == "operator":
            raise MLFError(
                f"{source}: this is an operator-style archive (from tvm.build), holding one "
                "operator and no model; export a whole model (relay.build) instead"
            )
        name = metadata.get("model_name")
        if not isinstance(name, str) or not name:
            raise MLFError(f"{source}: metadata.json has neither \"modules\" nor \"model_name\"")
        raw_modules = {name: metadata}

    single = len(raw_modules) == 1
    modules: dict[str, ModuleInfo] = {}
    used: set[str] = set()
    for name, raw in raw_modules.items():
        if not isinstance(raw, dict):
            raise MLFError(f"{source}: metadata.json module {bounded.quote(name)} is not an object")
        if not _MODULE_NAME.fullmatch(name):
            raise MLFError(
                f"{source}: metadata.json module name {bounded.quote(name)} is not a name TVM "
                "writes (parts of letters, digits, '_', '-' and '.' joined by '/', none starting "
                "with '.' or '-'); "
                "re-export the model with --module-name set to a C identifier")
        parser = _ModuleParser(root, source, name, raw, single, specs or {})
        modules[name] = parser.parse()
        used |= parser.used_specs
    unused = sorted(set(specs or {}) - used)
    if unused:
        known = ", ".join(t.name for m in modules.values() for t in m.inputs + m.outputs)
        raise MLFError(
            f"{source}: --input-spec names {', '.join(map(repr, unused))}, which is no input or "
            f"output of the model; its tensors: {known or 'none'}"
        )
    return ModelLibrary(root, source, metadata, modules, tempdir)

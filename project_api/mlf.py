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
read strictly by :mod:`project_api.tvm_graph` into :attr:`ModuleInfo.graph` (a
:class:`GraphModule`): the inputs are the graph's input nodes that are no parameter (nor a
parameter TVM 0.8's ``--link-params`` linked into the C, ``_lookup_linked_param``), with the
dtypes and shapes of the graph's attrs; the outputs its heads, named by Relay's
``output_tensor_names``, else metadata.json's names, else ``output``/``output<i>``. Whatever
metadata.json records must agree. What cannot run on one CPU with static shapes, and a params
file of another version or with wrong sizes, is an MLFError in one line; the template library
lowers the rest to C (``project_api.template.graph_lowering``).

Which source decides what: metadata.json and the interface header are the authority (a size or
name on which they disagree is an error). The Relay text (:mod:`project_api.relay`) is a source
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
import math
import os
import re
import shutil
import struct
import tarfile
import tempfile
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from project_api import dtypes, relay, tvm_graph
from project_api.errors import MLFError

_LOG = logging.getLogger(__name__)

SUPPORTED_VERSIONS = (5, 6, 7)

#: Largest single member :func:`safe_extract` writes unless told otherwise (env
#: ``PROJECT_API_MLF_MAX_MEMBER_BYTES``). Generated C for a large model is a few MB.
DEFAULT_MAX_MEMBER_BYTES = 256 * 1024 * 1024
#: Largest total of all members (env ``PROJECT_API_MLF_MAX_TOTAL_BYTES``).
DEFAULT_MAX_TOTAL_BYTES = 1024 * 1024 * 1024
#: Most members an archive may hold (env ``PROJECT_API_MLF_MAX_MEMBERS``).
DEFAULT_MAX_MEMBERS = 100_000

_SOURCE_SUFFIXES = (".c", ".cc", ".cpp")


# --- small helpers -----------------------------------------------------------------------------


_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def sanitize_c_name(name: str) -> str:
    """The C identifier TVM derives from a tensor or module name: each non-alphanumeric -> ``_``."""
    return re.sub(r"[^0-9A-Za-z]", "_", name)


def dtype_bits(dtype: str) -> int:
    """Storage bits of one element of ``dtype`` (``bool`` is stored as a byte; lanes included)."""
    try:
        dt = dtypes.parse(dtype)
    except dtypes.DTypeError as exc:
        raise MLFError(str(exc)) from None
    return dt.bits * dt.lanes


def tensor_size_bytes(shape: Iterable[int], dtype: str) -> int:
    """Bytes a dense tensor occupies: ``ceil(prod(shape) * bits / 8)``, as TVM computes it."""
    return (math.prod(shape) * dtype_bits(dtype) + 7) // 8


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise MLFError(f"${name}={raw!r} is not an integer; set it to a byte count") from None
    if value <= 0:
        raise MLFError(f"${name}={raw!r} must be positive")
    return value


# --- safe extraction ---------------------------------------------------------------------------


def _normalize_member_name(name: str) -> str:
    """The member's path relative to the archive root ('' for the root), or raise MLFError."""
    if "\x00" in name:
        raise MLFError(f"unsafe archive member {name!r}: NUL byte in its name")
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name) or name.startswith("\\"):
        raise MLFError(f"unsafe archive member {name!r}: absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise MLFError(f"unsafe archive member {name!r}: '..' leads outside the archive")
    return "/".join(parts)


def _check_members(
    members: list[tarfile.TarInfo],
    max_member_bytes: int,
    max_total_bytes: int,
    max_members: int,
) -> list[tuple[str, tarfile.TarInfo]]:
    """Validate every member; return (normalized name, member) pairs. Writes nothing."""
    if len(members) > max_members:
        raise MLFError(
            f"archive has {len(members)} members, more than the limit of {max_members}; "
            "raise PROJECT_API_MLF_MAX_MEMBERS if it is genuine"
        )
    plan: list[tuple[str, tarfile.TarInfo]] = []
    kinds: dict[str, str] = {}
    total = 0
    for m in members:
        name = _normalize_member_name(m.name)
        if m.isdir():
            kind = "dir"
        elif m.isreg():
            kind = "file"
            if m.size > max_member_bytes:
                raise MLFError(
                    f"archive member {m.name!r} is {m.size} bytes, over the {max_member_bytes}-byte "
                    "limit per member; pass a larger max_member_bytes (or set "
                    "PROJECT_API_MLF_MAX_MEMBER_BYTES) if it is genuine"
                )
            total += m.size
            if total > max_total_bytes:
                raise MLFError(
                    f"archive holds over {max_total_bytes} bytes in total; pass a larger "
                    "max_total_bytes (or set PROJECT_API_MLF_MAX_TOTAL_BYTES) if it is genuine"
                )
        elif m.issym():
            kind = "symlink"
            target = m.linkname
            if target.startswith("/") or re.match(r"^[A-Za-z]:", target):
                raise MLFError(f"unsafe archive member {m.name!r}: symlink to absolute path {target!r}")
            # Any '..' in a link target is refused: combined with other links it can climb out
            # of the archive even when the lexical path looks contained.
            if any(p == ".." for p in target.split("/")):
                raise MLFError(
                    f"unsafe archive member {m.name!r}: symlink target {target!r} uses '..' "
                    "and may lead outside the archive"
                )
            if not name:
                raise MLFError(f"unsafe archive member {m.name!r}: the archive root is a symlink")
        elif m.islnk():
            kind = "hardlink"
            try:
                target = _normalize_member_name(m.linkname)
            except MLFError:
                raise MLFError(
                    f"unsafe archive member {m.name!r}: hard link to {m.linkname!r} outside the archive"
                ) from None
            if kinds.get(target) != "file":
                raise MLFError(
                    f"unsafe archive member {m.name!r}: hard link to {m.linkname!r}, which is not "
                    "an earlier regular file of the archive"
                )
        elif m.ischr() or m.isblk():
            raise MLFError(f"unsafe archive member {m.name!r}: device file")
        elif m.isfifo():
            raise MLFError(f"unsafe archive member {m.name!r}: FIFO")
        else:
            raise MLFError(f"unsafe archive member {m.name!r}: unsupported member type {m.type!r}")
        if name in kinds and not (kind == "dir" and kinds[name] == "dir"):
            raise MLFError(f"archive member {m.name!r} appears more than once")
        kinds[name] = kind
        plan.append((name, m))

    # No member may sit below a symlink (writing through a link is how extractors get tricked)
    # or below a file (it could not be written).
    for name, m in plan:
        parts = name.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            kind = kinds.get(parent)
            if kind == "symlink":
                raise MLFError(
                    f"unsafe archive member {m.name!r}: its path goes through the symlink {parent!r}"
                )
            if kind in ("file", "hardlink"):
                raise MLFError(f"archive member {m.name!r} lies below the file {parent!r}")
    return plan


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def safe_extract(
    tar_path: str | Path,
    dest_dir: str | Path,
    *,
    max_member_bytes: int | None = None,
    max_total_bytes: int | None = None,
    max_members: int | None = None,
) -> list[Path]:
    """Extract the tar ``tar_path`` into ``dest_dir`` safely; return the paths written.

    Every member is checked before anything is written. Refused: absolute names, ``..``, symlinks
    pointing to absolute paths or using ``..``, members below a symlink, hard links to anything but
    an earlier regular file of the archive, device files, FIFOs, duplicate names, and archives
    over the size or member-count caps (defaults :data:`DEFAULT_MAX_MEMBER_BYTES`,
    :data:`DEFAULT_MAX_TOTAL_BYTES`, :data:`DEFAULT_MAX_MEMBERS`; the environment variables
    ``PROJECT_API_MLF_MAX_MEMBER_BYTES`` etc. override the defaults). Existing files in
    ``dest_dir`` are never overwritten. Hard links are written as copies. If writing fails
    half-way, a ``dest_dir`` this call created is removed again.

    Raises:
        MLFError: the archive cannot be read or is unsafe.
    """
    if max_member_bytes is None:
        max_member_bytes = _env_int("PROJECT_API_MLF_MAX_MEMBER_BYTES", DEFAULT_MAX_MEMBER_BYTES)
    if max_total_bytes is None:
        max_total_bytes = _env_int("PROJECT_API_MLF_MAX_TOTAL_BYTES", DEFAULT_MAX_TOTAL_BYTES)
    if max_members is None:
        max_members = _env_int("PROJECT_API_MLF_MAX_MEMBERS", DEFAULT_MAX_MEMBERS)
    tar_path = Path(tar_path)
    dest = Path(dest_dir)
    try:
        tar = tarfile.open(tar_path, "r:*")
    except FileNotFoundError:
        raise MLFError(f"{tar_path}: no such file; check the model path") from None
    except (tarfile.TarError, OSError) as exc:
        # tarfile lists every compression it tried, one per line: say it once.
        why = ("no tar, gzip, bzip2 or xz header" if "could not be opened successfully" in str(exc)
               else " ".join(str(exc).split()))
        raise MLFError(f"{tar_path}: not a readable tar archive ({why}); pass an MLF .tar") from None
    with tar:
        try:
            members = tar.getmembers()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise MLFError(f"{tar_path}: corrupt tar archive ({exc})") from None
        _refuse_cut_before_metadata(tar, members, tar_path)
        plan = _check_members(members, max_member_bytes, max_total_bytes, max_members)

        created = not dest.exists()
        dest.mkdir(parents=True, exist_ok=True)
        root = dest.resolve()
        written: list[Path] = []
        try:
            _write_plan(tar, plan, root, max_member_bytes, written)
        except BaseException:
            if created:
                shutil.rmtree(root, ignore_errors=True)
            raise
    return written


def _refuse_cut_before_metadata(tar: tarfile.TarFile, members: list[tarfile.TarInfo],
                                tar_path: Path) -> None:
    """Refuse a tar cut off at a member boundary before its metadata.json arrived.

    tarfile reads such a file without complaint (a header boundary looks like the end), so the
    archive would seem to lack metadata.json. Every tar writer ends the archive with zero blocks;
    one that is missing them *and* metadata.json is truncated, not a different kind of file. An
    archive that has metadata.json is read as it is, end blocks or not.
    """
    if not members or any(m.name.split("/")[-1] == "metadata.json" for m in members):
        return
    last = members[-1]
    end = last.offset_data + (-(-last.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE
                              if last.isreg() else 0)
    try:
        tar.fileobj.seek(end)
        block = tar.fileobj.read(tarfile.BLOCKSIZE)
    except (OSError, EOFError, tarfile.TarError):
        block = b""
    if block != bytes(tarfile.BLOCKSIZE):
        raise MLFError(
            f"{tar_path}: truncated tar archive (it ends after {last.name!r} without tar's "
            "end-of-archive blocks, before any metadata.json); copy the whole file again"
        )


def _write_plan(
    tar: tarfile.TarFile,
    plan: list[tuple[str, tarfile.TarInfo]],
    root: Path,
    max_member_bytes: int,
    written: list[Path],
) -> None:
    files: dict[str, Path] = {}
    symlinks: list[tuple[str, tarfile.TarInfo]] = []

    def target_of(name: str) -> Path:
        path = root / name
        # Belt and braces: the real parent must be inside the root (no pre-existing link in
        # dest_dir may redirect us).
        parent = path.parent.resolve()
        if not _inside(parent, root):
            raise MLFError(f"refusing to write {name!r}: it would land outside {root}")
        return path

    for name, m in plan:
        if not name:
            continue
        if m.isdir():
            path = target_of(name)
            if path.is_symlink():
                raise MLFError(f"refusing to extract {name!r}: {path} is an existing symlink")
            path.mkdir(parents=True, exist_ok=True)
        elif m.isreg():
            path = target_of(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(m)
            if src is None:
                raise MLFError(f"cannot read archive member {m.name!r}")
            try:
                with src, open(path, "xb") as out:
                    remaining = max_member_bytes + 1
                    while True:
                        chunk = src.read(min(1 << 20, remaining))
                        if not chunk:
                            break
                        remaining -= len(chunk)
                        if remaining <= 0:
                            raise MLFError(f"archive member {m.name!r} is larger than its header says")
                        out.write(chunk)
            except FileExistsError:
                raise MLFError(
                    f"refusing to overwrite {path} while extracting; extract into an empty directory"
                ) from None
            os.chmod(path, 0o755 if m.mode & 0o111 else 0o644)
            files[name] = path
            written.append(path)
        elif m.islnk():
            path = target_of(name)
            path.parent.mkdir(parents=True, exist_ok=True)
            source = files[_normalize_member_name(m.linkname)]
            try:
                with open(source, "rb") as fin, open(path, "xb") as out:
                    shutil.copyfileobj(fin, out)
            except FileExistsError:
                raise MLFError(f"refusing to overwrite {path} while extracting") from None
            written.append(path)
        elif m.issym():
            symlinks.append((name, m))
    # Symlinks last, so nothing above can be written through one.
    for name, m in symlinks:
        path = target_of(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.symlink(m.linkname, path)
        except FileExistsError:
            raise MLFError(f"refusing to overwrite {path} while extracting") from None
        written.append(path)


# --- the model facts ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TensorInfo:
    """One input or output of a module."""

    name: str  #: tensor name as in metadata.json / the Relay signature
    c_name: str  #: the member name in ``struct tvmgen_<mod>_inputs`` (sanitized)
    dtype: str  #: "int8", "float32", ...
    size_bytes: int
    shape: tuple[int, ...] | None  #: None when no source of the archive records it
    quantization: dict[str, Any] | None = None  #: {"scale": [...], "zero_point": [...]}
    #: How a fact the archive does not record was inferred (Relay body, size arithmetic, the
    #: model's one dtype, a flat shape from the size), one sentence; None when all is recorded.
    note: str | None = None

    def require_shape(self) -> tuple[int, ...]:
        """The shape, or :class:`MLFError` if the archive does not record it."""
        if self.shape is None:
            raise MLFError(
                f"tensor {self.name!r}: the archive records no shape (neither metadata.json "
                "\"shape\" nor a readable Relay text); supply it with --input-spec "
                f"{self.name}:{self.dtype}:D0xD1x..."
            )
        return self.shape

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "c_name": self.c_name,
            "dtype": self.dtype,
            "size_bytes": self.size_bytes,
            "shape": list(self.shape) if self.shape is not None else None,
            "quantization": self.quantization,
            "note": self.note,
        }


@dataclass
class ModuleInfo:
    """One model (TVM "module") of the library."""

    name: str
    executors: list[str]
    style: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    workspace_size_bytes: int
    constants_size_bytes: int
    io_size_bytes: int | None
    interface_header: Path | None
    sources: list[Path]
    #: ``tvmgen_<name>_run`` (struct API), ``tvmgen_<name>_run_model`` (early-v5 flat API taking
    #: inputs then outputs as ``void*``), or None when the module has no C entry point we know.
    run_function: str | None
    objects: list[Path] = field(default_factory=list)  #: codegen/host/lib/*.o
    relay_path: Path | None = None
    graph_json_path: Path | None = None
    params_path: Path | None = None
    #: Names in ``parameters/<mod>.params`` (the weights TVM kept apart), None if unreadable.
    param_names: list[str] | None = None
    #: Bytes of memory pools the module's own C declares (USMP internal pools, ``static uint8_t
    #: <pool>[N]`` in section ``.bss.noinit.tvm``): the model brings its own workspace.
    internal_workspace_bytes: int = 0
    #: The CPU the module was compiled for (``"cortex-m4"``), from ``-mcpu=`` of a target.
    target_cpu: str | None = None
    #: ``"cortex-m"``, ``"cortex-a"``, ``"arm"`` (Arm, profile unknown) or None (portable C).
    target_family: str | None = None
    #: Where :attr:`target_cpu` / :attr:`target_family` were read, e.g. ``metadata.json target
    #: 'c -keys=arm_cpu,cpu -mcpu=cortex-m4'`` or ``default_lib1.c includes <arm_acle.h>``.
    target_evidence: str | None = None
    #: USMP pools the caller must provide (header ``struct tvmgen_<mod>_workspace_pools``):
    #: member name -> bytes from ``..._<POOL>_WORKSPACE_POOL_SIZE`` (None if not stated). The
    #: struct entry point then takes a third ``workspace_pools`` argument.
    external_pools: dict[str, int | None] = field(default_factory=dict)
    #: Members of the header's ``struct tvmgen_<mod>_devices`` (an argument of ``_run`` too).
    devices: list[str] = field(default_factory=list)
    #: True when the inputs and outputs live inside the pools (USMP ``io_pool_allocations``:
    #: the header declares ``tvmgen_<mod>_map_inputs`` and ``_run`` takes no tensors).
    io_in_pools: bool = False
    #: A graph-executor module's configuration, parameters and functions (None for AOT).
    graph: GraphModule | None = None
    #: A profile build of our emitter (``emit --profile``): its C times every operator and
    #: exports ``tvmgen_<name>_profile_read`` (metadata.json ``"profile": true``).
    profile: bool = False
    #: Bytes of state the module keeps from one run to the next in its own static region
    #: (variable tensors, resource variables; our emitter's ``state_size_bytes``); 0: none.
    state_size_bytes: int = 0

    @property
    def reset_function(self) -> str | None:
        """``tvmgen_<name>_reset``, which restores a stateful module's state to its values at
        boot; None for a module without state."""
        if not self.state_size_bytes or self.run_function is None or self.run_api != "struct":
            return None
        return self.run_function[: -len("_run")] + "_reset"

    @property
    def run_api(self) -> str | None:
        """"struct", "flat" or None, following :attr:`run_function`."""
        if self.run_function is None:
            return None
        return "flat" if self.run_function.endswith("_run_model") else "struct"

    @property
    def has_internal_workspace(self) -> bool:
        """True when the module's C carries its own memory pool (see internal_workspace_bytes)."""
        return self.internal_workspace_bytes > 0

    def input(self, key: str | int) -> TensorInfo:
        """The input with this name, C name or position."""
        return _find_tensor(self.inputs, key, "input", self.name)

    def output(self, key: str | int) -> TensorInfo:
        """The output with this name, C name or position."""
        return _find_tensor(self.outputs, key, "output", self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "executors": list(self.executors),
            "style": self.style,
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
            "workspace_size_bytes": self.workspace_size_bytes,
            "constants_size_bytes": self.constants_size_bytes,
            "io_size_bytes": self.io_size_bytes,
            "interface_header": str(self.interface_header) if self.interface_header else None,
            "sources": [str(p) for p in self.sources],
            "run_function": self.run_function,
            "param_names": self.param_names,
            "internal_workspace_bytes": self.internal_workspace_bytes,
            "target_cpu": self.target_cpu,
            "target_family": self.target_family,
            "target_evidence": self.target_evidence,
            "external_pools": dict(self.external_pools),
            "devices": list(self.devices),
            "io_in_pools": self.io_in_pools,
            "graph": self.graph.to_json() if self.graph is not None else None,
            "profile": self.profile,
            "state_size_bytes": self.state_size_bytes,
        }


@dataclass
class GraphModule:
    """What a graph-executor module runs: its graph (:class:`project_api.tvm_graph.Graph`), the
    parameters of the params file, the parameters TVM 0.8's ``--link-params`` linked into the C
    (storage id -> the ``__tvm_param__`` array ``_lookup_linked_param`` returns), and the names
    of the system-library registry of its C (``_tvm_func_registry``, None when it has none)."""

    graph: tvm_graph.Graph
    params: list[tvm_graph.Param]
    linked_params: dict[int, str] = field(default_factory=dict)
    registry: list[str] | None = None
    #: The input nodes (not parameters), in node order: what the model's inputs are.
    input_nodes: list[tvm_graph.ArgNode] = field(default_factory=list)
    #: Bytes of the params file (0 without one).
    params_file_bytes: int = 0
    #: The largest workspace an operator takes (metadata.json's operator_functions), or None
    #: when the metadata lists no operators.
    operator_workspace_bytes: int | None = None

    @property
    def params_bytes(self) -> int:
        return sum(p.size_bytes for p in self.params)

    def param(self, name: str) -> tvm_graph.Param | None:
        return next((p for p in self.params if p.name == name), None)

    def to_json(self) -> dict[str, Any]:
        g = self.graph
        return {
            "path": str(g.path), "json_bytes": g.json_bytes, "nodes": len(g.node_names),
            "entries": len(g.entries), "storage_ids": len(g.storage_sizes()),
            "ops": [op.name for op in g.ops], "func_names": g.func_names(),
            "params": [p.name for p in self.params], "params_bytes": self.params_bytes,
            "linked_params": {str(k): v for k, v in self.linked_params.items()},
            "registry": self.registry, "params_file_bytes": self.params_file_bytes,
            "operator_workspace_bytes": self.operator_workspace_bytes,
        }


def _find_tensor(tensors: list[TensorInfo], key: str | int, kind: str, module: str) -> TensorInfo:
    if isinstance(key, int):
        if 0 <= key < len(tensors):
            return tensors[key]
        raise MLFError(f"module {module!r} has {len(tensors)} {kind}s; index {key} is out of range")
    for t in tensors:
        if key in (t.name, t.c_name):
            return t
    names = ", ".join(t.name for t in tensors) or "none"
    raise MLFError(f"module {module!r} has no {kind} named {key!r}; its {kind}s: {names}")


# --- facts the user supplies -------------------------------------------------------------------


@dataclass(frozen=True)
class InputSpec:
    """A fact about one tensor that the archive lacks, given as ``NAME:DTYPE:SHAPE``.

    ``NAME`` is the tensor's name or C name (an output's name works too), ``SHAPE`` is
    ``D0xD1x...`` (empty for a scalar): ``input_1:int8:1x49x10x1``.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def size_bytes(self) -> int:
        return tensor_size_bytes(self.shape, self.dtype)

    def __str__(self) -> str:
        return f"{self.name}:{self.dtype}:{'x'.join(map(str, self.shape))}"


def parse_input_spec(text: str) -> InputSpec:
    """``NAME:DTYPE:SHAPE`` (e.g. ``input_1:int8:1x49x10x1``) -> :class:`InputSpec`.

    The name may itself hold ``:`` (``serving_default_input_1:0:int8:1x49x10x1``): the last two
    fields are the dtype and the shape.
    """
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise MLFError(
            f"--input-spec {text!r}: want NAME:DTYPE:SHAPE, e.g. input_1:int8:1x49x10x1"
        )
    name, dtype, shape_text = parts[0], parts[1].strip(), parts[2].strip()
    try:
        dtype_bits(dtype)
    except MLFError:
        raise MLFError(
            f"--input-spec {text!r}: unknown dtype {dtype!r}; use e.g. int8, uint8, int32, float32"
        ) from None
    dims: list[int] = []
    if shape_text and shape_text not in ("()", "scalar"):
        for d in shape_text.lower().replace(",", "x").split("x"):
            if not d.strip().isdigit():
                raise MLFError(
                    f"--input-spec {text!r}: shape {shape_text!r} is not D0xD1x... of "
                    "non-negative integers, e.g. 1x49x10x1"
                )
            dims.append(int(d))
    return InputSpec(name, dtype, tuple(dims))


def _spec_table(specs: Iterable[InputSpec | str] | None) -> dict[str, InputSpec]:
    table: dict[str, InputSpec] = {}
    for s in specs or ():
        spec = parse_input_spec(s) if isinstance(s, str) else s
        if spec.name in table:
            raise MLFError(f"--input-spec names {spec.name!r} twice; give each tensor once")
        table[spec.name] = spec
    return table


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
        metadata = json.loads(meta_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
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
            raise MLFError(f"{source}: metadata.json module {name!r} is not an object")
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


# --- parsing one module ------------------------------------------------------------------------


@dataclass
class _Fact:
    """What one source knows about a tensor."""

    name: str
    dtype: str | None = None
    size: int | None = None
    shape: tuple[int, ...] | None = None
    quantization: dict[str, Any] | None = None
    origin: str | None = None  # "inferred": Relay types carried through the body
    partial: tuple[int | None, ...] | None = None  # a Relay shape with unknown (?) dimensions
    #: the header's member where metadata.json names it (our emitter, where it is not the
    #: sanitized name: ``14`` -> ``t_14``, ``int`` -> ``int_``, collisions ``_2``)
    c_name: str | None = None

    @property
    def c(self) -> str:
        """The tensor's C name: the one recorded, else TVM's sanitized name."""
        return self.c_name or sanitize_c_name(self.name)


@dataclass
class _Header:
    path: Path
    inputs: list[str]  # c names in struct order
    outputs: list[str]
    input_sizes: dict[str, int]  # c name -> bytes
    output_sizes: dict[str, int]
    input_names: dict[str, str]  # c name -> name from the doc comments (sanitized since TVM 0.11)
    output_names: dict[str, str]
    workspace_size: int | None
    has_run: bool
    pools: dict[str, int | None] = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)
    io_in_pools: bool = False


@dataclass
class _Relay:
    """What a Relay text's ``def @main`` says, as far as it could be read."""

    path: Path | None = None
    inputs: list[_Fact] | None = None  # every parameter, weights included, in order
    outputs: list[_Fact] | None = None  # by position, named output / output0, output1, ...
    output_names: list[str] | None = None  # from the attribute output_tensor_names=[...]
    last_op: str | None = None  # the operator of the body's final call
    unknown_ops: list[str] = field(default_factory=list)
    failure: str | None = None  # why it gives no output types, for messages


class _ModuleParser:
    def __init__(self, root: Path, source: Path, name: str, raw: dict[str, Any], single: bool,
                 specs: dict[str, InputSpec] | None = None):
        self.root = root
        self.source = source
        self.name = name
        self.raw = raw
        self.single = single
        self.where = f"{source}: module {name!r}"
        self.specs = specs or {}
        self.used_specs: set[str] = set()

    def error(self, what: str) -> MLFError:
        return MLFError(f"{self.where}: {what}")

    def parse(self) -> ModuleInfo:
        raw = self.raw
        executors = raw.get("executors", raw.get("runtimes", []))
        if not isinstance(executors, list) or not all(isinstance(e, str) for e in executors):
            raise self.error("\"executors\" must be a list of names")
        unknown = [e for e in executors if e not in ("aot", "graph")]
        if unknown:
            raise self.error(f"unknown executor(s) {unknown}; expected \"aot\" or \"graph\"")
        style = raw.get("style", "full-model")
        if style != "full-model":
            raise self.error(f"style {style!r} is not supported; expected \"full-model\"")

        mains = self._main_entries()
        workspace = sum(_int_field(m, "workspace_size_bytes", self) for m in mains)
        constants = sum(_int_field(m, "constants_size_bytes", self) for m in mains)
        state = sum(_int_field(m, "state_size_bytes", self) for m in mains)
        io_sizes = [m.get("io_size_bytes") for m in mains]
        io = sum(io_sizes) if io_sizes and all(isinstance(x, int) for x in io_sizes) else None

        codegen = self.root / "codegen" / "host"
        sources = self._codegen_files(codegen / "src", _SOURCE_SUFFIXES)
        objects = self._codegen_files(codegen / "lib", (".o",))
        header = self._parse_header(codegen / "include" / f"tvmgen_{self.mangled}.h")
        relay_path = self._first_file(
            [self.root / "src" / f"{self.name}.relay"]
            + ([self.root / "src" / "relay.txt"] if self.single else [])
        )
        relay = _parse_relay(relay_path, self.where) if relay_path else _Relay()
        graph = self._first_file(
            [self.root / "executor-config" / "graph" / f"{self.name}.graph"]
            + ([self.root / "executor-config" / "graph" / "graph.json"] if self.single else [])
        )
        if "graph" in executors and graph is None:
            _LOG.warning("%s: graph executor module without executor-config/graph JSON", self.where)
        params = self._first_file([self.root / "parameters" / f"{self.name}.params"])
        param_names = read_param_names(params, self.where) if params else None

        meta_in, meta_out = self._metadata_tensors(mains)
        texts = {p: _strip_c_comments(p.read_text(encoding="utf-8", errors="replace"))
                 for p in sources}
        raw_texts = {p: p.read_text(encoding="utf-8", errors="replace") for p in sources}
        if "graph" in executors and graph is not None:
            graph_module = self._graph_module(graph, params, texts)
            inputs, outputs = self._graph_tensors(graph_module, meta_in, meta_out, relay)
            cpu, family, evidence = self._target(raw_texts)
            return ModuleInfo(
                name=self.name, executors=list(executors), style=style, inputs=inputs,
                outputs=outputs, workspace_size_bytes=workspace, constants_size_bytes=constants,
                io_size_bytes=io, interface_header=header.path if header else None,
                sources=sources, run_function=self._run_function(header, texts),
                objects=objects, relay_path=relay_path,
                graph_json_path=graph, params_path=params,
                param_names=[p.name for p in graph_module.params],
                internal_workspace_bytes=_internal_pool_bytes(texts),
                target_cpu=cpu, target_family=family, target_evidence=evidence,
                graph=graph_module,
            )
        relay_in = self._drop_weights(relay.inputs, param_names, header)
        relay_out_names = None
        if relay.output_names is not None and relay.outputs is not None:
            if len(relay.output_names) == len(relay.outputs):
                relay_out_names = relay.output_names
            else:
                _LOG.debug("%s: Relay output_tensor_names has %d names for %d outputs; ignored",
                           self.where, len(relay.output_names), len(relay.outputs))
        inputs = self._merge(
            "input", meta_in, relay_in,
            header.inputs if header else None,
            header.input_sizes if header else {}, header.input_names if header else {},
        )
        outputs = self._merge(
            "output", meta_out, relay.outputs,
            header.outputs if header else None,
            header.output_sizes if header else {}, header.output_names if header else {},
            relay_names=relay_out_names,
        )
        if not outputs:
            relay_name = f"src/{self.name}.relay" + (" or src/relay.txt" if self.single else "")
            raise self.error(
                "its inputs and outputs are recorded nowhere (no inputs/outputs in metadata.json, "
                f"no codegen/host/include/tvmgen_{self.mangled}.h, no readable Relay text "
                f"{relay_name}); re-export the model with its Relay text or with our emitter"
            )
        model_dtypes = self._model_dtypes(inputs + outputs, relay, params)
        # io_size_bytes counts every variable of main (unbound weights, TVM 0.11+ also other
        # buffers: 2059 for 6 bytes of tensors in a published 0.13 archive); it stands for the
        # inputs plus outputs only where the metadata has no per-tensor sizes (TVM 0.8-0.10).
        io_rest = io if meta_in is None and meta_out is None else None
        completed = self._complete(inputs + outputs, io_rest, relay, model_dtypes, header)
        inputs, outputs = completed[: len(inputs)], completed[len(inputs) :]
        if header and header.workspace_size is not None and not mains:
            workspace = header.workspace_size

        run_function = self._run_function(header, texts)
        cpu, family, evidence = self._target(raw_texts)
        return ModuleInfo(
            name=self.name, executors=list(executors), style=style, inputs=inputs,
            outputs=outputs, workspace_size_bytes=workspace, constants_size_bytes=constants,
            io_size_bytes=io, interface_header=header.path if header else None, sources=sources,
            run_function=run_function, objects=objects, relay_path=relay_path,
            graph_json_path=graph, params_path=params, param_names=param_names,
            internal_workspace_bytes=_internal_pool_bytes(texts),
            target_cpu=cpu, target_family=family, target_evidence=evidence,
            external_pools=dict(header.pools) if header else {},
            devices=list(header.devices) if header else [],
            io_in_pools=header.io_in_pools if header else False,
            profile=raw.get("profile") is True and any(
                re.search(rf"\btvmgen_{re.escape(self.mangled)}_profile_read\s*\(", t, re.I)
                for t in texts.values()),
            state_size_bytes=state,
        )

    @property
    def mangled(self) -> str:
        return sanitize_c_name(self.name).lower()

    @staticmethod
    def _first_file(candidates: list[Path]) -> Path | None:
        for c in candidates:
            if c.is_file():
                return c
        return None

    def _codegen_files(self, folder: Path, suffixes: tuple[str, ...]) -> list[Path]:
        if not folder.is_dir():
            return []
        found = [p for p in folder.iterdir() if p.is_file() and p.suffix in suffixes]
        if not self.single:
            found = [p for p in found if p.name.startswith(f"{self.name}_")]
        return sorted(found, key=_natural_key)

    def _drop_weights(self, relay_inputs: list[_Fact] | None, param_names: list[str] | None,
                      header: _Header | None) -> list[_Fact] | None:
        """The Relay parameters that are real inputs: TVM printed @main before binding the
        weights, so every weight is a parameter too (``%v_param_1``: the printer puts ``v``
        before a name that does not start with a letter)."""
        if relay_inputs is None:
            return None
        kept = list(relay_inputs)
        if param_names:
            # Names as the frontend gave them (``_param_1``); a graph-executor or bound export
            # may name its params ``p0``.. instead, which then match nothing here.
            weights = set(param_names)
            kept = [f for f in kept if not (f.name in weights or _unprinted_name(f.name) in weights)]
        if header is not None and header.inputs:
            wanted = {c.lower() for c in header.inputs}
            kept = [f for f in kept if f.c.lower() in wanted]
        dropped = [f.name for f in relay_inputs if f not in kept]
        if dropped:
            _LOG.debug("%s: Relay parameters %s are weights, not inputs", self.where, dropped)
        return kept

    def _main_entries(self) -> list[dict[str, Any]]:
        memory = self.raw.get("memory")
        if memory is None:
            return []
        if not isinstance(memory, dict):
            raise self.error("\"memory\" must be an object")
        functions = memory.get("functions", {})
        mains = functions.get("main", []) if isinstance(functions, dict) else None
        if not isinstance(mains, list) or not all(isinstance(m, dict) for m in mains):
            raise self.error("memory.functions.main must be a list of objects")
        return mains

    def _metadata_tensors(self, mains: list[dict[str, Any]]) -> tuple[list[_Fact] | None, list[_Fact] | None]:
        result: list[list[_Fact] | None] = []
        for kind in ("inputs", "outputs"):
            facts: list[_Fact] | None = None
            for m in mains:
                if kind not in m:
                    continue
                table = m[kind]
                if not isinstance(table, dict):
                    raise self.error(f"memory.functions.main[].{kind} must be an object")
                facts = facts or []
                for tname, info in table.items():
                    facts.append(self._metadata_fact(kind[:-1], tname, info))
            result.append(facts)
        return result[0], result[1]

    def _metadata_fact(self, kind: str, tname: str, info: Any) -> _Fact:
        if not isinstance(info, dict):
            raise self.error(f"{kind} {tname!r}: metadata entry must be an object")
        fact = _Fact(tname)
        if "dtype" in info:
            if not isinstance(info["dtype"], str):
                raise self.error(f"{kind} {tname!r}: \"dtype\" must be a string")
            fact.dtype = info["dtype"]
            dtype_bits(fact.dtype)  # validates
        if "size" in info:
            size = info["size"]
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise self.error(f"{kind} {tname!r}: \"size\" must be a non-negative integer")
            fact.size = size
        if "shape" in info:
            fact.shape = _shape_from_json(info["shape"], self, f"{kind} {tname!r}")
        if info.get("quantization") is not None:
            fact.quantization = _quantization_from_json(info["quantization"], self, f"{kind} {tname!r}")
        if "c_name" in info:
            c = info["c_name"]
            if not isinstance(c, str) or not _C_IDENTIFIER.fullmatch(c):
                raise self.error(f"{kind} {tname!r}: \"c_name\" must be a C identifier")
            fact.c_name = c
        return fact

    def _parse_header(self, path: Path) -> _Header | None:
        if not path.is_file():
            return None
        text = path.read_text(encoding="utf-8", errors="replace")
        prefix = f"tvmgen_{self.mangled}"
        macro = prefix.upper()

        # Doc comments name the tensor of each size macro.
        names: dict[str, dict[str, str]] = {"Input": {}, "Output": {}}
        sizes: dict[str, dict[str, int]] = {"Input": {}, "Output": {}}
        doc_re = re.compile(
            r"(Input|Output) tensor (.*?) size \(in bytes\) for TVM module \"[^\"]*\"\s*\*/\s*"
            r"#define\s+(\w+)\s+\(?(\d+)\)?"
        )
        for kind, tname, mname, value in doc_re.findall(text):
            if mname.startswith(macro + "_") and mname.endswith("_SIZE"):
                c_upper = mname[len(macro) + 1 : -len("_SIZE")]
                names[kind][c_upper] = tname
                sizes[kind][c_upper] = int(value)
        plain = _strip_c_comments(text)
        all_macros = {
            m.group(1): int(m.group(2))
            for m in re.finditer(r"#define\s+(\w+)\s+\(?(\d+)\)?", plain)
        }

        def members(kind: str) -> list[str]:
            m = re.search(r"struct\s+" + re.escape(f"{prefix}_{kind}") + r"\s*\{(.*?)\}", plain, re.S)
            if m is None:
                return []
            fields = re.findall(r"void\s*\*\s*(\w+)\s*;", m.group(1))
            leftovers = re.sub(r"void\s*\*\s*\w+\s*;", "", m.group(1)).strip()
            if leftovers:
                raise self.error(f"{path.name}: unexpected text in struct {prefix}_{kind}: {leftovers!r}")
            return fields

        def size_table(kind: str, c_names: list[str]) -> tuple[dict[str, int], dict[str, str]]:
            out_sizes: dict[str, int] = {}
            out_names: dict[str, str] = {}
            for c in c_names:
                key = c.upper()
                if key in sizes[kind]:
                    out_sizes[c] = sizes[kind][key]
                    out_names[c] = names[kind][key]
                elif f"{macro}_{key}_SIZE" in all_macros:
                    out_sizes[c] = all_macros[f"{macro}_{key}_SIZE"]
            return out_sizes, out_names

        ins, outs = members("inputs"), members("outputs")
        in_sizes, in_names = size_table("Input", ins)
        out_sizes, out_names = size_table("Output", outs)
        has_run = re.search(r"\b" + re.escape(prefix) + r"_run\s*\(", plain) is not None
        pools = {p: all_macros.get(f"{macro}_{sanitize_c_name(p).upper()}_WORKSPACE_POOL_SIZE")
                 for p in members("workspace_pools")}
        return _Header(
            path=path, inputs=ins, outputs=outs, input_sizes=in_sizes, output_sizes=out_sizes,
            input_names=in_names, output_names=out_names,
            workspace_size=all_macros.get(f"{macro}_WORKSPACE_SIZE"), has_run=has_run,
            pools=pools, devices=members("devices"),
            io_in_pools=re.search(r"\b" + re.escape(prefix) + r"_map_inputs\s*\(", plain)
            is not None,
        )

    def _graph_module(self, graph_path: Path, params_path: Path | None,
                      texts: dict[Path, str]) -> GraphModule:
        """The graph, its parameters (file and linked) and the registry of a graph module;
        MLFError for whatever cannot run (tvm_graph's refusals, a parameter that is no node of
        the graph or whose type or shape differs from its node's)."""
        graph = tvm_graph.read_graph(graph_path, self.where)
        params = tvm_graph.read_params(params_path, self.where) if params_path else []
        linked = _linked_params(texts)
        args = {a.name: a for a in graph.args}
        for p in params:
            node = args.get(p.name)
            if node is None:
                raise self.error(
                    f"{params_path.name if params_path else 'params'}: parameter {p.name!r} is "
                    f"no input node of {graph_path.name} (its inputs: "
                    f"{', '.join(args) or 'none'}); the params file belongs to another build")
            entry = graph.entries[node.eid]
            if (p.dtype, p.shape) != (entry.dtype, entry.shape):
                raise self.error(
                    f"parameter {p.name!r} is {p.dtype}{list(p.shape)} in the params file but "
                    f"{entry.dtype}{list(entry.shape)} in {graph_path.name}; re-export the model")
        names = {p.name for p in params}
        linked_sids = set(linked)
        inputs = [a for a in graph.args if a.name not in names
                  and graph.entries[a.eid].sid not in linked_sids]
        if not inputs:
            _LOG.debug("%s: the graph has no input that is not a parameter", self.where)
        return GraphModule(graph=graph, params=params, linked_params=linked,
                           registry=_registry_names(texts), input_nodes=inputs,
                           params_file_bytes=params_path.stat().st_size if params_path else 0,
                           operator_workspace_bytes=self._operator_workspace())

    def _operator_workspace(self) -> int | None:
        """The largest ``workspace_size_bytes`` of metadata.json's operator_functions."""
        functions = (self.raw.get("memory") or {}).get("functions") or {}
        ops = functions.get("operator_functions") if isinstance(functions, dict) else None
        if not isinstance(ops, list) or not ops:
            return None
        sizes = [w.get("workspace_size_bytes", 0) for op in ops if isinstance(op, dict)
                 for w in op.get("workspace") or [] if isinstance(w, dict)]
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in sizes):
            raise self.error("memory.functions.operator_functions[].workspace[]."
                             "workspace_size_bytes must be non-negative integers")
        return max(sizes, default=0)

    def _graph_tensors(self, gm: GraphModule, meta_in: list[_Fact] | None,
                       meta_out: list[_Fact] | None,
                       relay_info: _Relay) -> tuple[list[TensorInfo], list[TensorInfo]]:
        """Inputs and outputs from the graph's attrs (dtypes and shapes need no other source).
        Inputs keep their node names; outputs take Relay's ``output_tensor_names``, else the
        names metadata.json records (0.11+), else ``output`` / ``output<i>`` as TVM names them.
        metadata.json's sizes and dtypes, where recorded, must agree."""
        graph = gm.graph
        heads = [graph.entries[e] for e in graph.heads]
        names: list[str]
        if relay_info.output_names is not None and len(relay_info.output_names) == len(heads):
            names = list(relay_info.output_names)
        elif meta_out is not None and len(meta_out) == len(heads):
            names = [f.name for f in sorted(meta_out, key=lambda f: _natural_key(f.name))]
        else:
            names = ["output"] if len(heads) == 1 else [f"output{i}" for i in range(len(heads))]
        quant = {f.c: f.quantization for f in (meta_in or []) + (meta_out or [])
                 if f.quantization is not None}
        inputs = [self._graph_tensor(a.name, graph.entries[a.eid], quant)
                  for a in gm.input_nodes]
        outputs = [self._graph_tensor(n, e, quant) for n, e in zip(names, heads, strict=True)]
        for kind, tensors, meta in (("input", inputs, meta_in), ("output", outputs, meta_out)):
            if not meta:
                continue
            by_c = {f.c: f for f in meta}
            ordered = (sorted(meta, key=lambda f: _natural_key(f.name)) if kind == "output"
                       else None)
            for i, t in enumerate(tensors):
                f = by_c.get(t.c_name) or (ordered[i] if ordered and i < len(ordered) else None)
                if f is None:
                    continue
                for what, mine, theirs in (("dtype", t.dtype, f.dtype),
                                           ("size", t.size_bytes, f.size)):
                    if theirs is not None and theirs != mine:
                        raise self.error(
                            f"{kind} {t.name!r}: {what} {theirs} in metadata.json but {mine} in "
                            f"{graph.path.name}; the archive's files disagree, re-export it")
        c_names = [t.c_name for t in inputs + outputs]
        dup = sorted({c for c in c_names if c_names.count(c) > 1})
        if dup:
            raise self.error(f"two tensors share the C name {dup[0]!r} in {graph.path.name}; "
                             "rename them in the model")
        return inputs, outputs

    @staticmethod
    def _graph_tensor(name: str, entry: tvm_graph.Entry,
                      quant: dict[str, dict[str, Any]]) -> TensorInfo:
        """A tensor of the graph; quantization only from our emitter's metadata."""
        c_name = sanitize_c_name(name)
        return TensorInfo(name=name, c_name=c_name, dtype=entry.dtype,
                          size_bytes=entry.size_bytes, shape=entry.shape,
                          quantization=quant.get(c_name))

    def _run_function(self, header: _Header | None, texts: dict[Path, str]) -> str | None:
        """The entry point the C defines. A header's ``_run`` declaration is not enough: TVM 0.8
        era archives may define only the flat ``_run_model`` (lib0.c then holds a packed-API
        ``_run(void* args, void* type_code, ...)`` or nothing)."""
        prefix = re.escape(f"tvmgen_{self.mangled}")
        struct_def = re.compile(r"\b" + prefix + r"_run\s*\(\s*struct\b[^;{]*\)\s*\{")
        flat_def = re.compile(r"\b" + prefix + r"_run_model\s*\([^;{]*\)\s*\{")
        any_run = re.compile(r"\b" + prefix + r"_run\s*\(")
        if any(struct_def.search(t) for t in texts.values()):
            return f"tvmgen_{self.mangled}_run"
        if any(flat_def.search(t) for t in texts.values()):
            if header is not None and header.has_run:
                _LOG.debug("%s: the header declares %s_run but the C defines only the flat "
                           "%s_run_model; using that", self.where, prefix, prefix)
            return f"tvmgen_{self.mangled}_run_model"
        if header is not None and header.has_run:
            return f"tvmgen_{self.mangled}_run"  # e.g. defined in a prebuilt object
        if any(any_run.search(t) for t in texts.values()):
            return f"tvmgen_{self.mangled}_run"
        return None

    def _target(self, texts: dict[Path, str]) -> tuple[str | None, str | None, str | None]:
        """(cpu, family, evidence) from metadata ``target`` strings, ``// tvm target:`` lines and
        the Arm headers the generated C includes."""
        raw_target = self.raw.get("target")
        targets: list[str] = []
        if isinstance(raw_target, dict):
            targets = [str(v) for v in raw_target.values()]
        elif isinstance(raw_target, list):
            targets = [t if isinstance(t, str) else json.dumps(t) for t in raw_target]
        elif isinstance(raw_target, str):
            targets = [raw_target]
        candidates = [(t, f"metadata.json target {t!r}") for t in targets]
        for path, text in texts.items():
            for m in re.finditer(r"^//\s*tvm target:\s*(.+)$", text, re.M):
                candidates.append((m.group(1).strip(), f"{path.name}: '// tvm target: "
                                                       f"{m.group(1).strip()}'"))
        for target, evidence in candidates:
            m = re.search(r"-mcpu=([\w.+-]+)", target)
            if m:
                cpu = m.group(1).lower()
                return cpu, _cpu_family(cpu), evidence
        for target, evidence in candidates:
            m = re.search(r"-mtriple=(thumbv[678]\w*|armv[678]\w*|aarch64\w*)", target)
            if m:
                triple = m.group(1)
                family = ("cortex-m" if re.match(r"thumbv(6m|7m|7em|8m)", triple)
                          else "cortex-a" if triple.startswith("aarch64") else "arm")
                return None, family, evidence
        for path, text in texts.items():
            m = re.search(r"#\s*include\s*<(arm_math\.h|arm_nnsupportfunctions\.h|"
                          r"arm_nnfunctions\.h|cmsis_compiler\.h)>", text)
            if m:
                return None, "cortex-m", f"{path.name} includes <{m.group(1)}>"
        for path, text in texts.items():
            m = re.search(r"#\s*include\s*<(arm_acle\.h)>", text)
            if m:
                return None, "arm", f"{path.name} includes <{m.group(1)}>"
        for target, evidence in candidates:
            if re.search(r"-keys=[\w,]*\barm_cpu\b|-device=arm_cpu", target):
                return None, "arm", evidence
        return None, None, None

    def _merge(
        self,
        kind: str,
        meta: list[_Fact] | None,
        relay: list[_Fact] | None,
        header_order: list[str] | None,
        header_sizes: dict[str, int],
        header_names: dict[str, str],
        relay_names: list[str] | None = None,
    ) -> list[_Draft]:
        """One list of tensors from every source. metadata.json and the interface header are
        the authority (a disagreement between them is an error); the Relay text only adds
        dtypes and shapes and is ignored, with a debug line, where it does not fit."""
        meta_table = self._meta_table(kind, meta)
        if relay is not None and kind == "output" and relay_names is not None:
            relay = [replace(f, name=n) for f, n in zip(relay, relay_names, strict=True)]
        relay, relay_table = self._relay_table(kind, relay)
        positional = self._positional_order(kind, meta, relay, relay_table, header_order,
                                            header_names)
        if positional is None:
            return []
        order, names = positional
        _fold_case(meta_table, order)
        _fold_case(relay_table, order)
        meta_table = self._match_meta(kind, meta_table, order, names)
        relay_table = self._match_relay(kind, relay, relay_table, order, names)
        tensors: list[_Draft] = []
        for c in order:
            m = meta_table.get(c)
            r = relay_table.get(c)
            name = (m.name if m else None) or (r.name if r else None) or names.get(c) or c
            spec = self._spec_for(name, c)
            if spec is not None and name == c and sanitize_c_name(spec.name) == c:
                name = spec.name  # the archive knows only the C name; the user gave the real one
            tensors.append(self._tensor(kind, name, c, m, r, spec, header_sizes.get(c)))
        return tensors

    def _meta_table(self, kind: str, meta: list[_Fact] | None) -> dict[str, _Fact]:
        """metadata.json's tensors by C name; two that share one are an error."""
        table: dict[str, _Fact] = {}
        for f in meta or []:
            c = f.c
            if c in table:
                raise self.error(
                    f"{kind}s {table[c].name!r} and {f.name!r} in metadata.json share the "
                    f"C name {c!r}"
                )
            table[c] = f
        return table

    def _relay_table(self, kind: str, relay: list[_Fact] | None
                     ) -> tuple[list[_Fact] | None, dict[str, _Fact]]:
        """The Relay text's tensors by C name; when two share one, the Relay text is dropped
        (returned as None) with a debug line."""
        table: dict[str, _Fact] = {}
        for f in relay or []:
            c = f.c
            if c in table:
                _LOG.debug("%s: Relay %ss %r and %r share the C name %r; Relay text ignored",
                           self.where, kind, table[c].name, f.name, c)
                return None, {}
            table[c] = f
        return relay, table

    @staticmethod
    def _positional_order(kind: str, meta: list[_Fact] | None, relay: list[_Fact] | None,
                          relay_table: dict[str, _Fact], header_order: list[str] | None,
                          header_names: dict[str, str]
                          ) -> tuple[list[str], dict[str, str | None]] | None:
        """The tensors' C names in positional order with their names where known: the header's
        struct, else metadata.json (TVM sorted its keys, so Relay positions reorder inputs),
        else the Relay signature; None when no source lists any."""
        if header_order:
            return list(header_order), {c: header_names.get(c) for c in header_order}
        if meta is not None and (meta or not relay):
            facts = list(meta)
            if kind == "output":
                facts.sort(key=lambda f: _natural_key(f.name))
            elif relay:
                rank = {c: i for i, c in enumerate(relay_table)}
                facts.sort(key=lambda f: rank.get(f.c, len(rank)))
            return ([f.c for f in facts],
                    {f.c: f.name for f in facts})
        if relay:
            return list(relay_table), {c: f.name for c, f in relay_table.items()}
        return None

    def _match_meta(self, kind: str, meta_table: dict[str, _Fact], order: list[str],
                    names: dict[str, str | None]) -> dict[str, _Fact]:
        """metadata.json's tensors keyed by the positional C names; one the positional list
        lacks is an error, except outputs TVM 0.11 named apart from its header."""
        extra = set(meta_table) - set(order)
        if not extra:
            return meta_table
        if kind == "output" and len(meta_table) == len(order):
            # TVM 0.11 named metadata outputs "output"/"output0".. while its header used
            # output_tensor_names: same outputs, matched by position.
            _LOG.debug("%s: metadata.json output names %s differ from the header's %s; "
                       "matched by position", self.where, sorted(meta_table), order)
            ordered = sorted(meta_table.values(), key=lambda f: _natural_key(f.name))
            return {c: replace(f, name=names.get(c) or c)
                    for c, f in zip(order, ordered, strict=True)}
        raise self.error(
            f"metadata.json lists {kind}(s) {sorted(meta_table[c].name for c in extra)} "
            f"that the positional {kind} list ({', '.join(order)}) lacks"
        )

    def _match_relay(self, kind: str, relay: list[_Fact] | None, relay_table: dict[str, _Fact],
                     order: list[str], names: dict[str, str | None]) -> dict[str, _Fact]:
        """The Relay text's tensors keyed by the positional C names: outputs by position
        (Relay names them by position only, unless output_tensor_names does), inputs by name;
        what does not fit is ignored with a debug line."""
        if relay and kind == "output":
            if set(relay_table) == set(order):
                return relay_table
            if len(relay) == len(order):
                return {c: replace(f, name=names.get(c) or c)
                        for c, f in zip(order, relay, strict=True)}
            _LOG.debug("%s: Relay text returns %d output(s) but the module has %d (%s); "
                       "its output types are ignored", self.where, len(relay),
                       len(order), ", ".join(order))
            return {}
        unmatched = set(relay_table) - set(order)
        if unmatched:
            _LOG.debug("%s: Relay parameters %s are not inputs of the module; ignored",
                       self.where, sorted(relay_table[c].name for c in unmatched))
        return relay_table

    def _spec_for(self, name: str, c_name: str) -> InputSpec | None:
        for key in (name, c_name):
            if key in self.specs:
                self.used_specs.add(key)
                return self.specs[key]
        for key, spec in self.specs.items():
            if sanitize_c_name(key) == c_name:
                self.used_specs.add(key)
                return spec
        return None

    def _tensor(self, kind: str, name: str, c: str, m: _Fact | None, r: _Fact | None,
                spec: InputSpec | None, header_size: int | None) -> _Draft:
        """What the sources say about one tensor; a disagreement between metadata.json, the
        header and ``--input-spec`` is an error, facts still missing are left to
        :meth:`_complete`."""
        what = f"{kind} {name!r}"
        d = _Draft(kind, name, c, quantization=m.quantization if m else None,
                   relay_fact=r, spec=spec is not None)
        if m and m.dtype and r and r.dtype and m.dtype != r.dtype:
            _LOG.debug("%s: %s: dtype %s in metadata.json, %s in Relay text; using metadata.json",
                       self.where, what, m.dtype, r.dtype)
        if spec is not None and m and m.dtype and spec.dtype != m.dtype:
            raise self.error(
                f"{what}: --input-spec says {spec.dtype} but metadata.json records {m.dtype}; "
                "drop or correct the spec"
            )
        d.dtype = (spec.dtype if spec else None) or (m.dtype if m else None)
        if d.dtype is None and r is not None and r.dtype is not None:
            d.dtype = r.dtype
            if r.origin == "inferred":
                d.inferred.append("dtype")
        meta_shape = m.shape if m else None
        if spec is not None and meta_shape is not None and spec.shape != meta_shape:
            raise self.error(
                f"{what}: --input-spec says shape {list(spec.shape)} but metadata.json records "
                f"{list(meta_shape)}; drop or correct the spec"
            )
        d.shape = spec.shape if spec else meta_shape
        candidates: list[tuple[str, int]] = []
        if m and m.size is not None:
            candidates.append(("metadata.json", m.size))
        if header_size is not None:
            candidates.append(("the interface header", header_size))
        if d.shape is not None and d.dtype is not None:
            label = "--input-spec" if spec else "metadata.json"
            candidates.append((f"shape {list(d.shape)} x {d.dtype} ({label})",
                               tensor_size_bytes(d.shape, d.dtype)))
        if candidates:
            size = candidates[0][1]
            for label, value in candidates[1:]:
                if value != size:
                    raise self.error(
                        f"{what}: size {size} from {candidates[0][0]} disagrees with {value} from "
                        f"{label}; correct the archive{' or the --input-spec' if spec else ''}"
                    )
            d.size, d.size_from = size, candidates[0][0]
        if (d.shape is None and r is not None and r.shape is not None and d.dtype is not None
                and r.dtype in (None, d.dtype)):
            relay_size = tensor_size_bytes(r.shape, d.dtype)
            if d.size is None or relay_size == d.size:
                d.shape = r.shape
                if r.origin == "inferred":
                    d.inferred.append("shape")
                if d.size is None:
                    d.size, d.size_from = relay_size, "the Relay shape"
            else:
                _LOG.debug("%s: %s: Relay shape %s x %s is %d bytes, not %d; shape ignored",
                           self.where, what, list(r.shape), d.dtype, relay_size, d.size)
        return d

    def _model_dtypes(self, drafts: list[_Draft], relay_info: _Relay,
                      params: Path | None) -> dict[str, list[str]]:
        """Every dtype the archive records for the model's tensors and weights: dtype -> what
        records it (inputs, outputs, Relay parameters, the params file)."""
        found: dict[str, list[str]] = {}

        def add(dtype: str | None, what: str) -> None:
            if dtype and what not in found.setdefault(dtype, []):
                found[dtype].append(what)

        for d in drafts:
            if d.dtype is not None:
                add(d.dtype, d.kind)
        for f in relay_info.inputs or []:
            add(f.dtype, "Relay parameter")
        for _name, dtype in (read_param_dtypes(params) if params else None) or []:
            add(dtype, "weight")
        return found

    def _complete(self, drafts: list[_Draft], io_size: int | None, relay_info: _Relay,
                  model_dtypes: dict[str, list[str]], header: _Header | None) -> list[TensorInfo]:
        """Fill the facts the archive leaves out, in this order: the model's one dtype (when
        every tensor and weight that records a dtype records the same), the size that
        ``io_size_bytes`` leaves after the other tensors, a flat shape ``(size / itemsize,)``.
        A fact still missing is an MLFError that says what was tried."""
        only = next(iter(model_dtypes)) if len(model_dtypes) == 1 else None
        for d in drafts:
            if (d.dtype is None and only is not None and not d.spec
                    and (d.size is None or (d.size * 8) % dtype_bits(only) == 0)):
                d.dtype = only
                d.notes.append(f"dtype {only}: every {' and every '.join(model_dtypes[only])} of "
                               f"the model that records a dtype is {only}")
            if d.size is None and d.shape is not None and d.dtype is not None:
                d.size, d.size_from = tensor_size_bytes(d.shape, d.dtype), "its shape"
        missing = [d for d in drafts if d.size is None]
        if io_size is not None and len(missing) == 1:
            rest = io_size - sum(d.size for d in drafts if d.size is not None)  # type: ignore[misc]
            d = missing[0]
            bits = dtype_bits(d.dtype) if d.dtype else 8
            if rest > 0 and (rest * 8) % bits == 0:
                d.size, d.size_from = rest, "io_size_bytes"
                d.notes.append(f"{_bytes(rest)}: what io_size_bytes {io_size} leaves after the "
                               "other inputs and outputs")
            else:
                _LOG.debug("%s: io_size_bytes %d leaves %d bytes for %s %r; not used",
                           self.where, io_size, rest, d.kind, d.name)
        elif io_size is not None and not missing:
            total = sum(d.size for d in drafts)  # type: ignore[misc]
            if total == io_size:
                for d in drafts:
                    if d.inferred and d.size_from == "the Relay shape":
                        verb = "agrees" if d.size == 1 else "agree"
                        d.agrees = f"its {_bytes(d.size)} {verb} with io_size_bytes {io_size}"
            else:
                _LOG.debug("%s: the inputs and outputs hold %d bytes, io_size_bytes says %d",
                           self.where, total, io_size)
        for d in drafts:
            r = d.relay_fact
            if (d.shape is None and r is not None and r.partial is not None
                    and d.size is not None and d.dtype is not None and r.dtype in (None, d.dtype)
                    and sum(x is None for x in r.partial) == 1):
                known = math.prod(x for x in r.partial if x is not None)
                bits = dtype_bits(d.dtype)
                if known and (d.size * 8) % (bits * known) == 0:
                    d.shape = tuple((d.size * 8) // (bits * known) if x is None else x
                                    for x in r.partial)
                    printed = ", ".join("?" if x is None else str(x) for x in r.partial)
                    d.notes.append(f"shape {list(d.shape)}: the Relay type ({printed}) with its "
                                   f"? from the {_bytes(d.size)}")
            if d.shape is None and d.dtype is not None and d.size is not None:
                bits = dtype_bits(d.dtype)
                if (d.size * 8) % bits == 0:
                    d.shape = ((d.size * 8) // bits,)
                    d.notes.append(f"shape [{d.shape[0]}] (flat): {_bytes(d.size)} of {d.dtype}, "
                                   "from " + {"metadata.json": "metadata.json's size",
                                              "the interface header": "the header's size macro",
                                              "io_size_bytes": "io_size_bytes"}.get(
                                                  d.size_from or "", d.size_from or "its size")
                                   + "; the archive records no shape")
            if d.inferred:
                facts = " and ".join(d.inferred)
                shown = (f" {d.dtype}" if "dtype" in d.inferred else "") + (
                    f" {list(d.shape)}" if "shape" in d.inferred and d.shape is not None else "")
                body = relay_info.path.name if relay_info.path else "the Relay text"
                last = f", whose result is {relay_info.last_op}" if relay_info.last_op else ""
                d.notes.insert(0, f"{facts}{shown} inferred through the body of @main in "
                                  f"{body}{last}" + (f" ({d.agrees})" if d.agrees else ""))
        for d in drafts:
            if d.dtype is None:
                raise self.error(self._untyped(d, relay_info, model_dtypes, header))
            if d.size is None:
                raise self.error(
                    f"{d.kind} {d.name!r}: no size recorded and no shape to compute it from "
                    "(metadata.json has none, the header has no size macro"
                    + (f", and io_size_bytes {io_size} leaves it open: {len(missing)} tensors "
                       "lack a size" if io_size is not None else ", no io_size_bytes")
                    + f"); supply it with --input-spec {d.name}:{d.dtype}:D0xD1x..."
                )
        return [TensorInfo(name=d.name, c_name=d.c_name, dtype=d.dtype, size_bytes=d.size,
                           shape=d.shape, quantization=d.quantization,
                           note="; ".join(d.notes) or None)
                for d in drafts]  # type: ignore[arg-type]

    def _untyped(self, d: _Draft, relay_info: _Relay, model_dtypes: dict[str, list[str]],
                 header: _Header | None) -> str:
        tried = ["metadata.json lists none", "the interface header declares only void*"
                 if header else "there is no interface header"]
        if relay_info.path is None:
            tried.append("there is no Relay text")
        elif relay_info.failure:
            tried.append(relay_info.failure)
        elif d.relay_fact is None:
            tried.append(f"{relay_info.path.name} does not type it")
        if len(model_dtypes) > 1:
            tried.append(f"the model's other tensors and weights use {', '.join(model_dtypes)}, "
                         "not one dtype")
        else:
            tried.append("no other tensor or weight records a dtype")
        return (f"{d.kind} {d.name!r}: no dtype recorded ({'; '.join(tried)}); supply it with "
                f"--input-spec {d.name}:DTYPE:SHAPE, e.g. --input-spec {d.name}:int8:1x49x10x1")


@dataclass
class _Draft:
    """A tensor while its facts are gathered."""

    kind: str
    name: str
    c_name: str
    dtype: str | None = None
    size: int | None = None
    size_from: str | None = None
    shape: tuple[int, ...] | None = None
    quantization: dict[str, Any] | None = None
    relay_fact: _Fact | None = None
    spec: bool = False
    inferred: list[str] = field(default_factory=list)  # "dtype", "shape" from the Relay body
    agrees: str | None = None  # an inferred size confirmed by io_size_bytes
    notes: list[str] = field(default_factory=list)


def _bytes(n: int) -> str:
    return "1 byte" if n == 1 else f"{n} bytes"


def _fold_case(table: dict[str, _Fact], order: list[str]) -> None:
    """Tolerate names that differ from the positional list's only in case."""
    for c in order:
        if c not in table:
            folded = [k for k in table if k.lower() == c.lower() and k not in order]
            if len(folded) == 1:
                table[c] = table.pop(folded[0])


def _cpu_family(cpu: str) -> str | None:
    m = re.match(r"cortex-([amr])\d", cpu)
    if m:
        return f"cortex-{m.group(1)}"
    if cpu.startswith(("arm", "star-mc", "neoverse")):
        return "arm"
    return None


def _internal_pool_bytes(texts: dict[Path, str]) -> int:
    """Bytes of the workspace pools the C declares itself: TVM's USMP writes an internal pool as
    ``__attribute__((section(".bss.noinit.tvm"), aligned(N))) static uint8_t <pool>[<bytes>];``
    (src/target/source/source_module.cc, GenerateWorkspaceBuffer) and passes ``&<pool>`` to the
    main function."""
    total = 0
    seen: set[str] = set()
    pool_re = re.compile(r"section\s*\(\s*\"\.bss\.noinit\.tvm\"\s*\)[^;{]*?static\s+uint8_t\s+"
                         r"(\w+)\s*\[\s*(\d+)\s*\]\s*;", re.S)
    plain_re = re.compile(r"^\s*static\s+uint8_t\s+(\w+)\s*\[\s*(\d+)\s*\]\s*;", re.M)
    for text in texts.values():
        for m in pool_re.finditer(text):
            if m.group(1) not in seen:
                seen.add(m.group(1))
                total += int(m.group(2))
        for m in plain_re.finditer(text):
            name = m.group(1)
            if name not in seen and re.search(r"&\s*" + re.escape(name) + r"\b", text):
                seen.add(name)
                total += int(m.group(2))
    return total


_LINKED_CASE = re.compile(
    r"case\s+(\d+)\s*:\s*\(\s*\(\s*uint64_t\s*\*\s*\)\s*out_ret_value\s*\)\s*\[\s*0\s*\]"
    r"\s*=\s*\(\s*uint64_t\s*\)\s*\(\s*uintptr_t\s*\)\s*(\w+)\s*;")


def _linked_params(texts: dict[Path, str]) -> dict[int, str]:
    """Storage id -> array of TVM 0.8's linked parameters: ``_lookup_linked_param``'s switch
    (src/target/source/codegen_c_host.cc ``LinkParameters``: ``case <sid>:`` returns
    ``__tvm_param__<name>``)."""
    found: dict[int, str] = {}
    for text in texts.values():
        m = re.search(r"\b_lookup_linked_param\s*\([^;{]*\)\s*\{", text)
        if m is None:
            continue
        for case in _LINKED_CASE.finditer(text, m.end()):
            found[int(case.group(1))] = case.group(2)
    return found


_REGISTRY_RE = re.compile(
    r"TVMFuncRegistry\s+_tvm_func_registry\s*=\s*\{\s*\"((?:[^\"\\]|\\.)*)\"", re.S)


def _c_string_bytes(literal: str) -> bytes:
    """The bytes of a C string literal's body (octal, hex and character escapes)."""
    out = bytearray()
    i = 0
    simple = {"n": 10, "t": 9, "r": 13, "\\": 92, '"': 34, "'": 39, "?": 63, "0": 0,
              "a": 7, "b": 8, "f": 12, "v": 11}
    while i < len(literal):
        ch = literal[i]
        if ch != "\\":
            out += ch.encode("utf-8")
            i += 1
            continue
        nxt = literal[i + 1 : i + 2]
        m = re.match(r"[0-7]{1,3}", literal[i + 1 :])
        if m:
            out.append(int(m.group(0), 8) & 0xFF)
            i += 1 + len(m.group(0))
        elif nxt == "x":
            h = re.match(r"[0-9A-Fa-f]+", literal[i + 2 :])
            out.append(int(h.group(0), 16) & 0xFF if h else 0)
            i += 2 + (len(h.group(0)) if h else 0)
        else:
            out.append(simple.get(nxt, ord(nxt) if nxt else 0))
            i += 2
    return bytes(out)


def _registry_names(texts: dict[Path, str]) -> list[str] | None:
    """The function names of the system-library registry in the C (src/target/source/
    source_module.cc ``CreateFuncRegistry``; the names string of src/target/
    func_registry_generator.cc: the count, 1 byte in TVM 0.8 and 2 little-endian bytes from
    0.9, then each name NUL-terminated), or None when no C file holds one."""
    for text in texts.values():
        m = _REGISTRY_RE.search(text)
        if m is None:
            continue
        raw = _c_string_bytes(m.group(1))
        for width in (2, 1):
            if len(raw) < width:
                continue
            count = int.from_bytes(raw[:width], "little")
            body = raw[width:]
            names = body.split(b"\0")
            if names and names[-1] == b"":
                names = names[:-1]
            if len(names) == count and body.endswith(b"\0") or count == 0 == len(body):
                return [n.decode("utf-8", "replace") for n in names]
        _LOG.debug("_tvm_func_registry: its names string does not parse")
        return None
    return None


def _natural_key(item: Path | str) -> list[Any]:
    text = item.name if isinstance(item, Path) else item
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _strip_c_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _int_field(entry: dict[str, Any], key: str, parser: _ModuleParser) -> int:
    value = entry.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise parser.error(f"memory.functions.main[].{key} must be a non-negative integer")
    return value


def _shape_from_json(value: Any, parser: _ModuleParser, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value
    ):
        raise parser.error(f"{what}: \"shape\" must be a list of non-negative integers")
    return tuple(value)


def _quantization_from_json(value: Any, parser: _ModuleParser, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise parser.error(f"{what}: \"quantization\" must be an object")
    scale, zero_point = value.get("scale"), value.get("zero_point")
    if not isinstance(scale, list) or not scale or not all(
        isinstance(s, (int, float)) and not isinstance(s, bool) for s in scale
    ):
        raise parser.error(f"{what}: quantization \"scale\" must be a non-empty list of numbers")
    if not isinstance(zero_point, list) or len(zero_point) != len(scale) or not all(
        isinstance(z, int) and not isinstance(z, bool) for z in zero_point
    ):
        raise parser.error(
            f"{what}: quantization \"zero_point\" must be a list of integers as long as \"scale\""
        )
    result = dict(value)
    result["scale"] = [float(s) for s in scale]
    return result


# --- parameters/<mod>.params -------------------------------------------------------------------

_PARAMS_MAGIC = 0xF7E58D4F05049CB7


def read_param_names(path: str | Path, where: str = "") -> list[str] | None:
    """The names in a TVM param dict (spec §3.6), or None when the file is missing or corrupt
    (a debug line says why; a params file never makes an archive unusable)."""
    path = Path(path)
    label = f"{where}: {path.name}" if where else str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        _LOG.debug("%s: unreadable (%s); weights not identified from it", label, exc)
        return None
    try:
        magic, _reserved, count = struct.unpack_from("<QQQ", data, 0)
        if magic != _PARAMS_MAGIC:
            raise ValueError(f"magic {magic:#x} is not {_PARAMS_MAGIC:#x}")
        if count > len(data) // 8:
            raise ValueError(f"{count} names cannot fit in {len(data)} bytes")
        offset = 24
        names: list[str] = []
        for _ in range(count):
            (length,) = struct.unpack_from("<Q", data, offset)
            offset += 8
            if offset + length > len(data):
                raise ValueError("a name runs past the end of the file")
            names.append(data[offset : offset + length].decode("utf-8"))
            offset += length
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        _LOG.debug("%s: not a readable TVM param dict (%s); weights not identified from it",
                   label, exc)
        return None
    return names


_NDARRAY_MAGIC = 0xDD5E40F096B4A13F


def read_param_dtypes(path: str | Path, where: str = "") -> list[tuple[str, str]] | None:
    """``(name, dtype)`` of each array in a TVM param dict (spec §3.6: after the names, each
    array's header holds its DLPack type), or None when the file is missing or corrupt."""
    path = Path(path)
    names = read_param_names(path, where)
    if names is None:
        return None
    label = f"{where}: {path.name}" if where else str(path)
    data = path.read_bytes()
    try:
        offset = 24 + sum(8 + len(n.encode("utf-8")) for n in names)
        (count,) = struct.unpack_from("<Q", data, offset)
        offset += 8
        if count != len(names):
            raise ValueError(f"{count} arrays for {len(names)} names")
        found: list[tuple[str, str]] = []
        for name in names:
            magic, _reserved = struct.unpack_from("<QQ", data, offset)
            if magic != _NDARRAY_MAGIC:
                raise ValueError(f"array {name!r}: magic {magic:#x}")
            offset += 16 + 8  # magic, reserved, device (type, id)
            (ndim,) = struct.unpack_from("<i", data, offset)
            code, bits, lanes = struct.unpack_from("<BBH", data, offset + 4)
            offset += 8 + 8 * ndim
            (nbytes,) = struct.unpack_from("<q", data, offset)
            offset += 8 + nbytes
            if ndim < 0 or nbytes < 0 or offset > len(data):
                raise ValueError(f"array {name!r} runs past the end of the file")
            found.append((name, dtypes.from_dlpack(code, bits, lanes).name))
    except (struct.error, ValueError, dtypes.DTypeError) as exc:
        _LOG.debug("%s: the arrays of the param dict are unreadable (%s)", label, exc)
        return None
    return found


# --- Relay text --------------------------------------------------------------------------------


def _unprinted_name(printed: str) -> str:
    """The variable name behind a printed one: TVM's Relay printer puts ``v`` in front of names
    that do not start with a letter (``_param_1`` -> ``%v_param_1``)."""
    if printed.startswith("v") and len(printed) > 1 and not printed[1].isalpha():
        return printed[1:]
    return printed


def _parse_relay(path: Path, where: str) -> _Relay:
    """What ``def @main`` of a Relay text says (:func:`project_api.relay.read_main`): its
    parameters' declared types, ``output_tensor_names``, and the output types (the printed
    ``-> T``, else inferred through the body). Never raises: what cannot be read is logged at
    debug level and stays unknown."""
    result = _Relay(path=path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        _LOG.debug("%s: %s unreadable (%s)", where, path.name, exc)
        result.failure = f"{path.name} is unreadable ({exc})"
        return result
    try:
        main = relay.read_main(text, f"{where}: {path.name}")
    except relay.RelayError as exc:
        _LOG.debug("%s: %s is not Relay text we can read (%s); its types are not used",
                   where, path.name, exc)
        result.failure = f"{path.name} could not be read ({exc})"
        return result
    except Exception as exc:  # noqa: BLE001 - a Relay text never rejects an archive
        _LOG.debug("%s: reading %s failed (%s: %s); its types are not used", where, path.name,
                   type(exc).__name__, exc)
        result.failure = f"{path.name} could not be read ({type(exc).__name__})"
        return result
    inputs = []
    for p in main.params:
        t = p.annotation if isinstance(p.annotation, relay.TensorType) else None
        if t is None or t.static_shape is None:
            _LOG.debug("%s: %s: @main parameter %r has type %s; shape unknown", where,
                       path.name, p.name, p.annotation)
        inputs.append(_Fact(p.name, dtype=t.dtype if t else None,
                            shape=t.static_shape if t else None,
                            partial=t.shape if t and t.static_shape is None else None))
    result.inputs = inputs
    result.output_names = main.output_names
    result.last_op = main.last_op
    result.unknown_ops = main.unknown_ops
    declared = main.declared if main.has_declared else None
    inferred = main.result
    if declared is not None and inferred is not None and declared != inferred:
        _LOG.debug("%s: %s: @main is declared to return %s; its body gives %s", where,
                   path.name, declared, inferred)
    chosen, origin = (declared, "declared") if declared is not None else (inferred, "inferred")
    if chosen is None:
        _LOG.debug("%s: %s: the type @main returns is not known (%s)", where, path.name,
                   "it uses " + ", ".join(main.unknown_ops) if main.unknown_ops
                   else "no return type, body not typed")
        result.failure = (f"{path.name} does not type @main's result"
                          + (f" (it uses {', '.join(main.unknown_ops)}, whose types are not "
                             "inferred)" if main.unknown_ops else ""))
        return result
    tensors = relay.flatten(chosen)
    if isinstance(chosen, relay.TupleType):
        names = [f"output{i}" for i in range(len(tensors))]
    else:
        names = ["output"]
    outputs = []
    for n, t in zip(names, tensors, strict=True):
        fact = _Fact(n, dtype=t.dtype if t else None, shape=t.static_shape if t else None,
                     partial=t.shape if t and t.static_shape is None else None)
        if origin == "inferred" and (fact.dtype or fact.shape is not None):
            fact.origin = "inferred"
        outputs.append(fact)
    result.outputs = outputs
    return result

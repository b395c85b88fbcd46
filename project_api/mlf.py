"""Model Library Format (MLF): read, validate and safely unpack a compiled model.

An MLF archive is a plain tar (or the directory it was made from) holding ``metadata.json``,
generated C under ``codegen/host/``, the model's parameters and the Relay text it was built from.
:func:`open_mlf` accepts either form and returns a :class:`ModelLibrary` with typed facts about
each module: executors, inputs and outputs (name, dtype, size, shape, quantization), workspace and
constants sizes, the C interface header and the entry point.

Formats understood:

* version 5 (TVM 0.8, 2021): one module described at the top level of ``metadata.json``; Relay
  text in ``src/relay.txt``; no per-tensor facts in the metadata, so dtypes and shapes come from
  the Relay text; the entry point may be the flat ``tvmgen_<mod>_run_model(inputs..., outputs...)``.
* versions 6 and 7: a ``"modules"`` map; Relay text in ``src/<mod>.relay``; version 7 lists each
  input and output with ``"size"`` and ``"dtype"``. Our emitter also writes ``"shape"`` and, for
  quantized tensors, ``"quantization"``.

Facts are merged from every source present and cross-checked (a size in ``metadata.json`` that
disagrees with the header's ``..._SIZE`` macro or with shape x dtype is an error). Positional order
comes from the interface header's ``struct tvmgen_<mod>_inputs`` when there is one, else from the
Relay signature, else from ``metadata.json`` (where TVM sorted the names).

Extraction is defensive: :func:`safe_extract` checks every member before it writes anything and
refuses absolute paths, ``..``, links that leave the archive, device files, FIFOs and members over
a size cap. Archives made by TVM for the C runtime also carry TVM's own runtime under
``./runtime`` and ``./templates``; :attr:`ModelLibrary.has_bundled_runtime` reports that, so a
template can say it uses ours instead.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import shutil
import tarfile
import tempfile
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

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


def sanitize_c_name(name: str) -> str:
    """The C identifier TVM derives from a tensor or module name: each non-alphanumeric -> ``_``."""
    return re.sub(r"[^0-9A-Za-z]", "_", name)


_DTYPE_RE = re.compile(r"^(?:u?int|float|bfloat)(\d+)$")


def dtype_bits(dtype: str) -> int:
    """Storage bits of one element of ``dtype`` (``bool`` is stored as a byte)."""
    if dtype == "bool":
        return 8
    m = _DTYPE_RE.match(dtype)
    if m is None or int(m.group(1)) == 0:
        raise MLFError(f"unknown dtype {dtype!r}; expected e.g. int8, uint8, int32, float32")
    return int(m.group(1))


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
        raise MLFError(f"{tar_path}: not a readable tar archive ({exc}); pass an MLF .tar") from None
    with tar:
        try:
            members = tar.getmembers()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise MLFError(f"{tar_path}: corrupt tar archive ({exc})") from None
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

    def require_shape(self) -> tuple[int, ...]:
        """The shape, or :class:`MLFError` if the archive does not record it."""
        if self.shape is None:
            raise MLFError(
                f"tensor {self.name!r}: the archive records no shape (neither metadata.json "
                "\"shape\" nor Relay text); re-export it with the Relay text or our emitter"
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

    @property
    def run_api(self) -> str | None:
        """"struct", "flat" or None, following :attr:`run_function`."""
        if self.run_function is None:
            return None
        return "flat" if self.run_function.endswith("_run_model") else "struct"

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
) -> ModelLibrary:
    """Open an MLF tar or directory, validate it and return its typed facts.

    A tar is unpacked with :func:`safe_extract` into ``extract_dir`` (which must be empty or not
    exist) or, without one, into a temporary directory owned by the returned object.

    Raises:
        MLFError: the path is missing, unsafe, malformed, of an unsupported version, or lacks a
            fact (dtype, size) of some input or output.
    """
    source = Path(path)
    if source.is_dir():
        return _load(source, source, None)
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
        return _load(root, source, tempdir)
    except BaseException:
        if tempdir is not None:
            shutil.rmtree(tempdir, ignore_errors=True)
        raise


def _load(root: Path, source: Path, tempdir: Path | None) -> ModelLibrary:
    meta_path = root / "metadata.json"
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
    for name, raw in raw_modules.items():
        if not isinstance(raw, dict):
            raise MLFError(f"{source}: metadata.json module {name!r} is not an object")
        modules[name] = _ModuleParser(root, source, name, raw, single).parse()
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


@dataclass
class _Header:
    path: Path
    inputs: list[str]  # c names in struct order
    outputs: list[str]
    input_sizes: dict[str, int]  # c name -> bytes
    output_sizes: dict[str, int]
    input_names: dict[str, str]  # c name -> original name from the doc comments
    output_names: dict[str, str]
    workspace_size: int | None
    has_run: bool


class _ModuleParser:
    def __init__(self, root: Path, source: Path, name: str, raw: dict[str, Any], single: bool):
        self.root = root
        self.source = source
        self.name = name
        self.raw = raw
        self.single = single
        self.where = f"{source}: module {name!r}"

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
        relay = _parse_relay(relay_path, self) if relay_path else None
        graph = self._first_file(
            [self.root / "executor-config" / "graph" / f"{self.name}.graph"]
            + ([self.root / "executor-config" / "graph" / "graph.json"] if self.single else [])
        )
        if "graph" in executors and graph is None:
            _LOG.warning("%s: graph executor module without executor-config/graph JSON", self.where)
        params = self._first_file([self.root / "parameters" / f"{self.name}.params"])

        meta_in, meta_out = self._metadata_tensors(mains)
        inputs = self._merge(
            "input", meta_in, relay[0] if relay else None,
            header.inputs if header else None,
            header.input_sizes if header else {}, header.input_names if header else {},
        )
        outputs = self._merge(
            "output", meta_out, relay[1] if relay else None,
            header.outputs if header else None,
            header.output_sizes if header else {}, header.output_names if header else {},
        )
        if not outputs:
            relay_name = f"src/{self.name}.relay" + (" or src/relay.txt" if self.single else "")
            raise self.error(
                "its inputs and outputs are recorded nowhere (no inputs/outputs in metadata.json, "
                f"no codegen/host/include/tvmgen_{self.mangled}.h, no Relay text {relay_name}); "
                "re-export the model with its Relay text or with our emitter"
            )
        if header and header.workspace_size is not None and not mains:
            workspace = header.workspace_size

        run_function = self._run_function(header, sources)
        return ModuleInfo(
            name=self.name, executors=list(executors), style=style, inputs=inputs,
            outputs=outputs, workspace_size_bytes=workspace, constants_size_bytes=constants,
            io_size_bytes=io, interface_header=header.path if header else None, sources=sources,
            run_function=run_function, objects=objects, relay_path=relay_path,
            graph_json_path=graph, params_path=params,
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
        return fact

    def _parse_header(self, path: Path) -> _Header | None:
        if not path.is_file():
            return None
        text = path.read_text(encoding="utf-8", errors="replace")
        prefix = f"tvmgen_{self.mangled}"
        macro = prefix.upper()

        # Doc comments name the original tensor of each size macro.
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
        return _Header(
            path=path, inputs=ins, outputs=outs, input_sizes=in_sizes, output_sizes=out_sizes,
            input_names=in_names, output_names=out_names,
            workspace_size=all_macros.get(f"{macro}_WORKSPACE_SIZE"), has_run=has_run,
        )

    def _run_function(self, header: _Header | None, sources: list[Path]) -> str | None:
        prefix = f"tvmgen_{self.mangled}"
        if header is not None and header.has_run:
            return f"{prefix}_run"
        texts = [_strip_c_comments(p.read_text(encoding="utf-8", errors="replace")) for p in sources]
        # The struct wrapper, when the sources define one, is the entry point even without a
        # header; only then fall back to the early flat function.
        if any(re.search(r"\b" + re.escape(prefix) + r"_run\s*\(", t) for t in texts):
            return f"{prefix}_run"
        if any(re.search(r"\b" + re.escape(prefix) + r"_run_model\s*\(", t) for t in texts):
            return f"{prefix}_run_model"
        return None

    def _merge(
        self,
        kind: str,
        meta: list[_Fact] | None,
        relay: list[_Fact] | None,
        header_order: list[str] | None,
        header_sizes: dict[str, int],
        header_names: dict[str, str],
    ) -> list[TensorInfo]:
        by_c: dict[str, dict[str, _Fact]] = {}
        for label, facts in (("metadata.json", meta), ("Relay text", relay)):
            table: dict[str, _Fact] = {}
            for f in facts or []:
                c = sanitize_c_name(f.name)
                if c in table:
                    raise self.error(
                        f"{kind}s {table[c].name!r} and {f.name!r} in {label} share the C name {c!r}"
                    )
                table[c] = f
            by_c[label] = table

        # Relay text names its outputs only by position ("output", "output0", ...), so for outputs
        # the header or metadata decides the names and Relay facts are matched by position.
        relay_first = kind == "input" or not meta
        if header_order:
            order = list(header_order)
            names = {c: header_names.get(c) for c in order}
        elif relay and relay_first:
            order = [sanitize_c_name(f.name) for f in relay]
            names = {sanitize_c_name(f.name): f.name for f in relay}
        elif meta:
            facts = sorted(meta, key=lambda f: _natural_key(f.name)) if kind == "output" else meta
            order = [sanitize_c_name(f.name) for f in facts]
            names = {sanitize_c_name(f.name): f.name for f in facts}
        else:
            return []

        if kind == "output" and relay and set(by_c["Relay text"]) != set(order):
            if len(relay) != len(order):
                raise self.error(
                    f"Relay text returns {len(relay)} output(s) but the positional output list "
                    f"has {len(order)} ({', '.join(order)})"
                )
            by_c["Relay text"] = {
                c: replace(f, name=names.get(c) or c) for c, f in zip(order, relay, strict=True)
            }

        if header_order:
            # Tolerate a header whose member names differ from ours only in case.
            for table in by_c.values():
                for c in order:
                    if c not in table:
                        folded = [k for k in table if k.lower() == c.lower() and k not in order]
                        if len(folded) == 1:
                            table[c] = table.pop(folded[0])

        for label, table in by_c.items():
            extra = set(table) - set(order)
            if table and extra:
                raise self.error(
                    f"{label} lists {kind}(s) {sorted(table[c].name for c in extra)} that the "
                    f"positional {kind} list ({', '.join(order)}) lacks"
                )

        tensors: list[TensorInfo] = []
        for c in order:
            m = by_c["metadata.json"].get(c)
            r = by_c["Relay text"].get(c)
            name = (m.name if m else None) or (r.name if r else None) or names.get(c) or c
            what = f"{kind} {name!r}"
            dtype = (m.dtype if m else None) or (r.dtype if r else None)
            if dtype is None:
                raise self.error(
                    f"{what}: no dtype recorded (metadata.json lists none and there is no Relay "
                    "text with it); re-export the archive with TVM >= 0.10 or our emitter"
                )
            if m and r and m.dtype and r.dtype and m.dtype != r.dtype:
                raise self.error(f"{what}: dtype {m.dtype} in metadata.json but {r.dtype} in Relay text")
            shape = (m.shape if m else None) or (r.shape if r else None)
            if m and r and m.shape is not None and r.shape is not None and m.shape != r.shape:
                raise self.error(f"{what}: shape {m.shape} in metadata.json but {r.shape} in Relay text")
            candidates = []
            if m and m.size is not None:
                candidates.append(("metadata.json", m.size))
            if c in header_sizes:
                candidates.append(("the interface header", header_sizes[c]))
            if shape is not None:
                candidates.append((f"shape {list(shape)} x {dtype}", tensor_size_bytes(shape, dtype)))
            if not candidates:
                raise self.error(f"{what}: no size recorded and no shape to compute it from")
            size = candidates[0][1]
            for label, value in candidates[1:]:
                if value != size:
                    raise self.error(
                        f"{what}: size {size} from {candidates[0][0]} disagrees with {value} from {label}"
                    )
            tensors.append(TensorInfo(
                name=name, c_name=c, dtype=dtype, size_bytes=size, shape=shape,
                quantization=m.quantization if m else None,
            ))
        return tensors


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


# --- Relay text --------------------------------------------------------------------------------

_SCALAR_RE = re.compile(r"^(?:u?int\d+|float\d+|bfloat\d+|bool)$")


def _parse_relay(path: Path, parser: _ModuleParser) -> tuple[list[_Fact], list[_Fact]]:
    """Inputs and outputs of ``def @main(...) -> ...`` in Relay text."""
    text = _strip_c_comments(path.read_text(encoding="utf-8", errors="replace"))
    m = re.search(r"def\s+@main\s*\(", text)
    if m is None:
        raise parser.error(f"{path.name}: no 'def @main(' in the Relay text")
    start = m.end()
    end = _matching_close(text, start - 1, parser, path)
    params_text = text[start:end]
    rest = text[end + 1 :]
    ret = re.match(r"\s*->\s*(.*?)\s*\{", rest, re.S)

    inputs: list[_Fact] = []
    for param in _split_top_level(params_text):
        pm = re.match(r"^%(.+?):\s*(Tensor\[.*\]|\w+)$", param, re.S)
        if pm is None:
            raise parser.error(f"{path.name}: cannot read @main parameter {param!r}")
        name = pm.group(1)
        if name.startswith('"') and name.endswith('"'):
            name = name[1:-1]
        shape, dtype = _parse_tensor_type(pm.group(2), parser, path, f"input {name!r}")
        inputs.append(_Fact(name, dtype=dtype, shape=shape))

    outputs: list[_Fact] = []
    if ret is not None:
        types: list[str] = []
        _flatten_type(ret.group(1).strip(), types)
        if len(types) == 1 and not ret.group(1).strip().startswith("("):
            names = ["output"]
        else:
            names = [f"output{i}" for i in range(len(types))]
        for n, t in zip(names, types, strict=True):
            shape, dtype = _parse_tensor_type(t, parser, path, f"output {n!r}")
            outputs.append(_Fact(n, dtype=dtype, shape=shape))
    return inputs, outputs


def _matching_close(text: str, open_index: int, parser: _ModuleParser, path: Path) -> int:
    depth = 0
    for i in range(open_index, len(text)):
        ch = text[i]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
            if depth == 0:
                return i
    raise parser.error(f"{path.name}: unbalanced parentheses in 'def @main('")


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    current = []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    tail = "".join(current).strip()
    if tail:
        parts.append(tail)
    return parts


def _flatten_type(text: str, out: list[str]) -> None:
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        for part in _split_top_level(text[1:-1]):
            _flatten_type(part, out)
    else:
        out.append(text)


def _parse_tensor_type(
    text: str, parser: _ModuleParser, path: Path, what: str
) -> tuple[tuple[int, ...], str]:
    text = text.strip()
    if _SCALAR_RE.match(text):
        return (), text
    m = re.match(r"^Tensor\[\s*\((.*?)\)\s*,\s*(\w+)\s*\]$", text, re.S)
    if m is None:
        raise parser.error(f"{path.name}: {what} has type {text!r}, not a tensor type")
    dims: list[int] = []
    for d in (x.strip() for x in m.group(1).split(",")):
        if not d:
            continue
        dm = re.match(r"^(\d+)(?:i64|i32)?$", d)
        if dm is None:
            raise parser.error(
                f"{path.name}: {what} has a dynamic dimension {d!r}; only static shapes are supported"
            )
        dims.append(int(dm.group(1)))
    dtype = m.group(2)
    dtype_bits(dtype)
    return tuple(dims), dtype

"""Unpacking an archive safely: every member checked (name, kind, size, count) before one byte is
written, and written only inside the destination.
"""

from __future__ import annotations

import os
import re
import shutil
import tarfile
from pathlib import Path

from project_api.errors import MLFError
from project_api.system import bounded

#: Largest single member :func:`safe_extract` writes unless told otherwise (env
#: ``PROJECT_API_MLF_MAX_MEMBER_BYTES``). Generated C for a large model is a few MB.
DEFAULT_MAX_MEMBER_BYTES = 256 * 1024 * 1024

#: Largest total of all members (env ``PROJECT_API_MLF_MAX_TOTAL_BYTES``).
DEFAULT_MAX_TOTAL_BYTES = 1024 * 1024 * 1024

#: Most members an archive may hold (env ``PROJECT_API_MLF_MAX_MEMBERS``).
DEFAULT_MAX_MEMBERS = 100_000


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


def _normalize_member_name(name: str, max_depth: int = bounded.DEFAULT_MAX_PATH_DEPTH,
                           max_chars: int = bounded.DEFAULT_MAX_PATH_CHARS) -> str:
    """The member's path relative to the archive root ('' for the root), or raise MLFError."""
    if len(name) > max_chars:
        raise MLFError(
            f"archive member {bounded.quote(name, 60)}: its name is {len(name)} characters, over "
            f"the limit of {max_chars}; raise PROJECT_API_MLF_MAX_PATH_CHARS if it is genuine")
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        raise MLFError(f"archive member {bounded.quote(shown, 60)}: its name is not UTF-8; "
                       "rename it (MLF names are ASCII) and pack the archive again") from None
    if "\x00" in name:
        raise MLFError(f"unsafe archive member {bounded.quote(name)}: NUL byte in its name")
    depth = len([p for p in name.split("/") if p])
    if depth > max_depth:
        raise MLFError(
            f"archive member {bounded.quote(name, 60)}: {depth} folders deep, over the limit of "
            f"{max_depth}; raise PROJECT_API_MLF_MAX_PATH_DEPTH if it is genuine")
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
    max_depth: int = bounded.DEFAULT_MAX_PATH_DEPTH,
    max_chars: int = bounded.DEFAULT_MAX_PATH_CHARS,
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
        name = _normalize_member_name(m.name, max_depth, max_chars)
        if m.isdir():
            kind = "dir"
        elif m.isreg():
            kind = "file"
            if m.size > max_member_bytes:
                raise MLFError(
                    f"archive member {bounded.quote(m.name)} is {m.size} bytes, over the {max_member_bytes}-byte "
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
                raise MLFError(f"unsafe archive member {bounded.quote(m.name)}: symlink to absolute path {target!r}")
            # Any '..' in a link target is refused: combined with other links it can climb out
            # of the archive even when the lexical path looks contained.
            if any(p == ".." for p in target.split("/")):
                raise MLFError(
                    f"unsafe archive member {bounded.quote(m.name)}: symlink target {target!r} uses '..' "
                    "and may lead outside the archive"
                )
            if not name:
                raise MLFError(f"unsafe archive member {bounded.quote(m.name)}: the archive root is a symlink")
        elif m.islnk():
            kind = "hardlink"
            try:
                target = _normalize_member_name(m.linkname)
            except MLFError:
                raise MLFError(
                    f"unsafe archive member {bounded.quote(m.name)}: hard link to {m.linkname!r} outside the archive"
                ) from None
            if kinds.get(target) != "file":
                raise MLFError(
                    f"unsafe archive member {bounded.quote(m.name)}: hard link to {m.linkname!r}, which is not "
                    "an earlier regular file of the archive"
                )
        elif m.ischr() or m.isblk():
            raise MLFError(f"unsafe archive member {bounded.quote(m.name)}: device file")
        elif m.isfifo():
            raise MLFError(f"unsafe archive member {bounded.quote(m.name)}: FIFO")
        else:
            raise MLFError(f"unsafe archive member {bounded.quote(m.name)}: unsupported member type {m.type!r}")
        if name in kinds and not (kind == "dir" and kinds[name] == "dir"):
            raise MLFError(f"archive member {bounded.quote(m.name)} appears more than once")
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
                    f"unsafe archive member {bounded.quote(m.name)}: its path goes through the symlink {parent!r}"
                )
            if kind in ("file", "hardlink"):
                raise MLFError(f"archive member {bounded.quote(m.name)} lies below the file {parent!r}")
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
        plan = _check_members(
            members, max_member_bytes, max_total_bytes, max_members,
            _env_int("PROJECT_API_MLF_MAX_PATH_DEPTH", bounded.DEFAULT_MAX_PATH_DEPTH),
            _env_int("PROJECT_API_MLF_MAX_PATH_CHARS", bounded.DEFAULT_MAX_PATH_CHARS))

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
                raise MLFError(f"cannot read archive member {bounded.quote(m.name)}")
            try:
                with src, open(path, "xb") as out:
                    remaining = max_member_bytes + 1
                    while True:
                        chunk = src.read(min(1 << 20, remaining))
                        if not chunk:
                            break
                        remaining -= len(chunk)
                        if remaining <= 0:
                            raise MLFError(f"archive member {bounded.quote(m.name)} is larger than its header says")
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

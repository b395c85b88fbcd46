"""TVM's parameter blob (``.params``): the names and dtypes of the weights it holds, read without
TVM.
"""

from __future__ import annotations

import logging
import struct
from pathlib import Path

from project_api.archive import dtypes

_LOG = logging.getLogger(__name__)


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

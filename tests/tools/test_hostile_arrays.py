"""Issue 35: array files whose headers lie get one ValidationError line before any allocation."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from project_api.errors import ValidationError
from project_api.tools.samples import load_arrays


def _huge_npy() -> bytes:
    """A valid .npy header declaring float32[3_000_000, 4_000_000] (44.6 TiB), then 16 bytes."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": "<f4", "fortran_order": False, "shape": (3_000_000, 4_000_000)})
    return buf.getvalue() + bytes(16)


def test_huge_npy_in_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.npy").write_bytes(_huge_npy())
    with pytest.raises(ValidationError, match="over the limit") as exc:
        load_arrays(tmp_path)
    assert "\n" not in str(exc.value) and "PROJECT_API_MAX_ARRAY_BYTES" in str(exc.value)


def test_huge_npy_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.npy").write_bytes(_huge_npy())
    with pytest.raises(ValidationError, match="over the limit"):
        load_arrays(tmp_path / "x.npy", "reference")


def test_huge_npy_inside_npz_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("x.npy", _huge_npy())
    with pytest.raises(ValidationError, match=r"d.npz\[x.npy\].*over the limit"):
        load_arrays(path)


def test_truncated_npy_is_refused(tmp_path: Path) -> None:
    full = io.BytesIO()
    np.save(full, np.arange(100, dtype=np.int32))
    (tmp_path / "x.npy").write_bytes(full.getvalue()[:-40])
    with pytest.raises(ValidationError, match="truncated"):
        load_arrays(tmp_path)


def test_zip_magic_then_garbage_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "d.npz"
    path.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
    with pytest.raises(ValidationError, match="cannot be read as an .npz") as exc:
        load_arrays(path)
    assert "\n" not in str(exc.value)


def test_good_npz_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "d.npz"
    np.savez(path, x=np.arange(6, dtype=np.int8).reshape(2, 3))
    got = load_arrays(path)
    np.testing.assert_array_equal(got["x"], np.arange(6, dtype=np.int8).reshape(2, 3))

"""Issue 35: hostile archives get one clear MLFError line, never a RecursionError, a raw OS error
or a UnicodeEncodeError. Every input is built in code from the real archive factory."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from mlf_factory import mlf_files, write_tar

from project_api.archive.mlf import open_mlf
from project_api.archive.tvm_graph import read_graph
from project_api.errors import MLFError
from project_api.system import bounded


def _tar_with(path: Path, files: dict[str, bytes], extra: list[tarfile.TarInfo]) -> Path:
    with tarfile.open(path, "w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        for info in extra:
            tar.addfile(info)
    return path


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text
    assert len(text) < 600, text[:300]
    return text


@pytest.mark.parametrize("levels", [1100, 2040])
def test_deep_directory_tree_is_refused(tmp_path: Path, levels: int) -> None:
    deep = tarfile.TarInfo("/".join(["d"] * levels))
    deep.type = tarfile.DIRTYPE
    tar = _tar_with(tmp_path / "m.tar", mlf_files(7), [deep])
    with pytest.raises(MLFError) as exc:
        open_mlf(tar)
    assert "limit" in _one_line(exc)


def test_long_member_name_is_refused(tmp_path: Path) -> None:
    info = tarfile.TarInfo("x" * 5000)
    tar = _tar_with(tmp_path / "m.tar", mlf_files(7), [info])
    with pytest.raises(MLFError, match="5000 characters, over the limit") as exc:
        open_mlf(tar)
    _one_line(exc)


def test_non_utf8_member_name_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.tar"
    write_tar(path, mlf_files(7))
    # Append a member whose raw name bytes are Latin-1, as a tar from another locale has.
    with tarfile.open(path, "a", encoding="latin-1", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("src/caf\xe9.c")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(MLFError, match="not UTF-8") as exc:
        open_mlf(path)
    _one_line(exc)


def test_metadata_nested_100000_deep_is_refused(tmp_path: Path) -> None:
    files = mlf_files(7)
    files["metadata.json"] = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(MLFError, match="nested more than") as exc:
        open_mlf(write_tar(tmp_path / "m.tar", files))
    assert "metadata.json" in _one_line(exc)


def test_metadata_with_5000_digit_integer_is_refused(tmp_path: Path) -> None:
    files = mlf_files(7)
    meta = json.loads(files["metadata.json"])
    files["metadata.json"] = json.dumps(meta).replace('"version": 7', '"version": ' + "9" * 5000).encode()
    assert b"9" * 5000 in files["metadata.json"]
    with pytest.raises(MLFError, match="5000 digits") as exc:
        open_mlf(write_tar(tmp_path / "m.tar", files))
    _one_line(exc)


def test_graph_json_nested_deep_is_refused(tmp_path: Path) -> None:
    graph = tmp_path / "default.graph"
    graph.write_text('{"nodes": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(MLFError, match="nested more than") as exc:
        read_graph(graph)
    _one_line(exc)


def test_depth_scan_ignores_brackets_in_strings() -> None:
    assert bounded.json_depth('{"a": "[[[[[[", "b": [1, {"c": "\\"]]]"}]}', 100) == 3
    assert bounded.load_json('{"a": [1, 2]}') == {"a": [1, 2]}
    with pytest.raises(ValueError, match="not a JSON number"):
        bounded.load_json('{"a": NaN}')


def test_quote_bounds_a_value() -> None:
    text = bounded.quote("x" * 120_000)
    assert len(text) < 260 and "120000 characters" in text
    assert bounded.quote("short") == "'short'"

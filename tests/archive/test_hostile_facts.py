"""Issue 35: archive facts are checked against their meaning: negative or huge sizes, scales that
are not finite and positive, unknown dtypes and module names that are no names get one MLFError
naming the module, the field and the value."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from mlf_factory import Module, Tensor, mlf_files, write_tar

from project_api.archive.mlf import open_mlf
from project_api.errors import MLFError

_Q = {"scale": [0.5], "zero_point": [0]}


def _archive(tmp_path: Path, change: Callable[[dict], None], text_change=None) -> Path:
    files = mlf_files(7, [Module(inputs=[Tensor("x", "int8", (1, 4), dict(_Q))])], extended=True)
    meta = json.loads(files["metadata.json"])
    change(meta["modules"]["default"]["memory"]["functions"]["main"][0])
    text = json.dumps(meta)
    files["metadata.json"] = (text_change(text) if text_change else text).encode()
    return write_tar(tmp_path / "m.tar", files)


def _error(path: Path) -> str:
    with pytest.raises(MLFError) as exc:
        open_mlf(path)
    text = str(exc.value)
    assert "\n" not in text and len(text) < 700 and "m.tar" in text
    return text


def test_good_archive_opens(tmp_path: Path) -> None:
    lib = open_mlf(_archive(tmp_path, lambda main: None))
    assert lib.modules["default"].inputs[0].quantization["scale"] == [0.5]


def test_negative_io_size_bytes(tmp_path: Path) -> None:
    def change(main):
        main["io_size_bytes"] = -8
    assert "io_size_bytes must be a non-negative integer; got -8" in _error(_archive(tmp_path, change))


def test_workspace_of_2_to_the_40(tmp_path: Path) -> None:
    def change(main):
        main["workspace_size_bytes"] = 1 << 40
    text = _error(_archive(tmp_path, change))
    assert "workspace_size_bytes is 1099511627776 bytes" in text and "4294967295" in text


@pytest.mark.parametrize("scale, literal", [(0.0, None), (-0.5, None), (None, "1e999"),
                                            (None, "NaN")])
def test_bad_quantization_scale(tmp_path: Path, scale, literal) -> None:
    def change(main):
        main["inputs"]["x"]["quantization"]["scale"] = [scale if literal is None else 12345.5]
    path = _archive(tmp_path, change,
                    (lambda t: t.replace("12345.5", literal)) if literal else None)
    text = _error(path)
    assert "scale" in text and ("finite positive" in text or "not a JSON number" in text)


def test_unknown_dtype_names_tensor(tmp_path: Path) -> None:
    def change(main):
        main["inputs"]["x"]["dtype"] = "int7x"
    text = _error(_archive(tmp_path, change))
    assert "input 'x'" in text and "unknown dtype 'int7x'" in text


@pytest.mark.parametrize("name", ["../..", "$(touch X)", "a b", "-rf"])
def test_module_name_is_checked_first(tmp_path: Path, name: str) -> None:
    files = mlf_files(7)
    meta = json.loads(files["metadata.json"])
    meta["modules"] = {name: meta["modules"]["default"]}
    files["metadata.json"] = json.dumps(meta).encode()
    text = _error(write_tar(tmp_path / "m.tar", files))
    assert "module name" in text and "entry point" not in text
    assert not (Path.cwd() / "X").exists()

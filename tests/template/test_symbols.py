"""project_api.template.symbols: renaming a module's C symbols before two archives whose
modules share a name are linked into one firmware."""

from __future__ import annotations

import json
from pathlib import Path

from mlf_factory import Module, make_mlf

from project_api.archive import mlf
from project_api.template import ai_api, symbols


def _files(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_rename_a_single_module_archive(tmp_path: Path) -> None:
    root = make_mlf(tmp_path / "a", 7, [Module("kws")], as_dir=True)
    symbols.rename_module(root, "kws", "kws_1", "a.tar")
    assert _files(root) == ["codegen/host/include/tvmgen_kws_1.h",
                            "codegen/host/src/kws_1_lib0.c", "codegen/host/src/kws_1_lib1.c",
                            "metadata.json", "parameters/kws_1.params", "src/kws_1.relay"]
    c = (root / "codegen/host/src/kws_1_lib1.c").read_text()
    assert "tvmgen_kws_1_run(" in c and "tvmgen_kws_run" not in c
    assert "TVMGEN_KWS_1_WORKSPACE_SIZE" in (root / "codegen/host/include/tvmgen_kws_1.h"
                                             ).read_text()
    assert list(json.loads((root / "metadata.json").read_text())["modules"]) == ["kws_1"]


def test_a_module_name_with_a_slash_is_renamed_not_crashed_on(tmp_path: Path) -> None:
    """A module named "vision/kws" keeps its files in a vision/ sub-folder; renaming it used to
    raise ValueError from Path.with_name (a name may not hold '/')."""
    root = make_mlf(tmp_path / "a", 7, [Module("vision/kws")], as_dir=True)
    symbols.rename_module(root, "vision/kws", "vision/kws_1", "a.tar")
    assert _files(root) == ["codegen/host/include/tvmgen_vision_kws_1.h",
                            "codegen/host/src/vision/kws_1_lib0.c",
                            "codegen/host/src/vision/kws_1_lib1.c", "metadata.json",
                            "parameters/vision/kws_1.params", "src/vision/kws_1.relay"]
    c = (root / "codegen/host/src/vision/kws_1_lib1.c").read_text()
    assert "tvmgen_vision_kws_1_run(" in c and "tvmgen_vision_kws_run(" not in c
    meta = json.loads((root / "metadata.json").read_text())
    assert list(meta["modules"]) == ["vision/kws_1"]
    assert meta["modules"]["vision/kws_1"]["model_name"] == "vision/kws_1"


def test_two_archives_with_the_same_slashed_name(tmp_path: Path) -> None:
    """The ai_ API's preparation renames the second archive's module and reads both."""
    main = make_mlf(tmp_path / "main.tar", 7, [Module("vision/kws")], extended=True)
    extra = make_mlf(tmp_path / "extra.tar", 7, [Module("vision/kws", workspace_size_bytes=64)],
                     extended=True)
    project = tmp_path / "prj"
    project.mkdir()
    mlf.safe_extract(main, project / "model")
    ai = ai_api.prepare(project, [extra], "test")
    assert [m["name"] for m in ai.models] == ["vision/kws", "vision/kws_1"]
    assert ai.renamed == {"extra.tar:vision/kws": "vision/kws_1"}

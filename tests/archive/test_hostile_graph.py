"""Issue 35: graph JSON storage ids and node references out of range, and shapes whose product
overflows, are one MLFError line naming the entry and the value."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from mlf_factory import Module, mlf_files

from project_api.archive.tvm_graph import read_graph
from project_api.errors import MLFError

_FILES = mlf_files(7, [Module(executor="graph")])
_NAME = next(n for n in _FILES if n.startswith("executor-config/"))


def _error(tmp_path: Path, change: Callable[[dict], None]) -> str:
    graph = json.loads(_FILES[_NAME])
    change(graph)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph))
    with pytest.raises(MLFError) as exc:
        read_graph(path)
    text = str(exc.value)
    assert "\n" not in text and len(text) < 1200, text[:300]
    return text


def test_the_unchanged_graph_reads(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    path.write_bytes(_FILES[_NAME])
    graph = read_graph(path)
    assert graph.node_names == ["x", "fused"] and graph.heads == [1] and len(graph.entries) == 2


@pytest.mark.parametrize("sid", [-1, 2 ** 63, "0"])
def test_storage_id_out_of_range(tmp_path: Path, sid) -> None:
    def change(g):
        g["attrs"]["storage_id"][1][1] = sid
    text = _error(tmp_path, change)
    assert "storage id" in text and repr(sid) in text


@pytest.mark.parametrize("ref", [[7, 0, 0], [1, 5, 0], [-1, 0, 0], [2 ** 70, 0, 0]])
def test_head_reference_out_of_range(tmp_path: Path, ref) -> None:
    def change(g):
        g["heads"] = [ref]
    assert "heads[0]" in _error(tmp_path, change)


def test_input_reference_to_a_later_node(tmp_path: Path) -> None:
    def change(g):
        g["nodes"][1]["inputs"] = [[1, 0, 0]]
    assert "node 1 ('fused') input 0" in _error(tmp_path, change)


def test_shape_whose_product_overflows(tmp_path: Path) -> None:
    def change(g):
        g["attrs"]["shape"][1][1] = [2 ** 40, 2 ** 40]
    text = _error(tmp_path, change)
    assert "entry 1" in text

"""Randomized parity of the shape-only operators (views: SQUEEZE, EXPAND_DIMS, and RESHAPE in
the types its first cases lack) against TFLite Micro and LiteRT.

Each op runs in every element type it declares, in two forms: ``direct`` (a graph input viewed
straight into a graph output: the one case that copies) and ``chained`` (between two ADDs, so
the view aliases a buffer of the activation pool and the second ADD reads it through the
alias). The machinery is ``tests/helpers/emit_parity.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers.emit_parity import SEEDS, Case, Prefetcher, check_parity

from project_api.emit.builder import ModelBuilder, TensorRef

pytest_plugins = ("helpers.emit_parity",)

#: (op, the view's options, input shape): several per op, each a branch of every case.
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "SQUEEZE": [{"input_shape": (1, 4, 1, 3)}, {"input_shape": (2, 1, 3), "dims": (-2,)},
                {"input_shape": (1, 5, 1, 1), "dims": (0, 3)}],
    "EXPAND_DIMS": [{"input_shape": (1, 4, 3), "axis": 0}, {"input_shape": (2, 5), "axis": -1},
                    {"input_shape": (3, 2, 2), "axis": 2}],
    "RESHAPE": [{"input_shape": (1, 4, 4, 3), "shape": (1, -1)},
                {"input_shape": (2, 6), "shape": (3, 4), "shape_input": False},
                {"input_shape": (1, 12), "shape": (2, 2, 3)}],
}
#: The builder modes of each op's element types (int16x8: int16, int32: plain int32).
MODES: dict[str, tuple[str, ...]] = {
    "SQUEEZE": ("float32", "int8", "int16x8", "int32"),
    "EXPAND_DIMS": ("float32", "int8", "int16x8"),
    "RESHAPE": ("int16x8", "int32"),  # float32 and int8: tests/test_emit_random.py
}


def _view(mb: ModelBuilder, op: str, x: TensorRef, opts: dict[str, Any]) -> TensorRef:
    if op == "SQUEEZE":
        return mb.squeeze(x, opts.get("dims"))
    if op == "EXPAND_DIMS":
        return mb.expand_dims(x, opts["axis"])
    return mb.reshape(x, opts["shape"], opts.get("shape_input", True))


def _chained(op: str):
    """A branch ``input -> ADD (constant) -> <op> -> ADD (constant) -> output``."""

    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        x = mb.input(opts["input_shape"], dtype, value_range=(-2.0, 2.0), name=name)
        t = mb.add(x, mb.rng.uniform(-1.0, 1.0, size=x.shape[-1:]).astype(np.float32))
        t = _view(mb, op, t, opts)
        return mb.add(t, mb.rng.uniform(-1.0, 1.0, size=t.shape[-1:]).astype(np.float32))

    return branch


def _cases() -> list[Case]:
    cases = []
    for op, modes in MODES.items():
        for mode in modes:
            forms = ("direct",) if mode == "int32" else ("direct", "chained")  # no int32 ADD
            for form in forms:
                case = Case(op, mode, {"form": form},
                            branch=_chained(op) if form == "chained" else None)
                for s in SEEDS:
                    for v in VARIANTS[op]:
                        case.branches.append({**v, "seed": s})
                cases.append(case)
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_view_matches_references(case: Case, builds: Prefetcher) -> None:
    check_parity(case, builds)


def test_views_alias_their_input():
    """A chained view costs no code and no pool bytes: its output is its input's buffer."""
    from project_api.emit import emit_sources

    for case in (c for c in CASES if c.options["form"] == "chained"):
        gen = emit_sources(case.build()[0])
        views = [k for k in gen.kernels if k.op.opcode == case.op]
        assert views and all(k.alias for k in views), case.id
        assert f"_{case.op.lower()}(" not in gen.source, case.id
        assert gen.workspace_size_bytes == gen.lower_bound_bytes, case.id

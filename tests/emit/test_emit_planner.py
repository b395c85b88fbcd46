"""The static memory planner: no live buffers overlap, the pool is near the lower bound."""

from __future__ import annotations

import numpy as np
import pytest

from project_api.emit import planner as P


def bufs(*specs: tuple[int, int, int]) -> list[P.Buffer]:
    return [P.Buffer(i, size, first, last) for i, (size, first, last) in enumerate(specs)]


def test_chain_ping_pongs():
    plan = P.plan(bufs((8000, 0, 1), (8000, 1, 2), (8000, 2, 3), (8000, 3, 4)))
    assert plan.pool_size == 16000 == plan.lower_bound
    assert [b.offset for b in plan.buffers] in ([0, 8000, 0, 8000], [8000, 0, 8000, 0])


def test_autoencoder_reaches_lower_bound():
    sizes = [128, 128, 128, 8, 128, 128]
    plan = P.plan(bufs(*[(s, i, i + 1) for i, s in enumerate(sizes)]))
    assert plan.lower_bound == 256
    assert plan.pool_size == 256


def test_sizes_are_aligned():
    plan = P.plan(bufs((3, 0, 1), (5, 1, 2)))
    assert all(b.size % P.ALIGN == 0 and b.offset % P.ALIGN == 0 for b in plan.buffers)
    assert plan.pool_size == 16


def test_disjoint_lifetimes_share_offset_zero():
    plan = P.plan(bufs((100, 0, 0), (50, 1, 1), (70, 2, 2)))
    assert [b.offset for b in plan.buffers] == [0, 0, 0]
    assert plan.pool_size == 104


def test_empty():
    plan = P.plan([])
    assert plan.pool_size == 0 and plan.lower_bound == 0


@pytest.mark.parametrize("seed", range(30))
def test_random_plans_are_valid(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    specs = []
    for _ in range(n):
        first = int(rng.integers(0, 30))
        specs.append((int(rng.integers(1, 5000)), first, first + int(rng.integers(0, 6))))
    plan = P.plan(bufs(*specs))
    assert P.overlapping_pairs(plan.buffers) == []
    assert plan.lower_bound <= plan.pool_size
    assert plan.pool_size == max(b.offset + b.size for b in plan.buffers)
    # greedy is not optimal, but never worse than giving each buffer its own space
    assert plan.pool_size <= sum(b.size for b in plan.buffers)
    # and deterministic
    again = P.plan(bufs(*specs))
    assert [b.offset for b in again.buffers] == [b.offset for b in plan.buffers]


def test_overlap_detector_sees_overlap():
    a, b = bufs((16, 0, 2), (16, 1, 3))
    a.offset, b.offset = 0, 8
    assert P.overlapping_pairs([a, b]) == [(0, 1)]

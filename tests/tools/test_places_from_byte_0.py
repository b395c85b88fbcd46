"""``validate --places`` with faults from the first byte (issue 32): the place workers of
:mod:`project_api.tools.farm` (two places, each its own host-template device and session, as
the labgrid places get) over links that fault each request of the opening in turn, and over
20 seeds at 1e-3 from byte 0: every sample stored once, equal to numpy's. The labgrid layer
(acquiring places) is left out: its test is tests/template/test_labgrid.py."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require_tool
from fault_proxy import FaultNth, FaultProxy
from mlf_kernels import add_host_project

from project_api.api.project import GeneratedProject, project_build_hash
from project_api.micro import Session
from project_api.micro.recovery import RetryPolicy
from project_api.tools import farm
from project_api.tools.validate import plan_validation

SHAPE = (1, 8)
SAMPLES = 8
#: The project's own opener, kept before the tests replace it.
_OPEN = GeneratedProject.from_directory
#: Requests of a place's opening damaged in turn (handshake, build hash, boot mark, lookup).
OPENING = 12


@pytest.fixture(scope="module")
def add_project(tmp_path_factory: pytest.TempPathFactory):
    require_tool("make")
    require_tool("cc")
    project, info = add_host_project(tmp_path_factory.mktemp("places_byte0"), SHAPE)
    project.close()
    return project.directory, info


def _places(monkeypatch, project_dir, info, links, seed: int) -> None:
    """Two places, their sessions over ``links(place index)``; asserts every sample once."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 127, (SAMPLES, *SHAPE), dtype=np.int8, endpoint=True)
    b = rng.integers(-128, 127, (SAMPLES, *SHAPE), dtype=np.int8, endpoint=True)
    plan = plan_validation(info, {"a": a, "b": b}, {"output": (a + b).astype(np.int8)})
    made: list[int] = []

    def session(self, *, debug=False, verify=None, **kwargs):  # noqa: ANN001, ANN202
        made.append(1)
        return Session(links(len(made) - 1, self.transport()), verify=verify, **kwargs)

    monkeypatch.setattr(GeneratedProject, "session", session)
    # The place's options (labgrid_place) are the labgrid layer's; the host template has none.
    monkeypatch.setattr(GeneratedProject, "from_directory",
                        classmethod(lambda cls, d, options=None, debug=False: _OPEN(d)))
    shard = farm._Shard(plan, project_build_hash(project_dir), 2, None,
                        {"timeout_sec": 0.5, "timeout_advice": None, "retry": RetryPolicy()})
    shard.queue_chunks(2)
    runs = [farm.PlaceRun("p0"), farm.PlaceRun("p1")]
    farm._stream_on_places(runs, project_dir, {}, shard)
    shard.check_every_sample_ran_once(runs)
    assert list(shard.done) == [1] * SAMPLES
    np.testing.assert_array_equal(shard.outputs[0].reshape(SAMPLES, -1),
                                  (a + b).astype(np.int8).reshape(SAMPLES, -1))
    assert [r.status for r in runs] == ["ok", "ok"], [(r.status, r.error) for r in runs]


def test_a_fault_in_each_request_of_a_place_opening_is_mended(monkeypatch, add_project) -> None:
    """Place 0 has request nth damaged, place 1 request nth + 1: two runs cover two requests."""
    project_dir, info = add_project
    counted: list[FaultNth] = []
    _places(monkeypatch, project_dir, info,
            lambda i, t: counted.append(FaultNth(t, None)) or counted[-1], 0)
    assert min(c.requests for c in counted) > OPENING
    links: list[FaultNth] = []
    for nth in range(0, OPENING, 2):
        _places(monkeypatch, project_dir, info,
                lambda i, t, nth=nth: links.append(FaultNth(t, nth + i)) or links[-1], nth)
    assert all(link.damaged for link in links)


def test_seed_sweep_faulting_from_byte_0(monkeypatch, add_project) -> None:
    """20 seeds at 1e-3, one a place's link (two places a run), faults from byte 0."""
    project_dir, info = add_project
    proxies: list[FaultProxy] = []
    for run in range(10):
        _places(monkeypatch, project_dir, info,
                lambda i, t, run=run: proxies.append(FaultProxy(t, 1e-3, 3600 + 2 * run + i))
                or proxies[-1], run)
    assert len(proxies) == 20 and sum(p.counts.total for p in proxies) > 0

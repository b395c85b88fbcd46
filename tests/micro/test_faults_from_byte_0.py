"""Faults from the first byte (issue 32) on the host template's device link: a fault forced
into each request of a run in turn (the handshake, the checks at open: build hash, boot mark;
the model lookup and its tensor views, the samples, the closing) and a seeded lossy link that
faults from byte 0 are mended by the one recovery policy, for ``validate``, ``run --repeat``
and ``Session.time``: every output equals numpy's, every sample is answered once.

Each run opens the project's transport itself, so the device process starts with the run and
the first byte either way may be hit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from conftest import require_tool
from fault_proxy import FaultNth, FaultProxy
from mlf_kernels import add_host_project, add_samples

from project_api.api.transport import Transport
from project_api.cli.base import run_and_time
from project_api.errors import SessionError
from project_api.micro import Session
from project_api.micro.recovery import RetryPolicy
from project_api.tools.validate import validate

SHAPE = (1, 8)
#: The per-reply ceiling: at open nothing is measured yet, so a lost reply costs this much.
REPLY_SEC = 0.5
#: Samples a validate run streams (a few: the opening is what is under test).
SAMPLES = 3
SEEDS = range(20)
RATE = 1e-3


@pytest.fixture(scope="module")
def add_project(tmp_path_factory: pytest.TempPathFactory):
    require_tool("make")
    require_tool("cc")
    project, info = add_host_project(tmp_path_factory.mktemp("byte0"), SHAPE)
    yield project, info
    project.close()


def _data(n: int, seed: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    return add_samples(n, seed, SHAPE)


def _session(project: Any, link: Transport) -> Session:
    return Session(link, timeout_sec=REPLY_SEC, retry=RetryPolicy(),
                   verify=project.build_hash_check())


def run_validate(project: Any, info: Any, link: Transport, seed: int) -> None:
    data, want = _data(SAMPLES, seed)
    answered = np.zeros(SAMPLES, dtype=np.int64)

    def progress(label: str, total: int) -> Callable[[int], None] | None:
        def advance(k: int = 1) -> None:
            answered[int(answered.sum()):int(answered.sum()) + k] += 1
        return advance if label == "device" else None

    with _session(project, link) as session:
        report = validate(session, data, {"output": want}, module=info, number=0,
                          progress=progress)
    assert report.samples == SAMPLES and not (report.recovery and report.recovery.failed_samples)
    np.testing.assert_array_equal(report.outputs[0].reshape(SAMPLES, -1),
                                  want.reshape(SAMPLES, -1))
    assert list(answered) == [1] * SAMPLES


def run_repeat(project: Any, info: Any, link: Transport, seed: int) -> None:
    """``project-api run --repeat 2 --number 2``: one inference, then its timing."""
    data, want = _data(1, seed)
    with _session(project, link) as session:
        outputs, timing = run_and_time(session, info, [data["a"][0], data["b"][0]], 2, 2)
    np.testing.assert_array_equal(outputs[0].reshape(-1), want.reshape(-1))
    assert len(timing.results) == 2 and all(r > 0 for r in timing.results)


def run_time(project: Any, info: Any, link: Transport, seed: int) -> None:
    """``Session.time`` on a session opened through the link: one complete measurement."""
    with _session(project, link) as session:
        timing = session.time(session.model(info.name), number=3, repeat=2)
    assert len(timing.results) == 2 and all(0 < r < 1 for r in timing.results)


COMMANDS = {"validate": run_validate, "run --repeat": run_repeat, "Session.time": run_time}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_fault_in_each_request_of_a_run_is_mended(add_project, command: str) -> None:
    """Each request of a clean run (opening, checks, lookup, samples, closing) damaged in
    turn, one run each: every run completes, exact."""
    project, info = add_project
    run = COMMANDS[command]
    clean = FaultNth(project.transport(), None)
    run(project, info, clean, 0)
    assert clean.requests >= 8, clean.requests  # handshake, build hash, lookup, ...
    for nth in range(clean.requests):
        link = FaultNth(project.transport(), nth)
        run(project, info, link, nth)
        assert link.damaged, (command, nth)


def test_without_recovery_a_fault_at_open_ends_the_run(add_project) -> None:
    """The same damaged requests of the opening with recovery off: one of them (the build-hash
    check, as issue 32 saw it) ends the run, so the tests above can fail."""
    project, _ = add_project
    ended = []
    for nth in range(1, 6):
        link = FaultNth(project.transport(), nth)
        try:
            with Session(link, timeout_sec=REPLY_SEC, verify=project.build_hash_check()):
                pass
        except SessionError:
            ended.append(nth)
    assert ended


@pytest.mark.parametrize("command", COMMANDS)
def test_seed_sweep_faulting_from_byte_0(add_project, command: str) -> None:
    """20 seeds at 1e-3 both ways, faults allowed from the first byte: every sample answered
    once and right."""
    project, info = add_project
    run = COMMANDS[command]
    injected = 0
    for seed in SEEDS:
        proxy = FaultProxy(project.transport(), RATE, 3200 + seed)
        try:
            run(project, info, proxy, seed)
        finally:
            proxy.close()
        injected += proxy.counts.total
    assert injected > 0


#: What a run's closing sends: the handles freed, then the end of the session.
CLOSING = {"FREE_HANDLE", "TERMINATE_SESSION"}


def _cli_validate(monkeypatch: pytest.MonkeyPatch, project: Any, tmp: Any, link: Any,
                  capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, np.ndarray, np.ndarray]:
    """``project-api validate <prj> --data --reference --save --json`` in-process, its
    transport wrapped by ``link(transport)``: exit status, JSON report, saved outputs, numpy's."""
    import json

    from project_api.api.project import GeneratedProject
    from project_api.cli import main

    data, want = _data(SAMPLES, 7)
    np.savez(tmp / "data.npz", **data)
    np.save(tmp / "reference.npy", want)
    saved = tmp / "outputs.npz"
    saved.unlink(missing_ok=True)
    opened = GeneratedProject.transport
    monkeypatch.setattr(GeneratedProject, "transport",
                        lambda self, **kw: link(opened(self, **kw)))
    capsys.readouterr()
    status = main(["validate", str(project.directory), "--data", str(tmp / "data.npz"),
                   "--reference", str(tmp / "reference.npy"), "--save", str(saved), "--json",
                   "--timeout", str(REPLY_SEC)])
    report = json.loads(capsys.readouterr().out)
    with np.load(saved) as outputs:
        got = outputs[next(iter(outputs.files))]
    return status, report, got, want


def test_a_fault_in_each_request_of_the_closing_ends_the_run_cleanly(
        add_project, monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``validate`` on the command line with each request of its closing damaged in turn (each
    handle freed, the end of the session) and each freed handle's reply damaged: the command
    exits 0 with its report printed and its outputs saved, every sample answered, exact."""
    project, _ = add_project
    links: list[FaultNth] = []

    def wrap(nth: int | None, reply: bool = False) -> Callable[[Transport], FaultNth]:
        def make(transport: Transport) -> FaultNth:
            links.append(FaultNth(transport, nth, reply=reply))
            return links[-1]
        return make

    status, report, _, _ = _cli_validate(monkeypatch, project, tmp_path, wrap(None), capsys)
    clean = links.pop()
    assert status == 0 and report["ok"] and not links
    closing = len(clean.commands)
    while closing and clean.commands[closing - 1] in CLOSING:
        closing -= 1
    assert clean.commands[closing:].count("FREE_HANDLE") >= 2, clean.commands
    assert clean.commands[-1] == "TERMINATE_SESSION"
    cases = [(nth, False) for nth in range(closing, clean.requests)]
    cases += [(nth, True) for nth in range(closing, clean.requests - 1)]  # none to the last
    for nth, reply in cases:
        status, report, got, want = _cli_validate(monkeypatch, project, tmp_path,
                                                  wrap(nth, reply), capsys)
        assert links[-1].damaged, (nth, reply)
        assert status == 0 and report["ok"], (nth, reply, report)
        assert report["samples"] == SAMPLES, (nth, reply, report)
        np.testing.assert_array_equal(got.reshape(SAMPLES, -1), want.reshape(SAMPLES, -1))

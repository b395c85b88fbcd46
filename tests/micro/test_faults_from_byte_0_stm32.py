"""Faults from the first byte (issue 32) on the emulated STM32F405's UART (QEMU netduinoplus2):
20 seeds at 1e-3 both ways, faults allowed from each run's first byte (the handshake, the
build-hash check, the boot mark, the model lookup), for ``validate``, ``run --repeat`` and
``Session.time``, and ``validate --places`` (two places: the place workers of
:mod:`project_api.tools.farm`, each its own emulator): every output equals TFLite Micro's,
every sample answered once. One emulator boot serves every run (a run that must reopen the
link boots it again); the places sweep boots one more, for its second place."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest
from fault_proxy import FaultNth, FaultProxy
from stm32_support import (  # noqa: F401  (the fixture is autouse)
    build_project,
    stm32_tools_and_no_qemu_left,
)

from project_api.api.project import GeneratedProject, project_build_hash
from project_api.archive import mlf
from project_api.cli.base import run_and_time
from project_api.emit import emit
from project_api.emit.reference import run_tflm
from project_api.micro import Session
from project_api.micro.recovery import RetryPolicy
from project_api.tools import farm
from project_api.tools.validate import plan_validation, validate

RATE = 1e-3
SEEDS = range(20)
REPLY_SEC = 1.0


@pytest.fixture(scope="module")
def hello(models_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("stm32_byte0")
    tflite = models_dir / "hello_world_int8.tflite"
    emitted = emit(tflite, tmp / "hello_world.tar", name="default")
    with mlf.open_mlf(emitted.path) as library:
        info = library.module(None)
    project = build_project(emitted.path, tmp / "prj")
    link = project.transport()
    link.open()  # the one boot the runs share
    link.is_open = True
    yield project, link, info, tflite.read_bytes(), emitted.inputs[0]
    link.close()
    project.close()


@pytest.fixture(scope="module")
def second_link(hello):
    """A second emulator of the same firmware, through its own project server (a server holds
    one link): the places sweep's second place."""
    project = GeneratedProject.from_directory(hello[0].directory)
    link = project.transport()
    link.open()
    link.is_open = True
    yield link
    link.close()
    project.close()


def _inputs(tensor, seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 127, (n, *tensor.shape), dtype=np.int8, endpoint=True)


def _run(hello, link, command: str, seed: int) -> None:
    """One run of ``command`` on a session opened over ``link``, checked against TFLite Micro."""
    project, _, info, model_bytes, tensor = hello
    xs = _inputs(tensor, seed, 2)
    want = np.stack([run_tflm(model_bytes, [x])[0] for x in xs])
    with Session(link, timeout_sec=REPLY_SEC, retry=RetryPolicy(),
                 verify=project.build_hash_check()) as session:
        if command == "validate":
            report = validate(session, {tensor.name: xs}, module=info, number=0)
            assert report.samples == 2
            assert not (report.recovery and report.recovery.failed_samples)
            np.testing.assert_array_equal(report.outputs[0].reshape(want.shape), want)
        elif command == "run --repeat":
            outputs, timing = run_and_time(session, info, [xs[0]], 2, 2)
            np.testing.assert_array_equal(outputs[0].reshape(want[0].shape), want[0])
            assert len(timing.results) == 2 and all(r > 0 for r in timing.results)
        else:
            timing = session.time(session.model(info.name), number=2, repeat=2)
            assert len(timing.results) == 2 and all(r > 0 for r in timing.results)


COMMANDS = ["validate", "run --repeat", "Session.time"]


@pytest.mark.parametrize("command", COMMANDS)
def test_seed_sweep_faulting_from_byte_0_on_qemu(hello, command: str) -> None:
    link = hello[1]
    injected = 0
    for seed in SEEDS:
        proxy = FaultProxy.from_byte_0(link, RATE, 3400 + seed)
        _run(hello, proxy, command, seed)
        injected += proxy.counts.total
    assert injected > 0


@pytest.mark.parametrize("command", COMMANDS)
def test_a_fault_in_each_request_of_the_opening_is_mended_on_qemu(hello, command: str) -> None:
    """Each request of the opening (the handshake, the build-hash check, the boot mark, the
    model lookup: what a session's open and its first ``model`` send) damaged in turn, one run
    each: every run completes, equal to TFLite Micro's."""
    project, link, info = hello[:3]
    clean = FaultNth(link, None)
    with Session(clean, timeout_sec=REPLY_SEC, verify=project.build_hash_check()) as session:
        session.model(info.name)
        opening = clean.requests
    assert opening >= 4, clean.commands
    for nth in range(opening):
        faulted = FaultNth(link, nth)
        _run(hello, faulted, command, nth)
        assert faulted.damaged, (command, nth)


#: The project's own opener, kept before the places test replaces it.
_OPEN = GeneratedProject.from_directory


def test_places_seed_sweep_faulting_from_byte_0_on_qemu(hello, second_link, monkeypatch) -> None:
    """``validate --places`` with two places, each over its own emulator through a proxy that
    faults from byte 0 at 1e-3: 10 runs, 20 seeds (one a place's link), every sample stored
    once, equal to TFLite Micro's, both places ok. The labgrid layer is left out (its test is
    tests/template/test_labgrid.py)."""
    project, link, info, model_bytes, tensor = hello
    shared = [link, second_link]
    proxies: list[FaultProxy] = []
    samples = 4
    lock = threading.Lock()

    def session(self, *, debug=False, verify=None, **kwargs):  # noqa: ANN001, ANN202
        with lock:  # the places open their sessions at once, each on its own emulator
            proxy = FaultProxy.from_byte_0(shared[len(proxies) % 2], RATE, 3500 + len(proxies))
            proxies.append(proxy)
        return Session(proxy, verify=verify, **kwargs)

    monkeypatch.setattr(GeneratedProject, "session", session)
    monkeypatch.setattr(GeneratedProject, "from_directory",
                        classmethod(lambda cls, d, options=None, debug=False: _OPEN(d)))
    for run in range(10):
        xs = _inputs(tensor, 500 + run, samples)
        want = np.stack([run_tflm(model_bytes, [x])[0] for x in xs])
        _validate_on_two_places(project, info, tensor, xs, want, run)
    assert len(proxies) >= 20 and sum(p.counts.total for p in proxies) > 0


def test_places_a_fault_in_each_request_of_a_places_opening_is_mended_on_qemu(
        hello, second_link, monkeypatch) -> None:
    """``validate --places`` with two places over the places sweep's two emulators: each
    request of the places' opening (the handshake, the build-hash check, the boot mark, the
    model lookup) damaged in turn, in both places at once (so a run costs one reopen's wait,
    not two), one run each: both places ok, every sample stored once, equal to TFLite
    Micro's."""
    project, link, info, model_bytes, tensor = hello
    shared = [link, second_link]
    clean = FaultNth(link, None)
    with Session(clean, timeout_sec=REPLY_SEC, verify=project.build_hash_check()) as session:
        session.model(info.name)
        opening = clean.requests
    assert opening >= 4, clean.commands
    samples = 2
    xs = _inputs(tensor, 600, samples)
    want = np.stack([run_tflm(model_bytes, [x])[0] for x in xs])
    monkeypatch.setattr(GeneratedProject, "from_directory",
                        classmethod(lambda cls, d, options=None, debug=False: _OPEN(d)))
    # 17 runs (the opening is 17 requests), about 2.3 s each: the places' start-up and
    # streaming, not the damage (no run reopens its link; a damaged request costs about as
    # much as in the single-session test above).
    for nth in range(opening):
        links: list[FaultNth] = []
        lock = threading.Lock()

        def session(self, *, debug=False, verify=None, links=links, lock=lock, nth=nth,  # noqa: ANN001, ANN202
                    **kwargs):
            with lock:  # only each place's first opening is faulted, not a reopen
                k = len(links)
                wrapped = FaultNth(shared[k % 2], nth if k < 2 else None)
                links.append(wrapped)
            return Session(wrapped, verify=verify, **kwargs)

        monkeypatch.setattr(GeneratedProject, "session", session)
        _validate_on_two_places(project, info, tensor, xs, want, nth)
        assert links[0].damaged and links[1].damaged, (nth, [w.commands for w in links])


def _validate_on_two_places(project, info, tensor, xs, want, what) -> None:  # noqa: ANN001
    """``validate --places`` of ``xs`` over two places (each GeneratedProject.session the test
    patched in): both places ok, every sample stored once, equal to ``want``."""
    plan = plan_validation(info, {tensor.name: xs}, None)
    shard = farm._Shard(plan, project_build_hash(project.directory), 2, None,
                        {"timeout_sec": REPLY_SEC, "timeout_advice": None,
                         "retry": RetryPolicy()})
    shard.queue_chunks(2)
    runs = [farm.PlaceRun("p0"), farm.PlaceRun("p1")]
    farm._stream_on_places(runs, project.directory, {}, shard)
    shard.check_every_sample_ran_once(runs)
    assert [r.status for r in runs] == ["ok", "ok"], (what, [(r.status, r.error) for r in runs])
    assert list(shard.done) == [1] * len(xs), what
    np.testing.assert_array_equal(shard.outputs[0].reshape(want.shape), want)

"""Sharded validation: the samples of one validation spread over several boards of a labgrid farm.

``project-api validate PROJECT --data samples.npz --places 'PATTERN'`` as a library::

    from project_api.tools.farm import validate_on_places

    report = validate_on_places("prj", "samples.npz", "nucleo-*", tflite="model.tflite")
    for place in report.places:
        print(place.name, place.status, place.samples, place.samples_per_second)
    print(report.samples_per_second, report.validation.comparison("tflm").outputs)

Every free place whose name matches ``PATTERN`` (shell-style, ``fnmatch``) gets its own project
server, which acquires the place (``-o labgrid_place``) and opens one session to its board. A
board whose firmware reports another build hash than the project's ``build_hash.txt`` (or none)
is refused. The samples are cut into small chunks on one shared queue; once every place has
opened its session (or failed to), all of them start together and each streams chunk after chunk
through :func:`project_api.tools.validate.stream_samples`. A chunk's outputs are stored
only when the whole chunk has come back, so a place that fails mid-chunk leaves nothing behind:
its chunk goes back on the queue and the other places finish it. No sample is counted twice or
lost; the report names each failed place with its error. The merged outputs are then compared
with the references exactly as a single-session validation's are.
"""

from __future__ import annotations

import fnmatch
import logging
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from project_api.api.project import (
    BuildHashMismatchError,
    check_build_hash,
    device_build_hash,
    project_build_hash,
)
from project_api.errors import ProjectAPIError, ProjectError
from project_api.micro.recovery import RecoveryStats, RetryPolicy
from project_api.tools.validate import (
    ValidationError,
    ValidationPlan,
    ValidationReport,
    plan_validation,
    stream_samples,
)

__all__ = ["PlaceRun", "ShardedReport", "device_build_hash", "validate_on_places"]

_LOG = logging.getLogger(__name__)

@dataclass
class PlaceRun:
    """One place's part of a sharded validation."""

    name: str
    status: str = "pending"  #: "ok", "failed", "refused" or "busy" (held by someone else)
    samples: int = 0  #: samples whose outputs this place delivered
    seconds: float = 0.0  #: wall time from its session's start to its last chunk
    error: str | None = None
    build_hash: str | None = None
    started_at: float | None = None  #: time.monotonic() when its session was open and checked

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "samples": self.samples,
                "seconds": self.seconds, "samples_per_second": self.samples_per_second,
                "error": self.error, "build_hash": self.build_hash}


@dataclass
class ShardedReport:
    """A validation's report plus what each place did."""

    validation: ValidationReport
    places: list[PlaceRun]
    seconds: float  #: the sharded stream: from the first place's first sample to the last's end
    retried_samples: int = 0  #: samples that a failed place left and the others ran again
    wall_seconds: float = 0.0  #: all of it: servers, acquiring the places, sessions, stream

    @property
    def samples_per_second(self) -> float:
        return self.validation.samples / self.seconds if self.seconds > 0 else math.inf

    @property
    def failed(self) -> list[PlaceRun]:
        return [p for p in self.places if p.status == "failed"]

    def to_json(self) -> dict[str, Any]:
        data = self.validation.to_json()
        data.update({"places": [p.to_json() for p in self.places], "stream_seconds": self.seconds,
                     "samples_per_second": self.samples_per_second,
                     "wall_seconds": self.wall_seconds,
                     "retried_samples": self.retried_samples})
        return data


def matching_places(coordinator: str, pattern: str) -> tuple[list[str], list[PlaceRun]]:
    """The free places matching ``pattern`` (with those a dead project-api owner here holds)
    and the busy ones (as refused PlaceRuns)."""
    from project_api.tools.places import list_places

    places = [p for p in list_places(coordinator) if fnmatch.fnmatchcase(p.name, pattern)]
    if not places:
        raise ProjectError(f"no labgrid place on {coordinator} matches {pattern!r}; "
                           "'project-api devices' lists them")
    # A place whose project-api owner here is gone counts as free: its keeper releases it.
    free = [p.name for p in places if not p.acquired or p.stale]
    busy = [PlaceRun(p.name, "busy", error=_held_by(p)) for p in places
            if p.acquired and not p.stale]
    return free, busy


def _held_by(place: Any) -> str:
    """``held by HOST/USER (its project-api owner)``, for a place that is not free."""
    owner = f" ({place.owner.describe()})" if place.owner is not None else ""
    return f"held by {place.acquired}{owner}"


def validate_on_places(
    project_dir: str | Path,
    data: str | Path | Mapping[str, Any],
    places: str,
    reference: str | Path | Mapping[str, Any] | None = None,
    *,
    coordinator: str | None = None,
    tflite: bytes | str | Path | None = None,
    module: str | None = None,
    litert: bool = True,
    limit: int | None = None,
    chunk_samples: int | None = None,
    options: Mapping[str, Any] | None = None,
    progress: Callable[[str, int], Callable[[int], None] | None] | None = None,
    quantize: bool = False,
    timeout_sec: float | None = None,
    timeout_advice: str | None = None,
    retry: RetryPolicy | None = None,
) -> ShardedReport:
    """Validate the built project ``project_dir`` on every free labgrid place matching
    ``places`` at once (see the module doc). ``coordinator`` defaults to ``LG_COORDINATOR``;
    ``options`` are more open_transport options for every place (e.g. ``labgrid_wait``);
    ``quantize``, ``timeout_sec`` and ``timeout_advice`` are as for
    :func:`project_api.tools.validate.validate`. A stateful model has its state reset before every
    sample (samples are independent, so they can be shared out). ``retry`` is as for
    validate: a place recovers from link faults by itself (its session reopened, the board
    reset or its emulator restarted, the build hash checked again), and only a place that
    gives up leaves its chunk to the others."""
    from project_api.api.project import GeneratedProject
    from project_api.tools.validate import _module_info

    address = _coordinator(coordinator)
    want_hash = _project_build_hash(Path(project_dir))
    with GeneratedProject.from_directory(project_dir) as local:
        info = _module_info(local, module)
    plan = plan_validation(info, data, reference, tflite=tflite, limit=limit, quantize=quantize)
    free, busy = matching_places(address, places)
    if not free:
        raise ProjectError(f"every place matching {places!r} is held: " + "; ".join(
            f"{p.name} {p.error}" for p in busy) + "; wait, or release them with "
            f"'labgrid-client -x {address} -p PLACE release --kick'")
    runs = [PlaceRun(name) for name in free]
    shard = _Shard(plan, want_hash, len(runs),
                   progress("device", plan.samples) if progress is not None else None,
                   {"timeout_sec": timeout_sec, "timeout_advice": timeout_advice,
                    "retry": retry if retry is not None else RetryPolicy()})
    shard.queue_chunks(chunk_samples or max(1, min(16, plan.samples // (4 * len(runs)) or 1)))
    began = time.monotonic()
    _stream_on_places(runs, Path(project_dir), {**(options or {}),
                                                "labgrid_coordinator": address}, shard)
    ended = time.monotonic()
    shard.check_every_sample_ran_once(runs + busy)
    # A sample one place gave up and another answered is neither lost nor failed: named apart.
    shard.recovery.settle(lambda s: bool(shard.done[s] == 1))
    seconds = _stream_seconds(runs, ended - began)
    validation = plan.report(shard.outputs, stream_seconds=seconds, pipeline_depth=1,
                             litert=litert, progress=progress)
    if shard.session_options["retry"].enabled:
        validation.recovery = shard.recovery
    for r in runs:
        if r.status == "failed":
            _LOG.warning("place %s failed mid-run: %s; its samples ran on the others",
                         r.name, r.error)
    return ShardedReport(validation, runs + busy, seconds, shard.retried, ended - began)


def _coordinator(coordinator: str | None) -> str:
    """The labgrid coordinator's HOST:PORT (``coordinator``, else ``LG_COORDINATOR``); the
    labgrid extra must be installed."""
    import os

    from project_api.system import extras
    from project_api.template.labgrid_place import coordinator_address

    extras.require("labgrid", "validating on labgrid places (--places)")
    address = coordinator or os.environ.get("LG_COORDINATOR")
    if not address:
        raise ProjectError("validating on labgrid places needs the coordinator's address: pass "
                           "--coordinator HOST:PORT (coordinator= in Python) or set "
                           "LG_COORDINATOR")
    return coordinator_address({"labgrid_coordinator": address})


def _project_build_hash(project_dir: Path) -> str:
    """The build hash the project's firmware reports (every place must report it)."""
    from project_api.template import glue

    want = project_build_hash(project_dir)
    if want is None:
        raise ProjectError(f"{project_dir} has no {glue.BUILD_HASH_FILE}; regenerate the project "
                           "so that its firmware reports a build hash")
    return want


def _stream_on_places(runs: list[PlaceRun], project_dir: Path, options: Mapping[str, Any],
                      shard: _Shard) -> None:
    """One worker thread per place (:func:`_run_place`), each holding its place through
    ``-o labgrid_place``; returns when every one has finished."""
    threads = [threading.Thread(target=_run_place,
                                args=(run, project_dir, {**options, "labgrid_place": run.name},
                                      shard),
                                name=f"place-{run.name}", daemon=True) for run in runs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _stream_seconds(runs: list[PlaceRun], wall_seconds: float) -> float:
    """The sharded stream's duration: from the first place's first sample to the last place's
    end (``wall_seconds`` when no place streamed at all)."""
    streamed = [r for r in runs if r.started_at is not None and r.samples]
    if not streamed:
        return wall_seconds
    return (max(r.started_at + r.seconds for r in streamed)  # type: ignore[operator]
            - min(r.started_at for r in streamed))  # type: ignore[type-var]


#: How long a place that is ready waits for the others before it starts streaming anyway.
GATE_TIMEOUT_SEC = 60.0


class _Shard:
    """What the place workers share: the chunk queue, the merged outputs, the counts, and the
    start gate (streaming begins when every place has opened its session or failed to)."""

    def __init__(self, plan: ValidationPlan, want_hash: str, places: int,
                 advance: Callable[[int], None] | None,
                 session_options: Mapping[str, Any] | None = None) -> None:
        n = plan.samples
        self.plan, self.want_hash, self.advance = plan, want_hash, advance
        #: Keyword arguments of every place's session (timeout_sec, timeout_advice).
        self.session_options = dict(session_options or {})
        self.work: queue.Queue[tuple[int, int]] = queue.Queue()
        self.outputs = [np.empty((n, *s.shape), dtype=s.dtype) for s in plan.output_specs]
        self.done = np.zeros(n, dtype=np.int32)  # times each sample's outputs were stored
        self.lock = threading.Condition()
        self.retried = 0
        self.in_flight = 0  # chunks taken and not yet stored or put back
        self.starting = places  # places still opening their sessions
        #: Every place's recovery counters, merged (sample indices of the whole run).
        self.recovery = RecoveryStats()

    def queue_chunks(self, chunk_samples: int) -> None:
        """Cut the plan's samples into chunks of ``chunk_samples`` on the shared queue."""
        n = self.plan.samples
        for start in range(0, n, chunk_samples):
            self.work.put((start, min(n, start + chunk_samples)))

    def check_every_sample_ran_once(self, runs: list[PlaceRun]) -> None:
        """ProjectError when samples were left (no place was left to run them, each place's
        state named), ProjectAPIError when any was stored twice (a bug)."""
        n = self.plan.samples
        twice = int(np.count_nonzero(self.done > 1))
        if twice:  # cannot happen: a chunk is stored once, under the lock
            raise ProjectAPIError(f"{twice} samples were stored twice; this is a bug")
        missing = int(np.count_nonzero(self.done == 0))
        if missing:
            states = "; ".join(f"{r.name}: {r.status}{' (' + r.error + ')' if r.error else ''}"
                               for r in runs)
            raise ProjectError(f"{missing} of {n} samples were not run: no place was left to "
                               f"run them ({states})")

    def ready(self) -> None:
        """This place is set up (or gave up): one fewer to wait for."""
        with self.lock:
            self.starting -= 1
            self.lock.notify_all()

    def wait_for_all(self, timeout_sec: float = GATE_TIMEOUT_SEC) -> None:
        """Wait until every place is set up, so all start streaming together (at most
        ``timeout_sec``: a place that is slow to open does not hold the others up for long)."""
        with self.lock:
            self.lock.wait_for(lambda: self.starting <= 0, timeout_sec)


def _run_place(run: PlaceRun, project_dir: Path, options: dict[str, Any], shard: _Shard) -> None:
    """One place's worker: open its session, check its firmware, run chunks until none is left."""
    from project_api.api.project import GeneratedProject

    plan = shard.plan
    current: tuple[int, int] | None = None
    started = None
    set_up = False

    def ready() -> None:
        nonlocal set_up
        if not set_up:
            set_up = True
            shard.ready()

    try:
        def verify(session: Any) -> None:
            """After the session opens and after every reopen: the board's firmware (one that
            reports no build hash is refused too: a place may hold anything)."""
            try:
                run.build_hash = check_build_hash(session, shard.want_hash, require=True,
                                                  subject="its firmware")
            except BuildHashMismatchError as err:
                run.build_hash = err.reported
                raise _Refused(str(err)) from None

        with GeneratedProject.from_directory(project_dir, options) as project, \
                project.session(**shard.session_options, verify=verify) as session:
            started = time.monotonic()
            session.recovery.begin_run(plan.samples)
            model = session.model(plan.info.name)
            ready()
            shard.wait_for_all()
            started = run.started_at = time.monotonic()
            while True:
                try:
                    current = shard.work.get(timeout=0.05)
                except queue.Empty:
                    with shard.lock:
                        if not shard.in_flight:
                            break  # nothing queued and nobody running a chunk that may fail
                    continue
                with shard.lock:
                    shard.in_flight += 1
                lo, hi = current
                chunk_stats = session.recovery.stats
                session.recovery.stats = RecoveryStats()
                try:
                    outs, _ = stream_samples(session, model.name,
                                             [x[lo:hi] for x in plan.inputs], plan.output_specs,
                                             reset=plan.reset_state)
                finally:
                    with shard.lock:
                        shard.recovery.merge(session.recovery.stats, lo)
                    chunk_stats.merge(session.recovery.stats)
                    session.recovery.stats = chunk_stats
                with shard.lock:
                    for dest, got in zip(shard.outputs, outs, strict=True):
                        dest[lo:hi] = got
                    shard.done[lo:hi] += 1
                    run.samples += hi - lo
                    shard.in_flight -= 1
                current = None
                run.seconds = time.monotonic() - started
                if shard.advance is not None:
                    shard.advance(hi - lo)
            run.status = "ok"
    except _Refused as err:
        run.status = "refused"
        run.error = str(err)
    except (ProjectAPIError, OSError, ValidationError) as err:
        run.status = "failed"
        run.error = _describe(err)
        _LOG.info("place %s failed: %s", run.name, run.error)
    finally:
        ready()
        if started is not None and run.seconds == 0.0:
            run.seconds = time.monotonic() - started
        if current is not None:  # the chunk it was running: the others run it
            with shard.lock:
                shard.retried += current[1] - current[0]
                shard.work.put(current)
                shard.in_flight -= 1


class _Refused(ProjectAPIError):
    """The board of a place runs other firmware than the project's."""


def _describe(err: BaseException) -> str:
    """One line for a place's failure: the error's first line and the reason it carries."""
    text = str(err).splitlines()[0] if str(err) else type(err).__name__
    data = getattr(err, "data", None)
    reason = data.get("reason") if isinstance(data, dict) else None
    return f"{text}: {reason}" if reason else text

#!/usr/bin/env python3
"""Long runs on noisy links and flaky boards: what recovery from link faults costs, beside the
same runs on clean links measured in the same process.

Three soaks, all on the emulated STM32F405 (QEMU netduinoplus2, ``-icount shift=0``), with
recovery on (its defaults, as the command line has them):

1. ``validate`` of ``micro_speech_int8``: ``--samples`` samples through the seeded fault proxy
   of the tests (bit flips, dropped bytes and noise bursts, each byte of both directions hit
   with the rate's probability), at each of ``--rates``, beside a clean link. The runs go side
   by side, each on its own emulator (the machine's load is the same for all of them).
2. ``mlperftiny`` accuracy mode of ``kws_ref_model_int8``: ``--kws-samples`` samples through
   the same proxy at each rate, beside a clean link, side by side.
3. ``validate --places`` over three labgrid places (a coordinator, an exporter and three QEMU
   boards on loopback, tests/farm_support.py): ``--farm-samples`` samples, once on healthy
   boards and once with one board's QEMU SIGKILLed and another's SIGSTOPped for 5 s, both a
   third of the way in.

For each it prints samples/s with faults beside samples/s without, the faults injected, the
link faults the client saw, the retries (reopened sessions), the samples resumed mid-way, the
time recovering, and three counts that must be 0: samples lost (never answered), samples
answered twice (the progress callback hears of each sample once) and wrong results (outputs
unequal to TFLite Micro's for the same input; MLPerf Tiny scores unequal to the clean run's).
The overhead is the ratio of clean to faulty samples/s. The exit status is 1 if any of the
three counts is not 0 or a run ended early.

Every faulty run goes twice: with faults after the start-up (as before) and with faults from
byte 0 ("from byte 0": the emulator's start-up, the handshake, the build-hash check, the boot
mark, the model lookup all under faults), beside the clean run in the same process. The
``s/fault`` column is the wall time a run took beyond the clean rate, per link fault seen.
Every run's time includes its opening (where byte-0 faults land).

``make bench`` runs it with ``--parts validate,mlperftiny --rates 1e-3 --samples 300
--kws-samples 100``: about 170 s wall on this 2-core machine (a 60/20-sample run took 48 s:
validate from byte 0 at 1e-3 streams 2.6 samples/s, the clean run 7.3), within the 240 s its
line may take. 10,000 samples at 1e-3 (the issue's size) would take over an hour, the biggest
bench by far, and say no more: the counts that must be 0 are per sample, and the overhead and
time per fault settle within a few hundred samples. The farm soak (``--parts farm``, 600
samples over three labgrid boards) is left to a run of its own; ``bench/farm.py`` measures the
farm in ``make bench``.

Usage: python bench/faults.py [--samples N] [--rates 1e-4,1e-3] [--samples-at RATE=N ...]
       [--kws-samples N] [--farm-samples N] [--parts validate,mlperftiny,farm]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from fault_proxy import FaultProxy  # noqa: E402

from project_api.api.project import GeneratedProject, generate_project  # noqa: E402
from project_api.archive import mlf  # noqa: E402
from project_api.emit import emit  # noqa: E402
from project_api.emit.reference import run_tflm  # noqa: E402
from project_api.emit.target import for_cpu  # noqa: E402
from project_api.errors import ProjectAPIError  # noqa: E402
from project_api.micro import Session  # noqa: E402
from project_api.micro.recovery import RecoveryStats, RetryPolicy  # noqa: E402
from project_api.system.paths import template_dir  # noqa: E402
from project_api.template.targets import board_cpu  # noqa: E402
from project_api.tools.validate import validate  # noqa: E402

_LOG = logging.getLogger("bench.faults")

BOARD = "qemu_netduinoplus2"
MODEL = "micro_speech_int8"
KWS = "kws_ref_model_int8"
SEED = 20261202
#: The per-reply ceiling (as ``validate --timeout``): what a lost reply would cost without the
#: waits sized from measured times.
CEILING_SEC = 10.0
#: The suffix of a run whose faults start at the first byte (start-up, handshake, checks).
BYTE0 = " from byte 0"
#: How long the farm's stopped board stays stopped.
STOP_SEC = 5.0


@dataclass
class Run:
    """One run's figures."""

    what: str
    rate: float
    samples: int
    seconds: float = 0.0
    injected: int = 0
    stats: RecoveryStats = field(default_factory=RecoveryStats)
    scores: dict[int, list[float]] = field(default_factory=dict, repr=False)
    lost: int = 0
    twice: int = 0
    wrong: int = 0
    error: str | None = None

    @property
    def sps(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 and not self.error else 0.0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.twice or self.wrong or self.error)


class _Counter:
    """A progress callback that counts how often each sample was said to be done."""

    def __init__(self, n: int) -> None:
        self.answered = np.zeros(n, dtype=np.int64)
        self.count = 0
        self.lock = threading.Lock()
        self.on_count: Callable[[int], None] | None = None

    def advance(self, k: int = 1) -> None:
        with self.lock:
            for _ in range(k):
                if self.count < len(self.answered):
                    self.answered[self.count] += 1
                self.count += 1
            count = self.count
        if self.on_count is not None:
            self.on_count(count)

    def tally(self, run: Run) -> None:
        run.lost = int(np.count_nonzero(self.answered == 0))
        run.twice = int(np.count_nonzero(self.answered > 1)) + max(
            0, self.count - len(self.answered))


def _proxied(project: GeneratedProject, rate: float, seed: int,
             byte0: bool = False) -> tuple[Any, FaultProxy | None]:
    """The project's device link, open, behind a fault proxy of ``rate`` (none at 0); the
    emulator's start-up is not under test unless ``byte0`` (faults from the first byte either
    way: the start-up, the handshake and every check at open)."""
    transport = project.transport()
    if rate <= 0:
        transport.open()
        transport.is_open = True
        return transport, None
    proxy = (FaultProxy.from_byte_0 if byte0 else FaultProxy.opened)(transport, rate, seed)
    return proxy, proxy


def _side_by_side(jobs: list[Callable[[], Run]]) -> list[Run]:
    """Run ``jobs`` in threads at once; their Runs in order."""
    results: list[Run | None] = [None] * len(jobs)

    def work(i: int) -> None:
        results[i] = jobs[i]()

    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]


# --- 1. validate ---------------------------------------------------------------------------


def validate_soak(models: Path, work: Path, counts: dict[float, int]) -> list[Run]:
    """``validate`` of micro_speech at each rate of ``counts`` (0: the clean link)."""
    tflite = models / f"{MODEL}.tflite"
    kernels = for_cpu(board_cpu(template_dir("stm32"), BOARD))
    emitted = emit(tflite, work / f"{MODEL}.tar", name="default", target=kernels)
    with mlf.open_mlf(emitted.path) as library:
        info = library.module(None)
    t = emitted.inputs[0]
    n = max(counts.values())
    rng = np.random.default_rng(SEED)
    xs = rng.integers(np.iinfo(t.dtype).min, np.iinfo(t.dtype).max, (n, *t.shape),
                      dtype=t.dtype, endpoint=True)
    _LOG.info("validate: TFLite Micro's outputs of %d samples...", n)
    model_bytes = tflite.read_bytes()
    want = np.stack([run_tflm(model_bytes, [x])[0] for x in xs])
    generate_project("stm32", emitted.path, work / "prj", {"board": BOARD}, build=True).close()

    def job(rate: float, samples: int, byte0: bool = False) -> Callable[[], Run]:
        def go() -> Run:
            run = Run("validate" + BYTE0 * byte0, rate, samples)
            counter = _Counter(samples)
            try:
                with GeneratedProject.from_directory(work / "prj") as project:
                    project.flash()
                    link, proxy = _proxied(project, rate, SEED + int(rate * 1e6) + byte0, byte0)
                    began = time.monotonic()  # the opening counts: faults may hit it
                    try:
                        with Session(link, timeout_sec=CEILING_SEC, retry=RetryPolicy()) as s:
                            report = validate(s, {info.inputs[0].name: xs[:samples]},
                                              module=info, number=0,
                                              progress=lambda label, total: counter.advance
                                              if label == "device" else None)
                    finally:
                        link.close()
                run.seconds = time.monotonic() - began
                run.stats = report.recovery or RecoveryStats()
                run.injected = proxy.counts.total if proxy is not None else 0
                got = report.outputs[0].reshape(want[:samples].shape)
                run.wrong = int(np.count_nonzero(
                    (got != want[:samples]).reshape(samples, -1).any(axis=1)))
            except ProjectAPIError as err:
                run.error = str(err).splitlines()[0]
            counter.tally(run)
            _LOG.info("validate at %g: %s", rate, _line(run))
            return run
        return go

    _LOG.info("validate: %s, side by side...", ", ".join(
        f"{c} samples at {r:g}" for r, c in counts.items()))
    return _side_by_side([job(rate, c) for rate, c in counts.items()]
                         + [job(rate, c, True) for rate, c in counts.items() if rate > 0])


# --- 2. mlperftiny ---------------------------------------------------------------------------


def mlperftiny_soak(models: Path, work: Path, rates: list[float], samples: int) -> list[Run]:
    """MLPerf Tiny accuracy mode of KWS at each of ``rates`` (0: the clean link), side by side;
    a run's scores are checked against the clean run's (and the clean run's against TFLite
    Micro's, dequantized as the firmware prints them, to 3 decimals)."""
    from project_api.tools import mlperftiny as mt

    tflite = models / f"{KWS}.tflite"
    kernels = for_cpu(board_cpu(template_dir("stm32"), BOARD))
    emitted = emit(tflite, work / f"{KWS}.tar", name="default", target=kernels)
    t, out = emitted.inputs[0], emitted.outputs[0]
    rng = np.random.default_rng(SEED + 2)
    xs = rng.integers(-128, 127, (samples, *t.shape), dtype=np.int8, endpoint=True)
    labels = rng.integers(0, int(np.prod(out.shape)), samples)
    _LOG.info("mlperftiny: TFLite Micro's outputs of %d samples...", samples)
    model_bytes = tflite.read_bytes()
    q = out.quantization or {}
    scale, zero = float(q["scale"][0]), int(q["zero_point"][0])
    want = np.stack([(run_tflm(model_bytes, [x])[0].astype(np.float64).reshape(-1) - zero)
                     * scale for x in xs])
    generate_project("stm32", emitted.path, work / "kws-prj",
                     {"board": BOARD, "project_type": "mlperftiny"}, build=True).close()
    data = [mt.Sample(f"s{i}", int(labels[i]), [xs[i].tobytes()]) for i in range(samples)]

    def job(rate: float, byte0: bool = False) -> Callable[[], Run]:
        def go() -> Run:
            run = Run("mlperftiny accuracy" + BYTE0 * byte0, rate, samples)
            counter = _Counter(samples)
            try:
                with GeneratedProject.from_directory(work / "kws-prj") as project:
                    project.flash()
                    link, proxy = _proxied(project, rate, SEED + 7 + int(rate * 1e6) + byte0,
                                           byte0)
                    began = time.monotonic()  # the start-up and set-up count
                    try:
                        device = mt.Device(link, timeout_sec=CEILING_SEC)
                        try:  # as the CLI: a garbled start-up is left to the run's set-up
                            device.start(3.0)
                        except mt.MlperfTinyError as err:
                            if not byte0 or isinstance(err, mt.LinkClosedError):
                                raise
                        report = mt.accuracy(device, data, retry=RetryPolicy(),
                                             progress=lambda k, total: counter.advance())
                        run.seconds = time.monotonic() - began
                    finally:
                        link.close()
                run.stats = report.recovery or RecoveryStats()
                run.injected = proxy.counts.total if proxy is not None else 0
                run.scores = {i: list(s) for i, s in zip(report.answered, report.scores,
                                                          strict=True)}
                if report.stopped or report.failed:
                    run.error = report.stopped or f"{len(report.failed)} samples given up"
            except ProjectAPIError as err:
                run.error = str(err).splitlines()[0]
            counter.tally(run)
            return run
        return go

    _LOG.info("mlperftiny: %d KWS samples at %s, side by side...", samples,
              ", ".join(f"{r:g}" for r in rates))
    runs = _side_by_side([job(rate) for rate in rates]
                         + [job(rate, True) for rate in rates if rate > 0])
    clean = runs[0]
    for i, s in clean.scores.items():  # the clean run against TFLite Micro
        if not np.allclose(s, want[i], atol=5e-4 + 1e-9, rtol=0):
            clean.wrong += 1
    for run in runs[1:]:  # the others against the clean run, digit for digit
        run.wrong = sum(1 for i, s in run.scores.items() if clean.scores.get(i) != s)
    for run in runs:
        _LOG.info("mlperftiny at %g: %s", run.rate, _line(run))
    return runs


# --- 3. validate --places --------------------------------------------------------------------


def farm_soak(models: Path, work: Path, samples: int) -> list[Run]:
    """Three places, healthy, then with one board killed and one stopped for 5 s."""
    from farm_support import Farm

    from project_api.tools.farm import validate_on_places

    tflite = models / f"{MODEL}.tflite"
    kernels = for_cpu(board_cpu(template_dir("stm32"), BOARD))
    emitted = emit(tflite, work / "farm.tar", name="default", target=kernels)
    generate_project("stm32", emitted.path, work / "farm-prj", {"board": BOARD},
                     build=True).close()
    t = emitted.inputs[0]
    rng = np.random.default_rng(SEED + 1)
    xs = rng.integers(np.iinfo(t.dtype).min, np.iinfo(t.dtype).max, (samples, *t.shape),
                      dtype=t.dtype, endpoint=True)
    runs = []
    with Farm(work / "farm", work / "farm-prj" / "build" / "firmware.elf", boards=3,
              rfc2217=False, prefix="soak") as farm:
        validate_on_places(work / "farm-prj", {t.name: xs[:12]}, "soak-*",
                           coordinator=farm.coordinator)  # warm-up: every board ran the model
        for faulty in (False, True):
            run = Run("validate --places" + (" (1 killed, 1 stopped 5 s)" if faulty else ""),
                      0.0, samples)
            counter = _Counter(samples)
            stopped: list[int] = []

            def hurt(done: int, faulty: bool = faulty, stopped: list[int] = stopped) -> None:
                if not faulty or stopped or done < samples // 3:
                    return
                stopped.append(farm.qemus[2].pid)
                os.kill(stopped[0], signal.SIGSTOP)
                threading.Timer(STOP_SEC, os.kill, (stopped[0], signal.SIGCONT)).start()
                farm.kill_board(1)

            counter.on_count = hurt
            try:
                report = validate_on_places(
                    work / "farm-prj", {t.name: xs}, "soak-*", coordinator=farm.coordinator,
                    tflite=tflite, litert=False, chunk_samples=8, retry=RetryPolicy(),
                    progress=lambda label, total, c=counter: c.advance
                    if label == "device" else None)
                run.seconds = report.seconds
                run.stats = report.validation.recovery or RecoveryStats()
                (tflm,) = report.validation.comparison("tflm").outputs
                run.wrong = int(round((1.0 - tflm.exact) * tflm.samples))
                places = ", ".join(f"{p.name} {p.status} {p.samples}" for p in report.places)
                _LOG.info("farm%s: %s (%s)", " with faults" if faulty else "", _line(run),
                          places)
            except ProjectAPIError as err:
                run.error = str(err).splitlines()[0]
            counter.tally(run)
            runs.append(run)
        farm.close()
        farm.assert_stopped()
    return runs


# --- the table -------------------------------------------------------------------------------


def _line(run: Run) -> str:
    s = run.stats
    return (f"{run.sps:.1f} samples/s, {s.fault_count} faults, {s.retries} retries, "
            f"{s.resumed} resumed, {s.recovery_seconds:.2f} s recovering, {run.lost} lost, "
            f"{run.twice} twice, {run.wrong} wrong" + (f" ({run.error})" if run.error else ""))


def table(title: str, runs: list[Run]) -> list[str]:
    """The runs of one soak, the clean one (rate 0, first) as the baseline of the others."""
    clean = runs[0]
    header = ("run", "samples", "samples/s", "clean/s", "overhead", "injected", "faults",
              "s/fault", "retries", "resumed", "recovering s", "links reopened", "lost",
              "twice", "wrong")
    rows = [header]
    for r in runs:
        overhead = clean.sps / r.sps if r.sps else float("inf")
        # Wall time per link fault: what the run took beyond the clean rate, per fault seen.
        extra = r.seconds - (r.samples / clean.sps if clean.sps else r.seconds)
        per_fault = f"{extra / r.stats.fault_count:.3f}" if r.stats.fault_count else "-"
        rows.append((r.what if r.rate == 0 else f"{r.what} at {r.rate:g}", str(r.samples),
                     f"{r.sps:.1f}", f"{clean.sps:.1f}", f"{overhead:.2f}x", str(r.injected),
                     str(r.stats.fault_count), per_fault, str(r.stats.retries),
                     str(r.stats.resumed),
                     f"{r.stats.recovery_seconds:.2f}", str(r.stats.restarts), str(r.lost),
                     str(r.twice), str(r.wrong)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    out = ["", title]
    out += ["  ".join(cell.rjust(w) if i else cell.ljust(w)
                      for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
            for row in rows]
    for r in runs:
        if r.error:
            out.append(f"{r.what} at {r.rate:g}: the run ended early: {r.error}")
    return out


def _counts(args: argparse.Namespace) -> dict[float, int]:
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    counts = {0.0: args.samples, **dict.fromkeys(rates, args.samples)}
    for item in args.samples_at:
        rate, _, n = item.partition("=")
        if float(rate) not in counts or not n.isdigit():
            raise SystemExit(f"--samples-at {item}: give RATE=N for a rate of --rates (or 0, "
                             "the clean link)")
        counts[float(rate)] = int(n)
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--samples", type=int, default=10_000,
                        help="validate samples per run (default 10000)")
    parser.add_argument("--rates", default="1e-4,1e-3",
                        help="byte-error rates, comma-separated (default 1e-4,1e-3)")
    parser.add_argument("--samples-at", action="append", default=[], metavar="RATE=N",
                        help="validate samples at RATE (0: the clean link) instead of --samples "
                             "(repeatable)")
    parser.add_argument("--kws-samples", type=int, default=1000,
                        help="MLPerf Tiny accuracy samples per run (default 1000)")
    parser.add_argument("--farm-samples", type=int, default=600,
                        help="validate --places samples per run (default 600)")
    parser.add_argument("--parts", default="validate,mlperftiny,farm",
                        help="which soaks (default all: validate,mlperftiny,farm)")
    parser.add_argument("--models-dir", type=Path,
                        default=Path(os.environ.get("PROJECT_API_SHARED", REPO.parent / "shared"))
                        / "models")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    logging.getLogger("project_api").setLevel(logging.ERROR)
    for tool in ("arm-none-eabi-gcc", "qemu-system-arm", "make"):
        if shutil.which(tool) is None:
            _LOG.error("skip bench/faults.py: %s is not installed", tool)
            return 1 if os.environ.get("CI") else 0
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    counts = _counts(args)
    out: list[str] = []
    work = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    runs: list[Run] = []
    began = time.monotonic()
    try:
        if "validate" in parts:
            soak = validate_soak(args.models_dir, work, counts)
            runs += soak
            out += table(f"validate {MODEL}, QEMU netduinoplus2 UART through the fault proxy "
                         f"(seed {SEED}), runs side by side", soak)
        if "mlperftiny" in parts:
            rates = [r for r in counts if r > 0]
            soak = mlperftiny_soak(args.models_dir, work, [0.0, *rates], args.kws_samples)
            runs += soak
            out += table(f"mlperftiny accuracy {KWS}, QEMU netduinoplus2 UART through the fault "
                         f"proxy (seed {SEED}), runs side by side", soak)
        if "farm" in parts:
            soak = farm_soak(args.models_dir, work, args.farm_samples)
            runs += soak
            out += table(f"validate --places {MODEL}, 3 QEMU boards over labgrid (raw TCP)",
                         soak)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for line in out:
        _LOG.info("%s", line)
    _LOG.info("")
    _LOG.info("(%d s in all; sized by --samples %d --kws-samples %d, see the module doc)",
              time.monotonic() - began, args.samples, args.kws_samples)
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())

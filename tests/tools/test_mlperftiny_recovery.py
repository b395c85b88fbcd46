"""Recovery from link faults in ``project-api mlperftiny`` (issue 21), against the real firmware
(the host template's mlperftiny project, built with ASan+UBSan so that noise the device parses
cannot corrupt its memory unseen) through the seeded line-fault injector ``fault_proxy.py``.

What is checked against the world, not against our own reading: accuracy-mode scores equal
TensorFlow Lite Micro's on the same inputs (and the clean run's) with every sample answered
once; performance windows equal windows the device really ran, read from its bytes *below* the
fault injector; the firmware's own answer to a command it lacks; the commands on the wire (a
:class:`helpers.mlperftiny_transcript.Transcript` of the Device log)."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import require_tool
from fault_proxy import Direction, FaultProxy, KillAfter
from helpers.mlperftiny_transcript import Transcript
from mlf_kernels import device_pids

from project_api import cli
from project_api.api.project import GeneratedProject, generate_project
from project_api.api.transport import Transport, WrappedTransport
from project_api.emit import emit
from project_api.micro.recovery import DEFAULT_RETRIES, RetryPolicy
from project_api.tools import mlperftiny as mt
from project_api.tools.references import tflm_outputs

#: Samples of the long accuracy runs.
SAMPLES = 300
STAMP = r"\d{6}\.\d{3} ulp-mlperf: "


# ---- fixtures ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kws(models_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    tflite = models_dir / "kws_ref_model_int8.tflite"
    return tflite, emit(tflite, tmp_path_factory.mktemp("kws") / "kws.tar")


def _build(mlf, directory: Path, **options) -> Path:
    require_tool("cc")
    require_tool("make")
    generate_project("host", mlf.path, directory,
                     {"project_type": "mlperftiny", "warning_as_error": True, "sanitize": True,
                      **options}, build=True).close()
    return directory


@pytest.fixture(scope="module")
def host_kws(kws, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(kws[1], tmp_path_factory.mktemp("host") / "kws")


@pytest.fixture(scope="module")
def host_kws_no_crc(kws, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same firmware without project-api's 'db crc', as the reference has none."""
    return _build(kws[1], tmp_path_factory.mktemp("host_no_crc") / "kws",
                  compile_definitions="-DTVM_CRT_MLPERFTINY_NO_DB_CRC")


@pytest.fixture(scope="module")
def data(kws) -> tuple[np.ndarray, list[list[float]], list[int]]:
    """:data:`SAMPLES` KWS inputs, TFLite Micro's dequantized scores for them (as the firmware
    prints them, %0.3f) and labels (half TFLite Micro's class, half another)."""
    tflite, mlf = kws
    rng = np.random.default_rng(2101)
    xs = rng.integers(-128, 128, (SAMPLES, *mlf.inputs[0].shape), dtype=np.int8)
    (out,) = tflm_outputs(tflite.read_bytes(), [xs])
    q = mlf.outputs[0].quantization
    scale, zero = np.float32(q["scale"][0]), int(q["zero_point"][0])
    scores = [[float(f"{float(v):.3f}") for v in
               (scale * (o.reshape(-1).astype(np.int32) - zero).astype(np.float32))]
              for o in out]
    labels = [int(np.argmax(s)) if i % 2 == 0 else (int(np.argmax(s)) + 1) % 12
              for i, s in enumerate(scores)]
    return xs, scores, labels


def _samples(xs: np.ndarray, labels: list[int], n: int) -> list[mt.Sample]:
    return [mt.Sample(f"sample {i}", labels[i], [xs[i].tobytes()]) for i in range(n)]


class _Tap(WrappedTransport):
    """Keeps every byte the device sent, before any fault is injected above it."""

    def __init__(self, child: Transport) -> None:
        super().__init__(child)
        self.received = bytearray()

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        data = self.child.read(n, timeout_sec)
        self.received += data
        return data

    def windows(self) -> set[tuple[int, int]]:
        """(N, lap difference) of every ``infer N W`` the device ran, from its own bytes."""
        lines = bytes(self.received).decode("ascii").split("\r\n")
        found = set()
        for i, line in enumerate(lines[:-2]):
            m = re.fullmatch(r"m-infer-start-(\d+)", line)
            laps = [re.fullmatch(r"m-lap-us-(\d+)", lines[i + k]) for k in (1, 2)]
            if m and all(laps):  # (a window cut by the device's restart has no second lap)
                found.add((int(m.group(1)), int(laps[1].group(1)) - int(laps[0].group(1))))
        return found


def _open(project: GeneratedProject, rate: float = 0.0, seed: int = 0,
          wrap=None, log: Transcript | None = None,
          timeout: float = 20.0) -> tuple[mt.Device, Transport, _Tap]:
    """A started Device over the project's link: [wrap] over a FaultProxy (when ``rate``) over
    a :class:`_Tap`. Faults start after the device's start-up lines."""
    tap = _Tap(project.transport())
    transport: Transport = tap
    proxy = None
    if rate:
        transport = proxy = FaultProxy(tap, rate, seed)
        proxy.enabled = False
    if wrap is not None:
        transport = wrap(transport)
    transport.open()
    device = mt.Device(transport, timeout_sec=timeout, log=log)
    device.start()
    if proxy is not None:
        proxy.enabled = True
    return device, transport, tap


def _proxy(transport: Transport) -> FaultProxy:
    while not isinstance(transport, FaultProxy):
        transport = transport.child  # type: ignore[attr-defined]
    return transport


@pytest.fixture(scope="module")
def clean_run(host_kws: Path, data) -> mt.AccuracyReport:
    xs, _, labels = data
    with GeneratedProject.from_directory(host_kws) as project:
        device, transport, _ = _open(project)
        try:
            return mt.accuracy(device, _samples(xs, labels, SAMPLES))
        finally:
            transport.close()


# ---- accuracy ----------------------------------------------------------------------------

def test_clean_run_equals_tflite_micro_and_counts_no_fault(clean_run, data) -> None:
    _, scores, labels = data
    assert clean_run.scores == scores and clean_run.answered == list(range(SAMPLES))
    # No load refused (the firmware's CRC-32 is zlib's on every input), no results disagreeing;
    # a host stalled past a quick wait may show a timeout or a late reply, nothing else.
    assert clean_run.recovery is not None
    assert set(clean_run.recovery.faults) <= {"timeout", "late reply"}
    top1, auc = mt.scores_metrics("kws01", labels, scores)
    assert clean_run.top1 == top1 and clean_run.auc == auc and 0 < top1 < 1


@pytest.mark.parametrize("rate,seed", [(1e-4, 41), (1e-3, 42)])
def test_accuracy_through_a_noisy_link_answers_every_sample_right(
        host_kws: Path, data, clean_run, rate: float, seed: int) -> None:
    """300 KWS samples through bit flips, dropped bytes and noise bursts both ways: every
    sample answered once, its scores equal to TFLite Micro's and the clean run's, every fault
    counted. At 1e-3 the loads the CRC refused and the results two answers disagreed on are
    wrong results a run without the checks would have reported."""
    xs, scores, labels = data
    log = Transcript()
    with GeneratedProject.from_directory(host_kws) as project:
        device, transport, _ = _open(project, rate, seed, log=log)
        try:
            report = mt.accuracy(device, _samples(xs, labels, SAMPLES))
        finally:
            transport.close()
    proxy = _proxy(transport)
    assert report.ok and report.samples == SAMPLES and report.answered == list(range(SAMPLES))
    assert report.scores == scores == clean_run.scores
    assert (report.top1, report.auc) == (clean_run.top1, clean_run.auc)
    stats = report.recovery
    assert stats is not None and not stats.failed_samples
    assert proxy.counts.in_direction(Direction.TO_DEVICE) > 0
    assert proxy.counts.in_direction(Direction.FROM_DEVICE) > 0
    assert stats.fault_count > 0 and stats.retries == stats.fault_count
    assert stats.retried_samples and len(stats.retried_samples) <= stats.fault_count
    # one infer per sample, plus one per fault at most (a fault may cost the sample's infer)
    assert SAMPLES <= log.count("infer 1 0") <= SAMPLES + stats.fault_count
    if rate == 1e-3:
        assert stats.faults["load mismatch"] > 0 and stats.faults["results differ"] > 0
        assert report.resumed_loads > 0


def test_no_retry_is_the_old_behaviour(host_kws: Path, data) -> None:
    """``RetryPolicy.disabled()`` (``--no-retry``): the EnergyRunner's commands only (no
    'db crc', no second 'results', no sync), and the first fault that shows ends the run."""
    xs, _, labels = data
    log = Transcript()
    with GeneratedProject.from_directory(host_kws) as project:
        device, transport, _ = _open(project, log=log)
        try:
            mt.accuracy(device, _samples(xs, labels, 2), retry=RetryPolicy.disabled())
        finally:
            transport.close()
    chunks = -(-xs[0].size // mt.DB_CHUNK_BYTES)
    per_sample = ["db load 490"] + ["db HEX"] * chunks + ["infer 1 0"]
    assert log.commands() == ["profile"] + per_sample * 2
    log = Transcript()
    with GeneratedProject.from_directory(host_kws) as project:
        device, transport, _ = _open(project, 1e-3, 42, log=log, timeout=2.0)
        try:
            with pytest.raises(mt.MlperfTinyError):
                mt.accuracy(device, _samples(xs, labels, SAMPLES), retry=RetryPolicy.disabled())
        finally:
            transport.close()
    assert not {"db crc", "results"} & set(log.commands())
    assert not any(c.startswith("sync") for c in log.commands())


def test_a_sample_that_never_succeeds_is_named_and_the_report_written(
        host_kws: Path, data, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """One sample's input is damaged on every load (a hex digit changed to another): the CRC
    refuses it every time, the sample is given up after --retries faults without progress and
    named; the other samples are answered right, the report and results.txt are written, and
    the exit status is 1."""
    xs, scores, labels = data
    n, bad = 6, 3
    np.savez(tmp_path / "d.npz", x=xs[:n], y=np.array(labels[:n]))
    poison = xs[bad].tobytes()[:mt.DB_CHUNK_BYTES].hex()
    original = GeneratedProject.transport

    def transport(self: GeneratedProject, debug: bool = False) -> Transport:
        return _Corrupt(original(self, debug), poison)

    monkeypatch.setattr(GeneratedProject, "transport", transport)
    results = tmp_path / "results.txt"
    status = cli.main(["mlperftiny", str(host_kws), "--mode", "accuracy", "--data",
                       str(tmp_path / "d.npz"), "--retries", "2", "--json", "--results",
                       str(results)])
    out = json.loads(capsys.readouterr().out)
    assert status == 1 and out["ok"] is False
    assert out["samples"] == n - 1 and out["samples_requested"] == n
    assert [(f["index"], f["name"]) for f in out["samples_failed"]] == [(bad, f"sample {bad}")]
    assert "3 faults in a row without progress (--retries 2)" in out["samples_failed"][0]["reason"]
    assert out["recovery"]["faults_by_kind"]["load mismatch"] == 3
    assert out["recovery"]["samples_failed"] == {str(bad): out["samples_failed"][0]["reason"]}
    kept = [i for i in range(n) if i != bad]
    want_top1, want_auc = mt.scores_metrics("kws01", [labels[i] for i in kept],
                                            [scores[i] for i in kept])
    assert out["top1"] == want_top1 and out["auc"] == pytest.approx(want_auc, abs=1e-12)
    text = results.read_text().splitlines()
    assert re.fullmatch(STAMP + rf"Top-1: {100 * want_top1:.1f}%", text[0])
    notes = [line for line in text if "Link faults" in line or "FAILED" in line]
    assert len(notes) == 2 and text[-2:] == notes
    assert re.fullmatch(STAMP + r"Link faults: \d+ \((.*, )?3 load mismatch(, .*)?\); retries: "
                                r"\d+; samples retried: \d+; time recovering: \d+\.\d{3} sec\.",
                        notes[0])
    assert re.fullmatch(STAMP + rf"FAILED sample sample {bad} \(#{bad}\), left out of the "
                                r"figures: 3 faults in a row without progress .*", notes[1])
    # the human table says the same
    status = cli.main(["mlperftiny", str(host_kws), "--mode", "accuracy", "--data",
                       str(tmp_path / "d.npz"), "--retries", "2", "-q"])
    table = capsys.readouterr().out
    assert status == 1
    assert f"model kws01: {n - 1} samples" in table and f"({n} asked for)" in table
    assert re.search(r"link: \d+ link faults \((.*, )?3 load mismatch", table)
    assert f"FAILED sample sample {bad} (#{bad}): 3 faults in a row" in table


class _Corrupt(WrappedTransport):
    """Changes one hex digit of every ``db`` command that carries ``chunk``."""

    def __init__(self, child: Transport, chunk: str) -> None:
        super().__init__(child)
        self.chunk = chunk.encode()

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        if self.chunk in data:
            at = data.index(self.chunk) + 5
            data = data[:at] + (b"1" if data[at:at + 1] != b"1" else b"2") + data[at + 1:]
        self.child.write(data, timeout_sec)


class _OnceAt(WrappedTransport):
    """Hits the ``nth`` write once: ``drop_terminator`` sends it without its '%' (the device
    waits for the rest of the command), else its reply's 'm-ready' comes as ``damaged``."""

    def __init__(self, child: Transport, nth: int, drop_terminator: bool,
                 damaged: bytes = b"m-redy") -> None:
        super().__init__(child)
        self.nth, self.drop_terminator, self.damaged = nth, drop_terminator, damaged
        self.writes = 0
        self.damage_reply = False

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        self.writes += 1
        if self.writes == self.nth:
            if self.drop_terminator:
                data = data.rstrip(b"%")
            else:
                self.damage_reply = True
        self.child.write(data, timeout_sec)

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        data = self.child.read(n, timeout_sec)
        if self.damage_reply and b"m-ready" in data:
            self.damage_reply = False
            data = data.replace(b"m-ready", self.damaged, 1)
        return data


@pytest.mark.parametrize("drop_terminator", [True, False], ids=["lost-percent", "lost-reply"])
def test_a_load_cut_by_a_fault_resumes_where_the_device_stands(
        host_kws: Path, data, drop_terminator: bool) -> None:
    """The 10th 'db' command of sample 1 is hit: its '%' lost (the device never took the
    chunk: the next sync spoils it) or its reply damaged (the device took it). After the
    resync 'db crc' shows 9 or 10 chunks intact and the load goes on from there: one
    'db load' per sample, the next chunk sent is the one at that offset, the scores right."""
    xs, scores, labels = data
    n = 3
    log = Transcript()
    # writes: the sync, profile, db crc (set-up), then per sample: db load, 16 chunks, db crc,
    # infer, results
    chunk = 10
    nth = 3 + 20 + 1 + chunk
    with GeneratedProject.from_directory(host_kws) as project:
        device, transport, _ = _open(project, log=log,
                                     wrap=lambda t: _OnceAt(t, nth, drop_terminator))
        try:
            report = mt.accuracy(device, _samples(xs, labels, n))
        finally:
            transport.close()
    assert report.scores == scores[:n] and report.resumed_loads >= 1
    assert log.count("db load") == n
    stats = report.recovery
    assert stats is not None and 1 in stats.retried_samples
    assert stats.faults["timeout" if drop_terminator else "garbled reply"] == 1
    sent = log.sent
    data1 = xs[1].tobytes()
    hit = sent.index("db " + data1[(chunk - 1) * 32:chunk * 32].hex() + "%")
    after = [c for c in sent[hit + 1:] if not c.startswith("sync")]
    resumed = chunk - 1 if drop_terminator else chunk
    assert after[0] == "db crc%"
    assert after[1] == "db " + data1[resumed * 32:(resumed + 1) * 32].hex() + "%"


def test_a_lost_reply_is_noticed_in_about_the_command_time(
        host_kws: Path, data, caplog: pytest.LogCaptureFixture) -> None:
    """Once the link was measured, a reply that never comes (the '%' of a 'db' command lost)
    is given up after a wait sized from the measured replies, far below the 20 s per-reply
    ceiling."""
    xs, scores, labels = data
    nth = 3 + 20 * 4 + 1 + 4  # sample 4's 4th chunk
    caplog.set_level(logging.INFO, logger="project_api.tools.mlperftiny")
    with GeneratedProject.from_directory(host_kws) as project:
        device, transport, _ = _open(project, wrap=lambda t: _OnceAt(t, nth, True))
        try:
            report = mt.accuracy(device, _samples(xs, labels, 6))
        finally:
            transport.close()
    assert report.scores == scores[:6]
    (message,) = [r.getMessage() for r in caplog.records if ": timeout (" in r.getMessage()]
    limit = float(re.search(r"within ([\d.e-]+) s \(a wait sized", message).group(1))
    assert limit <= device.timeout_sec / 10, message


def test_the_db_print_fallback_on_a_firmware_without_db_crc(host_kws_no_crc: Path,
                                                           data) -> None:
    """A firmware without 'db crc' answers it as the reference does ('crc' read as hex digits
    of an odd count); the runner then checks every load with 'db print' and, through a noisy
    link, still answers every sample right."""
    xs, scores, labels = data
    n = 40
    with GeneratedProject.from_directory(host_kws_no_crc) as project:
        device, transport, _ = _open(project)
        try:
            device.command("db load 4")
            with pytest.raises(mt.DeviceError, match=r"Insufficent number of hex digits"):
                device.command("db crc")
        finally:
            transport.close()
        log = Transcript()
        device, transport, _ = _open(project, 1e-3, 7, log=log)
        try:
            report = mt.accuracy(device, _samples(xs, labels, n))
        finally:
            transport.close()
    assert report.ok and report.scores == scores[:n]
    assert not any(line.startswith("m-db-crc-") for line in log.received)
    assert log.count("db print") >= n and report.resumed_loads == 0
    assert report.recovery is not None and report.recovery.fault_count > 0


def test_device_killed_mid_run_reopens_the_link_and_completes(host_kws: Path, data) -> None:
    """The device process is SIGKILLed mid-run: the link is reopened through the template's
    open_transport (a new device process), the sample it cut starts again, and every sample
    is answered right."""
    xs, scores, labels = data
    n = 12
    binary = host_kws / "build" / "main"
    with GeneratedProject.from_directory(host_kws) as project:
        device, transport, _ = _open(
            project, wrap=lambda t: KillAfter(t, lambda: device_pids(binary), 100))
        try:
            report = mt.accuracy(device, _samples(xs, labels, n))
        finally:
            transport.close()
        killer = transport
    assert killer.killed and report.ok and report.scores == scores[:n]
    stats = report.recovery
    assert stats is not None and stats.restarts >= 1
    assert stats.faults["link closed"] + stats.faults["timeout"] >= 1
    assert not device_pids(binary)


@pytest.fixture(scope="module")
def stateful(tmp_path_factory: pytest.TempPathFactory):
    """A streaming model (y = 0.5 * state + x; the state a resource variable) on the host
    template, 60 inputs, and TFLite Micro's scores from a fresh interpreter per sample and from
    one interpreter over them all."""
    from helpers.state_models import accumulate, mlperftiny_scores, model, streams

    from project_api.emit.reference import run_tflm_sequence

    root = tmp_path_factory.mktemp("stateful")
    model_bytes = model(accumulate(True), "int8", (2, 3))
    tar = emit(model_bytes, root / "m.tar", name="default")
    prj = _build(tar, root / "prj", mlperftiny_model="kws01")
    runs = streams(model_bytes, 60, 3)
    fresh = mlperftiny_scores(model_bytes, [run_tflm_sequence(model_bytes, [r])[0][0]
                                            for r in runs])
    carried = mlperftiny_scores(model_bytes, [o[0] for o in run_tflm_sequence(model_bytes, runs)])
    assert fresh != carried
    samples = [mt.Sample(f"step {i}", 0, [np.ascontiguousarray(r[0]).tobytes()])
               for i, r in enumerate(runs)]
    return prj, mt.model_facts(prj).state_size_bytes, samples, fresh, carried


def test_a_stateful_model_starts_a_faulted_sample_again_from_its_reset(stateful) -> None:
    """A model that keeps state, reset before every sample, through a noisy link: a fault once
    the sample's 'infer' was sent starts the sample again from 'reset', so every score equals
    TFLite Micro's from a fresh interpreter."""
    prj, state_bytes, samples, fresh, _ = stateful
    log = Transcript()
    with GeneratedProject.from_directory(prj) as project:
        device, transport, _ = _open(project, 1e-3, 9, log=log)
        try:
            report = mt.accuracy(device, samples, state_size_bytes=state_bytes)
        finally:
            transport.close()
    assert report.ok and report.scores == fresh
    assert report.recovery is not None and report.recovery.fault_count > 0
    assert log.count("reset") > len(samples)  # some samples were started again


def test_carried_state_stops_the_run_at_a_fault_it_cannot_undo(stateful) -> None:
    """The same model with its state carried (--no-reset) through a very noisy link (1e-2:
    its commands are short, and the run stops at the first fault it cannot undo): the samples
    before the first fault that hit an 'infer' equal one TFLite Micro interpreter over the
    stream; that sample is named and the run stops, since nobody knows whether the state took
    it."""
    prj, state_bytes, samples, _, carried = stateful
    with GeneratedProject.from_directory(prj) as project:
        device, transport, _ = _open(project, 1e-2, 9)
        try:
            device.reset()
        except mt.MlperfTinyError:
            pass  # the link is noisy already; the run's set-up brings it in step
        try:
            report = mt.accuracy(device, samples, state_size_bytes=state_bytes,
                                 reset_state=False)
        finally:
            transport.close()
    k = len(report.scores)
    assert report.scores == carried[:k] and report.answered == list(range(k))
    assert report.stopped is not None and "--no-reset" in report.stopped and k < len(samples)
    assert [f.index for f in report.failed] == [k]


# ---- performance -------------------------------------------------------------------------

@pytest.mark.parametrize("rate,seed", [(1e-4, 5), (1e-3, 77)])
def test_performance_through_a_noisy_link_reports_windows_the_device_ran(
        host_kws: Path, data, rate: float, seed: int) -> None:
    """Performance mode completes through faults, and every window it reports is one the
    device ran, laps and all, as read from the device's own bytes below the fault injector."""
    xs, _, labels = data
    with GeneratedProject.from_directory(host_kws) as project:
        device, transport, tap = _open(project, rate, seed)
        try:
            report = mt.performance(device, _samples(xs, labels, 5), windows=5, warmups=2,
                                    min_window_seconds=0.2)
        finally:
            transport.close()
    assert report.ok and len(report.windows) == 5
    ran = tap.windows()
    for w in report.windows:
        assert (w.iterations, w.elapsed_us) in ran and w.seconds >= 0.2
    assert report.recovery is not None
    assert report.recovery.fault_count > 0 or _proxy(transport).counts.total == 0
    if rate == 1e-3:
        assert report.recovery.fault_count > 0


class _ShiftLap(WrappedTransport):
    """Moves the closing lap of the device's first window (an 'infer N W' with N > 1) by
    ``share`` of the window's time, keeping its digit count: a damaged high digit."""

    def __init__(self, child: Transport, share: float) -> None:
        super().__init__(child)
        self.share = share
        self.pending = b""
        self.recent: list[bytes] = []  # the last lines handed on, across reads
        self.shifted = False

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        data = self.pending + self.child.read(n, timeout_sec)
        if b"\n" not in data:  # whole lines only
            self.pending = data
            return b""
        cut = data.rindex(b"\n") + 1
        data, self.pending = data[:cut], data[cut:]
        lines = data.split(b"\r\n")[:-1]
        for i, line in enumerate(lines):
            before = self.recent[-2:]
            if (not self.shifted and line.startswith(b"m-lap-us-") and len(before) == 2
                    and (m := re.fullmatch(rb"m-infer-start-(\d+)", before[0]))
                    and int(m.group(1)) > 1):
                elapsed = int(line[9:]) - int(before[1][9:])
                value = int(line[9:]) + round(self.share * elapsed)
                assert len(str(value)) == len(line) - 9
                lines[i] = b"m-lap-us-%d" % value
                self.shifted = True
            self.recent = [*self.recent[-2:], line]
        return b"".join(line + b"\r\n" for line in lines)


@pytest.mark.parametrize("share", [-0.6, 0.6], ids=["earlier", "later"])
def test_a_damaged_lap_digit_is_caught(host_kws: Path, data, share: float) -> None:
    """The first window's closing lap comes 60 % of the window earlier or later than the
    device wrote it (a flipped high digit; a change within the band of the link's turnarounds
    cannot be caught, see the module doc): the window is refused as implausible and run again,
    and the report holds what the device really measured."""
    xs, _, labels = data
    with GeneratedProject.from_directory(host_kws) as project:
        device, transport, tap = _open(project, wrap=lambda t: _ShiftLap(t, share))
        try:
            report = mt.performance(device, _samples(xs, labels, 2), windows=2, warmups=2,
                                    min_window_seconds=0.5)
        finally:
            transport.close()
    assert transport.shifted
    assert report.ok and report.recovery is not None
    # (a loaded host may add faults of its own: a window whose device time around the timed
    # runs grew by a scheduling stall is refused too, a late reply is waited for)
    assert report.recovery.faults["implausible laps"] >= 1
    ran = tap.windows()
    assert all((w.iterations, w.elapsed_us) in ran for w in report.windows)


# ---- the CLI -----------------------------------------------------------------------------

def test_cli_help_names_the_retry_defaults() -> None:
    out = subprocess.run([sys.executable, "-m", "project_api", "mlperftiny", "--help"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0
    text = " ".join(out.stdout.split())
    assert f"(default {DEFAULT_RETRIES};" in text and "--no-retry" in text
    assert RetryPolicy().describe() in text


def test_cli_no_retry_stops_at_the_first_fault(host_kws: Path, data, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """``--no-retry`` through a link that damages the first chunk's reply: exit 1 at once, the
    malformed line quoted; with recovery the same damage costs one retry."""
    xs, _, labels = data
    np.savez(tmp_path / "d.npz", x=xs[:2], y=np.array(labels[:2]))
    original = GeneratedProject.transport

    def transport(self: GeneratedProject, debug: bool = False) -> Transport:
        # the first 'db' chunk's reply: name, profile, db load before it (and with recovery the
        # sync and the question of db crc)
        return _OnceAt(original(self, debug), nth, False, b"m-re\x01dy")

    nth = 4

    monkeypatch.setattr(GeneratedProject, "transport", transport)
    args = ["mlperftiny", str(host_kws), "--mode", "accuracy", "--data", str(tmp_path / "d.npz"),
            "--json"]
    assert cli.main([*args, "--no-retry"]) == 1
    err = capsys.readouterr().err
    assert r"malformed reply to 'db " in err and r"'m-re\x01dy'" in err
    nth = 6
    assert cli.main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["samples"] == 2 and out["recovery"]["faults_by_kind"]["garbled reply"] == 1


@pytest.fixture(autouse=True)
def _no_leftover_devices(host_kws: Path) -> Iterator[None]:
    yield
    assert not device_pids(host_kws / "build" / "main"), "a device process was left running"

"""``project-api mlperftiny`` and :mod:`project_api.tools.mlperftiny` (#13): performance mode on QEMU
(icount makes device time deterministic), accuracy mode on small data sets made in code against
TensorFlow Lite Micro on the same data (KWS top-1, AD AUC), the results.txt layout, AUC, and the
errors: a silent device names the last command, a malformed line is quoted, an input of the
wrong size is refused before anything is sent, the device's e-[...] text is shown."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import require_tool

from project_api.api.project import GeneratedProject, generate_project
from project_api.api.transport import Transport, TransportTimeouts
from project_api.emit import emit
from project_api.errors import IoTimeoutError
from project_api.tools import mlperftiny as mt
from project_api.tools.references import tflm_outputs

STAMP = r"\d{6}\.\d{3} ulp-mlperf: "


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "project_api", "mlperftiny", *map(str, args)],
                          capture_output=True, text=True, timeout=900)


# ---- pure parts ----------------------------------------------------------------------------

def _auc_pairs(y: list[int], s: list[float]) -> float:
    pos = [v for v, t in zip(s, y, strict=True) if t]
    neg = [v for v, t in zip(s, y, strict=True) if not t]
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(pos, neg))
    return wins / (len(pos) * len(neg))


def test_roc_auc_matches_the_pairwise_definition() -> None:
    rng = np.random.default_rng(0)
    for n in (2, 5, 40):
        y = [0, 1] + rng.integers(0, 2, n).tolist()
        s = np.round(rng.normal(size=len(y)), 1).tolist()  # with ties
        assert mt.roc_auc(y, s) == pytest.approx(_auc_pairs(y, s), abs=1e-12)
    assert mt.roc_auc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    with pytest.raises(mt.MlperfTinyError, match="both classes"):
        mt.roc_auc([1, 1], [0.1, 0.2])


def test_results_text_is_laid_out_like_a_submission() -> None:
    perf = mt.PerformanceReport("kws01", [mt.Window("s0", 200, 10, 15_221_000),
                                          mt.Window("s1", 200, 10, 15_211_000)], 10.0)
    lines = mt.results_text(perf).splitlines()
    assert re.fullmatch(STAMP + "Performance results for window 1:", lines[0])
    assert lines[1].endswith("ulp-mlperf:   # Inferences :          200")
    assert lines[2].endswith("ulp-mlperf:   Runtime      :       15.221 sec.")
    assert lines[3].endswith("ulp-mlperf:   Throughput   :       13.140 inf./sec.")
    assert lines[4].endswith("ulp-mlperf: Runtime requirements have been met.")
    assert lines[-2].endswith(f"ulp-mlperf: Median throughput is {perf.median_throughput:.3f} "
                              "inf./sec.")
    acc = mt.AccuracyReport("kws01", 0.901, 0.99, 10)
    assert [line.split(": ", 1)[1] for line in mt.results_text(acc).splitlines()] == [
        "Top-1: 90.1%", "AUC: 0.99"]


class ScriptedTransport(Transport):
    """A device that answers each command from ``replies`` (bytes, or None: silence)."""

    def __init__(self, boot: bytes, replies: dict[str, bytes | None]):
        self.pending = bytearray(boot)
        self.replies = replies
        self.sent: list[bytes] = []

    def timeouts(self) -> TransportTimeouts:
        return TransportTimeouts(0, 1, 1)

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def read(self, n: int, timeout_sec: float | None) -> bytes:
        if not self.pending:
            raise IoTimeoutError()
        data = bytes(self.pending[:n])
        del self.pending[:n]
        return data

    def write(self, data: bytes, timeout_sec: float | None) -> None:
        self.sent.append(data)
        reply = self.replies.get(data.decode().rstrip("%").split(" ")[0], b"m-ready\r\n")
        if reply is not None:
            self.pending += reply


BOOT = b"m-timestamp-mode-performance\r\nm-lap-us-5\r\nm-init-done\r\nm-ready\r\n"


def test_a_silent_device_names_the_last_command() -> None:
    d = mt.Device(ScriptedTransport(BOOT, {"infer": None}), timeout_sec=0.2)
    d.start()
    with pytest.raises(mt.DeviceTimeoutError, match=r"stopped answering after 'infer 5 1'"):
        d.infer(5, 1, 0.3)


def test_a_malformed_line_is_quoted() -> None:
    d = mt.Device(ScriptedTransport(BOOT, {"name": b"m-name-dut-[x]\r\ngarbage\x01\r\nm-ready\r\n",
                                           "infer": b"m-warmup-start-0\r\nm-ready\r\n"}),
                  timeout_sec=0.2)
    d.start()
    with pytest.raises(mt.MalformedReplyError, match=r"'garbage\\x01'"):
        d.name()
    d = mt.Device(ScriptedTransport(BOOT, {"results": b"m-results-[0.1,zz]\r\nm-ready\r\n"}), 0.2)
    d.start()
    with pytest.raises(mt.MalformedReplyError, match=r"'m-results-\[0.1,zz\]'"):
        d.results()


def test_the_devices_error_text_is_shown() -> None:
    d = mt.Device(ScriptedTransport(BOOT, {"db": b"e-[Invalid hex digit 'zz']\r\nm-ready\r\n"}),
                  0.2)
    d.start()
    with pytest.raises(mt.DeviceError, match=r"refused 'db zz': Invalid hex digit 'zz'"):
        d.command("db zz")


def test_a_device_already_running_is_asked_its_name() -> None:
    t = ScriptedTransport(b"", {"name": b"m-name-dut-[x]\r\nm-ready\r\n"})
    d = mt.Device(t, timeout_sec=0.1)
    assert d.start() == []
    assert t.sent == [b"name%"]


def test_a_late_start_up_does_not_put_replies_out_of_step() -> None:
    """The start-up lines arrive only after our 'name': its m-ready is not taken for ours."""
    t = ScriptedTransport(b"", {"name": BOOT + b"m-name-dut-[x]\r\nm-ready\r\n",
                                "profile": b"m-profile-[p]\r\nm-model-[kws01]\r\nm-ready\r\n"})
    d = mt.Device(t, timeout_sec=0.1)
    assert d.start()[-1] == "m-init-done"
    assert d.profile()["model"] == "kws01"


def test_wrong_input_sizes_are_refused_before_sending(tmp_path: Path) -> None:
    facts = mt.ModelFacts((490, 1960), "input_1 int8 1x49x10x1 (490 bytes, or 1960 bytes of "
                                       "float32)")
    np.savez(tmp_path / "bad.npz", x=np.zeros((2, 491), np.int8), y=np.zeros(2))
    with pytest.raises(mt.MlperfTinyError, match=r"sample 0 has 491 bytes; the model's input is "
                                                 r"input_1 int8 .*refused before sending"):
        mt.load_dataset(tmp_path / "bad.npz", facts)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.bin").write_bytes(bytes(100))
    (tmp_path / "d" / "y_labels.csv").write_text("a.bin,12,3\n")
    with pytest.raises(mt.MlperfTinyError, match=r"a.bin has 100 bytes"):
        mt.load_dataset(tmp_path / "d", facts)
    # two inputs back to back are two windows
    np.savez(tmp_path / "two.npz", x=np.zeros((1, 2, 490), np.int8), y=np.zeros(1))
    assert len(mt.load_dataset(tmp_path / "two.npz", facts)[0].windows) == 2


# ---- on a device -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def models(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("mlperftiny_models")
    return {name: (models_dir / f"{file}.tflite",
                   emit(models_dir / f"{file}.tflite", root / f"{name}.tar"))
            for name, file in (("kws", "kws_ref_model_int8"), ("ad", "ad01_int8"))}


@pytest.fixture(scope="module")
def host_projects(models, tmp_path_factory) -> Iterator[dict[str, Path]]:
    require_tool("cc")
    require_tool("make")
    root = tmp_path_factory.mktemp("mlperftiny_host")
    dirs = {}
    for name, (_, mlf) in models.items():
        generate_project("host", mlf.path, root / name, {"project_type": "mlperftiny",
                                                         "warning_as_error": True},
                         build=True).close()
        dirs[name] = root / name
    yield dirs


def _fmt3(values: np.ndarray) -> list[float]:
    return [float(f"{float(v):.3f}") for v in values.astype(np.float32)]


def _tflm_kws_scores(tflite: Path, mlf, xs: np.ndarray) -> list[list[float]]:
    (out,) = tflm_outputs(tflite.read_bytes(), [xs])
    q = mlf.outputs[0].quantization
    scale, zero = np.float32(q["scale"][0]), int(q["zero_point"][0])
    return [_fmt3(scale * (o.reshape(-1).astype(np.int32) - zero).astype(np.float32))
            for o in out]


def _kws_folder(models: dict, tmp_path: Path, n: int, seed: int) -> tuple[Path, float, float]:
    """A small KWS data set made in code, as an EnergyRunner folder (.bin + y_labels.csv), and
    TFLite Micro's top-1 and AUC on it."""
    tflite, mlf = models["kws"]
    rng = np.random.default_rng(seed)
    xs = rng.integers(-128, 128, (n, *mlf.inputs[0].shape), dtype=np.int8)
    ref = _tflm_kws_scores(tflite, mlf, xs)
    # Half the labels are TFLite Micro's own answers, half random: top-1 is neither 0 nor 1.
    labels = [int(np.argmax(r)) if i % 2 == 0 else int(rng.integers(0, 12))
              for i, r in enumerate(ref)]
    data = tmp_path / "kws01"
    data.mkdir()
    rows = []
    for i, (x, y) in enumerate(zip(xs, labels, strict=True)):
        name = f"tst_{i:06d}_{y}.bin"
        (data / name).write_bytes(x.tobytes())
        rows.append(f"{name},12,{y}")
    (data / "y_labels.csv").write_text("\n".join(rows) + "\n")
    want_top1, want_auc = mt.scores_metrics("kws01", labels, ref)
    assert want_top1 is not None and 0 < want_top1 < 1 and want_auc is not None
    return data, want_top1, want_auc


def test_accuracy_kws_top1_equals_tflite_micro(host_projects, models, tmp_path: Path) -> None:
    """The device's top-1 and AUC on a KWS folder are TFLite Micro's on the same data."""
    data, want_top1, want_auc = _kws_folder(models, tmp_path, 16, seed=5)
    out = _cli(host_projects["kws"], "--mode", "accuracy", "--data", data, "--json",
               "--results", tmp_path / "results.txt")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["model"] == "kws01" and got["samples"] == 16
    assert got["top1"] == pytest.approx(want_top1, abs=0) and got["auc"] == pytest.approx(
        want_auc, abs=1e-12)
    text = (tmp_path / "results.txt").read_text().splitlines()
    assert re.fullmatch(STAMP + rf"Top-1: {100 * want_top1:.1f}%", text[0])
    assert re.fullmatch(STAMP + rf"AUC: {want_auc:.2f}", text[1])


def _c_quantize(x: np.ndarray, scale: np.float32, zero: int) -> np.ndarray:
    q = (x.astype(np.float32) / scale).astype(np.float32)
    r = np.trunc(np.where(q < 0, q - np.float32(0.5), q + np.float32(0.5))).astype(np.int64)
    return np.clip(r + zero, -128, 127).astype(np.int8)


def test_accuracy_ad_auc_equals_tflite_micro(host_projects, models, tmp_path: Path) -> None:
    """AD: float32 spectrogram files cut in windows (y_labels.csv width/stride, as the
    benchmark's ad01 set), each window's reconstruction error from the device, averaged per
    file; the AUC equals the one computed from TFLite Micro on the same windows."""
    tflite, mlf = models["ad"]
    t_in, t_out = mlf.inputs[0], mlf.outputs[0]
    n_in = int(np.prod(t_in.shape))
    frame = 128
    width, stride = n_in * 4, frame * 4
    rng = np.random.default_rng(3)
    files, labels = [], []
    for i in range(8):
        label = i % 2
        spread = 1.0 + 2.0 * label  # anomalies further from the training data
        files.append((rng.normal(0, spread, n_in + 2 * frame)).astype("<f4"))
        labels.append(label)
    data = tmp_path / "ad01"
    data.mkdir()
    rows = []
    for i, (f, y) in enumerate(zip(files, labels, strict=True)):
        name = f"{'anomaly' if y else 'normal'}_id_01_{i:08d}.bin"
        (data / name).write_bytes(f.tobytes())
        rows.append(f"{name},2,{y},{width},{stride}")
    (data / "y_labels.csv").write_text("\n".join(rows) + "\n")
    qi, qo = t_in.quantization, t_out.quantization
    si, zi = np.float32(qi["scale"][0]), int(qi["zero_point"][0])
    so, zo = np.float32(qo["scale"][0]), int(qo["zero_point"][0])
    scores = []
    for f in files:
        windows = [f[s:s + n_in] for s in range(0, len(f) - n_in + 1, frame)]
        assert len(windows) == 3
        (out,) = tflm_outputs(tflite.read_bytes(),
                              [np.stack([_c_quantize(w, si, zi).reshape(t_in.shape)
                                         for w in windows])])
        mses = []
        for w, o in zip(windows, out, strict=True):
            deq = (so * (o.reshape(-1).astype(np.int32) - zo).astype(np.float32))
            total = np.float32(0)
            for d in (deq - w).astype(np.float32):
                total = np.float32(total + d * d)
            mses.append(_fmt3(np.array([total / np.float32(n_in)]))[0])
        scores.append(float(np.mean(mses)))
    _, want_auc = mt.scores_metrics("ad01", labels, scores)
    out = _cli(host_projects["ad"], "--mode", "accuracy", "--data", data, "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["model"] == "ad01" and got["top1"] is None
    assert got["auc"] == pytest.approx(want_auc, abs=1e-12)


def test_cli_refuses_a_wrong_size_before_starting_the_device(host_projects,
                                                             tmp_path: Path) -> None:
    np.savez(tmp_path / "x.npz", x=np.zeros((1, 7), np.int8), y=np.zeros(1))
    out = _cli(host_projects["kws"], "--mode", "accuracy", "--data", tmp_path / "x.npz")
    assert out.returncode == 1
    assert "sample 0 has 7 bytes" in out.stderr and "refused before sending" in out.stderr


@pytest.fixture(scope="module")
def qemu_kws(models, tmp_path_factory) -> Iterator[GeneratedProject]:
    import stm32_support
    from stm32_support import build_project, qemu_pids

    for tool in ("make", "arm-none-eabi-gcc", "qemu-system-arm", "pgrep"):
        require_tool(tool)
    stm32_support._OURS[:] = [str(tmp_path_factory.getbasetemp())]  # our QEMUs only
    _, mlf = models["kws"]
    before = qemu_pids()
    project = build_project(mlf.path, tmp_path_factory.mktemp("mlperftiny_qemu") / "kws",
                            project_type="mlperftiny")
    try:
        project.flash()
        yield project
    finally:
        project.close()
    assert not qemu_pids() - before, "a qemu-system-arm process was left running"


def test_performance_on_qemu_is_deterministic(qemu_kws, models, tmp_path: Path) -> None:
    """On QEMU (-icount shift=0: 1 ns of device time per instruction) the windows of the same
    input last the same device time, and the CLI's median is the per-inference lap time."""
    _, mlf = models["kws"]
    x = np.random.default_rng(0).integers(-128, 128, (1, *mlf.inputs[0].shape), dtype=np.int8)
    np.savez(tmp_path / "x.npz", x=x, y=np.zeros(1, np.int64))
    reports = []
    for run in range(2):
        out = _cli(qemu_kws.directory, "--mode", "performance", "--data", tmp_path / "x.npz",
                   "--windows", "3", "--warmups", "2", "--min-window-seconds", "0.5", "--json",
                   "--results", tmp_path / f"results{run}.txt")
        assert out.returncode == 0, out.stderr
        reports.append(json.loads(out.stdout))
    for rep in reports:
        # 0.5 s windows: timed right, but no valid result under the benchmark's 10 s rule.
        assert rep["model"] == "kws01" and rep["runtime_requirements_met"] is False
        windows = rep["windows"]
        assert len(windows) == 3 and all(w["runtime_s"] >= 0.5 for w in windows)
        ms = [w["inference_ms"] for w in windows]
        assert max(ms) - min(ms) <= 1e-3 * min(ms), ms
        assert rep["median_throughput_inf_per_s"] == pytest.approx(
            1e3 / rep["median_inference_ms"], rel=1e-3)
    assert reports[0]["median_inference_ms"] == pytest.approx(reports[1]["median_inference_ms"],
                                                              rel=1e-3)
    # One inference timed by the device's laps alone agrees with the windows' median.
    t = qemu_kws.transport()
    t.open()
    try:
        d = mt.Device(t)
        d.start()
        d.load(x.tobytes())
        one = d.infer(20, 0, 120.0)
    finally:
        t.close()
    assert one.elapsed_us / 20 / 1e3 == pytest.approx(reports[0]["median_inference_ms"], rel=2e-3)
    text = (tmp_path / "results0.txt").read_text().splitlines()
    assert len(text) == 3 * 5 + 3 + 1  # the windows, the median, recovery's note
    assert text[4].endswith("Runtime requirements have NOT been met (< 10 sec., the benchmark's "
                            "rule).")
    assert re.fullmatch(STAMP + r"Median throughput is \d+\.\d{3} inf\./sec\.", text[-3])
    assert re.fullmatch(STAMP + r"Link faults: 0; retries: 0; windows retried: 0; time "
                                r"recovering: 0\.000 sec\.", text[-1])


def test_performance_on_qemu_with_the_benchmarks_10_second_rule(qemu_kws, models,
                                                                tmp_path: Path) -> None:
    """The CLI's default window (>= 10 s of device time, the benchmark's rule), once: QEMU's
    icount runs KWS faster than real time, so one window costs a few seconds here."""
    _, mlf = models["kws"]
    x = np.random.default_rng(1).integers(-128, 128, (1, *mlf.inputs[0].shape), dtype=np.int8)
    np.savez(tmp_path / "x.npz", x=x, y=np.zeros(1, np.int64))
    out = _cli(qemu_kws.directory, "--mode", "performance", "--data", tmp_path / "x.npz",
               "--windows", "1", "--results", tmp_path / "results.txt")
    assert out.returncode == 0, out.stderr
    text = (tmp_path / "results.txt").read_text().splitlines()
    runtime = float(re.search(r"Runtime      :\s+([\d.]+) sec\.", text[2]).group(1))
    assert 10.0 <= runtime < 12.0
    assert text[4].endswith("ulp-mlperf: Runtime requirements have been met.")
    assert "median throughput" in out.stdout and ">= 10 s of device time" in out.stdout


def test_accuracy_on_qemu_through_a_noisy_uart_equals_tflite_micro(qemu_kws, models) -> None:
    """The one QEMU run of recovery (issue 21; the rest is on the host template,
    tests/tools/test_mlperftiny_recovery.py): 30 KWS samples through QEMU's UART with a 1e-3
    byte-error rate both ways; every sample answered once, equal to TFLite Micro."""
    from fault_proxy import FaultProxy

    tflite, mlf = models["kws"]
    rng = np.random.default_rng(8)
    xs = rng.integers(-128, 128, (30, *mlf.inputs[0].shape), dtype=np.int8)
    want = _tflm_kws_scores(tflite, mlf, xs)
    proxy = FaultProxy(qemu_kws.transport(), 1e-3, seed=21)
    proxy.enabled = False
    proxy.open()
    try:
        device = mt.Device(proxy, timeout_sec=20.0)
        device.start()
        proxy.enabled = True
        report = mt.accuracy(device, [mt.Sample(f"s{i}", 0, [x.tobytes()])
                                      for i, x in enumerate(xs)])
    finally:
        proxy.close()
    assert report.ok and report.answered == list(range(30)) and report.scores == want
    assert report.recovery is not None and report.recovery.fault_count > 0
    assert proxy.counts.total > 0


def test_accuracy_on_qemu_equals_tflite_micro(qemu_kws, models, tmp_path: Path) -> None:
    """Accuracy mode through QEMU's UART: the same figures as TFLite Micro."""
    data, want_top1, want_auc = _kws_folder(models, tmp_path, 8, seed=6)
    out = _cli(qemu_kws.directory, "--mode", "accuracy", "--data", data, "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["top1"] == want_top1 and got["auc"] == pytest.approx(want_auc, abs=1e-12)

"""Issue #17 on the host template: every crash becomes a one-line error, and the misleading or
silent cases say what they do. Each test drives the real command line (``project-api ...``
in a child process, or ``main`` in this one) on real built projects and asserts the line, the
exit status and what was written or not."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import REPO_ROOT, require_tool
from mlf_kernels import device_pids, generate_host_project

from project_api.cli import main
from project_api.emit import emit

KWS = "kws_ref_model_int8.tflite"
FLOAT = "hello_world_float.tflite"


def _cli(*args: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None,
         timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "project_api", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, **(env or {})})


def _one_line_error(out: subprocess.CompletedProcess[str], status: int = 1) -> str:
    assert out.returncode == status, (out.returncode, out.stdout, out.stderr)
    lines = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, out.stderr
    line = lines[0]
    assert "internal error" not in line and "Traceback" not in out.stderr, out.stderr
    assert "; " in line, line  # what went wrong; what to do
    return line


def _strict_json(text: str) -> Any:
    """JSON as the standard defines it: a bare NaN or Infinity is an error."""
    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def built(models_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Host projects: KWS int8 (host_driven, standalone and mlperftiny) and a float model."""
    require_tool("make")
    require_tool("cc")
    work = tmp_path_factory.mktemp("cli_messages")
    kws = emit(models_dir / KWS, work / "kws.tar", name="default")
    flt = emit(models_dir / FLOAT, work / "float.tar", name="default")
    projects = {}
    for name, mlf, options in (("kws", kws.path, {}),
                               ("float", flt.path, {}),
                               ("mlperf", kws.path, {"project_type": "mlperftiny"}),
                               ("alone", kws.path, {"project_type": "standalone"})):
        generate_host_project(mlf, work / name, **options).close()
        projects[name] = work / name
    return {"work": work, "kws_tflite": models_dir / KWS, "float_tflite": models_dir / FLOAT,
            "kws_mlf": kws, "float_mlf": flt, **projects}


def _kws_samples(n: int, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (n, 1, 49, 10, 1), dtype=np.int8)


# --- crashes -------------------------------------------------------------------------------------


FLOAT_IN, FLOAT_OUT = "serving_default_dense_input:0", "StatefulPartitionedCall:0"


def test_nan_in_float_data_or_references_is_refused_before_the_run(built, tmp_path) -> None:
    """validate: NaN in float inputs or references was "internal error: ValueError: cannot
    convert float NaN to integer", and --json wrote a bare NaN."""
    x = np.linspace(0, 6, 8, dtype=np.float32).reshape(8, 1, 1)
    bad = x.copy()
    bad[5, 0, 0] = np.nan
    np.savez(tmp_path / "nan.npz", **{FLOAT_IN: bad})
    out = _cli("validate", built["float"], "--data", tmp_path / "nan.npz", "--json")
    line = _one_line_error(out)
    assert f"data {tmp_path / 'nan.npz'} array '{FLOAT_IN}' holds nan at index [5, 0, 0] " \
           "(sample 5; 1 non-finite value in all)" in line
    assert _strict_json(out.stdout) == {"error": line.removeprefix("error: ")}
    # A reference with an infinity, named the same way; nothing ran.
    np.savez(tmp_path / "ok.npz", **{FLOAT_IN: x})
    ref = np.zeros((8, 1, 1), np.float32)
    ref[2, 0, 0] = np.inf
    np.savez(tmp_path / "ref.npz", **{FLOAT_OUT: ref})
    out = _cli("validate", built["float"], "--data", tmp_path / "ok.npz", "--reference",
               tmp_path / "ref.npz")
    line = _one_line_error(out)
    assert f"reference {tmp_path / 'ref.npz'} array '{FLOAT_OUT}' holds inf at index " \
           "[2, 0, 0] (sample 2" in line
    assert "samples/s" not in out.stdout


def test_json_never_holds_a_bare_nan(built, tmp_path) -> None:
    """run --json of a float model fed NaN (run passes any input on): the NaN input and the
    NaN it gives are null, so the output is JSON any parser reads."""
    x = np.full((1, 1), np.nan, np.float32)
    np.save(tmp_path / "nan.npy", x)
    out = _cli("run", built["float"], "--input", f"0={tmp_path / 'nan.npy'}", "--json",
               "--repeat", "1", "--number", "1", "-q")
    assert out.returncode == 0, out.stderr
    assert "NaN" not in out.stdout
    data = _strict_json(out.stdout)
    assert data["inputs"][FLOAT_IN] == [[None]] and data["outputs"][FLOAT_OUT] == [[None]]


# --- item 2: timeout advice names the verb's own flag ---------------------------------------------


class _StopDevice:
    """SIGSTOP the project's device process (build/main) once, from a hook; SIGCONT and reap
    checks at the end so that nothing is left stopped."""

    def __init__(self, project: Path) -> None:
        self.binary = project / "build" / "main"
        self.stopped: list[int] = []

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        if not self.stopped:
            for pid in device_pids(self.binary):
                os.kill(pid, signal.SIGSTOP)
                self.stopped.append(pid)

    def release(self) -> None:
        for pid in self.stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass


def test_validate_timeout_advice_names_validates_flag(built, tmp_path, capsys,
                                                       monkeypatch) -> None:
    np.savez(tmp_path / "x.npz", input_1=_kws_samples(50))
    stop = _StopDevice(built["kws"])
    from project_api.cli import progress as progress_mod

    update = progress_mod.ProgressBar.update

    def stop_after_the_first_sample(self, done: int = 1) -> None:
        update(self, done)
        stop()

    monkeypatch.setattr(progress_mod.ProgressBar, "update", stop_after_the_first_sample)
    try:
        status = main(["validate", str(built["kws"]), "--data", str(tmp_path / "x.npz"),
                       "--timeout", "1", "--number", "0", "--no-retry"])
    finally:
        stop.release()
    err = capsys.readouterr().err
    assert stop.stopped, "the device was never stopped"
    assert status == 1
    line = [x for x in err.splitlines() if x.startswith("error: ")][-1]
    assert "no reply from the device within 1s" in line
    assert "raise the limit (project-api validate --timeout SECONDS)" in line
    assert "project-api run" not in line
    assert device_pids(built["kws"] / "build" / "main") == []


def test_validate_recovers_from_a_hung_device(built, tmp_path, capsys, monkeypatch) -> None:
    """The same hung device without --no-retry: the session is reopened, then the link (a new
    device process), and every sample is answered; --json counts the fault and the restart."""
    samples = _kws_samples(50)
    np.savez(tmp_path / "x.npz", input_1=samples)
    stop = _StopDevice(built["kws"])
    from project_api.cli import progress as progress_mod

    update = progress_mod.ProgressBar.update

    def stop_after_the_first_sample(self, done: int = 1) -> None:
        update(self, done)
        stop()

    monkeypatch.setattr(progress_mod.ProgressBar, "update", stop_after_the_first_sample)
    out = tmp_path / "out.npz"
    try:
        status = main(["validate", str(built["kws"]), "--data", str(tmp_path / "x.npz"),
                       "--timeout", "1", "--number", "0", "--json", "--save", str(out)])
    finally:
        stop.release()
    report = json.loads(capsys.readouterr().out)
    assert stop.stopped, "the device was never stopped"
    assert status == 0, report
    recovery = report["recovery"]
    assert recovery["faults"] >= 1 and recovery["links_reopened"] >= 1, recovery
    assert recovery["samples_failed"] == {}
    # Every sample answered: the outputs equal those of a clean run of the same samples.
    with np.load(out) as got:
        device = got[next(iter(got.files))]
    np.savez(tmp_path / "y.npz", input_1=samples)
    again = tmp_path / "again.npz"
    monkeypatch.setattr(progress_mod.ProgressBar, "update", update)
    assert main(["validate", str(built["kws"]), "--data", str(tmp_path / "y.npz"),
                 "--number", "0", "--save", str(again), "--json"]) == 0
    capsys.readouterr()
    with np.load(again) as clean:
        np.testing.assert_array_equal(device, clean[next(iter(clean.files))])
    assert device_pids(built["kws"] / "build" / "main") == []


def test_run_timeout_advice_names_runs_flag(built, capsys, monkeypatch) -> None:
    """Without recovery (``--no-retry``) a device that stops answering ends the run with the
    limit named as run's flag."""
    from project_api.micro import api

    stop = _StopDevice(built["kws"])
    model = api.Session.model

    def stop_after_the_lookup(self, *args: Any, **kwargs: Any) -> Any:
        result = model(self, *args, **kwargs)
        stop()
        return result

    monkeypatch.setattr(api.Session, "model", stop_after_the_lookup)
    try:
        status = main(["run", str(built["kws"]), "--timeout", "1", "--no-retry", "-q"])
    finally:
        stop.release()
    err = capsys.readouterr().err
    assert status == 1 and stop.stopped
    assert "raise the limit (project-api run --timeout SECONDS)" in err


def test_mlperftiny_timeout_advice_names_its_flag(built, tmp_path, capsys, monkeypatch) -> None:
    from project_api.tools import mlperftiny as mt

    data = _kws_folder(tmp_path, [0, 1])
    stop = _StopDevice(built["mlperf"])
    load = mt.Device.load

    def stop_before_loading(self, payload: bytes) -> None:
        stop()
        load(self, payload)

    monkeypatch.setattr(mt.Device, "load", stop_before_loading)
    try:
        status = main(["mlperftiny", str(built["mlperf"]), "--mode", "accuracy", "--data",
                       str(data), "--timeout", "1", "--no-retry", "-q"])
    finally:
        stop.release()
    err = capsys.readouterr().err
    assert status == 1 and stop.stopped
    assert "no m-ready within 1 s; if it needs longer, wait longer (project-api mlperftiny " \
           "--timeout SECONDS)" in err


# --- item 3: verbs check the project type first ---------------------------------------------------


def test_run_and_validate_refuse_a_standalone_project_at_once(built, tmp_path) -> None:
    np.savez(tmp_path / "x.npz", input_1=_kws_samples(2))
    for argv in (["run", built["alone"]], ["validate", built["alone"], "--data",
                                           tmp_path / "x.npz"]):
        line = _one_line_error(_cli(*argv))
        assert f"{built['alone']} is a standalone project (project_type=standalone): its " \
               "firmware has no link to the host" in line
        assert "generate the project again with -o project_type=host_driven" in line
    line = _one_line_error(_cli("run", built["mlperf"]))
    assert "is a mlperftiny project (project_type=mlperftiny)" in line
    assert f"use 'project-api mlperftiny {built['mlperf']}'" in line


def test_mlperftiny_refuses_a_host_driven_project_at_once(built, tmp_path) -> None:
    data = _kws_folder(tmp_path, [0])
    out = _cli("mlperftiny", built["kws"], "--mode", "accuracy", "--data", data)
    line = _one_line_error(out)
    assert f"{built['kws']} is a host_driven project (project_type=host_driven): its firmware " \
           "speaks the RPC protocol" in line
    assert "-o project_type=mlperftiny" in line
    assert "no reply to 'name'" not in line and "m-ready" not in line


# --- item 9 and the crash of y_labels.csv ---------------------------------------------------------


def _kws_folder(where: Path, labels: list[Any], names: list[str] | None = None) -> Path:
    """An EnergyRunner folder of KWS inputs with these labels (y_labels.csv as written)."""
    data = where / "kws01"
    data.mkdir(exist_ok=True)
    rows = []
    for i, (x, y) in enumerate(zip(_kws_samples(len(labels)), labels, strict=True)):
        name = names[i] if names else f"tst_{i:06d}.bin"
        path = data / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(x.tobytes())
        rows.append(f"{name},12,{y}")
    (data / "y_labels.csv").write_text("\n".join(rows) + "\n")
    return data


@pytest.mark.parametrize("label, message", [
    ("seven", "class 'seven' is not an integer"),
    ("99", "class 99 is not one of the model's classes 0..11 (the model's output "
           "'Identity' has 12 classes)"),
    ("-1", "class -1 is not one of the model's classes 0..11"),
])
def test_mlperftiny_labels_are_integers_among_the_classes(built, tmp_path, label,
                                                          message) -> None:
    data = _kws_folder(tmp_path, [3, label])
    line = _one_line_error(_cli("mlperftiny", built["mlperf"], "--mode", "accuracy", "--data",
                                data))
    assert f"{data / 'y_labels.csv'}:2: {message}" in line


def test_mlperftiny_npz_labels_are_checked_too(built, tmp_path) -> None:
    np.savez(tmp_path / "d.npz", x=_kws_samples(2), y=np.array([1, 12]))
    line = _one_line_error(_cli("mlperftiny", built["mlperf"], "--mode", "accuracy", "--data",
                                tmp_path / "d.npz"))
    assert "y[1]: class 12 is not one of the model's classes 0..11" in line


def test_mlperftiny_refuses_files_outside_the_data_folder(built, tmp_path) -> None:
    outside = tmp_path / "secret.bin"
    outside.write_bytes(_kws_samples(1).tobytes())
    data = _kws_folder(tmp_path, [1])
    (data / "y_labels.csv").write_text("../secret.bin,12,1\n")
    line = _one_line_error(_cli("mlperftiny", built["mlperf"], "--mode", "accuracy", "--data",
                                data))
    assert f"{data / 'y_labels.csv'}:1: '../secret.bin' lies outside {data}" in line


def test_mlperftiny_says_when_the_10_second_rule_is_not_met(built, tmp_path) -> None:
    data = _kws_folder(tmp_path, [1])
    out = _cli("mlperftiny", built["mlperf"], "--mode", "performance", "--data", data,
               "--windows", "1", "--warmups", "1", "--min-window-seconds", "0.2", "--results",
               tmp_path / "results.txt", "-q")
    assert out.returncode == 0, out.stderr
    results = (tmp_path / "results.txt").read_text()
    assert "Runtime requirements have been met." not in results
    assert "Runtime requirements have NOT been met (< 10 sec., the benchmark's rule)." in results
    assert "the benchmark's rule of 10 s per window was NOT met" in out.stdout
    data_json = _cli("mlperftiny", built["mlperf"], "--mode", "performance", "--data", data,
                     "--windows", "1", "--warmups", "1", "--min-window-seconds", "0.2",
                     "--json", "-q")
    assert _strict_json(data_json.stdout)["runtime_requirements_met"] is False


# --- item 10: validate's thresholds, float data, --places ----------------------------------------


@pytest.mark.parametrize("flag, item, message", [
    ("--fail-under", "cosine=2", "cosine is always in -1..1, so this gate can never pass"),
    ("--fail-under", "top1=1.5", "top1 is always in 0..1"),
    ("--fail-over", "max_abs=-0.5", "max_abs is always >= 0, so this gate can never pass"),
    ("--fail-over", "rmse=inf", "rmse is always >= 0, so this gate always passes"),
])
def test_thresholds_outside_a_metrics_range_are_refused_before_the_run(built, tmp_path, flag,
                                                                        item, message) -> None:
    np.savez(tmp_path / "x.npz", input_1=_kws_samples(20))
    out = _cli("validate", built["kws"], "--data", tmp_path / "x.npz", "--model",
               built["kws_tflite"], flag, item)
    line = _one_line_error(out, status=2)
    assert message in line
    assert "samples/s" not in out.stdout + out.stderr  # nothing ran


def test_float_data_for_an_int8_input_points_to_quantizing(built, tmp_path) -> None:
    real = np.random.default_rng(4).uniform(-30, 30, (12, 1, 49, 10, 1)).astype(np.float32)
    np.savez(tmp_path / "float.npz", input_1=real)
    line = _one_line_error(_cli("validate", built["kws"], "--data", tmp_path / "float.npz"))
    kws_in = built["kws_mlf"].inputs[0]
    scale, zero = kws_in.quantization["scale"][0], kws_in.quantization["zero_point"][0]
    assert f"int8 quantized with scale {scale:.9g} and zero point {zero}" in line
    assert "pass --quantize" in line and "np.trunc(x / " in line
    assert "convert it with .astype(np.int8)" not in line
    # --quantize quantizes as TFLite does (round half away from zero, clamp); the device then
    # agrees with TFLite Micro bit for bit on those int8 values.
    scaled = real.astype(np.float64) / scale
    by_hand = np.clip(np.sign(scaled) * np.floor(np.abs(scaled) + 0.5) + zero, -128,
                      127).astype(np.int8)
    np.savez(tmp_path / "int8.npz", input_1=by_hand)
    quantized = _cli("validate", built["kws"], "--data", tmp_path / "float.npz", "--quantize",
                     "--model", built["kws_tflite"], "--no-litert", "--number", "0",
                     "--fail-under", "exact=1", "--save", tmp_path / "q.npz", "--json", "-q")
    assert quantized.returncode == 0, quantized.stderr
    plain = _cli("validate", built["kws"], "--data", tmp_path / "int8.npz", "--number", "0",
                 "--save", tmp_path / "p.npz", "-q")
    assert plain.returncode == 0, plain.stderr
    with np.load(tmp_path / "q.npz") as q, np.load(tmp_path / "p.npz") as p:
        assert q.files == p.files and all(np.array_equal(q[k], p[k]) for k in q.files)


def test_places_without_a_coordinator_names_the_flag(built, tmp_path) -> None:
    np.savez(tmp_path / "x.npz", input_1=_kws_samples(2))
    env = {k: v for k, v in os.environ.items() if k != "LG_COORDINATOR"}
    out = subprocess.run([sys.executable, "-m", "project_api", "validate", str(built["kws"]),
                          "--data", str(tmp_path / "x.npz"), "--places", "nucleo-*"],
                         capture_output=True, text=True, timeout=120, env=env)
    line = _one_line_error(out, status=2)
    assert "pass --coordinator HOST:PORT or set LG_COORDINATOR" in line
    assert "labgrid_coordinator" not in line


# --- item 11: a bad option value is a usage error wherever it is found ---------------------------


@pytest.mark.parametrize("template, option, message", [
    ("host", "workspace_size_bytes=1", "option workspace_size_bytes=1 is below its minimum 4096"),
    ("stm32", "workspace_size_bytes=99999999999",
     "option workspace_size_bytes=99999999999 is above its maximum"),
    ("stm32", "stack_size_bytes=16", "option stack_size_bytes=16 is below its minimum 1024"),
])
def test_an_option_out_of_range_is_a_usage_error(built, tmp_path, template, option,
                                                 message) -> None:
    out = _cli("generate", "--template", template, "--model", built["kws_mlf"].path,
               "--out", tmp_path / "prj", "-o", option)
    line = _one_line_error(out, status=2)
    assert message in line and "pass -o " in line
    assert "the project server failed" not in line
    assert not (tmp_path / "prj").exists()
    # The same status as an option error our client finds itself.
    assert _cli("generate", "--template", template, "--model", built["kws_mlf"].path,
                "--out", tmp_path / "prj", "-o", "no_such_option=1").returncode == 2


# --- item 13: options fixed at generate are refused later -----------------------------------------


def test_options_fixed_at_generate_are_refused_by_the_later_verbs(built) -> None:
    for argv in (["run", built["kws"], "-o", "project_type=standalone"],
                 ["build", built["kws"], "-o", "workspace_size_bytes=8192"],
                 ["flash", built["kws"], "-o", "max_packet_size_bytes=4096"]):
        line = _one_line_error(_cli(*argv), status=2)
        name = argv[-1].split("=")[0]
        assert f"option {name} cannot change after generate" in line
        assert f"generate the project again with -o {argv[-1]}" in line
    # The value it was generated with, and options the later steps take, are fine.
    assert _cli("build", built["kws"], "-o", "workspace_size_bytes=2097152").returncode == 0
    assert _cli("build", built["kws"], "-o", "verbose=true").returncode == 0


# --- item 14: progress on a terminal only -----------------------------------------------------------


def test_progress_is_a_bar_on_a_terminal_and_no_carriage_returns_in_a_log(built,
                                                                          tmp_path) -> None:
    np.savez(tmp_path / "x.npz", input_1=_kws_samples(200))
    argv = ["validate", built["kws"], "--data", tmp_path / "x.npz", "--model",
            built["kws_tflite"], "--no-litert", "--number", "0"]
    logged = _cli(*argv)
    assert logged.returncode == 0, logged.stderr
    assert "\r" not in logged.stderr
    # At most one line per 5 s per step, and the run's own progress lines.
    assert len(logged.stderr.splitlines()) <= 3, logged.stderr
    assert "samples/s" in logged.stdout  # the result itself is on stdout
    quiet = _cli(*argv, "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""
    tty = _on_a_terminal([sys.executable, "-m", "project_api", *map(str, argv)])
    assert "\r" in tty and "200/200" in tty  # tqdm's bar, drawn in place
    assert "\r" not in _on_a_terminal([sys.executable, "-m", "project_api", *map(str, argv),
                                       "-q"])


def _on_a_terminal(argv: list[str]) -> str:
    """What ``argv`` writes to stderr when stderr is a terminal (a pty); stdout is a pipe."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, text=True)
        os.close(slave)
        chunks: list[bytes] = []

        def drain() -> None:
            while True:
                try:
                    data = os.read(master, 4096)
                except OSError:  # EIO once the child's end is closed
                    return
                if not data:
                    return
                chunks.append(data)

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        proc.communicate(timeout=300)
        reader.join(timeout=10)
        assert proc.returncode == 0
    finally:
        os.close(master)
    return b"".join(chunks).decode(errors="replace")


# --- item 15: the manual says what the command line does ------------------------------------------


def test_readme_mlperftiny_example_uses_the_benchmarks_kws_model() -> None:
    """The MLPerf Tiny example generated from kws.tar, which the STM32 section had emitted from
    micro_speech (not the benchmark's KWS model, kws_ref_model = kws01)."""
    section = (REPO_ROOT / "docs" / "mlperftiny.md").read_text()
    archives = {line.split("--model ")[1].split()[0] for line in section.splitlines()
                if "project-api generate" in line and "--model " in line}
    assert archives, "the MLPerf Tiny section generates no project"
    for archive in archives:
        emits = [line for line in section.splitlines()
                 if "project-api emit" in line and f"--out {archive}" in line]
        assert emits and "kws_ref_model_int8.tflite" in emits[0], (archive, emits)


def test_readme_stm32_sequence_emits_with_the_boards_kernels() -> None:
    text = (REPO_ROOT / "docs" / "stm32.md").read_text()
    section = text[:text.index("**Standalone firmware")]
    emits = [line for line in section.splitlines() if line.startswith("project-api emit")]
    assert emits and all("--target cortex-m4" in line for line in emits), emits

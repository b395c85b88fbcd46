"""MLPerf Tiny host runner: the benchmark's UART protocol (mlcommons/tiny ``benchmark/api``) from
the host side, over a project's own transport, and the performance and accuracy modes of the
EEMBC EnergyRunner, open.

:class:`Device` speaks the protocol over any :class:`~project_api.transport.Transport` (the
template's: build/main on FIFOs, QEMU's UART, a serial port): commands end in ``%``, replies are
``\\r\\n`` lines up to ``m-ready``. :func:`performance` and :func:`accuracy` run the two modes;
:func:`results_text` lays their reports out like a submission's ``results.txt``.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from project_api.errors import IoTimeoutError, ProjectAPIError, TransportClosedError
from project_api.transport import Transport

#: Longest command the device takes, terminator excluded (EE_CMD_SIZE).
CMD_SIZE = 80
#: Bytes per ``db HH...`` command (2 hex digits each, "db " in front: 67 characters).
DB_CHUNK_BYTES = 32
#: The benchmark's rule: each performance window runs at least this long on the device.
MIN_WINDOW_SECONDS = 10.0
#: Windows (one input each) of a performance run, as the benchmark's scripts loop.
WINDOWS = 5
#: Warm-up inferences before each window (the benchmark's scripts use 10 for KWS and AD).
WARMUPS = 10
#: Model versions scored by AUC of a reconstruction error rather than top-1.
ANOMALY_MODELS = ("ad01",)

Progress = Callable[[int, int], None]


class MlperfTinyError(ProjectAPIError):
    """The device or the data broke the benchmark's protocol or rules."""


class DeviceTimeoutError(MlperfTinyError):
    """The device stopped answering; the message names the last command sent."""


class MalformedReplyError(MlperfTinyError):
    """A reply line is not what the protocol allows; the message quotes it."""


class DeviceError(MlperfTinyError):
    """The device answered ``e-[...]``; :attr:`device_message` is that text."""

    def __init__(self, command: str, device_message: str):
        super().__init__(f"the device refused {command!r}: {device_message}")
        self.command = command
        self.device_message = device_message


@dataclass
class InferResult:
    """One ``infer N W``: the two laps and the results line."""

    iterations: int
    warmups: int
    start_us: int
    end_us: int
    results: list[float]

    @property
    def elapsed_us(self) -> int:
        return self.end_us - self.start_us


_RESULTS = re.compile(r"^m-results-\[(.*)\]$")
_LAP = re.compile(r"^m-lap-us-(\d+)$")
_MESSAGE = re.compile(r"^(m-|e-\[)[\x20-\x7e]*$")


def _parse_results(line: str) -> list[float]:
    m = _RESULTS.match(line)
    if m is None:
        raise MalformedReplyError(f"malformed results line {line!r}")
    try:
        return [float(v) for v in m.group(1).split(",")] if m.group(1) else []
    except ValueError:
        raise MalformedReplyError(f"malformed results line {line!r}") from None


class Device:
    """The benchmark's protocol over an open ``transport``.

    ``timeout_sec`` bounds the wait for each reply line of ordinary commands; :meth:`infer`
    takes its own. ``log`` receives ``(direction, text)`` for every command and line.
    """

    def __init__(self, transport: Transport, timeout_sec: float = 10.0,
                 log: Callable[[str, str], None] | None = None,
                 timeout_advice: str | None = None):
        self.transport = transport
        self.timeout_sec = timeout_sec
        self.log = log
        #: How a message about a reply later than ``timeout_sec`` says to wait longer.
        self.timeout_advice = timeout_advice or "Device(timeout_sec=SECONDS) in Python"
        self._buffer = b""
        self.last_command: str | None = None
        self.boot_lines: list[str] = []

    # ---- lines ----
    def _read_line(self, timeout_sec: float, waiting_for: str) -> str:
        deadline = time.monotonic() + timeout_sec
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._silent(timeout_sec, waiting_for)
            try:
                self._buffer += self.transport.read(4096, left)
            except IoTimeoutError:
                raise self._silent(timeout_sec, waiting_for) from None
            except TransportClosedError:
                raise DeviceTimeoutError(
                    f"the device closed the connection {self._after()} (waiting for "
                    f"{waiting_for})") from None
        raw, self._buffer = self._buffer.split(b"\n", 1)
        line = raw.rstrip(b"\r").decode("ascii", errors="replace")
        if self.log is not None:
            self.log("<", line)
        return line

    def _after(self) -> str:
        return (f"after {self.last_command!r}" if self.last_command is not None
                else "before any command")

    def _silent(self, timeout_sec: float, waiting_for: str) -> DeviceTimeoutError:
        how = (f"if it needs longer, wait longer ({self.timeout_advice})"
               if timeout_sec == self.timeout_sec else
               "that wait allows three times the device time the command asks for")
        return DeviceTimeoutError(f"the device stopped answering {self._after()}: no {waiting_for} "
                                  f"within {timeout_sec:g} s; {how}, else reset the device")

    def wait_ready(self, timeout_sec: float | None = None) -> list[str]:
        """Lines up to the next ``m-ready`` (the start-up lines after a boot)."""
        lines = []
        while (line := self._read_line(timeout_sec or self.timeout_sec, "m-ready")) != "m-ready":
            lines.append(line)
        return lines

    def start(self, timeout_sec: float | None = None) -> list[str]:
        """Read the start-up lines up to ``m-ready``. A device that printed them before we
        connected (a board already running) is sent ``name``; lines up to its answer are
        skipped, so a late start-up banner cannot put replies out of step."""
        try:
            self.boot_lines = self.wait_ready(timeout_sec or self.timeout_sec)
            return self.boot_lines
        except DeviceTimeoutError:
            pass
        self.last_command = "name"
        if self.log is not None:
            self.log(">", "name%")
        self.transport.write(b"name%", self.timeout_sec)
        lines: list[str] = []
        named = False
        while True:
            line = self._read_line(self.timeout_sec, "the reply to 'name'")
            if line.startswith("m-name-"):
                named = True
            elif line == "m-ready" and named:
                break
            elif line != "m-ready":
                lines.append(line)
        self.boot_lines = lines
        return lines

    def command(self, text: str, timeout_sec: float | None = None,
                free_text: bool = False) -> list[str]:
        """Send ``text%``; return the reply lines before ``m-ready``. An ``e-[...]`` line raises
        :class:`DeviceError`; a line that is no message raises :class:`MalformedReplyError`
        unless ``free_text`` (``help``)."""
        if "%" in text or len(text) > CMD_SIZE:
            raise MlperfTinyError(f"command {text[:40]!r}... is longer than {CMD_SIZE} characters"
                                  if len(text) > CMD_SIZE else f"command {text!r} contains '%'")
        self.last_command = text
        if self.log is not None:
            self.log(">", text + "%")
        self.transport.write(text.encode("ascii") + b"%", self.timeout_sec)
        lines: list[str] = []
        error: str | None = None
        timeout = timeout_sec or self.timeout_sec
        while (line := self._read_line(timeout, "m-ready")) != "m-ready":
            if line.startswith("e-["):
                error = error or (line[3:-1] if line.endswith("]") else line[3:])
            elif not free_text and _MESSAGE.match(line) is None:
                raise MalformedReplyError(f"malformed reply to {text!r}: {line!r}")
            lines.append(line)
        if error is not None:
            raise DeviceError(text, error)
        return lines

    # ---- commands ----
    def name(self) -> str:
        for line in self.command("name"):
            if m := re.match(r"^m-name-(.*)$", line):
                return m.group(1)
        raise MalformedReplyError("no m-name-... line in the reply to 'name'")

    def profile(self) -> dict[str, str]:
        found = {}
        for line in self.command("profile"):
            if m := re.match(r"^m-(profile|model)-\[(.*)\]$", line):
                found[m.group(1)] = m.group(2)
        if set(found) != {"profile", "model"}:
            raise MalformedReplyError("the reply to 'profile' lacks m-profile-[...] or "
                                      "m-model-[...]")
        return found

    def load(self, data: bytes) -> None:
        """``db load N`` and ``db HH...`` commands until ``m-load-done``."""
        if not data:
            raise MlperfTinyError("no input bytes to load")
        reply = self.command(f"db load {len(data)}")
        if f"m-[Expecting {len(data)} bytes]" not in reply:
            raise MalformedReplyError(f"unexpected reply to 'db load {len(data)}': {reply!r}")
        for i in range(0, len(data), DB_CHUNK_BYTES):
            reply = self.command("db " + data[i:i + DB_CHUNK_BYTES].hex())
            last = i + DB_CHUNK_BYTES >= len(data)
            if last != ("m-load-done" in reply):
                raise MalformedReplyError(
                    f"m-load-done {'missing after the last' if last else 'before the last'} "
                    f"db command ({i + DB_CHUNK_BYTES} of {len(data)} bytes sent)")

    def infer(self, iterations: int, warmups: int, timeout_sec: float) -> InferResult:
        lines = self.command(f"infer {iterations} {warmups}", timeout_sec)
        laps = [int(m.group(1)) for line in lines if (m := _LAP.match(line))]
        expect = [f"m-warmup-start-{warmups}", "m-warmup-done", f"m-infer-start-{iterations}",
                  "m-infer-done"]
        missing = [e for e in expect if e not in lines]
        results = [line for line in lines if line.startswith("m-results-")]
        if missing or len(laps) != 2 or len(results) != 1:
            raise MalformedReplyError(
                f"reply to 'infer {iterations} {warmups}' lacks "
                f"{', '.join(missing) or 'two m-lap-us-T lines and one m-results line'}: "
                f"{lines!r}")
        return InferResult(iterations, warmups, laps[0], laps[1], _parse_results(results[0]))

    def reset(self) -> None:
        """``reset``: the model's state back to its values at boot (project-api's command;
        firmware of a stateless model answers it too, with nothing to do)."""
        if "m-reset-done" not in self.command("reset"):
            raise MalformedReplyError("no m-reset-done in the reply to 'reset'")

    def results(self) -> list[float]:
        lines = [line for line in self.command("results") if line.startswith("m-results-")]
        if len(lines) != 1:
            raise MalformedReplyError("no m-results-[...] line in the reply to 'results'")
        return _parse_results(lines[0])


# ---- data ----

@dataclass
class Sample:
    """One data set entry: its name, true class and the inputs (windows) the device runs."""

    name: str
    label: int
    windows: list[bytes]


@dataclass
class ModelFacts:
    """What the runner checks inputs and labels against: the bytes one input may have, and
    the classes a true label may name (None: not known)."""

    input_bytes: tuple[int, ...]
    description: str
    classes: int | None = None
    classes_from: str = ""  #: where :attr:`classes` comes from, for messages
    #: Bytes of state the model keeps from one run to the next (0: stateless); the modes reset
    #: it before every sample unless told to carry it.
    state_size_bytes: int = 0


def model_facts(project_dir: str | Path) -> ModelFacts:
    """The input sizes the project's firmware takes (its input tensor's bytes and, for an int8
    input with quantization, float32 values, 4 bytes each, it quantizes itself), and the
    classes of its labels: the output's size for a classifier, 2 (normal, anomalous) for AD."""
    from project_api import mlf
    from project_api.template import options as saved_options
    from project_api.template.mlperftiny_model import MLPERFTINY_MODELS, mlperftiny_version

    lib = mlf.open_mlf(Path(project_dir) / "model")
    mod = next(iter(lib.modules.values()))
    t = mod.inputs[0]
    sizes = [t.size_bytes]
    desc = f"{t.name} {t.dtype} {'x'.join(map(str, t.shape or ()))} ({t.size_bytes} bytes"
    if t.dtype == "int8" and t.quantization:
        sizes.append(4 * t.size_bytes)
        desc += f", or {4 * t.size_bytes} bytes of float32"
    classes, source = None, ""
    try:
        version = mlperftiny_version(mod, saved_options.load_options(Path(project_dir)).get(
            "mlperftiny_model"))
    except ProjectAPIError:
        version = None
    if version is not None and MLPERFTINY_MODELS.get(version) == "reconstruction":
        classes, source = 2, f"{version}: 0 normal, 1 anomalous"
    elif mod.outputs and mod.outputs[0].shape:
        classes = int(np.prod(mod.outputs[0].shape))
        source = f"the model's output {mod.outputs[0].name!r} has {classes} classes"
    return ModelFacts(tuple(sizes), desc + ")", classes, source,
                      int(getattr(mod, "state_size_bytes", 0) or 0))


def _split(data: bytes, facts: ModelFacts, where: str) -> list[bytes]:
    for size in facts.input_bytes:
        if len(data) == size:
            return [data]
    for size in sorted(facts.input_bytes, reverse=True):
        if len(data) > size and len(data) % size == 0:
            return [data[i:i + size] for i in range(0, len(data), size)]
    raise MlperfTinyError(f"{where} has {len(data)} bytes; the model's input is "
                          f"{facts.description}: refused before sending")


def load_dataset(path: str | Path, facts: ModelFacts) -> list[Sample]:
    """The samples of ``path``: a folder with ``y_labels.csv`` and ``.bin`` files (the
    EnergyRunner's layout: ``file,classes,class[,window bytes,stride bytes]``), or an ``.npz``
    with ``x`` (samples first; each sample's bytes are one input or several back to back, e.g.
    AD windows) and ``y`` (the true classes). Every input is checked against the model."""
    path = Path(path)
    samples: list[Sample] = []
    if path.is_dir():
        labels = path / "y_labels.csv"
        if not labels.is_file():
            raise MlperfTinyError(f"{path} holds no y_labels.csv (file,classes,class[,window,"
                                  "stride] per line)")
        folder = path.resolve()
        with labels.open(newline="") as f:
            for row_no, row in enumerate(csv.reader(f), 1):
                if not row or not row[0].strip():
                    continue
                where = f"{labels}:{row_no}"
                if len(row) not in (3, 5):
                    raise MlperfTinyError(f"{where}: expected file,classes,class"
                                          f"[,window,stride], got {row!r}")
                name = row[0].strip()
                file = path / name
                if Path(name).is_absolute() or not file.resolve().is_relative_to(folder):
                    raise MlperfTinyError(f"{where}: {name!r} lies outside {path}; name the "
                                          "data files relative to the data folder, inside it")
                if not file.is_file():
                    raise MlperfTinyError(f"{where}: {file} does not exist")
                label = _label(row[2], where, facts)
                data = file.read_bytes()
                if len(row) == 5:
                    width = _whole(row[3], "window", where)
                    stride = _whole(row[4], "stride", where)
                    if width <= 0 or stride <= 0 or width > len(data):
                        raise MlperfTinyError(f"{labels}:{row_no}: window {width} / stride "
                                              f"{stride} do not fit {file.name} ({len(data)} "
                                              "bytes)")
                    windows = [data[s:s + width] for s in range(0, len(data) - width + 1, stride)]
                    for w in windows:
                        _split(w, facts, f"a window of {file.name}")
                else:
                    windows = _split(data, facts, file.name)
                samples.append(Sample(name, label, windows))
    elif path.suffix == ".npz" and path.is_file():
        with np.load(path) as z:
            if "x" not in z or "y" not in z:
                raise MlperfTinyError(f"{path} must hold arrays 'x' (inputs, samples first) and "
                                      f"'y' (true classes); it holds {sorted(z.files)}")
            x, y = z["x"], z["y"]
        if len(x) != len(y):
            raise MlperfTinyError(f"{path}: {len(x)} inputs but {len(y)} labels")
        for i in range(len(x)):
            data = np.ascontiguousarray(x[i]).astype(x.dtype.newbyteorder("<")).tobytes()
            label = _label(y[i], f"{path}: y[{i}]", facts)
            samples.append(Sample(f"sample {i}", label, _split(data, facts, f"sample {i}")))
    else:
        raise MlperfTinyError(f"{path} is neither a folder with y_labels.csv nor an .npz file")
    if not samples:
        raise MlperfTinyError(f"{path} holds no samples")
    return samples


def _whole(text: str, what: str, where: str) -> int:
    """An integer field of y_labels.csv, or MlperfTinyError quoting it."""
    try:
        return int(str(text).strip())
    except ValueError:
        raise MlperfTinyError(f"{where}: {what} {text!r} is not an integer; write whole numbers "
                              "in y_labels.csv (file,classes,class[,window,stride])") from None


def _label(value: Any, where: str, facts: ModelFacts) -> int:
    """A true class: an integer among the model's classes (when known)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise MlperfTinyError(f"{where}: class {value!r} is not an integer; give each sample's "
                              "true class as a whole number")
    label = _whole(value, "class", where) if isinstance(value, str) else value
    if facts.classes is not None and not 0 <= label < facts.classes:
        raise MlperfTinyError(f"{where}: class {label} is not one of the model's classes 0.."
                              f"{facts.classes - 1} ({facts.classes_from}); fix the label")
    return label


# ---- modes ----

@dataclass
class Window:
    """One performance window: one input, ``iterations`` timed inferences."""

    sample: str
    iterations: int
    warmups: int
    elapsed_us: int

    @property
    def seconds(self) -> float:
        return self.elapsed_us / 1e6

    @property
    def throughput(self) -> float:
        return self.iterations / self.seconds if self.elapsed_us > 0 else math.inf

    @property
    def inference_ms(self) -> float:
        return self.elapsed_us / 1e3 / self.iterations


def state_json(state_size_bytes: int, reset: bool) -> dict[str, Any]:
    """The ``state`` entry of a report's JSON: the model's state and whether it was reset
    before every sample (window)."""
    return {"size_bytes": state_size_bytes, "reset_between_samples": bool(reset)}


def state_line(state_size_bytes: int, reset: bool) -> str | None:
    """How a run met the model's state, in words (None for a stateless model)."""
    if not state_size_bytes:
        return None
    return (f"state: {state_size_bytes} B, " + ("reset before every sample" if reset else
                                                  "carried from sample to sample"))


@dataclass
class PerformanceReport:
    model: str
    windows: list[Window]
    min_window_seconds: float
    state_size_bytes: int = 0
    reset_state: bool = False  #: the state was reset before each window

    @property
    def median_throughput(self) -> float:
        return statistics.median(w.throughput for w in self.windows)

    @property
    def median_inference_ms(self) -> float:
        return statistics.median(w.inference_ms for w in self.windows)

    @property
    def requirements_met(self) -> bool:
        """Whether every window lasted the benchmark's rule (:data:`MIN_WINDOW_SECONDS` of
        device time), whatever ``min_window_seconds`` this run asked for."""
        return all(w.seconds >= MIN_WINDOW_SECONDS for w in self.windows)

    def to_json(self) -> dict[str, Any]:
        return {"mode": "performance", "model": self.model,
                "median_throughput_inf_per_s": self.median_throughput,
                "median_inference_ms": self.median_inference_ms,
                "min_window_seconds": self.min_window_seconds,
                "runtime_requirements_met": self.requirements_met,
                "windows": [{"sample": w.sample, "iterations": w.iterations,
                             "warmups": w.warmups, "runtime_s": w.seconds,
                             "throughput_inf_per_s": w.throughput,
                             "inference_ms": w.inference_ms} for w in self.windows],
                "state": state_json(self.state_size_bytes, self.reset_state)}


def _infer_timeout(device_s: float, wall_per_device: float) -> float:
    return 30.0 + 3.0 * device_s * max(1.0, wall_per_device)


def performance(device: Device, samples: Sequence[Sample], *, windows: int = WINDOWS,
                warmups: int = WARMUPS, min_window_seconds: float = MIN_WINDOW_SECONDS,
                progress: Progress | None = None, state_size_bytes: int = 0,
                reset_state: bool = True) -> PerformanceReport:
    """The benchmark's performance mode: for each of ``windows`` inputs (the samples' first
    windows, in turn), load it, measure one inference, then run ``infer N W`` with N chosen so
    the window lasts at least ``min_window_seconds`` of device time (re-run longer if not). A
    stateful model (``state_size_bytes``) has its state reset before each window unless
    ``reset_state`` is false."""
    model = device.profile()["model"]
    reset = bool(state_size_bytes) and reset_state
    done: list[Window] = []
    for k in range(windows):
        sample = samples[k % len(samples)]
        if reset:
            device.reset()
        device.load(sample.windows[0])
        t0 = time.monotonic()
        probe = device.infer(1, 0, _infer_timeout(60.0, 1.0))
        per_inf = max(probe.elapsed_us, 1) / 1e6
        wall_ratio = max(1.0, (time.monotonic() - t0) / per_inf)
        iterations = max(1, math.ceil(min_window_seconds * 1.05 / per_inf))
        for _attempt in range(4):
            device_s = (iterations + warmups) * per_inf
            res = device.infer(iterations, warmups, _infer_timeout(device_s, wall_ratio))
            if res.elapsed_us / 1e6 >= min_window_seconds:
                break
            per_inf = max(res.elapsed_us, 1) / 1e6 / iterations
            iterations = max(iterations + 1, math.ceil(min_window_seconds * 1.1 / per_inf))
        else:
            raise MlperfTinyError(f"window {k + 1} stayed shorter than {min_window_seconds:g} s "
                                  f"of device time after 4 tries ({res.elapsed_us} us)")
        done.append(Window(sample.name, iterations, warmups, res.elapsed_us))
        if progress is not None:
            progress(k + 1, windows)
    return PerformanceReport(model, done, min_window_seconds, state_size_bytes, reset)


def roc_auc(y_true: Sequence[int], score: Sequence[float]) -> float:
    """Area under the ROC curve of ``score`` for the positive class 1 (ties counted half), as
    scikit-learn's ``roc_auc_score`` computes it."""
    y = np.asarray(y_true, dtype=bool)
    s = np.asarray(score, dtype=np.float64)
    pos, neg = int(y.sum()), int((~y).sum())
    if pos == 0 or neg == 0:
        raise MlperfTinyError("AUC needs samples of both classes")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=np.float64)
    sorted_s = s[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    return float((ranks[y].sum() - pos * (pos + 1) / 2.0) / (pos * neg))


def _normalize(v: np.ndarray) -> np.ndarray:
    total = v.sum()
    return v / total if total > 0 else v


@dataclass
class AccuracyReport:
    model: str
    top1: float | None  #: share of samples whose class is right (classifiers)
    auc: float | None
    samples: int
    scores: list[Any] = field(repr=False, default_factory=list)
    state_size_bytes: int = 0
    reset_state: bool = False  #: the state was reset before each sample

    def to_json(self) -> dict[str, Any]:
        return {"mode": "accuracy", "model": self.model, "samples": self.samples,
                "top1": self.top1, "auc": self.auc,
                "state": state_json(self.state_size_bytes, self.reset_state)}


def scores_metrics(model: str, labels: Sequence[int],
                   scores: Sequence[Any]) -> tuple[float | None, float | None]:
    """The benchmark's metrics of per-sample scores: (top-1, AUC). AD: AUC of the
    reconstruction error; classifiers: top-1 of the averaged results and the mean one-vs-rest
    AUC of the normalized results over the classes present."""
    if model in ANOMALY_MODELS:
        return None, roc_auc(labels, [float(s) for s in scores])
    probs = np.array([_normalize(np.asarray(s, dtype=np.float64)) for s in scores])
    y = np.asarray(labels)
    top1 = float(np.mean(np.argmax(probs, axis=1) == y))
    aucs = [roc_auc(y == c, probs[:, c]) for c in sorted(set(y.tolist()))
            if 0 <= c < probs.shape[1] and 0 < np.sum(y == c) < len(y)]
    return top1, (float(np.mean(aucs)) if aucs else None)


def accuracy(device: Device, samples: Sequence[Sample],
             progress: Progress | None = None, *, state_size_bytes: int = 0,
             reset_state: bool = True) -> AccuracyReport:
    """The benchmark's accuracy mode: every window of every sample through ``infer 1 0``; a
    sample's score is the mean of its windows' results; metrics by :func:`scores_metrics`. A
    stateful model (``state_size_bytes``) has its state reset before each sample (its windows
    run in turn, state carried) unless ``reset_state`` is false (one stream of samples)."""
    model = device.profile()["model"]
    reset = bool(state_size_bytes) and reset_state
    scores = []
    for k, sample in enumerate(samples):
        if reset:
            device.reset()
        results = []
        for w in sample.windows:
            device.load(w)
            results.append(device.infer(1, 0, _infer_timeout(60.0, 1.0)).results)
        if model in ANOMALY_MODELS:
            scores.append(float(np.mean([r[0] for r in results])))
        else:
            scores.append(np.mean(np.array(results, dtype=np.float64), axis=0).tolist())
        if progress is not None:
            progress(k + 1, len(samples))
    top1, auc = scores_metrics(model, [s.label for s in samples], scores)
    return AccuracyReport(model, top1, auc, len(samples), scores, state_size_bytes, reset)


def _stamp(now: datetime | None = None) -> str:
    now = now or datetime.now()
    return now.strftime("%H%M%S.") + f"{now.microsecond // 1000:03d}"


def results_text(report: PerformanceReport | AccuracyReport, now: datetime | None = None) -> str:
    """``results.txt`` as a submission lays it out (``<time> ulp-mlperf: ...`` lines)."""
    head = f"{_stamp(now)} ulp-mlperf: "
    out: list[str] = []
    if isinstance(report, PerformanceReport):
        for i, w in enumerate(report.windows, 1):
            out += [f"Performance results for window {i}:",
                    f"  # Inferences : {w.iterations:>12}",
                    f"  Runtime      : {w.seconds:>12.3f} sec.",
                    f"  Throughput   : {w.throughput:>12.3f} inf./sec."]
            if w.seconds >= MIN_WINDOW_SECONDS:
                out.append("Runtime requirements have been met.")
            else:
                out.append(f"Runtime requirements have NOT been met (< {MIN_WINDOW_SECONDS:g} "
                           "sec., the benchmark's rule).")
        out += ["-" * 57, f"Median throughput is {report.median_throughput:.3f} inf./sec.",
                "-" * 57]
    else:
        if report.top1 is not None:
            out.append(f"Top-1: {100 * report.top1:.1f}%")
        if report.auc is not None:
            out.append(f"AUC: {report.auc:.2f}")
    return "".join(head + line + "\n" for line in out)


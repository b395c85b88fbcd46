"""Parity of TFLM's signal-library custom operators (its audio front end) with TFLite Micro.

The machinery is ``tests/helpers/emit_parity.py`` (emit, compile under ASan and UBSan, run);
the comparison is this module's, because these operators need more than the shared one gives:

* **Inputs shaped for signals**: every run of a case draws its inputs from a distribution of
  its own (:func:`values`): uniform over the type, the type's extremes, magnitudes spread over
  every bit (log-uniform: small energies, large energies, every segment of the log and square
  root tables), small values.
* **Successive invocations of one program** against one TFLM interpreter, so state carried
  from run to run (the noise estimate of spectral subtraction, the framer's and stacker's
  buffers, the delay line, the overlap-add tail) is checked on every run.
* **Bit for bit**, floats too: the float FFTs are TFLM's kissfft in TFLM's order.
* **What TFLM leaves undefined is not compared**: SignalEnergy's bins outside
  ``[start, end)`` (TFLM leaves its arena there; the emitted kernel writes zeros, checked), and
  the outputs of SignalFramer and SignalStacker on runs whose ``output_valid`` is false.

Beside the operators one by one: TFLM's audio front end built in code (framer, window, FFT,
filter bank, noise reduction, PCAN, log, stacker) over successive chunks of a chirp with a reset,
on the host, in a host-template project over RPC and on QEMU's Cortex-M4; the CASTs to and from
uint32 the real front end uses; the one-line refusals; the options reader under corruption.

LiteRT has no kernels for these operators, so TFLM is the only reference.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pytest
from helpers.emit_parity import SEED_BASE, Case, Prefetcher, run_built

from project_api.emit import emit_sources
from project_api.emit import reference as R
from project_api.tflite import signal_tables
from project_api.tflite.builder import ModelBuilder
from project_api.tflite.tensors import TensorRef

pytest_plugins = ("helpers.emit_parity",)

#: Runs of each stateless case; stateful cases run more (:attr:`SignalCase.invocations`).
RUNS = 4


# --- inputs ------------------------------------------------------------------------------------


def values(rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...], run: int,
           ) -> np.ndarray:
    """Input values for run ``run``, its distribution cycling through four: uniform over the
    type (float32: +-100), the extremes (float32: +-1e4), magnitudes log-uniform over every bit
    (float32: +-1), and small values."""
    dtype = np.dtype(dtype)
    kind = run % 4
    if dtype.kind == "f":
        scale = (100.0, 1e4, 1.0, 1e-2)[kind]
        return rng.uniform(-scale, scale, size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    info = np.iinfo(dtype)
    bits = dtype.itemsize * 8
    if kind == 0:
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if kind == 1:
        return rng.choice(np.array([info.min, info.max, 0, 1], dtype), size=shape)
    if kind == 2:
        top = bits - (1 if dtype.kind == "i" else 0)
        raw = rng.integers(0, np.iinfo(np.uint64).max, size=shape, dtype=np.uint64,
                           endpoint=True)
        width = rng.integers(0, top + 1, size=shape).astype(np.uint64)
        mag = np.where(width == 0, np.uint64(0),
                       raw >> (np.uint64(64) - np.maximum(width, np.uint64(1))))
        if dtype.kind == "u":
            return mag.astype(dtype)
        return (mag.astype(np.int64) * rng.choice(np.array([-1, 1]), size=shape)).astype(dtype)
    lo = 0 if dtype.kind == "u" else -64
    return rng.integers(lo, 64, size=shape, dtype=dtype)


# --- cases -------------------------------------------------------------------------------------


@dataclass
class SignalCase(Case):
    """A :class:`Case` whose branch builds a signal-op model; each branch returns its outputs
    and, per output, what of it TFLM defines (:data:`Defined`)."""

    invocations: int = RUNS
    litert: bool = False  # LiteRT has no kernels for TFLM's signal operators
    #: Before this run the program calls ``tvmgen_<name>_reset()`` and TFLM's interpreter its
    #: ``reset()`` (every op's Reset); None: never.
    reset_at: int | None = None
    #: Input values per run: ``inputs(rng, details, run) -> arrays`` (default :func:`values`).
    inputs: Callable[..., list[np.ndarray]] | None = field(default=None, compare=False,
                                                           repr=False)

    @property
    def dtype(self) -> str:
        return self.mode

    def build(self) -> tuple[bytes, list[str]]:
        return self._signal_built[0], self._signal_built[1]

    @property
    def defined(self) -> list[Defined]:
        return self._signal_built[2]

    @cached_property
    def _signal_built(self) -> tuple[bytes, list[str], list[Defined]]:
        mb = ModelBuilder(seed=[SEED_BASE, zlib.crc32(self.model_id.encode())],
                          description=self.model_id)
        labels, defined = [], []
        for k, br in enumerate(self.branches):
            opts = {key: v for key, v in br.items() if key not in ("label", "seed")}
            assert self.branch is not None
            outs = self.branch(mb, self.mode, opts, f"in{k}")
            base = f"branch {k} (" + ", ".join(f"{key}={_fmt(v)}" for key, v in br.items()) + ")"
            first = len(defined)
            for j, (t, d) in enumerate(outs):
                if d.valid_of is not None:  # branch-local -> among the model's outputs
                    d = Defined(d.part, first + d.valid_of)
                mb.output(t)
                labels.append(base + (f" output {j}" if j else ""))
                defined.append(d)
        return mb.build(), labels, defined


@dataclass(frozen=True)
class Defined:
    """What of an output TFLM defines: all of it, a range of its elements (``part``), or all
    of it on the runs where the bool output ``valid_of`` is true (a branch gives its position
    among the branch's outputs; the case resolves it among the model's)."""

    part: slice | None = None
    valid_of: int | None = None


ALL = Defined()


def _fmt(v: Any) -> str:
    if isinstance(v, tuple):
        return "x".join(str(i) for i in v)
    return str(v)


def signal_case(op: str, mode: str, label: str, branch: Callable[..., Any],
                variants: list[dict[str, Any]], **kw: Any) -> SignalCase:
    case = SignalCase(op, mode, {"form": label}, branch=branch, **kw)
    case.branches = [dict(v) for v in variants]
    return case


def _in(mb: ModelBuilder, shape: tuple[int, ...], dtype: str, name: str) -> TensorRef:
    return mb.input(shape, dtype, name=name, plain=True)


def _window(mb, dtype, o, name):
    x = _in(mb, o["input_shape"], dtype, name)
    if o.get("weights") == "input":
        w = _in(mb, (x.shape[-1],), "int16", name + "_w")
    elif o.get("weights") == "random":
        w = mb.rng.integers(-32768, 32768, size=x.shape[-1]).astype(np.int16)
    else:
        w = None  # Hann
    return [(mb.signal_window(x, w, o["shift"]), ALL)]


def _auto_scale(mb, dtype, o, name):
    y, s = mb.signal_fft_auto_scale(_in(mb, o["input_shape"], dtype, name))
    return [(y, ALL), (s, ALL)]


def _fft(inverse: bool):
    def branch(mb, dtype, o, name):
        n = o["fft_length"]
        if inverse:
            x = _in(mb, (*o["rows"], (n // 2 + 1) * 2), dtype, name)
            return [(mb.signal_irfft(x, n), ALL)]
        x = _in(mb, (*o["rows"], o["samples"]), dtype, name)
        return [(mb.signal_rfft(x, n), ALL)]
    return branch


def _energy(mb, dtype, o, name):
    x = _in(mb, (o["bins"] * 2,), dtype, name)
    start, end = o["range"]
    y = mb.signal_energy(x, start, end)
    return [(y, Defined(part=slice(start, max(start, end))))]


def _filter_bank(mb, dtype, o, name):
    x = _in(mb, (o["bins"],), dtype, name)
    if o["tables"] == "mel":
        tables = signal_tables.filter_bank_tables(o["bins"], o["rate"], o["channels"],
                                                  *o["band"], *o.get("layout", (4, 4)))
    else:  # random weights of both signs, random bands (some empty)
        nc, rng = o["channels"], mb.rng
        widths = rng.integers(0, 6, size=nc + 1).astype(np.int16)
        starts = np.array([rng.integers(0, o["bins"] - w + 1) for w in widths], np.int16)
        wstarts = np.cumsum(np.concatenate([[0], widths[:-1]])).astype(np.int16)
        total = max(int(widths.sum()), 1)
        tables = signal_tables.FilterBankTables(
            0, o["bins"], rng.integers(-32768, 32768, total).astype(np.int16),
            rng.integers(-32768, 32768, total).astype(np.int16), starts, wstarts, widths)
    return [(mb.signal_filter_bank(x, o["channels"], tables=tables), ALL)]


def _square_root(mb, dtype, o, name):
    x = _in(mb, o["input_shape"], dtype, name)
    shift = o["shift"]
    if shift == "input":  # the shift of an auto scale: an activation
        s = mb.reshape(_in(mb, (1,), "int32", name + "_s"), ())
        return [(mb.signal_filter_bank_square_root(x, s), ALL)]
    return [(mb.signal_filter_bank_square_root(x, shift), ALL)]


def _log(mb, dtype, o, name):
    x = _in(mb, o["input_shape"], dtype, name)
    return [(mb.signal_filter_bank_log(x, o["scale"], o["bits"]), ALL)]


def _pcan(mb, dtype, o, name):
    x = _in(mb, o["input_shape"], dtype, name)
    if o.get("noise") == "constant":
        noise = mb._add_tensor(name + "_noise", x.shape, "uint32",
                               data=mb.rng.integers(0, 1 << 32, x.shape, dtype=np.uint32))
    else:
        noise = _in(mb, x.shape, dtype, name + "_noise")
    lut = None
    if o["lut"] == "random":
        lut = mb.rng.integers(-32768, 32768, 125).astype(np.int16)
    elif o["lut"] != "default":
        strength, offset, gain_bits = o["lut"]
        lut = signal_tables.pcan_gain_lut(strength, offset, 7, gain_bits)
    return [(mb.signal_pcan(x, noise, gain_lut=lut, snr_shift=o["snr_shift"]), ALL)]


def _stateless_cases() -> list[SignalCase]:
    cases = [
        signal_case("SignalWindow", "int16", "variants", _window, [
            {"input_shape": (1, 480), "shift": 12}, {"input_shape": (3, 20), "shift": 7,
                                                     "weights": "random"},
            {"input_shape": (2, 3, 8), "shift": 0, "weights": "random"},
            {"input_shape": (5,), "shift": 31, "weights": "random"},
            {"input_shape": (2, 9), "shift": 3, "weights": "input"}]),
        signal_case("SignalFftAutoScale", "int16", "variants", _auto_scale, [
            {"input_shape": (480,)}, {"input_shape": (33,)}, {"input_shape": (1,)}],
            inputs=_auto_scale_inputs, invocations=6),
        signal_case("SignalEnergy", "int16", "ranges", _energy, [
            {"bins": 257, "range": (5, 241)}, {"bins": 33, "range": (0, 33)},
            {"bins": 17, "range": (3, 4)}, {"bins": 9, "range": (4, 2)},
            {"bins": 9, "range": (9, 9)}]),
        signal_case("SignalFilterBank", "uint32", "tables", _filter_bank, [
            {"bins": 257, "tables": "mel", "rate": 16000, "channels": 40, "band": (125, 7500)},
            {"bins": 129, "tables": "mel", "rate": 8000, "channels": 16, "band": (100, 3800),
             "layout": (1, 1)},
            {"bins": 65, "tables": "mel", "rate": 16000, "channels": 32, "band": (20, 7000)},
            {"bins": 20, "tables": "random", "channels": 7}]),
        signal_case("SignalFilterBankSquareRoot", "uint64", "shifts", _square_root, [
            {"input_shape": (40,), "shift": 0}, {"input_shape": (7,), "shift": 31},
            {"input_shape": (16,), "shift": 5}, {"input_shape": (40,), "shift": "input"}],
            inputs=_square_root_inputs),
        signal_case("SignalFilterBankLog", "uint32", "scales", _log, [
            {"input_shape": (40,), "scale": 64, "bits": 3},
            {"input_shape": (9,), "scale": 1, "bits": 0},
            {"input_shape": (9,), "scale": 1000000, "bits": 0},
            {"input_shape": (9,), "scale": -3, "bits": 31},
            {"input_shape": (9,), "scale": 2**31 - 1, "bits": 12}]),
        signal_case("SignalPCAN", "uint32", "tables", _pcan, [
            {"input_shape": (40,), "lut": "default", "snr_shift": 6},
            {"input_shape": (12,), "lut": (0.5, 10.0, 16), "snr_shift": 0},
            {"input_shape": (12,), "lut": "random", "snr_shift": 40},
            {"input_shape": (5,), "lut": "default", "snr_shift": 6, "noise": "constant"}]),
    ]
    fft_variants = [
        {"fft_length": 512, "rows": (1,), "samples": 480},
        {"fft_length": 64, "rows": (2,), "samples": 64},
        {"fft_length": 64, "rows": (3,), "samples": 50},
        {"fft_length": 96, "rows": (1,), "samples": 96},   # 48 = 4 * 4 * 3: radix 3
        {"fft_length": 80, "rows": (2, 2), "samples": 77},  # 40 = 4 * 2 * 5: radices 2, 5
        {"fft_length": 12, "rows": (1,), "samples": 12},   # 6 = 2 * 3
        {"fft_length": 4, "rows": (1,), "samples": 3}]
    for mode in ("int16", "int32", "float32"):
        cases.append(signal_case("SignalRfft", mode, "lengths", _fft(False), fft_variants))
        cases.append(signal_case("SignalIrfft", mode, "lengths", _fft(True), [
            {k: v for k, v in var.items() if k != "samples"} for var in fft_variants]))
    return cases


def _auto_scale_inputs(rng: np.random.Generator, dets: list[dict[str, Any]], run: int
                       ) -> list[np.ndarray]:
    """Every magnitude of maximum, all zeros, and TFLM's int16 running maximum wrapping at
    -32768 (a later positive value then sets the shift)."""
    out = []
    for d in dets:
        n = int(np.prod(d["shape"]))
        if run == 4:
            x = np.zeros(n, np.int16)
        elif run == 5:
            x = rng.integers(-20, 20, n).astype(np.int16)
            x[0] = -32768
        else:
            x = values(rng, np.int16, (n,), run) >> int(rng.integers(0, 16))
        out.append(x.reshape(d["shape"]).astype(np.int16))
    return out


def _square_root_inputs(rng: np.random.Generator, dets: list[dict[str, Any]], run: int
                        ) -> list[np.ndarray]:
    """Channels spread over every magnitude (the 32-bit path below 2^32 included); an
    activation shift anywhere in [0, 31]."""
    return [values(rng, d["dtype"], d["shape"], run) if d["dtype"] != np.int32
            else rng.integers(0, 32, d["shape"]).astype(np.int32) for d in dets]


# --- running and comparing ---------------------------------------------------------------------


def tflm_sequence(model: bytes, runs: list[list[np.ndarray]], reset_at: int | None = None
                  ) -> list[list[np.ndarray]]:
    """The outputs of every run, invoked in turn in one TFLM interpreter (state carries), its
    ``reset()`` called before run ``reset_at``."""
    from tflite_micro.python.tflite_micro import runtime

    interp = runtime.Interpreter.from_bytes(bytes(model), arena_size=1 << 22)
    n_out = len(R.output_details(model))
    result = []
    for r, inputs in enumerate(runs):
        if r == reset_at:
            interp.reset()
        for i, x in enumerate(inputs):
            interp.set_input(x, i)
        interp.invoke()
        result.append([np.array(interp.get_output(i), copy=True) for i in range(n_out)])
    return result


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    if want.dtype.kind == "f":
        return bool(np.array_equal(got.view(np.uint32), want.view(np.uint32)))
    return bool(np.array_equal(got, want))


def _describe(got: np.ndarray, want: np.ndarray) -> str:
    bad = got != want if want.dtype.kind != "f" else got.view(np.uint32) != want.view(np.uint32)
    idx = tuple(int(i) for i in np.argwhere(np.atleast_1d(bad))[0])
    g, w = np.atleast_1d(got)[idx], np.atleast_1d(want)[idx]
    return f"{int(np.sum(bad))}/{bad.size} elements differ; first at {idx}: emitted {g!r}, TFLM {w!r}"


def check_signal(case: SignalCase, builds: Prefetcher) -> None:
    """Emit, compile and run ``case`` on its runs in one process, and compare every run with
    one TFLM interpreter's, where TFLM defines the result."""
    built = builds.get(case)
    rng = np.random.default_rng([SEED_BASE, zlib.crc32(case.id.encode()) + 1])
    make = case.inputs or (lambda rng, dets, run: [values(rng, d["dtype"], d["shape"], run)
                                                   for d in dets])
    runs = [make(rng, built.in_det, r) for r in range(case.invocations)]
    got_runs = run_built(built, runs, case.reset_at)
    want_runs = tflm_sequence(built.model, runs, case.reset_at)
    problems = []
    for r, (got, want) in enumerate(zip(got_runs, want_runs, strict=True)):
        for k, (label, d) in enumerate(zip(built.labels, case.defined, strict=True)):
            g, w = got[k], want[k]
            if d.valid_of is not None and not bool(want[d.valid_of]):
                continue  # TFLM leaves the output as it was when it is not valid
            if d.part is not None:
                rest = np.ones(g.shape, bool)
                rest[d.part] = False
                if np.any(g[rest] != 0):
                    problems.append(f"{case.id} {label} run {r}: elements outside "
                                    f"{d.part.start}..{d.part.stop} are not zero")
                g, w = g[d.part], w[d.part]
            if not _same(g, w):
                problems.append(f"{case.id} {label} run {r}: {_describe(g, w)}")
    assert not problems, (f"{len(problems)} mismatches (PROJECT_API_EMIT_SEED={SEED_BASE}):\n"
                          + "\n".join(problems[:20]))


def _spectral_subtraction(mb, dtype, o, name):
    x = _in(mb, o["input_shape"], dtype, name)
    kw = {k: v for k, v in o.items() if k not in ("input_shape", "label")}
    y, noise = mb.signal_filter_bank_spectral_subtraction(x, **kw)
    return [(y, ALL), (noise, ALL)]


def _framer(mb, dtype, o, name):
    x = _in(mb, o["input_shape"], dtype, name)
    y, valid = mb.signal_framer(x, o["size"], o["step"], o["prefill"])
    return [(y, Defined(valid_of=1)), (valid, ALL)]


def _stacker(mb, dtype, o, name):
    x = _in(mb, o["input_shape"], dtype, name)
    y, valid = mb.signal_stacker(x, *o["context"], o["step"])
    return [(y, Defined(valid_of=1)), (valid, ALL)]


def _delay(mb, dtype, o, name):
    return [(mb.signal_delay(_in(mb, o["input_shape"], dtype, name), o["delay"]), ALL)]


def _overlap_add(mb, dtype, o, name):
    return [(mb.signal_overlap_add(_in(mb, o["input_shape"], dtype, name), o["step"]), ALL)]


#: Runs of the stateful cases, and the run before which both sides reset.
STATEFUL_RUNS, RESET_AT = 9, 6


def _stateful_cases() -> list[SignalCase]:
    kw = {"invocations": STATEFUL_RUNS, "reset_at": RESET_AT}
    cases = [
        signal_case("SignalFilterBankSpectralSubtraction", "uint32", "coefficients",
                    _spectral_subtraction, [
                        {"input_shape": (40,)},
                        {"input_shape": (7,), "clamping": True, "alternate_smoothing": 0},
                        {"input_shape": (6,), "smoothing_bits": 0,
                         "spectral_subtraction_bits": 0, "coefficients": {
                             "smoothing": 3, "one_minus_smoothing": 1,
                             "alternate_smoothing": 0, "alternate_one_minus_smoothing": 2,
                             "min_signal_remaining": 1}},
                        {"input_shape": (5,), "smoothing_bits": 31, "clamping": True,
                         "spectral_subtraction_bits": 63, "coefficients": {
                             "smoothing": 2**31 - 1, "one_minus_smoothing": -5,
                             "alternate_smoothing": -(2**31), "alternate_one_minus_smoothing": 7,
                             "min_signal_remaining": -1}}], **kw),
        signal_case("SignalFramer", "int16", "frames", _framer, [
            {"input_shape": (1, 320), "size": 480, "step": 320, "prefill": True},
            {"input_shape": (2, 8), "size": 6, "step": 4, "prefill": False},
            {"input_shape": (3, 2, 6), "size": 3, "step": 2, "prefill": True},
            {"input_shape": (1, 4), "size": 2, "step": 4, "prefill": False},
            {"input_shape": (1, 5), "size": 7, "step": 5, "prefill": False},
            {"input_shape": (6,), "size": 6, "step": 2, "prefill": True}], **kw),
        signal_case("SignalStacker", "int16", "contexts", _stacker, [
            {"input_shape": (40,), "context": (3, 0), "step": 1},
            {"input_shape": (5,), "context": (0, 1), "step": 2},
            {"input_shape": (3,), "context": (2, 2), "step": 5},
            {"input_shape": (4,), "context": (0, 0), "step": 1}], **kw),
        signal_case("SignalDelay", "int16", "lengths", _delay, [
            {"input_shape": (1, 16), "delay": 3}, {"input_shape": (2, 5), "delay": 7},
            {"input_shape": (3,), "delay": 0}, {"input_shape": (2, 2, 4), "delay": 4}], **kw),
    ]
    for mode in ("int16", "float32"):
        cases.append(signal_case("SignalOverlapAdd", mode, "steps", _overlap_add, [
            {"input_shape": (1, 3, 5), "step": 2}, {"input_shape": (2, 4, 6), "step": 6},
            {"input_shape": (4, 1), "step": 1}, {"input_shape": (2, 2, 3, 8), "step": 3}],
            **kw))
    return cases


# --- the audio front end, built in code ---------------------------------------------------------


def front_end(mb: ModelBuilder, name: str = "audio", step: int = 320, frame: int = 480,
              channels: int = 40, stack: tuple[int, int] = (2, 0)) -> list[TensorRef]:
    """TFLM's audio front end as its ``audio_preprocessor`` builds it (16 kHz, a 30 ms Hann
    window every 20 ms, a 512-point FFT, 40 mel channels from 125 Hz to 7.5 kHz, noise
    reduction, PCAN, log), fed ``step`` new samples per run by a framer and followed by a
    stacker of ``stack`` (left, right) frames of context. Outputs: the log channels, the
    noise estimate, the stacked features and whether they are valid."""
    x = _in(mb, (1, step), "int16", name)
    frames, _ = mb.signal_framer(x, frame, step, prefill=True)
    w = mb.reshape(mb.signal_window(frames, shift=12), (frame,))
    scaled, shift = mb.signal_fft_auto_scale(w)
    n_fft = signal_tables.fft_length_for(frame)
    spectrum = mb.signal_rfft(scaled, n_fft)
    tables = signal_tables.filter_bank_tables(n_fft // 2 + 1, 16000, channels, 125.0, 7500.0)
    energy = mb.signal_energy(spectrum, tables.start, tables.end)
    bank = mb.signal_filter_bank(energy, channels, tables=tables)
    root = mb.signal_filter_bank_square_root(bank, shift)
    clean, noise = mb.signal_filter_bank_spectral_subtraction(root)
    correction = int(np.log2(n_fft)) - 12 // 2
    agc = mb.signal_pcan(clean, noise, input_correction_bits=correction)
    log = mb.signal_filter_bank_log(agc, 64, correction)
    stacked, valid = mb.signal_stacker(log, *stack, 1)
    return [log, noise, stacked, valid]


def _front_end(mb, dtype, o, name):
    log, noise, stacked, valid = front_end(mb, name, stack=o["stack"])
    return [(log, ALL), (noise, ALL), (stacked, Defined(valid_of=3)), (valid, ALL)]


def chirp(run: int, step: int = 320, rate: int = 16000) -> np.ndarray:
    """Samples ``[run * step, (run + 1) * step)`` of a chirp from 200 Hz rising 4 kHz per
    second, its amplitude swelling and fading, over a little deterministic noise."""
    t = (run * step + np.arange(step)) / rate
    amp = 2000 + 12000 * np.abs(np.sin(2 * np.pi * 0.7 * t))
    noise = np.random.default_rng(run).normal(0, 30, step)
    x = amp * np.sin(2 * np.pi * (200 * t + 2000 * t * t)) + noise
    return np.clip(np.round(x), -32768, 32767).astype(np.int16).reshape(1, step)


FRONT_END = [signal_case("SignalFramer", "int16", "audio_front_end", _front_end,
                         [{"stack": (2, 1)}],
                         inputs=lambda rng, dets, run: [chirp(run)], invocations=12, reset_at=8)]

# --- CAST to and from uint32 (the energies of TFLM's audio front end) ---------------------------


def _cast(dst: str):
    def branch(mb, dtype, o, name):
        return [(mb.cast(_in(mb, o["input_shape"], dtype, name), dst), ALL)]
    return branch


def _unsigned_floats(rng: np.random.Generator, dets: list[dict[str, Any]], run: int
                     ) -> list[np.ndarray]:
    """float32 values a uint32 holds (TFLM's conversion is undefined outside [0, 2^32))."""
    top = (4e9, 100.0, 1.0, 70000.0)[run % 4]
    return [rng.uniform(0, top, d["shape"]).astype(np.float32) for d in dets]


def _cast_cases() -> list[SignalCase]:
    types = ("float32", "int8", "int16", "int32", "bool", "uint32")
    cases = []
    for src in types:
        for dst in types:
            if "uint32" not in (src, dst):
                continue
            case = signal_case("CAST", src, f"to_{dst}", _cast(dst),
                               [{"input_shape": (3, 7)}, {"input_shape": (5,)}])
            if (src, dst) == ("float32", "uint32"):
                case.inputs = _unsigned_floats
            cases.append(case)
    return cases


CASES: list[SignalCase] = _stateless_cases() + _stateful_cases() + FRONT_END + _cast_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_matches_tflm(case: SignalCase, builds: Prefetcher) -> None:
    check_signal(case, builds)


def test_pool_at_lower_bound() -> None:
    """Every case's activation pool (the FFTs' work buffers included) stays at the planner's
    lower bound."""
    for case in CASES:
        gen = emit_sources(case.build()[0])
        assert gen.workspace_size_bytes == gen.lower_bound_bytes, case.id


# --- refusals ----------------------------------------------------------------------------------


def _one(build: Callable[[ModelBuilder], Any]) -> Callable[[], bytes]:
    def make() -> bytes:
        mb = ModelBuilder(seed=1)
        out = build(mb)
        for t in out if isinstance(out, (list, tuple)) else [out]:
            mb.output(t)
        return mb.build()
    return make


def _raw(name: str, options: bytes, shape=(1, 16), dtype="int16", out=None):
    """Custom op ``name`` with raw ``options`` bytes on an input of ``shape``."""
    def build(mb: ModelBuilder):
        x = _in(mb, shape, dtype, "x")
        ins = [x]
        if name == "SignalWindow":
            ins.append(mb._int16_constant(np.ones(shape[-1], np.int16), "w"))
        return mb.signal_op(name, ins, out or [(shape, dtype)], options)[0]
    return _one(build)


def _opts(**kw: Any) -> bytes:
    from flatbuffers import flexbuffers
    return bytes(flexbuffers.Dumps(kw))


def _i16(mb: ModelBuilder, shape=(1, 16), dtype="int16") -> TensorRef:
    return _in(mb, shape, dtype, "x")


REFUSED = [
    ("corrupt options", _raw("SignalWindow", b"\x07\xff\x13\x00\x24"),
     r"SignalWindow' \(node 0\): custom options are not a valid FlexBuffers map"),
    ("options not a map", _raw("SignalWindow", bytes.fromhex("0c0401")),
     r"custom options are not a valid FlexBuffers map \(the root is a INT, not a map\)"),
    ("options truncated", _raw("SignalWindow", _opts(shift=3)[2:]),
     r"custom options are not a valid FlexBuffers map"),
    ("missing key", _raw("SignalWindow", _opts()),
     r"custom options have keys \[\] \(missing shift\); TFLM reads its options by position"),
    ("extra key", _raw("SignalWindow", _opts(shift=1, zoom=2)),
     r"\(unexpected zoom\); TFLM reads its options by position and needs exactly \['shift'\]"),
    ("float option", _raw("SignalWindow", _opts(shift=1.5)),
     r"custom option 'shift' is a FLOAT; TFLM reads an inline int there"),
    ("window shift", _one(lambda mb: mb.signal_window(_i16(mb), np.ones(16, np.int16), 32)),
     r"custom option shift = 32 is out of \[0, 31\]"),
    ("window int32", _one(lambda mb: mb.signal_window(_i16(mb, dtype="int32"), np.ones(16))),
     r"SignalWindow' \(node 0\): input 0 'x' is int32: int32 is not supported "
     r"\(supported: int16\)"),
    ("window length", _one(lambda mb: mb.signal_window(_i16(mb), np.ones(8, np.int16))),
     r"weights '.*' have 8 values, the innermost dimension of 'x' 16; they must match"),
    ("rfft odd", _one(lambda mb: mb.signal_rfft(_i16(mb, (1, 9)), 9)),
     r"fft_length 9 is not supported: it takes an even length of at least 4"),
    ("rfft radix 7", _one(lambda mb: mb.signal_rfft(_i16(mb, (1, 28)), 28)),
     r"fft_length 28 is not supported: .*has the factor 7, for which TFLM's kissfft crashes"),
    ("rfft too many samples", _one(lambda mb: mb.signal_rfft(_i16(mb, (1, 80)), 64)),
     r"input 'x' has 80 samples per row, more than fft_length 64"),
    ("rfft T", _raw("SignalRfft", _opts(T=2, fft_length=16), out=[((1, 18), "int16")]),
     r"custom option T = 2 \(int32\) differs from the type int16 of 'x'"),
    ("irfft bins", _raw("SignalIrfft", _opts(T=7, fft_length=16), out=[((1, 16), "int16")]),
     r"input 'x' has 16 values per row; an inverse FFT of 16 points takes 18"),
    ("energy range", _one(lambda mb: mb.signal_energy(_i16(mb, (20,)), 2, 11)),
     r"custom option end_index = 11 is out of \[-2147483648, 10\]"),
    ("filter bank activation table", _one(lambda mb: mb.signal_op(
        "SignalFilterBank", [_i16(mb, (9,), "uint32")] + [_in(mb, (3,), "int16", f"t{i}")
                                                           for i in range(5)],
        [((2,), "uint64")], {"num_channels": 2})[0]),
     r"weights '.*' is an activation; the emitter takes the filter bank's tables as constants"),
    ("filter bank band", _one(lambda mb: mb.signal_filter_bank(
        _i16(mb, (9,), "uint32"), 1, tables=signal_tables.FilterBankTables(
            0, 9, np.ones(4, np.int16), np.ones(4, np.int16), np.array([0, 7], np.int16),
            np.array([0, 0], np.int16), np.array([2, 4], np.int16)))),
     r"channel 1 reads bins \[7, 11\) and weights \[0, 4\), outside the 9 bins of 'x'"),
    ("square root shift", _one(lambda mb: mb.signal_filter_bank_square_root(
        _i16(mb, (4,), "uint64"), 40)),
     r"scale_bits '.*' is 40; a right shift of a uint32 takes \[0, 31\]"),
    ("log shift", _one(lambda mb: mb.signal_filter_bank_log(_i16(mb, (4,), "uint32"), 64, 32)),
     r"custom option input_correction_bits = 32 is out of \[0, 31\]"),
    ("pcan short table", _one(lambda mb: mb.signal_pcan(
        _i16(mb, (4,), "uint32"), _in(mb, (4,), "uint32", "n"),
        gain_lut=np.zeros(100, np.int16))),
     r"gain_lut '.*' has 100 entries; TFLM's lookup reads up to 125"),
    ("unknown signal op", _raw("SignalFoo", _opts()),
     r"custom operator 'SignalFoo' \(node 0\) computing '.*': operator not supported"),
]


@pytest.mark.parametrize(("make", "pattern"), [(m, p) for _, m, p in REFUSED],
                         ids=[label for label, _, _ in REFUSED])
def test_refusals_are_one_line(make: Callable[[], bytes], pattern: str) -> None:
    from project_api.errors import EmitError

    with pytest.raises(EmitError, match=pattern) as info:
        emit_sources(make())
    assert "\n" not in str(info.value)


def test_corrupt_options_never_crash_the_reader() -> None:
    """Every mutation of real options bytes (flipped, dropped, appended, truncated bytes) is
    read as TFLM's kernel would read it, or refused in one line: never another exception."""
    from project_api.emit.ops import _signal
    from project_api.errors import EmitError
    from project_api.tflite.graph import Operator

    keys = {"alternate_one_minus_smoothing": "int", "alternate_smoothing": "int",
            "clamping": "bool", "min_signal_remaining": "int", "num_channels": "int",
            "one_minus_smoothing": "int", "smoothing": "int", "smoothing_bits": "int",
            "spectral_subtraction_bits": "int"}
    good = _opts(**{k: (True if v == "bool" else 5) for k, v in keys.items()})
    rng = np.random.default_rng(11)
    read = refused = 0
    for trial in range(3000):
        raw = bytearray(good)
        for _ in range(int(rng.integers(1, 4))):
            how = int(rng.integers(0, 4))
            at = int(rng.integers(0, len(raw))) if raw else 0
            if how == 0 and raw:
                raw[at] = int(rng.integers(0, 256))
            elif how == 1 and raw:
                del raw[at]
            elif how == 2:
                raw.insert(at, int(rng.integers(0, 256)))
            else:
                raw = raw[:at]
        op = Operator(trial, "CUSTOM", [], [], custom_code="SignalX", custom_options=bytes(raw))
        try:
            got = _signal.options(op, keys)
        except EmitError as exc:
            assert "\n" not in str(exc)
            refused += 1
        else:
            assert set(got) == set(keys)
            read += 1
    assert refused > 1000 and read > 10, (read, refused)


# --- the front end on a device: the host template over RPC -------------------------------------


def test_front_end_in_host_template_over_rpc(tmp_path) -> None:
    """The audio front end built in code, emitted as a module of a host-template project: its
    features over successive 20 ms chunks of a chirp equal one TFLM interpreter's (the framer,
    noise estimate and stacker carried from run to run, in the state region); after
    ``Model.reset_state()`` over RPC the same chunks give the same features again."""
    from conftest import require_tool
    from mlf_kernels import generate_host_project

    from project_api.archive import mlf
    from project_api.emit import emit

    require_tool("make")
    require_tool("cc")
    mb = ModelBuilder(seed=3)
    log, noise, stacked, valid = front_end(mb, stack=(1, 1))
    for t in (log, noise, stacked, valid):
        mb.output(t)
    model = mb.build()
    tar = emit(model, tmp_path / "front.tar", name="default").path
    with mlf.open_mlf(tar) as lib:
        info = lib.module("default")
        assert info.state_size_bytes > 0 and info.reset_function == "tvmgen_default_reset"
    runs = [[chirp(r)] for r in range(6)]
    want = tflm_sequence(model, runs)
    assert not np.array_equal(want[1][1], want[2][1]), "the noise estimate must move"
    with generate_host_project(tar, tmp_path / "prj") as project, project.session() as session:
        m = session.model()
        for _ in range(2):
            for r, (x,) in enumerate(runs):
                m.set_input(0, x)
                m.run()
                got = [m.get_output(k) for k in range(4)]
                for k in (0, 1, 3):
                    np.testing.assert_array_equal(got[k], want[r][k], err_msg=f"run {r} out {k}")
                if want[r][3]:
                    np.testing.assert_array_equal(got[2], want[r][2], err_msg=f"run {r}")
            assert m.reset_state() is True


def test_front_end_on_qemu_cortex_m4(tmp_path) -> None:
    """The audio front end built in code on QEMU's Cortex-M4 (mps2-an386): eight 20 ms chunks
    of a chirp in one firmware, state carried, a reset before the sixth; every run's features
    bit-exact with TFLM (one interpreter, reset() before the sixth)."""
    from conftest import require_tool

    from project_api.emit import cortex_m_harness as H

    for tool in (H.CC, H.QEMU):
        require_tool(tool)
    mb = ModelBuilder(seed=3)
    log, noise, _, _ = front_end(mb)
    mb.output(log)
    mb.output(noise)
    model = mb.build()
    gen = emit_sources(model, name="front", target="cortex-m4")
    runs = [[chirp(r)] for r in range(8)]
    fw = H.build(gen, runs[0], tmp_path, sequence=runs[1:], reset_at=5)
    result = H.run(fw, timeout=240)
    want = tflm_sequence(model, runs, reset_at=5)
    for r, (got, ref) in enumerate(zip(result.runs, want, strict=True)):
        for k in range(2):
            np.testing.assert_array_equal(got[k], ref[k].reshape(got[k].shape),
                                          err_msg=f"front end run {r} output {k} on QEMU")

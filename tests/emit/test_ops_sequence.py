"""Sequence models against TFLite Micro (and LiteRT where it computes the same): LOGISTIC and
TANH (float32, int8, int16 with TFLM's table), SVDF (float32, int8 with int16 or int8 state) and
UNIDIRECTIONAL_SEQUENCE_LSTM (float32, int8 8x8_16, int16x8), and models built of them: an
MNIST LSTM (28 steps x 28 features -> 10 classes) and an SVDF keyword model with int16 state.

SVDF and LSTM keep their state in variable tensors: those cases run their input sets in turn in
one process and compare every run with one TFLM interpreter fed the same sequence (state
carried); one resets the state midway (a fresh interpreter from there). The machinery is
``tests/helpers/emit_parity.py``; the int8 LSTM cases also run with the Cortex-M4 kernels (their
gates on the FULLY_CONNECTED DSP loop, the intrinsics' portable definitions on the host).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers.emit_parity import Case, Prefetcher, check_parity, with_branches, with_targets
from helpers.state_models import Branch, case_of

from project_api.emit import emit_sources, read_tflite
from project_api.emit.codegen import generate
from project_api.emit.quantize import SIGMOID_TABLE_Q16
from project_api.emit.reference import run_tflm
from project_api.errors import UnsupportedOperatorError
from project_api.tflite.builder import ModelBuilder
from project_api.tflite.tensors import TensorRef

pytest_plugins = ("helpers.emit_parity",)

#: Runs of every stateful case (state carried through all of them).
INVOCATIONS = 5
# Checked against TFLM alone (litert=False): int16 LOGISTIC/TANH (LiteRT's own table is up to
# 12 LSB from TFLM's), the integer LSTM (LiteRT needs the converter's intermediate tensors, it
# computes the gates at their scales, and has no int16x8 form), SVDF with int8 time weights and
# state (LiteRT computes it otherwise).


def _act(op: str, quant: tuple[float, int] | None = None,
         value_range: tuple[float, float] = (-8.0, 8.0)) -> Branch:
    """LOGISTIC or TANH on an input of ``quant`` (or one covering ``value_range``)."""

    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        x = mb.input(opts["input_shape"], dtype, quant=quant, value_range=value_range, name=name)
        return mb.logistic(x) if op == "LOGISTIC" else mb.tanh(x)

    return branch


def _activation_cases() -> list[Case]:
    cases = []
    for op in ("LOGISTIC", "TANH"):
        per_seed = [{"input_shape": (1, 4, 4, 3)}, {"input_shape": (2, 17)},
                    {"input_shape": (1, 1, 1, 300)}]
        for mode in ("float32", "int8"):
            cases.append(with_branches(op, mode, {}, per_seed, activations=False))
        # int8 zero points at the extremes, and a wide and a narrow input scale
        cases.append(case_of(op, "int8", "edges", [
            (_act(op, value_range=(0.0, 6.0)), {"input_shape": (1, 64)}),
            (_act(op, value_range=(-6.0, 0.0)), {"input_shape": (1, 64)}),
            (_act(op, value_range=(-40.0, 40.0)), {"input_shape": (3, 7)}),
            (_act(op, value_range=(-0.5, 0.5)), {"input_shape": (3, 7)})]))
        # int16: power-of-two input scales (TFLM's exact 3 << shift path; TANH takes 2^-11 too)
        # and general ones (the multiplier path)
        pots = [2.0 ** -12] + ([2.0 ** -11] if op == "TANH" else []) + [2.0 ** -10]
        cases.append(case_of(op, "int16x8", "scales",
                             [(_act(op, (s, 0)), {"input_shape": (1, 4, 4, 3)}) for s in pots]
                             + [(_act(op, None, r), {"input_shape": (2, 33)})
                                for r in ((-8.0, 8.0), (-3.0, 3.0), (-30.0, 30.0))],
                             litert=False))  # LiteRT's own int16 table
    return cases


def _svdf(units: int, rank: int, memory: int, activation: str = "NONE",
          state_dtype: str | None = None, bias: bool = True, state_data: bool = False) -> Branch:
    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        x = mb.input(opts["input_shape"], dtype, value_range=(-1.0, 1.0), name=name)
        return mb.svdf(x, units, rank, memory, activation, state_dtype, bias,
                       state_data=state_data)

    return branch


def _lstm(units: int, time_major: bool = False, cell_clip: float = 0.0,
          cell_scale: float = 2.0 ** -11, hidden: tuple[float, float] = (-1.0, 1.0)) -> Branch:
    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        from project_api.tflite.tensors import quantize_params

        x = mb.input(opts["input_shape"], dtype, value_range=(-1.0, 1.0), name=name)
        hq = quantize_params(*hidden, dtype) if dtype != "float32" else None
        return mb.lstm(x, units, time_major, cell_clip, cell_scale, hq)

    return branch


def mnist_lstm(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    """The MNIST LSTM example's topology: 28 rows x 28 pixels -> LSTM(20, every step) ->
    flatten -> FULLY_CONNECTED 10 -> SOFTMAX."""
    x = mb.input((1, 28, 28), dtype, value_range=(0.0, 1.0), name=name)
    h = mb.lstm(x, 20)
    return mb.softmax(mb.fully_connected(mb.reshape(h, (1, 28 * 20)), 10))


def keyword_svdf(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    """A keyword-spotting stack as TFLM's keyword benchmark has it: int8 frames through two
    SVDFs with int16 state (RELU), then FULLY_CONNECTED 4 and SOFTMAX (int8 -> int16, as the
    benchmark's model ends)."""
    x = mb.input((1, 40), dtype, value_range=(-1.0, 1.0), name=name)
    act = "RELU" if dtype == "int8" else "NONE"
    h = mb.svdf(x, 24, 1, 8, act, "int16")
    h = mb.svdf(h, 16, 2, 6, act, "int16")
    return mb.softmax(mb.fully_connected(h, 4), out_dtype="int16" if dtype == "int8" else None)


def _softmax16(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    """SOFTMAX of an int8 input into int16 (scale 1/65536, zero point -32768)."""
    x = mb.input(opts["input_shape"], dtype, value_range=opts["range"], name=name)
    return mb.softmax(x, opts.get("beta", 1.0), out_dtype="int16")


def _sequence_cases() -> list[Case]:
    stateful = {"stateful": True, "invocations": INVOCATIONS}
    cases = [
        case_of("SVDF", "float32", "forms", [
            (_svdf(4, 1, 3), {"input_shape": (1, 6)}),
            (_svdf(3, 2, 5, "RELU"), {"input_shape": (2, 9)}),
            (_svdf(2, 3, 4, "TANH"), {"input_shape": (1, 5)}),
            (_svdf(5, 1, 2, "RELU6"), {"input_shape": (3, 4)})], **stateful),
        # a state tensor holding data: TFLM ignores it (the state starts at zero); LiteRT
        # refuses such a model
        case_of("SVDF", "float32", "state_data", [
            (_svdf(2, 1, 3, state_data=True), {"input_shape": (1, 4)})], litert=False,
            **stateful),
        case_of("SVDF", "int8", "state_data", [
            (_svdf(2, 1, 3, "RELU", "int16", state_data=True), {"input_shape": (1, 4)})],
            litert=False, **stateful),
        case_of("SVDF", "int8", "int16_state", [
            (_svdf(4, 1, 3, "RELU", "int16"), {"input_shape": (1, 6)}),
            (_svdf(3, 2, 5, "RELU", "int16"), {"input_shape": (2, 9)}),
            (_svdf(6, 1, 10, "RELU", "int16"), {"input_shape": (1, 20)})], **stateful),
        case_of("SVDF", "int8", "int8_state", [
            (_svdf(4, 1, 3, "RELU", "int8"), {"input_shape": (1, 6)}),
            (_svdf(3, 2, 5, "NONE", "int8"), {"input_shape": (2, 9)})],
            litert=False, **stateful),
        case_of("UNIDIRECTIONAL_SEQUENCE_LSTM", "float32", "forms", [
            (_lstm(4), {"input_shape": (1, 3, 5)}),
            (_lstm(3, time_major=True), {"input_shape": (4, 2, 3)}),
            (_lstm(5, cell_clip=0.5), {"input_shape": (2, 2, 6)})], **stateful),
        case_of("UNIDIRECTIONAL_SEQUENCE_LSTM", "int8", "forms", [
            (_lstm(4), {"input_shape": (1, 3, 5)}),
            (_lstm(3, time_major=True), {"input_shape": (4, 2, 3)}),
            (_lstm(5, cell_clip=0.5), {"input_shape": (2, 2, 6)}),
            (_lstm(4, cell_scale=2.0 ** -15, hidden=(0.0, 1.0)), {"input_shape": (1, 2, 4)}),
            (_lstm(4, cell_scale=2.0 ** -8, hidden=(-1.0, 0.0)), {"input_shape": (1, 2, 4)})],
            litert=False, **stateful),
        case_of("UNIDIRECTIONAL_SEQUENCE_LSTM", "int16x8", "forms", [
            (_lstm(4), {"input_shape": (1, 3, 5)}),
            (_lstm(3, time_major=True), {"input_shape": (4, 2, 3)}),
            (_lstm(5, cell_clip=0.5), {"input_shape": (2, 2, 6)})],
            litert=False, **stateful),
        # the models of the issue: bit-exact over several invocations, state carried, a reset
        case_of("UNIDIRECTIONAL_SEQUENCE_LSTM", "float32", "mnist", [(mnist_lstm, {})],
                **stateful),
        case_of("UNIDIRECTIONAL_SEQUENCE_LSTM", "int8", "mnist", [(mnist_lstm, {})],
                litert=False, reset_at=3, **stateful),
        case_of("SVDF", "int8", "keyword", [(keyword_svdf, {})], reset_at=3, **stateful),
        case_of("SOFTMAX", "int8", "int16_output", [
            (_softmax16, {"input_shape": (1, 12), "range": (-4.0, 4.0)}),
            (_softmax16, {"input_shape": (3, 5), "range": (-10.0, 2.0), "beta": 0.5}),
            (_softmax16, {"input_shape": (2, 1, 40), "range": (0.0, 1.0)})]),
    ]
    return cases


# the int8 LSTM cases also run emitted for the DSP target (its gates on the SMLAD loop)
CASES = with_targets(_activation_cases() + _sequence_cases())


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_parity(case: Case, builds: Prefetcher) -> None:
    check_parity(case, builds)


def test_the_sigmoid_table_is_tflms():
    """Every entry of the table the int16 kernels interpolate, read back through TFLM's own
    int16 TANH: with input scale 1/6144 the input 128 k lands on entry k with no interpolation,
    and the output is entry k - 32768."""
    mb = ModelBuilder()
    x = mb.input((1, 256), "int16", quant=(1.0 / 6144.0, 0), name="x")
    mb.output(mb.tanh(x))
    model = mb.build()
    got = run_tflm(model, [(np.arange(256) * 128).astype(np.int16).reshape(1, 256)])[0]
    np.testing.assert_array_equal(got.reshape(-1).astype(np.int32) + 32768,
                                  np.array(SIGMOID_TABLE_Q16, np.int32))


def test_lstm_and_svdf_state_lives_in_the_state_region():
    """The hidden and cell states of an LSTM and the SVDF state are variable tensors: slots of
    the state region (zero at boot, int8 ones at their zero point), not pool buffers; the pool
    stays at the planner's lower bound with the LSTM's gate buffers as scratch."""
    mb = ModelBuilder(seed=4)
    mb.output(mnist_lstm(mb, "int8", {}, "x"))
    gen = emit_sources(mb.build(), "mnist")
    names = {s.name: s for s in gen.state.slots}
    hidden = next(s for n, s in names.items() if n.endswith("/hidden"))
    cell = next(s for n, s in names.items() if n.endswith("/cell"))
    assert (hidden.size, cell.size) == (20, 40)  # int8 and int16 x 20 units
    g = read_tflite(mb.build())
    hz = next(t for t in g.tensors if t.name == hidden.name).quant.zero_point[0]
    assert hidden.reset_byte == hz & 0xFF and cell.reset_byte == 0
    assert gen.state_size_bytes == 64
    assert gen.workspace_size_bytes == gen.lower_bound_bytes
    mb = ModelBuilder(seed=4)
    mb.output(keyword_svdf(mb, "int8", {}, "x"))
    gen = emit_sources(mb.build(), "kws")
    assert [s.size for s in gen.state.slots] == [2 * 8 * 24, 2 * 6 * 32]
    assert gen.workspace_size_bytes == gen.lower_bound_bytes


def _refusal(model: bytes, match: str) -> None:
    with pytest.raises(UnsupportedOperatorError) as info:
        generate(read_tflite(model), "m")
    msg = str(info.value)
    assert "\n" not in msg and match in msg, msg


def test_refusals_are_one_line():
    # SVDF takes float32 or int8 input, as TFLM
    mb = ModelBuilder()
    x = mb.input((1, 6), "int16")
    mb.output(mb.svdf(x, 2, 1, 3, "RELU"))
    _refusal(mb.build(), "SVDF (node 0): input 0 'input_1' is int16: int16x8 is not supported")
    # SVDF without a bias, which TFLM's Prepare dereferences (it crashes)
    for dtype in ("int8", "float32"):
        mb = ModelBuilder()
        x = mb.input((1, 6), dtype)
        mb.output(mb.svdf(x, 2, 1, 3, "RELU", bias=False))
        _refusal(mb.build(), "SVDF needs its bias")
    # LOGISTIC int8 with an output zero point TFLM refuses
    mb = ModelBuilder()
    x = mb.input((1, 6), "int8")
    mb.output(mb.logistic(x, out_quant=(1 / 256, 0)))
    _refusal(mb.build(), "TFLM's LOGISTIC takes -128")
    # int16 TANH whose output scale is not 2^-15
    mb = ModelBuilder()
    x = mb.input((1, 6), "int16")
    mb.output(mb.tanh(x, out_quant=(1 / 1000, 0)))
    _refusal(mb.build(), "TFLM takes 2^-15")
    # an LSTM without its input gate (CIFG), and one with peepholes
    for cut, match in ((1, "input 1 (input gate weights) is missing"),
                       (9, "input 9 'lstm_2/cell' (peephole) is given")):
        mb = ModelBuilder()
        x = mb.input((1, 2, 3))
        mb.output(mb.lstm(x, 4))
        op = mb._ops[-1]
        op.inputs[cut] = -1 if cut == 1 else op.inputs[19]
        _refusal(mb.build(), match)
    # LSTM weights quantized per channel (TFLM's LSTM takes per-tensor scales only)
    mb = ModelBuilder()
    x = mb.input((1, 2, 3), "int8")
    mb.output(mb.lstm(x, 4))
    g = read_tflite(mb.build())
    w = g.tensor(g.operators[0].inputs[2])
    w.quant.scale = w.quant.scale * 4
    w.quant.zero_point = [0] * 4
    with pytest.raises(UnsupportedOperatorError, match="must be quantized per tensor"):
        generate(g, "m")
    # a float32 LSTM with int8 weights (TFLM would read them as float32)
    mb = ModelBuilder()
    x = mb.input((1, 2, 3), "int8")
    mb.output(mb.lstm(x, 4))
    model = mb.build()
    g = read_tflite(model)
    for t in g.tensors:
        if t.dtype == "int8" and not t.is_const:
            t.dtype = "float32"
            t.quant = None
    with pytest.raises(UnsupportedOperatorError, match="reads every weight, bias and the cell "
                                                       "state as float32"):
        generate(g, "m")


def _stream_model() -> bytes:
    from helpers.state_models import accumulate, model

    return model(accumulate(True), "int8", (2, 3))


@pytest.mark.parametrize("name", ["mnist_lstm", "keyword_svdf", "stream"])
def test_int8_sequence_models_on_qemu_cortex_m4(tmp_path, name):
    """The int8 models on QEMU's Cortex-M4 (mps2-an386, the cortex-m4 kernels): several
    invocations in one firmware, state carried, a reset before the third; every run bit-exact
    with TFLM (one interpreter over the runs, a fresh one from the reset)."""
    from conftest import require_tool

    from project_api.emit import cortex_m_harness as H
    from project_api.emit.reference import run_tflm_sequence

    for tool in (H.CC, H.QEMU):
        require_tool(tool)
    if name == "stream":
        model = _stream_model()
    else:
        mb = ModelBuilder(seed=11)
        mb.output({"mnist_lstm": mnist_lstm, "keyword_svdf": keyword_svdf}[name](
            mb, "int8", {}, "x"))
        model = mb.build()
    gen = emit_sources(model, name="seq", target="cortex-m4")
    rng = np.random.default_rng(3)
    runs = [[rng.integers(-128, 128, t.shape).astype(np.int8) for t in gen.inputs]
            for _ in range(5)]
    fw = H.build(gen, runs[0], tmp_path, sequence=runs[1:], reset_at=2)
    result = H.run(fw, timeout=240)
    want = run_tflm_sequence(model, runs, fresh_at=(2,))
    assert not np.array_equal(want[1][0], want[4][0]) or name == "stream"
    for r, (got, ref) in enumerate(zip(result.runs, want, strict=True)):
        np.testing.assert_array_equal(got[0], ref[0].reshape(got[0].shape),
                                      err_msg=f"{name} run {r} on QEMU vs TFLM")

"""Randomized parity of the arithmetic and activation operators (issue 20's ops-math family)
against TFLite Micro and LiteRT: SUB, DIV, SQUARED_DIFFERENCE, MAXIMUM, MINIMUM, PRELU, the
element-wise math (ABS, NEG, SQRT, RSQRT, EXP, LOG, FLOOR, CEIL, ROUND) and the activations
(RELU, RELU6, RELU_N1_TO_1, LEAKY_RELU, HARD_SWISH, ELU, LOG_SOFTMAX, L2_NORMALIZATION).

One case per operator and dtype scheme TFLM's reference kernel takes (one compile); its
branches vary the options, the shapes (odd sizes, broadcasting in every direction and up to
rank 6, constant operands), the activations and the quantization, zero points at the ends of
the type included. Float32 outputs must equal TFLM's bit for bit (``float_exact``: the same
arithmetic in the same order, and the same C library ``expf``/``logf``/``expm1f`` on the
host); integer outputs equal TFLM's. RELU_N1_TO_1, which TFLM lacks, is checked against
LiteRT alone (float32 within the harness's tolerance, int8 within its LSB). Also here: the
one-line refusals of what TFLM refuses, every integer kernel (and the float32 ones without
libm calls) on QEMU's Cortex-M4, and the pool at its lower bound. The machinery is
``tests/helpers/emit_parity.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers.emit_parity import ACTIVATIONS, SEEDS, Case, Prefetcher, check_parity

from project_api.tflite.builder import ModelBuilder
from project_api.tflite.tensors import TensorRef

pytest_plugins = ("helpers.emit_parity",)

#: Operand shapes of the broadcasting binary ops: (input shape, second operand's shape, whether
#: the second operand is a model input), odd sizes and broadcasting both ways, up to rank 6.
BINARY_SHAPES: list[tuple[tuple[int, ...], tuple[int, ...], bool]] = [
    ((1, 4, 4, 3), (1, 4, 4, 3), True),
    ((1, 5, 3, 7), (1, 5, 3, 7), False),
    ((1, 4, 4, 3), (1, 1, 1, 3), True),
    ((2, 3, 5), (5,), False),
    ((1, 4, 1, 3), (1, 1, 5, 3), True),
    ((3, 1), (1, 4), True),
    ((2, 1, 3, 1, 2, 2), (1, 2, 1, 3, 1, 2), True),
    ((7,), (1,), False),
]
#: Float ranges of the inputs: drawn, or all positive / all negative (int8 zero point -128 /
#: 127, the ends of the type).
RANGES: list[tuple[float, float] | None] = [None, (0.05, 2.5), (-3.0, -0.1)]


def binary_case(op: str, mode: str, activations: bool = True, const_b: bool = False,
                label: str = "", **flags: Any) -> Case:
    """One case of binary ``op``: every operand shape, each seed, activations and ranges in
    turn (``const_b``: the second operand always a constant)."""
    case = Case(op, mode, {"form": label} if label else {}, float_exact=mode == "float32",
                **flags)
    acts = ACTIVATIONS + ("RELU_N1_TO_1",) if activations else (None,)
    k = 0
    for shape, b_shape, b_input in BINARY_SHAPES:
        b_input = b_input and not const_b
        for s in SEEDS:
            br: dict[str, Any] = {"input_shape": shape, "b_shape": b_shape,
                                  "b_input": b_input, "seed": s}
            rng = RANGES[k % len(RANGES)]
            if rng is not None and mode != "int32":
                br["value_range"] = rng
                br["b_range"] = RANGES[(k + 1) % len(RANGES)] or (-2.0, 2.0)
            if activations:
                br["activation"] = acts[k % len(acts)]
            case.branches.append(br)
            k += 1
    return case


#: PRELU: (input shape, alpha shape): per channel, per pixel, one alpha, ranks 1 to 6.
PRELU_SHAPES: list[tuple[tuple[int, ...], tuple[int, ...]]] = [
    ((1, 4, 4, 3), (3,)), ((1, 5, 3, 7), (1, 1, 7)), ((1, 4, 4, 3), (1, 4, 4, 3)),
    ((2, 6), (1,)), ((9,), (9,)), ((1, 2, 3, 2, 2, 3), (1, 2, 1, 3)),
]


def prelu_case(mode: str) -> Case:
    case = Case("PRELU", mode, {}, float_exact=mode == "float32")
    k = 0
    for shape, alpha_shape in PRELU_SHAPES:
        if mode == "float32" and len(shape) > 4:
            continue  # TFLM's float PRELU takes up to 4 dimensions
        for s in SEEDS:
            br: dict[str, Any] = {"input_shape": shape, "alpha_shape": alpha_shape, "seed": s}
            if RANGES[k % len(RANGES)] is not None:
                br["value_range"] = RANGES[k % len(RANGES)]
            case.branches.append(br)
            k += 1
    return case


#: Shapes of the one-input ops: odd sizes, ranks 1 to 5, and 2048 elements (every int8 code).
UNARY_SHAPES: list[tuple[int, ...]] = [(1, 4, 4, 3), (2, 7), (5,), (1, 3, 1, 2, 5),
                                       (1, 16, 16, 8)]
#: The options each one-input op cycles through (one set per branch).
UNARY_OPTIONS: dict[str, list[dict[str, Any]]] = {
    "LEAKY_RELU": [{"alpha": 0.2}, {"alpha": -0.3}, {"alpha": 1.7}, {"alpha": 0.0},
                   {"alpha": 0.01}],
}
#: Where a one-input op's last dimension is its axis, the rows differ in length instead.
ROW_SHAPES: list[tuple[int, ...]] = [(1, 10), (3, 7), (1, 1), (2, 3, 16), (4, 1, 1, 33)]


def _through_abs(op: str):
    """A branch ``input -> ABS -> op``: the op sees only values at or above the zero point (for
    RSQRT, which TFLM refuses below it, and SQRT, LOG on positives)."""

    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        opts = dict(opts)
        x = mb.input(opts.pop("input_shape"), dtype, name=name,
                     value_range=opts.pop("value_range", (-3.0, 3.0)))
        return getattr(mb, op.lower())(mb.abs(x), **opts)

    return branch


def unary_case(op: str, mode: str, shapes: list[tuple[int, ...]] | None = None,
               through_abs: bool = False, label: str = "", **flags: Any) -> Case:
    """One case of one-input ``op``: every shape, each seed, the ranges and options in turn."""
    options = {"form": label} if label else {}
    case = Case(op, mode, options, float_exact=mode == "float32",
                branch=_through_abs(op) if through_abs else None, **flags)
    opts = UNARY_OPTIONS.get(op, [{}])
    k = 0
    for shape in shapes or UNARY_SHAPES:
        for s in SEEDS:
            br: dict[str, Any] = {"input_shape": shape, "seed": s, **opts[k % len(opts)]}
            if RANGES[k % len(RANGES)] is not None:
                br["value_range"] = RANGES[k % len(RANGES)]
            case.branches.append(br)
            k += 1
    return case


def _away_from_zero(mb: ModelBuilder, dtype: str, opts: dict[str, Any],
                    name: str) -> TensorRef:
    """A branch ``DIV(input, MAXIMUM(divisor, +1 step))`` (odd seeds: ``MINIMUM(divisor, -1
    step)``): divisors never at the zero point, which LiteRT refuses for int8 (and which is a
    division by zero for int32)."""
    opts = dict(opts)
    x = mb.input(opts.pop("input_shape"), dtype, name=name,
                 value_range=opts.pop("value_range", (-3.0, 3.0)))
    b = mb.input(opts.pop("b_shape"), dtype, name=f"{name}_b", value_range=(-2.0, 2.0))
    step = {"int32": 1.0, "float32": 0.125}.get(dtype) or b.scale[0]
    positive = mb.rng.integers(2) == 0
    limit = np.full(b.shape[-1:], step if positive else -step, np.float32)
    b = mb.maximum(b, limit) if positive else mb.minimum(b, limit)
    return mb.div(x, b, activation=opts.pop("activation", "NONE"))


def _plain_abs(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    """A branch ``ABS`` of plain (unquantized) int16 values, which TFLM also takes."""
    return mb.abs(mb.input(opts["input_shape"], dtype, name=name, plain=True))


def _audio_tail(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    """The int32 tail of TFLM's audio front end (``audio_preprocessor_int8.tflite``): a scalar
    DIV, then a clip to int8 by MINIMUM and MAXIMUM with scalar constants."""
    x = mb.input(opts["input_shape"], dtype, name=name)
    y = mb.div(x, np.array(666.0, np.float32))
    y = mb.minimum(y, np.array(127.0, np.float32))
    return mb.maximum(y, np.array(-128.0, np.float32))


def _relu6_asymmetric(mb: ModelBuilder, dtype: str, opts: dict[str, Any],
                      name: str) -> TensorRef:
    """RELU6 of int16 with a zero point other than 0, which TFLM's RELU6 (unlike its RELU)
    takes."""
    zp = int(mb.rng.integers(-3000, 3000))
    return mb.relu6(mb.input(opts["input_shape"], dtype, quant=(0.0004, zp), name=name))


def _cases() -> list[Case]:
    cases = []
    for mode in ("float32", "int8", "int16x8", "int32"):
        cases.append(binary_case("SUB", mode))
    cases.append(binary_case("DIV", "float32"))
    # int32 ADD and MUL (TFLM's audio front end scales its log energies with them). TFLM's
    # int32 ADD ignores the fused activation, which LiteRT applies: TFLM alone checks it.
    cases.append(binary_case("ADD", "int32", litert=False))
    cases.append(binary_case("MUL", "int32"))
    # Not LiteRT for int8: it refuses a divisor at its zero point, which TFLM computes, and
    # TFLM's shifts past 31 bits give other results than LiteRT's (see div.py)
    cases.append(binary_case("DIV", "int8", litert=False))
    cases.append(binary_case("DIV", "int32", const_b=True))
    for mode in ("float32", "int8", "int32"):
        case = binary_case("DIV", mode, label="away_from_zero", litert=mode != "int8")
        case.branch = _away_from_zero
        case.branches = [b for b in case.branches if b["b_input"]]
        cases.append(case)
    case = Case("DIV", "int32", {"form": "audio_frontend_tail"}, branch=_audio_tail)
    case.branches = [{"input_shape": shape, "seed": s} for s in SEEDS for shape in ((40,), (3, 5))]
    cases.append(case)
    for mode in ("float32", "int8", "int16x8", "int32"):
        # LiteRT has no int16 SQUARED_DIFFERENCE
        cases.append(binary_case("SQUARED_DIFFERENCE", mode, activations=False,
                                 litert=mode != "int16x8"))
        cases.append(binary_case("MAXIMUM", mode, activations=False))
        cases.append(binary_case("MINIMUM", mode, activations=False))
    for mode in ("float32", "int8", "int16x8"):
        cases.append(prelu_case(mode))
    for op in ("NEG", "SQRT", "EXP", "LOG", "FLOOR", "CEIL", "ROUND"):
        cases.append(unary_case(op, "float32"))
    for op in ("SQRT", "LOG", "RSQRT"):
        cases.append(unary_case(op, "float32", through_abs=True, label="positive"))
    for mode in ("float32", "int8", "int16x8"):
        for op in ("ABS", "RELU", "RELU6", "LEAKY_RELU"):
            cases.append(unary_case(op, mode))
    # LiteRT takes int16 RELU6 with zero point 0 only
    case = unary_case("RELU6", "int16x8", label="asymmetric", litert=False)
    case.branch = _relu6_asymmetric
    cases.append(case)
    case = unary_case("ABS", "int16x8", label="plain")
    case.branch = _plain_abs
    cases.append(case)
    cases.append(unary_case("RSQRT", "float32"))
    for mode in ("int8", "int16x8"):  # TFLM refuses, at run time, inputs below the zero point
        # LiteRT's int16 RSQRT rounds differently (up to 4 LSB from TFLM's)
        cases.append(unary_case("RSQRT", mode, through_abs=True, label="positive",
                                litert=mode != "int16x8"))
    for mode in ("float32", "int8"):
        # TFLM has no RELU_N1_TO_1 kernel: LiteRT's is the reference
        cases.append(unary_case("RELU_N1_TO_1", mode, tflm=False))
        cases.append(unary_case("HARD_SWISH", mode))
        cases.append(unary_case("ELU", mode))
        cases.append(unary_case("LOG_SOFTMAX", mode, shapes=ROW_SHAPES))
        cases.append(unary_case("L2_NORMALIZATION", mode, shapes=ROW_SHAPES[:4]))
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_parity(case: Case, builds: Prefetcher) -> None:
    check_parity(case, builds)


def _model(op: str, dtype: str, in_quant: Any = None, out_quant: Any = None,
           shape: tuple[int, ...] = (1, 4, 4, 3), b: Any = None,
           options: dict[str, Any] | None = None) -> bytes:
    """One ``op`` node written as it stands (``mb.operator``), for the refusals."""
    mb = ModelBuilder(seed=4)
    x = mb.input(shape, dtype, quant=in_quant, name="x")
    ins = [x] if b is None else [x, b(mb, x)]
    mb.output(mb.operator(op, ins, [(shape, dtype, out_quant)], options)[0])
    return mb.build()


#: What TFLM refuses (or this emitter beyond it), each refused in one line naming the operator,
#: the node, the tensor or parameter and what is supported.
REFUSALS: list[tuple[str, Any, str]] = [
    ("NEG int8", lambda: _model("NEG", "int8", (0.1, 0), (0.1, 0)),
     "NEG (node 0): input 0 'x' is int8: int8 is not supported (supported: float32)"),
    ("DIV int16", lambda: _model("DIV", "int16", (0.1, 0), (0.1, 0),
                                 b=lambda mb, x: mb.input(x.shape, "int16", name="b")),
     "DIV (node 0): input 0 'x' is int16: int16x8 is not supported (supported: float32, "
     "int8, int32)"),
    ("HARD_SWISH int16", lambda: _model("HARD_SWISH", "int16", (0.1, 0), (0.1, 0)),
     "int16x8 is not supported (supported: float32, int8)"),
    ("RELU_N1_TO_1 int16", lambda: _model("RELU_N1_TO_1", "int16", (0.1, 0), (0.1, 0)),
     "int16x8 is not supported (supported: float32, int8)"),
    ("LOG_SOFTMAX output", lambda: _model("LOG_SOFTMAX", "int8", (0.1, 0), (0.1, 0)),
     "has scale 0.10000000149011612 and zero point 0; TFLM requires 16/256 and 127"),
    ("L2_NORMALIZATION rank", lambda: _model("L2_NORMALIZATION", "float32",
                                             shape=(1, 2, 2, 2, 3)),
     "TFLM takes ranks 1 to 4"),
    ("L2_NORMALIZATION activation", lambda: _model(
        "L2_NORMALIZATION", "float32", options={"fused_activation_function": "RELU"}),
     "fused activation RELU not supported (TFLM takes NONE)"),
    ("PRELU float rank 5", lambda: _model("PRELU", "float32", shape=(1, 2, 2, 2, 3),
                                          b=lambda mb, x: mb.constant(np.ones(3), "float32")),
     "rank 5 float32 PRELU not supported"),
    ("PRELU int16 alpha", lambda: _model("PRELU", "int16", (0.1, 0), (0.1, 0),
                                         b=lambda mb, x: mb.constant(np.ones(3), "int16", name="alpha")),
     "PRELU (node 0): type int16 of 'alpha' not supported (supported: int8)"),
    ("SQUARED_DIFFERENCE int16 zero point", lambda: _model(
        "SQUARED_DIFFERENCE", "int16", (0.1, 3), (0.1, 0),
        b=lambda mb, x: mb.input(x.shape, "int16", name="b")),
     "TFLM's int16 SQUARED_DIFFERENCE takes zero points 0 only"),
    ("RSQRT int16 zero point", lambda: _model("RSQRT", "int16", (0.1, 5), (0.1, 0)),
     "TFLM's int16 RSQRT takes zero points 0 only"),
    ("SUB int32 quantized", lambda: _model(
        "SUB", "int32", (0.5, 0), None, b=lambda mb, x: mb.input(x.shape, "int32", name="b")),
     "SUB (node 0): int32 tensor 'x' is quantized; SUB takes plain int32 values only"),
    ("HARD_SWISH output scale", lambda: _model("HARD_SWISH", "int8", (0.5, 0), (0.001, 0)),
     "TFLM's int8 HARD_SWISH needs the output scale at least 1/128 of the input's"),
]


@pytest.mark.parametrize("make,message", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_refusals_are_one_line(make: Any, message: str) -> None:
    from project_api.emit import emit_sources
    from project_api.errors import UnsupportedOperatorError

    with pytest.raises(UnsupportedOperatorError) as info:
        emit_sources(make())
    text = str(info.value)
    assert "\n" not in text and message in text, text


def test_plain_int16_abs_is_the_plain_kernel() -> None:
    """The plain int16 ABS case really runs unquantized int16 through the plain path."""
    from project_api.emit import emit_sources

    case = next(c for c in CASES if c.op == "ABS" and c.options.get("form") == "plain")
    gen = emit_sources(case.build()[0])
    assert {k.scheme for k in gen.kernels} == {"int16x8"}
    assert all(not k.params["quantized"] for k in gen.kernels)


#: The family's integer schemes (and the float32 ops whose C needs no libm function), one
#: branch each, in one firmware for QEMU's Cortex-M4.
QEMU_BRANCHES: list[tuple[str, str, dict[str, Any]]] = [
    *((op, dt, {"b_shape": (1, 1, 4, 3)}) for op in ("SUB", "SQUARED_DIFFERENCE", "MAXIMUM",
                                                     "MINIMUM")
      for dt in ("int8", "int16", "int32", "float32")),
    ("DIV", "int8", {}), ("DIV", "int32", {"b_input": False}), ("DIV", "float32", {}),
    *(("PRELU", dt, {}) for dt in ("int8", "int16", "float32")),
    *((op, dt, {}) for op in ("ABS", "RELU", "RELU6", "LEAKY_RELU")
      for dt in ("int8", "int16", "float32")),
    *((op, dt, {}) for op in ("HARD_SWISH", "ELU", "LOG_SOFTMAX", "L2_NORMALIZATION")
      for dt in ("int8",)),
    *((op, "float32", {}) for op in ("NEG", "FLOOR", "CEIL", "ROUND", "HARD_SWISH",
                                     "L2_NORMALIZATION")),
    ("RSQRT", "int8", {"through_abs": True}), ("RSQRT", "int16", {"through_abs": True}),
]


def qemu_model() -> bytes:
    mb = ModelBuilder(seed=21, description="ops-math on Cortex-M4")
    for k, (op, dt, opts) in enumerate(QEMU_BRANCHES):
        opts = dict(opts)
        shape = (2, 10) if op in ("LOG_SOFTMAX", "L2_NORMALIZATION") else (1, 4, 4, 3)
        if opts.pop("through_abs", False):
            mb.output(getattr(mb, op.lower())(mb.abs(mb.input(shape, dt, name=f"in{k}"))))
        else:
            mb.output(mb.single_op(op, dt, shape, name=f"in{k}", **opts))
    return mb.build()


def test_family_on_qemu_cortex_m4_matches_tflm(tmp_path) -> None:
    """Every integer kernel of the family (and the float32 ones without libm calls), compiled by
    arm-none-eabi-gcc -O2 for the Cortex-M4F and run on QEMU, bit for bit TFLM's."""
    from conftest import require_tool

    from project_api.emit import cortex_m_harness as H
    from project_api.emit import emit_sources
    from project_api.emit.reference import input_details, run_tflm

    for tool in (H.CC, H.SIZE, H.QEMU):
        require_tool(tool)
    model = qemu_model()
    gen = emit_sources(model, name="math", target="cortex-m4")
    rng = np.random.default_rng(5)
    inputs = []
    for d in input_details(model):
        if d["dtype"].kind == "f":
            inputs.append(rng.uniform(-4.0, 4.0, d["shape"]).astype(np.float32))
        else:
            info = np.iinfo(d["dtype"])
            lo, hi = (-(1 << 20), 1 << 20) if d["dtype"].itemsize == 4 else (info.min, info.max)
            inputs.append(rng.integers(lo, hi + 1, d["shape"]).astype(d["dtype"]))
    result = H.run(H.build(gen, inputs, tmp_path), timeout=240)
    want = run_tflm(model, inputs)
    for k, (got, ref) in enumerate(zip(result.outputs, want, strict=True)):
        op, dt, _ = QEMU_BRANCHES[k]
        np.testing.assert_array_equal(got.view(np.uint8), np.asarray(ref).reshape(got.shape)
                                      .view(np.uint8), err_msg=f"{op} {dt} on QEMU vs TFLM")


def test_pool_at_its_lower_bound() -> None:
    """Every case's activation pool is the planner's lower bound (no op of the family needs
    scratch)."""
    from project_api.emit import emit_sources

    for case in CASES:
        gen = emit_sources(case.build()[0])
        assert gen.workspace_size_bytes == gen.lower_bound_bytes, case.id
        assert all(k.scratch_bytes == 0 for k in gen.kernels), case.id

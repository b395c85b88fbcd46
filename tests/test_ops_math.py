"""Randomized parity of the arithmetic and activation operators (issue 20's ops-math family)
against TFLite Micro and LiteRT: SUB, DIV, SQUARED_DIFFERENCE, MAXIMUM, MINIMUM, PRELU, the
element-wise math (ABS, NEG, SQRT, RSQRT, EXP, LOG, FLOOR, CEIL, ROUND) and the activations
(RELU, RELU6, RELU_N1_TO_1, LEAKY_RELU, HARD_SWISH, ELU, LOG_SOFTMAX, L2_NORMALIZATION).

One case per operator and dtype scheme TFLM's reference kernel takes (one compile); its
branches vary the options, the shapes (odd sizes, broadcasting in every direction and up to
rank 6, constant operands), the activations and the quantization, zero points at the ends of
the type included. Float32 outputs must equal TFLM's bit for bit (``float_exact``: the same
arithmetic in the same order, and the same C library ``expf``/``logf``/``expm1f`` on the
host); integer outputs equal TFLM's. The machinery is ``tests/helpers/emit_parity.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.emit_parity import ACTIVATIONS, SEEDS, Case, Prefetcher, check_parity

from project_api.emit.builder import ModelBuilder, TensorRef

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
                **flags: Any) -> Case:
    """One case of binary ``op``: every operand shape, each seed, activations and ranges in
    turn (``const_b``: the second operand always a constant)."""
    case = Case(op, mode, {}, float_exact=mode == "float32", **flags)
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


def _cases() -> list[Case]:
    cases = []
    for mode in ("float32", "int8", "int16x8", "int32"):
        cases.append(binary_case("SUB", mode))
    cases.append(binary_case("DIV", "float32"))
    # LiteRT refuses an int8 divisor at its zero point (TFLM computes one: see div.py)
    cases.append(binary_case("DIV", "int8", litert=False))
    cases.append(binary_case("DIV", "int32", const_b=True))
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

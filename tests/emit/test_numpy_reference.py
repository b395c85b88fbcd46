"""The numpy int8 reference (the demo's check on the base install) against TFLite Micro.

TFLM's Python interpreter is the independent reference: every model here must come out of
``run_numpy`` bit for bit as TFLM computes it, over random inputs and operator options that
reach the corners (SAME padding with an odd total, strides, dilation, a depth multiplier, fused
activations, broadcasting, windows clipped at the border, per-tensor and per-channel weights).
"""

from __future__ import annotations

import numpy as np
import pytest

from project_api.emit import reference as R
from project_api.emit.numpy_reference import OPERATORS, run_numpy
from project_api.tflite import builder as B


def _random_inputs(model: bytes, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(-128, 127, d["shape"], dtype=np.int8, endpoint=True)
            for d in R.input_details(model)]


def _assert_bit_exact(model: bytes, seeds: range = range(3)) -> None:
    for seed in seeds:
        inputs = _random_inputs(model, seed)
        got, want = run_numpy(model, inputs), R.run_tflm(model, inputs)
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == np.int8 and g.shape == w.shape
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("seed", range(4))
def test_demo_network_matches_tflm(seed: int) -> None:
    _assert_bit_exact(B.demo_model(seed))


def test_resnet8_like_network_matches_tflm() -> None:
    _assert_bit_exact(B.resnet8_like_model(1), range(1))


CASES = [
    ("CONV_2D", {}),
    ("CONV_2D", {"stride": 2, "kernel_size": 3, "activation": "RELU"}),
    ("CONV_2D", {"stride": (2, 1), "kernel_size": (2, 3), "activation": "RELU6"}),
    ("CONV_2D", {"padding": "VALID", "dilation": 2}),
    ("CONV_2D", {"kernel_size": 1, "bias": False, "activation": "RELU_N1_TO_1"}),
    ("DEPTHWISE_CONV_2D", {}),
    ("DEPTHWISE_CONV_2D", {"depth_multiplier": 2, "stride": 2, "activation": "RELU"}),
    ("DEPTHWISE_CONV_2D", {"padding": "VALID", "dilation": (2, 1), "kernel_size": (3, 2)}),
    ("FULLY_CONNECTED", {}),
    ("FULLY_CONNECTED", {"units": 7, "activation": "RELU", "bias": False}),
    ("ADD", {}),
    ("ADD", {"b_shape": (1, 1, 1, 3), "activation": "RELU"}),
    ("ADD", {"b_input": False}),
    ("AVERAGE_POOL_2D", {}),
    ("AVERAGE_POOL_2D", {"filter_size": 3, "stride": 2, "padding": "SAME"}),
    ("AVERAGE_POOL_2D", {"filter_size": (3, 2), "stride": 1, "padding": "SAME",
                         "activation": "RELU"}),
    ("MAX_POOL_2D", {"filter_size": 3, "stride": 2, "padding": "SAME"}),
    ("MAX_POOL_2D", {"padding": "VALID", "activation": "RELU6"}),
    ("RESHAPE", {"shape": (1, 48)}),
    ("SOFTMAX", {}),
    ("SOFTMAX", {"beta": 0.5}),
]


@pytest.mark.parametrize("mode", ["int8", "int8_per_channel"])
@pytest.mark.parametrize("op,options", CASES,
                         ids=[f"{op}-{'-'.join(f'{k}_{v}' for k, v in o.items()) or 'default'}"
                              for op, o in CASES])
def test_single_operator_matches_tflm(op: str, options: dict, mode: str) -> None:
    for seed in range(2):
        model = B.single_op_model(op, mode, seed, **options)
        _assert_bit_exact(model, range(seed, seed + 2))


def test_softmax_with_wide_inputs_matches_tflm() -> None:
    """A wide softmax input range puts some differences below diff_min (output -128)."""
    mb = B.ModelBuilder(seed=3)
    x = mb.input((2, 40), "int8", value_range=(-60.0, 60.0))
    mb.output(mb.softmax(x))
    _assert_bit_exact(mb.build(), range(4))


def test_every_operator_is_covered() -> None:
    assert {op for op, _ in CASES} == set(OPERATORS)


def test_an_unknown_operator_is_named() -> None:
    model = B.single_op_model("MUL", "int8")
    with pytest.raises(ValueError, match=r"does not evaluate MUL \(node 0\); it knows ADD, "):
        run_numpy(model, _random_inputs(model, 0))


def test_wrong_inputs_are_refused() -> None:
    model = B.demo_model()
    with pytest.raises(ValueError, match="the model has 1 inputs, 2 given"):
        run_numpy(model, [np.zeros((1, 16, 16, 1), np.int8)] * 2)
    with pytest.raises(ValueError, match=r"input 0: 3 elements given, the model wants shape "
                                         r"\[1, 16, 16, 1\]"):
        run_numpy(model, [np.zeros(3, np.int8)])
    with pytest.raises(ValueError, match="takes int8 tensors"):
        run_numpy(model, [np.zeros((1, 16, 16, 1), np.float32)])
    float_model = B.single_op_model("FULLY_CONNECTED", "float32")
    with pytest.raises(ValueError, match=r"takes int8 tensors \(model float32"):
        run_numpy(float_model, [np.zeros((1, 12), np.int8)])

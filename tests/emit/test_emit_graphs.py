"""Graph-level cases of the emitter: storage aliasing, several inputs/outputs, constants,
fan-out, and the checks done at emit time ("Prepare") that reject what the C cannot do."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import require_tool

from project_api.emit import emit_sources, harness
from project_api.emit import reference as R
from project_api.errors import EmitError, UnsupportedOperatorError
from project_api.tflite.builder import ModelBuilder

SANITIZE = ("-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all")


def check_parity(model: bytes, tmp_path, seeds: int = 3):
    """Emit, build under sanitizers, compare with TFLM (int8 exact, float rtol 1e-5)."""
    require_tool("gcc")
    gen = emit_sources(model)
    exe = harness.build(gen, tmp_path, cflags=SANITIZE)
    rng = np.random.default_rng(0)
    for _ in range(seeds):
        ins = [rng.integers(-128, 128, t.shape).astype(np.int8) if t.dtype == "int8"
               else rng.uniform(-2, 2, t.shape).astype(np.float32) for t in gen.inputs]
        ours = harness.run(exe, gen, ins)
        ref = R.run_tflm(model, ins)
        for o, r in zip(ours, ref, strict=True):
            r = np.asarray(r).reshape(o.shape)
            if o.dtype == np.int8:
                np.testing.assert_array_equal(o, r)
            else:
                np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-6)
    return gen


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_reshape_between_caller_buffers_is_a_copy(tmp_path, dtype):
    b = ModelBuilder(seed=1)
    x = b.input((1, 2, 3, 4), dtype)
    b.output(b.reshape(x, (1, 24)))
    gen = check_parity(b.build(), tmp_path)
    assert gen.workspace_size_bytes == 0
    assert "memcpy(out0, in0" in gen.source


def test_reshape_of_input_aliases_the_callers_buffer(tmp_path):
    b = ModelBuilder(seed=2)
    x = b.input((1, 4, 4, 2), "int8")
    y = b.reshape(x, (1, 32))
    b.output(b.fully_connected(y, 6, activation="RELU"))
    gen = check_parity(b.build(), tmp_path)
    assert gen.workspace_size_bytes == 0  # nothing intermediate needs the pool
    assert "aliases" in gen.source


def test_reshape_into_output_writes_the_callers_buffer(tmp_path):
    b = ModelBuilder(seed=3)
    x = b.input((1, 16), "int8")
    y = b.fully_connected(x, 12)
    b.output(b.reshape(y, (1, 3, 4)))
    gen = check_parity(b.build(), tmp_path)
    assert gen.workspace_size_bytes == 0


def test_fan_out_and_two_outputs(tmp_path):
    b = ModelBuilder(seed=4, per_channel=True)
    x = b.input((1, 8, 8, 3), "int8")
    y = b.conv2d(x, 4, kernel_size=3, activation="RELU6")
    p = b.max_pool2d(y, 2)
    q = b.average_pool2d(y, 2)
    b.output(b.add(p, q))
    b.output(b.fully_connected(b.reshape(q, (1, -1)), 3))
    gen = check_parity(b.build(), tmp_path)
    assert len(gen.outputs) == 2
    # y lives across both pools; p and q overlap it
    assert gen.workspace_size_bytes >= 8 * 8 * 4 + 2 * 4 * 4 * 4


def test_two_inputs_with_broadcast_and_constant(tmp_path):
    b = ModelBuilder(seed=5)
    x = b.input((1, 4, 4, 3), "int8", name="a")
    z = b.input((1, 1, 1, 3), "int8", name="b")
    y = b.mul(x, z, activation="RELU")
    y = b.add(y, np.linspace(-1, 1, 3).astype(np.float32))
    b.output(y)
    check_parity(b.build(), tmp_path)


def test_float_graph_with_quantize_round_trip(tmp_path):
    b = ModelBuilder(seed=6)
    x = b.input((1, 10), "float32")
    qx = b.quantize(x)
    y = b.fully_connected(qx, 4, activation="RELU")
    b.output(b.dequantize(y))
    check_parity(b.build(), tmp_path)


def test_bad_module_names():
    b = ModelBuilder()
    b.output(b.fully_connected(b.input((1, 4), "float32"), 2))
    model = b.build()
    for name in ("1abc", "a-b", "a b", "x;"):
        with pytest.raises(EmitError, match="not a C identifier"):
            emit_sources(model, name=name)
    with pytest.raises(EmitError, match="must have 1 to 128 characters"):
        emit_sources(model, name="")


def _single(op: str, **kw) -> bytes:
    b = ModelBuilder(seed=9)
    b.output(b.single_op(op, **kw))
    return b.build()


def test_rejects_uint8_activations():
    from project_api.emit import codegen
    from project_api.tflite import reader as tflite_reader

    g = tflite_reader.read_tflite(_single("FULLY_CONNECTED", dtype="int8"))
    g.tensor(g.operators[0].inputs[0]).dtype = "uint8"
    with pytest.raises(UnsupportedOperatorError, match=r"FULLY_CONNECTED \(node 0\).*uint8"):
        codegen.generate(g, "default")


def test_rejects_pool_with_requantization():
    b = ModelBuilder(seed=1)
    x = b.input((1, 4, 4, 2), "int8")
    y = b.average_pool2d(x, 2)
    b.output(y)
    model = bytearray(b.build())
    gen = emit_sources(bytes(model))
    assert gen.workspace_size_bytes == 0
    # the reader's graph with a changed output scale must be refused at emit time
    from project_api.emit import codegen
    from project_api.tflite import reader as tflite_reader

    g = tflite_reader.read_tflite(bytes(model))
    g.tensor(g.outputs[0]).quant.scale = [g.tensor(g.outputs[0]).quant.scale[0] * 2]
    with pytest.raises(UnsupportedOperatorError, match=r"AVERAGE_POOL_2D \(node 0\).*same scale"):
        codegen.generate(g, "default")


def test_rejects_softmax_output_quantization():
    from project_api.emit import codegen
    from project_api.tflite import reader as tflite_reader

    g = tflite_reader.read_tflite(_single("SOFTMAX", dtype="int8"))
    g.tensor(g.outputs[0]).quant.zero_point = [0]
    with pytest.raises(UnsupportedOperatorError, match=r"SOFTMAX \(node 0\).*1/256"):
        codegen.generate(g, "default")


def test_rejects_tanh_activation():
    from project_api.emit import codegen
    from project_api.tflite import reader as tflite_reader

    g = tflite_reader.read_tflite(_single("FULLY_CONNECTED", dtype="int8"))
    g.operators[0].options["fused_activation_function"] = "TANH"
    with pytest.raises(UnsupportedOperatorError, match=r"FULLY_CONNECTED \(node 0\).*TANH"):
        codegen.generate(g, "default")


def test_rejects_asymmetric_weights():
    from project_api.emit import codegen
    from project_api.tflite import reader as tflite_reader

    g = tflite_reader.read_tflite(_single("CONV_2D", dtype="int8"))
    w = g.tensor(g.operators[0].inputs[1])
    w.quant.zero_point = [3] * len(w.quant.zero_point)
    with pytest.raises(UnsupportedOperatorError, match=r"CONV_2D \(node 0\).*symmetric"):
        codegen.generate(g, "default")


def test_rejects_unknown_operator():
    from project_api.emit import codegen
    from project_api.tflite import reader as tflite_reader

    g = tflite_reader.read_tflite(_single("SOFTMAX", dtype="float32"))
    g.operators[0].opcode = "LSH_PROJECTION"
    with pytest.raises(UnsupportedOperatorError, match=r"LSH_PROJECTION \(node 0\).*not supported"):
        codegen.generate(g, "default")


@pytest.mark.parametrize("dtype", ["int8", "float32"])
def test_wide_layers_take_accumulators_from_the_pool(tmp_path, dtype):
    """Per-pixel accumulators over 512 bytes are planned in the pool, not on the C stack (162
    channels: not a multiple of the int8 loops' 4 channels a pass, which need no array)."""
    b = ModelBuilder(seed=8, per_channel=True)
    x = b.input((1, 5, 5, 3), dtype)
    y = b.conv2d(x, 162, kernel_size=3, activation="RELU")  # SAME 3x3: "tap" form
    y = b.depthwise_conv2d(y, kernel_size=3)
    y = b.average_pool2d(y, 2)
    b.output(y)
    gen = check_parity(b.build(), tmp_path)
    assert gen.source.count("acc = (") == 3  # three kernels read scratch from the pool
    act = 5 * 5 * 162 * (1 if dtype == "int8" else 4)
    # conv: its output + scratch; dw: input + output + scratch
    assert gen.workspace_size_bytes >= 2 * act + 648


def test_int8_convolutions_of_4n_channels_keep_their_accumulators_in_registers(tmp_path):
    """The same layers at 160 channels, int8: 4 channels a pass in registers, so the
    convolutions plan no accumulator in the pool (only the pool op does), and stay exact."""
    b = ModelBuilder(seed=8, per_channel=True)
    x = b.input((1, 5, 5, 3), "int8")
    y = b.conv2d(x, 160, kernel_size=3, activation="RELU")
    y = b.depthwise_conv2d(y, kernel_size=3)
    y = b.average_pool2d(y, 2)
    b.output(y)
    gen = check_parity(b.build(), tmp_path)
    assert gen.source.count("int32_t a[4] = {0};") == 2
    assert gen.source.count("acc = (") == 1

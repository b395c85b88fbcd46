"""The TFLite reader on good and bad bytes: corrupt input gives EmitError, never a crash."""

from __future__ import annotations

import numpy as np
import pytest

from project_api.emit import emit_sources, read_tflite
from project_api.errors import EmitError, UnsupportedOperatorError
from project_api.tflite.builder import ModelBuilder


def small_model() -> bytes:
    b = ModelBuilder(seed=3, per_channel=True)
    x = b.input((1, 6, 6, 2), "int8")
    y = b.conv2d(x, 3, kernel_size=3, activation="RELU")
    y = b.depthwise_conv2d(y, depth_multiplier=2)
    y = b.average_pool2d(y, 2)
    y = b.reshape(y, (1, -1))
    y = b.fully_connected(y, 4)
    b.output(b.softmax(y))
    return b.build()


def rich_model() -> bytes:
    """Two subgraphs, a custom operator with options, a variable tensor, an int16 layer."""
    mb = ModelBuilder(seed=4)
    x = mb.input((1, 4), "int16", name="x")
    y = mb.fully_connected(x, 3)
    state = mb.variable((1, 3), "int16", quant=(1 / 1024, 0), name="state")
    (z,) = mb.custom("Mix", [y, state], [((1, 3), "int16", (1 / 1024, 0))], b"\x07" * 9)
    mb.output(y)
    mb.output(z)
    body = mb.subgraph("body")
    body.output(body.squeeze(body.input((1, 3, 1), "float32", name="b")))
    return mb.build()


def test_reads_structure():
    g = read_tflite(small_model())
    assert [op.opcode for op in g.operators] == [
        "CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "RESHAPE", "FULLY_CONNECTED", "SOFTMAX"]
    conv = g.operators[0]
    assert conv.options == {"padding": "SAME", "stride_w": 1, "stride_h": 1,
                            "fused_activation_function": "RELU", "dilation_w_factor": 1,
                            "dilation_h_factor": 1, "quantized_bias_type": "float32"}
    assert conv.options_table == "Conv2DOptions"
    w = g.tensor(conv.inputs[1])
    assert w.shape == (3, 3, 3, 2) and w.dtype == "int8" and w.is_const
    assert w.quant is not None and len(w.quant.scale) == 3  # per channel
    assert g.operators[1].options["depth_multiplier"] == 2
    x = g.tensor(g.inputs[0])
    assert x.shape == (1, 6, 6, 2) and not x.is_const
    assert g.tensor(g.outputs[0]).shape == (1, 4)


def test_reads_shared_model_weights(models_dir):
    g = read_tflite(models_dir / "hello_world_float.tflite")
    w = g.tensor(g.operators[0].inputs[1])
    assert w.dtype == "float32" and w.shape == (16, 1)
    assert np.isfinite(w.data).all() and w.data.any()


@pytest.mark.parametrize("data, message", [
    (b"", "only 0 bytes"),
    (b"\x00" * 7, "only 7 bytes"),
    (b"\x10\x00\x00\x00ABCD" + b"\x00" * 32, "file identifier"),
])
def test_not_a_model(data, message):
    with pytest.raises(EmitError, match=message):
        read_tflite(data)


def test_missing_file(tmp_path):
    with pytest.raises(EmitError, match="cannot read model"):
        read_tflite(tmp_path / "nope.tflite")


@pytest.mark.parametrize("make", [small_model, rich_model])
def test_every_truncation_is_an_emit_error(make):
    data = make()
    for n in sorted(set(range(0, len(data), max(1, len(data) // 300))) | {len(data) - 1}):
        with pytest.raises(EmitError):
            emit_sources(data[:n])


@pytest.mark.parametrize("make,step", [(small_model, emit_sources), (rich_model, read_tflite)])
def test_bit_flips_never_crash(make, step):
    """Random single and multi-bit flips: the result is C (for the rich model, which has a
    custom operator: a graph) or an EmitError, nothing else."""
    data = make()
    rng = np.random.default_rng(7)
    outcomes = {"ok": 0, "error": 0}
    for trial in range(600):
        buf = bytearray(data)
        for _ in range(1 + trial % 3):
            pos = int(rng.integers(0, len(buf)))
            buf[pos] ^= 1 << int(rng.integers(0, 8))
        try:
            step(bytes(buf))
            outcomes["ok"] += 1
        except EmitError:
            outcomes["error"] += 1
    assert outcomes["error"] > 0 and outcomes["ok"] > 0, outcomes


def test_header_field_flips_are_refused_or_change_nothing():
    """Flip every bit of the first 64 bytes (root offset, identifier, vtables): a flip of the
    root table's offset is a corrupt file, one of the file identifier is not a TFLite model,
    each in one line; a flip the reader takes touched nothing the model is made of, so the C is
    the unflipped model's, byte for byte."""
    data = small_model()
    want = emit_sources(data)
    accepted = 0
    for pos in range(min(64, len(data))):
        for bit in range(8):
            buf = bytearray(data)
            buf[pos] ^= 1 << bit
            try:
                got = emit_sources(bytes(buf))
            except EmitError as err:
                text = str(err)
                assert "\n" not in text and text, (pos, bit, text)
                if pos < 4:
                    assert text.startswith("corrupt TFLite file"), (pos, bit, text)
                elif pos < 8:
                    assert text.startswith("not a TFLite model"), (pos, bit, text)
                continue
            assert pos >= 8, f"a flip of byte {pos} bit {bit} was taken"
            assert (got.header, got.source) == (want.header, want.source), (pos, bit)
            accepted += 1
    assert accepted > 0


def test_unsupported_operator_names_node():
    b = ModelBuilder()
    x = b.input((1, 4), "float32")
    y = b.fully_connected(x, 3)
    b.output(y)
    data = bytearray(b.build())
    g = read_tflite(bytes(data))
    assert g.operators[0].opcode == "FULLY_CONNECTED"
    # swap the operator code for LOGISTIC (14): find the OperatorCode's builtin_code field
    code = (9).to_bytes(4, "little")
    pos = data.find(code)
    while pos >= 0:
        trial = bytearray(data)
        trial[pos:pos + 4] = (14).to_bytes(4, "little")
        try:
            g2 = read_tflite(bytes(trial))
        except EmitError:
            pos = data.find(code, pos + 1)
            continue
        if g2.operators[0].opcode == "LOGISTIC":
            with pytest.raises(UnsupportedOperatorError, match=r"LOGISTIC \(node 0\)"):
                emit_sources(bytes(trial))
            return
        pos = data.find(code, pos + 1)
    pytest.fail("could not locate the operator code field")


def test_reads_subgraphs_variables_and_custom_ops():
    """Facts no operator uses yet reach the IR: every subgraph, variable tensors, a custom
    operator's name and raw options. The ``tflite`` package's reader sees the same model."""
    import tflite

    mb = ModelBuilder(seed=0)
    x = mb.input((1, 4), "float32", name="x")
    state = mb.variable((1, 4), "float32", name="state")
    (y,) = mb.custom("MyOp", [x, state], [((1, 4), "float32", None)],
                     custom_options=b"\x01\x02\x03")
    mb.output(y)
    body = mb.subgraph("body")
    bx = body.input((1, 4), "float32", name="bx")
    body.output(body.add(bx, bx))
    data = mb.build()

    m = tflite.Model.GetRootAs(data, 0)
    assert m.SubgraphsLength() == 2 and m.Subgraphs(1).Name() == b"body"
    assert m.OperatorCodes(0).CustomCode() == b"MyOp"
    assert m.Subgraphs(0).Tensors(state.index).IsVariable()
    assert m.Subgraphs(0).Operators(0).CustomOptionsAsNumpy().tobytes() == b"\x01\x02\x03"

    g = read_tflite(data)
    assert [s.name for s in g.subgraphs] == ["main", "body"] and g.subgraphs[0] is g
    assert [op.opcode for op in g.subgraphs[1].operators] == ["ADD"]
    assert g.subgraphs[1].index == 1 and g.subgraphs[1].subgraphs is g.subgraphs
    op = g.operators[0]
    assert (op.opcode, op.custom_code, op.custom_options) == ("CUSTOM", "MyOp", b"\x01\x02\x03")
    assert g.tensor(state.index).is_variable and not g.tensor(x.index).is_variable
    with pytest.raises(UnsupportedOperatorError,
                       match=r"^custom operator 'MyOp' \(node 0\) computing 'myop_\d+': "
                             r"operator not supported by the emitter \(supported: [A-Z0-9_, ]*\bADD, "):
        emit_sources(data)


def test_variable_input_is_refused_by_an_op_without_state():
    mb = ModelBuilder(seed=0)
    x = mb.input((1, 4), "float32", name="x")
    state = mb.variable((1, 4), "float32", name="state")
    mb.output(mb.add(x, state))
    with pytest.raises(UnsupportedOperatorError,
                       match=r"ADD \(node 0\): input 1 'state' is a variable tensor"):
        emit_sources(mb.build())


def _with_code(model: bytes, old: int, new: int) -> bytes:
    """``model`` with the OperatorCode's builtin_code ``old`` rewritten to ``new``."""
    code = old.to_bytes(4, "little")
    pos = model.find(code)
    while pos >= 0:
        trial = bytearray(model)
        trial[pos:pos + 4] = new.to_bytes(4, "little")
        try:
            if read_tflite(bytes(trial)).operators[0].code == new:
                return bytes(trial)
        except EmitError:
            pass
        pos = model.find(code, pos + 1)
    raise AssertionError("could not locate the operator code field")


def test_operators_are_named_never_numbered():
    """An operator the emitter lacks is named from the schema (LSH_PROJECTION, not 15); one
    newer than the schema says so."""
    b = ModelBuilder()
    x = b.input((1, 8), "float32", name="x")
    hashes = b.constant(np.zeros((2, 4), np.float32), "float32")
    (y,) = b.operator("LSH_PROJECTION", [hashes, x], [((2,), "int32", None)], {"type": "SPARSE"})
    b.output(y)
    projected = b.build()
    g = read_tflite(projected)
    assert (g.operators[0].opcode, g.operators[0].options["type"]) == ("LSH_PROJECTION", "SPARSE")
    with pytest.raises(UnsupportedOperatorError) as info:
        emit_sources(projected)
    msg = str(info.value)
    assert msg.startswith("LSH_PROJECTION (node 0) computing 'lsh_projection_"), msg
    assert "not supported" in msg and "15" not in msg.split("(supported")[0]
    b = ModelBuilder()
    x = b.input((1, 8), "float32", name="x")
    (y,) = b.operator("STABLEHLO_CASE", [x], [((1, 8), "float32", None)])
    b.output(y)
    data = b.build()
    assert read_tflite(data).operators[0].opcode == "STABLEHLO_CASE"
    unknown = _with_code(data, 209, 250)
    with pytest.raises(UnsupportedOperatorError,
                       match=r"^operator code 250 \(not in the TFLite schema this emitter "
                             r"knows\) \(node 0\)"):
        emit_sources(unknown)
    for m in (projected, unknown):
        with pytest.raises(UnsupportedOperatorError) as info:
            emit_sources(m)
        assert "builtin operator" not in str(info.value)


def test_a_model_compiled_for_an_npu_says_so():
    """A Vela-compiled model (one 'ethos-u' custom operator holding the command stream, as
    TFLM's person_detect_vela.tflite) is refused naming the compiler, not as a missing op."""
    mb = ModelBuilder(seed=0)
    x = mb.input((1, 96, 96, 1), "int8", name="input")
    stream = mb.constant(np.arange(64, dtype=np.uint8), "uint8", name="command_stream")
    (y,) = mb.custom("ethos-u", [stream, x], [((1, 2), "int8", (1 / 256, -128))])
    mb.output(y)
    with pytest.raises(UnsupportedOperatorError,
                       match=r"^custom operator 'ethos-u' \(node 0\) computing '[^']+': the "
                             r"model's layers were compiled by Vela .* Arm Ethos-U NPU, which no "
                             r"CPU runs; give the .tflite from before Vela \(the one Vela was "
                             r"given\)$"):
        emit_sources(mb.build())

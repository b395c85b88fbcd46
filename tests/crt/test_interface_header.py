"""``tvmgen_<mod>.h``: the header our emitter writes is the one TVM's C interface generator
writes, byte for byte, held against the transcription in ``tests/mlf_factory.py`` (which the
MLF reader's tests use too), not against the emitter's own code."""

from __future__ import annotations

from mlf_factory import tvm_interface_header

from project_api.emit import emit_sources
from project_api.tflite import builder as B


def test_the_emitter_writes_tvms_interface_header() -> None:
    mb = B.ModelBuilder(seed=5, description="two inputs, two outputs")
    a = mb.input((1, 6), "int8", name="serving_default_a:0")
    b = mb.input((1, 6), "int8", name="b")
    total = mb.add(a, b)
    mb.output(mb.fully_connected(total, 3))
    mb.output(mb.softmax(mb.fully_connected(total, 4)))
    gen = emit_sources(mb.build(), name="net")
    want = tvm_interface_header("net", [(t.name, t.size_bytes) for t in gen.inputs],
                                [(t.name, t.size_bytes) for t in gen.outputs],
                                gen.workspace_size_bytes)
    assert [t.name for t in gen.inputs][0] == "serving_default_a:0"  # sanitized in C names
    assert gen.header == want

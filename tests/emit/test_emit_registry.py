"""The operator registry: op modules declare what they handle, the registry checks the
declarations and refuses any node outside them in one line (operator name, node, tensor, what
is supported)."""

from __future__ import annotations

import pytest

from project_api.emit import codegen
from project_api.emit.ops import MODULES, REGISTRY, Registry
from project_api.emit.ops.common import Kernel, OpSpec
from project_api.emit.target import GENERIC
from project_api.errors import UnsupportedOperatorError
from project_api.tflite import reader as tflite_reader
from project_api.tflite.builder import ModelBuilder


def _prepare(op, graph, target):  # a stand-in prepare for declarations under test
    return Kernel(op, "copy.c.j2", {}, [], [])


def test_every_module_is_registered_once():
    modules = {e.module for e in REGISTRY.entries()}
    assert modules == set(MODULES)
    for e in REGISTRY.entries():
        assert e.spec.schemes and set(e.spec.dsp) <= set(e.spec.schemes)


@pytest.mark.parametrize("specs,message", [
    ([("a", OpSpec(("ADD",), ("int8",)), _prepare), ("b", OpSpec(("ADD",), ("int8",)), _prepare)],
     "declared by both op modules a and b"),
    ([("a", OpSpec(("ADDD",), ("int8",)), _prepare)], "no BuiltinOperator"),
    ([("a", OpSpec(("ADD",), ("int8",), dsp=("int16x8",)), _prepare)], "DSP schemes"),
    ([("a", OpSpec(("ADD",), ()), _prepare)], "no dtype schemes"),
])
def test_bad_declarations_are_refused(specs, message):
    with pytest.raises(ValueError, match=message):
        Registry(specs)


def test_a_module_without_spec_is_refused():
    with pytest.raises(ValueError, match="needs SPEC"):
        Registry.from_modules("project_api.emit.ops", ["_dsp"])


def _graph(op: str, dtype: str = "int8"):
    b = ModelBuilder(seed=9)
    b.output(b.single_op(op, dtype))
    return tflite_reader.read_tflite(b.build())


def test_a_scheme_outside_the_declaration_is_refused_in_one_line():
    g = _graph("FULLY_CONNECTED")
    for t in (g.tensor(g.operators[0].inputs[0]), g.tensor(g.outputs[0])):
        t.dtype = "int32"
    with pytest.raises(UnsupportedOperatorError) as info:
        codegen.generate(g, "default")
    msg = str(info.value)
    assert msg.count("\n") == 0
    assert msg.startswith("FULLY_CONNECTED (node 0): input 0 'input' is int32: int32 is not "
                          "supported (supported: ")
    assert "int8" in msg.split("supported: ")[-1]


def test_conversion_schemes_name_both_tensors():
    g = _graph("DEQUANTIZE")
    g.tensor(g.outputs[0]).dtype = "int32"
    with pytest.raises(UnsupportedOperatorError,
                       match=r"DEQUANTIZE \(node 0\): input 'input' is int8, output '\w+' is "
                             r"int32: int8->int32 is not supported \(supported: .*int8->float32"):
        codegen.generate(g, "default")


def test_an_alias_needs_a_view_declaration():
    g = _graph("SOFTMAX")
    fake = Registry([("softmax", OpSpec(("SOFTMAX",), ("int8",)),
                      lambda op, graph, target: Kernel(op, "copy.c.j2", {}, [], [],
                                                       alias=True))])
    with pytest.raises(RuntimeError, match="without declaring view=True"):
        fake.prepare(g.operators[0], g, GENERIC)

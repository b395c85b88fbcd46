"""State and control flow against TFLite Micro and LiteRT: resource variables (VAR_HANDLE,
READ_VARIABLE, ASSIGN_VARIABLE), CALL_ONCE, IF and WHILE, and the state region they live in.

Every stateful case runs its input sets in turn in one process (state carried from run to run)
and compares each run with one TFLM interpreter (and one LiteRT interpreter) fed the same
sequence, so every run checks the state the earlier ones left; ``reset_at`` resets the module
before that run and compares with a fresh interpreter (a device just booted). The machinery is
``tests/helpers/emit_parity.py``; the refusals and the memory layout are checked below, and so is
the state on a device: a host-template project reset over RPC (``Model.reset_state``), and the
``validate`` and ``mlperftiny`` runners resetting between samples or carrying the state.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from helpers.emit_parity import Case, Prefetcher, check_parity
from helpers.state_models import (
    Branch,
    accumulate,
    case_of,
    leaky,
    mlperftiny_scores,
    model,
    state_quant,
    streams,
)

from project_api.emit import emit_sources, read_tflite
from project_api.emit.codegen import generate
from project_api.errors import UnsupportedOperatorError
from project_api.tflite.builder import ModelBuilder
from project_api.tflite.tensors import TensorRef, quantize_params

pytest_plugins = ("helpers.emit_parity",)

#: Runs of every stateful case (state carried through all of them).
INVOCATIONS = 5


def _delay(init: bool, const_assign: bool = False) -> Branch:
    """y = the previous run's input (the state's first value at the first run): a delay line,
    for every type (no arithmetic). ``const_assign``: a constant is assigned, then the input."""

    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        shape = opts["input_shape"]
        quant = None if dtype in ("float32", "int32") else (0.05, 0 if dtype == "int16" else 3)
        x = mb.input(shape, dtype, quant=quant, value_range=(-1.0, 1.0), name=name)
        var = f"delay_{name}"
        if init:
            sg = mb.subgraph(f"init_{name}")
            start = (mb.rng.integers(-100, 100, size=shape) if dtype == "int32"
                     else mb.rng.uniform(-2, 2, size=shape)).astype(np.float32)
            sg.assign_variable(sg.var_handle(var), sg.constant(start, dtype, quant=quant))
            mb.call_once(sg)
        h = mb.var_handle(var)
        y = mb.read_variable(h, shape, dtype, quant)
        if const_assign:
            mb.assign_variable(h, mb.constant(np.ones(shape, np.float32), dtype, quant=quant))
        mb.assign_variable(h, x)
        return y

    return branch


def _shared_handles(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    """Two VAR_HANDLEs of one variable (TFLM finds it by shared_name): READ through one, ASSIGN
    through the other; a third handle names another variable."""
    shape = opts["input_shape"]
    x = mb.input(shape, dtype, value_range=(-1.0, 1.0), name=name)
    quant = state_quant(dtype)
    a = mb.var_handle(f"v_{name}")
    s = mb.read_variable(a, shape, dtype, quant)
    other = mb.var_handle(f"w_{name}")
    t = mb.read_variable(other, shape, dtype, quant)
    y = leaky(mb, x, s, dtype)
    mb.assign_variable(mb.var_handle(f"v_{name}"), y)
    mb.assign_variable(other, leaky(mb, y, t, dtype))
    return mb.add(y, t, out_quant=quant)


def _if(form: str) -> Branch:
    """IF on a bool input: ``plain`` then x + c / else x * c; ``copies`` a constant operand, a
    branch that hands its input back unchanged and one that gives a constant."""

    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        shape = opts["input_shape"]
        x = mb.input(shape, dtype, value_range=(-1.0, 1.0), name=name)
        c = mb.input((1,), "bool", name=f"{name}_c")
        then, other = mb.subgraph(f"then_{name}"), mb.subgraph(f"else_{name}")
        ta, ea = then.input(shape, dtype), other.input(shape, dtype)
        if form == "plain":
            then.output(then.add(ta, mb.rng.uniform(-1, 1, size=shape[-1:]).astype(np.float32)))
            other.output(other.mul(ea, mb.rng.uniform(-2, 2, size=shape[-1:]).astype(np.float32)))
            (y,) = mb.if_(c, then, other, [x])
            return y
        tb, eb = then.input(shape, dtype), other.input(shape, dtype)
        then.output(then.add(ta, tb))
        then.output(ta)  # an input handed back
        other.output(other.mul(ea, eb))
        other.output(other.constant(mb.rng.uniform(-1, 1, size=shape).astype(np.float32), dtype))
        k = mb.constant(mb.rng.uniform(-1, 1, size=shape).astype(np.float32), dtype)
        y, z = mb.if_(c, then, other, [x, k])
        return mb.add(y, z)

    return branch


def _counter(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
    """A counting WHILE as TensorFlow's converter writes one: carry (x, i), cond LESS(i, 3),
    body x = x * w + b and i = i + 1; the count i is a model input, so the loop runs 0 to 6
    times."""
    shape = opts["input_shape"]
    x = mb.input(shape, dtype, value_range=(-1.0, 1.0), name=name)
    i = mb.input((1,), "float32", name=f"{name}_i")
    cond, body = mb.subgraph(f"cond_{name}"), mb.subgraph(f"body_{name}")
    cond.input(shape, dtype)
    cond.output(cond.comparison("LESS", cond.input((1,), "float32"),
                                np.array([3.0], np.float32)))
    bx, bi = body.input(shape, dtype), body.input((1,), "float32")
    w = mb.rng.uniform(0.5, 1.2, size=shape[-1:]).astype(np.float32)
    body.output(body.add(body.mul(bx, w), np.full(shape[-1:], 0.1, np.float32)))
    body.output(body.add(bi, np.ones(1, np.float32)))
    return mb.while_(cond, body, [x, i])[0]


def _while(nested: bool) -> Branch:
    """WHILE over (x, g1, g2, g3): cond gives g1; the body doubles-and-shifts x and moves the
    flags down (g1 = g2, g2 = g3, g3 = false: a constant), so the loop runs 0 to 3 times as the
    bool inputs say. ``nested``: the body's update is an IF on g2 (a subgraph in a subgraph)."""

    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        shape = opts["input_shape"]
        x = mb.input(shape, dtype, value_range=(-1.0, 1.0), name=name)
        flags = [mb.input((1,), "bool", name=f"{name}_g{i}") for i in range(3)]
        cond, body = mb.subgraph(f"cond_{name}"), mb.subgraph(f"body_{name}")
        cx = cond.input(shape, dtype)
        cg = [cond.input((1,), "bool") for _ in range(3)]
        del cx
        cond.output(cg[0])
        bx = body.input(shape, dtype)
        bg = [body.input((1,), "bool") for _ in range(3)]
        w = mb.rng.uniform(0.5, 1.5, size=shape[-1:]).astype(np.float32)
        b = mb.rng.uniform(-0.5, 0.5, size=shape[-1:]).astype(np.float32)
        if nested:
            then, other = mb.subgraph(f"then_{name}"), mb.subgraph(f"else_{name}")
            then.output(then.mul(then.input(shape, dtype), w))
            other.output(other.add(other.input(shape, dtype), b))
            (nx,) = body.if_(bg[1], then, other, [bx])
        else:
            nx = body.add(body.mul(bx, w), b)
        body.output(nx)
        body.output(bg[1])
        body.output(bg[2])
        body.output(body.constant(np.array([False]), "bool"))
        outs = mb.while_(cond, body, [x, *flags])
        return outs[0]

    return branch


SHAPES = [{"input_shape": (1, 4)}, {"input_shape": (2, 3)}, {"input_shape": (1, 2, 2, 3)}]


def _cases() -> list[Case]:
    stateful = {"stateful": True, "invocations": INVOCATIONS}
    cases = []
    # LiteRT refuses to READ_VARIABLE a variable no ASSIGN_VARIABLE has written yet, where
    # TFLM reads its reset value: the cases that do are checked against TFLM alone
    no_litert = {"litert": False}
    for mode in ("float32", "int8", "int16x8"):
        cases.append(case_of("READ_VARIABLE", mode, "accumulate",
                           [(accumulate(True), SHAPES[0]), (accumulate(True), SHAPES[2])],
                           **stateful))
    for mode in ("float32", "int8", "int16x8", "int32"):
        forms = [(_delay(False), SHAPES[1]), (_delay(False, const_assign=True), SHAPES[2])]
        if mode != "int32":
            forms.append((accumulate(False), SHAPES[0]))
        cases.append(case_of("ASSIGN_VARIABLE", mode, "delay", forms, **stateful, **no_litert))
    cases.append(case_of("READ_VARIABLE", "int32", "delay", [(_delay(True), SHAPES[2])],
                       **stateful))
    cases.append(case_of("VAR_HANDLE", "int16x8", "shared", [(_shared_handles, SHAPES[1])],
                       **stateful, **no_litert))
    # CALL_ONCE runs its init again after a reset (TFLM's own reset() would not: the reference
    # is a fresh interpreter, the state of a device just booted)
    cases.append(case_of("CALL_ONCE", "int8", "reset", [(accumulate(True), SHAPES[1])],
                       reset_at=3, **stateful))
    cases.append(case_of("IF", "float32", "branches", [(_if("plain"), SHAPES[0]),
                                                     (_if("copies"), SHAPES[1])]))
    cases.append(case_of("IF", "int8", "branches", [(_if("plain"), SHAPES[2])]))
    cases.append(case_of("WHILE", "float32", "loop", [(_while(False), SHAPES[0]),
                                                    (_while(True), SHAPES[2]),
                                                    (_counter, SHAPES[1])],
                         invocations=6))
    return cases


CASES = _cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_parity(case: Case, builds: Prefetcher) -> None:
    check_parity(case, builds)


# --- the state region and the plans -----------------------------------------------------------


def test_state_region_is_its_own_and_recorded():
    """Resource variables and CALL_ONCE flags live in a static region of the module, not in
    the workspace; the header and the metadata give its size; the int8 reset value is the
    zero point TFLM fills resource variables with."""
    from project_api.emit.mlf_writer import metadata

    gen = emit_sources(model(accumulate(False), "int8"), "acc")
    zp = quantize_params(-2.0, 3.0, "int8")[1]
    assert gen.state_size_bytes == 8  # 4 int8 values, 8-aligned
    assert f"#define TVMGEN_ACC_STATE_SIZE {gen.state_size_bytes}" in gen.header
    assert "int32_t tvmgen_acc_reset(void);" in gen.header
    assert re.search(r"static union \{ uint8_t bytes\[8\]; uint64_t align; \} tvmgen_acc_state;",
                     gen.source)
    assert f"memset(tvmgen_acc_state.bytes + 0, 0x{zp & 0xff:02x}, 4);" in gen.source
    # the state is never in the pool: the pool holds only the intermediates
    assert gen.workspace_size_bytes == gen.lower_bound_bytes
    main = metadata(gen)["modules"]["acc"]["memory"]["functions"]["main"][0]
    assert main["state_size_bytes"] == gen.state_size_bytes


def test_stateless_models_have_no_state():
    mb = ModelBuilder(seed=1)
    mb.output(mb.single_op("ADD", "int8"))
    gen = emit_sources(mb.build(), "plain")
    assert gen.state_size_bytes == 0
    assert "STATE_SIZE" not in gen.header and "_reset" not in gen.source


def test_nested_subgraph_pools_stay_at_the_lower_bound():
    """A callee's pool is scratch of the node that calls it; every pool (the callees' and the
    main one with that scratch) is at its planner lower bound."""
    for branch, shape in ((_while(True), (1, 2, 2, 3)), (_if("copies"), (2, 3))):
        gen = emit_sources(model(branch, "float32", shape), "cf")
        assert gen.callees, "the model calls subgraphs"
        assert gen.workspace_size_bytes == gen.lower_bound_bytes
        for low in gen.callees.values():
            assert low.plan.pool_size == low.plan.lower_bound


def _refusal(model: bytes, match: str) -> str:
    with pytest.raises(UnsupportedOperatorError) as info:
        generate(read_tflite(model), "m")
    msg = str(info.value)
    assert "\n" not in msg and match in msg, msg
    return msg


def test_refusals_are_one_line():
    # a variable no ASSIGN_VARIABLE writes has no size
    mb = ModelBuilder()
    x = mb.input((1, 4))
    mb.output(mb.add(x, mb.read_variable(mb.var_handle("v"), (1, 4))))
    _refusal(mb.build(), "resource variable 'v' is never assigned")
    # a container on one VAR_HANDLE and none on an earlier one (TFLM crashes comparing them)
    mb = ModelBuilder()
    x = mb.input((1, 4))
    a = mb.var_handle("v")
    mb.assign_variable(a, x)
    mb.output(mb.read_variable(mb.var_handle("w", container="c"), (1, 4)))
    _refusal(mb.build(), "has a container where an earlier one ('v') has none")
    # a read of another size than the variable's
    mb = ModelBuilder()
    x = mb.input((1, 4))
    h = mb.var_handle("v")
    mb.output(mb.add(x, mb.read_variable(h, (1, 4))))
    mb.assign_variable(h, mb.constant(np.zeros((1, 2), np.float32), "float32"))
    _refusal(mb.build(), "resource variable 'v' holds 8")
    # IF on an int32 condition
    mb = ModelBuilder()
    x = mb.input((1, 4))
    c = mb.constant(np.array([1], np.int32), "int32")
    t, e = mb.subgraph("t"), mb.subgraph("e")
    t.output(t.add(t.input((1, 4)), np.ones(4, np.float32)))
    e.output(e.add(e.input((1, 4)), np.ones(4, np.float32)))
    (y,) = mb.if_(c, t, e, [x])
    mb.output(y)
    _refusal(mb.build(), "IF (node 0): input 0 (the condition)")
    # a subgraph that calls itself
    mb = ModelBuilder()
    x = mb.input((1, 4))
    t = mb.subgraph("t")
    t.call_once(t)
    mb.call_once(t)
    mb.output(mb.add(x, np.ones(4, np.float32)))
    _refusal(mb.build(), "calls itself")
    # WHILE whose body changes a loop-carried tensor's shape
    mb = ModelBuilder()
    x = mb.input((1, 4))
    cond, body = mb.subgraph("c"), mb.subgraph("b")
    cond.input((1, 4))
    cond.output(cond.constant(np.array([False]), "bool"))
    bi = body.input((1, 4))
    body.output(body.fully_connected(bi, 2))
    mb.output(mb.while_(cond, body, [x])[0])
    _refusal(mb.build(), "they must match in type and size")


# --- the state on a device: the host template over RPC ----------------------------------------


def test_host_template_resets_state_over_rpc(tmp_path):
    """A streaming int8 model (CALL_ONCE init, resource variable) in a host-template project:
    its outputs over successive runs equal one TFLM interpreter's; after
    ``Model.reset_state()`` (``project_api.reset_state`` over RPC) the same inputs give the
    same outputs again."""
    from conftest import require_tool
    from mlf_kernels import add_mlf, generate_host_project

    from project_api.archive import mlf
    from project_api.emit import emit
    from project_api.emit.reference import run_tflm_sequence

    require_tool("make")
    require_tool("cc")
    model_bytes = model(accumulate(True), "int8", (2, 3))
    tar = emit(model_bytes, tmp_path / "stream.tar", name="default").path
    with mlf.open_mlf(tar) as lib:
        info = lib.module("default")
        assert info.state_size_bytes == 16 and info.reset_function == "tvmgen_default_reset"
    runs = streams(model_bytes, 4, 7)
    want = [r[0] for r in run_tflm_sequence(model_bytes, runs)]
    assert not all(np.array_equal(want[0], w) for w in want[1:]), "the state must matter"
    with generate_host_project(tar, tmp_path / "prj") as project, project.session() as session:
        m = session.model()
        passes = []
        for _ in range(2):
            got = []
            for (x,) in runs:
                m.set_input(0, x)
                m.run()
                got.append(m.get_output(0))
            passes.append(got)
            assert m.reset_state() is True
    for got in passes:
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
    # a firmware without state has no reset function: nothing to reset
    with generate_host_project(add_mlf(tmp_path / "add.tar"), tmp_path / "add") as project, \
            project.session() as session:
        assert session.model().reset_state() is False


def test_validate_resets_state_between_samples_and_says_so(tmp_path):
    """``validate`` resets a stateful model before every sample by default (each sample from
    the state of boot, TFLM and LiteRT from fresh interpreters), carries it with
    ``reset_state=False`` / ``--no-reset`` (one stream, one interpreter each), and says which in
    the report and ``--json``; bit-exact either way."""
    import json
    import subprocess
    import sys

    from conftest import require_tool
    from mlf_kernels import generate_host_project

    from project_api.emit import emit
    from project_api.tools.validate import validate

    require_tool("make")
    require_tool("cc")
    model_bytes = model(accumulate(True), "int8", (2, 3))
    (tmp_path / "m.tflite").write_bytes(model_bytes)
    tar = emit(model_bytes, tmp_path / "m.tar", name="default").path
    xs = np.stack([r[0] for r in streams(model_bytes, 6, 11)])
    np.savez(tmp_path / "data.npz", x=xs)
    with generate_host_project(tar, tmp_path / "prj") as project:
        reset = validate(project, tmp_path / "data.npz", tflite=model_bytes, number=0)
        carried = validate(project, tmp_path / "data.npz", tflite=model_bytes, number=0,
                           reset_state=False)
    for report, resets in ((reset, True), (carried, False)):
        assert report.to_json()["state"] == {"size_bytes": 16, "reset_between_samples": resets}
        assert ("reset before every sample" if resets else "carried") in report.state_note
        for c in report.comparisons:
            assert all(m.exact == 1.0 for m in c.outputs), (resets, c.key)
    assert not np.array_equal(reset.outputs[0], carried.outputs[0])
    out = subprocess.run([sys.executable, "-m", "project_api", "validate", str(tmp_path / "prj"),
                          "--data", str(tmp_path / "data.npz"), "--model",
                          str(tmp_path / "m.tflite"), "--no-reset", "--number", "0",
                          "--fail-under", "exact=1.0", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["state"] == {"size_bytes": 16, "reset_between_samples": False}


def test_mlperftiny_resets_state_between_samples_and_says_so(tmp_path):
    """The MLPerf Tiny runner on a host-template mlperftiny project of a streaming model: the
    device's ``reset`` command before every sample by default (results equal TFLM from a fresh
    interpreter per sample), none with ``reset_state=False`` (results equal one TFLM
    interpreter over the samples in turn); the report's JSON says which."""
    from conftest import require_tool

    from project_api.api.project import GeneratedProject, generate_project
    from project_api.emit import emit
    from project_api.emit.reference import run_tflm_sequence
    from project_api.tools import mlperftiny as mt

    require_tool("make")
    require_tool("cc")
    model_bytes = model(accumulate(True), "int8", (2, 3))
    tar = emit(model_bytes, tmp_path / "m.tar", name="default").path
    prj = tmp_path / "prj"
    generate_project("host", tar, prj, {"project_type": "mlperftiny", "mlperftiny_model": "kws01",
                                        "warning_as_error": True}, build=True).close()
    facts = mt.model_facts(prj)
    assert facts.state_size_bytes == 16
    runs = streams(model_bytes, 5, 3)
    np.savez(tmp_path / "d.npz", x=np.stack([r[0] for r in runs]), y=np.zeros(5, np.int64))
    samples = mt.load_dataset(tmp_path / "d.npz", facts)
    fresh = mlperftiny_scores(model_bytes, [run_tflm_sequence(model_bytes, [r])[0][0]
                                            for r in runs])
    carried = mlperftiny_scores(model_bytes, [o[0] for o in run_tflm_sequence(model_bytes, runs)])
    assert fresh != carried
    with GeneratedProject.from_directory(prj) as project:
        transport = project.transport()
        transport.open()
        try:
            device = mt.Device(transport, timeout_sec=10.0)
            device.start(3.0)
            by_reset = mt.accuracy(device, samples, state_size_bytes=facts.state_size_bytes)
            device.reset()
            by_carry = mt.accuracy(device, samples, state_size_bytes=facts.state_size_bytes,
                                   reset_state=False)
        finally:
            transport.close()
    assert by_reset.scores == fresh and by_carry.scores == carried
    assert by_reset.to_json()["state"] == {"size_bytes": 16, "reset_between_samples": True}
    assert by_carry.to_json()["state"] == {"size_bytes": 16, "reset_between_samples": False}
    assert mt.state_line(16, False) == "state: 16 B, carried from sample to sample"

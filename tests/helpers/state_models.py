"""Stateful models built in code, shared by the tests of the state region (tests/emit/test_ops_state.py,
the ai_ API, the Cortex-M harness): a streaming accumulator over a resource variable."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from helpers.emit_parity import SEEDS, Case
from project_api.tflite.builder import ModelBuilder
from project_api.tflite.tensors import TensorRef, quantize_params

#: ``branch(mb, dtype, options, name) -> output``: one branch of a parity case.
Branch = Callable[[ModelBuilder, str, dict[str, Any], str], TensorRef]


def state_quant(dtype: str) -> tuple[float, int] | None:
    """The quantization of the state of a branch: asymmetric for int8 (its zero point is the
    resource variable's reset value, as TFLM fills it), symmetric for int16."""
    if dtype == "float32":
        return None
    return quantize_params(-2.0, 3.0, dtype)


def leaky(mb: ModelBuilder, x: TensorRef, s: TensorRef, dtype: str) -> TensorRef:
    """``0.5 * s + x`` in the state's quantization (bounded for |x| <= 1)."""
    half = mb.mul(s, np.full(s.shape[-1:], 0.5, np.float32))
    return mb.add(half, x, out_quant=state_quant(dtype))


def accumulate(init: bool) -> Branch:
    """x -> y = 0.5 * state + x, state = y: the state is a resource variable, set by a CALL_ONCE
    init subgraph (``init``) or left at TFLM's reset value (the value's zero point)."""

    def branch(mb: ModelBuilder, dtype: str, opts: dict[str, Any], name: str) -> TensorRef:
        shape = opts["input_shape"]
        x = mb.input(shape, dtype, value_range=(-1.0, 1.0), name=name)
        var = f"acc_{name}"
        if init:
            sg = mb.subgraph(f"init_{name}")
            h0 = sg.var_handle(var)
            start = mb.rng.uniform(-1.5, 1.5, size=shape).astype(np.float32)
            sg.assign_variable(h0, sg.constant(start, dtype, quant=state_quant(dtype)))
            mb.call_once(sg)
        h = mb.var_handle(var)
        s = mb.read_variable(h, shape, dtype, state_quant(dtype))
        y = leaky(mb, x, s, dtype)
        mb.assign_variable(h, y)
        return y

    return branch


def case_of(op: str, mode: str, label: str, branches: list[tuple[Branch, dict[str, Any]]],
          **kw: Any) -> Case:
    """A parity case of one model whose branches are every (branch, options) once per seed
    (the branch function picked by the branch's ``form``)."""
    fns = [fn for fn, _ in branches]
    case = Case(op, mode, {"model": label}, branch=lambda mb, dt, o, n: fns[o["form"]](mb, dt, o, n),
                **kw)
    for s in SEEDS:
        for i, (_, opts) in enumerate(branches):
            case.branches.append({**opts, "form": i, "seed": s})
    return case


def model(branch: Branch, dtype: str = "float32", shape: tuple[int, ...] = (1, 4)) -> bytes:
    """A model of one ``branch`` (input ``x``)."""
    mb = ModelBuilder(seed=3)
    mb.output(branch(mb, dtype, {"input_shape": shape}, "x"))
    return mb.build()


def streams(model_bytes: bytes, n: int, seed: int) -> list[list[np.ndarray]]:
    """``n`` input sets for ``model_bytes`` (the parity harness's: the last at the extremes)."""
    from helpers.emit_parity import input_sets

    return input_sets(model_bytes, seed, runs=n)


def mlperftiny_scores(model_bytes: bytes, outs: list[np.ndarray]) -> list[list[float]]:
    """The scores an MLPerf Tiny firmware prints for the model's outputs ``outs`` (one array a
    sample): dequantized in float32 with the output's scale and zero point, to 3 decimals."""
    from project_api.emit import read_tflite

    model = read_tflite(model_bytes)
    out = model.tensor(model.outputs[0])
    scale, zp = np.float32(out.quant.scale[0]), out.quant.zero_point[0]
    return [[float(f"{float(v):.3f}") for v in (scale * (o.reshape(-1).astype(np.int32) - zp)
                                                .astype(np.float32))] for o in outs]

"""``validate --per-layer``: every intermediate tensor of an emitted model against TFLite Micro's,
and the first layer whose error goes over a threshold.

**The debug build** (:func:`debug_archive`): the model emitted with every activation an operator
writes made a graph output too (renamed ``node<N>_out<j>``, so each has a C name), so the device
hands each one back like an output. The kernels are the same as the plain build's (same target,
same code); only the buffers change, from the pool to the caller's, so a fault in the pool plan
itself would not show here, while a wrong kernel does.

**The reference** (:func:`tflm_intermediates`): TFLite Micro's interpreter with
``kPreserveAllTensors``, which keeps every tensor after ``invoke`` for ``GetTensor(index,
subgraph)``: the same tensors, sample by sample.

**The check** (:func:`validate_layers`): the samples stream through one session of the debug
project (:func:`project_api.tools.validate.validate`, with the TFLM tensors as the reference); each
layer's tensor gets :class:`project_api.tools.validate.OutputMetrics`, and the first layer, in
execution order, over a threshold (by default any integer step, or an L2-relative error above
1e-5 for float tensors) is the one to look at.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from project_api.errors import ProjectError
from project_api.tools.metrics import OutputMetrics, Threshold
from project_api.tools.validate import ValidationError

__all__ = ["DEFAULT_THRESHOLDS", "DebugBuild", "LayerReport", "Probe", "debug_archive",
           "debug_graph", "tflm_intermediates", "validate_layers"]

_LOG = logging.getLogger(__name__)

#: What a layer must meet unless told otherwise: bit-exact integers, float within 1e-5 (L2).
DEFAULT_THRESHOLDS = (Threshold("max_abs_int", 0.0), Threshold("l2r", 1e-5))


@dataclass(frozen=True)
class Probe:
    """One intermediate tensor the debug build hands back."""

    position: int  #: the layer's place in the run
    node: int
    op: str
    kernel: str
    tensor: int  #: its index in the model (subgraph 0)
    name: str  #: its name in the model
    output: str  #: its output name in the debug build
    dtype: str
    shape: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"position": self.position, "node": self.node, "op": self.op,
                "kernel": self.kernel, "tensor": self.tensor, "name": self.name,
                "output": self.output, "dtype": self.dtype, "shape": list(self.shape)}


@dataclass
class DebugBuild:
    """A debug archive and what each of its outputs is."""

    archive: Path
    module: str
    target: str
    probes: list[Probe]
    outputs: int = 0  #: graph outputs of the debug build (the model's own and the probes)


def debug_graph(graph: Any) -> tuple[Any, list[tuple[int, int, int]]]:
    """A copy of ``graph`` whose outputs are its own plus every activation an operator writes,
    each intermediate renamed ``node<N>_out<j>``; and ``(position, node, tensor)`` of every
    probed tensor, in execution order."""
    g = copy.deepcopy(graph)
    outputs = list(g.outputs)
    probes: list[tuple[int, int, int]] = []
    seen: set[int] = set()
    for pos, op in enumerate(g.operators):
        for j, t in enumerate(op.outputs):
            if t < 0 or t in seen or g.tensor(t).is_const:
                continue
            seen.add(t)
            probes.append((pos, op.index, t))
            if t not in outputs:
                g.tensors[t].name = f"node{op.index}_out{j}"
                outputs.append(t)
    g.outputs = outputs
    if g.subgraphs:
        g.subgraphs = [g, *g.subgraphs[1:]]
    return g, probes


def debug_archive(tflite: bytes, out: str | Path, target: Any = None,
                  name: str = "default") -> DebugBuild:
    """Emit the debug build of ``tflite`` for kernel ``target`` into the archive ``out``."""
    from project_api.emit import read_tflite, resolve
    from project_api.emit.codegen import generate
    from project_api.emit.layers import layers
    from project_api.emit.mlf_writer import write_mlf

    original = read_tflite(tflite)
    graph, probed = debug_graph(original)
    gen = generate(graph, name, resolve(target))
    by_node = {la.node: la for la in layers(gen, graph)}
    probes = []
    for pos, node, t in probed:
        tensor = graph.tensor(t)
        la = by_node.get(node)
        probes.append(Probe(pos, node, la.op if la else graph.operators[pos].opcode,
                            la.kernel if la else "?", t, original.tensor(t).name, tensor.name,
                            tensor.dtype, tuple(tensor.shape)))
    write_mlf(gen, out, force=True)
    return DebugBuild(Path(out), name, gen.target.name, probes, len(gen.outputs))


def tflm_intermediates(tflite: bytes, inputs: Sequence[np.ndarray],
                       probes: Sequence[Probe]) -> dict[str, np.ndarray]:
    """TFLite Micro's value of every probed tensor for each sample (``inputs``: one array per
    model input, samples first), keyed by the probe's output name."""
    from project_api.emit import reference

    runtime = reference._tflm_runtime()
    samples = int(inputs[0].shape[0]) if inputs else 0
    out: dict[str, list[np.ndarray]] = {p.output: [] for p in probes}
    for s in range(samples):
        interp = reference.tflm_interpreter(
            tflite, intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors)
        for i, x in enumerate(inputs):
            details = interp.get_input_details(i)
            interp.set_input(np.ascontiguousarray(x[s]).reshape(details["shape"]), i)
        interp.invoke()
        for p in probes:
            got = interp.GetTensor(p.tensor, 0)
            data = got["tensor_data"] if isinstance(got, dict) else got
            out[p.output].append(np.array(data, copy=True).reshape(p.shape))
    return {k: np.stack(v) if v else np.zeros((0,)) for k, v in out.items()}


@dataclass
class LayerReport:
    """Every probed tensor's metrics, in execution order, and the first over a threshold."""

    module: str
    samples: int
    thresholds: list[Threshold]
    rows: list[tuple[Probe, OutputMetrics]] = field(default_factory=list)

    def failures(self, probe: Probe, m: OutputMetrics) -> list[str]:
        bad = []
        for t in self.thresholds:
            value = m.get(t.metric)
            if value is None:
                continue
            if (t.higher and value < t.value) or (not t.higher and value > t.value):
                bad.append(f"{t.metric} {value:g} {'<' if t.higher else '>'} {t.value:g}")
        return bad

    @property
    def first_failure(self) -> tuple[Probe, OutputMetrics, list[str]] | None:
        for probe, m in self.rows:
            bad = self.failures(probe, m)
            if bad:
                return probe, m, bad
        return None

    def to_json(self) -> dict[str, Any]:
        first = self.first_failure
        return {
            "module": self.module, "samples": self.samples,
            "thresholds": [str(t) for t in self.thresholds],
            "layers": [{**p.to_json(), "metrics": m.to_json(), "failures": self.failures(p, m)}
                       for p, m in self.rows],
            "first_failure": None if first is None else {**first[0].to_json(),
                                                         "failures": first[2]},
            "ok": first is None,
        }


def validate_layers(project: Any, build: DebugBuild, tflite: bytes,
                    data: str | Path | Mapping[str, Any], *,
                    thresholds: Sequence[Threshold] = DEFAULT_THRESHOLDS,
                    limit: int | None = 8, quantize: bool = False,
                    progress: Callable[[str, int], Any] | None = None,
                    timeout_sec: float | None = None, debug: bool = False) -> LayerReport:
    """Run ``data`` on the built debug project ``project`` (generated from ``build.archive``)
    and compare every probed tensor with TFLite Micro's."""
    from project_api.archive import mlf
    from project_api.tools.validate import plan_validation, validate

    path = project.info().get("model_library_format_path")
    if not path:
        raise ProjectError("the debug project's server reports no model archive; regenerate it")
    with mlf.open_mlf(path) as lib:
        info = lib.module(build.module)
    outputs = {t.name for t in info.outputs}
    missing = [p.output for p in build.probes if p.output not in outputs]
    if missing:
        raise ValidationError(f"the project is not this debug build (it has no output "
                              f"{missing[0]!r}); generate it from the debug archive")
    plan = plan_validation(info, data, limit=limit, quantize=quantize)
    refs = tflm_intermediates(tflite, plan.inputs, build.probes)
    by_output = {p.output: p for p in build.probes}
    reference = {}
    for t in info.outputs:
        p = by_output.get(t.name)
        if p is None:  # a graph output no layer writes (cannot happen: emit refuses those)
            raise ValidationError(f"output {t.name!r} of the debug build has no layer")
        reference[t.name] = refs[t.name].reshape((plan.samples, *t.require_shape()))
    inputs = {t.name: x for t, x in zip(info.inputs, plan.inputs, strict=True)}
    report = validate(project, inputs, reference, module=build.module, number=0,
                      progress=progress, timeout_sec=timeout_sec, debug=debug)
    metrics = {m.name: m for m in report.comparisons[0].outputs}
    out = LayerReport(build.module, report.samples, list(thresholds))
    out.rows = [(p, metrics[p.output]) for p in build.probes]
    return out

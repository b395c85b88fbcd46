"""Per-layer facts of a generated module: what each node computes, stores and keeps live.

:func:`layers` lists, in execution order, every node of a :class:`~.codegen.Generated` module
with its kernel (``dsp``, ``generic`` or ``view``), its activation inputs and outputs (name,
dtype, shape), its multiply-accumulates (:func:`macs`), the bytes of its constants as the kernel
target stores them (re-laid-out weights, folded biases, multipliers), its scratch, and the bytes
of the activation pool live while it runs. :func:`pool_plan` is the plan itself, one buffer per
storage set or scratch, for pictures. Both are plain data (``to_json``), recorded in the
archive's ``metadata.json`` (``layers``, ``pool_plan``) so ``project-api analyze`` and
``project-api profile`` know an emitted archive's layers without its ``.tflite``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from project_api.tflite.graph import Graph, Operator

__all__ = ["Layer", "PoolBuffer", "TensorFacts", "function_name", "layers", "macs", "pool_plan"]

#: Bytes per element of each C type a constant array may have.
_CTYPE_BYTES = {"float": 4, "int8_t": 1, "int16_t": 2, "int32_t": 4, "int64_t": 8, "uint8_t": 1,
                "uint16_t": 2, "uint32_t": 4}

#: Buffer ids of per-op scratch start here (codegen.SCRATCH_ID_BASE).
_SCRATCH_ID_BASE = 1 << 40


@dataclass(frozen=True)
class TensorFacts:
    """An activation a layer reads or writes."""

    name: str
    dtype: str
    shape: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TensorFacts:
        return cls(str(data["name"]), str(data["dtype"]), tuple(int(d) for d in data["shape"]))

    def text(self) -> str:
        return f"{self.dtype}[{'x'.join(map(str, self.shape)) or 'scalar'}]"


@dataclass(frozen=True)
class Layer:
    """One node of a module, in execution order (``position``: its place in the run)."""

    position: int
    node: int  #: the operator's index in the model
    op: str  #: its BuiltinOperator name (a custom operator's name)
    #: "dsp", "mve" (Helium), "generic", "view" (no code) or "tvm" (a fused function TVM compiled)
    kernel: str
    scheme: str  #: the dtype scheme (int8, float32, int16x8, ...)
    function: str | None  #: its C function (None: a view, no code)
    inputs: tuple[TensorFacts, ...]
    outputs: tuple[TensorFacts, ...]
    macs: int
    weight_bytes: int  #: its constants as stored for the kernel target
    scratch_bytes: int
    live_bytes: int  #: bytes of the activation pool live while it runs
    template: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"position": self.position, "node": self.node, "op": self.op,
                "kernel": self.kernel, "scheme": self.scheme, "function": self.function,
                "template": self.template,
                "inputs": [t.to_json() for t in self.inputs],
                "outputs": [t.to_json() for t in self.outputs], "macs": self.macs,
                "weight_bytes": self.weight_bytes, "scratch_bytes": self.scratch_bytes,
                "live_bytes": self.live_bytes}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Layer:
        return cls(int(data["position"]), int(data["node"]), str(data["op"]),
                   str(data["kernel"]), str(data.get("scheme", "")), data.get("function"),
                   tuple(TensorFacts.from_json(t) for t in data.get("inputs", [])),
                   tuple(TensorFacts.from_json(t) for t in data.get("outputs", [])),
                   int(data.get("macs", 0)), int(data.get("weight_bytes", 0)),
                   int(data.get("scratch_bytes", 0)), int(data.get("live_bytes", 0)),
                   str(data.get("template", "")))


@dataclass(frozen=True)
class PoolBuffer:
    """One buffer of the activation pool: where it sits and while which layers it lives."""

    offset: int
    size: int  #: as planned (rounded up to the pool's alignment)
    first: int  #: position of the first layer that uses it
    last: int  #: position of the last
    what: str  #: the tensor it holds (its set's first), or "scratch of node N"
    scratch: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "size": self.size, "first": self.first,
                "last": self.last, "what": self.what, "scratch": self.scratch}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PoolBuffer:
        return cls(int(data["offset"]), int(data["size"]), int(data["first"]), int(data["last"]),
                   str(data.get("what", "")), bool(data.get("scratch", False)))


@dataclass
class PoolPlan:
    """The activation pool: its size, the planner's lower bound and every buffer."""

    size: int
    lower_bound: int
    buffers: list[PoolBuffer] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"size": self.size, "lower_bound": self.lower_bound,
                "buffers": [b.to_json() for b in self.buffers]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PoolPlan:
        return cls(int(data["size"]), int(data["lower_bound"]),
                   [PoolBuffer.from_json(b) for b in data.get("buffers", [])])

    def live_at(self, position: int) -> int:
        """Bytes of the pool live while the layer at ``position`` runs."""
        return sum(b.size for b in self.buffers if b.first <= position <= b.last)


def _dims(graph: Graph, t: int) -> tuple[int, ...]:
    return tuple(graph.tensor(t).shape)


def _elements(shape: tuple[int, ...]) -> int:
    return int(np.prod(shape, dtype=np.int64)) if shape else 1


def macs(op: Operator, graph: Graph) -> int:
    """Multiply-accumulates of one node, counted as TFLM's and X-CUBE-AI's reports count them:
    every filter tap, padding included, for CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV,
    FULLY_CONNECTED and BATCH_MATMUL; 0 for every other operator (they move, compare or add
    data, and their cost is their element count, not a product)."""
    ins = op.inputs
    try:
        if op.opcode == "CONV_2D":
            oc, kh, kw, ic = _dims(graph, ins[1])
            n, oh, ow, _ = _dims(graph, op.outputs[0])
            return n * oh * ow * oc * kh * kw * ic
        if op.opcode == "DEPTHWISE_CONV_2D":
            _, kh, kw, oc = _dims(graph, ins[1])
            n, oh, ow, _ = _dims(graph, op.outputs[0])
            return n * oh * ow * oc * kh * kw
        if op.opcode == "TRANSPOSE_CONV":
            oc, kh, kw, _ = _dims(graph, ins[1])
            return _elements(_dims(graph, ins[2])) * kh * kw * oc
        if op.opcode == "FULLY_CONNECTED":
            _, depth = _dims(graph, ins[1])
            return _elements(_dims(graph, op.outputs[0])) * depth
        if op.opcode == "BATCH_MATMUL":
            a = _dims(graph, ins[0])
            adj_x = bool(op.options.get("adj_x", False))
            inner = a[-2] if adj_x else a[-1]
            return _elements(_dims(graph, op.outputs[0])) * inner
    except (ValueError, IndexError):  # a shape the operator's checks would refuse
        return 0
    return 0


def function_name(node: int, label: str) -> str:
    """The C function the code generator names a node's kernel (``op3_conv_2d``)."""
    return f"op{node}_{re.sub(r'[^A-Za-z0-9]', '_', label).lower()}"


def _label(op: Operator) -> str:
    return (op.custom_code or "custom") if op.opcode == "CUSTOM" else op.opcode


def _facts(graph: Graph, indices: list[int]) -> tuple[TensorFacts, ...]:
    out = []
    for t in indices:
        if t < 0 or graph.tensor(t).is_const:
            continue
        tensor = graph.tensor(t)
        out.append(TensorFacts(tensor.name, tensor.dtype, tuple(tensor.shape)))
    return tuple(out)


def pool_plan(gen: Any, graph: Graph) -> PoolPlan:
    """The activation pool of ``gen`` (a :class:`~.codegen.Generated`): one entry per planned
    buffer, named by the tensor it holds or the node whose scratch it is."""
    plan = gen.plan
    if plan is None:
        return PoolPlan(gen.workspace_size_bytes, gen.lower_bound_bytes)
    buffers = []
    for b in sorted(plan.buffers, key=lambda b: (b.first, b.offset, b.id)):
        if b.id >= _SCRATCH_ID_BASE:
            pos = b.id - _SCRATCH_ID_BASE
            node = gen.kernels[pos].op.index if pos < len(gen.kernels) else pos
            buffers.append(PoolBuffer(b.offset, b.size, b.first, b.last,
                                      f"scratch of node {node}", True))
        else:
            what = graph.tensor(b.id).name if 0 <= b.id < len(graph.tensors) else f"buffer {b.id}"
            buffers.append(PoolBuffer(b.offset, b.size, b.first, b.last, what))
    return PoolPlan(plan.pool_size, plan.lower_bound, buffers)


def layers(gen: Any, graph: Graph) -> list[Layer]:
    """Every node of ``gen`` (a :class:`~.codegen.Generated` made from ``graph``), in
    execution order."""
    plan = pool_plan(gen, graph)
    out = []
    for pos, k in enumerate(gen.kernels):
        view = bool(k.alias)
        kernel = ("view" if view else "dsp" if k.dsp
                  else "mve" if k.params.get("mve") else "generic")
        weights = 0 if view else sum(int(c.values.size) * _CTYPE_BYTES[c.ctype]
                                     for c in k.constants)
        out.append(Layer(
            position=pos, node=k.op.index, op=_label(k.op), kernel=kernel, scheme=k.scheme,
            function=None if view else function_name(k.op.index, _label(k.op)),
            inputs=_facts(graph, k.op.inputs), outputs=_facts(graph, k.op.outputs),
            macs=macs(k.op, graph), weight_bytes=weights,
            scratch_bytes=0 if view else int(k.scratch_bytes), live_bytes=plan.live_at(pos),
            template="" if view else k.template))
    return out

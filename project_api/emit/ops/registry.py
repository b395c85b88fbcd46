"""The operator registry: which op module handles which operator, in which dtype schemes.

Built by :mod:`project_api.emit.ops` from its explicit list of modules, each declaring an
:class:`~.common.OpSpec` as ``SPEC``. The code generator asks it to prepare every node
(:meth:`Registry.prepare`); ``project-api ops`` lists it (:meth:`Registry.entries`). Every
refusal here is one line that names the operator, the node, the tensor and what is supported.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from project_api.tflite import schema
from project_api.tflite.graph import Graph, Operator

from ...errors import UnsupportedOperatorError
from ..target import Target
from .common import Kernel, OpSpec

#: Custom operators that hold a subgraph compiled for an accelerator, and what compiled it.
NPU_CUSTOM_OPS = {"ethos-u": ("the model's layers were compiled by Vela into a command stream "
                             "for an Arm Ethos-U NPU, which no CPU runs; give the .tflite from "
                             "before Vela (the one Vela was given)")}


def _computes(op: Operator, graph: Graph) -> str:
    return f" computing '{graph.tensor(op.outputs[0]).name}'" if op.outputs else ""


def _npu_refusal(op: Operator, graph: Graph) -> UnsupportedOperatorError:
    return UnsupportedOperatorError(
        f"{op.describe()}{_computes(op, graph)}: {NPU_CUSTOM_OPS[op.custom_code or '']}")


@dataclass(frozen=True)
class Entry:
    """One operator as the registry knows it (for listings)."""

    name: str  # BuiltinOperator name, or the custom operator's name
    custom: bool
    module: str
    spec: OpSpec
    prepare: Callable[[Operator, Graph, Target], Kernel]


class Registry:
    """Operators by name, from op modules' ``SPEC`` declarations."""

    def __init__(self, specs: Iterable[tuple[str, OpSpec, Callable[..., Kernel]]]):
        """``specs``: (module name, its SPEC, its prepare) of each op module."""
        self.builtin: dict[str, Entry] = {}
        self.custom: dict[str, Entry] = {}
        for module, spec, prepare in specs:
            if not spec.schemes:
                raise ValueError(f"op module {module} declares no dtype schemes")
            if not set(spec.dsp) <= set(spec.schemes):
                raise ValueError(f"op module {module}: DSP schemes {list(spec.dsp)} are not "
                                 f"all among its schemes {list(spec.schemes)}")
            for name in spec.opcodes:
                if name not in schema.BUILTIN_OPERATORS or name == "CUSTOM":
                    raise ValueError(f"op module {module} declares {name!r}, which is no "
                                     "BuiltinOperator of the schema")
                self._add(self.builtin, Entry(name, False, module, spec, prepare))
            for name in spec.custom:
                self._add(self.custom, Entry(name, True, module, spec, prepare))

    @staticmethod
    def _add(table: dict[str, Entry], entry: Entry) -> None:
        if entry.name in table:
            raise ValueError(f"operator {entry.name} is declared by both op modules "
                             f"{table[entry.name].module} and {entry.module}")
        table[entry.name] = entry

    @classmethod
    def from_modules(cls, package: str, modules: Iterable[str]) -> Registry:
        """The registry of ``package``'s op ``modules`` (each with ``SPEC`` and ``prepare``)."""
        specs = []
        for name in modules:
            module = importlib.import_module(f"{package}.{name}")
            spec = getattr(module, "SPEC", None)
            prepare = getattr(module, "prepare", None)
            if not isinstance(spec, OpSpec) or not callable(prepare):
                raise ValueError(f"op module {package}.{name} needs SPEC = OpSpec(...) and "
                                 "prepare(op, graph, target)")
            specs.append((name, spec, prepare))
        return cls(specs)

    def entries(self) -> list[Entry]:
        """Every operator, builtins then custom ones, each sorted by name."""
        return ([self.builtin[k] for k in sorted(self.builtin)]
                + [self.custom[k] for k in sorted(self.custom)])

    def table(self) -> list[dict[str, Any]]:
        """Every operator as data (what ``project-api ops`` prints): its name, whether it is
        custom, its dtype schemes, whether it is a view (no code) or a view where its output is
        a contiguous run of its input (``offset_view``), and per kernel target the schemes with
        DSP-extension kernels there."""
        from ..target import TARGET_NAMES, resolve

        targets = {name: resolve(name) for name in TARGET_NAMES}
        return [{"name": e.name, "custom": e.custom, "schemes": list(e.spec.schemes),
                 "view": e.spec.view, "offset_view": e.spec.offset_view,
                 "module": e.module,
                 "dsp": {t: list(e.spec.dsp) if target.dsp else []
                         for t, target in targets.items()}}
                for e in self.entries()]

    def lookup(self, op: Operator) -> Entry | None:
        if op.opcode == "CUSTOM":
            return self.custom.get(op.custom_code or "")
        return self.builtin.get(op.opcode)

    def _supported(self) -> str:
        names = sorted(self.builtin) + [f"custom {k}" for k in sorted(self.custom)]
        return ", ".join(names)

    def refuse_npu_ops(self, graphs: Iterable[Graph]) -> None:
        """Refuse a model compiled for an NPU before any of its other nodes is looked at (the
        CPU nodes Vela leaves around its command stream may be anything)."""
        for graph in graphs:
            for op in graph.operators:
                if op.opcode == "CUSTOM" and op.custom_code in NPU_CUSTOM_OPS:
                    raise _npu_refusal(op, graph)

    def prepare(self, op: Operator, graph: Graph, target: Target) -> Kernel:
        """Check ``op`` against its module's declaration and prepare its kernel for
        ``target``; one-line :class:`UnsupportedOperatorError` otherwise."""
        entry = self.lookup(op)
        if entry is None:
            computes = _computes(op, graph)
            if op.opcode == "CUSTOM" and op.custom_code in NPU_CUSTOM_OPS:
                raise _npu_refusal(op, graph)
            raise UnsupportedOperatorError(
                f"{op.describe()}{computes}: operator not supported by the emitter (supported: "
                f"{self._supported()}; 'project-api ops' lists their types)")
        spec = entry.spec
        scheme, what = spec.classify(op, graph)
        if scheme not in spec.schemes:
            raise UnsupportedOperatorError(
                f"{op.describe()}: {what}: {scheme} is not supported (supported: "
                f"{', '.join(spec.schemes)})")
        if not spec.state:
            for i, t in enumerate(op.inputs):
                if t >= 0 and graph.tensor(t).is_variable:
                    raise UnsupportedOperatorError(
                        f"{op.describe()}: input {i} '{graph.tensor(t).name}' is a variable "
                        f"tensor (state kept across invocations), which {op.name} does not "
                        "take")
        kernel = entry.prepare(op, graph, target)
        if kernel.alias and not (spec.view or spec.offset_view and kernel.alias_offsets):
            raise RuntimeError(f"op module {entry.module} aliased {op.describe()} without "
                               "declaring view=True (or offset_view=True, with alias_offsets)")
        kernel.scheme = scheme
        return kernel

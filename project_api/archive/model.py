"""What an archive describes, once read: its modules, their tensors (name, dtype, shape, size,
quantization, where each fact came from) and graph, and the ``--input-spec`` a user gives for a
fact no file states.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from project_api.archive import tvm_graph
from project_api.archive.facts import dtype_bits, tensor_size_bytes
from project_api.errors import MLFError


@dataclass(frozen=True)
class TensorInfo:
    """One input or output of a module."""

    name: str  #: tensor name as in metadata.json / the Relay signature
    c_name: str  #: the member name in ``struct tvmgen_<mod>_inputs`` (sanitized)
    dtype: str  #: "int8", "float32", ...
    size_bytes: int
    shape: tuple[int, ...] | None  #: None when no source of the archive records it
    quantization: dict[str, Any] | None = None  #: {"scale": [...], "zero_point": [...]}
    #: How a fact the archive does not record was inferred (Relay body, size arithmetic, the
    #: model's one dtype, a flat shape from the size), one sentence; None when all is recorded.
    note: str | None = None

    def require_shape(self) -> tuple[int, ...]:
        """The shape, or :class:`MLFError` if the archive does not record it."""
        if self.shape is None:
            raise MLFError(
                f"tensor {self.name!r}: the archive records no shape (neither metadata.json "
                "\"shape\" nor a readable Relay text); supply it with --input-spec "
                f"{self.name}:{self.dtype}:D0xD1x..."
            )
        return self.shape

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "c_name": self.c_name,
            "dtype": self.dtype,
            "size_bytes": self.size_bytes,
            "shape": list(self.shape) if self.shape is not None else None,
            "quantization": self.quantization,
            "note": self.note,
        }


@dataclass
class ModuleInfo:
    """One model (TVM "module") of the library."""

    name: str
    executors: list[str]
    style: str
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    workspace_size_bytes: int
    constants_size_bytes: int
    io_size_bytes: int | None
    interface_header: Path | None
    sources: list[Path]
    #: ``tvmgen_<name>_run`` (struct API), ``tvmgen_<name>_run_model`` (early-v5 flat API taking
    #: inputs then outputs as ``void*``), or None when the module has no C entry point we know.
    run_function: str | None
    objects: list[Path] = field(default_factory=list)  #: codegen/host/lib/*.o
    relay_path: Path | None = None
    graph_json_path: Path | None = None
    params_path: Path | None = None
    #: Names in ``parameters/<mod>.params`` (the weights TVM kept apart), None if unreadable.
    param_names: list[str] | None = None
    #: Bytes of memory pools the module's own C declares (USMP internal pools, ``static uint8_t
    #: <pool>[N]`` in section ``.bss.noinit.tvm``): the model brings its own workspace.
    internal_workspace_bytes: int = 0
    #: The CPU the module was compiled for (``"cortex-m4"``), from ``-mcpu=`` of a target.
    target_cpu: str | None = None
    #: ``"cortex-m"``, ``"cortex-a"``, ``"arm"`` (Arm, profile unknown) or None (portable C).
    target_family: str | None = None
    #: Where :attr:`target_cpu` / :attr:`target_family` were read, e.g. ``metadata.json target
    #: 'c -keys=arm_cpu,cpu -mcpu=cortex-m4'`` or ``default_lib1.c includes <arm_acle.h>``.
    target_evidence: str | None = None
    #: USMP pools the caller must provide (header ``struct tvmgen_<mod>_workspace_pools``):
    #: member name -> bytes from ``..._<POOL>_WORKSPACE_POOL_SIZE`` (None if not stated). The
    #: struct entry point then takes a third ``workspace_pools`` argument.
    external_pools: dict[str, int | None] = field(default_factory=dict)
    #: Members of the header's ``struct tvmgen_<mod>_devices`` (an argument of ``_run`` too).
    devices: list[str] = field(default_factory=list)
    #: True when the inputs and outputs live inside the pools (USMP ``io_pool_allocations``:
    #: the header declares ``tvmgen_<mod>_map_inputs`` and ``_run`` takes no tensors).
    io_in_pools: bool = False
    #: A graph-executor module's configuration, parameters and functions (None for AOT).
    graph: GraphModule | None = None
    #: A profile build of our emitter (``emit --profile``): its C times every operator and
    #: exports ``tvmgen_<name>_profile_read`` (metadata.json ``"profile": true``).
    profile: bool = False
    #: Bytes of state the module keeps from one run to the next in its own static region
    #: (variable tensors, resource variables; our emitter's ``state_size_bytes``); 0: none.
    state_size_bytes: int = 0

    @property
    def reset_function(self) -> str | None:
        """``tvmgen_<name>_reset``, which restores a stateful module's state to its values at
        boot; None for a module without state."""
        if not self.state_size_bytes or self.run_function is None or self.run_api != "struct":
            return None
        return self.run_function[: -len("_run")] + "_reset"

    @property
    def run_api(self) -> str | None:
        """"struct", "flat" or None, following :attr:`run_function`."""
        if self.run_function is None:
            return None
        return "flat" if self.run_function.endswith("_run_model") else "struct"

    @property
    def has_internal_workspace(self) -> bool:
        """True when the module's C carries its own memory pool (see internal_workspace_bytes)."""
        return self.internal_workspace_bytes > 0

    def input(self, key: str | int) -> TensorInfo:
        """The input with this name, C name or position."""
        return _find_tensor(self.inputs, key, "input", self.name)

    def output(self, key: str | int) -> TensorInfo:
        """The output with this name, C name or position."""
        return _find_tensor(self.outputs, key, "output", self.name)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "executors": list(self.executors),
            "style": self.style,
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
            "workspace_size_bytes": self.workspace_size_bytes,
            "constants_size_bytes": self.constants_size_bytes,
            "io_size_bytes": self.io_size_bytes,
            "interface_header": str(self.interface_header) if self.interface_header else None,
            "sources": [str(p) for p in self.sources],
            "run_function": self.run_function,
            "param_names": self.param_names,
            "internal_workspace_bytes": self.internal_workspace_bytes,
            "target_cpu": self.target_cpu,
            "target_family": self.target_family,
            "target_evidence": self.target_evidence,
            "external_pools": dict(self.external_pools),
            "devices": list(self.devices),
            "io_in_pools": self.io_in_pools,
            "graph": self.graph.to_json() if self.graph is not None else None,
            "profile": self.profile,
            "state_size_bytes": self.state_size_bytes,
        }


@dataclass
class GraphModule:
    """What a graph-executor module runs: its graph (:class:`project_api.archive.tvm_graph.Graph`), the
    parameters of the params file, the parameters TVM 0.8's ``--link-params`` linked into the C
    (storage id -> the ``__tvm_param__`` array ``_lookup_linked_param`` returns), and the names
    of the system-library registry of its C (``_tvm_func_registry``, None when it has none)."""

    graph: tvm_graph.Graph
    params: list[tvm_graph.Param]
    linked_params: dict[int, str] = field(default_factory=dict)
    registry: list[str] | None = None
    #: The input nodes (not parameters), in node order: what the model's inputs are.
    input_nodes: list[tvm_graph.ArgNode] = field(default_factory=list)
    #: Bytes of the params file (0 without one).
    params_file_bytes: int = 0
    #: The largest workspace an operator takes (metadata.json's operator_functions), or None
    #: when the metadata lists no operators.
    operator_workspace_bytes: int | None = None

    @property
    def params_bytes(self) -> int:
        return sum(p.size_bytes for p in self.params)

    def param(self, name: str) -> tvm_graph.Param | None:
        return next((p for p in self.params if p.name == name), None)

    def to_json(self) -> dict[str, Any]:
        g = self.graph
        return {
            "path": str(g.path), "json_bytes": g.json_bytes, "nodes": len(g.node_names),
            "entries": len(g.entries), "storage_ids": len(g.storage_sizes()),
            "ops": [op.name for op in g.ops], "func_names": g.func_names(),
            "params": [p.name for p in self.params], "params_bytes": self.params_bytes,
            "linked_params": {str(k): v for k, v in self.linked_params.items()},
            "registry": self.registry, "params_file_bytes": self.params_file_bytes,
            "operator_workspace_bytes": self.operator_workspace_bytes,
        }


def _find_tensor(tensors: list[TensorInfo], key: str | int, kind: str, module: str) -> TensorInfo:
    if isinstance(key, int):
        if 0 <= key < len(tensors):
            return tensors[key]
        raise MLFError(f"module {module!r} has {len(tensors)} {kind}s; index {key} is out of range")
    for t in tensors:
        if key in (t.name, t.c_name):
            return t
    names = ", ".join(t.name for t in tensors) or "none"
    raise MLFError(f"module {module!r} has no {kind} named {key!r}; its {kind}s: {names}")


@dataclass(frozen=True)
class InputSpec:
    """A fact about one tensor that the archive lacks, given as ``NAME:DTYPE:SHAPE``.

    ``NAME`` is the tensor's name or C name (an output's name works too), ``SHAPE`` is
    ``D0xD1x...`` (empty for a scalar): ``input_1:int8:1x49x10x1``.
    """

    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def size_bytes(self) -> int:
        return tensor_size_bytes(self.shape, self.dtype)

    def __str__(self) -> str:
        return f"{self.name}:{self.dtype}:{'x'.join(map(str, self.shape))}"


def parse_input_spec(text: str) -> InputSpec:
    """``NAME:DTYPE:SHAPE`` (e.g. ``input_1:int8:1x49x10x1``) -> :class:`InputSpec`.

    The name may itself hold ``:`` (``serving_default_input_1:0:int8:1x49x10x1``): the last two
    fields are the dtype and the shape.
    """
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise MLFError(
            f"--input-spec {text!r}: want NAME:DTYPE:SHAPE, e.g. input_1:int8:1x49x10x1"
        )
    name, dtype, shape_text = parts[0], parts[1].strip(), parts[2].strip()
    try:
        dtype_bits(dtype)
    except MLFError:
        raise MLFError(
            f"--input-spec {text!r}: unknown dtype {dtype!r}; use e.g. int8, uint8, int32, float32"
        ) from None
    dims: list[int] = []
    if shape_text and shape_text not in ("()", "scalar"):
        for d in shape_text.lower().replace(",", "x").split("x"):
            if not d.strip().isdigit():
                raise MLFError(
                    f"--input-spec {text!r}: shape {shape_text!r} is not D0xD1x... of "
                    "non-negative integers, e.g. 1x49x10x1"
                )
            dims.append(int(d))
    return InputSpec(name, dtype, tuple(dims))


def _spec_table(specs: Iterable[InputSpec | str] | None) -> dict[str, InputSpec]:
    table: dict[str, InputSpec] = {}
    for s in specs or ():
        spec = parse_input_spec(s) if isinstance(s, str) else s
        if spec.name in table:
            raise MLFError(f"--input-spec names {spec.name!r} twice; give each tensor once")
        table[spec.name] = spec
    return table

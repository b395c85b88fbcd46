"""The state region: what a module keeps from one invocation to the next.

TFLite Micro keeps three kinds of state in its persistent arena, and so does the emitted module,
in one static region of its own (never overlapped by the activation pool):

* **variable tensors** (TFLite ``is_variable``): the hidden and cell state of
  UNIDIRECTIONAL_SEQUENCE_LSTM, the activation state of SVDF, which those ops update in place;
* **resource variables**: one per ``(container, shared_name)`` of the model's VAR_HANDLE nodes,
  read by READ_VARIABLE and written by ASSIGN_VARIABLE; as in TFLM, its size is that of the
  value the first ASSIGN_VARIABLE (in TFLM's Prepare order: subgraph by subgraph, node by node)
  writes to it;
* **CALL_ONCE flags**: one byte per CALL_ONCE node, set once its init subgraph has run.

:func:`layout` lays the region out at emit time (8-byte aligned slots, flags packed at the end)
and checks what ties nodes together (every READ_VARIABLE and ASSIGN_VARIABLE matches the size of
its variable, a variable is assigned somewhere). The reset values are TFLM's
(``ResetVariableTensors``, ``MicroResourceVariables``): a variable tensor is filled with its zero
point if it is int8, else with zeros; a resource variable with the first assigned value's zero
point taken as a byte (zero when that value is not quantized); a flag with zero. The generated
``tvmgen_<name>_reset()`` restores them; the region holds them from boot.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from project_api.tflite.graph import Graph, Operator, Tensor

from ..errors import UnsupportedOperatorError

#: Alignment of every tensor-sized slot (the widest element the kernels read is 8 bytes).
ALIGN = 8

#: A slot's key: ("tensor", subgraph, tensor index), ("resource", container, shared_name) or
#: ("once", subgraph, node index).
SlotKey = tuple


@dataclass
class Slot:
    """One piece of the state region."""

    key: SlotKey
    kind: str  #: "variable", "resource", "once" or "op" (an operator's own state)
    name: str  #: what the generated C's comments call it
    size: int
    reset_byte: int = 0  #: the byte the region is filled with at reset (0..255)
    offset: int = -1


@dataclass
class StateLayout:
    """The state region of a module: its slots, their offsets, and which tensors live there."""

    slots: list[Slot] = field(default_factory=list)
    size: int = 0
    #: (subgraph, tensor index) -> slot: the variable tensors, and the resource tensors the
    #: VAR_HANDLE nodes produce (the slot of the variable they name).
    tensors: dict[tuple[int, int], Slot] = field(default_factory=dict)
    by_key: dict[SlotKey, Slot] = field(default_factory=dict)

    def slot_of(self, subgraph: int, tensor: int) -> Slot | None:
        return self.tensors.get((subgraph, tensor))

    def add_op_slot(self, key: SlotKey, name: str, size: int) -> Slot:
        """A slot of state an operator keeps for itself (``Kernel.persistent_bytes``), zero at
        reset, after every slot laid out so far (their offsets do not move)."""
        slot = Slot(key, "op", name, size, 0, self.size)
        self.slots.append(slot)
        self.by_key[key] = slot
        self.size = _align(self.size + size)
        return slot

    @property
    def nonzero_reset(self) -> list[Slot]:
        """The slots whose reset value is not zero (memset after the region is cleared)."""
        return [s for s in self.slots if s.reset_byte]


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _tensor_reset_byte(t: Tensor) -> int:
    """TFLM's ResetTensorData: an int8 variable tensor is filled with its zero point."""
    if t.dtype == "int8" and t.quant is not None and t.quant.zero_point:
        return int(t.quant.zero_point[0]) & 0xFF
    return 0


def _where(g: Graph, op: Operator) -> str:
    return f"{op.describe()}{f' of subgraph {g.index}' if g.index else ''}"


def _resource_key(g: Graph, op: Operator, resources: list[tuple[str | None, str]]
                  ) -> tuple[str | None, str]:
    """The variable a VAR_HANDLE names, found as TFLM's ``FindId`` does (an absent container
    matches any), else a new one."""
    container = op.options.get("container")
    shared = op.options.get("shared_name")
    if shared is None:
        raise UnsupportedOperatorError(f"{_where(g, op)}: VAR_HANDLE without a shared_name; "
                                       "name the variable in the model")
    for c, s in resources:
        if container is not None and c is None:
            raise UnsupportedOperatorError(
                f"{_where(g, op)}: VAR_HANDLE '{shared}' has a container where an earlier one "
                f"('{s}') has none, which TFLM cannot compare (it crashes); give every VAR_HANDLE "
                "a container, or none")
        if s == shared and (container is None or c == container):
            return c, s
    resources.append((container, shared))
    return container, shared


def _handle(g: Graph, op: Operator, handles: dict[int, tuple[str | None, str]], what: str
            ) -> tuple[str | None, str]:
    """The variable the resource input 0 of ``op`` names (a VAR_HANDLE of the same subgraph)."""
    t = op.inputs[0] if op.inputs else -1
    if t < 0 or t not in handles:
        name = f" '{g.tensor(t).name}'" if t >= 0 else ""
        raise UnsupportedOperatorError(
            f"{_where(g, op)}: its resource input{name} does not come from a VAR_HANDLE of the "
            f"same subgraph; {what} takes a resource variable named by a VAR_HANDLE beside it")
    return handles[t]


def layout(graph: Graph, reachable: list[int]) -> StateLayout:
    """The state region of ``graph``'s model: the variable tensors of the subgraphs in
    ``reachable`` (the main one and those its control flow calls), every resource variable and
    every CALL_ONCE flag of those subgraphs.

    Resource variables take the size and reset value of the first ASSIGN_VARIABLE TFLM
    prepares (every subgraph in index order); one-line refusals name the node that does not
    fit (a size differing from its variable's, a variable no node assigns)."""
    subgraphs = graph.subgraphs or [graph]
    out = StateLayout()

    def add(slot: Slot) -> Slot:
        out.slots.append(slot)
        out.by_key[slot.key] = slot
        return slot

    for k in reachable:
        g = subgraphs[k]
        io = set(g.inputs) | set(g.outputs)
        for t in g.tensors:
            if not t.is_variable:
                continue
            if t.index in io:
                kind = "input" if t.index in g.inputs else "output"
                where = f"an {kind} of subgraph {k}" if k else f"a graph {kind}"
                raise UnsupportedOperatorError(
                    f"variable tensor '{t.name}' is {where}; state stays inside the module "
                    "(the operators that own it read and update it in place)")
            if t.dtype == "resource":
                continue
            slot = add(Slot(("tensor", k, t.index), "variable", t.name, t.size_bytes,
                            _tensor_reset_byte(t)))
            out.tensors[(k, t.index)] = slot

    # resource variables: every VAR_HANDLE names one; sizes from the first ASSIGN_VARIABLE
    resources: list[tuple[str | None, str]] = []
    handles_of: dict[int, dict[int, tuple[str | None, str]]] = {}
    for g in subgraphs:
        handles: dict[int, tuple[str | None, str]] = {}
        for op in g.operators:
            if op.opcode == "VAR_HANDLE" and op.outputs:
                handles[op.outputs[0]] = _resource_key(g, op, resources)
        handles_of[g.index] = handles
    sizes: dict[tuple[str | None, str], tuple[int, int, str]] = {}  # key -> size, byte, node
    for g in subgraphs:
        for op in g.operators:
            if op.opcode != "ASSIGN_VARIABLE" or len(op.inputs) < 2 or op.inputs[1] < 0:
                continue
            key = _handle(g, op, handles_of[g.index], "ASSIGN_VARIABLE")
            value = g.tensor(op.inputs[1])
            if key not in sizes:
                byte = (int(value.quant.zero_point[0]) & 0xFF) if value.quant is not None else 0
                sizes[key] = (value.size_bytes, byte, _where(g, op))
    used = [key for k in reachable for key in dict.fromkeys(handles_of[k].values())]
    for key in dict.fromkeys(used):
        container, shared = key
        label = shared if not container else f"{container}/{shared}"
        if key not in sizes:
            raise UnsupportedOperatorError(
                f"resource variable '{label}' is never assigned (no ASSIGN_VARIABLE writes it), "
                "so it has no size; assign it, e.g. in the init subgraph of a CALL_ONCE")
        size, byte, _ = sizes[key]
        add(Slot(("resource", container, shared), "resource", label, size, byte))
    for k in reachable:
        g = subgraphs[k]
        for t, key in handles_of[k].items():
            out.tensors[(k, t)] = out.by_key[("resource", *key)]
        for op in g.operators:
            if op.opcode not in ("READ_VARIABLE", "ASSIGN_VARIABLE"):
                continue
            key = _handle(g, op, handles_of[k], op.opcode)
            value_idx = op.outputs[0] if op.opcode == "READ_VARIABLE" else (
                op.inputs[1] if len(op.inputs) > 1 else -1)
            if value_idx < 0:
                continue  # the op module refuses the missing operand
            value = g.tensor(value_idx)
            size, _, first = sizes[key]
            if value.size_bytes != size:
                raise UnsupportedOperatorError(
                    f"{_where(g, op)}: '{value.name}' has {value.size_bytes} bytes, resource "
                    f"variable '{out.by_key[('resource', *key)].name}' holds {size} (its size "
                    f"from {first}); read and assign it with one shape and type")

    for k in reachable:
        for op in subgraphs[k].operators:
            if op.opcode == "CALL_ONCE":
                add(Slot(("once", k, op.index), "once",
                         f"CALL_ONCE node {op.index}" + (f" of subgraph {k}" if k else ""), 1))

    offset = 0
    for s in out.slots:
        if s.kind != "once":
            s.offset = offset
            offset += _align(s.size)
    for s in out.slots:
        if s.kind == "once":
            s.offset = offset
            offset += 1
    out.size = _align(offset) if offset else 0
    return out

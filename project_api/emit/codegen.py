"""Turn a :class:`~.graph.Graph` into C: prepare every op, plan memory, render the sources.

The output is one C file (kernels, constants and ``tvmgen_<name>_run``) and the TVM-style
interface header. All checks happen while preparing the ops; the C has none beyond the one
``TVMBackendAllocWorkspace`` result check.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import numpy as np

from project_api.archive import dtypes
from project_api.tflite.graph import Graph, Operator, Tensor, reachable_subgraphs

from ..errors import EmitError, UnsupportedOperatorError
from ..template.quoting import c_comment
from . import planner, quantize
from .ops import REGISTRY
from .ops.common import ConstArray, Kernel, float_literal
from .state import StateLayout
from .state import layout as state_layout
from .target import GENERIC, Target

LOG = logging.getLogger(__name__)

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"

#: Buffer ids of per-op scratch start here (tensor storage ids are tensor indices, far below).
SCRATCH_ID_BASE = 1 << 40

#: Element types a graph input or output may have (bool: one byte, 0 or 1, as TFLite stores it;
#: uint32 and uint64: the spectra and filter-bank channels of TFLM's signal library).
IO_DTYPES = ("int8", "uint8", "int16", "int32", "int64", "float32", "bool", "uint32", "uint64")


def sanitize(name: str) -> str:
    """TVM's ``SanitizeName``: every non-alphanumeric character becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9]", "_", name)


#: C99's keywords (and C11's, which a C11 compiler of the same source would reserve).
C_KEYWORDS = frozenset("""
    auto break case char const continue default do double else enum extern float for goto if
    inline int long register restrict return short signed sizeof static struct switch typedef
    union unsigned void volatile while _Bool _Complex _Imaginary _Alignas _Alignof _Atomic
    _Generic _Noreturn _Static_assert _Thread_local""".split())


def c_identifiers(names: list[str]) -> list[str]:
    """The C identifiers of tensors named ``names``, in order: TVM's sanitized name where that
    is one, else made one: ``tensor`` for an empty name, ``t_`` before a leading digit
    (``14`` -> ``t_14``), ``_`` after a C keyword (``int`` -> ``int_``); where two collide
    (case-insensitively: the header's size macros are upper case), the later ones get
    ``_2``, ``_3``, ... The tensors keep their names everywhere a user sees them."""
    taken: set[str] = set()
    out = []
    for name in names:
        c = sanitize(name) or "tensor"
        if c[0].isdigit():
            c = "t_" + c
        if c in C_KEYWORDS:
            c += "_"
        base, k = c, 2
        while c.upper() in taken:
            c, k = f"{base}_{k}", k + 1
        taken.add(c.upper())
        out.append(c)
    return out


@dataclass
class IOTensor:
    """A graph input or output as the interface sees it."""

    name: str
    c_name: str
    dtype: str
    shape: tuple[int, ...]
    size_bytes: int
    quantization: dict | None


@dataclass
class Generated:
    """Everything the MLF writer and the caller need from code generation."""

    name: str
    header: str
    source: str
    inputs: list[IOTensor]
    outputs: list[IOTensor]
    workspace_size_bytes: int
    lower_bound_bytes: int
    constants_size_bytes: int
    kernels: list[Kernel] = field(default_factory=list)
    plan: planner.MemoryPlan | None = None
    target: Target = GENERIC
    #: The graph it was generated from (per-layer facts: :mod:`.layers`).
    graph: Graph | None = field(default=None, repr=False)
    #: A profile build (:mod:`.profile`): the C times every operator into a table.
    profile: bool = False
    #: Bytes of the state region (variable tensors, resource variables, CALL_ONCE flags): a
    #: static array of the module, kept across runs, reset by ``tvmgen_<name>_reset``.
    state_size_bytes: int = 0
    state: StateLayout | None = None
    #: The subgraphs the main one calls, lowered (index -> its kernels, plan and function).
    callees: dict[int, Lowered] = field(default_factory=dict)


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(KERNELS_DIR)),
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, autoescape=False)
    env.filters["flit"] = float_literal
    env.filters["plus"] = lambda v: f"+ {v}" if v >= 0 else f"- {-v}"
    env.filters["fmin"] = lambda v: "-FLT_MAX" if v is None else float_literal(v)
    env.filters["fmax"] = lambda v: "FLT_MAX" if v is None else float_literal(v)
    env.globals["sigmoid_table_rows"] = quantize.sigmoid_table_rows  # kernels/sigmoid.h.j2
    return env


def _io(t: Tensor) -> IOTensor:
    if t.dtype not in IO_DTYPES:
        raise UnsupportedOperatorError(f"graph input/output '{t.name}' has type {t.dtype}")
    quant = None
    if t.quant is not None:
        quant = {"scale": [float(np.float32(s)) for s in t.quant.scale],
                 "zero_point": [int(z) for z in t.quant.zero_point]}
    return IOTensor(t.name, sanitize(t.name), t.dtype, tuple(t.shape), t.size_bytes, quant)


#: numpy type of each C type a constant array may have.
C_NUMPY_TYPES = {"float": np.float32, "int8_t": np.int8, "int16_t": np.int16, "int32_t": np.int32,
                 "int64_t": np.int64, "uint8_t": np.uint8, "uint16_t": np.uint16,
                 "uint32_t": np.uint32}


def _label(op: Operator) -> str:
    """The operator's name in the C: its BuiltinOperator name, or the custom op's name."""
    return (op.custom_code or "custom") if op.opcode == "CUSTOM" else op.opcode


def _int_literal(v: int, ctype: str) -> str:
    if ctype == "int64_t" and v == -(1 << 63):
        return "(-INT64_MAX - 1)"
    return str(v)


def _format_array(c: ConstArray, cname: str) -> str:
    vals = c.values.reshape(-1)
    if c.ctype == "float":
        items = [float_literal(v) for v in vals.tolist()]
    else:
        items = [_int_literal(int(v), c.ctype) for v in vals.tolist()]
    per_line = 8 if c.ctype == "float" else 16
    lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    body = ",\n  ".join(lines)
    return f"static const {c.ctype} {cname}[{len(items)}] = {{\n  {body}\n}};\n"


class _Storage:
    """Union-find over tensor indices: tensors in one set share one buffer. Each tensor has a
    byte offset from its set's root (0 for the views of the whole input; a slice that is one
    contiguous run of its input sits at the run's offset): a weighted union-find."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}
        self.weight: dict[int, int] = {}  # byte offset of a tensor from its parent

    def find(self, t: int) -> int:
        self.parent.setdefault(t, t)
        self.weight.setdefault(t, 0)
        path = []
        while self.parent[t] != t:
            path.append(t)
            t = self.parent[t]
        for u in reversed(path):  # compress: offsets from the root, nearest first
            p = self.parent[u]
            if p != t:
                self.weight[u] += self.weight[p]
            self.parent[u] = t
        return t

    def offset(self, t: int) -> int:
        """Byte offset of ``t`` from its set's root."""
        self.find(t)
        return self.weight[t]

    def union(self, a: int, b: int, delta: int = 0) -> None:
        """Put ``b`` in ``a``'s set, ``delta`` bytes after ``a``."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        oa, ob = self.weight[a], self.weight[b]
        if ra < rb:
            self.parent[rb], self.weight[rb] = ra, oa + delta - ob
        else:
            self.parent[ra], self.weight[ra] = rb, ob - delta - oa

    def copy(self) -> _Storage:
        other = _Storage()
        other.parent, other.weight = dict(self.parent), dict(self.weight)
        return other

    def extent(self, root: int, graph: Graph) -> tuple[int, int]:
        """(lowest offset, highest end) in bytes of the members of ``root``'s set."""
        spans = [(self.offset(t), self.offset(t) + graph.tensor(t).size_bytes)
                 for t in list(self.parent) if self.find(t) == root]
        return min(s for s, _ in spans), max(e for _, e in spans)


def _external_covers(storage: _Storage, root: int, tensor: int, graph: Graph) -> bool:
    """Whether caller buffer ``tensor`` spans all of its set (members may only read or write
    inside the caller's buffer)."""
    lo, hi = storage.extent(root, graph)
    off = storage.offset(tensor)
    return off == lo and off + graph.tensor(tensor).size_bytes >= hi


def _pool_buffers(graph: Graph, kernels: list[Kernel], storage: _Storage,
                  root_external: dict[int, tuple[str, int]],
                  skip: Callable[[int], bool] | None = None, tail: Sequence[int] = ()
                  ) -> tuple[list[planner.Buffer], dict[int, int], dict[int, int]]:
    """The pool's buffers (one per storage set that is no caller buffer, one per op scratch),
    the lowest byte offset of each set, and the scratch buffer id of each kernel position.
    ``skip``: tensors stored elsewhere (the state region); ``tail``: tensors read after the last
    node (a callee's outputs copied at its end)."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    lo: dict[int, int] = {}
    hi: dict[int, int] = {}
    uses = [(idx, k.inputs + k.outputs) for idx, k in enumerate(kernels)]
    if tail:
        uses.append((len(kernels), list(tail)))
    for idx, tensors in uses:
        for t in tensors:
            if graph.tensor(t).is_const or (skip is not None and skip(t)):
                continue
            r = storage.find(t)
            off = storage.offset(t)
            first[r] = min(first.get(r, idx), idx)
            last[r] = max(last.get(r, idx), idx)
            lo[r] = min(lo.get(r, off), off)
            hi[r] = max(hi.get(r, 0), off + graph.tensor(t).size_bytes)
    buffers = [planner.Buffer(r, hi[r] - lo[r], first[r], last[r]) for r in sorted(first)
               if r not in root_external]
    scratch_id: dict[int, int] = {}  # kernel position -> buffer id of its scratch
    for idx, k in enumerate(kernels):
        if k.scratch_bytes and not k.alias:
            scratch_id[idx] = SCRATCH_ID_BASE + idx
            buffers.append(planner.Buffer(scratch_id[idx], k.scratch_bytes, idx, idx))
    return buffers, lo, scratch_id


def _lower_bound(graph: Graph, kernels: list[Kernel], storage: _Storage,
                 root_external: dict[int, tuple[str, int]],
                 skip: Callable[[int], bool] | None = None) -> int:
    """The pool's lower bound with ``storage`` (whose roots may differ from the keys of
    ``root_external``: its caller buffers are found by their tensors)."""
    roots = {storage.find(anchor): ext for ext in root_external.values() for anchor in ext[1:]}
    buffers = _pool_buffers(graph, kernels, storage, roots, skip)[0]
    return planner.lower_bound([planner.Buffer(b.id, planner.align(b.size), b.first, b.last)
                                for b in buffers])


def _alias_views(graph: Graph, kernels: list[Kernel], storage: _Storage,
                 root_external: dict[int, tuple[str, int]],
                 skip: Callable[[int], bool] | None = None) -> None:
    """Give every view op's outputs their input's storage, or clear ``alias`` (the kernel then
    copies): a view between two caller buffers copies; so does an output a caller buffer
    holds that does not span its whole set, and a view at an offset (``alias_offsets``) whose
    longer-lived input would raise the pool's lower bound."""
    for k in kernels:
        if not k.alias:
            continue
        x = k.inputs[0]
        if not k.alias_offsets:  # the whole input: RESHAPE, SQUEEZE, EXPAND_DIMS
            a, b = storage.find(x), storage.find(k.outputs[0])
            if a in root_external and b in root_external:
                k.alias = False  # two caller buffers: copy
                continue
            trial = storage.copy()
            trial.union(x, k.outputs[0])
            ext = root_external.get(a) or root_external.get(b)
            if ext is not None and not _external_covers(trial, trial.find(x), ext[1], graph):
                k.alias = False
                continue
            root_external.pop(a, None)
            root_external.pop(b, None)
            storage.union(x, k.outputs[0])
            if ext is not None:
                root_external[storage.find(x)] = ext
            continue
        if any(storage.find(y) in root_external for y in k.outputs):
            k.alias = False  # an output is a caller buffer: copy every output
            continue
        trial = storage.copy()
        for y, off in zip(k.outputs, k.alias_offsets, strict=True):
            trial.union(x, y, off)
        if (_lower_bound(graph, kernels, trial, root_external, skip)
                > _lower_bound(graph, kernels, storage, root_external, skip)):
            k.alias = False
            continue
        ext = root_external.pop(storage.find(x), None)
        for y, off in zip(k.outputs, k.alias_offsets, strict=True):
            storage.union(x, y, off)
        if ext is not None:
            root_external[storage.find(x)] = ext


def generate(graph: Graph, name: str, target: Target = GENERIC) -> Generated:
    """Prepare, plan and render ``graph`` as module ``name`` with ``target``'s kernels.

    Every subgraph the main one calls (IF, WHILE, CALL_ONCE) becomes a static C function with
    its own plan; a call site takes the callee's pool as scratch of the calling node. Variable
    tensors, resource variables and CALL_ONCE flags live in the state region (:mod:`.state`).
    """
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise EmitError(f"module name {name!r} is not a C identifier; use letters, digits and _")
    if not graph.operators:
        raise EmitError("the model has no operators")
    subgraphs = graph.subgraphs or [graph]
    REGISTRY.refuse_npu_ops(subgraphs)
    state = state_layout(graph, reachable_subgraphs(subgraphs))
    module = _Module(name, target, subgraphs, state)

    kernels = module.prepare(0)
    inputs, outputs = _graph_io(graph, kernels)
    main = module.lower(0, kernels, _external_buffers(graph, inputs, outputs), {})
    module.lowered[0] = main

    pool_size = main.plan.pool_size
    header = render_header(name, inputs, outputs, pool_size, state.size)
    source = _source(module, _run_function(name, main, state))
    constants_size = sum(low.constants_size for low in module.lowered.values())
    return Generated(name, header, source, inputs, outputs, pool_size, main.plan.lower_bound,
                     constants_size, kernels, main.plan, target, graph=graph,
                     state_size_bytes=state.size, state=state,
                     callees={k: low for k, low in module.lowered.items() if k})


def _graph_io(graph: Graph, kernels: list[Kernel]) -> tuple[list[IOTensor], list[IOTensor]]:
    """The module's inputs and outputs as the header names them (:func:`c_identifiers`);
    refused: two with one name, a graph input that is also an output, an output no operator
    computes."""
    inputs = [_io(graph.tensor(i)) for i in graph.inputs]
    outputs = [_io(graph.tensor(i)) for i in graph.outputs]
    seen: dict[str, str] = {}
    for io in inputs + outputs:
        if io.name in seen:
            raise EmitError(f"two graph inputs/outputs are both named '{io.name}'; rename one "
                            "in the model")
        seen[io.name] = io.name
    for io, c in zip(inputs + outputs, c_identifiers([io.name for io in inputs + outputs]),
                     strict=True):
        io.c_name = c
    if set(graph.inputs) & set(graph.outputs):
        raise UnsupportedOperatorError("a graph input is also a graph output")
    produced = {t for k in kernels for t in k.outputs}
    for i in graph.outputs:
        if i not in produced:
            raise UnsupportedOperatorError(
                f"graph output '{graph.tensor(i).name}' is not computed by any operator")
    return inputs, outputs


def _external_buffers(graph: Graph, inputs: list[IOTensor],
                      outputs: list[IOTensor]) -> dict[int, str]:
    """Tensor -> the C expression of the caller's buffer that holds it (graph inputs and
    outputs live in the caller's structs, not in the pool)."""
    external: dict[int, str] = {}
    for i, io in zip(graph.inputs, inputs, strict=True):
        external[i] = f"inputs->{io.c_name}"
    for i, io in zip(graph.outputs, outputs, strict=True):
        external[i] = f"outputs->{io.c_name}"
    return external


#: The profiling seam every module defines (a build may override it).
_OP_HOOK = ("/* A build may define TVMGEN_OP_HOOK(node) to observe each operator (profiling);\n"
            " * it is called before each operator's kernel with its node index, -1 at the end. */\n"
            "#ifndef TVMGEN_OP_HOOK\n#define TVMGEN_OP_HOOK(node) ((void)0)\n#endif\n")


def _common_code(module: _Module) -> str:
    """The helpers the module's kernels share: common.h, the DSP intrinsics on a DSP target,
    each header a kernel asks for (once), and the profiling hook."""
    env = module.env
    common = env.get_template("common.h.j2").render()
    if module.target.dsp:
        common += "\n" + env.get_template("arm_dsp.h.j2").render()
    all_kernels = [k for low in module.lowered.values() for k in low.kernels]
    for extra in dict.fromkeys(h for k in all_kernels if not k.alias and not k.no_code
                               for h in k.headers):
        common += "\n" + env.get_template(extra).render()
    return common + "\n" + _OP_HOOK


def _run_function(name: str, main: Lowered, state: StateLayout) -> list[str]:
    """``tvmgen_<name>_run``: the state made ready, the pool taken from the workspace, the
    calls of the main subgraph, the pool given back."""
    pool_size = main.plan.pool_size
    calls = main.calls
    run = [f"int32_t tvmgen_{name}_run(struct tvmgen_{name}_inputs* inputs, "
           f"struct tvmgen_{name}_outputs* outputs) {{"]
    if state.nonzero_reset:
        run += [f"  if (!tvmgen_{name}_state_ready) (void)tvmgen_{name}_reset();"]
    if pool_size:
        run += [f"  uint8_t* pool = (uint8_t*)TVMBackendAllocWorkspace(1, 0, {pool_size}, 0, 8);",
                "  if (pool == NULL) return -1;"]
    else:
        run += ["  (void)inputs;", "  (void)outputs;"] if not calls else []
    if calls and not any("inputs->" in c for c in calls):
        run.append("  (void)inputs;")  # no operator reads a graph input (SHAPE, FILL, ...)
    run += calls
    if calls:
        run.append("  TVMGEN_OP_HOOK(-1);")
    if pool_size:
        run += ["  if (TVMBackendFreeWorkspace(1, 0, pool) != 0) return -1;"]
    run += ["  return 0;", "}"]
    return run


def _source(module: _Module, run: list[str]) -> str:
    """The module's C file: the shared code, the constants, the state, the operators (callees
    before their callers) and the entry point ``run``."""
    name, state = module.name, module.state
    order = [*module.order, 0]
    const_chunks = [c for k in order for c in module.lowered[k].const_chunks]
    func_chunks = [c for k in order for c in module.lowered[k].func_chunks]
    parts = [
        f"/* Generated by project-api emit for module \"{name}\", kernel target "
        f"{module.target.name}. Do not edit. */",
        f"#include \"tvmgen_{name}.h\"",
        "",
        _common_code(module),
        "/* ---- constants ---- */",
        "\n".join(const_chunks),
    ]
    if state.size:
        parts += ["/* ---- state ---- */", render_state(name, state)]
    parts += [
        "/* ---- operators ---- */",
        "\n".join(func_chunks),
        "/* ---- entry point ---- */",
        "\n".join(run),
        "",
    ]
    return "\n".join(parts)


def _ctype(t: Tensor) -> str:
    """The C element type of ``t`` (a resource tensor names a state slot: bytes)."""
    return "uint8_t" if t.dtype == "resource" else dtypes.parse(t.dtype).c_type


@dataclass
class Lowered:
    """One subgraph as C: its kernels, the constants and functions it adds, the calls of its
    body (for the main subgraph, the entry point's), and its pool's plan."""

    index: int
    fn: str  #: the subgraph's C function ("" for the main subgraph: the entry point)
    kernels: list[Kernel]
    plan: planner.MemoryPlan
    calls: list[str] = field(default_factory=list)
    const_chunks: list[str] = field(default_factory=list)
    func_chunks: list[str] = field(default_factory=list)
    constants_size: int = 0

    @property
    def pool_size(self) -> int:
        return self.plan.pool_size


class _Module:
    """Lowers the subgraphs of one module, callees before their callers."""

    def __init__(self, name: str, target: Target, subgraphs: list[Graph],
                 state: StateLayout):
        self.name = name
        self.target = target
        self.subgraphs = subgraphs
        self.state = state
        self.env = _env()
        self.lowered: dict[int, Lowered] = {}
        self.order: list[int] = []  # callees in the order they were lowered
        self._active: list[int] = []

    def prepare(self, k: int) -> list[Kernel]:
        """Prepare every node of subgraph ``k``, lowering the subgraphs its nodes call."""
        graph = self.subgraphs[k]
        self._active.append(k)
        kernels: list[Kernel] = []
        for op in graph.operators:
            kernel = REGISTRY.prepare(op, graph, self.target)
            LOG.debug("prepared %s (%s) -> %s", op.describe(), kernel.scheme, kernel.template)
            if kernel.persistent_bytes:  # the op's own state: a slot of the state region
                key = ("op", k, op.index)
                self.state.add_op_slot(key, f"{op.describe()}{f' of subgraph {k}' if k else ''}",
                                       kernel.persistent_bytes)
                kernel.state = (*kernel.state, key)
            for c in kernel.subgraphs:
                self._callee(graph, op, c)
            child_pool = max((self.lowered[c].pool_size for c in kernel.subgraphs), default=0)
            if kernel.subgraphs:
                kernel.params["sg"] = {c: self.lowered[c].fn for c in kernel.subgraphs}
                kernel.params["child_pool"] = "NULL"
                if child_pool:
                    offset = planner.align(kernel.scratch_bytes)
                    kernel.params["child_pool"] = f"(uint8_t*)scratch + {offset}"
                    kernel.scratch_bytes = offset + child_pool
            kernels.append(kernel)
        self._active.pop()
        return kernels

    def _callee(self, graph: Graph, op: Operator, c: int) -> None:
        if c in self.lowered:
            return
        if c in self._active:
            raise UnsupportedOperatorError(
                f"{op.describe()}: subgraph {c} calls itself (directly or through others); "
                "recursion has no static memory plan")
        child = self.subgraphs[c]
        kernels = self.prepare(c)
        fn = f"sg{c}" + (f"_{sanitize(child.name).lower()[:32]}" if child.name else "")
        external = {}
        for j, t in enumerate(child.inputs):
            external.setdefault(t, f"in{j}")
        produced = {t for kn in kernels for t in kn.outputs}
        copies: list[tuple[int, int]] = []  # (output position, tensor) copied at the end
        for j, t in enumerate(child.outputs):
            tensor = child.tensor(t)
            if (t in produced and t not in external and not tensor.is_const
                    and self.state.slot_of(c, t) is None):
                external[t] = f"out{j}"
            else:
                copies.append((j, t))
        self.lowered[c] = self.lower(c, kernels, external, dict(copies), fn)
        self.order.append(c)

    def pointer(self, k: int, t: int, writable: bool, storage: _Storage,
                root_external: dict[int, tuple[str, int]], offsets: dict[int, int],
                low: dict[int, int]) -> str:
        graph = self.subgraphs[k]
        tensor = graph.tensor(t)
        qual = "" if writable else "const "
        ctype = _ctype(tensor)
        slot = self.state.slot_of(k, t)
        if slot is not None:
            return f"({qual}{ctype}*)(tvmgen_{self.name}_state.bytes + {slot.offset})"
        r = storage.find(t)
        if r in root_external:
            expr, anchor = root_external[r]
            delta = storage.offset(t) - storage.offset(anchor)
            if delta:
                return f"({qual}{ctype}*)(({qual}uint8_t*){expr} + {delta})"
            return f"({qual}{ctype}*){expr}"
        return f"({qual}{ctype}*)(pool + {offsets[r] + storage.offset(t) - low[r]})"

    def lower(self, k: int, kernels: list[Kernel], external: dict[int, str],
              copies: dict[int, int], fn: str = "") -> Lowered:
        """Plan and render subgraph ``k``: ``external`` maps tensors to the caller's buffers,
        ``copies`` output positions to the tensors copied there at the end (an input, a
        constant, state, or an output given twice), ``fn`` names a callee's function."""
        graph = self.subgraphs[k]
        state = self.state
        storage = _Storage()
        root_external: dict[int, tuple[str, int]] = {}  # set -> (caller buffer, its tensor)
        for t, expr in external.items():
            root_external[storage.find(t)] = (expr, t)

        def skip(t: int) -> bool:
            return state.slot_of(k, t) is not None

        _alias_views(graph, kernels, storage, root_external, skip)
        buffers, low_off, scratch_id = _pool_buffers(graph, kernels, storage, root_external,
                                                     skip, list(copies.values()))
        mplan = planner.plan(buffers)
        offsets = {b.id: b.offset for b in buffers}

        def pointer(t: int, writable: bool) -> str:
            return self.pointer(k, t, writable, storage, root_external, offsets, low_off)

        low = Lowered(k, fn, kernels, mplan)
        prefix = f"sg{k}_" if k else ""
        for idx, kn in enumerate(kernels):
            label = _label(kn.op)
            if kn.alias:
                for y in kn.outputs:
                    at = storage.offset(y) - storage.offset(kn.inputs[0])
                    where = f" at byte {at}" if at else ""
                    low.calls.append(f"  /* node {kn.op.index} {c_comment(label)}: "
                                     f"'{c_comment(graph.tensor(y).name)}' aliases "
                                     f"'{c_comment(graph.tensor(kn.inputs[0]).name)}'{where} */")
                continue
            if kn.no_code:
                names = ", ".join(f"'{c_comment(graph.tensor(t).name)}'" for t in kn.outputs)
                low.calls.append(f"  /* node {kn.op.index} {c_comment(label)}: {names} names "
                                 "a slot of the state region; no code */")
                continue
            name = f"{prefix}op{kn.op.index}_{sanitize(label).lower()}"
            for c in kn.constants:
                low.const_chunks.append(_format_array(c, f"{name}_{c.suffix}"))
                low.constants_size += c.values.size * np.dtype(C_NUMPY_TYPES[c.ctype]).itemsize
            args = [f"{'' if j in kn.mutable_inputs else 'const '}"
                    f"{_ctype(graph.tensor(t))}* restrict in{j}"
                    for j, t in enumerate(kn.inputs)]
            args += [f"{_ctype(graph.tensor(t))}* restrict out{j}"
                     for j, t in enumerate(kn.outputs)]
            args += [f"uint8_t* restrict st{j}" for j in range(len(kn.state))]
            if idx in scratch_id:
                args.append("void* restrict scratch")
            body = self.env.get_template(kn.template).render(p=kn.params, fn=name)
            rtype = "int32_t" if kn.status else "void"
            low.func_chunks.append(f"/* node {kn.op.index}"
                                   f"{f' of subgraph {k}' if k else ''}: {c_comment(label)} */\n"
                                   f"static Q_KERNEL {rtype} {name}({', '.join(args)}) "
                                   f"{{\n{body}}}\n")
            call_args = [pointer(t, j in kn.mutable_inputs) for j, t in enumerate(kn.inputs)]
            call_args += [pointer(t, True) for t in kn.outputs]
            call_args += [f"tvmgen_{self.name}_state.bytes + {state.by_key[key].offset}"
                          for key in kn.state]
            if idx in scratch_id:
                call_args.append(f"(void*)(pool + {offsets[scratch_id[idx]]})")
            if not k:
                low.calls.append(f"  TVMGEN_OP_HOOK({kn.op.index});")
            if kn.status:  # the kernel found its input invalid, as TFLM's Eval reports an error
                low.calls.append(f"  if ({name}({', '.join(call_args)}) != 0) {{")
                if mplan.pool_size and not k:
                    low.calls.append("    (void)TVMBackendFreeWorkspace(1, 0, pool);")
                low.calls += ["    return -1;", "  }"]
            else:
                low.calls.append(f"  {name}({', '.join(call_args)});")
        if k:
            low.func_chunks.append(self._function(low, graph, copies, pointer))
        return low

    def _function(self, low: Lowered, graph: Graph, copies: dict[int, int], pointer) -> str:
        """The C function of callee subgraph ``low``: its inputs, its outputs, its pool."""
        params = [f"const {_ctype(graph.tensor(t))}* restrict in{j}"
                  for j, t in enumerate(graph.inputs)]
        params += [f"{_ctype(graph.tensor(t))}* restrict out{j}"
                   for j, t in enumerate(graph.outputs)]
        params.append("uint8_t* restrict pool")
        lines = [f"/* subgraph {low.index}{f' {c_comment(graph.name)!r}' if graph.name else ''}: "
                 "inputs in*, outputs out*, its intermediates in pool */",
                 f"static int32_t {low.fn}({', '.join(params)}) {{"]
        lines += [f"  (void)in{j};" for j in range(len(graph.inputs))]
        lines += [f"  (void)out{j};" for j in range(len(graph.outputs))]
        lines.append("  (void)pool;")
        lines += low.calls
        for j, t in copies.items():
            tensor = graph.tensor(t)
            if tensor.is_const:
                cname = f"{low.fn}_out{j}"
                values = np.asarray(tensor.data).reshape(-1)
                ctype = _ctype(tensor)
                if values.dtype == np.bool_:
                    values = values.astype(np.uint8)
                low.const_chunks.append(_format_array(ConstArray("", ctype, values), cname))
                low.constants_size += tensor.size_bytes
                src = cname
            else:
                src = pointer(t, False)
            lines.append(f"  memcpy(out{j}, {src}, {tensor.size_bytes});")
        lines += ["  return 0;", "}"]
        return "\n".join(lines) + "\n"


def render_state(name: str, state: StateLayout) -> str:
    """The state region of module ``name`` and ``tvmgen_<name>_reset``."""
    lines = [f"/* What the module keeps from one run to the next ({state.size} bytes, zero at boot"
             + (", then set by the first run's reset" if state.nonzero_reset else "") + "):"]
    for s in state.slots:
        lines.append(f" *   {s.offset:6d} {s.size:6d} B  {s.kind} {c_comment(s.name)}"
                     + (f" (reset to byte 0x{s.reset_byte:02x})" if s.reset_byte else ""))
    lines.append(" */")
    lines.append(f"static union {{ uint8_t bytes[{state.size}]; uint64_t align; }} "
                 f"tvmgen_{name}_state;")
    if state.nonzero_reset:
        lines.append(f"static uint8_t tvmgen_{name}_state_ready;")
    lines += ["", f"int32_t tvmgen_{name}_reset(void) {{",
              f"  memset(tvmgen_{name}_state.bytes, 0, {state.size});"]
    for s in state.nonzero_reset:
        lines.append(f"  memset(tvmgen_{name}_state.bytes + {s.offset}, 0x{s.reset_byte:02x}, "
                     f"{s.size});  /* {c_comment(s.name)} */")
    if state.nonzero_reset:
        lines.append(f"  tvmgen_{name}_state_ready = 1;")
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)


def render_header(name: str, inputs: list[IOTensor], outputs: list[IOTensor],
                  workspace_size: int, state_size: int = 0) -> str:
    """``tvmgen_<name>.h`` laid out as TVM's ``interface_c.cc`` writes it."""
    upper = name.upper()
    out = [f"#ifndef TVMGEN_{upper}_H_", f"#define TVMGEN_{upper}_H_", "#include <stdint.h>", "",
           "#ifdef __cplusplus", 'extern "C" {', "#endif", ""]
    for kind, tensors in (("Input", inputs), ("Output", outputs)):
        for t in tensors:
            out += ["/*!",
                    f" * \\brief {kind} tensor {c_comment(t.name)} size (in bytes) for TVM module "
                    f"\"{name}\" ",
                    " */",
                    f"#define TVMGEN_{upper}_{t.c_name.upper()}_SIZE {t.size_bytes}"]
    for kind, tensors in (("inputs", inputs), ("outputs", outputs)):
        label = "Input" if kind == "inputs" else "Output"
        out += ["/*!", f" * \\brief {label} tensor pointers for TVM module \"{name}\" ", " */",
                f"struct tvmgen_{name}_{kind} {{"]
        out += [f"  void* {t.c_name};" for t in tensors]
        out += ["};", ""]
    out += ["/*!", f" * \\brief entrypoint function for TVM module \"{name}\"",
            " * \\param inputs Input tensors for the module ",
            " * \\param outputs Output tensors for the module ", " */",
            f"int32_t tvmgen_{name}_run(", f"  struct tvmgen_{name}_inputs* inputs,",
            f"  struct tvmgen_{name}_outputs* outputs", ");",
            "/*!", f" * \\brief Workspace size for TVM module \"{name}\" ", " */",
            f"#define TVMGEN_{upper}_WORKSPACE_SIZE {workspace_size}", ""]
    if state_size:
        out += ["/*!", f" * \\brief State size (in bytes) for TVM module \"{name}\": variable tensors",
                " * and resource variables (and operators' own state) kept from one run to the",
                " * next, in the module's own",
                " * static region (not the workspace) ", " */",
                f"#define TVMGEN_{upper}_STATE_SIZE {state_size}",
                "/*!", f" * \\brief Reset the state of TVM module \"{name}\" to its values at boot",
                " * \\return 0 ", " */", f"int32_t tvmgen_{name}_reset(void);", ""]
    out += [
            "#ifdef __cplusplus", "}", "#endif", "", f"#endif // TVMGEN_{upper}_H_", ""]
    return "\n".join(out)


def dtype_bytes(dtype: str) -> int:
    return dtypes.parse(dtype).itemsize

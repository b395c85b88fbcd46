"""Turn a :class:`~.graph.Graph` into C: prepare every op, plan memory, render the sources.

The output is one C file (kernels, constants and ``tvmgen_<name>_run``) and the TVM-style
interface header. All checks happen while preparing the ops; the C has none beyond the one
``TVMBackendAllocWorkspace`` result check.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import numpy as np

from .. import dtypes
from ..errors import EmitError, UnsupportedOperatorError
from ..template.quoting import c_comment
from . import planner
from .graph import Graph, Operator, Tensor
from .ops import REGISTRY
from .ops.common import ConstArray, Kernel, float_literal
from .target import GENERIC, Target

LOG = logging.getLogger(__name__)

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"

#: Buffer ids of per-op scratch start here (tensor storage ids are tensor indices, far below).
SCRATCH_ID_BASE = 1 << 40

#: Element types a graph input or output may have (bool: one byte, 0 or 1, as TFLite stores it).
IO_DTYPES = ("int8", "uint8", "int16", "int32", "int64", "float32", "bool")


def sanitize(name: str) -> str:
    """TVM's ``SanitizeName``: every non-alphanumeric character becomes ``_``."""
    return re.sub(r"[^A-Za-z0-9]", "_", name)


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


def _env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(KERNELS_DIR)),
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, autoescape=False)
    env.filters["flit"] = float_literal
    env.filters["plus"] = lambda v: f"+ {v}" if v >= 0 else f"- {-v}"
    env.filters["fmin"] = lambda v: "-FLT_MAX" if v is None else float_literal(v)
    env.filters["fmax"] = lambda v: "FLT_MAX" if v is None else float_literal(v)
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
                  root_external: dict[int, tuple[str, int]]
                  ) -> tuple[list[planner.Buffer], dict[int, int], dict[int, int]]:
    """The pool's buffers (one per storage set that is no caller buffer, one per op scratch),
    the lowest byte offset of each set, and the scratch buffer id of each kernel position."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    lo: dict[int, int] = {}
    hi: dict[int, int] = {}
    for idx, k in enumerate(kernels):
        for t in k.inputs + k.outputs:
            if graph.tensor(t).is_const:
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
                 root_external: dict[int, tuple[str, int]]) -> int:
    """The pool's lower bound with ``storage`` (whose roots may differ from the keys of
    ``root_external``: its caller buffers are found by their tensors)."""
    roots = {storage.find(anchor): ext for ext in root_external.values() for anchor in ext[1:]}
    buffers = _pool_buffers(graph, kernels, storage, roots)[0]
    return planner.lower_bound([planner.Buffer(b.id, planner.align(b.size), b.first, b.last)
                                for b in buffers])


def _alias_views(graph: Graph, kernels: list[Kernel], storage: _Storage,
                 root_external: dict[int, tuple[str, int]]) -> None:
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
        if (_lower_bound(graph, kernels, trial, root_external)
                > _lower_bound(graph, kernels, storage, root_external)):
            k.alias = False
            continue
        ext = root_external.pop(storage.find(x), None)
        for y, off in zip(k.outputs, k.alias_offsets, strict=True):
            storage.union(x, y, off)
        if ext is not None:
            root_external[storage.find(x)] = ext


def generate(graph: Graph, name: str, target: Target = GENERIC) -> Generated:
    """Prepare, plan and render ``graph`` as module ``name`` with ``target``'s kernels."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise EmitError(f"module name {name!r} is not a C identifier; use letters, digits and _")
    if not graph.operators:
        raise EmitError("the model has no operators")

    kernels: list[Kernel] = []
    for op in graph.operators:
        kernel = REGISTRY.prepare(op, graph, target)
        LOG.debug("prepared %s (%s) -> %s", op.describe(), kernel.scheme, kernel.template)
        kernels.append(kernel)

    inputs = [_io(graph.tensor(i)) for i in graph.inputs]
    outputs = [_io(graph.tensor(i)) for i in graph.outputs]
    seen: dict[str, str] = {}
    for io in inputs + outputs:
        key = io.c_name.upper()
        if key in seen:
            raise EmitError(f"tensor names '{seen[key]}' and '{io.name}' collide as C name "
                            f"'{io.c_name}'; rename one in the model")
        seen[key] = io.name
        if not io.c_name or io.c_name[0].isdigit():
            raise EmitError(f"tensor name '{io.name}' does not make a C identifier")
    if set(graph.inputs) & set(graph.outputs):
        raise UnsupportedOperatorError("a graph input is also a graph output")
    produced = {t for k in kernels for t in k.outputs}
    for i in graph.outputs:
        if i not in produced:
            raise UnsupportedOperatorError(
                f"graph output '{graph.tensor(i).name}' is not computed by any operator")

    external: dict[int, str] = {}  # tensor -> C expression of the caller's buffer
    for i, io in zip(graph.inputs, inputs, strict=True):
        external[i] = f"inputs->{io.c_name}"
    for i, io in zip(graph.outputs, outputs, strict=True):
        external[i] = f"outputs->{io.c_name}"

    storage = _Storage()
    root_external: dict[int, tuple[str, int]] = {}  # set -> (caller buffer, its tensor)
    for t, expr in external.items():
        root_external[storage.find(t)] = (expr, t)
    _alias_views(graph, kernels, storage, root_external)

    buffers, low, scratch_id = _pool_buffers(graph, kernels, storage, root_external)
    mplan = planner.plan(buffers)
    offsets = {b.id: b.offset for b in buffers}

    def pointer(t: int, writable: bool) -> str:
        tensor = graph.tensor(t)
        ctype = dtypes.parse(tensor.dtype).c_type
        qual = "" if writable else "const "
        r = storage.find(t)
        if r in root_external:
            expr, anchor = root_external[r]
            delta = storage.offset(t) - storage.offset(anchor)
            if delta:
                return f"({qual}{ctype}*)(({qual}uint8_t*){expr} + {delta})"
            return f"({qual}{ctype}*){expr}"
        return f"({qual}{ctype}*)(pool + {offsets[r] + storage.offset(t) - low[r]})"

    env = _env()
    const_chunks: list[str] = []
    func_chunks: list[str] = []
    calls: list[str] = []
    constants_size = 0
    for idx, k in enumerate(kernels):
        label = _label(k.op)
        if k.alias:
            for y in k.outputs:
                at = storage.offset(y) - storage.offset(k.inputs[0])
                where = f" at byte {at}" if at else ""
                calls.append(f"  /* node {k.op.index} {c_comment(label)}: "
                             f"'{c_comment(graph.tensor(y).name)}' aliases "
                             f"'{c_comment(graph.tensor(k.inputs[0]).name)}'{where} */")
            continue
        fn = f"op{k.op.index}_{sanitize(label).lower()}"
        for c in k.constants:
            const_chunks.append(_format_array(c, f"{fn}_{c.suffix}"))
            constants_size += c.values.size * np.dtype(C_NUMPY_TYPES[c.ctype]).itemsize
        args = [f"const {dtypes.parse(graph.tensor(t).dtype).c_type}* restrict in{j}"
                for j, t in enumerate(k.inputs)]
        args += [f"{dtypes.parse(graph.tensor(t).dtype).c_type}* restrict out{j}"
                 for j, t in enumerate(k.outputs)]
        if idx in scratch_id:
            args.append("void* restrict scratch")
        body = env.get_template(k.template).render(p=k.params, fn=fn)
        rtype = "int32_t" if k.status else "void"
        func_chunks.append(f"/* node {k.op.index}: {c_comment(label)} */\n"
                           f"static Q_KERNEL {rtype} {fn}({', '.join(args)}) {{\n{body}}}\n")
        call_args = [pointer(t, False) for t in k.inputs] + [pointer(t, True) for t in k.outputs]
        if idx in scratch_id:
            call_args.append(f"(void*)(pool + {offsets[scratch_id[idx]]})")
        calls.append(f"  TVMGEN_OP_HOOK({k.op.index});")
        if k.status:  # the kernel found its input invalid, as TFLM's Eval reports an error
            calls.append(f"  if ({fn}({', '.join(call_args)}) != 0) {{")
            if mplan.pool_size:
                calls.append("    (void)TVMBackendFreeWorkspace(1, 0, pool);")
            calls += ["    return -1;", "  }"]
        else:
            calls.append(f"  {fn}({', '.join(call_args)});")

    pool_size = mplan.pool_size
    header = render_header(name, inputs, outputs, pool_size)
    common = env.get_template("common.h.j2").render()
    if target.dsp:
        common += "\n" + env.get_template("arm_dsp.h.j2").render()
    for extra in dict.fromkeys(h for k in kernels if not k.alias for h in k.headers):
        common += "\n" + env.get_template(extra).render()
    hook = ("/* A build may define TVMGEN_OP_HOOK(node) to observe each operator (profiling);\n"
            " * it is called before each operator's kernel with its node index, -1 at the end. */\n"
            "#ifndef TVMGEN_OP_HOOK\n#define TVMGEN_OP_HOOK(node) ((void)0)\n#endif\n")
    common += "\n" + hook
    run = [f"int32_t tvmgen_{name}_run(struct tvmgen_{name}_inputs* inputs, "
           f"struct tvmgen_{name}_outputs* outputs) {{"]
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
    source = "\n".join([
        f"/* Generated by project-api emit for module \"{name}\", kernel target {target.name}. "
        "Do not edit. */",
        f"#include \"tvmgen_{name}.h\"",
        "",
        common,
        "/* ---- constants ---- */",
        "\n".join(const_chunks),
        "/* ---- operators ---- */",
        "\n".join(func_chunks),
        "/* ---- entry point ---- */",
        "\n".join(run),
        "",
    ])
    return Generated(name, header, source, inputs, outputs, pool_size, mplan.lower_bound,
                     constants_size, kernels, mplan, target, graph=graph)


def render_header(name: str, inputs: list[IOTensor], outputs: list[IOTensor],
                  workspace_size: int) -> str:
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
            f"#define TVMGEN_{upper}_WORKSPACE_SIZE {workspace_size}", "",
            "#ifdef __cplusplus", "}", "#endif", "", f"#endif // TVMGEN_{upper}_H_", ""]
    return "\n".join(out)


def dtype_bytes(dtype: str) -> int:
    return dtypes.parse(dtype).itemsize

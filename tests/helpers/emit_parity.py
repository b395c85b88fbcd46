"""Randomized parity of the emitted C against TFLite Micro and LiteRT: the machinery every
operator test module shares (``tests/emit/test_emit_random.py``, ``tests/test_ops_<family>.py``).

A test module declares only its cases and one test::

    pytest_plugins = ("helpers.emit_parity",)  # the session fixtures below
    from helpers.emit_parity import Case, check_parity, seeded

    CASES = [seeded("SQUEEZE", "int8", {"dims": "none"}, {"input_shape": (1, 4, 1, 3)}), ...]

    @pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
    def test_parity(case, builds):
        check_parity(case, builds)

A :class:`Case` is one model whose branches (one input and one output each; options per branch)
all go through one emit and one compile. The model is emitted with ``project_api.emit.emit``
into a Model Library Format tar; the tar's C sources are compiled with a small generated
``main`` against the CRT backend library (``crt/src/backend`` +
``crt/src/memory/stack_allocator.c``), under ASan and UBSan's integer, shift, cast and bounds
checks, with a workspace buffer of exactly ``TVMGEN_<NAME>_WORKSPACE_SIZE`` (plus the
allocator's alignment and tag). The program runs once per input set (two random, one at the
extremes of each input's type) and its outputs are compared with:

* integer outputs: bit-exact with TFLM (reference kernels) and within :data:`LITERT_LSB` of
  LiteRT;
* float32 outputs: within ``rtol=1e-5, atol=1e-5`` of both, or bit for bit with TFLM for a
  case with ``float_exact`` (an op computed in TFLM's order with the same C library functions).

A case where TFLM has no kernel for the op, or an undefined result, is checked against LiteRT
alone (``Case(tflm=False)``).

A failure names the operator, the mode, the options and the branch (seed and every option).
An operator the emitter does not implement FAILS here (it never skips). Cases whose scheme has
DSP-extension kernels (the op module's ``OpSpec.dsp``) also run emitted for
:data:`DSP_TARGET` (:func:`with_targets`): on the host the kernels' ACLE intrinsics are the
portable C definitions of ``kernels/arm_dsp.h.j2``, so the same checks cover every SIMD kernel.

Emitting and compiling run on :data:`PARALLEL_BUILDS` worker threads, ahead of the test that
needs them, in test order within each test module.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import re
import subprocess
import tarfile
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import require_tool

from project_api.emit import reference as R
from project_api.tflite import builder as B

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
CRT_DIR = REPO_ROOT / "crt"

ACTIVATIONS = ("NONE", "RELU", "RELU6")
SEEDS = (0, 1, 2)
RUNS = 3  # input sets per compiled model: two random, one at the extremes
# ASan plus the UBSan checks that matter for kernels (integer overflow, shifts, float->int casts,
# array bounds): the full -fsanitize=undefined set doubles the compile time of every model.
CFLAGS = ["-std=c99", "-O0", "-Wall", "-Wextra", "-Werror",
          "-fsanitize=address,signed-integer-overflow,shift,float-cast-overflow,bounds",
          "-fno-sanitize-recover=all"]
FLOAT_RTOL = 1e-5
FLOAT_ATOL = 1e-5
#: How far LiteRT's integer results may be from ours (its kernels round differently in places).
LITERT_LSB = {"int8": 1, "int16": 1, "int32": 0}
#: Every weight, quantization and input derives from this; CI uses 0. Set PROJECT_API_EMIT_SEED to
#: another number to explore new random cases (a failure message names the seed to reproduce it).
SEED_BASE = int(os.environ.get("PROJECT_API_EMIT_SEED", "0"))
PARALLEL_BUILDS = 2  # emit+compile workers (the machine budget is 2 cores)
#: Case keys that name a variant, not a builder option.
LABEL_ONLY = ("seed", "shapes", "from", "edge", "dsp", "label", "bias_form")
#: The DSP target the DSP-kernel cases also run with.
DSP_TARGET = "cortex-m4"
#: Case modes that are plain element types, beside the builder's modes (builder.MODES).
PLAIN_MODES = ("bool", "int64", "uint8")
#: Operators whose DSP kernels have a second weight layout (``emit --weights int16``): their
#: DSP-target cases run with both.
WEIGHT_LAYOUT_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D")


# --- cases --------------------------------------------------------------------------------------


@dataclass
class Case:
    """One model: operator ``op`` in builder mode ``mode`` (:data:`builder.MODES`), one branch
    per entry of ``branches`` (builder options, plus ``input_shape`` and label-only keys)."""

    op: str
    mode: str  # one of builder.MODES, or a plain element type (PLAIN_MODES)
    options: dict[str, Any]  # the combination under test
    branches: list[dict[str, Any]] = field(default_factory=list)  # options per branch
    target: str = "generic"  # the emitter's kernel target
    weights: str = "int8"  # the DSP convolutions' weight layout (emit --weights)
    #: False where LiteRT cannot be the second reference (it lacks the variant, or computes
    #: it differently from TFLM); the case then checks TFLM only. Say why where you set it.
    litert: bool = True
    #: False where TFLM cannot be the reference: its result is undefined (its kernel reads
    #: memory it never set), or it has no kernel for the op (RELU_N1_TO_1); the case then
    #: checks LiteRT only (and takes the inputs' details from it). Say why where you set it.
    tflm: bool = True
    #: Builds one branch instead of ``ModelBuilder.single_op``:
    #: ``branch(mb, dtype, options, name) -> output``, for cases of several operators or of
    #: operators written with ``ModelBuilder.operator``.
    branch: Callable[..., Any] | None = field(default=None, compare=False, repr=False)
    #: True where the op computes float32 in TFLM's order with the same C library functions:
    #: float outputs must then equal TFLM's bit for bit (NaNs included), not merely within
    #: FLOAT_RTOL/FLOAT_ATOL (LiteRT keeps the tolerance).
    float_exact: bool = False
    #: The model keeps state (variable tensors, resource variables): the references run the
    #: input sets in turn in one interpreter each, as the compiled program does, so every run
    #: checks the state the runs before it left.
    stateful: bool = False
    #: Input sets the program runs in turn (the last at the extremes of each input's type).
    invocations: int = 0
    #: Before this run the program calls ``tvmgen_<name>_reset()`` and the references start a
    #: new interpreter (a device just booted); None: never.
    reset_at: int | None = None

    @property
    def model_id(self) -> str:
        """Names the model (and seeds it): the same for every target."""
        opts = "-".join(f"{k}_{fmt(v)}" for k, v in self.options.items())
        return f"{self.op}-{self.mode}" + (f"-{opts}" if opts else "")

    @property
    def id(self) -> str:
        suffix = "" if self.target == "generic" else f"-target_{self.target}"
        if self.weights != "int8":
            suffix += f"-weights_{self.weights}"
        return self.model_id + suffix

    @property
    def dtype(self) -> str:
        """The inputs' element type: the builder mode's, or a plain type named as the mode."""
        return self.mode if self.mode in PLAIN_MODES else B.mode_dtype(self.mode)

    @property
    def module_name(self) -> str:
        """The MLF module name the case is emitted under."""
        return sanitize(f"{self.op.lower()}_{self.mode}")

    def build(self) -> tuple[bytes, list[str]]:
        """The case's model, and a label per output for messages."""
        return self._built

    @cached_property
    def _built(self) -> tuple[bytes, list[str]]:
        return build_case(self)

    @cached_property
    def scheme(self) -> str:
        """The dtype scheme the emitter's registry classifies the case's operator as."""
        return scheme_of(self.build()[0], self.op)


def scheme_of(model: bytes, op: str) -> str:
    """The registry's scheme of the (first) ``op`` node of ``model``."""
    from project_api.emit import read_tflite
    from project_api.emit.ops import REGISTRY

    g = read_tflite(model)
    node = next(n for n in g.operators if op in (n.name, n.custom_code))  # custom: by its name
    entry = REGISTRY.lookup(node)
    if entry is None:
        return "unsupported"
    return entry.spec.classify(node, g)[0]


def fmt(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return "array" + "x".join(str(i) for i in v.shape)
    if isinstance(v, tuple):
        return "x".join(str(i) for i in v)
    return str(v)


def with_branches(op: str, mode: str, options: dict[str, Any],
                  per_seed: list[dict[str, Any]], activations: bool = True,
                  litert: bool = True) -> Case:
    """A case whose branches are (activation x seed), each seed adding ``per_seed[seed]``."""
    case = Case(op, mode, options, litert=litert)
    for act in ACTIVATIONS if activations else (None,):
        for s in SEEDS:
            br = {**options, **per_seed[s]}
            if act is not None:
                br["activation"] = act
            case.branches.append(br)
    return case


def seeded(op: str, mode: str, options: dict[str, Any], branch: dict[str, Any],
           litert: bool = True) -> Case:
    """A case of one branch per seed, each with options ``branch`` (``options`` only name the
    case)."""
    case = Case(op, mode, options, litert=litert)
    for s in SEEDS:
        case.branches.append({**branch, "seed": s})
    return case


def with_targets(cases: list[Case]) -> list[Case]:
    """``cases`` and, for each case whose scheme has DSP kernels (its op module's
    ``OpSpec.dsp``), the same case emitted for :data:`DSP_TARGET` (and, for
    :data:`WEIGHT_LAYOUT_OPS`, once more with int16 weights)."""
    from project_api.emit.ops import REGISTRY

    out = list(cases)
    for c in cases:
        entry = REGISTRY.builtin.get(c.op)
        if entry is not None and c.scheme in entry.spec.dsp:
            for weights in ("int8", "int16") if c.op in WEIGHT_LAYOUT_OPS else ("int8",):
                out.append(dataclasses.replace(c, options=dict(c.options),
                                               branches=list(c.branches), target=DSP_TARGET,
                                               weights=weights))
    return out


def build_case(case: Case) -> tuple[bytes, list[str]]:
    """The case's model, and a label per output (branch) for messages."""
    mb = B.ModelBuilder(seed=[SEED_BASE, zlib.crc32(case.model_id.encode())],
                        per_channel=case.mode.endswith("_per_channel"),
                        description=case.model_id)
    labels = []
    for k, br in enumerate(case.branches):
        opts = {key: v for key, v in br.items() if key not in LABEL_ONLY}
        shape = opts.pop("input_shape", None)
        labels.append(f"branch {k} (" + ", ".join(f"{key}={fmt(v)}" for key, v in br.items())
                      + ")")
        if case.branch is not None:
            out = case.branch(mb, case.dtype, dict(opts, input_shape=shape), f"in{k}")
        else:
            out = mb.single_op(case.op, case.dtype, shape, name=f"in{k}", **opts)
        outs = out if isinstance(out, (list, tuple)) else [out]  # SPLIT: several outputs
        base = labels[-1]
        for j, t in enumerate(outs):
            mb.output(t)
            if j:
                labels.append(f"{base} output {j}")
    return mb.build(), labels


# --- compile and run the emitted code ---------------------------------------------------------


def sanitize(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z]", "_", name)


def _struct_members(header: str, name: str, which: str) -> list[str]:
    m = re.search(rf"struct\s+tvmgen_{name}_{which}\s*\{{(.*?)\}}\s*;", header, re.S)
    if m is None:
        raise AssertionError(f"interface header lacks 'struct tvmgen_{name}_{which} {{...}};'")
    return re.findall(r"void\s*\*\s*(\w+)\s*;", m.group(1))


def _order(members: list[str], tensor_names: list[str], which: str) -> list[str]:
    """Struct members in model order: matched by sanitized tensor name, else positionally."""
    if len(members) != len(tensor_names):
        raise AssertionError(f"the interface struct has {len(members)} {which}, the model "
                             f"{len(tensor_names)}: {members} vs {tensor_names}")
    wanted = [sanitize(n) for n in tensor_names]
    if sorted(wanted) == sorted(members):
        return wanted
    return members


MAIN_C = """\
/* Generated by tests/helpers/emit_parity.py: feed inputs from a file, write outputs to a file. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/stack_allocator.h>
#include "tvmgen_{name}.h"

/* Exactly the module's declared pool, rounded to the allocator's alignment, plus the stack
 * allocator's LIFO tag: a kernel writing past the pool hits ASan's redzone after this array. */
#define ALIGN_BYTES TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES
#define POOL_BYTES \\
  (((TVMGEN_{NAME}_WORKSPACE_SIZE + ALIGN_BYTES - 1) / ALIGN_BYTES) * ALIGN_BYTES + \\
   TVM_CRT_STACK_ALLOCATOR_TAG_SIZE_BYTES)
static uint8_t g_workspace[POOL_BYTES] __attribute__((aligned(ALIGN_BYTES)));
{buffers}

int main(int argc, char** argv) {{
  FILE* fin;
  FILE* fout;
  int runs;
  int reset_at;
  int r;
  if (argc != 4 && argc != 5) return 2;
  fin = fopen(argv[1], "rb");
  fout = fopen(argv[2], "wb");
  runs = atoi(argv[3]);
  reset_at = argc == 5 ? atoi(argv[4]) : -1;
  if (fin == NULL || fout == NULL) return 2;
  if (TVMCrtWorkspace_Init(g_workspace, sizeof(g_workspace)) != 0) {{
    fprintf(stderr, "TVMCrtWorkspace_Init failed\\n");
    return 3;
  }}
  for (r = 0; r < runs; ++r) {{
    struct tvmgen_{name}_inputs inputs;
    struct tvmgen_{name}_outputs outputs;
    int32_t rc;
{reads}
{outputs_init}
{fill}
#ifdef TVMGEN_{NAME}_STATE_SIZE
    if (r == reset_at && tvmgen_{name}_reset() != 0) return 7;
#else
    (void)reset_at;
#endif
    rc = tvmgen_{name}_run(&inputs, &outputs);
    if (rc != 0) {{
      fprintf(stderr, "tvmgen_{name}_run returned %d on run %d\\n", (int)rc, r);
      return 4;
    }}
{writes}
  }}
  fclose(fin);
  fclose(fout);
  return 0;
}}
"""


def _main_c(name: str, in_members: list[str], in_sizes: list[int], out_members: list[str],
            out_sizes: list[int]) -> str:
    buffers, reads, init, fill, writes = [], [], [], [], []
    for i, (m, size) in enumerate(zip(in_members, in_sizes, strict=True)):
        buffers.append(f"static uint8_t g_in{i}[{size}] __attribute__((aligned(16)));")
        reads.append(f"    if (fread(g_in{i}, 1, {size}, fin) != {size}) return 5;")
        init.append(f"    inputs.{m} = g_in{i};")
    for i, (m, size) in enumerate(zip(out_members, out_sizes, strict=True)):
        buffers.append(f"static uint8_t g_out{i}[{size}] __attribute__((aligned(16)));")
        fill.append(f"    memset(g_out{i}, 0x5a, {size});  /* unwritten outputs show */")
        init.append(f"    outputs.{m} = g_out{i};")
        writes.append(f"    if (fwrite(g_out{i}, 1, {size}, fout) != {size}) return 6;")
    return MAIN_C.format(
        name=name, NAME=name.upper(), buffers="\n".join(buffers),
        reads="\n".join(reads), outputs_init="\n".join(init), fill="\n".join(fill),
        writes="\n".join(writes),
    )


def _backend_sources() -> list[Path]:
    sources = sorted((CRT_DIR / "src" / "backend").glob("*.c"))
    stack = CRT_DIR / "src" / "memory" / "stack_allocator.c"
    if not sources or not stack.is_file():
        raise AssertionError("the CRT backend library is missing (crt/src/backend/*.c and "
                             "crt/src/memory/stack_allocator.c); the emitted code links against it")
    return [*sources, stack]


def _run(cmd: list[str], what: str, cwd: Path | None = None) -> None:
    for attempt in range(3):
        try:
            proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
            break
        except OSError as exc:
            # Seen once: vfork+exec from a worker thread failing with EFAULT while the main
            # thread runs an interpreter. Spawning again succeeds; anything else is real.
            if exc.errno != errno.EFAULT or attempt == 2:
                raise
    if proc.returncode != 0:
        raise AssertionError(f"{what} failed (exit {proc.returncode}):\n$ {' '.join(cmd)}\n"
                             f"{proc.stdout[-3000:]}{proc.stderr[-3000:]}")


@pytest.fixture(scope="session")
def backend_objects(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """The CRT backend library, compiled once for all models."""
    cc = require_tool("cc")
    out = tmp_path_factory.mktemp("crt_backend")
    objs = []
    for src in _backend_sources():
        obj = out / (src.stem + ".o")
        _run([cc, *CFLAGS, "-I", str(CRT_DIR / "include"), "-c", str(src), "-o", str(obj)],
             f"compiling {src.relative_to(REPO_ROOT)}")
        objs.append(obj)
    return objs


@dataclass
class Built:
    """A case's model, emitted and compiled into an executable."""

    case: Case
    model: bytes
    labels: list[str]
    exe: Path
    in_det: list[dict[str, Any]]
    out_det: list[dict[str, Any]]


def emit_and_compile(case: Case, workdir: Path, backend: list[Path], cc: str) -> Built:
    """Build the case's model, emit it, and compile the C with a generated main."""
    try:
        from project_api.emit import emit
    except ImportError as exc:
        raise AssertionError(f"project_api.emit.emit is not available: {exc}") from exc
    model, labels = case.build()
    name = case.module_name
    tar_path = workdir / f"{name}.tar"
    emit(model, tar_path, name=name, target=case.target, weights=case.weights)
    root = workdir / "mlf"
    root.mkdir()
    with tarfile.open(tar_path) as tf:
        tf.extractall(root, filter="data")
    header_path = root / "codegen" / "host" / "include" / f"tvmgen_{name}.h"
    if not header_path.is_file():
        raise AssertionError(f"the MLF lacks codegen/host/include/tvmgen_{name}.h")
    header = header_path.read_text()
    in_det, out_det = io_details(model, case.tflm)
    in_members = _order(_struct_members(header, name, "inputs"), [d["name"] for d in in_det],
                        "inputs")
    out_members = _order(_struct_members(header, name, "outputs"), [d["name"] for d in out_det],
                         "outputs")
    in_sizes = [int(np.prod(d["shape"])) * d["dtype"].itemsize for d in in_det]
    out_sizes = [int(np.prod(d["shape"])) * d["dtype"].itemsize for d in out_det]
    (workdir / "main.c").write_text(_main_c(name, in_members, in_sizes, out_members, out_sizes))
    sources = sorted((root / "codegen" / "host" / "src").glob("*.c"))
    if not sources:
        raise AssertionError("the MLF has no C sources under codegen/host/src")
    exe = workdir / "model"
    _run([cc, *CFLAGS, "-I", str(CRT_DIR / "include"), "-I", str(header_path.parent),
          *map(str, sources), str(workdir / "main.c"), *map(str, backend), "-lm", "-o", str(exe)],
         "compiling the emitted C")
    return Built(case, model, labels, exe, in_det, out_det)


def run_built(built: Built, runs: list[list[np.ndarray]],
              reset_at: int | None = None) -> list[list[np.ndarray]]:
    """Run the executable on every input set in turn (one process: state carries over);
    ``reset_at``: reset the module's state before that run. The outputs of every run."""
    workdir = built.exe.parent
    with open(workdir / "inputs.bin", "wb") as f:
        for inputs in runs:
            for arr, d in zip(inputs, built.in_det, strict=True):
                f.write(np.ascontiguousarray(arr, dtype=d["dtype"]).tobytes())
    extra = [] if reset_at is None else [str(reset_at)]
    _run([str(built.exe), "inputs.bin", "outputs.bin", str(len(runs)), *extra],
         "running the emitted C", cwd=workdir)
    raw = (workdir / "outputs.bin").read_bytes()
    result, pos = [], 0
    for _ in runs:
        outs = []
        for d in built.out_det:
            size = int(np.prod(d["shape"])) * d["dtype"].itemsize
            outs.append(np.frombuffer(raw[pos:pos + size], d["dtype"]).reshape(d["shape"]))
            pos += size
        result.append(outs)
    assert pos == len(raw), f"the program wrote {len(raw)} bytes, expected {pos}"
    return result


class Prefetcher:
    """Emits and compiles the next cases (in test order) on worker threads while one runs."""

    def __init__(self, cases: list[tuple[str, Case]], backend: list[Path], cc: str,
                 factory: pytest.TempPathFactory):
        self.order = cases  # (test file, case) in test order
        self.position = {c.id: i for i, (_, c) in enumerate(cases)}
        self.backend = backend
        self.cc = cc
        self.factory = factory
        self.pool = ThreadPoolExecutor(max_workers=PARALLEL_BUILDS)
        self.futures: dict[str, Future[Built]] = {}

    def _submit(self, case: Case) -> None:
        if case.id not in self.futures:
            workdir = self.factory.mktemp(sanitize(case.id)[:60])
            self.futures[case.id] = self.pool.submit(emit_and_compile, case, workdir,
                                                     self.backend, self.cc)

    def get(self, case: Case) -> Built:
        self._submit(case)
        i = self.position.get(case.id)
        if i is not None:
            here = self.order[i][0]
            for where, ahead in self.order[i + 1:i + 1 + PARALLEL_BUILDS]:
                if where == here:
                    self._submit(ahead)
        return self.futures[case.id].result()


@pytest.fixture(scope="session")
def builds(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           backend_objects: list[Path]) -> Iterator[Prefetcher]:
    """One prefetcher for the session, asked for the cases of every module that uses it; it
    prefetches in test order within each module."""
    selected = [(item.nodeid.split("::")[0], item.callspec.params["case"])
                for item in request.session.items
                if isinstance(getattr(item, "callspec", None) and item.callspec.params.get("case"),
                              Case)]
    pf = Prefetcher(selected, backend_objects, require_tool("cc"), tmp_path_factory)
    yield pf
    pf.pool.shutdown(wait=True, cancel_futures=True)


# --- inputs and comparison ------------------------------------------------------------------


def io_details(model: bytes, tflm: bool = True) -> tuple[list[dict[str, Any]],
                                                       list[dict[str, Any]]]:
    """(inputs, outputs) details (``name``, ``shape``, ``dtype``) from TFLM, or from LiteRT for
    a model TFLM cannot load (an op it has no kernel for)."""
    if tflm:
        return R.input_details(model), R.output_details(model)
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_content=bytes(model))

    def one(d: dict[str, Any]) -> dict[str, Any]:
        return {"name": d["name"], "shape": tuple(int(s) for s in d["shape"]),
                "dtype": np.dtype(d["dtype"])}

    return ([one(d) for d in interp.get_input_details()],
            [one(d) for d in interp.get_output_details()])


def input_sets(model: bytes, seed: int | list[int], tflm: bool = True,
               runs: int = RUNS) -> list[list[np.ndarray]]:
    """``runs`` input sets: random over each input's whole range, the last at the extremes;
    the inputs as TFLM reads them (LiteRT where ``tflm`` is False)."""
    rng = np.random.default_rng(seed)
    dets = io_details(model, tflm)[0]
    sets = []
    for r in range(runs):
        one = []
        for d in dets:
            dt = np.dtype(d["dtype"])
            if dt.kind == "b":  # bool: random, then alternating runs (every pair of values)
                if r < runs - 1:
                    one.append(rng.integers(0, 2, size=d["shape"]).astype(bool))
                else:
                    one.append((np.arange(int(np.prod(d["shape"]))) % 3 == 0).reshape(d["shape"]))
            elif dt.kind in "iu":
                info = np.iinfo(dt)
                lo, hi = int(info.min), int(info.max)
                if dt.itemsize > 2:  # int32: a range whose sums and products stay exact
                    lo, hi = -(1 << 20), 1 << 20
                if r < runs - 1:
                    one.append(rng.integers(lo, hi + 1, size=d["shape"], dtype=dt))
                else:
                    one.append(rng.choice(np.array([lo, hi], dt), size=d["shape"]))
            else:
                scale = 3.0 if r < runs - 1 else 50.0
                one.append(rng.uniform(-scale, scale, size=d["shape"]).astype(np.float32))
        sets.append(one)
    return sets


def compare(got: np.ndarray, want: np.ndarray, ref: str, lsb: int,
            float_exact: bool = False) -> str | None:
    """None when ``got`` matches ``want`` (floats: within tolerance, or bit for bit when
    ``float_exact``), else a one-line description of the mismatch."""
    if got.shape != want.shape:
        return f"shape {got.shape} vs {ref} {want.shape}"
    if want.dtype.kind == "f" and float_exact:
        bits = np.dtype(f"u{want.dtype.itemsize}")
        bad = got.view(bits) != want.view(bits)
        if not bad.any():
            return None
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        return (f"{int(bad.sum())}/{bad.size} elements differ from {ref} in their bits; first "
                f"at {idx}: emitted {got[idx]!r}, {ref} {want[idx]!r}")
    if want.dtype.kind == "f":
        bad = ~np.isclose(got, want, rtol=FLOAT_RTOL, atol=FLOAT_ATOL, equal_nan=True)
        if not bad.any():
            return None
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        err = np.abs(got.astype(np.float64) - want)
        return (f"{int(bad.sum())}/{bad.size} elements differ from {ref} beyond rtol={FLOAT_RTOL}, "
                f"atol={FLOAT_ATOL} (max abs error {err.max():.3g}); first at {idx}: emitted "
                f"{got[idx]!r}, {ref} {want[idx]!r}")
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    bad = diff > lsb
    if not bad.any():
        return None
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return (f"{int(bad.sum())}/{bad.size} elements differ from {ref} by more than {lsb} LSB "
            f"(max {int(diff.max())}); first at {idx}: emitted {int(got[idx])}, {ref} "
            f"{int(want[idx])}")


def check_parity(case: Case, builds: Prefetcher, with_litert: bool = True) -> None:
    """Emit, compile and run ``case``; assert parity with TFLM (and LiteRT, unless the case or
    ``with_litert`` says not) on every input set."""
    with_litert = with_litert and case.litert
    if not (with_litert or case.tflm):
        raise AssertionError(f"{case.id}: no reference left (neither TFLM nor LiteRT)")
    built = builds.get(case)
    runs = input_sets(built.model, [SEED_BASE, zlib.crc32(case.id.encode()) + 1], case.tflm,
                      case.invocations or RUNS)
    got_runs = run_built(built, runs, case.reset_at)
    problems = []
    if case.stateful:
        fresh = () if case.reset_at is None else (case.reset_at,)
        tflm_runs = R.run_tflm_sequence(built.model, runs, fresh) if case.tflm else None
        lite_runs = R.run_litert_sequence(built.model, runs, fresh) if with_litert else None
    for r, (inputs, got) in enumerate(zip(runs, got_runs, strict=True)):
        if case.stateful:
            tflm = tflm_runs[r] if tflm_runs is not None else None
            lite = lite_runs[r] if lite_runs is not None else None
        else:
            tflm = R.run_tflm(built.model, inputs) if case.tflm else None
            lite = R.run_litert(built.model, inputs) if with_litert else None
        for k, label in enumerate(built.labels):
            refs = [] if tflm is None else [(tflm[k], "TFLM", 0, case.float_exact)]
            if lite is not None:
                refs.append((lite[k], "LiteRT", LITERT_LSB.get(np.dtype(lite[k].dtype).name, 0),
                             False))
            for want, ref, lsb, exact in refs:
                msg = compare(got[k], want, ref, lsb, exact)
                if msg:
                    problems.append(f"{case.id} {label} run {r}: {msg}")
    assert not problems, (f"{len(problems)} mismatches (PROJECT_API_EMIT_SEED={SEED_BASE}):\n"
                          + "\n".join(problems[:20]))

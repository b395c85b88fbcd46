"""Run a TFLite model in the reference interpreters, for parity tests and benchmarks.

Two independent references:

* :func:`run_tflm`: TensorFlow Lite Micro's Python interpreter (package ``tflite-micro``), i.e.
  TFLM's reference kernels, what a microcontroller runs without optimized kernels. Int8 results
  of the emitted C code must match it bit for bit.
* :func:`run_litert`: LiteRT, the desktop TFLite runtime (package ``ai-edge-litert``), with its
  built-in kernels and no delegates (or its reference kernels on request).

:func:`tflm_arena` reports how much of its tensor arena TFLM used for a model, parsed from the
``RecordingMicroAllocator`` report that ``print_allocations()`` writes from C.

Both packages are optional (the ``reference`` extra). Missing ones raise
:class:`ReferenceUnavailableError` (:class:`project_api.system.extras.MissingExtraError`) naming the
extra to install.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import sys
import tempfile
from collections.abc import Collection, Iterator, Sequence
from typing import Any

import numpy as np

from project_api.system.extras import MissingExtraError, require

__all__ = [
    "ReferenceArenaError",
    "ReferenceUnavailableError",
    "dequantized_rebuild",
    "input_details",
    "output_details",
    "run_litert",
    "run_litert_sequence",
    "run_tflm",
    "run_tflm_sequence",
    "tflm_arena",
    "tflm_arena_size",
    "litert_ref_stands_in",
    "tflm_failure_reason",
    "tflm_interpreter",
]

#: The smallest arena handed to TFLM when the caller gives none (its Python wrapper crashes,
#: rather than failing, on an arena too small for its persistent part: a few KB).
DEFAULT_ARENA_SIZE_BYTES = 1 << 20
#: TFLM's arena beside the activations our planner places: the inputs and outputs (caller
#: buffers in our plan), its persistent allocations (tensor structs, op data) per tensor and
#: node, then this margin over the whole; grown on TFLM's "Failed to resize buffer".
ARENA_FIXED_BYTES = 64 * 1024
ARENA_PER_TENSOR_BYTES = 256
ARENA_PER_NODE_BYTES = 1024
ARENA_MARGIN = 1.25
#: Tries at growing the arena before giving up (each adds what TFLM said was missing).
ARENA_TRIES = 8
#: The largest share of the host's physical memory an arena may take.
ARENA_HOST_SHARE = 0.5


class ReferenceArenaError(RuntimeError):
    """TFLM's arena for a model would not fit the host (the message gives the figures)."""


_ARENA_SIZES: dict[str, int] = {}
#: How TFLM's allocator says the arena is short (the activations: "resize buffer"; the
#: persistent part: "allocate tail memory").
_MISSING_RE = re.compile(r"Failed to (?:resize buffer|allocate (?:tail|head|persistent) memory)"
                         r"\. Requested: (\d+), available (\d+), missing: (\d+)")


#: A reference interpreter's package is not installed (the ``reference`` extra brings both).
ReferenceUnavailableError = MissingExtraError


def _tflm_runtime() -> Any:
    return require("tflite_micro", "the TFLite Micro reference").runtime


def _litert_interpreter() -> Any:
    return require("ai_edge_litert.interpreter", "the LiteRT reference")


def _subgraph_io_names(model: bytes) -> tuple[list[str], list[str]]:
    """Tensor names of subgraph 0's inputs and outputs, read with TFLM's schema module."""
    _tflm_runtime()
    from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema_fb

    sg = schema_fb.Model.GetRootAsModel(bytearray(model), 0).Subgraphs(0)

    def name(i: int) -> str:
        raw = sg.Tensors(i).Name()
        return raw.decode("utf-8", errors="replace") if raw else f"tensor_{i}"

    return ([name(int(sg.Inputs(k))) for k in range(sg.InputsLength())],
            [name(int(sg.Outputs(k))) for k in range(sg.OutputsLength())])


def _subgraph_io_count(model: bytes) -> tuple[int, int]:
    """(number of inputs, number of outputs) of subgraph 0."""
    ins, outs = _subgraph_io_names(model)
    return len(ins), len(outs)


def planned_arena_bytes(model: bytes) -> int:
    """The arena TFLM should need for ``model``: our planner's pool (the emitted module's
    workspace; where the emitter refuses the model, every activation tensor side by side),
    plus the inputs and outputs and TFLM's persistent allocations, times
    :data:`ARENA_MARGIN`."""
    from project_api.emit import emit_sources, read_tflite
    from project_api.errors import ProjectAPIError

    g = read_tflite(bytes(model))
    graphs = g.subgraphs or [g]
    tensors = sum(len(sg.tensors) for sg in graphs)
    nodes = sum(len(sg.operators) for sg in graphs)
    io = sum(g.tensor(i).size_bytes for i in list(g.inputs) + list(g.outputs))
    try:
        pool = emit_sources(bytes(model)).workspace_size_bytes
    except (ProjectAPIError, ValueError, RuntimeError):
        pool = sum(t.size_bytes for sg in graphs for t in sg.tensors if not t.is_const)
    need = pool + io + ARENA_FIXED_BYTES + ARENA_PER_TENSOR_BYTES * tensors \
        + ARENA_PER_NODE_BYTES * nodes
    return int(need * ARENA_MARGIN)


def host_arena_limit() -> int:
    """The largest arena this host gives TFLM: :data:`ARENA_HOST_SHARE` of physical memory."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        total = 1 << 34
    return int(total * ARENA_HOST_SHARE)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def tflm_arena_size(model: bytes, **kwargs: Any) -> int:
    """The arena size TFLM takes ``model`` with: :func:`planned_arena_bytes`, grown (at least
    doubled) by what TFLM reports missing ("Failed to resize buffer ... missing: N") until it
    allocates; never
    a fixed cap, but :class:`ReferenceArenaError` past :func:`host_arena_limit`. Remembered
    per model (and interpreter options)."""
    import hashlib

    key = hashlib.sha256(bytes(model)).hexdigest() + repr(sorted(kwargs.items()))
    if key in _ARENA_SIZES:
        return _ARENA_SIZES[key]
    runtime = _tflm_runtime()
    size = max(DEFAULT_ARENA_SIZE_BYTES, planned_arena_bytes(model))
    limit = host_arena_limit()
    said = ""
    for _ in range(ARENA_TRIES):
        if size > limit:
            raise ReferenceArenaError(
                f"TFLite Micro needs an arena of at least {_mib(size)} ({size} bytes) for this "
                f"model, more than this host gives it ({_mib(limit)}, half its memory)")
        try:
            with _captured_fds((2,)) as printed:
                runtime.Interpreter.from_bytes(bytes(model), arena_size=size, **kwargs)
        except RuntimeError:
            said = "".join(printed)
            missing = _MISSING_RE.search(said)
            if missing is None and "arena" not in said.lower():
                # not the arena: let whoever reports TFLM's failure see what it said
                os.write(2, said.encode())
                raise
            more = int(missing.group(3)) if missing else size
            size = max(2 * size, int((size + more) * ARENA_MARGIN))
            continue
        _ARENA_SIZES[key] = size
        return size
    raise ReferenceArenaError(f"TFLite Micro did not allocate this model's tensors in "
                              f"{ARENA_TRIES} tries up to {_mib(size)}: {said.strip()[-200:]}")


def tflm_interpreter(model: bytes, arena_size_bytes: int | None = None, **kwargs: Any) -> Any:
    """A TFLite Micro interpreter of ``model``; its arena ``arena_size_bytes``, else sized from
    the model (:func:`tflm_arena_size`). ``kwargs`` go to ``Interpreter.from_bytes``."""
    runtime = _tflm_runtime()
    size = arena_size_bytes or tflm_arena_size(model, **kwargs)
    return runtime.Interpreter.from_bytes(bytes(model), arena_size=size, **kwargs)




def _as_input(value: np.ndarray, details: dict[str, Any], index: int) -> np.ndarray:
    arr = np.asarray(value)
    dtype = np.dtype(details["dtype"])
    shape = tuple(int(d) for d in details["shape"])
    if arr.dtype != dtype:
        raise ValueError(f"input {index}: dtype {arr.dtype} given, the model wants {dtype}")
    if arr.size != int(np.prod(shape)):
        raise ValueError(f"input {index}: {arr.size} elements given, the model wants shape {shape}")
    return np.ascontiguousarray(arr.reshape(shape))


def run_tflm(
    model: bytes, inputs: Sequence[np.ndarray], arena_size_bytes: int | None = None,
) -> list[np.ndarray]:
    """Run ``model`` once in TFLite Micro (reference kernels) and return its outputs in order."""
    n_in, n_out = _subgraph_io_count(model)
    if len(inputs) != n_in:
        raise ValueError(f"the model has {n_in} inputs, {len(inputs)} given")
    interp = tflm_interpreter(model, arena_size_bytes)
    for i, value in enumerate(inputs):
        interp.set_input(_as_input(value, interp.get_input_details(i), i), i)
    interp.invoke()
    return [np.array(interp.get_output(i), copy=True) for i in range(n_out)]


def run_tflm_sequence(
    model: bytes, runs: Sequence[Sequence[np.ndarray]], fresh_at: Collection[int] = (),
    arena_size_bytes: int | None = None,
) -> list[list[np.ndarray]]:
    """Run ``model`` on each input set of ``runs`` in turn in one TFLite Micro interpreter, as
    a device runs a stateful model (variable tensors and resource variables carried from one
    invocation to the next); return each run's outputs. Before each run whose index is in
    ``fresh_at`` a new interpreter starts: the state of a device just booted or reset (TFLM's
    own ``reset()`` would not run a CALL_ONCE init subgraph again)."""
    n_in, n_out = _subgraph_io_count(model)
    interp = None
    out = []
    for r, inputs in enumerate(runs):
        if len(inputs) != n_in:
            raise ValueError(f"run {r}: the model has {n_in} inputs, {len(inputs)} given")
        if interp is None or r in fresh_at:
            interp = tflm_interpreter(model, arena_size_bytes)
        for i, value in enumerate(inputs):
            interp.set_input(_as_input(value, interp.get_input_details(i), i), i)
        interp.invoke()
        out.append([np.array(interp.get_output(i), copy=True) for i in range(n_out)])
    return out


def _litert(model: bytes, reference_kernels: bool) -> Any:
    mod = _litert_interpreter()
    resolver = (mod.OpResolverType.BUILTIN_REF if reference_kernels
                else mod.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interp = mod.Interpreter(model_content=bytes(model), num_threads=1,
                             experimental_op_resolver_type=resolver)
    interp.allocate_tensors()
    return interp


def run_litert_sequence(
    model: bytes, runs: Sequence[Sequence[np.ndarray]], fresh_at: Collection[int] = (),
    reference_kernels: bool = False,
) -> list[list[np.ndarray]]:
    """:func:`run_tflm_sequence` in LiteRT: one interpreter for every run (state carried), a new
    one before each run in ``fresh_at``."""
    interp = None
    out = []
    for r, inputs in enumerate(runs):
        if interp is None or r in fresh_at:
            interp = _litert(model, reference_kernels)
        out.append(_litert_invoke(interp, inputs, f"run {r}: "))
    return out


def _litert_invoke(interp: Any, inputs: Sequence[np.ndarray], where: str = "") -> list[np.ndarray]:
    """Set ``inputs`` on a LiteRT interpreter, invoke it and copy its outputs out."""
    ins = interp.get_input_details()
    if len(inputs) != len(ins):
        raise ValueError(f"{where}the model has {len(ins)} inputs, {len(inputs)} given")
    for i, (value, det) in enumerate(zip(inputs, ins, strict=True)):
        interp.set_tensor(det["index"], _as_input(value, det, i))
    interp.invoke()
    return [np.array(interp.get_tensor(d["index"]), copy=True)
            for d in interp.get_output_details()]


def run_litert(
    model: bytes, inputs: Sequence[np.ndarray], reference_kernels: bool = False,
) -> list[np.ndarray]:
    """Run ``model`` once in LiteRT and return its outputs in order.

    LiteRT's built-in (optimized) kernels are used without delegates, single-threaded; with
    ``reference_kernels=True`` its reference kernels instead.
    """
    return _litert_invoke(_litert(model, reference_kernels), inputs)


def _details(model: bytes, outputs: bool) -> list[dict[str, Any]]:
    in_names, out_names = _subgraph_io_names(model)
    interp = tflm_interpreter(model, None)
    result = []
    for i, tensor_name in enumerate(out_names if outputs else in_names):
        d = interp.get_output_details(i) if outputs else interp.get_input_details(i)
        q = d.get("quantization_parameters", {})
        scales = [float(s) for s in np.asarray(q.get("scales", []))]
        result.append({
            "name": tensor_name,
            "shape": tuple(int(s) for s in d["shape"]),
            "dtype": np.dtype(d["dtype"]),
            "scale": scales,
            "zero_point": [int(z) for z in np.asarray(q.get("zero_points", []))],
            "quantized_dimension": int(q.get("quantized_dimension", 0)),
        })
    return result


def input_details(model: bytes) -> list[dict[str, Any]]:
    """Per input: ``name``, ``shape`` (tuple), ``dtype`` (numpy), ``scale`` and ``zero_point``
    (lists; empty when not quantized) and ``quantized_dimension``."""
    return _details(model, outputs=False)


def output_details(model: bytes) -> list[dict[str, Any]]:
    """Per output: the same keys as :func:`input_details`."""
    return _details(model, outputs=True)


@contextlib.contextmanager
def _captured_fds(fds: tuple[int, ...] = (1, 2)) -> Iterator[list[str]]:
    """Capture what C code writes to ``fds`` (redirected at the descriptor level); the text is
    there also when the body raises."""
    text: list[str] = []
    libc = ctypes.CDLL(None)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        saved = [os.dup(fd) for fd in fds]
        try:
            for fd in fds:
                os.dup2(sink.fileno(), fd)
            yield text
        finally:
            libc.fflush(None)
            for fd, copy in zip(fds, saved, strict=True):
                os.dup2(copy, fd)
                os.close(copy)
            sink.seek(0)
            text.append(sink.read().decode("utf-8", errors="replace"))


def tflm_failure_reason(printed: str, exc: Exception) -> str:
    """Why TFLM could not run a model: the most telling line it printed (``printed``, without
    its source file), else the exception ``exc``."""
    lines = [line.strip() for line in printed.splitlines() if line.strip()]
    best = next((line for line in lines if "not supported" in line.lower()), None)
    best = best or (lines[0] if lines else f"{type(exc).__name__}: {exc}")
    if best.startswith("tensorflow/") and " " in best:
        best = best.split(" ", 1)[1]  # "tensorflow/lite/micro/kernels/x.cc Hybrid ..." -> "Hybrid ..."
    return " ".join(best.split()).rstrip(".")


def litert_ref_stands_in(reason: str) -> bool:
    """Whether LiteRT's reference kernels may stand in for TFLM that failed for ``reason`` (an
    operator it lacks, an operand it wants constant): not for a hybrid model, whose weights
    the emitter dequantizes where LiteRT quantizes activations (a different computation)."""
    return "hybrid" not in reason.lower()


_ARENA_RE = re.compile(r"Arena allocation (total|head|tail) (\d+) bytes")


def tflm_arena(model: bytes, arena_size_bytes: int | None = None) -> dict[str, int]:
    """TFLM's arena use for ``model`` after one inference: ``{"total", "head", "tail"}`` in bytes.

    ``head`` is the non-persistent part (activations, planned by TFLM's greedy planner), ``tail``
    the persistent part (tensor structs, op data). Inputs are zeros.
    """
    interp = tflm_interpreter(model, arena_size_bytes)
    for i, det in enumerate(input_details(model)):
        interp.set_input(np.zeros(det["shape"], dtype=det["dtype"]), i)
    interp.invoke()
    with _captured_fds() as captured:
        interp.print_allocations()
    found = {k: int(v) for k, v in _ARENA_RE.findall(captured[0])}
    missing = {"total", "head", "tail"} - set(found)
    if missing:
        raise RuntimeError(
            f"TFLM's allocation report lacks {sorted(missing)}; got: {captured[0][:200]!r}"
        )
    return found


def dequantized_rebuild(model: bytes) -> bytes:
    """The same network with every int8 weight dequantized to float32.

    A "hybrid" model (int8 weights, float activations, like ``kws_ref_model_float32``) is
    refused by TFLM; the emitter dequantizes such weights at emit time, and this rebuild is the
    plain float32 model TFLM can run as the reference for it. Handles the operators of the shared
    models (CONV_2D, DEPTHWISE_CONV_2D, AVERAGE_POOL_2D, RESHAPE, FULLY_CONNECTED, SOFTMAX).
    """
    from project_api.emit import read_tflite
    from project_api.emit.ops.fully_connected import dequantized_weights
    from project_api.tflite.builder import ModelBuilder

    g = read_tflite(model)
    b = ModelBuilder()
    values = {}
    for i in g.inputs:
        t = g.tensor(i)
        values[i] = b.input(t.shape, "float32", name=t.name)

    def weights(idx: int, axis: int) -> np.ndarray:
        t = g.tensor(idx)
        return dequantized_weights(None, t, axis) if t.dtype == "int8" else t.data

    for op in g.operators:
        x = values[op.inputs[0]]
        o = op.options
        if op.opcode == "CONV_2D":
            y = b.conv2d(x, weights(op.inputs[1], 0), bias=g.tensor(op.inputs[2]).data,
                         stride=(o["stride_h"], o["stride_w"]), padding=o["padding"],
                         dilation=(o["dilation_h_factor"], o["dilation_w_factor"]), activation=o["fused_activation_function"])
        elif op.opcode == "DEPTHWISE_CONV_2D":
            w = weights(op.inputs[1], 3)
            y = b.depthwise_conv2d(x, weights=w, bias=g.tensor(op.inputs[2]).data,
                                   depth_multiplier=w.shape[3] // x.shape[3],
                                   stride=(o["stride_h"], o["stride_w"]), padding=o["padding"],
                                   dilation=(o["dilation_h_factor"], o["dilation_w_factor"]),
                                   activation=o["fused_activation_function"])
        elif op.opcode == "AVERAGE_POOL_2D":
            y = b.average_pool2d(x, (o["filter_height"], o["filter_width"]), (o["stride_h"], o["stride_w"]),
                                 o["padding"], o["fused_activation_function"])
        elif op.opcode == "RESHAPE":
            y = b.reshape(x, g.tensor(op.outputs[0]).shape)
        elif op.opcode == "FULLY_CONNECTED":
            y = b.fully_connected(x, weights(op.inputs[1], 0), bias=g.tensor(op.inputs[2]).data,
                                  activation=o["fused_activation_function"])
        elif op.opcode == "SOFTMAX":
            y = b.softmax(x, o["beta"])
        else:
            raise ValueError(f"dequantized_rebuild does not handle {op.opcode}")
        values[op.outputs[0]] = y
    for i in g.outputs:
        b.output(values[i])
    return b.build()

"""Randomized parity of the emitted C against TFLite Micro and LiteRT, operator by operator.

Every operator option combination is one test: a model whose branches (one input and one
output each) cover the fused activations and three seeds, each seed with its own input shape,
kernel size, weights and quantization. The model goes through ``project_api.emit.emit`` into a
Model Library Format tar. The tar's C sources are compiled with a small generated ``main``
against the CRT backend library (``crt/src/backend`` + ``crt/src/memory/stack_allocator.c``),
under ASan and UBSan's integer, shift, cast and bounds checks, with a workspace buffer of exactly
``TVMGEN_<NAME>_WORKSPACE_SIZE`` (plus the allocator's alignment and tag). The program runs once
per input set and its outputs are compared with:

* int8 outputs: bit-exact with TFLM (reference kernels) and within 1 LSB of LiteRT;
* float32 outputs: within ``rtol=1e-5, atol=1e-5`` of both.

A failure names the operator, the type, the options and the branch (seed, activation, shapes).
An operator the emitter does not implement FAILS here (it never skips).

Every int8 case of an operator with DSP-extension kernels (CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED, AVERAGE_POOL_2D, MAX_POOL_2D, ADD) also runs emitted with ``target="cortex-m4"``: on the host the kernels' ACLE
intrinsics are the portable C definitions of ``kernels/arm_dsp.h.j2``, so the same bit-exactness
and sanitizer checks cover every SIMD kernel (``DSP_CASES`` add shapes that reach each of their
code paths: 1x1 with odd pixel and channel counts, strided, long reductions, classes of border
pixels, odd outputs).
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import tarfile
import zlib
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import require_tool

from project_api.emit import builder as B
from project_api.emit import reference as R

REPO_ROOT = Path(__file__).resolve().parent.parent
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
#: Every weight, quantization and input derives from this; CI uses 0. Set PROJECT_API_EMIT_SEED to
#: another number to explore new random cases (a failure message names the seed to reproduce it).
SEED_BASE = int(os.environ.get("PROJECT_API_EMIT_SEED", "0"))
PARALLEL_BUILDS = 2  # emit+compile workers (the machine budget is 2 cores)
LABEL_ONLY = ("seed", "shapes", "from", "edge", "dsp")  # case keys that name a variant, not a builder option


# --- the case matrix ----------------------------------------------------------------------------


@dataclass
class Case:
    op: str
    mode: str  # one of builder.MODES
    options: dict[str, Any]  # the combination under test
    branches: list[dict[str, Any]] = field(default_factory=list)  # options per branch
    target: str = "generic"  # the emitter's kernel target

    @property
    def model_id(self) -> str:
        """Names the model (and seeds it): the same for every target."""
        opts = "-".join(f"{k}_{_fmt(v)}" for k, v in self.options.items())
        return f"{self.op}-{self.mode}" + (f"-{opts}" if opts else "")

    @property
    def id(self) -> str:
        suffix = "" if self.target == "generic" else f"-target_{self.target}"
        return self.model_id + suffix

    @property
    def dtype(self) -> str:
        return "float32" if self.mode == "float32" else "int8"

    @property
    def module_name(self) -> str:
        """The MLF module name the case is emitted under."""
        return _sanitize(f"{self.op.lower()}_{self.mode}")

    def build(self) -> tuple[bytes, list[str]]:
        """The case's model, and a label per output for messages."""
        return build_case(self)


def _fmt(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return "array" + "x".join(str(i) for i in v.shape)
    if isinstance(v, tuple):
        return "x".join(str(i) for i in v)
    return str(v)


def _with_branches(op: str, mode: str, options: dict[str, Any],
                   per_seed: list[dict[str, Any]], activations: bool = True) -> Case:
    """A case whose branches are (activation x seed), each seed adding ``per_seed[seed]``."""
    case = Case(op, mode, options)
    for act in ACTIVATIONS if activations else (None,):
        for s in SEEDS:
            br = {**options, **per_seed[s]}
            if act is not None:
                br["activation"] = act
            case.branches.append(br)
    return case


def _cases() -> Iterator[Case]:
    weighted_modes = B.MODES
    plain_modes = ("int8", "float32")
    for mode in weighted_modes:
        for stride in (1, 2):
            for padding in ("SAME", "VALID"):
                for dilation in (1, 2):
                    opts = {"stride": stride, "padding": padding, "dilation": dilation}
                    yield _with_branches("CONV_2D", mode, opts, [
                        {"input_shape": (1, 9, 9, 3), "kernel_size": 3, "filters": 4},
                        {"input_shape": (1, 8, 7, 4), "kernel_size": (2, 3), "filters": 5},
                        {"input_shape": (1, 7, 10, 2), "kernel_size": 1, "filters": 8},
                    ])
                    for mult in (1, 2):
                        yield _with_branches("DEPTHWISE_CONV_2D", mode,
                                             {**opts, "depth_multiplier": mult}, [
                            {"input_shape": (1, 9, 9, 3), "kernel_size": 3},
                            {"input_shape": (1, 8, 7, 4), "kernel_size": (3, 2)},
                            {"input_shape": (1, 7, 10, 2), "kernel_size": 2},
                        ])
        for bias in (True, False):
            for keep in (False, True):
                yield _with_branches("FULLY_CONNECTED", mode,
                                     {"bias": bias, "keep_num_dims": keep}, [
                    {"input_shape": (1, 12), "units": 5},
                    {"input_shape": (3, 7), "units": 8},
                    {"input_shape": (1, 2, 10), "units": 3},
                ])
    for mode in plain_modes:
        for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
            for filt in (2, 3):
                for stride in (1, 2):
                    for padding in ("SAME", "VALID"):
                        yield _with_branches(op, mode, {"filter_size": filt, "stride": stride,
                                                        "padding": padding}, [
                            {"input_shape": (1, 8, 8, 3)},
                            {"input_shape": (1, 7, 9, 4)},
                            {"input_shape": (1, 6, 5, 2)},
                        ])
        for op in ("ADD", "MUL"):
            for kind, per_seed in _binary_shapes().items():
                yield _with_branches(op, mode, {"shapes": kind}, per_seed)
        for shape_input in (True, False):
            case = Case("RESHAPE", mode, {"shape_input": shape_input})
            for s in SEEDS:
                for target in ((1, -1), (1, 12, 4), (48,)):
                    case.branches.append({"shape_input": shape_input, "shape": target,
                                          "input_shape": (1, 4, 4, 3), "seed": s})
            yield case
        case = Case("SOFTMAX", mode, {})
        for beta in (1.0, 0.5, 2.0):
            for s, shape in zip(SEEDS, ((1, 10), (2, 5), (1, 3, 7)), strict=True):
                case.branches.append({"beta": beta, "input_shape": shape, "seed": s})
        yield case
        # QUANTIZE: float32 -> int8 in mode float32, int8 -> int8 (requantize) in mode int8
        case = Case("QUANTIZE", mode, {"from": mode})
        for s in SEEDS:
            for shape in ((1, 4, 4, 3), (1, 10), (2, 3)):
                case.branches.append({"input_shape": shape, "seed": s})
        yield case
    case = Case("DEQUANTIZE", "int8", {})
    for s in SEEDS:
        for shape in ((1, 4, 4, 3), (1, 10), (2, 3)):
            case.branches.append({"input_shape": shape, "seed": s})
    yield case


def _binary_shapes() -> dict[str, list[dict[str, Any]]]:
    """ADD/MUL operand shapes per kind, one entry per seed (channel counts differ by seed)."""
    kinds: dict[str, list[dict[str, Any]]] = {}
    chans = (3, 8, 1)
    kinds["same"] = [{"input_shape": (1, 4, 4, c), "b_shape": (1, 4, 4, c)} for c in chans]
    kinds["same_const"] = [{"input_shape": (1, 4, 4, c), "b_shape": (1, 4, 4, c),
                            "b_input": False} for c in chans]
    kinds["bcast_channel"] = [{"input_shape": (1, 4, 4, c), "b_shape": (1, 1, 1, c)}
                              for c in chans]
    kinds["bcast_rank_const"] = [{"input_shape": (1, 4, 4, c), "b_shape": (c,),
                                  "b_input": False} for c in chans]
    kinds["bcast_both"] = [{"input_shape": (1, 4, 1, c), "b_shape": (1, 1, 5, c)} for c in chans]
    kinds["bcast_2d"] = [{"input_shape": (2, 2 * c), "b_shape": (1, 2 * c)} for c in chans]
    return kinds


def _zero_channel_filters() -> np.ndarray:
    """CONV_2D weights [4, 3, 3, 2] whose output channel 1 is all zeros (a degenerate scale)."""
    w = np.random.default_rng(11).uniform(-0.5, 0.5, size=(4, 3, 3, 2)).astype(np.float32)
    w[1] = 0.0
    return w


#: Edge cases, each in the listed modes with one branch per seed: batches, big and lopsided
#: kernels, strides beyond the kernel, windows larger than the input, odd channel counts, extreme
#: scales and zero points, long rows.
EDGE_CASES: list[tuple[str, tuple[str, ...], str, dict[str, Any]]] = [
    ("CONV_2D", B.MODES, "batch2", {"input_shape": (2, 6, 6, 3), "filters": 4}),
    ("CONV_2D", B.MODES, "k5_s3_valid", {"input_shape": (1, 11, 11, 2), "filters": 3,
                                         "kernel_size": 5, "stride": 3, "padding": "VALID"}),
    ("CONV_2D", B.MODES, "lopsided", {"input_shape": (1, 9, 8, 3), "kernel_size": (3, 2),
                                      "stride": (1, 2), "dilation": (2, 1)}),
    ("CONV_2D", B.MODES, "c33_f17", {"input_shape": (1, 4, 4, 33), "filters": 17}),
    ("CONV_2D", B.MODES, "k7x1_c1_f16", {"input_shape": (1, 10, 5, 1), "filters": 16,
                                         "kernel_size": (7, 1)}),
    ("CONV_2D", B.MODES, "kernel_beyond_input", {"input_shape": (1, 3, 3, 2), "kernel_size": 5}),
    ("CONV_2D", B.MODES, "zero_channel", {"input_shape": (1, 5, 5, 2),
                                          "filters": _zero_channel_filters()}),
    ("CONV_2D", B.MODES, "relu_n1_to_1", {"input_shape": (1, 6, 6, 3),
                                          "activation": "RELU_N1_TO_1"}),
    ("DEPTHWISE_CONV_2D", B.MODES, "m3_k5", {"input_shape": (1, 7, 7, 2), "kernel_size": 5,
                                             "depth_multiplier": 3}),
    ("DEPTHWISE_CONV_2D", B.MODES, "batch2_s2", {"input_shape": (2, 5, 5, 4), "stride": 2}),
    ("DEPTHWISE_CONV_2D", B.MODES, "c16_lopsided_valid", {
        "input_shape": (1, 6, 6, 16), "stride": (2, 1), "dilation": (1, 2), "padding": "VALID"}),
    ("FULLY_CONNECTED", B.MODES, "depth300", {"input_shape": (1, 300), "units": 20}),
    ("FULLY_CONNECTED", B.MODES, "batch4", {"input_shape": (4, 16), "units": 6}),
    ("FULLY_CONNECTED", B.MODES, "keep_dims_4d", {"input_shape": (1, 2, 3, 8), "units": 5,
                                                  "keep_num_dims": True}),
    ("AVERAGE_POOL_2D", ("int8", "float32"), "global", {"input_shape": (1, 5, 7, 8),
                                                        "filter_size": (5, 7)}),
    ("AVERAGE_POOL_2D", ("int8", "float32"), "batch2_same", {
        "input_shape": (2, 7, 7, 3), "filter_size": 3, "stride": 2, "padding": "SAME"}),
    ("MAX_POOL_2D", ("int8", "float32"), "window_beyond_input", {
        "input_shape": (1, 3, 3, 4), "filter_size": 4, "stride": 1, "padding": "SAME"}),
    ("MAX_POOL_2D", ("int8", "float32"), "s3_f2", {"input_shape": (1, 9, 9, 3), "filter_size": 2,
                                                   "stride": 3}),
    ("ADD", ("int8", "float32"), "scale_ratio_5000", {"value_range": (-0.01, 0.01),
                                                      "b_range": (-50.0, 50.0)}),
    ("ADD", ("int8", "float32"), "scalar_input", {"b_shape": (1,)}),
    ("ADD", ("int8", "float32"), "row1000", {"input_shape": (1, 1000), "b_shape": (1, 1000),
                                             "activation": "RELU_N1_TO_1"}),
    ("MUL", ("int8", "float32"), "scale_ratio_5000", {"value_range": (-0.01, 0.01),
                                                      "b_range": (-50.0, 50.0)}),
    ("MUL", ("int8", "float32"), "scalar_input", {"b_shape": (1,)}),
    ("SOFTMAX", ("int8", "float32"), "row100_beta3", {"input_shape": (1, 100), "beta": 3.0,
                                                      "value_range": (-10.0, 10.0)}),
    ("SOFTMAX", ("int8", "float32"), "rows_of_one", {"input_shape": (4, 1)}),
    ("SOFTMAX", ("int8", "float32"), "narrow_input", {"value_range": (-0.05, 0.05)}),
    ("QUANTIZE", ("float32", "int8"), "zero_point_min", {"quant": (0.01, -128)}),
    ("QUANTIZE", ("float32", "int8"), "zero_point_max", {"quant": (0.01, 127)}),
    ("QUANTIZE", ("int8",), "scale_down_100", {"value_range": (-12.0, 13.0),
                                               "quant": (0.001, 3)}),
    ("DEQUANTIZE", ("int8",), "zero_point_min", {"value_range": (0.0, 5.0)}),
    ("DEQUANTIZE", ("int8",), "zero_point_max", {"value_range": (-5.0, 0.0)}),
]


def _edge_cases() -> Iterator[Case]:
    for op, modes, label, opts in EDGE_CASES:
        for mode in modes:
            case = Case(op, mode, {"edge": label})
            for s in SEEDS:
                case.branches.append({**opts, "seed": s})
            yield case


#: Operators with DSP-extension kernels: their int8 cases also run with the cortex-m4 target.
DSP_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D", "MAX_POOL_2D",
           "ADD")
DSP_TARGET = "cortex-m4"
#: Shapes that reach every path of the DSP kernels (run with both targets).
DSP_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("CONV_2D", "pw_odd_pixels_odd_filters", {"input_shape": (1, 5, 3, 8), "filters": 5,
                                              "kernel_size": 1}),
    ("CONV_2D", "pw_strided", {"input_shape": (1, 7, 6, 12), "filters": 6, "kernel_size": 1,
                               "stride": 2, "padding": "VALID"}),
    ("CONV_2D", "pw_c160_loop", {"input_shape": (1, 3, 3, 160), "filters": 4, "kernel_size": 1}),
    ("CONV_2D", "k3_c8_lanes_loop", {"input_shape": (1, 6, 5, 8), "filters": 7,
                                     "kernel_size": 3}),
    ("CONV_2D", "k10x4_c1_s2", {"input_shape": (1, 13, 6, 1), "filters": 8,
                                "kernel_size": (10, 4), "stride": 2}),
    ("DEPTHWISE_CONV_2D", "c8_k3_classes", {"input_shape": (1, 7, 5, 8), "kernel_size": 3}),
    ("DEPTHWISE_CONV_2D", "c8_k3_s2_d2", {"input_shape": (1, 9, 8, 8), "kernel_size": 3,
                                          "stride": 2, "dilation": 2}),
    ("DEPTHWISE_CONV_2D", "c4_k9_loop", {"input_shape": (1, 10, 10, 4), "kernel_size": 9}),
    ("DEPTHWISE_CONV_2D", "c1_m8_k10x8_s2", {"input_shape": (1, 13, 12, 1),
                                             "kernel_size": (10, 8), "depth_multiplier": 8,
                                             "stride": 2}),
    ("DEPTHWISE_CONV_2D", "c1_m3_k3_valid", {"input_shape": (1, 6, 7, 1), "kernel_size": 3,
                                             "depth_multiplier": 3, "padding": "VALID"}),
    ("FULLY_CONNECTED", "d16_odd_units", {"input_shape": (1, 16), "units": 7}),
    ("FULLY_CONNECTED", "batch3_d32", {"input_shape": (3, 32), "units": 10}),
    ("AVERAGE_POOL_2D", "c8_f3_same", {"input_shape": (1, 7, 6, 8), "filter_size": 3,
                                       "stride": 2, "padding": "SAME"}),
    ("AVERAGE_POOL_2D", "global_25x5_c12", {"input_shape": (1, 25, 5, 12),
                                            "filter_size": (25, 5)}),
    ("MAX_POOL_2D", "c8_f3_same", {"input_shape": (1, 7, 6, 8), "filter_size": 3,
                                   "stride": 1, "padding": "SAME"}),
    ("ADD", "relu_same_shape", {"input_shape": (1, 6, 6, 8), "b_shape": (1, 6, 6, 8),
                                "activation": "RELU"}),
    ("ADD", "bcast_channel", {"input_shape": (1, 4, 4, 8), "b_shape": (1, 1, 1, 8)}),
]


def _dsp_cases() -> Iterator[Case]:
    for op, label, opts in DSP_CASES:
        modes = ("int8", "int8_per_channel") if op in DSP_OPS[:3] else ("int8",)
        for mode in modes:
            case = Case(op, mode, {"dsp": label})
            for s in SEEDS:
                case.branches.append({**opts, "seed": s})
            yield case


def _with_targets(cases: list[Case]) -> list[Case]:
    """``cases`` and, for each int8 case of a DSP operator, the same case for the DSP target."""
    out = list(cases)
    for c in cases:
        if c.op in DSP_OPS and c.mode != "float32":
            out.append(Case(c.op, c.mode, dict(c.options), list(c.branches), target=DSP_TARGET))
    return out


CASES = _with_targets(list(_cases()) + list(_edge_cases()) + list(_dsp_cases()))


def build_case(case: Case) -> tuple[bytes, list[str]]:
    """The case's model, and a label per output (branch) for messages."""
    mb = B.ModelBuilder(seed=[SEED_BASE, zlib.crc32(case.model_id.encode())],
                        per_channel=case.mode == "int8_per_channel",
                        description=case.model_id)
    labels = []
    for k, br in enumerate(case.branches):
        opts = {key: v for key, v in br.items() if key not in LABEL_ONLY}
        shape = opts.pop("input_shape", None)
        labels.append(f"branch {k} (" + ", ".join(f"{key}={_fmt(v)}" for key, v in br.items()) + ")")
        mb.output(mb.single_op(case.op, case.dtype, shape, name=f"in{k}", **opts))
    return mb.build(), labels


# --- compile and run the emitted code ---------------------------------------------------------


def _sanitize(name: str) -> str:
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
    wanted = [_sanitize(n) for n in tensor_names]
    if sorted(wanted) == sorted(members):
        return wanted
    return members


MAIN_C = """\
/* Generated by tests/test_emit_random.py: feed inputs from a file, write outputs to a file. */
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
#define POOL_BYTES \
  (((TVMGEN_{NAME}_WORKSPACE_SIZE + ALIGN_BYTES - 1) / ALIGN_BYTES) * ALIGN_BYTES + \
   TVM_CRT_STACK_ALLOCATOR_TAG_SIZE_BYTES)
static uint8_t g_workspace[POOL_BYTES] __attribute__((aligned(ALIGN_BYTES)));
{buffers}

int main(int argc, char** argv) {{
  FILE* fin;
  FILE* fout;
  int runs;
  int r;
  if (argc != 4) return 2;
  fin = fopen(argv[1], "rb");
  fout = fopen(argv[2], "wb");
  runs = atoi(argv[3]);
  if (fin == NULL || fout == NULL) return 2;
  if (TVMBackendWorkspaceInit(g_workspace, sizeof(g_workspace)) != 0) {{
    fprintf(stderr, "TVMBackendWorkspaceInit failed\\n");
    return 3;
  }}
  for (r = 0; r < runs; ++r) {{
    struct tvmgen_{name}_inputs inputs;
    struct tvmgen_{name}_outputs outputs;
    int32_t rc;
{reads}
{outputs_init}
{fill}
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
    emit(model, tar_path, name=name, target=case.target)
    root = workdir / "mlf"
    root.mkdir()
    with tarfile.open(tar_path) as tf:
        tf.extractall(root, filter="data")
    header_path = root / "codegen" / "host" / "include" / f"tvmgen_{name}.h"
    if not header_path.is_file():
        raise AssertionError(f"the MLF lacks codegen/host/include/tvmgen_{name}.h")
    header = header_path.read_text()
    in_det, out_det = R.input_details(model), R.output_details(model)
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


def run_built(built: Built, runs: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """Run the executable once per input set; the outputs of every run."""
    workdir = built.exe.parent
    with open(workdir / "inputs.bin", "wb") as f:
        for inputs in runs:
            for arr, d in zip(inputs, built.in_det, strict=True):
                f.write(np.ascontiguousarray(arr, dtype=d["dtype"]).tobytes())
    _run([str(built.exe), "inputs.bin", "outputs.bin", str(len(runs))], "running the emitted C",
         cwd=workdir)
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
            workdir = self.factory.mktemp(_sanitize(case.id)[:60])
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
    # Prefetch in test order, within one module: each module importing this fixture gets its
    # own instance, asked only for its own cases.
    selected = [(item.nodeid.split("::")[0], item.callspec.params["case"])
                for item in request.session.items
                if isinstance(getattr(item, "callspec", None) and item.callspec.params.get("case"),
                              Case)]
    pf = Prefetcher(selected, backend_objects, require_tool("cc"), tmp_path_factory)
    yield pf
    pf.pool.shutdown(wait=True, cancel_futures=True)


# --- inputs and comparison ------------------------------------------------------------------


def input_sets(model: bytes, seed: int | list[int]) -> list[list[np.ndarray]]:
    """RUNS input sets: random over each input's whole range, then one at the extremes."""
    rng = np.random.default_rng(seed)
    dets = R.input_details(model)
    sets = []
    for r in range(RUNS):
        one = []
        for d in dets:
            if d["dtype"] == np.int8:
                if r < RUNS - 1:
                    one.append(rng.integers(-128, 128, size=d["shape"], dtype=np.int8))
                else:
                    one.append(rng.choice(np.array([-128, 127], np.int8), size=d["shape"]))
            else:
                scale = 3.0 if r < RUNS - 1 else 50.0
                one.append(rng.uniform(-scale, scale, size=d["shape"]).astype(np.float32))
        sets.append(one)
    return sets


def compare(got: np.ndarray, want: np.ndarray, ref: str, lsb: int) -> str | None:
    """None when ``got`` matches ``want``, else a one-line description of the mismatch."""
    if got.shape != want.shape:
        return f"shape {got.shape} vs {ref} {want.shape}"
    if want.dtype.kind == "f":
        bad = ~np.isclose(got, want, rtol=FLOAT_RTOL, atol=FLOAT_ATOL)
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
    """Emit, compile and run ``case``; assert parity with TFLM (and LiteRT) on every input set."""
    built = builds.get(case)
    runs = input_sets(built.model, [SEED_BASE, zlib.crc32(case.id.encode()) + 1])
    got_runs = run_built(built, runs)
    problems = []
    for r, (inputs, got) in enumerate(zip(runs, got_runs, strict=True)):
        tflm = R.run_tflm(built.model, inputs)
        lite = R.run_litert(built.model, inputs)
        for k, label in enumerate(built.labels):
            refs = [(tflm[k], "TFLM", 0), (lite[k], "LiteRT", 1)]
            for want, ref, lsb in refs if with_litert else refs[:1]:
                msg = compare(got[k], want, ref, lsb)
                if msg:
                    problems.append(f"{case.id} {label} run {r}: {msg}")
    assert not problems, (f"{len(problems)} mismatches (PROJECT_API_EMIT_SEED={SEED_BASE}):\n"
                          + "\n".join(problems[:20]))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_emitted_matches_references(case: Case, builds: Prefetcher) -> None:
    check_parity(case, builds)

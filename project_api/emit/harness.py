"""Build and run emitted C on the host: a tiny ``main`` around ``tvmgen_<name>_run``.

Used by the parity tests and ``bench/models.py``. The program links the real CRT backend
library sources (``crt/src/backend/*.c`` and ``crt/src/memory/stack_allocator.c``), hands
``TVMCrtWorkspace_Init`` a static buffer, reads the inputs' raw bytes from stdin and writes
the outputs' raw bytes to stdout. With ``--time N`` it runs N timed inferences instead and prints
nanoseconds per inference.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from project_api.system.paths import crt_dir

from ..errors import EmitError
from .codegen import Generated

NUMPY_DTYPES = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32,
                "int64": np.int64, "float32": np.float32, "bool": np.bool_, "uint32": np.uint32,
                "uint64": np.uint64}

# Room for the stack allocator's alignment and bookkeeping beyond the plan's pool bytes.
WORKSPACE_SLACK_BYTES = 256


def harness_source(gen: Generated) -> str:
    """The C ``main`` for module ``gen``."""
    n = gen.name
    lines = [
        "#define _POSIX_C_SOURCE 199309L",
        "#include <stdio.h>", "#include <stdlib.h>", "#include <string.h>", "#include <time.h>",
        "#include <tvm/runtime/c_backend_api.h>", f'#include "tvmgen_{n}.h"', "",
        f"static uint8_t g_workspace[{gen.workspace_size_bytes + WORKSPACE_SLACK_BYTES}];",
    ]
    for k, t in enumerate(gen.inputs):
        lines.append(f"static uint8_t g_in{k}[{max(t.size_bytes, 1)}] __attribute__((aligned(16)));")
    for k, t in enumerate(gen.outputs):
        lines.append(f"static uint8_t g_out{k}[{max(t.size_bytes, 1)}] __attribute__((aligned(16)));")
    lines += [
        "", "int main(int argc, char** argv) {",
        "  long iters = 0;",
        '  if (argc == 3 && strcmp(argv[1], "--time") == 0) iters = atol(argv[2]);',
        "  if (TVMCrtWorkspace_Init(g_workspace, sizeof(g_workspace)) != 0) return 2;",
    ]
    for k, t in enumerate(gen.inputs):
        lines.append(f"  if (fread(g_in{k}, 1, {t.size_bytes}, stdin) != {t.size_bytes}) return 3;")
    lines.append(f"  struct tvmgen_{n}_inputs in = {{" +
                 ", ".join(f"g_in{k}" for k in range(len(gen.inputs))) + "};")
    lines.append(f"  struct tvmgen_{n}_outputs out = {{" +
                 ", ".join(f"g_out{k}" for k in range(len(gen.outputs))) + "};")
    lines += [
        f"  if (tvmgen_{n}_run(&in, &out) != 0) return 4;",
        "  if (iters > 0) {",
        "    struct timespec t0, t1;",
        "    long i;",
        "    clock_gettime(CLOCK_MONOTONIC, &t0);",
        f"    for (i = 0; i < iters; ++i) tvmgen_{n}_run(&in, &out);",
        "    clock_gettime(CLOCK_MONOTONIC, &t1);",
        '    printf("%.1f\\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / iters);',
        "    return 0;",
        "  }",
    ]
    for k, t in enumerate(gen.outputs):
        lines.append(f"  fwrite(g_out{k}, 1, {t.size_bytes}, stdout);")
    lines += ["  return 0;", "}", ""]
    return "\n".join(lines)


def backend_sources() -> list[Path]:
    crt = crt_dir()
    srcs = sorted((crt / "src" / "backend").glob("*.c")) + [
        crt / "src" / "memory" / "stack_allocator.c"]
    missing = [s for s in srcs if not s.is_file()]
    if missing or len(srcs) < 2:
        raise EmitError(f"CRT backend sources missing under {crt}/src: {missing}")
    return srcs


def build(gen: Generated, workdir: Path, cc: str = "gcc",
          cflags: Sequence[str] = ("-O2",)) -> Path:
    """Write the sources of ``gen`` and the harness into ``workdir`` and compile them."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / f"tvmgen_{gen.name}.h").write_text(gen.header)
    lib = workdir / f"{gen.name}_lib0.c"
    lib.write_text(gen.source)
    main = workdir / "harness_main.c"
    main.write_text(harness_source(gen))
    exe = workdir / f"{gen.name}_runner"
    cmd = [cc, "-std=c99", "-Wall", "-Wextra", "-Werror", *cflags,
           f"-I{workdir}", f"-I{crt_dir() / 'include'}", str(lib), str(main),
           *[str(s) for s in backend_sources()], "-lm", "-o", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise EmitError(f"compiling the emitted C failed:\n{' '.join(cmd)}\n{proc.stderr[-4000:]}")
    return exe


def run(exe: Path, gen: Generated, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Run one inference of the built harness; returns the outputs as arrays."""
    data = b"".join(np.ascontiguousarray(x, dtype=NUMPY_DTYPES[t.dtype]).tobytes()
                    for x, t in zip(inputs, gen.inputs, strict=True))
    proc = subprocess.run([str(exe)], input=data, capture_output=True, timeout=120)
    if proc.returncode != 0:
        raise EmitError(f"{exe} exited with {proc.returncode}: {proc.stderr[-2000:]!r}")
    outs, pos = [], 0
    for t in gen.outputs:
        raw = proc.stdout[pos:pos + t.size_bytes]
        pos += t.size_bytes
        outs.append(np.frombuffer(raw, dtype=NUMPY_DTYPES[t.dtype]).reshape(t.shape))
    return outs


def time_ns(exe: Path, gen: Generated, inputs: Sequence[np.ndarray], iters: int) -> float:
    """Nanoseconds per inference over ``iters`` runs."""
    data = b"".join(np.ascontiguousarray(x, dtype=NUMPY_DTYPES[t.dtype]).tobytes()
                    for x, t in zip(inputs, gen.inputs, strict=True))
    proc = subprocess.run([str(exe), "--time", str(iters)], input=data, capture_output=True,
                          timeout=600)
    if proc.returncode != 0:
        raise EmitError(f"{exe} exited with {proc.returncode}")
    return float(proc.stdout.decode().strip())

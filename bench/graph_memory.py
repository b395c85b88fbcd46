#!/usr/bin/env python3
"""RAM of graph-executor models lowered to static C, beside TVM's graph executor's, per archive.

Method: for each graph archive (the corpus of ``tests/tvm_graph_corpus.py``, built in a temporary
folder, and any MLF archives given on the command line) ``src/graph_model.c`` is rendered as
``generate`` renders it and compiled for a Cortex-M4 (``arm-none-eabi-gcc -Os -std=c99``); its
RAM is what the object's ``.bss`` and ``.data`` hold (``arm-none-eabi-size -A``: the storage
pool and the DLTensors bound at run time), its flash ``.text`` and ``.rodata`` (the calls, the
const tables, the parameters). The estimate ``graph_lowering.memory()`` gives (what ``info``
shows) is printed beside the measurement.

Baseline, from the same archive in the same run: what TVM's graph executor allocates for it
(``src/runtime/graph_executor/graph_executor.cc`` and ``src/runtime/crt/graph_executor/
graph_executor.c`` ``SetupStorage``: one buffer per storage id, the largest entry rounded to 4
bytes; the JSON it parses; the params blob ``TVMGraphExecutor_LoadParams`` reads), not counting
its node tables, which would only add to it.

Usage: ``python bench/graph_memory.py [archive.tar ...]``
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from tvm_graph_corpus import GRAPH_CORPUS, build_graph_archive  # noqa: E402

from project_api.archive.mlf import open_mlf  # noqa: E402
from project_api.template import glue, graph_lowering, quoting  # noqa: E402

CC = "arm-none-eabi-gcc"
FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-Os", "-std=c99", "-Wall", "-Wextra", "-Werror",
         "-ffunction-sections", "-fdata-sections", "-c"]


def sections(obj: Path) -> dict[str, int]:
    out = subprocess.run(["arm-none-eabi-size", "-A", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    sizes: dict[str, int] = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[0].startswith(".") and fields[1].isdigit():
            kind = fields[0].split(".")[1]
            sizes[kind] = sizes.get(kind, 0) + int(fields[1])
    return sizes


def measure(archive: Path, work: Path) -> list[tuple]:
    rows = []
    with open_mlf(archive) as lib:
        for mod in lib.modules.values():
            if mod.graph is None:
                continue
            ctx = glue.module_context(mod, "bench")
            src = work / f"{archive.stem}-{mod.name}.c"
            src.write_text(graph_lowering.render(quoting.environment(), [ctx]) or "")
            obj = src.with_suffix(".o")
            subprocess.run([CC, *FLAGS, str(src), "-I", str(REPO / "crt" / "include"), "-o",
                            str(obj)], check=True)
            s = sections(obj)
            est = graph_lowering.memory(mod)
            rows.append((f"{archive.stem}:{mod.name}", s.get("bss", 0) + s.get("data", 0),
                         est.lowered_ram, s.get("text", 0) + s.get("rodata", 0),
                         est.executor_storage, est.executor_json, est.executor_params,
                         est.executor_ram))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archives", nargs="*", type=Path, help="more MLF archives to measure")
    args = parser.parse_args()
    if shutil.which(CC) is None:
        print(f"{CC} is not installed", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        archives = [build_graph_archive(k, work).path for k in GRAPH_CORPUS] + args.archives
        rows = [row for a in archives for row in measure(a, work)]
    print("| archive | RAM measured | RAM estimated | flash | TVM storage | JSON | params | "
          "TVM's graph executor | ratio |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, ram, est, flash, storage, json_bytes, params, tvm in rows:
        print(f"| `{name}` | {ram} | {est} | {flash} | {storage} | {json_bytes} | {params} | "
              f"{tvm} | {tvm / max(ram, 1):.1f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

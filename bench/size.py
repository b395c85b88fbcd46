#!/usr/bin/env python3
"""Code size of the C runtime + RPC server on a Cortex-M4 (-Os), as linked into firmware.

Method: the sources of the ``runtime`` and ``backend`` libraries of ``crt/libraries.txt`` (RPC
server included) and the page allocator are compiled
with ``arm-none-eabi-gcc -mcpu=cortex-m4 -mthumb -mfloat-abi=hard -mfpu=fpv4-sp-d16 -Os
-ffunction-sections -fdata-sections`` and linked with ``--gc-sections`` (newlib-nano, nosys)
against a minimal bare-metal main that calls ``MicroTVMRpcServerInit`` and feeds
``MicroTVMRpcServerLoop`` from a UART register, plus a minimal platform (page allocator over a
static pool, register-backed timer and RNG) and no model. What the linker kept is read from its
map file and attributed per input object, so the figure is the runtime's own share of the image:
``.text`` (code), ``.rodata`` and ``.bss``/``.data`` of the crt objects only. The bench's main and
platform and the C library are listed separately, and the whole image is shown for context.

Baseline in the same run: the same objects linked without ``--gc-sections`` (what an image pays
without section garbage collection). Reference (not reproducible here without TVM's sources):
microTVM v0.15's runtime + RPC server at about 15.2 KB ``.text`` for a Cortex-M4 at -Os, the
figure issue #3 gives. Target: <= 12 KB ``.text``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from project_api.archive.crt_manifest import read_manifest

REPO = Path(__file__).resolve().parent.parent
CRT = REPO / "crt"

CC = "arm-none-eabi-gcc"
CPU_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
CFLAGS = ["-std=c99", "-Os", "-ffunction-sections", "-fdata-sections", "-Wall", "-Wextra"]
REFERENCE_TEXT_BYTES = 15.2 * 1024
TARGET_TEXT_BYTES = 12 * 1024

MAIN_C = r"""
#include <stdarg.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>

#include <tvm/runtime/crt/aot_model.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/page_allocator.h>
#include <tvm/runtime/crt/platform.h>

#define UART_DATA (*(volatile uint32_t*)0x40004404u)
#define UART_STATUS (*(volatile uint32_t*)0x40004400u)
#define CYCLE_COUNTER (*(volatile uint32_t*)0xE0001004u)

static uint8_t g_pool[16384] __attribute__((aligned(8)));
static MemoryManagerInterface* g_memory;
static uint32_t g_timer_start;
static int g_timer_running;

void TVMPlatformAbort(tvm_crt_error_t error_code) {
  (void)error_code;
  for (;;) {
  }
}

size_t TVMPlatformFormatMessage(char* out, size_t size, const char* fmt, va_list args) {
  int n = vsnprintf(out, size, fmt, args);
  return n < 0 ? 0 : ((size_t)n >= size ? size - 1 : (size_t)n);
}

tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  return g_memory->Allocate(g_memory, num_bytes, dev, out_ptr);
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  return g_memory->Free(g_memory, ptr, dev);
}

tvm_crt_error_t TVMPlatformTimerStart(void) {
  if (g_timer_running) return kTvmErrorPlatformTimerBadState;
  g_timer_running = 1;
  g_timer_start = CYCLE_COUNTER;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformTimerStop(double* elapsed_time_seconds) {
  if (!g_timer_running) return kTvmErrorPlatformTimerBadState;
  g_timer_running = 0;
  *elapsed_time_seconds = (double)(CYCLE_COUNTER - g_timer_start) / 64e6;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t num_bytes) {
  for (size_t i = 0; i < num_bytes; i++) buffer[i] = (uint8_t)(CYCLE_COUNTER * 2654435761u >> 24);
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformBeforeMeasurement(void) { return kTvmErrorNoError; }
tvm_crt_error_t TVMPlatformAfterMeasurement(void) { return kTvmErrorNoError; }
tvm_crt_error_t TVMCrtDevice_Open(DLDevice device) { (void)device; return kTvmErrorNoError; }
tvm_crt_error_t TVMCrtDevice_Activate(DLDevice device) { (void)device; return kTvmErrorNoError; }
tvm_crt_error_t TVMCrtDevice_Deactivate(DLDevice device) { (void)device; return kTvmErrorNoError; }
tvm_crt_error_t TVMCrtDevice_Close(DLDevice device) { (void)device; return kTvmErrorNoError; }
tvm_crt_error_t TVMPlatformInitialize(void) {
  return PageMemoryManagerCreate(&g_memory, g_pool, sizeof(g_pool), 8);
}

const TVMCrtAotModel* TVMCrtAotModel_Lookup(const char* module_name) {
  (void)module_name;
  return NULL;
}

static ptrdiff_t uart_write(void* context, const uint8_t* data, size_t num_bytes) {
  (void)context;
  for (size_t i = 0; i < num_bytes; i++) {
    while ((UART_STATUS & 0x80u) == 0u) {
    }
    UART_DATA = data[i];
  }
  return (ptrdiff_t)num_bytes;
}

int main(void) {
  TVMPlatformInitialize();
  microtvm_rpc_server_t server = MicroTVMRpcServerInit(uart_write, NULL);
  for (;;) {
    uint8_t byte;
    uint8_t* data = &byte;
    size_t size = 1;
    while ((UART_STATUS & 0x20u) == 0u) {
    }
    byte = (uint8_t)UART_DATA;
    while (size > 0) {
      if (MicroTVMRpcServerLoop(server, &data, &size) == kTvmErrorPlatformShutdown) return 0;
    }
  }
}
"""


def _run(cmd: list[str], cwd: Path) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd[:3])} ... failed:\n{proc.stdout}{proc.stderr}")


def _compile(work: Path) -> tuple[list[Path], Path]:
    include = ["-I", str(CRT / "include")]
    objs = []
    manifest = read_manifest(CRT)
    # The bench's own platform (below) stands in for the platform library, except for the page
    # allocator it builds on, which counts as the runtime's as it always did.
    rels = [*manifest.library_sources("runtime"), *manifest.library_sources("backend"),
            "src/memory/page_allocator.c"]
    for src in (CRT / rel for rel in rels):
        obj = work / "obj" / f"{src.parent.name}__{src.stem}.o"
        obj.parent.mkdir(parents=True, exist_ok=True)
        _run([CC, *CPU_FLAGS, *CFLAGS, *include, "-c", str(src), "-o", str(obj)], work)
        objs.append(obj)
    main_c = work / "bench_main.c"
    main_c.write_text(MAIN_C)
    main_o = work / "obj" / "bench_main.o"
    _run([CC, *CPU_FLAGS, *CFLAGS, "-Wno-unused-parameter", *include, "-c", str(main_c),
          "-o", str(main_o)], work)
    return objs, main_o


def _link(work: Path, objs: list[Path], main_o: Path, gc: bool) -> tuple[Path, Path]:
    name = "gc" if gc else "nogc"
    elf, map_file = work / f"{name}.elf", work / f"{name}.map"
    flags = ["--specs=nano.specs", "--specs=nosys.specs", f"-Wl,-Map={map_file}"]
    if gc:
        flags.append("-Wl,--gc-sections")
    _run([CC, *CPU_FLAGS, "-Os", *flags, str(main_o), *map(str, objs), "-o", str(elf)], work)
    return elf, map_file


_KINDS = {".text": "text", ".rodata": "rodata", ".data": "data", ".bss": "bss", "COMMON": "bss"}


def _kind(section: str) -> str | None:
    for prefix, kind in _KINDS.items():
        if section == prefix or section.startswith(prefix + "."):
            return kind
    return None


def parse_map(map_file: Path) -> dict[str, dict[str, int]]:
    """Bytes kept per input file and kind (text, rodata, data, bss), from a GNU ld map."""
    text = map_file.read_text(errors="replace")
    start = text.find("Linker script and memory map")
    lines = text[start:].splitlines()
    sizes: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    entry = re.compile(r"^ (\S+)\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*)$")
    i = 0
    while i < len(lines):
        line = lines[i]
        m = entry.match(line)
        if m is None and re.match(r"^ (\.\S+|COMMON)\s*$", line) and i + 1 < len(lines):
            joined = line.rstrip() + " " + lines[i + 1].strip()
            m = entry.match(joined)
            if m:
                i += 1
        if m:
            section, size, origin = m.group(1), int(m.group(3), 16), m.group(4).strip()
            kind = _kind(section)
            if kind and size:
                sizes[origin][kind] += size
        i += 1
    return sizes


def _summarise(sizes: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    groups: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for origin, kinds in sizes.items():
        base = Path(origin.split("(")[0]).name
        if base == "bench_main.o":
            group = "bench main + platform"
        elif "/obj/" in origin or base.endswith(".o") and "__" in base:
            group = "crt: " + base.split("__")[0]
        else:
            group = "C library and start-up"
        for kind, n in kinds.items():
            groups[group][kind] += n
    return groups


def _crt_total(groups: dict[str, dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = defaultdict(int)
    for group, kinds in groups.items():
        if group.startswith("crt: "):
            for kind, n in kinds.items():
                total[kind] += n
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the build directory")
    args = parser.parse_args(argv)
    if shutil.which(CC) is None:
        print(f"error: {CC} is not installed; install gcc-arm-none-eabi and libnewlib-arm-none-eabi")
        return 1
    work = Path(tempfile.mkdtemp(prefix="project-api-bench-size-"))
    try:
        objs, main_o = _compile(work)
        _, gc_map = _link(work, objs, main_o, gc=True)
        _, nogc_map = _link(work, objs, main_o, gc=False)
        groups = _summarise(parse_map(gc_map))
        crt = _crt_total(groups)
        crt_nogc = _crt_total(_summarise(parse_map(nogc_map)))
        print("C runtime + RPC server on Cortex-M4 (arm-none-eabi-gcc -Os, -ffunction-sections "
              "-fdata-sections, linked with --gc-sections against a minimal main calling "
              "MicroTVMRpcServerInit/Loop; bytes the linker kept, per input object, from its map)")
        print(f"  {'part':34} {'.text':>7} {'.rodata':>8} {'.data':>6} {'.bss':>7}")
        for group in sorted(groups):
            k = groups[group]
            print(f"  {group:34} {k['text']:7d} {k['rodata']:8d} {k['data']:6d} {k['bss']:7d}")
        print(f"  {'crt total (runtime + RPC server)':34} {crt['text']:7d} {crt['rodata']:8d} "
              f"{crt['data']:6d} {crt['bss']:7d}")
        text_kb = crt["text"] / 1024
        print(f"\nours:      .text {text_kb:.1f} KB ({crt['text']} B; .rodata {crt['rodata']} B more), "
              f".bss {crt['bss'] / 1024:.1f} KB")
        print(f"reference: .text ~{REFERENCE_TEXT_BYTES / 1024:.1f} KB (microTVM v0.15 runtime + RPC "
              "server, Cortex-M4 -Os; figure from issue #3, not measured here)")
        print(f"baseline, same objects without --gc-sections: .text {crt_nogc['text'] / 1024:.1f} KB")
        verdict = "met" if crt["text"] <= TARGET_TEXT_BYTES else "MISSED"
        print(f"target:    .text <= {TARGET_TEXT_BYTES / 1024:.0f} KB  [{verdict}]")
        if args.keep:
            print(f"build kept in {work}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Profile builds: the emitted C times every operator on the device (``emit --profile``, or
``-o profile=true`` at generate time, :mod:`.profile`), and the record it reports.

Here, in the template library, because both the emitter (:mod:`project_api.emit.profile`) and
a template generating a project instrument the C, and the host reads the record.

The code generator calls ``TVMGEN_OP_HOOK(node)`` before each operator's kernel and
``TVMGEN_OP_HOOK(-1)`` at the end of a run. A profile build defines it, at the top of
``<name>_lib0.c``, as a call to one small function that reads the port's free-running cycle
counter (``TVMCrtPlatform_CycleCount`` and ``TVMCrtPlatform_CycleFrequencyHz`` of
``tvm/runtime/crt/platform.h``, which every port defines for the measurement timer) and charges
the ticks since the previous hook to the operator that ran in between. The table of the last run stays in static storage;
``tvmgen_<name>_profile_read(out, size)`` writes it as one record (:data:`RECORD`) that the
model glue answers to the host's ``project_api.tools.profile`` RPC call, and that standalone firmware
prints in hex. Nothing is allocated; the outputs are those of the plain build, bit for bit.

**Overhead.** Each hook reads the counter twice: once to close the previous operator, once (after
its bookkeeping) to open the next, so what falls inside an operator's interval is only the
call and return of the hook around one counter read. ``profile_read`` measures that
(``overhead_ticks``: the least of eight back-to-back hook pairs with no operator between) at
every read, and the host subtracts it from each operator.

The record, little-endian whatever the device (written byte by byte)::

    u32 version (1)       u32 entries
    u64 ticks per second  u64 overhead ticks per operator  u64 total ticks of the last run
    u64 runs since boot
    entries x (u32 node, u32 reserved 0, u64 ticks)   in execution order
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

__all__ = ["RECORD", "ProfileRecord", "hook_nodes", "instrument_sources", "is_instrumented",
           "parse_record", "read_function", "record_bytes"]

#: ``struct`` layouts of the record's header and of each entry.
RECORD = ("<IIQQQQ", "<IIQ")
RECORD_VERSION = 1
#: Back-to-back hook pairs measured for the overhead (the least is kept).
OVERHEAD_SAMPLES = 8


@dataclass(frozen=True)
class ProfileRecord:
    """One read of a profile build's table."""

    ticks_per_second: int
    overhead_ticks: int  #: ticks of the hooks inside each operator's interval
    total_ticks: int  #: the last run, first hook to last
    runs: int  #: runs completed since boot
    ticks: tuple[tuple[int, int], ...]  #: (node, ticks) per operator, in execution order

    def seconds(self, ticks: float) -> float:
        return ticks / self.ticks_per_second if self.ticks_per_second else float("nan")


def record_bytes(entries: int) -> int:
    """Bytes of a record of ``entries`` operators."""
    return struct.calcsize(RECORD[0]) + entries * struct.calcsize(RECORD[1])


def read_function(name: str) -> str:
    """The C function a profile build of module ``name`` exports."""
    return f"tvmgen_{name}_profile_read"


def parse_record(raw: bytes) -> ProfileRecord:
    """Decode a record (:data:`RECORD`); ValueError naming what is wrong."""
    head, entry = struct.Struct(RECORD[0]), struct.Struct(RECORD[1])
    if len(raw) < head.size:
        raise ValueError(f"a profile record has at least {head.size} bytes, got {len(raw)}")
    version, entries, hz, overhead, total, runs = head.unpack_from(raw, 0)
    if version != RECORD_VERSION:
        raise ValueError(f"profile record version {version}; this project-api reads version "
                         f"{RECORD_VERSION}: regenerate the project with it")
    want = head.size + entries * entry.size
    if len(raw) != want:
        raise ValueError(f"a profile record of {entries} entries has {want} bytes, got {len(raw)}")
    ticks = tuple((node, t) for node, _, t in
                  (entry.unpack_from(raw, head.size + i * entry.size) for i in range(entries)))
    return ProfileRecord(hz, overhead, total, runs, ticks)


def _source(n: str, nodes: list[int]) -> str:
    if not nodes:
        raise ValueError(f"module {n} has no operator with code to profile")
    slots = max(nodes) + 2  # a slot per node index, and the calibration slot
    cal = slots - 1
    p = f"tvmgen_{n}_prof"
    node_list = ", ".join(map(str, nodes))
    return f"""/* ---- profile build (project-api emit --profile) ----
 * TVMGEN_OP_HOOK(node) runs before each operator and with -1 after the last: it reads the
 * port's cycle counter (TVMCrtPlatform_CycleCount) and charges the ticks since the previous
 * hook to the operator that ran in between. {read_function(n)}() returns the table of the
 * last run. */
#include <tvm/runtime/crt/platform.h>

int32_t {read_function(n)}(uint8_t* out, uint32_t size);

static const uint32_t {p}_nodes[{len(nodes)}] = {{{node_list}}};
static uint64_t {p}_ticks[{slots}];
static uint64_t {p}_last;
static uint64_t {p}_begin;
static uint64_t {p}_total;
static uint64_t {p}_runs;
static int32_t {p}_current = -1;

static __attribute__((noinline)) void {p}_hook(int32_t node) {{
  uint64_t now = 0;
  int32_t i;
  (void)TVMCrtPlatform_CycleCount(&now);
  if ({p}_current >= 0) {{
    {p}_ticks[{p}_current] += now - {p}_last;
  }}
  if (node == {nodes[0]}) {{ /* a run starts: forget the last one */
    for (i = 0; i < {cal}; ++i) {{
      {p}_ticks[i] = 0;
    }}
    {p}_begin = now;
  }}
  if (node == -1) {{ /* the end of a run */
    {p}_total = now - {p}_begin;
    ++{p}_runs;
  }}
  {p}_current = node >= 0 ? node : -1;
  (void)TVMCrtPlatform_CycleCount(&{p}_last);
}}

#define TVMGEN_OP_HOOK(node) {p}_hook(node)

static void {p}_put(uint8_t* out, uint32_t* at, uint64_t value, int bytes) {{
  int b;
  for (b = 0; b < bytes; ++b) {{
    out[(*at)++] = (uint8_t)(value >> (8 * b));
  }}
}}

int32_t {read_function(n)}(uint8_t* out, uint32_t size) {{
  const uint32_t need = {record_bytes(len(nodes))}u;
  uint64_t overhead = UINT64_MAX;
  uint32_t at = 0;
  int32_t i;
  if (out == 0 || size < need) {{
    return (int32_t)need;
  }}
  for (i = 0; i < {OVERHEAD_SAMPLES}; ++i) {{ /* an empty operator between two hooks */
    {p}_ticks[{cal}] = 0;
    {p}_hook({cal});
    {p}_hook(-2);
    if ({p}_ticks[{cal}] < overhead) {{
      overhead = {p}_ticks[{cal}];
    }}
  }}
  {p}_put(out, &at, {RECORD_VERSION}u, 4);
  {p}_put(out, &at, {len(nodes)}u, 4);
  {p}_put(out, &at, TVMCrtPlatform_CycleFrequencyHz(), 8);
  {p}_put(out, &at, overhead, 8);
  {p}_put(out, &at, {p}_total, 8);
  {p}_put(out, &at, {p}_runs, 8);
  for (i = 0; i < {len(nodes)}; ++i) {{
    {p}_put(out, &at, {p}_nodes[i], 4);
    {p}_put(out, &at, 0u, 4);
    {p}_put(out, &at, {p}_ticks[{p}_nodes[i]], 8);
  }}
  return (int32_t)at;
}}
"""


def _declaration(name: str) -> str:
    return (f"/*!\n * \\brief Profile build: writes the operator times of the last run into out "
            f"(see project_api/emit/profile.py);\n * returns the bytes written, or the bytes "
            f"needed when size is too small.\n */\n"
            f"int32_t {read_function(name)}(uint8_t* out, uint32_t size);\n")


_HOOK = re.compile(r"^\s*TVMGEN_OP_HOOK\((\d+)\);", re.M)


def hook_nodes(source: str, name: str) -> list[int]:
    """The nodes whose hooks the entry point of module ``name`` calls, in order (none: not C
    of our emitter, or a module without operators)."""
    at = source.find(f"int32_t tvmgen_{name}_run(")
    return [int(m.group(1)) for m in _HOOK.finditer(source, at)] if at >= 0 else []


def is_instrumented(source: str, name: str) -> bool:
    return f"{read_function(name)}(uint8_t* out, uint32_t size) {{" in source


def instrument_sources(name: str, source: str, header: str,
                       nodes: list[int] | None = None) -> tuple[str, str]:
    """The profile build's C and header of module ``name`` from the plain build's (``nodes``:
    the hooked nodes in execution order, read from the C when not given). ValueError naming
    the module when its C is not our emitter's."""
    nodes = hook_nodes(source, name) if nodes is None else nodes
    include = f'#include "tvmgen_{name}.h"\n'
    if include not in source or not nodes:
        raise ValueError(f"module {name!r} has no operator hooks (its C is not project-api "
                         "emit's, or it has no operator with code)")
    source = source.replace(include, include + "\n" + _source(name, nodes), 1)
    anchor = "\n#ifdef __cplusplus\n}\n#endif\n"
    at = header.rfind(anchor)
    if at < 0:
        raise ValueError(f"the header of module {name!r} has no closing extern \"C\" block")
    return source, header[:at] + "\n" + _declaration(name) + header[at:]

"""Build emitted C for an emulated Cortex-M4 and count its instructions on QEMU.

The firmware runs bare-metal on QEMU's ``mps2-an386`` (Cortex-M4F): a vector table and reset
handler of our own, the emitted ``<name>_lib0.c``, the CRT backend library (as
:mod:`.harness` links it on the host) and a ``main`` that feeds one fixed input, runs one
inference and reports over semihosting (``BKPT 0xAB``: ``SYS_WRITE0``, then ``SYS_EXIT``).

Counting instructions: under ``-icount shift=0`` QEMU's virtual clock advances 1 ns per guest
instruction, and the SysTick (clocked by the board's 25 MHz system clock) counts that virtual
time, so one tick is 40 instructions. The firmware measures its own calibration: a ``subs; bne``
loop (exactly ``2 N`` instructions) timed the same way at two ``N``. The slope gives
instructions per tick, the intercept the cost of reading the timer, which is taken off every
measurement. With ``profile=True`` the build also defines ``TVMGEN_OP_HOOK`` so every operator's
instructions are reported. A stateful model (LSTM, SVDF, resource variables) can run a
``sequence`` of input sets after the first, in turn (its state carried from run to run, reset
before run ``reset_at``): every run's outputs are reported (``Result.runs``), the first timed.

Used by ``tests/test_emit_cortex_m.py`` and ``bench/cortex_m.py``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import jinja2
import numpy as np

from ..errors import EmitError
from ..paths import crt_dir
from .codegen import Generated
from .harness import NUMPY_DTYPES, WORKSPACE_SLACK_BYTES, backend_sources

CC = "arm-none-eabi-gcc"
SIZE = "arm-none-eabi-size"
QEMU = "qemu-system-arm"
MACHINE = "mps2-an386"
#: The issue's build: gcc -O2 for a Cortex-M4 with the single-precision FPU, hard-float ABI.
CFLAGS = ("-O2", "-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16")
#: Loop iterations of the two calibration points (``subs; bne``: two instructions each).
CALIBRATION_N = (10_000, 110_000)

#: The harness's C files, rendered as the emitter's kernels are (strict, no autoescaping).
_FIRMWARE_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parent / "firmware")),
    trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined, autoescape=False)

_STARTUP = r"""/* Bare-metal start for QEMU mps2-an386 (Cortex-M4F), semihosting output. */
#include <stdint.h>
#include <string.h>

extern uint32_t __stack_top, __bss_start, __bss_end;
int main(void);
void reset_handler(void);
static void fault_handler(void);

__attribute__((section(".vectors"), used))
static const void* const vectors[16] = {
  &__stack_top, (const void*)reset_handler, (const void*)fault_handler,
  (const void*)fault_handler, (const void*)fault_handler, (const void*)fault_handler,
  (const void*)fault_handler, 0, 0, 0, 0, (const void*)fault_handler, 0, 0,
  (const void*)fault_handler, (const void*)fault_handler,
};

static int semihost(int op, const void* arg) {
  register int r0 __asm__("r0") = op;
  register const void* r1 __asm__("r1") = arg;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
}

void hx_puts(const char* s) { semihost(0x04, s); }

void hx_exit(int code) {
  semihost(0x18, (const void*)(code == 0 ? 0x20026 : 0x20024));
  for (;;) {}
}

static void fault_handler(void) {
  hx_puts("FAULT\n");
  hx_exit(1);
}

void reset_handler(void) {
  volatile uint32_t* cpacr = (volatile uint32_t*)0xE000ED88u;
  *cpacr |= 0xFu << 20; /* CP10, CP11: the FPU */
  __asm__ volatile("dsb\n\tisb" ::: "memory");
  memset(&__bss_start, 0, (size_t)((uint8_t*)&__bss_end - (uint8_t*)&__bss_start));
  hx_exit(main());
}
"""

_LINKER = """ENTRY(reset_handler)
MEMORY {
  CODE (rx) : ORIGIN = 0x00000000, LENGTH = 4M
  RAM (rwx) : ORIGIN = 0x20000000, LENGTH = 4M
}
SECTIONS {
  .text : { KEEP(*(.vectors)) *(.text*) *(.rodata*) . = ALIGN(8); } > CODE
  .ARM.exidx : { *(.ARM.exidx*) } > CODE
  .data : { *(.data*) . = ALIGN(8); } > RAM
  .bss (NOLOAD) : { __bss_start = .; *(.bss*) *(COMMON) . = ALIGN(8); __bss_end = .; } > RAM
  end = .;
  __stack_top = ORIGIN(RAM) + LENGTH(RAM);
}
"""

_HOOK_HEADER = """#ifndef HARNESS_HOOK_H_
#define HARNESS_HOOK_H_
void harness_op_hook(int node);
#define TVMGEN_OP_HOOK(node) harness_op_hook(node)
#endif
"""


@dataclass
class Calibration:
    """What the firmware measured of the timer: ticks of ``2 N`` instructions at two ``N``."""

    points: tuple[tuple[int, int], ...]

    @property
    def instructions_per_tick(self) -> float:
        (n1, t1), (n2, t2) = self.points
        return 2 * (n2 - n1) / (t2 - t1)

    @property
    def overhead_instructions(self) -> float:
        """Instructions the timing itself adds to a measurement (the intercept)."""
        n1, t1 = self.points[0]
        return t1 * self.instructions_per_tick - 2 * n1

    def instructions(self, ticks: int) -> float:
        return ticks * self.instructions_per_tick - self.overhead_instructions

    def line(self) -> str:
        pts = ", ".join(f"{2 * n} instructions in {t} ticks" for n, t in self.points)
        return (f"calibration: subs/bne loop: {pts} -> {self.instructions_per_tick:.3f} "
                f"instructions per tick (SysTick at 25 MHz, -icount shift=0), timing overhead "
                f"{self.overhead_instructions:.0f} instructions")


@dataclass
class Firmware:
    """A built firmware and its sizes."""

    elf: Path
    gen: Generated
    #: Bytes of the emitted module alone by section kind (``text``, ``rodata``, ``data``, ``bss``).
    model_sections: dict[str, int]
    profile: bool = False
    runs: int = 1  #: input sets the firmware runs in turn (the first, then its ``sequence``)


@dataclass
class Result:
    """One inference on QEMU."""

    outputs: list[np.ndarray]
    ticks: int
    calibration: Calibration
    #: Instructions per operator (node index -> instructions) of a profile build.
    per_op: dict[int, float] = field(default_factory=dict)
    #: The outputs of every run, in order (``runs[0]`` is :attr:`outputs`).
    runs: list[list[np.ndarray]] = field(default_factory=list)

    @property
    def instructions(self) -> float:
        return self.calibration.instructions(self.ticks)


def tools_missing() -> list[str]:
    """The tools this harness needs that are not on PATH."""
    return [t for t in (CC, SIZE, QEMU) if shutil.which(t) is None]


def compiler_version() -> str:
    proc = subprocess.run([CC, "--version"], capture_output=True, text=True)
    return proc.stdout.splitlines()[0] if proc.returncode == 0 else "unknown"


def _c_bytes(name: str, data: bytes) -> str:
    body = ", ".join(str(b) for b in data) or "0"
    return (f"static const uint8_t {name}[{max(len(data), 1)}] __attribute__((aligned(16))) = "
            f"{{{body}}};")


def _input_bytes(gen: Generated, values: Sequence[np.ndarray], where: str) -> list[bytes]:
    """The raw bytes of one input set, each checked against the model's input size."""
    out = []
    for k, (t, x) in enumerate(zip(gen.inputs, values, strict=True)):
        data = np.ascontiguousarray(x, dtype=NUMPY_DTYPES[t.dtype]).tobytes()
        if len(data) != t.size_bytes:
            raise EmitError(f"{where}input {k}: {len(data)} bytes, the model takes "
                            f"{t.size_bytes}")
        out.append(data)
    return out


def main_source(gen: Generated, inputs: Sequence[np.ndarray], profile: bool,
                sequence: Sequence[Sequence[np.ndarray]] = (), reset_at: int | None = None
                ) -> str:
    """The firmware ``main`` (``firmware/cortex_m_main.c.j2``): calibration, one timed
    inference, the outputs in hex; then one inference per input set of ``sequence`` (state
    carried; reset before run ``reset_at``), each run's outputs in hex."""
    if reset_at is not None and not gen.state_size_bytes:
        raise EmitError("reset_at: the model keeps no state to reset")
    first = _input_bytes(gen, inputs, "")
    later = [[_c_bytes(f"g_in_run{r}_{k}", data)
              for k, data in enumerate(_input_bytes(gen, values, f"run {r}, "))]
             for r, values in enumerate(sequence, 1)]
    nodes = [k.op.index for k in gen.kernels if not k.alias]
    return _FIRMWARE_ENV.get_template("cortex_m_main.c.j2").render(
        name=gen.name, workspace=gen.workspace_size_bytes + WORKSPACE_SLACK_BYTES,
        inputs=[{"init": _c_bytes(f"g_in_init{k}", data), "size": t.size_bytes,
                 "room": max(t.size_bytes, 1)}
                for k, (t, data) in enumerate(zip(gen.inputs, first, strict=True))],
        outputs=[{"size": t.size_bytes, "room": max(t.size_bytes, 1)} for t in gen.outputs],
        later=later, profile=profile, hooks=len(nodes) + 2, calibration=CALIBRATION_N,
        reset_at=reset_at)


def _run(cmd: list[str], what: str) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise EmitError(f"{what} failed:\n{' '.join(cmd)}\n{proc.stderr[-4000:]}")
    return proc.stdout


def section_sizes(obj: Path) -> dict[str, int]:
    """Bytes of an object file by section kind, from ``arm-none-eabi-size -A``."""
    out = _run([SIZE, "-A", str(obj)], "reading section sizes")
    sizes = {"text": 0, "rodata": 0, "data": 0, "bss": 0}
    for line in out.splitlines():
        m = re.match(r"^\.(text|rodata|data|bss)\S*\s+(\d+)", line)
        if m:
            sizes[m.group(1)] += int(m.group(2))
    return sizes


def build(gen: Generated, inputs: Sequence[np.ndarray], workdir: Path, *,
          profile: bool = False, cflags: Sequence[str] = CFLAGS,
          sequence: Sequence[Sequence[np.ndarray]] = (),
          reset_at: int | None = None) -> Firmware:
    """Write and compile the firmware for one inference of ``gen`` on ``inputs``, then one per
    input set of ``sequence`` (state carried; ``reset_at``: reset before that run)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / f"tvmgen_{gen.name}.h").write_text(gen.header)
    lib = workdir / f"{gen.name}_lib0.c"
    lib.write_text(gen.source)
    (workdir / "startup.c").write_text(_STARTUP)
    (workdir / "main.c").write_text(main_source(gen, inputs, profile, sequence, reset_at))
    (workdir / "link.ld").write_text(_LINKER)
    base = [CC, "-std=c99", "-Wall", "-Wextra", "-Werror", *cflags, "-ffunction-sections",
            "-fdata-sections", f"-I{workdir}", f"-I{crt_dir() / 'include'}"]
    hook: list[str] = []
    if profile:
        (workdir / "harness_hook.h").write_text(_HOOK_HEADER)
        hook = ["-include", str(workdir / "harness_hook.h")]
    obj = workdir / f"{gen.name}_lib0.o"
    _run([*base, *hook, "-c", str(lib), "-o", str(obj)], "compiling the emitted C for Cortex-M")
    sections = section_sizes(obj)
    elf = workdir / f"{gen.name}.elf"
    _run([*base, "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs",
          f"-T{workdir / 'link.ld'}", "-Wl,--gc-sections", str(obj), str(workdir / "startup.c"),
          str(workdir / "main.c"), *[str(s) for s in backend_sources()], "-lm", "-o", str(elf)],
         "linking the Cortex-M firmware")
    return Firmware(elf, gen, sections, profile, 1 + len(sequence))


def run(fw: Firmware, timeout: float = 300.0) -> Result:
    """Run the firmware once on QEMU ``mps2-an386`` with ``-icount shift=0``."""
    cmd = [QEMU, "-M", MACHINE, "-cpu", "cortex-m4", "-nographic", "-monitor", "none",
           "-serial", "none", "-icount", "shift=0", "-semihosting-config",
           "enable=on,target=native", "-kernel", str(fw.elf)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise EmitError(f"QEMU did not finish within {timeout:.0f} s: {' '.join(cmd)}") from exc
    text = proc.stdout + proc.stderr
    if proc.returncode != 0 or "done" not in text:
        raise EmitError(f"the firmware failed (QEMU exit {proc.returncode}):\n{text[-2000:]}"
                        f"\n{proc.stderr[-2000:]}")
    cal = tuple((int(m.group(1)), int(m.group(2)))
                for m in re.finditer(r"^cal (\d+) (\d+)$", text, re.M))
    calibration = Calibration(cal)
    ticks = int(re.search(r"^ticks (\d+)$", text, re.M).group(1))
    runs = []
    for r in range(fw.runs):
        outs = []
        tag = "" if r == 0 else f"@{r}"
        for k, t in enumerate(fw.gen.outputs):
            m = re.search(rf"^out{k}{tag} ([0-9a-f]*)$", text, re.M)
            if m is None:
                raise EmitError(f"output {k} of run {r} missing from the firmware's report")
            raw = bytes.fromhex(m.group(1))
            if len(raw) != t.size_bytes:
                raise EmitError(f"output {k}: {len(raw)} bytes reported, {t.size_bytes} "
                                "expected")
            outs.append(np.frombuffer(raw, dtype=NUMPY_DTYPES[t.dtype]).reshape(t.shape))
        runs.append(outs)
    per_op: dict[int, float] = {}
    ipt = calibration.instructions_per_tick
    for m in re.finditer(r"^node (\d+)\noptick (\d+)$", text, re.M):
        per_op[int(m.group(1))] = int(m.group(2)) * ipt
    return Result(runs[0], ticks, calibration, per_op, runs)

"""Build emitted C for an emulated Cortex-M core and count its instructions on QEMU.

The firmware runs bare-metal on the QEMU machine of its core (:mod:`.machines`: ``microbit``
M0, ``mps2-an385`` M3, ``mps2-an386`` M4, ``mps2-an500`` M7, ``mps2-an505`` M33, ``mps3-an547``
M55; start-up and linker script generated from the machine's data): the emitted
``<name>_lib0.c``, the CRT backend library (as :mod:`.harness` links it on the host) and a
``main`` that feeds one fixed input, runs one inference and prints on the machine's UART, then
exits through semihosting (``SYS_EXIT``).

Counting instructions: under ``-icount shift=0`` QEMU's virtual clock advances 1 ns per guest
instruction, and the SysTick (on the machine's processor clock, 25 MHz on the MPS2 boards: 40
instructions a tick) counts that virtual time. The firmware measures its own calibration: a ``subs; bne``
loop (exactly ``2 N`` instructions) timed the same way at two ``N``. The slope gives
instructions per tick, the intercept the cost of reading the timer, which is taken off every
measurement. With ``profile=True`` the build also defines ``TVMGEN_OP_HOOK`` so every operator's
instructions are reported. A stateful model (LSTM, SVDF, resource variables) can run a
``sequence`` of input sets after the first, in turn (its state carried from run to run, reset
before run ``reset_at``): every run's outputs are reported (``Result.runs``), the first timed.

Used by ``tests/emit/test_emit_cortex_m.py`` and ``bench/cortex_m.py``.
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

from project_api.system.paths import crt_dir

from ..errors import EmitError
from .codegen import Generated
from .harness import NUMPY_DTYPES, WORKSPACE_SLACK_BYTES, backend_sources
from .machines import Machine, linker_script, machine, startup_source

CC = "arm-none-eabi-gcc"
SIZE = "arm-none-eabi-size"
QEMU = "qemu-system-arm"
#: The default core (issue 22's): QEMU ``mps2-an386``, Cortex-M4F.
DEFAULT_CORE = "cortex-m4"
MACHINE = machine(DEFAULT_CORE).name
OPT = ("-O2",)
#: The issue's build: gcc -O2 for a Cortex-M4 with the single-precision FPU, hard-float ABI.
CFLAGS = (*OPT, *machine(DEFAULT_CORE).cflags)
#: Loop iterations of the two calibration points (``subs; bne``: two instructions each).
CALIBRATION_N = (10_000, 110_000)

#: The harness's C files, rendered as the emitter's kernels are (strict, no autoescaping).
_FIRMWARE_ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(Path(__file__).resolve().parent / "firmware")),
    trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined, autoescape=False)

_HOOK_HEADER = """#ifndef HARNESS_HOOK_{name}_H_
#define HARNESS_HOOK_{name}_H_
void harness_op_hook_{name}(int node);
#define TVMGEN_OP_HOOK(node) harness_op_hook_{name}(node)
#endif
"""


@dataclass
class Calibration:
    """What the firmware measured of the timer: ticks of ``2 N`` instructions at two ``N``."""

    points: tuple[tuple[int, int], ...]
    clock_hz: int = 25_000_000

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
                f"instructions per tick (SysTick at {self.clock_hz / 1e6:g} MHz, -icount shift=0), "
                f"timing overhead "
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
    machine: Machine = field(default_factory=lambda: machine(DEFAULT_CORE))


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


class DoesNotFit(EmitError):
    """The firmware is larger than the machine's flash or RAM."""


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
                sequence: Sequence[Sequence[np.ndarray]] = (), reset_at: int | None = None,
                entry: str = "main") -> str:
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
        reset_at=reset_at, entry=entry)


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


def _compile_flags(mach: Machine, cflags: Sequence[str] | None, workdir: Path) -> list[str]:
    return [CC, "-std=c99", "-Wall", "-Wextra", "-Werror",
            *((*OPT, *mach.cflags) if cflags is None else cflags), "-ffunction-sections",
            "-fdata-sections", f"-I{workdir}", f"-I{crt_dir() / 'include'}"]


def _compile_module(gen: Generated, workdir: Path, base: list[str], profile: bool) -> Path:
    (workdir / f"tvmgen_{gen.name}.h").write_text(gen.header)
    lib = workdir / f"{gen.name}_lib0.c"
    lib.write_text(gen.source)
    hook: list[str] = []
    if profile:
        header = workdir / f"harness_hook_{gen.name}.h"
        header.write_text(_HOOK_HEADER.format(name=gen.name))
        hook = ["-include", str(header)]
    obj = workdir / f"{gen.name}_lib0.o"
    _run([*base, *hook, "-c", str(lib), "-o", str(obj)], "compiling the emitted C for Cortex-M")
    return obj


def _link(mach: Machine, base: list[str], workdir: Path, objs: Sequence[Path],
          mains: Sequence[Path], elf: Path, what: str) -> None:
    (workdir / "startup.c").write_text(startup_source(mach))
    (workdir / "link.ld").write_text(linker_script(mach))
    link = [*base, "-nostartfiles", "--specs=nano.specs", "--specs=nosys.specs",
            f"-T{workdir / 'link.ld'}", "-Wl,--gc-sections", *map(str, objs),
            str(workdir / "startup.c"), *map(str, mains),
            *[str(s) for s in backend_sources()], "-lm", "-o", str(elf)]
    proc = subprocess.run(link, capture_output=True, text=True)
    if proc.returncode == 0:
        return
    over = re.findall(r"region [`']?(\w+)'? overflowed by (\d+) bytes", proc.stderr)
    if over:
        sizes = {"CODE": mach.code.size, "RAM": mach.ram.size}
        raise DoesNotFit(f"{what} does not fit {mach.name} ({mach.core}): " + ", ".join(
            f"{region} {sizes.get(region, 0) // 1024} KiB overflowed by {n} bytes"
            for region, n in over))
    raise EmitError(f"linking the Cortex-M firmware failed:\n{' '.join(link)}\n"
                    f"{proc.stderr[-4000:]}")


def build(gen: Generated, inputs: Sequence[np.ndarray], workdir: Path, *,
          profile: bool = False, cflags: Sequence[str] | None = None,
          sequence: Sequence[Sequence[np.ndarray]] = (),
          reset_at: int | None = None, core: str | Machine = DEFAULT_CORE) -> Firmware:
    """Write and compile the firmware for one inference of ``gen`` on ``inputs``, then one per
    input set of ``sequence`` (state carried; ``reset_at``: reset before that run), for the
    machine of ``core`` (:mod:`.machines`; ``cflags`` default to ``-O2`` and its CPU flags).
    A firmware larger than the machine's memory is a :class:`DoesNotFit`."""
    mach = core if isinstance(core, Machine) else machine(core)
    workdir.mkdir(parents=True, exist_ok=True)
    base = _compile_flags(mach, cflags, workdir)
    obj = _compile_module(gen, workdir, base, profile)
    sections = section_sizes(obj)
    (workdir / "main.c").write_text(main_source(gen, inputs, profile, sequence, reset_at))
    elf = workdir / f"{gen.name}.elf"
    _link(mach, base, workdir, [obj], [workdir / "main.c"], elf, gen.name)
    return Firmware(elf, gen, sections, profile, 1 + len(sequence), mach)


@dataclass
class Suite:
    """One firmware holding many modules, each run in turn on its own input in one boot."""

    elf: Path
    firmwares: list[Firmware]
    machine: Machine


def build_suite(cases: Sequence[tuple[Generated, Sequence[np.ndarray]]], workdir: Path, *,
                core: str | Machine = DEFAULT_CORE, profile: bool = False,
                cflags: Sequence[str] | None = None) -> Suite:
    """One firmware for many modules (distinct names), each timed on its input in turn: one
    build and one QEMU boot for all (:func:`run_suite`)."""
    mach = core if isinstance(core, Machine) else machine(core)
    names = [g.name for g, _ in cases]
    if len(set(names)) != len(names):
        raise EmitError(f"a suite needs distinct module names, got {names}")
    workdir.mkdir(parents=True, exist_ok=True)
    base = _compile_flags(mach, cflags, workdir)
    objs, mains, fws = [], [], []
    calls = []
    for k, (gen, inputs) in enumerate(cases):
        obj = _compile_module(gen, workdir, base, profile)
        main_c = workdir / f"main_{gen.name}.c"
        main_c.write_text(main_source(gen, inputs, profile, entry=f"case_{k}"))
        objs.append(obj)
        mains.append(main_c)
        calls.append(f"  hx_puts(\"case {k}\\n\");\n  if ((rc = case_{k}()) != 0) return rc;")
        fws.append(Firmware(Path(), gen, section_sizes(obj), profile, 1, mach))
    decls = "".join(f"int case_{k}(void);\n" for k in range(len(cases)))
    suite_c = workdir / "suite_main.c"
    suite_c.write_text(f"void hx_puts(const char* s);\n{decls}int main(void);\n"
                       f"int main(void) {{\n  int rc;\n" + "\n".join(calls)
                       + "\n  hx_puts(\"done\\n\");\n  return 0;\n}\n")
    elf = workdir / "suite.elf"
    _link(mach, base, workdir, objs, [*mains, suite_c], elf, f"a suite of {len(cases)} modules")
    for fw in fws:
        fw.elf = elf
    return Suite(elf, fws, mach)


def _qemu(elf: Path, mach: Machine, timeout: float) -> str:
    cmd = mach.qemu_command(str(elf))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise EmitError(f"QEMU did not finish within {timeout:.0f} s: {' '.join(cmd)}") from exc
    text = proc.stdout
    if proc.returncode != 0 or not re.search(r"^done$", text, re.M):
        raise EmitError(f"the firmware failed on {mach.name} (QEMU exit "
                        f"{proc.returncode}):\n{text[-2000:]}\n{proc.stderr[-2000:]}")
    return text


def run_suite(suite: Suite, timeout: float = 300.0) -> list[Result]:
    """Boot the suite once: every module's :class:`Result`, in order."""
    text = _qemu(suite.elf, suite.machine, timeout)
    parts = re.split(r"^case (\d+)\n", text, flags=re.M)
    found = {int(parts[i]): parts[i + 1] for i in range(1, len(parts) - 1, 2)}
    return [_parse(fw, found.get(k, "")) for k, fw in enumerate(suite.firmwares)]


def run(fw: Firmware, timeout: float = 300.0) -> Result:
    """Run the firmware once on its QEMU machine with ``-icount shift=0``."""
    return _parse(fw, _qemu(fw.elf, fw.machine, timeout))


def _parse(fw: Firmware, text: str) -> Result:
    """One module's report (calibration, ticks, outputs, operator times) from the UART text."""
    cal = tuple((int(m.group(1)), int(m.group(2)))
                for m in re.finditer(r"^cal (\d+) (\d+)$", text, re.M))
    calibration = Calibration(cal, fw.machine.clock_hz)
    m_ticks = re.search(r"^ticks (\d+)$", text, re.M)
    if len(cal) != 2 or m_ticks is None:
        raise EmitError(f"{fw.gen.name}: the firmware's report is incomplete:\n{text[-1000:]}")
    ticks = int(m_ticks.group(1))
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

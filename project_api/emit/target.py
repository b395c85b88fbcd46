"""Kernel targets of the emitter: which C each operator gets.

``generic`` is the portable reference path (plain C99, any compiler). ``cortex-m4``,
``cortex-m7`` and ``cortex-m33`` get the DSP-extension kernels: weights re-laid out offline for
the SIMD loops, ACLE intrinsics (``__smlad``, ``__sxtb16``, ``__ssat``, ...) from the compiler's
own ``<arm_acle.h>``, and a portable C definition of each intrinsic (``kernels/arm_dsp.h.j2``)
when the C is compiled for a CPU without the extension, so the same source runs bit-exact on the
host. ``cortex-m55`` gets the Helium (MVE) kernels (scheme ``mve-int8``: the convolutions, depthwise
convolutions and FULLY_CONNECTED as the portable loops with their dot products in MVE intrinsics,
``kernels/mve.h.j2``, ADD and MUL of same-shape inputs four lanes a step, and int8 pooling 16 channels a
vector; every other operator the DSP kernels); ``-mcpu=cortex-m55+nomve`` the DSP
kernels alone. ``cortex-m85`` has the same MVE but no emulator runs it, so it gets the DSP kernels
that ran on the M55's machine, never the MVE ones. ``cortex-m0`` (and M0+, M1, M23, M33 without
DSP) and ``cortex-m3`` have no DSP extension and get the portable kernels.

Every target name is bound to the emulated machine of its core (:mod:`.machines`), and a kernel
scheme (:attr:`Target.scheme`: ``generic``, ``dsp-int8``, ``dsp-int16``, ``mve-int8``) is offered for a core only if
CI runs it there bit-exact with TFLite Micro (:data:`RUN_ON`, ``tests/emit/test_emit_cores.py``); any
other pair is refused.

A target is named directly (``cortex-m4``) or read from a TVM target string or compiler flags
(``c -keys=arm_cpu -mcpu=cortex-m4``, ``-mcpu=cortex-m33+nodsp``).

On a DSP target, ``weights`` picks the weight layout of the convolutions: ``int8`` (the default:
the .tflite's int8 weights, reordered offline so that ``SXTB16`` widens them in registers into
the lanes the inputs are paired in) or ``int16`` (16-bit pairs in flash, no widening at run
time, twice the flash). FULLY_CONNECTED reads each weight once and is always int8.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..errors import EmitError

#: Weight layouts ``emit --weights`` accepts (see the module docstring).
WEIGHT_LAYOUTS = ("int8", "int16")

#: Names ``emit --target`` accepts.
TARGET_NAMES = ("generic", "cortex-m0", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33",
                "cortex-m55", "cortex-m85", "riscv32", "rv32imafc")

#: CPUs with the DSP extension (by default) and the kernel target they use.
_DSP_CPUS = {"cortex-m4": "cortex-m4", "cortex-m7": "cortex-m7", "cortex-m33": "cortex-m33",
             "cortex-m35p": "cortex-m33", "cortex-m55": "cortex-m55", "cortex-m85": "cortex-m85"}
#: Arm CPUs without it and the kernel target they use (the portable kernels).
_PLAIN_CPUS = {"cortex-m0": "cortex-m0", "cortex-m0plus": "cortex-m0", "cortex-m0+": "cortex-m0",
               "cortex-m1": "cortex-m0", "cortex-m23": "cortex-m0", "cortex-m3": "cortex-m3"}

_CORES = ("cortex-m0", "cortex-m3", "cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")
#: (kernel scheme, core) pairs that CI runs bit-exact with TFLite Micro on the core's QEMU
#: machine (``tests/emit/test_emit_cores.py``). Only these are offered.
RUN_ON: frozenset[tuple[str, str]] = frozenset(
    {("generic", c) for c in _CORES}
    | {(s, c) for s in ("dsp-int8", "dsp-int16")
       for c in ("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m55")}
    | {("mve-int8", "cortex-m55")})
#: CPUs with Helium (integer MVE) whose MVE kernels have run on an emulated machine (the M85's
#: has none: it gets the DSP kernels).
_MVE_CPUS = ("cortex-m55",)


@dataclass(frozen=True)
class Target:
    """A kernel target: its name and whether it gets the DSP-extension (and Helium) kernels."""

    name: str
    dsp: bool
    #: The ``-mcpu`` it was read from (None for ``generic``).
    mcpu: str | None = None
    #: Weight layout of the DSP convolution kernels: ``int8`` or ``int16`` (:data:`WEIGHT_LAYOUTS`).
    weights: str = "int8"
    #: Whether the convolutions and FULLY_CONNECTED get the Helium (MVE) kernels.
    mve: bool = False

    @property
    def scheme(self) -> str:
        """The kernel scheme: ``generic``, ``dsp-<weights>`` on a DSP target, ``mve-<weights>``
        on a Helium one."""
        if self.mve:
            return f"mve-{self.weights}"
        return f"dsp-{self.weights}" if self.dsp else "generic"

    @property
    def core(self) -> str | None:
        """The core whose machine runs this target (None for ``generic``: any)."""
        from .machines import CORE_OF_TARGET

        return CORE_OF_TARGET.get(self.name)

    def metadata_target(self) -> str:
        """The TVM-style target string recorded in ``metadata.json``."""
        return "c" if self.mcpu is None else f"c -keys=arm_cpu,cpu -mcpu={self.mcpu}"


GENERIC = Target("generic", False)


# --- RISC-V (riscv32): the portable kernels, recorded as built for an RV32 core ---------------

#: ``--target`` names of RV32 cores and the ISA each stands for (``riscv32``: the rv32imac
#: baseline; ``rv32imafc``: with the F extension, which float kernels then use in hardware).
RISCV32_VARIANTS = {"riscv32": "rv32imac", "rv32imac": "rv32imac", "rv32imafc": "rv32imafc"}


@dataclass(frozen=True)
class Riscv32Target(Target):
    """An RV32 core: the generic kernels (bit-exact on the emulated core, as the riscv
    template's tests check), with the ISA recorded in ``metadata.json``."""

    march: str = "rv32imac"

    def metadata_target(self) -> str:
        abi = "ilp32f" if "f" in self.march[4:] else "ilp32"
        return f"c -keys=riscv,cpu -march={self.march} -mabi={abi}"


def riscv32(isa: str) -> Target | None:
    """The riscv32 target of an ISA or variant name (``rv32imac``, ``riscv32``; None: not one)."""
    march = RISCV32_VARIANTS.get(isa.strip().lower())
    return Riscv32Target("riscv32", False, march=march) if march else None


def with_weights(target: Target, weights: str | None) -> Target:
    """``target`` with weight layout ``weights`` (None keeps its own); an unknown layout is an
    :class:`EmitError` naming the ones there are."""
    if weights is not None and weights not in WEIGHT_LAYOUTS:
        raise EmitError(f"unknown weight layout {weights!r}: use one of {', '.join(WEIGHT_LAYOUTS)}")
    return offered(target if weights is None else replace(target, weights=weights))


def offered(target: Target) -> Target:
    """``target`` if its kernel scheme has run on its core (:data:`RUN_ON`), else an
    :class:`EmitError` naming the schemes there are."""
    core = target.core
    if core is None or (target.scheme, core) in RUN_ON:
        return target
    there = sorted(s for s, c in RUN_ON if c == core)
    hint = " (-mcpu=cortex-m55+nomve for the DSP kernels)" if target.mve else ""
    raise EmitError(f"--target {target.name}: the {target.scheme} kernels have never run on "
                    f"{core}; use {' or '.join(there) or '--target generic'}{hint}")


def from_mcpu(mcpu: str) -> Target:
    """The kernel target of a ``-mcpu`` value (``cortex-m4``, ``cortex-m33+nodsp``, ...)."""
    cpu = mcpu.strip().lower()
    base, *features = cpu.split("+")
    if base in _DSP_CPUS:
        if "nodsp" in features:
            return Target("cortex-m0", False, cpu)
        mve = base in _MVE_CPUS and "nomve" not in features
        return Target(_DSP_CPUS[base], True, cpu, mve=mve)
    if base in _PLAIN_CPUS:
        return Target(_PLAIN_CPUS[base], False, cpu)
    raise EmitError(f"-mcpu={mcpu}: no kernel target for this CPU (known: "
                    f"{', '.join(sorted([*_DSP_CPUS, *_PLAIN_CPUS]))}); use --target generic")


def resolve(spec: str | Target | None) -> Target:
    """A :class:`Target` from a name (``cortex-m4``), a TVM target string or ``-mcpu=`` flags.

    ``None`` and ``"generic"`` are the portable path; an empty string is refused (it names
    nothing, and silently taking the portable path would hide a missing value).
    """
    if isinstance(spec, Target):
        return spec
    if spec is None:
        return GENERIC
    text = spec.strip()
    if not text:
        raise EmitError(f"empty target: use one of {', '.join(TARGET_NAMES)} or a target "
                        "string with -mcpu=")
    if text.lower() in ("generic", "c"):
        return GENERIC
    if riscv32(text) is not None:
        return riscv32(text)
    m = re.search(r"-mcpu=([\w.+-]+)", text)
    if m:
        return from_mcpu(m.group(1))
    if text.lower() in TARGET_NAMES:
        return from_mcpu(text)
    raise EmitError(f"unknown target {spec!r}: use one of {', '.join(TARGET_NAMES)} or a "
                    "target string with -mcpu=")


def for_cpu(cpu: str | None) -> Target:
    """The kernel target for a board's CPU (its ``boards.yaml`` ``cpu``): an Arm Cortex-M gets
    its kernels; anything else (``x86``, the host, unknown) the portable path."""
    if not cpu:
        return GENERIC
    if riscv32(cpu) is not None:
        return riscv32(cpu)
    try:
        return from_mcpu(cpu)
    except EmitError:
        return GENERIC

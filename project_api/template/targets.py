"""Which CPU families a model was compiled for, and which built-in templates build for them.

A template's board support is data: a ``boards.yaml`` beside its server lists boards, each with
its ``cpu`` (``cortex-m4``, ``cortex-m7``, ...). :func:`templates_building_for` reads those files,
so a message about a model the current template cannot build names the templates that can.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

_LOG = logging.getLogger(__name__)

_TITLES = {"cortex-m": "Arm Cortex-M", "cortex-a": "Arm Cortex-A", "cortex-r": "Arm Cortex-R",
           "arm": "Arm", "riscv": "RISC-V", "host": "this computer"}
#: Headers that exist only in Arm toolchains or CMSIS: C that includes them builds only for Arm.
_ARM_ONLY_HEADER = re.compile(
    r"^\s*#\s*include\s*[<\"]((?:arm_acle|arm_math|arm_nnsupportfunctions|arm_nnfunctions|"
    r"cmsis_compiler|cmsis_gcc)\.h)[>\"]")
_CONDITIONAL = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)")
#: A condition naming one of these holds only when an Arm compiler builds the file.
_ARM_MACRO = re.compile(r"__ARM_|__arm__|__thumb__|__aarch64__")


def unconditional_arm_header(text: str, emulated: Iterable[str] = ()) -> str | None:
    """The first Arm-only header ``text`` includes outside any ``#if`` on an Arm macro (portable
    C may include ``<arm_acle.h>`` under ``#if defined(__ARM_FEATURE_DSP)`` and still build
    anywhere; TVM's Cortex-M code includes it unconditionally), ``emulated`` headers aside."""
    skip = set(emulated)
    guards: list[bool] = []  # per open #if: does its branch depend on an Arm macro?
    for line in text.splitlines():
        cond = _CONDITIONAL.match(line)
        if cond:
            word, rest = cond.groups()
            if word in ("if", "ifdef", "ifndef"):
                guards.append(bool(_ARM_MACRO.search(rest)))
            elif word == "endif":
                if guards:
                    guards.pop()
            elif guards:  # elif/else: still a branch of an Arm test, or of this elif's own
                guards[-1] = guards[-1] or bool(_ARM_MACRO.search(rest))
            continue
        include = _ARM_ONLY_HEADER.match(line)
        if include and not any(guards) and include.group(1) not in skip:
            return include.group(1)
    return None


def arch_requirement(mod: Any, emulated: Iterable[str] = ()) -> tuple[str, str] | None:
    """``(family, evidence)`` when a module's C builds only for one CPU family, else None.

    Portable C builds anywhere, whatever ``-mcpu`` it was generated for; C that includes an
    Arm-only header (``<arm_acle.h>``, CMSIS) outside an ``#if`` on an Arm macro needs an Arm
    compiler, unless the template supplies that header (``emulated``: the host template's
    portable ``<arm_acle.h>``). The family is the one the archive names
    (:attr:`ModuleInfo.target_family`), else ``arm``.
    """
    for path in getattr(mod, "sources", []):
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        header = unconditional_arm_header(text, emulated)
        if header:
            family = getattr(mod, "target_family", None) or "arm"
            if not family_of(family).startswith(("cortex", "arm")):
                family = "arm"
            evidence = f"{Path(path).name} includes <{header}>"
            named = getattr(mod, "target_evidence", None)
            if named and named != evidence:
                evidence = f"{named}; {evidence}"
            return family, evidence
    return None


def builds(family: str, builds_for: Iterable[str]) -> bool:
    """Whether a template building for ``builds_for`` families can build ``family`` code."""
    return any(family == f or (family == "arm" and f.startswith("cortex")) for f in builds_for)


def family_of(cpu: str) -> str:
    """The family of a CPU name: ``cortex-m4`` -> ``cortex-m``; other names are their own."""
    cpu = cpu.lower()
    for family in ("cortex-m", "cortex-a", "cortex-r"):
        if cpu.startswith(family):
            return family
    if cpu.startswith(("riscv", "rv32", "rv64")):
        return "riscv"
    return cpu


def family_title(family: str) -> str:
    """How messages name a family (``cortex-m`` -> ``Arm Cortex-M``)."""
    return _TITLES.get(family, family)


def templates_building_for(family: str, templates_root: Path | None = None) -> list[str]:
    """Names of the built-in templates with a board of ``family`` in their ``boards.yaml``."""
    from project_api.template.boards import templates_boards

    found = []
    for template, boards in templates_boards(templates_root):
        cpus = [b.get("cpu", "") for b in boards.values() if isinstance(b, dict)]
        if builds(family, {family_of(str(c)) for c in cpus}):
            found.append(template)
    return found


def board_cpu(template_dir: Path, board: str | None) -> str | None:
    """The ``cpu`` of ``board`` in the template's ``boards.yaml`` (None: no such file or board)."""
    from project_api.template.boards import board_entry

    entry = board_entry(template_dir, board)
    return str(entry["cpu"]) if entry and entry.get("cpu") else None


def software_float(modules: Iterable[Any], board: str, entry: Any) -> str | None:
    """A warning when a module computes in float (a float32 input or output) on a board whose
    ``boards.yaml`` entry says it has no FPU (``fpu: false``, or none given for a Cortex-M):
    the float arithmetic then runs in software, many times slower. None otherwise."""
    if not isinstance(entry, dict) or "fpu" not in entry or entry.get("fpu"):
        return None
    floats = [m.name for m in modules
              if any(t.dtype.startswith("float") for t in (*m.inputs, *m.outputs))]
    if not floats:
        return None
    return (f"module {floats[0]!r} computes in floating point, but {board} "
            f"({entry.get('cpu', 'its CPU')}) has no FPU: the float arithmetic runs in software, "
            "many times slower; use an int8 model, or a board with an FPU")

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

from project_api import paths

_LOG = logging.getLogger(__name__)

_TITLES = {"cortex-m": "Arm Cortex-M", "cortex-a": "Arm Cortex-A", "cortex-r": "Arm Cortex-R",
           "arm": "Arm", "riscv": "RISC-V", "host": "this computer"}
#: Headers that exist only in Arm toolchains or CMSIS: C that includes them builds only for Arm.
_ARM_ONLY_HEADER = re.compile(
    r"^\s*#\s*include\s*[<\"]((?:arm_acle|arm_math|arm_nnsupportfunctions|arm_nnfunctions|"
    r"cmsis_compiler|cmsis_gcc)\.h)[>\"]", re.M)


def arch_requirement(mod: Any) -> tuple[str, str] | None:
    """``(family, evidence)`` when a module's C builds only for one CPU family, else None.

    Portable C builds anywhere, whatever ``-mcpu`` it was generated for; C that includes an
    Arm-only header (``<arm_acle.h>``, CMSIS) needs an Arm compiler. The family is the one the
    archive names (:attr:`ModuleInfo.target_family`), else ``arm``.
    """
    for path in getattr(mod, "sources", []):
        try:
            text = Path(path).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        m = _ARM_ONLY_HEADER.search(text)
        if m:
            family = getattr(mod, "target_family", None) or "arm"
            if not family_of(family).startswith(("cortex", "arm")):
                family = "arm"
            evidence = f"{Path(path).name} includes <{m.group(1)}>"
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
    import yaml

    root = templates_root or paths.templates_dir()
    found = []
    for boards in sorted(root.glob("*/boards.yaml")):
        try:
            data = yaml.safe_load(boards.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            _LOG.debug("skipping %s: %s", boards, exc)
            continue
        entries = data.get("boards", data) if isinstance(data, dict) else {}
        cpus = [b.get("cpu", "") for b in entries.values() if isinstance(b, dict)] \
            if isinstance(entries, dict) else []
        if builds(family, {family_of(str(c)) for c in cpus}):
            found.append(boards.parent.name)
    return found

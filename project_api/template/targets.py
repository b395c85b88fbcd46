"""Which CPU families a model was compiled for, and which built-in templates build for them.

A template's board support is data: a ``boards.yaml`` beside its server lists boards, each with
its ``cpu`` (``cortex-m4``, ``cortex-m7``, ...). :func:`templates_building_for` reads those files,
so a message about a model the current template cannot build names the templates that can.
"""

from __future__ import annotations

import logging
from pathlib import Path

from project_api import paths

_LOG = logging.getLogger(__name__)

_TITLES = {"cortex-m": "Arm Cortex-M", "cortex-a": "Arm Cortex-A", "riscv": "RISC-V",
           "host": "this computer"}


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
        if any(family_of(str(c)) == family for c in cpus):
            found.append(boards.parent.name)
    return found

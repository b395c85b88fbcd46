"""Where the bundled C runtime and template projects live.

In a wheel they are packaged under ``project_api/_data``; in a source checkout (editable install)
they sit beside the package at the repository root. ``PROJECT_API_CRT_DIR`` and
``PROJECT_API_TEMPLATES_DIR`` override both.
"""

from __future__ import annotations

import os
from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parents[1]  # project_api/


def _resolve(env_var: str, name: str) -> Path:
    override = os.environ.get(env_var)
    if override:
        return Path(override).resolve()
    packaged = _PACKAGE_DIR / "_data" / name
    if packaged.is_dir():
        return packaged
    return _PACKAGE_DIR.parent / name


def crt_dir() -> Path:
    """The C runtime source tree (``include/``, ``src/``)."""
    return _resolve("PROJECT_API_CRT_DIR", "crt")


def templates_dir() -> Path:
    """The folder holding the built-in template projects (``host``, ``stm32``, ``zephyr``)."""
    return _resolve("PROJECT_API_TEMPLATES_DIR", "templates")


def template_dir(name: str) -> Path:
    """The directory of the built-in template called ``name``."""
    return templates_dir() / name

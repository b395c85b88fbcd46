"""Shared pytest fixtures and helpers.

``require_tool`` is the one place that decides what a missing toolchain means: a skip with the
reason on a user's machine, a failure under ``CI=true`` (CI installs every toolchain, so a missing
one there is a broken set-up, never a reason to test less).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
TESTS_DIR = Path(__file__).resolve().parent

if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))


def in_ci() -> bool:
    """True when running under CI (``CI=true``), where nothing may be skipped for lack of tools."""
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(reason: str) -> None:
    """Skip with ``reason``, or fail under CI."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: required, not skipped)")
    pytest.skip(reason)


def require_tool(name: str) -> str:
    """Return the path of executable ``name``; skip (or fail under CI) if it is not installed."""
    path = shutil.which(name)
    if path is None:
        missing(f"'{name}' is not installed; run 'make setup' (see README) to install the toolchains")
    return path


@contextlib.contextmanager
def path_with_only(bin_dir: Path, tools: tuple[str, ...] = ("make", "sh")) -> Iterator[None]:
    """Run the block with ``PATH`` holding only ``tools`` and ``python3`` (links in ``bin_dir``):
    what a machine without the toolchains (or QEMU) looks like to a template server."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        os.symlink(require_tool(tool), bin_dir / tool)
    os.symlink(sys.executable, bin_dir / "python3")
    saved = os.environ["PATH"]
    os.environ["PATH"] = str(bin_dir)
    try:
        yield
    finally:
        os.environ["PATH"] = saved


def shared_path() -> Path | None:
    """The ``shared`` folder beside the repository (``$PROJECT_API_SHARED`` overrides)."""
    override = os.environ.get("PROJECT_API_SHARED")
    candidates = [Path(override)] if override else []
    candidates.append(REPO_ROOT.parent / "shared")
    for c in candidates:
        if c.is_dir():
            return c
    return None


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    path = shared_path()
    if path is None:
        missing("the shared folder (../shared beside the repository) is not present")
    return path


@pytest.fixture(scope="session")
def models_dir(shared_dir: Path) -> Path:
    path = shared_dir / "models"
    if not path.is_dir():
        missing(f"shared models folder {path} is missing")
    return path

"""Optional extras: which package each optional feature imports, and the one error that names the
extra to install when it is missing.

The base install (``pip install project-api``) runs every verb on the bundled templates, the demo
included. A few features need more, each brought by an extra of ``pyproject.toml``:

* ``reference``: ``tflite-micro`` and ``ai-edge-litert``, the TFLite Micro and LiteRT
  interpreters that ``run --check``, ``validate`` and the demo compare the device with;
* ``labgrid``: the labgrid client, for boards on other machines (``-o labgrid_place``,
  ``validate --places``, ``devices --coordinator``);
* ``plot``: matplotlib, for the pictures of ``analyze --plot`` and ``profile --plot``.

Code that needs one imports it through :func:`require`, which raises :class:`MissingExtraError`
(one line: what needs it, the package, the ``pip install 'project-api[extra]'`` line).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType

from project_api.errors import ProjectAPIError

#: Importable top-level module -> (its distribution on PyPI, the extra that installs it).
MODULES: dict[str, tuple[str, str]] = {
    "tflite_micro": ("tflite-micro", "reference"),
    "ai_edge_litert": ("ai-edge-litert", "reference"),
    "labgrid": ("labgrid", "labgrid"),
    "matplotlib": ("matplotlib", "plot"),
}

#: Each runtime extra and the distributions it brings (``test`` adds the test tools to them all).
EXTRAS: dict[str, tuple[str, ...]] = {
    extra: tuple(dist for dist, e in MODULES.values() if e == extra)
    for extra in dict.fromkeys(e for _, e in MODULES.values())
}


class MissingExtraError(ProjectAPIError, ImportError):
    """An optional package is not installed; the message names the extra that brings it."""

    def __init__(self, message: str, module: str, extra: str) -> None:
        super().__init__(message)
        self.module = module  #: the module that failed to import
        self.extra = extra  #: the extra of project-api that installs it


def install_line(extra: str) -> str:
    """The command that installs ``extra``, quoted for a POSIX shell."""
    return f"pip install 'project-api[{extra}]'"


def missing_message(module: str, purpose: str, broken: ImportError | None = None) -> str:
    """The one-line error for ``purpose`` (e.g. "the TFLite Micro reference") lacking ``module``;
    ``broken``: the package is there but its import failed with this error."""
    dist, extra = MODULES[module.partition(".")[0]]
    if broken is not None:
        why = " ".join(str(broken).split())
        return (f"{purpose} needs the '{dist}' package, which fails to import ({why}); "
                f"reinstall it with: {install_line(extra)}")
    return (f"{purpose} needs the '{dist}' package, which is not installed; "
            f"install it with: {install_line(extra)}")


def require(module: str, purpose: str,
            error: Callable[[str], Exception] | None = None) -> ModuleType:
    """Import and return ``module`` (a dotted name under one of :data:`MODULES`).

    When it cannot be imported, raise :class:`MissingExtraError` naming the extra; ``error``
    builds another exception type from the same message instead (a template server raises a
    ``ServerError``, which crosses the wire)."""
    top = module.partition(".")[0]
    if top not in MODULES:
        raise ValueError(f"{top!r} is not an optional package of project-api")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        name = exc.name or ""
        absent = name == top or name.startswith(top + ".")  # else: a broken install
        message = missing_message(top, purpose, None if absent else exc)
        raise (error(message) if error is not None
               else MissingExtraError(message, top, MODULES[top][1])) from exc

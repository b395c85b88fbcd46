"""Declared project options: what a template accepts, with bounds, checked in one place.

A template declares each option once with :func:`option`; the declaration carries what the wire
format has no room for (a minimum and maximum for integers), while :attr:`DeclaredOption.wire` is
the plain :class:`~project_api.server.ProjectOption` sent in ``server_info_query``. The limits are
also written into the option's help, so ``project-api generate --template T --help`` shows them::

    OPTIONS = [
        option("workspace_size_bytes", "int", default=2 * 1024 * 1024, minimum=4096,
               maximum=1 << 30, optional=["generate_project"], help="The runtime's memory pool."),
    ]
    values = check_declared(OPTIONS, options, "generate_project")   # defaults filled, checked

Our client checks names, types and choices before it calls; :func:`check_declared` repeats those
checks (a microTVM client sends whatever it was given) and adds the bounds. The options a project
was generated with are kept in one file, :data:`OPTIONS_FILE`, read by the template server and by
the client alike.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from project_api import server
from project_api.errors import ServerError

#: The options a generated project was generated with, in the project directory.
OPTIONS_FILE = "project_options.json"

_PY_TYPES = {"bool": (bool,), "int": (int,), "str": (str,)}


@dataclass(frozen=True)
class DeclaredOption:
    """One option a template accepts: its wire form plus the bounds the wire cannot carry."""

    wire: server.ProjectOption
    minimum: int | None = None
    maximum: int | None = None

    @property
    def name(self) -> str:
        return self.wire.name

    @property
    def default(self) -> Any:
        return self.wire.default

    def check(self, value: Any) -> Any:
        """``value`` if it fits this option (None means unset), else ServerError naming the fix."""
        if value is None:
            return None
        kind = self.wire.type
        ok = isinstance(value, _PY_TYPES[kind]) and not (kind == "int" and isinstance(value, bool))
        if not ok:
            raise ServerError(
                message=f"option {self.name} must be {_describe(kind)}; got {value!r}"
            )
        if self.wire.choices and value not in self.wire.choices:
            raise ServerError(
                message=f"option {self.name}={value!r} is not one of "
                f"{', '.join(map(str, self.wire.choices))}; pick one of those"
            )
        if self.minimum is not None and value < self.minimum:
            raise ServerError(message=f"option {self.name}={value} is below its minimum "
                                      f"{self.minimum}; {self._range_hint()}")
        if self.maximum is not None and value > self.maximum:
            raise ServerError(message=f"option {self.name}={value} is above its maximum "
                                      f"{self.maximum}; {self._range_hint()}")
        return value

    def _range_hint(self) -> str:
        low = "" if self.minimum is None else str(self.minimum)
        high = "" if self.maximum is None else str(self.maximum)
        return f"pass -o {self.name}=N with N in {low}..{high}"


def _describe(kind: str) -> str:
    return {"bool": "true or false", "int": "an integer", "str": "a string"}[kind]


def option(
    name: str,
    type: str,
    *,
    help: str,
    default: Any = None,
    choices: Iterable[Any] | None = None,
    minimum: int | None = None,
    maximum: int | None = None,
    required: list[str] | None = None,
    optional: list[str] | None = None,
) -> DeclaredOption:
    """Declare an option; ``minimum``/``maximum`` (ints only) are added to its help text."""
    if (minimum is not None or maximum is not None) and type != "int":
        raise TypeError(f"option {name}: bounds apply to int options only")
    if minimum is not None or maximum is not None:
        low = "" if minimum is None else f"{minimum}"
        high = "" if maximum is None else f"{maximum}"
        help = f"{help} (range {low}..{high})"
    wire = server.ProjectOption(
        name, choices=list(choices) if choices is not None else None, default=default,
        type=type, required=required, optional=optional, help=help,
    )
    return DeclaredOption(wire, minimum, maximum)


def check_declared(
    declared: Iterable[DeclaredOption], options: Mapping[str, Any], method: str | None = None
) -> dict[str, Any]:
    """Every declared option's value (defaults filled in), each checked; unknown names ignored.

    With ``method``, an option that ``method`` requires must have a value.
    """
    values: dict[str, Any] = {}
    for opt in declared:
        value = options.get(opt.name)
        if value is None:
            value = opt.default
        if value is None and method and method in (opt.wire.required or []):
            raise ServerError(message=f"option {opt.name} is required by {method}; "
                                      f"pass -o {opt.name}=<value>")
        values[opt.name] = opt.check(value)
    return values


_DEFINITION_RE = re.compile(r"-[DU][A-Za-z_]\w*(=.*)?")


def compile_definitions(text: str | None, defaults: Mapping[str, Any] | None = None) -> list[str]:
    """The ``-DNAME[=VALUE]``/``-UNAME`` flags of a ``compile_definitions`` option value.

    ``defaults`` are added as ``-DNAME=VALUE`` unless the user's flags name them already.
    Raises ServerError for anything that is not such a flag.
    """
    flags = shlex.split(text or "")
    for flag in flags:
        if not _DEFINITION_RE.fullmatch(flag):
            raise ServerError(
                message=f"compile_definitions: {flag!r} is not a -DNAME[=VALUE] or -UNAME flag; "
                "pass e.g. \"-DFOO=1 -DBAR\""
            )
    named = {re.match(r"-[DU](\w+)", f).group(1) for f in flags}  # type: ignore[union-attr]
    extra = [f"-D{k}={v}" for k, v in (defaults or {}).items() if k not in named]
    return extra + flags


def save_options(project_dir: Path, values: Mapping[str, Any]) -> None:
    """Write ``values`` to the project's :data:`OPTIONS_FILE` (sorted, one per line)."""
    path = Path(project_dir) / OPTIONS_FILE
    path.write_text(json.dumps(dict(values), indent=2, sort_keys=True) + "\n")


def load_options(project_dir: Path, error: Callable[[str], Exception] | None = None) -> dict[str, Any]:
    """The project's saved options; ``{}`` if it has none.

    A corrupt file raises ``error(message)`` (default: a ServerError) naming the file and the fix.
    """
    if error is None:
        def error(message: str) -> Exception:
            return ServerError(message=message)
    path = Path(project_dir) / OPTIONS_FILE
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(
            f"{path} is corrupt ({exc}); regenerate the project, or fix or delete the file"
        ) from None
    if not isinstance(data, dict):
        raise error(f"{path} must hold a JSON object; regenerate the project, or delete the file")
    return data

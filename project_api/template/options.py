"""Declared project options: what a template accepts, with bounds, checked in one place.

A template declares each option once with :func:`option`; the declaration carries what the wire
format has no room for (a minimum and maximum for integers), while :attr:`DeclaredOption.wire` is
the plain :class:`~project_api.api.server.ProjectOption` sent in ``server_info_query``. The limits are
also written into the option's help, so ``project-api generate --template T --help`` shows them::

    OPTIONS = [
        option("workspace_size_bytes", "int", default=2 * 1024 * 1024, minimum=4096,
               maximum=1 << 30, optional=["generate_project"], help="The runtime's memory pool."),
    ]
    values = check_declared(OPTIONS, options, "generate_project")   # defaults filled, checked

The server is the authority: :func:`check_declared` checks names, types, choices and bounds of
whatever a client sends (ours sends only what its user gave; a microTVM client sends the
defaults too), and fills in the defaults. The options a project was generated with are kept in
one file, :data:`OPTIONS_FILE`, read by the template server and by the client alike.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from project_api.api import server
from project_api.errors import OptionValueError, ServerError

#: The options a generated project was generated with, in the project directory.
OPTIONS_FILE = "project_options.json"

_PY_TYPES = {"bool": (bool,), "int": (int,), "str": (str,)}
#: What a debug probe's serial number is made of (``chars`` of a ``serial_number`` option): it
#: reaches OpenOCD's Tcl commands and flash tools' own argument parsers.
SERIAL_NUMBER_CHARS = "A-Za-z0-9._:-"


@dataclass(frozen=True)
class DeclaredOption:
    """One option a template accepts: its wire form plus the bounds the wire cannot carry."""

    wire: server.ProjectOption
    minimum: int | None = None
    maximum: int | None = None
    #: For str options: the characters every value must be made of, e.g. ``A-Za-z0-9._:-``.
    chars: str | None = None

    @property
    def name(self) -> str:
        return self.wire.name

    @property
    def default(self) -> Any:
        return self.wire.default

    @property
    def methods(self) -> list[str]:
        """The methods that take this option (required or optional)."""
        return [*(self.wire.optional or []), *(self.wire.required or [])]

    def check(self, value: Any) -> Any:
        """``value`` if it fits this option (None means unset), else OptionValueError naming the
        fix (a usage error: exit status 2 on the command line)."""
        if value is None:
            return None
        kind = self.wire.type
        ok = isinstance(value, _PY_TYPES[kind]) and not (kind == "int" and isinstance(value, bool))
        if not ok:
            raise OptionValueError(f"option {self.name} must be {_describe(kind)}; got {value!r}")
        if kind == "str":
            self._check_text(value)
        if self.wire.choices and value not in self.wire.choices:
            raise OptionValueError(f"option {self.name}={value!r} is not one of "
                                   f"{', '.join(map(str, self.wire.choices))}; pick one of those")
        if self.minimum is not None and value < self.minimum:
            raise OptionValueError(f"option {self.name}={value} is below its minimum "
                                   f"{self.minimum}; {self._range_hint()}")
        if self.maximum is not None and value > self.maximum:
            raise OptionValueError(f"option {self.name}={value} is above its maximum "
                                   f"{self.maximum}; {self._range_hint()}")
        return value

    def _check_text(self, value: str) -> None:
        if "\0" in value:
            raise OptionValueError(f"option {self.name}={value!r} holds a NUL character; "
                                   "no option value may")
        if self.chars is not None:
            bad = next((c for c in value if not re.fullmatch(f"[{self.chars}]", c)), None)
            if bad is not None or not value or value.startswith("-"):
                what = f"has {bad!r}" if bad is not None else "is empty or starts with -"
                raise OptionValueError(f"option {self.name}={value!r} {what}; it takes "
                                       f"[{self.chars}] only, not starting with -")

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
    chars: str | None = None,
    required: list[str] | None = None,
    optional: list[str] | None = None,
) -> DeclaredOption:
    """Declare an option; ``minimum``/``maximum`` (ints only) are added to its help text, and so
    is ``chars`` (str only: a regex character class, without brackets, every value must keep
    to, for values that reach a tool that parses them again)."""
    if (minimum is not None or maximum is not None) and type != "int":
        raise TypeError(f"option {name}: bounds apply to int options only")
    if chars is not None and type != "str":
        raise TypeError(f"option {name}: chars applies to str options only")
    if chars is not None:
        help = f"{help} (characters {chars})"
    if minimum is not None or maximum is not None:
        low = "" if minimum is None else f"{minimum}"
        high = "" if maximum is None else f"{maximum}"
        help = f"{help} (range {low}..{high})"
    wire = server.ProjectOption(
        name, choices=list(choices) if choices is not None else None, default=default,
        type=type, required=required, optional=optional, help=help,
    )
    return DeclaredOption(wire, minimum, maximum, chars)


def check_names(declared: Iterable[DeclaredOption], names: Iterable[str], where: str) -> None:
    """OptionValueError for the first of ``names`` that no declared option has, naming the
    closest one and every valid name (``where``: "the host template")."""
    known = [o.name for o in declared]
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise OptionValueError(f"unknown option {name!r} for {where or 'this template'}; "
                                   f"{hint}valid options: {', '.join(sorted(known)) or 'none'}")


def check_declared(
    declared: Iterable[DeclaredOption], options: Mapping[str, Any], method: str | None = None,
    where: str = "",
) -> dict[str, Any]:
    """Every declared option's value (defaults filled in), each checked; OptionValueError for a
    name no option has (:func:`check_names`).

    With ``method``, an option that ``method`` requires must have a value.
    """
    declared = list(declared)
    check_names(declared, options, where)
    values: dict[str, Any] = {}
    for opt in declared:
        value = options.get(opt.name)
        if value is None:
            value = opt.default
        if value is None and method and method in (opt.wire.required or []):
            raise OptionValueError(f"option {opt.name} is required by {method}; "
                                   f"pass -o {opt.name}=<value>")
        values[opt.name] = opt.check(value)
    return values


#: What a ``compile_definitions`` VALUE may hold: a number or identifier, or a C string literal.
VALUE_TOKEN_CHARS = "A-Za-z0-9_.+-"
VALUE_STRING_CHARS = "A-Za-z0-9 _.,:/+=-"
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_FLAG_RE = re.compile(
    rf'-D(?P<name>{_NAME})(?:=(?P<value>"[{VALUE_STRING_CHARS}]*"|[{VALUE_TOKEN_CHARS}]*))?'
    rf"|-U(?P<undef>{_NAME})"
)
_SPACE_RE = re.compile(r"[ \t]*")
#: The grammar, as every compile_definitions error states it.
DEFINITIONS_GRAMMAR = (
    "write -DNAME, -DNAME=VALUE or -UNAME separated by spaces, NAME a C identifier, VALUE a "
    f"number or identifier of [{VALUE_TOKEN_CHARS}] or a C string \"...\" of letters, digits, "
    "spaces and _.,:/+=- (e.g. -DFOO=1 -DVERSION=\"1.2\" -UBAR)"
)


def _first_outside(text: str, chars: str) -> str | None:
    return next((c for c in text if not re.fullmatch(f"[{chars}]", c)), None)


def _definition_error(text: str, pos: int) -> OptionValueError:
    """The one-line error for the flag that starts at ``text[pos]``: which character, where."""
    rest = text[pos:]
    quoted = re.match(rf'-D{_NAME}="[^"]*"?', rest)
    word = quoted.group() if quoted else re.match(r"[^ \t]*", rest).group()  # type: ignore[union-attr]
    head = re.match(rf"-([DU])({_NAME})?", word)
    tail = word[head.end():] if head else ""
    if head is None:
        why = "is not a -DNAME, -DNAME=VALUE or -UNAME flag"
    elif head.group(2) is None:
        why = f"has no C identifier after -{head.group(1)}"
    elif head.group(1) == "U" and tail.startswith("="):
        why = "gives -U a VALUE; -U takes a NAME only"
    elif not tail.startswith("="):
        why = f"has {tail[0]!r} in its NAME, which must be a C identifier"
    elif tail.startswith('="'):
        closed = len(tail) > 2 and tail.endswith('"')
        bad = _first_outside(tail[2:-1] if closed else tail[2:], VALUE_STRING_CHARS)
        why = (f"has {bad!r} in its C string VALUE" if bad is not None else
               "is not followed by a space" if closed else 'has a C string VALUE with no closing "')
    else:
        bad = _first_outside(tail[1:], VALUE_TOKEN_CHARS)
        why = f"has {bad!r} in its VALUE" if bad is not None else "is not followed by a space"
    return OptionValueError(f"compile_definitions: {word!r} {why}; {DEFINITIONS_GRAMMAR}")


def parse_definitions(text: str | None) -> list[str]:
    """The flags of a ``compile_definitions`` value, checked against its grammar: ``-DNAME``,
    ``-DNAME=VALUE`` or ``-UNAME``, separated by spaces or tabs; NAME a C identifier; VALUE a number
    or identifier (``[A-Za-z0-9_.+-]*``) or a C string literal ``"..."`` of letters, digits,
    spaces and ``_.,:/+=-``. Nothing else: no shell, make, CMake or Kconfig metacharacter can
    be in a flag, so each flag is data for every consumer (the templates still escape each one
    for its file with :mod:`~project_api.template.quoting`). OptionValueError (a usage error),
    in one line, naming the flag and the offending character, for anything else."""
    text = text or ""
    flags: list[str] = []
    pos = _SPACE_RE.match(text).end()  # type: ignore[union-attr]
    while pos < len(text):
        m = _FLAG_RE.match(text, pos)
        if m is None or (m.end() < len(text) and text[m.end()] not in " \t"):
            raise _definition_error(text, pos)
        flags.append(m.group())
        pos = _SPACE_RE.match(text, m.end()).end()  # type: ignore[union-attr]
    return flags


def compile_definitions(text: str | None, defaults: Mapping[str, Any] | None = None) -> list[str]:
    """The ``-DNAME[=VALUE]``/``-UNAME`` flags of a ``compile_definitions`` option value
    (:func:`parse_definitions`).

    ``defaults`` are added as ``-DNAME=VALUE`` unless the user's flags name them already.
    Raises ServerError for anything that is not such a flag.
    """
    flags = parse_definitions(text)
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

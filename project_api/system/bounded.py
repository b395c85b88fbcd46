"""Limits every reader of user bytes applies before it takes memory or recurses.

One place for the bounds (JSON nesting depth, integer digits, tar path depth and length, the
bytes a ``.npy`` header may declare) and for quoting a user's value in an error line: a value is
shown with at most :data:`QUOTE_CHARS` characters, so a 120 KB option or a row of a million
columns never becomes a megabyte-long message.

The JSON check is a scan of the text, not a parse: it counts brackets outside strings with a loop,
so a document nested 100,000 deep is refused before :func:`json.loads` (whose C decoder recurses)
ever sees it.
"""

from __future__ import annotations

import json
import os
from typing import Any

#: Characters of a user's value an error line quotes (the rest is elided with its length).
QUOTE_CHARS = 200

#: Deepest nesting of ``[``/``{`` a JSON document may have (env ``PROJECT_API_MAX_JSON_DEPTH``).
#: The deepest real graph JSON or metadata.json is under 10.
DEFAULT_MAX_JSON_DEPTH = 64

#: Most digits an integer in a JSON document may have (Python's own limit is 4300).
MAX_INT_DIGITS = 40

#: Most path components a tar member's name may have (env ``PROJECT_API_MLF_MAX_PATH_DEPTH``).
DEFAULT_MAX_PATH_DEPTH = 64

#: Longest tar member name in characters (env ``PROJECT_API_MLF_MAX_PATH_CHARS``); PATH_MAX is
#: 4096 and the destination folder's own path comes on top.
DEFAULT_MAX_PATH_CHARS = 1024

#: Most bytes an array file (.npy, or one member of an .npz) may declare
#: (env ``PROJECT_API_MAX_ARRAY_BYTES``).
DEFAULT_MAX_ARRAY_BYTES = 1 << 30


def quote(value: Any, limit: int = QUOTE_CHARS) -> str:
    """``repr(value)``, cut to ``limit`` characters with the length of what was left out."""
    text = value if isinstance(value, str) else str(value)
    shown = repr(text[:limit])
    if len(text) > limit:
        return f"{shown}... ({len(text)} characters)"
    return shown


#: Longest error line a reader builds (a message quoting a value it did not cut is cut here).
MAX_LINE_CHARS = 1000


def one_line(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """``text`` as one line (line breaks as spaces) of at most ``limit`` characters plus a note
    of how many were left out: the last guard of a reader's error message."""
    text = " ".join(text.splitlines())
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def env_limit(name: str, default: int) -> int:
    """A positive integer limit from the environment variable ``name``, else ``default``.

    A value that is not a positive integer is ignored in favour of the default is not an option:
    it raises ValueError with a one-line reason, which callers turn into their own error class.
    """
    raw = os.environ.get(name)
    if not raw:
        return default
    if not raw.strip().isdigit() or len(raw.strip()) > 18 or int(raw) <= 0:
        raise ValueError(f"${name}={quote(raw)} is not a positive integer")
    return int(raw)


def json_depth(text: str, stop_at: int) -> int:
    """The deepest bracket nesting of JSON ``text``, counting no further than ``stop_at + 1``."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > stop_at:
                    return deepest
        elif ch in "]}":
            depth -= 1
    return deepest


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits.lstrip('-'))} digits (at most "
                         f"{MAX_INT_DIGITS} are read)")
    return int(digits)


def _parse_constant(name: str) -> float:
    # NaN and Infinity are no JSON; Python's decoder accepts them unless told otherwise.
    raise ValueError(f"{name} is not a JSON number")


def load_json(text: str | bytes, max_depth: int | None = None) -> Any:
    """``json.loads`` with the bounds: nesting depth, integer digits, no NaN/Infinity.

    Raises:
        ValueError: the text is not valid JSON or is over a bound; the message is one line
            (``json.JSONDecodeError`` is a ValueError too).
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8")
    if max_depth is None:
        max_depth = env_limit("PROJECT_API_MAX_JSON_DEPTH", DEFAULT_MAX_JSON_DEPTH)
    depth = json_depth(text, max_depth)
    if depth > max_depth:
        raise ValueError(f"nested more than {max_depth} levels deep (the limit; raise "
                         "PROJECT_API_MAX_JSON_DEPTH if it is genuine)")
    try:
        return json.loads(text, parse_int=_parse_int, parse_constant=_parse_constant)
    except RecursionError:  # pragma: no cover - the depth scan stops this first
        raise ValueError("nested too deep to read") from None

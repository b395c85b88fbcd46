"""The tokens of Relay text: identifiers, operator names, numbers with their dtype suffixes, and
the scanner the reader pulls them from.
"""

from __future__ import annotations

import re

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

_OPNAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")

_NUMBER = re.compile(
    r"-?(?:(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?|inf|nan)(f16|f32|f64|f|i8|i16|i32|i64|u8|u16|u32|u64)?"
)

_INT = re.compile(r"-?\d+")

_WORD = re.compile(r"[A-Za-z0-9_]+")

_CLOSE = {"(": ")", "[": "]", "{": "}"}


class _Syntax(Exception):
    """A local reading failure (recovered by the caller)."""


class _Scanner:
    def __init__(self, text: str):
        self.s = text
        self.i = 0

    # whitespace and comments
    def comments(self) -> list[str]:
        """Skip whitespace and comments; return the text of the ``/* */`` comments skipped."""
        found = []
        s, n = self.s, len(self.s)
        while True:
            while self.i < n and s[self.i].isspace():
                self.i += 1
            if s.startswith("/*", self.i):
                end = s.find("*/", self.i + 2)
                if end < 0:
                    raise _Syntax("unterminated comment")
                found.append(s[self.i + 2 : end])
                self.i = end + 2
            elif s.startswith("//", self.i):
                end = s.find("\n", self.i)
                self.i = n if end < 0 else end + 1
            else:
                return found

    def skip(self) -> None:
        self.comments()

    def peek(self, token: str) -> bool:
        self.skip()
        return self.s.startswith(token, self.i)

    def at_end(self) -> bool:
        self.skip()
        return self.i >= len(self.s)

    def accept(self, token: str) -> bool:
        if self.peek(token):
            self.i += len(token)
            return True
        return False

    def expect(self, token: str) -> None:
        if not self.accept(token):
            raise _Syntax(f"expected {token!r} at {self.where()}")

    def match(self, pattern: re.Pattern[str]) -> str | None:
        self.skip()
        m = pattern.match(self.s, self.i)
        if m is None:
            return None
        self.i = m.end()
        return m.group(0)

    def where(self) -> str:
        line = self.s.count("\n", 0, self.i) + 1
        return f"line {line}: {self.s[self.i : self.i + 40]!r}"

    def string(self) -> str:
        """A ``"..."`` literal (the scanner is at the opening quote)."""
        s = self.s
        if s[self.i] != '"':
            raise _Syntax(f"expected a string at {self.where()}")
        j = self.i + 1
        out = []
        while j < len(s):
            ch = s[j]
            if ch == "\\" and j + 1 < len(s):
                nxt = s[j + 1]
                out.append({"n": "\n", "t": "\t", "r": "\r"}.get(nxt, nxt))
                j += 2
                continue
            if ch == '"':
                self.i = j + 1
                return "".join(out)
            out.append(ch)
            j += 1
        raise _Syntax("unterminated string")

    def skip_to(self, stops: str) -> str:
        """Skip balanced text up to (not including) one of ``stops`` at depth 0; return it."""
        s, start, depth = self.s, self.i, []
        while self.i < len(s):
            ch = s[self.i]
            if ch == '"':
                self.string()
                continue
            if s.startswith("/*", self.i):
                end = s.find("*/", self.i + 2)
                self.i = len(s) if end < 0 else end + 2
                continue
            if not depth and ch in stops:
                break
            if ch in _CLOSE:
                depth.append(_CLOSE[ch])
            elif depth and ch == depth[-1]:
                depth.pop()
            elif ch in ")]}" and not depth:
                break
            self.i += 1
        return s[start : self.i]

"""A reader of the Relay text format as TVM's printer writes it (``str(ir_mod)``, ``astext``).

The syntax is the one of ``src/printer/relay_text_printer.cc`` (TVM 0.8-0.11; moved to
``src/relay/printer/`` in 0.12), whose facts this reader relies on:

* ``def @name(%p: T, ..., attr=value, ...) -> T {`` (``-> T`` only when the function's return type
  is set; frontends leave it unset until type inference runs); ``fn (...) {...}`` for closures;
  ``#[version = "0.0.5"]`` before and ``#[metadata]`` JSON after the functions.
* Variables print their name hint raw after ``%`` (a TFLite name such as
  ``%serving_default_input_1:0`` keeps its ``:``), with ``v`` put before a name that does not start
  with a letter (``%v_param_1``); temporaries are ``%0``, ``%1``...; ``%5.0`` projects field 0.
* Statements are ``%n = expr;``, ``let %x = expr;`` and ``free_var %x: T;``; the body ends in
  one expression. Tuples print ``(a, b)`` and ``(a,)``.
* ``/* ty=T span=NAME:LINE:COL */`` follows an expression once its type is inferred or it has a
  span (from 0.12; 0.8 prints ``/* ty=T */`` after calls and constants only); the ``ty=`` part is
  kept as the expression's :attr:`Expr.annotated`.
* Scalars: ``1`` (int32), ``1i64``/``1i16`` (0.9+; 0.8 prints int64 plainly), ``0.5f`` (float32),
  ``0.5f64``, ``0.5f16``, ``True``; bigger constants are ``meta[relay.Constant][k]``.
* Call attributes are ``key=value`` after the arguments, only those differing from the default:
  ints, ``1e-05f`` (a double attribute), ``"strings"``, ``[lists]``, ``True``/``False``,
  ``None``, ``?`` (Any), ``{k=v}`` maps.

The reader is lenient: a parameter, attribute or statement it cannot read is skipped with a
debug line, and what depends on it stays unknown. :class:`RelayError` is raised only when no
``def`` can be read at all.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any

from project_api.archive.relay.scanner import (
    _IDENT,
    _INT,
    _NUMBER,
    _OPNAME,
    _WORD,
    _Scanner,
    _Syntax,
)
from project_api.archive.relay.types import TensorType, TupleType, Type, is_dtype
from project_api.errors import MLFError

_LOG = logging.getLogger(__name__)


class RelayError(MLFError):
    """The text is not Relay text this reader can use (an MLFError, so a ValueError too)."""


@dataclass
class Expr:
    """Base of every expression; ``annotated`` is the printer's ``/* ty=... */``, if any."""

    annotated: Type = field(default=None, init=False, repr=False, compare=False)
    has_annotation: bool = field(default=False, init=False, repr=False, compare=False)


@dataclass
class VarRef(Expr):
    name: str


@dataclass
class GlobalRef(Expr):
    name: str


@dataclass
class OpRef(Expr):
    name: str  #: ``nn.conv2d``, ``add``, ``qnn.dense``...


@dataclass
class Const(Expr):
    """A scalar literal; ``value`` is a Python int, float or bool."""

    dtype: str
    value: Any


@dataclass
class MetaRef(Expr):
    """``meta[relay.Constant][3]``: a constant kept in the (usually omitted) metadata section."""

    kind: str
    index: int


@dataclass
class Call(Expr):
    fn: Expr
    args: list[Expr]
    attrs: dict[str, Any]


@dataclass
class TupleExpr(Expr):
    fields: list[Expr]


@dataclass
class Proj(Expr):
    """``%t.1``: field ``index`` of a tuple."""

    tuple: Expr
    index: int


@dataclass
class FnExpr(Expr):
    func: Function


@dataclass
class IfExpr(Expr):
    cond: Expr
    then: Body
    otherwise: Body


@dataclass
class Unreadable(Expr):
    """An expression the reader skipped (its text, shortened, for the debug log)."""

    text: str


@dataclass
class Param:
    name: str
    annotation: Type  #: the declared type (None: none or unreadable)
    typed: bool = False  #: a ``: T`` was printed


@dataclass
class Binding:
    """``%n = expr;``, ``let %x = expr;`` (value set) or ``free_var %x: T;`` (value None)."""

    name: str
    value: Expr | None
    annotation: Type = None


@dataclass
class Body:
    bindings: list[Binding]
    result: Expr


@dataclass
class Function:
    name: str  #: the global name (``main``) or "" for a closure
    params: list[Param]
    attrs: dict[str, Any]
    ret: Type  #: the printed ``-> T`` (None: absent or unreadable)
    has_ret: bool
    body: Body | None  #: None when the body could not be read


@dataclass
class Module:
    functions: dict[str, Function]


_SUFFIX_DTYPES = {"f": "float32", "f16": "float16", "f32": "float32", "f64": "float64",
                  "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
                  "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64"}


class _Reader:
    def __init__(self, text: str, where: str):
        self.sc = _Scanner(text)
        self.where = where
        self.names: set[str] = set()  # variable names declared so far (for references)
        #: declared names by their leading identifier characters (``serving_default_x`` for
        #: ``serving_default_x:0``), so a reference finds its candidates without a scan
        self.by_word: dict[str, list[str]] = {}
        self.failures: list[str] = []

    def debug(self, what: str) -> None:
        _LOG.debug("%s: %s", self.where, what)

    # module
    def module(self) -> Module:
        sc = self.sc
        functions: dict[str, Function] = {}
        while not sc.at_end():
            if sc.peek("#[metadata]"):
                break
            if sc.peek("#["):
                sc.i += 2
                sc.skip_to("]")
                sc.accept("]")
                continue
            if sc.peek("def"):
                start = sc.i
                try:
                    fn = self.definition()
                except _Syntax as exc:
                    self.debug(f"cannot read the definition at {sc.where()} ({exc})")
                    self.failures.append(str(exc))
                    sc.i = start + 3
                    nxt = sc.s.find("\ndef ", sc.i)
                    sc.i = len(sc.s) if nxt < 0 else nxt + 1
                    continue
                if fn is not None:
                    functions[fn.name] = fn
                continue
            if sc.peek("type"):
                sc.i += 4
                sc.skip_to("{")
                sc.accept("{")
                sc.skip_to("}")
                sc.accept("}")
                continue
            # Anything else (e.g. a bare expression printed by astext): skip one line.
            nxt = sc.s.find("\n", sc.i)
            sc.i = len(sc.s) if nxt < 0 else nxt + 1
        if not functions:
            why = f": {self.failures[-1]}" if self.failures else ""
            raise RelayError(f"no 'def @name(...)' that can be read{why}")
        return Module(functions)

    def definition(self) -> Function | None:
        sc = self.sc
        sc.expect("def")
        sc.expect("@")
        name = sc.match(_OPNAME)
        if name is None:
            raise _Syntax(f"no function name at {sc.where()}")
        if sc.peek("="):  # def @xyz = meta['ExternalFunc'][id]
            sc.skip_to("\n")
            return None
        return self.function(name)

    def function(self, name: str) -> Function:
        sc = self.sc
        if sc.accept("["):  # type parameters
            sc.skip_to("]")
            sc.expect("]")
        sc.expect("(")
        params, attrs = self.params()
        ret: Type = None
        has_ret = False
        if sc.accept("->"):
            has_ret = True
            start = sc.i
            try:
                ret = self.type()
            except _Syntax as exc:
                self.debug(f"@{name or 'fn'}: return type not read ({exc})")
                sc.i = start
                sc.skip_to("{")
        body: Body | None
        if not sc.peek("{"):
            raise _Syntax(f"expected the body of @{name or 'fn'} at {sc.where()}")
        start = sc.i
        try:
            body = self.body()
        except _Syntax as exc:
            self.debug(f"@{name or 'fn'}: body not read ({exc})")
            sc.i = start + 1
            sc.skip_to("")
            sc.accept("}")
            body = None
        return Function(name, params, attrs, ret, has_ret, body)

    def params(self) -> tuple[list[Param], dict[str, Any]]:
        """After ``(``: parameters and attributes up to the matching ``)``."""
        sc = self.sc
        params: list[Param] = []
        attrs: dict[str, Any] = {}
        while not sc.accept(")"):
            start = sc.i
            try:
                if sc.peek("%"):
                    params.append(self.param())
                else:
                    key = sc.match(_IDENT)
                    if key is None or not sc.accept("="):
                        raise _Syntax(f"not a parameter or attribute at {sc.where()}")
                    attrs[key] = self.attr_value()
                if not sc.peek(")"):
                    sc.expect(",")
            except _Syntax as exc:
                sc.i = start
                skipped = sc.skip_to(",)")
                self.debug(f"parameter list item {skipped.strip()[:60]!r} not read ({exc})")
                if sc.at_end():
                    raise _Syntax("unterminated parameter list") from None
                if sc.i == start:  # a stray closing bracket: step over it
                    sc.i += 1
                sc.accept(",")
        return params, attrs

    def param(self) -> Param:
        sc = self.sc
        name = self.declared_name()
        if sc.peek("{"):  # {virtual_device=...}
            sc.i += 1
            sc.skip_to("}")
            sc.expect("}")
        annotation: Type = None
        typed = False
        if sc.accept(":"):
            typed = True
            annotation = self.type()
        comments = sc.comments()
        if not typed:
            annotation = _annotation(comments)
        return Param(name, annotation, typed)

    def declared_name(self) -> str:
        """``%name`` where a variable is bound: the name runs up to ``: ``, ``,``, ``)``, ``;``,
        ``=`` or white space (TVM prints name hints raw, so they may hold ``:``, ``/``, ``.``)."""
        sc = self.sc
        sc.expect("%")
        s = sc.s
        if sc.i < len(s) and s[sc.i] == '"':
            name = sc.string()
        else:
            j = sc.i
            while j < len(s):
                ch = s[j]
                if ch.isspace() or ch in ",);=":
                    break
                if ch == ":" and (j + 1 >= len(s) or s[j + 1].isspace()):
                    break
                if ch == "{" or s.startswith("/*", j):
                    break
                j += 1
            if j == sc.i:
                raise _Syntax(f"empty variable name at {sc.where()}")
            name = s[sc.i : j]
            sc.i = j
        self.declare(name)
        return name

    def declare(self, name: str) -> None:
        if name in self.names:
            return
        self.names.add(name)
        m = _WORD.match(name)
        self.by_word.setdefault(m.group(0) if m else "", []).append(name)

    def referenced_name(self) -> str:
        """``%name`` used in an expression: the longest declared name that fits, else the
        identifier characters (a free variable printed before its ``free_var`` line)."""
        sc = self.sc
        sc.expect("%")
        s = sc.s
        if sc.i < len(s) and s[sc.i] == '"':
            return sc.string()
        if sc.i < len(s) and s[sc.i].isdigit():
            m = re.compile(r"\d+").match(s, sc.i)
            assert m is not None
            sc.i = m.end()
            return m.group(0)
        m = _WORD.match(s, sc.i)
        word = m.group(0) if m else ""
        best = ""
        for name in self.by_word.get(word, ()):
            if len(name) > len(best) and s.startswith(name, sc.i):
                after = s[sc.i + len(name) : sc.i + len(name) + 1]
                if not after or not (after.isalnum() or after == "_"):
                    best = name
        if best:
            sc.i += len(best)
            return best
        if m is None:
            raise _Syntax(f"unreadable variable at {sc.where()}")
        sc.i = m.end()
        return word

    # bodies
    def body(self) -> Body:
        sc = self.sc
        sc.expect("{")
        bindings: list[Binding] = []
        while True:
            if sc.peek("}"):
                raise _Syntax("a body without a result expression")
            start = sc.i
            if sc.peek("free_var"):
                sc.i += len("free_var")
                name = self.declared_name()
                annotation: Type = None
                if sc.accept(":"):
                    annotation = self.type()
                sc.comments()
                sc.expect(";")
                bindings.append(Binding(name, None, annotation))
                continue
            if sc.peek("let") and re.match(r"let\s+%", sc.s[sc.i :]):
                sc.i += 3
                name = self.declared_name()
                annotation = None
                if sc.accept(":"):
                    annotation = self.type()
                sc.comments()
                sc.expect("=")
                bindings.append(Binding(name, self.statement_value(name, start), annotation))
                continue
            m = re.compile(r"%(\d+)\s*=(?!=)").match(sc.s, sc.i)
            if m:
                sc.i = m.end()
                self.declare(m.group(1))
                bindings.append(Binding(m.group(1), self.statement_value(m.group(1), start)))
                continue
            result = self.expr()
            sc.expect("}")
            return Body(bindings, result)

    def statement_value(self, name: str, start: int) -> Expr:
        sc = self.sc
        value_at = sc.i
        try:
            value = self.expr()
            sc.expect(";")
            return value
        except _Syntax as exc:
            sc.i = value_at
            text = sc.skip_to(";")
            if not sc.accept(";"):
                raise _Syntax(f"statement %{name} does not end") from None
            self.debug(f"%{name}: {text.strip()[:80]!r} not read ({exc}); its type is unknown")
            return Unreadable(text.strip()[:80])

    # expressions
    def expr(self) -> Expr:
        sc = self.sc
        e = self.primary()
        while True:
            comments = sc.comments()
            if comments:
                ty = _annotation(comments)
                if ty is not None or any("ty=" in c for c in comments):
                    e.annotated, e.has_annotation = ty, True
            s, i = sc.s, sc.i
            if s.startswith(".", i) and i + 1 < len(s) and s[i + 1].isdigit():
                sc.i += 1
                index = sc.match(re.compile(r"\d+"))
                assert index is not None
                e = Proj(e, int(index))
                continue
            if s.startswith("(", i):
                sc.i += 1
                args, attrs = self.arguments()
                e = Call(e, args, attrs)
                continue
            return e

    def primary(self) -> Expr:
        sc = self.sc
        sc.skip()
        s, i = sc.s, sc.i
        if i >= len(s):
            raise _Syntax("unexpected end of text")
        ch = s[i]
        if ch == "%":
            return VarRef(self.referenced_name())
        if ch == "@":
            sc.i += 1
            name = sc.match(_OPNAME)
            if name is None:
                raise _Syntax(f"no global name at {sc.where()}")
            return GlobalRef(name)
        if ch == "(":
            sc.i += 1
            fields: list[Expr] = []
            trailing_comma = False
            while not sc.accept(")"):
                fields.append(self.expr())
                trailing_comma = False
                if not sc.peek(")"):
                    sc.expect(",")
                    trailing_comma = True
            if len(fields) == 1 and not trailing_comma:
                return fields[0]
            return TupleExpr(fields)
        if s.startswith("meta[", i) or s.startswith("meta ", i):
            sc.i += 4
            sc.expect("[")
            kind = sc.skip_to("]").strip().strip("'\"")
            sc.expect("]")
            sc.expect("[")
            index = sc.match(_INT)
            sc.expect("]")
            return MetaRef(kind, int(index) if index is not None else -1)
        if s.startswith("fn", i) and re.match(r"fn\s*[(\[]", s[i:]):
            sc.i += 2
            return FnExpr(self.function(""))
        if s.startswith("if", i) and re.match(r"if\s*\(", s[i:]):
            sc.i += 2
            sc.expect("(")
            cond = self.expr()
            sc.expect(")")
            then = self.body()
            sc.expect("else")
            return IfExpr(cond, then, self.body())
        if ch.isdigit() or ch == "-" or s.startswith(("inf", "nan"), i):
            lit = sc.match(_NUMBER)
            if lit is None:
                raise _Syntax(f"bad number at {sc.where()}")
            return _literal(lit)
        if s.startswith(("True", "False"), i) and not re.match(r"(True|False)\w", s[i:]):
            sc.i += 4 if s.startswith("True", i) else 5
            return Const("bool", s.startswith("True", i))
        name = sc.match(_OPNAME)
        if name is None:
            raise _Syntax(f"unexpected {s[i:i + 20]!r}")
        return OpRef(name)

    def arguments(self) -> tuple[list[Expr], dict[str, Any]]:
        """After ``(``: positional arguments then ``key=value`` attributes, up to ``)``."""
        sc = self.sc
        args: list[Expr] = []
        attrs: dict[str, Any] = {}
        while not sc.accept(")"):
            m = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)").match(sc.s, sc.i)
            if m:
                sc.i = m.end()
                key = m.group(1)
                start = sc.i
                try:
                    attrs[key] = self.attr_value()
                except _Syntax as exc:
                    sc.i = start
                    text = sc.skip_to(",)")
                    self.debug(f"attribute {key}={text.strip()[:60]!r} not read ({exc})")
                    attrs[key] = _UNREAD
            else:
                args.append(self.expr())
            if not sc.peek(")"):
                sc.expect(",")
        return args, attrs

    def attr_value(self) -> Any:
        sc = self.sc
        sc.skip()
        s, i = sc.s, sc.i
        if i >= len(s):
            raise _Syntax("unexpected end of text")
        ch = s[i]
        if ch == '"':
            return sc.string()
        if ch == "[":
            sc.i += 1
            items = []
            while not sc.accept("]"):
                items.append(self.attr_value())
                if not sc.peek("]"):
                    sc.expect(",")
            return items
        if ch == "{":
            sc.i += 1
            table: dict[str, Any] = {}
            while not sc.accept("}"):
                key = sc.match(_OPNAME)
                if key is None:
                    raise _Syntax(f"unreadable map key at {sc.where()}")
                sc.expect("=")
                table[key] = self.attr_value()
                if not sc.peek("}"):
                    sc.expect(",")
            return table
        if ch == "?":
            sc.i += 1
            return None
        if s.startswith("meta[", i):
            ref = self.primary()
            return ref
        if ch.isdigit() or ch == "-" or s.startswith(("inf", "nan"), i):
            lit = sc.match(_NUMBER)
            if lit is None:
                raise _Syntax(f"bad number at {sc.where()}")
            return _literal(lit).value
        word = sc.match(_IDENT)
        if word in ("True", "False"):
            return word == "True"
        if word == "None":
            return None
        if word is not None and sc.peek("("):  # e.g. VirtualDevice(...): kept unread
            sc.i += 1
            sc.skip_to(")")
            sc.expect(")")
            return _UNREAD
        if word is not None:
            return _Word(word)
        raise _Syntax(f"unreadable attribute value at {sc.where()}")

    # types
    def type(self) -> Type:
        sc = self.sc
        sc.skip()
        s, i = sc.s, sc.i
        if s.startswith("Tensor", i) and not re.match(r"Tensor\w", s[i:]):
            sc.i += len("Tensor")
            sc.expect("[")
            sc.expect("(")
            dims: list[int | None] = []
            while not sc.accept(")"):
                dims.append(self.dim())
                if not sc.peek(")"):
                    sc.expect(",")
            sc.expect(",")
            dtype = sc.match(_IDENT)
            sc.expect("]")
            return TensorType(tuple(dims), dtype if dtype and is_dtype(dtype) else None)
        if s.startswith("(", i):
            sc.i += 1
            fields: list[Type] = []
            while not sc.accept(")"):
                fields.append(self.type())
                if not sc.peek(")"):
                    sc.expect(",")
            return TupleType(tuple(fields))
        if s.startswith("fn", i) and re.match(r"fn\s*[(\[]", s[i:]):
            sc.i += 2
            if sc.accept("["):
                sc.skip_to("]")
                sc.expect("]")
            sc.expect("(")
            sc.skip_to(")")
            sc.expect(")")
            sc.expect("->")
            self.type()
            return None
        if s.startswith("meta[", i):
            self.primary()
            return None
        if s.startswith("?", i):
            sc.i += 1
            return None
        word = sc.match(_IDENT)
        if word is None:
            raise _Syntax(f"unreadable type at {sc.where()}")
        if is_dtype(word):
            return TensorType((), word)
        if sc.accept("["):  # an ADT such as List[int32]
            sc.skip_to("]")
            sc.expect("]")
        return None

    def dim(self) -> int | None:
        sc = self.sc
        sc.skip()
        m = re.compile(r"(\d+)(?:i64|i32|i16)?(?![\w.])").match(sc.s, sc.i)
        if m:
            sc.i = m.end()
            return int(m.group(1))
        # ?, a shape variable or an expression: unknown
        sc.skip_to(",)")
        return None


class _Word(str):
    """A bare identifier as an attribute value."""


#: The value of an attribute that could not be read.
_UNREAD: Any = object()


def is_unread(value: Any) -> bool:
    return value is _UNREAD


def _literal(text: str) -> Const:
    m = _NUMBER.fullmatch(text)
    assert m is not None
    suffix = m.group(1) or ""
    body = text[: len(text) - len(suffix)]
    if suffix:
        dtype = _SUFFIX_DTYPES[suffix]
    elif re.fullmatch(r"-?\d+", body):
        dtype = "int32"
    else:
        dtype = "float32"  # a float without suffix (not printed by TVM, read anyway)
    if dtype.startswith(("int", "uint")) and re.fullmatch(r"-?\d+", body):
        return Const(dtype, int(body))
    return Const(dtype, float(body))


def _annotation(comments: list[str]) -> Type:
    """The type in a ``ty=`` of the printer's comments (None if none or unreadable)."""
    for text in comments:
        m = re.search(r"(?:^|\s)ty=", text)
        if m is None:
            continue
        reader = _Reader(text[m.end() :], "type comment")
        try:
            return reader.type()
        except _Syntax:
            return None
    return None


def parse(text: str, where: str = "Relay text") -> Module:
    """Read a module of Relay text; :class:`RelayError` when no function can be read."""
    try:
        return _Reader(text, where).module()
    except _Syntax as exc:
        raise RelayError(str(exc)) from None
    except RecursionError:
        raise RelayError("expressions nested too deeply to read") from None

"""Quoting: every value that reaches a generated file or a tool's command line, made data for
that consumer, by one function per consumer kind.

=========  ==================================================================================
kind       functions (each returns :class:`Quoted` text of its kind, or refuses in one line)
=========  ==================================================================================
c          :func:`c_string` (a string literal), :func:`c_identifier` (any text mapped to an
           identifier), :func:`check_c_identifier` (an identifier as given, else refused),
           :func:`c_comment` (text inside ``/* */``)
make       :func:`make_word` (a word of a variable that recipes hand to ``/bin/sh``: ``$`` and
           ``#`` for make, the rest for the shell), :func:`make_path` / :func:`make_paths`
           (file names in rules, which make cannot quote: refused unless plain)
cmake      :func:`cmake_argument` (one argument of a ``CMakeLists.txt`` command),
           :func:`check_cmake_path` (a path CMake will carry: no ``;``, ``$<`` or control
           characters)
kconfig    :func:`kconfig_value` (a ``prj.conf`` value: int, bool or string)
ld         :func:`ld_comment` (linker scripts take only numbers and our own symbols otherwise)
=========  ==================================================================================

and, for the command lines of tools that parse their arguments again: :func:`tcl_word`
(OpenOCD's ``-c`` commands, which are Tcl), :func:`qemu_option_value` (a value inside a QEMU
option list such as ``-chardev socket,path=...``).

**Templates cannot forget.** :func:`environment` gives one Jinja2 environment per file kind,
chosen by the template's file name (``*.c.j2``/``*.h.j2``: c, ``Makefile.j2``: make,
``CMakeLists.txt.j2``: cmake, ``*.conf.j2``: kconfig, ``*.ld.j2``: ld; any other name is
refused). Each environment has only its own kind's filters, and its ``finalize``, which sees
every ``{{ ... }}`` value, lets through only

* :class:`Quoted` text of its own kind (what its filters return),
* integers (not bools: ``True`` is no C, make or Kconfig value),
* strings made only of the kind's *inert* characters (:data:`INERT`: letters, digits, ``_``,
  ``.``, ``+``, ``-``; ``/`` and ``=`` too for make and CMake; space and comma too for C), which
  cannot end a token, string, comment, line or command in that kind of file,

and refuses anything else with a one-line error naming the template and the value. A value from
an option or an archive therefore reaches a file only through its kind's function: a template
that pastes one raw fails on the first hostile value of the tests, not in a user's build.
Concatenating or joining marked text in a template gives plain text again, which is checked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

import jinja2

from project_api.errors import ServerError

#: Jinja2 templates every template may use (model glue, crt_config.h, the ai_ API).
JINJA_DIR = Path(__file__).resolve().parent / "jinja"


class Quoted(str):
    """Text escaped for one kind of consumer (:attr:`kind`); made only by this module."""

    kind: ClassVar[str] = ""


class CText(Quoted):
    kind = "c"


class MakeText(Quoted):
    kind = "make"


class CMakeText(Quoted):
    kind = "cmake"


class KconfigText(Quoted):
    kind = "kconfig"


class LdText(Quoted):
    kind = "ld"


#: Characters that cannot end a token, string, comment, line or command in each kind of file.
INERT = {
    "c": re.compile(r"[A-Za-z0-9_.+\- ,]*"),
    "make": re.compile(r"[A-Za-z0-9_.+\-/=]*"),
    "cmake": re.compile(r"[A-Za-z0-9_.+\-/=]*"),
    "kconfig": re.compile(r"[A-Za-z0-9_.+\-]*"),
    "ld": re.compile(r"[A-Za-z0-9_.+\-]*"),
}
_TEXT = {"c": CText, "make": MakeText, "cmake": CMakeText, "kconfig": KconfigText, "ld": LdText}


def _fail(message: str) -> ServerError:
    return ServerError(message=message)


def _first_control(text: str) -> str | None:
    return next((ch for ch in text if ord(ch) < 0x20 or ord(ch) == 0x7F), None)


def _show(ch: str) -> str:
    """A character as a message shows it: 'x', or its escape ('\\n', '\\x00')."""
    return repr(ch)


# --- C ---------------------------------------------------------------------------------------

#: C99 keywords and the names a C library reserves that no generated identifier may take.
C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if "
    "inline int long register restrict return short signed sizeof static struct switch typedef "
    "union unsigned void volatile while _Bool _Complex _Imaginary".split()
)
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def c_string(text: str) -> CText:
    """A C string literal holding ``text`` exactly: ``"`` ``\\`` and ``?`` (trigraphs) escaped,
    other bytes outside printable ASCII (UTF-8) as three-digit octal escapes. NUL is refused:
    a C string ends there, so the program would see another text."""
    if "\0" in text:
        raise _fail(f"{text!r} holds a NUL character, which a C string cannot carry")
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch in '"\\?':
            out.append("\\" + ch)
        elif 0x20 <= byte < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    return CText('"' + "".join(out) + '"')


def c_identifier(text: str) -> CText:
    """``text`` mapped to a C identifier: every character that cannot appear in one becomes
    ``_``, and ``_`` goes first when it would start with a digit (or be empty)."""
    ident = re.sub(r"\W", "_", text, flags=re.ASCII)
    return CText(ident if ident and not ident[0].isdigit() else "_" + ident)


def check_c_identifier(text: str, what: str) -> CText:
    """``text`` itself when it is a C identifier (ASCII letters, digits and ``_``, not starting
    with a digit, no keyword); otherwise ServerError naming ``what`` (e.g. the archive member
    it comes from)."""
    if not isinstance(text, str) or not _C_IDENTIFIER.fullmatch(text) or text in C_KEYWORDS:
        raise _fail(f"{what}: {text!r} is not a C identifier (ASCII letters, digits and _, not "
                    "starting with a digit, not a keyword); fix the name where it is defined")
    return CText(text)


def _comment_text(text: str) -> str:
    """``text`` safe inside ``/* */``: control and non-ASCII characters as visible escapes (no
    newline, so no line splice), and ``*/`` and ``/*`` broken by a space; a space is added
    before a leading ``/`` and after a trailing ``*``, which could touch the comment's own
    ``/*`` or ``*/``."""
    out = "".join(ch if 0x20 <= ord(ch) < 0x7F else ch.encode("unicode_escape").decode("ascii")
                  for ch in text)
    out = re.sub(r"\*(?=/)|/(?=\*)", lambda m: m.group() + " ", out)
    if out.startswith("/"):
        out = " " + out
    if out.endswith("*"):
        out += " "
    return out


def c_comment(text: str) -> CText:
    """``text`` made safe inside a C ``/* ... */`` comment (see :func:`_comment_text`)."""
    return CText(_comment_text(text))


# --- make ------------------------------------------------------------------------------------

_MAKE_BARE = re.compile(r"[A-Za-z0-9_.+\-/=,]+")
_MAKE_PATH = re.compile(r"[A-Za-z0-9_.+\-/]+")


def make_word(text: str) -> MakeText:
    """One word of a make variable that a recipe passes to ``/bin/sh`` (``CPPFLAGS``): single
    quotes for the shell where the word holds anything but ``[A-Za-z0-9_.+-/=,]``, then ``$``
    doubled and ``#`` backslash-escaped for make, so the program receives ``text`` exactly.
    Control characters (a newline ends a make line) are refused."""
    bad = _first_control(text)
    if bad is not None:
        raise _fail(f"{text!r} holds {_show(bad)}, which a Makefile cannot carry")
    word = text if _MAKE_BARE.fullmatch(text) else "'" + text.replace("'", "'\\''") + "'"
    word = word.replace("$", "$$")
    # make reads 2k+1 backslashes before '#' as k backslashes and a literal '#'.
    word = re.sub(r"(\\*)#", lambda m: "\\" * (2 * len(m.group(1)) + 1) + "#", word)
    return MakeText(word)


def make_path(text: str) -> MakeText:
    """A file name in a Makefile rule or source list. make splits names on spaces and gives
    ``:`` ``%`` ``#`` ``$`` ``;`` ``*`` and ``\\`` meanings no quoting removes, so anything but
    ``[A-Za-z0-9_.+-/]`` (or a leading ``-``, which the compiler would take as an option) is
    refused."""
    problem = make_path_problem(text)
    if problem is not None:
        raise _fail(f"file name {text!r} {problem}")
    return MakeText(text)


def make_path_problem(text: str) -> str | None:
    """Why make cannot carry ``text`` as a file name (``"has ' ': ..."``), or None."""
    if _MAKE_PATH.fullmatch(text) and not text.startswith("-"):
        return None
    bad = next((ch for ch in text if not _MAKE_PATH.fullmatch(ch)), None)
    what = f"has {_show(bad)}" if bad is not None else "starts with -"
    return (f"{what}: a file the build compiles must be named with letters, digits and _.+-/ "
            "only, not starting with -")


def make_paths(paths: Iterable[str]) -> MakeText:
    """:func:`make_path` of each, separated by spaces."""
    return MakeText(" ".join(make_path(str(p)) for p in paths))


def make_words(words: Iterable[str]) -> MakeText:
    """:func:`make_word` of each, separated by spaces."""
    return MakeText(" ".join(make_word(str(w)) for w in words))


# --- CMake -----------------------------------------------------------------------------------

_CMAKE_BARE = re.compile(r"[A-Za-z0-9_.+\-/=]+")


def check_cmake_path(path: str | Path, what: str) -> str:
    """``str(path)`` when CMake can carry it; ServerError naming ``what`` when it holds ``;``
    (CMake's list separator: the path would become two) or a control character."""
    text = str(path)
    bad = _cmake_unsafe(text)
    if bad is not None:
        raise _fail(f"{what} {text!r} holds {_show(bad)}, which CMake cannot carry in a path; "
                    "use a path without ';', '$<' or control characters")
    return text


def _cmake_unsafe(text: str) -> str | None:
    """What CMake cannot carry as data: a control character, ``;`` (its list separator) or
    ``$<`` (a generator expression, evaluated where the value lands in a target property)."""
    return _first_control(text) or (";" if ";" in text else "$<" if "$<" in text else None)


def cmake_argument(text: str) -> CMakeText:
    """One argument of a CMake command: as is when it is only ``[A-Za-z0-9_.+-/=]``, else a
    quoted argument with ``\\`` ``"`` and ``$`` escaped (no variable reference, no generator
    expression survives). ``;`` (a list separator even inside quotes, once the value is stored
    in a list such as COMPILE_OPTIONS), ``$<`` (a generator expression there) and control
    characters are refused."""
    bad = _cmake_unsafe(text)
    if bad is not None:
        raise _fail(f"{text!r} holds {_show(bad)}, which CMake cannot carry as one argument")
    if _CMAKE_BARE.fullmatch(text):
        return CMakeText(text)
    return CMakeText('"' + re.sub(r'([\\"$])', r"\\\1", text) + '"')


# --- Kconfig ---------------------------------------------------------------------------------

def kconfig_value(value: bool | int | str) -> KconfigText:
    """A ``prj.conf`` value: ``y``/``n`` for a bool, decimal for an int, a double-quoted string
    with ``\\`` and ``"`` escaped (Kconfig's own escapes) for text. Control characters (a
    newline would start another assignment) are refused."""
    if isinstance(value, bool):
        return KconfigText("y" if value else "n")
    if isinstance(value, int):
        return KconfigText(str(value))
    bad = _first_control(value)
    if bad is not None:
        raise _fail(f"{value!r} holds {_show(bad)}, which a Kconfig string cannot carry")
    return KconfigText('"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"')


# --- linker script ---------------------------------------------------------------------------

def ld_comment(text: str) -> LdText:
    """``text`` made safe inside a linker-script ``/* ... */`` comment."""
    return LdText(_comment_text(text))


# --- tools' command lines --------------------------------------------------------------------

_TCL_INERT = re.compile(r"[A-Za-z0-9_.+\-/:=,@]+")


def tcl_word(text: str, what: str) -> str:
    """``text`` as one word of a Tcl command (OpenOCD's ``-c``). It is refused unless made of
    ``[A-Za-z0-9_.+-/:=,@]``: OpenOCD's own procedures (``program``) pass their arguments to
    ``eval`` again, so no quoting of ours would survive a space, ``$``, ``[`` or brace."""
    if not _TCL_INERT.fullmatch(text):
        bad = next((ch for ch in text if not _TCL_INERT.fullmatch(ch)), "")
        raise _fail(f"{what} {text!r} has {_show(bad) if bad else 'nothing'}: OpenOCD takes only "
                    "letters, digits and _.+-/:=,@ here")
    return text


def qemu_option_value(text: str) -> str:
    """``text`` as a value inside a QEMU option list (``-chardev socket,path=...``): QEMU reads
    ``,,`` as a literal comma."""
    if "\0" in text:
        raise _fail(f"{text!r} holds a NUL character, which QEMU cannot take")
    return text.replace(",", ",,")


# --- Jinja2 environments, one per file kind --------------------------------------------------

#: The filters of each kind's environment.
FILTERS = {
    "c": {"c_string": c_string, "c_identifier": c_identifier, "c_comment": c_comment},
    "make": {"make_word": make_word, "make_words": make_words, "make_path": make_path,
             "make_paths": make_paths},
    "cmake": {"cmake_argument": cmake_argument},
    "kconfig": {"kconfig_value": kconfig_value},
    "ld": {"ld_comment": ld_comment},
}


def kind_of(template_name: str) -> str:
    """The file kind of a template, from its name; ServerError for a name of no known kind."""
    name = Path(template_name).name
    if name.endswith((".c.j2", ".h.j2")):
        return "c"
    if name == "Makefile.j2" or name.endswith(".mk.j2"):
        return "make"
    if name == "CMakeLists.txt.j2" or name.endswith(".cmake.j2"):
        return "cmake"
    if name.endswith(".conf.j2"):
        return "kconfig"
    if name.endswith(".ld.j2"):
        return "ld"
    raise _fail(f"template {template_name}: no file kind for this name (*.c.j2, *.h.j2, "
                "Makefile.j2, CMakeLists.txt.j2, *.conf.j2, *.ld.j2); rename it")


def _finalizer(kind: str) -> Any:
    inert, text_type = INERT[kind], _TEXT[kind]
    filters = ", ".join(FILTERS[kind])

    @jinja2.pass_context
    def finalize(context: Any, value: Any) -> Any:
        if isinstance(value, jinja2.Undefined):
            # A missing variable raises (StrictUndefined); ``x if c`` without else renders ''.
            return str(value)
        if isinstance(value, Quoted):
            if isinstance(value, text_type):
                return value
        elif isinstance(value, int) and not isinstance(value, bool):
            return value
        elif isinstance(value, str) and inert.fullmatch(value):
            return value
        raise _fail(f"template {context.name}: {value!r} cannot be written into a {kind} file "
                    f"as it is; pass it through {filters}")
    return finalize


class Environments:
    """One Jinja2 environment per file kind over the same template folders; :meth:`get_template`
    picks the one a template's name calls for (:func:`kind_of`)."""

    def __init__(self, *template_dirs: Path) -> None:
        loader = jinja2.FileSystemLoader([str(d) for d in (*template_dirs, JINJA_DIR)])
        self.by_kind: dict[str, jinja2.Environment] = {}
        for kind in INERT:
            env = jinja2.Environment(
                loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                trim_blocks=True, lstrip_blocks=True, autoescape=False,
                finalize=_finalizer(kind),
            )
            env.filters.update(FILTERS[kind])
            self.by_kind[kind] = env

    def get_template(self, name: str) -> jinja2.Template:
        return self.by_kind[kind_of(name)].get_template(name)


def environment(*template_dirs: Path) -> Environments:
    """The environments over ``template_dirs`` (searched first) and :data:`JINJA_DIR`."""
    return Environments(*template_dirs)

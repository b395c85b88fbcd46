"""The C runtime's naming rule (crt/README.md): every name crt/include declares, and every global
symbol of the compiled libraries, either follows the rule or is in the README's compatibility
list of names TVM 0.15 defines.

The rule, by kind of name:
  functions and global data  TVMCrt<Module>_<Verb>   TVMCrtFramer_Init, TVMCrtSession_Start
  types and struct tags      TVMCrt<Name>            TVMCrtFramer, TVMCrtAotModel
  enumeration constants      kTvm<Name>              kTvmSessionNormal, kTvmErrorNoError
  macros                     TVM_CRT_<NAME>          TVM_CRT_MAX_NDIM, TVM_CRT_LOG_ERROR

The headers are read as text: comments and preprocessor lines removed, then each top-level
declaration classified. crt/include/dlpack is DLPack's header, neither ours nor TVM's.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from c_build import run_make
from conftest import REPO_ROOT, require_tool

CRT_DIR = REPO_ROOT / "crt"
README = CRT_DIR / "README.md"
COMPAT_HEADING = "## Compatibility names"

RULES = {
    "function": re.compile(r"TVMCrt[A-Z][A-Za-z0-9]*_[A-Z][A-Za-z0-9]*"),
    "data": re.compile(r"TVMCrt[A-Z][A-Za-z0-9]*_[A-Z][A-Za-z0-9]*"),
    "type": re.compile(r"TVMCrt[A-Z][A-Za-z0-9]*"),
    "constant": re.compile(r"kTvm[A-Z][A-Za-z0-9]*"),
    "macro": re.compile(r"TVM_CRT_[A-Z0-9_]*[A-Z0-9]"),
}

# What the runtime may call besides itself and its port: the C99 library (string, formatted
# output, a few of stdlib and math) and the compiler's own runtime (names starting "__").
C99_LIBRARY = frozenset(
    "memchr memcmp memcpy memmove memset strchr strcmp strcpy strlen strncmp strncpy strnlen "
    "strrchr strstr snprintf sprintf vsnprintf vsprintf printf fprintf fputs fwrite abort abs "
    "labs llabs div ldiv strtol strtoul strtoll strtoull exit _exit floor ceil fabs fabsf sqrt "
    "sqrtf lround lroundf llround llroundf roundf round".split()
)

_LEXEME = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*', re.S)
_ATTRIBUTE = re.compile(r"__attribute__\s*\(\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)\)")
_IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass
class Declared:
    """Names one header declares, by kind (see RULES)."""

    names: dict[str, set[str]] = field(
        default_factory=lambda: {kind: set() for kind in RULES}
    )

    def add(self, kind: str, name: str) -> None:
        self.names[kind].add(name)


def _strip_comments(text: str) -> str:
    """Comments blanked (line numbers kept), string and character literals emptied (nothing in
    them declares anything), continuation lines joined."""
    def blank(match: re.Match[str]) -> str:
        lexeme = match.group(0)
        if lexeme.startswith(("/*", "//")):
            return re.sub(r"[^\n]", " ", lexeme)
        return lexeme[0] * 2

    return _LEXEME.sub(blank, text).replace("\\\n", " ")


def _split_top_level(code: str) -> list[str]:
    """Statements at brace depth 0, each ending with ';' (bodies kept inside them)."""
    statements, depth, current = [], 0, []
    for ch in code:
        current.append(ch)
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == ";" and depth == 0:
            statements.append(" ".join("".join(current).split()))
            current = []
    return statements


def _enum_constants(body: str) -> list[str]:
    items, depth, current = [], 0, []
    for ch in body + ",":
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            item = "".join(current).strip()
            if item:
                items.append(_IDENT.match(item).group(0))
            current = []
        else:
            current.append(ch)
    return items


def _without_bodies(statement: str) -> tuple[str, list[tuple[str, str]]]:
    """The statement with every top-level {...} replaced by {}, and those bodies, each with the
    keyword that opens it ("struct", "union", "enum", or "" for an initializer)."""
    out: list[str] = []
    bodies: list[tuple[str, str]] = []
    body: list[str] = []
    depth, keyword = 0, ""
    for ch in statement:
        if ch == "{":
            depth += 1
            if depth == 1:
                opener = re.search(r"\b(struct|union|enum)\b[^;{}=]*$", "".join(out))
                keyword = opener.group(1) if opener else ""
                out.append("{")
                body = []
                continue
        elif ch == "}":
            depth -= 1
            if depth == 0:
                bodies.append((keyword, "".join(body)))
                out.append("}")
                continue
        (body if depth else out).append(ch)
    return "".join(out), bodies


def declared_names(header: Path) -> Declared:
    """Every name ``header`` declares: macros (not its include guard), types and tags,
    enumeration constants, functions and global data."""
    text = _strip_comments(header.read_text())
    found = Declared()
    guard = re.search(r"^\s*#\s*ifndef\s+(\w+)\s*\n\s*#\s*define\s+\1\b", text, re.M)
    code_lines, skip = [], 0
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            directive = stripped[1:].strip()
            if skip:
                skip += directive.startswith("if")
                skip -= directive.startswith("endif")
            elif directive.startswith("ifdef __cplusplus"):
                skip = 1
            define = re.match(r"define\s+(\w+)", directive)
            if define and not skip and (guard is None or define.group(1) != guard.group(1)):
                found.add("macro", define.group(1))
            continue
        if not skip:
            code_lines.append(line)
    for statement in _split_top_level(_ATTRIBUTE.sub(" ", "\n".join(code_lines))):
        flat, bodies = _without_bodies(statement)
        for tag in re.findall(r"\b(?:struct|union|enum)\s+(\w+)\s*\{", flat):
            found.add("type", tag)
        for keyword, body in bodies:
            if keyword == "enum":
                for constant in _enum_constants(body):
                    found.add("constant", constant)
        if flat.startswith("typedef "):
            pointer = re.search(r"\(\s*\*\s*(\w+)\s*\)\s*\(", flat)
            name = pointer.group(1) if pointer else re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*;$",
                                                              flat).group(1)
            found.add("type", name)
            tag = re.match(r"typedef\s+(?:const\s+)?(?:struct|union|enum)\s+(\w+)\b(?!\s*\{)", flat)
            if tag:
                found.add("type", tag.group(1))
            continue
        if re.fullmatch(r"(?:struct|union|enum)\s+\w+\s*(?:\{\})?\s*;", flat):
            if not bodies:
                found.add("type", flat.split()[1].rstrip(";{}"))
            continue
        call = re.search(r"(\w+)\s*\(", flat)
        if call and not re.search(r"\(\s*\*", flat[: call.end() + 2]):
            found.add("function", call.group(1))
            continue
        data = re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*(?:=[^;]*)?;$", flat)
        if data:
            found.add("data", data.group(1))
    return found


def public_headers(crt_dir: Path = CRT_DIR) -> list[Path]:
    return sorted((crt_dir / "include" / "tvm").rglob("*.h"))


def compatibility_names(readme: Path = README) -> set[str]:
    """The names in the fenced block under the README's compatibility heading."""
    text = readme.read_text()
    assert COMPAT_HEADING in text, f"{readme} has no '{COMPAT_HEADING}' section"
    section = text.split(COMPAT_HEADING, 1)[1]
    block = re.search(r"^```[^\n]*\n(.*?)^```", section, re.S | re.M)
    assert block, f"{readme}: no fenced block under '{COMPAT_HEADING}'"
    names: set[str] = set()
    for line in block.group(1).splitlines():
        names.update(line.split("#", 1)[0].split())
    return names


def naming_violations(crt_dir: Path = CRT_DIR, compat: set[str] | None = None) -> list[str]:
    """'<header>: <kind> <name>' for every declared name that neither follows the rule nor is
    in the compatibility list."""
    compat = compatibility_names(crt_dir / "README.md") if compat is None else compat
    bad = []
    for header in public_headers(crt_dir):
        rel = header.relative_to(crt_dir / "include")
        for kind, names in declared_names(header).names.items():
            for name in sorted(names):
                if name not in compat and not RULES[kind].fullmatch(name):
                    bad.append(f"{rel}: {kind} {name}")
    return bad


def all_declared(crt_dir: Path = CRT_DIR) -> dict[str, set[str]]:
    total: dict[str, set[str]] = {kind: set() for kind in RULES}
    for header in public_headers(crt_dir):
        for kind, names in declared_names(header).names.items():
            total[kind] |= names
    return total


# ---- the parser itself, on a header written for it -------------------------------------------

def test_parser_finds_every_kind_of_declaration(tmp_path: Path) -> None:
    header = tmp_path / "probe.h"
    header.write_text(
        "#ifndef PROBE_H_\n#define PROBE_H_\n#include <stdint.h>\n"
        "/* void CommentedOut(void); */\n"
        "#define TVM_CRT_GOOD 1  // a comment with f(x);\n"
        "#define BAD_MACRO(x) \\\n  ((x) + 1)\n"
        "#ifdef __cplusplus\nextern \"C\" {\n#endif\n"
        "typedef struct TagOne { int a; struct { int b; } inner; } TypeOne;\n"
        "typedef struct Opaque* OpaqueHandle;\n"
        "typedef enum { kTvmGood = 1, kBadConstant = DEFINE(2, 3), } EnumType;\n"
        "typedef int (*FuncPtr)(void* ctx, const char* s);\n"
        "typedef uint16_t small_t;\n"
        "struct Plain { FuncPtr f; };\n"
        "struct Forward;\n"
        "const char* FunctionOne(const char* s, int (*cb)(int));\n"
        "void Noreturn(int code) TVM_CRT_NORETURN;\n"
        "void Printf(const char* fmt, ...)\n#if defined(__GNUC__)\n"
        "    __attribute__((format(printf, 1, 2)))\n#endif\n    ;\n"
        "int64_t Weak(void) __attribute__((weak));\n"
        "extern const char* global_name;\nextern int table[4];\n"
        "const char* kLiteral = \"not(a) call; /* nor a comment */\";\n"
        "#ifdef __cplusplus\n}\n#endif\n#endif  /* PROBE_H_ */\n"
    )
    names = declared_names(header).names
    assert names["macro"] == {"TVM_CRT_GOOD", "BAD_MACRO"}
    assert names["type"] == {"TagOne", "TypeOne", "Opaque", "OpaqueHandle", "EnumType", "FuncPtr",
                             "small_t", "Plain", "Forward"}
    assert names["constant"] == {"kTvmGood", "kBadConstant"}
    assert names["function"] == {"FunctionOne", "Noreturn", "Printf", "Weak"}
    assert names["data"] == {"global_name", "table", "kLiteral"}


def test_rules_tell_ours_from_the_rest() -> None:
    assert RULES["function"].fullmatch("TVMCrtFramer_Init")
    assert RULES["function"].fullmatch("TVMCrtNDArray_ReleaseAll")
    for name in ("TVMFramerInit", "TVMCrtFramerInit", "TVMCrt_Init", "tvmcrt_framer_init",
                 "TVMCrtFramer_init", "StackMemoryManager_Init"):
        assert not RULES["function"].fullmatch(name), name
    assert RULES["type"].fullmatch("TVMCrtFramer") and not RULES["type"].fullmatch("tvm_framer_t")
    assert RULES["constant"].fullmatch("kTvmSessionNormal")
    assert not RULES["constant"].fullmatch("kTVMMlperfTinyScoreVector")
    assert RULES["macro"].fullmatch("TVM_CRT_MAX_NDIM")
    assert not RULES["macro"].fullmatch("TVM_SESSION_VERSION")


# ---- the headers ---------------------------------------------------------------------------

def test_every_name_in_crt_include_follows_the_rule_or_is_listed() -> None:
    assert naming_violations() == []


def test_the_compatibility_list_names_only_declared_names_outside_the_rule() -> None:
    """Every listed name exists in crt/include (the list does not rot) and breaks the rule (a
    name of ours never needs listing), so the list is exactly TVM's names that we keep."""
    declared = all_declared()
    everything = set().union(*declared.values())
    compat = compatibility_names()
    assert sorted(compat - everything) == [], "listed but declared nowhere in crt/include"
    ours = {n for kind, names in declared.items() for n in names if RULES[kind].fullmatch(n)}
    assert sorted(compat & ours) == [], "these follow the rule; drop them from the list"


def test_the_check_rejects_the_old_names(tmp_path: Path) -> None:
    """A header with names of the five old schemes fails the check."""
    include = tmp_path / "include" / "tvm" / "runtime" / "crt"
    include.mkdir(parents=True)
    (include / "old.h").write_text(
        "#include <stdint.h>\ntypedef struct tvm_framer { int x; } tvm_framer_t;\n"
        "void TVMFramerInit(tvm_framer_t* f);\nint TVMAotExecutor_Create(void);\n"
        "int PageMemoryManager_NumPages(void);\nint MicroTVMRpcServerFeed(void);\n"
        "#define TVM_SESSION_VERSION 1\n"
    )
    assert naming_violations(tmp_path, compat={"MicroTVMRpcServerInit"}) == [
        "tvm/runtime/crt/old.h: function MicroTVMRpcServerFeed",
        "tvm/runtime/crt/old.h: function PageMemoryManager_NumPages",
        "tvm/runtime/crt/old.h: function TVMAotExecutor_Create",
        "tvm/runtime/crt/old.h: function TVMFramerInit",
        "tvm/runtime/crt/old.h: type tvm_framer",
        "tvm/runtime/crt/old.h: type tvm_framer_t",
        "tvm/runtime/crt/old.h: macro TVM_SESSION_VERSION",
    ]


# ---- the compiled libraries ------------------------------------------------------------------

def _symbols(nm: str, archive: Path, *flags: str) -> set[str]:
    out = subprocess.run([nm, *flags, str(archive)], capture_output=True, text=True, check=True)
    return {line.split()[-1] for line in out.stdout.splitlines()
            if line.strip() and not line.endswith(":") and len(line.split()) >= 2}


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    require_tool("cc")
    build = tmp_path_factory.mktemp("crt-naming")
    proc = run_make(CRT_DIR, build, "all")
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    archives = sorted(build.glob("libtvm_*.a"))
    assert archives, "crt/Makefile built no library"
    return archives


def test_every_global_symbol_of_the_libraries_follows_the_rule_or_is_listed(
    libraries: list[Path],
) -> None:
    nm = require_tool("nm")
    compat = compatibility_names()
    bad = {}
    for archive in libraries:
        for symbol in _symbols(nm, archive, "-g", "--defined-only"):
            if symbol not in compat and not RULES["function"].fullmatch(symbol):
                bad.setdefault(archive.name, []).append(symbol)
    assert bad == {}


def test_the_libraries_call_only_themselves_their_port_and_the_c_library(
    libraries: list[Path],
) -> None:
    """An undefined symbol is defined by another library, declared in crt/include (what the port
    or the model glue supplies, so named by the checks above) or part of the C99 library."""
    nm = require_tool("nm")
    defined = set().union(*(_symbols(nm, a, "-g", "--defined-only") for a in libraries))
    undefined = set().union(*(_symbols(nm, a, "-u") for a in libraries))
    declared = all_declared()["function"]
    unexplained = sorted(
        s for s in undefined - defined
        if s not in declared and s not in C99_LIBRARY and not s.startswith("_")
    )
    assert unexplained == []

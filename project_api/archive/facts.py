"""What each file of a module says about its tensors (the C header, the C sources,
``metadata.json``, the Relay text), as separate facts before they are reconciled.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from project_api.archive import dtypes, relay
from project_api.errors import MLFError

_LOG = logging.getLogger(__name__)


_SOURCE_SUFFIXES = (".c", ".cc", ".cpp")

_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def sanitize_c_name(name: str) -> str:
    """The C identifier TVM derives from a tensor or module name: each non-alphanumeric -> ``_``."""
    return re.sub(r"[^0-9A-Za-z]", "_", name)


def dtype_bits(dtype: str) -> int:
    """Storage bits of one element of ``dtype`` (``bool`` is stored as a byte; lanes included)."""
    try:
        dt = dtypes.parse(dtype)
    except dtypes.DTypeError as exc:
        raise MLFError(str(exc)) from None
    return dt.bits * dt.lanes


def tensor_size_bytes(shape: Iterable[int], dtype: str) -> int:
    """Bytes a dense tensor occupies: ``ceil(prod(shape) * bits / 8)``, as TVM computes it."""
    return (math.prod(shape) * dtype_bits(dtype) + 7) // 8


@dataclass
class _Fact:
    """What one source knows about a tensor."""

    name: str
    dtype: str | None = None
    size: int | None = None
    shape: tuple[int, ...] | None = None
    quantization: dict[str, Any] | None = None
    origin: str | None = None  # "inferred": Relay types carried through the body
    partial: tuple[int | None, ...] | None = None  # a Relay shape with unknown (?) dimensions
    #: the header's member where metadata.json names it (our emitter, where it is not the
    #: sanitized name: ``14`` -> ``t_14``, ``int`` -> ``int_``, collisions ``_2``)
    c_name: str | None = None

    @property
    def c(self) -> str:
        """The tensor's C name: the one recorded, else TVM's sanitized name."""
        return self.c_name or sanitize_c_name(self.name)


@dataclass
class _Header:
    path: Path
    inputs: list[str]  # c names in struct order
    outputs: list[str]
    input_sizes: dict[str, int]  # c name -> bytes
    output_sizes: dict[str, int]
    input_names: dict[str, str]  # c name -> name from the doc comments (sanitized since TVM 0.11)
    output_names: dict[str, str]
    workspace_size: int | None
    has_run: bool
    pools: dict[str, int | None] = field(default_factory=dict)
    devices: list[str] = field(default_factory=list)
    io_in_pools: bool = False


@dataclass
class _Relay:
    """What a Relay text's ``def @main`` says, as far as it could be read."""

    path: Path | None = None
    inputs: list[_Fact] | None = None  # every parameter, weights included, in order
    outputs: list[_Fact] | None = None  # by position, named output / output0, output1, ...
    output_names: list[str] | None = None  # from the attribute output_tensor_names=[...]
    last_op: str | None = None  # the operator of the body's final call
    unknown_ops: list[str] = field(default_factory=list)
    failure: str | None = None  # why it gives no output types, for messages


@dataclass
class _Draft:
    """A tensor while its facts are gathered."""

    kind: str
    name: str
    c_name: str
    dtype: str | None = None
    size: int | None = None
    size_from: str | None = None
    shape: tuple[int, ...] | None = None
    quantization: dict[str, Any] | None = None
    relay_fact: _Fact | None = None
    spec: bool = False
    inferred: list[str] = field(default_factory=list)  # "dtype", "shape" from the Relay body
    agrees: str | None = None  # an inferred size confirmed by io_size_bytes
    notes: list[str] = field(default_factory=list)


def _bytes(n: int) -> str:
    return "1 byte" if n == 1 else f"{n} bytes"


def _fold_case(table: dict[str, _Fact], order: list[str]) -> None:
    """Tolerate names that differ from the positional list's only in case."""
    for c in order:
        if c not in table:
            folded = [k for k in table if k.lower() == c.lower() and k not in order]
            if len(folded) == 1:
                table[c] = table.pop(folded[0])


def _cpu_family(cpu: str) -> str | None:
    m = re.match(r"cortex-([amr])\d", cpu)
    if m:
        return f"cortex-{m.group(1)}"
    if cpu.startswith(("arm", "star-mc", "neoverse")):
        return "arm"
    return None


def _internal_pool_bytes(texts: dict[Path, str]) -> int:
    """Bytes of the workspace pools the C declares itself: TVM's USMP writes an internal pool as
    ``__attribute__((section(".bss.noinit.tvm"), aligned(N))) static uint8_t <pool>[<bytes>];``
    (src/target/source/source_module.cc, GenerateWorkspaceBuffer) and passes ``&<pool>`` to the
    main function."""
    total = 0
    seen: set[str] = set()
    pool_re = re.compile(r"section\s*\(\s*\"\.bss\.noinit\.tvm\"\s*\)[^;{]*?static\s+uint8_t\s+"
                         r"(\w+)\s*\[\s*(\d+)\s*\]\s*;", re.S)
    plain_re = re.compile(r"^\s*static\s+uint8_t\s+(\w+)\s*\[\s*(\d+)\s*\]\s*;", re.M)
    for text in texts.values():
        for m in pool_re.finditer(text):
            if m.group(1) not in seen:
                seen.add(m.group(1))
                total += int(m.group(2))
        for m in plain_re.finditer(text):
            name = m.group(1)
            if name not in seen and re.search(r"&\s*" + re.escape(name) + r"\b", text):
                seen.add(name)
                total += int(m.group(2))
    return total


_LINKED_CASE = re.compile(
    r"case\s+(\d+)\s*:\s*\(\s*\(\s*uint64_t\s*\*\s*\)\s*out_ret_value\s*\)\s*\[\s*0\s*\]"
    r"\s*=\s*\(\s*uint64_t\s*\)\s*\(\s*uintptr_t\s*\)\s*(\w+)\s*;")


def _linked_params(texts: dict[Path, str]) -> dict[int, str]:
    """Storage id -> array of TVM 0.8's linked parameters: ``_lookup_linked_param``'s switch
    (src/target/source/codegen_c_host.cc ``LinkParameters``: ``case <sid>:`` returns
    ``__tvm_param__<name>``)."""
    found: dict[int, str] = {}
    for text in texts.values():
        m = re.search(r"\b_lookup_linked_param\s*\([^;{]*\)\s*\{", text)
        if m is None:
            continue
        for case in _LINKED_CASE.finditer(text, m.end()):
            found[int(case.group(1))] = case.group(2)
    return found


_REGISTRY_RE = re.compile(
    r"TVMFuncRegistry\s+_tvm_func_registry\s*=\s*\{\s*\"((?:[^\"\\]|\\.)*)\"", re.S)


def _c_string_bytes(literal: str) -> bytes:
    """The bytes of a C string literal's body (octal, hex and character escapes)."""
    out = bytearray()
    i = 0
    simple = {"n": 10, "t": 9, "r": 13, "\\": 92, '"': 34, "'": 39, "?": 63, "0": 0,
              "a": 7, "b": 8, "f": 12, "v": 11}
    while i < len(literal):
        ch = literal[i]
        if ch != "\\":
            out += ch.encode("utf-8")
            i += 1
            continue
        nxt = literal[i + 1 : i + 2]
        m = re.match(r"[0-7]{1,3}", literal[i + 1 :])
        if m:
            out.append(int(m.group(0), 8) & 0xFF)
            i += 1 + len(m.group(0))
        elif nxt == "x":
            h = re.match(r"[0-9A-Fa-f]+", literal[i + 2 :])
            out.append(int(h.group(0), 16) & 0xFF if h else 0)
            i += 2 + (len(h.group(0)) if h else 0)
        else:
            out.append(simple.get(nxt, ord(nxt) if nxt else 0))
            i += 2
    return bytes(out)


def _registry_names(texts: dict[Path, str]) -> list[str] | None:
    """The function names of the system-library registry in the C (src/target/source/
    source_module.cc ``CreateFuncRegistry``; the names string of src/target/
    func_registry_generator.cc: the count, 1 byte in TVM 0.8 and 2 little-endian bytes from
    0.9, then each name NUL-terminated), or None when no C file holds one."""
    for text in texts.values():
        m = _REGISTRY_RE.search(text)
        if m is None:
            continue
        raw = _c_string_bytes(m.group(1))
        for width in (2, 1):
            if len(raw) < width:
                continue
            count = int.from_bytes(raw[:width], "little")
            body = raw[width:]
            names = body.split(b"\0")
            if names and names[-1] == b"":
                names = names[:-1]
            if len(names) == count and body.endswith(b"\0") or count == 0 == len(body):
                return [n.decode("utf-8", "replace") for n in names]
        _LOG.debug("_tvm_func_registry: its names string does not parse")
        return None
    return None


def _natural_key(item: Path | str) -> list[Any]:
    text = item.name if isinstance(item, Path) else item
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _strip_c_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


class _Reports(Protocol):
    """What reads a module and reports a bad field: :class:`_ModuleParser`."""

    def error(self, what: str) -> MLFError: ...


#: Largest byte count a size field of metadata.json may state: a 32-bit target's address space.
MAX_SIZE_FIELD = (1 << 32) - 1


def _int_field(entry: dict[str, Any], key: str, parser: _Reports, default: int | None = 0) -> Any:
    value = entry.get(key, default)
    if value is None and default is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise parser.error(f"memory.functions.main[].{key} must be a non-negative integer; "
                           f"got {str(value)[:200]}")
    if value > MAX_SIZE_FIELD:
        raise parser.error(f"memory.functions.main[].{key} is {value} bytes, more than a 32-bit "
                           f"address space ({MAX_SIZE_FIELD}); re-export the model")
    return value


def _shape_from_json(value: Any, parser: _Reports, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value
    ):
        raise parser.error(f"{what}: \"shape\" must be a list of non-negative integers")
    return tuple(value)


def _quantization_from_json(value: Any, parser: _Reports, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise parser.error(f"{what}: \"quantization\" must be an object")
    scale, zero_point = value.get("scale"), value.get("zero_point")
    if not isinstance(scale, list) or not scale or not all(
        isinstance(s, (int, float)) and not isinstance(s, bool) for s in scale
    ):
        raise parser.error(f"{what}: quantization \"scale\" must be a non-empty list of numbers")
    if not isinstance(zero_point, list) or len(zero_point) != len(scale) or not all(
        isinstance(z, int) and not isinstance(z, bool) for z in zero_point
    ):
        raise parser.error(
            f"{what}: quantization \"zero_point\" must be a list of integers as long as \"scale\""
        )
    bad = [s for s in scale if not math.isfinite(s) or s <= 0]
    if bad:
        raise parser.error(f"{what}: quantization \"scale\" {bad[0]!r} is not a finite positive "
                           "number; re-export the model with its real scales")
    result = dict(value)
    result["scale"] = [float(s) for s in scale]
    return result


def _unprinted_name(printed: str) -> str:
    """The variable name behind a printed one: TVM's Relay printer puts ``v`` in front of names
    that do not start with a letter (``_param_1`` -> ``%v_param_1``)."""
    if printed.startswith("v") and len(printed) > 1 and not printed[1].isalpha():
        return printed[1:]
    return printed


def _parse_relay(path: Path, where: str) -> _Relay:
    """What ``def @main`` of a Relay text says (:func:`project_api.archive.relay.read_main`): its
    parameters' declared types, ``output_tensor_names``, and the output types (the printed
    ``-> T``, else inferred through the body). Never raises: what cannot be read is logged at
    debug level and stays unknown."""
    result = _Relay(path=path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        _LOG.debug("%s: %s unreadable (%s)", where, path.name, exc)
        result.failure = f"{path.name} is unreadable ({exc})"
        return result
    try:
        main = relay.read_main(text, f"{where}: {path.name}")
    except relay.RelayError as exc:
        _LOG.debug("%s: %s is not Relay text we can read (%s); its types are not used",
                   where, path.name, exc)
        result.failure = f"{path.name} could not be read ({exc})"
        return result
    except Exception as exc:  # noqa: BLE001 - a Relay text never rejects an archive
        _LOG.debug("%s: reading %s failed (%s: %s); its types are not used", where, path.name,
                   type(exc).__name__, exc)
        result.failure = f"{path.name} could not be read ({type(exc).__name__})"
        return result
    inputs = []
    for p in main.params:
        t = p.annotation if isinstance(p.annotation, relay.TensorType) else None
        if t is None or t.static_shape is None:
            _LOG.debug("%s: %s: @main parameter %r has type %s; shape unknown", where,
                       path.name, p.name, p.annotation)
        inputs.append(_Fact(p.name, dtype=t.dtype if t else None,
                            shape=t.static_shape if t else None,
                            partial=t.shape if t and t.static_shape is None else None))
    result.inputs = inputs
    result.output_names = main.output_names
    result.last_op = main.last_op
    result.unknown_ops = main.unknown_ops
    declared = main.declared if main.has_declared else None
    inferred = main.result
    if declared is not None and inferred is not None and declared != inferred:
        _LOG.debug("%s: %s: @main is declared to return %s; its body gives %s", where,
                   path.name, declared, inferred)
    chosen, origin = (declared, "declared") if declared is not None else (inferred, "inferred")
    if chosen is None:
        _LOG.debug("%s: %s: the type @main returns is not known (%s)", where, path.name,
                   "it uses " + ", ".join(main.unknown_ops) if main.unknown_ops
                   else "no return type, body not typed")
        result.failure = (f"{path.name} does not type @main's result"
                          + (f" (it uses {', '.join(main.unknown_ops)}, whose types are not "
                             "inferred)" if main.unknown_ops else ""))
        return result
    tensors = relay.flatten(chosen)
    if isinstance(chosen, relay.TupleType):
        names = [f"output{i}" for i in range(len(tensors))]
    else:
        names = ["output"]
    outputs = []
    for n, t in zip(names, tensors, strict=True):
        fact = _Fact(n, dtype=t.dtype if t else None, shape=t.static_shape if t else None,
                     partial=t.shape if t and t.static_shape is None else None)
        if origin == "inferred" and (fact.dtype or fact.shape is not None):
            fact.origin = "inferred"
        outputs.append(fact)
    result.outputs = outputs
    return result

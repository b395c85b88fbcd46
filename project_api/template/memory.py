"""Memory report of a linked firmware, from its GNU ld map file: flash and RAM use split into
runtime, RPC server, model code, model weights, activations and application, against the
board's regions, and the largest parts of each. Any template that links with GNU ld can use it
(the STM32 template does).

ld writes the map even when the firmware does not fit its regions, so the report is written
then too (:func:`write_report` with ``overflow``): that is when it helps most."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

CATEGORIES = ("runtime", "rpc server", "model code", "model weights", "activations",
              "application")
#: Output sections that live in flash, in RAM, or in both (initialised data).
_FLASH = (".isr_vector", ".text", ".ARM.extab", ".ARM.exidx", ".init_array", ".fini_array")
_BOTH = (".data",)
_RAM = (".bss", ".stack")
_OUTPUT = re.compile(r"^(\.[\w.]+)(?:\s+0x([0-9a-f]+)\s+0x([0-9a-f]+))?(?:\s.*)?$")
_INPUT = re.compile(r"^ (?P<name>[\w.*$]+)?\s+0x(?P<addr>[0-9a-f]+)\s+0x(?P<size>[0-9a-f]+)"
                    r"(?:\s+(?P<obj>\S.*))?$")
#: Where the runtime's model workspace and RPC pool live (main.c; crt/src/platform).
_ACTIVATIONS = ("g_model_workspace",)
#: Symbol prefix of the ai_ API's activation pools (template/jinja/ai_sample.c.j2).
_ACTIVATION_POOL_PREFIX = "ai_activations_"


#: What some runtime and application symbols are, for the largest-parts list.
_KNOWN = {"g_pool": "the workspace_size_bytes pool", "g_model_workspace": "the model's workspace",
          "g_rx_ring": "the UART receive ring", "g_arena_storage": "the RPC server's arena",
          "g_receive_storage": "the RPC receive buffer"}
#: Where the main stack goes in the largest-parts list (the .stack output section).
STACK = "the main stack (stack_size_bytes)"


@dataclass(frozen=True)
class Part:
    """One input section of the map: what it is, its size and where it goes."""

    name: str  #: the symbol (from -ffunction-sections/-fdata-sections) or the section
    obj: str  #: the object file, relative to the build folder
    size: int
    category: str
    flash: bool  #: takes flash (code, constants, initial values of .data)
    ram: bool  #: takes RAM

    def describe(self) -> str:
        what = _KNOWN.get(self.name)
        where = f"{self.category}, {self.obj}" if self.obj else self.category
        return f"{self.name} {self.size} bytes ({what + ', ' if what else ''}{where})"


@dataclass
class MemoryReport:
    flash: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    ram: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    parts: list[Part] = field(default_factory=list)

    def line(self, board: str, flash_bytes: int, ram_bytes: int) -> str:
        def part(name: str, used: dict[str, int], total: int) -> str:
            sizes = ", ".join(f"{k} {v}" for k, v in used.items() if v)
            return (f"{name} {sum(used.values())} of {total} bytes "
                    f"({100.0 * sum(used.values()) / total:.1f}%: {sizes})")
        return (f"memory of {board}: {part('flash', self.flash, flash_bytes)}; "
                f"{part('RAM', self.ram, ram_bytes)}")

    def largest(self, region: str, n: int = 3) -> list[Part]:
        """The ``n`` largest parts in ``region`` ("flash" or "ram"), largest first."""
        inside = [p for p in self.parts if (p.flash if region == "flash" else p.ram)]
        return sorted(inside, key=lambda p: -p.size)[:n]


def category(section: str, obj: str) -> str:
    """Which part of the firmware an input section of ``obj`` belongs to."""
    if any(section.endswith("." + sym) for sym in _ACTIVATIONS) or \
            section.rsplit(".", 1)[-1].startswith(_ACTIVATION_POOL_PREFIX):
        return "activations"
    if "crt/src/rpc_server/" in obj or "crt/src/rpc_common/" in obj:
        return "rpc server"
    if "crt/src/" in obj:
        return "runtime"
    if "model/codegen/" in obj:
        if section.startswith(".rodata"):
            return "model weights"
        if section.startswith((".bss", ".data", "COMMON")):
            return "activations"
        return "model code"
    return "application"


def parse_map(map_path: Path) -> MemoryReport:
    """Sum the input sections of the map file's "Linker script and memory map" per category."""
    report = MemoryReport()
    lines = Path(map_path).read_text(errors="replace").splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("Linker script and"))
    except StopIteration:
        raise ValueError(f"{map_path} is not a GNU ld map file") from None
    output = ""
    pending: str | None = None
    for line in lines[start:]:
        m = _OUTPUT.match(line)
        if m:
            output = m.group(1)
            if output == ".stack" and m.group(3):
                size = int(m.group(3), 16)
                report.ram["application"] += size
                report.parts.append(Part(STACK, "", size, "application", False, True))
            continue
        if pending is None and re.match(r"^ [\w.*$]+$", line) and not line.startswith(" *"):
            pending = line.strip()
            continue
        m = _INPUT.match(line)
        if m is None or m.group("obj") is None:
            pending = None
            continue
        name = m.group("name") or pending or ""
        pending = None
        size = int(m.group("size"), 16)
        if size == 0 or name in ("*fill*",) or output == ".stack":
            continue
        obj = m.group("obj")
        kind = category(name, obj)
        in_flash = output.startswith(_FLASH) or output in _BOTH
        in_ram = output in _BOTH or output in _RAM
        if in_flash:
            report.flash[kind] += size
        if in_ram:
            report.ram[kind] += size
        if in_flash or in_ram:
            report.parts.append(Part(_symbol(name), _short(obj), size, kind, in_flash, in_ram))
    return report


def _symbol(section: str) -> str:
    """``op9_fully_connected_w`` of ``.rodata.op9_fully_connected_w``; the section otherwise."""
    m = re.match(r"^\.(?:text|rodata|data|bss)\.(.+)$", section)
    return m.group(1) if m else section


def _short(obj: str) -> str:
    """An object file's path from the project's sources (``build/obj/`` dropped)."""
    obj = obj.strip()
    return obj.split("build/obj/", 1)[1] if "build/obj/" in obj else obj


def overflow_hint(region: str, options: dict) -> str:
    """What to change when ``region`` ("flash"/"ram", or ld's "FLASH"/"RAM") overflows."""
    if region.lower() == "ram":
        knobs = [f"{k} (now {options[k]})" for k in ("workspace_size_bytes", "stack_size_bytes",
                                                     "max_packet_size_bytes")
                 if options.get(k) is not None]
        return (f"lower {', '.join(knobs) or 'the RAM the application reserves'}, or pick a "
                "board with more RAM")
    return ("the code and weights need more flash than the board has: pick a board with more "
            "flash, or a smaller model")


def write_report(build_dir: Path, board_name: str, board: dict,
                 overflow: dict[str, int] | None = None) -> tuple[str, MemoryReport]:
    """Parse ``build_dir/firmware.map``, write ``memory.txt`` and ``memory.json``; return the
    summary line and the report. ``overflow`` (region -> bytes, from ld's "region `RAM'
    overflowed by N bytes") records a firmware that does not fit, with each region's largest
    parts."""
    report = parse_map(Path(build_dir) / "firmware.map")
    line = report.line(board_name, board["memory"]["flash"]["length"],
                       board["memory"]["ram"]["length"])
    lines = [line]
    largest = {region: report.largest(region) for region in ("flash", "ram")}
    for region, by in (overflow or {}).items():
        lines.append(f"does not fit: {region} overflows by {by} bytes")
    for region, parts in largest.items():
        lines.append(f"largest in {'RAM' if region == 'ram' else region}: "
                     + "; ".join(p.describe() for p in parts))
    (Path(build_dir) / "memory.txt").write_text("\n".join(lines) + "\n")
    (Path(build_dir) / "memory.json").write_text(json.dumps({
        "flash": report.flash, "ram": report.ram,
        "overflow": {k.lower(): v for k, v in (overflow or {}).items()},
        "largest": {region: [{"name": p.name, "object": p.obj, "size": p.size,
                              "category": p.category} for p in parts]
                    for region, parts in largest.items()},
    }, indent=2) + "\n")
    return line, report

"""Memory report of a linked firmware, from its GNU ld map file: flash and RAM use split into
runtime, RPC server, model code, model weights, activations and application, against the
board's regions. Any template that links with GNU ld can use it (the STM32 template does)."""

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


@dataclass
class MemoryReport:
    flash: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    ram: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))

    def line(self, board: str, flash_bytes: int, ram_bytes: int) -> str:
        def part(name: str, used: dict[str, int], total: int) -> str:
            sizes = ", ".join(f"{k} {v}" for k, v in used.items() if v)
            return (f"{name} {sum(used.values())} of {total} bytes "
                    f"({100.0 * sum(used.values()) / total:.1f}%: {sizes})")
        return (f"memory of {board}: {part('flash', self.flash, flash_bytes)}; "
                f"{part('RAM', self.ram, ram_bytes)}")


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
                report.ram["application"] += int(m.group(3), 16)
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
        kind = category(name, m.group("obj"))
        if output.startswith(_FLASH) or output in _BOTH:
            report.flash[kind] += size
        if output in _BOTH or output in _RAM:
            report.ram[kind] += size
    return report


def write_report(build_dir: Path, board_name: str, board: dict) -> str:
    """Parse ``build_dir/firmware.map``, write ``memory.txt`` and ``memory.json``; the line."""
    report = parse_map(Path(build_dir) / "firmware.map")
    line = report.line(board_name, board["memory"]["flash"]["length"],
                       board["memory"]["ram"]["length"])
    (Path(build_dir) / "memory.txt").write_text(line + "\n")
    (Path(build_dir) / "memory.json").write_text(
        json.dumps({"flash": report.flash, "ram": report.ram}, indent=2) + "\n")
    return line

#!/usr/bin/env python3
"""Project API server of the riscv template: bare-metal RV32 firmware for the boards of
``boards.yaml``, built with riscv64-unknown-elf-gcc (its rv32 multilibs) and picolibc, driven
by the host over the board's UART.

What makes this platform different (everything else is project_api.template, its bare-metal
part in template.bare_metal: the mains, the build with its memory report, flash, reset and
link): the start-up (global, stack and thread pointers), the machine-mode trap handler with
the PLIC, the cycle counter (``mcycle``, or the ESP32-C3's own), semihosting on QEMU, one UART
driver per kind (SiFive, NS16550, GD32 USART, ESP32-C3) picked by the board's data, and
``-march``/``-mabi`` from the board's ISA. Emulated boards run under qemu-system-riscv32; real
boards are flashed by the runner their entry names (OpenOCD, esptool).
"""

from __future__ import annotations

import logging

from project_api import server
from project_api.template import (
    NewProject,
    bare_metal,
    common,
    compile_definitions,
    load_boards,
    option,
    project_type_option,
    remote,
)
from project_api.template import flash as flash_runners
from project_api.template.ai_api import STANDALONE_OPTIONS
from project_api.template.mlperftiny_model import MLPERFTINY_MODEL_OPTION
from project_api.template.profile import PROFILE_OPTION

_LOG = logging.getLogger("riscv")
BOARDS = load_boards(__file__)
ELF = bare_metal.ELF
BANNER = bare_metal.banner("riscv")
#: Every firmware's start-up, trap handler, UART ring and platform (its UART driver is added
#: per board in render); then its main (template.bare_metal).
BOARD_SOURCES = ("src/startup.c", "src/trap.c", "src/uart.c", "src/platform.c")
PROJECT_TYPES = bare_metal.project_types("riscv", BOARD_SOURCES)
UART_DRIVERS = ("sifive", "ns16550", "gd32_usart", "esp32c3")


def arch_flags(board: dict) -> tuple[list[str], list[str]]:
    """``-march``/``-mabi`` to compile with (the CSR instructions named, as GCC 12's ISA spec
    wants) and to link with (the plain ISA, which picks the C library's multilib)."""
    isa, abi = board["cpu"], board["abi"]
    return [f"-march={isa}_zicsr", f"-mabi={abi}"], [f"-march={isa}", f"-mabi={abi}"]


class Handler(bare_metal.BareMetalHandler):
    """The riscv template's Project API handler."""

    PLATFORM_NAME = "riscv"
    PROJECT_TYPES = PROJECT_TYPES
    BUILDS_FOR = ("riscv",)
    BOARDS = BOARDS
    TOOLCHAIN = ("riscv64-unknown-elf-gcc", "install the RISC-V GNU toolchain and its C library, "
                 "e.g. 'apt-get install gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf'")
    OPTIONS = [
        option("board", "str", choices=list(BOARDS), default="qemu_sifive_e",
               optional=["generate_project"],
               help="Board of boards.yaml (qemu_* boards run under QEMU)."),
        project_type_option(PROJECT_TYPES),
        MLPERFTINY_MODEL_OPTION,
        *STANDALONE_OPTIONS,
        option("opt_level", "str", choices=["0", "1", "2", "3", "s", "z", "g"], default="s",
               optional=["generate_project"], help="GCC optimisation level (-O<level>)."),
        # The FE310 has 16 KiB of RAM: the defaults leave micro_speech room there (its 1960-byte
        # input travels in 512-byte packets); boards with more RAM take larger values.
        common("workspace_size_bytes", default=2560, minimum=1024, maximum=1 << 24),
        option("stack_size_bytes", "int", default=1024, minimum=512, maximum=1 << 20,
               optional=["generate_project"], help="Main stack reserved at the end of RAM."),
        common("max_packet_size_bytes", default=512,
               help="TVM_CRT_MAX_PACKET_SIZE_BYTES: the device's largest RPC packet (512 "
                    "fits the 16 KiB FE310; larger packets carry big tensors in fewer round "
                    "trips on boards with more RAM)."),
        PROFILE_OPTION,
        common("warning_as_error"),
        common("compile_definitions"),
        common("verbose"),
        option("flash_runner", "str", choices=list(flash_runners.RUNNERS),
               optional=["flash", "open_transport"],
               help="Flash tool (default: the board's own in boards.yaml, qemu on emulated "
                    "boards); open_transport resets a real board through it before reopening "
                    "its link."),
        common("serial_number"),
        common("serial_port"),
        option("baud_rate", "int", default=115200, minimum=1200, maximum=4_000_000,
               optional=["generate_project", "open_transport"],
               help="UART baud rate of the firmware and the host side."),
        *remote.REMOTE_OPTIONS,
    ]

    def render(self, project: NewProject) -> None:
        opts = project.options
        name, board = opts["board"], BOARDS[opts["board"]]
        kind = board["uart"]["kind"]
        if kind not in UART_DRIVERS:
            raise ValueError(f"board {name}: unknown uart kind {kind!r} in boards.yaml "
                             f"(known: {', '.join(UART_DRIVERS)})")
        crt = project.crt_sources
        project.copy_crt(crt)
        driver = f"src/uart_{kind}.c"
        bare_metal.copy_sources(project, driver, "src/riscv.h", "boards.yaml")
        generated, model_dirs = project.write_model_sources()
        project.write_crt_config(f"riscv template, board {name}")
        context = dict(board_name=name, board=board, baudrate=opts["baud_rate"],
                       rx_ring_bytes=project.rx_ring_bytes)
        project.render("board.h.j2", "src/board.h", **context)
        project.render("firmware.ld.j2", "firmware.ld", **context)
        compile_arch, link_arch = arch_flags(board)
        project.render("Makefile.j2", "Makefile", platform="riscv", cross="riscv64-unknown-elf-",
                       arch_flags=compile_arch, link_arch_flags=link_arch,
                       libc_specs="picolibc.specs", link_specs=["picolibc.specs"],
                       app_sources=(*project.project_type.sources, driver, *generated),
                       model_dirs=model_dirs, crt_sources=[f"crt/{p}" for p in crt], **context,
                       compile_definition_flags=compile_definitions(opts["compile_definitions"]))


if __name__ == "__main__":
    server.main(Handler())

"""Project API server of the stm32 template: our own firmware (no vendor HAL) for the boards of
``boards.yaml``, built with arm-none-eabi-gcc, driven by the host over the board's UART.

What makes this platform different (everything else is project_api.template, its bare-metal
part in template.bare_metal: the mains, the build with its memory report, flash, reset and
link): the board data renders ``board.h`` (the clock tree's register values), the linker
script and the Makefile; the sources are the Cortex-M start-up, the STM32 clock tree, the USART
driver and the SysTick/semihosting platform. Emulated boards run under QEMU (qemu-system-arm);
real boards are flashed by pyOCD by default and reached on their ST-LINK's serial port.
"""

from __future__ import annotations

import logging
from typing import Any

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

_LOG = logging.getLogger("stm32")
BOARDS = load_boards(__file__)
ELF = bare_metal.ELF
BANNER = bare_metal.banner("stm32")
#: Every firmware's start-up, clock, UART and platform; then its main (template.bare_metal).
BOARD_SOURCES = ("src/startup.c", "src/clock.c", "src/uart.c", "src/platform.c")
PROJECT_TYPES = bare_metal.project_types("stm32", BOARD_SOURCES)
TIMEOUTS = bare_metal.QEMU_TIMEOUTS
_PPRE = {1: 0, 2: 4, 4: 5, 8: 6, 16: 7}


def clock_registers(board: dict[str, Any]) -> dict[str, int]:
    """PLLCFGR, the APB divider codes and the reset SYSCLK of a board's clock tree."""
    clock, pll = board["clock"], board["clock"]["pll"]
    if board["family"] == "l4":
        src = 3 if clock["source"] == "hse" else 2
        pllcfgr = (src | (pll["m"] - 1) << 4 | pll["n"] << 8 | 1 << 24
                   | (pll["r"] // 2 - 1) << 25)
        reset_hz = 4_000_000  # MSI
    else:
        pllcfgr = (pll["m"] | pll["n"] << 6 | (pll["p"] // 2 - 1) << 16
                   | (1 << 22 if clock["source"] == "hse" else 0) | pll["q"] << 24)
        reset_hz = 16_000_000  # HSI
    return {"pllcfgr": pllcfgr, "ppre1": _PPRE[clock["apb1_div"]],
            "ppre2": _PPRE[clock["apb2_div"]], "reset_sysclk_hz": reset_hz}


class Handler(bare_metal.BareMetalHandler):
    """The stm32 template's Project API handler."""

    PLATFORM_NAME = "stm32"
    PROJECT_TYPES = PROJECT_TYPES
    BUILDS_FOR = ("cortex-m",)
    BOARDS = BOARDS
    TOOLCHAIN = ("arm-none-eabi-gcc", "install the Arm GNU toolchain, e.g. 'apt-get install "
                 "gcc-arm-none-eabi libnewlib-arm-none-eabi'")
    OPTIONS = [
        option("board", "str", choices=list(BOARDS), default="qemu_netduinoplus2",
               optional=["generate_project"],
               help="Board of boards.yaml (qemu_* boards run under QEMU)."),
        project_type_option(PROJECT_TYPES),
        MLPERFTINY_MODEL_OPTION,
        *STANDALONE_OPTIONS,
        option("opt_level", "str", choices=["0", "1", "2", "3", "s", "z", "g"], default="s",
               optional=["generate_project"], help="GCC optimisation level (-O<level>)."),
        common("workspace_size_bytes", default=32 * 1024, maximum=1 << 24),
        option("stack_size_bytes", "int", default=8192, minimum=1024, maximum=1 << 20,
               optional=["generate_project"], help="Main stack reserved at the end of RAM."),
        common("max_packet_size_bytes",
               help="TVM_CRT_MAX_PACKET_SIZE_BYTES: the device's largest RPC packet (4096 "
                    "keeps 97 percent of the UART bytes payload; 2048 saves about 6 KiB of RAM)."),
        PROFILE_OPTION,
        option("libc", "str", choices=["newlib-nano", "picolibc"], default="newlib-nano",
               optional=["generate_project"], help="C library."),
        common("warning_as_error"),
        common("compile_definitions"),
        common("verbose"),
        option("flash_runner", "str", choices=list(flash_runners.RUNNERS),
               optional=["flash", "open_transport"],
               help="Flash tool (default: pyocd on hardware, qemu on emulated boards); "
                    "open_transport resets a real board through it before reopening its link."),
        option("pyocd_pack", "str", optional=["flash", "open_transport"],
               help="CMSIS pack (.pack) for a pyOCD target that is not built in."),
        common("serial_number"),
        common("serial_port"),
        option("baud_rate", "int", default=115200, minimum=1200, maximum=12_000_000,
               optional=["generate_project", "open_transport"],
               help="UART baud rate of the firmware and the host side."),
        *remote.REMOTE_OPTIONS,
    ]

    def render(self, project: NewProject) -> None:
        opts = project.options
        name, board = opts["board"], BOARDS[opts["board"]]
        crt = project.crt_sources
        project.copy_crt(crt)
        app = project.project_type.sources
        bare_metal.copy_sources(project, "src/firmware.h", "src/stm32_regs.h", "boards.yaml")
        generated, model_dirs = project.write_model_sources()
        project.write_crt_config(f"stm32 template, board {name}")
        bus_div = board["clock"][f"{board['uart']['bus']}_div"]
        enr = board["uart"].get("enable_register", f"{board['uart']['bus']}enr")
        context = dict(board_name=name, board=board, baudrate=opts["baud_rate"],
                       rx_ring_bytes=project.rx_ring_bytes,
                       uart_enr=f"RCC_{enr.upper()}", uart_apb_div=bus_div,
                       **clock_registers(board))
        project.render("board.h.j2", "src/board.h", **context)
        project.render("firmware.ld.j2", "firmware.ld", **context)
        specs = "nano.specs" if opts["libc"] == "newlib-nano" else "picolibc.specs"
        arch = [f"-mcpu={board['cpu']}", "-mthumb", f"-mfpu={board['fpu']}",
                f"-mfloat-abi={board['float_abi']}"]
        project.render("Makefile.j2", "Makefile", platform="stm32", cross="arm-none-eabi-",
                       arch_flags=arch, libc_specs=specs, link_specs=[specs, "nosys.specs"],
                       app_sources=(*app, *generated),
                       model_dirs=model_dirs,
                       crt_sources=[f"crt/{p}" for p in crt], **context,
                       compile_definition_flags=compile_definitions(opts["compile_definitions"]))


if __name__ == "__main__":
    server.main(Handler())

"""The emulated Cortex-M machines the bare-metal harness runs on, as data.

One :class:`Machine` per core: the QEMU machine and ``-cpu``, the compiler's CPU flags, the
memory map the linker script is made from (where the vector table, code and RAM are), the UART
the firmware prints on and how it counts instructions. Start-up code and linker script are
generated from these fields (:func:`startup_source`, :func:`linker_script`); nothing else in the
harness knows which machine it is on.

The maps are QEMU 7.2's (``info mtree``), which follow the boards':

- ``microbit``: nRF51822, 256 KiB flash at 0, 16 KiB RAM at ``0x20000000`` (small: only the
  small models fit), the nRF51 UART at ``0x40002000``.
- ``mps2-an385`` / ``mps2-an386`` / ``mps2-an500``: ZBT SSRAM1 4 MiB at 0 (code), SSRAM2/3
  4 MiB at ``0x20000000`` (data), CMSDK APB UART0 at ``0x40004000``.
- ``mps2-an505`` (SSE-200, TrustZone): the firmware runs in the secure state, so it uses the
  secure aliases: SSRAM1 4 MiB at ``0x10000000`` (the secure vector table's reset address),
  SSRAM2+3 4 MiB at ``0x38000000``, UART0 at ``0x50200000``.
- ``mps3-an547`` (SSE-300): vector table in the secure ITCM at ``0x10000000``, code and
  constants in the 2 MiB SRAM at ``0x11000000``, data in the 4 MiB ISRAM at ``0x31000000``,
  UART0 at ``0x59303000``.

Counting: QEMU implements the SysTick on every one of these cores but no DWT cycle counter
(``DWT_CYCCNT`` reads 0 under QEMU; the M0 has none at all), so every machine counts with the
SysTick on the processor clock under ``-icount shift=0`` (one instruction per ns of virtual
time); the firmware calibrates ticks against a loop of known length itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import EmitError


@dataclass(frozen=True)
class Region:
    """A memory region of the linker script."""

    origin: int
    size: int


@dataclass(frozen=True)
class Machine:
    """An emulated machine for one core (see the module docstring)."""

    name: str  #: QEMU ``-M``
    core: str  #: the core, as ``--target`` names it
    qemu_cpu: str  #: QEMU ``-cpu``
    cflags: tuple[str, ...]  #: compiler CPU flags (``-mcpu``, ``-mfpu``, ``-mfloat-abi``)
    code: Region  #: code and constants
    ram: Region  #: data, bss, stack
    uart_kind: str  #: ``cmsdk`` (CMSDK APB UART) or ``nrf51`` (nRF51 UART)
    uart_base: int
    fpu: bool  #: the start-up enables CP10/CP11
    clock_hz: int  #: the SysTick's processor clock (QEMU's)
    #: Where the vector table goes when not at the start of ``code`` (the reset address).
    vectors: Region | None = None
    counter: str = "systick"

    @property
    def ticks_instructions(self) -> float:
        """Instructions per SysTick tick under ``-icount shift=0`` (1 GHz / clock)."""
        return 1e9 / self.clock_hz

    def qemu_command(self, elf: str) -> list[str]:
        """QEMU's command line: UART0 on stdout, semihosting for the exit code only."""
        return ["qemu-system-arm", "-M", self.name, "-cpu", self.qemu_cpu, "-display", "none",
                "-monitor", "none", "-serial", "stdio", "-icount", "shift=0",
                "-semihosting-config", "enable=on,target=native", "-kernel", elf]


_KIB = 1024
_MIB = 1024 * 1024

MACHINES: dict[str, Machine] = {m.core: m for m in (
    Machine("microbit", "cortex-m0", "cortex-m0",
            ("-mcpu=cortex-m0", "-mthumb", "-mfloat-abi=soft"),
            Region(0x00000000, 256 * _KIB), Region(0x20000000, 16 * _KIB),
            "nrf51", 0x40002000, fpu=False, clock_hz=16_000_000),
    Machine("mps2-an385", "cortex-m3", "cortex-m3",
            ("-mcpu=cortex-m3", "-mthumb", "-mfloat-abi=soft"),
            Region(0x00000000, 4 * _MIB), Region(0x20000000, 4 * _MIB),
            "cmsdk", 0x40004000, fpu=False, clock_hz=25_000_000),
    Machine("mps2-an386", "cortex-m4", "cortex-m4",
            ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"),
            Region(0x00000000, 4 * _MIB), Region(0x20000000, 4 * _MIB),
            "cmsdk", 0x40004000, fpu=True, clock_hz=25_000_000),
    Machine("mps2-an500", "cortex-m7", "cortex-m7",
            ("-mcpu=cortex-m7", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-d16"),
            Region(0x00000000, 4 * _MIB), Region(0x20000000, 4 * _MIB),
            "cmsdk", 0x40004000, fpu=True, clock_hz=25_000_000),
    Machine("mps2-an505", "cortex-m33", "cortex-m33",
            ("-mcpu=cortex-m33", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv5-sp-d16"),
            Region(0x10000000, 4 * _MIB), Region(0x38000000, 4 * _MIB),
            "cmsdk", 0x50200000, fpu=True, clock_hz=20_000_000),
    Machine("mps3-an547", "cortex-m55", "cortex-m55",
            ("-mcpu=cortex-m55", "-mthumb", "-mfloat-abi=hard"),
            Region(0x11000000, 2 * _MIB), Region(0x31000000, 4 * _MIB),
            "cmsdk", 0x59303000, fpu=True, clock_hz=32_000_000,
            vectors=Region(0x10000000, 512 * _KIB)),
)}

#: The core each ``--target`` name runs on (``cortex-m85`` shares the M55's MVE: its machine).
CORE_OF_TARGET = {"cortex-m0": "cortex-m0", "cortex-m3": "cortex-m3", "cortex-m4": "cortex-m4",
                  "cortex-m7": "cortex-m7", "cortex-m33": "cortex-m33",
                  "cortex-m55": "cortex-m55", "cortex-m85": "cortex-m55"}


def machine(core: str) -> Machine:
    """The machine of ``core`` (a core or ``--target`` name); unknown is an :class:`EmitError`."""
    m = MACHINES.get(CORE_OF_TARGET.get(core, core))
    if m is None:
        raise EmitError(f"no emulated machine for {core!r}: one of {', '.join(MACHINES)}")
    return m


_UART = {
    # CMSDK APB UART: DATA +0, STATE +4 (bit 0: TX full), CTRL +8 (bit 0: TX on), BAUDDIV +0x10.
    "cmsdk": """#define UART(off) (*(volatile uint32_t*)(0x{base:08X}u + (off)))
static void uart_init(void) {{ UART(0x10) = 16u; UART(0x8) = 1u; }}
static void uart_putc(char c) {{
  while (UART(0x4) & 1u) {{}}
  UART(0x0) = (uint32_t)(uint8_t)c;
}}
""",
    # nRF51 UART: TASKS_STARTTX +0x008, EVENTS_TXDRDY +0x11C, ENABLE +0x500 (4), TXD +0x51C.
    "nrf51": """#define UART(off) (*(volatile uint32_t*)(0x{base:08X}u + (off)))
static void uart_init(void) {{ UART(0x500) = 4u; UART(0x008) = 1u; }}
static void uart_putc(char c) {{
  UART(0x11C) = 0u;
  UART(0x51C) = (uint32_t)(uint8_t)c;
  while (UART(0x11C) == 0u) {{}}
}}
""",
}

_STARTUP = """/* Bare-metal start for QEMU {name} ({core}): generated from its machine data. */
#include <stdint.h>
#include <string.h>

extern uint32_t __stack_top, __bss_start, __bss_end;
int main(void);
void reset_handler(void);
void hx_puts(const char* s);
void hx_exit(int code);
static void fault_handler(void);

__attribute__((section(".vectors"), used))
static const void* const vectors[16] = {{
  &__stack_top, (const void*)reset_handler, (const void*)fault_handler,
  (const void*)fault_handler, (const void*)fault_handler, (const void*)fault_handler,
  (const void*)fault_handler, 0, 0, 0, 0, (const void*)fault_handler, 0, 0,
  (const void*)fault_handler, (const void*)fault_handler,
}};

{uart}
void hx_puts(const char* s) {{
  while (*s) uart_putc(*s++);
}}

void hx_exit(int code) {{
  /* semihosting SYS_EXIT: ADP_Stopped_ApplicationExit (0) or RunTimeErrorUnknown (1) */
  register int r0 __asm__("r0") = 0x18;
  register int r1 __asm__("r1") = code == 0 ? 0x20026 : 0x20024;
  __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  for (;;) {{}}
}}

static void fault_handler(void) {{
  hx_puts("FAULT\\n");
  hx_exit(1);
}}

void reset_handler(void) {{
{fpu}  memset(&__bss_start, 0, (size_t)((uint8_t*)&__bss_end - (uint8_t*)&__bss_start));
  uart_init();
  hx_exit(main());
}}
"""

_FPU_ON = """  *(volatile uint32_t*)0xE000ED88u |= 0xFu << 20; /* CPACR: CP10, CP11 (the FPU) */
  __asm__ volatile("dsb\\n\\tisb" ::: "memory");
"""


def startup_source(m: Machine) -> str:
    """The start-up C of ``m``: vector table, reset handler, UART output, semihosting exit."""
    return _STARTUP.format(name=m.name, core=m.core,
                           uart=_UART[m.uart_kind].format(base=m.uart_base),
                           fpu=_FPU_ON if m.fpu else "")


def linker_script(m: Machine) -> str:
    """The linker script of ``m``: vector table at the reset address, code, RAM, stack on top."""
    regions = [("CODE", "rx", m.code), ("RAM", "rwx", m.ram)]
    if m.vectors is not None:
        regions.insert(0, ("VECTORS", "rx", m.vectors))
    memory = "\n".join(f"  {n} ({a}) : ORIGIN = 0x{r.origin:08X}, LENGTH = {r.size}"
                       for n, a, r in regions)
    vectors = ("  .vectors : { KEEP(*(.vectors)) } > VECTORS\n" if m.vectors is not None
               else "")
    keep = "" if m.vectors is not None else "KEEP(*(.vectors)) "
    return f"""ENTRY(reset_handler)
MEMORY {{
{memory}
}}
SECTIONS {{
{vectors}  .text : {{ {keep}*(.text*) *(.rodata*) . = ALIGN(8); }} > CODE
  .ARM.exidx : {{ *(.ARM.exidx*) }} > CODE
  .data : {{ *(.data*) . = ALIGN(8); }} > RAM
  .bss (NOLOAD) : {{ __bss_start = .; *(.bss*) *(COMMON) . = ALIGN(8); __bss_end = .; }} > RAM
  end = .;
  __stack_top = ORIGIN(RAM) + LENGTH(RAM);
}}
"""

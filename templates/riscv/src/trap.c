/*
 * The machine-mode trap handler. An interrupt from the PLIC is claimed, handed to the UART
 * driver and completed; any exception (illegal instruction, misaligned or faulting access,
 * ecall) stops the firmware with its mcause, mepc and mtval.
 */
#include <stdint.h>
#include <stdio.h>

#include "board.h"
#include "riscv.h"

#if BOARD_UART_IRQ >= 0
#define PLIC_PRIORITY(irq) MMIO32(BOARD_PLIC_BASE + 4u * (uint32_t)(irq))
#define PLIC_ENABLE(word) MMIO32(BOARD_PLIC_BASE + 0x2000u + 4u * (uint32_t)(word))
#define PLIC_THRESHOLD MMIO32(BOARD_PLIC_BASE + 0x200000u)
#define PLIC_CLAIM MMIO32(BOARD_PLIC_BASE + 0x200004u)
#endif

void TrapHandler(void) __attribute__((interrupt("machine"), aligned(4)));
void TrapHandler(void) {
  uint32_t cause = CSR_READ(mcause);
  if (cause & MCAUSE_INTERRUPT) {
#if BOARD_UART_IRQ >= 0
    if ((cause & 0x3FFu) == MCAUSE_MACHINE_EXTERNAL) {
      uint32_t irq = PLIC_CLAIM;
      if (irq == (uint32_t)BOARD_UART_IRQ) {
        UartIrqHandler();
      }
      if (irq != 0) {
        PLIC_CLAIM = irq; /* complete */
      }
      return;
    }
#endif
    FirmwareStop("unexpected interrupt", 1);
  } else {
    char text[80];
    (void)snprintf(text, sizeof(text), "trap: mcause %lu mepc 0x%08lx mtval 0x%08lx",
                   (unsigned long)cause, (unsigned long)CSR_READ(mepc),
                   (unsigned long)CSR_READ(mtval));
    FirmwareStop(text, 1);
  }
}

void TrapInit(void) {
  CSR_WRITE(mtvec, (uint32_t)(uintptr_t)TrapHandler); /* direct mode */
#if BOARD_UART_IRQ >= 0
  {
    uint32_t i;
    for (i = 0; i < (BOARD_UART_IRQ / 32u) + 1u; ++i) {
      PLIC_ENABLE(i) = 0;
    }
  }
  PLIC_PRIORITY(BOARD_UART_IRQ) = 1;
  PLIC_ENABLE(BOARD_UART_IRQ / 32u) = 1u << (BOARD_UART_IRQ % 32u);
  PLIC_THRESHOLD = 0;
  CSR_SET(mie, MIE_MEIE);
#endif
}

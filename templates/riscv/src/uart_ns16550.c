/* NS16550 UART (QEMU virt): 8 data bits, no parity, one stop bit, FIFOs on, the divisor latch
 * from the reference clock (baud = clock / (16 * divisor)), the received-data interrupt. */
#include <stdint.h>

#include "board.h"
#include "riscv.h"

#define UART_RBR MMIO8(BOARD_UART_BASE + 0u) /* read; THR on write; DLL with DLAB */
#define UART_THR MMIO8(BOARD_UART_BASE + 0u)
#define UART_IER MMIO8(BOARD_UART_BASE + 1u) /* DLM with DLAB */
#define UART_FCR MMIO8(BOARD_UART_BASE + 2u)
#define UART_LCR MMIO8(BOARD_UART_BASE + 3u)
#define UART_LSR MMIO8(BOARD_UART_BASE + 5u)
#define LCR_DLAB 0x80u
#define LCR_8N1 0x03u
#define LSR_DR 0x01u
#define LSR_THRE 0x20u
#define IER_ERBFI 0x01u

void UartHwInit(void) {
  uint32_t divisor = (BOARD_UART_CLOCK_HZ + 8u * BOARD_UART_BAUDRATE) / (16u * BOARD_UART_BAUDRATE);
  UART_IER = 0;
  UART_LCR = LCR_DLAB;
  UART_RBR = (uint8_t)(divisor & 0xFFu);
  UART_IER = (uint8_t)(divisor >> 8);
  UART_LCR = LCR_8N1;
  UART_FCR = 0x07u; /* enable and clear both FIFOs */
}

void UartHwPutc(uint8_t byte) {
  while (!(UART_LSR & LSR_THRE)) {
  }
  UART_THR = byte;
}

int UartHwGetc(void) { return (UART_LSR & LSR_DR) ? (int)UART_RBR : -1; }

void UartHwEnableRxInterrupt(void) { UART_IER = IER_ERBFI; }

/* ESP32-C3 UART0 as the boot ROM left it (115200 baud, on the board's USB serial bridge): the
 * FIFO register reads and writes bytes, the status register counts them (rxfifo_cnt bits 0-9,
 * txfifo_cnt bits 16-25, of a 128-byte FIFO). Received by polling. */
#include <stdint.h>

#include "board.h"
#include "riscv.h"

#define UART_FIFO MMIO32(BOARD_UART_BASE + 0x00u)
#define UART_STATUS MMIO32(BOARD_UART_BASE + 0x1Cu)
#define RXFIFO_CNT(status) ((status)&0x3FFu)
#define TXFIFO_CNT(status) (((status) >> 16) & 0x3FFu)
#define FIFO_BYTES 128u

void UartHwInit(void) {}

void UartHwPutc(uint8_t byte) {
  while (TXFIFO_CNT(UART_STATUS) >= FIFO_BYTES) {
  }
  UART_FIFO = byte;
}

int UartHwGetc(void) { return RXFIFO_CNT(UART_STATUS) ? (int)(UART_FIFO & 0xFFu) : -1; }

void UartHwEnableRxInterrupt(void) {}

/* SiFive UART (FE310; QEMU sifive_e): txdata/rxdata with full/empty in bit 31, a baud divisor
 * of the bus clock (baud = clock / (div + 1)), and the receive watermark interrupt (ie.rxwm,
 * raised while the FIFO holds more than rxctrl.rxcnt entries). The FE310 routes UART0 to
 * GPIO16/17 through its IOF0 function. */
#include <stdint.h>

#include "board.h"
#include "riscv.h"

#define UART_TXDATA MMIO32(BOARD_UART_BASE + 0x00u)
#define UART_RXDATA MMIO32(BOARD_UART_BASE + 0x04u)
#define UART_TXCTRL MMIO32(BOARD_UART_BASE + 0x08u)
#define UART_RXCTRL MMIO32(BOARD_UART_BASE + 0x0Cu)
#define UART_IE MMIO32(BOARD_UART_BASE + 0x10u)
#define UART_DIV MMIO32(BOARD_UART_BASE + 0x18u)
#define UART_FIFO_FLAG (1u << 31)
#define UART_IE_RXWM (1u << 1)
/* FE310 GPIO: IOF enable and select for UART0's pins 16 (RX) and 17 (TX). */
#define GPIO_IOF_EN MMIO32(0x10012038u)
#define GPIO_IOF_SEL MMIO32(0x1001203Cu)
#define UART0_PINS ((1u << 16) | (1u << 17))

void UartHwInit(void) {
  GPIO_IOF_SEL &= ~UART0_PINS;
  GPIO_IOF_EN |= UART0_PINS;
  UART_DIV = (BOARD_UART_CLOCK_HZ + BOARD_UART_BAUDRATE / 2u) / BOARD_UART_BAUDRATE - 1u;
  UART_TXCTRL = 1u; /* txen, one stop bit */
  UART_RXCTRL = 1u; /* rxen, rxcnt 0 */
  UART_IE = 0;
}

void UartHwPutc(uint8_t byte) {
  while (UART_TXDATA & UART_FIFO_FLAG) {
  }
  UART_TXDATA = byte;
}

int UartHwGetc(void) {
  uint32_t data = UART_RXDATA;
  return (data & UART_FIFO_FLAG) ? -1 : (int)(data & 0xFFu);
}

void UartHwEnableRxInterrupt(void) { UART_IE = UART_IE_RXWM; }

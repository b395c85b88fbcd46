/* GD32VF103 USART0 on PA9 (TX, alternate push-pull) and PA10 (RX, floating input): the RCU
 * clocks GPIOA and USART0 on APB2; the baud register holds clock / baud in 12.4 fixed point.
 * Received by polling (the ECLIC is not set up). */
#include <stdint.h>

#include "board.h"
#include "riscv.h"

#define RCU_APB2EN MMIO32(0x40021018u)
#define RCU_APB2EN_PAEN (1u << 2)
#define RCU_APB2EN_USART0EN (1u << 14)
#define GPIOA_CTL1 MMIO32(0x40010804u) /* pins 8..15, four bits each */
#define USART_STAT MMIO32(BOARD_UART_BASE + 0x00u)
#define USART_DATA MMIO32(BOARD_UART_BASE + 0x04u)
#define USART_BAUD MMIO32(BOARD_UART_BASE + 0x08u)
#define USART_CTL0 MMIO32(BOARD_UART_BASE + 0x0Cu)
#define STAT_RBNE (1u << 5)
#define STAT_TBE (1u << 7)
#define CTL0_UEN (1u << 13)
#define CTL0_TEN (1u << 3)
#define CTL0_REN (1u << 2)

void UartHwInit(void) {
  RCU_APB2EN |= RCU_APB2EN_PAEN | RCU_APB2EN_USART0EN;
  /* PA9: alternate push-pull, 50 MHz (0xB); PA10: floating input (0x4). */
  GPIOA_CTL1 = (GPIOA_CTL1 & ~(0xFFu << 4)) | (0xBu << 4) | (0x4u << 8);
  USART_BAUD = (BOARD_UART_CLOCK_HZ + BOARD_UART_BAUDRATE / 2u) / BOARD_UART_BAUDRATE;
  USART_CTL0 = CTL0_UEN | CTL0_TEN | CTL0_REN;
}

void UartHwPutc(uint8_t byte) {
  while (!(USART_STAT & STAT_TBE)) {
  }
  USART_DATA = byte;
}

int UartHwGetc(void) { return (USART_STAT & STAT_RBNE) ? (int)(USART_DATA & 0xFFu) : -1; }

void UartHwEnableRxInterrupt(void) {}

/*
 * The UART of board.h (the ST-LINK virtual COM port, or QEMU's first -serial): pins, baud rate,
 * blocking transmit, and receive by interrupt into a ring buffer so no byte is lost while the
 * main loop runs a request. A full ring or a hardware overrun is counted (UartBytesLost), and
 * main.c reports it to the host as a device log line.
 */
#include <stddef.h>
#include <stdint.h>

#include "board.h"
#include "firmware.h"
#include "stm32_regs.h"

#if (BOARD_UART_RX_RING_BYTES & (BOARD_UART_RX_RING_BYTES - 1u)) != 0
#error "BOARD_UART_RX_RING_BYTES must be a power of two"
#endif

static uint8_t g_rx_ring[BOARD_UART_RX_RING_BYTES];
static volatile uint32_t g_rx_head; /* written by the interrupt handler only */
static volatile uint32_t g_rx_tail; /* written by the main loop only */
static volatile uint32_t g_rx_lost;

void UartIrqHandler(void);

static void PinAlternate(uint32_t port, uint32_t pin, uint32_t af, int pull_up) {
  RCC_GPIOENR |= 1u << port;
  (void)RCC_GPIOENR; /* the clock reaches the port before its registers are written */
  GPIO_AFR(port, pin / 8u) = (GPIO_AFR(port, pin / 8u) & ~(0xFu << (4u * (pin % 8u)))) |
                             (af << (4u * (pin % 8u)));
  GPIO_OSPEEDR(port) |= 2u << (2u * pin);
  GPIO_PUPDR(port) = (GPIO_PUPDR(port) & ~(3u << (2u * pin))) | ((pull_up ? 1u : 0u) << (2u * pin));
  GPIO_MODER(port) = (GPIO_MODER(port) & ~(3u << (2u * pin))) | (2u << (2u * pin));
}

void UartInit(void) {
#if BOARD_UART_VDDIO2
  PWR_CR2 |= PWR_CR2_IOSV; /* port G is powered from VDDIO2 (STM32L4+) */
#endif
  PinAlternate(BOARD_UART_TX_PORT, BOARD_UART_TX_PIN, BOARD_UART_TX_AF, 0);
  PinAlternate(BOARD_UART_RX_PORT, BOARD_UART_RX_PIN, BOARD_UART_RX_AF, 1);
  BOARD_UART_ENR |= BOARD_UART_ENR_BIT;
  (void)BOARD_UART_ENR;
#if BOARD_UART_LPUART
  UART_BRR = (uint32_t)(((uint64_t)g_uart_clock_hz * 256u + BOARD_UART_BAUDRATE / 2u) /
                        BOARD_UART_BAUDRATE);
#else
  UART_BRR = (g_uart_clock_hz + BOARD_UART_BAUDRATE / 2u) / BOARD_UART_BAUDRATE;
#endif
  UART_CR1 = UART_CR1_TE | UART_CR1_RE | UART_CR1_RXNEIE;
  UART_CR1 |= UART_CR1_UE;
  NVIC_IPR8(BOARD_UART_IRQ) = 0x40u; /* below SysTick (0), whose handler is a few instructions */
  NVIC_ISER(BOARD_UART_IRQ / 32u) = 1u << (BOARD_UART_IRQ % 32u);
}

void UartIrqHandler(void) {
  uint32_t status = UART_SR;
  while (status & (UART_SR_RXNE | UART_SR_ORE)) {
    if (status & UART_SR_ORE) {
      g_rx_lost++; /* a byte arrived before the previous one was read */
#if !defined(BOARD_FAMILY_F4)
      UART_ICR = UART_ICR_CLEAR_ERRORS;
#endif
    }
    if (status & UART_SR_RXNE) {
      uint8_t byte = (uint8_t)UART_RDR; /* clears RXNE (and, after SR, ORE on F4) */
      uint32_t head = g_rx_head;
      if (head - g_rx_tail < BOARD_UART_RX_RING_BYTES) {
        g_rx_ring[head & (BOARD_UART_RX_RING_BYTES - 1u)] = byte;
        g_rx_head = head + 1u;
      } else {
        g_rx_lost++;
      }
    }
#if defined(BOARD_FAMILY_F4)
    else {
      (void)UART_RDR; /* ORE without RXNE: the SR-then-DR read sequence clears it */
    }
#endif
    status = UART_SR;
  }
}

size_t UartRead(uint8_t* out, size_t max_bytes) {
  uint32_t tail = g_rx_tail;
  size_t n = 0;
  while (n < max_bytes && tail != g_rx_head) {
    out[n++] = g_rx_ring[tail & (BOARD_UART_RX_RING_BYTES - 1u)];
    tail++;
  }
  g_rx_tail = tail;
  return n;
}

uint32_t UartBytesLost(void) { return g_rx_lost; }

void UartWaitForInput(void) {
  /* With interrupts masked, a byte that arrives after the check still ends the WFI. */
  __asm volatile("cpsid i" ::: "memory");
  if (g_rx_head == g_rx_tail) {
    __asm volatile("dsb\n\twfi" ::: "memory");
  }
  __asm volatile("cpsie i" ::: "memory");
}

void UartWrite(const uint8_t* data, size_t num_bytes) {
  size_t i;
  for (i = 0; i < num_bytes; ++i) {
    while (!(UART_SR & UART_SR_TXE)) {
    }
    UART_TDR = data[i];
  }
}

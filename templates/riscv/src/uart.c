/*
 * The UART's receive ring and the port's UART calls over the board's driver (uart_<kind>.c).
 * With a PLIC source (BOARD_UART_IRQ >= 0) the receive interrupt fills the ring, so bytes keep
 * arriving while the model computes; without one, UartRead and UartWaitForInput poll the FIFO.
 */
#include <stddef.h>
#include <stdint.h>

#include "board.h"
#include "riscv.h"

#if (BOARD_UART_RX_RING_BYTES & (BOARD_UART_RX_RING_BYTES - 1u)) != 0
#error "BOARD_UART_RX_RING_BYTES must be a power of two"
#endif

static volatile uint8_t g_rx_ring[BOARD_UART_RX_RING_BYTES];
static volatile uint32_t g_rx_head; /* written by the receiver */
static volatile uint32_t g_rx_tail; /* written by UartRead */
static volatile uint32_t g_rx_lost;

static void Drain(void) {
  int byte;
  while ((byte = UartHwGetc()) >= 0) {
    uint32_t head = g_rx_head;
    if (head - g_rx_tail >= BOARD_UART_RX_RING_BYTES) {
      g_rx_lost++;
      continue;
    }
    g_rx_ring[head & (BOARD_UART_RX_RING_BYTES - 1u)] = (uint8_t)byte;
    g_rx_head = head + 1u;
  }
}

void UartIrqHandler(void) { Drain(); }

void UartInit(void) {
  UartHwInit();
#if BOARD_UART_IRQ >= 0
  UartHwEnableRxInterrupt();
  CSR_SET(mstatus, MSTATUS_MIE);
#endif
}

void UartWrite(const uint8_t* data, size_t num_bytes) {
  size_t i;
  for (i = 0; i < num_bytes; ++i) {
    UartHwPutc(data[i]);
  }
}

size_t UartRead(uint8_t* out, size_t max_bytes) {
  size_t n = 0;
#if BOARD_UART_IRQ < 0
  Drain();
#endif
  while (n < max_bytes && g_rx_tail != g_rx_head) {
    out[n++] = g_rx_ring[g_rx_tail & (BOARD_UART_RX_RING_BYTES - 1u)];
    g_rx_tail = g_rx_tail + 1u;
  }
  return n;
}

uint32_t UartBytesLost(void) { return g_rx_lost; }

void UartWaitForInput(void) {
#if BOARD_UART_IRQ >= 0
  CSR_CLEAR(mstatus, MSTATUS_MIE);
  if (g_rx_tail == g_rx_head) {
    __asm volatile("wfi"); /* a pending interrupt wakes it even with MIE clear */
  }
  CSR_SET(mstatus, MSTATUS_MIE);
#else
  Drain();
#endif
}

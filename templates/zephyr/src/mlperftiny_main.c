/*
 * MLPerf Tiny firmware (Zephyr, project type "mlperftiny"): the benchmark's UART protocol
 * (crt/src/mlperftiny) on the console UART. As in main.c the receive interrupt fills a ring
 * buffer and wakes the main thread, which feeds TVMCrtMlperfTiny_Receive; replies leave by polled
 * transmit. Prints the template's ready line, "project-api zephyr ready: <board> mlperftiny",
 * first (open_transport waits for it), then the benchmark's start-up lines.
 *
 * Clock: k_cycle_get_64() where the timer has a 64-bit cycle counter
 * (CONFIG_TIMER_HAS_64BIT_CYCLE_COUNTER), else the kernel's 64-bit tick count. A 32-bit cycle
 * count extended in software (platform.c) would miss a wrap inside one long `infer N` (a few
 * seconds at hundreds of MHz), because the protocol reads the clock only at its laps; the tick
 * count never wraps. Its resolution, 1/CONFIG_SYS_CLOCK_TICKS_PER_SEC (100 us at the tickless
 * default of 10000), is left to the board: the runner times runs of about ten seconds.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <zephyr/device.h>
#include <zephyr/drivers/uart.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/ring_buffer.h>

#include <tvm/runtime/crt/mlperftiny.h>

#define READY_BANNER "project-api zephyr ready: " PROJECT_API_BOARD " mlperftiny\r\n"

extern const TVMCrtMlperfTinyAotInfo kTVMMlperfTinyAotInfo;

static const struct device* const g_uart = DEVICE_DT_GET(DT_CHOSEN(zephyr_console));
RING_BUF_DECLARE(g_rx_ring, ZEPHYR_RX_RING_BYTES);
K_SEM_DEFINE(g_rx_ready, 0, 1);

void TVMCrtMlperfTinyPort_Write(const char* data, size_t size) {
  size_t i;
  for (i = 0; i < size; i++) {
    uart_poll_out(g_uart, (unsigned char)data[i]);
  }
}

uint64_t TVMCrtMlperfTinyPort_Micros(void) {
#if defined(CONFIG_TIMER_HAS_64BIT_CYCLE_COUNTER)
  return k_cyc_to_us_floor64(k_cycle_get_64());
#else
  return k_ticks_to_us_floor64((uint64_t)k_uptime_ticks());
#endif
}

/* Receive interrupt: drain the UART FIFO into the ring (the host sends one command at a time
 * and waits for m-ready, so the ring never fills; bytes beyond it are dropped). */
static void UartIrq(const struct device* dev, void* user_data) {
  (void)user_data;
  while (uart_irq_update(dev) && uart_irq_is_pending(dev)) {
    uint8_t* space;
    uint32_t room;
    int got;
    if (!uart_irq_rx_ready(dev)) {
      break; /* only receive interrupts are enabled */
    }
    room = ring_buf_put_claim(&g_rx_ring, &space, ZEPHYR_RX_RING_BYTES);
    if (room == 0u) {
      uint8_t dropped;
      got = uart_fifo_read(dev, &dropped, 1);
    } else {
      got = uart_fifo_read(dev, space, (int)room);
      (void)ring_buf_put_finish(&g_rx_ring, got > 0 ? (uint32_t)got : 0u);
    }
    k_sem_give(&g_rx_ready);
    if (got <= 0) {
      break;
    }
  }
}

int main(void) {
  static const char banner[] = READY_BANNER;
  static TVMCrtMlperfTiny bench;
  static TVMCrtMlperfTinyAot aot;
  static TVMCrtMlperfTinyModel model;
  static uint8_t chunk[64];
  const char* why = "";

  if (!device_is_ready(g_uart)) {
    k_panic();
  }
  if (TVMCrtMlperfTinyAot_Init(&aot, &model, &kTVMMlperfTinyAotInfo, &why) != 0) {
    TVMCrtMlperfTinyPort_Write("e-[", 3u);
    TVMCrtMlperfTinyPort_Write(why, strlen(why));
    TVMCrtMlperfTinyPort_Write("]\r\n", 3u);
    k_panic();
  }
  uart_irq_callback_user_data_set(g_uart, UartIrq, NULL);
  uart_irq_rx_enable(g_uart);
  TVMCrtMlperfTinyPort_Write(banner, sizeof(banner) - 1u);
  TVMCrtMlperfTiny_Start(&bench, &model, kTVMMlperfTinyAotInfo.db,
                         kTVMMlperfTinyAotInfo.db_capacity);
  for (;;) {
    uint32_t n;
    unsigned int key = irq_lock();
    n = ring_buf_get(&g_rx_ring, chunk, sizeof(chunk));
    irq_unlock(key);
    if (n == 0u) {
      (void)k_sem_take(&g_rx_ready, K_FOREVER);
      continue;
    }
    TVMCrtMlperfTiny_Receive(&bench, chunk, n);
  }
  return 0;
}

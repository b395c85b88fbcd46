/*
 * Host-driven firmware (Zephyr): the C runtime's RPC server on the console UART. The UART's
 * receive interrupt puts bytes into a ring buffer and wakes the main thread, which hands them to
 * TVMCrtRpcServer_Feed; replies leave by polled transmit. After set-up the firmware sends one
 * ready line, "project-api zephyr ready: <board>", before any RPC byte. A shutdown request
 * reboots the board, which then waits for the next session.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <zephyr/device.h>
#include <zephyr/drivers/uart.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/reboot.h>
#include <zephyr/sys/ring_buffer.h>

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/platform.h>

#define READY_BANNER "project-api zephyr ready: " PROJECT_API_BOARD "\n"
/*! Bytes taken from the receive ring per Feed call. */
#define FEED_CHUNK_BYTES 256u

static const struct device* const g_uart = DEVICE_DT_GET(DT_CHOSEN(zephyr_console));
RING_BUF_DECLARE(g_rx_ring, ZEPHYR_RX_RING_BYTES);
K_SEM_DEFINE(g_rx_ready, 0, 1);
static volatile uint32_t g_rx_lost;
static uint8_t g_model_workspace[TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES] __aligned(16);

static void UartWrite(const uint8_t* data, size_t num_bytes) {
  size_t i;
  for (i = 0; i < num_bytes; i++) {
    uart_poll_out(g_uart, data[i]);
  }
}

/* Receive interrupt: drain the UART FIFO into the ring; what does not fit is counted. */
static void UartIrq(const struct device* dev, void* user_data) {
  (void)user_data;
  while (uart_irq_update(dev) && uart_irq_is_pending(dev)) {
    if (!uart_irq_rx_ready(dev)) {
      break; /* only receive interrupts are enabled */
    }
    for (;;) {
      uint8_t* space;
      uint32_t room = ring_buf_put_claim(&g_rx_ring, &space, ZEPHYR_RX_RING_BYTES);
      int got;
      if (room == 0u) {
        uint8_t dropped;
        if (uart_fifo_read(dev, &dropped, 1) == 1) {
          g_rx_lost++;
          continue;
        }
        break;
      }
      got = uart_fifo_read(dev, space, (int)room);
      (void)ring_buf_put_finish(&g_rx_ring, got > 0 ? (uint32_t)got : 0u);
      if (got <= 0) {
        break;
      }
    }
    k_sem_give(&g_rx_ready);
  }
}

static ptrdiff_t ChannelWrite(void* context, const uint8_t* data, size_t num_bytes) {
  (void)context;
  UartWrite(data, num_bytes);
  return (ptrdiff_t)num_bytes;
}

int main(void) {
  static const char banner[] = READY_BANNER;
  static uint8_t chunk[FEED_CHUNK_BYTES];
  microtvm_rpc_server_t server;
  TVMCrtRpcServerStats stats;
  uint32_t lost_reported = 0;
  tvm_crt_error_t err;

  memset(&stats, 0, sizeof(stats));
  if (!device_is_ready(g_uart) || TVMPlatformInitialize() != kTvmErrorNoError) {
    TVMPlatformAbort(kTvmErrorPlatformCheckFailure);
  }
  err = TVMCrtWorkspace_Init(g_model_workspace, sizeof(g_model_workspace));
  if (err != kTvmErrorNoError) {
    TVMPlatformAbort(err);
  }
  server = MicroTVMRpcServerInit(ChannelWrite, NULL);
  if (server == NULL) {
    TVMPlatformAbort(kTvmErrorPlatformCheckFailure);
  }
  uart_irq_callback_user_data_set(g_uart, UartIrq, NULL);
  uart_irq_rx_enable(g_uart);
  UartWrite((const uint8_t*)banner, sizeof(banner) - 1u);

  for (;;) {
    uint32_t n;
    unsigned int key = irq_lock();
    n = ring_buf_get(&g_rx_ring, chunk, sizeof(chunk));
    irq_unlock(key);
    if (g_rx_lost != lost_reported) {
      TVMLogf("zephyr: UART receive lost %lu bytes (ring of %u bytes full)",
              (unsigned long)(g_rx_lost - lost_reported), (unsigned)ZEPHYR_RX_RING_BYTES);
      lost_reported = g_rx_lost;
    }
    if (n == 0u) {
      (void)k_sem_take(&g_rx_ready, K_FOREVER);
      continue;
    }
    err = TVMCrtRpcServer_Feed(server, chunk, n, &stats);
    if (err == kTvmErrorPlatformShutdown) {
      sys_reboot(SYS_REBOOT_COLD); /* the host ended the session: start afresh */
    }
    if (err != kTvmErrorNoError) {
      TVMPlatformAbort(err);
    }
  }
  return 0;
}

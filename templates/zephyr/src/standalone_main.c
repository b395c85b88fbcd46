/*
 * Standalone firmware (project type "standalone"): no RPC; runs every model of the firmware once
 * through the ai_ API (src/ai/ai_runtime.h) on its known input and prints its "ai:" lines on the
 * console UART (ai_sample_run_all, src/ai/ai_sample.h, which lists them), then idles.
 */
#include <stddef.h>
#include <stdint.h>

#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/platform.h>

#include "ai/ai_sample.h"
#include <zephyr/device.h>
#include <zephyr/drivers/uart.h>
#include <zephyr/kernel.h>

static const struct device* const g_uart = DEVICE_DT_GET(DT_CHOSEN(zephyr_console));

static void UartWrite(const uint8_t* data, size_t num_bytes) {
  size_t i;
  for (i = 0; i < num_bytes; i++) {
    uart_poll_out(g_uart, data[i]);
  }
}

int main(void) {
  if (!device_is_ready(g_uart) || TVMPlatformInitialize() != 0) {
    TVMPlatformAbort(kTvmErrorPlatformCheckFailure);
  }
  (void)ai_sample_run_all(UartWrite);
  for (;;) {
    k_sleep(K_FOREVER);
  }
  return 0;
}

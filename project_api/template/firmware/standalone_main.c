/*
 * Standalone firmware (project type "standalone"): no RPC; runs every model of the firmware once
 * through the ai_ API (src/ai/ai_runtime.h) on its known input and prints its "ai:" lines over
 * the UART (ai_sample_run_all, src/ai/ai_sample.h, which lists them), then stops (on QEMU:
 * semihosting exit, status 0 when every model ran).
 */
#include <stdint.h>

#include <tvm/runtime/crt/platform.h>

#include "ai/ai_sample.h"
#include "board.h"
#include "firmware_port.h"

int main(void) {
  int failures;
  if (TVMPlatformInitialize() != 0) {
    FirmwareStop("platform initialisation failed", 1);
  }
  UartInit();
  failures = ai_sample_run_all(UartWrite);
  FirmwareStop(failures == 0 ? "every model ran" : "a model failed", failures != 0);
}

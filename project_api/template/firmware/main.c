/*
 * Host-driven firmware: the C runtime's RPC server on the board's UART. Received bytes are
 * queued by the board's UART driver (its interrupt handler, where the board has one) and fed to TVMCrtRpcServer_Feed from this
 * loop; replies go out through a blocking write. After set-up the firmware sends one ready
 * line (FIRMWARE_READY_BANNER) before any RPC byte, so the host knows the UART receives.
 */
#include <stdint.h>
#include <stdio.h>

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/platform.h>

#include "board.h"
#include "firmware_port.h"

#define FIRMWARE_READY_BANNER "project-api " BOARD_PLATFORM " ready: " BOARD_NAME "\n"
/*! Bytes taken from the receive ring per Feed call. */
#define FIRMWARE_FEED_CHUNK_BYTES 256u
/*! Test hook: milliseconds the loop stays busy after each Feed (0: none), to prove that the
 *  interrupt-driven receive keeps bytes while the device computes, and reports what it loses. */
#ifndef FIRMWARE_TEST_BUSY_MS
#define FIRMWARE_TEST_BUSY_MS 0
#endif

static uint8_t g_model_workspace[TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES] __attribute__((aligned(16)));

static ptrdiff_t ChannelWrite(void* context, const uint8_t* data, size_t num_bytes) {
  (void)context;
  UartWrite(data, num_bytes);
  return (ptrdiff_t)num_bytes;
}

int main(void) {
  static const char banner[] = FIRMWARE_READY_BANNER;
  static uint8_t chunk[FIRMWARE_FEED_CHUNK_BYTES];
  microtvm_rpc_server_t server;
  TVMCrtRpcServerStats stats = {0};
  uint32_t lost_reported = 0;
  tvm_crt_error_t err;

  if (TVMPlatformInitialize() != kTvmErrorNoError) {
    FirmwareStop("platform initialisation failed", 1);
  }
  UartInit();
  err = TVMCrtWorkspace_Init(g_model_workspace, sizeof(g_model_workspace));
  if (err != kTvmErrorNoError) {
    TVMPlatformAbort(err);
  }
  UartWrite((const uint8_t*)banner, sizeof(banner) - 1u);
  server = MicroTVMRpcServerInit(ChannelWrite, NULL);
  if (server == NULL) {
    FirmwareStop("RPC server initialisation failed", 1);
  }

  for (;;) {
    size_t n = UartRead(chunk, sizeof(chunk));
    uint32_t lost = UartBytesLost();
    if (lost != lost_reported) {
      TVMLogf(BOARD_PLATFORM ": UART receive lost %lu bytes (ring of %u bytes full or overrun)",
              (unsigned long)(lost - lost_reported), (unsigned)BOARD_UART_RX_RING_BYTES);
      lost_reported = lost;
    }
    if (n == 0) {
      UartWaitForInput();
      continue;
    }
    err = TVMCrtRpcServer_Feed(server, chunk, n, &stats);
    if (err == kTvmErrorPlatformShutdown) {
      FirmwareStop("shutdown requested by the host", 0);
    }
    if (err != kTvmErrorNoError) {
      TVMPlatformAbort(err);
    }
#if FIRMWARE_TEST_BUSY_MS > 0
    {
      uint64_t until = FirmwareCycles() + (uint64_t)FirmwareCpuHz() / 1000u * FIRMWARE_TEST_BUSY_MS;
      while (FirmwareCycles() < until) {
      }
    }
#endif
  }
}

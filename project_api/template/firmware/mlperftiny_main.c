/*
 * MLPerf Tiny firmware (project type "mlperftiny"): the benchmark's UART protocol
 * (crt/src/mlperftiny) on the board's UART, timed by the port's cycle counter. Prints the template's ready line
 * first (open_transport waits for it), then the benchmark's start-up lines.
 */
#include <stdint.h>

#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/mlperftiny.h>
#include <tvm/runtime/crt/platform.h>

#include "board.h"
#include "firmware_port.h"

#define FIRMWARE_READY_BANNER "project-api " BOARD_PLATFORM " ready: " BOARD_NAME " mlperftiny\r\n"

extern const TVMCrtMlperfTinyAotInfo kTVMMlperfTinyAotInfo;

void TVMCrtMlperfTinyPort_Write(const char* data, size_t size) {
  UartWrite((const uint8_t*)data, size);
}

uint64_t TVMCrtMlperfTinyPort_Micros(void) {
  uint64_t cycles = FirmwareCycles();
  uint64_t hz = FirmwareCpuHz();
  return cycles / hz * 1000000u + cycles % hz * 1000000u / hz;
}

int main(void) {
  static const char banner[] = FIRMWARE_READY_BANNER;
  static TVMCrtMlperfTiny bench;
  static TVMCrtMlperfTinyAot aot;
  static TVMCrtMlperfTinyModel model;
  static uint8_t chunk[64];
  const char* why = "";
  if (TVMPlatformInitialize() != kTvmErrorNoError) {
    FirmwareStop("platform initialisation failed", 1);
  }
  UartInit();
  if (TVMCrtMlperfTinyAot_Init(&aot, &model, &kTVMMlperfTinyAotInfo, &why) != 0) {
    FirmwareStop(why, 1);
  }
  UartWrite((const uint8_t*)banner, sizeof(banner) - 1u);
  TVMCrtMlperfTiny_Start(&bench, &model, kTVMMlperfTinyAotInfo.db,
                         kTVMMlperfTinyAotInfo.db_capacity);
  for (;;) {
    size_t n = UartRead(chunk, sizeof(chunk));
    if (n == 0) {
      UartWaitForInput();
      continue;
    }
    TVMCrtMlperfTiny_Receive(&bench, chunk, n);
  }
}

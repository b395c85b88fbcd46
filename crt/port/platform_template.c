/*
 * platform_template.c: the starting point of a new port of the C runtime. Copy it into the
 * port as platform.c and fill in every function marked PORT.
 *
 * A port implements tvm/runtime/crt/platform.h, the only seam between the runtime and a board.
 * The generic half of it comes ready-made in the "platform" library (crt/src/platform; see
 * crt/libraries.txt), which a port builds unless it needs something else there:
 *
 *   TVMPlatformMemoryAllocate/Free       a page pool over a static buffer of
 *                                        TVM_WORKSPACE_SIZE_BYTES (config.h)
 *   TVMPlatformFormatMessage             vsnprintf
 *   TVMPlatformTimerStart/Stop           the measurement timer, over the cycle counter below
 *   TVMPlatformBefore/AfterMeasurement   no-ops
 *   TVMCrtDevice_Open/Activate/Deactivate/Close   no-ops (a CPU without power states)
 *
 * This file is the other half: abort, the cycle counter and its frequency, random bytes and the
 * start-up hook, and at the end the two functions an MLPerf Tiny port adds. Each has a default
 * that works with any C99 library, so the copy builds and runs at once (the C test
 * crt/tests/test_port_template.c runs an RPC exchange and an MLPerf Tiny command over this very
 * file), but only the port knows how to do them well on its board.
 *
 * Build: this file, the port's main.c and the model's code, plus the sources of the libraries
 * crt/libraries.txt lists for the project type (host_driven: runtime platform backend;
 * standalone: backend, which needs none of platform.h but what main.c calls; mlperftiny:
 * mlperftiny backend); -std=c99, include path crt/include, and the project's crt_config.h
 * (-include it, or -DTVM_CRT_HAVE_CONFIG_H).
 *
 * The main loop of a host-driven port (sketch; error handling left out):
 *
 *   static uint8_t g_model_workspace[TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES];
 *
 *   static ptrdiff_t UartWrite(void* context, const uint8_t* data, size_t num_bytes) {
 *     ...send the bytes, blocking...
 *     return (ptrdiff_t)num_bytes;
 *   }
 *
 *   int main(void) {
 *     microtvm_rpc_server_t server;
 *     TVMPlatformInitialize();
 *     TVMCrtWorkspace_Init(g_model_workspace, sizeof(g_model_workspace));
 *     server = MicroTVMRpcServerInit(UartWrite, NULL);
 *     for (;;) {
 *       ...take the bytes the UART interrupt handler queued: data, num_bytes...
 *       if (TVMCrtRpcServer_Feed(server, data, num_bytes, NULL) != kTvmErrorNoError) {
 *         TVMPlatformAbort(kTvmErrorPlatformShutdown);  // the host said kShutdown: reset
 *       }
 *     }
 *   }
 *
 * Feed recovers from line noise by itself; it runs each request before it returns, so call it
 * from the main loop, not from the interrupt handler (microtvm_rpc_server.h).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/mlperftiny.h>
#include <tvm/runtime/crt/platform.h>

/*
 * PORT: stop for good after an unrecoverable error. Must not return. On a board, reset it
 * (NVIC_SystemReset() on Cortex-M) so the host can open a new session, or halt where a debugger
 * finds it; the code says why. Default: the C library's abort(), which ends a hosted process
 * and on newlib calls _exit(), whatever the board support package makes of that.
 */
void TVMPlatformAbort(tvm_crt_error_t error_code) {
  (void)error_code;
  abort();
}

/*
 * PORT: the free-running cycle counter the platform library's measurement timer runs on (the
 * time evaluator's timer), with the finest resolution the board has: DWT->CYCCNT or SysTick on
 * Cortex-M, a hardware timer. It must count up and never wrap: extend a narrower counter to 64
 * bits in software by counting its overflows. Fail with kTvmErrorPlatformTimerBadState when it
 * cannot be read. Default: C99's clock(), processor time in CLOCKS_PER_SEC steps; coarse on
 * many libraries, and on newlib only as good as the _times() the board provides.
 */
tvm_crt_error_t TVMCrtPlatform_CycleCount(uint64_t* out_cycles) {
  clock_t now = clock();
  if (now == (clock_t)-1) {
    return kTvmErrorPlatformTimerBadState;
  }
  *out_cycles = (uint64_t)now;
  return kTvmErrorNoError;
}

/* PORT: how fast that counter counts, in Hz (e.g. the core clock for DWT->CYCCNT). */
uint64_t TVMCrtPlatform_CycleFrequencyHz(void) { return (uint64_t)CLOCKS_PER_SEC; }

/*
 * PORT: random bytes. They seed the RPC session nonce, so they must differ from one reset to
 * the next; cryptographic quality is not needed. Use the board's RNG peripheral, or noise such
 * as ADC readings or uninitialised RAM at start-up.
 * Default: a linear congruential generator seeded once from time() and clock(); on a board
 * without a real-time clock those repeat after every reset, so replace it there.
 */
static uint32_t g_random_state;

tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t num_bytes) {
  size_t i;
  if (g_random_state == 0) {
    g_random_state = ((uint32_t)time(NULL) * 2654435761u) ^ (uint32_t)clock() ^ 0x9e3779b9u;
  }
  for (i = 0; i < num_bytes; ++i) {
    g_random_state = g_random_state * 1664525u + 1013904223u;
    buffer[i] = (uint8_t)(g_random_state >> 24);
  }
  return kTvmErrorNoError;
}

/*
 * PORT: the application's set-up hook, which main() calls before anything else (the runtime
 * never calls it): clocks, caches, the UART, the cycle counter. The platform library's memory
 * pool needs no set-up. Default: nothing to do.
 */
tvm_crt_error_t TVMPlatformInitialize(void) { return kTvmErrorNoError; }

/*
 * ---- MLPerf Tiny (project type "mlperftiny", tvm/runtime/crt/mlperftiny.h) ----------------
 *
 * An MLPerf Tiny port builds the "mlperftiny" and "backend" libraries instead of the RPC server
 * and supplies the two functions below besides the model glue; a host-driven port deletes them.
 * Its main loop (sketch; kInfo is the TVMCrtMlperfTinyAotInfo a generated project writes in
 * src/mlperftiny_model.c):
 *
 *   static TVMCrtMlperfTiny bench;
 *   static TVMCrtMlperfTinyAot aot;
 *   static TVMCrtMlperfTinyModel model;
 *   const char* why;
 *   TVMPlatformInitialize();
 *   if (TVMCrtMlperfTinyAot_Init(&aot, &model, &kInfo, &why) != 0) {
 *     ...write why to the host and stop...
 *   }
 *   TVMCrtMlperfTiny_Start(&bench, &model, kInfo.db, kInfo.db_capacity);
 *   for (;;) {
 *     ...take the bytes the UART interrupt handler queued: data, num_bytes...
 *     TVMCrtMlperfTiny_Receive(&bench, data, num_bytes);
 *   }
 */

/*
 * PORT: write the benchmark's output lines to the host (the UART the EnergyRunner listens on),
 * blocking until the bytes are sent. Default: the C library's stdout.
 */
void TVMCrtMlperfTinyPort_Write(const char* data, size_t size) {
  (void)fwrite(data, 1, size, stdout);
  (void)fflush(stdout);
}

/*
 * PORT: a free-running microsecond clock for the m-lap-us lines around timed runs. Default: the
 * cycle counter above, converted in two parts so the product cannot overflow.
 */
uint64_t TVMCrtMlperfTinyPort_Micros(void) {
  uint64_t cycles = 0;
  uint64_t hz = TVMCrtPlatform_CycleFrequencyHz();
  (void)TVMCrtPlatform_CycleCount(&cycles);
  return cycles / hz * 1000000u + cycles % hz * 1000000u / hz;
}

/*!
 * \file platform/timer.c
 * \brief TVMPlatformTimerStart/Stop over the port's cycle counter (TVMCrtPlatform_CycleCount,
 *     TVMCrtPlatform_CycleFrequencyHz; platform.h): the one measurement timer, so a port
 *     supplies only the counter. Part of the "platform" library.
 */
#include <stdint.h>
#include <tvm/runtime/crt/platform.h>

static uint64_t g_timer_start_cycles;
static int g_timer_running;

tvm_crt_error_t TVMPlatformTimerStart(void) {
  uint64_t now;
  tvm_crt_error_t err;
  if (g_timer_running) {
    return kTvmErrorPlatformTimerBadState;
  }
  err = TVMCrtPlatform_CycleCount(&now);
  if (err != kTvmErrorNoError) {
    return err;
  }
  g_timer_start_cycles = now;
  g_timer_running = 1;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformTimerStop(double* elapsed_time_seconds) {
  uint64_t now = 0;
  /* Read the counter first, so the checks below do not count as measured time. */
  tvm_crt_error_t err = TVMCrtPlatform_CycleCount(&now);
  uint64_t hz;
  if (!g_timer_running) {
    return kTvmErrorPlatformTimerBadState;
  }
  g_timer_running = 0;
  if (err != kTvmErrorNoError) {
    return err;
  }
  hz = TVMCrtPlatform_CycleFrequencyHz();
  if (hz == 0 || now < g_timer_start_cycles) {
    return kTvmErrorPlatformTimerBadState; /* a broken counter: no frequency, or it ran back */
  }
  *elapsed_time_seconds = (double)(now - g_timer_start_cycles) / (double)hz;
  return kTvmErrorNoError;
}

/*
 * A POSIX implementation of the platform seam for the unit tests: heap memory with a live-block
 * count, a CLOCK_MONOTONIC cycle counter in nanoseconds (or a fake one), /dev/urandom, and
 * lifecycle hooks that record their calls. The timer and TVMPlatformFormatMessage come from the
 * platform library (src/platform/timer.c, format_message.c), so every test that times something
 * runs the shipped timer. Test-only: the host template ships the real host platform.
 */
#define _POSIX_C_SOURCE 200809L

#include "test_platform.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tvm/runtime/crt/platform.h>

static char g_trace[4096];
static int g_live_allocations;
static int g_fail_allocation_after = -1;
static tvm_crt_error_t g_hook_error[4];
static int g_fake_clock;
static uint64_t g_fake_now_ns;
static tvm_crt_error_t g_cycle_count_error;

static const char* const kHookNames[4] = {"open", "activate", "deactivate", "close"};

static void trace(const char* fmt, ...) {
  size_t used = strlen(g_trace);
  va_list args;
  va_start(args, fmt);
  vsnprintf(g_trace + used, sizeof(g_trace) - used, fmt, args);
  va_end(args);
}

void TestPlatform_Reset(void) {
  g_trace[0] = '\0';
  g_fail_allocation_after = -1;
  memset(g_hook_error, 0, sizeof(g_hook_error));
  g_fake_clock = 0;
  g_fake_now_ns = 0;
  g_cycle_count_error = kTvmErrorNoError;
}

const char* TestPlatform_Trace(void) { return g_trace; }

int TestPlatform_LiveAllocations(void) { return g_live_allocations; }

void TestPlatform_FailAllocationAfter(int successes) { g_fail_allocation_after = successes; }

void TestPlatform_SetHookError(const char* hook, tvm_crt_error_t err) {
  for (int i = 0; i < 4; i++) {
    if (strcmp(hook, kHookNames[i]) == 0) {
      g_hook_error[i] = err;
      return;
    }
  }
  fprintf(stderr, "TestPlatform_SetHookError: unknown hook %s\n", hook);
  abort();
}

void TestPlatform_UseFakeClock(void) {
  g_fake_clock = 1;
  g_fake_now_ns = 1000; /* not 0: a counter need not start there */
}

void TestPlatform_AdvanceClock(double seconds) {
  g_fake_now_ns += (uint64_t)(seconds * 1e9 + 0.5);
}

void TestPlatform_SetClock(uint64_t ns) { g_fake_now_ns = ns; }

void TestPlatform_SetCycleCountError(tvm_crt_error_t err) { g_cycle_count_error = err; }

void TVMPlatformAbort(tvm_crt_error_t error_code) {
  fprintf(stderr, "TVMPlatformAbort(0x%x)\n", (unsigned)error_code);
  abort();
}

tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  (void)dev;
  if (g_fail_allocation_after == 0) {
    return kTvmErrorPlatformNoMemory;
  }
  void* p = malloc(num_bytes == 0 ? 1 : num_bytes);
  if (p == NULL) {
    return kTvmErrorPlatformNoMemory;
  }
  if (g_fail_allocation_after > 0) {
    g_fail_allocation_after--;
  }
  g_live_allocations++;
  *out_ptr = p;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  (void)dev;
  if (ptr != NULL) {
    g_live_allocations--;
  }
  free(ptr);
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMCrtPlatform_CycleCount(uint64_t* out_cycles) {
  struct timespec ts;
  trace("cycles;");
  if (g_cycle_count_error != kTvmErrorNoError) {
    return g_cycle_count_error;
  }
  if (g_fake_clock) {
    *out_cycles = g_fake_now_ns;
    return kTvmErrorNoError;
  }
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
    return kTvmErrorPlatformTimerBadState;
  }
  *out_cycles = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  return kTvmErrorNoError;
}

uint64_t TVMCrtPlatform_CycleFrequencyHz(void) { return 1000000000u; }

static uint8_t g_random_script[16];
static size_t g_random_script_size;

void TestPlatform_ScriptRandom(const uint8_t* bytes, size_t num_bytes) {
  if (num_bytes > sizeof(g_random_script)) num_bytes = sizeof(g_random_script);
  memcpy(g_random_script, bytes, num_bytes);
  g_random_script_size = num_bytes;
}

tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t num_bytes) {
  if (g_random_script_size >= num_bytes) {
    memcpy(buffer, g_random_script, num_bytes);
    g_random_script_size -= num_bytes;
    memmove(g_random_script, g_random_script + num_bytes, g_random_script_size);
    return kTvmErrorNoError;
  }
  FILE* f = fopen("/dev/urandom", "rb");
  if (f == NULL) {
    return kTvmErrorFunctionCallNotImplemented;
  }
  size_t got = fread(buffer, 1, num_bytes, f);
  fclose(f);
  return got == num_bytes ? kTvmErrorNoError : kTvmErrorFunctionCallNotImplemented;
}

tvm_crt_error_t TVMPlatformBeforeMeasurement(void) {
  trace("before;");
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformAfterMeasurement(void) {
  trace("after;");
  return kTvmErrorNoError;
}

static tvm_crt_error_t hook(int which, DLDevice device) {
  trace("%s(%d,%d);", kHookNames[which], (int)device.device_type, (int)device.device_id);
  return g_hook_error[which];
}

tvm_crt_error_t TVMCrtDevice_Open(DLDevice device) { return hook(0, device); }
tvm_crt_error_t TVMCrtDevice_Activate(DLDevice device) { return hook(1, device); }
tvm_crt_error_t TVMCrtDevice_Deactivate(DLDevice device) { return hook(2, device); }
tvm_crt_error_t TVMCrtDevice_Close(DLDevice device) { return hook(3, device); }

tvm_crt_error_t TVMPlatformInitialize(void) {
  TestPlatform_Reset();
  return kTvmErrorNoError;
}

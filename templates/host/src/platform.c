/*
 * POSIX platform for the host template: the "device" is a process on the build machine.
 *
 * Only the host-specific half of platform.h lives here: abort, the cycle counter (CLOCK_MONOTONIC
 * in nanoseconds), random bytes and the start-up hook. The generic half (the memory pool behind
 * TVMPlatformMemoryAllocate, message formatting, the timer over the cycle counter, the no-op
 * measurement and device hooks) comes from the C runtime's "platform" library (crt/src/platform),
 * which host-driven builds compile; standalone builds need none of it (standalone.c reads the
 * cycle counter itself). The model's own workspace is separate: main.c hands a static buffer to
 * TVMCrtWorkspace_Init. Nothing here calls malloc.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/platform.h>

void TVMPlatformAbort(tvm_crt_error_t error_code) {
  fprintf(stderr, "TVMPlatformAbort: error 0x%08x\n", (unsigned)error_code);
  fflush(stderr);
  _exit(3);
}

tvm_crt_error_t TVMCrtPlatform_CycleCount(uint64_t* out_cycles) {
  struct timespec now;
  if (clock_gettime(CLOCK_MONOTONIC, &now) != 0) {
    return kTvmErrorPlatformTimerBadState;
  }
  *out_cycles = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
  return kTvmErrorNoError;
}

uint64_t TVMCrtPlatform_CycleFrequencyHz(void) { return 1000000000u; }

/* A small xorshift generator, seeded from the clock and pid when /dev/urandom is unavailable. */
static uint64_t g_host_rng_state;

static uint8_t host_fallback_random_byte(void) {
  if (g_host_rng_state == 0) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    g_host_rng_state = ((uint64_t)now.tv_sec << 32) ^ (uint64_t)now.tv_nsec ^
                       ((uint64_t)getpid() << 16) ^ 0x9e3779b97f4a7c15ULL;
  }
  g_host_rng_state ^= g_host_rng_state << 13;
  g_host_rng_state ^= g_host_rng_state >> 7;
  g_host_rng_state ^= g_host_rng_state << 17;
  return (uint8_t)(g_host_rng_state >> 24);
}

tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t num_bytes) {
  size_t filled = 0;
  int fd = open("/dev/urandom", O_RDONLY);
  if (fd >= 0) {
    while (filled < num_bytes) {
      ssize_t n = read(fd, buffer + filled, num_bytes - filled);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        break;
      }
      filled += (size_t)n;
    }
    close(fd);
  }
  for (; filled < num_bytes; filled++) {
    buffer[filled] = host_fallback_random_byte();
  }
  return kTvmErrorNoError;
}

/* Nothing to set up: the platform library's memory pool is built on first use. */
tvm_crt_error_t TVMPlatformInitialize(void) { return kTvmErrorNoError; }

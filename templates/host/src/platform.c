/*
 * POSIX platform for the host template: the "device" is a process on the build machine.
 *
 * Memory for the runtime (RPC buffers, NDArrays) comes from one static pool managed by the page
 * allocator; host-driven builds only (TVM_HOST_DRIVEN). The model's own workspace is separate:
 * main.c hands a static buffer to TVMBackendWorkspaceInit. Nothing here calls malloc.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/platform.h>

#ifdef TVM_HOST_DRIVEN
#include <tvm/runtime/crt/page_allocator.h>
#endif

#ifndef TVM_WORKSPACE_SIZE_BYTES
#define TVM_WORKSPACE_SIZE_BYTES (2 * 1024 * 1024)
#endif

/*! Page size of the runtime memory pool, as log2 (the reference host template uses 256 B). */
#define TVM_HOST_PAGE_SIZE_LOG2 8

void TVMPlatformAbort(tvm_crt_error_t error_code) {
  fprintf(stderr, "TVMPlatformAbort: error 0x%08x\n", (unsigned)error_code);
  fflush(stderr);
  _exit(3);
}

size_t TVMPlatformFormatMessage(char* out_buf, size_t out_buf_size_bytes, const char* fmt,
                                va_list args) {
  int n = vsnprintf(out_buf, out_buf_size_bytes, fmt, args);
  if (n < 0) {
    if (out_buf_size_bytes > 0) {
      out_buf[0] = '\0';
    }
    return 0;
  }
  if ((size_t)n >= out_buf_size_bytes) {
    return out_buf_size_bytes > 0 ? out_buf_size_bytes - 1 : 0;
  }
  return (size_t)n;
}

#ifdef TVM_HOST_DRIVEN
static uint8_t g_host_memory_pool[TVM_WORKSPACE_SIZE_BYTES] __attribute__((aligned(16)));
static MemoryManagerInterface* g_host_memory_manager;

tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  if (g_host_memory_manager == NULL) {
    return kTvmErrorPlatformNoMemory;
  }
  return g_host_memory_manager->Allocate(g_host_memory_manager, num_bytes, dev, out_ptr);
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  if (g_host_memory_manager == NULL) {
    return kTvmErrorPlatformNoMemory;
  }
  return g_host_memory_manager->Free(g_host_memory_manager, ptr, dev);
}
#endif

static struct timespec g_host_timer_start;
static int g_host_timer_running;

tvm_crt_error_t TVMPlatformTimerStart(void) {
  if (g_host_timer_running) {
    return kTvmErrorPlatformTimerBadState;
  }
  if (clock_gettime(CLOCK_MONOTONIC, &g_host_timer_start) != 0) {
    return kTvmErrorPlatformTimerBadState;
  }
  g_host_timer_running = 1;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformTimerStop(double* elapsed_time_seconds) {
  struct timespec now;
  if (!g_host_timer_running) {
    return kTvmErrorPlatformTimerBadState;
  }
  g_host_timer_running = 0;
  if (clock_gettime(CLOCK_MONOTONIC, &now) != 0) {
    return kTvmErrorPlatformTimerBadState;
  }
  *elapsed_time_seconds = (double)(now.tv_sec - g_host_timer_start.tv_sec) +
                          (double)(now.tv_nsec - g_host_timer_start.tv_nsec) * 1e-9;
  return kTvmErrorNoError;
}

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

tvm_crt_error_t TVMPlatformBeforeMeasurement(void) { return kTvmErrorNoError; }

tvm_crt_error_t TVMPlatformAfterMeasurement(void) { return kTvmErrorNoError; }

/* Device lifecycle hooks: a host CPU has no power states to manage. */
tvm_crt_error_t TVMDeviceOpen(DLDevice device) {
  (void)device;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMDeviceActivate(DLDevice device) {
  (void)device;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMDeviceDeactivate(DLDevice device) {
  (void)device;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMDeviceClose(DLDevice device) {
  (void)device;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformInitialize(void) {
#ifdef TVM_HOST_DRIVEN
  return PageMemoryManagerCreate(&g_host_memory_manager, g_host_memory_pool,
                                 sizeof(g_host_memory_pool), TVM_HOST_PAGE_SIZE_LOG2);
#else
  return kTvmErrorNoError;
#endif
}

/*
 * The Zephyr half of platform.h (the generic half, message formatting, the timer and the no-op
 * hooks, is the runtime's "platform" library). Memory: Zephyr's system heap
 * (CONFIG_HEAP_MEM_POOL_SIZE, sized by workspace_size_bytes) replaces the runtime's static pool.
 * Cycle counter: the kernel's. Random: sys_rand32_get. Abort: a message on the console, then a
 * cold reboot.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <zephyr/device.h>
#include <zephyr/drivers/uart.h>
#include <zephyr/kernel.h>
#include <zephyr/sys/reboot.h>
#if defined(__has_include)
#if __has_include(<zephyr/random/random.h>)
#include <zephyr/random/random.h>
#else
#include <zephyr/random/rand32.h>
#endif
#else
#include <zephyr/random/rand32.h>
#endif

#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/platform.h>

tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  (void)dev;
  *out_ptr = k_aligned_alloc(TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES, num_bytes == 0u ? 1u : num_bytes);
  return *out_ptr == NULL ? kTvmErrorPlatformNoMemory : kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  (void)dev;
  k_free(ptr);
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMCrtPlatform_CycleCount(uint64_t* out_cycles) {
#if defined(CONFIG_TIMER_HAS_64BIT_CYCLE_COUNTER)
  *out_cycles = k_cycle_get_64();
#else
  /* A 32-bit counter, extended by counting its wraps (read at least once per wrap period). */
  static uint32_t last;
  static uint64_t high;
  uint32_t now = k_cycle_get_32();
  if (now < last) {
    high += (uint64_t)1u << 32;
  }
  last = now;
  *out_cycles = high | now;
#endif
  return kTvmErrorNoError;
}

uint64_t TVMCrtPlatform_CycleFrequencyHz(void) { return (uint64_t)sys_clock_hw_cycles_per_sec(); }

tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t num_bytes) {
  while (num_bytes > 0u) {
    uint32_t word = sys_rand32_get();
    size_t n = num_bytes < sizeof(word) ? num_bytes : sizeof(word);
    memcpy(buffer, &word, n);
    buffer += n;
    num_bytes -= n;
  }
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformInitialize(void) { return kTvmErrorNoError; }

void TVMPlatformAbort(tvm_crt_error_t error_code) {
  const struct device* const uart = DEVICE_DT_GET(DT_CHOSEN(zephyr_console));
  char text[48];
  int n = snprintf(text, sizeof(text), "\nTVMPlatformAbort: error 0x%08lx\n",
                   (unsigned long)error_code);
  int i;
  for (i = 0; i < n && i < (int)sizeof(text) - 1; i++) {
    uart_poll_out(uart, (unsigned char)text[i]);
  }
  sys_reboot(SYS_REBOOT_COLD);
  for (;;) {
  }
}

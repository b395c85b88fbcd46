/*
 * The board half of platform.h (the generic half is the runtime's "platform" library). Cycle
 * counter: mcycle/mcycleh read as one 64-bit value (under QEMU's -icount shift=0 it counts
 * instructions), or the ESP32-C3's performance counter, which counts cycles in 32 bits and is
 * extended here. Random bytes: the shared firmware/random.c over FirmwareCycles. Abort:
 * semihosting exit on QEMU; on hardware the core stops with interrupts off until the flash
 * runner resets it.
 */
#include <stdint.h>
#include <stdio.h>

#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/platform.h>

#include "board.h"
#include "riscv.h"

#if BOARD_COUNTER_ESP_PCCR
/* mpcer (0x7E0): count cycles; mpcmr (0x7E1): counting on; mpccr (0x7E2): the count. */
static uint32_t g_pccr_last;
static uint64_t g_pccr_high;

static void CounterInit(void) {
  CSR_WRITE(0x7E0, 1u);
  CSR_WRITE(0x7E1, 1u);
}

uint64_t FirmwareCycles(void) {
  uint32_t now = CSR_READ(0x7E2);
  if (now < g_pccr_last) {
    g_pccr_high += 1ull << 32;
  }
  g_pccr_last = now;
  return g_pccr_high | now;
}
#else
static void CounterInit(void) {}

uint64_t FirmwareCycles(void) {
  uint32_t high, low;
  do {
    high = CSR_READ(mcycleh);
    low = CSR_READ(mcycle);
  } while (high != CSR_READ(mcycleh));
  return (uint64_t)high << 32 | low;
}
#endif

uint32_t FirmwareCpuHz(void) { return BOARD_CPU_HZ; }

tvm_crt_error_t TVMCrtPlatform_CycleCount(uint64_t* out_cycles) {
  *out_cycles = FirmwareCycles();
  return kTvmErrorNoError;
}

uint64_t TVMCrtPlatform_CycleFrequencyHz(void) { return BOARD_CPU_HZ; }

tvm_crt_error_t TVMPlatformInitialize(void) {
  CounterInit();
  return kTvmErrorNoError;
}

/* RISC-V semihosting: operation in a0, parameter in a1, and the uncompressed, 4-byte aligned
 * sequence slli x0,x0,0x1f; ebreak; srai x0,x0,7 that tells a debugger's ebreak apart. */
static uint32_t Semihost(uint32_t op, const void* arg) {
  register uint32_t a0 __asm("a0") = op;
  register const void* a1 __asm("a1") = arg;
  __asm volatile(
      ".option push\n\t"
      ".option norvc\n\t"
      ".balign 4\n\t"
      "slli x0, x0, 0x1f\n\t"
      "ebreak\n\t"
      "srai x0, x0, 7\n\t"
      ".option pop"
      : "+r"(a0)
      : "r"(a1)
      : "memory");
  return a0;
}

void SemihostingWrite0(const char* text) { (void)Semihost(0x04u, text); }

void SemihostingExit(int failed) {
  /* SYS_EXIT with ADP_Stopped_ApplicationExit (status 0) or ADP_Stopped_InternalError. */
  (void)Semihost(0x18u, (const void*)(uintptr_t)(failed ? 0x20024u : 0x20026u));
  for (;;) {
  }
}

void FirmwareStop(const char* why, int failed) {
#if BOARD_EMULATED
  SemihostingWrite0("riscv firmware: ");
  SemihostingWrite0(why);
  SemihostingWrite0("\n");
  SemihostingExit(failed);
#else
  (void)why;
  (void)failed;
  CSR_CLEAR(mstatus, MSTATUS_MIE);
  for (;;) {
    __asm volatile("wfi");
  }
#endif
}

void TVMPlatformAbort(tvm_crt_error_t error_code) {
  char text[48];
  (void)snprintf(text, sizeof(text), "TVMPlatformAbort: error 0x%08lx", (unsigned long)error_code);
  FirmwareStop(text, 1);
}

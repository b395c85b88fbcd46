/*
 * The board half of platform.h (the generic half is the runtime's "platform" library:
 * memory pool, message formatting, the timer, no-op hooks). Cycle counter: SysTick at SYSCLK,
 * extended to 64 bits by its wrap interrupt (under QEMU's -icount shift=0 it counts instructions
 * deterministically).
 * Random bytes: the shared firmware/random.c over FirmwareCycles (SysTick). Abort:
 * semihosting exit on QEMU, a system reset on hardware. Also the semihosting calls and FirmwareStop.
 */
#include <stdint.h>
#include <stdio.h>

#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/platform.h>

#include "board.h"
#include "firmware.h"
#include "stm32_regs.h"

#define SYSTICK_RELOAD 0x00FFFFFFu

static volatile uint32_t g_systick_wraps;

void SysTick_Handler(void);
void SysTick_Handler(void) { g_systick_wraps++; }

void SysTickInit(void) {
  SYST_RVR = SYSTICK_RELOAD;
  SYST_CVR = 0;
  SYST_CSR = SYST_CSR_ENABLE | SYST_CSR_TICKINT | SYST_CSR_CLKSOURCE;
}

uint64_t SysTickCycles(void) {
  uint32_t wraps, value, pending;
  do {
    wraps = g_systick_wraps;
    value = SYST_CVR;
    pending = SCB_ICSR & SCB_ICSR_PENDSTSET;
  } while (wraps != g_systick_wraps);
  if (pending && value > SYSTICK_RELOAD / 2u) {
    wraps++; /* wrapped, and the handler has not run yet */
  }
  return ((uint64_t)wraps << 24) + (SYSTICK_RELOAD - value);
}

tvm_crt_error_t TVMCrtPlatform_CycleCount(uint64_t* out_cycles) {
  *out_cycles = SysTickCycles();
  return kTvmErrorNoError;
}

uint64_t TVMCrtPlatform_CycleFrequencyHz(void) { return g_sysclk_hz; }

uint64_t FirmwareCycles(void) { return SysTickCycles(); }

uint32_t FirmwareCpuHz(void) { return g_sysclk_hz; }

tvm_crt_error_t TVMPlatformInitialize(void) {
  SysTickInit();
  return kTvmErrorNoError;
}

/* ARM semihosting: operation in r0, parameter in r1, BKPT 0xAB (Thumb). */
static uint32_t Semihost(uint32_t op, const void* arg) {
  register uint32_t r0 __asm("r0") = op;
  register const void* r1 __asm("r1") = arg;
  __asm volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
  return r0;
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
  SemihostingWrite0("stm32 firmware: ");
  SemihostingWrite0(why);
  SemihostingWrite0("\n");
  SemihostingExit(failed);
#else
  (void)why;
  (void)failed;
  __asm volatile("dsb" ::: "memory");
  SCB_AIRCR = SCB_AIRCR_SYSRESETREQ;
  __asm volatile("dsb" ::: "memory");
  for (;;) {
  }
#endif
}

void TVMPlatformAbort(tvm_crt_error_t error_code) {
  char text[48];
  (void)snprintf(text, sizeof(text), "TVMPlatformAbort: error 0x%08lx", (unsigned long)error_code);
  FirmwareStop(text, 1);
}

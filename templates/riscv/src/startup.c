/*
 * Start-up: _start (the image's entry, first in .text) sets the global, stack and thread
 * pointers (the C library keeps errno in thread-local storage),
 * then Reset copies .data, zeroes .bss, turns the FPU on where the core has one, installs the
 * trap handler and calls main. Symbols come from the generated linker script.
 */
#include <stdint.h>

#include "board.h"
#include "riscv.h"

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss;
extern int main(void);
void Reset(void) __attribute__((noreturn, used));

__attribute__((naked, section(".text.start"))) void _start(void);
void _start(void) {
  __asm volatile(
      ".option push\n\t"
      ".option norelax\n\t"
      "la gp, __global_pointer$\n\t"
      ".option pop\n\t"
      "la sp, _estack\n\t"
      "la tp, __tls_base\n\t"
      "j Reset");
}

void Reset(void) {
  uint32_t* src = &_sidata;
  uint32_t* dst;
  for (dst = &_sdata; dst < &_edata;) {
    *dst++ = *src++;
  }
  for (dst = &_sbss; dst < &_ebss;) {
    *dst++ = 0;
  }
#if defined(__riscv_flen)
  CSR_SET(mstatus, MSTATUS_FS_INITIAL);
  CSR_WRITE(fcsr, 0);
#endif
  TrapInit();
  (void)main();
  FirmwareStop("main returned", 0);
}

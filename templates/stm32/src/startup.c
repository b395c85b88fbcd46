/*
 * Start-up code and vector table for Cortex-M4/M7 (ARMv7-M): copy .data, zero .bss, enable the
 * FPU, set up the clock tree and call main. Symbols come from the generated linker script.
 */
#include <stdint.h>
#include <string.h>

#include "board.h"
#include "firmware.h"
#include "stm32_regs.h"

extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
extern int main(void);
void Reset_Handler(void);
void Default_Handler(void);
void HardFault_Handler(void);
void SysTick_Handler(void);
void UartIrqHandler(void);

typedef void (*vector_t)(void);

__attribute__((section(".isr_vector"), used)) const vector_t g_vectors[16 + BOARD_IRQ_COUNT] = {
    [0] = (vector_t)(uintptr_t)&_estack,
    [1] = Reset_Handler,
    [2] = Default_Handler, /* NMI */
    [3] = HardFault_Handler,
    [4] = HardFault_Handler, /* MemManage */
    [5] = HardFault_Handler, /* BusFault */
    [6] = HardFault_Handler, /* UsageFault */
    [11] = Default_Handler,  /* SVCall */
    [12] = Default_Handler,  /* DebugMonitor */
    [14] = Default_Handler,  /* PendSV */
    [15] = SysTick_Handler,
    [16 + BOARD_UART_IRQ] = UartIrqHandler,
};

void Default_Handler(void) { FirmwareStop("unexpected interrupt", 1); }

void HardFault_Handler(void) { FirmwareStop("hard fault", 1); }

void Reset_Handler(void) {
  uint32_t* src = &_sidata;
  uint32_t* dst;
  for (dst = &_sdata; dst < &_edata;) {
    *dst++ = *src++;
  }
  for (dst = &_sbss; dst < &_ebss;) {
    *dst++ = 0;
  }
  SCB_VTOR = (uint32_t)(uintptr_t)g_vectors;
#if defined(__ARM_FP)
  SCB_CPACR |= 0xFu << 20; /* CP10 and CP11: full access */
  __asm volatile("dsb\n\tisb" ::: "memory");
#endif
  (void)ClockInit();
  (void)main();
  FirmwareStop("main returned", 0);
}

/* The firmware's own interfaces: clock, SysTick and semihosting (no vendor HAL), and the port
 * the shared mains call (firmware_port.h: UART, cycle counter, stop). */
#ifndef FIRMWARE_H_
#define FIRMWARE_H_

#include <stddef.h>
#include <stdint.h>

#include "firmware_port.h"

/*! Set up the clock tree from board.h; returns the SYSCLK frequency actually reached. */
uint32_t ClockInit(void);
/*! The SYSCLK and APB clock of the UART after ClockInit. */
extern uint32_t g_sysclk_hz;
extern uint32_t g_uart_clock_hz;

/*! SysTick as a free-running 64-bit counter of SYSCLK cycles. */
void SysTickInit(void);
uint64_t SysTickCycles(void);

/*! Semihosting (QEMU -semihosting-config enable=on,target=native): message and exit. */
void SemihostingWrite0(const char* text);
void SemihostingExit(int failed) __attribute__((noreturn));

#endif /* FIRMWARE_H_ */

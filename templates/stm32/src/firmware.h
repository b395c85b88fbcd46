/* The firmware's own interfaces: clock, UART, SysTick and semihosting (no vendor HAL). */
#ifndef FIRMWARE_H_
#define FIRMWARE_H_

#include <stddef.h>
#include <stdint.h>

/*! Set up the clock tree from board.h; returns the SYSCLK frequency actually reached. */
uint32_t ClockInit(void);
/*! The SYSCLK and APB clock of the UART after ClockInit. */
extern uint32_t g_sysclk_hz;
extern uint32_t g_uart_clock_hz;

/*! GPIO, baud rate, interrupt-driven receive into a ring buffer. */
void UartInit(void);
/*! Blocking transmit. */
void UartWrite(const uint8_t* data, size_t num_bytes);
/*! Copy up to max_bytes received bytes into out; returns how many (0 if none). */
size_t UartRead(uint8_t* out, size_t max_bytes);
/*! Bytes lost so far (ring full, or a hardware overrun). */
uint32_t UartBytesLost(void);
/*! Sleep until an interrupt unless bytes are waiting. */
void UartWaitForInput(void);

/*! SysTick as a free-running 64-bit counter of SYSCLK cycles. */
void SysTickInit(void);
uint64_t SysTickCycles(void);

/*! Semihosting (QEMU -semihosting-config enable=on,target=native): message and exit. */
void SemihostingWrite0(const char* text);
void SemihostingExit(int failed) __attribute__((noreturn));

/*! Reset the board (hardware) or exit the emulator (QEMU), after a message. */
void FirmwareStop(const char* why, int failed) __attribute__((noreturn));

#endif /* FIRMWARE_H_ */

/*
 * The port of a bare-metal firmware: what a template's board sources (start-up, clock, UART,
 * platform) give the shared mains (main.c, standalone_main.c, mlperftiny_main.c). board.h,
 * generated from the board's data, defines BOARD_NAME, BOARD_PLATFORM (the template: "stm32",
 * "riscv") and BOARD_UART_RX_RING_BYTES.
 */
#ifndef FIRMWARE_PORT_H_
#define FIRMWARE_PORT_H_

#include <stddef.h>
#include <stdint.h>

/*! Pins, baud rate, receive into a ring buffer (interrupt-driven where the board can). */
void UartInit(void);
/*! Blocking transmit. */
void UartWrite(const uint8_t* data, size_t num_bytes);
/*! Copy up to max_bytes received bytes into out; returns how many (0 if none). */
size_t UartRead(uint8_t* out, size_t max_bytes);
/*! Bytes lost so far (ring full, or a hardware overrun). */
uint32_t UartBytesLost(void);
/*! Sleep until an interrupt unless bytes are waiting. */
void UartWaitForInput(void);

/*! A free-running 64-bit count of CPU cycles, and the CPU clock it counts. */
uint64_t FirmwareCycles(void);
uint32_t FirmwareCpuHz(void);

/*! Reset the board (hardware) or exit the emulator (QEMU), after a message. */
void FirmwareStop(const char* why, int failed) __attribute__((noreturn));

#endif /* FIRMWARE_PORT_H_ */

/* RISC-V machine-mode CSRs, the PLIC and this template's own interfaces beside the shared port
 * (firmware_port.h): trap set-up, the cycle counter, semihosting and the UART driver's half. */
#ifndef RISCV_H_
#define RISCV_H_

#include <stddef.h>
#include <stdint.h>

#include "firmware_port.h"

#define CSR_READ(name)                                  \
  __extension__({                                       \
    uint32_t csr_value_;                                \
    __asm volatile("csrr %0, " #name : "=r"(csr_value_)); \
    csr_value_;                                         \
  })
#define CSR_WRITE(name, value) __asm volatile("csrw " #name ", %0" ::"r"((uint32_t)(value)))
#define CSR_SET(name, bits) __asm volatile("csrs " #name ", %0" ::"r"((uint32_t)(bits)))
#define CSR_CLEAR(name, bits) __asm volatile("csrc " #name ", %0" ::"r"((uint32_t)(bits)))

#define MSTATUS_MIE (1u << 3)
#define MSTATUS_FS_INITIAL (1u << 13)
#define MIE_MEIE (1u << 11)
#define MCAUSE_INTERRUPT (1u << 31)
#define MCAUSE_MACHINE_EXTERNAL 11u

#define MMIO32(addr) (*(volatile uint32_t*)(uintptr_t)(addr))
#define MMIO8(addr) (*(volatile uint8_t*)(uintptr_t)(addr))

/*! mtvec to the trap handler (trap.c); with a PLIC, its UART source enabled for hart 0's M mode. */
void TrapInit(void);
/*! The UART driver's receive interrupt: drains the hardware FIFO into the ring (uart.c). */
void UartIrqHandler(void);

/*! The board's UART driver (uart_<kind>.c). */
void UartHwInit(void);
void UartHwPutc(uint8_t byte);
/*! The next received byte, or -1 when the FIFO is empty. */
int UartHwGetc(void);
/*! Raise the receive interrupt while the FIFO holds a byte. */
void UartHwEnableRxInterrupt(void);

/*! The RISC-V semihosting calls (QEMU -semihosting-config enable=on,target=native). */
void SemihostingWrite0(const char* text);
void SemihostingExit(int failed) __attribute__((noreturn));

#endif /* RISCV_H_ */

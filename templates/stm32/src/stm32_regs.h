/*
 * Register addresses and bits the firmware uses, written from the STM32F4 (RM0090, RM0402),
 * STM32F7 (RM0410) and STM32L4/L4+ (RM0351, RM0432) reference manuals and the Arm v7-M
 * Architecture Reference Manual. Only what startup, clock, GPIO, UART and SysTick set-up need.
 * The family comes from board.h (generated from boards.yaml): BOARD_FAMILY_F4/F7/L4.
 */
#ifndef STM32_REGS_H_
#define STM32_REGS_H_

#include <stdint.h>

#include "board.h"

#define REG32(addr) (*(volatile uint32_t*)(uintptr_t)(addr))

/* ---- Cortex-M core (ARMv7-M ARM, B3) ---------------------------------------------------- */
#define SCB_ICSR REG32(0xE000ED04u)
#define SCB_ICSR_PENDSTSET (1u << 26)
#define SCB_VTOR REG32(0xE000ED08u)
#define SCB_AIRCR REG32(0xE000ED0Cu)
#define SCB_AIRCR_SYSRESETREQ (0x05FA0000u | (1u << 2))
#define SCB_CPACR REG32(0xE000ED88u)
#define SYST_CSR REG32(0xE000E010u)
#define SYST_RVR REG32(0xE000E014u)
#define SYST_CVR REG32(0xE000E018u)
#define SYST_CSR_ENABLE (1u << 0)
#define SYST_CSR_TICKINT (1u << 1)
#define SYST_CSR_CLKSOURCE (1u << 2) /* processor clock */
#define NVIC_ISER(n) REG32(0xE000E100u + 4u * (n))
#define NVIC_IPR8(n) (*(volatile uint8_t*)(uintptr_t)(0xE000E400u + (n)))

/* ---- Power, flash interface, RCC, GPIO ---------------------------------------------------- */
#define PWR_BASE 0x40007000u
#if defined(BOARD_FAMILY_L4)
#define RCC_BASE 0x40021000u
#define FLASH_ACR REG32(0x40022000u)
#define GPIO_BASE 0x48000000u
#define RCC_PLLCFGR_OFFSET 0x0Cu
#define RCC_GPIOENR REG32(RCC_BASE + 0x4Cu) /* AHB2ENR */
#define RCC_APB1ENR REG32(RCC_BASE + 0x58u) /* APB1ENR1 */
#define RCC_APB1ENR2 REG32(RCC_BASE + 0x5Cu)
#define RCC_APB2ENR REG32(RCC_BASE + 0x60u)
#define FLASH_ACR_CACHES ((1u << 8) | (1u << 9) | (1u << 10)) /* PRFTEN ICEN DCEN */
#define PWR_CR2 REG32(PWR_BASE + 0x04u)
#define PWR_CR2_IOSV (1u << 9)
#define PWR_CR5 REG32(PWR_BASE + 0x80u)
#define PWR_CR5_R1MODE (1u << 8)
#define RCC_CFGR_PPRE1_SHIFT 8
#define RCC_CFGR_PPRE2_SHIFT 11
#define RCC_CFGR_SW_PLL 3u
#else
#define RCC_BASE 0x40023800u
#define FLASH_ACR REG32(0x40023C00u)
#define GPIO_BASE 0x40020000u
#define RCC_PLLCFGR_OFFSET 0x04u
#define RCC_GPIOENR REG32(RCC_BASE + 0x30u) /* AHB1ENR */
#define RCC_APB1ENR REG32(RCC_BASE + 0x40u)
#define RCC_APB2ENR REG32(RCC_BASE + 0x44u)
#if defined(BOARD_FAMILY_F7)
#define FLASH_ACR_CACHES ((1u << 8) | (1u << 9)) /* PRFTEN ARTEN */
#else
#define FLASH_ACR_CACHES ((1u << 8) | (1u << 9) | (1u << 10)) /* PRFTEN ICEN DCEN */
#endif
#define PWR_CR1 REG32(PWR_BASE + 0x00u)
#define PWR_CSR1 REG32(PWR_BASE + 0x04u)
#define PWR_CR1_ODEN (1u << 16)
#define PWR_CR1_ODSWEN (1u << 17)
#define PWR_CSR1_ODRDY (1u << 16)
#define PWR_CSR1_ODSWRDY (1u << 17)
#define RCC_CFGR_PPRE1_SHIFT 10
#define RCC_CFGR_PPRE2_SHIFT 13
#define RCC_CFGR_SW_PLL 2u
#endif
#define RCC_CR REG32(RCC_BASE + 0x00u)
#define RCC_PLLCFGR REG32(RCC_BASE + RCC_PLLCFGR_OFFSET)
#define RCC_CFGR REG32(RCC_BASE + 0x08u)
#define RCC_CFGR_HPRE_DIV2 (8u << 4)
#define RCC_CR_HSION (1u << 8)
#define RCC_CR_HSIRDY (1u << 10)
#define RCC_CR_HSEON (1u << 16)
#define RCC_CR_HSERDY (1u << 17)
#define RCC_CR_HSEBYP (1u << 18)
#define RCC_CR_PLLON (1u << 24)
#define RCC_CR_PLLRDY (1u << 25)
#define RCC_APB1ENR_PWREN (1u << 28)

#define GPIO_PORT(p) (GPIO_BASE + 0x400u * (uint32_t)(p))
#define GPIO_MODER(p) REG32(GPIO_PORT(p) + 0x00u)
#define GPIO_OSPEEDR(p) REG32(GPIO_PORT(p) + 0x08u)
#define GPIO_PUPDR(p) REG32(GPIO_PORT(p) + 0x0Cu)
#define GPIO_AFR(p, n) REG32(GPIO_PORT(p) + 0x20u + 4u * (uint32_t)(n))

/* ---- USART / LPUART ------------------------------------------------------------------------ */
#if defined(BOARD_FAMILY_F4)
/* STM32F4 USART: SR, DR, BRR, CR1. */
#define UART_SR REG32(BOARD_UART_BASE + 0x00u)
#define UART_RDR REG32(BOARD_UART_BASE + 0x04u)
#define UART_TDR REG32(BOARD_UART_BASE + 0x04u)
#define UART_BRR REG32(BOARD_UART_BASE + 0x08u)
#define UART_CR1 REG32(BOARD_UART_BASE + 0x0Cu)
#define UART_CR1_UE (1u << 13)
#else
/* STM32F7 / L4 USART and LPUART: CR1, BRR, ISR, ICR, RDR, TDR. */
#define UART_CR1 REG32(BOARD_UART_BASE + 0x00u)
#define UART_BRR REG32(BOARD_UART_BASE + 0x0Cu)
#define UART_SR REG32(BOARD_UART_BASE + 0x1Cu)
#define UART_ICR REG32(BOARD_UART_BASE + 0x20u)
#define UART_RDR REG32(BOARD_UART_BASE + 0x24u)
#define UART_TDR REG32(BOARD_UART_BASE + 0x28u)
#define UART_CR1_UE (1u << 0)
#define UART_ICR_CLEAR_ERRORS 0x0Fu /* PECF FECF NECF ORECF */
#endif
#define UART_CR1_RE (1u << 2)
#define UART_CR1_TE (1u << 3)
#define UART_CR1_RXNEIE (1u << 5)
#define UART_SR_ORE (1u << 3)
#define UART_SR_RXNE (1u << 5)
#define UART_SR_TXE (1u << 7)

#endif /* STM32_REGS_H_ */

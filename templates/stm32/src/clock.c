/*
 * Clock tree from board.h: HSE (crystal or the ST-LINK's 8 MHz MCO in bypass) or HSI16, then
 * the main PLL, flash wait states, APB dividers and the switch of SYSCLK to the PLL. Every wait
 * on a ready bit is bounded; when one times out the board stays on its reset clock, so the UART
 * baud rate still matches what runs. On an emulator without RCC (BOARD_CLOCK_WAIT_READY 0) the
 * registers are written but never polled.
 */
#include <stdint.h>

#include "board.h"
#include "firmware.h"
#include "stm32_regs.h"

uint32_t g_sysclk_hz = BOARD_RESET_SYSCLK_HZ;
uint32_t g_uart_clock_hz = BOARD_RESET_SYSCLK_HZ;

/* 1 when (reg & mask) == value within the bound (always 1 without waiting). */
static int WaitFor(volatile uint32_t* reg, uint32_t mask, uint32_t value) {
#if BOARD_CLOCK_WAIT_READY
  uint32_t polls;
  for (polls = 0; polls < BOARD_CLOCK_WAIT_POLLS; ++polls) {
    if ((*reg & mask) == value) {
      return 1;
    }
  }
  return 0;
#else
  (void)reg;
  (void)mask;
  (void)value;
  return 1;
#endif
}

uint32_t ClockInit(void) {
  RCC_APB1ENR |= RCC_APB1ENR_PWREN;
#if BOARD_CLOCK_HSE
  RCC_CR |= RCC_CR_HSEON | (BOARD_CLOCK_HSE_BYPASS ? RCC_CR_HSEBYP : 0u);
  if (!WaitFor(&RCC_CR, RCC_CR_HSERDY, RCC_CR_HSERDY)) {
    return g_sysclk_hz;
  }
#else
  RCC_CR |= RCC_CR_HSION;
  if (!WaitFor(&RCC_CR, RCC_CR_HSIRDY, RCC_CR_HSIRDY)) {
    return g_sysclk_hz;
  }
#endif
#if BOARD_CLOCK_BOOST
  PWR_CR5 &= ~PWR_CR5_R1MODE; /* range 1 boost mode, needed above 80 MHz (STM32L4+) */
#endif
  RCC_PLLCFGR = BOARD_CLOCK_PLLCFGR;
  RCC_CR |= RCC_CR_PLLON;
  if (!WaitFor(&RCC_CR, RCC_CR_PLLRDY, RCC_CR_PLLRDY)) {
    return g_sysclk_hz;
  }
#if BOARD_CLOCK_OVERDRIVE
  PWR_CR1 |= PWR_CR1_ODEN;
  if (!WaitFor(&PWR_CSR1, PWR_CSR1_ODRDY, PWR_CSR1_ODRDY)) {
    return g_sysclk_hz;
  }
  PWR_CR1 |= PWR_CR1_ODSWEN;
  if (!WaitFor(&PWR_CSR1, PWR_CSR1_ODSWRDY, PWR_CSR1_ODSWRDY)) {
    return g_sysclk_hz;
  }
#endif
  FLASH_ACR = BOARD_FLASH_LATENCY | FLASH_ACR_CACHES;
  if (!WaitFor(&FLASH_ACR, 0xFu, BOARD_FLASH_LATENCY)) {
    return g_sysclk_hz;
  }
#if BOARD_CLOCK_BOOST
  /* Above 80 MHz the switch goes through AHB/2 for at least 1 us (RM0432, 6.2.9 / 5.1.8). */
  RCC_CFGR = BOARD_CLOCK_CFGR_PPRE | RCC_CFGR_HPRE_DIV2 | RCC_CFGR_SW_PLL;
#else
  RCC_CFGR = BOARD_CLOCK_CFGR_PPRE | RCC_CFGR_SW_PLL;
#endif
  if (!WaitFor(&RCC_CFGR, 3u << 2, RCC_CFGR_SW_PLL << 2)) {
    RCC_CFGR = 0; /* back to the reset clock, dividers included */
    return g_sysclk_hz;
  }
#if BOARD_CLOCK_BOOST
  {
    volatile uint32_t spin;
    for (spin = 0; spin < BOARD_SYSCLK_HZ / 2u / 1000000u * 2u; ++spin) {
    }
    RCC_CFGR = BOARD_CLOCK_CFGR_PPRE | RCC_CFGR_SW_PLL;
  }
#endif
  g_sysclk_hz = BOARD_SYSCLK_HZ;
  g_uart_clock_hz = BOARD_SYSCLK_HZ / BOARD_UART_APB_DIV;
  return g_sysclk_hz;
}

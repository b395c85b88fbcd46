/*
 * TVMPlatformGenerateRandom for every bare-metal firmware: xorshift32 seeded afresh at each
 * call from the free-running cycle count (FirmwareCycles, firmware_port.h) mixed with a call
 * counter, so two calls in the same cycle still differ. The RPC server asks for random bytes
 * only to pick a session nonce, which needs to differ between boots, not to be secret.
 */
#include <stddef.h>
#include <stdint.h>

#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/platform.h>

#include "firmware_port.h"

static uint32_t g_random_state;
static uint32_t g_random_calls;

tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t num_bytes) {
  size_t i;
  g_random_state ^= (uint32_t)FirmwareCycles() ^ (++g_random_calls * 0x9E3779B9u);
  if (g_random_state == 0) {
    g_random_state = 0x6D2B79F5u;
  }
  for (i = 0; i < num_bytes; ++i) {
    g_random_state ^= g_random_state << 13;
    g_random_state ^= g_random_state >> 17;
    g_random_state ^= g_random_state << 5;
    buffer[i] = (uint8_t)(g_random_state >> 24);
  }
  return kTvmErrorNoError;
}

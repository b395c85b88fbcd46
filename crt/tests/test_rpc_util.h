/*
 * test_rpc_util.h: helpers shared by the framing, session and RPC server tests: golden wire
 * bytes written as hex text (copied from the spec tables), and capturing write streams.
 */
#ifndef TVM_CRT_TESTS_TEST_RPC_UTIL_H_
#define TVM_CRT_TESTS_TEST_RPC_UTIL_H_

#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <tvm/runtime/crt/rpc_common/write_stream.h>

#include "test_util.h"

/* Expected value first, as the golden tables read. */
#define EXPECT_EQ(expected, actual) EXPECT_EQ_INT((actual), (expected))

/* Byte strings must match exactly; on a mismatch both are printed in hex. */
#define EXPECT_BYTES_EQ(expected, expected_size, actual, actual_size)                       \
  do {                                                                                      \
    if (!RpcTestBytesEqual((const uint8_t*)(expected), (expected_size),                     \
                           (const uint8_t*)(actual), (actual_size)))                        \
      TEST_FAIL_AT("bytes %s differ from the expected %s", #actual, #expected);             \
  } while (0)

#define RPC_TEST_MAX_WIRE 4096

/* Bytes parsed from hex text ("ff fd 03 ..."; spaces ignored). */
typedef struct {
  uint8_t data[RPC_TEST_MAX_WIRE];
  size_t size;
} rpc_test_bytes_t;

static inline void RpcTestPrintHex(const char* label, const uint8_t* d, size_t n) {
  size_t i;
  printf("  %s (%lu):", label, (unsigned long)n);
  for (i = 0; i < n; ++i) printf(" %02x", d[i]);
  printf("\n");
}

static inline int RpcTestBytesEqual(const uint8_t* e, size_t en, const uint8_t* a, size_t an) {
  if (en == an && (en == 0 || memcmp(e, a, en) == 0)) return 1;
  RpcTestPrintHex("expected", e, en);
  RpcTestPrintHex("actual  ", a, an);
  return 0;
}

static inline int RpcTestHexNibble(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static inline void RpcTestHex(rpc_test_bytes_t* out, const char* hex) {
  out->size = 0;
  while (*hex != '\0') {
    int hi = RpcTestHexNibble(hex[0]);
    if (hi < 0) {
      ++hex;
      continue;
    }
    out->data[out->size++] = (uint8_t)(hi * 16 + RpcTestHexNibble(hex[1]));
    hex += 2;
  }
}

static inline void RpcTestAppend(rpc_test_bytes_t* out, const void* data, size_t size) {
  memcpy(out->data + out->size, data, size);
  out->size += size;
}

/* A write stream that records everything written (the wire) and the chunk sizes. */
typedef struct {
  rpc_test_bytes_t wire;
  size_t chunk_sizes[256];
  size_t num_chunks;
  size_t capacity;        /* accept at most this many bytes in total */
  tvm_crt_error_t fail_with; /* returned by every write when not kTvmErrorNoError */
  /* packet bookkeeping when used as an unframer sink */
  int packet_started;
  int packet_done;
  int packet_valid;
  uint32_t announced_size;
  TVMCrtWriteStream stream;
} rpc_test_sink_t;

static inline tvm_crt_error_t RpcTestSinkWrite(void* ctx, const uint8_t* data, size_t size,
                                               size_t* written) {
  rpc_test_sink_t* s = (rpc_test_sink_t*)ctx;
  size_t room = s->capacity - s->wire.size;
  *written = 0;
  if (s->fail_with != kTvmErrorNoError) return s->fail_with;
  if (size > room) size = room;
  if (size > 0) {
    RpcTestAppend(&s->wire, data, size);
    if (s->num_chunks < 256) s->chunk_sizes[s->num_chunks++] = size;
  }
  *written = size;
  return kTvmErrorNoError;
}

static inline void RpcTestSinkPacketStart(void* ctx, uint32_t size) {
  rpc_test_sink_t* s = (rpc_test_sink_t*)ctx;
  s->packet_started++;
  s->announced_size = size;
  s->wire.size = 0; /* bytes from an aborted packet are dropped */
  s->packet_done = 0;
  s->packet_valid = 0;
}

static inline void RpcTestSinkPacketDone(void* ctx, bool valid) {
  rpc_test_sink_t* s = (rpc_test_sink_t*)ctx;
  s->packet_done++;
  s->packet_valid = valid;
}

static inline void RpcTestSinkInit(rpc_test_sink_t* s, size_t capacity) {
  memset(s, 0, sizeof(*s));
  s->capacity = capacity < RPC_TEST_MAX_WIRE ? capacity : RPC_TEST_MAX_WIRE;
  s->stream.write = RpcTestSinkWrite;
  s->stream.packet_start = RpcTestSinkPacketStart;
  s->stream.packet_done = RpcTestSinkPacketDone;
  s->stream.context = s;
}

#endif /* TVM_CRT_TESTS_TEST_RPC_UTIL_H_ */

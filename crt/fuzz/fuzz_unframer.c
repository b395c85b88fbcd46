/*
 * fuzz_unframer.c: libFuzzer target for the unframer (wire bytes from the host).
 *
 * The first input byte picks the size of the pieces the rest is fed in, so every split
 * pattern is reachable. Checks: the unframer always makes progress, never writes more
 * payload than a packet announced, and its read-size hint is never 0.
 */
#include <stdint.h>
#include <stdlib.h>
#include <tvm/runtime/crt/rpc_common/framing.h>

typedef struct {
  uint8_t buffer[300]; /* a small sink: long packets hit ShortWrite */
  size_t used;
  uint32_t announced;
  int in_packet;
} sink_t;

static tvm_crt_error_t SinkWrite(void* ctx, const uint8_t* data, size_t size, size_t* written) {
  sink_t* s = (sink_t*)ctx;
  size_t room = sizeof(s->buffer) - s->used;
  size_t n = size < room ? size : room;
  size_t i;
  if (!s->in_packet) abort(); /* payload outside a packet */
  for (i = 0; i < n; ++i) s->buffer[s->used + i] = data[i];
  s->used += n;
  if (s->used > s->announced) abort(); /* more payload than the length said */
  *written = n;
  return kTvmErrorNoError;
}

static void SinkStart(void* ctx, uint32_t size) {
  sink_t* s = (sink_t*)ctx;
  s->used = 0;
  s->announced = size;
  s->in_packet = 1;
}

static void SinkDone(void* ctx, bool valid) {
  sink_t* s = (sink_t*)ctx;
  (void)valid;
  if (s->used != s->announced) abort(); /* done before the whole payload arrived */
  s->in_packet = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static sink_t sink;
  static TVMCrtUnframer unframer;
  TVMCrtWriteStream stream = {SinkWrite, SinkStart, SinkDone, &sink};
  size_t piece, stalls = 0;
  if (size < 1) return 0;
  piece = (size_t)(data[0] % 64) + 1;
  ++data;
  --size;
  sink.used = 0;
  sink.in_packet = 0;
  TVMCrtUnframer_Init(&unframer, &stream);
  while (size > 0) {
    size_t n = size < piece ? size : piece;
    size_t consumed = 0;
    tvm_crt_error_t err = TVMCrtUnframer_Write(&unframer, data, n, &consumed);
    if (consumed > n) abort();
    if (err == kTvmErrorNoError && consumed != n) abort();
    if (err != kTvmErrorNoError) sink.in_packet = 0;
    stalls = consumed == 0 ? stalls + 1 : 0;
    if (stalls > 1) abort(); /* two calls in a row without progress: a hang */
    if (TVMCrtUnframer_BytesNeeded(&unframer) == 0) abort();
    data += consumed;
    size -= consumed;
  }
  return 0;
}

/*
 * fuzz_session.c: libFuzzer target for the session receiver behind the unframer.
 *
 * Input byte 0 picks the mode:
 *   even: the rest is raw wire bytes (fed in pieces of byte 1 % 32 + 1);
 *   odd:  the rest is a list of [u8 length][payload] session messages, each framed with a
 *         valid CRC (so the handshake and message paths are reached), with occasional
 *         corruption when the length byte's top bit is set.
 * The session answers through a framer into a counting sink. Checks: no crash, the receiver
 * never stays busy (the callback always releases the buffer), and no wedge.
 */
#include <stdint.h>
#include <stdlib.h>
#include <tvm/runtime/crt/rpc_common/session.h>

static size_t g_out_bytes;
static TVMCrtSession g_session;

static tvm_crt_error_t CountWrite(void* ctx, const uint8_t* data, size_t size, size_t* written) {
  (void)ctx;
  (void)data;
  g_out_bytes += size;
  *written = size;
  return kTvmErrorNoError;
}

/* Wire bytes made by the input-side framer. */
static uint8_t g_wire[1024];
static size_t g_wire_size;

static tvm_crt_error_t WireWrite(void* ctx, const uint8_t* data, size_t size, size_t* written) {
  size_t room = sizeof(g_wire) - g_wire_size;
  size_t n = size < room ? size : room;
  size_t i;
  (void)ctx;
  for (i = 0; i < n; ++i) g_wire[g_wire_size + i] = data[i];
  g_wire_size += n;
  *written = n;
  return kTvmErrorNoError;
}

static void OnMessage(void* ctx, TVMCrtSessionMessageType type, TVMCrtFrameBuffer* buf) {
  uint8_t body[64];
  (void)ctx;
  if (buf != NULL) {
    while (TVMCrtFrameBuffer_Read(buf, body, sizeof(body)) > 0) {
    }
    if (type == kTvmSessionNormal && TVMCrtSession_IsEstablished(&g_session)) {
      (void)TVMCrtSession_SendMessage(&g_session, kTvmSessionNormal, (const uint8_t*)"ok", 2);
    }
    TVMCrtSession_ClearReceiveBuffer(&g_session);
  }
}

static void Feed(TVMCrtUnframer* u, const uint8_t* data, size_t size, size_t piece) {
  size_t stalls = 0;
  while (size > 0) {
    size_t n = size < piece ? size : piece;
    size_t consumed = 0;
    (void)TVMCrtUnframer_Write(u, data, n, &consumed);
    if (consumed > n) abort();
    stalls = consumed == 0 ? stalls + 1 : 0;
    if (stalls > 1) abort();
    if (g_session.has_complete_message) abort(); /* the callback released every message */
    data += consumed;
    size -= consumed;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static uint8_t rx_storage[256];
  static TVMCrtFrameBuffer rx;
  static TVMCrtFramer framer, input_framer;
  static TVMCrtUnframer unframer;
  TVMCrtWriteStream out = {CountWrite, NULL, NULL, NULL};
  TVMCrtWriteStream wire = {WireWrite, NULL, NULL, NULL};
  if (size < 2) return 0;
  g_out_bytes = 0;
  TVMCrtFrameBuffer_Init(&rx, rx_storage, sizeof(rx_storage));
  TVMCrtFramer_Init(&framer, &out);
  TVMCrtSession_Init(&g_session, &framer, &rx, OnMessage, NULL);
  TVMCrtUnframer_Init(&unframer, TVMCrtSession_Receiver(&g_session));
  (void)TVMCrtSession_Reset(&g_session, data[1]);
  if ((data[0] & 1) == 0) {
    Feed(&unframer, data + 2, size - 2, (size_t)(data[1] % 32) + 1);
    return 0;
  }
  TVMCrtFramer_Init(&input_framer, &wire);
  data += 2;
  size -= 2;
  while (size > 0) {
    size_t len = data[0] & 0x7F;
    int corrupt = (data[0] & 0x80) != 0;
    ++data;
    --size;
    if (len > size) len = size;
    g_wire_size = 0;
    (void)TVMCrtFramer_Write(&input_framer, data, len);
    if (corrupt && g_wire_size > 0) g_wire[g_wire_size - 1] ^= 0x5A;
    Feed(&unframer, g_wire, g_wire_size, 7);
    data += len;
    size -= len;
  }
  return 0;
}

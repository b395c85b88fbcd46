/*
 * fuzz_rpc_packet.c: libFuzzer target for the MinRPC request decoder of the device server.
 *
 * The input is one received kNormal message body ([u64 packet_nbytes][i32 code][...]).
 * Decoding must never read outside the input or the fixed arena; a decoded request must be
 * self-consistent (tensor ranks within TVM_CRT_MAX_NDIM, strings NUL-terminated in the arena,
 * CopyToRemote data inside the input).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/crt/config.h>

#include "../src/rpc_server/rpc_packet.h"

static void CheckTensor(const DLTensor* t) {
  int ok;
  if (t == NULL || t->ndim < 0 || t->ndim > TVM_CRT_MAX_NDIM || t->strides != NULL) abort();
  (void)TVMCrtRpcPacket_TensorNumBytes(t, &ok);
  if (!ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static uint64_t arena_storage[(TVM_CRT_RPC_ARENA_SIZE_BYTES + 7) / 8];
  /* A private copy, so ASan flags any read past the end of the message. */
  uint8_t* message = (uint8_t*)malloc(size + 1);
  TVMCrtRpcArena arena;
  TVMCrtRpcRequest q;
  const char* error;
  int32_t i;
  if (message == NULL) return 0;
  memcpy(message, data, size);
  arena.base = (uint8_t*)arena_storage;
  arena.size_bytes = sizeof(arena_storage);
  arena.used_bytes = 0;
  error = TVMCrtRpcPacket_DecodeRequest(message, size, &arena, &q);
  if (arena.used_bytes > arena.size_bytes) abort();
  if (error == NULL) {
    for (i = 0; i < q.num_args; ++i) {
      if (q.type_codes[i] == kTVMDLTensorHandle) CheckTensor((const DLTensor*)q.values[i].v_handle);
      if (q.type_codes[i] == kTVMStr && strlen(q.values[i].v_str) >= arena.size_bytes) abort();
      if (q.type_codes[i] == kTVMBytes) {
        const TVMByteArray* b = (const TVMByteArray*)q.values[i].v_handle;
        if ((const uint8_t*)b->data < message || (const uint8_t*)b->data + b->size > message + size)
          abort();
      }
    }
    if (q.code == 6 || q.code == 7) CheckTensor(q.tensor);
    if (q.code == 7 && (q.data < message || q.data + q.num_bytes > message + size)) abort();
  } else if (error[0] == '\0') {
    abort(); /* every refusal names the problem */
  }
  free(message);
  return 0;
}

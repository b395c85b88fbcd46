/*!
 * \file rpc_server/rpc_packet.h
 * \brief Private: decoding MinRPC request packets and executing them (spec §4.6).
 *
 * Decoding is separate from execution so that it can be fuzzed on its own: it only reads the
 * message bytes (every read bounds-checked) and allocates from a caller-owned arena.
 */
#ifndef TVM_CRT_SRC_RPC_SERVER_RPC_PACKET_H_
#define TVM_CRT_SRC_RPC_SERVER_RPC_PACKET_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/rpc_common/session.h>

#include "../common/compiler.h" /* TVM_CRT_NOINLINE */

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief RPCCode values (wire). */
enum {
  kTvmRpcNone = 0,
  kTvmRpcShutdown = 1,
  kTvmRpcInitServer = 2,
  kTvmRpcCallFunc = 3,
  kTvmRpcReturn = 4,
  kTvmRpcException = 5,
  kTvmRpcCopyFromRemote = 6,
  kTvmRpcCopyToRemote = 7,
  kTvmRpcCopyAck = 8,
  kTvmRpcGetGlobalFunc = 9,
  kTvmRpcFreeHandle = 10,
  kTvmRpcDevSetDevice = 11,
  kTvmRpcDevGetAttr = 12,
  kTvmRpcDevAllocData = 13,
  kTvmRpcDevFreeData = 14,
  kTvmRpcDevStreamSync = 15,
  kTvmRpcCopyAmongRemote = 16,
  kTvmRpcDevAllocDataWithScope = 17,
  kTvmRpcDevCreateStream = 18,
  kTvmRpcDevFreeStream = 19,
  kTvmRpcDevSetStream = 20,
};

/*! \brief Bump allocator over caller-owned memory; reset once per packet. */
typedef struct TVMCrtRpcArena {
  uint8_t* base;
  size_t size_bytes;
  size_t used_bytes;
} TVMCrtRpcArena;

/*! \brief One decoded request; pointers refer to the message or the arena. */
typedef struct TVMCrtRpcRequest {
  int32_t code;            /*!< kTvmRpcNone: empty packet, nothing to do */
  uint64_t func_handle;    /*!< kCallFunc */
  int32_t num_args;        /*!< packed sequence (kCallFunc, kInitServer, syscalls) */
  int* type_codes;
  TVMValue* values;
  DLTensor* tensor;        /*!< kCopyFromRemote / kCopyToRemote */
  uint64_t num_bytes;      /*!< kCopyFromRemote / kCopyToRemote */
  const uint8_t* data;     /*!< kCopyToRemote: the num_bytes payload */
} TVMCrtRpcRequest;

/*!
 * \brief Decode the packet in message[size_bytes] ([u64 packet_nbytes][i32 code][body]).
 * \return NULL on success, else a static message naming the problem.
 */
const char* TVMCrtRpcPacket_DecodeRequest(const uint8_t* message, size_t size_bytes,
                                          TVMCrtRpcArena* arena, TVMCrtRpcRequest* out);

/*! \brief Bytes of a compact tensor (0 with *ok = 0 on overflow or a bad shape). */
uint64_t TVMCrtRpcPacket_TensorNumBytes(const DLTensor* tensor, int* ok);

/*!
 * \brief Execute a decoded request and send its reply (kNormal) through session.
 * \return 1 when the request was kShutdown (no reply is sent), else 0.
 */
int TVMCrtRpcPacket_ExecuteRequest(const TVMCrtRpcRequest* request, TVMCrtSession* session);

/*! \brief Send a ReturnException reply carrying message. */
void TVMCrtRpcPacket_SendException(TVMCrtSession* session, const char* message);

#ifdef __cplusplus
}
#endif

#endif  // TVM_CRT_SRC_RPC_SERVER_RPC_PACKET_H_

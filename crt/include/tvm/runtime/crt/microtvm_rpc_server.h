/*!
 * \file tvm/runtime/crt/microtvm_rpc_server.h
 * \brief The device side of the microTVM RPC protocol (spec §4.5, §5.8), C99, static storage.
 *
 * The application feeds received bytes to MicroTVMRpcServerLoop; replies and log messages
 * leave through the write function given to MicroTVMRpcServerInit.
 */
#ifndef TVM_RUNTIME_CRT_MICROTVM_RPC_SERVER_H_
#define TVM_RUNTIME_CRT_MICROTVM_RPC_SERVER_H_

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief Write bytes to the host.
 * \return The number of bytes written (1..num_bytes); 0 is a short write; negative is an error
 *     code passed back to the caller of the write.
 */
typedef ssize_t (*microtvm_rpc_channel_write_t)(void* context, const uint8_t* data,
                                                size_t num_bytes);

/*! \brief Opaque handle of the (single, static) server. */
typedef struct microtvm_rpc_server* microtvm_rpc_server_t;

/*!
 * \brief Start the runtime and the server, and send the boot-time Terminate frame (with a random
 *     nonce from TVMPlatformGenerateRandom). Calls TVMPlatformAbort on failure.
 *
 * Installs a log sink so that TVMLogf messages reach the host as session kLog messages.
 * Calling it again restarts the server (the previous handle stays valid).
 */
microtvm_rpc_server_t MicroTVMRpcServerInit(microtvm_rpc_channel_write_t write_func,
                                            void* write_func_ctx);

/*!
 * \brief Process received bytes.
 *
 * Consumes part or all of *new_data and advances *new_data and *new_data_size_bytes; call it
 * again while bytes remain. Requests are answered synchronously inside the call.
 * \return kTvmErrorNoError; a framing error (usually harmless: kTvmErrorFramingShortPacket
 *     when the host restarted a packet); or kTvmErrorPlatformShutdown once the host sent
 *     kShutdown (then and afterwards).
 */
tvm_crt_error_t MicroTVMRpcServerLoop(microtvm_rpc_server_t server, uint8_t** new_data,
                                      size_t* new_data_size_bytes);

#ifdef __cplusplus
}
#endif

#endif  // TVM_RUNTIME_CRT_MICROTVM_RPC_SERVER_H_

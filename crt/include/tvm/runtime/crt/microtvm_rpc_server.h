/*!
 * \file tvm/runtime/crt/microtvm_rpc_server.h
 * \brief The device side of the microTVM RPC protocol (spec §4.5, §5.8), C99, static storage.
 *
 * The application hands received bytes to TVMCrtRpcServer_Feed (or, one step at a time, to
 * MicroTVMRpcServerLoop); replies and log messages leave through the write function given to
 * MicroTVMRpcServerInit.
 */
#ifndef TVM_RUNTIME_CRT_MICROTVM_RPC_SERVER_H_
#define TVM_RUNTIME_CRT_MICROTVM_RPC_SERVER_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief Write bytes to the host.
 * \return The number of bytes written (1..num_bytes); 0 is a short write; negative is an error
 *     code passed back to the caller of the write.
 *
 * TVM declares the result ssize_t, from POSIX's <sys/types.h>, which a C99 freestanding target
 * lacks; ptrdiff_t (<stddef.h>) is the same type wherever both exist (glibc, musl, newlib,
 * picolibc, Zephyr's minimal libc), so a write function ported from TVM keeps its signature.
 */
typedef ptrdiff_t (*microtvm_rpc_channel_write_t)(void* context, const uint8_t* data,
                                                  size_t num_bytes);

/*!
 * \brief The start of the log message the server sends when it drops a frame the line damaged
 *     (bad CRC, bad escape, cut short by a new frame, larger than the receive buffer) while a
 *     session is up. It is sent before anything after the damaged frame is answered, so a host
 *     that sees it while a reply is owed knows that reply will not come (project-api's client
 *     then starts a new session and sends the request again). A host that does not know it
 *     shows it as a device log line; nothing else changes on the wire.
 */
#define TVM_CRT_DROPPED_FRAME_NOTICE "dropped a damaged frame"

/*! \brief Opaque handle of the (single, static) server. */
typedef struct TVMCrtRpcServer* microtvm_rpc_server_t;

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
 * \brief Process received bytes, one step (the low-level form of TVMCrtRpcServer_Feed).
 *
 * Consumes part or all of *new_data and advances *new_data and *new_data_size_bytes; call it
 * again while bytes remain. Requests are answered synchronously inside the call.
 * \return kTvmErrorNoError; a framing or session error (the bad packet was dropped; it may
 *     have consumed nothing, e.g. kTvmErrorFramingShortPacket when the host restarted a packet
 *     at the first byte); or kTvmErrorPlatformShutdown once the host sent kShutdown (then and
 *     afterwards). Most applications call TVMCrtRpcServer_Feed instead, which handles all this.
 */
tvm_crt_error_t MicroTVMRpcServerLoop(microtvm_rpc_server_t server, uint8_t** new_data,
                                      size_t* new_data_size_bytes);

/*!
 * \brief Running totals of TVMCrtRpcServer_Feed. Zero it once; every call adds to it, so one
 *     struct can follow a whole session (or a UART handler that feeds byte by byte).
 */
typedef struct {
  /*! \brief Bytes taken from the callers' buffers, dropped ones included. */
  size_t bytes_consumed;
  /*! \brief Bytes skipped because the server made no progress on them (see Feed). */
  size_t bytes_dropped;
  /*! \brief Framing and session errors recovered from; each one dropped a bad packet. */
  uint32_t errors_recovered;
  /*! \brief The most recent of those errors; kTvmErrorNoError until there is one. */
  tvm_crt_error_t last_error;
} TVMCrtRpcServerStats;

/*!
 * \brief Feed a whole buffer of received bytes to the server.
 *
 * Runs MicroTVMRpcServerLoop until every byte is consumed. Framing and session errors come
 * from the bytes on the line (noise, a corrupt or cut-short frame, a host restarting its
 * session): the server has already dropped the bad packet, so Feed counts the error and goes
 * on. When a step consumes nothing twice in a row, Feed drops one byte, so no input can stall
 * it. Requests are answered synchronously inside the call, through the write function.
 *
 * Reentrancy: not reentrant. Call it from one context at a time and never from inside the
 * write function or a packed function it runs; it shares the server's static state with
 * MicroTVMRpcServerLoop and TVMLogf's log sink. It may be called from an interrupt handler
 * only if nothing else uses the server or TVMLogf meanwhile and the handler may run for as
 * long as a request takes; usually the handler queues bytes and the main loop calls Feed.
 *
 * Cost: no heap, constant stack. Between frames the scan for the next frame start costs a
 * memchr over the bytes; inside a frame each byte is CRC'd and copied once into the receive
 * buffer. Every completed request is executed before Feed returns, including whatever it
 * calls (a model run, the time evaluator) and the writes of its reply; one byte at a time
 * works, larger buffers cost fewer calls.
 *
 * \param server The handle from MicroTVMRpcServerInit.
 * \param data The received bytes (not modified).
 * \param size_bytes How many; 0 does nothing.
 * \param stats Totals to add to, or NULL.
 * \return kTvmErrorNoError once all bytes were consumed; kTvmErrorPlatformShutdown once the
 *     host sent kShutdown (no request after it runs, also not one later in the same buffer),
 *     then on every later call; any other value is a fatal error of the server, after which
 *     the device should stop or reset.
 */
tvm_crt_error_t TVMCrtRpcServer_Feed(microtvm_rpc_server_t server, const uint8_t* data,
                                     size_t size_bytes, TVMCrtRpcServerStats* stats);

#ifdef __cplusplus
}
#endif

#endif  // TVM_RUNTIME_CRT_MICROTVM_RPC_SERVER_H_

/*!
 * \file tvm/runtime/crt/rpc_common/session.h
 * \brief microTVM session layer (spec §4.3): a handshake and typed messages over the framer.
 *
 * Every message is one frame whose payload is a 3-byte header, u16 LE session_id then
 * u8 message type, followed by the body. session_id = initiator nonce | responder nonce << 8.
 */
#ifndef TVM_RUNTIME_CRT_RPC_COMMON_SESSION_H_
#define TVM_RUNTIME_CRT_RPC_COMMON_SESSION_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/rpc_common/frame_buffer.h>
#include <tvm/runtime/crt/rpc_common/framing.h>
#include <tvm/runtime/crt/rpc_common/write_stream.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Session protocol version carried by the start messages. */
#define TVM_CRT_SESSION_VERSION ((uint8_t)0x01)
/*! \brief Size of the message header on the wire. */
#define TVM_CRT_SESSION_HEADER_SIZE_BYTES 3
/*! \brief A nonce value that is never used. */
#define TVM_CRT_SESSION_INVALID_NONCE ((uint8_t)0)

/*! \brief Message types (wire values). */
typedef enum {
  kTvmSessionStartSessionInit = 0x00,
  kTvmSessionStartSessionReply = 0x01,
  kTvmSessionTerminateSession = 0x02,
  kTvmSessionLog = 0x03,
  kTvmSessionNormal = 0x10,
} TVMCrtSessionMessageType;

/*! \brief Session states (TVM values). */
typedef enum {
  kTvmSessionStateReset = 0,
  kTvmSessionStateNoSessionEstablished = 1,
  kTvmSessionStateStartSessionSent = 2,
  kTvmSessionStateSessionEstablished = 3,
} TVMCrtSessionState;

/*!
 * \brief Called for each received message.
 *
 * kStartSessionReply (with buffer NULL): the session became established.
 * kTerminateSession (buffer NULL): the peer ended an established session.
 * kLog / kNormal / other types: the body is unread in buffer; the receiver stays busy
 *   (refuses new bytes) until TVMCrtSession_ClearReceiveBuffer() is called.
 */
typedef void (*TVMCrtSessionMessageFunc)(void* context, TVMCrtSessionMessageType type,
                                         TVMCrtFrameBuffer* buffer);

/*! \brief Session state. Construct with TVMCrtSession_Init. */
typedef struct TVMCrtSession {
  TVMCrtFramer* framer;
  TVMCrtFrameBuffer* receive_buffer;
  TVMCrtSessionMessageFunc message_func;
  void* message_func_context;
  TVMCrtWriteStream receiver; /*!< feed this to the unframer */
  uint16_t session_id;
  uint8_t local_nonce;
  uint8_t state;
  uint8_t has_complete_message;
} TVMCrtSession;

/*! \brief Construct (state kReset, nothing sent). */
void TVMCrtSession_Init(TVMCrtSession* session, TVMCrtFramer* framer,
                        TVMCrtFrameBuffer* receive_buffer, TVMCrtSessionMessageFunc message_func,
                        void* message_func_context);

/*! \brief Set the nonce, then TVMCrtSession_Terminate() (TVM's Session::Initialize). */
tvm_crt_error_t TVMCrtSession_Reset(TVMCrtSession* session, uint8_t initial_nonce);

/*! \brief Drop any session and send kTerminateSession (payload 00 00 02). */
tvm_crt_error_t TVMCrtSession_Terminate(TVMCrtSession* session);

/*!
 * \brief Send kStartSessionInit with a fresh nonce.
 * \return kTvmErrorSessionInvalidState before TVMCrtSession_Reset().
 */
tvm_crt_error_t TVMCrtSession_Start(TVMCrtSession* session);

/*!
 * \brief Send one whole message. Allowed when established, or for kLog in any state
 *     (sent with session_id 0). Otherwise kTvmErrorSessionInvalidState.
 */
tvm_crt_error_t TVMCrtSession_SendMessage(TVMCrtSession* session, TVMCrtSessionMessageType type,
                                          const uint8_t* body, size_t body_size_bytes);

/*! \brief Begin a message of body_size_bytes to be sent in chunks (same rules as SendMessage). */
tvm_crt_error_t TVMCrtSession_StartMessage(TVMCrtSession* session, TVMCrtSessionMessageType type,
                                           size_t body_size_bytes);

/*! \brief Send part of the body of the message begun by TVMCrtSession_StartMessage. */
tvm_crt_error_t TVMCrtSession_SendBodyChunk(TVMCrtSession* session, const uint8_t* data,
                                            size_t size_bytes);

/*! \brief End the message begun by TVMCrtSession_StartMessage. */
tvm_crt_error_t TVMCrtSession_FinishMessage(TVMCrtSession* session);

/*! \brief Release the received message: empty the buffer and accept new bytes. */
void TVMCrtSession_ClearReceiveBuffer(TVMCrtSession* session);

/*! \brief The write stream the unframer writes received payloads to. */
TVMCrtWriteStream* TVMCrtSession_Receiver(TVMCrtSession* session);

/*! \brief True once the handshake is complete. */
bool TVMCrtSession_IsEstablished(const TVMCrtSession* session);

/*! \brief The nonce update: ((n << 5) | (n >> 5)) + 1 in 8 bits, never 0. */
uint8_t TVMCrtSession_NextNonce(uint8_t nonce);

#ifdef __cplusplus
}
#endif

#endif  // TVM_RUNTIME_CRT_RPC_COMMON_SESSION_H_

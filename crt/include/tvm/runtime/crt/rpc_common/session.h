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
#define TVM_SESSION_VERSION ((uint8_t)0x01)
/*! \brief Size of the message header on the wire. */
#define TVM_SESSION_HEADER_SIZE_BYTES 3
/*! \brief A nonce value that is never used. */
#define TVM_SESSION_INVALID_NONCE ((uint8_t)0)

/*! \brief Message types (wire values). */
typedef enum {
  kTvmSessionStartSessionInit = 0x00,
  kTvmSessionStartSessionReply = 0x01,
  kTvmSessionTerminateSession = 0x02,
  kTvmSessionLog = 0x03,
  kTvmSessionNormal = 0x10,
} tvm_session_message_type_t;

/*! \brief Session states (TVM values). */
typedef enum {
  kTvmSessionStateReset = 0,
  kTvmSessionStateNoSessionEstablished = 1,
  kTvmSessionStateStartSessionSent = 2,
  kTvmSessionStateSessionEstablished = 3,
} tvm_session_state_t;

/*!
 * \brief Called for each received message.
 *
 * kStartSessionReply (with buffer NULL): the session became established.
 * kTerminateSession (buffer NULL): the peer ended an established session.
 * kLog / kNormal / other types: the body is unread in buffer; the receiver stays busy
 *   (refuses new bytes) until TVMSessionClearReceiveBuffer() is called.
 */
typedef void (*tvm_session_message_func_t)(void* context, tvm_session_message_type_t type,
                                           tvm_frame_buffer_t* buffer);

/*! \brief Session state. Construct with TVMSessionInit. */
typedef struct tvm_session {
  tvm_framer_t* framer;
  tvm_frame_buffer_t* receive_buffer;
  tvm_session_message_func_t message_func;
  void* message_func_context;
  tvm_write_stream_t receiver; /*!< feed this to the unframer */
  uint16_t session_id;
  uint8_t local_nonce;
  uint8_t state;
  uint8_t has_complete_message;
} tvm_session_t;

/*! \brief Construct (state kReset, nothing sent). */
void TVMSessionInit(tvm_session_t* session, tvm_framer_t* framer,
                    tvm_frame_buffer_t* receive_buffer, tvm_session_message_func_t message_func,
                    void* message_func_context);

/*! \brief Set the nonce, then TVMSessionTerminate() (TVM's Session::Initialize). */
tvm_crt_error_t TVMSessionReset(tvm_session_t* session, uint8_t initial_nonce);

/*! \brief Drop any session and send kTerminateSession (payload 00 00 02). */
tvm_crt_error_t TVMSessionTerminate(tvm_session_t* session);

/*!
 * \brief Send kStartSessionInit with a fresh nonce.
 * \return kTvmErrorSessionInvalidState before TVMSessionReset().
 */
tvm_crt_error_t TVMSessionStart(tvm_session_t* session);

/*!
 * \brief Send one whole message. Allowed when established, or for kLog in any state
 *     (sent with session_id 0). Otherwise kTvmErrorSessionInvalidState.
 */
tvm_crt_error_t TVMSessionSendMessage(tvm_session_t* session, tvm_session_message_type_t type,
                                      const uint8_t* body, size_t body_size_bytes);

/*! \brief Begin a message of body_size_bytes to be sent in chunks (same rules as SendMessage). */
tvm_crt_error_t TVMSessionStartMessage(tvm_session_t* session, tvm_session_message_type_t type,
                                       size_t body_size_bytes);

/*! \brief Send part of the body of the message begun by TVMSessionStartMessage. */
tvm_crt_error_t TVMSessionSendBodyChunk(tvm_session_t* session, const uint8_t* data,
                                        size_t size_bytes);

/*! \brief End the message begun by TVMSessionStartMessage. */
tvm_crt_error_t TVMSessionFinishMessage(tvm_session_t* session);

/*! \brief Release the received message: empty the buffer and accept new bytes. */
void TVMSessionClearReceiveBuffer(tvm_session_t* session);

/*! \brief The write stream the unframer writes received payloads to. */
tvm_write_stream_t* TVMSessionReceiver(tvm_session_t* session);

/*! \brief True once the handshake is complete. */
bool TVMSessionIsEstablished(const tvm_session_t* session);

/*! \brief The nonce update: ((n << 5) | (n >> 5)) + 1 in 8 bits, never 0. */
uint8_t TVMSessionNextNonce(uint8_t nonce);

#ifdef __cplusplus
}
#endif

#endif  // TVM_RUNTIME_CRT_RPC_COMMON_SESSION_H_

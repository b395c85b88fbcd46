/*!
 * \file rpc_common/session.c
 * \brief Session layer (spec §4.3): nonce handshake, typed messages, the receive side.
 *
 * Differences from the reference that do not change the wire: receive errors are error codes;
 * a corrupt or aborted packet leaves no bytes behind; a message that is not for us (wrong
 * session id, wrong state) is dropped and the buffer released instead of wedging the receiver;
 * an Init while established fires the established callback once.
 */
#include <tvm/runtime/crt/rpc_common/session.h>

uint8_t TVMCrtSession_NextNonce(uint8_t nonce) {
  uint8_t next = (uint8_t)((uint8_t)((nonce << 5) | (nonce >> 5)) + 1u);
  return next == TVM_CRT_SESSION_INVALID_NONCE ? (uint8_t)1 : next;
}

static uint8_t InitiatorNonce(uint16_t session_id) { return (uint8_t)(session_id & 0xFFu); }
static uint8_t ResponderNonce(uint16_t session_id) { return (uint8_t)(session_id >> 8); }

static tvm_crt_error_t SessionStartMessageInternal(TVMCrtSession* s, TVMCrtSessionMessageType type,
                                                   size_t body_size_bytes) {
  uint16_t id = type == kTvmSessionLog ? 0u : s->session_id;
  uint8_t header[TVM_CRT_SESSION_HEADER_SIZE_BYTES];
  tvm_crt_error_t err;
  if (body_size_bytes > (size_t)(UINT32_MAX - TVM_CRT_SESSION_HEADER_SIZE_BYTES)) {
    return kTvmErrorFramingPayloadOverflow;
  }
  header[0] = (uint8_t)id;
  header[1] = (uint8_t)(id >> 8);
  header[2] = (uint8_t)type;
  err = TVMCrtFramer_StartPacket(s->framer, (uint32_t)(body_size_bytes + sizeof(header)));
  if (err != kTvmErrorNoError) {
    return err;
  }
  return TVMCrtFramer_WritePayloadChunk(s->framer, header, sizeof(header));
}

static tvm_crt_error_t SessionSendInternal(TVMCrtSession* s, TVMCrtSessionMessageType type,
                                           const uint8_t* body, size_t body_size_bytes) {
  tvm_crt_error_t err = SessionStartMessageInternal(s, type, body_size_bytes);
  if (err == kTvmErrorNoError && body_size_bytes > 0) {
    err = TVMCrtFramer_WritePayloadChunk(s->framer, body, body_size_bytes);
  }
  if (err == kTvmErrorNoError) {
    err = TVMCrtFramer_FinishPacket(s->framer);
  }
  return err;
}

static int SessionMaySend(const TVMCrtSession* s, TVMCrtSessionMessageType type) {
  return s->state == kTvmSessionStateSessionEstablished || type == kTvmSessionLog;
}

tvm_crt_error_t TVMCrtSession_SendMessage(TVMCrtSession* session, TVMCrtSessionMessageType type,
                                          const uint8_t* body, size_t body_size_bytes) {
  if (!SessionMaySend(session, type)) {
    return kTvmErrorSessionInvalidState;
  }
  return SessionSendInternal(session, type, body, body_size_bytes);
}

tvm_crt_error_t TVMCrtSession_StartMessage(TVMCrtSession* session, TVMCrtSessionMessageType type,
                                           size_t body_size_bytes) {
  if (!SessionMaySend(session, type)) {
    return kTvmErrorSessionInvalidState;
  }
  return SessionStartMessageInternal(session, type, body_size_bytes);
}

tvm_crt_error_t TVMCrtSession_SendBodyChunk(TVMCrtSession* session, const uint8_t* data,
                                            size_t size_bytes) {
  return TVMCrtFramer_WritePayloadChunk(session->framer, data, size_bytes);
}

tvm_crt_error_t TVMCrtSession_FinishMessage(TVMCrtSession* session) {
  return TVMCrtFramer_FinishPacket(session->framer);
}

tvm_crt_error_t TVMCrtSession_Terminate(TVMCrtSession* session) {
  session->session_id = 0;
  session->state = kTvmSessionStateNoSessionEstablished;
  return SessionSendInternal(session, kTvmSessionTerminateSession, NULL, 0);
}

tvm_crt_error_t TVMCrtSession_Reset(TVMCrtSession* session, uint8_t initial_nonce) {
  session->local_nonce = initial_nonce;
  return TVMCrtSession_Terminate(session);
}

tvm_crt_error_t TVMCrtSession_Start(TVMCrtSession* session) {
  static const uint8_t kVersion = TVM_CRT_SESSION_VERSION;
  tvm_crt_error_t err;
  if (session->state == kTvmSessionStateReset) {
    return kTvmErrorSessionInvalidState;
  }
  session->local_nonce = TVMCrtSession_NextNonce(session->local_nonce);
  session->session_id = session->local_nonce;
  err = SessionSendInternal(session, kTvmSessionStartSessionInit, &kVersion, 1);
  if (err == kTvmErrorNoError) {
    session->state = kTvmSessionStateStartSessionSent;
  }
  return err;
}

void TVMCrtSession_ClearReceiveBuffer(TVMCrtSession* session) {
  session->has_complete_message = 0;
  TVMCrtFrameBuffer_Clear(session->receive_buffer);
}

TVMCrtWriteStream* TVMCrtSession_Receiver(TVMCrtSession* session) { return &session->receiver; }

bool TVMCrtSession_IsEstablished(const TVMCrtSession* session) {
  return session->state == kTvmSessionStateSessionEstablished;
}

static void SessionNotify(TVMCrtSession* s, TVMCrtSessionMessageType type,
                          TVMCrtFrameBuffer* buffer) {
  if (s->message_func != NULL) {
    s->message_func(s->message_func_context, type, buffer);
  }
}

static void SessionSendStartReply(TVMCrtSession* s, uint16_t their_id) {
  static const uint8_t kVersion = TVM_CRT_SESSION_VERSION;
  s->local_nonce = TVMCrtSession_NextNonce(s->local_nonce);
  s->session_id = (uint16_t)(InitiatorNonce(their_id) | ((uint16_t)s->local_nonce << 8));
  /* A lost reply is recovered by the peer's retry, which is answered again. */
  (void)SessionSendInternal(s, kTvmSessionStartSessionReply, &kVersion, 1);
  s->state = kTvmSessionStateSessionEstablished;
  SessionNotify(s, kTvmSessionStartSessionReply, NULL);
}

static void SessionProcessStartInit(TVMCrtSession* s, uint16_t id, uint8_t version) {
  uint8_t initiator = InitiatorNonce(id);
  switch (s->state) {
    case kTvmSessionStateStartSessionSent:
      /* Both sides started at once: the lower nonce wins, a tie starts over. */
      if (initiator < s->local_nonce) {
        if (version == TVM_CRT_SESSION_VERSION) {
          SessionSendStartReply(s, id);
        }
      } else if (initiator == s->local_nonce) {
        (void)TVMCrtSession_Start(s);
      }
      break;
    default: /* reset, no session, or established (the peer restarted) */
      SessionSendStartReply(s, id);
      break;
  }
}

static void SessionProcessStartReply(TVMCrtSession* s, uint16_t id, uint8_t version) {
  if (s->state == kTvmSessionStateStartSessionSent) {
    if (InitiatorNonce(id) == s->local_nonce && version == TVM_CRT_SESSION_VERSION) {
      s->session_id = (uint16_t)(s->local_nonce | ((uint16_t)ResponderNonce(id) << 8));
      s->state = kTvmSessionStateSessionEstablished;
      SessionNotify(s, kTvmSessionStartSessionReply, NULL);
    }
  } else if (s->state == kTvmSessionStateSessionEstablished) {
    /* A reply we did not ask for: the peer's view differs from ours; start over. */
    s->state = kTvmSessionStateReset;
  }
}

static tvm_crt_error_t ReceiverWrite(void* context, const uint8_t* data, size_t size_bytes,
                                     size_t* out_written_bytes) {
  TVMCrtSession* s = (TVMCrtSession*)context;
  if (s->has_complete_message) {
    *out_written_bytes = 0;
    return kTvmErrorSessionReceiveBufferBusy;
  }
  *out_written_bytes = TVMCrtFrameBuffer_Write(s->receive_buffer, data, size_bytes);
  return *out_written_bytes == size_bytes ? kTvmErrorNoError
                                          : kTvmErrorSessionReceiveBufferShortWrite;
}

static void ReceiverPacketStart(void* context, uint32_t payload_size_bytes) {
  TVMCrtSession* s = (TVMCrtSession*)context;
  (void)payload_size_bytes;
  /* Drop what an aborted packet may have left. */
  if (!s->has_complete_message) {
    TVMCrtFrameBuffer_Clear(s->receive_buffer);
  }
}

static void ReceiverPacketDone(void* context, bool is_valid) {
  TVMCrtSession* s = (TVMCrtSession*)context;
  uint8_t header[TVM_CRT_SESSION_HEADER_SIZE_BYTES + 1];
  size_t n;
  uint16_t id;
  uint8_t type;
  int deliver = 0;
  if (s->has_complete_message) {
    return; /* a pending message owns the buffer; this packet's bytes were refused */
  }
  if (!is_valid) {
    TVMCrtFrameBuffer_Clear(s->receive_buffer);
    return;
  }
  n = TVMCrtFrameBuffer_Read(s->receive_buffer, header, TVM_CRT_SESSION_HEADER_SIZE_BYTES);
  if (n != TVM_CRT_SESSION_HEADER_SIZE_BYTES) {
    TVMCrtFrameBuffer_Clear(s->receive_buffer);
    return;
  }
  id = (uint16_t)(header[0] | (header[1] << 8));
  type = header[2];
  s->has_complete_message = 1;
  switch (type) {
    case kTvmSessionStartSessionInit:
    case kTvmSessionStartSessionReply:
      /* Ignored without a valid nonce or without the version byte. */
      if (TVMCrtFrameBuffer_Read(s->receive_buffer, &header[3], 1) == 1) {
        if (type == kTvmSessionStartSessionInit && InitiatorNonce(id) != 0) {
          SessionProcessStartInit(s, id, header[3]);
        } else if (type == kTvmSessionStartSessionReply && ResponderNonce(id) != 0) {
          SessionProcessStartReply(s, id, header[3]);
        }
      }
      break;
    case kTvmSessionTerminateSession:
      if (s->state == kTvmSessionStateSessionEstablished) {
        s->state = kTvmSessionStateNoSessionEstablished;
        SessionNotify(s, kTvmSessionTerminateSession, NULL);
      }
      break;
    case kTvmSessionLog:
      deliver = id == 0 || id == s->session_id;
      break;
    default:
      deliver = s->state == kTvmSessionStateSessionEstablished && id == s->session_id;
      break;
  }
  if (deliver) {
    /* The receiver stays busy until the consumer calls TVMCrtSession_ClearReceiveBuffer. */
    SessionNotify(s, (TVMCrtSessionMessageType)type, s->receive_buffer);
  } else {
    TVMCrtSession_ClearReceiveBuffer(s);
  }
}

void TVMCrtSession_Init(TVMCrtSession* session, TVMCrtFramer* framer,
                        TVMCrtFrameBuffer* receive_buffer, TVMCrtSessionMessageFunc message_func,
                        void* message_func_context) {
  session->framer = framer;
  session->receive_buffer = receive_buffer;
  session->message_func = message_func;
  session->message_func_context = message_func_context;
  session->receiver.write = ReceiverWrite;
  session->receiver.packet_start = ReceiverPacketStart;
  session->receiver.packet_done = ReceiverPacketDone;
  session->receiver.context = session;
  session->session_id = 0;
  session->local_nonce = TVM_CRT_SESSION_INVALID_NONCE;
  session->state = kTvmSessionStateReset;
  session->has_complete_message = 0;
}

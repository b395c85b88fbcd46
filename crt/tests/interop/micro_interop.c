/*!
 * \file crt/tests/interop/micro_interop.c
 * \brief Drives the C framing and session code from stdin/stdout so the Python host can be
 *     tested against it (tests/test_micro_interop.py builds and runs this program).
 *
 * Usage:
 *   micro_interop frame     stdin: records [u8 op][u32 LE n][n bytes]; op 'F' frames the bytes,
 *                           op 'R' resets the framer. stdout: the wire bytes.
 *   micro_interop unframe   stdin: records [u32 LE n][n bytes], each fed to TVMCrtUnframer_Write
 *                           as one buffer. stdout: records [u8 kind][u32 LE n][n bytes]:
 *                           'P' a valid packet's payload, 'C' a packet with a bad CRC (n = 0),
 *                           'E' an unframer error (n = 4, the error code).
 *   micro_interop session N a device session with initial nonce N over stdin/stdout: every
 *                           normal message is answered with a log "got <n> bytes" and the
 *                           message body reversed; the message "reboot" makes it restart
 *                           its session as at boot (FE + TerminateSession). Exits 0 at EOF.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/crt/rpc_common/frame_buffer.h>
#include <tvm/runtime/crt/rpc_common/framing.h>
#include <tvm/runtime/crt/rpc_common/session.h>
#include <tvm/runtime/crt/rpc_common/write_stream.h>
#include <unistd.h>

#define kMaxPayloadBytes 8192

static uint8_t g_payload[kMaxPayloadBytes];
static size_t g_payload_size;

static int WriteFully(int fd, const uint8_t* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return -1;
    }
    data += n;
    size -= (size_t)n;
  }
  return 0;
}

static int ReadFully(FILE* in, uint8_t* data, size_t size) {
  return fread(data, 1, size, in) == size ? 0 : -1;
}

static uint32_t ReadU32(const uint8_t* b) {
  return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}

static void EmitRecord(uint8_t kind, const uint8_t* data, uint32_t size) {
  uint8_t head[5];
  head[0] = kind;
  head[1] = (uint8_t)size;
  head[2] = (uint8_t)(size >> 8);
  head[3] = (uint8_t)(size >> 16);
  head[4] = (uint8_t)(size >> 24);
  if (WriteFully(1, head, sizeof(head)) != 0 || WriteFully(1, data, size) != 0) {
    exit(3);
  }
}

static tvm_crt_error_t StdoutWrite(void* context, const uint8_t* data, size_t size_bytes,
                                   size_t* out_written_bytes) {
  (void)context;
  if (WriteFully(1, data, size_bytes) != 0) {
    *out_written_bytes = 0;
    return kTvmErrorWriteStreamShortWrite;
  }
  *out_written_bytes = size_bytes;
  return kTvmErrorNoError;
}

/* --- frame ------------------------------------------------------------------------------- */

static int RunFrame(void) {
  static uint8_t data[kMaxPayloadBytes];
  TVMCrtWriteStream stream = {StdoutWrite, NULL, NULL, NULL};
  TVMCrtFramer framer;
  uint8_t head[5];
  TVMCrtFramer_Init(&framer, &stream);
  while (ReadFully(stdin, head, sizeof(head)) == 0) {
    uint32_t n = ReadU32(&head[1]);
    if (n > sizeof(data) || ReadFully(stdin, data, n) != 0) {
      return 2;
    }
    if (head[0] == 'R') {
      TVMCrtFramer_Reset(&framer);
    } else if (TVMCrtFramer_Write(&framer, data, n) != kTvmErrorNoError) {
      return 1;
    }
  }
  return 0;
}

/* --- unframe ----------------------------------------------------------------------------- */

static tvm_crt_error_t CollectWrite(void* context, const uint8_t* data, size_t size_bytes,
                                    size_t* out_written_bytes) {
  size_t room = sizeof(g_payload) - g_payload_size;
  size_t n = size_bytes < room ? size_bytes : room;
  (void)context;
  memcpy(&g_payload[g_payload_size], data, n);
  g_payload_size += n;
  *out_written_bytes = n;
  return kTvmErrorNoError;
}

static void CollectStart(void* context, uint32_t size) {
  (void)context;
  (void)size;
  g_payload_size = 0;
}

static void CollectDone(void* context, bool is_valid) {
  (void)context;
  if (is_valid) {
    EmitRecord('P', g_payload, (uint32_t)g_payload_size);
  } else {
    EmitRecord('C', NULL, 0);
  }
  g_payload_size = 0;
}

static int RunUnframe(void) {
  static uint8_t data[1 << 16];
  TVMCrtWriteStream stream = {CollectWrite, CollectStart, CollectDone, NULL};
  TVMCrtUnframer unframer;
  uint8_t head[4];
  TVMCrtUnframer_Init(&unframer, &stream);
  while (ReadFully(stdin, head, sizeof(head)) == 0) {
    uint32_t n = ReadU32(head);
    const uint8_t* p = data;
    if (n > sizeof(data) || ReadFully(stdin, data, n) != 0) {
      return 2;
    }
    while (n > 0) {
      size_t consumed = 0;
      tvm_crt_error_t err = TVMCrtUnframer_Write(&unframer, p, n, &consumed);
      if (consumed > n) {
        return 4;
      }
      p += consumed;
      n -= (uint32_t)consumed;
      if (err != kTvmErrorNoError) {
        uint8_t code[4];
        code[0] = (uint8_t)err;
        code[1] = (uint8_t)((unsigned)err >> 8);
        code[2] = 0;
        code[3] = 0;
        EmitRecord('E', code, 4);
      } else if (consumed == 0) {
        return 5; /* no progress without an error */
      }
    }
  }
  return 0;
}

/* --- session ----------------------------------------------------------------------------- */

static TVMCrtSession g_session;
static TVMCrtFramer g_framer;

static void OnMessage(void* context, TVMCrtSessionMessageType type, TVMCrtFrameBuffer* buffer) {
  static uint8_t body[kMaxPayloadBytes];
  char log_text[64];
  size_t n;
  size_t i;
  (void)context;
  if (type != kTvmSessionNormal || buffer == NULL) {
    if (buffer != NULL) {
      TVMCrtSession_ClearReceiveBuffer(&g_session);
    }
    return;
  }
  n = TVMCrtFrameBuffer_Read(buffer, body, sizeof(body));
  TVMCrtSession_ClearReceiveBuffer(&g_session);
  if (n == 6 && memcmp(body, "reboot", 6) == 0) {
    /* What a device does at boot: a fresh framer (FE prefix) and TerminateSession. */
    TVMCrtFramer_Reset(&g_framer);
    (void)TVMCrtSession_Reset(&g_session, 0x77);
    return;
  }
  snprintf(log_text, sizeof(log_text), "got %u bytes", (unsigned)n);
  (void)TVMCrtSession_SendMessage(&g_session, kTvmSessionLog, (const uint8_t*)log_text,
                                  strlen(log_text));
  for (i = 0; i < n / 2; ++i) {
    uint8_t t = body[i];
    body[i] = body[n - 1 - i];
    body[n - 1 - i] = t;
  }
  (void)TVMCrtSession_SendMessage(&g_session, kTvmSessionNormal, body, n);
}

static int RunSession(uint8_t nonce) {
  static uint8_t receive_storage[kMaxPayloadBytes];
  static uint8_t data[4096];
  TVMCrtWriteStream out = {StdoutWrite, NULL, NULL, NULL};
  TVMCrtFrameBuffer receive_buffer;
  TVMCrtUnframer unframer;
  int stalled = 0;
  TVMCrtFramer_Init(&g_framer, &out);
  TVMCrtFrameBuffer_Init(&receive_buffer, receive_storage, sizeof(receive_storage));
  TVMCrtSession_Init(&g_session, &g_framer, &receive_buffer, OnMessage, NULL);
  TVMCrtUnframer_Init(&unframer, TVMCrtSession_Receiver(&g_session));
  if (TVMCrtSession_Reset(&g_session, nonce) != kTvmErrorNoError) {
    return 1;
  }
  for (;;) {
    ssize_t got = read(0, data, sizeof(data));
    const uint8_t* p = data;
    size_t left;
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return got == 0 ? 0 : 1;
    }
    left = (size_t)got;
    while (left > 0) {
      size_t consumed = 0;
      tvm_crt_error_t err = TVMCrtUnframer_Write(&unframer, p, left, &consumed);
      if (err != kTvmErrorNoError && consumed == 0 && stalled++ > 0) {
        consumed = 1; /* never spin: an error that eats nothing twice in a row drops a byte */
      }
      if (consumed > 0) {
        stalled = 0;
      }
      p += consumed;
      left -= consumed;
    }
  }
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "frame") == 0) {
    return RunFrame();
  }
  if (argc >= 2 && strcmp(argv[1], "unframe") == 0) {
    return RunUnframe();
  }
  if (argc >= 3 && strcmp(argv[1], "session") == 0) {
    return RunSession((uint8_t)strtoul(argv[2], NULL, 0));
  }
  fprintf(stderr, "usage: %s frame | unframe | session <nonce>\n", argv[0]);
  return 2;
}

/*!
 * \file rpc_common/framing.c
 * \brief Framer (payload -> wire bytes) and unframer (wire bytes -> payload), spec §4.1-4.2.
 */
#include <string.h>
#include <tvm/runtime/crt/rpc_common/crc16.h>
#include <tvm/runtime/crt/rpc_common/framing.h>

#include "../common/compiler.h" /* TVM_CRT_NOINLINE */

#define kChunkBytes TVM_CRT_FRAMING_CHUNK_SIZE_BYTES

static const uint8_t kPacketStartSequence[2] = {TVM_CRT_FRAMING_ESCAPE_START,
                                                TVM_CRT_FRAMING_PACKET_START};

/* ------------------------------------------------------------------------------------------ */
/* Unframer                                                                                   */

void TVMCrtUnframer_Init(TVMCrtUnframer* unframer, TVMCrtWriteStream* stream) {
  memset(unframer, 0, sizeof(*unframer));
  unframer->stream = stream;
  unframer->state = kTvmUnframerFindPacketStart;
}

/* Scan for FF FD; everything before it is discarded. Outside a packet only FF matters, so the
 * scan jumps from one FF to the next with memchr (noise and idle-line bytes cost no loop). */
static void UnframerFindPacketStart(TVMCrtUnframer* u) {
  const uint8_t* p = u->input;
  const uint8_t* end = p + u->input_size_bytes;
  while (p < end) {
    if (!u->saw_escape_start) {
      const uint8_t* ff =
          (const uint8_t*)memchr(p, TVM_CRT_FRAMING_ESCAPE_START, (size_t)(end - p));
      if (ff == NULL) {
        p = end;
        break;
      }
      p = ff + 1;
      u->saw_escape_start = 1;
      continue;
    }
    if (*p == TVM_CRT_FRAMING_PACKET_START) {
      ++p;
      u->crc = TVMCrtCrc16_Update(TVM_CRT_CRC16_INIT, kPacketStartSequence,
                                  sizeof(kPacketStartSequence));
      u->saw_escape_start = 0;
      u->state = kTvmUnframerFindPacketLength;
      break;
    }
    u->saw_escape_start = (*p++ == TVM_CRT_FRAMING_ESCAPE_START);
  }
  u->input_size_bytes -= (size_t)(p - u->input);
  u->input = p;
}

/*
 * Unescape input into buffer until it holds fill_to bytes or the input runs out. The raw bytes
 * eaten are added to the CRC when update_crc is set. FF FD leaves the FD unconsumed with the
 * escape flag set, so the next call starts a new packet from it.
 */
static tvm_crt_error_t UnframerConsumeInput(TVMCrtUnframer* u, size_t fill_to, int update_crc) {
  tvm_crt_error_t err = kTvmErrorNoError;
  const uint8_t* in = u->input;
  size_t i = 0;
  while (i < u->input_size_bytes && u->num_buffer_bytes_valid < fill_to) {
    uint8_t c = in[i];
    if (u->saw_escape_start) {
      if (c == TVM_CRT_FRAMING_PACKET_START) {
        err = kTvmErrorFramingShortPacket;
        break;
      }
      u->saw_escape_start = 0;
      ++i;
      if (c == TVM_CRT_FRAMING_ESCAPE_NOP) {
        continue;
      }
      if (c != TVM_CRT_FRAMING_ESCAPE_START) {
        err = kTvmErrorFramingInvalidEscape;
        break;
      }
    } else {
      ++i;
      if (c == TVM_CRT_FRAMING_ESCAPE_START) {
        u->saw_escape_start = 1;
        continue;
      }
    }
    u->buffer[u->num_buffer_bytes_valid++] = c;
  }
  if (update_crc) {
    u->crc = TVMCrtCrc16_Update(u->crc, in, i);
  }
  u->input += i;
  u->input_size_bytes -= i;
  return err;
}

/*
 * The little-endian fields around the payload: the length (4 bytes, covered by the CRC) in
 * kTvmUnframerFindPacketLength, the CRC itself (2 bytes) in kTvmUnframerFindCrcEnd.
 */
static tvm_crt_error_t UnframerFindField(TVMCrtUnframer* u) {
  int is_length = u->state == kTvmUnframerFindPacketLength;
  size_t size = is_length ? 4u : 2u;
  tvm_crt_error_t err = UnframerConsumeInput(u, size, is_length);
  uint32_t value;
  if (err != kTvmErrorNoError || u->num_buffer_bytes_valid < size) {
    return err;
  }
  value = (uint32_t)u->buffer[0] | ((uint32_t)u->buffer[1] << 8);
  u->num_buffer_bytes_valid = 0;
  if (is_length) {
    value |= ((uint32_t)u->buffer[2] << 16) | ((uint32_t)u->buffer[3] << 24);
    u->num_payload_bytes_remaining = value;
    u->state = kTvmUnframerFindPacketCrc;
    if (u->stream->packet_start != NULL) {
      u->stream->packet_start(u->stream->context, value);
    }
  } else {
    u->state = kTvmUnframerFindPacketStart;
    if (u->stream->packet_done != NULL) {
      u->stream->packet_done(u->stream->context, value == u->crc);
    }
  }
  return kTvmErrorNoError;
}

/*
 * Payload bytes go to the stream in as large pieces as the input allows: a run without 0xFF is
 * handed over straight from the input (found with memchr, CRC'd in one call); only an escape
 * goes through the work buffer, one unescaped byte at a time. On a stream error the input is
 * rewound to just after the bytes the stream accepted.
 */
static tvm_crt_error_t UnframerFindPacketCrc(TVMCrtUnframer* u) {
  while (u->num_payload_bytes_remaining > 0 && u->input_size_bytes > 0) {
    const uint8_t* start = u->input;
    size_t start_size = u->input_size_bytes;
    const uint8_t* data = start;
    size_t run = 0;
    size_t written = 0;
    tvm_crt_error_t err;
    if (!u->saw_escape_start) {
      const uint8_t* ff;
      run = start_size < u->num_payload_bytes_remaining ? start_size
                                                        : (size_t)u->num_payload_bytes_remaining;
      ff = (const uint8_t*)memchr(start, TVM_CRT_FRAMING_ESCAPE_START, run);
      if (ff != NULL) {
        run = (size_t)(ff - start);
      }
    }
    if (run > 0) {
      u->crc = TVMCrtCrc16_Update(u->crc, start, run);
      u->input += run;
      u->input_size_bytes -= run;
    } else {
      err = UnframerConsumeInput(u, 1, 1);
      if (err != kTvmErrorNoError) {
        return err;
      }
      if (u->num_buffer_bytes_valid == 0) {
        continue; /* an escape's first byte or a nop: nothing to hand over yet */
      }
      data = u->buffer;
      run = 1;
      u->num_buffer_bytes_valid = 0;
    }
    err = TVMCrtWriteStream_WriteAll(u->stream, data, run, &written);
    u->num_payload_bytes_remaining -= (uint32_t)written;
    if (err != kTvmErrorNoError) {
      if (written < run) { /* an unaccepted escape leaves its raw bytes unconsumed too */
        u->input = start + (data == start ? written : 0);
        u->input_size_bytes = start_size - (size_t)(u->input - start);
      }
      u->saw_escape_start = 0;
      return err;
    }
  }
  if (u->num_payload_bytes_remaining == 0) {
    u->state = kTvmUnframerFindCrcEnd;
  }
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMCrtUnframer_Write(TVMCrtUnframer* unframer, const uint8_t* data,
                                     size_t size_bytes, size_t* out_consumed_bytes) {
  tvm_crt_error_t err = kTvmErrorNoError;
  unframer->input = data;
  unframer->input_size_bytes = size_bytes;
  while (err == kTvmErrorNoError && unframer->input_size_bytes > 0) {
    switch (unframer->state) {
      case kTvmUnframerFindPacketStart:
        UnframerFindPacketStart(unframer);
        break;
      case kTvmUnframerFindPacketCrc:
        err = UnframerFindPacketCrc(unframer);
        break;
      default: /* the length or the CRC */
        err = UnframerFindField(unframer);
        break;
    }
  }
  *out_consumed_bytes = size_bytes - unframer->input_size_bytes;
  unframer->input = NULL;
  unframer->input_size_bytes = 0;
  if (err != kTvmErrorNoError) {
    unframer->state = kTvmUnframerFindPacketStart;
    unframer->num_buffer_bytes_valid = 0;
  }
  return err;
}

size_t TVMCrtUnframer_BytesNeeded(const TVMCrtUnframer* unframer) {
  switch (unframer->state) {
    case kTvmUnframerFindPacketLength:
      return 4u - unframer->num_buffer_bytes_valid;
    case kTvmUnframerFindPacketCrc:
      /* An empty payload still has its 2 CRC bytes to come. */
      return unframer->num_payload_bytes_remaining > 0 ? unframer->num_payload_bytes_remaining
                                                       : 2u;
    case kTvmUnframerFindCrcEnd:
      return 2u - unframer->num_buffer_bytes_valid;
    default:
      return 1u;
  }
}

/* ------------------------------------------------------------------------------------------ */
/* Framer                                                                                     */

void TVMCrtFramer_Init(TVMCrtFramer* framer, TVMCrtWriteStream* stream) {
  framer->stream = stream;
  TVMCrtFramer_Reset(framer);
}

void TVMCrtFramer_Reset(TVMCrtFramer* framer) {
  framer->state = kTvmFramerReset;
  framer->num_payload_bytes_remaining = 0;
  framer->chunk_size_bytes = 0;
  framer->chunk_crc_start = 0;
}

/* Add the not yet covered chunk bytes to the CRC. Out of line: it has two callers. */
TVM_CRT_NOINLINE static void FramerCrcSync(TVMCrtFramer* f) {
  f->crc = TVMCrtCrc16_Update(f->crc, f->chunk + f->chunk_crc_start,
                              (size_t)(f->chunk_size_bytes - f->chunk_crc_start));
  f->chunk_crc_start = f->chunk_size_bytes;
}

static tvm_crt_error_t FramerFlush(TVMCrtFramer* f) {
  size_t written;
  tvm_crt_error_t err;
  if (f->state == kTvmFramerTransmitting) {
    FramerCrcSync(f);
  }
  err = TVMCrtWriteStream_WriteAll(f->stream, f->chunk, f->chunk_size_bytes, &written);
  f->chunk_size_bytes = 0;
  f->chunk_crc_start = 0;
  if (err != kTvmErrorNoError) {
    f->state = kTvmFramerReset;
  }
  return err;
}

/*
 * Append bytes, escaping 0xFF; an FF FF pair never straddles two chunks. Inside a packet a run
 * of at least a chunk's worth of bytes without 0xFF skips the chunk: it is CRC'd and handed to
 * the stream straight from the caller's buffer, so a large payload goes out in large writes.
 */
static tvm_crt_error_t FramerPutEscaped(TVMCrtFramer* f, const uint8_t* data, size_t size_bytes) {
  const uint8_t* end = data + size_bytes;
  tvm_crt_error_t err;
  while (data != end) {
    const uint8_t* ff =
        (const uint8_t*)memchr(data, TVM_CRT_FRAMING_ESCAPE_START, (size_t)(end - data));
    const uint8_t* stop = ff != NULL ? ff + 1 : end;
    if (f->state == kTvmFramerTransmitting && (ff != NULL ? ff : end) - data >= kChunkBytes) {
      size_t run = (size_t)((ff != NULL ? ff : end) - data);
      size_t written;
      err = FramerFlush(f);
      if (err == kTvmErrorNoError) {
        f->crc = TVMCrtCrc16_Update(f->crc, data, run);
        err = TVMCrtWriteStream_WriteAll(f->stream, data, run, &written);
      }
      if (err != kTvmErrorNoError) {
        f->state = kTvmFramerReset;
        return err;
      }
      data += run;
      continue;
    }
    for (; data != stop; ++data) {
      uint8_t c = *data;
      size_t need = c == TVM_CRT_FRAMING_ESCAPE_START ? 2u : 1u;
      if (f->chunk_size_bytes + need > kChunkBytes) {
        err = FramerFlush(f);
        if (err != kTvmErrorNoError) {
          return err;
        }
      }
      f->chunk[f->chunk_size_bytes++] = c;
      if (need == 2u) {
        f->chunk[f->chunk_size_bytes++] = c;
      }
    }
  }
  return kTvmErrorNoError;
}

static void PutLe(uint8_t* out, uint32_t value, size_t size_bytes) {
  size_t i;
  for (i = 0; i < size_bytes; ++i) {
    out[i] = (uint8_t)(value >> (8 * i));
  }
}

tvm_crt_error_t TVMCrtFramer_StartPacket(TVMCrtFramer* framer, uint32_t payload_size_bytes) {
  uint8_t length[4];
  /* A packet left unfinished is abandoned: the receiver resyncs on the new FF FD. */
  framer->chunk_size_bytes = 0;
  framer->chunk_crc_start = 0;
  if (framer->state == kTvmFramerReset) {
    framer->chunk[framer->chunk_size_bytes++] = TVM_CRT_FRAMING_ESCAPE_NOP;
    framer->chunk_crc_start = 1; /* the nop is outside the CRC */
  }
  framer->crc = TVM_CRT_CRC16_INIT;
  framer->chunk[framer->chunk_size_bytes++] = TVM_CRT_FRAMING_ESCAPE_START;
  framer->chunk[framer->chunk_size_bytes++] = TVM_CRT_FRAMING_PACKET_START;
  framer->state = kTvmFramerTransmitting;
  PutLe(length, payload_size_bytes, sizeof(length));
  framer->num_payload_bytes_remaining = payload_size_bytes;
  return FramerPutEscaped(framer, length, sizeof(length));
}

tvm_crt_error_t TVMCrtFramer_WritePayloadChunk(TVMCrtFramer* framer, const uint8_t* data,
                                               size_t size_bytes) {
  tvm_crt_error_t err;
  if (framer->state != kTvmFramerTransmitting) {
    return kTvmErrorFramingInvalidState;
  }
  if (size_bytes > framer->num_payload_bytes_remaining) {
    return kTvmErrorFramingPayloadOverflow;
  }
  err = FramerPutEscaped(framer, data, size_bytes);
  if (err == kTvmErrorNoError) {
    framer->num_payload_bytes_remaining -= (uint32_t)size_bytes;
  }
  return err;
}

tvm_crt_error_t TVMCrtFramer_FinishPacket(TVMCrtFramer* framer) {
  uint8_t crc[2];
  tvm_crt_error_t err;
  if (framer->state != kTvmFramerTransmitting) {
    return kTvmErrorFramingInvalidState;
  }
  if (framer->num_payload_bytes_remaining != 0) {
    return kTvmErrorFramingPayloadIncomplete;
  }
  FramerCrcSync(framer);
  framer->state = kTvmFramerIdle; /* from here on nothing is added to the CRC */
  PutLe(crc, framer->crc, sizeof(crc));
  err = FramerPutEscaped(framer, crc, sizeof(crc));
  if (err != kTvmErrorNoError) {
    return err;
  }
  return FramerFlush(framer);
}

tvm_crt_error_t TVMCrtFramer_Write(TVMCrtFramer* framer, const uint8_t* payload,
                                   size_t size_bytes) {
  tvm_crt_error_t err;
  if (size_bytes != (size_t)(uint32_t)size_bytes) {
    return kTvmErrorFramingPayloadOverflow;
  }
  err = TVMCrtFramer_StartPacket(framer, (uint32_t)size_bytes);
  if (err == kTvmErrorNoError) {
    err = TVMCrtFramer_WritePayloadChunk(framer, payload, size_bytes);
  }
  if (err == kTvmErrorNoError) {
    err = TVMCrtFramer_FinishPacket(framer);
  }
  return err;
}

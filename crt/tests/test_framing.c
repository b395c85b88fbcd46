/*
 * test_framing.c: CRC, framer and unframer against the golden frames of spec §4.1-4.2 / §7.4.
 */
#include <tvm/runtime/crt/rpc_common/crc16.h>
#include <tvm/runtime/crt/rpc_common/framing.h>

#include "test_rpc_util.h"

/* The golden packets: payload and wire (without the 0xFE prefix), copied from the spec. */
typedef struct {
  const char* name;
  const char* payload; /* NULL: the 255-byte text */
  size_t payload_size;
  const char* wire_hex;
} golden_packet_t;

static const char kLongText[] =
    "this payload is exactly 255 characters long. chunk is 64 bytes. "
    "this payload is exactly 255 characters long. chunk is 64 bytes. "
    "this payload is exactly 255 characters long. chunk is 64 bytes. "
    "this payload is exactly 255 characters long. chunk is 64 bytes.";

static const golden_packet_t kPackets[] = {
    {"one", "one", 3, "ff fd 03 00 00 00 6f 6e 65 58 f4"},
    {"two2", "two2", 4, "ff fd 04 00 00 00 74 77 6f 32 13 11"},
    {"three", "three", 5, "ff fd 05 00 00 00 74 68 72 65 65 63 9f"},
    {"empty", "", 0, "ff fd 00 00 00 00 83 44"},
    {"long", NULL, 255, NULL},
    {"escape", "es_\xff_capeir/^>t@\"hr", 19,
     "ff fd 13 00 00 00 65 73 5f ff ff 5f 63 61 70 65 69 72 2f 5e 3e 74 40 22 68 72 b4 ff ff"},
};
#define kNumPackets (sizeof(kPackets) / sizeof(kPackets[0]))

static const uint8_t* Payload(const golden_packet_t* p) {
  return (const uint8_t*)(p->payload != NULL ? p->payload : kLongText);
}

static void Wire(const golden_packet_t* p, rpc_test_bytes_t* out) {
  if (p->wire_hex != NULL) {
    RpcTestHex(out, p->wire_hex);
    return;
  }
  /* ff fd ff ff 00 00 00 <255 bytes> 36 7e: the length 0xFF is escaped. */
  RpcTestHex(out, "ff fd ff ff 00 00 00");
  RpcTestAppend(out, kLongText, 255);
  out->data[out->size++] = 0x36;
  out->data[out->size++] = 0x7e;
}

/* Bit-at-a-time CRC-16/CCITT-FALSE: the independent reference for the table version. */
static uint16_t BitwiseCrc(const uint8_t* d, size_t n) {
  uint16_t crc = 0xFFFF;
  size_t i;
  int b;
  for (i = 0; i < n; ++i) {
    crc ^= (uint16_t)(d[i] << 8);
    for (b = 0; b < 8; ++b) {
      crc = (uint16_t)((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    }
  }
  return crc;
}

TEST(Crc16CheckValue) {
  uint8_t data[1000];
  uint32_t x = 12345;
  size_t i;
  EXPECT_EQ(0x29B1, TVMCrtCrc16_Update(TVM_CRT_CRC16_INIT, (const uint8_t*)"123456789", 9));
  for (i = 0; i < sizeof(data); ++i) {
    x = x * 1103515245u + 12345u;
    data[i] = (uint8_t)(x >> 16);
  }
  EXPECT_EQ(BitwiseCrc(data, sizeof(data)),
            TVMCrtCrc16_Update(TVM_CRT_CRC16_INIT, data, sizeof(data)));
  /* incremental == one shot */
  EXPECT_EQ(BitwiseCrc(data, sizeof(data)),
            TVMCrtCrc16_Update(TVMCrtCrc16_Update(TVM_CRT_CRC16_INIT, data, 333), data + 333, 667));
}

TEST(FramerGoldenPackets) {
  size_t i;
  for (i = 0; i < kNumPackets; ++i) {
    rpc_test_sink_t sink;
    TVMCrtFramer framer;
    rpc_test_bytes_t expected;
    RpcTestSinkInit(&sink, RPC_TEST_MAX_WIRE);
    TVMCrtFramer_Init(&framer, &sink.stream);
    expected.size = 0;
    expected.data[expected.size++] = 0xFE; /* the first packet after reset gets the nop */
    {
      rpc_test_bytes_t w;
      Wire(&kPackets[i], &w);
      RpcTestAppend(&expected, w.data, w.size);
    }
    EXPECT_EQ(kTvmErrorNoError,
              TVMCrtFramer_Write(&framer, Payload(&kPackets[i]), kPackets[i].payload_size));
    EXPECT_BYTES_EQ(expected.data, expected.size, sink.wire.data, sink.wire.size);
  }
}

TEST(FramerValidPacketTrain) {
  rpc_test_sink_t sink;
  TVMCrtFramer framer;
  rpc_test_bytes_t expected;
  RpcTestSinkInit(&sink, RPC_TEST_MAX_WIRE);
  TVMCrtFramer_Init(&framer, &sink.stream);
  RpcTestHex(&expected,
             "fe ff fd 03 00 00 00 6f 6e 65 58 f4"
             "   ff fd 04 00 00 00 74 77 6f 32 13 11"
             "fe ff fd 05 00 00 00 74 68 72 65 65 63 9f");
  EXPECT_EQ(kTvmErrorNoError, TVMCrtFramer_Write(&framer, (const uint8_t*)"one", 3));
  EXPECT_EQ(kTvmErrorNoError, TVMCrtFramer_Write(&framer, (const uint8_t*)"two2", 4));
  TVMCrtFramer_Reset(&framer);
  EXPECT_EQ(kTvmErrorNoError, TVMCrtFramer_Write(&framer, (const uint8_t*)"three", 5));
  EXPECT_BYTES_EQ(expected.data, expected.size, sink.wire.data, sink.wire.size);
}

TEST(FramerChunkedPayloadAndErrors) {
  rpc_test_sink_t sink;
  TVMCrtFramer framer;
  rpc_test_bytes_t expected;
  RpcTestSinkInit(&sink, RPC_TEST_MAX_WIRE);
  TVMCrtFramer_Init(&framer, &sink.stream);
  EXPECT_EQ(kTvmErrorFramingInvalidState,
            TVMCrtFramer_WritePayloadChunk(&framer, (const uint8_t*)"x", 1));
  EXPECT_EQ(kTvmErrorFramingInvalidState, TVMCrtFramer_FinishPacket(&framer));
  EXPECT_EQ(kTvmErrorNoError, TVMCrtFramer_StartPacket(&framer, 19));
  EXPECT_EQ(kTvmErrorNoError,
            TVMCrtFramer_WritePayloadChunk(&framer, (const uint8_t*)"es_\xff_", 5));
  EXPECT_EQ(kTvmErrorFramingPayloadIncomplete, TVMCrtFramer_FinishPacket(&framer));
  EXPECT_EQ(kTvmErrorFramingPayloadOverflow,
            TVMCrtFramer_WritePayloadChunk(&framer, (const uint8_t*)"capeir/^>t@\"hrXX", 16));
  EXPECT_EQ(kTvmErrorNoError,
            TVMCrtFramer_WritePayloadChunk(&framer, (const uint8_t*)"capeir/^>t@\"hr", 14));
  EXPECT_EQ(kTvmErrorNoError, TVMCrtFramer_FinishPacket(&framer));
  RpcTestHex(&expected, "fe");
  {
    rpc_test_bytes_t w;
    Wire(&kPackets[5], &w);
    RpcTestAppend(&expected, w.data, w.size);
  }
  EXPECT_BYTES_EQ(expected.data, expected.size, sink.wire.data, sink.wire.size);
}

TEST(FramerChunksNeverSplitEscapes) {
  static uint8_t payload[600];
  rpc_test_sink_t sink;
  TVMCrtFramer framer;
  size_t i, pos = 0;
  memset(payload, 0xFF, sizeof(payload));
  RpcTestSinkInit(&sink, RPC_TEST_MAX_WIRE);
  TVMCrtFramer_Init(&framer, &sink.stream);
  EXPECT_EQ(kTvmErrorNoError, TVMCrtFramer_Write(&framer, payload, sizeof(payload)));
  /* fe ff fd, 4 length bytes (58 02 00 00), then 1200 bytes of FF pairs starting at offset 7. */
  EXPECT_EQ(7u + 1200u + 2u, sink.wire.size);
  for (i = 0; i < sink.num_chunks; ++i) {
    EXPECT_TRUE(sink.chunk_sizes[i] <= TVM_CRT_FRAMING_CHUNK_SIZE_BYTES);
    pos += sink.chunk_sizes[i];
    if (pos > 7 && pos < 7 + 1200) {
      EXPECT_EQ(0u, (pos - 7) % 2); /* a boundary inside the payload falls between pairs */
    }
  }
  EXPECT_EQ(BitwiseCrc(sink.wire.data + 1, sink.wire.size - 3),
            (uint16_t)(sink.wire.data[sink.wire.size - 2] | sink.wire.data[sink.wire.size - 1] << 8));
}

TEST(FramerWriteErrorResets) {
  rpc_test_sink_t sink;
  TVMCrtFramer framer;
  rpc_test_bytes_t expected;
  RpcTestSinkInit(&sink, 5); /* room for 5 bytes only: ShortWrite */
  TVMCrtFramer_Init(&framer, &sink.stream);
  EXPECT_EQ(kTvmErrorWriteStreamShortWrite, TVMCrtFramer_Write(&framer, (const uint8_t*)"one", 3));
  RpcTestSinkInit(&sink, RPC_TEST_MAX_WIRE);
  sink.fail_with = kTvmErrorPlatformCheckFailure;
  EXPECT_EQ(kTvmErrorPlatformCheckFailure, TVMCrtFramer_Write(&framer, (const uint8_t*)"one", 3));
  sink.fail_with = kTvmErrorNoError;
  /* after a write error, the next packet starts with the nop again */
  EXPECT_EQ(kTvmErrorNoError, TVMCrtFramer_Write(&framer, (const uint8_t*)"one", 3));
  RpcTestHex(&expected, "fe ff fd 03 00 00 00 6f 6e 65 58 f4");
  EXPECT_BYTES_EQ(expected.data, expected.size, sink.wire.data, sink.wire.size);
}

TEST(WriteStreamWriteAll) {
  rpc_test_sink_t sink;
  size_t written = 99;
  RpcTestSinkInit(&sink, 3);
  EXPECT_EQ(kTvmErrorWriteStreamShortWrite,
            TVMCrtWriteStream_WriteAll(&sink.stream, (const uint8_t*)"hello", 5, &written));
  EXPECT_EQ(3u, written);
}

static tvm_crt_error_t LongWrite(void* ctx, const uint8_t* d, size_t n, size_t* written) {
  (void)ctx;
  (void)d;
  *written = n + 1;
  return kTvmErrorNoError;
}

TEST(WriteStreamLongWrite) {
  TVMCrtWriteStream s = {LongWrite, NULL, NULL, NULL};
  size_t written;
  EXPECT_EQ(kTvmErrorWriteStreamLongWrite,
            TVMCrtWriteStream_WriteAll(&s, (const uint8_t*)"hello", 5, &written));
}

/* ---- Unframer ---------------------------------------------------------------------------- */

static void ExpectDecoded(const rpc_test_sink_t* sink, const golden_packet_t* p) {
  EXPECT_EQ(1, sink->packet_done);
  EXPECT_TRUE(sink->packet_valid);
  EXPECT_EQ(p->payload_size, (size_t)sink->announced_size);
  EXPECT_BYTES_EQ(Payload(p), p->payload_size, sink->wire.data, sink->wire.size);
}

TEST(UnframerFullPacket) {
  size_t i;
  for (i = 0; i < kNumPackets; ++i) {
    rpc_test_sink_t sink;
    TVMCrtUnframer u;
    rpc_test_bytes_t w;
    size_t consumed = 0;
    Wire(&kPackets[i], &w);
    RpcTestSinkInit(&sink, 300);
    TVMCrtUnframer_Init(&u, &sink.stream);
    EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, w.data, w.size, &consumed));
    EXPECT_EQ(w.size, consumed);
    ExpectDecoded(&sink, &kPackets[i]);
  }
}

TEST(UnframerByteAtATime) {
  size_t i, j;
  for (i = 0; i < kNumPackets; ++i) {
    rpc_test_sink_t sink;
    TVMCrtUnframer u;
    rpc_test_bytes_t w;
    Wire(&kPackets[i], &w);
    RpcTestSinkInit(&sink, 300);
    TVMCrtUnframer_Init(&u, &sink.stream);
    for (j = 0; j < w.size; ++j) {
      size_t consumed = 0;
      EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, &w.data[j], 1, &consumed));
      EXPECT_EQ(1u, consumed);
      EXPECT_EQ(j + 1 == w.size ? 1 : 0, sink.packet_done);
    }
    ExpectDecoded(&sink, &kPackets[i]);
  }
}

TEST(UnframerArbitraryBoundary) {
  size_t i, split;
  for (i = 0; i < kNumPackets; ++i) {
    rpc_test_bytes_t w;
    Wire(&kPackets[i], &w);
    for (split = 1; split < w.size; ++split) {
      rpc_test_sink_t sink;
      TVMCrtUnframer u;
      size_t consumed = 0;
      RpcTestSinkInit(&sink, 300);
      TVMCrtUnframer_Init(&u, &sink.stream);
      EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, w.data, split, &consumed));
      EXPECT_EQ(split, consumed);
      EXPECT_EQ(0, sink.packet_done);
      EXPECT_EQ(kTvmErrorNoError,
                TVMCrtUnframer_Write(&u, w.data + split, w.size - split, &consumed));
      EXPECT_EQ(w.size - split, consumed);
      ExpectDecoded(&sink, &kPackets[i]);
    }
  }
}

/* True when wire[2..k) ends inside an escape pair (an odd run of FF). */
static int EndsMidEscape(const rpc_test_bytes_t* w, size_t k) {
  size_t run = 0;
  while (k > 2 + run && w->data[k - 1 - run] == 0xFF) ++run;
  return run % 2 == 1;
}

TEST(UnframerArbitraryPacketReset) {
  size_t i, k;
  int bytewise;
  for (i = 0; i < kNumPackets; ++i) {
    rpc_test_bytes_t w;
    Wire(&kPackets[i], &w);
    for (k = 1; k < w.size; ++k) {
      if (k >= 2 && EndsMidEscape(&w, k)) continue;
      for (bytewise = 0; bytewise < 2; ++bytewise) {
        rpc_test_sink_t sink;
        TVMCrtUnframer u;
        size_t consumed = 0;
        RpcTestSinkInit(&sink, 300);
        TVMCrtUnframer_Init(&u, &sink.stream);
        EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, w.data, k, &consumed));
        EXPECT_EQ(k, consumed);
        if (k == 1) {
          /* only the FF so far: the restarted packet simply resyncs */
          EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, w.data, w.size, &consumed));
          EXPECT_EQ(w.size, consumed);
        } else if (bytewise) {
          EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, w.data, 1, &consumed));
          EXPECT_EQ(1u, consumed);
          EXPECT_EQ(kTvmErrorFramingShortPacket,
                    TVMCrtUnframer_Write(&u, w.data + 1, 1, &consumed));
          EXPECT_EQ(0u, consumed);
          EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, w.data + 1, w.size - 1, &consumed));
          EXPECT_EQ(w.size - 1, consumed);
        } else {
          EXPECT_EQ(kTvmErrorFramingShortPacket,
                    TVMCrtUnframer_Write(&u, w.data, w.size, &consumed));
          EXPECT_EQ(1u, consumed);
          EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, w.data + 1, w.size - 1, &consumed));
          EXPECT_EQ(w.size - 1, consumed);
        }
        ExpectDecoded(&sink, &kPackets[i]);
      }
    }
  }
}

TEST(UnframerPacketTooLong) {
  static uint8_t payload[301];
  rpc_test_sink_t sink;
  TVMCrtUnframer u;
  rpc_test_bytes_t w;
  uint16_t crc;
  uint8_t crc_bytes[2];
  size_t i, consumed = 0;
  RpcTestSinkInit(&sink, 300);
  TVMCrtUnframer_Init(&u, &sink.stream);
  RpcTestHex(&w, "ff fd 2d 01 00 00"); /* length 301 */
  for (i = 0; i < sizeof(payload); ++i) payload[i] = (uint8_t)(i & 0xFF) == 0xFF ? 0 : (uint8_t)i;
  crc = TVMCrtCrc16_Update(TVMCrtCrc16_Update(TVM_CRT_CRC16_INIT, w.data, w.size), payload,
                           sizeof(payload));
  crc_bytes[0] = (uint8_t)crc;
  crc_bytes[1] = (uint8_t)(crc >> 8);
  EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, w.data, 2, &consumed));
  EXPECT_EQ(2u, consumed);
  EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, w.data + 2, 4, &consumed));
  EXPECT_EQ(4u, consumed);
  EXPECT_EQ(kTvmErrorWriteStreamShortWrite,
            TVMCrtUnframer_Write(&u, payload, sizeof(payload), &consumed));
  EXPECT_EQ(300u, consumed);
  EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, crc_bytes, 2, &consumed));
  EXPECT_EQ(2u, consumed); /* eaten as junk while looking for a packet start */
  EXPECT_EQ(0, sink.packet_done);
  EXPECT_EQ(0, sink.packet_valid);
  /* a following valid packet decodes */
  Wire(&kPackets[0], &w);
  EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, w.data, w.size, &consumed));
  ExpectDecoded(&sink, &kPackets[0]);
}

TEST(UnframerEscapes) {
  rpc_test_sink_t sink;
  TVMCrtUnframer u;
  rpc_test_bytes_t w;
  size_t consumed = 0;
  RpcTestSinkInit(&sink, 300);
  TVMCrtUnframer_Init(&u, &sink.stream);
  /* "one" with an in-packet nop (FF FE) in the payload; the nop's bytes count in the CRC. */
  {
    uint8_t frame[16] = {0xff, 0xfd, 3, 0, 0, 0, 'o', 0xff, 0xfe, 'n', 'e'};
    uint16_t crc = TVMCrtCrc16_Update(TVM_CRT_CRC16_INIT, frame, 11);
    frame[11] = (uint8_t)crc;
    frame[12] = (uint8_t)(crc >> 8);
    EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, frame, 13, &consumed));
    EXPECT_EQ(13u, consumed);
    ExpectDecoded(&sink, &kPackets[0]);
  }
  /* junk (including a stray FE and FF 00) before a packet is skipped */
  RpcTestHex(&w, "00 fe 11 ff 00 fe ff fd 03 00 00 00 6f 6e 65 58 f4");
  EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, w.data, w.size, &consumed));
  EXPECT_EQ(w.size, consumed);
  EXPECT_EQ(1, sink.packet_done);
  /* FF followed by anything but FF/FE/FD inside a packet: both bytes consumed */
  RpcTestHex(&w, "ff fd 03 00 ff 41 00");
  EXPECT_EQ(kTvmErrorFramingInvalidEscape, TVMCrtUnframer_Write(&u, w.data, w.size, &consumed));
  EXPECT_EQ(6u, consumed);
  /* a corrupted CRC is reported as invalid */
  RpcTestHex(&w, "ff fd 03 00 00 00 6f 6e 65 58 f5");
  EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&u, w.data, w.size, &consumed));
  EXPECT_EQ(1, sink.packet_done);
  EXPECT_EQ(0, sink.packet_valid);
}

TEST(UnframerBytesNeeded) {
  rpc_test_sink_t sink;
  TVMCrtUnframer u;
  rpc_test_bytes_t w;
  size_t consumed;
  RpcTestSinkInit(&sink, 300);
  TVMCrtUnframer_Init(&u, &sink.stream);
  Wire(&kPackets[2], &w); /* three */
  EXPECT_EQ(1u, TVMCrtUnframer_BytesNeeded(&u));
  TVMCrtUnframer_Write(&u, w.data, 2, &consumed);
  EXPECT_EQ(4u, TVMCrtUnframer_BytesNeeded(&u));
  TVMCrtUnframer_Write(&u, w.data + 2, 1, &consumed);
  EXPECT_EQ(3u, TVMCrtUnframer_BytesNeeded(&u));
  TVMCrtUnframer_Write(&u, w.data + 3, 3, &consumed);
  EXPECT_EQ(5u, TVMCrtUnframer_BytesNeeded(&u));
  TVMCrtUnframer_Write(&u, w.data + 6, 5, &consumed);
  EXPECT_EQ(2u, TVMCrtUnframer_BytesNeeded(&u));
  TVMCrtUnframer_Write(&u, w.data + 11, 1, &consumed);
  EXPECT_EQ(1u, TVMCrtUnframer_BytesNeeded(&u));
  TVMCrtUnframer_Write(&u, w.data + 12, 1, &consumed);
  EXPECT_EQ(1u, TVMCrtUnframer_BytesNeeded(&u));
  EXPECT_EQ(1, sink.packet_valid);
}

int main(void) {
  RUN_TEST(Crc16CheckValue);
  RUN_TEST(FramerGoldenPackets);
  RUN_TEST(FramerValidPacketTrain);
  RUN_TEST(FramerChunkedPayloadAndErrors);
  RUN_TEST(FramerChunksNeverSplitEscapes);
  RUN_TEST(FramerWriteErrorResets);
  RUN_TEST(WriteStreamWriteAll);
  RUN_TEST(WriteStreamLongWrite);
  RUN_TEST(UnframerFullPacket);
  RUN_TEST(UnframerByteAtATime);
  RUN_TEST(UnframerArbitraryBoundary);
  RUN_TEST(UnframerArbitraryPacketReset);
  RUN_TEST(UnframerPacketTooLong);
  RUN_TEST(UnframerEscapes);
  RUN_TEST(UnframerBytesNeeded);
  return TEST_REPORT();
}

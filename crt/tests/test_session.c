/*
 * test_session.c: the session layer against the golden frames of spec §4.3 / §7.5, plus the
 * receiver fixes (no stale bytes after a corrupt packet, no wedge on a foreign session id,
 * one established callback per Init, proper error codes).
 */
#include <tvm/runtime/crt/rpc_common/crc16.h>
#include <tvm/runtime/crt/rpc_common/session.h>

#include "test_rpc_util.h"

#define kMaxMessages 16

typedef struct {
  const char* name;
  rpc_test_sink_t out;
  TVMCrtFramer framer;
  uint8_t rx_storage[64];
  TVMCrtFrameBuffer rx;
  TVMCrtSession session;
  TVMCrtUnframer unframer;
  int keep_messages; /* don't clear the receive buffer in the callback */
  int num_messages;
  int types[kMaxMessages];
  char bodies[kMaxMessages][64];
  size_t body_sizes[kMaxMessages];
} peer_t;

static void OnMessage(void* ctx, TVMCrtSessionMessageType type, TVMCrtFrameBuffer* buf) {
  peer_t* p = (peer_t*)ctx;
  int i = p->num_messages < kMaxMessages ? p->num_messages++ : kMaxMessages - 1;
  p->types[i] = type;
  p->body_sizes[i] = 0;
  if (buf != NULL) {
    p->body_sizes[i] = TVMCrtFrameBuffer_Read(buf, (uint8_t*)p->bodies[i], sizeof(p->bodies[i]));
    if (!p->keep_messages) TVMCrtSession_ClearReceiveBuffer(&p->session);
  }
}

static void PeerInit(peer_t* p, const char* name) {
  memset(p, 0, sizeof(*p));
  p->name = name;
  RpcTestSinkInit(&p->out, RPC_TEST_MAX_WIRE);
  p->out.stream.packet_start = NULL;
  p->out.stream.packet_done = NULL;
  TVMCrtFramer_Init(&p->framer, &p->out.stream);
  TVMCrtFrameBuffer_Init(&p->rx, p->rx_storage, sizeof(p->rx_storage));
  TVMCrtSession_Init(&p->session, &p->framer, &p->rx, OnMessage, p);
  TVMCrtUnframer_Init(&p->unframer, TVMCrtSession_Receiver(&p->session));
}

/* Feed wire bytes to a peer; returns the unframer's result. */
static tvm_crt_error_t Feed(peer_t* to, const uint8_t* data, size_t size) {
  size_t consumed = 0;
  tvm_crt_error_t err = TVMCrtUnframer_Write(&to->unframer, data, size, &consumed);
  return err;
}

/* Move everything from's framer wrote into to, then forget it. */
static tvm_crt_error_t Deliver(peer_t* from, peer_t* to) {
  tvm_crt_error_t err = Feed(to, from->out.wire.data, from->out.wire.size);
  from->out.wire.size = 0;
  return err;
}

static void ExpectWire(peer_t* p, const char* hex) {
  rpc_test_bytes_t expected;
  RpcTestHex(&expected, hex);
  EXPECT_BYTES_EQ(expected.data, expected.size, p->out.wire.data, p->out.wire.size);
}

static void ExpectMessage(peer_t* p, int index, int type, const char* body) {
  EXPECT_TRUE(index < p->num_messages);
  if (index >= p->num_messages) return;
  EXPECT_EQ(type, p->types[index]);
  EXPECT_BYTES_EQ(body, strlen(body), p->bodies[index], p->body_sizes[index]);
}

static peer_t alice, bob;

/* Both sides reset and exchange Terminate frames; Alice starts, Bob replies. */
static void Establish(void) {
  PeerInit(&alice, "alice");
  PeerInit(&bob, "bob");
  EXPECT_EQ(kTvmErrorNoError, TVMCrtSession_Reset(&alice.session, 0x3c));
  EXPECT_EQ(kTvmErrorNoError, TVMCrtSession_Reset(&bob.session, 0xab));
  Deliver(&alice, &bob);
  Deliver(&bob, &alice);
  EXPECT_EQ(kTvmErrorNoError, TVMCrtSession_Start(&alice.session));
  Deliver(&alice, &bob);
  Deliver(&bob, &alice);
  EXPECT_TRUE(TVMCrtSession_IsEstablished(&alice.session));
  EXPECT_TRUE(TVMCrtSession_IsEstablished(&bob.session));
  alice.num_messages = bob.num_messages = 0;
}

TEST(NonceRegeneration) {
  EXPECT_EQ(0x82, TVMCrtSession_NextNonce(0x3c));
  EXPECT_EQ(0x66, TVMCrtSession_NextNonce(0xab));
  EXPECT_EQ(0x45, TVMCrtSession_NextNonce(0x82));
  EXPECT_EQ(0x01, TVMCrtSession_NextNonce(0x00));
  {
    int n;
    for (n = 0; n < 256; ++n) EXPECT_TRUE(TVMCrtSession_NextNonce((uint8_t)n) != 0);
  }
}

TEST(NormalExchange) {
  PeerInit(&alice, "alice");
  PeerInit(&bob, "bob");
  EXPECT_EQ(kTvmErrorNoError, TVMCrtSession_Reset(&alice.session, 0x3c));
  ExpectWire(&alice, "fe ff fd 03 00 00 00 00 00 02 66 77");
  EXPECT_EQ(kTvmErrorNoError, TVMCrtSession_Reset(&bob.session, 0xab));
  ExpectWire(&bob, "fe ff fd 03 00 00 00 00 00 02 66 77");
  EXPECT_EQ(kTvmErrorNoError, Deliver(&alice, &bob));
  EXPECT_EQ(kTvmErrorNoError, Deliver(&bob, &alice));
  EXPECT_EQ(0, alice.num_messages + bob.num_messages);

  EXPECT_EQ(kTvmErrorNoError, TVMCrtSession_Start(&alice.session));
  ExpectWire(&alice, "ff fd 04 00 00 00 82 00 00 01 7b e9");
  EXPECT_EQ(kTvmErrorNoError, Deliver(&alice, &bob));
  ExpectWire(&bob, "ff fd 04 00 00 00 82 66 01 01 81 f3");
  EXPECT_TRUE(TVMCrtSession_IsEstablished(&bob.session));
  EXPECT_TRUE(!TVMCrtSession_IsEstablished(&alice.session));
  EXPECT_EQ(kTvmErrorNoError, Deliver(&bob, &alice));
  EXPECT_TRUE(TVMCrtSession_IsEstablished(&alice.session));
  EXPECT_EQ(1, alice.num_messages);
  ExpectMessage(&alice, 0, kTvmSessionStartSessionReply, "");

  EXPECT_EQ(kTvmErrorNoError, TVMCrtSession_SendMessage(&alice.session, kTvmSessionNormal,
                                                        (const uint8_t*)"hello", 5));
  ExpectWire(&alice, "ff fd 08 00 00 00 82 66 10 68 65 6c 6c 6f 90 28");
  EXPECT_EQ(kTvmErrorNoError, Deliver(&alice, &bob));
  EXPECT_EQ(2, bob.num_messages);
  ExpectMessage(&bob, 0, kTvmSessionStartSessionReply, "");
  ExpectMessage(&bob, 1, kTvmSessionNormal, "hello");

  EXPECT_EQ(kTvmErrorNoError,
            TVMCrtSession_SendMessage(&bob.session, kTvmSessionNormal, (const uint8_t*)"olleh", 5));
  ExpectWire(&bob, "ff fd 08 00 00 00 82 66 10 6f 6c 6c 65 68 4c 76");
  EXPECT_EQ(kTvmErrorNoError, Deliver(&bob, &alice));
  ExpectMessage(&alice, 1, kTvmSessionNormal, "olleh");

  EXPECT_EQ(kTvmErrorNoError,
            TVMCrtSession_SendMessage(&alice.session, kTvmSessionLog, (const uint8_t*)"log1", 4));
  ExpectWire(&alice, "ff fd 07 00 00 00 00 00 03 6c 6f 67 31 f0 d4");
  EXPECT_EQ(kTvmErrorNoError, Deliver(&alice, &bob));
  ExpectMessage(&bob, 2, kTvmSessionLog, "log1");

  EXPECT_EQ(kTvmErrorNoError,
            TVMCrtSession_SendMessage(&bob.session, kTvmSessionLog, (const uint8_t*)"zero", 4));
  ExpectWire(&bob, "ff fd 07 00 00 00 00 00 03 7a 65 72 6f b2 68");
  EXPECT_EQ(kTvmErrorNoError, Deliver(&bob, &alice));
  ExpectMessage(&alice, 2, kTvmSessionLog, "zero");
}

TEST(LogBeforeSessionStart) {
  PeerInit(&alice, "alice");
  PeerInit(&bob, "bob");
  EXPECT_EQ(kTvmErrorNoError,
            TVMCrtSession_SendMessage(&alice.session, kTvmSessionLog, (const uint8_t*)"log1", 4));
  ExpectWire(&alice, "fe ff fd 07 00 00 00 00 00 03 6c 6f 67 31 f0 d4");
  EXPECT_EQ(kTvmErrorNoError, Deliver(&alice, &bob));
  EXPECT_EQ(1, bob.num_messages);
  ExpectMessage(&bob, 0, kTvmSessionLog, "log1");
  /* other messages need a session */
  EXPECT_EQ(kTvmErrorSessionInvalidState,
            TVMCrtSession_SendMessage(&alice.session, kTvmSessionNormal, (const uint8_t*)"x", 1));
  EXPECT_EQ(kTvmErrorSessionInvalidState,
            TVMCrtSession_StartMessage(&alice.session, kTvmSessionNormal, 1));
  /* StartSession before Reset is refused (the reference aborts) */
  EXPECT_EQ(kTvmErrorSessionInvalidState, TVMCrtSession_Start(&alice.session));
}

TEST(DoubleStart) {
  PeerInit(&alice, "alice");
  PeerInit(&bob, "bob");
  TVMCrtSession_Reset(&alice.session, 0x3c);
  TVMCrtSession_Reset(&bob.session, 0xab);
  Deliver(&alice, &bob);
  Deliver(&bob, &alice);
  EXPECT_EQ(kTvmErrorNoError, TVMCrtSession_Start(&alice.session));
  ExpectWire(&alice, "ff fd 04 00 00 00 82 00 00 01 7b e9");
  EXPECT_EQ(kTvmErrorNoError, TVMCrtSession_Start(&bob.session));
  ExpectWire(&bob, "ff fd 04 00 00 00 66 00 00 01 60 a7");
  EXPECT_TRUE(!TVMCrtSession_IsEstablished(&alice.session));
  EXPECT_TRUE(!TVMCrtSession_IsEstablished(&bob.session));
  /* Alice's Init (0x82) is ignored by Bob (0x66 < 0x82): no output */
  EXPECT_EQ(kTvmErrorNoError, Feed(&bob, alice.out.wire.data, alice.out.wire.size));
  alice.out.wire.size = 0;
  {
    rpc_test_bytes_t bob_start;
    RpcTestHex(&bob_start, "ff fd 04 00 00 00 66 00 00 01 60 a7");
    EXPECT_BYTES_EQ(bob_start.data, bob_start.size, bob.out.wire.data, bob.out.wire.size);
  }
  /* Bob's Init is accepted by Alice, who replies with 0x82 -> 0x45 */
  EXPECT_EQ(kTvmErrorNoError, Deliver(&bob, &alice));
  ExpectWire(&alice, "ff fd 04 00 00 00 66 45 01 01 0c 62");
  EXPECT_TRUE(TVMCrtSession_IsEstablished(&alice.session));
  EXPECT_EQ(kTvmErrorNoError, Deliver(&alice, &bob));
  EXPECT_TRUE(TVMCrtSession_IsEstablished(&bob.session));
  EXPECT_EQ(1, alice.num_messages);
  EXPECT_EQ(1, bob.num_messages);
}

TEST(CorruptFrameLeavesNoStaleBytes) {
  rpc_test_bytes_t w;
  Establish();
  /* "hello" with a broken CRC: dropped, and its bytes must not stay in the buffer */
  RpcTestHex(&w, "ff fd 08 00 00 00 82 66 10 68 65 6c 6c 6f 90 29");
  EXPECT_EQ(kTvmErrorNoError, Feed(&bob, w.data, w.size));
  EXPECT_EQ(0, bob.num_messages);
  EXPECT_EQ(0u, TVMCrtFrameBuffer_ReadAvailable(&bob.rx));
  /* a packet aborted by a restart leaves nothing either */
  RpcTestHex(&w, "ff fd 08 00 00 00 82 66 10 68");
  EXPECT_EQ(kTvmErrorNoError, Feed(&bob, w.data, w.size));
  TVMCrtSession_SendMessage(&alice.session, kTvmSessionNormal, (const uint8_t*)"hello", 5);
  EXPECT_EQ(kTvmErrorFramingShortPacket, Feed(&bob, alice.out.wire.data, alice.out.wire.size));
  EXPECT_EQ(kTvmErrorNoError, Feed(&bob, alice.out.wire.data + 1, alice.out.wire.size - 1));
  alice.out.wire.size = 0;
  EXPECT_EQ(1, bob.num_messages);
  ExpectMessage(&bob, 0, kTvmSessionNormal, "hello");
}

TEST(ForeignSessionIdDoesNotWedge) {
  rpc_test_bytes_t w;
  TVMCrtFramer other;
  rpc_test_sink_t sink;
  Establish();
  /* a kNormal for session 0x1234 */
  RpcTestSinkInit(&sink, RPC_TEST_MAX_WIRE);
  TVMCrtFramer_Init(&other, &sink.stream);
  TVMCrtFramer_Write(&other, (const uint8_t*)"\x34\x12\x10stale", 8);
  EXPECT_EQ(kTvmErrorNoError, Feed(&bob, sink.wire.data, sink.wire.size));
  EXPECT_EQ(0, bob.num_messages);
  /* a kLog for another session is dropped too */
  RpcTestHex(&w, "ff fd 07 00 00 00 01 02 03 6c 6f 67 31");
  {
    uint16_t crc = TVMCrtCrc16_Update(TVM_CRT_CRC16_INIT, w.data, w.size);
    w.data[w.size++] = (uint8_t)crc;
    w.data[w.size++] = (uint8_t)(crc >> 8);
  }
  EXPECT_EQ(kTvmErrorNoError, Feed(&bob, w.data, w.size));
  EXPECT_EQ(0, bob.num_messages);
  /* the receiver still takes the next message */
  TVMCrtSession_SendMessage(&alice.session, kTvmSessionNormal, (const uint8_t*)"hello", 5);
  EXPECT_EQ(kTvmErrorNoError, Deliver(&alice, &bob));
  EXPECT_EQ(1, bob.num_messages);
  ExpectMessage(&bob, 0, kTvmSessionNormal, "hello");
}

TEST(InitWhileEstablishedFiresOnce) {
  Establish();
  /* Alice restarts her side (as a host reconnecting) */
  TVMCrtSession_Reset(&alice.session, 0x10);
  Deliver(&alice, &bob);
  EXPECT_TRUE(!TVMCrtSession_IsEstablished(&bob.session)); /* Terminate ended Bob's session */
  EXPECT_EQ(1, bob.num_messages);
  ExpectMessage(&bob, 0, kTvmSessionTerminateSession, "");
  /* Bob re-established, then an Init arrives while established */
  TVMCrtSession_Start(&alice.session);
  Deliver(&alice, &bob);
  Deliver(&bob, &alice);
  EXPECT_EQ(2, bob.num_messages);
  TVMCrtSession_Start(&alice.session);
  Deliver(&alice, &bob);
  EXPECT_EQ(3, bob.num_messages); /* exactly one callback for the second Init */
  ExpectMessage(&bob, 2, kTvmSessionStartSessionReply, "");
  Deliver(&bob, &alice);
  EXPECT_TRUE(TVMCrtSession_IsEstablished(&alice.session));
  EXPECT_TRUE(TVMCrtSession_IsEstablished(&bob.session));
  TVMCrtSession_SendMessage(&alice.session, kTvmSessionNormal, (const uint8_t*)"again", 5);
  Deliver(&alice, &bob);
  ExpectMessage(&bob, 3, kTvmSessionNormal, "again");
}

TEST(ReceiverErrorsAreErrorCodes) {
  static uint8_t big[100];
  Establish();
  bob.keep_messages = 1;
  TVMCrtSession_SendMessage(&alice.session, kTvmSessionNormal, (const uint8_t*)"one", 3);
  EXPECT_EQ(kTvmErrorNoError, Deliver(&alice, &bob));
  /* the first message is still pending: the next one is refused with Busy */
  TVMCrtSession_SendMessage(&alice.session, kTvmSessionNormal, (const uint8_t*)"two", 3);
  EXPECT_EQ(kTvmErrorSessionReceiveBufferBusy, Deliver(&alice, &bob));
  TVMCrtSession_ClearReceiveBuffer(&bob.session);
  bob.keep_messages = 0;
  /* a message larger than the 64-byte receive buffer: ShortWrite, then recovery */
  memset(big, 'x', sizeof(big));
  TVMCrtSession_SendMessage(&alice.session, kTvmSessionNormal, big, sizeof(big));
  {
    size_t consumed = 0;
    tvm_crt_error_t err;
    const uint8_t* p = alice.out.wire.data;
    size_t left = alice.out.wire.size;
    err = TVMCrtUnframer_Write(&bob.unframer, p, left, &consumed);
    EXPECT_EQ(kTvmErrorSessionReceiveBufferShortWrite, err);
    EXPECT_TRUE(consumed < left);
    p += consumed;
    left -= consumed;
    EXPECT_EQ(kTvmErrorNoError, TVMCrtUnframer_Write(&bob.unframer, p, left, &consumed));
    alice.out.wire.size = 0;
  }
  EXPECT_EQ(1, bob.num_messages);
  TVMCrtSession_SendMessage(&alice.session, kTvmSessionNormal, (const uint8_t*)"fits", 4);
  EXPECT_EQ(kTvmErrorNoError, Deliver(&alice, &bob));
  EXPECT_EQ(2, bob.num_messages);
  ExpectMessage(&bob, 1, kTvmSessionNormal, "fits");
}

int main(void) {
  RUN_TEST(NonceRegeneration);
  RUN_TEST(NormalExchange);
  RUN_TEST(LogBeforeSessionStart);
  RUN_TEST(DoubleStart);
  RUN_TEST(CorruptFrameLeavesNoStaleBytes);
  RUN_TEST(ForeignSessionIdDoesNotWedge);
  RUN_TEST(InitWhileEstablishedFiresOnce);
  RUN_TEST(ReceiverErrorsAreErrorCodes);
  return TEST_REPORT();
}

/*
 * test_rpc_server.c: the device RPC server driven byte for byte by a host-side session built
 * in the test: the §4.8 worked example, AOT inference end to end (a tiny add model), copies,
 * syscalls, logs, and malformed packets answered with exceptions while the session survives.
 */
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/aot_model.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/rpc_common/session.h>

#include "test_platform.h"
#include "test_rpc_util.h"

/* ---- The test model: out = a + b over float32[4] ----------------------------------------- */

static float g_a[4], g_b[4], g_out[4];
static const int64_t kShape[2] = {1, 4};
static const TVMCrtAotTensor kInputs[2] = {
    {"a", {kDLFloat, 32, 1}, 2, kShape, sizeof(g_a), g_a},
    {"b", {kDLFloat, 32, 1}, 2, kShape, sizeof(g_b), g_b},
};
static const TVMCrtAotTensor kOutputs[1] = {
    {"out", {kDLFloat, 32, 1}, 2, kShape, sizeof(g_out), g_out}};

static int32_t RunAdd(void* const* inputs, void* const* outputs) {
  const float* a = (const float*)inputs[0];
  const float* b = (const float*)inputs[1];
  float* out = (float*)outputs[0];
  int i;
  for (i = 0; i < 4; ++i) out[i] = a[i] + b[i];
  return 0;
}

static const TVMCrtAotModel kModel = {"default", 2, kInputs, 1, kOutputs, 0, RunAdd};

const TVMCrtAotModel* TVMCrtAotModel_Lookup(const char* module_name) {
  return strcmp(module_name, "default") == 0 ? &kModel : NULL;
}

/* ---- Device and host plumbing ----------------------------------------------------------- */

static rpc_test_bytes_t g_device_out; /* bytes the device wrote, not yet read by the host */

static ptrdiff_t DeviceWrite(void* ctx, const uint8_t* data, size_t n) {
  (void)ctx;
  if (g_device_out.size + n > sizeof(g_device_out.data)) return -1;
  RpcTestAppend(&g_device_out, data, n);
  return (ptrdiff_t)n;
}

typedef struct {
  rpc_test_sink_t out;
  TVMCrtFramer framer;
  uint8_t rx_storage[4096];
  TVMCrtFrameBuffer rx;
  TVMCrtSession session;
  TVMCrtUnframer unframer;
  int num_normal;
  rpc_test_bytes_t reply; /* body of the last kNormal */
  int num_logs;
  char log[256];
  char order[32]; /* 'N' per kNormal, 'L' per kLog, in the order they arrived */
} host_t;

static host_t host;
static microtvm_rpc_server_t server;
static tvm_crt_error_t g_last_loop_error;

static void HostOnMessage(void* ctx, TVMCrtSessionMessageType type, TVMCrtFrameBuffer* buf) {
  host_t* h = (host_t*)ctx;
  if (buf == NULL) return;
  if ((type == kTvmSessionNormal || type == kTvmSessionLog) &&
      strlen(h->order) + 1 < sizeof(h->order)) {
    h->order[strlen(h->order)] = type == kTvmSessionNormal ? 'N' : 'L';
  }
  if (type == kTvmSessionNormal) {
    h->num_normal++;
    h->reply.size = TVMCrtFrameBuffer_Read(buf, h->reply.data, sizeof(h->reply.data));
  } else if (type == kTvmSessionLog) {
    size_t n = TVMCrtFrameBuffer_Read(buf, (uint8_t*)h->log, sizeof(h->log) - 1);
    h->log[n] = '\0';
    h->num_logs++;
  }
  TVMCrtSession_ClearReceiveBuffer(&h->session);
}

/* Hand the device everything the host framed; the device answers synchronously. */
static void HostToDevice(void) {
  uint8_t* p = host.out.wire.data;
  size_t left = host.out.wire.size;
  g_last_loop_error = kTvmErrorNoError;
  while (left > 0) {
    tvm_crt_error_t err = MicroTVMRpcServerLoop(server, &p, &left);
    if (err != kTvmErrorNoError) g_last_loop_error = err;
    if (err == kTvmErrorPlatformShutdown) break;
  }
  host.out.wire.size = 0;
}

static void DeviceToHost(void) {
  size_t consumed;
  TVMCrtUnframer_Write(&host.unframer, g_device_out.data, g_device_out.size, &consumed);
  g_device_out.size = 0;
}

/* Boot the device with nonce 0xab and handshake from a host with nonce 0x3c: session 82 66. */
static void Connect(void) {
  static const uint8_t kNonce = 0xab;
  memset(&host, 0, sizeof(host));
  RpcTestSinkInit(&host.out, RPC_TEST_MAX_WIRE);
  host.out.stream.packet_start = NULL;
  host.out.stream.packet_done = NULL;
  TVMCrtFramer_Init(&host.framer, &host.out.stream);
  TVMCrtFrameBuffer_Init(&host.rx, host.rx_storage, sizeof(host.rx_storage));
  TVMCrtSession_Init(&host.session, &host.framer, &host.rx, HostOnMessage, &host);
  TVMCrtUnframer_Init(&host.unframer, TVMCrtSession_Receiver(&host.session));
  g_device_out.size = 0;
  TestPlatform_ScriptRandom(&kNonce, 1);
  server = MicroTVMRpcServerInit(DeviceWrite, NULL);
  DeviceToHost();
  TVMCrtSession_Reset(&host.session, 0x3c);
  TVMCrtSession_Start(&host.session);
  HostToDevice();
  DeviceToHost();
}

/* ---- RPC packet building and reply reading ---------------------------------------------- */

typedef struct {
  uint8_t data[RPC_TEST_MAX_WIRE];
  size_t size;
} packet_t;

static void PutLe(packet_t* p, uint64_t v, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) p->data[p->size++] = (uint8_t)(v >> (8 * i));
}
static void PutStr(packet_t* p, const char* s) {
  PutLe(p, strlen(s), 8);
  memcpy(p->data + p->size, s, strlen(s));
  p->size += strlen(s);
}
static void PutTensor(packet_t* p, uint64_t data, int32_t ndim, const int64_t* shape,
                      uint64_t byte_offset) {
  int32_t i;
  PutLe(p, data, 8);
  PutLe(p, 1, 4); /* kDLCPU */
  PutLe(p, 0, 4);
  PutLe(p, (uint32_t)ndim, 4);
  PutLe(p, kDLFloat | (32u << 8) | (1u << 16), 4);
  for (i = 0; i < ndim; ++i) PutLe(p, (uint64_t)shape[i], 8);
  PutLe(p, byte_offset, 8);
}
/* Start a packet: the u64 length is filled in by Send. */
static void Begin(packet_t* p, int32_t code) {
  p->size = 0;
  PutLe(p, 0, 8);
  PutLe(p, (uint32_t)code, 4);
}

/* Fill in the u64 length Begin left at the start of the packet. */
static void SetLength(packet_t* p) {
  size_t i;
  for (i = 0; i < 8; ++i) p->data[i] = (uint8_t)((uint64_t)(p->size - 8) >> (8 * i));
}

/* Send one request; returns 1 if exactly one reply arrived. */
static int Send(packet_t* p) {
  int before = host.num_normal;
  SetLength(p);
  EXPECT_EQ(kTvmErrorNoError,
            TVMCrtSession_SendMessage(&host.session, kTvmSessionNormal, p->data, p->size));
  HostToDevice();
  DeviceToHost();
  return host.num_normal == before + 1;
}

/* Send one request and check both frames byte for byte: the host's request on the wire, then
 * the device's reply. */
static void ExpectExchange(packet_t* p, const char* request_hex, const char* reply_hex) {
  rpc_test_bytes_t expected;
  SetLength(p);
  TVMCrtSession_SendMessage(&host.session, kTvmSessionNormal, p->data, p->size);
  RpcTestHex(&expected, request_hex);
  EXPECT_BYTES_EQ(expected.data, expected.size, host.out.wire.data, host.out.wire.size);
  HostToDevice();
  RpcTestHex(&expected, reply_hex);
  EXPECT_BYTES_EQ(expected.data, expected.size, g_device_out.data, g_device_out.size);
  DeviceToHost();
}

static uint64_t Le(const rpc_test_bytes_t* b, size_t offset, size_t n) {
  uint64_t v = 0;
  while (n-- > 0) v = (v << 8) | (offset + n < b->size ? b->data[offset + n] : 0);
  return v;
}

/* Reply layout checks. */
static int32_t ReplyCode(void) { return (int32_t)Le(&host.reply, 8, 4); }

static void ExpectWellFormedLength(void) {
  EXPECT_EQ(host.reply.size - 8, Le(&host.reply, 0, 8));
}

/* The message of a ReturnException reply ("" if the reply is not one). */
static const char* ExceptionMessage(void) {
  static char msg[512];
  size_t n;
  msg[0] = '\0';
  if (ReplyCode() != 5 || Le(&host.reply, 12, 4) != 1 || Le(&host.reply, 16, 4) != kTVMStr) {
    return msg;
  }
  n = (size_t)Le(&host.reply, 20, 8);
  if (n >= sizeof(msg) || 28 + n > host.reply.size) return msg;
  memcpy(msg, host.reply.data + 28, n);
  msg[n] = '\0';
  return msg;
}

/* kGetGlobalFunc(name): one str argument. */
static void GetGlobalRequest(packet_t* p, const char* name) {
  Begin(p, 9);
  PutLe(p, 1, 4);
  PutLe(p, kTVMStr, 4);
  PutStr(p, name);
}

/* The §4.8 worked example on the wire: the host's kGetGlobalFunc("runtime.SystemLib") in
 * session 82 66, and the device's ReturnHandle reply. */
static const char kWorkedRequestHex[] =
    "ff fd 30 00 00 00 82 66 10 25 00 00 00 00 00 00 00 09 00 00 00 01 00 00 00 0b 00 00 00"
    "11 00 00 00 00 00 00 00 72 75 6e 74 69 6d 65 2e 53 79 73 74 65 6d 4c 69 62 30 3b";
static const char kWorkedReplyHex[] =
    "ff fd 1f 00 00 00 82 66 10 14 00 00 00 00 00 00 00 04 00 00 00 01 00 00 00 03 00 00 00"
    "00 80 02 80 00 00 00 00 67 52";

static uint64_t GetGlobal(const char* name) {
  packet_t p;
  GetGlobalRequest(&p, name);
  EXPECT_TRUE(Send(&p));
  /* ReturnHandle: i32 4, i32 1, i32 3, u64 handle */
  EXPECT_EQ(20u, Le(&host.reply, 0, 8));
  EXPECT_EQ(4, ReplyCode());
  EXPECT_EQ(3, (int)Le(&host.reply, 16, 4));
  return Le(&host.reply, 20, 8);
}

/* kCallFunc with prepared args (count, codes and values already in `args`). */
static void Call(uint64_t func, const packet_t* args) {
  packet_t p;
  Begin(&p, 3);
  PutLe(&p, func, 8);
  memcpy(p.data + p.size, args->data, args->size);
  p.size += args->size;
  EXPECT_TRUE(Send(&p));
  ExpectWellFormedLength();
}

/* Return value of kCallFunc: [kDLInt tc][value]; returns tc and the value's 8 bytes. */
static int CallResult(uint64_t* value) {
  EXPECT_EQ(4, ReplyCode());
  EXPECT_EQ(0, (int)Le(&host.reply, 16, 4)); /* first tcode: kDLInt */
  *value = Le(&host.reply, 32, 8);
  return (int)Le(&host.reply, 24, 8);
}

/* ---- Tests -------------------------------------------------------------------------------- */

TEST(BootSendsTerminate) {
  g_device_out.size = 0;
  server = MicroTVMRpcServerInit(DeviceWrite, NULL);
  {
    rpc_test_bytes_t expected;
    RpcTestHex(&expected, "fe ff fd 03 00 00 00 00 00 02 66 77");
    EXPECT_BYTES_EQ(expected.data, expected.size, g_device_out.data, g_device_out.size);
  }
}

TEST(WorkedExampleBytes) {
  packet_t p;
  Connect();
  ASSERT_TRUE(TVMCrtSession_IsEstablished(&host.session));
  EXPECT_EQ(0x6682, host.session.session_id);

  /* Host request kGetGlobalFunc("runtime.SystemLib"): frame length 48 */
  GetGlobalRequest(&p, "runtime.SystemLib");
  ExpectExchange(&p,
                 kWorkedRequestHex, kWorkedReplyHex);

  /* kCallFunc(0x80028000) with no args, then the Module 0x8000 return */
  Begin(&p, 3);
  PutLe(&p, 0x80028000u, 8);
  PutLe(&p, 0, 4);
  ExpectExchange(&p,
                 "ff fd 1b 00 00 00 82 66 10 10 00 00 00 00 00 00 00 03 00 00 00 00 80 02 80 00 00 00 00"
                 "00 00 00 00 94 9b",
                 "ff fd 2b 00 00 00 82 66 10 20 00 00 00 00 00 00 00 04 00 00 00 02 00 00 00 00 00 00 00"
                 "03 00 00 00 09 00 00 00 00 00 00 00 00 80 00 00 00 00 00 00 20 70");
}

TEST(MaxPacketSizeAndMissingGlobal) {
  packet_t args;
  uint64_t v, f;
  Connect();
  f = GetGlobal("tvm.rpc.server.GetCRTMaxPacketSize");
  EXPECT_TRUE(f != 0);
  args.size = 0;
  PutLe(&args, 0, 4);
  Call(f, &args);
  EXPECT_EQ(kDLInt, CallResult(&v));
  EXPECT_EQ(TVM_CRT_MAX_PACKET_SIZE_BYTES - 11, (int64_t)v);
  EXPECT_EQ(0u, GetGlobal("no.such.function"));
}

/* Tensor returned by get_input/get_output: [kDLInt 13][DLTensor][handle]. */
typedef struct {
  uint64_t data;
  int32_t ndim;
  int64_t shape[4];
  uint64_t handle;
} remote_array_t;

static void ReadArrayReply(remote_array_t* a) {
  size_t off;
  int32_t i;
  EXPECT_EQ(4, ReplyCode());
  EXPECT_EQ(3, (int)Le(&host.reply, 12, 4)); /* three values */
  EXPECT_EQ(kDLInt, (int)Le(&host.reply, 16, 4));
  EXPECT_EQ(kTVMNDArrayHandle, (int64_t)Le(&host.reply, 28, 8));
  EXPECT_EQ(kTVMDLTensorHandle, (int)Le(&host.reply, 20, 4));
  EXPECT_EQ(kTVMOpaqueHandle, (int)Le(&host.reply, 24, 4));
  off = 36; /* after the 8-byte kDLInt value */
  a->data = Le(&host.reply, off, 8);
  EXPECT_EQ(1, (int)Le(&host.reply, off + 8, 4));
  a->ndim = (int32_t)Le(&host.reply, off + 16, 4);
  EXPECT_EQ(kDLFloat | (32 << 8) | (1 << 16), (int64_t)Le(&host.reply, off + 20, 4));
  for (i = 0; i < a->ndim && i < 4; ++i) a->shape[i] = (int64_t)Le(&host.reply, off + 24 + 8 * i, 8);
  off += 24 + 8 * (size_t)a->ndim;
  EXPECT_EQ(0u, Le(&host.reply, off, 8)); /* byte_offset */
  a->handle = Le(&host.reply, off + 8, 8);
  EXPECT_EQ(off + 16, host.reply.size);
}

static uint64_t g_executor, g_mgf;

static uint64_t ExecutorFunction(const char* name) {
  packet_t args;
  uint64_t v;
  args.size = 0;
  PutLe(&args, 3, 4);
  PutLe(&args, kTVMModuleHandle, 4);
  PutLe(&args, kTVMStr, 4);
  PutLe(&args, kDLInt, 4);
  PutLe(&args, g_executor, 8);
  PutStr(&args, name);
  PutLe(&args, 1, 8);
  Call(g_mgf, &args);
  EXPECT_EQ(kTVMPackedFuncHandle, CallResult(&v));
  EXPECT_EQ(kTVMOpaqueHandle, (int)Le(&host.reply, 20, 4));
  return v;
}

static void CallWithInt(uint64_t f, int64_t value) {
  packet_t args;
  args.size = 0;
  PutLe(&args, 1, 4);
  PutLe(&args, kDLInt, 4);
  PutLe(&args, (uint64_t)value, 8);
  Call(f, &args);
}

static void CopyTo(const remote_array_t* a, uint64_t offset, const void* data, size_t n) {
  packet_t p;
  Begin(&p, 7);
  PutTensor(&p, a->data, a->ndim, a->shape, offset);
  PutLe(&p, n, 8);
  memcpy(p.data + p.size, data, n);
  p.size += n;
  EXPECT_TRUE(Send(&p));
}

static void CopyFrom(const remote_array_t* a, uint64_t offset, size_t n) {
  packet_t p;
  Begin(&p, 6);
  PutTensor(&p, a->data, a->ndim, a->shape, offset);
  PutLe(&p, n, 8);
  EXPECT_TRUE(Send(&p));
}

static void FreeHandle(uint64_t handle, int tcode) {
  packet_t p;
  Begin(&p, 10);
  PutLe(&p, 2, 4);
  PutLe(&p, kTVMOpaqueHandle, 4);
  PutLe(&p, kDLInt, 4);
  PutLe(&p, handle, 8);
  PutLe(&p, (uint64_t)tcode, 8);
  EXPECT_TRUE(Send(&p));
  EXPECT_EQ(12u, Le(&host.reply, 0, 8)); /* ReturnVoid */
  EXPECT_EQ(4, ReplyCode());
  EXPECT_EQ(kTVMNullptr, (int)Le(&host.reply, 16, 4));
}

/* runtime.SystemLib(), then tvm.aot_executor.create(syslib, cpu 0, "default"). Returns 1 with
 * the executor module's handle in *executor, or 0 (the test has failed) if either call did not
 * return a module. */
static int CreateAotExecutor(uint64_t* executor) {
  packet_t args;
  uint64_t syslib, create;
  syslib = GetGlobal("runtime.SystemLib");
  args.size = 0;
  PutLe(&args, 0, 4);
  Call(syslib, &args);
  if (CallResult(&syslib) != kTVMModuleHandle) {
    TEST_FAIL_AT("runtime.SystemLib() did not return a module");
    return 0;
  }
  create = GetGlobal("tvm.aot_executor.create");
  if (create == 0) {
    TEST_FAIL_AT("tvm.aot_executor.create is not registered");
    return 0;
  }
  args.size = 0;
  PutLe(&args, 3, 4);
  PutLe(&args, kTVMModuleHandle, 4);
  PutLe(&args, kDLDevice, 4);
  PutLe(&args, kTVMStr, 4);
  PutLe(&args, syslib, 8);
  PutLe(&args, 1, 4);
  PutLe(&args, 0, 4);
  PutStr(&args, "default");
  Call(create, &args);
  if (CallResult(executor) != kTVMModuleHandle) {
    TEST_FAIL_AT("tvm.aot_executor.create did not return a module");
    return 0;
  }
  return 1;
}

TEST(AotInferenceEndToEnd) {
  packet_t args;
  uint64_t v, get_input, get_output, run, num_inputs;
  remote_array_t in0, in1, out;
  const float a[4] = {1.5f, -2.0f, 3.25f, 100.0f};
  const float b[4] = {0.5f, 4.0f, -3.25f, 0.125f};
  float expected[4], got[4];
  int i;
  Connect();
  ASSERT_TRUE(CreateAotExecutor(&g_executor));

  g_mgf = GetGlobal("tvm.rpc.server.ModuleGetFunction");
  get_input = ExecutorFunction("get_input");
  get_output = ExecutorFunction("get_output");
  run = ExecutorFunction("run");
  num_inputs = ExecutorFunction("get_num_inputs");
  /* an unknown name gives a null result, not an error (the host raises AttributeError) */
  args.size = 0;
  PutLe(&args, 3, 4);
  PutLe(&args, kTVMModuleHandle, 4);
  PutLe(&args, kTVMStr, 4);
  PutLe(&args, kDLInt, 4);
  PutLe(&args, g_executor, 8);
  PutStr(&args, "no_such_function");
  PutLe(&args, 1, 8);
  Call(g_mgf, &args);
  EXPECT_EQ(kTVMNullptr, CallResult(&v));

  args.size = 0;
  PutLe(&args, 0, 4);
  Call(num_inputs, &args);
  EXPECT_EQ(kDLInt, CallResult(&v));
  EXPECT_EQ(2u, v);

  CallWithInt(get_input, 0);
  ReadArrayReply(&in0);
  CallWithInt(get_input, 1);
  ReadArrayReply(&in1);
  EXPECT_EQ(2, in0.ndim);
  EXPECT_EQ(4, in0.shape[1]);
  EXPECT_EQ((uint64_t)(uintptr_t)g_a, in0.data);

  /* chunked like the host: two 8-byte blocks for input a, one block for b */
  CopyTo(&in0, 0, a, 8);
  EXPECT_EQ(12u, Le(&host.reply, 0, 8));
  CopyTo(&in0, 8, a + 2, 8);
  CopyTo(&in1, 0, b, sizeof(b));
  EXPECT_EQ(4, ReplyCode());

  args.size = 0;
  PutLe(&args, 0, 4);
  Call(run, &args);
  EXPECT_EQ(kTVMNullptr, CallResult(&v));

  CallWithInt(get_output, 0);
  ReadArrayReply(&out);
  CopyFrom(&out, 0, sizeof(got));
  EXPECT_EQ(8, ReplyCode()); /* CopyAck */
  EXPECT_EQ(4u + sizeof(got), Le(&host.reply, 0, 8));
  memcpy(got, host.reply.data + 12, sizeof(got));
  for (i = 0; i < 4; ++i) {
    expected[i] = a[i] + b[i];
    EXPECT_NEAR(got[i], expected[i], 0.0);
  }
  /* a partial read at an offset */
  CopyFrom(&out, 4, 8);
  EXPECT_EQ(8, ReplyCode());
  EXPECT_EQ_MEM(host.reply.data + 12, &expected[1], 8);

  FreeHandle(in0.handle, kTVMNDArrayHandle);
  FreeHandle(in1.handle, kTVMNDArrayHandle);
  FreeHandle(out.handle, kTVMNDArrayHandle);
  FreeHandle(get_input, kTVMPackedFuncHandle);
  FreeHandle(g_executor, kTVMModuleHandle);
}

/* A host that goes away without freeing its handles (it timed out, or was killed): the next
 * session starts with the memory of the boot, and a stale handle from the wire is refused
 * with an exception instead of being freed twice. */
TEST(NewSessionReleasesAbandonedTensors) {
  uint64_t get_input, stale = 0;
  remote_array_t view;
  int round, baseline = -1;
  packet_t p;
  for (round = 0; round < 3; ++round) {
    Connect();
    if (baseline < 0) baseline = TestPlatform_LiveAllocations();
    EXPECT_EQ_INT(TestPlatform_LiveAllocations(), baseline);
    ASSERT_TRUE(CreateAotExecutor(&g_executor));
    g_mgf = GetGlobal("tvm.rpc.server.ModuleGetFunction");
    get_input = ExecutorFunction("get_input");
    CallWithInt(get_input, 0);
    ReadArrayReply(&view);
    CallWithInt(get_input, 1);
    ReadArrayReply(&view);
    stale = view.handle;
    EXPECT_EQ_INT(TestPlatform_LiveAllocations(), baseline + 2);
    /* the host vanishes here: no FreeHandle, no shutdown */
  }
  Connect();
  EXPECT_EQ_INT(TestPlatform_LiveAllocations(), baseline);
  Begin(&p, 10);
  PutLe(&p, 2, 4);
  PutLe(&p, kTVMOpaqueHandle, 4);
  PutLe(&p, kDLInt, 4);
  PutLe(&p, stale, 8);
  PutLe(&p, kTVMNDArrayHandle, 8);
  EXPECT_TRUE(Send(&p));
  EXPECT_EQ(5, ReplyCode()); /* an exception, and the session goes on */
  EXPECT_TRUE(GetGlobal("tvm.rpc.server.ModuleGetFunction") != 0);
}

/* kTVMBytes return (RPCTimeEvaluator results) and exceptions carrying the last error. */
TEST(BytesReturnAndLastError) {
  packet_t args;
  uint64_t v, executor, evaluator, timer;
  int i, live;
  Connect();
  ASSERT_TRUE(CreateAotExecutor(&executor));

  /* runtime.RPCTimeEvaluator(executor, "run", 1, 0, number 2, repeat 3, 0, 100, 0, 1, 0, "") */
  evaluator = GetGlobal("runtime.RPCTimeEvaluator");
  args.size = 0;
  PutLe(&args, 12, 4);
  PutLe(&args, kTVMModuleHandle, 4);
  PutLe(&args, kTVMStr, 4);
  for (i = 0; i < 9; ++i) PutLe(&args, kDLInt, 4);
  PutLe(&args, kTVMStr, 4);
  PutLe(&args, executor, 8);
  PutStr(&args, "run");
  {
    static const int64_t kInts[9] = {1, 0, 2, 3, 0, 100, 0, 1, 0};
    for (i = 0; i < 9; ++i) PutLe(&args, (uint64_t)kInts[i], 8);
  }
  PutStr(&args, "");
  Call(evaluator, &args);
  ASSERT_EQ_INT(CallResult(&timer), kTVMPackedFuncHandle);

  live = TestPlatform_LiveAllocations();
  args.size = 0;
  PutLe(&args, 0, 4);
  Call(timer, &args);
  /* [kDLInt 12][kTVMBytes u64 24, three doubles] */
  EXPECT_EQ(kTVMBytes, CallResult(&v));
  EXPECT_EQ(kTVMBytes, (int)Le(&host.reply, 20, 4));
  EXPECT_EQ(24u, v);
  EXPECT_EQ(40u + 24u, host.reply.size);
  for (i = 0; i < 3; ++i) {
    double t;
    memcpy(&t, host.reply.data + 40 + 8 * i, sizeof(t));
    EXPECT_TRUE(t >= 0.0 && t < 1.0);
  }
  EXPECT_EQ(live, TestPlatform_LiveAllocations()); /* the byte array was released */

  /* an error inside the call comes back as an exception with TVMGetLastError() */
  args.size = 0;
  PutLe(&args, 1, 4);
  PutLe(&args, kDLInt, 4);
  PutLe(&args, 1, 8);
  Call(evaluator, &args);
  EXPECT_EQ(5, ReplyCode());
  EXPECT_CONTAINS(ExceptionMessage(), "expected 12 arguments, got 1");
  FreeHandle(executor, kTVMModuleHandle);
}

TEST(CopyToRemoteOutOfRangeIsRefused) {
  remote_array_t in0;
  uint8_t junk[32];
  uint64_t before_canary;
  Connect();
  in0.data = (uint64_t)(uintptr_t)g_a;
  in0.ndim = 2;
  in0.shape[0] = 1;
  in0.shape[1] = 4;
  memset(junk, 0x77, sizeof(junk));
  memcpy(&before_canary, &g_b[0], sizeof(before_canary));
  CopyTo(&in0, 8, junk, 16); /* 8 + 16 > 16 bytes */
  EXPECT_EQ(5, ReplyCode());
  EXPECT_CONTAINS(ExceptionMessage(), "outside the tensor");
  CopyTo(&in0, 17, junk, 0);
  EXPECT_EQ(5, ReplyCode());
  CopyFrom(&in0, 0, 17);
  EXPECT_EQ(5, ReplyCode());
  EXPECT_EQ_MEM(&g_b[0], &before_canary, sizeof(before_canary));
  /* still serving */
  EXPECT_TRUE(GetGlobal("runtime.SystemLib") != 0);
}

TEST(SyscallsOnDeviceMemory) {
  packet_t p;
  uint64_t h1, h2;
  remote_array_t a1, a2;
  const float v[4] = {1, 2, 3, 4};
  const int64_t shape[1] = {4};
  int live = TestPlatform_LiveAllocations();
  Connect();
  live = TestPlatform_LiveAllocations();
  /* kDevAllocDataWithScope(DLTensor{data 0, shape [4], float32}, null) */
  Begin(&p, 17);
  PutLe(&p, 2, 4);
  PutLe(&p, kTVMDLTensorHandle, 4);
  PutLe(&p, kTVMNullptr, 4);
  PutTensor(&p, 0, 1, shape, 0);
  EXPECT_TRUE(Send(&p));
  EXPECT_EQ(4, ReplyCode());
  h1 = Le(&host.reply, 20, 8);
  EXPECT_TRUE(h1 != 0);
  EXPECT_EQ(0u, h1 % 4); /* at least element-aligned */
  /* kDevAllocData(device, 16, 8, float32) */
  Begin(&p, 13);
  PutLe(&p, 4, 4);
  PutLe(&p, kDLDevice, 4);
  PutLe(&p, kDLInt, 4);
  PutLe(&p, kDLInt, 4);
  PutLe(&p, kTVMDataType, 4);
  PutLe(&p, 1, 4);
  PutLe(&p, 0, 4);
  PutLe(&p, 16, 8);
  PutLe(&p, 8, 8);
  PutLe(&p, kDLFloat | (32u << 8) | (1u << 16), 8);
  EXPECT_TRUE(Send(&p));
  h2 = Le(&host.reply, 20, 8);
  EXPECT_TRUE(h2 != 0 && h2 != h1);
  EXPECT_EQ(live + 2, TestPlatform_LiveAllocations());

  a1.data = h1;
  a1.ndim = 1;
  a1.shape[0] = 4;
  a2 = a1;
  a2.data = h2;
  CopyTo(&a1, 0, v, sizeof(v));
  /* kCopyAmongRemote(a1, a2, null stream) */
  Begin(&p, 16);
  PutLe(&p, 3, 4);
  PutLe(&p, kTVMDLTensorHandle, 4);
  PutLe(&p, kTVMDLTensorHandle, 4);
  PutLe(&p, kTVMOpaqueHandle, 4);
  PutTensor(&p, h1, 1, shape, 0);
  PutTensor(&p, h2, 1, shape, 0);
  PutLe(&p, 0, 8);
  EXPECT_TRUE(Send(&p));
  EXPECT_EQ(4, ReplyCode());
  CopyFrom(&a2, 0, sizeof(v));
  EXPECT_EQ(8, ReplyCode());
  EXPECT_EQ_MEM(host.reply.data + 12, v, sizeof(v));

  /* kDevStreamSync(device, null) -> void; kDevCreateStream -> handle; kDevSetDevice refused */
  Begin(&p, 15);
  PutLe(&p, 2, 4);
  PutLe(&p, kDLDevice, 4);
  PutLe(&p, kTVMOpaqueHandle, 4);
  PutLe(&p, 1, 4);
  PutLe(&p, 0, 4);
  PutLe(&p, 0, 8);
  EXPECT_TRUE(Send(&p));
  EXPECT_EQ(12u, Le(&host.reply, 0, 8));
  Begin(&p, 18);
  PutLe(&p, 1, 4);
  PutLe(&p, kDLDevice, 4);
  PutLe(&p, 1, 4);
  PutLe(&p, 0, 4);
  EXPECT_TRUE(Send(&p));
  EXPECT_EQ(20u, Le(&host.reply, 0, 8));
  Begin(&p, 11);
  PutLe(&p, 0, 4);
  EXPECT_TRUE(Send(&p));
  EXPECT_EQ_STR(ExceptionMessage(), "SetDevice not supported");
  Begin(&p, 12);
  PutLe(&p, 0, 4);
  EXPECT_TRUE(Send(&p));
  EXPECT_EQ_STR(ExceptionMessage(), "GetAttr not supported");

  /* kDevFreeData for both */
  Begin(&p, 14);
  PutLe(&p, 2, 4);
  PutLe(&p, kDLDevice, 4);
  PutLe(&p, kTVMOpaqueHandle, 4);
  PutLe(&p, 1, 4);
  PutLe(&p, 0, 4);
  PutLe(&p, h1, 8);
  EXPECT_TRUE(Send(&p));
  EXPECT_EQ(4, ReplyCode());
  p.data[p.size - 8] = 0;
  {
    size_t i;
    for (i = 0; i < 8; ++i) p.data[p.size - 8 + i] = (uint8_t)(h2 >> (8 * i));
  }
  EXPECT_TRUE(Send(&p));
  EXPECT_EQ(live, TestPlatform_LiveAllocations());
}

TEST(InitServerAndLogs) {
  packet_t p;
  Connect();
  Begin(&p, 2);
  PutStr(&p, "0.8.0");
  PutLe(&p, 0, 4);
  EXPECT_TRUE(Send(&p));
  EXPECT_EQ(12u, Le(&host.reply, 0, 8));
  EXPECT_EQ(kTVMNullptr, (int)Le(&host.reply, 16, 4));
  TVMLogf("device says %d", 42);
  DeviceToHost();
  EXPECT_EQ(1, host.num_logs);
  EXPECT_EQ_STR(host.log, "device says 42");
}

/* Each malformed request gets an exception naming the problem; the next request works. */
TEST(MalformedPacketsGetExceptions) {
  static const struct {
    const char* hex; /* packet after the u64 length */
    const char* message_part;
  } kCases[] = {
      {"04 00 00 00", "unknown RPC code"},                                   /* kReturn */
      {"fb ff ff ff", "unknown RPC code"},                                   /* negative */
      {"63 00 00 00 00 00 00 00", "Syscall not recognized"},                 /* code 99 */
      {"09 00 00 00 01 00 00 00 0b 00 00 00 ff 00 00 00 00 00 00 00 41", "truncated"},
      {"09 00 00 00 02 00 00 00", "argument count"},                         /* 2 args, no codes */
      {"09 00 00 00 01 00 00 00 00 00 00 00 05 00 00 00 00 00 00 00", "argument count or types"},
      {"09 00 00 00 01 00 00 00 08 00 00 00 00 00 00 00 00 00 00 00", "type code"},
      {"09 00 00 00 00 00 00 00 ff", "trailing"},
      {"06 00 00 00 00 10 00 00 00 00 00 00 01 00 00 00 00 00 00 00 63 00 00 00 02 20 01 00",
       "ndim"},
      {"03 00 00 00", "truncated"},
      {"02 00 00 00 05 00 00 00 00 00 00 00 30 2e 38 2e 30 01 00 00 00 00 00 00 00 01 00 00 00"
       "00 00 00 00 00 00 00 00",
       "InitServer"},
      {"0a 00 00 00 01 00 00 00 03 00 00 00 00 00 00 00 00 00 00 00", "argument count or types"},
  };
  size_t i;
  packet_t p;
  Connect();
  for (i = 0; i < sizeof(kCases) / sizeof(kCases[0]); ++i) {
    rpc_test_bytes_t body;
    RpcTestHex(&body, kCases[i].hex);
    p.size = 0;
    PutLe(&p, 0, 8);
    memcpy(p.data + p.size, body.data, body.size);
    p.size += body.size;
    EXPECT_TRUE(Send(&p));
    ExpectWellFormedLength();
    EXPECT_EQ(5, ReplyCode());
    EXPECT_CONTAINS(ExceptionMessage(), kCases[i].message_part);
    EXPECT_TRUE(GetGlobal("runtime.SystemLib") != 0);
  }
  /* a length prefix that disagrees with the message */
  p.size = 0;
  PutLe(&p, 100, 8);
  PutLe(&p, 9, 4);
  EXPECT_EQ(kTvmErrorNoError,
            TVMCrtSession_SendMessage(&host.session, kTvmSessionNormal, p.data, p.size));
  HostToDevice();
  DeviceToHost();
  EXPECT_CONTAINS(ExceptionMessage(), "length");
  /* a message too short for the length prefix */
  EXPECT_EQ(kTvmErrorNoError,
            TVMCrtSession_SendMessage(&host.session, kTvmSessionNormal, (const uint8_t*)"\x01", 1));
  HostToDevice();
  DeviceToHost();
  EXPECT_CONTAINS(ExceptionMessage(), "truncated");
  /* calling a bogus function handle */
  {
    packet_t args;
    args.size = 0;
    PutLe(&args, 0, 4);
    Call(0x12345678u, &args);
    EXPECT_EQ(5, ReplyCode());
  }
  EXPECT_TRUE(GetGlobal("runtime.SystemLib") != 0);
}

TEST(OversizedPacketIsAnswered) {
  static packet_t p;
  remote_array_t in0;
  static uint8_t junk[TVM_CRT_MAX_PACKET_SIZE_BYTES];
  Connect();
  in0.data = (uint64_t)(uintptr_t)g_a;
  in0.ndim = 2;
  in0.shape[0] = 1;
  in0.shape[1] = 4;
  memset(junk, 0x11, sizeof(junk));
  Begin(&p, 7);
  PutTensor(&p, in0.data, in0.ndim, in0.shape, 0);
  PutLe(&p, sizeof(junk), 8);
  memcpy(p.data + p.size, junk, sizeof(junk));
  p.size += sizeof(junk);
  EXPECT_TRUE(Send(&p));
  EXPECT_EQ(kTvmErrorSessionReceiveBufferShortWrite, g_last_loop_error);
  EXPECT_CONTAINS(ExceptionMessage(), "larger than the device receive buffer");
  EXPECT_TRUE(memcmp(g_a, junk, 4) != 0); /* nothing was written */
  EXPECT_TRUE(GetGlobal("runtime.SystemLib") != 0);
}

TEST(ShutdownStopsTheLoop) {
  packet_t p;
  Connect();
  Begin(&p, 1);
  EXPECT_TRUE(!Send(&p)); /* no reply */
  EXPECT_EQ(kTvmErrorPlatformShutdown, g_last_loop_error);
  {
    uint8_t byte = 0;
    uint8_t* ptr = &byte;
    size_t n = 1;
    EXPECT_EQ(kTvmErrorPlatformShutdown, MicroTVMRpcServerLoop(server, &ptr, &n));
  }
}

/* ---- TVMCrtRpcServer_Feed ---------------------------------------------------------------- */

/* Frame a request on the host side and append its wire bytes to *wire (the device sees nothing
 * yet). */
static void AppendFramedRequest(rpc_test_bytes_t* wire, packet_t* p) {
  SetLength(p);
  EXPECT_EQ(kTvmErrorNoError,
            TVMCrtSession_SendMessage(&host.session, kTvmSessionNormal, p->data, p->size));
  RpcTestAppend(wire, host.out.wire.data, host.out.wire.size);
  host.out.wire.size = 0;
}

static void AppendHex(rpc_test_bytes_t* wire, const char* hex) {
  rpc_test_bytes_t bytes;
  RpcTestHex(&bytes, hex);
  RpcTestAppend(wire, bytes.data, bytes.size);
}

/* The handle of the last reply, which must be a ReturnHandle. */
static uint64_t ReplyHandle(void) {
  EXPECT_EQ(4, ReplyCode());
  return Le(&host.reply, 20, 8);
}

TEST(FeedAnswersTheWorkedExample) {
  static rpc_test_bytes_t wire, expected;
  TVMCrtRpcServerStats stats = {0, 0, 0, kTvmErrorNoError};
  Connect();
  RpcTestHex(&wire, kWorkedRequestHex);
  EXPECT_EQ(kTvmErrorNoError, TVMCrtRpcServer_Feed(server, wire.data, wire.size, &stats));
  RpcTestHex(&expected, kWorkedReplyHex);
  EXPECT_BYTES_EQ(expected.data, expected.size, g_device_out.data, g_device_out.size);
  EXPECT_EQ(wire.size, stats.bytes_consumed);
  EXPECT_EQ(0u, stats.bytes_dropped);
  EXPECT_EQ(0u, stats.errors_recovered);
  EXPECT_EQ(kTvmErrorNoError, stats.last_error);
  DeviceToHost();
  EXPECT_EQ(1, host.num_normal);
}

TEST(FeedByteByByte) {
  static rpc_test_bytes_t wire, expected;
  TVMCrtRpcServerStats stats = {0, 0, 0, kTvmErrorNoError};
  size_t i;
  Connect();
  RpcTestHex(&wire, kWorkedRequestHex);
  for (i = 0; i < wire.size; ++i) {
    EXPECT_EQ(kTvmErrorNoError, TVMCrtRpcServer_Feed(server, &wire.data[i], 1, &stats));
  }
  EXPECT_EQ(kTvmErrorNoError, TVMCrtRpcServer_Feed(server, wire.data, 0, &stats));
  RpcTestHex(&expected, kWorkedReplyHex);
  EXPECT_BYTES_EQ(expected.data, expected.size, g_device_out.data, g_device_out.size);
  EXPECT_EQ(wire.size, stats.bytes_consumed);
}

/* Line noise around and between two requests in one buffer: both are answered. */
TEST(FeedSkipsNoiseBetweenFrames) {
  static rpc_test_bytes_t wire;
  TVMCrtRpcServerStats stats = {0, 0, 0, kTvmErrorNoError};
  packet_t p;
  uint32_t x = 12345;
  int i;
  Connect();
  wire.size = 0;
  for (i = 0; i < 300; ++i) { /* pseudo-random bytes without 0xFF: skipped by the scan */
    uint8_t b;
    x = x * 1103515245u + 12345u;
    b = (uint8_t)((x >> 16) % 0xffu);
    RpcTestAppend(&wire, &b, 1);
  }
  AppendHex(&wire, "ff 00 ff fe ff");                      /* broken escapes outside a packet */
  GetGlobalRequest(&p, "runtime.SystemLib");
  AppendFramedRequest(&wire, &p);
  AppendHex(&wire, "ff fd 05 00 00 00 68 65 6c 6c 6f 00 00"); /* a whole frame, bad CRC */
  AppendHex(&wire, "ff fd 02 00 00 00 ff 01");               /* an invalid escape in a frame */
  AppendHex(&wire, "ff fd 00 00 00 7f");                     /* an absurd length, cut short */
  GetGlobalRequest(&p, "tvm.rpc.server.GetCRTMaxPacketSize");
  AppendFramedRequest(&wire, &p);
  AppendHex(&wire, "00 01 02 fe");
  EXPECT_EQ(kTvmErrorNoError, TVMCrtRpcServer_Feed(server, wire.data, wire.size, &stats));
  DeviceToHost();
  EXPECT_EQ(2, host.num_normal);
  EXPECT_TRUE(ReplyHandle() != 0);
  EXPECT_EQ(wire.size, stats.bytes_consumed);
  EXPECT_EQ(0u, stats.bytes_dropped);
  EXPECT_EQ(2u, stats.errors_recovered); /* the invalid escape and the cut-short frame */
  EXPECT_EQ(kTvmErrorFramingShortPacket, stats.last_error);
  EXPECT_TRUE(TVMCrtSession_IsEstablished(&host.session));
}

/* A corrupt request (bad CRC) and a cut-short one are dropped; the good one after them is
 * answered. */
TEST(FeedRecoversFromCorruptFrame) {
  static rpc_test_bytes_t wire, good;
  TVMCrtRpcServerStats stats = {0, 0, 0, kTvmErrorNoError};
  packet_t p;
  Connect();
  wire.size = 0;
  GetGlobalRequest(&p, "runtime.SystemLib");
  AppendFramedRequest(&wire, &p);
  wire.data[20] ^= 0x01; /* a payload byte: the CRC no longer matches */
  GetGlobalRequest(&p, "runtime.SystemLib");
  AppendFramedRequest(&wire, &p);
  wire.size -= 10; /* the second copy is cut short by the next frame */
  good.size = 0;
  GetGlobalRequest(&p, "tvm.rpc.server.GetCRTMaxPacketSize");
  AppendFramedRequest(&good, &p);
  RpcTestAppend(&wire, good.data, good.size);
  EXPECT_EQ(kTvmErrorNoError, TVMCrtRpcServer_Feed(server, wire.data, wire.size, &stats));
  DeviceToHost();
  EXPECT_EQ(1, host.num_normal);
  EXPECT_TRUE(ReplyHandle() != 0);
  EXPECT_EQ(1u, stats.errors_recovered);
  EXPECT_EQ(kTvmErrorFramingShortPacket, stats.last_error);
  EXPECT_EQ(wire.size, stats.bytes_consumed);
  EXPECT_TRUE(GetGlobal("runtime.SystemLib") != 0); /* and the session goes on */
}

/* Each way the line damages a request (bad CRC, bad escape, cut short by the next frame, a byte
 * lost and the frame ended by the trailing FE a host sends) is told to the host in one log line
 * before the reply to the good request that follows it. */
TEST(DroppedFrameIsNoticedBeforeTheNextReply) {
  static const char* const kWhy[] = {"bad CRC", "bad escape", "cut short", "bad CRC"};
  size_t k;
  for (k = 0; k < sizeof(kWhy) / sizeof(kWhy[0]); ++k) {
    static rpc_test_bytes_t wire, good;
    TVMCrtRpcServerStats stats = {0, 0, 0, kTvmErrorNoError};
    packet_t p;
    size_t first;
    Connect();
    wire.size = 0;
    GetGlobalRequest(&p, "runtime.SystemLib");
    AppendFramedRequest(&wire, &p);
    first = wire.size;
    if (k == 0) {
      wire.data[20] ^= 0x01;
    } else if (k == 1) {
      wire.data[20] = 0xff; /* FF followed by a payload byte that is no escape */
    } else if (k == 2) {
      wire.size -= 5; /* the next frame's FF FD arrives mid-payload */
    } else {
      memmove(&wire.data[20], &wire.data[21], first - 21); /* one byte lost ... */
      wire.size -= 1;
      AppendHex(&wire, "fe"); /* ... and the host's trailing nop ends the frame */
    }
    good.size = 0;
    GetGlobalRequest(&p, "tvm.rpc.server.GetCRTMaxPacketSize");
    AppendFramedRequest(&good, &p);
    RpcTestAppend(&wire, good.data, good.size);
    EXPECT_EQ(kTvmErrorNoError, TVMCrtRpcServer_Feed(server, wire.data, wire.size, &stats));
    DeviceToHost();
    EXPECT_EQ_STR("LN", host.order);
    EXPECT_TRUE(strncmp(host.log, TVM_CRT_DROPPED_FRAME_NOTICE,
                        strlen(TVM_CRT_DROPPED_FRAME_NOTICE)) == 0);
    EXPECT_CONTAINS(host.log, kWhy[k]);
    EXPECT_TRUE(ReplyHandle() != 0);
  }
}

/* A lone FE between frames (the nop a host may send after each frame) is no damage; a damaged
 * frame before any session is dropped without a word (no session to tell). */
TEST(NopBetweenFramesAndDamageBeforeASessionAreQuiet) {
  static rpc_test_bytes_t wire;
  TVMCrtRpcServerStats stats = {0, 0, 0, kTvmErrorNoError};
  packet_t p;
  uint8_t nonce = 0x21;
  Connect();
  wire.size = 0;
  AppendHex(&wire, "fe");
  GetGlobalRequest(&p, "runtime.SystemLib");
  AppendFramedRequest(&wire, &p);
  AppendHex(&wire, "fe");
  EXPECT_EQ(kTvmErrorNoError, TVMCrtRpcServer_Feed(server, wire.data, wire.size, &stats));
  DeviceToHost();
  EXPECT_EQ_STR("N", host.order);
  EXPECT_EQ(0u, stats.errors_recovered);
  EXPECT_EQ(0u, stats.bytes_dropped);
  g_device_out.size = 0;
  TestPlatform_ScriptRandom(&nonce, 1);
  server = MicroTVMRpcServerInit(DeviceWrite, NULL); /* a fresh boot: no session */
  g_device_out.size = 0;
  RpcTestHex(&wire, "ff fd 05 00 00 00 68 65 6c 6c 6f 00 00");
  EXPECT_EQ(kTvmErrorNoError, TVMCrtRpcServer_Feed(server, wire.data, wire.size, &stats));
  EXPECT_EQ(0u, g_device_out.size);
}

/* project_api.boot_mark stores the host's mark and answers the one before: 0 after a boot. */
TEST(BootMarkAnswersThePreviousMarkAndForgetsItOnRestart) {
  packet_t args;
  uint64_t f, v;
  int k;
  for (k = 0; k < 2; ++k) {
    Connect(); /* boots the server again */
    f = GetGlobal("project_api.boot_mark");
    EXPECT_TRUE(f != 0);
    args.size = 0;
    PutLe(&args, 1, 4);
    PutLe(&args, kDLInt, 4);
    PutLe(&args, 0x1122334455667788ull, 8);
    Call(f, &args);
    EXPECT_EQ(kDLInt, CallResult(&v));
    EXPECT_EQ(0u, v);
    args.size = 0;
    PutLe(&args, 1, 4);
    PutLe(&args, kDLInt, 4);
    PutLe(&args, 7, 8);
    Call(f, &args);
    CallResult(&v);
    EXPECT_EQ(0x1122334455667788ull, v);
  }
  args.size = 0;
  PutLe(&args, 0, 4);
  Call(f, &args);
  EXPECT_CONTAINS(ExceptionMessage(), "boot_mark");
}

/* A packet restarted right at the start of a buffer (its FF ended the previous buffer): the
 * step that reports the cut-short packet consumes nothing; Feed must not drop the FD. */
TEST(FeedKeepsRestartAtBufferBoundary) {
  static rpc_test_bytes_t first, frame;
  TVMCrtRpcServerStats stats = {0, 0, 0, kTvmErrorNoError};
  packet_t p;
  Connect();
  GetGlobalRequest(&p, "runtime.SystemLib");
  frame.size = 0;
  AppendFramedRequest(&frame, &p);
  first.size = 0;
  RpcTestAppend(&first, frame.data, 12); /* a frame started ... */
  RpcTestAppend(&first, frame.data, 1);  /* ... and cut short by the FF of the next one */
  EXPECT_EQ(kTvmErrorNoError, TVMCrtRpcServer_Feed(server, first.data, first.size, &stats));
  EXPECT_EQ(kTvmErrorNoError, TVMCrtRpcServer_Feed(server, frame.data + 1, frame.size - 1, &stats));
  DeviceToHost();
  EXPECT_EQ(1, host.num_normal);
  EXPECT_TRUE(ReplyHandle() != 0);
  EXPECT_EQ(1u, stats.errors_recovered);
  EXPECT_EQ(kTvmErrorFramingShortPacket, stats.last_error);
  EXPECT_EQ(0u, stats.bytes_dropped);
  EXPECT_EQ(first.size + frame.size - 1, stats.bytes_consumed);
}

/* kShutdown ends the server: nothing after it runs, in this buffer or a later one. */
TEST(FeedStopsAtShutdown) {
  static rpc_test_bytes_t wire;
  TVMCrtRpcServerStats stats = {0, 0, 0, kTvmErrorNoError};
  packet_t p;
  Connect();
  wire.size = 0;
  Begin(&p, 1);
  AppendFramedRequest(&wire, &p);
  GetGlobalRequest(&p, "runtime.SystemLib");
  AppendFramedRequest(&wire, &p);
  EXPECT_EQ(kTvmErrorPlatformShutdown, TVMCrtRpcServer_Feed(server, wire.data, wire.size, &stats));
  DeviceToHost();
  EXPECT_EQ(0, host.num_normal);
  EXPECT_EQ(0u, stats.errors_recovered);
  EXPECT_EQ(kTvmErrorPlatformShutdown, TVMCrtRpcServer_Feed(server, wire.data, wire.size, NULL));
  DeviceToHost();
  EXPECT_EQ(0, host.num_normal);
}

int main(void) {
  RUN_TEST(BootSendsTerminate);
  RUN_TEST(WorkedExampleBytes);
  RUN_TEST(MaxPacketSizeAndMissingGlobal);
  RUN_TEST(AotInferenceEndToEnd);
  RUN_TEST(NewSessionReleasesAbandonedTensors);
  RUN_TEST(BytesReturnAndLastError);
  RUN_TEST(CopyToRemoteOutOfRangeIsRefused);
  RUN_TEST(SyscallsOnDeviceMemory);
  RUN_TEST(InitServerAndLogs);
  RUN_TEST(MalformedPacketsGetExceptions);
  RUN_TEST(OversizedPacketIsAnswered);
  RUN_TEST(ShutdownStopsTheLoop);
  RUN_TEST(FeedAnswersTheWorkedExample);
  RUN_TEST(FeedByteByByte);
  RUN_TEST(FeedSkipsNoiseBetweenFrames);
  RUN_TEST(FeedRecoversFromCorruptFrame);
  RUN_TEST(FeedKeepsRestartAtBufferBoundary);
  RUN_TEST(DroppedFrameIsNoticedBeforeTheNextReply);
  RUN_TEST(NopBetweenFramesAndDamageBeforeASessionAreQuiet);
  RUN_TEST(BootMarkAnswersThePreviousMarkAndForgetsItOnRestart);
  RUN_TEST(FeedStopsAtShutdown);
  return TEST_REPORT();
}

/*
 * test_port_template.c: the port template (crt/port/platform_template.c) with the whole
 * platform library and no test platform, linked as a new port would link it: its defaults
 * work (pool, formatting, the timer over its cycle counter, random, hooks), an RPC server over
 * it answers the §4.8 request fed with TVMCrtRpcServer_Feed, with a TVMLogf line reaching the
 * host, and the MLPerf Tiny protocol answers a command through its two MLPerf Tiny port
 * functions (stdout, captured here through a pipe).
 */
#define _POSIX_C_SOURCE 200809L

#include <unistd.h>

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/aot_model.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/microtvm_rpc_server.h>
#include <tvm/runtime/crt/mlperftiny.h>
#include <tvm/runtime/crt/platform.h>
#include <tvm/runtime/crt/rpc_common/session.h>

#include "test_rpc_util.h"

/* A port's generated model glue provides this; the template test has no model. */
const TVMCrtAotModel* TVMCrtAotModel_Lookup(const char* module_name) {
  (void)module_name;
  return NULL;
}

static uint8_t g_model_workspace[TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES];

TEST(PoolAllocatesFromTheStaticBuffer) {
  DLDevice cpu = {kDLCPU, 0};
  void* a = NULL;
  void* b = NULL;
  void* huge = NULL;
  ASSERT_TRUE(TVMPlatformMemoryAllocate(1000, cpu, &a) == kTvmErrorNoError);
  ASSERT_TRUE(TVMPlatformMemoryAllocate(10, cpu, &b) == kTvmErrorNoError);
  EXPECT_TRUE(a != NULL && b != NULL && a != b);
  EXPECT_TRUE(((uintptr_t)a & 7u) == 0);
  memset(a, 0x5a, 1000);
  EXPECT_EQ(kTvmErrorPlatformNoMemory,
            TVMPlatformMemoryAllocate(TVM_WORKSPACE_SIZE_BYTES, cpu, &huge));
  EXPECT_TRUE(huge == NULL);
  EXPECT_EQ(kTvmErrorNoError, TVMPlatformMemoryFree(a, cpu));
  EXPECT_EQ(kTvmErrorPlatformMemoryBadFree, TVMPlatformMemoryFree(a, cpu));
  EXPECT_EQ(kTvmErrorNoError, TVMPlatformMemoryFree(b, cpu));
}

static size_t Format(char* out, size_t size, const char* fmt, ...) {
  va_list args;
  size_t n;
  va_start(args, fmt);
  n = TVMPlatformFormatMessage(out, size, fmt, args);
  va_end(args);
  return n;
}

TEST(FormatMessageCutsAtTheBuffer) {
  char out[8];
  EXPECT_EQ(5u, Format(out, sizeof(out), "%d-%s", 42, "ab"));
  EXPECT_EQ_STR(out, "42-ab");
  EXPECT_EQ(7u, Format(out, sizeof(out), "%s", "0123456789"));
  EXPECT_EQ_STR(out, "0123456");
  EXPECT_EQ(0u, Format(out, 0, "%s", "x"));
}

TEST(TimerAndRandomDefaults) {
  double seconds = -1.0;
  uint64_t before = 0, after = 0;
  uint8_t first[16], second[16];
  ASSERT_TRUE(TVMCrtPlatform_CycleCount(&before) == kTvmErrorNoError);
  ASSERT_TRUE(TVMCrtPlatform_CycleFrequencyHz() > 0);
  EXPECT_EQ(kTvmErrorPlatformTimerBadState, TVMPlatformTimerStop(&seconds));
  ASSERT_TRUE(TVMPlatformTimerStart() == kTvmErrorNoError);
  EXPECT_EQ(kTvmErrorPlatformTimerBadState, TVMPlatformTimerStart());
  EXPECT_EQ(kTvmErrorNoError, TVMPlatformTimerStop(&seconds));
  EXPECT_TRUE(seconds >= 0.0 && seconds < 60.0);
  ASSERT_TRUE(TVMCrtPlatform_CycleCount(&after) == kTvmErrorNoError);
  EXPECT_TRUE(after >= before);
  EXPECT_EQ(kTvmErrorNoError, TVMPlatformGenerateRandom(first, sizeof(first)));
  EXPECT_EQ(kTvmErrorNoError, TVMPlatformGenerateRandom(second, sizeof(second)));
  EXPECT_TRUE(memcmp(first, second, sizeof(first)) != 0);
}

TEST(HooksAcceptEveryStep) {
  DLDevice cpu = {kDLCPU, 0};
  EXPECT_EQ(kTvmErrorNoError, TVMCrtDevice_Open(cpu));
  EXPECT_EQ(kTvmErrorNoError, TVMCrtDevice_Activate(cpu));
  EXPECT_EQ(kTvmErrorNoError, TVMPlatformBeforeMeasurement());
  EXPECT_EQ(kTvmErrorNoError, TVMPlatformAfterMeasurement());
  EXPECT_EQ(kTvmErrorNoError, TVMCrtDevice_Deactivate(cpu));
  EXPECT_EQ(kTvmErrorNoError, TVMCrtDevice_Close(cpu));
}

/* ---- One RPC exchange ---------------------------------------------------------------------- */

static rpc_test_bytes_t g_to_host;
static rpc_test_sink_t g_to_device;
static TVMCrtSession g_host;
static int g_host_replies;
static int g_host_logs;
static rpc_test_bytes_t g_host_reply;

static ptrdiff_t PortUartWrite(void* context, const uint8_t* data, size_t num_bytes) {
  (void)context;
  if (g_to_host.size + num_bytes > sizeof(g_to_host.data)) return -1;
  RpcTestAppend(&g_to_host, data, num_bytes);
  return (ptrdiff_t)num_bytes;
}

static void HostReceived(void* context, TVMCrtSessionMessageType type, TVMCrtFrameBuffer* buffer) {
  (void)context;
  if (buffer == NULL) return;
  if (type == kTvmSessionNormal) {
    g_host_replies++;
    g_host_reply.size =
        TVMCrtFrameBuffer_Read(buffer, g_host_reply.data, sizeof(g_host_reply.data));
  } else if (type == kTvmSessionLog) {
    g_host_logs++;
  }
  TVMCrtSession_ClearReceiveBuffer(&g_host);
}

TEST(RpcExchangeOverTheTemplate) {
  static uint8_t host_rx_storage[4096];
  static TVMCrtFrameBuffer host_rx;
  static TVMCrtFramer host_framer;
  static TVMCrtUnframer host_unframer;
  static const uint8_t kRequest[] = {
      0x25, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0x0b, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0, 0,
      'r', 'u', 'n', 't', 'i', 'm', 'e', '.', 'S', 'y', 's', 't', 'e', 'm', 'L', 'i', 'b'};
  TVMCrtRpcServerStats stats = {0, 0, 0, kTvmErrorNoError};
  microtvm_rpc_server_t server;
  size_t consumed;

  ASSERT_TRUE(TVMCrtWorkspace_Init(g_model_workspace, sizeof(g_model_workspace)) == 0);
  server = MicroTVMRpcServerInit(PortUartWrite, NULL);
  ASSERT_TRUE(server != NULL);

  RpcTestSinkInit(&g_to_device, RPC_TEST_MAX_WIRE);
  g_to_device.stream.packet_start = NULL;
  g_to_device.stream.packet_done = NULL;
  TVMCrtFrameBuffer_Init(&host_rx, host_rx_storage, sizeof(host_rx_storage));
  TVMCrtFramer_Init(&host_framer, &g_to_device.stream);
  TVMCrtSession_Init(&g_host, &host_framer, &host_rx, HostReceived, NULL);
  TVMCrtUnframer_Init(&host_unframer, TVMCrtSession_Receiver(&g_host));
  TVMCrtSession_Reset(&g_host, 0x3c);
  TVMCrtSession_Start(&g_host);
  /* The device's boot Terminate, the handshake, then the request, all through Feed. */
  EXPECT_EQ(kTvmErrorNoError,
            TVMCrtRpcServer_Feed(server, g_to_device.wire.data, g_to_device.wire.size, &stats));
  g_to_device.wire.size = 0;
  TVMCrtUnframer_Write(&host_unframer, g_to_host.data, g_to_host.size, &consumed);
  g_to_host.size = 0;
  ASSERT_TRUE(TVMCrtSession_IsEstablished(&g_host));

  EXPECT_EQ(kTvmErrorNoError,
            TVMCrtSession_SendMessage(&g_host, kTvmSessionNormal, kRequest, sizeof(kRequest)));
  EXPECT_EQ(kTvmErrorNoError,
            TVMCrtRpcServer_Feed(server, g_to_device.wire.data, g_to_device.wire.size, &stats));
  TVMLogf("port template says %d", 7);
  TVMCrtUnframer_Write(&host_unframer, g_to_host.data, g_to_host.size, &consumed);
  EXPECT_EQ(1, g_host_replies);
  EXPECT_EQ(1, g_host_logs);
  /* ReturnHandle (code 4) of the system library module */
  EXPECT_EQ(28u, g_host_reply.size);
  EXPECT_EQ(4, g_host_reply.data[8]);
  EXPECT_EQ(0u, stats.errors_recovered);
  EXPECT_EQ(0u, stats.bytes_dropped);
}

/* ---- The MLPerf Tiny port functions ------------------------------------------------------- */

static int StandInInfer(void* ctx) {
  (void)ctx;
  return 0;
}

static const char* StandInLoad(void* ctx, const uint8_t* data, size_t size) {
  (void)ctx;
  (void)data;
  (void)size;
  return NULL;
}

static size_t StandInResults(void* ctx, float* out, size_t max) {
  (void)ctx;
  if (max > 0) out[0] = 0.5f;
  return max > 0 ? 1u : 0u;
}

/* stdout, where the template's TVMCrtMlperfTinyPort_Write goes, into a pipe and back. */
static int g_capture_pipe[2];
static int g_saved_stdout = -1;

static void CaptureStdout(void) {
  fflush(stdout);
  if (pipe(g_capture_pipe) == 0) {
    g_saved_stdout = dup(STDOUT_FILENO);
    dup2(g_capture_pipe[1], STDOUT_FILENO);
  }
}

static const char* CapturedStdout(void) {
  static char captured[1024];
  ssize_t n = -1;
  fflush(stdout);
  if (g_saved_stdout >= 0) {
    dup2(g_saved_stdout, STDOUT_FILENO);
    close(g_saved_stdout);
    close(g_capture_pipe[1]);
    n = read(g_capture_pipe[0], captured, sizeof(captured) - 1);
    close(g_capture_pipe[0]);
    g_saved_stdout = -1;
  }
  captured[n > 0 ? n : 0] = '\0';
  return n >= 0 ? captured : "(stdout not captured)";
}

static void Send(TVMCrtMlperfTiny* bench, const char* command) {
  TVMCrtMlperfTiny_Receive(bench, (const uint8_t*)command, strlen(command));
}

TEST(MlperfTinyPortDefaults) {
  static TVMCrtMlperfTiny bench;
  static uint8_t db[16];
  static const TVMCrtMlperfTinyModel model = {"kws01", NULL, StandInLoad, StandInInfer,
                                              StandInResults, NULL};
  uint64_t first = TVMCrtMlperfTinyPort_Micros();
  uint64_t cycles = 0;
  ASSERT_TRUE(TVMCrtPlatform_CycleCount(&cycles) == kTvmErrorNoError);
  uint64_t second = TVMCrtMlperfTinyPort_Micros();
  uint64_t hz = TVMCrtPlatform_CycleFrequencyHz();
  /* The cycle counter in microseconds, computed here in floating point. */
  double expected_us = (double)cycles * 1e6 / (double)hz;
  EXPECT_TRUE(second >= first);
  EXPECT_TRUE((double)first <= expected_us + 1.0 && expected_us < (double)second + 1.0);

  CaptureStdout();
  TVMCrtMlperfTiny_Start(&bench, &model, db, sizeof(db));
  EXPECT_TRUE(strstr(CapturedStdout(), "m-init-done\r\nm-ready\r\n") != NULL);
  CaptureStdout();
  Send(&bench, "name%");
  Send(&bench, "results%");
  EXPECT_EQ_STR(CapturedStdout(),
                "m-name-dut-[project-api]\r\nm-ready\r\nm-results-[0.500]\r\nm-ready\r\n");
}

int main(void) {
  RUN_TEST(PoolAllocatesFromTheStaticBuffer);
  RUN_TEST(FormatMessageCutsAtTheBuffer);
  RUN_TEST(TimerAndRandomDefaults);
  RUN_TEST(HooksAcceptEveryStep);
  RUN_TEST(RpcExchangeOverTheTemplate);
  RUN_TEST(MlperfTinyPortDefaults);
  return TEST_REPORT();
}

/*
 * Unit tests of the MLPerf Tiny protocol (crt/src/mlperftiny): command assembly across split
 * reads, the 80-character limit, db loading, project-api's `db crc` (CRC-32 values from zlib and
 * the standard check value), the %0.3f formatter against printf, and the AOT adapter's float32
 * quantization and reconstruction score over a stand-in model.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <tvm/runtime/crt/mlperftiny.h>

#include "test_util.h"

static char g_out[65536];
static size_t g_out_len;
static uint64_t g_micros;

void TVMCrtMlperfTinyPort_Write(const char* data, size_t size) {
  if (g_out_len + size < sizeof(g_out)) {
    memcpy(g_out + g_out_len, data, size);
    g_out_len += size;
    g_out[g_out_len] = '\0';
  }
}

uint64_t TVMCrtMlperfTinyPort_Micros(void) { return g_micros += 250; }

static void Clear(void) {
  g_out_len = 0;
  g_out[0] = '\0';
}

static void Send(TVMCrtMlperfTiny* bench, const char* text) {
  TVMCrtMlperfTiny_Receive(bench, (const uint8_t*)text, strlen(text));
}

/* ---- a fake model: 4 int8 inputs, output = input + 1 ---- */
static int8_t g_in[4];
static int8_t g_outv[4];
static int g_runs;
static const int64_t kShape[2] = {1, 4};
static int32_t FakeRun(void* const* inputs, void* const* outputs) {
  int i;
  for (i = 0; i < 4; i++) ((int8_t*)outputs[0])[i] = (int8_t)(((int8_t*)inputs[0])[i] + 1);
  g_runs++;
  return 0;
}
static const TVMCrtAotTensor kIn = {"x", {kDLInt, 8, 1}, 2, kShape, 4, g_in};
static const TVMCrtAotTensor kOut = {"y", {kDLInt, 8, 1}, 2, kShape, 4, g_outv};
static const TVMCrtAotModel kModel = {"default", 1, &kIn, 1, &kOut, 0, FakeRun};

const TVMCrtAotModel* TVMCrtAotModel_Lookup(const char* name) {
  return strcmp(name, "default") == 0 ? &kModel : NULL;
}

/* the glue's reset of a model that keeps state (TVMCrtAotModel_ResetState, aot_model.h) */
static int g_resets;
static int g_reset_fails;
int32_t TVMCrtAotModel_ResetState(const char* module_name) {
  g_resets++;
  return g_reset_fails || strcmp(module_name, "default") != 0 ? -1 : 0;
}

static uint8_t g_workspace[256];
static uint8_t g_db[16];

static TVMCrtMlperfTinyAotInfo Info(TVMCrtMlperfTinyScore score) {
  TVMCrtMlperfTinyAotInfo info;
  memset(&info, 0, sizeof(info));
  info.module_name = "default";
  info.version = score == kTvmMlperfTinyScoreReconstruction ? "ad01" : "kws01";
  info.score = score;
  info.input_quantized = 1;
  info.input_scale = 0.5f;
  info.input_zero_point = -1;
  info.output_quantized = 1;
  info.output_scale = 0.25f;
  info.output_zero_point = 2;
  info.workspace = g_workspace;
  info.workspace_size = sizeof(g_workspace);
  info.db = g_db;
  info.db_capacity = sizeof(g_db);
  return info;
}

/* the device under test: the AOT adapter over the fake model, started on g_db */
static TVMCrtMlperfTiny g_bench;
static TVMCrtMlperfTinyAot g_aot;
static TVMCrtMlperfTinyModel g_model;

static int Begin(const TVMCrtMlperfTinyAotInfo* info) {
  const char* why = "";
  if (TVMCrtMlperfTinyAot_Init(&g_aot, &g_model, info, &why) != 0) return -1;
  TVMCrtMlperfTiny_Start(&g_bench, &g_model, g_db, sizeof(g_db));
  return 0;
}

TEST(StartPrintsInitThenReady) {
  TVMCrtMlperfTinyAotInfo info = Info(kTvmMlperfTinyScoreVector);
  Clear();
  g_micros = 0;
  ASSERT_EQ_INT(Begin(&info), 0);
  EXPECT_TRUE(strcmp(g_out, "m-timestamp-mode-performance\r\nm-lap-us-250\r\nm-init-done\r\n"
                            "m-ready\r\n") == 0);
}

TEST(CommandsSplitAcrossReadsAndTooLong) {
  TVMCrtMlperfTinyAotInfo info = Info(kTvmMlperfTinyScoreVector);
  char longcmd[100];
  ASSERT_EQ_INT(Begin(&info), 0);
  Clear();
  Send(&g_bench, "na");
  EXPECT_EQ_INT(g_out_len, 0);
  Send(&g_bench, "me%prof");
  EXPECT_TRUE(strcmp(g_out, "m-name-dut-[project-api]\r\nm-ready\r\n") == 0);
  Clear();
  Send(&g_bench, "ile%");
  EXPECT_TRUE(strstr(g_out, "m-model-[kws01]\r\nm-ready\r\n") != NULL);
  /* 80 characters are a command; 81 are too long */
  memset(longcmd, 'x', 80);
  longcmd[80] = '%';
  longcmd[81] = '\0';
  Clear();
  Send(&g_bench, longcmd);
  EXPECT_TRUE(strncmp(g_out, "e-[Unknown command: xxxx", 24) == 0);
  memset(longcmd, 'x', 81);
  longcmd[81] = '%';
  longcmd[82] = '\0';
  Clear();
  Send(&g_bench, longcmd);
  EXPECT_TRUE(strcmp(g_out, "e-[Command too long]\r\nm-ready\r\n") == 0);
  Clear();
  Send(&g_bench, "name%");
  EXPECT_TRUE(strcmp(g_out, "m-name-dut-[project-api]\r\nm-ready\r\n") == 0);
}

TEST(DbLoadInferResults) {
  TVMCrtMlperfTinyAotInfo info = Info(kTvmMlperfTinyScoreVector);
  ASSERT_EQ_INT(Begin(&info), 0);
  Send(&g_bench, "db load 17%");
  EXPECT_TRUE(strstr(g_out, "e-[Supplied buffer size 17 exceeds maximum of 16]") != NULL);
  Clear();
  Send(&g_bench, "db load 4%db 0102%db 03FF%");
  EXPECT_TRUE(strcmp(g_out, "m-[Expecting 4 bytes]\r\nm-ready\r\nm-ready\r\nm-load-done\r\n"
                            "m-ready\r\n") == 0);
  Clear();
  g_runs = 0;
  g_micros = 1000;
  Send(&g_bench, "infer 3 2%");
  /* out = in + 1 = {2,3,4,0}; dequantized 0.25 * (q - 2) */
  EXPECT_TRUE(strcmp(g_out, "m-warmup-start-2\r\nm-warmup-done\r\nm-infer-start-3\r\n"
                            "m-lap-us-1250\r\nm-lap-us-1500\r\nm-infer-done\r\n"
                            "m-results-[0.000,0.250,0.500,-0.500]\r\nm-ready\r\n") == 0);
  EXPECT_EQ_INT(g_runs, 5);
  /* float32 input (16 bytes) is quantized: x / 0.5 - 1, rounded half away from zero */
  Clear();
  Send(&g_bench, "db load 16%db 0000803f0000c03f%db 000080bf00002041%");
  EXPECT_TRUE(strstr(g_out, "m-load-done") != NULL);
  Clear();
  Send(&g_bench, "infer 1 0%");
  /* 1.0 -> 1, 1.5 -> 2, -1.0 -> -3, 10.0 -> 19; +1 -> 2,3,-2,20; (q-2)/4 */
  EXPECT_TRUE(strstr(g_out, "m-results-[0.000,0.250,-1.000,4.500]\r\n") != NULL);
}

TEST(Uint8PixelsLess128) {
  TVMCrtMlperfTinyAotInfo info = Info(kTvmMlperfTinyScoreVector);
  info.version = "ic01";
  info.input_uint8 = 1;
  ASSERT_EQ_INT(Begin(&info), 0);
  Send(&g_bench, "db load 4%db 00807fff%");
  Clear();
  Send(&g_bench, "infer 1 0%");
  EXPECT_EQ_INT(g_in[0], -128);
  EXPECT_EQ_INT(g_in[1], 0);
  EXPECT_EQ_INT(g_in[2], -1);
  EXPECT_EQ_INT(g_in[3], 127);
  /* +1 -> -127, 1, 0, -128 (wraps); (q - 2) / 4 */
  EXPECT_TRUE(strstr(g_out, "m-results-[-32.250,-0.250,-0.500,-32.500]\r\n") != NULL);
}

TEST(ReconstructionScore) {
  TVMCrtMlperfTinyAotInfo info = Info(kTvmMlperfTinyScoreReconstruction);
  ASSERT_EQ_INT(Begin(&info), 0);
  Clear();
  /* inputs 1.0, 1.5, -1.0, 10.0 -> outputs 0.0, 0.25, -1.0, 4.5: MSE = (1+1.5625+0+30.25)/4 */
  Send(&g_bench, "db load 16%db 0000803f0000c03f000080bf00002041%infer 1 0%");
  EXPECT_TRUE(strstr(g_out, "m-results-[8.203]\r\n") != NULL);
}

TEST(AotInitRefusesAMissingModule) {
  TVMCrtMlperfTinyAotInfo info = Info(kTvmMlperfTinyScoreVector);
  const char* why = "";
  info.module_name = "other";
  EXPECT_EQ_INT(TVMCrtMlperfTinyAot_Init(&g_aot, &g_model, &info, &why), -1);
  EXPECT_TRUE(strstr(why, "no model module") != NULL);
  info = Info(kTvmMlperfTinyScoreVector);
  info.db_capacity = 8;
  EXPECT_EQ_INT(TVMCrtMlperfTinyAot_Init(&g_aot, &g_model, &info, &why), -1);
}

TEST(FormatFixed3MatchesPrintf) {
  static const float values[] = {0.0f, -0.0f, 0.0625f, 0.1875f, 0.0005f, -0.0004f, 1.0f / 256,
                                 127.996f, -3.14159f, 2.5e-4f, 123456.789f, 0.9995f, 1e-9f};
  char mine[48];
  char ref[48];
  size_t i;
  uint32_t k;
  for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
    TVMCrtMlperfTiny_FormatFixed3(values[i], mine, sizeof(mine));
    (void)snprintf(ref, sizeof(ref), "%0.3f", (double)values[i]);
    if (strcmp(mine, ref) != 0) TEST_FAIL_AT("%s != printf's %s", mine, ref);
  }
  /* every dequantized int8 of the scales the shared models use */
  for (k = 0; k < 256; k++) {
    float v = 0.00390625f * (float)((int32_t)k - 128);
    float w = 0.584702909f * (float)((int32_t)k - 83);
    TVMCrtMlperfTiny_FormatFixed3(v, mine, sizeof(mine));
    (void)snprintf(ref, sizeof(ref), "%0.3f", (double)v);
    if (strcmp(mine, ref) != 0) TEST_FAIL_AT("%s != printf's %s", mine, ref);
    TVMCrtMlperfTiny_FormatFixed3(w, mine, sizeof(mine));
    (void)snprintf(ref, sizeof(ref), "%0.3f", (double)w);
    if (strcmp(mine, ref) != 0) TEST_FAIL_AT("%s != printf's %s", mine, ref);
  }
  EXPECT_EQ_INT(TVMCrtMlperfTiny_FormatFixed3(NAN, mine, sizeof(mine)), 3);
}

TEST(ResetRestoresTheModelsState) {
  TVMCrtMlperfTinyAotInfo info = Info(kTvmMlperfTinyScoreVector);
  ASSERT_EQ_INT(Begin(&info), 0);
  g_resets = 0;
  Clear();
  Send(&g_bench, "reset%");
  EXPECT_TRUE(strcmp(g_out, "m-reset-done\r\nm-ready\r\n") == 0);
  EXPECT_EQ_INT(g_resets, 1);
  g_reset_fails = 1;
  Clear();
  Send(&g_bench, "reset%");
  g_reset_fails = 0;
  EXPECT_TRUE(strcmp(g_out, "e-[Resetting the model's state failed]\r\nm-ready\r\n") == 0);
  /* a model without a reset function has nothing to reset */
  g_model.reset = NULL;
  Clear();
  Send(&g_bench, "reset%");
  EXPECT_TRUE(strcmp(g_out, "m-reset-done\r\nm-ready\r\n") == 0);
  EXPECT_EQ_INT(g_resets, 2);
}

/* CRC-32 values computed by Python's zlib.crc32 (and the standard check value of "123456789"). */
TEST(DbCrcCoversTheBytesLoadedSoFar) {
  TVMCrtMlperfTinyAotInfo info = Info(kTvmMlperfTinyScoreVector);
  ASSERT_EQ_INT(Begin(&info), 0);
  Clear();
  Send(&g_bench, "db crc%");
  EXPECT_TRUE(strcmp(g_out, "m-db-crc-[0,0,00000000]\r\nm-ready\r\n") == 0);
  Clear();
  Send(&g_bench, "db load 4%db 0102%db  crc%");
  EXPECT_TRUE(strcmp(g_out, "m-[Expecting 4 bytes]\r\nm-ready\r\nm-ready\r\n"
                            "m-db-crc-[2,4,b6cc4292]\r\nm-ready\r\n") == 0);
  Clear();
  Send(&g_bench, "db 03ff%db crc%");
  EXPECT_TRUE(strcmp(g_out, "m-load-done\r\nm-ready\r\nm-db-crc-[4,4,9c53d059]\r\nm-ready\r\n")
              == 0);
  Clear();
  Send(&g_bench, "db load 9%db 313233343536373839%db crc%");
  EXPECT_TRUE(strstr(g_out, "m-db-crc-[9,9,cbf43926]\r\nm-ready\r\n") != NULL);
  /* a new db load starts over: nothing loaded, whatever the buffer still holds */
  Clear();
  Send(&g_bench, "db load 16%db crc%");
  EXPECT_TRUE(strstr(g_out, "m-db-crc-[0,16,00000000]\r\n") != NULL);
  Clear();
  Send(&g_bench, "db 000102030405060708090a0b0c0d0e0f%db crc%");
  EXPECT_TRUE(strstr(g_out, "m-db-crc-[16,16,cecee288]\r\n") != NULL);
  /* no arguments; the buffer is left as it was */
  Clear();
  Send(&g_bench, "db crc 4%");
  EXPECT_TRUE(strcmp(g_out, "e-[Command 'db crc' takes no arguments: '4']\r\nm-ready\r\n") == 0);
  Clear();
  Send(&g_bench, "db crc%");
  EXPECT_TRUE(strstr(g_out, "m-db-crc-[16,16,cecee288]\r\n") != NULL);
  /* help stays the reference's list */
  Clear();
  Send(&g_bench, "help%");
  EXPECT_TRUE(strstr(g_out, "crc") == NULL && strstr(g_out, "reset") == NULL);
  EXPECT_EQ_INT(TVMCrtMlperfTiny_Crc32(TVMCrtMlperfTiny_Crc32(0u, (const uint8_t*)"1234", 4),
                                       (const uint8_t*)"56789", 5),
                0xcbf43926u);
}

int main(void) {
  RUN_TEST(StartPrintsInitThenReady);
  RUN_TEST(ResetRestoresTheModelsState);
  RUN_TEST(CommandsSplitAcrossReadsAndTooLong);
  RUN_TEST(DbLoadInferResults);
  RUN_TEST(DbCrcCoversTheBytesLoadedSoFar);
  RUN_TEST(Uint8PixelsLess128);
  RUN_TEST(ReconstructionScore);
  RUN_TEST(AotInitRefusesAMissingModule);
  RUN_TEST(FormatFixed3MatchesPrintf);
  return TEST_REPORT();
}

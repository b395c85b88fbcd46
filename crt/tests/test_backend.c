/* Backend library: workspace allocation over the stack allocator, last error, parallel launch. */
#include <stdint.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>

#include "test_util.h"

static uint8_t g_buffer[512 + 16];

TEST(AllocBeforeInitFails) {
  EXPECT_TRUE(TVMBackendAllocWorkspace(kDLCPU, 0, 16, kDLFloat, 32) == NULL);
  EXPECT_CONTAINS(TVMGetLastError(), "TVMCrtWorkspace_Init");
  EXPECT_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, g_buffer), kTvmErrorPlatformStackAllocBadFree);
}

TEST(InitRejectsBadBuffers) {
  EXPECT_EQ_INT(TVMCrtWorkspace_Init(NULL, 100), kTvmErrorFunctionCallInvalidArg);
  EXPECT_CONTAINS(TVMGetLastError(), "NULL");
  EXPECT_TRUE(TVMBackendAllocWorkspace(kDLCPU, 0, 16, kDLFloat, 32) == NULL);
}

TEST(AllocFreeNested) {
  ASSERT_EQ_INT(TVMCrtWorkspace_Init(g_buffer, sizeof(g_buffer)), kTvmErrorNoError);
  uint8_t* a = TVMBackendAllocWorkspace(kDLCPU, 0, 100, kDLFloat, 32);
  uint8_t* b = TVMBackendAllocWorkspace(kDLCPU, 0, 50, kDLInt, 8);
  ASSERT_TRUE(a != NULL && b != NULL);
  EXPECT_EQ_INT((uintptr_t)a % 16, 0);
  EXPECT_EQ_INT(b - a, 112 + 4); /* 100 padded to 112, plus the LIFO tag */
  memset(a, 0xaa, 100);
  memset(b, 0xbb, 50);
  size_t in_use = 0;
  size_t peak = 0;
  TVMCrtWorkspace_Usage(&in_use, &peak);
  EXPECT_EQ_INT(in_use, 116 + 68);
  EXPECT_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, b), 0);
  EXPECT_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, a), 0);
  TVMCrtWorkspace_Usage(&in_use, &peak);
  EXPECT_EQ_INT(in_use, 0);
  EXPECT_EQ_INT(peak, 116 + 68);
  /* The same memory is handed out again. */
  EXPECT_EQ_PTR(TVMBackendAllocWorkspace(kDLCPU, 0, 8, kDLFloat, 32), a);
  EXPECT_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, a), 0);
}

TEST(OverflowReturnsNullAndExplains) {
  ASSERT_EQ_INT(TVMCrtWorkspace_Init(g_buffer, sizeof(g_buffer)), kTvmErrorNoError);
  void* a = TVMBackendAllocWorkspace(kDLCPU, 0, 400, kDLFloat, 32);
  ASSERT_TRUE(a != NULL);
  EXPECT_TRUE(TVMBackendAllocWorkspace(kDLCPU, 0, 200, kDLFloat, 32) == NULL);
  EXPECT_CONTAINS(TVMGetLastError(), "200 bytes requested");
  EXPECT_TRUE(TVMBackendAllocWorkspace(kDLCPU, 0, UINT64_MAX, kDLFloat, 32) == NULL);
  /* A failed allocation changes nothing: a fitting one still works and frees in order. */
  void* b = TVMBackendAllocWorkspace(kDLCPU, 0, 64, kDLFloat, 32);
  ASSERT_TRUE(b != NULL);
  EXPECT_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, b), 0);
  EXPECT_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, a), 0);
}

TEST(OutOfOrderFreeIsRejected) {
  ASSERT_EQ_INT(TVMCrtWorkspace_Init(g_buffer, sizeof(g_buffer)), kTvmErrorNoError);
  void* a = TVMBackendAllocWorkspace(kDLCPU, 0, 32, kDLFloat, 32);
  void* b = TVMBackendAllocWorkspace(kDLCPU, 0, 32, kDLFloat, 32);
  ASSERT_TRUE(a != NULL && b != NULL);
  TVMAPISetLastError("");
  EXPECT_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, a), kTvmErrorPlatformStackAllocBadFree);
  EXPECT_CONTAINS(TVMGetLastError(), "newest first");
  EXPECT_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, NULL), kTvmErrorPlatformStackAllocBadFree);
  /* b is still live and intact, and both free in the right order. */
  EXPECT_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, b), 0);
  EXPECT_EQ_INT(TVMBackendFreeWorkspace(kDLCPU, 0, a), 0);
}

TEST(LastErrorTruncatesAndFormats) {
  char big[3000];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  TVMAPISetLastError(big);
  EXPECT_EQ_INT(strlen(TVMGetLastError()), 1023);
  TVMAPIErrorf("code %d name %s", 42, "abc");
  EXPECT_EQ_STR(TVMGetLastError(), "code 42 name abc");
  TVMAPISetLastError(NULL);
  EXPECT_EQ_STR(TVMGetLastError(), "");
}

static int g_calls;
static int count_task(int task_id, TVMParallelGroupEnv* penv, void* cdata) {
  g_calls++;
  *(int*)cdata = task_id * 100 + penv->num_task;
  return 7;
}

TEST(ParallelLaunchRunsOneTaskInline) {
  int seen = -1;
  g_calls = 0;
  EXPECT_EQ_INT(TVMBackendParallelLaunch(count_task, &seen, 4), 7);
  EXPECT_EQ_INT(g_calls, 1);
  EXPECT_EQ_INT(seen, 1);
  EXPECT_EQ_INT(TVMBackendParallelBarrier(0, NULL), 0);
  EXPECT_EQ_INT(TVMBackendParallelLaunch(NULL, &seen, 1), kTvmErrorFunctionCallInvalidArg);
}

int main(void) {
  RUN_TEST(AllocBeforeInitFails);
  RUN_TEST(InitRejectsBadBuffers);
  RUN_TEST(AllocFreeNested);
  RUN_TEST(OverflowReturnsNullAndExplains);
  RUN_TEST(OutOfOrderFreeIsRejected);
  RUN_TEST(LastErrorTruncatesAndFormats);
  RUN_TEST(ParallelLaunchRunsOneTaskInline);
  return TEST_REPORT();
}

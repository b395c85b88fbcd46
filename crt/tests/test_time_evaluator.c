/*
 * runtime.RPCTimeEvaluator on a fake clock: each call of the timed function advances the clock by
 * a known amount, so the seconds-per-call results and the batch growth are exact.
 */
#include <stdint.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/crt/platform.h>
#include <tvm/runtime/crt/time_evaluator.h>

#include "test_platform.h"
#include "test_util.h"

static int g_calls;
static double g_seconds_per_call;
static int64_t g_last_arg;

/* tick(int): advances the fake clock and remembers its argument. */
static int Tick(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_tcode,
                void* resource_handle) {
  (void)ret; (void)ret_tcode; (void)resource_handle;
  if (num_args != 1 || type_codes[0] != kTVMArgInt) {
    TVMAPISetLastError("tick: expected one int");
    return kTvmErrorFunctionCallWrongArgType;
  }
  g_last_arg = args[0].v_int64;
  g_calls++;
  TestPlatform_AdvanceClock(g_seconds_per_call);
  return 0;
}

/* fails_third: succeeds twice, then fails. */
static int FailsThird(TVMValue* args, int* type_codes, int num_args, TVMValue* ret,
                      int* ret_tcode, void* resource_handle) {
  (void)args; (void)type_codes; (void)num_args; (void)ret; (void)ret_tcode; (void)resource_handle;
  if (++g_calls >= 3) {
    TVMAPISetLastError("fails_third: failing as planned");
    return kTvmErrorFunctionCallInvalidArg;
  }
  return 0;
}

/* make_bytes: returns an owned TVMByteArray each call (the evaluator must free them). */
static int MakeBytes(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_tcode,
                     void* resource_handle) {
  (void)args; (void)type_codes; (void)num_args; (void)resource_handle;
  void* mem;
  DLDevice cpu = {kDLCPU, 0};

  if (TVMPlatformMemoryAllocate(sizeof(TVMByteArray) + 4, cpu, &mem) != 0) return -1;
  TVMByteArray* arr = (TVMByteArray*)mem;
  arr->data = (char*)mem + sizeof(TVMByteArray);
  arr->size = 4;
  ret->v_handle = arr;
  *ret_tcode = kTVMBytes;
  g_calls++;
  return 0;
}

static const char kNames[] = "\x03\x00" "tick\0" "fails_third\0" "make_bytes\0";
static const TVMBackendPackedCFunc kFuncs[3] = {Tick, FailsThird, MakeBytes};
static const TVMFuncRegistry kRegistry = {kNames, kFuncs};
static const TVMModule kSysLib = {&kRegistry};

/* Calls runtime.RPCTimeEvaluator(syslib, name, 1, 0, number, repeat, min_repeat_ms, limit, cooldown,
 * repeats_to_cooldown, 0, "") and returns its result code; *out receives the handle. */
static int make_evaluator(const char* name, int64_t number, int64_t repeat, int64_t min_repeat_ms,
                          int64_t limit, int64_t cooldown_ms, TVMFunctionHandle* out) {
  TVMFunctionHandle create;
  TVMModuleHandle syslib;
  if (TVMFuncGetGlobal("runtime.RPCTimeEvaluator", &create) != 0 || create == NULL ||
      TVMCrtSystemLib_GetHandle(&syslib) != 0) {
    return -1;
  }
  TVMValue args[12];
  int codes[12];
  int64_t ints[9] = {kDLCPU, 0, number, repeat, min_repeat_ms, limit, cooldown_ms, 1, 0};
  args[0].v_handle = syslib;
  codes[0] = kTVMModuleHandle;
  args[1].v_str = name;
  codes[1] = kTVMStr;
  for (int i = 0; i < 9; i++) {
    args[2 + i].v_int64 = ints[i];
    codes[2 + i] = kTVMArgInt;
  }
  args[11].v_str = "";
  codes[11] = kTVMStr;
  TVMValue ret;
  int tcode = -1;
  int err = TVMFuncCall(create, args, codes, 12, &ret, &tcode);
  if (err == 0) {
    EXPECT_EQ_INT(tcode, kTVMPackedFuncHandle);
    *out = ret.v_handle;
  }
  return err;
}

static int run_evaluator(TVMFunctionHandle f, int64_t arg, TVMByteArray** out) {
  TVMValue v;
  int code = kTVMArgInt;
  v.v_int64 = arg;
  TVMValue ret;
  int tcode = -1;
  int err = TVMFuncCall(f, &v, &code, 1, &ret, &tcode);
  if (err == 0) {
    EXPECT_EQ_INT(tcode, kTVMBytes);
    *out = (TVMByteArray*)ret.v_handle;
  }
  return err;
}

static double result_at(const TVMByteArray* r, int i) {
  double d;
  memcpy(&d, r->data + 8 * i, 8);
  return d;
}

/* A fresh test platform on the fake clock, no calls counted; each tick advances it by
 * seconds_per_call. */
static void start_fake_clock(double seconds_per_call) {
  TestPlatform_Reset();
  TestPlatform_UseFakeClock();
  g_calls = 0;
  g_seconds_per_call = seconds_per_call;
}

TEST(FixedNumberAndRepeat) {
  start_fake_clock(0.002);
  TVMFunctionHandle f;
  ASSERT_EQ_INT(make_evaluator("tick", 5, 3, 0, 100, 0, &f), 0);
  EXPECT_EQ_INT((uintptr_t)f & 0xffff8000u, 0xffff8000u);
  TVMByteArray* r = NULL;
  ASSERT_EQ_INT(run_evaluator(f, 77, &r), 0);
  ASSERT_EQ_INT(r->size, 3 * sizeof(double));
  for (int i = 0; i < 3; i++) EXPECT_NEAR(result_at(r, i), 0.002, 1e-12);
  EXPECT_EQ_INT(g_calls, 1 + 3 * 5); /* warm-up + 3 batches of 5 */
  EXPECT_EQ_INT(g_last_arg, 77);     /* arguments are passed through */
  EXPECT_EQ_STR(TestPlatform_Trace(),
                "before;cycles;cycles;after;before;cycles;cycles;after;"
                "before;cycles;cycles;after;");
  EXPECT_EQ_INT(TVMByteArrayFree(r), 0);
  EXPECT_EQ_INT(TVMFuncFree(f), 0);
}

TEST(NumberGrowsUntilMinRepeatMs) {
  start_fake_clock(0.001);
  TVMFunctionHandle f;
  ASSERT_EQ_INT(make_evaluator("tick", 1, 1, 10, 100, 0, &f), 0);
  TVMByteArray* r = NULL;
  ASSERT_EQ_INT(run_evaluator(f, 1, &r), 0);
  /* Batch 1: 1 call = 1 ms < 10 ms. Then number = max(10 / 1 + 1, 1 * 1.618) = 11 calls = 11 ms. */
  EXPECT_EQ_INT(g_calls, 1 + 1 + 11);
  EXPECT_NEAR(result_at(r, 0), 0.001, 1e-12);
  EXPECT_EQ_STR(TestPlatform_Trace(), "before;cycles;cycles;after;before;cycles;cycles;after;");
  TVMByteArrayFree(r);
  /* Number carries over into later repeats: the second round starts at 11 calls. */
  start_fake_clock(0.001);
  ASSERT_EQ_INT(make_evaluator("tick", 1, 2, 10, 100, 0, &f), 0);
  ASSERT_EQ_INT(run_evaluator(f, 1, &r), 0);
  EXPECT_EQ_INT(g_calls, 1 + (1 + 11) + 11);
  TVMByteArrayFree(r);
}

TEST(ZeroTimeBatchesAreLimited) {
  start_fake_clock(0);
  TVMFunctionHandle f;
  ASSERT_EQ_INT(make_evaluator("tick", 2, 1, 10, 3, 0, &f), 0);
  TVMByteArray* r = NULL;
  ASSERT_EQ_INT(run_evaluator(f, 1, &r), 0);
  EXPECT_EQ_INT(g_calls, 1 + 3 * 2); /* three zero-time batches, number unchanged */
  EXPECT_NEAR(result_at(r, 0), 0.0, 0);
  TVMByteArrayFree(r);
}

TEST(StaleAndFreedHandles) {
  start_fake_clock(0.001);
  TVMFunctionHandle first;
  TVMFunctionHandle second;
  ASSERT_EQ_INT(make_evaluator("tick", 1, 1, 0, 100, 0, &first), 0);
  ASSERT_EQ_INT(make_evaluator("tick", 1, 1, 0, 100, 0, &second), 0);
  EXPECT_EQ_INT((uintptr_t)second, (uintptr_t)first + 1);
  TVMByteArray* r = NULL;
  EXPECT_EQ_INT(run_evaluator(first, 1, &r), kTvmErrorTimeEvaluatorBadHandle);
  EXPECT_CONTAINS(TVMGetLastError(), "stale");
  ASSERT_EQ_INT(run_evaluator(second, 1, &r), 0);
  TVMByteArrayFree(r);
  EXPECT_EQ_INT(TVMFuncFree(second), 0);
  EXPECT_EQ_INT(run_evaluator(second, 1, &r), kTvmErrorTimeEvaluatorBadHandle);
}

TEST(BadArguments) {
  TVMFunctionHandle f;
  EXPECT_EQ_INT(make_evaluator("no_such_function", 1, 1, 0, 100, 0, &f),
                kTvmErrorFunctionNameNotFound);
  EXPECT_CONTAINS(TVMGetLastError(), "no_such_function");
  EXPECT_EQ_INT(make_evaluator("tick", 0, 1, 0, 100, 0, &f), kTvmErrorFunctionCallInvalidArg);
  EXPECT_EQ_INT(make_evaluator("tick", 1, 0, 0, 100, 0, &f), kTvmErrorFunctionCallInvalidArg);
  TVMFunctionHandle create;
  ASSERT_EQ_INT(TVMFuncGetGlobal("runtime.RPCTimeEvaluator", &create), 0);
  TVMValue args[12];
  int codes[12];
  memset(args, 0, sizeof(args));
  for (int i = 0; i < 12; i++) codes[i] = kTVMArgInt;
  TVMValue ret;
  int tcode;
  EXPECT_EQ_INT(TVMFuncCall(create, args, codes, 11, &ret, &tcode),
                kTvmErrorFunctionCallNumArguments);
  EXPECT_EQ_INT(TVMFuncCall(create, args, codes, 12, &ret, &tcode),
                kTvmErrorFunctionCallWrongArgType);
}

TEST(InnerFailurePropagatesWithoutLeaks) {
  TestPlatform_Reset();
  TestPlatform_UseFakeClock();
  int live = TestPlatform_LiveAllocations();
  g_calls = 0;
  TVMFunctionHandle f;
  ASSERT_EQ_INT(make_evaluator("fails_third", 4, 1, 0, 100, 0, &f), 0);
  TVMValue ret;
  int tcode;
  EXPECT_EQ_INT(TVMFuncCall(f, NULL, NULL, 0, &ret, &tcode), kTvmErrorFunctionCallInvalidArg);
  EXPECT_CONTAINS(TVMGetLastError(), "failing as planned");
  /* The timer was stopped and AfterMeasurement called despite the failure. */
  EXPECT_EQ_STR(TestPlatform_Trace(), "before;cycles;cycles;after;");
  EXPECT_EQ_INT(TestPlatform_LiveAllocations(), live);
  /* Results returned by the timed function are released, not leaked. */
  g_calls = 0;
  ASSERT_EQ_INT(make_evaluator("make_bytes", 3, 2, 0, 100, 0, &f), 0);
  TVMByteArray* r = NULL;
  ASSERT_EQ_INT(TVMFuncCall(f, NULL, NULL, 0, &ret, &tcode), 0);
  r = (TVMByteArray*)ret.v_handle;
  EXPECT_EQ_INT(g_calls, 1 + 2 * 3);
  TVMByteArrayFree(r);
  EXPECT_EQ_INT(TestPlatform_LiveAllocations(), live);
}

TEST(CooldownOnRealClock) {
  TestPlatform_Reset(); /* real clock */
  g_seconds_per_call = 0;
  TVMFunctionHandle f;
  ASSERT_EQ_INT(make_evaluator("tick", 1, 2, 0, 100, 1, &f), 0);
  TVMByteArray* r = NULL;
  ASSERT_EQ_INT(run_evaluator(f, 1, &r), 0);
  EXPECT_TRUE(result_at(r, 0) >= 0.0 && result_at(r, 1) >= 0.0);
  TVMByteArrayFree(r);
  /* Each measured round is bracketed by before/after; the cooldown uses bare start/stop pairs. */
  const char* trace = TestPlatform_Trace();
  EXPECT_TRUE(strncmp(trace, "before;cycles;cycles;after;cycles;cycles;", 41) == 0);
}

int main(void) {
  TestPlatform_Reset();
  if (TVMCrtSystemLib_Set(&kSysLib) != kTvmErrorNoError ||
      TVMInitializeRuntime() != kTvmErrorNoError ||
      TVMCrtTimeEvaluator_Register() != kTvmErrorNoError) {
    printf("setup failed: %s\n", TVMGetLastError());
    return 1;
  }
  RUN_TEST(FixedNumberAndRepeat);
  RUN_TEST(NumberGrowsUntilMinRepeatMs);
  RUN_TEST(ZeroTimeBatchesAreLimited);
  RUN_TEST(StaleAndFreedHandles);
  RUN_TEST(BadArguments);
  RUN_TEST(InnerFailurePropagatesWithoutLeaks);
  RUN_TEST(CooldownOnRealClock);
  return TEST_REPORT();
}

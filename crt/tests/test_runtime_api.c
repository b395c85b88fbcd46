/* Runtime API: handles (spec section 4.7), TVMFuncCall, registration, device memory, logging. */
#include <stdint.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/aot_executor.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/crt/packed_func.h>
#include <tvm/runtime/crt/random_fill.h>
#include <tvm/runtime/crt/time_evaluator.h>

#include "../src/common/module_table.h"
#include "test_platform.h"
#include "test_util.h"

static void* g_seen_resource = (void*)1;

/* add_one(int) -> int, in a custom system library. */
static int AddOne(TVMValue* args, int* type_codes, int num_args, TVMValue* ret, int* ret_tcode,
                  void* resource_handle) {
  static const int kSig[1] = {kTVMArgInt};
  g_seen_resource = resource_handle;
  int err = TVMCrtArgs_Check("add_one", type_codes, num_args, kSig, 1);
  if (err != 0) {
    return err;
  }
  ret->v_int64 = args[0].v_int64 + 1;
  *ret_tcode = kTVMArgInt;
  return 0;
}

static int FailSilently(TVMValue* args, int* type_codes, int num_args, TVMValue* ret,
                        int* ret_tcode, void* resource_handle) {
  (void)args; (void)type_codes; (void)num_args; (void)ret; (void)ret_tcode; (void)resource_handle;
  return kTvmErrorFunctionCallInvalidArg;
}

static int FailWithMessage(TVMValue* args, int* type_codes, int num_args, TVMValue* ret,
                           int* ret_tcode, void* resource_handle) {
  (void)args; (void)type_codes; (void)num_args; (void)ret; (void)ret_tcode; (void)resource_handle;
  TVMAPISetLastError("specific reason");
  return 5;
}

static const char kSysNames[] = "\x02\x00" "add_one\0" "fail_silently\0";
static const TVMBackendPackedCFunc kSysFuncs[2] = {AddOne, FailSilently};
static const TVMFuncRegistry kSysRegistry = {kSysNames, kSysFuncs};
static const TVMModule kSysLib = {&kSysRegistry};

static int call_int(TVMFunctionHandle f, int64_t arg, TVMValue* ret, int* tcode) {
  TVMValue v;
  int tc = kTVMArgInt;
  v.v_int64 = arg;
  return TVMFuncCall(f, &v, &tc, 1, ret, tcode);
}

TEST(GlobalHandlesGolden) {
  ASSERT_EQ_INT(TVMCrtSystemLib_Set(&kSysLib), kTvmErrorNoError);
  ASSERT_EQ_INT(TVMInitializeRuntime(), kTvmErrorNoError);
  EXPECT_EQ_INT(TVMInitializeRuntime(), kTvmErrorNoError); /* idempotent */
  const char* names[4] = {"runtime.SystemLib", "runtime.RPCTimeEvaluator",
                          "tvm.contrib.random.random_fill", "tvm.aot_executor.create"};
  /* The core registers only runtime.SystemLib; each module registers its own global. */
  for (int i = 1; i < 4; i++) {
    TVMFunctionHandle h = (TVMFunctionHandle)&h;
    EXPECT_EQ_INT(TVMFuncGetGlobal(names[i], &h), 0);
    EXPECT_EQ_PTR(h, NULL);
  }
  /* MicroTVMRpcServerInit's order, twice: later calls change nothing. */
  for (int round = 0; round < 2; round++) {
    ASSERT_EQ_INT(TVMCrtTimeEvaluator_Register(), kTvmErrorNoError);
    ASSERT_EQ_INT(TVMCrtRandomFill_Register(), kTvmErrorNoError);
    ASSERT_EQ_INT(TVMAotExecutorModule_Register(), kTvmErrorNoError);
  }
  for (int i = 0; i < 4; i++) {
    TVMFunctionHandle h = NULL;
    EXPECT_EQ_INT(TVMFuncGetGlobal(names[i], &h), 0);
    EXPECT_EQ_INT((uintptr_t)h, 0x80028000u + (unsigned)i);
  }
  TVMFunctionHandle h = (TVMFunctionHandle)&h;
  EXPECT_EQ_INT(TVMFuncGetGlobal("no.such.function", &h), 0);
  EXPECT_EQ_PTR(h, NULL);
  EXPECT_TRUE(TVMFuncGetGlobal(NULL, &h) != 0);
}

TEST(SystemLibModule) {
  TVMFunctionHandle syslib_fn;
  ASSERT_EQ_INT(TVMFuncGetGlobal("runtime.SystemLib", &syslib_fn), 0);
  TVMValue ret;
  int tcode = -1;
  ASSERT_EQ_INT(TVMFuncCall(syslib_fn, NULL, NULL, 0, &ret, &tcode), 0);
  EXPECT_EQ_INT(tcode, kTVMModuleHandle);
  EXPECT_EQ_INT((uintptr_t)ret.v_handle, 0x8000);
  TVMModuleHandle mod = ret.v_handle;
  ASSERT_EQ_INT(TVMFuncCall(syslib_fn, NULL, NULL, 0, &ret, &tcode), 0);
  EXPECT_EQ_PTR(ret.v_handle, mod); /* same handle on later calls */
  EXPECT_EQ_INT(TVMCrtSystemLib_Set(&kSysLib), kTvmErrorExecutorModuleAlreadyCreated);

  TVMFunctionHandle add_one = NULL;
  ASSERT_EQ_INT(TVMModGetFunction(mod, "add_one", 0, &add_one), 0);
  EXPECT_EQ_INT((uintptr_t)add_one, 0x80008000u);
  ASSERT_EQ_INT(call_int(add_one, 41, &ret, &tcode), 0);
  EXPECT_EQ_INT(tcode, kTVMArgInt);
  EXPECT_EQ_INT(ret.v_int64, 42);
  EXPECT_EQ_PTR(g_seen_resource, &kSysRegistry); /* module functions get their registry */

  TVMFunctionHandle missing = (TVMFunctionHandle)&missing;
  EXPECT_EQ_INT(TVMModGetFunction(mod, "runtime.SystemLib", 0, &missing), 0);
  EXPECT_EQ_PTR(missing, NULL);
  EXPECT_EQ_INT(TVMModGetFunction(mod, "runtime.SystemLib", 1, &missing), 0); /* imports */
  EXPECT_EQ_INT((uintptr_t)missing, 0x80028000u);
  EXPECT_EQ_INT(TVMModFree(mod), 0); /* the system library is never freed */
  EXPECT_EQ_INT(TVMModGetFunction(mod, "add_one", 0, &add_one), 0);
  EXPECT_TRUE(TVMModGetFunction((TVMModuleHandle)(uintptr_t)0x8005, "add_one", 0, &add_one) != 0);
  EXPECT_TRUE(TVMModGetFunction((TVMModuleHandle)(uintptr_t)0x1, "add_one", 0, &add_one) != 0);
}

TEST(CallErrors) {
  TVMModuleHandle mod;
  ASSERT_EQ_INT(TVMCrtSystemLib_GetHandle(&mod), kTvmErrorNoError);
  TVMFunctionHandle f;
  TVMValue ret;
  int tcode = -1;
  /* Wrong argument type: the callee's own message. */
  TVMValue v;
  int tc = kTVMStr;
  v.v_str = "x";
  ASSERT_EQ_INT(TVMModGetFunction(mod, "add_one", 0, &f), 0);
  EXPECT_EQ_INT(TVMFuncCall(f, &v, &tc, 1, &ret, &tcode), kTvmErrorFunctionCallWrongArgType);
  EXPECT_EQ_INT(tcode, kTVMNullptr);
  EXPECT_CONTAINS(TVMGetLastError(), "add_one: argument 0 has type code 11");
  EXPECT_EQ_INT(TVMFuncCall(f, NULL, NULL, 0, &ret, &tcode), kTvmErrorFunctionCallNumArguments);
  /* A failing function that sets no message gets a generic one naming it. */
  ASSERT_EQ_INT(TVMModGetFunction(mod, "fail_silently", 0, &f), 0);
  TVMAPISetLastError("stale");
  EXPECT_EQ_INT(TVMFuncCall(f, NULL, NULL, 0, &ret, &tcode), kTvmErrorFunctionCallInvalidArg);
  EXPECT_CONTAINS(TVMGetLastError(), "fail_silently failed with error 0x803");
  /* Invalid handles. */
  EXPECT_EQ_INT(TVMFuncCall(NULL, NULL, NULL, 0, &ret, &tcode), kTvmErrorFunctionIndexInvalid);
  EXPECT_CONTAINS(TVMGetLastError(), "not a function handle");
  EXPECT_EQ_INT(TVMFuncCall((TVMFunctionHandle)(uintptr_t)0x80008009u, NULL, NULL, 0, &ret, &tcode),
                kTvmErrorFunctionIndexInvalid);
  EXPECT_EQ_INT(TVMFuncCall((TVMFunctionHandle)(uintptr_t)0x80018000u, NULL, NULL, 0, &ret, &tcode),
                kTvmErrorFunctionIndexInvalid);
  EXPECT_EQ_INT(TVMFuncCall((TVMFunctionHandle)(uintptr_t)0x80028000u, NULL, NULL, -1, &ret, &tcode),
                kTvmErrorFunctionCallInvalidArg);
  EXPECT_EQ_INT(TVMFuncFree((TVMFunctionHandle)(uintptr_t)0x80008000u), 0);
  EXPECT_TRUE(TVMFuncFree((TVMFunctionHandle)(uintptr_t)0x1234) != 0);
}

/* A function space of the test: records the calls the core routes to it. */
static int g_space_called = -1;
static int g_space_released = -1;

static int SpaceCall(uint16_t function_index, TVMValue* args, int* type_codes, int num_args,
                     TVMValue* ret_val, int* ret_tcode) {
  (void)args;
  (void)type_codes;
  g_space_called = function_index;
  ret_val->v_int64 = num_args;
  *ret_tcode = kTVMArgInt;
  return 0;
}

static int SpaceRelease(uint16_t function_index) {
  g_space_released = function_index;
  return 0;
}

TEST(FunctionSpacesRouteTheirHandles) {
  static TVMCrtFunctionSpace space = {0x7ffe, SpaceCall, SpaceRelease, NULL};
  static TVMCrtFunctionSpace rival = {0x7ffe, SpaceCall, NULL, NULL};
  static TVMCrtFunctionSpace globals = {TVM_CRT_MAX_REGISTERED_MODULES, SpaceCall, NULL, NULL};
  static TVMCrtFunctionSpace no_call = {0x7ffd, NULL, NULL, NULL};
  ASSERT_EQ_INT(TVMCrtModule_RegisterFunctionSpace(&space), kTvmErrorNoError);
  EXPECT_EQ_INT(TVMCrtModule_RegisterFunctionSpace(&space), kTvmErrorNoError); /* again: same */
  EXPECT_EQ_INT(TVMCrtModule_RegisterFunctionSpace(&rival), kTvmErrorFunctionAlreadyDefined);
  EXPECT_CONTAINS(TVMGetLastError(), "0x7ffe is already taken");
  EXPECT_EQ_INT(TVMCrtModule_RegisterFunctionSpace(&globals), kTvmErrorFunctionCallInvalidArg);
  EXPECT_EQ_INT(TVMCrtModule_RegisterFunctionSpace(&no_call), kTvmErrorFunctionCallInvalidArg);
  EXPECT_EQ_INT(TVMCrtModule_RegisterFunctionSpace(NULL), kTvmErrorFunctionCallInvalidArg);

  TVMFunctionHandle f = TVMCrtModule_FunctionHandle(0x7ffe, 5);
  EXPECT_EQ_INT((uintptr_t)f, 0xfffe8005u);
  TVMValue args[2];
  int codes[2] = {kTVMArgInt, kTVMArgInt};
  TVMValue ret;
  int tcode;
  args[0].v_int64 = 1;
  args[1].v_int64 = 2;
  ASSERT_EQ_INT(TVMFuncCall(f, args, codes, 2, &ret, &tcode), 0);
  EXPECT_EQ_INT(g_space_called, 5);
  EXPECT_EQ_INT(tcode, kTVMArgInt);
  EXPECT_EQ_INT(ret.v_int64, 2);
  EXPECT_EQ_INT(TVMFuncFree(f), 0);
  EXPECT_EQ_INT(g_space_released, 5);
  /* The time evaluator's space (0x7fff) is routed beside it; an unclaimed index is no handle. */
  EXPECT_EQ_INT(TVMFuncCall(TVMCrtModule_FunctionHandle(0x7fff, 0), NULL, NULL, 0, &ret, &tcode),
                kTvmErrorTimeEvaluatorBadHandle);
  EXPECT_EQ_INT(TVMFuncCall(TVMCrtModule_FunctionHandle(0x7ff0, 1), NULL, NULL, 0, &ret, &tcode),
                kTvmErrorFunctionIndexInvalid);
}

TEST(RegisterGlobals) {
  TVMFunctionHandle f;
  TVMValue ret;
  int tcode;
  ASSERT_EQ_INT(TVMCrtRuntime_RegisterGlobal("test.fail", FailWithMessage, 0), kTvmErrorNoError);
  ASSERT_EQ_INT(TVMFuncGetGlobal("test.fail", &f), 0);
  EXPECT_EQ_INT((uintptr_t)f, 0x80028004u);
  EXPECT_EQ_INT(TVMFuncCall(f, NULL, NULL, 0, &ret, &tcode), 5);
  EXPECT_EQ_STR(TVMGetLastError(), "specific reason");
  EXPECT_EQ_INT(TVMCrtRuntime_RegisterGlobal("test.fail", AddOne, 0),
                kTvmErrorFunctionAlreadyDefined);
  EXPECT_CONTAINS(TVMGetLastError(), "test.fail is already registered");
  /* TVM's void* signature, with override. */
  TVMBackendPackedCFunc fn = AddOne;
  void* as_handle;
  memcpy(&as_handle, &fn, sizeof(as_handle));
  EXPECT_EQ_INT(TVMFuncRegisterGlobal("test.fail", as_handle, 1), 0);
  g_seen_resource = (void*)1;
  ASSERT_EQ_INT(call_int(f, 1, &ret, &tcode), 0);
  EXPECT_EQ_INT(ret.v_int64, 2);
  EXPECT_EQ_PTR(g_seen_resource, NULL); /* globals get no resource handle */
  /* The backend lookups generated code uses. */
  TVMFunctionHandle env = NULL;
  EXPECT_EQ_INT(TVMBackendGetFuncFromEnv(NULL, "test.fail", &env), 0);
  EXPECT_EQ_PTR(env, f);
  EXPECT_EQ_INT(TVMBackendGetFuncFromEnv(NULL, "test.missing", &env),
                kTvmErrorFunctionNameNotFound);
  EXPECT_CONTAINS(TVMGetLastError(), "test.missing");
  EXPECT_EQ_INT(TVMBackendRegisterSystemLibSymbol("test.sym", as_handle), 0);
  ASSERT_EQ_INT(TVMFuncGetGlobal("test.sym", &env), 0);
  ASSERT_EQ_INT(call_int(env, 5, &ret, &tcode), 0);
  EXPECT_EQ_INT(ret.v_int64, 6);
  /* Fill the registry until it reports full, with a message naming the knob. */
  char name[32];
  int err = 0;
  for (int i = 0; i < 100 && err == 0; i++) {
    snprintf(name, sizeof(name), "test.filler_%d", i);
    err = TVMCrtRuntime_RegisterGlobal(name, AddOne, 0);
  }
  EXPECT_EQ_INT(err, kTvmErrorFunctionRegistryFull);
  EXPECT_CONTAINS(TVMGetLastError(), "TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES");
  /* Earlier registrations are intact. */
  ASSERT_EQ_INT(TVMFuncGetGlobal("test.filler_0", &f), 0);
  EXPECT_TRUE(f != NULL);
}

TEST(ModuleTableFull) {
  /* Slot 0 holds the system library; slot 1 takes this module; a third has no room. */
  static const TVMModule kOther = {&kSysRegistry};
  TVMModuleHandle h1;
  TVMModuleHandle h2 = NULL;
  ASSERT_EQ_INT(TVMModCreateFromCModule(&kOther, &h1), kTvmErrorNoError);
  EXPECT_EQ_INT((uintptr_t)h1, 0x8001);
  EXPECT_EQ_INT(TVMModCreateFromCModule(&kOther, &h2), kTvmErrorFunctionRegistryFull);
  EXPECT_CONTAINS(TVMGetLastError(), "TVM_CRT_MAX_REGISTERED_MODULES");
  TVMFunctionHandle f;
  ASSERT_EQ_INT(TVMModGetFunction(h1, "fail_silently", 0, &f), 0);
  EXPECT_EQ_INT((uintptr_t)f, 0x80018001u);
}

TEST(PackedFuncHelpers) {
  TVMArgs args;
  TVMValue v[TVM_CRT_MAX_ARGS + 1];
  int tc[TVM_CRT_MAX_ARGS + 1];
  memset(v, 0, sizeof(v));
  memset(tc, 0, sizeof(tc));
  EXPECT_EQ_INT(TVMCrtArgs_Create(&args, v, tc, TVM_CRT_MAX_ARGS + 1),
                kTvmErrorFunctionCallNumArguments);
  v[0].v_int64 = 9;
  tc[0] = kTVMArgInt;
  ASSERT_EQ_INT(TVMCrtArgs_Create(&args, v, tc, 1), kTvmErrorNoError);
  TVMPackedFunc pf;
  TVMModuleHandle mod;
  ASSERT_EQ_INT(TVMCrtSystemLib_GetHandle(&mod), kTvmErrorNoError);
  ASSERT_EQ_INT(TVMPackedFunc_InitModuleFunc(&pf, mod, "add_one", &args), kTvmErrorNoError);
  EXPECT_EQ_INT(TVMPackedFunc_Call(&pf), 0);
  EXPECT_EQ_INT(pf.ret_tcode, kTVMArgInt);
  EXPECT_EQ_INT(pf.ret_value.v_int64, 10);
  EXPECT_EQ_INT(TVMPackedFunc_InitModuleFunc(&pf, mod, "nope", &args),
                kTvmErrorFunctionNameNotFound);
  ASSERT_EQ_INT(TVMPackedFunc_InitGlobalFunc(&pf, "runtime.SystemLib", NULL), kTvmErrorNoError);
  EXPECT_EQ_INT(TVMPackedFunc_Call(&pf), 0);
  EXPECT_EQ_INT(pf.ret_tcode, kTVMModuleHandle);
  EXPECT_EQ_PTR(pf.ret_value.v_handle, mod);
}

TEST(DeviceMemory) {
  int live = TestPlatform_LiveAllocations();
  DLDevice cpu = {kDLCPU, 0};
  DLDataType f32 = {kDLFloat, 32, 1};
  void* p = NULL;
  ASSERT_EQ_INT(TVMDeviceAllocDataSpace(cpu, 10, 64, f32, &p), 0);
  memset(p, 1, 64); /* rounded up to the alignment: ASan would flag a 10-byte block */
  EXPECT_EQ_INT(TVMDeviceFreeDataSpace(cpu, p), 0);
  EXPECT_TRUE(TVMDeviceAllocDataSpace(cpu, 10, 48, f32, &p) != 0);
  EXPECT_CONTAINS(TVMGetLastError(), "power of two");
  int64_t shape[2] = {3, 5};
  ASSERT_EQ_INT(TVMDeviceAllocDataSpaceWithScope(cpu, 2, shape, f32, NULL, &p), 0);
  memset(p, 2, 64); /* 60 bytes rounded to 64 */
  EXPECT_EQ_INT(TVMDeviceFreeDataSpace(cpu, p), 0);
  ASSERT_EQ_INT(TVMDeviceAllocDataSpaceWithScope(cpu, 2, shape, f32, "global", &p), 0);
  EXPECT_EQ_INT(TVMDeviceFreeDataSpace(cpu, p), 0);
  EXPECT_TRUE(TVMDeviceAllocDataSpaceWithScope(cpu, 2, shape, f32, "texture", &p) != 0);
  EXPECT_CONTAINS(TVMGetLastError(), "texture");
  TestPlatform_FailAllocationAfter(0);
  EXPECT_EQ_INT(TVMDeviceAllocDataSpace(cpu, 10, 8, f32, &p), kTvmErrorPlatformNoMemory);
  TestPlatform_FailAllocationAfter(-1);
  EXPECT_EQ_INT(TestPlatform_LiveAllocations(), live);
}

TEST(CopyDataFromTo) {
  float src[6] = {1, 2, 3, 4, 5, 6};
  float dst[8] = {0};
  int64_t shape_src[1] = {4};
  int64_t shape_dst[2] = {2, 2};
  DLTensor from = {src, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape_src, NULL, 2 * sizeof(float)};
  DLTensor to = {dst, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape_dst, NULL, 1 * sizeof(float)};
  ASSERT_EQ_INT(TVMDeviceCopyDataFromTo(&from, &to, NULL), 0);
  const float expected[8] = {0, 3, 4, 5, 6, 0, 0, 0};
  EXPECT_EQ_MEM(dst, expected, sizeof(expected));
  shape_dst[1] = 3;
  EXPECT_EQ_INT(TVMDeviceCopyDataFromTo(&from, &to, NULL), kTvmErrorFunctionCallInvalidArg);
  EXPECT_CONTAINS(TVMGetLastError(), "size mismatch (16 bytes to 24 bytes)");
  int64_t strides[1] = {1};
  from.strides = strides;
  EXPECT_EQ_INT(TVMDeviceCopyDataFromTo(&from, &to, NULL), kTvmErrorFunctionCallInvalidArg);
}

TEST(StreamsAreNoOps) {
  TVMStreamHandle s = (TVMStreamHandle)&s;
  EXPECT_EQ_INT(TVMStreamCreate(kDLCPU, 0, &s), 0);
  EXPECT_EQ_PTR(s, NULL); /* *out is set (TVM's CRT left it uninitialised) */
  EXPECT_EQ_INT(TVMSetStream(kDLCPU, 0, s), 0);
  EXPECT_EQ_INT(TVMSynchronize(kDLCPU, 0, s), 0);
  EXPECT_EQ_INT(TVMStreamFree(kDLCPU, 0, s), 0);
  EXPECT_TRUE(TVMStreamCreate(kDLCPU, 0, NULL) != 0);
}

TEST(RandomFill) {
  int live = TestPlatform_LiveAllocations();
  TVMFunctionHandle f;
  ASSERT_EQ_INT(TVMFuncGetGlobal("tvm.contrib.random.random_fill", &f), 0);
  TVMArrayHandle ints;
  TVMArrayHandle floats;
  int64_t shape[1] = {1024};
  ASSERT_EQ_INT(TVMArrayAlloc(shape, 1, kDLInt, 8, 1, kDLCPU, 0, &ints), 0);
  ASSERT_EQ_INT(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &floats), 0);
  TVMValue v;
  int tc = kTVMDLTensorHandle;
  TVMValue ret;
  int rtc;
  v.v_handle = ints;
  ASSERT_EQ_INT(TVMFuncCall(f, &v, &tc, 1, &ret, &rtc), 0);
  int nonzero = 0;
  for (int i = 0; i < 1024; i++) nonzero += ((int8_t*)ints->data)[i] != 0;
  EXPECT_TRUE(nonzero > 900); /* zero-filled before; ~1020 expected */
  v.v_handle = floats;
  tc = kTVMNDArrayHandle;
  ASSERT_EQ_INT(TVMFuncCall(f, &v, &tc, 1, &ret, &rtc), 0);
  const float* fl = (const float*)floats->data;
  int in_range = 0;
  int distinct = 0;
  for (int i = 0; i < 1024; i++) {
    in_range += fl[i] >= -1.0f && fl[i] <= 1.0f;
    distinct += i > 0 && fl[i] != fl[i - 1];
  }
  EXPECT_EQ_INT(in_range, 1024);
  EXPECT_TRUE(distinct > 1000);
  tc = kTVMStr;
  EXPECT_EQ_INT(TVMFuncCall(f, &v, &tc, 1, &ret, &rtc), kTvmErrorFunctionCallWrongArgType);
  EXPECT_EQ_INT(TVMArrayFree(ints), 0);
  EXPECT_EQ_INT(TVMArrayFree(floats), 0);
  EXPECT_EQ_INT(TestPlatform_LiveAllocations(), live);
}

static char g_logged[512];
static int g_log_calls;
static void capture(void* ctx, const char* msg, size_t len) {
  EXPECT_EQ_PTR(ctx, g_logged);
  EXPECT_EQ_INT(strlen(msg), len);
  g_log_calls++;
  snprintf(g_logged, sizeof(g_logged), "%s", msg);
  TVMLogf("nested %d", 1); /* dropped: the sink is busy */
}

TEST(LoggingSink) {
  TVMLogf("dropped without a sink %d", 1);
  TVMCrtLog_SetSink(capture, g_logged);
  TVMLogf("value=%d name=%s", 7, "x");
  EXPECT_EQ_INT(g_log_calls, 1);
  EXPECT_EQ_STR(g_logged, "value=7 name=x");
  char big[600];
  memset(big, 'a', sizeof(big) - 1);
  big[sizeof(big) - 1] = '\0';
  TVMLogf("%s", big);
  EXPECT_EQ_INT(strlen(g_logged), TVM_CRT_LOG_MESSAGE_SIZE_BYTES - 1);
  TVM_CRT_LOG_ERROR("error %d", 3);
  EXPECT_EQ_STR(g_logged, "error 3");
  TVMCrtLog_SetSink(NULL, NULL);
  TVMLogf("gone");
  EXPECT_EQ_INT(g_log_calls, 3);
}

int main(void) {
  TestPlatform_Reset();
  RUN_TEST(GlobalHandlesGolden);
  RUN_TEST(SystemLibModule);
  RUN_TEST(CallErrors);
  RUN_TEST(FunctionSpacesRouteTheirHandles);
  RUN_TEST(RegisterGlobals);
  RUN_TEST(ModuleTableFull);
  RUN_TEST(PackedFuncHelpers);
  RUN_TEST(DeviceMemory);
  RUN_TEST(CopyDataFromTo);
  RUN_TEST(StreamsAreNoOps);
  RUN_TEST(RandomFill);
  RUN_TEST(LoggingSink);
  return TEST_REPORT();
}

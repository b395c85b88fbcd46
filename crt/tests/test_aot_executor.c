/*
 * AOT executor with two hand-written models: "default" (elementwise add of two float32[2,3])
 * and "dense" (y = W x + b with W float32[3,4], scratch products in TVMBackendAllocWorkspace).
 * Expected outputs are computed here in double precision, independently of the models.
 */
#include <stdint.h>
#include <string.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/aot_executor.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/module.h>

#include "test_platform.h"
#include "test_util.h"

static const DLDevice kCpu = {kDLCPU, 0};

/* ---- model "default": sum = a + b ---- */
static float g_a[6], g_b[6], g_sum[6];
static const int64_t kShape23[2] = {2, 3};
static int g_add_runs;

static int32_t AddRun(void* const* inputs, void* const* outputs) {
  const float* a = (const float*)inputs[0];
  const float* b = (const float*)inputs[1];
  float* sum = (float*)outputs[0];
  for (int i = 0; i < 6; i++) sum[i] = a[i] + b[i];
  g_add_runs++;
  return 0;
}

static const TVMCrtAotTensor kAddInputs[2] = {
    {"a", {kDLFloat, 32, 1}, 2, kShape23, sizeof(g_a), g_a},
    {"b", {kDLFloat, 32, 1}, 2, kShape23, sizeof(g_b), g_b},
};
static const TVMCrtAotTensor kAddOutputs[1] = {
    {"sum", {kDLFloat, 32, 1}, 2, kShape23, sizeof(g_sum), g_sum},
};
static const TVMCrtAotModel kAddModel = {"default", 2, kAddInputs, 1, kAddOutputs, 0, AddRun};

/* ---- model "dense": y[1,3] = W[3,4] x[1,4] + bias[3] ---- */
static const float kW[3][4] = {{1, 2, 3, 4}, {-1, 0.5f, 0, 2}, {0.25f, -2, 1, -1}};
static const float kBias[3] = {0.5f, -1, 2};
static float g_x[4], g_y[3];
static const int64_t kShapeX[2] = {1, 4};
static const int64_t kShapeY[2] = {1, 3};

static int32_t DenseRun(void* const* inputs, void* const* outputs) {
  const float* x = (const float*)inputs[0];
  float* y = (float*)outputs[0];
  float* products = (float*)TVMBackendAllocWorkspace(kDLCPU, 0, 12 * sizeof(float), kDLFloat, 32);
  if (products == NULL) {
    return -1;
  }
  for (int j = 0; j < 3; j++) {
    for (int k = 0; k < 4; k++) products[j * 4 + k] = kW[j][k] * x[k];
  }
  for (int j = 0; j < 3; j++) {
    float acc = kBias[j];
    for (int k = 0; k < 4; k++) acc += products[j * 4 + k];
    y[j] = acc;
  }
  return TVMBackendFreeWorkspace(kDLCPU, 0, products);
}

static const TVMCrtAotTensor kDenseInputs[1] = {
    {"x", {kDLFloat, 32, 1}, 2, kShapeX, sizeof(g_x), g_x}};
static const TVMCrtAotTensor kDenseOutputs[1] = {
    {"y", {kDLFloat, 32, 1}, 2, kShapeY, sizeof(g_y), g_y}};
static const TVMCrtAotModel kDenseModel = {"dense",       1,  kDenseInputs, 1,
                                           kDenseOutputs, 48, DenseRun};

const TVMCrtAotModel* TVMCrtAotModel_Lookup(const char* module_name) {
  if (strcmp(module_name, "default") == 0) return &kAddModel;
  if (strcmp(module_name, "dense") == 0) return &kDenseModel;
  return NULL;
}

static uint8_t g_workspace[128];

/* The lowered-graph hook (graph_model.c provides it): "dense" was lowered from this JSON. */
static const char kDenseGraph[] = "{\"nodes\": [], \"heads\": [[0, 0, 0]]}";
const char* TVMCrtGraphModel_Match(const char* json, size_t length) {
  return length == sizeof(kDenseGraph) - 1 && memcmp(json, kDenseGraph, length) == 0 ? "dense"
                                                                                   : NULL;
}

/* ---- direct C API ---- */

TEST(DirectApiAddModel) {
  TestPlatform_Reset();
  TVMCrtAotExecutor ex;
  ASSERT_EQ_INT(TVMCrtAotExecutor_Create(&ex, &kAddModel, kCpu), kTvmErrorNoError);
  EXPECT_EQ_STR(TestPlatform_Trace(), "open(1,0);");
  EXPECT_EQ_INT(TVMCrtAotExecutor_GetNumInputs(&ex), 2);
  EXPECT_EQ_INT(TVMCrtAotExecutor_GetNumOutputs(&ex), 1);
  int idx = -1;
  EXPECT_EQ_INT(TVMCrtAotExecutor_GetInputIndex(&ex, "b", &idx), kTvmErrorNoError);
  EXPECT_EQ_INT(idx, 1);
  EXPECT_EQ_INT(TVMCrtAotExecutor_GetInputIndex(&ex, "nope", &idx),
                kTvmErrorExecutorModuleNoSuchInput);
  EXPECT_CONTAINS(TVMGetLastError(), "no input named 'nope'");
  const char* name = NULL;
  EXPECT_EQ_INT(TVMCrtAotExecutor_GetInputName(&ex, 0, &name), kTvmErrorNoError);
  EXPECT_EQ_STR(name, "a");
  EXPECT_EQ_INT(TVMCrtAotExecutor_GetInputName(&ex, 2, &name), kTvmErrorExecutorModuleNoSuchInput);

  DLTensor a, b, out;
  ASSERT_EQ_INT(TVMCrtAotExecutor_GetInput(&ex, 0, &a), kTvmErrorNoError);
  ASSERT_EQ_INT(TVMCrtAotExecutor_GetInput(&ex, 1, &b), kTvmErrorNoError);
  EXPECT_EQ_PTR(a.data, g_a);
  EXPECT_EQ_INT(a.ndim, 2);
  EXPECT_EQ_INT(a.shape[1], 3);
  EXPECT_TRUE(a.strides == NULL);
  for (int i = 0; i < 6; i++) {
    ((float*)a.data)[i] = (float)i * 0.5f;
    ((float*)b.data)[i] = 10.0f - (float)i;
  }
  ASSERT_EQ_INT(TVMCrtAotExecutor_Run(&ex), kTvmErrorNoError);
  ASSERT_EQ_INT(TVMCrtAotExecutor_GetOutput(&ex, 0, &out), kTvmErrorNoError);
  for (int i = 0; i < 6; i++) {
    EXPECT_NEAR(((float*)out.data)[i], (double)i * 0.5 + 10.0 - (double)i, 1e-6);
  }
  EXPECT_EQ_INT(TVMCrtAotExecutor_GetOutput(&ex, 1, &out), kTvmErrorFunctionCallInvalidArg);
  EXPECT_EQ_INT(TVMCrtAotExecutor_GetInput(&ex, -1, &out), kTvmErrorExecutorModuleNoSuchInput);
  EXPECT_EQ_INT(TVMCrtAotExecutor_Release(&ex), kTvmErrorNoError);
  EXPECT_EQ_STR(TestPlatform_Trace(), "open(1,0);activate(1,0);deactivate(1,0);close(1,0);");
  EXPECT_EQ_INT(TVMCrtAotExecutor_Release(&ex), kTvmErrorExecutorModuleBadContext);
  EXPECT_EQ_INT(TVMCrtAotExecutor_Run(&ex), kTvmErrorExecutorModuleBadContext);
}

static void expected_dense(const float* x, double* y) {
  for (int j = 0; j < 3; j++) {
    y[j] = kBias[j];
    for (int k = 0; k < 4; k++) y[j] += (double)kW[j][k] * x[k];
  }
}

TEST(DenseModelUsesWorkspace) {
  TestPlatform_Reset();
  ASSERT_EQ_INT(TVMCrtWorkspace_Init(g_workspace, sizeof(g_workspace)), kTvmErrorNoError);
  TVMCrtAotExecutor ex;
  ASSERT_EQ_INT(TVMCrtAotExecutor_CreateByName(&ex, "dense", kCpu), kTvmErrorNoError);
  const float x[4] = {1, -2, 0.5f, 3};
  DLTensor src = {(void*)x, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, (int64_t*)kShapeX, NULL, 0};
  ASSERT_EQ_INT(TVMCrtAotExecutor_SetInput(&ex, 0, &src), kTvmErrorNoError);
  ASSERT_EQ_INT(TVMCrtAotExecutor_Run(&ex), kTvmErrorNoError);
  double y[3];
  expected_dense(x, y);
  EXPECT_NEAR(g_y[0], 1 - 4 + 1.5 + 12 + 0.5, 1e-6); /* hand-computed: 11 */
  for (int j = 0; j < 3; j++) EXPECT_NEAR(g_y[j], y[j], 1e-5);
  size_t in_use = 1, peak = 0;
  TVMCrtWorkspace_Usage(&in_use, &peak);
  EXPECT_EQ_INT(in_use, 0);
  EXPECT_EQ_INT(peak, 48 + 4);
  EXPECT_EQ_INT(TVMCrtAotExecutor_Release(&ex), kTvmErrorNoError);
}

TEST(RunFailureReportsAndStillDeactivates) {
  TestPlatform_Reset();
  ASSERT_EQ_INT(TVMCrtWorkspace_Init(g_workspace, 32), kTvmErrorNoError); /* too small */
  TVMCrtAotExecutor ex;
  ASSERT_EQ_INT(TVMCrtAotExecutor_Create(&ex, &kDenseModel, kCpu), kTvmErrorNoError);
  EXPECT_EQ_INT(TVMCrtAotExecutor_Run(&ex), -1);
  EXPECT_CONTAINS(TVMGetLastError(), "48 bytes requested");
  EXPECT_EQ_INT(TVMCrtAotExecutor_Release(&ex), kTvmErrorNoError);
  EXPECT_EQ_STR(TestPlatform_Trace(), "open(1,0);activate(1,0);deactivate(1,0);close(1,0);");
  ASSERT_EQ_INT(TVMCrtWorkspace_Init(g_workspace, sizeof(g_workspace)), kTvmErrorNoError);
}

TEST(SetInputValidates) {
  TVMCrtAotExecutor ex;
  ASSERT_EQ_INT(TVMCrtAotExecutor_Create(&ex, &kAddModel, kCpu), kTvmErrorNoError);
  int32_t ints[6] = {0};
  float floats[4] = {0};
  int64_t shape4[1] = {4};
  DLTensor wrong_type = {ints, {kDLCPU, 0}, 2, {kDLInt, 32, 1}, (int64_t*)kShape23, NULL, 0};
  DLTensor wrong_size = {floats, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape4, NULL, 0};
  EXPECT_EQ_INT(TVMCrtAotExecutor_SetInput(&ex, 0, &wrong_type), kTvmErrorFunctionCallInvalidArg);
  EXPECT_CONTAINS(TVMGetLastError(), "set_input a");
  EXPECT_EQ_INT(TVMCrtAotExecutor_SetInput(&ex, 0, &wrong_size), kTvmErrorFunctionCallInvalidArg);
  EXPECT_EQ_INT(TVMCrtAotExecutor_SetInput(&ex, 3, &wrong_size),
                kTvmErrorExecutorModuleNoSuchInput);
  EXPECT_EQ_INT(TVMCrtAotExecutor_Release(&ex), kTvmErrorNoError);
}

TEST(LifecycleHookFailures) {
  TestPlatform_Reset();
  TVMCrtAotExecutor ex;
  TestPlatform_SetHookError("open", kTvmErrorPlatformNoMemory);
  EXPECT_EQ_INT(TVMCrtAotExecutor_Create(&ex, &kAddModel, kCpu), kTvmErrorPlatformNoMemory);
  EXPECT_EQ_INT(TVMCrtAotExecutor_Run(&ex), kTvmErrorExecutorModuleBadContext);
  TestPlatform_SetHookError("open", kTvmErrorNoError);
  ASSERT_EQ_INT(TVMCrtAotExecutor_Create(&ex, &kAddModel, kCpu), kTvmErrorNoError);
  int runs = g_add_runs;
  TestPlatform_SetHookError("activate", kTvmErrorPlatformTimerBadState);
  EXPECT_EQ_INT(TVMCrtAotExecutor_Run(&ex), kTvmErrorPlatformTimerBadState);
  EXPECT_EQ_INT(g_add_runs, runs); /* not run, and no deactivate */
  TestPlatform_SetHookError("activate", kTvmErrorNoError);
  TestPlatform_SetHookError("deactivate", kTvmErrorPlatformShutdown);
  EXPECT_EQ_INT(TVMCrtAotExecutor_Run(&ex), kTvmErrorPlatformShutdown);
  EXPECT_EQ_INT(g_add_runs, runs + 1);
  TestPlatform_SetHookError("deactivate", kTvmErrorNoError);
  TestPlatform_SetHookError("close", kTvmErrorPlatformShutdown);
  EXPECT_EQ_INT(TVMCrtAotExecutor_Release(&ex), kTvmErrorPlatformShutdown);
  EXPECT_EQ_INT(TVMCrtAotExecutor_Release(&ex), kTvmErrorExecutorModuleBadContext); /* unbound */
  EXPECT_EQ_STR(TestPlatform_Trace(),
                "open(1,0);open(1,0);activate(1,0);activate(1,0);deactivate(1,0);close(1,0);");
  TestPlatform_Reset();
}

TEST(InvalidDescriptorRejected) {
  static const int64_t kBigShape[1] = {7};
  static const TVMCrtAotTensor kBad[1] = {{"a", {kDLFloat, 32, 1}, 1, kBigShape, sizeof(g_a), g_a}};
  static const TVMCrtAotModel kBadModel = {"bad", 1, kBad, 1, kAddOutputs, 0, AddRun};
  TVMCrtAotExecutor ex;
  TestPlatform_Reset();
  EXPECT_EQ_INT(TVMCrtAotExecutor_Create(&ex, &kBadModel, kCpu), kTvmErrorFunctionCallInvalidArg);
  EXPECT_CONTAINS(TVMGetLastError(), "model bad: invalid descriptor");
  EXPECT_EQ_STR(TestPlatform_Trace(), ""); /* device never opened */
  EXPECT_EQ_INT(TVMCrtAotExecutor_CreateByName(&ex, "missing", kCpu),
                kTvmErrorFunctionNameNotFound);
}

/* ---- through packed functions, as the RPC host drives it ---- */

static TVMFunctionHandle get(TVMModuleHandle mod, const char* name) {
  TVMFunctionHandle f = NULL;
  if (TVMModGetFunction(mod, name, 0, &f) != 0) return NULL;
  return f;
}

static int create(const char* name, TVMValue* ret, int* tcode) {
  TVMFunctionHandle f;
  TVMModuleHandle syslib;
  if (TVMFuncGetGlobal("tvm.aot_executor.create", &f) != 0 || f == NULL ||
      TVMCrtSystemLib_GetHandle(&syslib) != 0) {
    return -1;
  }
  TVMValue args[3];
  int codes[3] = {kTVMModuleHandle, kDLDevice, kTVMStr};
  args[0].v_handle = syslib;
  args[1].v_device = kCpu;
  args[2].v_str = name;
  return TVMFuncCall(f, args, codes, 3, ret, tcode);
}

TEST(ExecutorModuleEndToEnd) {
  TestPlatform_Reset();
  int live = TestPlatform_LiveAllocations();
  ASSERT_EQ_INT(TVMInitializeRuntime(), kTvmErrorNoError);
  /* The core knows no executor: the module registers its global itself. */
  TVMFunctionHandle absent = (TVMFunctionHandle)&absent;
  ASSERT_EQ_INT(TVMFuncGetGlobal("tvm.aot_executor.create", &absent), 0);
  EXPECT_EQ_PTR(absent, NULL);
  ASSERT_EQ_INT(TVMAotExecutorModule_Register(), kTvmErrorNoError);
  ASSERT_EQ_INT(TVMAotExecutorModule_Register(), kTvmErrorNoError); /* later calls: no change */
  TVMValue ret;
  int tcode;
  ASSERT_EQ_INT(create("default", &ret, &tcode), 0);
  ASSERT_EQ_INT(tcode, kTVMModuleHandle);
  TVMModuleHandle mod = ret.v_handle;
  EXPECT_EQ_INT((uintptr_t)mod, 0x8001); /* slot 0 is the system library */

  /* get_num_inputs / get_num_outputs / get_input_index / get_input_name */
  ASSERT_EQ_INT(TVMFuncCall(get(mod, "get_num_inputs"), NULL, NULL, 0, &ret, &tcode), 0);
  EXPECT_EQ_INT(tcode, kTVMArgInt);
  EXPECT_EQ_INT(ret.v_int64, 2);
  ASSERT_EQ_INT(TVMFuncCall(get(mod, "get_num_outputs"), NULL, NULL, 0, &ret, &tcode), 0);
  EXPECT_EQ_INT(ret.v_int64, 1);
  TVMValue arg;
  int code = kTVMStr;
  arg.v_str = "b";
  ASSERT_EQ_INT(TVMFuncCall(get(mod, "get_input_index"), &arg, &code, 1, &ret, &tcode), 0);
  EXPECT_EQ_INT(ret.v_int64, 1);
  arg.v_str = "zzz";
  EXPECT_EQ_INT(TVMFuncCall(get(mod, "get_input_index"), &arg, &code, 1, &ret, &tcode),
                kTvmErrorExecutorModuleNoSuchInput);
  EXPECT_CONTAINS(TVMGetLastError(), "zzz");
  code = kTVMArgInt;
  arg.v_int64 = 1;
  ASSERT_EQ_INT(TVMFuncCall(get(mod, "get_input_name"), &arg, &code, 1, &ret, &tcode), 0);
  EXPECT_EQ_INT(tcode, kTVMStr);
  EXPECT_EQ_STR(ret.v_str, "b");

  /* get_input("a") -> NDArray view; fill it; set_input(1, tensor) copies b in. */
  code = kTVMStr;
  arg.v_str = "a";
  ASSERT_EQ_INT(TVMFuncCall(get(mod, "get_input"), &arg, &code, 1, &ret, &tcode), 0);
  ASSERT_EQ_INT(tcode, kTVMNDArrayHandle);
  DLTensor* a = (DLTensor*)ret.v_handle;
  EXPECT_EQ_PTR(a->data, g_a);
  EXPECT_EQ_INT(a->shape[0], 2);
  for (int i = 0; i < 6; i++) ((float*)a->data)[i] = (float)(i * i);
  float b_values[6] = {1, 1, 2, 3, 5, 8};
  DLTensor b_src = {b_values, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, (int64_t*)kShape23, NULL, 0};
  TVMValue set_args[2];
  int set_codes[2] = {kTVMArgInt, kTVMDLTensorHandle};
  set_args[0].v_int64 = 1;
  set_args[1].v_handle = &b_src;
  ASSERT_EQ_INT(TVMFuncCall(get(mod, "set_input"), set_args, set_codes, 2, &ret, &tcode), 0);
  EXPECT_EQ_INT(tcode, kTVMNullptr);
  EXPECT_EQ_INT(TVMArrayFree(a), 0); /* frees the handle, not the model buffer */
  set_codes[1] = kTVMStr;
  EXPECT_EQ_INT(TVMFuncCall(get(mod, "set_input"), set_args, set_codes, 2, &ret, &tcode),
                kTvmErrorFunctionCallWrongArgType);

  ASSERT_EQ_INT(TVMFuncCall(get(mod, "run"), NULL, NULL, 0, &ret, &tcode), 0);
  EXPECT_EQ_INT(tcode, kTVMNullptr);
  code = kTVMArgInt;
  arg.v_int64 = 0;
  ASSERT_EQ_INT(TVMFuncCall(get(mod, "get_output"), &arg, &code, 1, &ret, &tcode), 0);
  ASSERT_EQ_INT(tcode, kTVMNDArrayHandle);
  DLTensor* out = (DLTensor*)ret.v_handle;
  for (int i = 0; i < 6; i++) EXPECT_NEAR(((float*)out->data)[i], i * i + b_values[i], 1e-6);
  EXPECT_EQ_INT(TVMArrayFree(out), 0);
  arg.v_int64 = 1;
  EXPECT_EQ_INT(TVMFuncCall(get(mod, "get_output"), &arg, &code, 1, &ret, &tcode),
                kTvmErrorFunctionCallInvalidArg);

  /* Unsupported entries exist and say so. */
  const char* ni[3] = {"get_input_info", "load_params", "share_params"};
  for (int i = 0; i < 3; i++) {
    TVMFunctionHandle f = get(mod, ni[i]);
    ASSERT_TRUE(f != NULL);
    EXPECT_EQ_INT(TVMFuncCall(f, NULL, NULL, 0, &ret, &tcode), kTvmErrorFunctionCallNotImplemented);
  }
  EXPECT_TRUE(get(mod, "no_such") == NULL);

  /* Same model again: same module, one more reference. Another model: refused. */
  ASSERT_EQ_INT(create("default", &ret, &tcode), 0);
  EXPECT_EQ_PTR(ret.v_handle, mod);
  EXPECT_EQ_INT(create("dense", &ret, &tcode), kTvmErrorExecutorModuleAlreadyCreated);
  EXPECT_CONTAINS(TVMGetLastError(), "'default' is alive");
  EXPECT_EQ_INT(create("missing", &ret, &tcode), kTvmErrorExecutorModuleAlreadyCreated);
  EXPECT_EQ_INT(TVMModFree(mod), 0);
  EXPECT_EQ_STR(TestPlatform_Trace(), "open(1,0);activate(1,0);deactivate(1,0);");
  EXPECT_EQ_INT(TVMModFree(mod), 0);
  EXPECT_EQ_STR(TestPlatform_Trace(), "open(1,0);activate(1,0);deactivate(1,0);close(1,0);");
  EXPECT_TRUE(TVMModFree(mod) != 0); /* gone */

  /* The slot is free again: a different model can be created now. */
  EXPECT_EQ_INT(create("missing", &ret, &tcode), kTvmErrorFunctionNameNotFound);
  ASSERT_EQ_INT(create("dense", &ret, &tcode), 0);
  EXPECT_EQ_PTR(ret.v_handle, mod);
  EXPECT_EQ_INT(TVMModFree(ret.v_handle), 0);
  EXPECT_EQ_INT(TestPlatform_LiveAllocations(), live);
}

TEST(CreateArgumentChecks) {
  TVMFunctionHandle f;
  ASSERT_EQ_INT(TVMFuncGetGlobal("tvm.aot_executor.create", &f), 0);
  TVMValue args[3];
  int codes[3] = {kTVMModuleHandle, kTVMStr, kTVMStr};
  TVMValue ret;
  int tcode;
  args[1].v_str = "x";
  args[2].v_str = "default";
  EXPECT_EQ_INT(TVMFuncCall(f, args, codes, 3, &ret, &tcode), kTvmErrorFunctionCallWrongArgType);
  EXPECT_CONTAINS(TVMGetLastError(), "argument 1");
  EXPECT_EQ_INT(TVMFuncCall(f, args, codes, 2, &ret, &tcode), kTvmErrorFunctionCallNumArguments);
}

/* tvm.graph_executor.create(json, syslib, device_type, device_id): TVM's on-device graph API,
 * answered with the model whose graph the JSON is. */
TEST(GraphExecutorCreateAnswersTheMatchingModel) {
  TestPlatform_Reset();
  int live = TestPlatform_LiveAllocations();
  TVMFunctionHandle f;
  ASSERT_EQ_INT(TVMFuncGetGlobal("tvm.graph_executor.create", &f), 0);
  ASSERT_TRUE(f != NULL);
  TVMModuleHandle syslib;
  ASSERT_EQ_INT(TVMCrtSystemLib_GetHandle(&syslib), kTvmErrorNoError);
  TVMValue args[6];
  int codes[6] = {kTVMStr, kTVMModuleHandle, kDLInt, kDLInt, kDLInt, kDLInt};
  TVMValue ret;
  int tcode;
  args[0].v_str = kDenseGraph;
  args[1].v_handle = syslib;
  args[2].v_int64 = kDLCPU;
  args[3].v_int64 = 0;
  ASSERT_EQ_INT(TVMFuncCall(f, args, codes, 4, &ret, &tcode), 0);
  ASSERT_EQ_INT(tcode, kTVMModuleHandle);
  TVMModuleHandle mod = ret.v_handle;
  /* The executor module of "dense": one input x of 4 floats, y = W x + b. */
  ASSERT_EQ_INT(TVMFuncCall(get(mod, "get_num_inputs"), NULL, NULL, 0, &ret, &tcode), 0);
  EXPECT_EQ_INT(ret.v_int64, 1);
  float x[4] = {1, -2, 0.5f, 3};
  for (int k = 0; k < 4; k++) g_x[k] = x[k];
  ASSERT_EQ_INT(TVMFuncCall(get(mod, "run"), NULL, NULL, 0, &ret, &tcode), 0);
  for (int j = 0; j < 3; j++) {
    double want = kBias[j];
    for (int k = 0; k < 4; k++) want += (double)kW[j][k] * x[k];
    EXPECT_NEAR(g_y[j], want, 1e-5);
  }
  EXPECT_EQ_INT(TVMModFree(mod), 0);

  /* Another JSON, another device, a wrong argument: refused, each saying what. */
  args[0].v_str = "{\"nodes\": [1]}";
  EXPECT_EQ_INT(TVMFuncCall(f, args, codes, 4, &ret, &tcode), kTvmErrorFunctionCallInvalidArg);
  EXPECT_CONTAINS(TVMGetLastError(), "is not the graph of a model of this firmware");
  args[0].v_str = kDenseGraph;
  args[2].v_int64 = 2;
  EXPECT_EQ_INT(TVMFuncCall(f, args, codes, 4, &ret, &tcode), kTvmErrorFunctionCallInvalidArg);
  EXPECT_CONTAINS(TVMGetLastError(), "the CPU alone");
  args[2].v_int64 = kDLCPU;
  args[4].v_int64 = 2;
  args[5].v_int64 = 0;
  EXPECT_EQ_INT(TVMFuncCall(f, args, codes, 6, &ret, &tcode), kTvmErrorFunctionCallInvalidArg);
  EXPECT_CONTAINS(TVMGetLastError(), "2 device(s)");
  codes[0] = kTVMBytes;
  EXPECT_EQ_INT(TVMFuncCall(f, args, codes, 4, &ret, &tcode), kTvmErrorFunctionCallWrongArgType);
  EXPECT_CONTAINS(TVMGetLastError(), "expected (str graph_json, Module");
  codes[0] = kTVMStr;
  codes[3] = kTVMStr;
  EXPECT_EQ_INT(TVMFuncCall(f, args, codes, 4, &ret, &tcode), kTvmErrorFunctionCallWrongArgType);
  EXPECT_CONTAINS(TVMGetLastError(), "argument 3");
  EXPECT_EQ_INT(TestPlatform_LiveAllocations(), live);
}

int main(void) {
  RUN_TEST(DirectApiAddModel);
  RUN_TEST(DenseModelUsesWorkspace);
  RUN_TEST(RunFailureReportsAndStillDeactivates);
  RUN_TEST(SetInputValidates);
  RUN_TEST(LifecycleHookFailures);
  RUN_TEST(InvalidDescriptorRejected);
  RUN_TEST(ExecutorModuleEndToEnd);
  RUN_TEST(CreateArgumentChecks);
  RUN_TEST(GraphExecutorCreateAnswersTheMatchingModel);
  return TEST_REPORT();
}

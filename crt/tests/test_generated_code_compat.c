/*
 * Code in the shape TVM's C code generator emits for a system-lib build (a packed operator whose
 * parameters are void and int32_t pointers, argument checks, a workspace allocation, a registry blob and
 * TVMSystemLibEntryPoint), compiled against our headers unchanged and driven through the
 * runtime like the RPC host would: runtime.SystemLib -> ModGetFunction -> TVMFuncCall.
 */
#include "tvm/runtime/c_backend_api.h"
#include "tvm/runtime/c_runtime_api.h"
#include "tvm/runtime/crt/module.h"
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
#endif
    TVM_DLL int32_t
    tvmgen_default_fused_add(void* args, int32_t* arg_type_ids, int32_t num_args,
                             void* out_ret_value, int32_t* out_ret_tcode, void* resource_handle);

TVM_DLL int32_t tvmgen_default_fused_add(void* args, int32_t* arg_type_ids, int32_t num_args,
                                         void* out_ret_value, int32_t* out_ret_tcode,
                                         void* resource_handle) {
  (void)out_ret_value;
  (void)out_ret_tcode;
  (void)resource_handle;
  if (!(num_args == 3)) {
    TVMAPISetLastError("tvmgen_default_fused_add: num_args should be 3");
    return -1;
  }
  for (int32_t i = 0; i < 3; ++i) {
    int32_t code = arg_type_ids[i];
    if (!(code == kTVMDLTensorHandle || code == kTVMNDArrayHandle || code == kTVMNullptr ||
          code == kTVMOpaqueHandle)) {
      TVMAPISetLastError("tvmgen_default_fused_add: expect arg to be pointer");
      return -1;
    }
  }
  void* arg_p0 = (((TVMValue*)args)[0].v_handle);
  void* arg_p1 = (((TVMValue*)args)[1].v_handle);
  void* arg_out = (((TVMValue*)args)[2].v_handle);
  float* p0 = (float*)(((DLTensor*)arg_p0)[0].data);
  float* p1 = (float*)(((DLTensor*)arg_p1)[0].data);
  float* out = (float*)(((DLTensor*)arg_out)[0].data);
  int64_t* shape = (int64_t*)(((DLTensor*)arg_p0)[0].shape);
  if (!(((DLTensor*)arg_p0)[0].dtype.code == (uint8_t)2 && ((DLTensor*)arg_p0)[0].dtype.bits == 32 &&
        shape[0] == (int64_t)4)) {
    TVMAPISetLastError("tvmgen_default_fused_add: arg p0 must be float32[4]");
    return -1;
  }
  float* tmp = (float*)TVMBackendAllocWorkspace(1, 0, (uint64_t)16, 2, 32);
  if (tmp == NULL) {
    return -1;
  }
  for (int32_t ax0 = 0; ax0 < 4; ++ax0) {
    tmp[ax0] = fabsf(p0[ax0]);
  }
  for (int32_t ax0 = 0; ax0 < 4; ++ax0) {
    out[ax0] = tmp[ax0] + p1[ax0];
  }
  if (TVMBackendFreeWorkspace(1, 0, tmp) != 0) {
    return -1;
  }
  return 0;
}

static TVMBackendPackedCFunc _tvm_func_array[] = {
    (TVMBackendPackedCFunc)tvmgen_default_fused_add,
};
static const TVMFuncRegistry _tvm_func_registry = {
    "\001\000tvmgen_default_fused_add\000",
    _tvm_func_array,
};
static const TVMModule _tvm_system_lib = {&_tvm_func_registry};
const TVMModule* TVMSystemLibEntryPoint(void) { return &_tvm_system_lib; }

/* ---- the test ---- */
#include <tvm/runtime/crt/crt.h>

#include "test_util.h"

static uint8_t g_workspace[256];

TEST(GeneratedOperatorRunsThroughTheRuntime) {
  ASSERT_EQ_INT(TVMCrtWorkspace_Init(g_workspace, sizeof(g_workspace)), kTvmErrorNoError);
  ASSERT_EQ_INT(TVMCrtSystemLib_Set(TVMSystemLibEntryPoint()), kTvmErrorNoError);
  ASSERT_EQ_INT(TVMInitializeRuntime(), kTvmErrorNoError);
  TVMFunctionHandle syslib_fn;
  ASSERT_EQ_INT(TVMFuncGetGlobal("runtime.SystemLib", &syslib_fn), 0);
  TVMValue ret;
  int tcode;
  ASSERT_EQ_INT(TVMFuncCall(syslib_fn, NULL, NULL, 0, &ret, &tcode), 0);
  TVMFunctionHandle op;
  ASSERT_EQ_INT(TVMModGetFunction(ret.v_handle, "tvmgen_default_fused_add", 0, &op), 0);
  ASSERT_TRUE(op != NULL);

  float a[4] = {-1.5f, 2, -3, 0.25f};
  float b[4] = {10, 20, 30, 40};
  float out[4] = {0};
  int64_t shape[1] = {4};
  DLTensor ta = {a, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  DLTensor tb = {b, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  DLTensor tout = {out, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0};
  TVMValue args[3];
  int codes[3] = {kTVMDLTensorHandle, kTVMDLTensorHandle, kTVMDLTensorHandle};
  args[0].v_handle = &ta;
  args[1].v_handle = &tb;
  args[2].v_handle = &tout;
  ASSERT_EQ_INT(TVMFuncCall(op, args, codes, 3, &ret, &tcode), 0);
  EXPECT_EQ_INT(tcode, kTVMNullptr);
  const float expected[4] = {11.5f, 22, 33, 40.25f};
  for (int i = 0; i < 4; i++) EXPECT_NEAR(out[i], expected[i], 1e-6);

  /* The generated checks surface through TVMGetLastError. */
  EXPECT_EQ_INT(TVMFuncCall(op, args, codes, 2, &ret, &tcode), -1);
  EXPECT_EQ_STR(TVMGetLastError(), "tvmgen_default_fused_add: num_args should be 3");
  codes[1] = kTVMStr;
  EXPECT_EQ_INT(TVMFuncCall(op, args, codes, 3, &ret, &tcode), -1);
  EXPECT_CONTAINS(TVMGetLastError(), "expect arg to be pointer");
}

int main(void) {
  RUN_TEST(GeneratedOperatorRunsThroughTheRuntime);
  return TEST_REPORT();
}

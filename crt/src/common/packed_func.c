/* TVMArgs and TVMPackedFunc helpers (packed_func.h). */
#include <string.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/packed_func.h>

tvm_crt_error_t TVMCrtArgs_Create(TVMArgs* args, const TVMValue* values, const int* tcodes,
                                  uint32_t count) {
  if (count > TVM_CRT_MAX_ARGS) {
    TVMAPIErrorf("TVMCrtArgs_Create: %u arguments exceed TVM_CRT_MAX_ARGS (%d)", (unsigned)count,
                 TVM_CRT_MAX_ARGS);
    return kTvmErrorFunctionCallNumArguments;
  }
  if (count > 0) {
    memcpy(args->values, values, sizeof(TVMValue) * count);
    memcpy(args->tcodes, tcodes, sizeof(int) * count);
  }
  args->values_count = count;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMCrtArgs_Check(const char* fn_name, const int* type_codes, int num_args,
                                 const int* expected, int num_expected) {
  if (num_args != num_expected) {
    TVMAPIErrorf("%s: expected %d arguments, got %d", fn_name, num_expected, num_args);
    return kTvmErrorFunctionCallNumArguments;
  }
  for (int i = 0; i < num_args; i++) {
    int tc = type_codes[i];
    if (tc == expected[i] || (expected[i] == kTVMArgInt && tc == kDLUInt)) {
      continue;
    }
    TVMAPIErrorf("%s: argument %d has type code %d, expected %d", fn_name, i, tc, expected[i]);
    return kTvmErrorFunctionCallWrongArgType;
  }
  return kTvmErrorNoError;
}

static tvm_crt_error_t bind(TVMPackedFunc* pf, const char* name, TVMFunctionHandle fexec,
                            const TVMArgs* args) {
  size_t len = strlen(name);
  if (len >= sizeof(pf->name)) {
    TVMAPIErrorf("function name %.32s... is longer than TVM_CRT_MAX_STRLEN_FUNCTION_NAME", name);
    return kTvmErrorFunctionCallInvalidArg;
  }
  if (fexec == NULL) {
    TVMAPIErrorf("function %s is not registered", name);
    return kTvmErrorFunctionNameNotFound;
  }
  memcpy(pf->name, name, len + 1);
  pf->fexec = fexec;
  TVMPackedFunc_SetArgs(pf, args);
  pf->ret_tcode = kTVMNullptr;
  pf->ret_value.v_int64 = 0;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPackedFunc_InitGlobalFunc(TVMPackedFunc* pf, const char* name,
                                             const TVMArgs* args) {
  TVMFunctionHandle fexec = NULL;
  int err = TVMFuncGetGlobal(name, &fexec);
  if (err != 0) {
    return (tvm_crt_error_t)err;
  }
  return bind(pf, name, fexec, args);
}

tvm_crt_error_t TVMPackedFunc_InitModuleFunc(TVMPackedFunc* pf, TVMModuleHandle mod,
                                             const char* name, const TVMArgs* args) {
  TVMFunctionHandle fexec = NULL;
  int err = TVMModGetFunction(mod, name, 0, &fexec);
  if (err != 0) {
    return (tvm_crt_error_t)err;
  }
  return bind(pf, name, fexec, args);
}

void TVMPackedFunc_SetArgs(TVMPackedFunc* pf, const TVMArgs* args) {
  if (args == NULL) {
    pf->args.values_count = 0;
    return;
  }
  pf->args = *args;
}

int TVMPackedFunc_Call(TVMPackedFunc* pf) {
  pf->ret_tcode = kTVMNullptr;
  return TVMFuncCall(pf->fexec, pf->args.values, pf->args.tcodes, (int)pf->args.values_count,
                     &pf->ret_value, &pf->ret_tcode);
}

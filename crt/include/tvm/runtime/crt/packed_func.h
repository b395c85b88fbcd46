/*
 * tvm/runtime/crt/packed_func.h: helpers for calling and implementing packed functions from C.
 * The calling convention itself is documented in tvm/runtime/c_backend_api.h.
 */
#ifndef TVM_RUNTIME_CRT_PACKED_FUNC_H_
#define TVM_RUNTIME_CRT_PACKED_FUNC_H_

#include <stdint.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief A fixed-capacity argument list (values + type codes). */
typedef struct TVMArgs {
  TVMValue values[TVM_CRT_MAX_ARGS];
  int tcodes[TVM_CRT_MAX_ARGS];
  uint32_t values_count;
} TVMArgs;

/*!
 * \brief Fill args with a copy of values[0..count) and tcodes[0..count) (both may be NULL when
 * count is 0).
 * \return kTvmErrorNoError, or kTvmErrorFunctionCallNumArguments if count > TVM_CRT_MAX_ARGS.
 */
tvm_crt_error_t TVMCrtArgs_Create(TVMArgs* args, const TVMValue* values, const int* tcodes,
                                  uint32_t count);

/*!
 * \brief Check a packed call's arguments against a signature, for use at the top of a packed
 * function: num_args must equal num_expected and each type_codes[i] must equal expected[i].
 * An expected kTVMArgInt also accepts kDLUInt. On mismatch the last error names fn_name, the
 * position and the codes.
 * \return kTvmErrorNoError, kTvmErrorFunctionCallNumArguments or
 *   kTvmErrorFunctionCallWrongArgType.
 */
tvm_crt_error_t TVMCrtArgs_Check(const char* fn_name, const int* type_codes, int num_args,
                                 const int* expected, int num_expected);

/*! \brief A packed function bound to its arguments and a slot for its result. */
typedef struct TVMPackedFunc {
  char name[TVM_CRT_MAX_STRLEN_FUNCTION_NAME];
  TVMFunctionHandle fexec;
  TVMArgs args;
  TVMValue ret_value;
  int ret_tcode;
} TVMPackedFunc;

/*!
 * \brief Bind pf to the global function name with a copy of args (NULL = no arguments).
 * \return kTvmErrorNoError; kTvmErrorFunctionNameNotFound; kTvmErrorFunctionCallInvalidArg if
 *   name does not fit TVM_CRT_MAX_STRLEN_FUNCTION_NAME.
 */
tvm_crt_error_t TVMPackedFunc_InitGlobalFunc(TVMPackedFunc* pf, const char* name,
                                             const TVMArgs* args);

/*! \brief Like TVMPackedFunc_InitGlobalFunc for function name of module mod. */
tvm_crt_error_t TVMPackedFunc_InitModuleFunc(TVMPackedFunc* pf, TVMModuleHandle mod,
                                             const char* name, const TVMArgs* args);

/*! \brief Replace the bound arguments with a copy of args. */
void TVMPackedFunc_SetArgs(TVMPackedFunc* pf, const TVMArgs* args);

/*!
 * \brief Call the function with its bound arguments; the result lands in pf->ret_value and
 * pf->ret_tcode.
 * \return The function's result (0 on success).
 */
int TVMPackedFunc_Call(TVMPackedFunc* pf);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_CRT_PACKED_FUNC_H_ */

/*
 * Private to the runtime library (crt/src/common and crt/src/aot_executor); not a public API and
 * may change without notice.
 */
#ifndef TVM_RUNTIME_CRT_INTERNAL_RUNTIME_INTERNAL_H_
#define TVM_RUNTIME_CRT_INTERNAL_RUNTIME_INTERNAL_H_

#include <stdint.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/module.h>

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief Keeps a helper out of line. GCC at -Os still copies small static helpers into each of
 * their callers; for helpers shared by several callers that copy costs more than the call.
 */
#if defined(__GNUC__) || defined(__clang__)
#define TVM_CRT_NOINLINE __attribute__((noinline))
#else
#define TVM_CRT_NOINLINE
#endif

/*! \brief Module index of global functions in function handles. */
#define TVM_CRT_GLOBAL_MODULE_INDEX ((uint16_t)TVM_CRT_MAX_REGISTERED_MODULES)
/*! \brief Module index of time-evaluator function handles. */
#define TVM_CRT_TIME_EVALUATOR_MODULE_INDEX ((uint16_t)0x7fff)

/*! \brief The function handle for function_index of module_index. */
TVMFunctionHandle TVMCrtModule_FunctionHandle(uint16_t module_index, uint16_t function_index);

/*!
 * \brief Called by TVMModFree for a module registered with a hook. Set *out_unregister to 1 when
 * the module is gone and its slot may be reused.
 */
typedef tvm_crt_error_t (*TVMCrtModuleFreeHook)(const TVMModule* mod, int* out_unregister);

/*! \brief Register mod (static storage) with an optional free hook. */
tvm_crt_error_t TVMCrtModule_Register(const TVMModule* mod, TVMCrtModuleFreeHook on_free,
                                      TVMModuleHandle* out_handle);

/*! \brief Packed function runtime.RPCTimeEvaluator (time_evaluator.c). */
int TVMCrtTimeEvaluatorCreate(TVMValue* args, int* type_codes, int num_args,
                              TVMValue* out_ret_value, int* out_ret_tcode, void* resource_handle);

/*! \brief Call the time-evaluator function with index k (TVMFuncCall dispatches here). */
int TVMCrtTimeEvaluatorCall(uint16_t k, TVMValue* args, int* type_codes, int num_args,
                            TVMValue* out_ret_value, int* out_ret_tcode);

/*! \brief Release time-evaluator function k. */
int TVMCrtTimeEvaluatorFree(uint16_t k);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_CRT_INTERNAL_RUNTIME_INTERNAL_H_ */

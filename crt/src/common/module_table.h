/*
 * Private to the runtime library: how its modules (the AOT executor module, the time evaluator)
 * register with the core (crt_runtime_api.c), which knows none of them, and how the RPC server
 * tells the system library's handle. Included as "../common/module_table.h"; never by an
 * application.
 *
 * Handles (module.h): module = index | 0x8000; function = ((module | 0x8000) << 16) |
 * (function | 0x8000). Module indices 0..TVM_CRT_MAX_REGISTERED_MODULES-1 are slots of the module
 * table, whose functions are looked up in each module's TVMFuncRegistry; index
 * TVM_CRT_MAX_REGISTERED_MODULES holds the global functions; indices above it belong to function
 * spaces, whose owners resolve their own function handles.
 */
#ifndef TVM_CRT_SRC_COMMON_MODULE_TABLE_H_
#define TVM_CRT_SRC_COMMON_MODULE_TABLE_H_

#include <stdint.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/module.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Module index of the global functions in function handles. */
#define TVM_CRT_GLOBAL_MODULE_INDEX ((uint16_t)TVM_CRT_MAX_REGISTERED_MODULES)

/*! \brief Largest module index a handle can carry (15 bits). */
#define TVM_CRT_MAX_MODULE_INDEX ((uint16_t)0x7fff)

/*!
 * \brief Called by TVMModFree for a module registered with it. Set *out_unregister to 1 when the
 * module is gone and its slot may be reused.
 */
typedef tvm_crt_error_t (*TVMCrtModuleFreeHook)(const TVMModule* mod, int* out_unregister);

/*!
 * \brief Put mod (static storage) in a free slot of the module table, with an optional free hook.
 * \return kTvmErrorNoError; kTvmErrorFunctionCallInvalidArg (NULL arguments);
 *   kTvmErrorFunctionRegistryFull when every slot is taken (the last error says which knob).
 */
tvm_crt_error_t TVMCrtModule_Register(const TVMModule* mod, TVMCrtModuleFreeHook on_free,
                                      TVMModuleHandle* out_handle);

/*!
 * \brief Function handles a module mints itself instead of listing them in a registry (closures,
 * such as the time evaluator's). The owner keeps the struct in static storage; the core links
 * registered spaces through next.
 */
typedef struct TVMCrtFunctionSpace {
  /*! \brief The handles' module index: above TVM_CRT_GLOBAL_MODULE_INDEX, at most 0x7fff. */
  uint16_t module_index;
  /*! \brief TVMFuncCall of handle (module_index, function_index); same contract. */
  int (*call)(uint16_t function_index, TVMValue* args, int* type_codes, int num_args,
              TVMValue* ret_val, int* ret_tcode);
  /*! \brief TVMFuncFree of such a handle; NULL when there is nothing to release. */
  int (*release)(uint16_t function_index);
  /*! \brief The core's list of spaces; leave it NULL. */
  struct TVMCrtFunctionSpace* next;
} TVMCrtFunctionSpace;

/*!
 * \brief Route the handles of space->module_index to space. Registering the same space again
 * changes nothing.
 * \return kTvmErrorNoError; kTvmErrorFunctionCallInvalidArg (NULL space or call, or an index
 *   that is not above the globals); kTvmErrorFunctionAlreadyDefined (another space has it).
 */
tvm_crt_error_t TVMCrtModule_RegisterFunctionSpace(TVMCrtFunctionSpace* space);

/*! \brief The function handle of function_index (< 0x8000) of module_index (<= 0x7fff). */
TVMFunctionHandle TVMCrtModule_FunctionHandle(uint16_t module_index, uint16_t function_index);

/*!
 * \brief 1 when handle is the system library's module handle (runtime.SystemLib, once handed
 * out by TVMCrtSystemLib_GetHandle), else 0.
 */
int TVMCrtSystemLib_IsHandle(TVMModuleHandle handle);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* TVM_CRT_SRC_COMMON_MODULE_TABLE_H_ */

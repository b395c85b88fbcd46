/*
 * tvm/runtime/crt/crt.h: start-up of the C runtime library (libtvm_runtime.a).
 */
#ifndef TVM_RUNTIME_CRT_CRT_H_
#define TVM_RUNTIME_CRT_CRT_H_

#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief Set up the global function registry (static storage of
 * TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES) and register the built-in globals:
 *   runtime.SystemLib()                         -> Module (see TVMCrtSystemLib_Set)
 *   runtime.RPCTimeEvaluator(Module, str, ...)  -> PackedFunc returning kTVMBytes of doubles
 *   tvm.contrib.random.random_fill(DLTensor)    -> fills the tensor via TVMPlatformGenerateRandom
 *   tvm.aot_executor.create(Module, DLDevice, str) -> AOT executor Module (see aot_executor.h)
 * The RPC server adds its own globals afterwards with TVMCrtRuntime_RegisterGlobal.
 * Idempotent: later calls return kTvmErrorNoError and change nothing. The application must
 * provide TVMCrtAotModel_Lookup() (aot_model.h).
 * \return kTvmErrorNoError, or the registry error if the built-ins do not fit.
 */
tvm_crt_error_t TVMInitializeRuntime(void);

/*!
 * \brief Register (or, with override != 0, replace) a global packed function. Typed
 * equivalent of TVMFuncRegisterGlobal; the name is copied into the registry.
 * \return kTvmErrorNoError, kTvmErrorFunctionAlreadyDefined or kTvmErrorFunctionRegistryFull.
 */
tvm_crt_error_t TVMCrtRuntime_RegisterGlobal(const char* name, TVMBackendPackedCFunc func,
                                             int override);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_CRT_CRT_H_ */

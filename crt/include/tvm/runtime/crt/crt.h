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
 * TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES) and register the core's one global:
 *   runtime.SystemLib() -> Module (see TVMCrtSystemLib_Set)
 * Modules register their own globals with their register functions, which call this first:
 *   TVMCrtTimeEvaluator_Register  runtime.RPCTimeEvaluator (time_evaluator.h)
 *   TVMCrtRandomFill_Register     tvm.contrib.random.random_fill (random_fill.h)
 *   TVMAotExecutorModule_Register tvm.aot_executor.create (aot_executor.h), and
 *                                 tvm.graph_executor.create for the lowered graph models when
 *                                 the glue defines TVMCrtGraphModel_Match (aot_model.h)
 * MicroTVMRpcServerInit calls all of them, in this order, then adds the RPC server's globals.
 * Idempotent: later calls return kTvmErrorNoError and change nothing.
 * \return kTvmErrorNoError, or the registry error if runtime.SystemLib does not fit.
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

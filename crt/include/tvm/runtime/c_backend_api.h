/*
 * tvm/runtime/c_backend_api.h: everything TVM-generated operator and AOT code depends on.
 *
 * A standalone AOT build links only libtvm_backend.a, which implements this header
 * (crt/src/backend + crt/src/memory/stack_allocator.c).
 *
 * ---------------------------------------------------------------------------------------------
 * The packed-function calling convention (TVMBackendPackedCFunc)
 * ---------------------------------------------------------------------------------------------
 *   int32_t f(TVMValue* args, int* type_codes, int num_args,
 *             TVMValue* out_ret_value, int* out_ret_tcode, void* resource_handle);
 *
 * - args[i] holds argument i; type_codes[i] (a TVMArgTypeCode) says which member is valid.
 *   Both arrays have num_args entries, belong to the caller and live only for the call. A callee
 *   must check num_args and every type code before reading a value, and return
 *   kTvmErrorFunctionCallNumArguments / kTvmErrorFunctionCallWrongArgType otherwise.
 * - Borrowed arguments: kTVMStr strings, kTVMDLTensorHandle tensors (and their data),
 *   kTVMBytes arrays. A callee that keeps one past its return must copy it.
 * - Return: the caller sets *out_ret_tcode = kTVMNullptr before the call; a callee with a result
 *   writes *out_ret_value and *out_ret_tcode. Ownership of a returned value:
 *     kDLInt/kDLUInt/kDLFloat/kTVMDataType/kDLDevice: plain values.
 *     kTVMStr: points to storage that outlives the call (static or owned by the callee's
 *       module); the caller must not free it.
 *     kTVMBytes: a TVMByteArray* the caller owns and releases with TVMByteArrayFree().
 *     kTVMNDArrayHandle: a tensor the caller owns and releases with TVMArrayFree(); releasing
 *       it never frees memory that belongs to a model (views of static buffers stay valid).
 *     kTVMModuleHandle / kTVMPackedFuncHandle: handles released with TVMModFree/TVMFuncFree.
 * - resource_handle: for functions of a module, the module's TVMFuncRegistry*; for global
 *   functions, NULL. Generated code ignores it.
 * - Result: 0 on success. On failure a nonzero tvm_crt_error_t, after recording a one-line
 *   reason with TVMAPISetLastError() or TVMAPIErrorf().
 */
#ifndef TVM_RUNTIME_C_BACKEND_API_H_
#define TVM_RUNTIME_C_BACKEND_API_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Signature of every packed function (see the calling convention above). */
typedef int (*TVMBackendPackedCFunc)(TVMValue* args, int* type_codes, int num_args,
                                     TVMValue* out_ret_value, int* out_ret_tcode,
                                     void* resource_handle);

/*! \brief Environment handed to a parallel task: the number of tasks in the launch. */
typedef struct {
  void* sync_handle;
  int32_t num_task;
} TVMParallelGroupEnv;

/*! \brief Body of a parallel loop: run task task_id of penv->num_task; return 0 on success. */
typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);

/*!
 * \brief Hand the runtime the memory TVMBackendAllocWorkspace serves from (a stack allocator:
 * allocations must be freed in reverse order). buffer is aligned up to
 * TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES internally. Calling it again discards all live allocations.
 * \return kTvmErrorNoError, or kTvmErrorFunctionCallInvalidArg for a NULL buffer or a size too
 *   small to hold one aligned allocation.
 */
TVM_DLL tvm_crt_error_t TVMCrtWorkspace_Init(uint8_t* buffer, size_t size_bytes);

/*!
 * \brief Bytes of the workspace in use right now and at most since TVMCrtWorkspace_Init
 * (including per-allocation alignment padding and LIFO tags). Either pointer may be NULL.
 */
TVM_DLL void TVMCrtWorkspace_Usage(size_t* in_use_bytes, size_t* peak_bytes);

/*!
 * \brief Allocate nbytes of scratch memory from the workspace (no heap).
 * \return The block (16-byte aligned when it is the first live block; later blocks are 4-byte
 *   aligned when the LIFO check is on), or NULL with TVMGetLastError() explaining why: the
 *   workspace is not initialised, or too small (the message gives the sizes).
 */
TVM_DLL void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                                       int dtype_code_hint, int dtype_bits_hint);

/*!
 * \brief Free a block from TVMBackendAllocWorkspace. Blocks must be freed newest first.
 * \return 0, or kTvmErrorPlatformStackAllocBadFree (out of order, foreign or NULL pointer) with
 *   TVMGetLastError() set; the workspace is left unchanged on error.
 */
TVM_DLL int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr);

/*!
 * \brief Run a parallel loop. This runtime is single-threaded: flambda(0, {num_task = 1}, cdata)
 * runs on the calling thread and its result is returned.
 */
TVM_DLL int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task);

/*! \brief Barrier among the tasks of one launch: with a single task there is nothing to wait for. */
TVM_DLL int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv);

/*!
 * \brief Find a packed function generated code calls by name: the global registry is searched
 * (mod_node, the module context, is ignored: this runtime has one system library).
 * Implemented in libtvm_runtime.a (it needs the registry), not in libtvm_backend.a.
 * \return 0 with *func set, or kTvmErrorFunctionNameNotFound with the last error naming it.
 */
TVM_DLL int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name,
                                     TVMFunctionHandle* func);

/*!
 * \brief Register a generated function under name as a global function (TVM's system-lib
 * self-registration): ptr is a TVMBackendPackedCFunc. Implemented in libtvm_runtime.a.
 * \return 0 or the registry's error code.
 */
TVM_DLL int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr);

/*!
 * \brief printf-style TVMAPISetLastError (vsnprintf into the last-error buffer, truncating).
 * Our extension; declared here because it lives in the backend library.
 */
TVM_DLL void TVMAPIErrorf(const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_C_BACKEND_API_H_ */

/*
 * tvm/runtime/c_runtime_api.h: the C runtime API subset this runtime implements.
 *
 * Types (TVMValue, TVMArgTypeCode, handles) have Apache TVM 0.15's names, layouts and values, so
 * TVM-generated C and code written for TVM's C runtime compile against this header unchanged.
 * Only functions that libtvm_runtime.a (or, for the last-error pair, libtvm_backend.a) really
 * implements are declared here.
 *
 * Return convention: functions returning int give 0 on success and a nonzero tvm_crt_error_t
 * value on failure; the human-readable reason is then available from TVMGetLastError().
 */
#ifndef TVM_RUNTIME_C_RUNTIME_API_H_
#define TVM_RUNTIME_C_RUNTIME_API_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

/*! \brief Marks a public runtime function (kept for source compatibility; empty when static). */
#ifndef TVM_DLL
#if defined(_WIN32) && defined(TVM_EXPORTS)
#define TVM_DLL __declspec(dllexport)
#elif defined(_WIN32)
#define TVM_DLL __declspec(dllimport)
#elif defined(__GNUC__)
#define TVM_DLL __attribute__((visibility("default")))
#else
#define TVM_DLL
#endif
#endif

/*! \brief Version of the Apache TVM C API these declarations are compatible with. */
#define TVM_VERSION "0.15.0"

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Device kinds TVM adds beyond DLDeviceType; kDLMicroDev is 35. */
typedef enum {
  kDLAOCL = 32,
  kDLSDAccel = 33,
  kOpenGL = 34,
  kDLMicroDev = 35,
  TVMDeviceExtType_End,
} TVMDeviceExtType;

/*!
 * \brief Type code of one packed-function argument or return value: says which TVMValue member
 * is meaningful. Values are part of the wire protocol (spec section 4.6).
 */
typedef enum {
  kTVMArgInt = kDLInt,             /*!< 0: v_int64 */
  kTVMArgFloat = kDLFloat,         /*!< 2: v_float64 (kDLUInt = 1 is also an integer) */
  kTVMOpaqueHandle = 3U,           /*!< v_handle: an address the callee interprets */
  kTVMNullptr = 4U,                /*!< no value (void return, None argument) */
  kTVMDataType = 5U,               /*!< v_type */
  kDLDevice = 6U,                  /*!< v_device */
  kTVMDLTensorHandle = 7U,         /*!< v_handle: DLTensor*, borrowed */
  kTVMObjectHandle = 8U,           /*!< not supported by this runtime */
  kTVMModuleHandle = 9U,           /*!< v_handle: TVMModuleHandle */
  kTVMPackedFuncHandle = 10U,      /*!< v_handle: TVMFunctionHandle */
  kTVMStr = 11U,                   /*!< v_str: NUL-terminated, borrowed */
  kTVMBytes = 12U,                 /*!< v_handle: TVMByteArray* */
  kTVMNDArrayHandle = 13U,         /*!< v_handle: TVMArrayHandle, released with TVMArrayFree */
  kTVMObjectRValueRefArg = 14U,    /*!< not supported by this runtime */
  kTVMExtBegin = 15U,
  kTVMNNVMFirst = 16U,
  kTVMNNVMLast = 20U,
  kTVMExtReserveEnd = 64U,
  kTVMExtEnd = 128U,
} TVMArgTypeCode;

/*! \brief Index and shape type. */
typedef int64_t tvm_index_t;

/*! \brief A tensor handle: a DLTensor pointer. */
typedef DLTensor* TVMArrayHandle;

/*!
 * \brief One packed-function argument or return value. Which member is valid is given by the
 * type code travelling beside it (TVMArgTypeCode).
 */
typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  DLDataType v_type;
  DLDevice v_device;
} TVMValue;

/*! \brief A byte string that may contain NULs (type code kTVMBytes). */
typedef struct {
  const char* data;
  size_t size;
} TVMByteArray;

/*! \brief Opaque handle to a module (a named set of functions). */
typedef void* TVMModuleHandle;
/*! \brief Opaque handle to a callable packed function. */
typedef void* TVMFunctionHandle;
/*! \brief Handle to a return-value slot (kept for source compatibility). */
typedef void* TVMRetValueHandle;
/*! \brief Opaque handle to a device stream; this CPU-only runtime has a single null stream. */
typedef void* TVMStreamHandle;
/*! \brief Opaque handle to an object (kept for source compatibility; unsupported). */
typedef void* TVMObjectHandle;

/*!
 * \brief Record the message reported by the next TVMGetLastError(). Truncated to
 * TVM_CRT_LAST_ERROR_SIZE_BYTES - 1 bytes. Generated code calls this before returning nonzero.
 */
TVM_DLL void TVMAPISetLastError(const char* msg);

/*! \brief The last error message recorded (never NULL; "" if none). Valid until the next set. */
TVM_DLL const char* TVMGetLastError(void);

/*!
 * \brief Call a packed function.
 * \param func Handle from TVMFuncGetGlobal or TVMModGetFunction.
 * \param arg_values, type_codes num_args arguments and their TVMArgTypeCode (borrowed).
 * \param ret_val, ret_type_code Receive the return value; the type code is kTVMNullptr for void.
 *   See c_backend_api.h for who owns returned handles.
 * \return 0, or an error code with TVMGetLastError() describing it.
 */
TVM_DLL int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes,
                        int num_args, TVMValue* ret_val, int* ret_type_code);

/*!
 * \brief Find a global function by name. Like TVM, a name that is not registered is not an
 * error: the result is 0 and *out is set to NULL. Nonzero only for bad arguments.
 */
TVM_DLL int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out);

/*!
 * \brief Register a global function. f is a TVMBackendPackedCFunc converted to a handle (TVM's
 * signature); C code should prefer TVMCrtRuntime_RegisterGlobal() from crt.h, which is typed.
 * \param override Nonzero replaces an existing function of that name.
 */
TVM_DLL int TVMFuncRegisterGlobal(const char* name, TVMFunctionHandle f, int override);

/*! \brief Release a function handle. Handles are plain indices here; freeing one is harmless. */
TVM_DLL int TVMFuncFree(TVMFunctionHandle func);

/*!
 * \brief Find a function of a module. A missing name gives 0 and *out = NULL (as in TVM).
 * \param query_imports Nonzero also searches the global registry when the module lacks name.
 */
TVM_DLL int TVMModGetFunction(TVMModuleHandle mod, const char* func_name, int query_imports,
                              TVMFunctionHandle* out);

/*! \brief Release a module handle (the system library is never released). */
TVM_DLL int TVMModFree(TVMModuleHandle mod);

/*!
 * \brief Allocate a compact CPU tensor (struct and data from TVMPlatformMemoryAllocate).
 * Release it with TVMArrayFree().
 */
TVM_DLL int TVMArrayAlloc(const tvm_index_t* shape, int ndim, int dtype_code, int dtype_bits,
                          int dtype_lanes, int device_type, int device_id, TVMArrayHandle* out);

/*! \brief Release a tensor from TVMArrayAlloc or a kTVMNDArrayHandle return value. */
TVM_DLL int TVMArrayFree(TVMArrayHandle handle);

/*! \brief Release a TVMByteArray returned with type code kTVMBytes. */
TVM_DLL int TVMByteArrayFree(TVMByteArray* arr);

/*!
 * \brief Allocate device memory through TVMPlatformMemoryAllocate. nbytes is rounded up to a
 * multiple of alignment (a power of two, or 0/1 for none). Pointer alignment is whatever the
 * platform allocator guarantees.
 */
TVM_DLL int TVMDeviceAllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment,
                                    DLDataType type_hint, void** out_data);

/*!
 * \brief Allocate room for a compact tensor of shape/dtype: prod(shape) * ceil(bits*lanes/8)
 * bytes, aligned to max(TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES, element size). mem_scope must be
 * NULL or "global".
 */
TVM_DLL int TVMDeviceAllocDataSpaceWithScope(DLDevice dev, int ndim, const int64_t* shape,
                                             DLDataType dtype, const char* mem_scope,
                                             void** out_data);

/*! \brief Free memory from TVMDeviceAllocDataSpace(WithScope). */
TVM_DLL int TVMDeviceFreeDataSpace(DLDevice dev, void* ptr);

/*!
 * \brief Copy a compact tensor: prod(shape) * element bytes from from->data + byte_offset to
 * to->data + byte_offset. Both must have the same byte size, and no strides.
 */
TVM_DLL int TVMDeviceCopyDataFromTo(DLTensor* from, DLTensor* to, TVMStreamHandle stream);

/*! \brief Create a stream: CPU work is synchronous, so *out is set to NULL (the null stream). */
TVM_DLL int TVMStreamCreate(int device_type, int device_id, TVMStreamHandle* out);

/*! \brief Free a stream (nothing to do for the null stream). */
TVM_DLL int TVMStreamFree(int device_type, int device_id, TVMStreamHandle stream);

/*! \brief Select the current stream (only the null stream exists). */
TVM_DLL int TVMSetStream(int device_type, int device_id, TVMStreamHandle handle);

/*! \brief Wait for a stream; CPU work has always completed when a call returns. */
TVM_DLL int TVMSynchronize(int device_type, int device_id, TVMStreamHandle stream);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_C_RUNTIME_API_H_ */

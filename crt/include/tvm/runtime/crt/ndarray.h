/*
 * tvm/runtime/crt/ndarray.h: tensors the runtime hands out as kTVMNDArrayHandle values.
 *
 * A TVMCrtNDArray starts with its DLTensor, so a TVMCrtNDArray* is a valid DLTensor* /
 * TVMArrayHandle. Its shape is stored inline. Either it owns its data (allocated with
 * TVMPlatformMemoryAllocate, freed on release) or it is a view of memory owned by someone else (a
 * model's static buffer), which release leaves alone. The struct itself always comes from
 * TVMPlatformMemoryAllocate.
 *
 * Every live tensor is on one list, so that a handle from the wire can be checked before it is
 * freed and the tensors of a host that went away can all be released when the next session
 * starts (MicroTVMRpcServer does this): a host that times out never frees its handles.
 */
#ifndef TVM_RUNTIME_CRT_NDARRAY_H_
#define TVM_RUNTIME_CRT_NDARRAY_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TVMCrtNDArray {
  DLTensor dl_tensor;               /*!< must stay first */
  int64_t shape[TVM_CRT_MAX_NDIM];  /*!< dl_tensor.shape points here */
  int owns_data;                    /*!< nonzero: release frees dl_tensor.data */
  struct TVMCrtNDArray* prev;       /*!< the list of live tensors (ndarray.c owns it) */
  struct TVMCrtNDArray* next;
} TVMCrtNDArray;

/*!
 * \brief Bytes of a compact tensor: prod(shape) * ceil(bits * lanes / 8).
 * \return kTvmErrorNoError, or kTvmErrorFunctionCallInvalidArg for ndim out of 0..MAX_NDIM, a
 *   negative extent, or a size that overflows size_t.
 */
tvm_crt_error_t TVMCrtNDArray_DataSizeBytes(int32_t ndim, const int64_t* shape, DLDataType dtype,
                                            size_t* out_size_bytes);

/*!
 * \brief A new tensor owning zero-filled data of the given shape and type.
 * \return kTvmErrorNoError, kTvmErrorFunctionCallInvalidArg (see DataSizeBytes) or
 *   kTvmErrorPlatformNoMemory (nothing leaked).
 */
tvm_crt_error_t TVMCrtNDArray_Empty(int32_t ndim, const int64_t* shape, DLDataType dtype,
                                    DLDevice dev, TVMCrtNDArray** out_array);

/*!
 * \brief A new tensor viewing data (not owned, not freed on release).
 * \return As TVMCrtNDArray_Empty.
 */
tvm_crt_error_t TVMCrtNDArray_CreateView(void* data, int32_t ndim, const int64_t* shape,
                                         DLDataType dtype, DLDevice dev, TVMCrtNDArray** out_array);

/*!
 * \brief Free the tensor (and its data if owned). NULL is accepted.
 * \return kTvmErrorNoError, or kTvmErrorFunctionCallInvalidArg (nothing freed) if `array` is
 *   not a live tensor: already released, or never made by TVMCrtNDArray_Empty/CreateView.
 */
tvm_crt_error_t TVMCrtNDArray_Release(TVMCrtNDArray* array);

/*! \brief Nonzero if `array` was made by TVMCrtNDArray_Empty/CreateView and not yet released. */
int TVMCrtNDArray_IsLive(const TVMCrtNDArray* array);

/*! \brief Release every live tensor; returns how many there were. */
size_t TVMCrtNDArray_ReleaseAll(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_CRT_NDARRAY_H_ */

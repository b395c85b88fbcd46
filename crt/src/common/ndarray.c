/*
 * TVMCrtNDArray: a DLTensor with inline shape storage, either owning its data or viewing someone
 * else's. Struct and owned data come from TVMPlatformMemoryAllocate.
 */
#include <stdint.h>
#include <string.h>
#include <tvm/runtime/crt/ndarray.h>
#include <tvm/runtime/crt/platform.h>

/* The live tensors, newest first. */
static TVMCrtNDArray* g_live;

tvm_crt_error_t TVMCrtNDArray_DataSizeBytes(int32_t ndim, const int64_t* shape, DLDataType dtype,
                                            size_t* out_size_bytes) {
  if (ndim < 0 || ndim > TVM_CRT_MAX_NDIM || (ndim > 0 && shape == NULL) || dtype.bits == 0 ||
      dtype.lanes == 0) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  size_t size = ((size_t)dtype.bits * dtype.lanes + 7) / 8;
  for (int32_t i = 0; i < ndim; i++) {
    if (shape[i] < 0 || (uint64_t)shape[i] > (uint64_t)SIZE_MAX) {
      return kTvmErrorFunctionCallInvalidArg;
    }
    size_t extent = (size_t)shape[i];
    if (extent != 0 && size > SIZE_MAX / extent) {
      return kTvmErrorFunctionCallInvalidArg;
    }
    size *= extent;
  }
  *out_size_bytes = size;
  return kTvmErrorNoError;
}

static tvm_crt_error_t create(void* data, int32_t ndim, const int64_t* shape, DLDataType dtype,
                              DLDevice dev, TVMCrtNDArray** out_array) {
  size_t nbytes;
  if (out_array == NULL) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  tvm_crt_error_t err = TVMCrtNDArray_DataSizeBytes(ndim, shape, dtype, &nbytes);
  if (err != kTvmErrorNoError) {
    return err;
  }
  void* mem = NULL;
  err = TVMPlatformMemoryAllocate(sizeof(TVMCrtNDArray), dev, &mem);
  if (err != kTvmErrorNoError) {
    return err;
  }
  TVMCrtNDArray* array = (TVMCrtNDArray*)mem;
  memset(array, 0, sizeof(*array));
  if (ndim > 0) {
    memcpy(array->shape, shape, sizeof(int64_t) * (size_t)ndim);
  }
  array->dl_tensor.device = dev;
  array->dl_tensor.ndim = ndim;
  array->dl_tensor.dtype = dtype;
  array->dl_tensor.shape = array->shape;
  array->dl_tensor.strides = NULL;
  array->dl_tensor.byte_offset = 0;
  if (data != NULL) {
    array->dl_tensor.data = data;
    array->owns_data = 0;
  } else {
    void* buf = NULL;
    err = TVMPlatformMemoryAllocate(nbytes == 0 ? 1 : nbytes, dev, &buf);
    if (err != kTvmErrorNoError) {
      TVMPlatformMemoryFree(array, dev);
      return err;
    }
    memset(buf, 0, nbytes);
    array->dl_tensor.data = buf;
    array->owns_data = 1;
  }
  array->prev = NULL;
  array->next = g_live;
  if (g_live != NULL) {
    g_live->prev = array;
  }
  g_live = array;
  *out_array = array;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMCrtNDArray_Empty(int32_t ndim, const int64_t* shape, DLDataType dtype,
                                    DLDevice dev, TVMCrtNDArray** out_array) {
  return create(NULL, ndim, shape, dtype, dev, out_array);
}

tvm_crt_error_t TVMCrtNDArray_CreateView(void* data, int32_t ndim, const int64_t* shape,
                                         DLDataType dtype, DLDevice dev,
                                         TVMCrtNDArray** out_array) {
  if (data == NULL) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  return create(data, ndim, shape, dtype, dev, out_array);
}

tvm_crt_error_t TVMCrtNDArray_Release(TVMCrtNDArray* array) {
  if (array == NULL) {
    return kTvmErrorNoError;
  }
  if (!TVMCrtNDArray_IsLive(array)) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  if (array->prev != NULL) {
    array->prev->next = array->next;
  } else {
    g_live = array->next;
  }
  if (array->next != NULL) {
    array->next->prev = array->prev;
  }
  DLDevice dev = array->dl_tensor.device;
  tvm_crt_error_t err = kTvmErrorNoError;
  if (array->owns_data && array->dl_tensor.data != NULL) {
    err = TVMPlatformMemoryFree(array->dl_tensor.data, dev);
  }
  tvm_crt_error_t err2 = TVMPlatformMemoryFree(array, dev);
  return err != kTvmErrorNoError ? err : err2;
}

int TVMCrtNDArray_IsLive(const TVMCrtNDArray* array) {
  const TVMCrtNDArray* a;
  for (a = g_live; a != NULL; a = a->next) {
    if (a == array) {
      return 1;
    }
  }
  return 0;
}

size_t TVMCrtNDArray_ReleaseAll(void) {
  size_t n = 0;
  while (g_live != NULL) {
    (void)TVMCrtNDArray_Release(g_live);
    n++;
  }
  return n;
}

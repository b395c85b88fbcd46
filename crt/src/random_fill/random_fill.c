/*
 * tvm.contrib.random.random_fill (random_fill.h): fills a tensor through
 * TVMPlatformGenerateRandom. A module of its own: the core registers nothing of it.
 */
#include <stdint.h>
#include <string.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/ndarray.h>
#include <tvm/runtime/crt/platform.h>
#include <tvm/runtime/crt/random_fill.h>

static uint32_t random_u32(const uint8_t* bytes) {
  return (uint32_t)bytes[0] | ((uint32_t)bytes[1] << 8) | ((uint32_t)bytes[2] << 16) |
         ((uint32_t)bytes[3] << 24);
}

static int RandomFillPacked(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                            int* ret_tcode, void* resource_handle) {
  (void)ret_val;
  (void)ret_tcode;
  (void)resource_handle;
  if (num_args != 1 ||
      (type_codes[0] != kTVMDLTensorHandle && type_codes[0] != kTVMNDArrayHandle)) {
    TVMAPISetLastError("tvm.contrib.random.random_fill: expected one tensor argument");
    return num_args != 1 ? kTvmErrorFunctionCallNumArguments : kTvmErrorFunctionCallWrongArgType;
  }
  DLTensor* t = (DLTensor*)args[0].v_handle;
  size_t nbytes;
  if (t == NULL || t->data == NULL ||
      TVMCrtNDArray_DataSizeBytes(t->ndim, t->shape, t->dtype, &nbytes) != kTvmErrorNoError) {
    TVMAPISetLastError("tvm.contrib.random.random_fill: invalid tensor");
    return kTvmErrorFunctionCallInvalidArg;
  }
  uint8_t* data = (uint8_t*)t->data + t->byte_offset;
  tvm_crt_error_t err;
  if (t->dtype.code == kDLInt || t->dtype.code == kDLUInt) {
    err = TVMPlatformGenerateRandom(data, nbytes);
  } else if (t->dtype.code == kDLFloat && (t->dtype.bits == 32 || t->dtype.bits == 64)) {
    err = kTvmErrorNoError;
    size_t elem = t->dtype.bits / 8;
    for (size_t off = 0; off + elem <= nbytes && err == kTvmErrorNoError; off += elem) {
      uint8_t rnd[4];
      err = TVMPlatformGenerateRandom(rnd, sizeof(rnd));
      double value = (double)random_u32(rnd) / 2147483648.0 - 1.0;
      if (elem == 4) {
        float f = (float)value;
        memcpy(data + off, &f, sizeof(f));
      } else {
        memcpy(data + off, &value, sizeof(value));
      }
    }
  } else {
    TVMAPIErrorf("tvm.contrib.random.random_fill: dtype code %d bits %d is not supported",
                 (int)t->dtype.code, (int)t->dtype.bits);
    return kTvmErrorFunctionCallWrongArgType;
  }
  if (err != kTvmErrorNoError) {
    TVMAPIErrorf("tvm.contrib.random.random_fill: TVMPlatformGenerateRandom failed (0x%x)",
                 (unsigned)err);
    return err;
  }
  return 0;
}

tvm_crt_error_t TVMCrtRandomFill_Register(void) {
  static int registered;
  tvm_crt_error_t err = kTvmErrorNoError;
  if (!registered) {
    err = TVMCrtRuntime_RegisterGlobal("tvm.contrib.random.random_fill", RandomFillPacked, 0);
    registered = err == kTvmErrorNoError;
  }
  return err;
}

/*
 * tvm/runtime/crt/random_fill.h: the global tvm.contrib.random.random_fill(DLTensor), which TVM's
 * host calls to fill input tensors with random data on the device (e.g. for benchmarking).
 *
 * Integer tensors get uniform random bits from TVMPlatformGenerateRandom; float32 and float64
 * tensors get values uniform in [-1, 1) (raw bits would include NaNs and denormals). Other dtypes
 * fail with kTvmErrorFunctionCallWrongArgType.
 */
#ifndef TVM_RUNTIME_CRT_RANDOM_FILL_H_
#define TVM_RUNTIME_CRT_RANDOM_FILL_H_

#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief Register the global tvm.contrib.random.random_fill (MicroTVMRpcServerInit calls this).
 * Later calls change nothing.
 * \return kTvmErrorNoError or a registry error.
 */
tvm_crt_error_t TVMCrtRandomFill_Register(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* TVM_RUNTIME_CRT_RANDOM_FILL_H_ */

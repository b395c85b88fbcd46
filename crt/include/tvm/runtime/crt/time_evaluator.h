/*
 * tvm/runtime/crt/time_evaluator.h: runtime.RPCTimeEvaluator, the global TVM's host calls to time
 * a function on the device.
 *
 * runtime.RPCTimeEvaluator(Module mod, str name, int device_type, int device_id, int number,
 * int repeat, int min_repeat_ms, int limit_zero_time_iterations, int cooldown_interval_ms,
 * int repeats_to_cooldown, int cache_flush_bytes, str f_preproc) returns a PackedFunc. Calling it
 * with some arguments makes one untimed warm-up call, then for each of `repeat` rounds, batches of
 * `number` calls bracketed by TVMPlatformBeforeMeasurement, TVMPlatformTimerStart,
 * TVMPlatformTimerStop and TVMPlatformAfterMeasurement, repeated with a growing `number` while
 * the batch took less than min_repeat_ms (and fewer than limit_zero_time_iterations batches
 * measured zero). A round's result is the batch time divided by its `number`. Optionally the
 * device idles cooldown_interval_ms between rounds. The result is a kTVMBytes array of `repeat`
 * native doubles (seconds per call), which the caller releases with TVMByteArrayFree. One
 * evaluator exists at a time: a new RPCTimeEvaluator call replaces it, and older handles then fail
 * with kTvmErrorTimeEvaluatorBadHandle. The device and cache_flush_bytes arguments are ignored
 * (the CPU, no cache flush).
 */
#ifndef TVM_RUNTIME_CRT_TIME_EVALUATOR_H_
#define TVM_RUNTIME_CRT_TIME_EVALUATOR_H_

#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief Register the global runtime.RPCTimeEvaluator and the evaluators' function handles
 * (MicroTVMRpcServerInit calls this). Later calls change nothing.
 * \return kTvmErrorNoError or a registry error.
 */
tvm_crt_error_t TVMCrtTimeEvaluator_Register(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* TVM_RUNTIME_CRT_TIME_EVALUATOR_H_ */

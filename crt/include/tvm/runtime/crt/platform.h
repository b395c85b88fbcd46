/*
 * tvm/runtime/crt/platform.h: the port seam. These are the only functions a port implements;
 * the runtime calls nothing else that is platform-specific. Every function below must be
 * defined once (there are no weak defaults); a hook that has nothing to do on a board simply
 * returns kTvmErrorNoError. The "platform" library (crt/src/platform, see crt/libraries.txt)
 * defines the generic ones: memory from a static page pool, vsnprintf formatting, the
 * measurement timer over the port's cycle counter, no-op measurement and device hooks.
 * crt/port/platform_template.c is the rest, documented function by function, for a new port to
 * copy: abort, the cycle counter, random bytes and the start-up hook. Results go through
 * out-parameters; every function that can fail returns a tvm_crt_error_t. Nothing here may be
 * called from an interrupt handler.
 */
#ifndef TVM_RUNTIME_CRT_PLATFORM_H_
#define TVM_RUNTIME_CRT_PLATFORM_H_

#include <dlpack/dlpack.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Marks a function that never returns (C99 has no _Noreturn). */
#if defined(__GNUC__) || defined(__clang__)
#define TVM_CRT_NORETURN __attribute__((noreturn))
#else
#define TVM_CRT_NORETURN
#endif

/*!
 * \brief Stop for good after an unrecoverable error (a failed CHECK, a corrupted RPC stream).
 * Must not return: reset the device, spin, or exit the process. error_code says why.
 */
void TVMPlatformAbort(tvm_crt_error_t error_code) TVM_CRT_NORETURN;

/*!
 * \brief vsnprintf-like formatting used by TVMLogf: write at most out_buf_size_bytes bytes,
 * always NUL-terminated when out_buf_size_bytes > 0.
 * \return The number of characters written, excluding the NUL (never more than
 *   out_buf_size_bytes - 1).
 */
size_t TVMPlatformFormatMessage(char* out_buf, size_t out_buf_size_bytes, const char* fmt,
                                va_list args);

/*!
 * \brief Allocate num_bytes of memory usable on device dev (the CPU: {kDLCPU, 0}).
 * Used for tensors and byte arrays, never on the inference hot path.
 * \param out_ptr Receives the block, aligned to at least 8 bytes. Left untouched on failure.
 * \return kTvmErrorNoError, or kTvmErrorPlatformNoMemory.
 */
tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr);

/*! \brief Free a block from TVMPlatformMemoryAllocate (same dev). */
tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev);

/*!
 * \brief Start the single measurement timer (the platform library's, over the cycle counter).
 * \return kTvmErrorNoError, kTvmErrorPlatformTimerBadState if it is already running, or the
 *   error of TVMCrtPlatform_CycleCount.
 */
tvm_crt_error_t TVMPlatformTimerStart(void);

/*!
 * \brief Stop the timer and report the time since TVMPlatformTimerStart.
 * \param elapsed_time_seconds Receives the elapsed time in seconds.
 * \return kTvmErrorNoError; kTvmErrorPlatformTimerBadState if it was not running, or if the
 *   counter ran backwards or has no frequency (the timer is stopped then); or the error of
 *   TVMCrtPlatform_CycleCount.
 */
tvm_crt_error_t TVMPlatformTimerStop(double* elapsed_time_seconds);

/*!
 * \brief Read the board's free-running cycle counter, which the measurement timer runs on.
 * It counts up at TVMCrtPlatform_CycleFrequencyHz and never wraps during a program's life: 64
 * bits wide, a narrower hardware counter extended in software (count its overflows). Use the
 * finest counter the board has (DWT->CYCCNT or SysTick on Cortex-M, a hardware timer).
 * \param out_cycles Receives the count; left untouched on failure.
 * \return kTvmErrorNoError, or kTvmErrorPlatformTimerBadState if the counter cannot be read.
 */
tvm_crt_error_t TVMCrtPlatform_CycleCount(uint64_t* out_cycles);

/*! \brief Counts per second of TVMCrtPlatform_CycleCount: nonzero, constant once initialised. */
uint64_t TVMCrtPlatform_CycleFrequencyHz(void);

/*!
 * \brief Fill buffer with num_bytes random bytes. They seed the RPC session nonce, so they must
 * differ across resets; cryptographic quality is not required.
 * \return kTvmErrorNoError, or kTvmErrorFunctionCallNotImplemented if the board has no source.
 */
tvm_crt_error_t TVMPlatformGenerateRandom(uint8_t* buffer, size_t num_bytes);

/*! \brief Called just before each timed batch of the time evaluator (e.g. flush caches). */
tvm_crt_error_t TVMPlatformBeforeMeasurement(void);

/*! \brief Called just after each timed batch of the time evaluator. */
tvm_crt_error_t TVMPlatformAfterMeasurement(void);

/*
 * Device lifecycle hooks, matched to the executor lifecycle:
 *
 *   uninitialised --Open--> opened --Activate--> active (run() in progress)
 *        ^                    |  ^                  |
 *        +-------Close--------+  +---Deactivate-----+
 *
 * Calls are strictly paired and never nested for one device: Open once per executor created,
 * then any number of Activate/Deactivate pairs around each run, then Close when the executor is
 * released. If a hook fails, the executor reports that error and undoes nothing else (e.g. a
 * failing Activate means run() is not attempted and Deactivate is not called).
 */

/*!
 * \brief An executor is being created for device. Contract: on success the device's memory is
 * available (powered, clocks on) so constants and inputs may be written into it.
 */
tvm_crt_error_t TVMCrtDevice_Open(DLDevice device);

/*!
 * \brief A run is starting. Contract: leave any low-power state that would slow inference so
 * compute tasks launch with low latency.
 */
tvm_crt_error_t TVMCrtDevice_Activate(DLDevice device);

/*!
 * \brief A run has finished. Contract: the device may re-enter a low-power state, but must keep
 * the contents of its memory (inputs, outputs and constants stay valid).
 */
tvm_crt_error_t TVMCrtDevice_Deactivate(DLDevice device);

/*!
 * \brief The executor was released. Contract: the device may be released for other users and its
 * memory contents need not be kept.
 */
tvm_crt_error_t TVMCrtDevice_Close(DLDevice device);

/*!
 * \brief Application set-up hook (clocks, memory pools, UART). Not called by the runtime: an
 * application's main() calls it before anything else if its port defines it.
 */
tvm_crt_error_t TVMPlatformInitialize(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_CRT_PLATFORM_H_ */

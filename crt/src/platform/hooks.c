/*!
 * \file platform/hooks.c
 * \brief The hooks of platform.h that most boards leave empty: measurement hooks with nothing
 *     to prepare, and device lifecycle hooks for a CPU without power states to manage. Part of
 *     the "platform" library. A board that needs its own hooks defines them in its platform.c
 *     and builds the other files of crt/src/platform instead of the whole library.
 */
#include <tvm/runtime/crt/platform.h>

/* Nothing to prepare around a timed batch (a board with caches might flush them here). */
tvm_crt_error_t TVMPlatformBeforeMeasurement(void) { return kTvmErrorNoError; }

tvm_crt_error_t TVMPlatformAfterMeasurement(void) { return kTvmErrorNoError; }

/* The device lifecycle (platform.h): a CPU without power states to manage accepts every step. */
static tvm_crt_error_t DeviceAlwaysReady(DLDevice device) {
  (void)device;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMCrtDevice_Open(DLDevice device) { return DeviceAlwaysReady(device); }

tvm_crt_error_t TVMCrtDevice_Activate(DLDevice device) { return DeviceAlwaysReady(device); }

tvm_crt_error_t TVMCrtDevice_Deactivate(DLDevice device) { return DeviceAlwaysReady(device); }

tvm_crt_error_t TVMCrtDevice_Close(DLDevice device) { return DeviceAlwaysReady(device); }

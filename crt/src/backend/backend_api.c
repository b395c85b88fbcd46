/*
 * The backend API generated code calls: workspace allocation over one stack allocator whose
 * memory the application provides with TVMCrtWorkspace_Init, and a serial parallel-launch.
 */
#include <stdint.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/stack_allocator.h>

static tvm_workspace_t g_workspace;
static int g_workspace_ready;
static size_t g_workspace_peak_bytes;

tvm_crt_error_t TVMCrtWorkspace_Init(uint8_t* buffer, size_t size_bytes) {
  g_workspace_ready = 0;
  g_workspace_peak_bytes = 0;
  tvm_crt_error_t err = StackMemoryManager_Init(&g_workspace, buffer, size_bytes);
  if (err != kTvmErrorNoError) {
    TVMAPIErrorf(
        "TVMCrtWorkspace_Init: %s buffer of %lu bytes has no room after aligning "
        "to %d bytes; pass a larger buffer",
        buffer == NULL ? "NULL" : "a", (unsigned long)size_bytes,
        TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES);
    return err;
  }
  g_workspace_ready = 1;
  return kTvmErrorNoError;
}

void TVMCrtWorkspace_Usage(size_t* in_use_bytes, size_t* peak_bytes) {
  if (in_use_bytes != NULL) {
    *in_use_bytes = g_workspace_ready ? TVMCrtStackAllocator_UsedBytes(&g_workspace) : 0;
  }
  if (peak_bytes != NULL) {
    *peak_bytes = g_workspace_peak_bytes;
  }
}

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes,
                               int dtype_code_hint, int dtype_bits_hint) {
  (void)device_type;
  (void)device_id;
  (void)dtype_code_hint;
  (void)dtype_bits_hint;
  if (!g_workspace_ready) {
    TVMAPISetLastError(
        "TVMBackendAllocWorkspace: no workspace; call TVMCrtWorkspace_Init(buffer, size) "
        "before running the model");
    return NULL;
  }
  void* ptr = NULL;
  tvm_crt_error_t err = kTvmErrorPlatformNoMemory;
  if (nbytes <= (uint64_t)SIZE_MAX) {
    err = StackMemoryManager_Allocate(&g_workspace, (size_t)nbytes, &ptr);
  }
  if (err != kTvmErrorNoError) {
    size_t used = TVMCrtStackAllocator_UsedBytes(&g_workspace);
    TVMAPIErrorf(
        "TVMBackendAllocWorkspace: %llu bytes requested but only %lu of %lu workspace "
        "bytes are free; enlarge the buffer given to TVMCrtWorkspace_Init",
        (unsigned long long)nbytes, (unsigned long)(g_workspace.workspace_size - used),
        (unsigned long)g_workspace.workspace_size);
    return NULL;
  }
  size_t used = TVMCrtStackAllocator_UsedBytes(&g_workspace);
  if (used > g_workspace_peak_bytes) {
    g_workspace_peak_bytes = used;
  }
  return ptr;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  (void)device_type;
  (void)device_id;
  if (!g_workspace_ready) {
    TVMAPISetLastError("TVMBackendFreeWorkspace: no workspace was initialised");
    return kTvmErrorPlatformStackAllocBadFree;
  }
  tvm_crt_error_t err = StackMemoryManager_Free(&g_workspace, ptr);
  if (err != kTvmErrorNoError) {
    TVMAPIErrorf("TVMBackendFreeWorkspace: %p is not the most recent live workspace block; "
                 "blocks must be freed newest first",
                 ptr);
    return err;
  }
  return 0;
}

int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  (void)num_task;
  if (flambda == NULL) {
    TVMAPISetLastError("TVMBackendParallelLaunch: NULL task function");
    return kTvmErrorFunctionCallInvalidArg;
  }
  TVMParallelGroupEnv env;
  env.sync_handle = NULL;
  env.num_task = 1;
  return flambda(0, &env, cdata);
}

int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv) {
  (void)task_id;
  (void)penv;
  return 0;
}

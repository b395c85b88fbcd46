/*
 * Stack (LIFO) allocator over a caller-owned buffer; see stack_allocator.h for the layout.
 * Pointer arithmetic is done on uintptr_t so out-of-range pointers are compared, never
 * dereferenced.
 */
#include <string.h>
#include <tvm/runtime/crt/stack_allocator.h>

#define kAlign ((size_t)TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES)
#define kTagBytes ((size_t)TVM_CRT_STACK_ALLOCATOR_TAG_SIZE_BYTES)

tvm_crt_error_t StackMemoryManager_Init(tvm_workspace_t* tvm_workspace, uint8_t* memory,
                                        size_t size) {
  if (tvm_workspace == NULL) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  tvm_workspace->next_alloc = NULL;
  tvm_workspace->workspace = NULL;
  tvm_workspace->workspace_size = 0;
  if (memory == NULL) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  size_t adjust = (kAlign - ((uintptr_t)memory % kAlign)) % kAlign;
  if (size <= adjust) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  tvm_workspace->workspace = memory + adjust;
  tvm_workspace->next_alloc = tvm_workspace->workspace;
  tvm_workspace->workspace_size = size - adjust;
  return kTvmErrorNoError;
}

tvm_crt_error_t StackMemoryManager_Allocate_Body(tvm_workspace_t* tvm_workspace, size_t nbytes,
                                                 void** out_ptr, int do_lifo_check) {
  if (tvm_workspace == NULL || out_ptr == NULL || tvm_workspace->workspace == NULL) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  size_t tag = do_lifo_check ? kTagBytes : 0;
  if (nbytes > SIZE_MAX - kAlign - tag) {
    return kTvmErrorPlatformNoMemory;
  }
  size_t padded = nbytes + ((kAlign - (nbytes % kAlign)) % kAlign);
  size_t used = (size_t)(tvm_workspace->next_alloc - tvm_workspace->workspace);
  size_t available = tvm_workspace->workspace_size - used;
  if (padded + tag > available) {
    return kTvmErrorPlatformNoMemory;
  }
  uint8_t* block = tvm_workspace->next_alloc;
  if (do_lifo_check) {
    uint32_t value = (uint32_t)(padded + tag) ^ (uint32_t)TVM_CRT_STACK_ALLOCATOR_TAG;
    memcpy(block + padded, &value, sizeof(value));
  }
  tvm_workspace->next_alloc = block + padded + tag;
  *out_ptr = block;
  return kTvmErrorNoError;
}

tvm_crt_error_t StackMemoryManager_Allocate(tvm_workspace_t* tvm_workspace, size_t nbytes,
                                            void** out_ptr) {
  return StackMemoryManager_Allocate_Body(tvm_workspace, nbytes, out_ptr,
                                          TVM_CRT_STACK_ALLOCATOR_LIFO_CHECK_ON);
}

tvm_crt_error_t StackMemoryManager_Free_Body(tvm_workspace_t* tvm_workspace, void* ptr,
                                             int do_lifo_check) {
  if (tvm_workspace == NULL || tvm_workspace->workspace == NULL || ptr == NULL) {
    return kTvmErrorPlatformStackAllocBadFree;
  }
  uintptr_t base = (uintptr_t)tvm_workspace->workspace;
  uintptr_t next = (uintptr_t)tvm_workspace->next_alloc;
  uintptr_t p = (uintptr_t)ptr;
  if (p < base || p > next) {
    return kTvmErrorPlatformStackAllocBadFree;
  }
  if (do_lifo_check) {
    if (next - p < kTagBytes) {
      return kTvmErrorPlatformStackAllocBadFree;
    }
    uint32_t value;
    memcpy(&value, tvm_workspace->next_alloc - kTagBytes, sizeof(value));
    if ((uintptr_t)(value ^ (uint32_t)TVM_CRT_STACK_ALLOCATOR_TAG) != next - p) {
      return kTvmErrorPlatformStackAllocBadFree;
    }
  }
  tvm_workspace->next_alloc = tvm_workspace->workspace + (p - base);
  return kTvmErrorNoError;
}

tvm_crt_error_t StackMemoryManager_Free(tvm_workspace_t* tvm_workspace, void* ptr) {
  return StackMemoryManager_Free_Body(tvm_workspace, ptr, TVM_CRT_STACK_ALLOCATOR_LIFO_CHECK_ON);
}

size_t TVMCrtStackAllocator_UsedBytes(const tvm_workspace_t* tvm_workspace) {
  if (tvm_workspace == NULL || tvm_workspace->workspace == NULL) {
    return 0;
  }
  return (size_t)(tvm_workspace->next_alloc - tvm_workspace->workspace);
}

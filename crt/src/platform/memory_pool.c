/*!
 * \file platform/memory_pool.c
 * \brief TVMPlatformMemoryAllocate/Free over one static pool of TVM_WORKSPACE_SIZE_BYTES, split
 *     into pages of 2^TVM_CRT_PLATFORM_PAGE_SIZE_LOG2 bytes by the page allocator
 *     (page_allocator.h). The allocator is built on first use, so a port calls nothing to set it
 *     up. Not thread-safe, like the rest of the runtime. Part of the "platform" library.
 */
#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/page_allocator.h>
#include <tvm/runtime/crt/platform.h>

/* The union gives the pool the strictest alignment of the basic types (16 bytes on x86-64). */
static union {
  uint8_t bytes[TVM_WORKSPACE_SIZE_BYTES];
  long double align_long_double;
  uint64_t align_uint64;
  void* align_pointer;
} g_pool;
static MemoryManagerInterface* g_pool_manager;

/* The pool's manager, built on the first call. */
static tvm_crt_error_t PoolManager(MemoryManagerInterface** out_manager) {
  if (g_pool_manager == NULL) {
    tvm_crt_error_t err = PageMemoryManagerCreate(&g_pool_manager, g_pool.bytes,
                                                  sizeof(g_pool.bytes),
                                                  TVM_CRT_PLATFORM_PAGE_SIZE_LOG2);
    if (err != kTvmErrorNoError) {
      g_pool_manager = NULL;
      return err;
    }
  }
  *out_manager = g_pool_manager;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMPlatformMemoryAllocate(size_t num_bytes, DLDevice dev, void** out_ptr) {
  MemoryManagerInterface* manager;
  tvm_crt_error_t err = PoolManager(&manager);
  return err != kTvmErrorNoError ? err : manager->Allocate(manager, num_bytes, dev, out_ptr);
}

tvm_crt_error_t TVMPlatformMemoryFree(void* ptr, DLDevice dev) {
  MemoryManagerInterface* manager;
  tvm_crt_error_t err = PoolManager(&manager);
  return err != kTvmErrorNoError ? err : manager->Free(manager, ptr, dev);
}

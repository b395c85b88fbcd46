/*
 * tvm/runtime/crt/page_allocator.h: a page-granular allocator over a caller-owned pool, for
 * platforms that back TVMPlatformMemoryAllocate with a static array instead of a heap.
 *
 * The pool is split into num_pages data pages at its start, followed by the manager and three
 * metadata tables of num_pages entries each (page table, address-lookup table, free list):
 *   num_pages = (pool_size - sizeof(manager)) / (page_size + per-page metadata)
 * The per-page metadata is 88 bytes on 64-bit hosts, so a pool of 128 pages of 256 bytes gives
 * 94 usable pages there (TVMCrtPageAllocator_NumPages reports the count on any target).
 *
 * Allocation rounds up to whole pages and takes the first span on the free list, in the order
 * spans were freed, that is large enough; the whole span is reused, never split. With no such
 * span it takes fresh pages after the highest page used so far. Spans are never merged, so a
 * workload that frees and allocates different sizes can fragment the pool.
 */
#ifndef TVM_RUNTIME_CRT_PAGE_ALLOCATOR_H_
#define TVM_RUNTIME_CRT_PAGE_ALLOCATOR_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief An allocator interface: a port's TVMPlatformMemoryAllocate/Free can forward to it. */
typedef struct MemoryManagerInterface MemoryManagerInterface;

struct MemoryManagerInterface {
  /*!
   * \brief Allocate num_bytes (at least 1 page even for 0 bytes), page aligned relative to the
   * pool. *out_ptr is untouched on failure. \return kTvmErrorNoError or kTvmErrorPlatformNoMemory.
   */
  tvm_crt_error_t (*Allocate)(MemoryManagerInterface* interface, size_t num_bytes, DLDevice dev,
                              void** out_ptr);
  /*!
   * \brief Free a block from Allocate. \return kTvmErrorNoError, or
   * kTvmErrorPlatformMemoryBadFree for a pointer that is not a live allocation (double free).
   */
  tvm_crt_error_t (*Free)(MemoryManagerInterface* interface, void* ptr, DLDevice dev);
  /*! \brief Live allocations (allocations minus frees); 0 when nothing leaks. */
  int vleak_size;
};

/*!
 * \brief Build a page allocator in memory_pool (zeroed first). The manager lives inside the pool.
 * \param page_size_bytes_log2 log2 of the page size (8 -> 256-byte pages), 3..20.
 * \return kTvmErrorNoError, or kTvmErrorFunctionCallInvalidArg when the arguments are invalid
 *   or the pool cannot hold the manager and one page.
 */
tvm_crt_error_t PageMemoryManagerCreate(MemoryManagerInterface** manager, uint8_t* memory_pool,
                                        size_t memory_pool_size_bytes,
                                        size_t page_size_bytes_log2);

/*! \brief Number of usable pages the manager found room for. */
size_t TVMCrtPageAllocator_NumPages(const MemoryManagerInterface* manager);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_CRT_PAGE_ALLOCATOR_H_ */

/*
 * Page allocator over a caller-owned pool (page_allocator.h). Data pages fill the start of the
 * pool; the manager and three tables of max_pages entries follow:
 *   page table  one PageSpan per page, naming the span the page belongs to;
 *   lookup      (address -> span) for every span ever carved, found by linear search;
 *   free list   spans released by Free, in release order, reused first-fit and whole.
 * Linear searches keep the code small; pools on microcontrollers hold tens of pages.
 */
#include <stdint.h>
#include <string.h>
#include <tvm/runtime/crt/page_allocator.h>

typedef struct {
  int64_t first_page; /* index of the span's first page */
  int64_t num_pages;  /* pages in the span */
  uint8_t* data;      /* address of the first page */
} PageSpan;

typedef struct {
  uint8_t* addr;
  PageSpan span;
} LookupEntry;

typedef struct {
  int64_t num_pages; /* key: the span's size */
  PageSpan span;
} FreeEntry;

typedef struct {
  MemoryManagerInterface interface; /* first: the public handle points here */
  uint8_t* pool;
  size_t page_size_bytes;
  size_t max_pages;
  size_t used_pages; /* pages carved so far, from the start of the pool */
  PageSpan* page_table;
  LookupEntry* lookup;
  size_t lookup_count;
  FreeEntry* free_list;
  size_t free_count;
} PageManager;

#define kMetadataBytesPerPage (sizeof(PageSpan) + sizeof(LookupEntry) + sizeof(FreeEntry))
#define kMetadataAlign ((uintptr_t)8)

static LookupEntry* find_lookup(PageManager* mgr, const uint8_t* addr) {
  for (size_t i = 0; i < mgr->lookup_count; i++) {
    if (mgr->lookup[i].addr == addr) {
      return &mgr->lookup[i];
    }
  }
  return NULL;
}

static tvm_crt_error_t PageAllocate(MemoryManagerInterface* interface, size_t num_bytes,
                                    DLDevice dev, void** out_ptr) {
  (void)dev;
  PageManager* mgr = (PageManager*)interface;
  size_t npage = num_bytes / mgr->page_size_bytes + (num_bytes % mgr->page_size_bytes != 0);
  if (npage == 0) {
    npage = 1;
  }
  /* First fit over the free list, in the order spans were freed. */
  for (size_t i = 0; i < mgr->free_count; i++) {
    if ((size_t)mgr->free_list[i].num_pages >= npage) {
      uint8_t* data = mgr->free_list[i].span.data;
      memmove(&mgr->free_list[i], &mgr->free_list[i + 1],
              sizeof(FreeEntry) * (mgr->free_count - i - 1));
      mgr->free_count--;
      mgr->interface.vleak_size++;
      *out_ptr = data;
      return kTvmErrorNoError;
    }
  }
  if (npage > mgr->max_pages - mgr->used_pages) {
    return kTvmErrorPlatformNoMemory;
  }
  PageSpan span;
  span.first_page = (int64_t)mgr->used_pages;
  span.num_pages = (int64_t)npage;
  span.data = mgr->pool + mgr->used_pages * mgr->page_size_bytes;
  for (size_t p = mgr->used_pages; p < mgr->used_pages + npage; p++) {
    mgr->page_table[p] = span;
  }
  mgr->used_pages += npage;
  LookupEntry* entry = find_lookup(mgr, span.data);
  if (entry == NULL) {
    entry = &mgr->lookup[mgr->lookup_count++];
  }
  entry->addr = span.data;
  entry->span = span;
  mgr->interface.vleak_size++;
  *out_ptr = span.data;
  return kTvmErrorNoError;
}

static tvm_crt_error_t PageFree(MemoryManagerInterface* interface, void* ptr, DLDevice dev) {
  (void)dev;
  PageManager* mgr = (PageManager*)interface;
  LookupEntry* entry = find_lookup(mgr, (const uint8_t*)ptr);
  if (entry == NULL) {
    return kTvmErrorPlatformMemoryBadFree;
  }
  for (size_t i = 0; i < mgr->free_count; i++) {
    if (mgr->free_list[i].span.data == entry->addr) {
      return kTvmErrorPlatformMemoryBadFree; /* already free */
    }
  }
  FreeEntry* free_entry = &mgr->free_list[mgr->free_count++];
  free_entry->num_pages = entry->span.num_pages;
  free_entry->span = entry->span;
  mgr->interface.vleak_size--;
  return kTvmErrorNoError;
}

tvm_crt_error_t PageMemoryManagerCreate(MemoryManagerInterface** manager, uint8_t* memory_pool,
                                        size_t memory_pool_size_bytes,
                                        size_t page_size_bytes_log2) {
  if (manager == NULL || memory_pool == NULL || page_size_bytes_log2 < 3 ||
      page_size_bytes_log2 > 20 || memory_pool_size_bytes < sizeof(PageManager)) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  memset(memory_pool, 0, memory_pool_size_bytes);
  size_t page_size = (size_t)1 << page_size_bytes_log2;
  size_t num_pages =
      (memory_pool_size_bytes - sizeof(PageManager)) / (page_size + kMetadataBytesPerPage);
  uintptr_t end = (uintptr_t)memory_pool + memory_pool_size_bytes;
  uintptr_t meta = 0;
  /* Aligning the metadata may cost a few bytes; drop pages until everything fits. */
  for (; num_pages > 0; num_pages--) {
    meta = (uintptr_t)memory_pool + num_pages * page_size;
    meta = (meta + kMetadataAlign - 1) & ~(kMetadataAlign - 1);
    if (meta <= end && end - meta >= sizeof(PageManager) + num_pages * kMetadataBytesPerPage) {
      break;
    }
  }
  if (num_pages == 0) {
    return kTvmErrorFunctionCallInvalidArg;
  }
  uint8_t* cursor = memory_pool + (meta - (uintptr_t)memory_pool);
  PageManager* mgr = (PageManager*)cursor;
  cursor += sizeof(PageManager);
  mgr->page_table = (PageSpan*)cursor;
  cursor += sizeof(PageSpan) * num_pages;
  mgr->lookup = (LookupEntry*)cursor;
  cursor += sizeof(LookupEntry) * num_pages;
  mgr->free_list = (FreeEntry*)cursor;

  mgr->interface.Allocate = PageAllocate;
  mgr->interface.Free = PageFree;
  mgr->interface.vleak_size = 0;
  mgr->pool = memory_pool;
  mgr->page_size_bytes = page_size;
  mgr->max_pages = num_pages;
  mgr->used_pages = 0;
  mgr->lookup_count = 0;
  mgr->free_count = 0;
  *manager = &mgr->interface;
  return kTvmErrorNoError;
}

size_t TVMCrtPageAllocator_NumPages(const MemoryManagerInterface* manager) {
  return manager == NULL ? 0 : ((const PageManager*)manager)->max_pages;
}

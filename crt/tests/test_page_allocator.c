/* Page allocator: spec section 5.5 goldens (94 pages on 64-bit, AllocFreeFifo) and errors. */
#include <stdint.h>
#include <tvm/runtime/crt/page_allocator.h>

#include "test_util.h"

#define kPageLog2 8
#define kPageBytes (1 << kPageLog2)
#define kPoolBytes (128 * kPageBytes)

static union {
  uint8_t bytes[kPoolBytes];
  uint64_t align;
} g_pool;

static const DLDevice kCpu = {kDLCPU, 0};

static MemoryManagerInterface* make(void) {
  MemoryManagerInterface* mm = NULL;
  if (PageMemoryManagerCreate(&mm, g_pool.bytes, sizeof(g_pool.bytes), kPageLog2) !=
      kTvmErrorNoError) {
    return NULL;
  }
  return mm;
}

TEST(UsablePagesGolden) {
  MemoryManagerInterface* mm = make();
  ASSERT_TRUE(mm != NULL);
  if (sizeof(void*) == 8) {
    EXPECT_EQ_INT(TVMCrtPageAllocator_NumPages(mm), 94);
  } else {
    EXPECT_TRUE(TVMCrtPageAllocator_NumPages(mm) >= 94);
  }
  EXPECT_EQ_INT(mm->vleak_size, 0);
}

TEST(AllocFreeFifo) {
  MemoryManagerInterface* mm = make();
  ASSERT_TRUE(mm != NULL);
  int pages = (int)TVMCrtPageAllocator_NumPages(mm);
  void* ptrs[128];
  for (int i = 0; i < pages; i++) {
    ASSERT_EQ_INT(mm->Allocate(mm, 1, kCpu, &ptrs[i]), kTvmErrorNoError);
    EXPECT_EQ_PTR(ptrs[i], g_pool.bytes + (size_t)i * kPageBytes);
    EXPECT_EQ_INT(mm->vleak_size, i + 1);
    memset(ptrs[i], i, kPageBytes); /* whole page writable, metadata untouched */
  }
  void* extra = (void*)&extra;
  EXPECT_EQ_INT(mm->Allocate(mm, 1, kCpu, &extra), kTvmErrorPlatformNoMemory);
  EXPECT_EQ_PTR(extra, &extra);
  for (int i = pages - 1; i >= 0; i--) {
    EXPECT_EQ_INT(((uint8_t*)ptrs[i])[kPageBytes - 1], i);
    ASSERT_EQ_INT(mm->Free(mm, ptrs[i], kCpu), kTvmErrorNoError);
    EXPECT_EQ_INT(mm->vleak_size, i);
  }
  /* Freed last-to-first, so the free list now hands out pages from the top down. */
  for (int i = 0; i < pages; i++) {
    void* p;
    ASSERT_EQ_INT(mm->Allocate(mm, 1, kCpu, &p), kTvmErrorNoError);
    EXPECT_EQ_PTR(p, g_pool.bytes + (size_t)(pages - 1 - i) * kPageBytes);
  }
  EXPECT_EQ_INT(mm->vleak_size, pages);
}

TEST(FirstFitWholeSpans) {
  MemoryManagerInterface* mm = make();
  ASSERT_TRUE(mm != NULL);
  void *a, *b, *c, *d, *e, *f;
  ASSERT_EQ_INT(mm->Allocate(mm, 3 * kPageBytes - 10, kCpu, &a), kTvmErrorNoError); /* 3 pages */
  ASSERT_EQ_INT(mm->Allocate(mm, 0, kCpu, &b), kTvmErrorNoError);                   /* 1 page */
  ASSERT_EQ_INT(mm->Allocate(mm, kPageBytes + 1, kCpu, &c), kTvmErrorNoError);      /* 2 pages */
  EXPECT_EQ_PTR(b, g_pool.bytes + 3 * kPageBytes);
  EXPECT_EQ_PTR(c, g_pool.bytes + 4 * kPageBytes);
  EXPECT_EQ_INT(mm->Free(mm, a, kCpu), kTvmErrorNoError);
  EXPECT_EQ_INT(mm->Free(mm, c, kCpu), kTvmErrorNoError);
  /* 2 pages: the first free span large enough is a (3 pages, reused whole). */
  ASSERT_EQ_INT(mm->Allocate(mm, 2 * kPageBytes, kCpu, &d), kTvmErrorNoError);
  EXPECT_EQ_PTR(d, a);
  ASSERT_EQ_INT(mm->Allocate(mm, 2 * kPageBytes, kCpu, &e), kTvmErrorNoError);
  EXPECT_EQ_PTR(e, c);
  /* Nothing free any more: fresh pages after the highest used. */
  ASSERT_EQ_INT(mm->Allocate(mm, 1, kCpu, &f), kTvmErrorNoError);
  EXPECT_EQ_PTR(f, g_pool.bytes + 6 * kPageBytes);
  EXPECT_EQ_INT(mm->vleak_size, 4);
}

TEST(BadAndDoubleFree) {
  MemoryManagerInterface* mm = make();
  ASSERT_TRUE(mm != NULL);
  void* a;
  ASSERT_EQ_INT(mm->Allocate(mm, 10, kCpu, &a), kTvmErrorNoError);
  EXPECT_EQ_INT(mm->Free(mm, (uint8_t*)a + 1, kCpu), kTvmErrorPlatformMemoryBadFree);
  EXPECT_EQ_INT(mm->Free(mm, NULL, kCpu), kTvmErrorPlatformMemoryBadFree);
  EXPECT_EQ_INT(mm->vleak_size, 1);
  EXPECT_EQ_INT(mm->Free(mm, a, kCpu), kTvmErrorNoError);
  EXPECT_EQ_INT(mm->Free(mm, a, kCpu), kTvmErrorPlatformMemoryBadFree);
  EXPECT_EQ_INT(mm->vleak_size, 0);
}

TEST(TooLargeAndInvalidCreate) {
  MemoryManagerInterface* mm = make();
  ASSERT_TRUE(mm != NULL);
  void* p;
  EXPECT_EQ_INT(mm->Allocate(mm, 95 * kPageBytes * 2, kCpu, &p), kTvmErrorPlatformNoMemory);
  EXPECT_EQ_INT(mm->vleak_size, 0);
  MemoryManagerInterface* other;
  EXPECT_EQ_INT(PageMemoryManagerCreate(&other, g_pool.bytes, 16, kPageLog2),
                kTvmErrorFunctionCallInvalidArg);
  EXPECT_EQ_INT(PageMemoryManagerCreate(&other, NULL, 4096, kPageLog2),
                kTvmErrorFunctionCallInvalidArg);
  EXPECT_EQ_INT(PageMemoryManagerCreate(&other, g_pool.bytes, sizeof(g_pool.bytes), 40),
                kTvmErrorFunctionCallInvalidArg);
  /* An unaligned pool still works: the metadata is aligned inside it. */
  ASSERT_EQ_INT(PageMemoryManagerCreate(&other, g_pool.bytes + 3, 4096, kPageLog2),
                kTvmErrorNoError);
  EXPECT_TRUE(TVMCrtPageAllocator_NumPages(other) >= 10);
  ASSERT_EQ_INT(other->Allocate(other, 1, kCpu, &p), kTvmErrorNoError);
  EXPECT_EQ_PTR(p, g_pool.bytes + 3);
}

int main(void) {
  RUN_TEST(UsablePagesGolden);
  RUN_TEST(AllocFreeFifo);
  RUN_TEST(FirstFitWholeSpans);
  RUN_TEST(BadAndDoubleFree);
  RUN_TEST(TooLargeAndInvalidCreate);
  return TEST_REPORT();
}

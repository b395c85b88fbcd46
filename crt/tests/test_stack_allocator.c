/* Stack allocator: spec section 5.6 goldens (LIFO check on) and error paths. */
#include <stdint.h>
#include <tvm/runtime/crt/stack_allocator.h>

#include "test_util.h"

#define kPoolBytes 1024
static uint8_t g_pool_storage[kPoolBytes + 32];

/* A pool start with exactly 16-byte alignment, so offsets are comparable with the spec. */
static uint8_t* aligned_pool(void) {
  uintptr_t p = (uintptr_t)g_pool_storage;
  return g_pool_storage + ((16 - (p % 16)) % 16);
}

TEST(AllocateGoldenOffsets) {
  tvm_workspace_t ws;
  uint8_t* pool = aligned_pool();
  ASSERT_EQ_INT(StackMemoryManager_Init(&ws, pool, kPoolBytes), kTvmErrorNoError);
  void* p[4];
  const size_t sizes[4] = {1, 2, 24, 1};
  const long expected[4] = {0, 20, 40, 76};
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, sizes[i], &p[i], 1), kTvmErrorNoError);
    EXPECT_EQ_INT((uint8_t*)p[i] - pool, expected[i]);
  }
  /* The tag after the first block is (16 + 4) ^ 0xabcd1234, stored in native byte order. */
  uint32_t tag;
  memcpy(&tag, pool + 16, 4);
  EXPECT_EQ_INT(tag, 20u ^ 0xabcd1234u);
  EXPECT_EQ_INT(TVMCrtStackAllocator_UsedBytes(&ws), 96);
}

TEST(AllocateWithoutTagIsAligned) {
  tvm_workspace_t ws;
  uint8_t* pool = aligned_pool();
  ASSERT_EQ_INT(StackMemoryManager_Init(&ws, pool, kPoolBytes), kTvmErrorNoError);
  void* a;
  void* b;
  ASSERT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, 1, &a, 0), kTvmErrorNoError);
  ASSERT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, 17, &b, 0), kTvmErrorNoError);
  EXPECT_EQ_INT((uint8_t*)b - (uint8_t*)a, 16);
  EXPECT_EQ_INT(TVMCrtStackAllocator_UsedBytes(&ws), 48);
  EXPECT_EQ_INT(StackMemoryManager_Free_Body(&ws, b, 0), kTvmErrorNoError);
  EXPECT_EQ_INT(StackMemoryManager_Free_Body(&ws, a, 0), kTvmErrorNoError);
  EXPECT_EQ_INT(TVMCrtStackAllocator_UsedBytes(&ws), 0);
}

TEST(FreeThenReallocateReusesAddress) {
  tvm_workspace_t ws;
  ASSERT_EQ_INT(StackMemoryManager_Init(&ws, aligned_pool(), kPoolBytes), kTvmErrorNoError);
  void* a;
  void* b;
  void* c;
  ASSERT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, 100, &a, 1), kTvmErrorNoError);
  ASSERT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, 30, &b, 1), kTvmErrorNoError);
  EXPECT_EQ_INT(StackMemoryManager_Free_Body(&ws, b, 1), kTvmErrorNoError);
  ASSERT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, 30, &c, 1), kTvmErrorNoError);
  EXPECT_EQ_PTR(c, b);
  EXPECT_EQ_INT(StackMemoryManager_Free_Body(&ws, c, 1), kTvmErrorNoError);
  EXPECT_EQ_INT(StackMemoryManager_Free_Body(&ws, a, 1), kTvmErrorNoError);
  EXPECT_EQ_INT(TVMCrtStackAllocator_UsedBytes(&ws), 0);
}

TEST(OverAllocate) {
  tvm_workspace_t ws;
  ASSERT_EQ_INT(StackMemoryManager_Init(&ws, aligned_pool(), kPoolBytes), kTvmErrorNoError);
  void* p = (void*)&ws; /* must stay untouched on failure */
  EXPECT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, kPoolBytes, &p, 1),
                kTvmErrorPlatformNoMemory); /* 1024 + 4-byte tag does not fit */
  EXPECT_EQ_PTR(p, &ws);
  EXPECT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, SIZE_MAX, &p, 1), kTvmErrorPlatformNoMemory);
  EXPECT_EQ_INT(TVMCrtStackAllocator_UsedBytes(&ws), 0);
  /* Exactly full: 1020 bytes pad to 1024, which leaves no room for the tag... */
  EXPECT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, 1020, &p, 1), kTvmErrorPlatformNoMemory);
  /* ... but 1008 + pad 0 + tag 4 = 1012 fits, and then 16 more bytes do not. */
  EXPECT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, 1008, &p, 1), kTvmErrorNoError);
  void* q;
  EXPECT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, 16, &q, 1), kTvmErrorPlatformNoMemory);
  EXPECT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, 0, &q, 1), kTvmErrorNoError);
  EXPECT_EQ_INT(TVMCrtStackAllocator_UsedBytes(&ws), 1016);
}

TEST(FreeOutOfOrder) {
  tvm_workspace_t ws;
  ASSERT_EQ_INT(StackMemoryManager_Init(&ws, aligned_pool(), kPoolBytes), kTvmErrorNoError);
  void* a;
  void* b;
  ASSERT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, 16, &a, 1), kTvmErrorNoError);
  ASSERT_EQ_INT(StackMemoryManager_Allocate_Body(&ws, 16, &b, 1), kTvmErrorNoError);
  EXPECT_EQ_INT(StackMemoryManager_Free_Body(&ws, a, 1), kTvmErrorPlatformStackAllocBadFree);
  EXPECT_EQ_INT(TVMCrtStackAllocator_UsedBytes(&ws), 40); /* unchanged */
  EXPECT_EQ_INT(StackMemoryManager_Free_Body(&ws, (uint8_t*)b + 4, 1),
                kTvmErrorPlatformStackAllocBadFree);
  EXPECT_EQ_INT(StackMemoryManager_Free_Body(&ws, NULL, 1), kTvmErrorPlatformStackAllocBadFree);
  EXPECT_EQ_INT(StackMemoryManager_Free_Body(&ws, g_pool_storage + sizeof(g_pool_storage), 1),
                kTvmErrorPlatformStackAllocBadFree);
  EXPECT_EQ_INT(StackMemoryManager_Free_Body(&ws, b, 1), kTvmErrorNoError);
  EXPECT_EQ_INT(StackMemoryManager_Free_Body(&ws, a, 1), kTvmErrorNoError);
  /* Freeing again once empty is caught too. */
  EXPECT_EQ_INT(StackMemoryManager_Free_Body(&ws, a, 1), kTvmErrorPlatformStackAllocBadFree);
}

TEST(PublicApiFollowsConfiguredCheck) {
  tvm_workspace_t ws;
  ASSERT_EQ_INT(StackMemoryManager_Init(&ws, aligned_pool(), kPoolBytes), kTvmErrorNoError);
  void* a;
  void* b;
  ASSERT_EQ_INT(StackMemoryManager_Allocate(&ws, 1, &a), kTvmErrorNoError);
  ASSERT_EQ_INT(StackMemoryManager_Allocate(&ws, 1, &b), kTvmErrorNoError);
#if TVM_CRT_STACK_ALLOCATOR_LIFO_CHECK_ON
  EXPECT_EQ_INT((uint8_t*)b - (uint8_t*)a, 20);
  EXPECT_EQ_INT(StackMemoryManager_Free(&ws, a), kTvmErrorPlatformStackAllocBadFree);
#else
  EXPECT_EQ_INT((uint8_t*)b - (uint8_t*)a, 16);
#endif
  EXPECT_EQ_INT(StackMemoryManager_Free(&ws, b), kTvmErrorNoError);
  EXPECT_EQ_INT(StackMemoryManager_Free(&ws, a), kTvmErrorNoError);
}

TEST(InitialMemoryMisalignment) {
  tvm_workspace_t ws;
  uint8_t* pool = aligned_pool();
  for (size_t skew = 1; skew < 16; skew++) {
    ASSERT_EQ_INT(StackMemoryManager_Init(&ws, pool + skew, 512), kTvmErrorNoError);
    EXPECT_EQ_PTR(ws.workspace, pool + 16);
    EXPECT_EQ_PTR(ws.next_alloc, pool + 16);
    EXPECT_EQ_INT(ws.workspace_size, 512 - (16 - skew));
  }
  EXPECT_EQ_INT(StackMemoryManager_Init(&ws, pool + 1, 15), kTvmErrorFunctionCallInvalidArg);
  EXPECT_EQ_INT(ws.workspace_size, 0);
  void* p;
  EXPECT_EQ_INT(StackMemoryManager_Allocate(&ws, 1, &p), kTvmErrorFunctionCallInvalidArg);
  EXPECT_EQ_INT(StackMemoryManager_Init(&ws, NULL, 64), kTvmErrorFunctionCallInvalidArg);
}

int main(void) {
  RUN_TEST(AllocateGoldenOffsets);
  RUN_TEST(AllocateWithoutTagIsAligned);
  RUN_TEST(FreeThenReallocateReusesAddress);
  RUN_TEST(OverAllocate);
  RUN_TEST(FreeOutOfOrder);
  RUN_TEST(PublicApiFollowsConfiguredCheck);
  RUN_TEST(InitialMemoryMisalignment);
  return TEST_REPORT();
}

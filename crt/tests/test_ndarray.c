/* TVMCrtNDArray: sizes, owned vs viewed data, allocation failures without leaks. */
#include <stdint.h>
#include <tvm/runtime/c_runtime_api.h>
#include <string.h>
#include <tvm/runtime/crt/ndarray.h>

#include "test_platform.h"
#include "test_util.h"

static const DLDevice kCpu = {kDLCPU, 0};

TEST(DataSizeBytes) {
  int64_t shape[3] = {2, 3, 4};
  size_t n = 0;
  DLDataType f32 = {kDLFloat, 32, 1};
  DLDataType i4 = {kDLInt, 4, 1};
  DLDataType u8x4 = {kDLUInt, 8, 4};
  DLDataType b1 = {kDLUInt, 1, 1};
  EXPECT_EQ_INT(TVMCrtNDArray_DataSizeBytes(3, shape, f32, &n), kTvmErrorNoError);
  EXPECT_EQ_INT(n, 96);
  EXPECT_EQ_INT(TVMCrtNDArray_DataSizeBytes(2, shape, i4, &n), kTvmErrorNoError);
  EXPECT_EQ_INT(n, 6); /* sub-byte elements take a whole byte each */
  EXPECT_EQ_INT(TVMCrtNDArray_DataSizeBytes(1, shape, u8x4, &n), kTvmErrorNoError);
  EXPECT_EQ_INT(n, 8);
  EXPECT_EQ_INT(TVMCrtNDArray_DataSizeBytes(1, shape, b1, &n), kTvmErrorNoError);
  EXPECT_EQ_INT(n, 2);
  EXPECT_EQ_INT(TVMCrtNDArray_DataSizeBytes(0, NULL, f32, &n), kTvmErrorNoError);
  EXPECT_EQ_INT(n, 4); /* a scalar */
  int64_t zero[2] = {0, 5};
  EXPECT_EQ_INT(TVMCrtNDArray_DataSizeBytes(2, zero, f32, &n), kTvmErrorNoError);
  EXPECT_EQ_INT(n, 0);
  int64_t negative[1] = {-1};
  EXPECT_EQ_INT(TVMCrtNDArray_DataSizeBytes(1, negative, f32, &n), kTvmErrorFunctionCallInvalidArg);
  int64_t huge[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 16};
  EXPECT_EQ_INT(TVMCrtNDArray_DataSizeBytes(3, huge, f32, &n), kTvmErrorFunctionCallInvalidArg);
  int64_t many[TVM_CRT_MAX_NDIM + 1];
  for (int i = 0; i <= TVM_CRT_MAX_NDIM; i++) many[i] = 1;
  EXPECT_EQ_INT(TVMCrtNDArray_DataSizeBytes(TVM_CRT_MAX_NDIM + 1, many, f32, &n),
                kTvmErrorFunctionCallInvalidArg);
  DLDataType zero_bits = {kDLFloat, 0, 1};
  EXPECT_EQ_INT(TVMCrtNDArray_DataSizeBytes(1, shape, zero_bits, &n),
                kTvmErrorFunctionCallInvalidArg);
}

TEST(EmptyOwnsZeroedData) {
  int live = TestPlatform_LiveAllocations();
  int64_t shape[2] = {3, 4};
  DLDataType i16 = {kDLInt, 16, 1};
  TVMCrtNDArray* a = NULL;
  ASSERT_EQ_INT(TVMCrtNDArray_Empty(2, shape, i16, kCpu, &a), kTvmErrorNoError);
  EXPECT_EQ_PTR(&a->dl_tensor, a); /* a TVMCrtNDArray* is a DLTensor* */
  EXPECT_EQ_INT(a->dl_tensor.ndim, 2);
  EXPECT_EQ_PTR(a->dl_tensor.shape, a->shape);
  EXPECT_EQ_INT(a->dl_tensor.shape[1], 4);
  EXPECT_TRUE(a->dl_tensor.strides == NULL);
  EXPECT_EQ_INT(a->dl_tensor.byte_offset, 0);
  shape[1] = 99; /* the shape was copied */
  EXPECT_EQ_INT(a->dl_tensor.shape[1], 4);
  const int16_t* d = (const int16_t*)a->dl_tensor.data;
  int zeros = 0;
  for (int i = 0; i < 12; i++) zeros += d[i] == 0;
  EXPECT_EQ_INT(zeros, 12);
  EXPECT_EQ_INT(TestPlatform_LiveAllocations(), live + 2);
  EXPECT_EQ_INT(TVMCrtNDArray_Release(a), kTvmErrorNoError);
  EXPECT_EQ_INT(TestPlatform_LiveAllocations(), live);
  EXPECT_EQ_INT(TVMCrtNDArray_Release(NULL), kTvmErrorNoError);
}

TEST(ViewLeavesDataAlone) {
  static float buffer[6] = {1, 2, 3, 4, 5, 6};
  int64_t shape[1] = {6};
  DLDataType f32 = {kDLFloat, 32, 1};
  TVMCrtNDArray* v = NULL;
  ASSERT_EQ_INT(TVMCrtNDArray_CreateView(buffer, 1, shape, f32, kCpu, &v), kTvmErrorNoError);
  EXPECT_EQ_PTR(v->dl_tensor.data, buffer);
  /* Releasing a view must not free the static buffer (ASan would report a bad free). */
  EXPECT_EQ_INT(TVMArrayFree(&v->dl_tensor), 0);
  EXPECT_TRUE(buffer[5] == 6.0f);
  EXPECT_EQ_INT(TVMCrtNDArray_CreateView(NULL, 1, shape, f32, kCpu, &v),
                kTvmErrorFunctionCallInvalidArg);
}

TEST(AllocationFailuresDoNotLeak) {
  int live = TestPlatform_LiveAllocations();
  int64_t shape[1] = {16};
  DLDataType f32 = {kDLFloat, 32, 1};
  TVMCrtNDArray* a = (TVMCrtNDArray*)&a;
  TestPlatform_FailAllocationAfter(0); /* the struct */
  EXPECT_EQ_INT(TVMCrtNDArray_Empty(1, shape, f32, kCpu, &a), kTvmErrorPlatformNoMemory);
  TestPlatform_FailAllocationAfter(1); /* the data */
  EXPECT_EQ_INT(TVMCrtNDArray_Empty(1, shape, f32, kCpu, &a), kTvmErrorPlatformNoMemory);
  EXPECT_EQ_PTR(a, &a);
  TestPlatform_FailAllocationAfter(-1);
  EXPECT_EQ_INT(TestPlatform_LiveAllocations(), live);
  TVMArrayHandle h;
  EXPECT_EQ_INT(TVMArrayAlloc(shape, 1, kDLFloat, 32, 1, kDLCPU, 0, &h), 0);
  EXPECT_EQ_INT(h->shape[0], 16);
  EXPECT_EQ_INT(TVMArrayFree(h), 0);
  EXPECT_TRUE(TVMArrayAlloc(shape, 1, kDLFloat, 0, 1, kDLCPU, 0, &h) != 0);
  EXPECT_EQ_INT(TestPlatform_LiveAllocations(), live);
}

TEST(OnlyLiveTensorsAreReleased) {
  int live = TestPlatform_LiveAllocations();
  static float buffer[2];
  int64_t shape[1] = {2};
  DLDataType f32 = {kDLFloat, 32, 1};
  TVMCrtNDArray *a = NULL, *b = NULL, *c = NULL;
  ASSERT_EQ_INT(TVMCrtNDArray_Empty(1, shape, f32, kCpu, &a), kTvmErrorNoError);
  ASSERT_EQ_INT(TVMCrtNDArray_CreateView(buffer, 1, shape, f32, kCpu, &b), kTvmErrorNoError);
  ASSERT_EQ_INT(TVMCrtNDArray_Empty(1, shape, f32, kCpu, &c), kTvmErrorNoError);
  EXPECT_TRUE(TVMCrtNDArray_IsLive(a) && TVMCrtNDArray_IsLive(b) && TVMCrtNDArray_IsLive(c));
  /* the middle of the list, then a handle that is no longer live: refused, nothing freed */
  EXPECT_EQ_INT(TVMCrtNDArray_Release(b), kTvmErrorNoError);
  EXPECT_TRUE(!TVMCrtNDArray_IsLive(b));
  EXPECT_EQ_INT(TVMCrtNDArray_Release(b), kTvmErrorFunctionCallInvalidArg);
  TVMCrtNDArray stranger;
  memset(&stranger, 0, sizeof(stranger));
  EXPECT_EQ_INT(TVMCrtNDArray_Release(&stranger), kTvmErrorFunctionCallInvalidArg);
  EXPECT_TRUE(TVMArrayFree(&stranger.dl_tensor) != 0);
  EXPECT_EQ_INT(TestPlatform_LiveAllocations(), live + 4);
  /* the rest at once, as a new RPC session does */
  EXPECT_EQ_INT((int)TVMCrtNDArray_ReleaseAll(), 2);
  EXPECT_TRUE(!TVMCrtNDArray_IsLive(a) && !TVMCrtNDArray_IsLive(c));
  EXPECT_EQ_INT(TestPlatform_LiveAllocations(), live);
  EXPECT_EQ_INT((int)TVMCrtNDArray_ReleaseAll(), 0);
}

int main(void) {
  TestPlatform_Reset();
  RUN_TEST(DataSizeBytes);
  RUN_TEST(EmptyOwnsZeroedData);
  RUN_TEST(ViewLeavesDataAlone);
  RUN_TEST(AllocationFailuresDoNotLeak);
  RUN_TEST(OnlyLiveTensorsAreReleased);
  return TEST_REPORT();
}

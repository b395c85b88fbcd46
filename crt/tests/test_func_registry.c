/* Function registries: spec section 5.4 goldens, const and mutable registries. */
#include <stdint.h>
#include <tvm/runtime/crt/func_registry.h>

#include "test_util.h"

static int FooFn(TVMValue* a, int* t, int n, TVMValue* r, int* rt, void* h) {
  (void)a; (void)t; (void)n; (void)r; (void)rt; (void)h;
  return 1;
}
static int BarFn(TVMValue* a, int* t, int n, TVMValue* r, int* rt, void* h) {
  (void)a; (void)t; (void)n; (void)r; (void)rt; (void)h;
  return 2;
}

static void check_strcmp(const char* entry, const char* name, int expected, long cursor_advance) {
  const char* cursor = entry;
  EXPECT_EQ_INT(TVMCrtFuncRegistry_StrCmpCursor(&cursor, name), expected);
  EXPECT_EQ_INT(cursor - entry, cursor_advance);
  EXPECT_EQ_INT(*cursor, '\0');
}

TEST(StrCmpCursorGoldens) {
  check_strcmp("Foo", "Foo", 0, 3);
  check_strcmp("Foo", "Bar", 'F' - 'B', 3);
  check_strcmp("Foo", "", 'F', 3);
  check_strcmp("Fabulous", "Fab", 'u', 8);
  check_strcmp("Fab", "Fabulous", -'u', 3);
}

TEST(StrCmpCursorScan) {
  static const char kBlob[] = "Foo\0Bar\0Whoops\0";
  const char* cursor = kBlob;
  EXPECT_TRUE(TVMCrtFuncRegistry_StrCmpCursor(&cursor, "Bar") > 0);
  EXPECT_EQ_PTR(cursor, kBlob + 3);
  cursor++;
  EXPECT_EQ_INT(TVMCrtFuncRegistry_StrCmpCursor(&cursor, "Bar"), 0);
  EXPECT_EQ_PTR(cursor, kBlob + 7);
  cursor++;
  EXPECT_TRUE(TVMCrtFuncRegistry_StrCmpCursor(&cursor, "Whoopsie") < 0);
  EXPECT_EQ_PTR(cursor, kBlob + 14);
}

TEST(EmptyRegistry) {
  static const char kNames[] = "\x00\x00";
  TVMFuncRegistry reg = {kNames, NULL};
  tvm_function_index_t idx = 77;
  TVMBackendPackedCFunc f;
  EXPECT_EQ_INT(TVMFuncRegistry_GetNumFuncs(&reg), 0);
  EXPECT_EQ_INT(TVMFuncRegistry_Lookup(&reg, "Foo", &idx), kTvmErrorFunctionNameNotFound);
  EXPECT_EQ_INT(idx, 77);
  EXPECT_EQ_INT(TVMFuncRegistry_GetByIndex(&reg, 0, &f), kTvmErrorFunctionIndexInvalid);
}

TEST(ConstGlobalRegistry) {
  static const char kNames[] = "\x02\x00" "Foo\0" "Bar\0";
  static const TVMBackendPackedCFunc kFuncs[2] = {FooFn, BarFn};
  TVMFuncRegistry reg = {kNames, kFuncs};
  tvm_function_index_t idx = 99;
  EXPECT_EQ_INT(TVMFuncRegistry_GetNumFuncs(&reg), 2);
  EXPECT_EQ_INT(TVMFuncRegistry_Lookup(&reg, "Foo", &idx), kTvmErrorNoError);
  EXPECT_EQ_INT(idx, 0);
  EXPECT_EQ_INT(TVMFuncRegistry_Lookup(&reg, "Bar", &idx), kTvmErrorNoError);
  EXPECT_EQ_INT(idx, 1);
  EXPECT_EQ_INT(TVMFuncRegistry_Lookup(&reg, "Baz", &idx), kTvmErrorFunctionNameNotFound);
  EXPECT_EQ_INT(idx, 1);
  EXPECT_EQ_INT(TVMFuncRegistry_Lookup(&reg, "Fo", &idx), kTvmErrorFunctionNameNotFound);
  TVMBackendPackedCFunc f = NULL;
  EXPECT_EQ_INT(TVMFuncRegistry_GetByIndex(&reg, 1, &f), kTvmErrorNoError);
  EXPECT_TRUE(f == BarFn);
  EXPECT_EQ_INT(TVMFuncRegistry_GetByIndex(&reg, 2, &f), kTvmErrorFunctionIndexInvalid);
  const char* name = NULL;
  EXPECT_EQ_INT(TVMCrtFuncRegistry_GetName(&reg, 1, &name), kTvmErrorNoError);
  EXPECT_EQ_STR(name, "Bar");
  EXPECT_EQ_INT(TVMCrtFuncRegistry_GetName(&reg, 2, &name), kTvmErrorFunctionIndexInvalid);
}

static union {
  uint8_t bytes[512];
  void* align;
} g_buf;

TEST(MutableCreateSizes) {
  TVMMutableFuncRegistry reg;
  size_t entry = kTvmAverageFuncEntrySizeBytes;
  EXPECT_EQ_INT(entry, 11 + sizeof(void*));
  EXPECT_EQ_INT(TVMMutableFuncRegistry_Create(&reg, g_buf.bytes, entry - 1), kTvmErrorBufferTooSmall);
  ASSERT_EQ_INT(TVMMutableFuncRegistry_Create(&reg, g_buf.bytes, entry * 7), kTvmErrorNoError);
  EXPECT_EQ_INT(reg.max_functions, 7);
  EXPECT_EQ_INT(TVMFuncRegistry_GetNumFuncs(&reg.registry), 0);
  EXPECT_EQ_INT(g_buf.bytes[2], 0); /* end marker */
  /* Pointer array at the end of the buffer, pointer-aligned. */
  uintptr_t funcs = (uintptr_t)reg.registry.funcs;
  EXPECT_EQ_INT(funcs % sizeof(void*), 0);
  EXPECT_TRUE(funcs + 7 * sizeof(void*) <= (uintptr_t)g_buf.bytes + entry * 7);
  EXPECT_TRUE(funcs + 8 * sizeof(void*) > (uintptr_t)g_buf.bytes + entry * 7);
}

TEST(MutableSetLayoutAndRules) {
  TVMMutableFuncRegistry reg;
  ASSERT_EQ_INT(TVMMutableFuncRegistry_Create(&reg, g_buf.bytes, sizeof(g_buf.bytes)),
                kTvmErrorNoError);
  EXPECT_EQ_INT(TVMMutableFuncRegistry_Set(&reg, "a", FooFn, 0), kTvmErrorNoError);
  EXPECT_EQ_INT(TVMMutableFuncRegistry_Set(&reg, "bc", BarFn, 0), kTvmErrorNoError);
  EXPECT_EQ_MEM(g_buf.bytes, "\x02\x00" "a\0" "bc\0" "\0", 8);
  EXPECT_EQ_INT(TVMMutableFuncRegistry_Set(&reg, "a", BarFn, 0), kTvmErrorFunctionAlreadyDefined);
  tvm_function_index_t idx;
  TVMBackendPackedCFunc f;
  ASSERT_EQ_INT(TVMFuncRegistry_Lookup(&reg.registry, "a", &idx), kTvmErrorNoError);
  TVMFuncRegistry_GetByIndex(&reg.registry, idx, &f);
  EXPECT_TRUE(f == FooFn);
  EXPECT_EQ_INT(TVMMutableFuncRegistry_Set(&reg, "a", BarFn, 1), kTvmErrorNoError);
  TVMFuncRegistry_GetByIndex(&reg.registry, idx, &f);
  EXPECT_TRUE(f == BarFn);
  EXPECT_EQ_INT(TVMFuncRegistry_GetNumFuncs(&reg.registry), 2);
  EXPECT_EQ_INT(TVMMutableFuncRegistry_Set(&reg, "", FooFn, 0), kTvmErrorFunctionCallInvalidArg);
}

TEST(MutableFullWhenNameOverflowsByOneCharacter) {
  TVMMutableFuncRegistry reg;
  ASSERT_EQ_INT(TVMMutableFuncRegistry_Create(&reg, g_buf.bytes, 100), kTvmErrorNoError);
  /* Room for names: from the end marker (offset 2) to the pointer array. A name needs its
   * length + NUL + the new end marker. */
  size_t room = (size_t)((const uint8_t*)reg.registry.funcs - (g_buf.bytes + 2));
  char name[128];
  memset(name, 'x', room - 1);
  name[room - 1] = '\0'; /* one character too long */
  EXPECT_EQ_INT(TVMMutableFuncRegistry_Set(&reg, name, FooFn, 0), kTvmErrorFunctionRegistryFull);
  EXPECT_EQ_INT(TVMFuncRegistry_GetNumFuncs(&reg.registry), 0);
  name[room - 2] = '\0'; /* exactly fits */
  EXPECT_EQ_INT(TVMMutableFuncRegistry_Set(&reg, name, FooFn, 0), kTvmErrorNoError);
  EXPECT_EQ_INT(TVMMutableFuncRegistry_Set(&reg, "y", FooFn, 0), kTvmErrorFunctionRegistryFull);
  EXPECT_EQ_INT(TVMFuncRegistry_GetNumFuncs(&reg.registry), 1);
  tvm_function_index_t idx = 5;
  EXPECT_EQ_INT(TVMFuncRegistry_Lookup(&reg.registry, name, &idx), kTvmErrorNoError);
  EXPECT_EQ_INT(idx, 0);
}

TEST(MutableFullWhenPointerSlotsRunOut) {
  TVMMutableFuncRegistry reg;
  size_t entry = kTvmAverageFuncEntrySizeBytes;
  ASSERT_EQ_INT(TVMMutableFuncRegistry_Create(&reg, g_buf.bytes, entry * 4), kTvmErrorNoError);
  ASSERT_EQ_INT(reg.max_functions, 4);
  const char* names[4] = {"a", "b", "c", "d"};
  for (int i = 0; i < 4; i++) {
    EXPECT_EQ_INT(TVMMutableFuncRegistry_Set(&reg, names[i], FooFn, 0), kTvmErrorNoError);
  }
  EXPECT_EQ_INT(TVMMutableFuncRegistry_Set(&reg, "e", FooFn, 0), kTvmErrorFunctionRegistryFull);
  EXPECT_EQ_INT(TVMFuncRegistry_GetNumFuncs(&reg.registry), 4);
  /* Replacing an existing entry still works when full. */
  EXPECT_EQ_INT(TVMMutableFuncRegistry_Set(&reg, "c", BarFn, 1), kTvmErrorNoError);
  for (int i = 0; i < 4; i++) {
    tvm_function_index_t idx;
    EXPECT_EQ_INT(TVMFuncRegistry_Lookup(&reg.registry, names[i], &idx), kTvmErrorNoError);
    EXPECT_EQ_INT(idx, i);
  }
}

int main(void) {
  RUN_TEST(StrCmpCursorGoldens);
  RUN_TEST(StrCmpCursorScan);
  RUN_TEST(EmptyRegistry);
  RUN_TEST(ConstGlobalRegistry);
  RUN_TEST(MutableCreateSizes);
  RUN_TEST(MutableSetLayoutAndRules);
  RUN_TEST(MutableFullWhenNameOverflowsByOneCharacter);
  RUN_TEST(MutableFullWhenPointerSlotsRunOut);
  return TEST_REPORT();
}

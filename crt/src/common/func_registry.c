/*
 * Function registries: the read-only blob form (generated code, executor modules) and the mutable
 * form that grows in a caller-owned buffer (the global registry). Layout in func_registry.h.
 */
#include <stdint.h>
#include <string.h>
#include <tvm/runtime/crt/func_registry.h>

int TVMCrtFuncRegistry_StrCmpCursor(const char** cursor, const char* name) {
  const char* c = *cursor;
  int result = 0;
  for (;;) {
    unsigned char a = (unsigned char)*c;
    unsigned char b = (unsigned char)*name;
    if (a != b) {
      result = (int)a - (int)b;
      break;
    }
    if (a == '\0') {
      break;
    }
    c++;
    name++;
  }
  while (*c != '\0') {
    c++;
  }
  *cursor = c;
  return result;
}

uint16_t TVMFuncRegistry_GetNumFuncs(const TVMFuncRegistry* reg) {
  const unsigned char* n = (const unsigned char*)reg->names;
  return (uint16_t)(n[0] | (n[1] << 8));
}

static void set_num_funcs(TVMFuncRegistry* reg, uint16_t count) {
  unsigned char* n = (unsigned char*)reg->names;
  n[0] = (unsigned char)(count & 0xff);
  n[1] = (unsigned char)(count >> 8);
}

tvm_crt_error_t TVMFuncRegistry_Lookup(const TVMFuncRegistry* reg, const char* name,
                                       tvm_function_index_t* function_index) {
  uint16_t count = TVMFuncRegistry_GetNumFuncs(reg);
  const char* cursor = reg->names + 2;
  for (uint16_t idx = 0; idx < count; idx++) {
    if (TVMCrtFuncRegistry_StrCmpCursor(&cursor, name) == 0) {
      *function_index = idx;
      return kTvmErrorNoError;
    }
    cursor++;
  }
  return kTvmErrorFunctionNameNotFound;
}

tvm_crt_error_t TVMFuncRegistry_GetByIndex(const TVMFuncRegistry* reg,
                                           tvm_function_index_t index,
                                           TVMBackendPackedCFunc* out_func) {
  if (index >= TVMFuncRegistry_GetNumFuncs(reg)) {
    return kTvmErrorFunctionIndexInvalid;
  }
  *out_func = reg->funcs[index];
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMCrtFuncRegistry_GetName(const TVMFuncRegistry* reg, tvm_function_index_t index,
                                           const char** out_name) {
  if (index >= TVMFuncRegistry_GetNumFuncs(reg)) {
    return kTvmErrorFunctionIndexInvalid;
  }
  const char* cursor = reg->names + 2;
  for (tvm_function_index_t i = 0; i < index; i++) {
    cursor += strlen(cursor) + 1;
  }
  *out_name = cursor;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMMutableFuncRegistry_Create(TVMMutableFuncRegistry* reg, uint8_t* buffer,
                                              size_t buffer_size_bytes) {
  if (reg == NULL || buffer == NULL || buffer_size_bytes < kTvmAverageFuncEntrySizeBytes) {
    return kTvmErrorBufferTooSmall;
  }
  size_t max_functions = buffer_size_bytes / kTvmAverageFuncEntrySizeBytes;
  if (max_functions > UINT16_MAX) {
    max_functions = UINT16_MAX;
  }
  /* Pointer array at the end of the buffer, aligned down to a pointer boundary. */
  uintptr_t end = (uintptr_t)buffer + buffer_size_bytes;
  uintptr_t funcs = end - max_functions * sizeof(TVMBackendPackedCFunc);
  funcs -= funcs % sizeof(TVMBackendPackedCFunc);
  while (funcs < (uintptr_t)buffer + 3 && max_functions > 0) {
    max_functions--;
    funcs += sizeof(TVMBackendPackedCFunc);
  }
  if (max_functions == 0) {
    return kTvmErrorBufferTooSmall;
  }
  reg->registry.names = (const char*)buffer;
  reg->registry.funcs = (const TVMBackendPackedCFunc*)(buffer + (funcs - (uintptr_t)buffer));
  reg->max_functions = max_functions;
  buffer[0] = 0;
  buffer[1] = 0;
  buffer[2] = 0;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMMutableFuncRegistry_Set(TVMMutableFuncRegistry* reg, const char* name,
                                           TVMBackendPackedCFunc func, int override) {
  if (name == NULL || name[0] == '\0') {
    return kTvmErrorFunctionCallInvalidArg;
  }
  TVMBackendPackedCFunc* funcs = (TVMBackendPackedCFunc*)reg->registry.funcs;
  tvm_function_index_t idx;
  if (TVMFuncRegistry_Lookup(&reg->registry, name, &idx) == kTvmErrorNoError) {
    if (!override) {
      return kTvmErrorFunctionAlreadyDefined;
    }
    funcs[idx] = func;
    return kTvmErrorNoError;
  }
  uint16_t count = TVMFuncRegistry_GetNumFuncs(&reg->registry);
  if (count >= reg->max_functions) {
    return kTvmErrorFunctionRegistryFull;
  }
  /* Find the end marker: the empty name after the last entry. */
  char* end_marker = (char*)reg->registry.names + 2;
  for (uint16_t i = 0; i < count; i++) {
    end_marker += strlen(end_marker) + 1;
  }
  size_t room = (size_t)((const char*)funcs - end_marker);
  size_t name_len = strlen(name);
  if (name_len + 2 > room) { /* name, its NUL, and the new end marker */
    return kTvmErrorFunctionRegistryFull;
  }
  memcpy(end_marker, name, name_len + 1);
  end_marker[name_len + 1] = '\0';
  funcs[count] = func;
  set_num_funcs(&reg->registry, (uint16_t)(count + 1));
  return kTvmErrorNoError;
}

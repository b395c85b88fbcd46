/*
 * The core of the C runtime API: the global function registry, the module table and handle
 * encoding, TVMFuncCall, device memory and copies, and runtime.SystemLib. It knows no module
 * beyond the system library: executors, the time evaluator and other modules register
 * themselves through module_table.h (for a host-driven build, MicroTVMRpcServerInit calls their
 * register functions).
 *
 * Handles: see module_table.h. All state is static; nothing here is thread-safe.
 */
#include <stdint.h>
#include <string.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/func_registry.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/crt/ndarray.h>
#include <tvm/runtime/crt/platform.h>

#include "module_table.h"

/* Function pointers travel through void* handles (TVMFuncRegisterGlobal); they must fit. */
typedef char tvm_crt_check_fn_ptr_size[sizeof(TVMBackendPackedCFunc) == sizeof(void*) ? 1 : -1];

static const DLDevice kCpu = {kDLCPU, 0};

/* ---- Global registry --------------------------------------------------------------------- */

static union {
  uint8_t bytes[TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES];
  void* align_pointer;
  int64_t align_int64;
} g_global_registry_storage;
static TVMMutableFuncRegistry g_global_registry;
static int g_runtime_initialized;

/* ---- Module table ------------------------------------------------------------------------ */

typedef struct {
  const TVMModule* module;
  TVMCrtModuleFreeHook on_free;
} ModuleSlot;

static ModuleSlot g_modules[TVM_CRT_MAX_REGISTERED_MODULES];

/* ---- Function spaces (module indices above the globals) ---------------------------------- */

static TVMCrtFunctionSpace* g_function_spaces;

static const TVMCrtFunctionSpace* function_space_of(uint16_t module_index) {
  const TVMCrtFunctionSpace* space = g_function_spaces;
  while (space != NULL && space->module_index != module_index) {
    space = space->next;
  }
  return space;
}

tvm_crt_error_t TVMCrtModule_RegisterFunctionSpace(TVMCrtFunctionSpace* space) {
  if (space == NULL || space->call == NULL || space->module_index <= TVM_CRT_GLOBAL_MODULE_INDEX ||
      space->module_index > TVM_CRT_MAX_MODULE_INDEX) {
    TVMAPIErrorf("function space: NULL space or call, or module index not in %u..%u",
                 (unsigned)TVM_CRT_GLOBAL_MODULE_INDEX + 1u, (unsigned)TVM_CRT_MAX_MODULE_INDEX);
    return kTvmErrorFunctionCallInvalidArg;
  }
  const TVMCrtFunctionSpace* owner = function_space_of(space->module_index);
  if (owner == space) {
    return kTvmErrorNoError;
  }
  if (owner != NULL) {
    TVMAPIErrorf("function space: module index 0x%x is already taken",
                 (unsigned)space->module_index);
    return kTvmErrorFunctionAlreadyDefined;
  }
  space->next = g_function_spaces;
  g_function_spaces = space;
  return kTvmErrorNoError;
}

static const char kEmptyRegistryNames[] = "\x00\x00"; /* count 0, then the end marker */
static const TVMFuncRegistry kEmptyRegistry = {kEmptyRegistryNames, NULL};
static const TVMModule kEmptySystemLib = {&kEmptyRegistry};
static const TVMModule* g_system_lib = &kEmptySystemLib;
static int g_system_lib_index = -1;

TVMFunctionHandle TVMCrtModule_FunctionHandle(uint16_t module_index, uint16_t function_index) {
  uint32_t h = ((uint32_t)(module_index | 0x8000u) << 16) | (uint32_t)(function_index | 0x8000u);
  return (TVMFunctionHandle)(uintptr_t)h;
}

static int decode_function_handle(TVMFunctionHandle handle, uint16_t* module_index,
                                  uint16_t* function_index) {
  uintptr_t h = (uintptr_t)handle;
  if ((uint32_t)h != h || (h & 0x80000000u) == 0 || (h & 0x8000u) == 0) {
    return 0;
  }
  *module_index = (uint16_t)((h >> 16) & 0x7fffu);
  *function_index = (uint16_t)(h & 0x7fffu);
  return 1;
}

static int decode_module_handle(TVMModuleHandle handle, uint16_t* module_index) {
  uintptr_t h = (uintptr_t)handle;
  if (h < 0x8000u || h > 0xffffu) {
    return 0;
  }
  uint16_t idx = (uint16_t)(h & 0x7fffu);
  if (idx >= TVM_CRT_MAX_REGISTERED_MODULES || g_modules[idx].module == NULL) {
    return 0;
  }
  *module_index = idx;
  return 1;
}

tvm_crt_error_t TVMCrtModule_Register(const TVMModule* mod, TVMCrtModuleFreeHook on_free,
                                      TVMModuleHandle* out_handle) {
  if (mod == NULL || mod->registry == NULL || out_handle == NULL) {
    TVMAPISetLastError("module registration: NULL module, registry or handle pointer");
    return kTvmErrorFunctionCallInvalidArg;
  }
  for (uint16_t idx = 0; idx < TVM_CRT_MAX_REGISTERED_MODULES; idx++) {
    if (g_modules[idx].module == NULL) {
      g_modules[idx].module = mod;
      g_modules[idx].on_free = on_free;
      *out_handle = (TVMModuleHandle)(uintptr_t)(idx | 0x8000u);
      return kTvmErrorNoError;
    }
  }
  TVMAPIErrorf("module table full: all %d slots are in use; raise TVM_CRT_MAX_REGISTERED_MODULES",
               TVM_CRT_MAX_REGISTERED_MODULES);
  return kTvmErrorFunctionRegistryFull;
}

tvm_crt_error_t TVMModCreateFromCModule(const TVMModule* mod, TVMModuleHandle* out_handle) {
  return TVMCrtModule_Register(mod, NULL, out_handle);
}

tvm_crt_error_t TVMCrtSystemLib_Set(const TVMModule* mod) {
  if (mod == NULL || mod->registry == NULL) {
    TVMAPISetLastError("TVMCrtSystemLib_Set: NULL module or registry");
    return kTvmErrorFunctionCallInvalidArg;
  }
  if (g_system_lib_index >= 0) {
    TVMAPISetLastError("TVMCrtSystemLib_Set: the system library was already handed out");
    return kTvmErrorExecutorModuleAlreadyCreated;
  }
  g_system_lib = mod;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMCrtSystemLib_GetHandle(TVMModuleHandle* out_handle) {
  if (g_system_lib_index < 0) {
    TVMModuleHandle handle;
    tvm_crt_error_t err = TVMCrtModule_Register(g_system_lib, NULL, &handle);
    if (err != kTvmErrorNoError) {
      return err;
    }
    g_system_lib_index = (int)((uintptr_t)handle & 0x7fffu);
  }
  *out_handle = (TVMModuleHandle)(uintptr_t)((unsigned)g_system_lib_index | 0x8000u);
  return kTvmErrorNoError;
}

int TVMCrtSystemLib_IsHandle(TVMModuleHandle handle) {
  return g_system_lib_index >= 0 &&
         (uintptr_t)handle == (uintptr_t)((unsigned)g_system_lib_index | 0x8000u);
}

/* ---- Built-in global functions ----------------------------------------------------------- */

static int SystemLibPacked(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                           int* ret_tcode, void* resource_handle) {
  (void)args;
  (void)resource_handle;
  /* TVM passes no argument, newer TVM an optional symbol prefix (ignored: one system lib). */
  if (num_args > 1 || (num_args == 1 && type_codes[0] != kTVMStr)) {
    TVMAPISetLastError("runtime.SystemLib: expected no argument or one str");
    return kTvmErrorFunctionCallWrongArgType;
  }
  TVMModuleHandle handle;
  tvm_crt_error_t err = TVMCrtSystemLib_GetHandle(&handle);
  if (err != kTvmErrorNoError) {
    return err;
  }
  ret_val->v_handle = handle;
  *ret_tcode = kTVMModuleHandle;
  return 0;
}

tvm_crt_error_t TVMInitializeRuntime(void) {
  if (g_runtime_initialized) {
    return kTvmErrorNoError;
  }
  tvm_crt_error_t err = TVMMutableFuncRegistry_Create(
      &g_global_registry, g_global_registry_storage.bytes, sizeof(g_global_registry_storage.bytes));
  if (err != kTvmErrorNoError) {
    return err;
  }
  g_runtime_initialized = 1;
  return TVMCrtRuntime_RegisterGlobal("runtime.SystemLib", SystemLibPacked, 0);
}

tvm_crt_error_t TVMCrtRuntime_RegisterGlobal(const char* name, TVMBackendPackedCFunc func,
                                             int override) {
  tvm_crt_error_t err = TVMInitializeRuntime();
  if (err != kTvmErrorNoError) {
    return err;
  }
  if (func == NULL) {
    TVMAPISetLastError("TVMCrtRuntime_RegisterGlobal: NULL function");
    return kTvmErrorFunctionCallInvalidArg;
  }
  err = TVMMutableFuncRegistry_Set(&g_global_registry, name, func, override);
  if (err == kTvmErrorFunctionRegistryFull) {
    TVMAPIErrorf("global function registry full while adding %s; raise "
                 "TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES (now %d)",
                 name, TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES);
  } else if (err == kTvmErrorFunctionAlreadyDefined) {
    TVMAPIErrorf("global function %s is already registered", name);
  } else if (err != kTvmErrorNoError) {
    TVMAPISetLastError("TVMCrtRuntime_RegisterGlobal: invalid name");
  }
  return err;
}

/* ---- Functions and modules --------------------------------------------------------------- */

int TVMFuncRegisterGlobal(const char* name, TVMFunctionHandle f, int override) {
  TVMBackendPackedCFunc func;
  memcpy(&func, &f, sizeof(func));
  return TVMCrtRuntime_RegisterGlobal(name, func, override);
}

int TVMBackendGetFuncFromEnv(void* mod_node, const char* func_name, TVMFunctionHandle* func) {
  (void)mod_node;
  int err = TVMFuncGetGlobal(func_name, func);
  if (err != 0) {
    return err;
  }
  if (*func == NULL) {
    TVMAPIErrorf("generated code needs function %s, which is not registered", func_name);
    return kTvmErrorFunctionNameNotFound;
  }
  return 0;
}

int TVMBackendRegisterSystemLibSymbol(const char* name, void* ptr) {
  return TVMFuncRegisterGlobal(name, ptr, 0);
}

int TVMFuncGetGlobal(const char* name, TVMFunctionHandle* out) {
  if (name == NULL || out == NULL) {
    TVMAPISetLastError("TVMFuncGetGlobal: NULL name or out");
    return kTvmErrorFunctionCallInvalidArg;
  }
  tvm_crt_error_t err = TVMInitializeRuntime();
  if (err != kTvmErrorNoError) {
    return err;
  }
  tvm_function_index_t idx;
  if (TVMFuncRegistry_Lookup(&g_global_registry.registry, name, &idx) == kTvmErrorNoError) {
    *out = TVMCrtModule_FunctionHandle(TVM_CRT_GLOBAL_MODULE_INDEX, idx);
  } else {
    *out = NULL;
  }
  return 0;
}

int TVMModGetFunction(TVMModuleHandle mod, const char* func_name, int query_imports,
                      TVMFunctionHandle* out) {
  uint16_t module_index;
  if (func_name == NULL || out == NULL) {
    TVMAPISetLastError("TVMModGetFunction: NULL name or out");
    return kTvmErrorFunctionCallInvalidArg;
  }
  if (!decode_module_handle(mod, &module_index)) {
    TVMAPIErrorf("TVMModGetFunction: %p is not a live module handle", mod);
    return kTvmErrorFunctionCallInvalidArg;
  }
  tvm_function_index_t idx;
  if (TVMFuncRegistry_Lookup(g_modules[module_index].module->registry, func_name, &idx) ==
      kTvmErrorNoError) {
    *out = TVMCrtModule_FunctionHandle(module_index, idx);
    return 0;
  }
  if (query_imports) {
    return TVMFuncGetGlobal(func_name, out);
  }
  *out = NULL;
  return 0;
}

int TVMModFree(TVMModuleHandle mod) {
  uint16_t module_index;
  if (!decode_module_handle(mod, &module_index)) {
    TVMAPIErrorf("TVMModFree: %p is not a live module handle", mod);
    return kTvmErrorFunctionCallInvalidArg;
  }
  ModuleSlot* slot = &g_modules[module_index];
  if ((int)module_index == g_system_lib_index || slot->on_free == NULL) {
    return 0;
  }
  int unregister = 0;
  tvm_crt_error_t err = slot->on_free(slot->module, &unregister);
  if (unregister) {
    slot->module = NULL;
    slot->on_free = NULL;
  }
  return err;
}

static const TVMFuncRegistry* registry_of(uint16_t module_index) {
  if (module_index == TVM_CRT_GLOBAL_MODULE_INDEX) {
    return g_runtime_initialized ? &g_global_registry.registry : NULL;
  }
  if (module_index < TVM_CRT_MAX_REGISTERED_MODULES && g_modules[module_index].module != NULL) {
    return g_modules[module_index].module->registry;
  }
  return NULL;
}

int TVMFuncCall(TVMFunctionHandle func, TVMValue* arg_values, int* type_codes, int num_args,
                TVMValue* ret_val, int* ret_type_code) {
  TVMValue unused_value;
  int unused_tcode;
  if (ret_val == NULL) {
    ret_val = &unused_value;
  }
  if (ret_type_code == NULL) {
    ret_type_code = &unused_tcode;
  }
  *ret_type_code = kTVMNullptr;
  if (num_args < 0 || (num_args > 0 && (arg_values == NULL || type_codes == NULL))) {
    TVMAPISetLastError("TVMFuncCall: invalid argument arrays");
    return kTvmErrorFunctionCallInvalidArg;
  }
  uint16_t module_index;
  uint16_t function_index;
  if (!decode_function_handle(func, &module_index, &function_index)) {
    TVMAPIErrorf("TVMFuncCall: %p is not a function handle", func);
    return kTvmErrorFunctionIndexInvalid;
  }
  const TVMCrtFunctionSpace* space = function_space_of(module_index);
  if (space != NULL) {
    return space->call(function_index, arg_values, type_codes, num_args, ret_val, ret_type_code);
  }
  const TVMFuncRegistry* registry = registry_of(module_index);
  TVMBackendPackedCFunc fn = NULL;
  if (registry == NULL ||
      TVMFuncRegistry_GetByIndex(registry, function_index, &fn) != kTvmErrorNoError ||
      fn == NULL) {
    TVMAPIErrorf("TVMFuncCall: %p does not name a live function", func);
    return kTvmErrorFunctionIndexInvalid;
  }
  void* resource_handle =
      module_index == TVM_CRT_GLOBAL_MODULE_INDEX ? NULL : (void*)(uintptr_t)registry;
  TVMAPISetLastError("");
  int result = fn(arg_values, type_codes, num_args, ret_val, ret_type_code, resource_handle);
  if (result != 0 && TVMGetLastError()[0] == '\0') {
    const char* name = "?";
    TVMCrtFuncRegistry_GetName(registry, function_index, &name);
    TVMAPIErrorf("%s failed with error 0x%x", name, (unsigned)result);
  }
  return result;
}

int TVMFuncFree(TVMFunctionHandle func) {
  uint16_t module_index;
  uint16_t function_index;
  if (!decode_function_handle(func, &module_index, &function_index)) {
    TVMAPIErrorf("TVMFuncFree: %p is not a function handle", func);
    return kTvmErrorFunctionIndexInvalid;
  }
  const TVMCrtFunctionSpace* space = function_space_of(module_index);
  if (space != NULL && space->release != NULL) {
    return space->release(function_index);
  }
  return 0;
}

/* ---- Tensors and device memory ----------------------------------------------------------- */

int TVMArrayAlloc(const tvm_index_t* shape, int ndim, int dtype_code, int dtype_bits,
                  int dtype_lanes, int device_type, int device_id, TVMArrayHandle* out) {
  if (out == NULL || dtype_code < 0 || dtype_code > 255 || dtype_bits <= 0 || dtype_bits > 255 ||
      dtype_lanes <= 0 || dtype_lanes > 65535) {
    TVMAPISetLastError("TVMArrayAlloc: invalid dtype or NULL out");
    return kTvmErrorFunctionCallInvalidArg;
  }
  DLDataType dtype;
  dtype.code = (uint8_t)dtype_code;
  dtype.bits = (uint8_t)dtype_bits;
  dtype.lanes = (uint16_t)dtype_lanes;
  DLDevice dev;
  dev.device_type = (DLDeviceType)device_type;
  dev.device_id = device_id;
  TVMCrtNDArray* array;
  tvm_crt_error_t err = TVMCrtNDArray_Empty(ndim, shape, dtype, dev, &array);
  if (err != kTvmErrorNoError) {
    TVMAPIErrorf("TVMArrayAlloc: %s", err == kTvmErrorPlatformNoMemory ? "out of memory"
                                                                        : "invalid shape");
    return err;
  }
  *out = &array->dl_tensor;
  return 0;
}

int TVMArrayFree(TVMArrayHandle handle) { return TVMCrtNDArray_Release((TVMCrtNDArray*)handle); }

int TVMByteArrayFree(TVMByteArray* arr) {
  if (arr == NULL) {
    return 0;
  }
  return TVMPlatformMemoryFree(arr, kCpu);
}

int TVMDeviceAllocDataSpace(DLDevice dev, size_t nbytes, size_t alignment, DLDataType type_hint,
                            void** out_data) {
  (void)type_hint;
  if (out_data == NULL || (alignment & (alignment - 1)) != 0) {
    TVMAPIErrorf("TVMDeviceAllocDataSpace: alignment %lu is not a power of two",
                 (unsigned long)alignment);
    return kTvmErrorFunctionCallInvalidArg;
  }
  if (alignment > 1) {
    if (nbytes > SIZE_MAX - alignment) {
      TVMAPISetLastError("TVMDeviceAllocDataSpace: size overflows");
      return kTvmErrorPlatformNoMemory;
    }
    nbytes = (nbytes + alignment - 1) & ~(alignment - 1);
  }
  if (nbytes == 0) {
    nbytes = 1;
  }
  tvm_crt_error_t err = TVMPlatformMemoryAllocate(nbytes, dev, out_data);
  if (err != kTvmErrorNoError) {
    TVMAPIErrorf("TVMDeviceAllocDataSpace: cannot allocate %lu bytes", (unsigned long)nbytes);
  }
  return err;
}

int TVMDeviceAllocDataSpaceWithScope(DLDevice dev, int ndim, const int64_t* shape,
                                     DLDataType dtype, const char* mem_scope, void** out_data) {
  if (mem_scope != NULL && strcmp(mem_scope, "global") != 0) {
    TVMAPIErrorf("TVMDeviceAllocDataSpaceWithScope: memory scope '%s' is not supported", mem_scope);
    return kTvmErrorFunctionCallInvalidArg;
  }
  size_t nbytes;
  if (TVMCrtNDArray_DataSizeBytes(ndim, shape, dtype, &nbytes) != kTvmErrorNoError) {
    TVMAPISetLastError("TVMDeviceAllocDataSpaceWithScope: invalid shape or dtype");
    return kTvmErrorFunctionCallInvalidArg;
  }
  size_t elem = ((size_t)dtype.bits * dtype.lanes + 7) / 8;
  size_t alignment = TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES;
  while (alignment < elem) {
    alignment *= 2;
  }
  return TVMDeviceAllocDataSpace(dev, nbytes, alignment, dtype, out_data);
}

int TVMDeviceFreeDataSpace(DLDevice dev, void* ptr) { return TVMPlatformMemoryFree(ptr, dev); }

int TVMDeviceCopyDataFromTo(DLTensor* from, DLTensor* to, TVMStreamHandle stream) {
  (void)stream;
  size_t from_bytes;
  size_t to_bytes;
  if (from == NULL || to == NULL || from->data == NULL || to->data == NULL ||
      from->strides != NULL || to->strides != NULL ||
      TVMCrtNDArray_DataSizeBytes(from->ndim, from->shape, from->dtype, &from_bytes) != 0 ||
      TVMCrtNDArray_DataSizeBytes(to->ndim, to->shape, to->dtype, &to_bytes) != 0) {
    TVMAPISetLastError("TVMDeviceCopyDataFromTo: tensors must be compact with data");
    return kTvmErrorFunctionCallInvalidArg;
  }
  if (from_bytes != to_bytes) {
    TVMAPIErrorf("TVMDeviceCopyDataFromTo: size mismatch (%lu bytes to %lu bytes)",
                 (unsigned long)from_bytes, (unsigned long)to_bytes);
    return kTvmErrorFunctionCallInvalidArg;
  }
  memmove((uint8_t*)to->data + to->byte_offset, (const uint8_t*)from->data + from->byte_offset,
          from_bytes);
  return 0;
}

int TVMStreamCreate(int device_type, int device_id, TVMStreamHandle* out) {
  (void)device_type;
  (void)device_id;
  if (out == NULL) {
    TVMAPISetLastError("TVMStreamCreate: NULL out");
    return kTvmErrorFunctionCallInvalidArg;
  }
  *out = NULL;
  return 0;
}

int TVMStreamFree(int device_type, int device_id, TVMStreamHandle stream) {
  (void)device_type;
  (void)device_id;
  (void)stream;
  return 0;
}

int TVMSetStream(int device_type, int device_id, TVMStreamHandle handle) {
  (void)device_type;
  (void)device_id;
  (void)handle;
  return 0;
}

int TVMSynchronize(int device_type, int device_id, TVMStreamHandle stream) {
  (void)device_type;
  (void)device_id;
  (void)stream;
  return 0;
}

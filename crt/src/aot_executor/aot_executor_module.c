/*
 * The AOT executor as a module the RPC host drives: the global
 * tvm.aot_executor.create(Module syslib, DLDevice dev, str module_name) returns a module whose
 * functions wrap TVMCrtAotExecutor (see aot_executor.h for the list). When the firmware holds
 * models lowered from a graph (TVMCrtGraphModel_Match), tvm.graph_executor.create(str graph_json,
 * Module, int device_type, int device_id) returns the same module for the model of that JSON.
 *
 * One executor exists at a time (static storage). Creating it again for the same model while it
 * is alive returns the same module handle and counts a reference; each TVMModFree drops one and
 * the last releases the executor (TVMCrtDevice_Close) and its module slot. Asking for a different
 * model while one is alive fails with kTvmErrorExecutorModuleAlreadyCreated.
 */
#include <stdint.h>
#include <string.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/aot_executor.h>
#include <tvm/runtime/crt/crt.h>
#include <tvm/runtime/crt/module.h>
#include <tvm/runtime/crt/ndarray.h>
#include <tvm/runtime/crt/packed_func.h>
#include <tvm/runtime/crt/platform.h>

#include "../common/compiler.h"
#include "../common/module_table.h"

static TVMCrtAotExecutor g_executor;
static TVMModuleHandle g_executor_handle;
static int g_executor_refs;

static int index_arg(const char* fn, TVMValue* args, int* type_codes, int num_args,
                     int is_input, int* out_index) {
  if (num_args < 1) {
    TVMAPIErrorf("%s: expected an index or name argument", fn);
    return kTvmErrorFunctionCallNumArguments;
  }
  if (is_input && type_codes[0] == kTVMStr) {
    return TVMCrtAotExecutor_GetInputIndex(&g_executor, args[0].v_str, out_index);
  }
  if (type_codes[0] != kTVMArgInt && type_codes[0] != kDLUInt) {
    TVMAPIErrorf("%s: argument 0 must be %s (type code %d)", fn,
                 is_input ? "an int or str" : "an int", type_codes[0]);
    return kTvmErrorFunctionCallWrongArgType;
  }
  int64_t v = args[0].v_int64;
  *out_index = (v < 0 || v > INT32_MAX) ? -1 : (int)v;
  return 0;
}

static int return_view(const DLTensor* view, TVMValue* ret_val, int* ret_tcode) {
  TVMCrtNDArray* array;
  tvm_crt_error_t err = TVMCrtNDArray_CreateView(view->data, view->ndim, view->shape, view->dtype,
                                                 view->device, &array);
  if (err != kTvmErrorNoError) {
    TVMAPISetLastError("AOT executor: no memory for a tensor handle");
    return err;
  }
  ret_val->v_handle = &array->dl_tensor;
  *ret_tcode = kTVMNDArrayHandle;
  return 0;
}

/* get_input / get_output: a view of the tensor at an index (or, for inputs, a name). */
static int get_tensor(int is_output, TVMValue* args, int* type_codes, int num_args,
                      TVMValue* ret_val, int* ret_tcode) {
  int index;
  int err = index_arg(is_output ? "get_output" : "get_input", args, type_codes, num_args,
                      !is_output, &index);
  if (err != 0) {
    return err;
  }
  DLTensor view;
  err = is_output ? TVMCrtAotExecutor_GetOutput(&g_executor, index, &view)
                  : TVMCrtAotExecutor_GetInput(&g_executor, index, &view);
  return err != 0 ? err : return_view(&view, ret_val, ret_tcode);
}

static int GetInput(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                    int* ret_tcode, void* resource_handle) {
  (void)resource_handle;
  return get_tensor(0, args, type_codes, num_args, ret_val, ret_tcode);
}

static int GetOutput(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                     int* ret_tcode, void* resource_handle) {
  (void)resource_handle;
  return get_tensor(1, args, type_codes, num_args, ret_val, ret_tcode);
}

static int GetInputIndex(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                         int* ret_tcode, void* resource_handle) {
  (void)resource_handle;
  static const int kSig[1] = {kTVMStr};
  int err = TVMCrtArgs_Check("get_input_index", type_codes, num_args, kSig, 1);
  int index = -1;
  if (err == 0) {
    err = TVMCrtAotExecutor_GetInputIndex(&g_executor, args[0].v_str, &index);
  }
  if (err == 0) {
    ret_val->v_int64 = index;
    *ret_tcode = kTVMArgInt;
  }
  return err;
}

static int GetInputName(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                        int* ret_tcode, void* resource_handle) {
  (void)resource_handle;
  int index;
  int err = index_arg("get_input_name", args, type_codes, num_args, 0, &index);
  const char* name = NULL;
  if (err == 0 && num_args != 1) {
    TVMAPISetLastError("get_input_name: expected 1 argument");
    err = kTvmErrorFunctionCallNumArguments;
  }
  if (err == 0) {
    err = TVMCrtAotExecutor_GetInputName(&g_executor, index, &name);
  }
  if (err == 0) {
    ret_val->v_str = name;
    *ret_tcode = kTVMStr;
  }
  return err;
}

/* get_num_inputs / get_num_outputs: no arguments, an int result. */
TVM_CRT_NOINLINE static int return_count(int is_output, int* type_codes, int num_args,
                                         TVMValue* ret_val, int* ret_tcode) {
  int err = TVMCrtArgs_Check(is_output ? "get_num_outputs" : "get_num_inputs", type_codes, num_args,
                             NULL, 0);
  if (err == 0) {
    ret_val->v_int64 = is_output ? TVMCrtAotExecutor_GetNumOutputs(&g_executor)
                                 : TVMCrtAotExecutor_GetNumInputs(&g_executor);
    *ret_tcode = kTVMArgInt;
  }
  return err;
}

static int GetNumInputs(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                        int* ret_tcode, void* resource_handle) {
  (void)args;
  (void)resource_handle;
  return return_count(0, type_codes, num_args, ret_val, ret_tcode);
}

static int GetNumOutputs(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                         int* ret_tcode, void* resource_handle) {
  (void)args;
  (void)resource_handle;
  return return_count(1, type_codes, num_args, ret_val, ret_tcode);
}

static int Run(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val, int* ret_tcode,
               void* resource_handle) {
  (void)args;
  (void)ret_val;
  (void)ret_tcode;
  (void)resource_handle;
  int err = TVMCrtArgs_Check("run", type_codes, num_args, NULL, 0);
  return err != 0 ? err : TVMCrtAotExecutor_Run(&g_executor);
}

static int SetInput(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                    int* ret_tcode, void* resource_handle) {
  (void)ret_val;
  (void)ret_tcode;
  (void)resource_handle;
  if (num_args != 2) {
    TVMAPIErrorf("set_input: expected 2 arguments (key, tensor), got %d", num_args);
    return kTvmErrorFunctionCallNumArguments;
  }
  if (type_codes[1] != kTVMDLTensorHandle && type_codes[1] != kTVMNDArrayHandle) {
    TVMAPIErrorf("set_input: argument 1 must be a tensor (type code %d)", type_codes[1]);
    return kTvmErrorFunctionCallWrongArgType;
  }
  int index;
  int err = index_arg("set_input", args, type_codes, num_args, 1, &index);
  return err != 0
             ? err
             : TVMCrtAotExecutor_SetInput(&g_executor, index, (const DLTensor*)args[1].v_handle);
}

static int NotImplemented(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                          int* ret_tcode, void* resource_handle) {
  (void)args;
  (void)type_codes;
  (void)num_args;
  (void)ret_val;
  (void)ret_tcode;
  (void)resource_handle;
  TVMAPISetLastError(
      "not supported by the AOT executor: parameters are compiled into the model and "
      "get_input_info is not available; use get_input/get_num_inputs");
  return kTvmErrorFunctionCallNotImplemented;
}

static const char kExecutorNames[] =
    "\x0b\x00"
    "get_input\0"
    "get_input_index\0"
    "get_input_info\0"
    "get_num_inputs\0"
    "get_num_outputs\0"
    "get_output\0"
    "load_params\0"
    "run\0"
    "set_input\0"
    "share_params\0"
    "get_input_name\0";

static const TVMBackendPackedCFunc kExecutorFuncs[11] = {
    GetInput, GetInputIndex, NotImplemented, GetNumInputs, GetNumOutputs,  GetOutput,
    NotImplemented, Run,     SetInput,       NotImplemented, GetInputName,
};

static const TVMFuncRegistry kExecutorRegistry = {kExecutorNames, kExecutorFuncs};
static const TVMModule kExecutorModule = {&kExecutorRegistry};

static tvm_crt_error_t ExecutorModuleFree(const TVMModule* mod, int* out_unregister) {
  (void)mod;
  *out_unregister = 0;
  if (g_executor_refs <= 0) {
    return kTvmErrorExecutorModuleBadContext;
  }
  if (--g_executor_refs > 0) {
    return kTvmErrorNoError;
  }
  *out_unregister = 1;
  g_executor_handle = NULL;
  return TVMCrtAotExecutor_Release(&g_executor);
}

/* The executor module of model name (one alive at a time, counted); fn names the caller. */
static int CreateFor(const char* fn, const char* name, DLDevice dev, TVMValue* ret_val,
                     int* ret_tcode) {
  int err;
  if (g_executor_refs > 0) {
    if (strcmp(g_executor.model->name, name) != 0) {
      TVMAPIErrorf("%s: an executor for model '%s' is alive; free it before creating one for "
                   "'%s'",
                   fn, g_executor.model->name, name);
      return kTvmErrorExecutorModuleAlreadyCreated;
    }
    g_executor_refs++;
  } else {
    err = TVMCrtAotExecutor_CreateByName(&g_executor, name, dev);
    if (err != 0) {
      return err;
    }
    err = TVMCrtModule_Register(&kExecutorModule, ExecutorModuleFree, &g_executor_handle);
    if (err != 0) {
      TVMCrtAotExecutor_Release(&g_executor);
      return err;
    }
    g_executor_refs = 1;
  }
  ret_val->v_handle = g_executor_handle;
  *ret_tcode = kTVMModuleHandle;
  return 0;
}

static int Create(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                  int* ret_tcode, void* resource_handle) {
  (void)resource_handle;
  static const int kSig[3] = {kTVMModuleHandle, kDLDevice, kTVMStr};
  int err = TVMCrtArgs_Check("tvm.aot_executor.create", type_codes, num_args, kSig, 3);
  if (err != 0) {
    return err;
  }
  return CreateFor("tvm.aot_executor.create", args[2].v_str, args[1].v_device, ret_val,
                   ret_tcode);
}

/*
 * tvm.graph_executor.create(str graph_json, Module syslib, int device_type, int device_id, ...):
 * TVM's graph executor API, which sends the graph JSON to the device. The models lowered from a
 * graph answer it when the JSON is the one they were generated from (TVMCrtGraphModel_Match): the
 * module is their executor module, whose functions (set_input, run, get_output, ...) are those
 * TVM's GraphModule calls.
 */
static int GraphCreate(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                       int* ret_tcode, void* resource_handle) {
  (void)resource_handle;
  static const char kFn[] = "tvm.graph_executor.create";
  if (num_args < 4 || (num_args % 2) != 0 || type_codes[0] != kTVMStr ||
      (type_codes[1] != kTVMModuleHandle && type_codes[1] != kTVMOpaqueHandle)) {
    TVMAPIErrorf("%s: expected (str graph_json, Module, int device_type, int device_id, ...), "
                 "got %d arguments",
                 kFn, num_args);
    return kTvmErrorFunctionCallWrongArgType;
  }
  for (int i = 2; i < num_args; i++) {
    if (type_codes[i] != kDLInt && type_codes[i] != kDLUInt) {
      TVMAPIErrorf("%s: argument %d (a device type or id) must be an int (type code %d)", kFn, i,
                   type_codes[i]);
      return kTvmErrorFunctionCallWrongArgType;
    }
  }
  if (num_args != 4 || args[2].v_int64 != kDLCPU) {
    TVMAPIErrorf("%s: the models here run on the CPU alone (device type 1); got %d device(s), "
                 "the first of type %d",
                 kFn, (num_args - 2) / 2, (int)args[2].v_int64);
    return kTvmErrorFunctionCallInvalidArg;
  }
  const char* json = args[0].v_str;
  size_t length = strlen(json);
  const char* name = TVMCrtGraphModel_Match(json, length);
  if (name == NULL) {
    TVMAPIErrorf("%s: the graph JSON received (%lu bytes) is not the graph of a model of this "
                 "firmware; generate the project from the archive that holds this graph, or "
                 "drive the firmware with project-api's client",
                 kFn, (unsigned long)length);
    return kTvmErrorFunctionCallInvalidArg;
  }
  DLDevice dev;
  dev.device_type = kDLCPU;
  dev.device_id = (int32_t)args[3].v_int64;
  return CreateFor(kFn, name, dev, ret_val, ret_tcode);
}

static int BuildHash(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                     int* ret_tcode, void* resource_handle) {
  (void)args;
  (void)type_codes;
  (void)resource_handle;
  if (num_args != 0) {
    TVMAPIErrorf("project_api.build_hash: expected no argument, got %d", num_args);
    return kTvmErrorFunctionCallNumArguments;
  }
  ret_val->v_int64 = TVMCrtAotModel_BuildHash();
  *ret_tcode = kTVMArgInt;
  return 0;
}

/* project_api.profile(str module) -> bytes: the operator times of the module's last run. */
static int Profile(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                   int* ret_tcode, void* resource_handle) {
  static const int kSig[1] = {kTVMStr};
  (void)resource_handle;
  int err = TVMCrtArgs_Check("project_api.profile", type_codes, num_args, kSig, 1);
  if (err != 0) {
    return err;
  }
  int32_t need = TVMCrtAotModel_Profile(args[0].v_str, NULL, 0);
  if (need < 0) {
    TVMAPIErrorf("project_api.profile: model '%s' is not a profile build", args[0].v_str);
    return kTvmErrorFunctionCallInvalidArg;
  }
  void* mem;
  DLDevice cpu = {kDLCPU, 0};
  err = TVMPlatformMemoryAllocate(sizeof(TVMByteArray) + (size_t)need, cpu, &mem);
  if (err != 0) {
    TVMAPISetLastError("project_api.profile: no memory for the record");
    return err;
  }
  TVMByteArray* record = (TVMByteArray*)mem;
  char* data = (char*)mem + sizeof(TVMByteArray);
  int32_t got = TVMCrtAotModel_Profile(args[0].v_str, (uint8_t*)data, (size_t)need);
  if (got != need) {
    (void)TVMPlatformMemoryFree(mem, cpu);
    TVMAPISetLastError("project_api.profile: the record changed size while read");
    return kTvmErrorFunctionCallInvalidArg;
  }
  record->data = data;
  record->size = (size_t)got;
  ret_val->v_handle = record;
  *ret_tcode = kTVMBytes;
  return 0;
}

/* project_api.reset_state(str module): restore the module's state to its values at boot. */
static int ResetState(TVMValue* args, int* type_codes, int num_args, TVMValue* ret_val,
                      int* ret_tcode, void* resource_handle) {
  static const int kSig[1] = {kTVMStr};
  (void)resource_handle;
  int err = TVMCrtArgs_Check("project_api.reset_state", type_codes, num_args, kSig, 1);
  if (err != 0) {
    return err;
  }
  if (TVMCrtAotModel_ResetState(args[0].v_str) != 0) {
    TVMAPIErrorf("project_api.reset_state: this firmware has no model '%s'", args[0].v_str);
    return kTvmErrorFunctionCallInvalidArg;
  }
  ret_val->v_int64 = 0;
  *ret_tcode = kTVMArgInt;
  return 0;
}

tvm_crt_error_t TVMAotExecutorModule_Register(void) {
  static int registered;
  tvm_crt_error_t err = kTvmErrorNoError;
  if (!registered) {
    err = TVMCrtRuntime_RegisterGlobal("tvm.aot_executor.create", Create, 0);
    if (err == kTvmErrorNoError && TVMCrtAotModel_BuildHash != NULL) {
      err = TVMCrtRuntime_RegisterGlobal("project_api.build_hash", BuildHash, 0);
    }
    if (err == kTvmErrorNoError && TVMCrtGraphModel_Match != NULL) {
      err = TVMCrtRuntime_RegisterGlobal("tvm.graph_executor.create", GraphCreate, 0);
    }
    if (err == kTvmErrorNoError && TVMCrtAotModel_Profile != NULL) {
      err = TVMCrtRuntime_RegisterGlobal("project_api.profile", Profile, 0);
    }
    if (err == kTvmErrorNoError && TVMCrtAotModel_ResetState != NULL) {
      err = TVMCrtRuntime_RegisterGlobal("project_api.reset_state", ResetState, 0);
    }
    registered = err == kTvmErrorNoError;
  }
  return err;
}

/*
 * The AOT executor: binds a TVMCrtAotModel (static buffers + run function) to a device, drives the
 * device lifecycle hooks around it, and exposes its tensors as DLTensor views. No allocation.
 */
#include <stdint.h>
#include <string.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/aot_executor.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/ndarray.h>
#include <tvm/runtime/crt/platform.h>

#include "../common/compiler.h"

static int tensors_valid(const TVMCrtAotTensor* tensors, size_t count) {
  if (count > 0 && tensors == NULL) {
    return 0;
  }
  for (size_t i = 0; i < count; i++) {
    size_t nbytes;
    if (tensors[i].name == NULL || tensors[i].data == NULL ||
        TVMCrtNDArray_DataSizeBytes(tensors[i].ndim, tensors[i].shape, tensors[i].dtype, &nbytes) !=
            kTvmErrorNoError ||
        nbytes != tensors[i].size_bytes) {
      return 0;
    }
  }
  return 1;
}

tvm_crt_error_t TVMCrtAotExecutor_Create(TVMCrtAotExecutor* executor, const TVMCrtAotModel* model,
                                         DLDevice device) {
  if (executor == NULL || model == NULL) {
    TVMAPISetLastError("TVMCrtAotExecutor_Create: NULL executor or model");
    return kTvmErrorFunctionCallInvalidArg;
  }
  executor->model = NULL;
  executor->is_open = 0;
  if (model->run == NULL || model->num_inputs > INT32_MAX || model->num_outputs > INT32_MAX ||
      !tensors_valid(model->inputs, model->num_inputs) ||
      !tensors_valid(model->outputs, model->num_outputs)) {
    TVMAPIErrorf("model %s: invalid descriptor (NULL run/name/data, rank above %d, or size_bytes "
                 "not matching shape and dtype)",
                 model->name ? model->name : "(unnamed)", TVM_CRT_MAX_NDIM);
    return kTvmErrorFunctionCallInvalidArg;
  }
  tvm_crt_error_t err = TVMCrtDevice_Open(device);
  if (err != kTvmErrorNoError) {
    TVMAPIErrorf("TVMCrtDevice_Open(%d, %d) failed (0x%x)", (int)device.device_type,
                 (int)device.device_id, (unsigned)err);
    return err;
  }
  executor->model = model;
  executor->device = device;
  executor->is_open = 1;
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMCrtAotExecutor_CreateByName(TVMCrtAotExecutor* executor, const char* module_name,
                                               DLDevice device) {
  const TVMCrtAotModel* model = module_name != NULL ? TVMCrtAotModel_Lookup(module_name) : NULL;
  if (model == NULL) {
    TVMAPIErrorf("no model named '%s' in this firmware", module_name ? module_name : "(null)");
    return kTvmErrorFunctionNameNotFound;
  }
  return TVMCrtAotExecutor_Create(executor, model, device);
}

tvm_crt_error_t TVMCrtAotExecutor_Release(TVMCrtAotExecutor* executor) {
  if (executor == NULL || !executor->is_open) {
    TVMAPISetLastError("TVMCrtAotExecutor_Release: executor is not open");
    return kTvmErrorExecutorModuleBadContext;
  }
  executor->is_open = 0;
  executor->model = NULL;
  tvm_crt_error_t err = TVMCrtDevice_Close(executor->device);
  if (err != kTvmErrorNoError) {
    TVMAPIErrorf("TVMCrtDevice_Close(%d, %d) failed (0x%x)", (int)executor->device.device_type,
                 (int)executor->device.device_id, (unsigned)err);
  }
  return err;
}

int TVMCrtAotExecutor_GetNumInputs(const TVMCrtAotExecutor* executor) {
  return (executor != NULL && executor->is_open) ? (int)executor->model->num_inputs : 0;
}

int TVMCrtAotExecutor_GetNumOutputs(const TVMCrtAotExecutor* executor) {
  return (executor != NULL && executor->is_open) ? (int)executor->model->num_outputs : 0;
}

tvm_crt_error_t TVMCrtAotExecutor_GetInputIndex(const TVMCrtAotExecutor* executor, const char* name,
                                                int* out_index) {
  int n = TVMCrtAotExecutor_GetNumInputs(executor);
  for (int i = 0; name != NULL && i < n; i++) {
    if (strcmp(executor->model->inputs[i].name, name) == 0) {
      *out_index = i;
      return kTvmErrorNoError;
    }
  }
  TVMAPIErrorf("model has no input named '%s'", name ? name : "(null)");
  return kTvmErrorExecutorModuleNoSuchInput;
}

/* The input (or output) at index, or NULL after setting the last error. */
static const TVMCrtAotTensor* tensor_at(const TVMCrtAotExecutor* executor, int index,
                                        int is_output) {
  int n = is_output ? TVMCrtAotExecutor_GetNumOutputs(executor)
                    : TVMCrtAotExecutor_GetNumInputs(executor);
  if (index < 0 || index >= n) {
    const char* kind = is_output ? "output" : "input";
    TVMAPIErrorf("%s index %d out of range (model has %d %ss)", kind, index, n, kind);
    return NULL;
  }
  return is_output ? &executor->model->outputs[index] : &executor->model->inputs[index];
}

tvm_crt_error_t TVMCrtAotExecutor_GetInputName(const TVMCrtAotExecutor* executor, int index,
                                               const char** out_name) {
  const TVMCrtAotTensor* t = tensor_at(executor, index, 0);
  if (t == NULL) {
    return kTvmErrorExecutorModuleNoSuchInput;
  }
  *out_name = t->name;
  return kTvmErrorNoError;
}

static void view_of(const TVMCrtAotExecutor* executor, const TVMCrtAotTensor* t, DLTensor* out) {
  out->data = t->data;
  out->device = executor->device;
  out->ndim = t->ndim;
  out->dtype = t->dtype;
  out->shape = (int64_t*)(uintptr_t)t->shape; /* DLTensor has no const; callers must not write */
  out->strides = NULL;
  out->byte_offset = 0;
}

TVM_CRT_NOINLINE static tvm_crt_error_t get_view(const TVMCrtAotExecutor* executor, int index,
                                                 int is_output, DLTensor* out_tensor) {
  const TVMCrtAotTensor* t = tensor_at(executor, index, is_output);
  if (t == NULL) {
    return is_output ? kTvmErrorFunctionCallInvalidArg : kTvmErrorExecutorModuleNoSuchInput;
  }
  view_of(executor, t, out_tensor);
  return kTvmErrorNoError;
}

tvm_crt_error_t TVMCrtAotExecutor_GetInput(const TVMCrtAotExecutor* executor, int index,
                                           DLTensor* out_tensor) {
  return get_view(executor, index, 0, out_tensor);
}

tvm_crt_error_t TVMCrtAotExecutor_GetOutput(const TVMCrtAotExecutor* executor, int index,
                                            DLTensor* out_tensor) {
  return get_view(executor, index, 1, out_tensor);
}

tvm_crt_error_t TVMCrtAotExecutor_SetInput(const TVMCrtAotExecutor* executor, int index,
                                           const DLTensor* src) {
  const TVMCrtAotTensor* dst = tensor_at(executor, index, 0);
  if (dst == NULL) {
    return kTvmErrorExecutorModuleNoSuchInput;
  }
  size_t nbytes;
  if (src == NULL || src->data == NULL || src->strides != NULL ||
      TVMCrtNDArray_DataSizeBytes(src->ndim, src->shape, src->dtype, &nbytes) != kTvmErrorNoError) {
    TVMAPIErrorf("set_input %s: source must be a compact tensor with data", dst->name);
    return kTvmErrorFunctionCallInvalidArg;
  }
  if (src->dtype.code != dst->dtype.code || src->dtype.bits != dst->dtype.bits ||
      src->dtype.lanes != dst->dtype.lanes || nbytes != dst->size_bytes) {
    TVMAPIErrorf("set_input %s: got %lu bytes of dtype code %d bits %d, expected %lu bytes of "
                 "code %d bits %d",
                 dst->name, (unsigned long)nbytes, (int)src->dtype.code, (int)src->dtype.bits,
                 (unsigned long)dst->size_bytes, (int)dst->dtype.code, (int)dst->dtype.bits);
    return kTvmErrorFunctionCallInvalidArg;
  }
  memmove(dst->data, (const uint8_t*)src->data + src->byte_offset, nbytes);
  return kTvmErrorNoError;
}

/* Data pointers of the model tensors, passed to model->run. */
static void* g_run_inputs[TVM_CRT_MAX_ARGS];
static void* g_run_outputs[TVM_CRT_MAX_ARGS];

tvm_crt_error_t TVMCrtAotExecutor_Run(TVMCrtAotExecutor* executor) {
  if (executor == NULL || !executor->is_open) {
    TVMAPISetLastError("TVMCrtAotExecutor_Run: executor is not open");
    return kTvmErrorExecutorModuleBadContext;
  }
  const TVMCrtAotModel* model = executor->model;
  if (model->num_inputs > TVM_CRT_MAX_ARGS || model->num_outputs > TVM_CRT_MAX_ARGS) {
    TVMAPIErrorf("model %s has %lu inputs and %lu outputs; raise TVM_CRT_MAX_ARGS (%d)",
                 model->name, (unsigned long)model->num_inputs, (unsigned long)model->num_outputs,
                 TVM_CRT_MAX_ARGS);
    return kTvmErrorFunctionCallNumArguments;
  }
  for (size_t i = 0; i < model->num_inputs; i++) {
    g_run_inputs[i] = model->inputs[i].data;
  }
  for (size_t i = 0; i < model->num_outputs; i++) {
    g_run_outputs[i] = model->outputs[i].data;
  }
  tvm_crt_error_t err = TVMCrtDevice_Activate(executor->device);
  if (err != kTvmErrorNoError) {
    TVMAPIErrorf("TVMCrtDevice_Activate failed (0x%x); model %s not run", (unsigned)err,
                 model->name);
    return err;
  }
  TVMAPISetLastError("");
  int32_t result = model->run(g_run_inputs, g_run_outputs);
  if (result != 0 && TVMGetLastError()[0] == '\0') {
    TVMAPIErrorf("model %s failed with %ld", model->name, (long)result);
  }
  tvm_crt_error_t deactivate_err = TVMCrtDevice_Deactivate(executor->device);
  if (result != 0) {
    return (tvm_crt_error_t)result;
  }
  if (deactivate_err != kTvmErrorNoError) {
    TVMAPIErrorf("TVMCrtDevice_Deactivate failed (0x%x)", (unsigned)deactivate_err);
  }
  return deactivate_err;
}

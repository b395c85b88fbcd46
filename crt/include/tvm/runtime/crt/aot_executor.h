/*
 * tvm/runtime/crt/aot_executor.h: running an AOT-compiled model described by a TVMCrtAotModel.
 *
 * Lifecycle (see the device hooks in platform.h):
 *   TVMCrtAotExecutor_Create  -> TVMCrtDevice_Open(device)
 *   TVMCrtAotExecutor_Run     -> TVMCrtDevice_Activate, model->run, TVMCrtDevice_Deactivate
 *   TVMCrtAotExecutor_Release -> TVMCrtDevice_Close(device)
 * Inputs are written and outputs read directly in the model's static buffers, found by
 * TVMCrtAotExecutor_GetInput / GetOutput. Nothing is allocated: the executor struct is
 * caller-owned.
 *
 * The same executor is reachable from the host through the global packed function
 * tvm.aot_executor.create(Module syslib, DLDevice dev, str module_name) -> Module, whose
 * functions are get_input(int|str) -> NDArray, get_input_index(str) -> int,
 * get_input_name(int) -> str, get_num_inputs() -> int, get_num_outputs() -> int,
 * get_output(int) -> NDArray, run(), set_input(int|str, DLTensor); get_input_info, load_params
 * and share_params return kTvmErrorFunctionCallNotImplemented. NDArray results are views of the
 * model's static buffers: TVMArrayFree on them never frees model memory.
 */
#ifndef TVM_RUNTIME_CRT_AOT_EXECUTOR_H_
#define TVM_RUNTIME_CRT_AOT_EXECUTOR_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/aot_model.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief An executor bound to one model and device. Treat the members as private. */
typedef struct TVMCrtAotExecutor {
  const TVMCrtAotModel* model;
  DLDevice device;
  int is_open;
} TVMCrtAotExecutor;

/*!
 * \brief Bind executor to model on device and open the device (TVMCrtDevice_Open).
 * \return kTvmErrorNoError; kTvmErrorFunctionCallInvalidArg (NULL pointers, or a model with
 *   NULL run / tensor arrays / rank above TVM_CRT_MAX_NDIM); or the error of TVMCrtDevice_Open
 *   (the executor is then not created).
 */
tvm_crt_error_t TVMCrtAotExecutor_Create(TVMCrtAotExecutor* executor, const TVMCrtAotModel* model,
                                         DLDevice device);

/*!
 * \brief Like Create, finding the model with TVMCrtAotModel_Lookup(module_name).
 * \return As Create, or kTvmErrorFunctionNameNotFound when no model has that name.
 */
tvm_crt_error_t TVMCrtAotExecutor_CreateByName(TVMCrtAotExecutor* executor, const char* module_name,
                                               DLDevice device);

/*!
 * \brief Close the device (TVMCrtDevice_Close) and unbind.
 * \return kTvmErrorNoError, TVMCrtDevice_Close's error (the executor is unbound anyway), or
 *   kTvmErrorExecutorModuleBadContext for an executor that is not bound (e.g. released twice).
 */
tvm_crt_error_t TVMCrtAotExecutor_Release(TVMCrtAotExecutor* executor);

/*! \brief Number of model inputs (0 for an unbound executor). */
int TVMCrtAotExecutor_GetNumInputs(const TVMCrtAotExecutor* executor);

/*! \brief Number of model outputs (0 for an unbound executor). */
int TVMCrtAotExecutor_GetNumOutputs(const TVMCrtAotExecutor* executor);

/*!
 * \brief Position of the input called name.
 * \return kTvmErrorNoError, or kTvmErrorExecutorModuleNoSuchInput (never aborts).
 */
tvm_crt_error_t TVMCrtAotExecutor_GetInputIndex(const TVMCrtAotExecutor* executor, const char* name,
                                                int* out_index);

/*! \brief Name of input index. \return kTvmErrorNoError or kTvmErrorExecutorModuleNoSuchInput. */
tvm_crt_error_t TVMCrtAotExecutor_GetInputName(const TVMCrtAotExecutor* executor, int index,
                                               const char** out_name);

/*!
 * \brief The input tensor at index, as a DLTensor view of its static buffer (shape points into
 * the model descriptor; strides NULL; byte_offset 0).
 * \return kTvmErrorNoError or kTvmErrorExecutorModuleNoSuchInput.
 */
tvm_crt_error_t TVMCrtAotExecutor_GetInput(const TVMCrtAotExecutor* executor, int index,
                                           DLTensor* out_tensor);

/*! \brief The output tensor at index. \return kTvmErrorNoError or kTvmErrorFunctionCallInvalidArg. */
tvm_crt_error_t TVMCrtAotExecutor_GetOutput(const TVMCrtAotExecutor* executor, int index,
                                            DLTensor* out_tensor);

/*!
 * \brief Copy src into input index. src must be compact (no strides), with the input's dtype and
 * byte size. \return kTvmErrorNoError, kTvmErrorExecutorModuleNoSuchInput or
 * kTvmErrorFunctionCallInvalidArg (dtype/size mismatch; nothing copied).
 */
tvm_crt_error_t TVMCrtAotExecutor_SetInput(const TVMCrtAotExecutor* executor, int index,
                                           const DLTensor* src);

/*!
 * \brief Run the model once: TVMCrtDevice_Activate, model->run, TVMCrtDevice_Deactivate.
 * \return kTvmErrorNoError; the hook's error if Activate fails (model not run); the model's
 *   nonzero result (with TVMGetLastError() naming the model) if run fails; else Deactivate's
 *   error. Deactivate is called whenever Activate succeeded.
 */
tvm_crt_error_t TVMCrtAotExecutor_Run(TVMCrtAotExecutor* executor);

/*!
 * \brief Register the global tvm.aot_executor.create, project_api.build_hash when the glue
 * defines TVMCrtAotModel_BuildHash, and tvm.graph_executor.create (TVM's on-device graph
 * executor API, answered with the lowered graph model of the JSON it receives) when the glue
 * defines TVMCrtGraphModel_Match (MicroTVMRpcServerInit calls this, as TVM's did; an
 * application that drives the executor through packed functions without the RPC server calls it
 * itself). Later calls change nothing.
 * \return kTvmErrorNoError or a registry error.
 */
tvm_crt_error_t TVMAotExecutorModule_Register(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_CRT_AOT_EXECUTOR_H_ */

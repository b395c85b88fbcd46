/*
 * tvm/runtime/crt/aot_model.h: how an application describes its AOT-compiled models.
 *
 * The glue generated for a project (or written by hand) provides one TVMCrtAotModel per model in
 * static storage and the lookup function below. The runtime only reads these structs; tensor
 * data buffers belong to the glue and stay valid for the life of the program.
 */
#ifndef TVM_RUNTIME_CRT_AOT_MODEL_H_
#define TVM_RUNTIME_CRT_AOT_MODEL_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief One input or output tensor of a model, backed by a static buffer. */
typedef struct TVMCrtAotTensor {
  const char* name;        /*!< tensor name as in metadata.json */
  DLDataType dtype;        /*!< element type */
  int32_t ndim;            /*!< rank (<= TVM_CRT_MAX_NDIM) */
  const int64_t* shape;    /*!< ndim extents */
  size_t size_bytes;       /*!< bytes of data (= prod(shape) * element size) */
  void* data;              /*!< static buffer owned by the glue */
} TVMCrtAotTensor;

/*! \brief A model: its tensors in positional order and the function that runs it. */
typedef struct TVMCrtAotModel {
  const char* name;              /*!< module name, e.g. "default" */
  size_t num_inputs;             /*!< entries in inputs */
  const TVMCrtAotTensor* inputs;
  size_t num_outputs;            /*!< entries in outputs */
  const TVMCrtAotTensor* outputs;
  size_t workspace_size_bytes;   /*!< workspace the model takes via TVMBackendAllocWorkspace */
  /*!
   * \brief Run the model once: inputs[i] / outputs[i] are the data pointers of the tensors above,
   * in order. Returns 0 on success (the glue wraps tvmgen_<name>_run).
   */
  int32_t (*run)(void* const* inputs, void* const* outputs);
} TVMCrtAotModel;

/*! \brief Provided by the application/glue: the model named module_name, or NULL. */
const TVMCrtAotModel* TVMCrtAotModel_Lookup(const char* module_name);

/*!
 * \brief Optional, provided by the glue: a hash of what the firmware was generated from (the
 * model archive, the options, the template), so a host can check which build a device runs. When
 * defined, the global function "project_api.build_hash" returns it (weak: glue may omit it).
 */
int64_t TVMCrtAotModel_BuildHash(void) __attribute__((weak));

/*!
 * \brief Optional, provided by the lowered graph models (graph_model.c): the name of the model
 * whose graph-executor JSON is the length bytes at json (compared by length and FNV-1a 64), or
 * NULL. When defined, the global function "tvm.graph_executor.create" answers TVM's on-device
 * graph executor API with that model, and the system library refuses lookups of functions it
 * does not hold in one error that names the way to drive the model (weak: AOT-only glue omits
 * it).
 */
const char* TVMCrtGraphModel_Match(const char* json, size_t length) __attribute__((weak));

/*!
 * \brief Optional, provided by the glue when a module is a profile build (project-api emit
 * --profile): write the operator times of module_name's last run into out (at most size bytes;
 * the record of project_api/emit/profile.py). Returns the bytes written, the bytes needed when
 * out is NULL or size too small, or -1 when no profile build has that name. When defined, the
 * global function "project_api.profile" returns the record (weak: glue may omit it).
 */
int32_t TVMCrtAotModel_Profile(const char* module_name, uint8_t* out, size_t size)
    __attribute__((weak));

/*!
 * \brief Optional, provided by the glue when a module keeps state from one run to the next
 * (variable tensors, resource variables): restore the state of module_name to its values at boot.
 * Returns 0 (also for a module without state), nonzero when no module has that name. When
 * defined, the global function "project_api.reset_state" calls it (weak: glue may omit it).
 */
int32_t TVMCrtAotModel_ResetState(const char* module_name) __attribute__((weak));

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_CRT_AOT_MODEL_H_ */

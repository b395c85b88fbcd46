/*
 * tvm/runtime/metadata_types.h: the model description TVM 0.10-0.15 generates into the metadata
 * module of a C-runtime build (``tvmgen_<mod>_get_c_metadata`` returns a pointer to one
 * TVMMetadata, as an opaque handle). Graph-executor archives of those releases carry this C even
 * though nothing calls it; the layout is what that generated code initializes, member by member.
 * project-api's runtime does not read it: the model glue describes the models.
 */
#ifndef TVM_RUNTIME_METADATA_TYPES_H_
#define TVM_RUNTIME_METADATA_TYPES_H_

#include <stdint.h>
#include <tvm/runtime/c_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

struct TVMTensorInfo;
struct TVMConstantInfo;

/*! \brief A model as its metadata module describes it (initialized positionally). */
struct TVMMetadata {
  int64_t version;                               /*!< 1 in TVM 0.10-0.15 */
  const struct TVMTensorInfo* inputs;            /*!< run_model's inputs, in order */
  int64_t num_inputs;
  const struct TVMTensorInfo* outputs;           /*!< run_model's outputs, in order */
  int64_t num_outputs;
  const struct TVMTensorInfo* workspace_pools;   /*!< pools run_model takes after them */
  int64_t num_workspace_pools;
  const struct TVMConstantInfo* constant_pools;  /*!< constant pools */
  int64_t num_constant_pools;
  const char* mod_name;                          /*!< e.g. "tvmgen_default" */
};

/*! \brief One tensor: its name, shape and element type. */
struct TVMTensorInfo {
  const char* name;
  const int64_t* shape;
  int64_t num_shape;  /*!< rank */
  DLDataType dtype;
};

/*! \brief One constant of a constant pool. */
struct TVMConstantInfo {
  const char* name_hint;
  int64_t byte_offset;     /*!< offset in the pool */
  int64_t data_len;        /*!< bytes of data_bytes */
  const void* data_bytes;  /*!< the serialized array */
};

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_METADATA_TYPES_H_ */

/*
 * dlpack/dlpack.h: the tensor description types TVM-generated code is written against.
 *
 * This is an independent rendition of the DLPack v0.x ABI that Apache TVM 0.15 was built with:
 * the same type names, member order, member types and enumerator values, so that a DLTensor
 * built here can be handed to code compiled against the upstream header and vice versa.
 */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

/*! \brief ABI version number of the layout below (DLPack 0.8). */
#define DLPACK_VERSION 80

/*! \brief ABI version number of the layout below. */
#define DLPACK_ABI_VERSION 1

#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif

/*! \brief Export marker for functions in a shared library build; empty for static archives. */
#ifndef DLPACK_DLL
#if defined(_WIN32) && defined(DLPACK_EXPORTS)
#define DLPACK_DLL __declspec(dllexport)
#elif defined(_WIN32)
#define DLPACK_DLL __declspec(dllimport)
#else
#define DLPACK_DLL
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Kind of device a tensor's memory lives on. Values are part of the ABI. */
typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
} DLDeviceType;

/*! \brief A device: its kind plus an index among devices of that kind (0 for the only CPU). */
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

/*! \brief Class of an element type. Values are part of the ABI. */
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
} DLDataTypeCode;

/*!
 * \brief Element type: class, width in bits and vector lanes (4 bytes in all).
 * Examples: float32 = {kDLFloat, 32, 1}; int8 = {kDLInt, 8, 1}; uint8x4 = {kDLUInt, 8, 4}.
 */
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

/*!
 * \brief A strided n-dimensional view of memory the tensor does not own.
 *
 * The first element is at (char*)data + byte_offset. shape has ndim entries; strides is either
 * NULL (compact row-major) or ndim entries counted in elements, not bytes.
 */
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

/*!
 * \brief A DLTensor together with the means to release it: the consumer calls deleter(self)
 * once when done; manager_ctx belongs to the producer.
 */
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* DLPACK_DLPACK_H_ */

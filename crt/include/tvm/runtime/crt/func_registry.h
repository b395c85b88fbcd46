/*
 * tvm/runtime/crt/func_registry.h: a table of named packed functions.
 *
 * names is a blob: bytes 0-1 hold the function count as a little-endian uint16, then each name
 * follows NUL-terminated in index order, then one more NUL (an empty name) ends the list.
 *   "\x02\x00" "Foo\0" "Bar\0" "\0"  -> Foo is index 0, Bar is index 1.
 * TVM's code generator writes such a blob as a C string literal whose implicit NUL is the end
 * marker. funcs[i] is the function called names[i].
 */
#ifndef TVM_RUNTIME_CRT_FUNC_REGISTRY_H_
#define TVM_RUNTIME_CRT_FUNC_REGISTRY_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Index of a module in the module table. */
typedef uint16_t tvm_module_index_t;

/*! \brief Index of a function within a registry. */
typedef uint16_t tvm_function_index_t;

/*! \brief A read-only registry (see the blob layout above). */
typedef struct TVMFuncRegistry {
  const char* names;
  const TVMBackendPackedCFunc* funcs;
} TVMFuncRegistry;

/*!
 * \brief Compare the registry entry at *cursor with name, strcmp-style, and move *cursor onto the
 * NUL that ends that entry (whatever the result), so cursor + 1 is the next entry.
 * \return 0 if equal, else the difference of the first differing bytes (as unsigned char).
 *   Examples: ("Foo","Bar") -> 'F'-'B'; ("Foo","") -> 'F'; ("Fab","Fabulous") -> -'u'.
 */
int TVMCrtFuncRegistry_StrCmpCursor(const char** cursor, const char* name);

/*! \brief The number of functions (the blob's uint16 count). */
uint16_t TVMFuncRegistry_GetNumFuncs(const TVMFuncRegistry* reg);

/*!
 * \brief Find name by linear scan.
 * \param function_index Receives the index; unchanged when not found.
 * \return kTvmErrorNoError or kTvmErrorFunctionNameNotFound.
 */
tvm_crt_error_t TVMFuncRegistry_Lookup(const TVMFuncRegistry* reg, const char* name,
                                       tvm_function_index_t* function_index);

/*!
 * \brief The function at index.
 * \return kTvmErrorNoError or kTvmErrorFunctionIndexInvalid (index >= count).
 */
tvm_crt_error_t TVMFuncRegistry_GetByIndex(const TVMFuncRegistry* reg,
                                           tvm_function_index_t index,
                                           TVMBackendPackedCFunc* out_func);

/*!
 * \brief The name at index (points into the blob).
 * \return kTvmErrorNoError or kTvmErrorFunctionIndexInvalid.
 */
tvm_crt_error_t TVMCrtFuncRegistry_GetName(const TVMFuncRegistry* reg, tvm_function_index_t index,
                                           const char** out_name);

/*!
 * \brief A registry that grows inside a caller-owned buffer: names grow from the start, the
 * function-pointer array sits at the end, max_functions slots long.
 */
typedef struct TVMMutableFuncRegistry {
  TVMFuncRegistry registry;
  size_t max_functions;
} TVMMutableFuncRegistry;

/*! \brief Name length (without NUL) the sizing of a mutable registry assumes on average. */
#define kTvmAverageFunctionNameStrlenBytes ((size_t)10)

/*!
 * \brief Bytes per function a mutable registry budgets: an average name, its NUL and a pointer.
 * A buffer of N * kTvmAverageFuncEntrySizeBytes holds N functions with names of up to that
 * average length.
 */
#define kTvmAverageFuncEntrySizeBytes (kTvmAverageFunctionNameStrlenBytes + 1 + sizeof(void*))

/*!
 * \brief Make an empty mutable registry in buffer.
 * \return kTvmErrorNoError, or kTvmErrorBufferTooSmall if buffer_size_bytes is smaller than one
 *   kTvmAverageFuncEntrySizeBytes.
 */
tvm_crt_error_t TVMMutableFuncRegistry_Create(TVMMutableFuncRegistry* reg, uint8_t* buffer,
                                              size_t buffer_size_bytes);

/*!
 * \brief Add or replace a function.
 * \param override Nonzero replaces an existing function of the same name.
 * \return kTvmErrorNoError; kTvmErrorFunctionAlreadyDefined (name exists, override == 0);
 *   kTvmErrorFunctionRegistryFull (no pointer slot left, or name + NUL + end marker would run
 *   into the pointer array); kTvmErrorFunctionCallInvalidArg (NULL or empty name); the
 *   registry is unchanged on error.
 */
tvm_crt_error_t TVMMutableFuncRegistry_Set(TVMMutableFuncRegistry* reg, const char* name,
                                           TVMBackendPackedCFunc func, int override);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_CRT_FUNC_REGISTRY_H_ */

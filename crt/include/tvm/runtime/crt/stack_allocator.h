/*
 * tvm/runtime/crt/stack_allocator.h: a last-in-first-out allocator over a caller-owned buffer.
 *
 * Blocks are carved from the front of the buffer and must be freed newest first. With
 * TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK on (the default), each block is followed by a 4-byte
 * tag ((padded size + 4) ^ TVM_CRT_STACK_ALLOCATOR_TAG) so an out-of-order free is detected and
 * rejected instead of silently rewinding over live blocks.
 *
 * Layout per block: nbytes rounded up to TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES, then the tag when the
 * check is on. With 16-byte alignment, allocations of 1, 2, 24 and 1 bytes land at offsets 0, 20,
 * 40 and 76: only the first block is 16-byte aligned; later ones are 4-byte aligned.
 * Cost: 0..15 bytes of padding + 4 bytes of tag per live block.
 */
#ifndef TVM_RUNTIME_CRT_STACK_ALLOCATOR_H_
#define TVM_RUNTIME_CRT_STACK_ALLOCATOR_H_

#include <stddef.h>
#include <stdint.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>

#ifdef __cplusplus
extern "C" {
#endif

/*! \brief Value mixed into each block's LIFO tag. */
#define TVM_CRT_STACK_ALLOCATOR_TAG 0xabcd1234u
/*! \brief Bytes of the LIFO tag after each block. */
#define TVM_CRT_STACK_ALLOCATOR_TAG_SIZE_BYTES 4u

/*! \brief State of one stack allocator; the memory it manages belongs to the caller. */
typedef struct {
  uint8_t* next_alloc;     /*!< where the next block starts */
  uint8_t* workspace;      /*!< aligned start of the managed memory */
  size_t workspace_size;   /*!< bytes from workspace to the end of the managed memory */
} tvm_workspace_t;

/*!
 * \brief Manage memory[0..size): the start is aligned up to TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES and
 * the size shrunk by the adjustment.
 * \return kTvmErrorNoError, or kTvmErrorFunctionCallInvalidArg (NULL pointers, or nothing left
 *   after alignment); tvm_workspace is then set empty.
 */
tvm_crt_error_t StackMemoryManager_Init(tvm_workspace_t* tvm_workspace, uint8_t* memory,
                                        size_t size);

/*!
 * \brief Allocate nbytes (0 is allowed) with the LIFO check chosen by the build configuration.
 * \param out_ptr Receives the block; untouched on failure.
 * \return kTvmErrorNoError or kTvmErrorPlatformNoMemory (the allocator is unchanged).
 */
tvm_crt_error_t StackMemoryManager_Allocate(tvm_workspace_t* tvm_workspace, size_t nbytes,
                                            void** out_ptr);

/*! \brief Allocate with the LIFO tag written (do_lifo_check != 0) or not. */
tvm_crt_error_t StackMemoryManager_Allocate_Body(tvm_workspace_t* tvm_workspace, size_t nbytes,
                                                 void** out_ptr, int do_lifo_check);

/*!
 * \brief Free the newest block (and with it nothing else).
 * \return kTvmErrorNoError, or kTvmErrorPlatformStackAllocBadFree when ptr is NULL, outside the
 *   allocated region, or (LIFO check on) not the newest block; the allocator is then unchanged.
 */
tvm_crt_error_t StackMemoryManager_Free(tvm_workspace_t* tvm_workspace, void* ptr);

/*! \brief Free with the LIFO tag verified (do_lifo_check != 0) or only the range checked. */
tvm_crt_error_t StackMemoryManager_Free_Body(tvm_workspace_t* tvm_workspace, void* ptr,
                                             int do_lifo_check);

/*! \brief Bytes currently allocated (next_alloc - workspace). */
size_t TVMCrtStackAllocator_UsedBytes(const tvm_workspace_t* tvm_workspace);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_CRT_STACK_ALLOCATOR_H_ */

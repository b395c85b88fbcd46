/*
 * tvm/runtime/crt/config.h: every size and behaviour knob of the C runtime, in one place.
 *
 * Each knob has a default below. A project overrides knobs either with -D flags or with its own
 * crt_config.h, which this header includes first when TVM_CRT_HAVE_CONFIG_H is defined (or which
 * the project force-includes with `-include crt_config.h`). Out-of-range values stop the build
 * with #error. Runtime sources include this header; public headers that size structs do too.
 */
#ifndef TVM_RUNTIME_CRT_CONFIG_H_
#define TVM_RUNTIME_CRT_CONFIG_H_

#ifdef TVM_CRT_HAVE_CONFIG_H
#include "crt_config.h"
#endif

/* ---- Logging ------------------------------------------------------------------------------ */

/*! \brief Log levels for TVM_CRT_LOG_LEVEL (a message is kept if its level <= the setting). */
#define TVM_CRT_LOG_LEVEL_ERROR 0
#define TVM_CRT_LOG_LEVEL_WARN 1
#define TVM_CRT_LOG_LEVEL_INFO 2
#define TVM_CRT_LOG_LEVEL_DEBUG 3

/*! \brief Most verbose LOG_* macro compiled in (see logging.h). */
#ifndef TVM_CRT_LOG_LEVEL
#define TVM_CRT_LOG_LEVEL TVM_CRT_LOG_LEVEL_INFO
#endif

/*! \brief Extra internal tracing through TVMLogf when > 0 (0 in production builds). */
#ifndef TVM_CRT_DEBUG
#define TVM_CRT_DEBUG 0
#endif

/*! \brief Size of the buffer TVMLogf formats one message into (longer messages are cut). */
#ifndef TVM_CRT_LOG_MESSAGE_SIZE_BYTES
#define TVM_CRT_LOG_MESSAGE_SIZE_BYTES 256
#endif

/*! \brief Size of the last-error buffer behind TVMAPISetLastError/TVMGetLastError, NUL included. */
#ifndef TVM_CRT_LAST_ERROR_SIZE_BYTES
#define TVM_CRT_LAST_ERROR_SIZE_BYTES 1024
#endif

/* ---- Tensors and calls -------------------------------------------------------------------- */

/*! \brief Largest tensor rank the runtime stores (TVMCrtNDArray shape storage, RPC decoding). */
#ifndef TVM_CRT_MAX_NDIM
#define TVM_CRT_MAX_NDIM 6
#endif

/*! \brief Capacity of TVMArgs (values and type codes held by a TVMPackedFunc). */
#ifndef TVM_CRT_MAX_ARGS
#define TVM_CRT_MAX_ARGS 10
#endif

/*! \brief Longest dtype string ("float32") including the NUL. */
#ifndef TVM_CRT_MAX_STRLEN_DLTYPE
#define TVM_CRT_MAX_STRLEN_DLTYPE 10
#endif

/*! \brief Longest function name kept by TVMPackedFunc, including the NUL. */
#ifndef TVM_CRT_MAX_STRLEN_FUNCTION_NAME
#define TVM_CRT_MAX_STRLEN_FUNCTION_NAME 120
#endif

/*! \brief Longest parameter/tensor name including the NUL (kept for crt_config compatibility). */
#ifndef TVM_CRT_MAX_STRLEN_PARAM_NAME
#define TVM_CRT_MAX_STRLEN_PARAM_NAME 80
#endif

/* ---- Functions and modules ---------------------------------------------------------------- */

/*! \brief Bytes of static storage for the mutable global function registry (names + pointers). */
#ifndef TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES
#define TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES 512
#endif

/*! \brief Module table slots (system library + AOT executor); also the globals' pseudo-index. */
#ifndef TVM_CRT_MAX_REGISTERED_MODULES
#define TVM_CRT_MAX_REGISTERED_MODULES 2
#endif

/* ---- Memory ------------------------------------------------------------------------------- */

/*! \brief Alignment (bytes, power of two) of stack-allocator bases and tensor allocations. */
#ifndef TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES
#define TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES 16
#endif

/*
 * \brief 1 = the stack allocator tags each block and rejects out-of-order frees with
 * kTvmErrorPlatformStackAllocBadFree (4 bytes per block); 0 = no tags, only range checks.
 * Defined with no value (TVM's style) also means on. TVM's crt_config.h template spelled it
 * ..._FIFO_CHECK although the check is LIFO; that spelling is accepted as a synonym.
 */
#if !defined(TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK) && \
    defined(TVM_CRT_STACK_ALLOCATOR_ENABLE_FIFO_CHECK)
#define TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK TVM_CRT_STACK_ALLOCATOR_ENABLE_FIFO_CHECK
#endif
#ifndef TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK
#define TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK 1
#endif
/* Normalised form used by the sources: an empty definition counts as 1. */
#if ~(~TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK + 0) == 0 && \
    ~(~TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK + 1) == 1
#define TVM_CRT_STACK_ALLOCATOR_LIFO_CHECK_ON 1
#elif TVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK
#define TVM_CRT_STACK_ALLOCATOR_LIFO_CHECK_ON 1
#else
#define TVM_CRT_STACK_ALLOCATOR_LIFO_CHECK_ON 0
#endif

/* ---- RPC server (used by crt/src/rpc_server and rpc_common) ------------------------------- */

/*! \brief Largest RPC frame the device receives, length header included (= receive buffer). */
#ifndef TVM_CRT_MAX_PACKET_SIZE_BYTES
#define TVM_CRT_MAX_PACKET_SIZE_BYTES 2048
#endif

/*! \brief Static arena the RPC server decodes one request into (strings, shapes, tensors). */
#ifndef TVM_CRT_RPC_ARENA_SIZE_BYTES
#define TVM_CRT_RPC_ARENA_SIZE_BYTES (2 * TVM_CRT_MAX_PACKET_SIZE_BYTES)
#endif

/* ---- Platform library (crt/src/platform, library "platform" in crt/libraries.txt) -------- */

/*!
 * \brief Bytes of the static pool behind the platform library's TVMPlatformMemoryAllocate: the
 * tensors and byte arrays the host allocates over RPC (TVM's name for it). Unused without that
 * library. The page allocator keeps about 88 bytes of bookkeeping per page in the pool.
 */
#ifndef TVM_WORKSPACE_SIZE_BYTES
#define TVM_WORKSPACE_SIZE_BYTES (64 * 1024)
#endif

/*! \brief log2 of the page size of that pool (8: 256-byte pages; allocations round up to one). */
#ifndef TVM_CRT_PLATFORM_PAGE_SIZE_LOG2
#define TVM_CRT_PLATFORM_PAGE_SIZE_LOG2 8
#endif

/* ---- Application -------------------------------------------------------------------------- */

/*!
 * \brief Bytes of the model workspace an application hands to TVMCrtWorkspace_Init (a static
 * buffer in its main.c): the largest workspace_size_bytes of its modules plus allocator slack.
 * A generated crt_config.h sets it per model; the runtime itself does not read it.
 */
#ifndef TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES
#define TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES (16 * 1024)
#endif

/* ---- Range checks ------------------------------------------------------------------------- */

#if TVM_CRT_LOG_LEVEL < TVM_CRT_LOG_LEVEL_ERROR || TVM_CRT_LOG_LEVEL > TVM_CRT_LOG_LEVEL_DEBUG
#error "TVM_CRT_LOG_LEVEL must be one of TVM_CRT_LOG_LEVEL_ERROR..TVM_CRT_LOG_LEVEL_DEBUG (0..3)"
#endif
#if TVM_CRT_LOG_MESSAGE_SIZE_BYTES < 16 || TVM_CRT_LOG_MESSAGE_SIZE_BYTES > 65536
#error "TVM_CRT_LOG_MESSAGE_SIZE_BYTES must be between 16 and 65536"
#endif
#if TVM_CRT_LAST_ERROR_SIZE_BYTES < 16 || TVM_CRT_LAST_ERROR_SIZE_BYTES > 65536
#error "TVM_CRT_LAST_ERROR_SIZE_BYTES must be between 16 and 65536"
#endif
#if TVM_CRT_MAX_NDIM < 1 || TVM_CRT_MAX_NDIM > 32
#error "TVM_CRT_MAX_NDIM must be between 1 and 32"
#endif
#if TVM_CRT_MAX_ARGS < 1 || TVM_CRT_MAX_ARGS > 255
#error "TVM_CRT_MAX_ARGS must be between 1 and 255"
#endif
#if TVM_CRT_MAX_STRLEN_DLTYPE < 8
#error "TVM_CRT_MAX_STRLEN_DLTYPE must be at least 8 (\"float32\" + NUL)"
#endif
#if TVM_CRT_MAX_STRLEN_FUNCTION_NAME < 16 || TVM_CRT_MAX_STRLEN_FUNCTION_NAME > 4096
#error "TVM_CRT_MAX_STRLEN_FUNCTION_NAME must be between 16 and 4096"
#endif
#if TVM_CRT_MAX_STRLEN_PARAM_NAME < 8
#error "TVM_CRT_MAX_STRLEN_PARAM_NAME must be at least 8"
#endif
#if TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES < 256 || TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES > 65535
#error "TVM_CRT_GLOBAL_FUNC_REGISTRY_SIZE_BYTES must be between 256 (the built-in globals) and 65535"
#endif
#if TVM_CRT_MAX_REGISTERED_MODULES < 2 || TVM_CRT_MAX_REGISTERED_MODULES > 0x7ffe
#error "TVM_CRT_MAX_REGISTERED_MODULES must be between 2 (system lib + executor) and 32766"
#endif
#if TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES < 4 || TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES > 4096 || \
    (TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES & (TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES - 1)) != 0
#error "TVM_RUNTIME_ALLOC_ALIGNMENT_BYTES must be a power of two between 4 and 4096"
#endif
#if TVM_CRT_MAX_PACKET_SIZE_BYTES < 128 || TVM_CRT_MAX_PACKET_SIZE_BYTES > 0x7fffffff
#error "TVM_CRT_MAX_PACKET_SIZE_BYTES must be at least 128"
#endif
#if TVM_CRT_RPC_ARENA_SIZE_BYTES < 256
#error "TVM_CRT_RPC_ARENA_SIZE_BYTES must be at least 256"
#endif
#if TVM_WORKSPACE_SIZE_BYTES < 1024 || TVM_WORKSPACE_SIZE_BYTES > 0x7fffffff
#error "TVM_WORKSPACE_SIZE_BYTES must be between 1024 and 2^31 - 1"
#endif
#if TVM_CRT_PLATFORM_PAGE_SIZE_LOG2 < 3 || TVM_CRT_PLATFORM_PAGE_SIZE_LOG2 > 20
#error "TVM_CRT_PLATFORM_PAGE_SIZE_LOG2 must be between 3 and 20 (8 to 1 MiB pages)"
#endif
#if TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES < 16 || TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES > 0x7fffffff
#error "TVM_CRT_MODEL_WORKSPACE_SIZE_BYTES must be between 16 and 2^31 - 1"
#endif

#endif  /* TVM_RUNTIME_CRT_CONFIG_H_ */

/*
 * tvm/runtime/crt/logging.h: log messages and fatal checks.
 *
 * TVMLogf formats one message with TVMPlatformFormatMessage into a TVM_CRT_LOG_MESSAGE_SIZE_BYTES
 * buffer (longer messages are cut) and hands it to the current sink. The default sink drops the
 * message, so the runtime is silent unless someone installs a sink: the RPC server installs one
 * that sends a log frame to the host; a standalone application may install one that writes to a
 * UART. TVMLogf is not reentrant and must not be called from interrupt handlers.
 */
#ifndef TVM_RUNTIME_CRT_LOGGING_H_
#define TVM_RUNTIME_CRT_LOGGING_H_

#include <stddef.h>
#include <tvm/runtime/crt/config.h>
#include <tvm/runtime/crt/error_codes.h>
#include <tvm/runtime/crt/platform.h>

#ifdef __cplusplus
extern "C" {
#endif

/*!
 * \brief Receives each formatted log message.
 * \param ctx The pointer given to TVMCrtLog_SetSink.
 * \param msg The message, NUL-terminated, without a trailing newline added; valid only during
 *   the call.
 * \param len strlen(msg).
 */
typedef void (*TVMCrtLogSink)(void* ctx, const char* msg, size_t len);

/*! \brief Install sink (NULL restores the default, which drops messages). */
void TVMCrtLog_SetSink(TVMCrtLogSink sink, void* ctx);

/*! \brief Format a message printf-style and pass it to the sink. */
void TVMLogf(const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/*! \brief Level-filtered logging: compiled out when above TVM_CRT_LOG_LEVEL. */
#if TVM_CRT_LOG_LEVEL >= TVM_CRT_LOG_LEVEL_ERROR
#define TVM_CRT_LOG_ERROR(...) TVMLogf(__VA_ARGS__)
#else
#define TVM_CRT_LOG_ERROR(...) ((void)0)
#endif
#if TVM_CRT_LOG_LEVEL >= TVM_CRT_LOG_LEVEL_WARN
#define TVM_CRT_LOG_WARN(...) TVMLogf(__VA_ARGS__)
#else
#define TVM_CRT_LOG_WARN(...) ((void)0)
#endif
#if TVM_CRT_LOG_LEVEL >= TVM_CRT_LOG_LEVEL_INFO
#define TVM_CRT_LOG_INFO(...) TVMLogf(__VA_ARGS__)
#else
#define TVM_CRT_LOG_INFO(...) ((void)0)
#endif
#if TVM_CRT_LOG_LEVEL >= TVM_CRT_LOG_LEVEL_DEBUG
#define TVM_CRT_LOG_DEBUG(...) TVMLogf(__VA_ARGS__)
#else
#define TVM_CRT_LOG_DEBUG(...) ((void)0)
#endif

/*!
 * \brief Fatal check for programming errors only (never for bad input, which gets an error
 * code): logs "<file>:<line>: check failed: <cond>" and calls
 * TVMPlatformAbort(kTvmErrorPlatformCheckFailure).
 */
#define TVM_CRT_CHECK(cond)                                                     \
  do {                                                                          \
    if (!(cond)) {                                                              \
      TVMLogf("%s:%d: check failed: %s", __FILE__, __LINE__, #cond);            \
      TVMPlatformAbort(kTvmErrorPlatformCheckFailure);                          \
    }                                                                           \
  } while (0)

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* TVM_RUNTIME_CRT_LOGGING_H_ */

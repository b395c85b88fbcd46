/*
 * TVMLogf: format into a static buffer with TVMPlatformFormatMessage and hand the text to the
 * installed sink (default: none, the message is dropped). See logging.h.
 */
#include <stdarg.h>
#include <stddef.h>
#include <tvm/runtime/crt/logging.h>
#include <tvm/runtime/crt/platform.h>

static TVMCrtLogSink g_log_sink;
static void* g_log_sink_ctx;
static char g_log_buffer[TVM_CRT_LOG_MESSAGE_SIZE_BYTES];
static int g_log_busy; /* a sink that logs would overwrite the buffer: drop nested messages */

void TVMCrtLog_SetSink(TVMCrtLogSink sink, void* ctx) {
  g_log_sink = sink;
  g_log_sink_ctx = ctx;
}

void TVMLogf(const char* fmt, ...) {
  if (g_log_sink == NULL || g_log_busy) {
    return;
  }
  g_log_busy = 1;
  va_list args;
  va_start(args, fmt);
  size_t len = TVMPlatformFormatMessage(g_log_buffer, sizeof(g_log_buffer), fmt, args);
  va_end(args);
  if (len >= sizeof(g_log_buffer)) {
    len = sizeof(g_log_buffer) - 1;
  }
  g_log_buffer[len] = '\0';
  g_log_sink(g_log_sink_ctx, g_log_buffer, len);
  g_log_busy = 0;
}

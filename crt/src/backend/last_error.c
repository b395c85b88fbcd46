/*
 * The last-error message: one static buffer of TVM_CRT_LAST_ERROR_SIZE_BYTES, written by
 * TVMAPISetLastError / TVMAPIErrorf and read by TVMGetLastError. Not thread-safe (the runtime is
 * single-threaded).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <tvm/runtime/c_backend_api.h>
#include <tvm/runtime/c_runtime_api.h>
#include <tvm/runtime/crt/config.h>

static char g_tvm_last_error[TVM_CRT_LAST_ERROR_SIZE_BYTES];

void TVMAPISetLastError(const char* msg) {
  if (msg == NULL) {
    g_tvm_last_error[0] = '\0';
    return;
  }
  size_t n = strlen(msg);
  if (n > sizeof(g_tvm_last_error) - 1) {
    n = sizeof(g_tvm_last_error) - 1;
  }
  memmove(g_tvm_last_error, msg, n);
  g_tvm_last_error[n] = '\0';
}

void TVMAPIErrorf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  int n = vsnprintf(g_tvm_last_error, sizeof(g_tvm_last_error), fmt, args);
  va_end(args);
  if (n < 0) {
    g_tvm_last_error[0] = '\0';
  }
}

const char* TVMGetLastError(void) { return g_tvm_last_error; }

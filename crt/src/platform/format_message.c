/*!
 * \file platform/format_message.c
 * \brief TVMPlatformFormatMessage with the C library's vsnprintf (every C99 library has it; on
 *     newlib-nano, floating-point conversions need -u _printf_float). Part of the "platform"
 *     library.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <tvm/runtime/crt/platform.h>

size_t TVMPlatformFormatMessage(char* out_buf, size_t out_buf_size_bytes, const char* fmt,
                                va_list args) {
  int n;
  if (out_buf_size_bytes == 0) {
    return 0;
  }
  n = vsnprintf(out_buf, out_buf_size_bytes, fmt, args);
  if (n < 0) {
    out_buf[0] = '\0';
    return 0;
  }
  return (size_t)n < out_buf_size_bytes ? (size_t)n : out_buf_size_bytes - 1;
}

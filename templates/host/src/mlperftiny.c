/*
 * MLPerf Tiny firmware of the host template (project type "mlperftiny"): the benchmark's UART
 * protocol (crt/src/mlperftiny) on stdin/stdout, timed by CLOCK_MONOTONIC. Exits at end of input.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include <tvm/runtime/crt/mlperftiny.h>

extern const TVMCrtMlperfTinyAotInfo kTVMMlperfTinyAotInfo;

void TVMCrtMlperfTinyPort_Write(const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(STDOUT_FILENO, data, size);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      _exit(1); /* the host went away */
    }
    data += n;
    size -= (size_t)n;
  }
}

uint64_t TVMCrtMlperfTinyPort_Micros(void) {
  struct timespec ts;
  (void)clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

int main(void) {
  static TVMCrtMlperfTiny bench;
  static TVMCrtMlperfTinyAot aot;
  static TVMCrtMlperfTinyModel model;
  const char* why = "";
  uint8_t buf[256];
  if (TVMCrtMlperfTinyAot_Init(&aot, &model, &kTVMMlperfTinyAotInfo, &why) != 0) {
    fprintf(stderr, "error: mlperftiny: %s\n", why);
    return 1;
  }
  TVMCrtMlperfTiny_Start(&bench, &model, kTVMMlperfTinyAotInfo.db,
                         kTVMMlperfTinyAotInfo.db_capacity);
  for (;;) {
    ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      return 0;
    }
    TVMCrtMlperfTiny_Receive(&bench, buf, (size_t)n);
  }
}

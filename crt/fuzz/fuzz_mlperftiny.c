/*
 * fuzz_mlperftiny.c: libFuzzer target for the MLPerf Tiny command parser (crt/src/mlperftiny),
 * which takes wire bytes from the host. The input is fed in pieces whose size the first byte
 * picks. Checks: the output is whole "\r\n" lines of printable ASCII, every '%' is answered by
 * exactly one m-ready, the db buffer is never written past N, and a stand-in model is run only
 * after a complete load.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tvm/runtime/crt/mlperftiny.h>

#define DB_CAPACITY 24u

static uint8_t g_db[DB_CAPACITY + 8u]; /* guard bytes after the capacity */
static char g_line[512];
static size_t g_line_len;
static size_t g_ready;
static size_t g_loads;

void TVMCrtMlperfTinyPort_Write(const char* data, size_t size) {
  size_t i;
  for (i = 0; i < size; i++) {
    char c = data[i];
    if (c == '\n') {
      if (g_line_len == 0 || g_line[g_line_len - 1] != '\r') abort(); /* bare \n */
      g_line[g_line_len - 1] = '\0';
      if (strcmp(g_line, "m-ready") == 0) g_ready++;
      g_line_len = 0;
    } else {
      if (!(c == '\r' || (c >= 0x20 && c < 0x7f))) abort(); /* not printable ASCII */
      if (g_line_len + 1 >= sizeof(g_line)) abort();     /* a runaway line */
      g_line[g_line_len++] = c;
    }
  }
}

static uint64_t g_clock;
uint64_t TVMCrtMlperfTinyPort_Micros(void) { return g_clock += 7; }

static const char* Load(void* ctx, const uint8_t* data, size_t size) {
  (void)ctx;
  (void)data;
  g_loads++;
  return size % 2 == 0 ? NULL : "odd size";
}
/* A host may ask for any number of runs; the stand-in fails after a few thousand per input so
 * that "infer 99999999999" ends quickly (and the failure path is exercised). */
static size_t g_runs;
static int Infer(void* ctx) {
  (void)ctx;
  return ++g_runs > 4096u ? -1 : 0;
}
static size_t Results(void* ctx, float* out, size_t max) {
  size_t i;
  (void)ctx;
  for (i = 0; i < 5 && i < max; i++) out[i] = (float)i * -0.3f + (float)g_db[i];
  return i;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static TVMCrtMlperfTiny bench;
  static const TVMCrtMlperfTinyModel model = {"kws01", NULL, Load, Infer, Results, NULL};
  size_t piece;
  size_t pos = 1;
  size_t terminators = 0;
  size_t i;
  if (size == 0) return 0;
  piece = (size_t)(data[0] % 16u) + 1u;
  memset(g_db, 0xA5, sizeof(g_db));
  g_line_len = 0;
  g_ready = 0;
  g_loads = 0;
  g_runs = 0;
  TVMCrtMlperfTiny_Start(&bench, &model, g_db, DB_CAPACITY);
  if (g_ready != 1) abort();
  g_ready = 0;
  for (i = 1; i < size; i++) {
    if (data[i] == '%') terminators++;
  }
  while (pos < size) {
    size_t n = size - pos < piece ? size - pos : piece;
    TVMCrtMlperfTiny_Receive(&bench, data + pos, n);
    pos += n;
  }
  if (g_ready != terminators || g_line_len != 0) abort(); /* one m-ready per command */
  for (i = DB_CAPACITY; i < sizeof(g_db); i++) {
    if (g_db[i] != 0xA5) abort(); /* written past the buffer */
  }
  if (bench.db_size > DB_CAPACITY || bench.db_pos > bench.db_size) abort();
  return 0;
}

/*
 * fuzz_mlperftiny.c: libFuzzer target for the MLPerf Tiny command parser (crt/src/mlperftiny),
 * which takes wire bytes from the host. The input is fed in pieces whose size the first byte
 * picks. Checks: the output is whole "\r\n" lines of printable ASCII, every '%' is answered by
 * exactly one m-ready, the db buffer is never written past N, a stand-in model is run only
 * after a complete load, and every m-db-crc-[loaded,size,crc] line (project-api's `db crc`)
 * states the parser's own counts and the CRC-32 of the loaded bytes as a table-driven CRC here
 * computes it.
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
static TVMCrtMlperfTiny g_bench;
static uint32_t g_crc_table[256];

/* CRC-32 (zlib's), table-driven: an implementation apart from the firmware's bitwise one. */
static uint32_t TableCrc(const uint8_t* data, size_t size) {
  uint32_t crc = 0xFFFFFFFFu;
  size_t i;
  if (g_crc_table[1] == 0u) {
    uint32_t n;
    for (n = 0; n < 256u; n++) {
      uint32_t c = n;
      int k;
      for (k = 0; k < 8; k++) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      g_crc_table[n] = c;
    }
  }
  for (i = 0; i < size; i++) crc = g_crc_table[(crc ^ data[i]) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

/* A complete m-db-crc-[...] line: its numbers must be the parser's state, its CRC ours. */
static void CheckCrcLine(const char* line) {
  static const char head[] = "m-db-crc-[";
  char* end;
  unsigned long loaded;
  unsigned long size;
  unsigned long crc;
  if (strncmp(line, head, sizeof(head) - 1) != 0) return;
  loaded = strtoul(line + sizeof(head) - 1, &end, 10);
  if (*end != ',') abort();
  size = strtoul(end + 1, &end, 10);
  if (*end != ',' || strlen(end + 1) != 9 || end[9] != ']') abort();
  crc = strtoul(end + 1, &end, 16);
  if (*end != ']') abort();
  if (loaded != g_bench.db_pos || size != g_bench.db_size) abort();
  if ((uint32_t)crc != TableCrc(g_db, g_bench.db_pos)) abort();
}

void TVMCrtMlperfTinyPort_Write(const char* data, size_t size) {
  size_t i;
  for (i = 0; i < size; i++) {
    char c = data[i];
    if (c == '\n') {
      if (g_line_len == 0 || g_line[g_line_len - 1] != '\r') abort(); /* bare \n */
      g_line[g_line_len - 1] = '\0';
      if (strcmp(g_line, "m-ready") == 0) g_ready++;
      CheckCrcLine(g_line);
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
  TVMCrtMlperfTiny* const bench = &g_bench;
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
  TVMCrtMlperfTiny_Start(bench, &model, g_db, DB_CAPACITY);
  if (g_ready != 1) abort();
  g_ready = 0;
  for (i = 1; i < size; i++) {
    if (data[i] == '%') terminators++;
  }
  while (pos < size) {
    size_t n = size - pos < piece ? size - pos : piece;
    TVMCrtMlperfTiny_Receive(bench, data + pos, n);
    pos += n;
  }
  if (g_ready != terminators || g_line_len != 0) abort(); /* one m-ready per command */
  for (i = DB_CAPACITY; i < sizeof(g_db); i++) {
    if (g_db[i] != 0xA5) abort(); /* written past the buffer */
  }
  if (bench->db_size > DB_CAPACITY || bench->db_pos > bench->db_size) abort();
  return 0;
}

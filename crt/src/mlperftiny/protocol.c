/*
 * MLPerf Tiny UART protocol: command assembly, parsing and replies (see mlperftiny.h). Every
 * malformed command gets one e-[...] line and m-ready; nothing a host sends can overrun a buffer.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <tvm/runtime/crt/mlperftiny.h>

#define BYTES_PER_PRINT_LINE 8u

static void Put(const char* text) { TVMCrtMlperfTinyPort_Write(text, strlen(text)); }

static void PutLine(const char* text) {
  Put(text);
  Put("\r\n");
}

/* "<head><text><tail>\r\n": text cut to one command's length, bytes outside printable ASCII
 * shown as '?' (a reply is always text, whatever the host sent). */
static void PutWrapped(const char* head, const char* text, const char* tail) {
  char line[TVM_CRT_MLPERFTINY_CMD_SIZE + 64];
  char shown[TVM_CRT_MLPERFTINY_CMD_SIZE + 1];
  size_t i;
  for (i = 0; i < TVM_CRT_MLPERFTINY_CMD_SIZE && text[i] != '\0'; i++) {
    shown[i] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
  }
  shown[i] = '\0';
  (void)snprintf(line, sizeof(line), "%s%s%s", head, shown, tail);
  PutLine(line);
}

static void PutNumber(const char* head, uint64_t value, const char* tail) {
  char digits[24];
  char line[48];
  size_t n = 0;
  do {
    digits[n++] = (char)('0' + (int)(value % 10u));
    value /= 10u;
  } while (value != 0u);
  (void)snprintf(line, sizeof(line), "%s", head);
  {
    size_t len = strlen(line);
    while (n > 0 && len + 1 < sizeof(line)) {
      line[len++] = digits[--n];
    }
    line[len] = '\0';
  }
  Put(line);
  PutLine(tail);
}

static void Timestamp(void) { PutNumber("m-lap-us-", TVMCrtMlperfTinyPort_Micros(), ""); }

size_t TVMCrtMlperfTiny_FormatFixed3(float value, char* out, size_t size) {
  double x = (double)value;
  double whole;
  double frac;
  uint64_t milli;
  int negative = 0;
  char text[40];
  size_t n;
  if (x != x) {
    (void)snprintf(text, sizeof(text), "nan");
  } else if (x > 1e15 || x < -1e15) {
    (void)snprintf(text, sizeof(text), "%sinf", x < 0 ? "-" : "");
  } else {
    if (signbit(x)) {
      negative = 1;
      x = -x;
    }
    /* Round to the nearest thousandth, ties to even, as printf rounds an exact tie. */
    x *= 1000.0;
    whole = (double)(uint64_t)x;
    frac = x - whole;
    milli = (uint64_t)whole;
    if (frac > 0.5 || (frac == 0.5 && (milli & 1u) != 0u)) {
      milli++;
    }
    (void)snprintf(text, sizeof(text), "%s%lu.%03u", negative ? "-" : "",
                   (unsigned long)(milli / 1000u), (unsigned)(milli % 1000u));
  }
  n = strlen(text);
  if (size > 0) {
    size_t k = n < size - 1 ? n : size - 1;
    memcpy(out, text, k);
    out[k] = '\0';
  }
  return n;
}

static void Results(TVMCrtMlperfTiny* bench) {
  float values[TVM_CRT_MLPERFTINY_MAX_RESULTS];
  size_t count = bench->model->results(bench->model->ctx, values, TVM_CRT_MLPERFTINY_MAX_RESULTS);
  size_t i;
  char number[40];
  Put("m-results-[");
  for (i = 0; i < count; i++) {
    size_t n = TVMCrtMlperfTiny_FormatFixed3(values[i], number, sizeof(number));
    if (i > 0) {
      Put(",");
    }
    TVMCrtMlperfTinyPort_Write(number, n);
  }
  PutLine("]");
}

/* A decimal count: 1 and *value on success, 0 for anything else (signs, letters, overflow). */
static int ParseCount(const char* text, size_t* value) {
  size_t v = 0;
  if (text == NULL || *text == '\0') {
    return 0;
  }
  for (; *text != '\0'; text++) {
    if (*text < '0' || *text > '9' || v > ((size_t)-1 - 9u) / 10u) {
      return 0;
    }
    v = v * 10u + (size_t)(*text - '0');
  }
  *value = v;
  return 1;
}

static int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The next space-separated word of *cursor, or NULL. */
static char* NextWord(char** cursor) {
  char* p = *cursor;
  char* word;
  while (*p == ' ') p++;
  if (*p == '\0') {
    *cursor = p;
    return NULL;
  }
  word = p;
  while (*p != '\0' && *p != ' ') p++;
  if (*p == ' ') *p++ = '\0';
  *cursor = p;
  return word;
}

static void Help(void) {
  PutLine(TVM_CRT_MLPERFTINY_FW_VERSION);
  PutLine("");
  PutLine("help         : this list");
  PutLine("name         : the device's name");
  PutLine("profile      : firmware and model versions");
  PutLine("timestamp    : print the timer (m-lap-us-T)");
  PutLine("db load N    : expect N bytes in the buffer");
  PutLine("db HH[HH]*   : load hex bytes until N have arrived");
  PutLine("db print [N [OFFSET]] : print N buffer bytes from OFFSET as hex");
  PutLine("infer N [W=10] : load the buffer, W warm-up runs, N timed runs, results");
  PutLine("results      : the last inference's results");
  /* "reset" and "db crc" (project-api's, see mlperftiny.h) are left out: help stays the
   * reference's */
}

static void DbPrint(TVMCrtMlperfTiny* bench, char* cursor) {
  size_t count = bench->db_size;
  size_t offset = 0;
  char* word = NextWord(&cursor);
  size_t i;
  if (word != NULL && !ParseCount(word, &count)) {
    PutWrapped("e-[Invalid byte count '", word, "']");
    return;
  }
  word = NextWord(&cursor);
  if (word != NULL && !ParseCount(word, &offset)) {
    PutWrapped("e-[Invalid offset '", word, "']");
    return;
  }
  if (offset > bench->db_size || count > bench->db_size - offset) {
    PutNumber("e-[db print reaches past the loaded bytes: ", (uint64_t)bench->db_size, "]");
    return;
  }
  for (i = 0; i < count; i++) {
    static const char digits[] = "0123456789abcdef";
    char pair[3];
    uint8_t b = bench->db[offset + i];
    if (i % BYTES_PER_PRINT_LINE == 0) Put("m-buffer-");
    pair[0] = digits[b >> 4];
    pair[1] = digits[b & 15u];
    pair[2] = '-';
    TVMCrtMlperfTinyPort_Write(pair, (i + 1) % BYTES_PER_PRINT_LINE == 0 || i + 1 == count ? 2 : 3);
    if ((i + 1) % BYTES_PER_PRINT_LINE == 0 || i + 1 == count) Put("\r\n");
  }
}

uint32_t TVMCrtMlperfTiny_Crc32(uint32_t crc, const uint8_t* data, size_t size) {
  size_t i;
  int bit;
  crc = ~crc;
  for (i = 0; i < size; i++) {
    crc ^= data[i];
    for (bit = 0; bit < 8; bit++) {
      crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
  }
  return ~crc;
}

#ifndef TVM_CRT_MLPERFTINY_NO_DB_CRC
/* "db crc" (project-api's): m-db-crc-[<loaded>,<size>,<crc32>] over the bytes loaded so far. */
static void DbCrc(TVMCrtMlperfTiny* bench, char* cursor) {
  static const char digits[] = "0123456789abcdef";
  char* word = NextWord(&cursor);
  char hex[9];
  char line[96];
  uint32_t crc;
  int k;
  if (word != NULL) {
    PutWrapped("e-[Command 'db crc' takes no arguments: '", word, "']");
    return;
  }
  crc = TVMCrtMlperfTiny_Crc32(0u, bench->db, bench->db_pos);
  for (k = 0; k < 8; k++) {
    hex[k] = digits[(crc >> (28 - 4 * k)) & 15u];
  }
  hex[8] = '\0';
  (void)snprintf(line, sizeof(line), "m-db-crc-[%lu,%lu,%s]", (unsigned long)bench->db_pos,
                 (unsigned long)bench->db_size, hex);
  PutLine(line);
}
#endif

static void Db(TVMCrtMlperfTiny* bench, char* cursor) {
  char* sub = NextWord(&cursor);
  char line[96];
  size_t n;
  size_t i;
  if (sub == NULL) {
    PutLine("e-[Command 'db' requires a subcommand]");
  } else if (strcmp(sub, "load") == 0) {
    char* word = NextWord(&cursor);
    if (word == NULL) {
      PutLine("e-[Command 'db load' requires the # of bytes]");
    } else if (!ParseCount(word, &n)) {
      PutWrapped("e-[Invalid byte count '", word, "']");
    } else if (n == 0) {
      PutLine("e-[Command 'db load' must be >0 bytes]");
    } else if (n > bench->db_capacity) {
      (void)snprintf(line, sizeof(line), "e-[Supplied buffer size %lu exceeds maximum of %lu]",
                     (unsigned long)n, (unsigned long)bench->db_capacity);
      PutLine(line);
    } else {
      bench->db_size = n;
      bench->db_pos = 0;
      (void)snprintf(line, sizeof(line), "m-[Expecting %lu bytes]", (unsigned long)n);
      PutLine(line);
    }
  } else if (strcmp(sub, "print") == 0) {
    DbPrint(bench, cursor);
#ifndef TVM_CRT_MLPERFTINY_NO_DB_CRC
  } else if (strcmp(sub, "crc") == 0) {
    DbCrc(bench, cursor);
#endif
  } else {
    n = strlen(sub);
    if (bench->db_pos >= bench->db_size) {
      PutLine(bench->db_size == 0 ? "e-[Command 'db' needs 'db load N' first]"
                                  : "e-[All bytes are loaded; send 'db load N' again]");
      return;
    }
    if ((n & 1u) != 0) {
      PutLine("e-[Insufficent number of hex digits]");
      return;
    }
    for (i = 0; i < n; i += 2) {
      if (HexDigit(sub[i]) < 0 || HexDigit(sub[i + 1]) < 0) {
        char pair[3];
        pair[0] = sub[i];
        pair[1] = sub[i + 1];
        pair[2] = '\0';
        PutWrapped("e-[Invalid hex digit '", pair, "']");
        return;
      }
    }
    for (i = 0; i < n; i += 2) {
      bench->db[bench->db_pos++] = (uint8_t)(HexDigit(sub[i]) * 16 + HexDigit(sub[i + 1]));
      if (bench->db_pos == bench->db_size) {
        PutLine("m-load-done");
        return; /* the remaining digits are ignored, as the reference does */
      }
    }
  }
}

static void Infer(TVMCrtMlperfTiny* bench, char* cursor) {
  size_t n = 1;
  size_t warmup = 10;
  size_t k;
  char* word = NextWord(&cursor);
  const char* err;
  if (word != NULL) {
    if (!ParseCount(word, &n) || n == 0) {
      PutLine("e-[Inference iterations must be >0]");
      return;
    }
    word = NextWord(&cursor);
    if (word != NULL && !ParseCount(word, &warmup)) {
      PutLine("e-[Inference warmup must be >=0]");
      return;
    }
  }
  if (bench->db_size == 0 || bench->db_pos != bench->db_size) {
    char line[96];
    (void)snprintf(line, sizeof(line), "e-[Input not loaded: %lu of %lu bytes; use db load first]",
                   (unsigned long)bench->db_pos, (unsigned long)bench->db_size);
    PutLine(line);
    return;
  }
  err = bench->model->load(bench->model->ctx, bench->db, bench->db_size);
  if (err != NULL) {
    PutWrapped("e-[", err, "]");
    return;
  }
  PutNumber("m-warmup-start-", (uint64_t)warmup, "");
  for (k = 0; k < warmup; k++) {
    if (bench->model->infer(bench->model->ctx) != 0) {
      PutLine("e-[Inference failed]");
      return;
    }
  }
  PutLine("m-warmup-done");
  PutNumber("m-infer-start-", (uint64_t)n, "");
  Timestamp();
  for (k = 0; k < n; k++) {
    if (bench->model->infer(bench->model->ctx) != 0) {
      PutLine("e-[Inference failed]");
      return;
    }
  }
  Timestamp();
  PutLine("m-infer-done");
  Results(bench);
}

void TVMCrtMlperfTiny_Command(TVMCrtMlperfTiny* bench, char* command) {
  char* cursor = command;
  char* word = NextWord(&cursor);
  if (word == NULL) {
    /* An empty command only asks for m-ready (a host may send '%' to resynchronise). */
  } else if (strcmp(word, "name") == 0) {
    PutLine("m-name-dut-[" TVM_CRT_MLPERFTINY_VENDOR "]");
  } else if (strcmp(word, "timestamp") == 0) {
    Timestamp();
  } else if (strcmp(word, "profile") == 0) {
    PutLine("m-profile-[" TVM_CRT_MLPERFTINY_FW_VERSION "]");
    PutWrapped("m-model-[", bench->model->version, "]");
  } else if (strcmp(word, "help") == 0) {
    Help();
  } else if (strcmp(word, "db") == 0) {
    Db(bench, cursor);
  } else if (strcmp(word, "infer") == 0) {
    Infer(bench, cursor);
  } else if (strcmp(word, "results") == 0) {
    Results(bench);
  } else if (strcmp(word, "reset") == 0) {
    if (bench->model->reset != NULL && bench->model->reset(bench->model->ctx) != 0) {
      PutLine("e-[Resetting the model's state failed]");
    } else {
      PutLine("m-reset-done");
    }
  } else {
    PutWrapped("e-[Unknown command: ", word, "]");
  }
  PutLine("m-ready");
}

void TVMCrtMlperfTiny_Start(TVMCrtMlperfTiny* bench, const TVMCrtMlperfTinyModel* model,
                            uint8_t* db, size_t db_capacity) {
  memset(bench, 0, sizeof(*bench));
  bench->model = model;
  bench->db = db;
  bench->db_capacity = db_capacity;
  PutLine("m-timestamp-mode-performance");
  Timestamp();
  PutLine("m-init-done");
  bench->ready = 1;
  PutLine("m-ready");
}

void TVMCrtMlperfTiny_Receive(TVMCrtMlperfTiny* bench, const uint8_t* data, size_t size) {
  size_t i;
  if (!bench->ready) {
    return;
  }
  for (i = 0; i < size; i++) {
    char c = (char)data[i];
    if (c == '%') {
      bench->cmd[bench->cmd_len] = '\0';
      if (bench->cmd_overflow) {
        PutLine("e-[Command too long]");
        PutLine("m-ready");
      } else {
        TVMCrtMlperfTiny_Command(bench, bench->cmd);
      }
      bench->cmd_len = 0;
      bench->cmd_overflow = 0;
    } else if (c == '\r' || c == '\n' || c == '\0') {
      /* line ends and NULs between commands are ignored (terminals send them) */
    } else if (bench->cmd_len < TVM_CRT_MLPERFTINY_CMD_SIZE) {
      bench->cmd[bench->cmd_len++] = c;
    } else {
      bench->cmd_overflow = 1;
    }
  }
}

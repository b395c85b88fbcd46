"""The C frame layer's bulk paths against byte-at-a-time references, for both CRC variants.

``TVM_CRT_CRC16_TABLE_SLICES`` 1 and 8 must compute the same CRC-16/CCITT-FALSE as a bitwise
reference at every length, alignment and starting value; the framer (which hands long runs
without 0xFF straight to its stream) must emit exactly the escaped bytes and CRC of a bytewise
reference; and the unframer (which hands such runs straight to its stream) must recover every
payload from any split of the wire, through a stream that takes few bytes per write. Built with
ASan+UBSan.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import REPO_ROOT, require_tool

CRT = REPO_ROOT / "crt"

DRIVER = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tvm/runtime/crt/rpc_common/crc16.h>
#include <tvm/runtime/crt/rpc_common/framing.h>

static int g_failures;
#define CHECK(cond, ...)                 \
  do {                                   \
    if (!(cond)) {                       \
      printf("FAIL line %d: ", __LINE__); \
      printf(__VA_ARGS__);               \
      printf("\n");                      \
      ++g_failures;                      \
      return;                            \
    }                                    \
  } while (0)

static uint32_t g_rng = 12345u;
static uint32_t Rand(void) {
  g_rng = g_rng * 1103515245u + 12345u;
  return g_rng >> 8;
}

static uint16_t BitwiseCrc(uint16_t crc, const uint8_t* d, size_t n) {
  size_t i;
  int b;
  for (i = 0; i < n; ++i) {
    crc ^= (uint16_t)(d[i] << 8);
    for (b = 0; b < 8; ++b) crc = (uint16_t)((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc;
}

typedef struct {
  uint8_t* data;
  size_t size, capacity, max_per_write;
  int done, valid;
  uint32_t announced;
} sink_t;

static tvm_crt_error_t SinkWrite(void* ctx, const uint8_t* d, size_t n, size_t* written) {
  sink_t* s = (sink_t*)ctx;
  if (s->max_per_write && n > s->max_per_write) n = s->max_per_write;
  if (n > s->capacity - s->size) n = s->capacity - s->size;
  memcpy(s->data + s->size, d, n);
  s->size += n;
  *written = n;
  return kTvmErrorNoError;
}
static void SinkStart(void* ctx, uint32_t n) { ((sink_t*)ctx)->announced = n; }
static void SinkDone(void* ctx, bool valid) {
  ((sink_t*)ctx)->done++;
  ((sink_t*)ctx)->valid = valid;
}

static void TestCrc(void) {
  static uint8_t data[1 << 20];
  size_t len, off, i;
  for (i = 0; i < sizeof(data); ++i) data[i] = (uint8_t)Rand();
  for (len = 0; len < 70; ++len) {
    for (off = 0; off < 9; ++off) {
      uint16_t init = (uint16_t)Rand();
      CHECK(TVMCrtCrc16_Update(init, data + off, len) == BitwiseCrc(init, data + off, len),
            "crc len %zu off %zu", len, off);
    }
  }
  {
    /* Around the two-lane blocks of the 8-slice variant (4096 bytes). */
    static const size_t kLens[] = {4095, 4096, 4097, 8191, 8192, 8200, 12289, 65536 + 5};
    for (i = 0; i < sizeof(kLens) / sizeof(kLens[0]); ++i) {
      for (off = 0; off < 4; ++off) {
        uint16_t init = (uint16_t)Rand();
        CHECK(TVMCrtCrc16_Update(init, data + off, kLens[i]) == BitwiseCrc(init, data + off, kLens[i]),
              "crc len %zu off %zu", kLens[i], off);
      }
    }
  }
  CHECK(TVMCrtCrc16_Update(TVM_CRT_CRC16_INIT, data, sizeof(data)) ==
            BitwiseCrc(TVM_CRT_CRC16_INIT, data, sizeof(data)), "crc of 1 MiB");
  CHECK(TVMCrtCrc16_Update(TVM_CRT_CRC16_INIT, (const uint8_t*)"123456789", 9) == 0x29B1, "check value");
}

/* A payload of long FF-free runs, FF-dense stretches and FF runs. */
static void MakePayload(uint8_t* p, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t run = 1 + Rand() % (Rand() % 4 == 0 ? 3000 : 40);
    int kind = (int)(Rand() % 3);
    for (; run > 0 && i < n; --run, ++i) {
      uint8_t c = (uint8_t)Rand();
      p[i] = kind == 0 ? (uint8_t)(c == 0xFF ? 0 : c) : kind == 1 ? 0xFF : c;
    }
  }
}

static size_t ReferenceFrame(const uint8_t* p, size_t n, int with_nop, uint8_t* out) {
  size_t o = 0, i;
  uint8_t len[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
  uint8_t crc_bytes[2];
  uint16_t crc;
  if (with_nop) out[o++] = 0xFE;
  out[o++] = 0xFF;
  out[o++] = 0xFD;
  for (i = 0; i < 4; ++i) {
    out[o++] = len[i];
    if (len[i] == 0xFF) out[o++] = 0xFF;
  }
  for (i = 0; i < n; ++i) {
    out[o++] = p[i];
    if (p[i] == 0xFF) out[o++] = 0xFF;
  }
  crc = BitwiseCrc(0xFFFF, out + with_nop, o - (size_t)with_nop);
  crc_bytes[0] = (uint8_t)crc;
  crc_bytes[1] = (uint8_t)(crc >> 8);
  for (i = 0; i < 2; ++i) {
    out[o++] = crc_bytes[i];
    if (crc_bytes[i] == 0xFF) out[o++] = 0xFF;
  }
  return o;
}

static void TestFramerAndUnframer(void) {
  enum { kMax = 200000 };
  static uint8_t payload[kMax], expected[2 * kMax + 16], wire[2 * kMax + 16], got[kMax];
  int round;
  for (round = 0; round < 40; ++round) {
    size_t n = round < 4 ? (size_t)round * 100 : Rand() % kMax;
    size_t wire_size, pos, k, pieces;
    sink_t ws = {wire, 0, sizeof(wire), 0, 0, 0, 0};
    sink_t ps = {got, 0, sizeof(got), 0, 0, 0, 0};
    TVMCrtWriteStream wstream = {SinkWrite, NULL, NULL, &ws};
    TVMCrtWriteStream pstream = {SinkWrite, SinkStart, SinkDone, &ps};
    TVMCrtFramer framer;
    TVMCrtUnframer unframer;
    MakePayload(payload, n);
    ws.max_per_write = round % 2 ? 0 : 1 + Rand() % 5000;
    TVMCrtFramer_Init(&framer, &wstream);
    /* Several payload chunks of random sizes. */
    CHECK(TVMCrtFramer_StartPacket(&framer, (uint32_t)n) == kTvmErrorNoError, "start");
    for (pos = 0, pieces = 0; pos < n; pos += k, ++pieces) {
      k = 1 + Rand() % (pieces % 2 ? 50 : 60000);
      if (k > n - pos) k = n - pos;
      CHECK(TVMCrtFramer_WritePayloadChunk(&framer, payload + pos, k) == kTvmErrorNoError, "chunk");
    }
    CHECK(TVMCrtFramer_FinishPacket(&framer) == kTvmErrorNoError, "finish");
    wire_size = ReferenceFrame(payload, n, 1, expected);
    CHECK(ws.size == wire_size && memcmp(wire, expected, wire_size) == 0,
          "round %d: framer output differs from the bytewise reference", round);

    ps.max_per_write = round % 3 ? 0 : 1 + Rand() % 700;
    TVMCrtUnframer_Init(&unframer, &pstream);
    for (pos = 0; pos < wire_size; pos += k) {
      size_t consumed = 0;
      k = 1 + Rand() % (round % 4 ? 70000 : 3);
      if (k > wire_size - pos) k = wire_size - pos;
      CHECK(TVMCrtUnframer_Write(&unframer, wire + pos, k, &consumed) == kTvmErrorNoError,
            "round %d: unframer error at %zu", round, pos);
      CHECK(consumed == k, "round %d: consumed %zu of %zu", round, consumed, k);
    }
    CHECK(ps.done == 1 && ps.valid && ps.announced == n && ps.size == n &&
              memcmp(got, payload, n) == 0,
          "round %d: unframer did not recover the payload", round);
  }
}

static void TestUnframerStreamFull(void) {
  /* A stream that fills up mid-run: the unframer reports it having consumed exactly the raw
   * bytes behind what the stream took. */
  static uint8_t payload[5000], wire[10100], got[3000];
  size_t wire_size, consumed = 0, i;
  sink_t ps = {got, 0, sizeof(got), 0, 0, 0, 0};
  TVMCrtWriteStream pstream = {SinkWrite, SinkStart, SinkDone, &ps};
  TVMCrtUnframer unframer;
  for (i = 0; i < sizeof(payload); ++i) payload[i] = (uint8_t)(i % 7 == 3 ? 0xFF : i % 251);
  wire_size = ReferenceFrame(payload, sizeof(payload), 0, wire);
  TVMCrtUnframer_Init(&unframer, &pstream);
  CHECK(TVMCrtUnframer_Write(&unframer, wire, wire_size, &consumed) == kTvmErrorWriteStreamShortWrite,
        "expected a short write");
  /* 6 header bytes, then the raw bytes of the first 3000 payload bytes. */
  {
    size_t raw = 6, taken = 0;
    for (i = 0; taken < sizeof(got); ++i, ++taken) raw += payload[i] == 0xFF ? 2 : 1;
    CHECK(consumed == raw, "consumed %zu, expected %zu", consumed, raw);
  }
  CHECK(ps.size == sizeof(got) && memcmp(got, payload, sizeof(got)) == 0, "partial payload");
}

int main(void) {
  TestCrc();
  TestFramerAndUnframer();
  TestUnframerStreamFull();
  printf("%d failed\n", g_failures);
  return g_failures != 0;
}
"""


@pytest.mark.parametrize("slices", [1, 8])
def test_bulk_paths_match_bytewise_references(tmp_path: Path, slices: int) -> None:
    cc = require_tool("cc")
    driver = tmp_path / "driver.c"
    driver.write_text(DRIVER)
    exe = tmp_path / "driver"
    sources = [CRT / "src" / "rpc_common" / f for f in ("crc16.c", "framing.c", "write_stream.c")]
    build = subprocess.run(
        [cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-g", "-O1",
         "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
         f"-DTVM_CRT_CRC16_TABLE_SLICES={slices}", "-I", str(CRT / "include"),
         str(driver), *map(str, sources), "-o", str(exe)],
        capture_output=True, text=True, check=False,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert run.stdout.strip().endswith("0 failed")


def test_bad_slice_setting_is_rejected(tmp_path: Path) -> None:
    cc = require_tool("cc")
    build = subprocess.run(
        [cc, "-std=c99", "-DTVM_CRT_CRC16_TABLE_SLICES=4", "-I", str(CRT / "include"), "-c",
         str(CRT / "src" / "rpc_common" / "crc16.c"), "-o", str(tmp_path / "crc16.o")],
        capture_output=True, text=True, check=False,
    )
    assert build.returncode != 0
    assert "TVM_CRT_CRC16_TABLE_SLICES must be 1 or 8" in build.stderr

"""The host template's portable <arm_acle.h> against the instructions' definitions.

A C program (built with -std=c99 -Wall -Wextra -Werror under ASan and UBSan) applies every
intrinsic to random and edge-case operands; each result is compared with the pseudocode of the
Arm Architecture Reference Manual (ARMv7-M, A7.7) written again here in Python, lane by lane.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
from conftest import REPO_ROOT, require_tool

HEADER_DIR = REPO_ROOT / "templates" / "host" / "include"

M32 = 0xFFFFFFFF


def s8(x: int, i: int) -> int:
    v = (x >> (8 * i)) & 0xFF
    return v - 256 if v & 0x80 else v


def u8(x: int, i: int) -> int:
    return (x >> (8 * i)) & 0xFF


def s16(x: int, i: int) -> int:
    v = (x >> (16 * i)) & 0xFFFF
    return v - 65536 if v & 0x8000 else v


def u16(x: int, i: int) -> int:
    return (x >> (16 * i)) & 0xFFFF


def sat(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


def pack8(vals: list[int]) -> int:
    return sum((v & 0xFF) << (8 * i) for i, v in enumerate(vals))


def pack16(lo: int, hi: int) -> int:
    return (lo & 0xFFFF) | ((hi & 0xFFFF) << 16)


def i32(v: int) -> int:
    v &= M32
    return v - (1 << 32) if v & 0x80000000 else v


def i64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >> 63 else v


def ge_flags(vals: list[int], lanes: int) -> int:
    """GE bits: a byte lane per bit, a halfword lane sets two."""
    per = 4 // lanes
    g = 0
    for i, v in enumerate(vals):
        if v >= 0:
            g |= ((1 << per) - 1) << (per * i)
    return g


def sel(a: int, b: int, ge: int) -> int:
    return sum((u8(a, i) if ge >> i & 1 else u8(b, i)) << (8 * i) for i in range(4))


def dual(a: int, b: int, cross: bool, sub: bool, acc: int) -> int:
    p0 = s16(a, 0) * s16(b, 1 if cross else 0)
    p1 = s16(a, 1) * s16(b, 0 if cross else 1)
    return acc + p0 - p1 if sub else acc + p0 + p1


def expected(a: int, b: int, c: int, w: int) -> dict[str, int]:
    """Every result the C program prints for operands a, b, c (u32) and w (u64)."""
    sa, sc = i32(a), i32(c)
    out: dict[str, int] = {}
    n = c % 32
    out["ror"] = ((a >> n) | (a << (32 - n))) & M32 if n else a
    out["clz"] = 32 - a.bit_length()
    out["rev"] = int.from_bytes(a.to_bytes(4, "little"), "big")
    out["rev16"] = pack16(int.from_bytes(u16(a, 0).to_bytes(2, "little"), "big"),
                          int.from_bytes(u16(a, 1).to_bytes(2, "little"), "big"))
    out["revsh"] = i32(s16(int.from_bytes(u16(a, 0).to_bytes(2, "little"), "big"), 0))
    out["rbit"] = int(f"{a:032b}"[::-1], 2)
    out["pkhbt"] = (a & 0xFFFF) | ((b << 16) & 0xFFFF0000)
    out["pkhtb"] = (a & 0xFFFF0000) | ((i32(b) >> 16) & 0xFFFF)
    out["ssat8"] = sat(sa, -128, 127)
    out["usat8"] = sat(sa, 0, 255)
    out["ssat16_8"] = pack16(sat(s16(a, 0), -128, 127), sat(s16(a, 1), -128, 127))
    out["usat16_8"] = pack16(sat(s16(a, 0), 0, 255), sat(s16(a, 1), 0, 255))
    out["qadd"] = sat(sa + i32(b), -(1 << 31), (1 << 31) - 1)
    out["qsub"] = sat(sa - i32(b), -(1 << 31), (1 << 31) - 1)
    out["qdbl"] = sat(2 * sa, -(1 << 31), (1 << 31) - 1)
    out["sxtab16"] = pack16(s16(a, 0) + s8(b, 0), s16(a, 1) + s8(b, 2))
    out["sxtb16"] = pack16(s8(a, 0), s8(a, 2))
    out["uxtab16"] = pack16(u16(a, 0) + u8(b, 0), u16(a, 1) + u8(b, 2))
    out["uxtb16"] = pack16(u8(a, 0), u8(a, 2))
    out["qadd8"] = pack8([sat(s8(a, i) + s8(b, i), -128, 127) for i in range(4)])
    out["qsub8"] = pack8([sat(s8(a, i) - s8(b, i), -128, 127) for i in range(4)])
    out["qadd16"] = pack16(*[sat(s16(a, i) + s16(b, i), -32768, 32767) for i in range(2)])
    out["qsub16"] = pack16(*[sat(s16(a, i) - s16(b, i), -32768, 32767) for i in range(2)])
    for name, vals, lanes in (
        ("sadd8", [s8(a, i) + s8(b, i) for i in range(4)], 4),
        ("ssub8", [s8(a, i) - s8(b, i) for i in range(4)], 4),
        ("sadd16", [s16(a, i) + s16(b, i) for i in range(2)], 2),
        ("ssub16", [s16(a, i) - s16(b, i) for i in range(2)], 2),
    ):
        out[name] = pack8(vals) if lanes == 4 else pack16(*vals)
        out[name + "_sel"] = sel(a, b, ge_flags(vals, lanes))
    uadd = [u8(a, i) + u8(b, i) for i in range(4)]
    out["uadd8"] = pack8(uadd)
    out["uadd8_sel"] = sel(a, b, sum(1 << i for i, v in enumerate(uadd) if v >= 0x100))
    usub = [u8(a, i) - u8(b, i) for i in range(4)]
    out["usub8"] = pack8(usub)
    out["usub8_sel"] = sel(a, b, sum(1 << i for i, v in enumerate(usub) if v >= 0))
    for name, cross, sub in (("smlad", False, False), ("smladx", True, False),
                             ("smlsd", False, True), ("smlsdx", True, True)):
        out[name] = i32(dual(a, b, cross, sub, sc))
        out[name.replace("ml", "mu")] = i32(dual(a, b, cross, sub, 0))
        out[name[:4] + "l" + name[4:]] = i64(dual(a, b, cross, sub, i64(w)))
    for name, ta, tb in (("bb", 0, 0), ("bt", 0, 1), ("tb", 1, 0), ("tt", 1, 1)):
        out["smla" + name] = i32(s16(a, ta) * s16(b, tb) + sc)
        out["smul" + name] = i32(s16(a, ta) * s16(b, tb))
    out["smulwb"] = i32((sa * s16(b, 0)) >> 16)
    out["smulwt"] = i32((sa * s16(b, 1)) >> 16)
    out["smlawb"] = i32(((sa * s16(b, 0)) >> 16) + sc)
    out["smlawt"] = i32(((sa * s16(b, 1)) >> 16) + sc)
    out["builtin_smlabb"] = out["smlabb"]
    out["builtin_smlatt"] = out["smlatt"]
    return out


_PROGRAM = r"""
#include <inttypes.h>
#include <stdio.h>
#include <arm_acle.h>

#define U(name, expr) printf("%s %" PRIu32 "\n", name, (uint32_t)(expr))
#define S(name, expr) printf("%s %" PRId32 "\n", name, (int32_t)(expr))
#define L(name, expr) printf("%s %" PRId64 "\n", name, (int64_t)(expr))

int main(void) {
  uint32_t a, b, c;
  uint64_t w;
  unsigned long long wl;
  while (scanf("%" SCNu32 " %" SCNu32 " %" SCNu32 " %llu", &a, &b, &c, &wl) == 4) {
    int32_t sa = (int32_t)a, sb = (int32_t)b, sc = (int32_t)c;
    w = (uint64_t)wl;
    U("ror", __ror(a, c));
    U("clz", __clz(a));
    U("rev", __rev(a));
    U("rev16", __rev16(a));
    S("revsh", __revsh((int16_t)(uint16_t)(a & 0xFFFFu)));
    U("rbit", __rbit(a));
    U("pkhbt", __pkhbt(a, b, 16));
    U("pkhtb", __pkhtb(a, b, 16));
    S("ssat8", __ssat(sa, 8));
    U("usat8", __usat(sa, 8));
    U("ssat16_8", __ssat16(sa, 8));
    U("usat16_8", __usat16(sa, 8));
    S("qadd", __qadd(sa, sb));
    S("qsub", __qsub(sa, sb));
    S("qdbl", __qdbl(sa));
    U("sxtab16", __sxtab16(sa, sb));
    U("sxtb16", __sxtb16(sa));
    U("uxtab16", __uxtab16(a, b));
    U("uxtb16", __uxtb16(a));
    U("qadd8", __qadd8(sa, sb));
    U("qsub8", __qsub8(sa, sb));
    U("qadd16", __qadd16(sa, sb));
    U("qsub16", __qsub16(sa, sb));
    U("sadd8", __sadd8(sa, sb)); U("sadd8_sel", __sel(a, b));
    U("ssub8", __ssub8(sa, sb)); U("ssub8_sel", __sel(a, b));
    U("sadd16", __sadd16(sa, sb)); U("sadd16_sel", __sel(a, b));
    U("ssub16", __ssub16(sa, sb)); U("ssub16_sel", __sel(a, b));
    U("uadd8", __uadd8(a, b)); U("uadd8_sel", __sel(a, b));
    U("usub8", __usub8(a, b)); U("usub8_sel", __sel(a, b));
    S("smlad", __smlad(sa, sb, sc)); S("smuad", __smuad(sa, sb)); L("smlald", __smlald(sa, sb, (int64_t)w));
    S("smladx", __smladx(sa, sb, sc)); S("smuadx", __smuadx(sa, sb)); L("smlaldx", __smlaldx(sa, sb, (int64_t)w));
    S("smlsd", __smlsd(sa, sb, sc)); S("smusd", __smusd(sa, sb)); L("smlsld", __smlsld(sa, sb, (int64_t)w));
    S("smlsdx", __smlsdx(sa, sb, sc)); S("smusdx", __smusdx(sa, sb)); L("smlsldx", __smlsldx(sa, sb, (int64_t)w));
    S("smlabb", __smlabb(sa, sb, sc)); S("smulbb", __smulbb(sa, sb));
    S("smlabt", __smlabt(sa, sb, sc)); S("smulbt", __smulbt(sa, sb));
    S("smlatb", __smlatb(sa, sb, sc)); S("smultb", __smultb(sa, sb));
    S("smlatt", __smlatt(sa, sb, sc)); S("smultt", __smultt(sa, sb));
    S("smulwb", __smulwb(sa, sb)); S("smulwt", __smulwt(sa, sb));
    S("smlawb", __smlawb(sa, sb, sc)); S("smlawt", __smlawt(sa, sb, sc));
    S("builtin_smlabb", __builtin_arm_smlabb(sa, sb, sc));
    S("builtin_smlatt", __builtin_arm_smlatt(sa, sb, sc));
    puts("--");
  }
  return 0;
}
"""


def _operands() -> list[tuple[int, int, int, int]]:
    rng = np.random.default_rng(7)
    edges = [0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000, M32,
             0x80808080, 0x7F7F7F7F, 0x01FF80FF]
    ops = [(a, b, c, 0) for a in edges for b in edges[::3] for c in (0, 8, 16, 0x80000001)]
    for _ in range(1500):
        a, b, c = (int(v) for v in rng.integers(0, 1 << 32, 3, dtype=np.uint64))
        ops.append((a, b, c, int(rng.integers(0, 1 << 63, dtype=np.uint64)) * 2 + 1))
    return ops


def test_portable_acle_matches_the_instruction_definitions(tmp_path: Path) -> None:
    cc = require_tool("cc")
    src = tmp_path / "acle.c"
    src.write_text(_PROGRAM)
    exe = tmp_path / "acle"
    build = subprocess.run(
        [cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-g", "-fsanitize=address,undefined",
         "-fno-sanitize-recover=all", "-I", str(HEADER_DIR), str(src), "-o", str(exe)],
        capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    ops = _operands()
    feed = "".join(f"{a} {b} {c} {w}\n" for a, b, c, w in ops)
    run = subprocess.run([str(exe)], input=feed, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "runtime error" not in run.stderr, run.stderr[-3000:]
    blocks = run.stdout.split("--\n")[:-1]
    assert len(blocks) == len(ops)
    checked = 0
    for (a, b, c, w), block in zip(ops, blocks, strict=True):
        got = {k: int(v) for k, v in (line.split() for line in block.splitlines())}
        want = expected(a, b, c, w)
        assert set(got) == set(want)
        for name, value in want.items():
            assert got[name] == value, (name, hex(a), hex(b), hex(c), hex(w), got[name], value)
            checked += 1
    assert checked > 50 * len(ops)

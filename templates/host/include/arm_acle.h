/*
 * <arm_acle.h> for the host: the Arm C Language Extensions' integer intrinsics in portable C99,
 * so that model code generated for a Cortex-M with the DSP extension (TVM's micro-kernels:
 * python/tvm/topi/arm_cpu/mprofile/dsp) builds and runs on this computer with the same results.
 *
 * Each function follows the instruction's pseudocode in the Arm Architecture Reference Manual
 * (ARMv7-M, section A7.7): lanes are computed in unsigned arithmetic where the instruction wraps,
 * saturation clamps to the lane's range, and the GE flags that SADD8/SSUB8/... set and SEL reads
 * are kept in a per-file variable. The Q flag (sticky saturation) is not modelled.
 *
 * It also supplies what TVM's micro-kernels define themselves with inline Arm assembly unless
 * ARM_CPU_INTRINSICS_EXIST is defined (__ror, __pkhbt, __pkhtb), and Clang's
 * __builtin_arm_smlabb/__builtin_arm_smlatt, which the kernels call directly.
 */
#ifndef PROJECT_API_HOST_ARM_ACLE_H_
#define PROJECT_API_HOST_ARM_ACLE_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef ARM_CPU_INTRINSICS_EXIST
#define ARM_CPU_INTRINSICS_EXIST
#endif

typedef int32_t int8x4_t;
typedef int32_t int16x2_t;
typedef uint32_t uint8x4_t;
typedef uint32_t uint16x2_t;

#define ACLE_INLINE static inline __attribute__((unused))

/* The GE flags of the last SIMD add/subtract (bit i for byte lane i; halfword lanes set two). */
static uint32_t acle_ge __attribute__((unused));

ACLE_INLINE int32_t acle_s8(uint32_t x, int lane) {
  return (int32_t)(int8_t)(uint8_t)((x >> (8 * lane)) & 0xFFu);
}
ACLE_INLINE uint32_t acle_u8(uint32_t x, int lane) { return (x >> (8 * lane)) & 0xFFu; }
ACLE_INLINE int32_t acle_s16(uint32_t x, int lane) {
  return (int32_t)(int16_t)(uint16_t)((x >> (16 * lane)) & 0xFFFFu);
}
ACLE_INLINE uint32_t acle_u16(uint32_t x, int lane) { return (x >> (16 * lane)) & 0xFFFFu; }
ACLE_INLINE int32_t acle_sat(int64_t x, int64_t lo, int64_t hi) {
  return (int32_t)(x < lo ? lo : (x > hi ? hi : x));
}
ACLE_INLINE uint32_t acle_pack8(const int32_t v[4]) {
  return ((uint32_t)(uint8_t)v[0]) | ((uint32_t)(uint8_t)v[1] << 8) |
         ((uint32_t)(uint8_t)v[2] << 16) | ((uint32_t)(uint8_t)v[3] << 24);
}
ACLE_INLINE uint32_t acle_pack16(int32_t lo, int32_t hi) {
  return ((uint32_t)(uint16_t)lo) | ((uint32_t)(uint16_t)hi << 16);
}

/* --- bit manipulation ---------------------------------------------------------------------- */

ACLE_INLINE uint32_t __ror(uint32_t x, uint32_t n) {
  n %= 32u;
  return n == 0u ? x : ((x >> n) | (x << (32u - n)));
}
ACLE_INLINE unsigned int __clz(uint32_t x) {
  unsigned int n = 0;
  while (n < 32u && !(x & (0x80000000u >> n))) n++;
  return n;
}
ACLE_INLINE uint32_t __rev(uint32_t x) {
  return (x >> 24) | ((x >> 8) & 0xFF00u) | ((x << 8) & 0xFF0000u) | (x << 24);
}
ACLE_INLINE uint32_t __rev16(uint32_t x) {
  return ((x >> 8) & 0x00FF00FFu) | ((x << 8) & 0xFF00FF00u);
}
ACLE_INLINE int16_t __revsh(int16_t x) {
  uint16_t u = (uint16_t)x;
  return (int16_t)(uint16_t)((u >> 8) | (u << 8));
}
ACLE_INLINE uint32_t __rbit(uint32_t x) {
  uint32_t r = 0;
  int i;
  for (i = 0; i < 32; i++) r |= ((x >> i) & 1u) << (31 - i);
  return r;
}

/* PKHBT: bottom half of a, top half of (b << n); PKHTB: top half of a, bottom of (b >> n). */
ACLE_INLINE uint32_t acle_pkhbt(uint32_t a, uint32_t b, unsigned n) {
  return (a & 0xFFFFu) | ((b << n) & 0xFFFF0000u);
}
ACLE_INLINE uint32_t acle_pkhtb(uint32_t a, uint32_t b, unsigned n) {
  uint32_t shifted = n == 0 ? b : (uint32_t)((int32_t)b >> (n > 31u ? 31u : n));
  return (a & 0xFFFF0000u) | (shifted & 0xFFFFu);
}
#define __pkhbt(a, b, n) acle_pkhbt((uint32_t)(a), (uint32_t)(b), (unsigned)(n))
#define __pkhtb(a, b, n) acle_pkhtb((uint32_t)(a), (uint32_t)(b), (unsigned)(n))

/* --- saturation ---------------------------------------------------------------------------- */

ACLE_INLINE int32_t acle_ssat(int32_t x, unsigned bits) {
  const int64_t hi = ((int64_t)1 << (bits - 1)) - 1;
  return acle_sat(x, -hi - 1, hi);
}
ACLE_INLINE uint32_t acle_usat(int32_t x, unsigned bits) {
  return (uint32_t)acle_sat(x, 0, ((int64_t)1 << bits) - 1);
}
#define __ssat(x, bits) acle_ssat((int32_t)(x), (unsigned)(bits))
#define __usat(x, bits) acle_usat((int32_t)(x), (unsigned)(bits))
ACLE_INLINE int16x2_t acle_ssat16(int16x2_t x, unsigned bits) {
  return (int16x2_t)acle_pack16(acle_ssat(acle_s16((uint32_t)x, 0), bits),
                                acle_ssat(acle_s16((uint32_t)x, 1), bits));
}
ACLE_INLINE uint16x2_t acle_usat16(int16x2_t x, unsigned bits) {
  return acle_pack16((int32_t)acle_usat(acle_s16((uint32_t)x, 0), bits),
                     (int32_t)acle_usat(acle_s16((uint32_t)x, 1), bits));
}
#define __ssat16(x, bits) acle_ssat16((int16x2_t)(x), (unsigned)(bits))
#define __usat16(x, bits) acle_usat16((int16x2_t)(x), (unsigned)(bits))
ACLE_INLINE int32_t __qadd(int32_t a, int32_t b) {
  return acle_sat((int64_t)a + b, INT32_MIN, INT32_MAX);
}
ACLE_INLINE int32_t __qsub(int32_t a, int32_t b) {
  return acle_sat((int64_t)a - b, INT32_MIN, INT32_MAX);
}
ACLE_INLINE int32_t __qdbl(int32_t a) { return __qadd(a, a); }

/* --- extension ----------------------------------------------------------------------------- */

ACLE_INLINE int16x2_t __sxtab16(int16x2_t a, int8x4_t b) {
  return (int16x2_t)acle_pack16(acle_s16((uint32_t)a, 0) + acle_s8((uint32_t)b, 0),
                                acle_s16((uint32_t)a, 1) + acle_s8((uint32_t)b, 2));
}
ACLE_INLINE int16x2_t __sxtb16(int8x4_t x) { return __sxtab16(0, x); }
ACLE_INLINE uint16x2_t __uxtab16(uint16x2_t a, uint8x4_t b) {
  return acle_pack16((int32_t)(acle_u16(a, 0) + acle_u8(b, 0)),
                     (int32_t)(acle_u16(a, 1) + acle_u8(b, 2)));
}
ACLE_INLINE uint16x2_t __uxtb16(uint8x4_t x) { return __uxtab16(0u, x); }

/* --- parallel add and subtract ------------------------------------------------------------- */

ACLE_INLINE int8x4_t __qadd8(int8x4_t a, int8x4_t b) {
  int32_t v[4];
  int i;
  for (i = 0; i < 4; i++) v[i] = acle_sat(acle_s8((uint32_t)a, i) + acle_s8((uint32_t)b, i), -128, 127);
  return (int8x4_t)acle_pack8(v);
}
ACLE_INLINE int8x4_t __qsub8(int8x4_t a, int8x4_t b) {
  int32_t v[4];
  int i;
  for (i = 0; i < 4; i++) v[i] = acle_sat(acle_s8((uint32_t)a, i) - acle_s8((uint32_t)b, i), -128, 127);
  return (int8x4_t)acle_pack8(v);
}
ACLE_INLINE int8x4_t acle_add8(int8x4_t a, int8x4_t b, int sub) {
  int32_t v[4];
  int i;
  acle_ge = 0;
  for (i = 0; i < 4; i++) {
    v[i] = sub ? acle_s8((uint32_t)a, i) - acle_s8((uint32_t)b, i)
               : acle_s8((uint32_t)a, i) + acle_s8((uint32_t)b, i);
    if (v[i] >= 0) acle_ge |= 1u << i;
  }
  return (int8x4_t)acle_pack8(v);
}
ACLE_INLINE int8x4_t __sadd8(int8x4_t a, int8x4_t b) { return acle_add8(a, b, 0); }
ACLE_INLINE int8x4_t __ssub8(int8x4_t a, int8x4_t b) { return acle_add8(a, b, 1); }
ACLE_INLINE uint8x4_t acle_uadd8(uint8x4_t a, uint8x4_t b, int sub) {
  int32_t v[4];
  int i;
  acle_ge = 0;
  for (i = 0; i < 4; i++) {
    v[i] = sub ? (int32_t)acle_u8(a, i) - (int32_t)acle_u8(b, i)
               : (int32_t)(acle_u8(a, i) + acle_u8(b, i));
    if (sub ? v[i] >= 0 : v[i] >= 0x100) acle_ge |= 1u << i;
  }
  return acle_pack8(v);
}
ACLE_INLINE uint8x4_t __uadd8(uint8x4_t a, uint8x4_t b) { return acle_uadd8(a, b, 0); }
ACLE_INLINE uint8x4_t __usub8(uint8x4_t a, uint8x4_t b) { return acle_uadd8(a, b, 1); }
ACLE_INLINE int16x2_t __qadd16(int16x2_t a, int16x2_t b) {
  return (int16x2_t)acle_pack16(
      acle_sat(acle_s16((uint32_t)a, 0) + acle_s16((uint32_t)b, 0), -32768, 32767),
      acle_sat(acle_s16((uint32_t)a, 1) + acle_s16((uint32_t)b, 1), -32768, 32767));
}
ACLE_INLINE int16x2_t __qsub16(int16x2_t a, int16x2_t b) {
  return (int16x2_t)acle_pack16(
      acle_sat(acle_s16((uint32_t)a, 0) - acle_s16((uint32_t)b, 0), -32768, 32767),
      acle_sat(acle_s16((uint32_t)a, 1) - acle_s16((uint32_t)b, 1), -32768, 32767));
}
ACLE_INLINE int16x2_t acle_add16(int16x2_t a, int16x2_t b, int sub) {
  const int32_t lo = sub ? acle_s16((uint32_t)a, 0) - acle_s16((uint32_t)b, 0)
                         : acle_s16((uint32_t)a, 0) + acle_s16((uint32_t)b, 0);
  const int32_t hi = sub ? acle_s16((uint32_t)a, 1) - acle_s16((uint32_t)b, 1)
                         : acle_s16((uint32_t)a, 1) + acle_s16((uint32_t)b, 1);
  acle_ge = (lo >= 0 ? 0x3u : 0u) | (hi >= 0 ? 0xCu : 0u);
  return (int16x2_t)acle_pack16(lo, hi);
}
ACLE_INLINE int16x2_t __sadd16(int16x2_t a, int16x2_t b) { return acle_add16(a, b, 0); }
ACLE_INLINE int16x2_t __ssub16(int16x2_t a, int16x2_t b) { return acle_add16(a, b, 1); }

/* SEL: each byte from a where its GE flag is set, else from b. */
ACLE_INLINE uint8x4_t __sel(uint8x4_t a, uint8x4_t b) {
  uint32_t r = 0;
  int i;
  for (i = 0; i < 4; i++) r |= ((acle_ge >> i) & 1u ? acle_u8(a, i) : acle_u8(b, i)) << (8 * i);
  return r;
}

/* --- multiplies ---------------------------------------------------------------------------- */

/* Dual 16-bit multiplies; products and sums modulo 2^32 (SMLAD sets Q on overflow). */
ACLE_INLINE int32_t acle_dual(int16x2_t a, int16x2_t b, int cross, int subtract, uint32_t acc) {
  const int32_t a0 = acle_s16((uint32_t)a, 0), a1 = acle_s16((uint32_t)a, 1);
  const int32_t b0 = acle_s16((uint32_t)b, cross ? 1 : 0), b1 = acle_s16((uint32_t)b, cross ? 0 : 1);
  const uint32_t p0 = (uint32_t)(a0 * b0), p1 = (uint32_t)(a1 * b1);
  return (int32_t)(subtract ? acc + p0 - p1 : acc + p0 + p1);
}
ACLE_INLINE int32_t __smlad(int16x2_t a, int16x2_t b, int32_t c) { return acle_dual(a, b, 0, 0, (uint32_t)c); }
ACLE_INLINE int32_t __smladx(int16x2_t a, int16x2_t b, int32_t c) { return acle_dual(a, b, 1, 0, (uint32_t)c); }
ACLE_INLINE int32_t __smlsd(int16x2_t a, int16x2_t b, int32_t c) { return acle_dual(a, b, 0, 1, (uint32_t)c); }
ACLE_INLINE int32_t __smlsdx(int16x2_t a, int16x2_t b, int32_t c) { return acle_dual(a, b, 1, 1, (uint32_t)c); }
ACLE_INLINE int32_t __smuad(int16x2_t a, int16x2_t b) { return acle_dual(a, b, 0, 0, 0u); }
ACLE_INLINE int32_t __smuadx(int16x2_t a, int16x2_t b) { return acle_dual(a, b, 1, 0, 0u); }
ACLE_INLINE int32_t __smusd(int16x2_t a, int16x2_t b) { return acle_dual(a, b, 0, 1, 0u); }
ACLE_INLINE int32_t __smusdx(int16x2_t a, int16x2_t b) { return acle_dual(a, b, 1, 1, 0u); }
ACLE_INLINE int64_t acle_dual_long(int16x2_t a, int16x2_t b, int cross, int subtract, uint64_t acc) {
  const int64_t a0 = acle_s16((uint32_t)a, 0), a1 = acle_s16((uint32_t)a, 1);
  const int64_t b0 = acle_s16((uint32_t)b, cross ? 1 : 0), b1 = acle_s16((uint32_t)b, cross ? 0 : 1);
  const uint64_t p0 = (uint64_t)(a0 * b0), p1 = (uint64_t)(a1 * b1);
  return (int64_t)(subtract ? acc + p0 - p1 : acc + p0 + p1);
}
ACLE_INLINE int64_t __smlald(int16x2_t a, int16x2_t b, int64_t c) { return acle_dual_long(a, b, 0, 0, (uint64_t)c); }
ACLE_INLINE int64_t __smlaldx(int16x2_t a, int16x2_t b, int64_t c) { return acle_dual_long(a, b, 1, 0, (uint64_t)c); }
ACLE_INLINE int64_t __smlsld(int16x2_t a, int16x2_t b, int64_t c) { return acle_dual_long(a, b, 0, 1, (uint64_t)c); }
ACLE_INLINE int64_t __smlsldx(int16x2_t a, int16x2_t b, int64_t c) { return acle_dual_long(a, b, 1, 1, (uint64_t)c); }

/* Halfword multiplies: B/T picks the bottom or top half of each operand. */
ACLE_INLINE int32_t acle_hmul(int32_t a, int ta, int32_t b, int tb, uint32_t acc) {
  return (int32_t)(acc + (uint32_t)(acle_s16((uint32_t)a, ta) * acle_s16((uint32_t)b, tb)));
}
ACLE_INLINE int32_t __smlabb(int32_t a, int32_t b, int32_t c) { return acle_hmul(a, 0, b, 0, (uint32_t)c); }
ACLE_INLINE int32_t __smlabt(int32_t a, int32_t b, int32_t c) { return acle_hmul(a, 0, b, 1, (uint32_t)c); }
ACLE_INLINE int32_t __smlatb(int32_t a, int32_t b, int32_t c) { return acle_hmul(a, 1, b, 0, (uint32_t)c); }
ACLE_INLINE int32_t __smlatt(int32_t a, int32_t b, int32_t c) { return acle_hmul(a, 1, b, 1, (uint32_t)c); }
ACLE_INLINE int32_t __smulbb(int32_t a, int32_t b) { return acle_hmul(a, 0, b, 0, 0u); }
ACLE_INLINE int32_t __smulbt(int32_t a, int32_t b) { return acle_hmul(a, 0, b, 1, 0u); }
ACLE_INLINE int32_t __smultb(int32_t a, int32_t b) { return acle_hmul(a, 1, b, 0, 0u); }
ACLE_INLINE int32_t __smultt(int32_t a, int32_t b) { return acle_hmul(a, 1, b, 1, 0u); }
/* SMULWx / SMLAWx: the top 32 bits of the 48-bit product of a word and a halfword. */
ACLE_INLINE int32_t __smulwb(int32_t a, int32_t b) {
  return (int32_t)(((int64_t)a * acle_s16((uint32_t)b, 0)) >> 16);
}
ACLE_INLINE int32_t __smulwt(int32_t a, int32_t b) {
  return (int32_t)(((int64_t)a * acle_s16((uint32_t)b, 1)) >> 16);
}
ACLE_INLINE int32_t __smlawb(int32_t a, int32_t b, int32_t c) {
  return (int32_t)((uint32_t)__smulwb(a, b) + (uint32_t)c);
}
ACLE_INLINE int32_t __smlawt(int32_t a, int32_t b, int32_t c) {
  return (int32_t)((uint32_t)__smulwt(a, b) + (uint32_t)c);
}

/* Clang's spellings, used by TVM's multi-channel convolution kernel. */
#define __builtin_arm_smlabb(a, b, c) __smlabb((a), (b), (c))
#define __builtin_arm_smlatt(a, b, c) __smlatt((a), (b), (c))

#ifdef __cplusplus
}
#endif

#endif /* PROJECT_API_HOST_ARM_ACLE_H_ */

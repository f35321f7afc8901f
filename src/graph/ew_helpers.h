/* ew_helpers.h -- the C implementation of the helpers that the expressions of src/graph/ew.def
 * call (names lt_*): the CPU kernels compile them, and ew_source.c embeds the same text in the
 * C helper prelude (lathe_ew_prelude_c), so a generated element function computes what the
 * kernel computes.
 *
 * Contract for a device's own prelude (the CUDA one is C++; complex values are a struct there):
 *  - T, UT, UW, RT, OT and BITS/OBITS are set by the generated element function; lt_c64 and
 *    lt_c128 are the complex types ({float re, im} / {double re, im}, C99 layout), with
 *    construction from a real (imaginary part +0), conversion between the two precisions
 *    (per part), componentwise + and - (unary and binary), and == / != on both parts. A real
 *    converts to a complex with (OT)v.
 *  - Every helper, generic name and math function returns exactly the bits its C version
 *    returns for every input, except a NaN's sign and payload (which NaN operand propagates is
 *    a compiler's choice even on one CPU; NaN itself must be kept): lt_c* math follows
 *    glibc's cexpf/cexp, clogf, csqrtf, ctanhf, csinf, ccosf, cpowf, cabsf (and the double
 *    versions); lt_cmul / lt_cdiv are C99 Annex G complex multiplication and division
 *    (libgcc's __mulsc3 / __divsc3: infinities survive NaN parts).
 *  - Real math (exp, log, sqrt, nearbyint, fmod, ...) must match glibc's float and double
 *    functions; nearbyint rounds half to even. (lathe:cpu itself computes Float32 Exp, Expm1,
 *    Log, Log1p, Tanh, Logistic, Erf, Sin, Cos and Pow with its vector math, src/cpu/vmath.h:
 *    within the ulp bounds of docs/CPU.md of these, and libm's exactly on special values.)
 *  - Storage conversions of Float16 / BFloat16 (outside the expressions) must match
 *    lathe_f16_to_f32 / lathe_f32_to_f16 / lathe_bf16_to_f32 / lathe_f32_to_bf16 (src/core):
 *    round to nearest even, overflow to infinity, NaN stays NaN.
 *  - Sub-byte integers compute widened to 8 bits (T is int8_t / uint8_t, BITS their true
 *    width); the store keeps the low BITS bits.
 *
 * Each helper function sits in one LT_EW_HELPER(...) so that ew_source.c can stringify it
 * (included again with LT_EW_HELPERS_AS_TEXT defined). Generic names (one name for float and
 * double, or Complex64 and Complex128) are macros in C, overloads in C++; their C spellings
 * are repeated in ew_source.c's prelude text, which the text-vs-compiled test checks. */
#ifndef LATHE_EW_HELPERS_H
#define LATHE_EW_HELPERS_H

#include <stdint.h>
#include <string.h>
#include <tgmath.h>

typedef float _Complex lt_c64;
typedef double _Complex lt_c128;

/* Max/Min where a NaN operand wins (the first one); plain max/min on integers. */
#define lt_max(a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))
#define lt_min(a, b) (((a) < (b) || (a) != (a)) ? (a) : (b))
/* Total-order key of a float or double (compare keys as signed integers). */
#define lt_key(f) _Generic((f), float: lt_key_f32, default: lt_key_f64)(f)
/* v as a double, as a hardware conversion gives it: a float's NaN comes out quiet (written
 * out, so that no compiler folds float -> double -> float into nothing); doubles unchanged. */
#define lt_f64(v) _Generic((v), float: lt_f64_f32, default: lt_f64_f64)(v)
/* The complex of the precision of re from its parts (bits kept). */
#define lt_cmk(re, im) _Generic((re), float: lt_cmk_c64, default: lt_cmk_c128)((re), (im))
/* Complex math in the operand's precision (<tgmath.h> picks cexpf or cexp, ...). */
#define lt_cabs(z) fabs(z)
#define lt_creal(z) creal(z)
#define lt_cimag(z) cimag(z)
#define lt_conj(z) conj(z)
#define lt_csqrt(z) sqrt(z)
#define lt_cexp(z) exp(z)
#define lt_clog(z) log(z)
#define lt_csin(z) sin(z)
#define lt_ccos(z) cos(z)
#define lt_ctanh(z) tanh(z)
#define lt_cpow(a, b) pow(a, b)
#define lt_cmul(a, b) ((a) * (b))
#define lt_cdiv(a, b) ((a) / (b))

#endif /* LATHE_EW_HELPERS_H */

/* ---- the helper functions (defined once per translation unit, or re-expanded as text) ---- */
#if !defined(LATHE_EW_HELPERS_FNS) || defined(LT_EW_HELPERS_AS_TEXT)
#ifndef LT_EW_HELPERS_AS_TEXT
#define LATHE_EW_HELPERS_FNS
#define LT_EW_HELPER(...) __VA_ARGS__
#endif

/* Set bits of v (the compiler recognises the popcount idiom). */
LT_EW_HELPER(static inline int lt_popcount(uint64_t v) {
  v = v - ((v >> 1) & 0x5555555555555555u);
  v = (v & 0x3333333333333333u) + ((v >> 2) & 0x3333333333333333u);
  v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0fu;
  return (int)((v * 0x0101010101010101u) >> 56);
})

/* Index of the highest set bit of v plus one (0 for 0). */
LT_EW_HELPER(static inline int lt_sigbits(uint64_t v) {
  int n = 0;
  if (v >> 32) n += 32, v >>= 32;
  if (v >> 16) n += 16, v >>= 16;
  if (v >> 8) n += 8, v >>= 8;
  if (v >> 4) n += 4, v >>= 4;
  if (v >> 2) n += 2, v >>= 2;
  if (v >> 1) n += 1, v >>= 1;
  return n + (int)v;
})

/* The low `bits` bits of v. */
LT_EW_HELPER(static inline uint64_t lt_lowbits(uint64_t v, int bits) {
  return bits >= 64 ? v : v & (((uint64_t)1 << bits) - 1);
})

/* base^e by repeated squaring, wrapping modulo 2^64; a negative exponent gives 1. */
LT_EW_HELPER(static inline uint64_t lt_ipow(uint64_t base, int64_t e) {
  uint64_t r = 1;
  while (e > 0) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return r;
})

/* IEEE totalOrder keys: negative floats have their magnitude bits flipped, so as signed integers
 * -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN. */
LT_EW_HELPER(static inline int32_t lt_key_f32(float f) {
  int32_t i;
  memcpy(&i, &f, 4);
  return i < 0 ? i ^ INT32_MAX : i;
})
LT_EW_HELPER(static inline int64_t lt_key_f64(double f) {
  int64_t i;
  memcpy(&i, &f, 8);
  return i < 0 ? i ^ INT64_MAX : i;
})

LT_EW_HELPER(static inline double lt_f64_f32(float v) {
  double d = v;
  uint64_t u;
  memcpy(&u, &d, 8);
  u |= (uint64_t)(d != d) << 51;
  memcpy(&d, &u, 8);
  return d;
})
LT_EW_HELPER(static inline double lt_f64_f64(double v) { return v; })

LT_EW_HELPER(static inline lt_c64 lt_cmk_c64(float re, float im) {
  float p[2] = {re, im};
  lt_c64 z;
  memcpy(&z, p, sizeof z);
  return z;
})
LT_EW_HELPER(static inline lt_c128 lt_cmk_c128(double re, double im) {
  double p[2] = {re, im};
  lt_c128 z;
  memcpy(&z, p, sizeof z);
  return z;
})

/* Complex helpers computed in double precision (Complex64 converts around them). */
/* e^z - 1 = (expm1(x) cos y - 2 sin^2(y/2)) + i e^x sin y, accurate near 0. */
LT_EW_HELPER(static inline lt_c128 lt_cexpm1(lt_c128 z) {
  double x = creal(z), y = cimag(z), s = sin(y / 2);
  return lt_cmk_c128(expm1(x) * cos(y) - 2 * s * s, exp(x) * sin(y));
})
/* log(1 + z) = 0.5 log1p(2x + x^2 + y^2) + i atan2(y, 1 + x) near 0. */
LT_EW_HELPER(static inline lt_c128 lt_clog1p(lt_c128 z) {
  double x = creal(z), y = cimag(z);
  if (fabs(x) > 0.5 || fabs(y) > 0.5) return log(1 + z);
  return lt_cmk_c128(0.5 * log1p(x * (2 + x) + y * y), atan2(y, 1 + x));
})
/* z / |z|, and 0 for 0. */
LT_EW_HELPER(static inline lt_c128 lt_csign(lt_c128 z) {
  double a = cabs(z);
  return a == 0 ? z : z / a;
})
LT_EW_HELPER(static inline int lt_cisfinite(lt_c128 z) { return isfinite(creal(z)) && isfinite(cimag(z)); })
LT_EW_HELPER(static inline int lt_cisnan(lt_c128 z) { return isnan(creal(z)) || isnan(cimag(z)); })

/* A float (as double) to a signed / unsigned integer of `bits` bits: truncates toward zero,
 * saturates at the range, NaN gives 0. */
LT_EW_HELPER(static inline int64_t lt_f2s(double v, int bits) {
  double lim = ldexp(1.0, bits - 1);
  if (v != v) return 0;
  if (v >= lim) return (int64_t)(((uint64_t)1 << (bits - 1)) - 1);
  if (v <= -lim) return (int64_t)(0 - ((uint64_t)1 << (bits - 1)));
  return (int64_t)v;
})
LT_EW_HELPER(static inline uint64_t lt_f2u(double v, int bits) {
  if (v != v || v <= 0) return 0;
  if (v >= ldexp(1.0, bits)) return ~(uint64_t)0 >> (64 - bits);
  return (uint64_t)v;
})

#ifndef LT_EW_HELPERS_AS_TEXT
#undef LT_EW_HELPER
#endif
#endif

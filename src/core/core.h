/* core.h -- internal foundations: status creation, aligned memory, the dtype table, shapes. */
#ifndef LATHE_CORE_H
#define LATHE_CORE_H

/* No multiply-add contraction anywhere in the engine: every op rounds as its definition says, on
 * every ISA and device. The Makefile passes -ffp-contract=off; cgo refuses that flag, and GCC's
 * ISO C mode is off by default anyway, but clang's default is on: hence the pragma for clang. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lathe.h"

#if defined(__GNUC__) || defined(__clang__)
#define LATHE_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define LATHE_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define LATHE_LIKELY(x) __builtin_expect(!!(x), 1)
#define LATHE_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define LATHE_PRINTF(f, a)
#define LATHE_UNLIKELY(x) (x)
#define LATHE_LIKELY(x) (x)
#define LATHE_ALWAYS_INLINE inline
#endif

/* A new status with a printf-style message. Never fails: on allocation failure it returns a
 * static RESOURCE_EXHAUSTED status that lathe_status_free recognises. */
lathe_status_t lathe_status_new(lathe_status_code code, const char *fmt, ...) LATHE_PRINTF(2, 3);
lathe_status_t lathe_status_newv(lathe_status_code code, const char *fmt, va_list ap);
/* Prefixes "prefix: " to status's message (takes and returns ownership). */
lathe_status_t lathe_status_annotate(lathe_status_t status, const char *fmt, ...) LATHE_PRINTF(2, 3);

#define LATHE_RETURN_IF_ERROR(expr)      \
  do {                                   \
    lathe_status_t lathe_st_ = (expr);   \
    if (LATHE_UNLIKELY(lathe_st_)) return lathe_st_; \
  } while (0)

#define LATHE_INVALID(...) lathe_status_new(LATHE_STATUS_INVALID_ARGUMENT, __VA_ARGS__)
#define LATHE_UNIMPL(...) lathe_status_new(LATHE_STATUS_UNIMPLEMENTED, __VA_ARGS__)
#define LATHE_OOM(what) lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED, "%s: out of memory", (what))

/* 64-byte aligned host memory; size 0 gives a valid unique pointer. */
void *lathe_aligned_alloc(size_t nbytes);
void lathe_aligned_free(void *p);

/* Complex storage types (C11 _Complex is optional; kernels use these structs). */
typedef struct { float re, im; } lathe_c64;
typedef struct { double re, im; } lathe_c128;

typedef enum lathe_dtype_class {
  LATHE_CLASS_NONE = 0,
  LATHE_CLASS_BOOL,
  LATHE_CLASS_SINT,
  LATHE_CLASS_UINT,
  LATHE_CLASS_FLOAT,
  LATHE_CLASS_HALF,
  LATHE_CLASS_COMPLEX,
} lathe_dtype_class;

lathe_dtype_class lathe_dtype_class_of(lathe_dtype dt);
static inline int lathe_dtype_is_int(lathe_dtype dt) {
  lathe_dtype_class c = lathe_dtype_class_of(dt);
  return c == LATHE_CLASS_SINT || c == LATHE_CLASS_UINT;
}
static inline int lathe_dtype_is_float(lathe_dtype dt) { /* real floating point */
  lathe_dtype_class c = lathe_dtype_class_of(dt);
  return c == LATHE_CLASS_FLOAT || c == LATHE_CLASS_HALF;
}
static inline int lathe_dtype_is_complex(lathe_dtype dt) { return lathe_dtype_class_of(dt) == LATHE_CLASS_COMPLEX; }
static inline int lathe_dtype_is_packed(lathe_dtype dt) { return lathe_dtype_bits(dt) < 8; }
/* The 8-bit type a sub-byte integer is computed in (Int8 for signed, Uint8 for unsigned); any
 * other dtype (an invalid one included) is itself. */
static inline lathe_dtype lathe_dtype_widened(lathe_dtype dt) {
  if (!lathe_dtype_is_valid(dt) || !lathe_dtype_is_packed(dt)) return dt;
  return lathe_dtype_class_of(dt) == LATHE_CLASS_SINT ? LATHE_DTYPE_INT8 : LATHE_DTYPE_UINT8;
}
/* The real dtype of a complex one (Complex64 -> Float32); dt itself otherwise. */
lathe_dtype lathe_dtype_real_of(lathe_dtype dt);

/* Float16 / BFloat16 <-> float, round to nearest even, NaN kept. */
float lathe_f16_to_f32(uint16_t h);
uint16_t lathe_f32_to_f16(float f);
uint16_t lathe_f32_to_bf16(float f);
/* inline: the widening is a shift, which loops over halves (reductions) vectorise */
static inline float lathe_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Overflow-checked int64 arithmetic: true when the exact result does not fit (then *out is
 * unspecified). */
static inline bool lathe_mul_overflow(int64_t a, int64_t b, int64_t *out) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_mul_overflow(a, b, out);
#else
  if (a && (b > INT64_MAX / a || b < INT64_MIN / a) && !(a == -1 && b == INT64_MIN)) return true;
  if (a == -1 && b == INT64_MIN) return true;
  *out = a * b;
  return false;
#endif
}
static inline bool lathe_add_overflow(int64_t a, int64_t b, int64_t *out) {
#if defined(__GNUC__) || defined(__clang__)
  return __builtin_add_overflow(a, b, out);
#else
  if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return true;
  *out = a + b;
  return false;
#endif
}

/* The size limit. Every shape the library accepts (parameter, constant, buffer, op result,
 * specialised dynamic axes) has an element count and a byte size below LATHE_MAX_TENSOR_SIZE
 * (2^62, lathe.h), where zero-size axes count as 1 and unresolved dynamic axes as 1 too. So
 * every product of dims, row-major stride and offset, in elements, bits of packed dtypes or
 * bytes, and the sum of two of them, fits in int64 (and in size_t) without checks: kernels rely
 * on it. A shape beyond it is INVALID_ARGUMENT where it is declared. */
bool lathe_shape_within_limit(const lathe_shape *s); /* also false for a rank out of range */
/* OK, or INVALID_ARGUMENT "op: what Float32[...] exceeds the size limit ...". */
lathe_status_t lathe_check_shape_size(const char *op, const char *what, const lathe_shape *s);
/* Product of dims (dynamic dims count as 0); INT64_MAX when it overflows. */
int64_t lathe_shape_size(const lathe_shape *s);
/* Byte size of n >= 0 elements of dt, packed; INT64_MAX when it overflows. */
static inline int64_t lathe_dtype_bytes_for(lathe_dtype dt, int64_t n) {
  int bits = lathe_dtype_bits(dt);
  if (bits <= 0) return 0;
  if (bits < 8) { /* sub-byte dtypes: 8/bits elements per byte, the last byte partly used */
    int per = 8 / bits;
    return n / per + (n % per != 0);
  }
  int64_t b;
  return lathe_mul_overflow(n, bits / 8, &b) ? INT64_MAX : b;
}
/* Writes "Float32[2,3]" into buf (always NUL-terminated); returns buf. */
char *lathe_shape_str(const lathe_shape *s, char *buf, size_t n);
#define LATHE_SHAPE_STR_MAX 256
/* Row-major strides in elements. Below the size limit for accepted shapes; saturated at
 * INT64_MAX (never wrapped) for others. */
void lathe_shape_strides(const lathe_shape *s, int64_t *strides);
/* Product of dims[from..to) (1 when empty): e.g. the outer and inner sizes around an axis.
 * Below the size limit for the dims of an accepted shape; saturated at INT64_MAX for others. */
static inline int64_t lathe_dims_product(const int64_t *dims, int from, int to) {
  int64_t n = 1;
  for (int i = from; i < to; i++)
    if (lathe_mul_overflow(n, dims[i], &n)) return INT64_MAX;
  return n;
}

/* Range of a signed / unsigned integer of 1..64 bits (max/min identities, saturation). */
#define LATHE_SINT_MIN(bits) ((int64_t)(0 - ((uint64_t)1 << ((bits) - 1))))
#define LATHE_SINT_MAX(bits) ((int64_t)(((uint64_t)1 << ((bits) - 1)) - 1))
#define LATHE_UINT_MAX(bits) (~(uint64_t)0 >> (64 - (bits)))

#endif

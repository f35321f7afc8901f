/* unary.c -- elementwise ops of one operand (the UNARY kind), instantiated per dtype class.
 *
 * Integer semantics wrap (Abs/Neg of the minimum value give the minimum value). Sub-byte
 * integers arrive widened to 8 bits; BitCount and Clz mask to the operand's true width. */
#include <tgmath.h>

#include "dtype_dispatch.h"
#include "elementwise.h"

typedef void (*un_fn)(const void *in, void *out, int64_t n, int bits);

#define UN_FIRST LATHE_OP_IDENTITY
#define UN_COUNT (LATHE_OP_CONJ - LATHE_OP_IDENTITY + 1)

/* Portable bit helpers (the compiler recognises the popcount idiom). */
static inline int pop64(uint64_t v) {
  v = v - ((v >> 1) & 0x5555555555555555u);
  v = (v & 0x3333333333333333u) + ((v >> 2) & 0x3333333333333333u);
  v = (v + (v >> 4)) & 0x0f0f0f0f0f0f0f0fu;
  return (int)((v * 0x0101010101010101u) >> 56);
}
static inline int sigbits64(uint64_t v) { /* index of the highest set bit + 1 */
  int n = 0;
  if (v >> 32) n += 32, v >>= 32;
  if (v >> 16) n += 16, v >>= 16;
  if (v >> 8) n += 8, v >>= 8;
  if (v >> 4) n += 4, v >>= 4;
  if (v >> 2) n += 2, v >>= 2;
  if (v >> 1) n += 1, v >>= 1;
  return n + (int)v;
}
static inline uint64_t low_bits(uint64_t v, int bits) { return bits >= 64 ? v : v & ((UINT64_C(1) << bits) - 1); }

/* Complex helpers (double precision; Complex64 converts around them). */
static inline double _Complex mk_cd(double re, double im) {
  double p[2] = {re, im};
  double _Complex z;
  memcpy(&z, p, sizeof z);
  return z;
}
static inline double _Complex cexpm1_d(double _Complex z) {
  /* e^(x+iy) - 1 = (expm1(x) cos y - 2 sin^2(y/2)) + i e^x sin y, accurate near 0 */
  double x = creal(z), y = cimag(z), s = sin(y / 2);
  return mk_cd(expm1(x) * cos(y) - 2 * s * s, exp(x) * sin(y));
}
static inline double _Complex clog1p_d(double _Complex z) {
  /* log(1+z) = 0.5 log1p(2x + x^2 + y^2) + i atan2(y, 1+x) */
  double x = creal(z), y = cimag(z);
  if (fabs(x) > 0.5 || fabs(y) > 0.5) return log(1 + z);
  return mk_cd(0.5 * log1p(x * (2 + x) + y * y), atan2(y, 1 + x));
}
static inline double _Complex csign_d(double _Complex z) {
  double a = cabs(z);
  return a == 0 ? z : z / a;
}
static inline int cfinite(double _Complex z) { return isfinite(creal(z)) && isfinite(cimag(z)); }
static inline int cnan(double _Complex z) { return isnan(creal(z)) || isnan(cimag(z)); }

/* ---- op lists per class: X(D, out dtype, OP, expression in x) ---- */
#define UN_BOOL(X, D, B) X(D, D, LOGICAL_NOT, (uint8_t)(x == 0))

#define UN_INT_COMMON(X, D, B)                                                                   \
  X(D, D, BITWISE_NOT, (LATHE_C(D)) ~x)                                                          \
  X(D, D, BIT_COUNT, (LATHE_C(D))pop64(low_bits((uint64_t)(LATHE_DD_UNSIGNED_##B)x, bits)))     \
  X(D, D, CLZ, (LATHE_C(D))(bits - sigbits64(low_bits((uint64_t)(LATHE_DD_UNSIGNED_##B)x, bits)))) \
  X(D, BOOL, IS_NAN, (uint8_t)0)

#define UN_SINT(X, D, B)                                                               \
  UN_INT_COMMON(X, D, B)                                                               \
  X(D, D, ABS, x < 0 ? (LATHE_C(D))((LATHE_DD_UWIDE_##B)0 - (LATHE_DD_UWIDE_##B)x) : x) \
  X(D, D, NEG, (LATHE_C(D))((LATHE_DD_UWIDE_##B)0 - (LATHE_DD_UWIDE_##B)x))            \
  X(D, D, SIGN, (LATHE_C(D))((x > 0) - (x < 0)))

#define UN_UINT(X, D, B) \
  UN_INT_COMMON(X, D, B) \
  X(D, D, ABS, x)        \
  X(D, D, SIGN, (LATHE_C(D))(x > 0))

/* Real floats; tgmath picks the float or double function from x's type. */
#define UN_FLOAT(X, D, B)                                                                                 \
  X(D, D, ABS, fabs(x))                                                                                   \
  X(D, D, NEG, -x)                                                                                        \
  X(D, D, SIGN, isnan(x) ? x : x > 0 ? (LATHE_C(D))1 : x < 0 ? (LATHE_C(D))-1 : x)                        \
  X(D, D, CEIL, ceil(x))                                                                                  \
  X(D, D, FLOOR, floor(x))                                                                                \
  X(D, D, ROUND, nearbyint(x)) /* the default rounding mode: half to even */                             \
  X(D, D, SQRT, sqrt(x))                                                                                  \
  X(D, D, RSQRT, (LATHE_C(D))1 / sqrt(x))                                                                 \
  X(D, D, EXP, exp(x))                                                                                    \
  X(D, D, EXPM1, expm1(x))                                                                                \
  X(D, D, LOG, log(x))                                                                                    \
  X(D, D, LOG1P, log1p(x))                                                                                \
  X(D, D, LOGISTIC, (LATHE_C(D))1 / ((LATHE_C(D))1 + exp(-x)))                                            \
  X(D, D, TANH, tanh(x))                                                                                  \
  X(D, D, SIN, sin(x))                                                                                    \
  X(D, D, COS, cos(x))                                                                                    \
  X(D, D, ERF, erf(x))                                                                                    \
  X(D, BOOL, IS_FINITE, (uint8_t)(isfinite(x) != 0))                                                      \
  X(D, BOOL, IS_NAN, (uint8_t)(isnan(x) != 0))                                                            \
  X(D, D, REAL, x)                                                                                        \
  X(D, D, IMAG, (LATHE_C(D))0)
#define UN_HALF(X, D, B) UN_FLOAT(X, D, B)

/* Complex: tgmath maps exp/log/sqrt/... to cexp/clog/csqrt/...; fabs to cabs. */
#define CD(D, e) ((LATHE_C(D))(e))
#define UN_COMPLEX(X, D, B)                                       \
  X(D, LATHE_REAL(D), ABS, fabs(x))                               \
  X(D, D, NEG, -x)                                                \
  X(D, D, SIGN, CD(D, csign_d(x)))                                   \
  X(D, D, SQRT, sqrt(x))                                          \
  X(D, D, RSQRT, CD(D, 1) / sqrt(x))                                 \
  X(D, D, EXP, exp(x))                                            \
  X(D, D, EXPM1, CD(D, cexpm1_d(x)))                                 \
  X(D, D, LOG, log(x))                                            \
  X(D, D, LOG1P, CD(D, clog1p_d(x)))                                 \
  X(D, D, LOGISTIC, CD(D, 1) / (CD(D, 1) + exp(-x)))                    \
  X(D, D, TANH, tanh(x))                                          \
  X(D, D, SIN, sin(x))                                            \
  X(D, D, COS, cos(x))                                            \
  X(D, BOOL, IS_FINITE, (uint8_t)cfinite(x))                      \
  X(D, BOOL, IS_NAN, (uint8_t)cnan(x))                            \
  X(D, LATHE_REAL(D), REAL, creal(x))                             \
  X(D, LATHE_REAL(D), IMAG, cimag(x))                             \
  X(D, D, CONJ, conj(x))

/* ---- instantiation ---- */
#define UN_DEF(D, OD, OP, EXPR)                                            \
  static void un_##OP##_##D(const void *in, void *out, int64_t n, int bits) { \
    (void)bits;                                                            \
    for (int64_t i = 0; i < n; i++) {                                      \
      LATHE_C(D) x = LATHE_LD(D, in, i);                                   \
      (void)x;                                                             \
      LATHE_ST(OD, out, i, EXPR);                                          \
    }                                                                      \
  }
#define UN_ENTRY(D, OD, OP, EXPR) [LATHE_OP_##OP - UN_FIRST][LATHE_DTYPE_##D] = un_##OP##_##D,

#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(UN_##CLASS(UN_DEF, ENUM, bits))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

static const un_fn un_table[UN_COUNT][LATHE_DTYPE_LIMIT] = {
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(UN_##CLASS(UN_ENTRY, ENUM, bits))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};

static un_fn lookup(lathe_op op, lathe_dtype dt) {
  if (op < UN_FIRST || op > LATHE_OP_CONJ || (int)dt <= 0 || (int)dt >= LATHE_DTYPE_LIMIT) return NULL;
  return un_table[op - UN_FIRST][dt];
}

bool lathe_cpu_supports_unary(lathe_op op, lathe_dtype dtype) {
  if (op == LATHE_OP_IDENTITY) return lathe_dtype_is_valid(dtype);
  return lookup(op, dtype) != NULL;
}

typedef struct {
  un_fn fn;
  const char *in;
  char *out;
  size_t in_es, out_es;
  int bits;
} un_ctx;

static void un_chunk(void *c, int64_t begin, int64_t end) {
  const un_ctx *u = c;
  u->fn(u->in + (size_t)begin * u->in_es, u->out + (size_t)begin * u->out_es, end - begin, u->bits);
}

lathe_status_t lathe_cpu_run_unary(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                   lathe_tensor **out) {
  lathe_dtype dt = lathe_ew_in_shape(n, 0).dtype;
  if (n->op == LATHE_OP_IDENTITY) {
    if (out[0]->data != in[0]->data && out[0]->nbytes) memcpy(out[0]->data, in[0]->data, out[0]->nbytes);
    return NULL;
  }
  un_fn fn = lookup(n->op, dt);
  if (!fn) return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  un_ctx c = {fn, in[0]->data, out[0]->data, lathe_dd_esize(dt), lathe_dd_esize(out[0]->shape.dtype),
              lathe_dtype_bits(n->in[0]->shape.dtype)};
  lathe_ew_parallel(ex, lathe_shape_size(&out[0]->shape), un_chunk, &c);
  return NULL;
}

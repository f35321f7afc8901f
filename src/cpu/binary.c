/* binary.c -- elementwise ops of two operands with broadcasting (the BINARY kind).
 *
 * Integer semantics (GoMLX's Go backend where it defines them, XLA where Go would panic):
 *  - Add/Sub/Mul wrap around (computed in unsigned arithmetic: no signed-overflow UB).
 *  - Div truncates; x/0 gives -1 (all bits set; the maximum for unsigned), MIN/-1 gives MIN.
 *  - Rem takes the dividend's sign; x%0 gives x, MIN%-1 gives 0. Floats: fmod.
 *  - Pow by repeated squaring, wrapping; a negative exponent gives 1 (as the Go backend).
 *  - Shifts take the shift amount as unsigned: an amount >= the bit width gives 0 (ShiftLeft,
 *    ShiftRightLogical) or the sign fill (ShiftRightArithmetic). On unsigned dtypes
 *    ShiftRightArithmetic is a logical shift (Go's >> on unsigned values).
 *  - Max/Min of floats propagate NaN. */
#include <tgmath.h>

#include "dtype_dispatch.h"
#include "elementwise.h"

#define BI_FIRST LATHE_OP_ADD
#define BI_COUNT (LATHE_OP_COMPLEX - LATHE_OP_ADD + 1)

static inline uint64_t ipow_u64(uint64_t base, int64_t e) {
  uint64_t r = 1;
  while (e > 0) {
    if (e & 1) r *= base;
    base *= base;
    e >>= 1;
  }
  return r;
}
static inline uint64_t low_bits(uint64_t v, int bits) { return bits >= 64 ? v : v & ((UINT64_C(1) << bits) - 1); }

static inline float _Complex mk_c64(float re, float im) {
  float p[2] = {re, im};
  float _Complex z;
  memcpy(&z, p, sizeof z);
  return z;
}
static inline double _Complex mk_c128(double re, double im) {
  double p[2] = {re, im};
  double _Complex z;
  memcpy(&z, p, sizeof z);
  return z;
}
#define BI_CPLX_FLOAT32 COMPLEX64
#define BI_CPLX_FLOAT64 COMPLEX128
#define BI_MK_FLOAT32 mk_c64
#define BI_MK_FLOAT64 mk_c128

/* ---- op lists per class: X(D, out dtype, OP, expression in x, y) ---- */
#define UW(B) LATHE_DD_UWIDE_##B
#define BI_WRAP(D, B, op) (LATHE_C(D))((UW(B))x op(UW(B)) y)

#define BI_BOOL(X, D, B)                                              \
  X(D, D, LOGICAL_AND, (uint8_t)((x != 0) & (y != 0)))                \
  X(D, D, LOGICAL_OR, (uint8_t)((x != 0) | (y != 0)))                 \
  X(D, D, LOGICAL_XOR, (uint8_t)((x != 0) ^ (y != 0)))

#define BI_INT_COMMON(X, D, B)                                                              \
  X(D, D, ADD, BI_WRAP(D, B, +))                                                            \
  X(D, D, SUB, BI_WRAP(D, B, -))                                                            \
  X(D, D, MUL, BI_WRAP(D, B, *))                                                            \
  X(D, D, POW, (LATHE_C(D))ipow_u64((uint64_t)x, (int64_t)y))                               \
  X(D, D, MAX, x > y ? x : y)                                                               \
  X(D, D, MIN, x < y ? x : y)                                                               \
  X(D, D, BITWISE_AND, (LATHE_C(D))(x & y))                                                 \
  X(D, D, BITWISE_OR, (LATHE_C(D))(x | y))                                                  \
  X(D, D, BITWISE_XOR, (LATHE_C(D))(x ^ y))                                                 \
  X(D, D, SHIFT_LEFT, (uint64_t)y >= (uint64_t)bits ? (LATHE_C(D))0 : (LATHE_C(D))((UW(B))x << y)) \
  X(D, D, SHIFT_RIGHT_LOGICAL,                                                              \
    (uint64_t)y >= (uint64_t)bits ? (LATHE_C(D))0                                           \
                                  : (LATHE_C(D))(low_bits((LATHE_DD_UNSIGNED_##B)x, bits) >> y))

#define BI_SINT(X, D, B)                                                                          \
  BI_INT_COMMON(X, D, B)                                                                          \
  X(D, D, DIV, y == 0 ? (LATHE_C(D))-1 : y == -1 ? (LATHE_C(D))((UW(B))0 - (UW(B))x) : (LATHE_C(D))(x / y)) \
  X(D, D, REM, y == 0 ? x : y == -1 ? (LATHE_C(D))0 : (LATHE_C(D))(x % y))                        \
  X(D, D, SHIFT_RIGHT_ARITHMETIC, (uint64_t)y >= (uint64_t)bits ? (LATHE_C(D))(x < 0 ? -1 : 0) : (LATHE_C(D))(x >> y))

#define BI_UINT(X, D, B)                                                           \
  BI_INT_COMMON(X, D, B)                                                           \
  X(D, D, DIV, y == 0 ? (LATHE_C(D))-1 : (LATHE_C(D))(x / y))                      \
  X(D, D, REM, y == 0 ? x : (LATHE_C(D))(x % y))                                   \
  X(D, D, SHIFT_RIGHT_ARITHMETIC, (uint64_t)y >= (uint64_t)bits ? (LATHE_C(D))0 : (LATHE_C(D))(x >> y))

#define BI_REAL(X, D, B)                                      \
  X(D, D, ADD, x + y)                                         \
  X(D, D, SUB, x - y)                                         \
  X(D, D, MUL, x * y)                                         \
  X(D, D, DIV, x / y)                                         \
  X(D, D, REM, fmod(x, y))                                    \
  X(D, D, POW, pow(x, y))                                     \
  X(D, D, MAX, (x > y || x != x) ? x : y)                     \
  X(D, D, MIN, (x < y || x != x) ? x : y)                     \
  X(D, D, ATAN2, atan2(x, y))
#define BI_FLOAT(X, D, B) BI_REAL(X, D, B) X(D, BI_CPLX_##D, COMPLEX, BI_MK_##D(x, y))
#define BI_HALF(X, D, B) BI_REAL(X, D, B)

#define BI_COMPLEX(X, D, B) \
  X(D, D, ADD, x + y)       \
  X(D, D, SUB, x - y)       \
  X(D, D, MUL, x * y)       \
  X(D, D, DIV, x / y)       \
  X(D, D, POW, pow(x, y))

/* ---- instantiation ---- */
#define BI_DEF(D, OD, OP, EXPR) LATHE_EW_BINARY_ROW(bi_##OP##_##D, D, OD, EXPR)
#define BI_ENTRY(D, OD, OP, EXPR) [LATHE_OP_##OP - BI_FIRST][LATHE_DTYPE_##D] = bi_##OP##_##D,

#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(BI_##CLASS(BI_DEF, ENUM, bits))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

static const lathe_ew_binary_fn bi_table[BI_COUNT][LATHE_DTYPE_LIMIT] = {
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(BI_##CLASS(BI_ENTRY, ENUM, bits))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};

static lathe_ew_binary_fn lookup(lathe_op op, lathe_dtype dt) {
  if (op < BI_FIRST || op > LATHE_OP_COMPLEX || (int)dt <= 0 || (int)dt >= LATHE_DTYPE_LIMIT) return NULL;
  return bi_table[op - BI_FIRST][dt];
}

bool lathe_cpu_supports_binary(lathe_op op, lathe_dtype dtype) { return lookup(op, dtype) != NULL; }

lathe_status_t lathe_cpu_run_binary(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                    lathe_tensor **out) {
  lathe_dtype dt = lathe_ew_in_shape(n, 0).dtype;
  lathe_ew_binary_ctx c = {lookup(n->op, dt), lathe_dtype_bits(n->in[0]->shape.dtype)};
  if (!c.fn) return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  return lathe_ew_run(ex, n, in, 2, out[0], lathe_ew_binary_row, &c);
}

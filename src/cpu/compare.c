/* compare.c -- comparisons with broadcasting, Bool results (the COMPARE kind).
 *
 * Floats compare as IEEE (NaN is unordered: only NotEqual is true). The *TotalOrder variants
 * use IEEE totalOrder, -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN, by mapping each
 * float's bits to a signed integer key that sorts the same way. Complex numbers support only
 * (Not)Equal, on both parts. Bool compares false < true. */
#include "dtype_dispatch.h"
#include "elementwise.h"

#define CMP_FIRST LATHE_OP_EQUAL
#define CMP_COUNT (LATHE_OP_LESS_OR_EQUAL_TOTAL_ORDER - LATHE_OP_EQUAL + 1)

/* Negative floats (sign bit set) have their magnitude bits flipped so larger magnitudes
 * sort lower; as signed integers the keys then follow totalOrder. */
static inline int32_t key_float(float f) {
  int32_t i;
  memcpy(&i, &f, 4);
  return i < 0 ? i ^ INT32_MAX : i;
}
static inline int64_t key_double(double f) {
  int64_t i;
  memcpy(&i, &f, 8);
  return i < 0 ? i ^ INT64_MAX : i;
}
static inline float cre_f(float _Complex z) {
  float p[2];
  memcpy(p, &z, sizeof p);
  return p[0];
}
static inline float cim_f(float _Complex z) {
  float p[2];
  memcpy(p, &z, sizeof p);
  return p[1];
}
static inline double cre_d(double _Complex z) {
  double p[2];
  memcpy(p, &z, sizeof p);
  return p[0];
}
static inline double cim_d(double _Complex z) {
  double p[2];
  memcpy(p, &z, sizeof p);
  return p[1];
}
#define CMP_KEY_float key_float
#define CMP_KEY_double key_double
#define CMP_PART_lathe_c64(part) c##part##_f
#define CMP_PART_lathe_c128(part) c##part##_d
#define CMP_KEY_lathe_c64 key_float
#define CMP_KEY_lathe_c128 key_double

/* X(D, OP, expression in a, b): the six orderings on values a, b. */
#define CMP_ORDER(X, D, SUFFIX, a, b)        \
  X(D, EQUAL##SUFFIX, (a) == (b))            \
  X(D, NOT_EQUAL##SUFFIX, (a) != (b))        \
  X(D, GREATER_THAN##SUFFIX, (a) > (b))      \
  X(D, GREATER_OR_EQUAL##SUFFIX, (a) >= (b)) \
  X(D, LESS_THAN##SUFFIX, (a) < (b))         \
  X(D, LESS_OR_EQUAL##SUFFIX, (a) <= (b))

#define CMP_INT(X, D, ct) CMP_ORDER(X, D, , x, y) CMP_ORDER(X, D, _TOTAL_ORDER, x, y)
#define CMP_SINT(X, D, ct) CMP_INT(X, D, ct)
#define CMP_UINT(X, D, ct) CMP_INT(X, D, ct)
#define CMP_BOOL(X, D, ct) CMP_ORDER(X, D, , x != 0, y != 0) CMP_ORDER(X, D, _TOTAL_ORDER, x != 0, y != 0)
#define CMP_FLOAT(X, D, ct) CMP_ORDER(X, D, , x, y) CMP_ORDER(X, D, _TOTAL_ORDER, CMP_KEY_##ct(x), CMP_KEY_##ct(y))
#define CMP_HALF(X, D, ct) CMP_FLOAT(X, D, ct)
#define CMP_COMPLEX(X, D, ct)                                                                           \
  X(D, EQUAL, x == y)                                                                                   \
  X(D, NOT_EQUAL, x != y)                                                                               \
  X(D, EQUAL_TOTAL_ORDER,                                                                               \
    CMP_KEY_##ct(CMP_PART_##ct(re)(x)) == CMP_KEY_##ct(CMP_PART_##ct(re)(y)) &&                         \
        CMP_KEY_##ct(CMP_PART_##ct(im)(x)) == CMP_KEY_##ct(CMP_PART_##ct(im)(y)))                       \
  X(D, NOT_EQUAL_TOTAL_ORDER,                                                                           \
    CMP_KEY_##ct(CMP_PART_##ct(re)(x)) != CMP_KEY_##ct(CMP_PART_##ct(re)(y)) ||                         \
        CMP_KEY_##ct(CMP_PART_##ct(im)(x)) != CMP_KEY_##ct(CMP_PART_##ct(im)(y)))

#define CMP_DEF(D, OP, EXPR) LATHE_EW_BINARY_ROW(cmp_##OP##_##D, D, BOOL, (uint8_t)(EXPR))
#define CMP_ENTRY(D, OP, EXPR) [LATHE_OP_##OP - CMP_FIRST][LATHE_DTYPE_##D] = cmp_##OP##_##D,

#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(CMP_##CLASS(CMP_DEF, ENUM, ct))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

static const lathe_ew_binary_fn cmp_table[CMP_COUNT][LATHE_DTYPE_LIMIT] = {
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(CMP_##CLASS(CMP_ENTRY, ENUM, ct))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};

static lathe_ew_binary_fn lookup(lathe_op op, lathe_dtype dt) {
  if (op < CMP_FIRST || op > LATHE_OP_LESS_OR_EQUAL_TOTAL_ORDER || (int)dt <= 0 || (int)dt >= LATHE_DTYPE_LIMIT)
    return NULL;
  return cmp_table[op - CMP_FIRST][dt];
}

bool lathe_cpu_supports_compare(lathe_op op, lathe_dtype dtype) { return lookup(op, dtype) != NULL; }

lathe_status_t lathe_cpu_run_compare(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                     lathe_tensor **out) {
  lathe_dtype dt = lathe_ew_in_shape(n, 0).dtype;
  lathe_ew_binary_ctx c = {lookup(n->op, dt), lathe_dtype_bits(n->in[0]->shape.dtype)};
  if (!c.fn) return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  return lathe_ew_run(ex, n, in, 2, out[0], lathe_ew_binary_row, &c);
}

/* select.c -- Where (by element size: it only moves bits) and Clamp (per dtype; as
 * Min(Max(min, x), max), so a NaN anywhere gives NaN). Operands broadcast through the
 * elementwise driver (scalars have step 0). */
#include "dtype_dispatch.h"
#include "elementwise.h"

typedef struct {
  uint64_t lo, hi;
} u128;

#define WHERE_ROW(T, NAME)                                                                                   \
  static void NAME(void *ctx, const void *const *in, const int *st, void *out, int64_t n) {                  \
    (void)ctx;                                                                                               \
    const uint8_t *c = in[0];                                                                                \
    const T *t = in[1], *f = in[2];                                                                          \
    T *o = out;                                                                                              \
    if (st[0] && st[1] && st[2])                                                                             \
      for (int64_t i = 0; i < n; i++) o[i] = c[i] ? t[i] : f[i];                                             \
    else                                                                                                     \
      for (int64_t i = 0; i < n; i++) o[i] = c[st[0] ? i : 0] ? t[st[1] ? i : 0] : f[st[2] ? i : 0];         \
  }
WHERE_ROW(uint8_t, where1)
WHERE_ROW(uint16_t, where2)
WHERE_ROW(uint32_t, where4)
WHERE_ROW(uint64_t, where8)
WHERE_ROW(u128, where16)

/* Clamp row kernels: operands (min, x, max). */
#define CL_MAX(a, b) (((a) > (b) || (a) != (a)) ? (a) : (b))
#define CL_MIN(a, b) (((a) < (b) || (a) != (a)) ? (a) : (b))
#define CL_DEF(D)                                                                                   \
  static void clamp_##D(void *ctx, const void *const *in, const int *st, void *out, int64_t n) {    \
    (void)ctx;                                                                                      \
    if (!st[0] && st[1] && !st[2]) {                                                                \
      LATHE_C(D) lo = LATHE_LD(D, in[0], 0), hi = LATHE_LD(D, in[2], 0);                            \
      for (int64_t i = 0; i < n; i++) {                                                             \
        LATHE_C(D) v = CL_MAX(lo, LATHE_LD(D, in[1], i));                                           \
        LATHE_ST(D, out, i, CL_MIN(v, hi));                                                         \
      }                                                                                             \
      return;                                                                                       \
    }                                                                                               \
    for (int64_t i = 0; i < n; i++) {                                                               \
      LATHE_C(D) lo = LATHE_LD(D, in[0], st[0] ? i : 0), x = LATHE_LD(D, in[1], st[1] ? i : 0);     \
      LATHE_C(D) hi = LATHE_LD(D, in[2], st[2] ? i : 0), v = CL_MAX(lo, x);                         \
      LATHE_ST(D, out, i, CL_MIN(v, hi));                                                           \
    }                                                                                               \
  }
#define CL_ENTRY(D) [LATHE_DTYPE_##D] = clamp_##D,
#define CL_BOOL(X, D)
#define CL_SINT(X, D) X(D)
#define CL_UINT(X, D) X(D)
#define CL_FLOAT(X, D) X(D)
#define CL_HALF(X, D) X(D)
#define CL_COMPLEX(X, D)

#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(CL_##CLASS(CL_DEF, ENUM))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

static const lathe_ew_row_fn clamp_table[LATHE_DTYPE_LIMIT] = {
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(CL_##CLASS(CL_ENTRY, ENUM))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};

static lathe_ew_row_fn where_fn(lathe_dtype dt) {
  switch (lathe_dtype_bits(dt)) {
    case 8: return where1;
    case 16: return where2;
    case 32: return where4;
    case 64: return where8;
    case 128: return where16;
    default: return NULL;
  }
}

static lathe_ew_row_fn lookup(lathe_op op, lathe_dtype dt) {
  if ((int)dt <= 0 || (int)dt >= LATHE_DTYPE_LIMIT || !lathe_dtype_is_valid(dt)) return NULL;
  if (op == LATHE_OP_WHERE) return where_fn(dt);
  if (op == LATHE_OP_CLAMP) return clamp_table[dt];
  return NULL;
}

/* dtype is the first operand's: Bool for Where, whose values may have any dtype. */
bool lathe_cpu_supports_select(lathe_op op, lathe_dtype dtype) {
  if (op == LATHE_OP_WHERE) return dtype == LATHE_DTYPE_BOOL;
  return lookup(op, dtype) != NULL;
}

lathe_status_t lathe_cpu_run_select(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                    lathe_tensor **out) {
  lathe_dtype dt = out[0]->shape.dtype;
  lathe_ew_row_fn fn = lookup(n->op, dt);
  if (!fn) return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  return lathe_ew_run(ex, n, in, 3, out[0], fn, NULL);
}

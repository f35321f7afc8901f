/* scan.c -- the SCAN family on the CPU: CumSum (running sums along one axis; Exclusive, Reverse).
 *
 * The operand is seen as [pre, len, post] around the axis. Each of the pre * post lines is summed
 * in index order along the axis (from its end when reversed), so the result does not depend on
 * the thread count. With post == 1 (the innermost axis) threads take whole lines; otherwise a
 * line set is a tile of up to TILE neighbouring columns, walked row by row with one accumulator
 * per column (contiguous loads and stores, vectorisable). Integers wrap (the sums are done in
 * the unsigned type); Float16/BFloat16 accumulate in float and round each result once; sub-byte
 * integers arrive widened to 8 bits and are packed back after the kernel (their sums wrap at
 * their own width there). */
#include "dtype_dispatch.h"

enum { TILE = 256, WORK = 1 << 15 };

typedef struct {
  const void *in;
  void *out;
  int64_t len, post, tiles;
  bool excl, rev;
} scan_job;

/* Accumulator of each class: integers wrap in their unsigned type. */
#define SCAN_ACC_SINT(D) lathe_uw_##D
#define SCAN_ACC_UINT(D) lathe_uw_##D
#define SCAN_ACC_FLOAT(D) LATHE_C(D)
#define SCAN_ACC_HALF(D) LATHE_C(D)

/* Step t of a line from its first element f (stride s): element f + k*s, k in index order or
 * reversed; the exclusive form stores before adding. */
#define SCAN_KERNELS(D, A)                                                                      \
  static void inner_##D(void *ctx, int64_t b, int64_t e) {                                      \
    const scan_job *j = ctx;                                                                    \
    int64_t len = j->len, k0 = j->rev ? len - 1 : 0, dk = j->rev ? -1 : 1;                      \
    for (int64_t r = b; r < e; r++) {                                                           \
      const int64_t base = r * len;                                                             \
      A acc = 0;                                                                                \
      int64_t k = base + k0;                                                                    \
      if (j->excl)                                                                              \
        for (int64_t t = 0; t < len; t++, k += dk) {                                            \
          A v = (A)LATHE_LD(D, j->in, k);                                                        \
          LATHE_ST(D, j->out, k, (LATHE_C(D))acc);                                              \
          acc += v;                                                                             \
        }                                                                                       \
      else                                                                                      \
        for (int64_t t = 0; t < len; t++, k += dk) {                                            \
          acc += (A)LATHE_LD(D, j->in, k);                                                       \
          LATHE_ST(D, j->out, k, (LATHE_C(D))acc);                                              \
        }                                                                                       \
    }                                                                                           \
  }                                                                                             \
  static void outer_##D(void *ctx, int64_t b, int64_t e) {                                      \
    const scan_job *j = ctx;                                                                    \
    A acc[TILE];                                                                                \
    for (int64_t w = b; w < e; w++) {                                                           \
      int64_t p = w / j->tiles, c0 = (w % j->tiles) * TILE;                                     \
      int64_t nc = j->post - c0 < TILE ? j->post - c0 : TILE;                                   \
      for (int64_t c = 0; c < nc; c++) acc[c] = 0;                                              \
      for (int64_t t = 0; t < j->len; t++) {                                                    \
        int64_t row = (p * j->len + (j->rev ? j->len - 1 - t : t)) * j->post + c0;              \
        if (j->excl)                                                                            \
          for (int64_t c = 0; c < nc; c++) {                                                    \
            A v = (A)LATHE_LD(D, j->in, row + c);                                                \
            LATHE_ST(D, j->out, row + c, (LATHE_C(D))acc[c]);                                   \
            acc[c] += v;                                                                        \
          }                                                                                     \
        else                                                                                    \
          for (int64_t c = 0; c < nc; c++) {                                                    \
            acc[c] += (A)LATHE_LD(D, j->in, row + c);                                            \
            LATHE_ST(D, j->out, row + c, (LATHE_C(D))acc[c]);                                   \
          }                                                                                     \
      }                                                                                         \
    }                                                                                           \
  }

#define SCAN_INST_SINT(D) SCAN_KERNELS(D, SCAN_ACC_SINT(D))
#define SCAN_INST_UINT(D) SCAN_KERNELS(D, SCAN_ACC_UINT(D))
#define SCAN_INST_FLOAT(D) SCAN_KERNELS(D, SCAN_ACC_FLOAT(D))
#define SCAN_INST_HALF(D) SCAN_KERNELS(D, SCAN_ACC_HALF(D))
#define SCAN_INST_BOOL(D)
#define SCAN_INST_COMPLEX(D)
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(SCAN_INST_##CLASS(ENUM))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

typedef struct {
  lathe_range_fn inner, outer;
} scan_fns;

#define SCAN_ROW_SINT(D) [LATHE_DDI_##D] = {inner_##D, outer_##D},
#define SCAN_ROW_UINT(D) SCAN_ROW_SINT(D)
#define SCAN_ROW_FLOAT(D) SCAN_ROW_SINT(D)
#define SCAN_ROW_HALF(D) SCAN_ROW_SINT(D)
#define SCAN_ROW_BOOL(D)
#define SCAN_ROW_COMPLEX(D)
static const scan_fns table[LATHE_DD_COUNT] = {
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(SCAN_ROW_##CLASS(ENUM))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
};

static const scan_fns *fns_of(lathe_dtype dt) {
  int i = lathe_dd_index(dt);
  return i >= 0 && table[i].inner ? &table[i] : NULL;
}

bool lathe_cpu_supports_scan(lathe_op op, lathe_dtype dtype) { return op == LATHE_OP_CUM_SUM && fns_of(dtype); }

lathe_status_t lathe_cpu_run_scan(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  const lathe_shape *xs = &in[0]->shape;
  const scan_fns *f = n->op == LATHE_OP_CUM_SUM ? fns_of(xs->dtype) : NULL;
  if (!f) return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(xs->dtype));
  int axis = (int)lathe_attr_cum_sum_axis(n);
  scan_job j = {.in = in[0]->data, .out = out[0]->data, .len = xs->dims[axis],
                .post = lathe_dims_product(xs->dims, axis + 1, xs->rank), .excl = lathe_attr_cum_sum_exclusive(n),
                .rev = lathe_attr_cum_sum_reverse(n)};
  int64_t pre = lathe_dims_product(xs->dims, 0, axis);
  if (pre * j.len * j.post == 0) return NULL;
  lathe_pool *pool = lathe_cpu_exec_pool(ex);
  if (j.post == 1) {
    lathe_parallel_for(pool, pre, WORK / j.len + 1, f->inner, &j);
    return NULL;
  }
  j.tiles = (j.post + TILE - 1) / TILE;
  int64_t per = j.len * (j.post < TILE ? j.post : TILE);
  lathe_parallel_for(pool, pre * j.tiles, WORK / per + 1, f->outer, &j);
  return NULL;
}

/* window.c -- ReduceWindow and SelectAndScatterMax/Min on the CPU.
 *
 * Both walk windows over the operand. Per axis, and per output (or source) index along it,
 * a table lists the operand offsets of the window positions that fall on real elements --
 * padding and input-dilation holes are left out -- in window order. A window is then the
 * cartesian product of its axes' lists, visited row-major, so "first" means what it means
 * in GoMLX's reference backend.
 *
 * ReduceWindow: accumulates floats in double, integers in 64 bits with wrapping (equal to
 * wrapping in the dtype); max/min let NaN through. Empty windows give the identity.
 * SelectAndScatter*: selects, per source element, the operand element (first on ties, a NaN
 * replaces the current choice), in parallel; then adds the source values into an accumulator
 * of the operand's shape, in source order, and stores it in the dtype. */
#include <math.h>

#include "dtype_dispatch.h"

typedef struct win_ctx {
  int rank;
  int64_t odims[LATHE_MAX_RANK]; /* ReduceWindow output dims, or SelectAndScatter source dims */
  int64_t win[LATHE_MAX_RANK];
  const int64_t *cnt[LATHE_MAX_RANK];  /* [axis][out index]: valid positions */
  const int64_t *offs[LATHE_MAX_RANK]; /* [axis][out index * win + j]: operand offsets */
  const void *x;
  void *y;
  int64_t *sel; /* SelectAndScatter: chosen operand offset per source element, -1 if none */
} win_ctx;

typedef struct win_type {
  size_t asize;      /* bytes of the accumulator type */
  lathe_range_fn rw[4]; /* ReduceWindow: sum, product, max, min */
  lathe_range_fn select[2]; /* max, min */
  /* acc (asize * n_operand bytes, zeroed) += source at sel; then y = acc in the dtype */
  void (*scatter)(const void *src, const int64_t *sel, int64_t n_src, void *acc, void *y, int64_t n_operand);
} win_type;

/* Loads the window lists of output index o into (L, cnt); false when the window is empty. */
static inline bool window_lists(const win_ctx *c, const int64_t *o, const int64_t **L, int64_t *cnt) {
  for (int d = 0; d < c->rank; d++) {
    cnt[d] = c->cnt[d][o[d]];
    L[d] = c->offs[d] + o[d] * c->win[d];
    if (!cnt[d]) return false;
  }
  return true;
}

/* Visits the window's operand offsets row-major, calling BODY with `off` set. */
#define FOR_WINDOW(c, L, cnt, BODY)                                              \
  do {                                                                           \
    int r_ = (c)->rank;                                                          \
    if (r_ == 0) {                                                               \
      int64_t off = 0;                                                           \
      BODY;                                                                      \
      break;                                                                     \
    }                                                                            \
    int64_t j_[LATHE_MAX_RANK] = {0};                                            \
    for (;;) {                                                                   \
      int64_t base_ = 0;                                                         \
      for (int d_ = 0; d_ < r_ - 1; d_++) base_ += L[d_][j_[d_]];                \
      for (int64_t q_ = 0; q_ < cnt[r_ - 1]; q_++) {                             \
        int64_t off = base_ + L[r_ - 1][q_];                                     \
        BODY;                                                                    \
      }                                                                          \
      int d_ = r_ - 2;                                                           \
      for (; d_ >= 0; d_--) {                                                    \
        if (++j_[d_] < cnt[d_]) break;                                           \
        j_[d_] = 0;                                                              \
      }                                                                          \
      if (d_ < 0) break;                                                         \
    }                                                                            \
  } while (0)

/* ---- per-dtype instances ---- */
#define IS_NAN_F(v) isnan(v)
#define IS_NAN_I(v) 0
#define ADD_F(A, a, b) ((a) + (b))
#define MUL_F(A, a, b) ((a) * (b))
#define ADD_I(A, a, b) ((A)((uint64_t)(a) + (uint64_t)(b))) /* wraps; no signed overflow */
#define MUL_I(A, a, b) ((A)((uint64_t)(a) * (uint64_t)(b)))

#define RW_FN(ENUM, NAME, A, INIT, UPDATE)                                        \
  static void rw_##NAME##_##ENUM(void *vc, int64_t b, int64_t e) {                   \
    const win_ctx *c = vc;                                                           \
    const void *x = c->x;                                                            \
    void *y = c->y;                                                                  \
    int64_t o[LATHE_MAX_RANK], cnt[LATHE_MAX_RANK];                                  \
    const int64_t *L[LATHE_MAX_RANK];                                                \
    lathe_unflatten(b, c->odims, c->rank, o);                                        \
    for (int64_t i = b; i < e; i++) {                                                \
      A acc = INIT;                                                                  \
      if (window_lists(c, o, L, cnt)) FOR_WINDOW(c, L, cnt, {                        \
          A v = (A)LATHE_LD(ENUM, x, off);                                                  \
          acc = UPDATE;                                                              \
        });                                                                          \
      LATHE_ST(ENUM, y, i, (LATHE_C(ENUM))acc);                                      \
      lathe_odometer(o, c->odims, c->rank);                                          \
    }                                                                                \
  }

#define SEL_FN(ENUM, NAME, A, BETTER, ISNAN)                                      \
  static void sel_##NAME##_##ENUM(void *vc, int64_t b, int64_t e) {                  \
    const win_ctx *c = vc;                                                           \
    const void *x = c->x;                                                            \
    int64_t o[LATHE_MAX_RANK], cnt[LATHE_MAX_RANK];                                  \
    const int64_t *L[LATHE_MAX_RANK];                                                \
    lathe_unflatten(b, c->odims, c->rank, o);                                        \
    for (int64_t i = b; i < e; i++) {                                                \
      int64_t best = -1;                                                             \
      A bv = 0;                                                                      \
      if (window_lists(c, o, L, cnt)) FOR_WINDOW(c, L, cnt, {                        \
          A v = (A)LATHE_LD(ENUM, x, off);                                                  \
          if (best < 0 || (v BETTER bv) || ISNAN(v)) {                             \
            best = off;                                                              \
            bv = v;                                                                  \
          }                                                                          \
        });                                                                          \
      c->sel[i] = best;                                                              \
      lathe_odometer(o, c->odims, c->rank);                                          \
    }                                                                                \
  }

/* K: F (float accumulation) or I (integer, wrapping). */
#define WIN_INST(ENUM, A, K, LOWEST, HIGHEST)                                                      \
  RW_FN(ENUM, sum, A, (A)0, ADD_##K(A, acc, v))                                                    \
  RW_FN(ENUM, prod, A, (A)1, MUL_##K(A, acc, v))                                                   \
  RW_FN(ENUM, max, A, LOWEST, ((v > acc || IS_NAN_##K(v)) && !IS_NAN_##K(acc) ? v : acc)) \
  RW_FN(ENUM, min, A, HIGHEST, ((v < acc || IS_NAN_##K(v)) && !IS_NAN_##K(acc) ? v : acc)) \
  SEL_FN(ENUM, max, A, >, IS_NAN_##K)                                                              \
  SEL_FN(ENUM, min, A, <, IS_NAN_##K)                                                              \
  static void scatter_##ENUM(const void *vs, const int64_t *sel, int64_t n_src, void *vacc, void *vy, \
                             int64_t n) {                                                             \
    A *acc = vacc;                                                                                    \
    for (int64_t i = 0; i < n_src; i++)                                                               \
      if (sel[i] >= 0) acc[sel[i]] = ADD_##K(A, acc[sel[i]], (A)LATHE_LD(ENUM, vs, i));                   \
    for (int64_t i = 0; i < n; i++) LATHE_ST(ENUM, vy, i, (LATHE_C(ENUM))acc[i]);                                         \
  }                                                                                                   \
  static const win_type win_##ENUM = {sizeof(A),                                                      \
                                      {rw_sum_##ENUM, rw_prod_##ENUM, rw_max_##ENUM, rw_min_##ENUM},  \
                                      {sel_max_##ENUM, sel_min_##ENUM},                               \
                                      scatter_##ENUM};

/* Instances from the dtype table: integers and real floats (sub-byte integers arrive widened);
 * Bool for ReduceWindow Max (any) and Min (all) only. */
#define WIN_BOOL(ENUM, bits)                                                                     \
  RW_FN(ENUM, max, uint64_t, 0, (v > acc ? v : acc))                                             \
  RW_FN(ENUM, min, uint64_t, 1, (v < acc ? v : acc))                                             \
  static const win_type win_##ENUM = {sizeof(uint64_t), {NULL, NULL, rw_max_##ENUM, rw_min_##ENUM}, \
                                      {NULL, NULL}, NULL};
#define WIN_COMPLEX(ENUM, bits)
#define WIN_FLOAT(ENUM, bits) WIN_INST(ENUM, double, F, -INFINITY, INFINITY)
#define WIN_HALF WIN_FLOAT
#define WIN_SINT(ENUM, bits) \
  WIN_INST(ENUM, int64_t, I, LATHE_SINT_MIN(bits), LATHE_SINT_MAX(bits))
#define WIN_UINT(ENUM, bits) WIN_INST(ENUM, uint64_t, I, (uint64_t)0, LATHE_UINT_MAX(bits))
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(WIN_##CLASS(ENUM, bits))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

static const win_type *win_type_of(lathe_dtype dt) {
  switch (dt) {
#define CASE_NONE(ENUM)
#define CASE_COMPLEX CASE_NONE
#define CASE_YES(ENUM) case LATHE_DTYPE_##ENUM: return &win_##ENUM;
#define CASE_BOOL CASE_YES
#define CASE_FLOAT CASE_YES
#define CASE_HALF CASE_YES
#define CASE_SINT CASE_YES
#define CASE_UINT CASE_YES
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(CASE_##CLASS(ENUM))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
    default: return NULL;
  }
}

bool lathe_cpu_supports_window(lathe_op op, lathe_dtype dtype) {
  const win_type *ty = win_type_of(dtype);
  if (!ty) return false;
  return op == LATHE_OP_REDUCE_WINDOW ||
         ((op == LATHE_OP_SELECT_AND_SCATTER_MAX || op == LATHE_OP_SELECT_AND_SCATTER_MIN) && ty->scatter);
}

/* Builds the per-axis window lists for operand shape xs and window grid odims; *mem owns them. */
static lathe_status_t build_lists(win_ctx *c, const lathe_node *n, const lathe_shape *xs, const int64_t *odims,
                                  int64_t **mem) {
  const int64_t *wd = lathe_attr_window_dims(n).v, *st = lathe_attr_window_strides(n).v;
  const int64_t *idil = lathe_attr_window_input_dilations(n).v, *wdil = lathe_attr_window_window_dilations(n).v;
  const int64_t *pads = lathe_attr_window_paddings(n).v;
  int64_t xst[LATHE_MAX_RANK], total = 0;
  lathe_shape_strides(xs, xst);
  c->rank = xs->rank;
  for (int d = 0; d < c->rank; d++) {
    c->odims[d] = odims[d];
    c->win[d] = wd[d];
    total += odims[d] * (1 + wd[d]);
  }
  int64_t *p = *mem = malloc(sizeof(int64_t) * (size_t)(total + 1));
  if (!p) return LATHE_OOM(lathe_op_name(n->op));
  for (int d = 0; d < c->rank; d++) {
    int64_t *cnt = p, *offs = p + odims[d];
    c->cnt[d] = cnt;
    c->offs[d] = offs;
    p += odims[d] * (1 + wd[d]);
    for (int64_t o = 0; o < odims[d]; o++) {
      int64_t k = 0;
      for (int64_t w = 0; w < wd[d]; w++) {
        int64_t pos = o * st[d] - pads[2 * d] + w * wdil[d];
        if (pos < 0 || pos % idil[d] != 0 || pos / idil[d] >= xs->dims[d]) continue;
        offs[o * wd[d] + k++] = pos / idil[d] * xst[d];
      }
      cnt[o] = k;
    }
  }
  return NULL;
}

/* Grain so a chunk holds ~32K window visits. */
static int64_t grain_for(const lathe_node *n, int rank) {
  int64_t w = 1;
  const int64_t *dims = lathe_attr_window_dims(n).v;
  for (int d = 0; d < rank; d++) w *= dims[d];
  int64_t g = 32768 / (w > 0 ? w : 1);
  return g < 1 ? 1 : g;
}

lathe_status_t lathe_cpu_run_window(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                    lathe_tensor **out) {
  const lathe_shape *xs = &in[0]->shape;
  const win_type *ty = win_type_of(xs->dtype);
  if (!ty || !lathe_cpu_supports_window(n->op, xs->dtype))
    return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(xs->dtype));
  win_ctx c;
  memset(&c, 0, sizeof c);
  int64_t *mem = NULL;
  c.x = in[0]->data;
  if (n->op == LATHE_OP_REDUCE_WINDOW) {
    const lathe_shape *ys = &out[0]->shape;
    int64_t ny = lathe_shape_size(ys);
    if (ny == 0) return NULL;
    LATHE_RETURN_IF_ERROR(build_lists(&c, n, xs, ys->dims, &mem));
    c.y = out[0]->data;
    lathe_op red = lathe_attr_window_reduction(n);
    int k = red == LATHE_OP_REDUCE_SUM ? 0 : red == LATHE_OP_REDUCE_PRODUCT ? 1 : red == LATHE_OP_REDUCE_MAX ? 2 : 3;
    if (!ty->rw[k])
      return LATHE_UNIMPL("ReduceWindow: %s over %s is not implemented on lathe:cpu", lathe_op_name(red),
                          lathe_dtype_name(xs->dtype));
    lathe_parallel_for(lathe_cpu_exec_pool(ex), ny, grain_for(n, xs->rank), ty->rw[k], &c);
    free(mem);
    /* Sub-byte dtypes run widened to 8 bits: the max/min identity of empty windows must be
     * that of the node's own dtype (real values are already in its range). */
    int bits = lathe_dtype_bits(n->shape.dtype);
    if (bits < 8 && k >= 2) {
      bool sgn = lathe_dtype_class_of(n->shape.dtype) == LATHE_CLASS_SINT;
      int lo = sgn ? (int)LATHE_SINT_MIN(bits) : 0, hi = sgn ? (int)LATHE_SINT_MAX(bits) : (int)LATHE_UINT_MAX(bits);
      for (int64_t i = 0; i < ny; i++) {
        int v = sgn ? ((int8_t *)c.y)[i] : ((uint8_t *)c.y)[i];
        v = v < lo ? lo : v > hi ? hi : v;
        if (sgn) ((int8_t *)c.y)[i] = (int8_t)v;
        else ((uint8_t *)c.y)[i] = (uint8_t)v;
      }
    }
    return NULL;
  }
  const lathe_shape *ss = &in[1]->shape;
  int64_t nx = lathe_shape_size(xs), ns = lathe_shape_size(ss);
  if (nx == 0) return NULL;
  int64_t *sel = malloc(sizeof(int64_t) * (size_t)(ns + 1));
  void *acc = calloc((size_t)nx, ty->asize);
  lathe_status_t st = (!sel || !acc) ? LATHE_OOM(lathe_op_name(n->op)) : NULL;
  if (!st) st = build_lists(&c, n, xs, ss->dims, &mem);
  if (!st) {
    c.sel = sel;
    lathe_parallel_for(lathe_cpu_exec_pool(ex), ns, grain_for(n, xs->rank),
                       ty->select[n->op == LATHE_OP_SELECT_AND_SCATTER_MAX ? 0 : 1], &c);
    ty->scatter(in[1]->data, sel, ns, acc, out[0]->data, nx);
  }
  free(mem);
  free(sel);
  free(acc);
  return st;
}

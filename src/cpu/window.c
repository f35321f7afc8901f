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
 * of the operand's shape, in source order, and stores it in the dtype. The kernels are in
 * window_kernels.h, one instance per ISA. */
#include "kernels.h"

static const lathe_win_type *win_type_of(const lathe_cpu_kernels *k, lathe_dtype dt) {
  return (int)dt > 0 && dt < LATHE_DTYPE_LIMIT ? k->win[dt] : NULL;
}

bool lathe_cpu_supports_window(lathe_op op, lathe_dtype dtype) {
  const lathe_win_type *ty = win_type_of(lathe_cpu_kernels_of(LATHE_CPU_ISA_BASELINE), dtype);
  if (!ty) return false;
  return op == LATHE_OP_REDUCE_WINDOW ||
         ((op == LATHE_OP_SELECT_AND_SCATTER_MAX || op == LATHE_OP_SELECT_AND_SCATTER_MIN) && ty->scatter);
}

/* Builds the per-axis window lists for operand shape xs and window grid odims; *mem owns them. */
static lathe_status_t build_lists(lathe_win_ctx *c, const lathe_node *n, const lathe_shape *xs, const int64_t *odims,
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

/* Whether n's window over operand shape xs is a pooling window -- no padding or dilation, only
 * one axis or two neighbouring axes with a window or stride other than 1, at most
 * LATHE_WIN_POOL_MAX positions -- and if so,
 * c's pooling view of it (kernels.h). */
static bool pool_view(const lathe_node *n, const lathe_shape *xs, lathe_win_ctx *c) {
  const int64_t *wd = lathe_attr_window_dims(n).v, *st = lathe_attr_window_strides(n).v;
  const int64_t *idil = lathe_attr_window_input_dilations(n).v, *wdil = lathe_attr_window_window_dilations(n).v;
  const int64_t *pads = lathe_attr_window_paddings(n).v;
  int first = -1, last = -1;
  for (int d = 0; d < xs->rank; d++) {
    if (pads[2 * d] || pads[2 * d + 1] || idil[d] != 1 || wdil[d] != 1) return false;
    if (wd[d] == 1 && st[d] == 1) continue;
    if (first < 0) first = d;
    last = d;
  }
  if (first < 0 || last - first > 1) return false;
  int h = first, w = last;
  c->outer = c->ch = 1;
  for (int d = 0; d < h; d++) c->outer *= xs->dims[d];
  for (int d = w + 1; d < xs->rank; d++) c->ch *= xs->dims[d];
  c->in_h = xs->dims[h], c->kh = wd[h], c->sh = st[h];
  c->in_w = h == w ? 1 : xs->dims[w], c->kw = h == w ? 1 : wd[w], c->sw = h == w ? 1 : st[w];
  c->out_h = c->in_h < c->kh ? 0 : (c->in_h - c->kh) / c->sh + 1;
  c->out_w = c->in_w < c->kw ? 0 : (c->in_w - c->kw) / c->sw + 1;
  return c->kh * c->kw <= LATHE_WIN_POOL_MAX;
}

/* Grain so a chunk of pooling rows holds ~32K window visits. */
static int64_t pool_grain(const lathe_win_ctx *c) {
  int64_t w = c->out_w * c->ch * c->kh * c->kw;
  return w >= 32768 ? 1 : 32768 / (w > 0 ? w : 1);
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
  const lathe_win_type *ty = win_type_of(lathe_cpu_exec_kernels(ex), xs->dtype);
  if (!ty || !lathe_cpu_supports_window(n->op, xs->dtype))
    return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(xs->dtype));
  lathe_win_ctx c;
  memset(&c, 0, sizeof c);
  int64_t *mem = NULL;
  c.x = in[0]->data;
  if (n->op == LATHE_OP_REDUCE_WINDOW) {
    const lathe_shape *ys = &out[0]->shape;
    int64_t ny = lathe_shape_size(ys);
    if (ny == 0) return NULL;
    c.y = out[0]->data;
    lathe_op red = lathe_attr_window_reduction(n);
    int k = red == LATHE_OP_REDUCE_SUM ? 0 : red == LATHE_OP_REDUCE_PRODUCT ? 1 : red == LATHE_OP_REDUCE_MAX ? 2 : 3;
    if (!ty->rw[k])
      return LATHE_UNIMPL("ReduceWindow: %s over %s is not implemented on lathe:cpu", lathe_op_name(red),
                          lathe_dtype_name(xs->dtype));
    if (k >= 2 && ty->pool_rw[k - 2] && pool_view(n, xs, &c)) {
      lathe_parallel_for(lathe_cpu_exec_pool(ex), c.outer * c.out_h, pool_grain(&c), ty->pool_rw[k - 2], &c);
    } else {
      LATHE_RETURN_IF_ERROR(build_lists(&c, n, xs, ys->dims, &mem));
      lathe_parallel_for(lathe_cpu_exec_pool(ex), ny, grain_for(n, xs->rank), ty->rw[k], &c);
      free(mem);
    }
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
  int which = n->op == LATHE_OP_SELECT_AND_SCATTER_MAX ? 0 : 1;
  bool pool = ty->pool_select[which] && pool_view(n, xs, &c);
  if (pool && c.sh >= c.kh && c.sw >= c.kw && c.outer * c.out_h > 0) {
    /* windows that do not overlap: each operand element receives at most one source value */
    c.y = out[0]->data;
    c.src = in[1]->data;
    lathe_parallel_for(lathe_cpu_exec_pool(ex), c.outer * c.out_h, pool_grain(&c), ty->pool_disjoint[which], &c);
    return NULL;
  }
  int64_t *sel = malloc(sizeof(int64_t) * (size_t)(ns + 1));
  void *acc = calloc((size_t)nx, ty->asize);
  lathe_status_t st = (!sel || !acc) ? LATHE_OOM(lathe_op_name(n->op)) : NULL;
  if (!st && !pool) st = build_lists(&c, n, xs, ss->dims, &mem);
  if (!st) {
    c.sel = sel;
    if (pool)
      lathe_parallel_for(lathe_cpu_exec_pool(ex), c.outer * c.out_h, pool_grain(&c), ty->pool_select[which], &c);
    else
      lathe_parallel_for(lathe_cpu_exec_pool(ex), ns, grain_for(n, xs->rank), ty->select[which], &c);
    ty->scatter(in[1]->data, sel, ns, acc, out[0]->data, nx);
  }
  free(mem);
  free(sel);
  free(acc);
  return st;
}

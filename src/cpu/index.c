/* index.c -- CPU kernels of the INDEX family: Gather, ScatterSum/Max/Min, DynamicSlice,
 * DynamicUpdateSlice. Data movement is by element byte width (any dtype); only the scatter
 * combiners are per dtype, instantiated from the dtype table. Attribute slots are documented in
 * src/graph/ops_index.c. Sub-byte dtypes arrive widened to 8 bits, so only tensor dtypes are
 * used here. */
#include <math.h>

#include "dtype_dispatch.h"

enum { ELEMS_PER_TASK = 32768 }; /* the least work worth a pool task */


/* Copies n bytes; fixed sizes of one element become single moves. */
static inline void copy_bytes(uint8_t *dst, const uint8_t *src, size_t n) {
  switch (n) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    case 16: memcpy(dst, src, 16); break;
    default: memcpy(dst, src, n);
  }
}

/* Sizes that only dynamic axes can get wrong (the build checked every static one). */
static lathe_status_t shape_mismatch(const lathe_node *n, const char *what, int64_t size, const char *where, int axis,
                                     int64_t dim) {
  return LATHE_INVALID("%s: %s %lld against %s %d of size %lld: dynamic axes bound to inconsistent sizes",
                       lathe_op_name(n->op), what, (long long)size, where, axis, (long long)dim);
}

/* ---- a parallel memcpy, for copying an operand into the result ---- */
typedef struct {
  uint8_t *dst;
  const uint8_t *src;
} memcpy_ctx;
enum { COPY_BLOCK = 1 << 20 };

static void memcpy_range(void *vctx, int64_t b, int64_t e) {
  memcpy_ctx *c = vctx;
  memcpy(c->dst + b, c->src + b, (size_t)(e - b));
}

static void par_memcpy(lathe_cpu_exec *ex, void *dst, const void *src, size_t n) {
  if (dst == src || n == 0) return;
  memcpy_ctx c = {dst, src};
  lathe_parallel_for(lathe_cpu_exec_pool(ex), (int64_t)n, COPY_BLOCK, memcpy_range, &c);
}

/* ---- strided box copy (DynamicSlice, DynamicUpdateSlice) ----
 * Copies a box of sizes[rank] elements between two tensors given element strides; the last
 * axis is contiguous in both (row-major tensors), so it moves as one run. Parallel over axis 0. */
typedef struct {
  uint8_t *dst;
  const uint8_t *src;
  int rank;
  size_t esize;
  const int64_t *sizes, *dst_str, *src_str;
} box_ctx;

static void box_range(void *vctx, int64_t begin, int64_t end) {
  const box_ctx *c = vctx;
  int r = c->rank;
  size_t run = (size_t)c->sizes[r - 1] * c->esize;
  int64_t idx[LATHE_MAX_RANK] = {0};
  for (int64_t i0 = begin; i0 < end; i0++) {
    /* odometer over axes 1 .. r-2 (axis r-1 is the run) */
    for (int a = 1; a < r; a++) idx[a] = 0;
    for (;;) {
      int64_t d = i0 * c->dst_str[0], s = i0 * c->src_str[0];
      for (int a = 1; a < r - 1; a++) d += idx[a] * c->dst_str[a], s += idx[a] * c->src_str[a];
      if (r > 1) copy_bytes(c->dst + (size_t)d * c->esize, c->src + (size_t)s * c->esize, run);
      else copy_bytes(c->dst + (size_t)d * c->esize, c->src + (size_t)s * c->esize, c->esize);
      int a = r - 2;
      for (; a >= 1; a--) {
        if (++idx[a] < c->sizes[a]) break;
        idx[a] = 0;
      }
      if (a < 1) break;
    }
  }
}

static void copy_box(lathe_cpu_exec *ex, uint8_t *dst, const int64_t *dst_str, const uint8_t *src,
                     const int64_t *src_str, const int64_t *sizes, int rank, size_t esize) {
  int64_t total = 1;
  for (int a = 0; a < rank; a++) total *= sizes[a];
  if (total == 0) return;
  if (rank == 0) {
    copy_bytes(dst, src, esize);
    return;
  }
  box_ctx c = {dst, src, rank, esize, sizes, dst_str, src_str};
  int64_t per_row = total / sizes[0];
  lathe_parallel_for(lathe_cpu_exec_pool(ex), sizes[0], ELEMS_PER_TASK / per_row + 1, box_range, &c);
}

/* ---- Gather ---- */
typedef struct {
  const uint8_t *src;
  uint8_t *dst;
  size_t esize;
  int rank;                                   /* operand rank */
  int64_t dims[LATHE_MAX_RANK], slice[LATHE_MAX_RANK], src_str[LATHE_MAX_RANK];
  int64_t slice_dst_str[LATHE_MAX_RANK];      /* result stride of each operand axis (0: collapsed) */
  int64_t run;                                /* elements moved per copy along the last axis */
  int nb;                                     /* batch axes */
  int64_t bdims[LATHE_MAX_RANK], b_dst_str[LATHE_MAX_RANK], b_idx_str[LATHE_MAX_RANK];
  const void *idx;
  lathe_dtype idt;
  int nvec;
  int64_t vec_str;
  int64_t map[LATHE_MAX_RANK];
} gather_ctx;

static void gather_range(void *vctx, int64_t begin, int64_t end) {
  const gather_ctx *g = vctx;
  int r = g->rank, inner = g->run > 1 ? r - 1 : r; /* axes [0, inner) are walked one by one */
  size_t run_bytes = (size_t)g->run * g->esize;
  for (int64_t b = begin; b < end; b++) {
    int64_t rem = b, dst0 = 0, idx0 = 0;
    for (int k = g->nb - 1; k >= 0; k--) {
      int64_t c = rem % g->bdims[k];
      rem /= g->bdims[k];
      dst0 += c * g->b_dst_str[k];
      idx0 += c * g->b_idx_str[k];
    }
    int64_t src0 = 0;
    for (int k = 0; k < g->nvec; k++) {
      int64_t a = g->map[k];
      int64_t v = lathe_load_index(g->idx, g->idt, idx0 + k * g->vec_str);
      src0 += lathe_clamp64(v, 0, g->dims[a] - g->slice[a]) * g->src_str[a];
    }
    int64_t pos[LATHE_MAX_RANK] = {0};
    for (;;) {
      int64_t s = src0, d = dst0;
      for (int a = 0; a < inner; a++) s += pos[a] * g->src_str[a], d += pos[a] * g->slice_dst_str[a];
      copy_bytes(g->dst + (size_t)d * g->esize, g->src + (size_t)s * g->esize, run_bytes);
      int a = inner - 1;
      for (; a >= 0; a--) {
        if (++pos[a] < g->slice[a]) break;
        pos[a] = 0;
      }
      if (a < 0) break;
    }
  }
}

static lathe_status_t run_gather(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  const lathe_shape *os = &in[0]->shape, *is = &in[1]->shape, *rs = &out[0]->shape;
  if (lathe_shape_size(rs) == 0) return NULL;
  gather_ctx g;
  memset(&g, 0, sizeof g);
  g.src = in[0]->data;
  g.dst = out[0]->data;
  g.esize = lathe_dd_esize(os->dtype);
  g.rank = os->rank;
  g.idx = in[1]->data;
  g.idt = is->dtype;
  int iva = (int)lathe_attr_gather_index_vector_axis(n);
  lathe_ilist offset = lathe_attr_gather_offset_output_axes(n), coll = lathe_attr_gather_collapsed_slice_axes(n);
  lathe_ilist start_map = lathe_attr_gather_start_index_map(n);
  const int64_t *offset_axes = offset.v, *collapsed = coll.v, *map = start_map.v;
  const int64_t *sizes = lathe_attr_gather_slice_sizes(n).v;
  int n_offset = offset.n, n_collapsed = coll.n;
  g.nvec = start_map.n;
  int64_t rstr[LATHE_MAX_RANK], istr[LATHE_MAX_RANK];
  lathe_shape_strides(os, g.src_str);
  lathe_shape_strides(rs, rstr);
  lathe_shape_strides(is, istr);
  g.vec_str = iva < is->rank ? istr[iva] : 0;
  for (int k = 0; k < g.nvec; k++) g.map[k] = map[k];
  for (int a = 0; a < g.rank; a++) {
    g.dims[a] = os->dims[a];
    g.slice[a] = sizes[a] < 0 ? os->dims[a] : sizes[a];
  }
  /* Result axes: offset ones take the non-collapsed operand axes in order, the rest are batch. */
  bool is_offset[LATHE_MAX_RANK] = {false}, is_collapsed[LATHE_MAX_RANK] = {false};
  for (int i = 0; i < n_offset; i++) is_offset[offset_axes[i]] = true;
  for (int i = 0; i < n_collapsed; i++) is_collapsed[collapsed[i]] = true;
  int next_operand = 0, next_batch = 0;
  for (int axis = 0; axis < rs->rank; axis++) {
    if (is_offset[axis]) {
      while (is_collapsed[next_operand]) next_operand++;
      g.slice_dst_str[next_operand++] = rstr[axis];
    } else {
      if (next_batch == iva) next_batch++;
      g.bdims[g.nb] = rs->dims[axis];
      g.b_dst_str[g.nb] = rstr[axis];
      g.b_idx_str[g.nb] = istr[next_batch];
      g.nb++;
      next_batch++;
    }
  }
  /* The last operand axis moves as one run when it is also the result's innermost axis. */
  g.run = 1;
  if (g.rank > 0 && !is_collapsed[g.rank - 1] && g.slice_dst_str[g.rank - 1] == 1) g.run = g.slice[g.rank - 1];
  /* Build-time checks cannot see dynamic axes; their bound sizes are checked here. */
  for (int a = 0; a < g.rank; a++)
    if (g.slice[a] > g.dims[a]) return shape_mismatch(n, "slice size", g.slice[a], "operand axis", a, g.dims[a]);
  int64_t slice_elems = 1, batch = 1;
  for (int a = 0; a < g.rank; a++) slice_elems *= g.slice[a];
  for (int k = 0; k < g.nb; k++) batch *= g.bdims[k];
  if (slice_elems == 0 || batch == 0) return NULL;
  lathe_parallel_for(lathe_cpu_exec_pool(ex), batch, ELEMS_PER_TASK / slice_elems + 1, gather_range, &g);
  return NULL;
}

/* ---- Scatter combiners, per dtype from the table ----
 * combine(out, out_stride, upd, upd_stride, n): out[i] = op(out[i], upd[i]) for n elements.
 * Integer sums wrap (computed unsigned); float max/min propagate NaN; halves compute in float. */
typedef void (*combine_fn)(uint8_t *out, int64_t os, const uint8_t *upd, int64_t us, int64_t n);

#define COMBINE_LOOP(D, NAME, EXPR)                                                                      \
  static void combine_##NAME##_##D(uint8_t *out, int64_t os, const uint8_t *upd, int64_t us, int64_t n) { \
    for (int64_t i = 0; i < n; i++) {                                                                    \
      LATHE_C(D) a = LATHE_LD(D, out, i * os), b = LATHE_LD(D, upd, i * us);                             \
      LATHE_ST(D, out, i * os, (EXPR));                                                                  \
    }                                                                                                    \
  }
#define COMB_INT(D)                                                 \
  COMBINE_LOOP(D, sum, (LATHE_C(D))((uint64_t)a + (uint64_t)b))     \
  COMBINE_LOOP(D, max, b > a ? b : a)                               \
  COMBINE_LOOP(D, min, b < a ? b : a)
#define COMB_FLOATING(D)                           \
  COMBINE_LOOP(D, sum, a + b)                      \
  COMBINE_LOOP(D, max, b > a || isnan(b) ? b : a)  \
  COMBINE_LOOP(D, min, b < a || isnan(b) ? b : a)
#define COMB_SINT(D) COMB_INT(D)
#define COMB_UINT(D) COMB_INT(D)
#define COMB_FLOAT(D) COMB_FLOATING(D)
#define COMB_HALF(D) COMB_FLOATING(D)
#define COMB_COMPLEX(D) COMBINE_LOOP(D, sum, a + b)
#define COMB_BOOL(D)
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(COMB_##CLASS(ENUM))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

/* The combiner of op for dt, or NULL where the reduction is not meaningful (Bool; Max/Min of
 * complex). */
static combine_fn combiner(lathe_op op, lathe_dtype dt) {
#define ENTRY_ALL(E) \
  case LATHE_DTYPE_##E: return op == LATHE_OP_SCATTER_SUM ? combine_sum_##E : op == LATHE_OP_SCATTER_MAX ? combine_max_##E : combine_min_##E;
#define ENTRY_SINT(E) ENTRY_ALL(E)
#define ENTRY_UINT(E) ENTRY_ALL(E)
#define ENTRY_FLOAT(E) ENTRY_ALL(E)
#define ENTRY_HALF(E) ENTRY_ALL(E)
#define ENTRY_BOOL(E)
#define ENTRY_COMPLEX(E) \
  case LATHE_DTYPE_##E: return op == LATHE_OP_SCATTER_SUM ? combine_sum_##E : NULL;
  switch (dt) {
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(ENTRY_##CLASS(ENUM))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE
    default: return NULL;
  }
}

/* ---- Scatter ----
 * Sequential over index vectors, in order, so duplicates combine deterministically. When a
 * window axis lies on an operand axis that no index addresses, every update writes coordinate
 * c of that axis to coordinate c of the result, so threads split that axis safely. */
typedef struct {
  uint8_t *dst;
  const uint8_t *upd;
  size_t esize;
  combine_fn combine;
  int orank;
  int64_t odims[LATHE_MAX_RANK], ostr[LATHE_MAX_RANK], wsize[LATHE_MAX_RANK]; /* per operand axis */
  int nw;                                                                      /* window axes */
  int64_t w_ostr[LATHE_MAX_RANK], w_ustr[LATHE_MAX_RANK], w_size[LATHE_MAX_RANK];
  int split; /* window axis split among threads, -1: none */
  int nb;
  int64_t bdims[LATHE_MAX_RANK], b_ustr[LATHE_MAX_RANK], b_istr[LATHE_MAX_RANK];
  const void *idx;
  lathe_dtype idt;
  int nvec;
  int64_t vec_str, map[LATHE_MAX_RANK];
  int64_t batch;
} scatter_ctx;

static void scatter_range(void *vctx, int64_t lo_split, int64_t hi_split) {
  const scatter_ctx *s = vctx;
  int64_t lo[LATHE_MAX_RANK], hi[LATHE_MAX_RANK];
  for (int i = 0; i < s->nw; i++) lo[i] = 0, hi[i] = s->w_size[i];
  if (s->split >= 0) lo[s->split] = lo_split, hi[s->split] = hi_split;
  for (int i = 0; i < s->nw; i++)
    if (lo[i] >= hi[i]) return;
  int last = s->nw - 1;
  int64_t run = s->nw ? hi[last] - lo[last] : 1;
  int64_t run_ostr = s->nw ? s->w_ostr[last] : 0, run_ustr = s->nw ? s->w_ustr[last] : 0;
  for (int64_t b = 0; b < s->batch; b++) {
    int64_t rem = b, u0 = 0, i0 = 0;
    for (int k = s->nb - 1; k >= 0; k--) {
      int64_t c = rem % s->bdims[k];
      rem /= s->bdims[k];
      u0 += c * s->b_ustr[k];
      i0 += c * s->b_istr[k];
    }
    int64_t start[LATHE_MAX_RANK] = {0};
    for (int k = 0; k < s->nvec; k++) start[s->map[k]] = lathe_load_index(s->idx, s->idt, i0 + k * s->vec_str);
    /* The whole window must fit, otherwise this update is dropped (XLA). */
    bool fits = true;
    for (int a = 0; a < s->orank; a++) fits &= start[a] >= 0 && start[a] <= s->odims[a] - s->wsize[a];
    if (!fits) continue;
    int64_t o0 = 0;
    for (int a = 0; a < s->orank; a++) o0 += start[a] * s->ostr[a];
    int64_t pos[LATHE_MAX_RANK];
    for (int i = 0; i < s->nw; i++) pos[i] = lo[i];
    for (;;) {
      int64_t o = o0, u = u0;
      for (int i = 0; i < last; i++) o += pos[i] * s->w_ostr[i], u += pos[i] * s->w_ustr[i];
      if (s->nw) o += lo[last] * run_ostr, u += lo[last] * run_ustr;
      s->combine(s->dst + (size_t)o * s->esize, run_ostr, s->upd + (size_t)u * s->esize, run_ustr, run);
      int i = last - 1;
      for (; i >= 0; i--) {
        if (++pos[i] < hi[i]) break;
        pos[i] = lo[i];
      }
      if (i < 0) break;
    }
  }
}

static lathe_status_t run_scatter(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  const lathe_shape *os = &in[0]->shape, *is = &in[1]->shape, *us = &in[2]->shape;
  par_memcpy(ex, out[0]->data, in[0]->data, in[0]->nbytes);
  scatter_ctx s;
  memset(&s, 0, sizeof s);
  s.combine = combiner(n->op, out[0]->shape.dtype);
  if (!s.combine)
    return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(os->dtype));
  s.dst = out[0]->data;
  s.upd = in[2]->data;
  s.esize = lathe_dd_esize(os->dtype);
  s.idx = in[1]->data;
  s.idt = is->dtype;
  s.orank = os->rank;
  int iva = (int)lathe_attr_scatter_index_vector_axis(n);
  lathe_ilist update_window = lathe_attr_scatter_update_window_axes(n);
  lathe_ilist inserted_axes = lathe_attr_scatter_inserted_window_axes(n);
  lathe_ilist to_operand = lathe_attr_scatter_scatter_axes_to_operand_axes(n);
  const int64_t *uwa = update_window.v, *iwa = inserted_axes.v, *map = to_operand.v;
  s.nw = update_window.n;
  int n_inserted = inserted_axes.n;
  s.nvec = to_operand.n;
  int64_t ustr[LATHE_MAX_RANK], istr[LATHE_MAX_RANK];
  lathe_shape_strides(os, s.ostr);
  lathe_shape_strides(us, ustr);
  lathe_shape_strides(is, istr);
  s.vec_str = iva < is->rank ? istr[iva] : 0;
  bool indexed[LATHE_MAX_RANK] = {false}, inserted[LATHE_MAX_RANK] = {false}, window[LATHE_MAX_RANK] = {false};
  for (int k = 0; k < s.nvec; k++) s.map[k] = map[k], indexed[map[k]] = true;
  for (int i = 0; i < n_inserted; i++) inserted[iwa[i]] = true;
  for (int a = 0; a < s.orank; a++) s.odims[a] = os->dims[a], s.wsize[a] = 1;
  int64_t window_elems = 1;
  s.split = -1;
  for (int i = 0, oa = 0; i < s.nw; i++, oa++) {
    while (inserted[oa]) oa++;
    window[uwa[i]] = true;
    s.w_size[i] = us->dims[uwa[i]];
    s.w_ustr[i] = ustr[uwa[i]];
    s.w_ostr[i] = s.ostr[oa];
    s.wsize[oa] = s.w_size[i];
    if (s.w_size[i] > s.odims[oa]) return shape_mismatch(n, "update window", s.w_size[i], "operand axis", oa, s.odims[oa]);
    window_elems *= s.w_size[i];
    if (!indexed[oa] && s.w_size[i] > 1 && (s.split < 0 || s.w_size[i] > s.w_size[s.split])) s.split = i;
  }
  s.batch = 1;
  for (int ua = 0, ib = 0; ua < us->rank; ua++) {
    if (window[ua]) continue;
    if (ib == iva) ib++;
    if (us->dims[ua] != is->dims[ib]) return shape_mismatch(n, "updates batch axis", us->dims[ua], "indices axis", ib, is->dims[ib]);
    s.bdims[s.nb] = us->dims[ua];
    s.b_ustr[s.nb] = ustr[ua];
    s.b_istr[s.nb] = istr[ib];
    s.batch *= us->dims[ua];
    s.nb++, ib++;
  }
  if (s.batch == 0 || window_elems == 0 || lathe_shape_size(os) == 0) return NULL;
  if (s.split >= 0) {
    int64_t per = s.batch * (window_elems / s.w_size[s.split]);
    lathe_parallel_for(lathe_cpu_exec_pool(ex), s.w_size[s.split], ELEMS_PER_TASK / per + 1, scatter_range, &s);
  } else {
    scatter_range(&s, 0, 0);
  }
  return NULL;
}

/* ---- DynamicSlice / DynamicUpdateSlice ---- */
static lathe_status_t fits(const lathe_node *n, const lathe_shape *part, const lathe_shape *os) {
  for (int a = 0; a < os->rank; a++)
    if (part->dims[a] > os->dims[a]) return shape_mismatch(n, "size", part->dims[a], "operand axis", a, os->dims[a]);
  return NULL;
}

/* Starts come as one scalar per axis or as one vector of them (the builder checked which). */
static void clamped_starts(lathe_tensor *const *starts, const lathe_shape *os, const int64_t *sizes, int64_t *out) {
  bool vector = os->rank > 0 && starts[0]->shape.rank == 1;
  for (int a = 0; a < os->rank; a++) {
    const lathe_tensor *t = vector ? starts[0] : starts[a];
    out[a] = lathe_clamp64(lathe_load_index(t->data, t->shape.dtype, vector ? a : 0), 0, os->dims[a] - sizes[a]);
  }
}

static lathe_status_t run_dynamic_slice(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                        lathe_tensor **out) {
  const lathe_shape *os = &in[0]->shape, *rs = &out[0]->shape;
  LATHE_RETURN_IF_ERROR(fits(n, rs, os));
  int64_t start[LATHE_MAX_RANK], ostr[LATHE_MAX_RANK], rstr[LATHE_MAX_RANK];
  clamped_starts(in + 1, os, rs->dims, start);
  lathe_shape_strides(os, ostr);
  lathe_shape_strides(rs, rstr);
  size_t esize = lathe_dd_esize(os->dtype);
  int64_t off = 0;
  for (int a = 0; a < os->rank; a++) off += start[a] * ostr[a];
  copy_box(ex, out[0]->data, rstr, (const uint8_t *)in[0]->data + (size_t)off * esize, ostr, rs->dims, os->rank, esize);
  return NULL;
}

static lathe_status_t run_dynamic_update_slice(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                               lathe_tensor **out) {
  const lathe_shape *os = &in[0]->shape, *us = &in[1]->shape;
  LATHE_RETURN_IF_ERROR(fits(n, us, os));
  par_memcpy(ex, out[0]->data, in[0]->data, in[0]->nbytes);
  int64_t start[LATHE_MAX_RANK], ostr[LATHE_MAX_RANK], ustr[LATHE_MAX_RANK];
  clamped_starts(in + 2, os, us->dims, start);
  lathe_shape_strides(os, ostr);
  lathe_shape_strides(us, ustr);
  size_t esize = lathe_dd_esize(os->dtype);
  int64_t off = 0;
  for (int a = 0; a < os->rank; a++) off += start[a] * ostr[a];
  copy_box(ex, (uint8_t *)out[0]->data + (size_t)off * esize, ostr, in[1]->data, ustr, us->dims, os->rank, esize);
  return NULL;
}

/* ---- family entry points ---- */
bool lathe_cpu_supports_index(lathe_op op, lathe_dtype dtype) {
  if (!lathe_dtype_is_valid(dtype)) return false;
  switch (op) {
    case LATHE_OP_GATHER:
    case LATHE_OP_DYNAMIC_SLICE:
    case LATHE_OP_DYNAMIC_UPDATE_SLICE:
      return true;
    case LATHE_OP_SCATTER_SUM:
    case LATHE_OP_SCATTER_MAX:
    case LATHE_OP_SCATTER_MIN:
      return combiner(op, lathe_dtype_widened(dtype)) != NULL;
    default:
      return false;
  }
}

lathe_status_t lathe_cpu_run_index(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  switch (n->op) {
    case LATHE_OP_GATHER: return run_gather(ex, n, in, out);
    case LATHE_OP_SCATTER_SUM:
    case LATHE_OP_SCATTER_MAX:
    case LATHE_OP_SCATTER_MIN: return run_scatter(ex, n, in, out);
    case LATHE_OP_DYNAMIC_SLICE: return run_dynamic_slice(ex, n, in, out);
    case LATHE_OP_DYNAMIC_UPDATE_SLICE: return run_dynamic_update_slice(ex, n, in, out);
    default: return LATHE_UNIMPL("%s: not an index op", lathe_op_name(n->op));
  }
}

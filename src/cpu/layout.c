/* layout.c -- the LAYOUT family on the CPU: Reshape, Transpose, BroadcastInDim, Concatenate,
 * Slice, Pad and Reverse.
 *
 * Every op but Reshape is one or more strided copies: an output box of dims, written with
 * destination strides, read with source strides that may be 0 (broadcast), scaled (slice) or
 * negative (reverse). One engine does them all by element width (1, 2, 4, 8 or 16 bytes), so
 * every dtype is covered: the interpreter widens sub-byte integers to bytes first. The engine
 * collapses axes that are contiguous on both sides, copies contiguous rows with memcpy, fills
 * broadcast rows, and transposes in cache-sized tiles when the source is contiguous along the
 * destination's second-to-last axis. */
#include "cpu.h"

typedef struct copy_job {
  int rank;
  int64_t dims[LATHE_MAX_RANK];
  int64_t ss[LATHE_MAX_RANK]; /* source strides (elements; may be 0 or negative) */
  int64_t ds[LATHE_MAX_RANK]; /* destination strides (elements) */
  const unsigned char *src;   /* element (0, ..., 0) */
  unsigned char *dst;
  size_t esz;
  int outer; /* axes [0, outer) are walked row by row; the rest is one row (or one tile plane) */
  bool tiled;
} copy_job;

typedef struct { uint64_t lo, hi; } u128;

/* A strided run of n elements of width W. */
#define RUN(W, T)                                                                          \
  static void run_##W(unsigned char *d, int64_t dst_st, const unsigned char *s, int64_t src_st, int64_t n) { \
    T *dp = (T *)d;                                                                        \
    const T *sp = (const T *)s;                                                            \
    if (src_st == 0) {                                                                     \
      T v = *sp;                                                                           \
      for (int64_t i = 0; i < n; i++) dp[i * dst_st] = v;                                  \
    } else {                                                                               \
      for (int64_t i = 0; i < n; i++) dp[i * dst_st] = sp[i * src_st];                      \
    }                                                                                      \
  }                                                                                        \
  /* The plane [n0, n1] where source axis 0 is contiguous: tiles keep both sides in cache. */ \
  static void tile_##W(unsigned char *d, int64_t d0, const unsigned char *s, int64_t s1, int64_t n0, int64_t n1) { \
    T *dp = (T *)d;                                                                        \
    const T *sp = (const T *)s;                                                            \
    enum { B = 32 };                                                                       \
    for (int64_t i0 = 0; i0 < n0; i0 += B)                                                 \
      for (int64_t i1 = 0; i1 < n1; i1 += B) {                                             \
        int64_t e0 = i0 + B < n0 ? i0 + B : n0, e1 = i1 + B < n1 ? i1 + B : n1;           \
        for (int64_t a = i0; a < e0; a++)                                                  \
          for (int64_t b = i1; b < e1; b++) dp[a * d0 + b] = sp[a + b * s1];                \
      }                                                                                    \
  }
RUN(1, uint8_t)
RUN(2, uint16_t)
RUN(4, uint32_t)
RUN(8, uint64_t)
RUN(16, u128)

static void run_row(const copy_job *j, unsigned char *d, const unsigned char *s) {
  int r = j->rank - 1;
  int64_t n = j->dims[r], dst_st = j->ds[r], src_st = j->ss[r];
  if (dst_st == 1 && src_st == 1) {
    memcpy(d, s, (size_t)n * j->esz);
    return;
  }
  switch (j->esz) {
    case 1: run_1(d, dst_st, s, src_st, n); break;
    case 2: run_2(d, dst_st, s, src_st, n); break;
    case 4: run_4(d, dst_st, s, src_st, n); break;
    case 8: run_8(d, dst_st, s, src_st, n); break;
    default: run_16(d, dst_st, s, src_st, n); break;
  }
}

static void run_tile(const copy_job *j, unsigned char *d, const unsigned char *s, int64_t n0) {
  int r = j->rank - 1;
  int64_t n1 = j->dims[r], d0 = j->ds[r - 1], s1 = j->ss[r];
  switch (j->esz) {
    case 1: tile_1(d, d0, s, s1, n0, n1); break;
    case 2: tile_2(d, d0, s, s1, n0, n1); break;
    case 4: tile_4(d, d0, s, s1, n0, n1); break;
    case 8: tile_8(d, d0, s, s1, n0, n1); break;
    default: tile_16(d, d0, s, s1, n0, n1); break;
  }
}

/* Rows [lo, hi) of the outer axes, in row-major order. A tiled copy splits each plane further
 * into bands of TILE_BAND along its first axis, so that a single plane still spreads over threads. */
enum { TILE_BAND = 64 };

static void copy_chunk(void *ctx, int64_t lo, int64_t hi) {
  const copy_job *j = ctx;
  int64_t bands = 1, n0 = 0;
  if (j->tiled) {
    n0 = j->dims[j->rank - 2];
    bands = (n0 + TILE_BAND - 1) / TILE_BAND;
  }
  int64_t idx[LATHE_MAX_RANK];
  int64_t so = 0, dof = 0, rem = lo / bands, band = lo % bands;
  for (int a = j->outer - 1; a >= 0; a--) {
    idx[a] = rem % j->dims[a];
    rem /= j->dims[a];
    so += idx[a] * j->ss[a];
    dof += idx[a] * j->ds[a];
  }
  for (int64_t row = lo; row < hi;) {
    const unsigned char *s = j->src + so * (int64_t)j->esz;
    unsigned char *d = j->dst + dof * (int64_t)j->esz;
    if (j->tiled) {
      /* band [b0, b1) of the plane: rows of the destination's second-to-last axis */
      int r = j->rank;
      int64_t b0 = band * TILE_BAND, b1 = b0 + TILE_BAND < n0 ? b0 + TILE_BAND : n0;
      run_tile(j, d + b0 * j->ds[r - 2] * (int64_t)j->esz, s + b0 * j->ss[r - 2] * (int64_t)j->esz, b1 - b0);
      row++;
      if (++band < bands) continue;
      band = 0;
    } else {
      run_row(j, d, s);
      row++;
    }
    for (int a = j->outer - 1; a >= 0; a--) {
      so += j->ss[a], dof += j->ds[a];
      if (++idx[a] < j->dims[a]) break;
      so -= j->dims[a] * j->ss[a], dof -= j->dims[a] * j->ds[a];
      idx[a] = 0;
    }
  }
}

/* A plain copy in blocks of COPY_BLOCK bytes, split over the pool from 4 blocks up. */
enum { COPY_BLOCK = 64 << 10 };
typedef struct bytes_job {
  const void *src;
  void *dst;
  size_t n;
} bytes_job;

static void copy_bytes(void *vj, int64_t b0, int64_t b1) {
  const bytes_job *j = vj;
  size_t o = (size_t)b0 * COPY_BLOCK, e = (size_t)b1 * COPY_BLOCK < j->n ? (size_t)b1 * COPY_BLOCK : j->n;
  memcpy((char *)j->dst + o, (const char *)j->src + o, e - o);
}

/* Simplifies and runs the copy described by j's rank/dims/strides. */
static void strided_copy(lathe_cpu_exec *ex, copy_job *j) {
  int r = 0;
  for (int a = 0; a < j->rank; a++) {
    if (j->dims[a] == 0) return;
    if (j->dims[a] == 1) continue;
    /* merge into the previous axis when contiguous on both sides */
    if (r && j->ss[r - 1] == j->ss[a] * j->dims[a] && j->ds[r - 1] == j->ds[a] * j->dims[a]) {
      j->dims[r - 1] *= j->dims[a];
      j->ss[r - 1] = j->ss[a];
      j->ds[r - 1] = j->ds[a];
      continue;
    }
    j->dims[r] = j->dims[a], j->ss[r] = j->ss[a], j->ds[r] = j->ds[a];
    r++;
  }
  if (r == 0) { /* one element */
    j->dims[0] = 1, j->ss[0] = 0, j->ds[0] = 1;
    r = 1;
  }
  j->rank = r;
  if (r == 1 && j->ss[0] == 1 && j->ds[0] == 1) { /* one contiguous run (an identity Transpose, say) */
    bytes_job bj = {j->src, j->dst, (size_t)j->dims[0] * j->esz};
    lathe_parallel_for(lathe_cpu_exec_pool(ex), (int64_t)((bj.n + COPY_BLOCK - 1) / COPY_BLOCK), 4, copy_bytes, &bj);
    return;
  }
  /* A transpose of the last two axes: the destination is contiguous along the last axis and
   * the source along the one before it. */
  j->tiled = r >= 2 && j->ds[r - 1] == 1 && j->ss[r - 2] == 1 && j->ss[r - 1] != 1 && j->dims[r - 1] >= 8 &&
             j->dims[r - 2] >= 8;
  j->outer = r - (j->tiled ? 2 : 1);
  int64_t rows = 1, per_row = j->dims[r - 1];
  for (int a = 0; a < j->outer; a++) rows *= j->dims[a];
  if (j->tiled) {
    rows *= (j->dims[r - 2] + TILE_BAND - 1) / TILE_BAND;
    per_row *= TILE_BAND;
  }
  lathe_parallel_for(lathe_cpu_exec_pool(ex), rows, 32768 / per_row + 1, copy_chunk, j);
}

static size_t elem_size(const lathe_tensor *t) { return (size_t)lathe_dtype_bits(t->shape.dtype) / 8; }

/* ---- the ops ---- */
static void run_transpose(lathe_cpu_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *out) {
  copy_job j = {.rank = out->shape.rank, .src = x->data, .dst = out->data, .esz = elem_size(x)};
  int64_t xs[LATHE_MAX_RANK];
  lathe_shape_strides(&x->shape, xs);
  lathe_shape_strides(&out->shape, j.ds);
  const int64_t *perm = lathe_attr_transpose_permutation(n).v;
  for (int a = 0; a < j.rank; a++) {
    j.dims[a] = out->shape.dims[a];
    j.ss[a] = xs[perm[a]];
  }
  strided_copy(ex, &j);
}

static void run_broadcast(lathe_cpu_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *out) {
  copy_job j = {.rank = out->shape.rank, .src = x->data, .dst = out->data, .esz = elem_size(x)};
  int64_t xs[LATHE_MAX_RANK];
  lathe_shape_strides(&x->shape, xs);
  lathe_shape_strides(&out->shape, j.ds);
  for (int a = 0; a < j.rank; a++) j.dims[a] = out->shape.dims[a], j.ss[a] = 0;
  const int64_t *axes = lathe_attr_broadcast_in_dim_axes(n).v;
  for (int i = 0; i < x->shape.rank; i++)
    if (x->shape.dims[i] != 1) j.ss[axes[i]] = xs[i];
  strided_copy(ex, &j);
}

static void run_slice(lathe_cpu_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *out) {
  copy_job j = {.rank = out->shape.rank, .dst = out->data, .esz = elem_size(x)};
  int64_t xs[LATHE_MAX_RANK], base = 0;
  lathe_shape_strides(&x->shape, xs);
  lathe_shape_strides(&out->shape, j.ds);
  if (lathe_shape_size(&out->shape) == 0) return;
  /* Non-empty: every start is below its dim, and a stride matters (it is below the dim) only
   * where more than one element is taken, so none of these products can overflow. */
  const int64_t *starts = lathe_attr_slice_starts(n).v, *strides = lathe_attr_slice_strides(n).v;
  for (int a = 0; a < j.rank; a++) {
    j.dims[a] = out->shape.dims[a];
    j.ss[a] = j.dims[a] > 1 ? xs[a] * strides[a] : 0;
    base += starts[a] * xs[a];
  }
  j.src = (const unsigned char *)x->data + base * (int64_t)j.esz;
  strided_copy(ex, &j);
}

static void run_reverse(lathe_cpu_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *out) {
  copy_job j = {.rank = out->shape.rank, .dst = out->data, .esz = elem_size(x)};
  int64_t base = 0;
  lathe_shape_strides(&x->shape, j.ss);
  lathe_shape_strides(&out->shape, j.ds);
  for (int a = 0; a < j.rank; a++) j.dims[a] = out->shape.dims[a];
  if (lathe_shape_size(&out->shape) == 0) return;
  lathe_ilist axes = lathe_attr_reverse_axes(n);
  for (int i = 0; i < axes.n; i++) {
    int a = (int)axes.v[i];
    base += (j.dims[a] - 1) * j.ss[a];
    j.ss[a] = -j.ss[a];
  }
  j.src = (const unsigned char *)x->data + base * (int64_t)j.esz;
  strided_copy(ex, &j);
}

/* A dynamic axis may meet a static one at build time: the sizes must agree once bound. */
static lathe_status_t check_concatenate(const lathe_node *n, lathe_tensor *const *in, const lathe_tensor *out, int axis) {
  int64_t along = 0;
  for (int k = 0; k < n->n_operands; k++) {
    const lathe_shape *s = &in[k]->shape;
    for (int d = 0; d < s->rank; d++)
      if (d != axis && s->dims[d] != out->shape.dims[d])
        return LATHE_INVALID("Concatenate: operand %d has size %lld on axis %d, the result %lld: dynamic axes bound to "
                             "inconsistent sizes", k, (long long)s->dims[d], d, (long long)out->shape.dims[d]);
    along += s->rank ? s->dims[axis] : 0;
  }
  if (out->shape.rank && along != out->shape.dims[axis])
    return LATHE_INVALID("Concatenate: the operands add up to %lld on axis %d, the result has %lld", (long long)along,
                         axis, (long long)out->shape.dims[axis]);
  return NULL;
}

static void run_concatenate(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor *out) {
  int axis = (int)lathe_attr_concatenate_axis(n);
  int64_t os[LATHE_MAX_RANK], offset = 0;
  lathe_shape_strides(&out->shape, os);
  for (int k = 0; k < n->n_operands; k++) {
    const lathe_tensor *x = in[k];
    copy_job j = {.rank = x->shape.rank, .src = x->data, .esz = elem_size(x)};
    lathe_shape_strides(&x->shape, j.ss);
    memcpy(j.ds, os, sizeof os);
    for (int a = 0; a < j.rank; a++) j.dims[a] = x->shape.dims[a];
    j.dst = (unsigned char *)out->data + (j.rank ? offset * os[axis] : 0) * (int64_t)j.esz;
    if (j.rank) offset += x->shape.dims[axis];
    if (lathe_shape_size(&x->shape)) strided_copy(ex, &j);
  }
}

static void run_pad(lathe_cpu_exec *ex, const lathe_node *n, const lathe_tensor *x, const lathe_tensor *fill,
                    lathe_tensor *out) {
  int rank = out->shape.rank;
  size_t esz = elem_size(x);
  /* the fill everywhere: a broadcast of the scalar */
  copy_job f = {.rank = rank, .src = fill->data, .dst = out->data, .esz = esz};
  lathe_shape_strides(&out->shape, f.ds);
  for (int a = 0; a < rank; a++) f.dims[a] = out->shape.dims[a], f.ss[a] = 0;
  strided_copy(ex, &f);
  /* then the operand's elements that land inside: x[i] goes to lo + i*(interior+1) */
  copy_job j = {.rank = rank, .esz = esz};
  int64_t xs[LATHE_MAX_RANK], os[LATHE_MAX_RANK], sb = 0, db = 0;
  lathe_shape_strides(&x->shape, xs);
  lathe_shape_strides(&out->shape, os);
  const int64_t *start = lathe_attr_pad_start(n).v, *interior = lathe_attr_pad_interior(n).v;
  for (int a = 0; a < rank; a++) {
    int64_t lo = start[a], step = interior[a] + 1, d = x->shape.dims[a], od = out->shape.dims[a];
    int64_t first = lo >= 0 ? 0 : (-lo + step - 1) / step; /* first i with lo + i*step >= 0 */
    int64_t end = od - 1 - lo < 0 ? 0 : (od - 1 - lo) / step + 1; /* past the last i with lo + i*step < od */
    if (end > d) end = d;
    if (first >= end) return;
    j.dims[a] = end - first;
    j.ss[a] = xs[a];
    j.ds[a] = j.dims[a] > 1 ? os[a] * step : 0; /* a huge interior only ever pads a single element */
    sb += first * xs[a];
    db += (lo + first * step) * os[a];
  }
  j.src = (const unsigned char *)x->data + sb * (int64_t)esz;
  j.dst = (unsigned char *)out->data + db * (int64_t)esz;
  strided_copy(ex, &j);
}

bool lathe_cpu_supports_layout(lathe_op op, lathe_dtype dtype) {
  return lathe_op_kind_of(op) == LATHE_KIND_LAYOUT && lathe_dtype_is_valid(dtype);
}

lathe_status_t lathe_cpu_run_layout(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  lathe_tensor *o = out[0];
  switch (n->op) {
    case LATHE_OP_RESHAPE:
      if (o->nbytes != in[0]->nbytes) /* the builder makes this impossible; a copy must never overrun */
        return lathe_status_new(LATHE_STATUS_INTERNAL, "Reshape: %zu bytes into %zu", in[0]->nbytes, o->nbytes);
      /* the memory plan lets a Reshape take its dying operand's bytes: then nothing moves */
      if (o->nbytes && o->data != in[0]->data) {
        bytes_job bj = {in[0]->data, o->data, o->nbytes};
        lathe_parallel_for(lathe_cpu_exec_pool(ex), (int64_t)((o->nbytes + COPY_BLOCK - 1) / COPY_BLOCK), 4, copy_bytes, &bj);
      }
      return NULL;
    case LATHE_OP_TRANSPOSE: run_transpose(ex, n, in[0], o); return NULL;
    case LATHE_OP_BROADCAST_IN_DIM: run_broadcast(ex, n, in[0], o); return NULL;
    case LATHE_OP_CONCATENATE:
      LATHE_RETURN_IF_ERROR(check_concatenate(n, in, o, (int)n->a.i[0]));
      run_concatenate(ex, n, in, o);
      return NULL;
    case LATHE_OP_SLICE: run_slice(ex, n, in[0], o); return NULL;
    case LATHE_OP_PAD: run_pad(ex, n, in[0], in[1], o); return NULL;
    case LATHE_OP_REVERSE: run_reverse(ex, n, in[0], o); return NULL;
    default: return LATHE_UNIMPL("%s: not a layout op", lathe_op_name(n->op));
  }
}

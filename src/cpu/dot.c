/* dot.c -- DotGeneral on the CPU.
 *
 * Each operand is seen as [B, R, K] (batch, cross, contracting axes, each group in the order
 * the node gives; cross axes in increasing order), which makes the result a row-major
 * [B, M, N]. Products accumulate in the node's accumulator dtype (attribute i[0]):
 *  - Float32/Float64/Complex64/Complex128 accumulators (and Float16/BFloat16 ones, which
 *    accumulate in float) go to BLAS gemm. An operand is passed as it lies when its dtype is
 *    the accumulator's and its cross and contracting axes each merge into one stride with one
 *    of them unit; otherwise it is packed (transposed and converted) into [B, R, K].
 *  - Integer accumulators use lathe's own loops on packed [B, M, K] x [B, N, K] in unsigned
 *    arithmetic of the accumulator's width or more, which wraps like Go (signed overflow in C
 *    would be undefined behaviour); results are truncated to the accumulator's width.
 * Values reach the accumulator dtype, and the result the output dtype, by ConvertDType itself
 * (lathe_cpu_convert_fn: ints wrap, floats to ints truncate and saturate, NaN to 0, ...).
 * Threads: the lathe pool runs gemm tasks (batches, or row/column panels of one big product),
 * packing rows and output conversion; OpenBLAS itself is single-threaded (blas.c says why). */
#include "blas.h"
#include "gemm.h"
#include "elementwise.h"
#include "../graph/graph.h"

/* ---- compute types: what packed operands and partial results are held in ---- */
typedef enum ctype { CT_U32, CT_U64, CT_F32, CT_F64, CT_C64, CT_C128 } ctype;
static const size_t ct_size[] = {4, 8, 4, 8, 8, 16};
/* The dtype BLAS computes a float ctype in (INVALID: no BLAS). */
static const lathe_dtype ct_blas[] = {LATHE_DTYPE_INVALID, LATHE_DTYPE_INVALID, LATHE_DTYPE_FLOAT32,
                                      LATHE_DTYPE_FLOAT64, LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128};
/* The dtype a ctype stores exactly (integers as their unsigned bits). */
static const lathe_dtype ct_dtype[] = {LATHE_DTYPE_UINT32, LATHE_DTYPE_UINT64, LATHE_DTYPE_FLOAT32,
                                       LATHE_DTYPE_FLOAT64, LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128};

static ctype ctype_of(lathe_dtype acc) {
  switch (lathe_dtype_class_of(acc)) {
    case LATHE_CLASS_SINT:
    case LATHE_CLASS_UINT: return lathe_dtype_bits(acc) > 32 ? CT_U64 : CT_U32;
    case LATHE_CLASS_COMPLEX: return acc == LATHE_DTYPE_COMPLEX128 ? CT_C128 : CT_C64;
    default: return acc == LATHE_DTYPE_FLOAT64 ? CT_F64 : CT_F32;
  }
}

/* Whether values of dtype dt are stored exactly as ctype ct stores them (same bits). */
static bool same_storage(lathe_dtype dt, ctype ct) {
  switch (ct) {
    case CT_U32: return dt == LATHE_DTYPE_INT32 || dt == LATHE_DTYPE_UINT32;
    case CT_U64: return dt == LATHE_DTYPE_INT64 || dt == LATHE_DTYPE_UINT64;
    default: return dt == ct_blas[ct];
  }
}

/* Converts n elements through dtypes path[0] -> path[1] -> ... -> path[n_path - 1] with
 * ConvertDType's semantics, skipping steps between equal dtypes; in and out may not overlap.
 * obits: the final dtype's true width. Works in chunks through stack buffers. */
enum { CV_CHUNK = 256, CV_MAX_ES = 16 };
static void convert_path(const lathe_dtype *path, int n_path, const void *in, void *out, int64_t n, int obits) {
  lathe_dtype step[3];
  int n_step = 0;
  for (int k = 0; k < n_path; k++)
    if (!n_step || step[n_step - 1] != path[k]) step[n_step++] = path[k];
  if (n_step == 1) {
    memcpy(out, in, (size_t)n * lathe_dd_esize(step[0]));
    return;
  }
  size_t in_es = lathe_dd_esize(step[0]), out_es = lathe_dd_esize(step[n_step - 1]);
  for (int64_t off = 0; off < n; off += CV_CHUNK) {
    int64_t m = n - off < CV_CHUNK ? n - off : CV_CHUNK;
    _Alignas(16) unsigned char tmp[2][CV_CHUNK * CV_MAX_ES];
    const void *src = (const char *)in + (size_t)off * in_es;
    for (int k = 1; k < n_step; k++) {
      bool last = k == n_step - 1;
      void *dst = last ? (void *)((char *)out + (size_t)off * out_es) : (void *)tmp[k & 1];
      lathe_cpu_convert_fn(step[k - 1], step[k])(src, dst, m, lathe_dtype_bits(step[k - 1]),
                                                 last ? obits : lathe_dtype_bits(step[k]));
      src = dst;
    }
  }
}

/* ---- operands as [B, R, K] views ---- */
typedef struct operand {
  const lathe_tensor *t;
  int64_t B, R, K;
  int64_t *boff, *roff, *koff; /* element offsets of each batch, cross and contracting index */
  bool r_merged, k_merged;     /* the cross / contracting axes are one strided axis */
  int64_t rs, ks;              /* their strides when merged (0 for a group of size <= 1) */
  /* what the product reads: the tensor itself or a packed [B, R, K] copy in the ctype */
  const void *base;
  int64_t *use_boff;
  int64_t use_rs; /* stride between cross indices (rows of the matrix) */
  void *pack;
  int64_t *pack_boff;
} operand;

/* Offsets of every index of a group of axes, outermost axis first. */
static void group_offsets(const int64_t *dims, const int64_t *strides, int n, int64_t count, int64_t *out) {
  int64_t idx[LATHE_MAX_RANK] = {0}, off = 0;
  for (int64_t c = 0; c < count; c++) {
    out[c] = off;
    for (int a = n - 1; a >= 0; a--) {
      off += strides[a];
      if (++idx[a] < dims[a]) break;
      off -= strides[a] * dims[a];
      idx[a] = 0;
    }
  }
}

/* Whether a group of axes walks memory with one stride (size-1 axes do not matter). */
static bool group_merge(const int64_t *dims, const int64_t *strides, int n, int64_t *stride) {
  int64_t inner_stride = 0, inner_dim = 0;
  bool any = false;
  for (int a = n - 1; a >= 0; a--) {
    if (dims[a] == 1) continue;
    if (any && strides[a] != inner_stride * inner_dim) return false;
    if (!any) *stride = strides[a];
    any = true;
    inner_stride = strides[a], inner_dim = dims[a];
  }
  if (!any) *stride = 0;
  return true;
}

static void operand_free(operand *o) {
  free(o->boff);
  free(o->roff);
  free(o->koff);
  free(o->pack_boff);
  lathe_aligned_free(o->pack);
}

static lathe_status_t operand_init(operand *o, const lathe_tensor *t, const int64_t *contr, int n_c, const int64_t *batch,
                                   int n_b) {
  const lathe_shape *s = &t->shape;
  int64_t st[LATHE_MAX_RANK];
  lathe_shape_strides(s, st);
  int64_t gd[3][LATHE_MAX_RANK], gs[3][LATHE_MAX_RANK]; /* groups: batch, cross, contracting */
  int gn[3] = {0, 0, 0};
  bool used[LATHE_MAX_RANK] = {0};
  for (int i = 0; i < n_b; i++) used[batch[i]] = true, gd[0][gn[0]] = s->dims[batch[i]], gs[0][gn[0]++] = st[batch[i]];
  for (int i = 0; i < n_c; i++) used[contr[i]] = true, gd[2][gn[2]] = s->dims[contr[i]], gs[2][gn[2]++] = st[contr[i]];
  for (int a = 0; a < s->rank; a++)
    if (!used[a]) gd[1][gn[1]] = s->dims[a], gs[1][gn[1]++] = st[a];
  int64_t size[3];
  for (int g = 0; g < 3; g++) {
    size[g] = 1;
    for (int i = 0; i < gn[g]; i++) size[g] *= gd[g][i];
  }
  *o = (operand){.t = t, .B = size[0], .R = size[1], .K = size[2]};
  o->boff = malloc(sizeof(int64_t) * (size_t)(size[0] ? size[0] : 1));
  o->roff = malloc(sizeof(int64_t) * (size_t)(size[1] ? size[1] : 1));
  o->koff = malloc(sizeof(int64_t) * (size_t)(size[2] ? size[2] : 1));
  if (!o->boff || !o->roff || !o->koff) return LATHE_OOM("DotGeneral");
  group_offsets(gd[0], gs[0], gn[0], size[0], o->boff);
  group_offsets(gd[1], gs[1], gn[1], size[1], o->roff);
  group_offsets(gd[2], gs[2], gn[2], size[2], o->koff);
  o->r_merged = group_merge(gd[1], gs[1], gn[1], &o->rs);
  o->k_merged = group_merge(gd[2], gs[2], gn[2], &o->ks);
  return NULL;
}

/* ---- packing into [B, R, K] of the compute type ---- */
typedef struct pack_ctx {
  const operand *o;
  lathe_dtype src, acc;
  ctype ct;
  void *dst;
} pack_ctx;

/* Fast conversions of one row for the common cases; false when the generic path must run. */
#define INT_ROW(T)                                                                     \
  do {                                                                                 \
    const T *x = (const T *)src + base;                                                \
    if (ct == CT_U32)                                                                  \
      for (int64_t k = 0; k < K; k++) ((uint32_t *)d)[k] = (uint32_t)x[koff[k]];       \
    else                                                                               \
      for (int64_t k = 0; k < K; k++) ((uint64_t *)d)[k] = (uint64_t)x[koff[k]];       \
  } while (0)
#define REAL_ROW(T)                                                                    \
  do {                                                                                 \
    const T *x = (const T *)src + base;                                                \
    if (ct == CT_F32)                                                                  \
      for (int64_t k = 0; k < K; k++) ((float *)d)[k] = (float)x[koff[k]];             \
    else                                                                               \
      for (int64_t k = 0; k < K; k++) ((double *)d)[k] = (double)x[koff[k]];           \
  } while (0)

static bool fast_row(lathe_dtype sdt, lathe_dtype acc, ctype ct, const void *src, int64_t base,
                     const int64_t *koff, int64_t K, void *d) {
  /* Integer accumulators: the result is reduced modulo 2^(accumulator bits) at the end, so any
   * integer operand may enter by plain two's complement truncation. */
  if (ct == CT_U32 || ct == CT_U64) {
    switch (sdt) {
      case LATHE_DTYPE_INT8: INT_ROW(int8_t); return true;
      case LATHE_DTYPE_INT16: INT_ROW(int16_t); return true;
      case LATHE_DTYPE_INT32: INT_ROW(int32_t); return true;
      case LATHE_DTYPE_INT64: INT_ROW(int64_t); return true;
      case LATHE_DTYPE_UINT8: INT_ROW(uint8_t); return true;
      case LATHE_DTYPE_UINT16: INT_ROW(uint16_t); return true;
      case LATHE_DTYPE_UINT32: INT_ROW(uint32_t); return true;
      case LATHE_DTYPE_UINT64: INT_ROW(uint64_t); return true;
      default: return false;
    }
  }
  if ((ct != CT_F32 && ct != CT_F64) || acc != ct_blas[ct]) return false; /* half accumulators round */
  const uint16_t *h = (const uint16_t *)src + base;
  switch (sdt) {
    case LATHE_DTYPE_FLOAT32: REAL_ROW(float); return true;
    case LATHE_DTYPE_FLOAT64: REAL_ROW(double); return true;
    case LATHE_DTYPE_FLOAT16:
      if (ct != CT_F32) return false;
      for (int64_t k = 0; k < K; k++) ((float *)d)[k] = lathe_f16_to_f32(h[koff[k]]);
      return true;
    case LATHE_DTYPE_BFLOAT16:
      if (ct != CT_F32) return false;
      for (int64_t k = 0; k < K; k++) ((float *)d)[k] = lathe_bf16_to_f32(h[koff[k]]);
      return true;
    default: return false;
  }
}

static void pack_rows(void *vc, int64_t r0, int64_t r1) {
  const pack_ctx *c = vc;
  const operand *o = c->o;
  const char *src = o->t->data;
  size_t es = ct_size[c->ct];
  bool raw = c->src == c->acc && same_storage(c->src, c->ct); /* bits copy as they are */
  size_t ses = lathe_dd_esize(c->src);
  /* ConvertDType to the accumulator, then (exactly) to the compute type */
  lathe_dtype path[3] = {c->src, c->acc, ct_dtype[c->ct]};
  for (int64_t row = r0; row < r1; row++) {
    int64_t base = o->boff[row / o->R] + o->roff[row % o->R];
    char *d = (char *)c->dst + (size_t)(row * o->K) * es;
    if (raw) {
      if (o->k_merged && (o->ks == 1 || o->K <= 1)) {
        memcpy(d, src + (size_t)base * es, (size_t)o->K * es);
        continue;
      }
      for (int64_t k = 0; k < o->K; k++) memcpy(d + (size_t)k * es, src + (size_t)(base + o->koff[k]) * es, es);
      continue;
    }
    if (fast_row(c->src, c->acc, c->ct, src, base, o->koff, o->K, d)) continue;
    _Alignas(16) unsigned char row_src[CV_CHUNK * CV_MAX_ES];
    for (int64_t k0 = 0; k0 < o->K; k0 += CV_CHUNK) {
      int64_t m = o->K - k0 < CV_CHUNK ? o->K - k0 : CV_CHUNK;
      for (int64_t k = 0; k < m; k++) memcpy(row_src + k * ses, src + (size_t)(base + o->koff[k0 + k]) * ses, ses);
      convert_path(path, 3, row_src, d + (size_t)k0 * es, m, lathe_dtype_bits(path[2]));
    }
  }
}

static lathe_status_t pack(operand *o, lathe_dtype acc, ctype ct, lathe_pool *pool) {
  int64_t rows = o->B * o->R;
  o->pack = lathe_aligned_alloc((size_t)(rows * o->K) * ct_size[ct]);
  o->pack_boff = malloc(sizeof(int64_t) * (size_t)o->B);
  if (!o->pack || !o->pack_boff) return LATHE_OOM("DotGeneral");
  pack_ctx c = {.o = o, .src = o->t->shape.dtype, .acc = acc, .ct = ct, .dst = o->pack};
  lathe_parallel_for(pool, rows, 1 + 32768 / (o->K ? o->K : 1), pack_rows, &c);
  for (int64_t b = 0; b < o->B; b++) o->pack_boff[b] = b * o->R * o->K;
  o->base = o->pack;
  o->use_boff = o->pack_boff;
  o->use_rs = o->K;
  return NULL;
}

static void use_in_place(operand *o) {
  o->base = o->t->data;
  o->use_boff = o->boff;
  o->use_rs = o->rs;
}

/* ---- BLAS path ---- */
typedef struct gemm_ctx {
  lathe_dtype dt;
  size_t es;
  const operand *a, *b;
  int64_t M, N, K, mb, nb, mt, nt;
  lathe_blas_mat am, bm;
  char *c;
} gemm_ctx;

static void gemm_tasks(void *vc, int64_t t0, int64_t t1) {
  const gemm_ctx *g = vc;
  for (int64_t t = t0; t < t1; t++) {
    int64_t b = t / (g->mt * g->nt), mi = t / g->nt % g->mt, ni = t % g->nt;
    int64_t m0 = mi * g->mb, n0 = ni * g->nb;
    int64_t m = g->M - m0 < g->mb ? g->M - m0 : g->mb, n = g->N - n0 < g->nb ? g->N - n0 : g->nb;
    const char *a = (const char *)g->a->base + (size_t)(g->a->use_boff[b] + m0 * g->a->use_rs) * g->es;
    const char *bb = (const char *)g->b->base + (size_t)(g->b->use_boff[b] + n0 * g->b->use_rs) * g->es;
    char *c = g->c + (size_t)((b * g->M + m0) * g->N + n0) * g->es;
    lathe_blas_gemm(g->dt, m, n, g->K, a, g->am, bb, g->bm, c, g->N);
  }
}

/* Splits the B products into about two tasks per thread: whole matrices when there are enough
 * batches, else row (or column) panels of the larger side. Small products run inline. */
static void run_gemm(lathe_pool *pool, gemm_ctx *g, int64_t B) {
  int64_t threads = lathe_pool_threads(pool);
  double work = (double)B * (double)g->M * (double)g->N * (double)g->K;
  g->mb = g->M, g->nb = g->N;
  if (threads > 1 && work >= (double)(1 << 20) && B < 2 * threads) {
    int64_t need = (2 * threads + B - 1) / B;
    if (g->M >= g->N) {
      int64_t mb = (g->M + need - 1) / need;
      g->mb = mb < 16 ? 16 : (mb + 7) / 8 * 8;
    } else {
      int64_t nb = (g->N + need - 1) / need;
      g->nb = nb < 16 ? 16 : (nb + 7) / 8 * 8;
    }
  }
  g->mt = (g->M + g->mb - 1) / g->mb;
  g->nt = (g->N + g->nb - 1) / g->nb;
  int64_t tasks = B * g->mt * g->nt;
  if (work < (double)(1 << 20)) gemm_tasks(g, 0, tasks);
  else lathe_parallel_for(pool, tasks, 1, gemm_tasks, g);
}

/* ---- lathe's loops: integer accumulators, and floats where BLAS is off or its int arguments
 * would overflow ---- */
typedef struct loop_ctx {
  const operand *a, *b; /* contiguous [B, M, K] and [B, N, K] */
  int64_t M, N, K, nb;
  void *c;
} loop_ctx;

#define MAC_REAL(s, x, y) (s) += (x) * (y)
#define MAC_CPLX(s, x, y)                   \
  do {                                      \
    (s).re += (x).re * (y).re - (x).im * (y).im; \
    (s).im += (x).re * (y).im + (x).im * (y).re; \
  } while (0)

/* Rows [r0, r1) of the flattened [B*M, N] result; columns in blocks of nb so a block of rhs rows
 * stays in cache while the lhs rows go by, and four columns at a time so each lhs element is
 * loaded once for four independent sums. */
#define DOT_LOOP(NAME, T, ZERO, MAC)                                                  \
  static void NAME(void *vc, int64_t r0, int64_t r1) {                                \
    const loop_ctx *c = vc;                                                           \
    const T *A = c->a->base, *Bm = c->b->base;                                        \
    T *C = c->c;                                                                      \
    int64_t M = c->M, N = c->N, K = c->K;                                             \
    for (int64_t n0 = 0; n0 < N; n0 += c->nb) {                                       \
      int64_t n1 = n0 + c->nb < N ? n0 + c->nb : N;                                   \
      for (int64_t row = r0; row < r1; row++) {                                       \
        const T *a = A + row * K, *bb = Bm + (row / M) * N * K;                       \
        int64_t j = n0;                                                               \
        for (; j + 4 <= n1; j += 4) {                                                 \
          const T *b0 = bb + j * K, *b1 = b0 + K, *b2 = b1 + K, *b3 = b2 + K;         \
          T s0 = ZERO, s1 = ZERO, s2 = ZERO, s3 = ZERO;                               \
          for (int64_t k = 0; k < K; k++) {                                           \
            MAC(s0, a[k], b0[k]);                                                     \
            MAC(s1, a[k], b1[k]);                                                     \
            MAC(s2, a[k], b2[k]);                                                     \
            MAC(s3, a[k], b3[k]);                                                     \
          }                                                                           \
          C[row * N + j] = s0, C[row * N + j + 1] = s1;                               \
          C[row * N + j + 2] = s2, C[row * N + j + 3] = s3;                           \
        }                                                                             \
        for (; j < n1; j++) {                                                         \
          const T *bj = bb + j * K;                                                   \
          T s = ZERO;                                                                 \
          for (int64_t k = 0; k < K; k++) MAC(s, a[k], bj[k]);                        \
          C[row * N + j] = s;                                                         \
        }                                                                             \
      }                                                                               \
    }                                                                                 \
  }
DOT_LOOP(loop_u32, uint32_t, 0, MAC_REAL)
DOT_LOOP(loop_u64, uint64_t, 0, MAC_REAL)
DOT_LOOP(loop_f32, float, 0, MAC_REAL)
DOT_LOOP(loop_f64, double, 0, MAC_REAL)
DOT_LOOP(loop_c64, lathe_c64, ((lathe_c64){0, 0}), MAC_CPLX)
DOT_LOOP(loop_c128, lathe_c128, ((lathe_c128){0, 0}), MAC_CPLX)
static const lathe_range_fn loops[] = {loop_u32, loop_u64, loop_f32, loop_f64, loop_c64, loop_c128};

/* ---- converting the accumulated result to the output dtype ---- */
typedef struct finish_ctx {
  ctype ct;
  lathe_dtype acc, out;
  int obits; /* the output's true width (sub-byte outputs arrive widened) */
  const void *src;
  void *dst;
} finish_ctx;

static void finish_range(void *vc, int64_t i0, int64_t i1) {
  const finish_ctx *c = vc;
  if (c->ct == CT_F32 && c->acc == LATHE_DTYPE_FLOAT32) { /* the usual half-precision output */
    const float *x = c->src;
    uint16_t *h = c->dst;
    if (c->out == LATHE_DTYPE_FLOAT16 || c->out == LATHE_DTYPE_BFLOAT16) {
      lathe_f32_to_halves(c->out, x + i0, h + i0, i1 - i0);
      return;
    }
  }
  lathe_dtype path[3] = {ct_dtype[c->ct], c->acc, c->out};
  size_t ies = ct_size[c->ct], oes = lathe_dd_esize(c->out);
  convert_path(path, 3, (const char *)c->src + (size_t)i0 * ies, (char *)c->dst + (size_t)i0 * oes, i1 - i0, c->obits);
}

/* ---- the family ---- */
bool lathe_cpu_supports_dot(lathe_op op, lathe_dtype dtype) {
  return op == LATHE_OP_DOT_GENERAL && lathe_dtype_is_valid(dtype) && dtype != LATHE_DTYPE_BOOL;
}

/* Whether o can be read in place by the product (BLAS with trans flags, or the loops'
 * contiguous [B, R, K]). */
static bool usable(const operand *o, lathe_dtype acc, ctype ct, bool blas, bool is_lhs, lathe_blas_mat *m) {
  if (o->t->shape.dtype != acc || !same_storage(acc, ct) || !o->r_merged || !o->k_merged) return false;
  if (blas)
    return is_lhs ? lathe_blas_layout(o->R, o->K, o->rs, o->ks, m) : lathe_blas_layout(o->K, o->R, o->ks, o->rs, m);
  if ((o->K > 1 && o->ks != 1) || (o->R > 1 && o->rs != o->K)) return false;
  for (int64_t b = 0; b < o->B; b++)
    if (o->boff[b] != b * o->R * o->K) return false;
  return true;
}

/* Makes o readable by the loops: in place when already contiguous [B, R, K] of the ctype. */
static lathe_status_t prepare_loop(operand *o, lathe_dtype acc, ctype ct, lathe_pool *pool) {
  if (o->pack) return NULL;
  if (usable(o, acc, ct, false, false, NULL)) {
    use_in_place(o);
    return NULL;
  }
  return pack(o, acc, ct, pool);
}

/* ---- lathe's own kernels (gemm.c): any strides, one product threaded as a whole. Float32, or
 * BFloat16 operands read as they lie, products summed in Float32 (vdpbf16ps) ---- */
typedef struct own_ctx {
  const operand *l, *r;
  int64_t M, N, K;
  bool bf16;
  float *c;
  atomic_int oom;
} own_ctx;

static int64_t own_ks(const operand *o) { return o->pack ? 1 : o->ks; }

static lathe_status_t own_one(const own_ctx *g, lathe_pool *pool, int64_t b) {
  const operand *l = g->l, *r = g->r;
  float *c = g->c + b * g->M * g->N;
  if (g->bf16)
    return lathe_gemm_bf16(pool, g->M, g->N, g->K, (const uint16_t *)l->base + l->use_boff[b], l->use_rs, own_ks(l),
                           (const uint16_t *)r->base + r->use_boff[b], own_ks(r), r->use_rs, c, g->N);
  return lathe_gemm_f32(pool, g->M, g->N, g->K, (const float *)l->base + l->use_boff[b], l->use_rs, own_ks(l),
                        (const float *)r->base + r->use_boff[b], own_ks(r), r->use_rs, c, g->N);
}

static void own_batches(void *vc, int64_t b0, int64_t b1) {
  own_ctx *g = vc;
  for (int64_t b = b0; b < b1; b++) {
    lathe_status_t st = own_one(g, NULL, b);
    if (st) atomic_store(&g->oom, 1), lathe_status_free(st);
  }
}

/* bf16: both operands are BFloat16 with merged axes, read in place. */
static lathe_status_t own_product(lathe_pool *pool, operand *l, operand *r, lathe_dtype acc, bool bf16, float *c) {
  int64_t B = l->B;
  /* in place only what is stored as the kernel reads it: Float32 (a Float16 operand with a
   * Float16 accumulator is packed, widened, like any other) */
  bool f32 = acc == LATHE_DTYPE_FLOAT32;
  if (bf16 || (f32 && l->t->shape.dtype == acc && l->r_merged && l->k_merged)) use_in_place(l);
  else LATHE_RETURN_IF_ERROR(pack(l, acc, CT_F32, pool));
  if (bf16 || (f32 && r->t->shape.dtype == acc && r->r_merged && r->k_merged)) use_in_place(r);
  else LATHE_RETURN_IF_ERROR(pack(r, acc, CT_F32, pool));
  own_ctx g = {.l = l, .r = r, .M = l->R, .N = r->R, .K = l->K, .bf16 = bf16, .c = c};
  atomic_init(&g.oom, 0);
  double work = (double)g.M * (double)g.N * (double)g.K;
  int64_t threads = lathe_pool_threads(pool);
  if (B > 1 && (B >= 2 * threads || work < (double)(1 << 21))) {
    /* many (or small) products: one per task, each on one thread */
    int64_t grain = work >= (double)(1 << 18) ? 1 : (int64_t)((1 << 18) / (work + 1)) + 1;
    lathe_parallel_for(pool, B, grain, own_batches, &g);
    return atomic_load(&g.oom) ? LATHE_OOM("DotGeneral") : NULL;
  }
  for (int64_t b = 0; b < B; b++) LATHE_RETURN_IF_ERROR(own_one(&g, pool, b));
  return NULL;
}

static lathe_status_t product(lathe_pool *pool, operand *l, operand *r, lathe_dtype acc, ctype ct, void *c) {
  int64_t B = l->B, M = l->R, N = r->R, K = l->K;
  if (ct == CT_F32 && acc == LATHE_DTYPE_FLOAT32 && l->t->shape.dtype == LATHE_DTYPE_BFLOAT16 &&
      r->t->shape.dtype == LATHE_DTYPE_BFLOAT16 && l->r_merged && l->k_merged && r->r_merged && r->k_merged &&
      lathe_blas_has(LATHE_DTYPE_FLOAT32) && lathe_gemm_bf16_available())
    return own_product(pool, l, r, acc, true, c);
  if (ct == CT_F32 && lathe_blas_has(LATHE_DTYPE_FLOAT32) && lathe_blas_own_f32())
    return own_product(pool, l, r, acc, false, c);
  lathe_dtype bdt = ct_blas[ct];
  lathe_blas_mat am, bm;
  if (bdt != LATHE_DTYPE_INVALID && lathe_blas_has(bdt)) {
    if (usable(l, acc, ct, true, true, &am)) {
      use_in_place(l);
    } else {
      LATHE_RETURN_IF_ERROR(pack(l, acc, ct, pool));
      lathe_blas_layout(M, K, K, 1, &am);
    }
    if (usable(r, acc, ct, true, false, &bm)) {
      use_in_place(r);
    } else {
      LATHE_RETURN_IF_ERROR(pack(r, acc, ct, pool));
      lathe_blas_layout(K, N, 1, K, &bm);
    }
    if (lathe_blas_fits(M, N, K, am, bm, N)) {
      gemm_ctx g = {.dt = bdt, .es = ct_size[ct], .a = l, .b = r, .M = M, .N = N, .K = K, .am = am, .bm = bm, .c = c};
      run_gemm(pool, &g, B);
      return NULL;
    }
    /* sizes beyond BLAS's int arguments: lathe's loops below */
  }
  LATHE_RETURN_IF_ERROR(prepare_loop(l, acc, ct, pool));
  LATHE_RETURN_IF_ERROR(prepare_loop(r, acc, ct, pool));
  int64_t nb = (int64_t)(131072 / ct_size[ct]) / K;
  loop_ctx lc = {.a = l, .b = r, .M = M, .N = N, .K = K, .nb = nb < 8 ? 8 : nb, .c = c};
  lathe_parallel_for(pool, B * M, 1 + 32768 / (N * K), loops[ct], &lc);
  return NULL;
}

lathe_status_t lathe_cpu_run_dot(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  lathe_tensor *o = out[0];
  lathe_dtype acc = lathe_attr_dot_general_accumulator(n), odt = o->shape.dtype;
  lathe_ilist lc = lathe_attr_dot_general_lhs_contracting(n), lb = lathe_attr_dot_general_lhs_batch(n);
  lathe_ilist rc = lathe_attr_dot_general_rhs_contracting(n), rb = lathe_attr_dot_general_rhs_batch(n);
  /* the interpreter widens sub-byte tensors, and the builder rejects sub-byte accumulators */
  if (!lathe_cpu_convert_fn(in[0]->shape.dtype, acc) || !lathe_cpu_convert_fn(acc, odt))
    return lathe_status_new(LATHE_STATUS_INTERNAL, "DotGeneral: no conversion from %s through %s to %s",
                            lathe_dtype_name(in[0]->shape.dtype), lathe_dtype_name(acc), lathe_dtype_name(odt));
  operand l, r;
  memset(&r, 0, sizeof r);
  lathe_status_t st = operand_init(&l, in[0], lc.v, lc.n, lb.v, lb.n);
  if (!st) st = operand_init(&r, in[1], rc.v, rc.n, rb.v, rb.n);
  /* A dynamic axis may pair with a static one at build time: sizes meet here, once bound. */
  if (!st && (l.B != r.B || l.K != r.K || l.B * l.R * r.R != lathe_shape_size(&o->shape)))
    st = LATHE_INVALID("DotGeneral: batch sizes %lld and %lld, contracting sizes %lld and %lld: dynamic axes bound to "
                       "inconsistent sizes", (long long)l.B, (long long)r.B, (long long)l.K, (long long)r.K);
  int64_t total = st ? 0 : l.B * l.R * r.R;
  if (st || total == 0) goto done;
  if (l.K == 0) { /* empty sums: zero, which is all-zero bits in every dtype */
    memset(o->data, 0, o->nbytes);
    goto done;
  }
  ctype ct = ctype_of(acc);
  lathe_pool *pool = lathe_cpu_exec_pool(ex);
  if (odt == acc && same_storage(acc, ct)) {
    st = product(pool, &l, &r, acc, ct, o->data);
    goto done;
  }
  void *c = lathe_aligned_alloc((size_t)total * ct_size[ct]);
  if (!c) {
    st = LATHE_OOM("DotGeneral");
    goto done;
  }
  st = product(pool, &l, &r, acc, ct, c);
  if (!st) {
    finish_ctx f = {.ct = ct, .acc = acc, .out = odt, .obits = lathe_dtype_bits(n->shape.dtype), .src = c, .dst = o->data};
    lathe_parallel_for(pool, total, 32768, finish_range, &f);
  }
  lathe_aligned_free(c);
done:
  operand_free(&l);
  operand_free(&r);
  return st;
}

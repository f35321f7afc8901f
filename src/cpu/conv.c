/* conv.c -- ConvGeneral on the CPU, for every layout, group kind and dilation, by im2col + GEMM.
 *
 * For one group g (channel group or batch group) and one tile of rows -- (output batch, output
 * spatial position) pairs, batch-major -- the input patches are gathered into col[tile][K] (K = kernel input
 * channels x kernel spatial size, order (kernel position, channel)), converted to the compute
 * type; then tile_out[tile][OCg] = col x Wg^T with Wg[OCg][K] the group's kernel rows, packed
 * once per run in the same order; tile_out is scattered into the output's layout. Compute
 * types: float for Float32/Float16/BFloat16 (sgemm), double for Float64 (dgemm), and for
 * integers int64 with wrapping arithmetic, which equals arithmetic wrapping in the dtype.
 * Tasks (b, g, tile) run on the pool; each chunk of tasks owns its scratch.
 *
 * Padding and input-dilation holes contribute nothing, even under a NaN or infinite kernel value
 * (as XLA computes it). im2col puts zeros there, and 0 * Inf is NaN; so when the convolution has
 * holes and the packed kernel holds a non-finite value, each NaN output (the only ones a hole can
 * have spoilt) is summed again directly, skipping the holes. Finite kernels take none of this. */
#include <math.h>

#include "blas.h"
#include "dtype_dispatch.h"
#include "gemm.h"

typedef struct conv_ctx conv_ctx;

/* Per-dtype routines. gemm: c[m][n] = a[m][k] . w[n][k]^T in the compute type. */
typedef struct conv_type {
  size_t csize; /* bytes of one compute-type value */
  void (*pack)(const conv_ctx *c, const void *kernel, void *wpack, int64_t o0, int64_t o1); /* rows [o0, o1) */
  void (*im2col)(const conv_ctx *c, int64_t in_base, int64_t s0, int64_t s1, void *col);
  void (*gemm)(int64_t m, int64_t n, int64_t k, const void *a, const void *w, void *out);
  void (*scatter)(const conv_ctx *c, int64_t out_base, int64_t s0, int64_t s1, const void *tile);
  void (*fix_holes)(const conv_ctx *c); /* floats: the NaN outputs again, holes skipped (NULL: integers) */
} conv_type;

struct conv_ctx {
  const conv_type *ty;
  int ns;                                      /* spatial rank */
  int64_t ob, oc, ocg, groups, kic, ks, K, S;  /* sizes (see the file comment) */
  int64_t ts, ntiles;                          /* tile of output spatial positions */
  bool batch_groups, channel_groups;
  int64_t osp[LATHE_MAX_RANK], ksp[LATHE_MAX_RANK];       /* output / kernel spatial dims */
  int64_t in_sb, in_sc;                                   /* input batch / channel strides */
  int64_t k_so, k_si, k_ssp[LATHE_MAX_RANK];              /* kernel strides */
  int64_t out_sb, out_sc, out_ssp[LATHE_MAX_RANK];        /* output strides */
  const int64_t *tbl[LATHE_MAX_RANK]; /* per spatial axis, [out index][kernel index]: input offset or -1 */
  const void *in;
  void *out;
  const void *wpack;
  atomic_int oom;
};

/* ---- GEMMs per compute type ---- */
#define NAIVE_GEMM(NAME, C, ACC, MUL)                                                               \
  static void NAME(int64_t m, int64_t n, int64_t k, const void *va, const void *vw, void *vo) {     \
    const C *a = va, *w = vw;                                                                       \
    C *o = vo;                                                                                      \
    for (int64_t i = 0; i < m; i++)                                                                 \
      for (int64_t j = 0; j < n; j++) {                                                             \
        ACC acc = 0;                                                                                \
        for (int64_t q = 0; q < k; q++) acc += MUL(a[i * k + q], w[j * k + q]);                     \
        o[i * n + j] = (C)acc;                                                                      \
      }                                                                                             \
  }
#define MUL_PLAIN(x, y) ((x) * (y))
#define MUL_WRAP(x, y) ((uint64_t)(x) * (uint64_t)(y)) /* wraps like the dtype; no signed overflow */
NAIVE_GEMM(gemm_naive_float, float, float, MUL_PLAIN)
NAIVE_GEMM(gemm_naive_double, double, double, MUL_PLAIN)
NAIVE_GEMM(gemm_int64_t, int64_t, uint64_t, MUL_WRAP)

/* BLAS GEMM (single-threaded per call; the pool runs tasks in parallel) with a plain fallback. */
#define BLAS_GEMM(NAME, C, DT)                                                                        \
  static void NAME(int64_t m, int64_t n, int64_t k, const void *a, const void *w, void *o) {         \
    lathe_blas_mat am = {.trans = false, .ld = k}, wm = {.trans = true, .ld = k};                     \
    if (k == 0)                                                                                       \
      memset(o, 0, sizeof(C) * (size_t)(m * n));                                                      \
    else if (lathe_blas_fits(m, n, k, am, wm, n))                                                     \
      lathe_blas_gemm(DT, m, n, k, a, am, w, wm, o, n);                                               \
    else                                                                                              \
      gemm_naive_##C(m, n, k, a, w, o);                                                               \
  }
BLAS_GEMM(gemm_float, float, LATHE_DTYPE_FLOAT32)
BLAS_GEMM(gemm_double, double, LATHE_DTYPE_FLOAT64)

/* ---- per-dtype pack / im2col / scatter ---- */
#define CONV_INST(ENUM, C, FIX)                                                                     \
  static void pack_##ENUM(const conv_ctx *c, const void *vk, void *vw, int64_t o0, int64_t o1) {     \
    const void *ker = vk;                                                                                \
    C *w = vw;                                                                                        \
    for (int64_t o = o0; o < o1; o++) {                                                               \
      int64_t kx[LATHE_MAX_RANK] = {0};                                                               \
      for (int64_t k = 0; k < c->ks; k++) {                                                           \
        int64_t off = o * c->k_so;                                                                    \
        for (int d = 0; d < c->ns; d++) off += kx[d] * c->k_ssp[d];                                   \
        C *dst = w + o * c->K + k * c->kic;                                                           \
        for (int64_t ch = 0; ch < c->kic; ch++) dst[ch] = (C)LATHE_LD(ENUM, ker, off + ch * c->k_si);         \
        lathe_odometer(kx, c->ksp, c->ns);                                                            \
      }                                                                                               \
    }                                                                                                 \
  }                                                                                                   \
  static void im2col_##ENUM(const conv_ctx *c, int64_t in_base, int64_t s0, int64_t s1, void *vcol) { \
    const LATHE_S(ENUM) *in = (const LATHE_S(ENUM) *)c->in + in_base;                                                         \
    C *col = vcol;                                                                                    \
    int64_t o[LATHE_MAX_RANK];                                                                        \
    const int64_t *tb[LATHE_MAX_RANK];                                                                \
    lathe_unflatten(s0, c->osp, c->ns, o);                                                            \
    for (int64_t s = s0; s < s1; s++) {                                                               \
      for (int d = 0; d < c->ns; d++) tb[d] = c->tbl[d] + o[d] * c->ksp[d];                           \
      int64_t kx[LATHE_MAX_RANK] = {0};                                                               \
      C *row = col + (s - s0) * c->K;                                                                 \
      for (int64_t k = 0; k < c->ks; k++) {                                                           \
        int64_t off = 0;                                                                              \
        int d = 0;                                                                                    \
        for (; d < c->ns; d++) {                                                                      \
          int64_t v = tb[d][kx[d]];                                                                   \
          if (v < 0) break;                                                                           \
          off += v;                                                                                   \
        }                                                                                             \
        C *dst = row + k * c->kic;                                                                    \
        if (d < c->ns) {                                                                              \
          for (int64_t ch = 0; ch < c->kic; ch++) dst[ch] = 0;                                        \
        } else if (c->in_sc == 1) {                                                                   \
          for (int64_t ch = 0; ch < c->kic; ch++) dst[ch] = (C)LATHE_LD(ENUM, in, off + ch);                  \
        } else {                                                                                      \
          for (int64_t ch = 0; ch < c->kic; ch++) dst[ch] = (C)LATHE_LD(ENUM, in, off + ch * c->in_sc);       \
        }                                                                                             \
        lathe_odometer(kx, c->ksp, c->ns);                                                            \
      }                                                                                               \
      lathe_odometer(o, c->osp, c->ns);                                                               \
    }                                                                                                 \
  }                                                                                                   \
  static void scatter_##ENUM(const conv_ctx *c, int64_t out_base, int64_t s0, int64_t s1, const void *vt) { \
    LATHE_S(ENUM) *out = (LATHE_S(ENUM) *)c->out + out_base;                                                                  \
    const C *tile = vt;                                                                               \
    int64_t o[LATHE_MAX_RANK];                                                                        \
    lathe_unflatten(s0, c->osp, c->ns, o);                                                            \
    for (int64_t s = s0; s < s1; s++) {                                                               \
      int64_t off = 0;                                                                                \
      for (int d = 0; d < c->ns; d++) off += o[d] * c->out_ssp[d];                                    \
      const C *src = tile + (s - s0) * c->ocg;                                                        \
      LATHE_S(ENUM) *dst = out + off;                                                                             \
      if (c->out_sc == 1)                                                                             \
        for (int64_t j = 0; j < c->ocg; j++) LATHE_ST(ENUM, dst, j, (LATHE_C(ENUM))src[j]);                              \
      else                                                                                            \
        for (int64_t j = 0; j < c->ocg; j++) LATHE_ST(ENUM, dst, j * c->out_sc, (LATHE_C(ENUM))src[j]);                  \
      lathe_odometer(o, c->osp, c->ns);                                                               \
    }                                                                                                 \
  }                                                                                                   \
  static const conv_type conv_##ENUM = {sizeof(C), pack_##ENUM, im2col_##ENUM, gemm_##C, scatter_##ENUM, FIX};

/* The outputs that are NaN, summed again in the compute type without the holes (in the order of
 * the naive gemm), when the packed kernel has a non-finite value. */
#define CONV_FIX(ENUM, C)                                                                           \
  static void fix_##ENUM(const conv_ctx *c) {                                                       \
    const C *w = c->wpack;                                                                          \
    int64_t nw = c->oc * c->K, q = 0;                                                               \
    while (q < nw && isfinite(w[q])) q++;                                                           \
    if (q == nw) return;                                                                            \
    for (int64_t g = 0; g < c->groups; g++)                                                         \
      for (int64_t b = 0; b < c->ob; b++) {                                                         \
        int64_t in_b = c->batch_groups ? g * c->ob + b : b;                                         \
        int64_t in_base = in_b * c->in_sb + (c->channel_groups ? g * c->kic * c->in_sc : 0);        \
        int64_t o[LATHE_MAX_RANK] = {0};                                                            \
        for (int64_t s = 0; s < c->S; s++) {                                                        \
          int64_t oo = b * c->out_sb + g * c->ocg * c->out_sc;                                      \
          for (int d = 0; d < c->ns; d++) oo += o[d] * c->out_ssp[d];                               \
          for (int64_t j = 0; j < c->ocg; j++) {                                                    \
            if (!isnan((C)LATHE_LD(ENUM, c->out, oo + j * c->out_sc))) continue;                    \
            const C *wr = w + (g * c->ocg + j) * c->K;                                              \
            C acc = 0;                                                                              \
            int64_t kx[LATHE_MAX_RANK] = {0};                                                       \
            for (int64_t k = 0; k < c->ks; k++) {                                                   \
              int64_t off = in_base;                                                                \
              int d = 0;                                                                            \
              for (; d < c->ns; d++) {                                                              \
                int64_t v = c->tbl[d][o[d] * c->ksp[d] + kx[d]];                                    \
                if (v < 0) break;                                                                   \
                off += v;                                                                           \
              }                                                                                     \
              if (d == c->ns)                                                                       \
                for (int64_t ch = 0; ch < c->kic; ch++)                                             \
                  acc += (C)LATHE_LD(ENUM, c->in, off + ch * c->in_sc) * wr[k * c->kic + ch];       \
              lathe_odometer(kx, c->ksp, c->ns);                                                    \
            }                                                                                       \
            LATHE_ST(ENUM, c->out, oo + j * c->out_sc, (LATHE_C(ENUM))acc);                         \
          }                                                                                         \
          lathe_odometer(o, c->osp, c->ns);                                                         \
        }                                                                                           \
      }                                                                                             \
  }

/* Instances from the dtype table: real numbers (sub-byte integers arrive widened to Int8/Uint8;
 * Bool and complex have no convolution). */
#define CONV_BOOL(ENUM, ct)
#define CONV_COMPLEX(ENUM, ct)
#define CONV_FLOAT(ENUM, ct) CONV_FIX(ENUM, ct) CONV_INST(ENUM, ct, fix_##ENUM)
#define CONV_HALF(ENUM, ct) CONV_FIX(ENUM, float) CONV_INST(ENUM, float, fix_##ENUM)
#define CONV_SINT(ENUM, ct) CONV_INST(ENUM, int64_t, NULL)
#define CONV_UINT(ENUM, ct) CONV_INST(ENUM, int64_t, NULL)
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(CONV_##CLASS(ENUM, ct))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

static const conv_type *conv_type_of(lathe_dtype dt) {
  switch (dt) {
#define CASE_NONE(ENUM)
#define CASE_BOOL CASE_NONE
#define CASE_COMPLEX CASE_NONE
#define CASE_YES(ENUM) case LATHE_DTYPE_##ENUM: return &conv_##ENUM;
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

bool lathe_cpu_supports_conv(lathe_op op, lathe_dtype dtype) {
  return op == LATHE_OP_CONV_GENERAL && conv_type_of(dtype) != NULL;
}

static void conv_tasks(void *vctx, int64_t begin, int64_t end) {
  conv_ctx *c = vctx;
  size_t cs = c->ty->csize;
  void *col = malloc(cs * (size_t)(c->ts * c->K) + 1), *tile = malloc(cs * (size_t)(c->ts * c->ocg) + 1);
  if (!col || !tile) {
    atomic_store(&c->oom, 1);
    free(col);
    free(tile);
    return;
  }
  int64_t rows = c->ob * c->S;
  for (int64_t t = begin; t < end; t++) {
    /* a tile of rows (batch, output position) of group g, across batches when they are small */
    int64_t g = t / c->ntiles, r0 = t % c->ntiles * c->ts, r1 = r0 + c->ts < rows ? r0 + c->ts : rows;
    for (int64_t r = r0; r < r1;) {
      int64_t b = r / c->S, s0 = r % c->S, s1 = c->S - s0 < r1 - r ? c->S : s0 + (r1 - r);
      int64_t in_b = c->batch_groups ? g * c->ob + b : b;
      int64_t in_base = in_b * c->in_sb + (c->channel_groups ? g * c->kic * c->in_sc : 0);
      c->ty->im2col(c, in_base, s0, s1, (char *)col + cs * (size_t)((r - r0) * c->K));
      r += s1 - s0;
    }
    c->ty->gemm(r1 - r0, c->ocg, c->K, col, (const char *)c->wpack + cs * (size_t)(g * c->ocg * c->K), tile);
    for (int64_t r = r0; r < r1;) {
      int64_t b = r / c->S, s0 = r % c->S, s1 = c->S - s0 < r1 - r ? c->S : s0 + (r1 - r);
      c->ty->scatter(c, b * c->out_sb + g * c->ocg * c->out_sc, s0, s1, (const char *)tile + cs * (size_t)((r - r0) * c->ocg));
      r += s1 - s0;
    }
  }
  free(col);
  free(tile);
}

/* ---- Float32 on lathe's own gemm: rows of all batches at once, one product threaded as a whole ----
 * The rows of the product are the (batch, output position) pairs of a group, so that a conv with
 * few output positions per batch (a kernel's gradient: 3x3 positions, batch = input channels)
 * still makes one product of useful size, whose packed operands every thread shares. Rows go in
 * tiles whose patches (col) stay under COL_MAX values, or 256 rows. When the input's batch axis is its
 * innermost (a kernel's gradient in NHWC: the batch role is played by the channels), rows run
 * (position, batch) and col is built transposed, [K][rows], from contiguous runs of batches;
 * the gemm reads it through its strides. The products sum in the same order as the per-task path. */
enum { COL_MAX = 1 << 19 };

typedef struct big_ctx {
  conv_ctx *c;
  int64_t g, r0, m; /* group, the tile's first row and its row count */
  bool tr;          /* rows are (position, batch), col is [K][m] */
  float *col, *tout;
} big_ctx;

/* The input offset of output position o's tap at kernel position kx, or -1 on padding or a hole. */
static int64_t tap_offset(const conv_ctx *c, const int64_t *o, const int64_t *kx) {
  int64_t off = 0;
  for (int d = 0; d < c->ns; d++) {
    int64_t v = c->tbl[d][o[d] * c->ksp[d] + kx[d]];
    if (v < 0) return -1;
    off += v;
  }
  return off;
}

/* Whether the input's batch axis is its innermost (a kernel's gradient in NHWC): patches are then
 * built transposed, [K][rows] with rows (position, batch), from contiguous runs of batches. */
static bool patches_transposed(const conv_ctx *c) { return c->in_sb == 1 && c->in_sc != 1 && c->ob > 1; }

static int64_t big_in_base(const conv_ctx *c, int64_t g, int64_t b) {
  int64_t in_b = c->batch_groups ? g * c->ob + b : b;
  return in_b * c->in_sb + (c->channel_groups ? g * c->kic * c->in_sc : 0);
}

/* col rows [i0, i1) of the tile (rows (batch, position)), through im2col per run of one batch */
static void big_im2col(void *vb, int64_t i0, int64_t i1) {
  const big_ctx *t = vb;
  const conv_ctx *c = t->c;
  for (int64_t i = i0; i < i1;) {
    int64_t r = t->r0 + i, b = r / c->S, s = r % c->S, n = c->S - s < i1 - i ? c->S - s : i1 - i;
    c->ty->im2col(c, big_in_base(c, t->g, b), s, s + n, t->col + i * c->K);
    i += n;
  }
}

/* transposed col for positions [p0, p1) of the tile (rows (position, batch), whole positions):
 * colT[k][i] with k = (kernel position, input channel) */
static void big_im2col_t(void *vb, int64_t p0, int64_t p1) {
  const big_ctx *t = vb;
  const conv_ctx *c = t->c;
  const float *in = (const float *)c->in + big_in_base(c, t->g, 0);
  int64_t ob = c->ob, first = t->r0 / ob;
  for (int64_t p = p0; p < p1; p++) {
    int64_t o[LATHE_MAX_RANK], kx[LATHE_MAX_RANK] = {0};
    lathe_unflatten(first + p, c->osp, c->ns, o);
    float *dcol = t->col + p * ob;
    for (int64_t k = 0; k < c->ks; k++) {
      int64_t off = tap_offset(c, o, kx);
      for (int64_t ch = 0; ch < c->kic; ch++) {
        float *dst = dcol + (k * c->kic + ch) * t->m;
        if (off < 0) memset(dst, 0, sizeof(float) * (size_t)ob);
        else memcpy(dst, in + off + ch * c->in_sc, sizeof(float) * (size_t)ob);
      }
      lathe_odometer(kx, c->ksp, c->ns);
    }
  }
}

static void big_scatter(void *vb, int64_t i0, int64_t i1) {
  const big_ctx *t = vb;
  const conv_ctx *c = t->c;
  for (int64_t i = i0; i < i1; i++) {
    int64_t r = t->r0 + i, b = t->tr ? r % c->ob : r / c->S, s = t->tr ? r / c->ob : r % c->S;
    c->ty->scatter(c, b * c->out_sb + t->g * c->ocg * c->out_sc, s, s + 1, t->tout + i * c->ocg);
  }
}

static lathe_status_t conv_big(lathe_pool *pool, conv_ctx *c) {
  int64_t rows = c->ob * c->S;
  bool tr = patches_transposed(c);
  int64_t tile = COL_MAX / c->K;
  if (tile < 256) tile = 256; /* each tile packs the kernel rows again: enough rows to pay for it */
  if (tr) tile = tile / c->ob * c->ob;
  if (tile < (tr ? c->ob : 1)) tile = tr ? c->ob : 1;
  if (tile > rows) tile = rows;
  size_t col_bytes = sizeof(float) * (size_t)(tile * c->K), out_bytes = sizeof(float) * (size_t)(tile * c->ocg);
  float *col = lathe_cpu_mem_alloc(col_bytes), *tout = lathe_cpu_mem_alloc(out_bytes);
  lathe_status_t st = col && tout ? NULL : LATHE_OOM("ConvGeneral");
  for (int64_t g = 0; g < c->groups && !st; g++)
    for (int64_t r0 = 0; r0 < rows && !st; r0 += tile) {
      big_ctx t = {.c = c, .g = g, .r0 = r0, .m = rows - r0 < tile ? rows - r0 : tile, .tr = tr, .col = col, .tout = tout};
      if (tr) lathe_parallel_for(pool, t.m / c->ob, 1 + 16384 / (c->K * c->ob), big_im2col_t, &t);
      else lathe_parallel_for(pool, t.m, 1 + 16384 / c->K, big_im2col, &t);
      const float *w = (const float *)c->wpack + g * c->ocg * c->K;
      st = tr ? lathe_gemm_f32(pool, t.m, c->ocg, c->K, col, 1, t.m, w, 1, c->K, tout, c->ocg)
              : lathe_gemm_f32(pool, t.m, c->ocg, c->K, col, c->K, 1, w, 1, c->K, tout, c->ocg);
      if (!st) lathe_parallel_for(pool, t.m, 1 + 16384 / (c->ocg + 1), big_scatter, &t);
    }
  lathe_cpu_mem_free(col, col_bytes);
  lathe_cpu_mem_free(tout, out_bytes);
  return st;
}

/* ---- Float32 products of a long k and a small result (a kernel's gradient: k = the output
 * gradient's positions x batch, the result kernel positions x channels) ----
 * conv_big would write col for every row and all of k (9x the input for a 3x3 kernel) and pack
 * it whole before the product: memory traffic, and a result too small to share among threads.
 * Here k goes in chunks of whole kernel positions whose col (about KS_COL values) stays in
 * cache: each chunk's product runs on one thread into a partial sum of the whole result; the
 * chunks are dealt to KS_PARTS fixed parts, summed in order, so results do not depend on the
 * thread count. */
enum { KS_COL = 1 << 16, KS_PARTS = 8 };

typedef struct ks_ctx {
  conv_ctx *c;
  int64_t g, rows, qc, nq, parts; /* group, result rows, kernel positions per chunk, chunks, parts */
  bool tr;                        /* rows (position, batch) and col [k][rows], as conv_big's */
  float *part;                    /* parts x rows x ocg */
} ks_ctx;

/* col of kernel positions [q0, q1): [rows][(q1 - q0) kic] with rows (batch, position), or
 * transposed, [(q1 - q0) kic][rows] with rows (position, batch) */
static void ks_im2col(const ks_ctx *t, int64_t q0, int64_t q1, float *col) {
  const conv_ctx *c = t->c;
  const float *in = c->in;
  int64_t kk = (q1 - q0) * c->kic, rows = t->rows;
  int64_t o[LATHE_MAX_RANK] = {0}, qx0[LATHE_MAX_RANK];
  lathe_unflatten(q0, c->ksp, c->ns, qx0);
  for (int64_t s = 0; s < c->S; s++) {
    int64_t kx[LATHE_MAX_RANK];
    memcpy(kx, qx0, sizeof kx);
    for (int64_t q = q0; q < q1; q++) {
      int64_t off = tap_offset(c, o, kx);
      for (int64_t ch = 0; ch < c->kic; ch++) {
        int64_t k = (q - q0) * c->kic + ch;
        if (t->tr) {
          float *dst = col + k * rows + s * c->ob;
          if (off < 0) memset(dst, 0, sizeof(float) * (size_t)c->ob);
          else memcpy(dst, in + big_in_base(c, t->g, 0) + off + ch * c->in_sc, sizeof(float) * (size_t)c->ob);
        } else {
          for (int64_t b = 0; b < c->ob; b++)
            col[(b * c->S + s) * kk + k] = off < 0 ? 0.0f : in[big_in_base(c, t->g, b) + off + ch * c->in_sc];
        }
      }
      lathe_odometer(kx, c->ksp, c->ns);
    }
    lathe_odometer(o, c->osp, c->ns);
  }
}

static void ks_tasks(void *vt, int64_t p0, int64_t p1) {
  const ks_ctx *t = vt;
  conv_ctx *c = t->c;
  int64_t rows = t->rows, n = rows * c->ocg;
  size_t col_bytes = sizeof(float) * (size_t)(t->qc * c->kic * rows), tmp_bytes = sizeof(float) * (size_t)n;
  float *col = lathe_cpu_mem_alloc(col_bytes), *tmp = lathe_cpu_mem_alloc(tmp_bytes);
  for (int64_t pt = p0; pt < p1 && col && tmp; pt++) {
    float *acc = t->part + pt * n;
    for (int64_t ch = pt * t->nq / t->parts; ch < (pt + 1) * t->nq / t->parts; ch++) {
      int64_t q0 = ch * t->qc, q1 = q0 + t->qc < c->ks ? q0 + t->qc : c->ks, kk = (q1 - q0) * c->kic;
      bool first = ch == pt * t->nq / t->parts;
      ks_im2col(t, q0, q1, col);
      const float *w = (const float *)c->wpack + t->g * c->ocg * c->K + q0 * c->kic; /* B(k, j) = w[k + j K] */
      lathe_status_t st = lathe_gemm_f32(NULL, rows, c->ocg, kk, col, t->tr ? 1 : kk, t->tr ? rows : 1, w, 1, c->K,
                                         first ? acc : tmp, c->ocg);
      if (st) {
        lathe_status_free(st);
        atomic_store(&c->oom, 1);
        break;
      }
      if (!first)
        for (int64_t e = 0; e < n; e++) acc[e] += tmp[e];
    }
  }
  if (!col || !tmp) atomic_store(&c->oom, 1);
  lathe_cpu_mem_free(col, col_bytes);
  lathe_cpu_mem_free(tmp, tmp_bytes);
}

/* Whether conv_ksplit takes c: a long k against a result of a few thousand values per group. */
static bool ksplit_fits(const conv_ctx *c) { return c->K >= 4096 && c->ob * c->S * c->ocg <= (1 << 16); }

static lathe_status_t conv_ksplit(lathe_pool *pool, conv_ctx *c) {
  int64_t rows = c->ob * c->S, n = rows * c->ocg;
  bool tr = patches_transposed(c);
  int64_t qc = KS_COL / (rows * c->kic);
  qc = qc < 1 ? 1 : qc;
  int64_t nq = (c->ks + qc - 1) / qc, parts = nq < KS_PARTS ? nq : KS_PARTS;
  size_t part_bytes = sizeof(float) * (size_t)(parts * n);
  float *part = lathe_cpu_mem_alloc(part_bytes);
  if (!part) return LATHE_OOM("ConvGeneral");
  atomic_init(&c->oom, 0);
  for (int64_t g = 0; g < c->groups && !atomic_load(&c->oom); g++) {
    ks_ctx t = {.c = c, .g = g, .rows = rows, .qc = qc, .nq = nq, .parts = parts, .tr = tr, .part = part};
    lathe_parallel_for(pool, parts, 1, ks_tasks, &t);
    for (int64_t pt = 1; pt < parts; pt++)
      for (int64_t e = 0; e < n; e++) part[e] += part[pt * n + e];
    big_ctx b = {.c = c, .g = g, .r0 = 0, .m = rows, .tr = tr, .tout = part};
    lathe_parallel_for(pool, rows, 1 + 16384 / (c->ocg + 1), big_scatter, &b);
  }
  lathe_cpu_mem_free(part, part_bytes);
  return atomic_load(&c->oom) ? LATHE_OOM("ConvGeneral") : NULL;
}

typedef struct pack_ctx {
  const conv_ctx *c;
  const void *kernel;
  void *wpack;
} pack_ctx;

static void pack_rows(void *vp, int64_t o0, int64_t o1) {
  const pack_ctx *p = vp;
  p->c->ty->pack(p->c, p->kernel, p->wpack, o0, o1);
}

lathe_status_t lathe_cpu_run_conv(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                  lathe_tensor **out) {
  const lathe_shape *is = &in[0]->shape, *ks = &in[1]->shape, *os = &out[0]->shape;
  conv_ctx c;
  memset(&c, 0, sizeof c);
  c.ty = conv_type_of(is->dtype);
  if (!c.ty) return LATHE_UNIMPL("ConvGeneral: not implemented on lathe:cpu for %s", lathe_dtype_name(is->dtype));
  if (lathe_shape_size(os) == 0) return NULL;
  int64_t ist[LATHE_MAX_RANK], kst[LATHE_MAX_RANK], ost[LATHE_MAX_RANK];
  lathe_shape_strides(is, ist);
  lathe_shape_strides(ks, kst);
  lathe_shape_strides(os, ost);
  lathe_ilist input_spatial = lathe_attr_conv_general_input_spatial(n);
  const int64_t *isp = input_spatial.v, *ksp_ax = lathe_attr_conv_general_kernel_spatial(n).v,
                *osp_ax = lathe_attr_conv_general_output_spatial(n).v;
  const int64_t *strides = lathe_attr_conv_general_strides(n).v, *pads = lathe_attr_conv_general_paddings(n).v;
  const int64_t *idil = lathe_attr_conv_general_input_dilations(n).v;
  const int64_t *kdil = lathe_attr_conv_general_kernel_dilations(n).v;
  int ns = c.ns = input_spatial.n;
  int64_t cgc = lathe_attr_conv_general_channel_group_count(n), bgc = lathe_attr_conv_general_batch_group_count(n);
  int64_t ob_ax = lathe_attr_conv_general_output_batch(n), oc_ax = lathe_attr_conv_general_output_channels(n);
  int64_t kic_ax = lathe_attr_conv_general_kernel_input_channels(n);
  c.channel_groups = cgc > 1;
  c.batch_groups = bgc > 1;
  c.groups = cgc > 1 ? cgc : bgc;
  c.ob = os->dims[ob_ax];
  c.oc = os->dims[oc_ax];
  c.ocg = c.oc / c.groups;
  c.kic = ks->dims[kic_ax];
  c.in_sb = ist[lathe_attr_conv_general_input_batch(n)];
  c.in_sc = ist[lathe_attr_conv_general_input_channels(n)];
  c.k_si = kst[kic_ax];
  c.k_so = kst[lathe_attr_conv_general_kernel_output_channels(n)];
  c.out_sb = ost[ob_ax];
  c.out_sc = ost[oc_ax];
  c.ks = c.S = 1;
  int64_t tbl_len = 0;
  for (int d = 0; d < ns; d++) {
    c.osp[d] = os->dims[osp_ax[d]];
    c.ksp[d] = ks->dims[ksp_ax[d]];
    c.k_ssp[d] = kst[ksp_ax[d]];
    c.out_ssp[d] = ost[osp_ax[d]];
    c.ks *= c.ksp[d];
    c.S *= c.osp[d];
    int64_t len; /* output and kernel sizes come from different tensors: their product may not fit */
    if (lathe_mul_overflow(c.osp[d], c.ksp[d], &len) || lathe_add_overflow(tbl_len, len, &tbl_len))
      return LATHE_OOM("ConvGeneral");
  }
  c.K = c.kic * c.ks;
  if (c.K == 0) { /* empty sums: zeros, without walking the (possibly huge) kernel window */
    memset(out[0]->data, 0, out[0]->nbytes);
    return NULL;
  }
  c.in = in[0]->data;
  c.out = out[0]->data;

  /* Input offsets of (output index, kernel index) per spatial axis; -1 for padding and holes. */
  int64_t *tbl = malloc(sizeof(int64_t) * (size_t)(tbl_len + 1));
  /* the kernel rows, [oc][K]: as big as the output gradient for a kernel's gradient, so from the
   * device's cache of warm blocks */
  size_t wbytes = c.ty->csize * (size_t)(c.oc * c.K) + 1;
  void *wpack = lathe_cpu_mem_alloc(wbytes);
  if (!tbl || !wpack) {
    free(tbl);
    lathe_cpu_mem_free(wpack, wbytes);
    return LATHE_OOM("ConvGeneral");
  }
  int64_t *p = tbl;
  bool holes = false;
  for (int d = 0; d < ns; d++) {
    c.tbl[d] = p;
    int64_t in_dim = is->dims[isp[d]], in_st = ist[isp[d]];
    for (int64_t o = 0; o < c.osp[d]; o++)
      for (int64_t k = 0; k < c.ksp[d]; k++) {
        int64_t pos = o * strides[d] + k * kdil[d] - pads[2 * d];
        bool ok = pos >= 0 && pos % idil[d] == 0 && pos / idil[d] < in_dim;
        *p++ = ok ? pos / idil[d] * in_st : -1;
        holes |= !ok;
      }
  }
  pack_ctx pk = {&c, in[1]->data, wpack};
  lathe_parallel_for(lathe_cpu_exec_pool(ex), c.oc, 1 + 32768 / (c.K ? c.K : 1), pack_rows, &pk);
  c.wpack = wpack;

  /* Tiles of rows (below) pack the group's kernel rows again for each product of 64K/K rows, and
   * packing a value costs tens of multiply-adds: rows longer than 256 go to products threaded
   * as a whole instead. */
  if (c.K > 256 && is->dtype == LATHE_DTYPE_FLOAT32 && lathe_blas_has(LATHE_DTYPE_FLOAT32) && lathe_blas_own_f32() &&
      lathe_blas_fits(c.ob * c.S, c.ocg, c.K, (lathe_blas_mat){false, c.K}, (lathe_blas_mat){true, c.K}, c.ocg)) {
    lathe_status_t st = ksplit_fits(&c) ? conv_ksplit(lathe_cpu_exec_pool(ex), &c) : conv_big(lathe_cpu_exec_pool(ex), &c);
    if (!st && holes && c.ty->fix_holes) c.ty->fix_holes(&c);
    free(tbl);
    lathe_cpu_mem_free(wpack, wbytes);
    return st;
  }
  /* Tiles of rows keep col near 64K values (L2-sized) while giving the GEMM enough rows: rows
   * are the (batch, output position) pairs of a group, so a tile spans batches when their
   * positions are few. */
  int64_t ts = 65536 / (c.K > 0 ? c.K : 1);
  ts = ts < 16 ? 16 : ts > 1024 ? 1024 : ts;
  c.ts = ts < c.ob * c.S ? ts : c.ob * c.S;
  c.ntiles = (c.ob * c.S + c.ts - 1) / c.ts;
  atomic_init(&c.oom, 0);
  int64_t work = c.ts * c.ocg * (c.K + 1), tasks = c.groups * c.ntiles;
  int64_t grain = work > 0 ? (int64_t)(1 << 18) / work : tasks;
  lathe_parallel_for(lathe_cpu_exec_pool(ex), tasks, grain < 1 ? 1 : grain, conv_tasks, &c);
  bool oom = atomic_load(&c.oom);
  if (!oom && holes && c.ty->fix_holes) c.ty->fix_holes(&c);
  free(tbl);
  lathe_cpu_mem_free(wpack, wbytes);
  return oom ? LATHE_OOM("ConvGeneral") : NULL;
}

/* attention.c -- fused attention on the CPU.
 *
 * FusedScaledDotProductAttention streams over key blocks per (batch, head, query block), the
 * flash-attention way: a block of scores comes from one BLAS product, goes through an online
 * softmax (running max and denominator per row, earlier partial outputs rescaled), and is
 * multiplied into the value block; the [seq, kvLen] score matrix never exists in memory. The
 * per-row logsumexp is kept as the VJP's state, so the backward recomputes the probabilities
 * block by block instead of storing them.
 *
 * The VJP accumulates dKey/dValue over every query head of a kv group (GQA): work is split by
 * (batch, kv head) when that gives every thread enough items, otherwise in two passes, one
 * by (batch, kv head, key block) for dKey/dValue and one by (batch, head, query block) for
 * dQuery, so that no two threads write the same rows.
 *
 * Float32 and Float64 compute natively; Float16/BFloat16 operands are widened to Float32
 * around the Float32 kernels. */
#include <limits.h>
#include <math.h>
#include <stdatomic.h>

#include "attention.h"
#include "blas.h"

bool lathe_cpu_attention_op(lathe_op op) {
  return op == LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION || op == LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP ||
         op == LATHE_OP_FUSED_ATTENTION_QKV_PROJECTION;
}

bool lathe_cpu_supports_attention(lathe_op op, lathe_dtype dt) { return lathe_cpu_attention_op(op) && lathe_dtype_is_float(dt); }

/* Block sizes: a [bq x bk] score block and the [bq x headDim] accumulators stay in L2. */
enum { FWD_BQ = 64, FWD_BK = 256, BWD_BQ = 128, BWD_BK = 128 };

typedef struct actx {
  const lathe_node *n;
  int64_t B, H, Hkv, S, Skv, D, group;
  int64_t qss, qhs, qbs; /* query/output element strides: seq, head, batch */
  int64_t kss, khs, kbs; /* key/value */
  int64_t ms[4], bs[4];  /* mask/bias strides over [batch, heads, seq, kvLen]; 0 where broadcast */
  double scale;
  bool causal;
  const void *q, *k, *v, *amask, *bias, *o, *dout, *lse_in;
  const uint8_t *bmask;
  const int32_t *qlen, *kvlen;
  void *out, *lse, *dq, *dk, *dv, *delta;
  int64_t bq, bk, nqb, nkb;
  atomic_bool oom;
  /* QKV projection: x [m, kin] . w [kin, total] into outputs of widths dims[] */
  int64_t m, kin, total, dims[3], col0[3], ntiles, tiles_of[3], tile_w[3], rows;
  const void *x, *w, *qkv_bias[3];
  void *qkv_out[3];
} actx;

static inline int64_t q_off(const actx *c, int64_t b, int64_t h, int64_t i) { return b * c->qbs + h * c->qhs + i * c->qss; }
static inline int64_t k_off(const actx *c, int64_t b, int64_t g, int64_t j) { return b * c->kbs + g * c->khs + j * c->kss; }
static inline int64_t qlimit(const actx *c, int64_t b) { return c->qlen ? lathe_clamp64(c->qlen[b], 0, c->S) : c->S; }
static inline int64_t kvlimit(const actx *c, int64_t b) { return c->kvlen ? lathe_clamp64(c->kvlen[b], 0, c->Skv) : c->Skv; }

/* The tile of query rows [i0, i0+*m) x keys [j0, j0+*n) clipped to what can attend (seq-len
 * padding, causal); false when nothing is left. */
static bool clip_tile(const actx *c, int64_t b, int64_t i0, int64_t *m, int64_t j0, int64_t *n) {
  int64_t mm = lathe_clamp64(qlimit(c, b) - i0, 0, *m);
  int64_t jend = kvlimit(c, b);
  if (c->causal && i0 + mm < jend) jend = i0 + mm;
  int64_t nn = lathe_clamp64(jend - j0, 0, *n);
  *m = mm, *n = nn;
  return mm > 0 && nn > 0;
}

/* e^x in float without a libm call, so that the loops below vectorise: 2^n e^r with
 * |r| <= ln2/2 (Cody-Waite split of ln2) and a degree-6 Taylor polynomial; within 3e-7 relative.
 * Exactly 0 below -87 (hidden keys weigh nothing), NaN stays NaN; used for x <= 0 only. */
static inline float exp_f32(float x) {
  float xc = x > -87.0f ? x : -87.0f;
  xc = xc < 88.0f ? xc : 88.0f;
  float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f; /* round to nearest */
  float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
  float s;
  memcpy(&s, &bits, sizeof s);
  float y = x > -87.0f ? p * s : 0.0f;
  return x == x ? y : x;
}

/* Row helpers. Loops run in fixed chunks of 8 so that gcc's -O2 cost model (which vectorises
 * only loops without a scalar remainder) and clang's SLP vectoriser both use SIMD. */
#define CHUNKED(n, i, body)                                   \
  do {                                                        \
    int64_t i##b_ = 0;                                        \
    for (; i##b_ + 8 <= (n); i##b_ += 8)                      \
      for (int i##k_ = 0; i##k_ < 8; i##k_++) {               \
        int64_t i = i##b_ + i##k_;                            \
        body;                                                 \
      }                                                       \
    for (int64_t i = i##b_; i < (n); i++) body;               \
  } while (0)

#define DEFINE_ROW_HELPERS(T, SUF)                                                                        \
  static void scale_add_##SUF(T *restrict acc, T f, const T *restrict t, int64_t n) {                     \
    CHUNKED(n, j, acc[j] = acc[j] * f + t[j]);                                                            \
  }                                                                                                       \
  static void add_##SUF(T *restrict dst, const T *restrict src, int64_t n) { CHUNKED(n, j, dst[j] += src[j]); } \
  static void scale_##SUF(T *x, T f, int64_t n) { CHUNKED(n, j, x[j] *= f); }                              \
  /* dS = P (dP - delta) scale, in dP's place */                                                          \
  static void ds_##SUF(T *restrict dp, const T *restrict p, T delta, T scale, int64_t n) {                 \
    CHUNKED(n, j, dp[j] = p[j] * (dp[j] - delta) * scale);                                                \
  }

/* Float64: x = e^(x - sub), row max and sum, scalar (libm's exp for the accuracy Float64 needs). */
static void exp_sub_f64(double *x, int64_t n, double sub) {
  for (int64_t j = 0; j < n; j++) x[j] = exp(x[j] - sub);
}
static double row_max_f64(const double *x, int64_t n) {
  double m = -INFINITY;
  for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
  return m;
}
static double row_sum_f64(const double *x, int64_t n) {
  double s = 0;
  for (int64_t j = 0; j < n; j++) s += x[j];
  return s;
}

/* Float32: the same with SSE2 where the target has it (gcc's -O2 does not vectorise the
 * selects of exp_f32 by itself). */
#if defined(__SSE2__)
#include <emmintrin.h>
static inline __m128 exp4_f32(__m128 x) {
  const __m128 lo = _mm_set1_ps(-87.0f);
  __m128 keep = _mm_cmpgt_ps(x, lo), nan = _mm_cmpunord_ps(x, x);
  __m128 xc = _mm_min_ps(_mm_max_ps(x, lo), _mm_set1_ps(88.0f)); /* NaN becomes -87 here */
  __m128i ni = _mm_cvtps_epi32(_mm_mul_ps(xc, _mm_set1_ps(1.44269504088896341f)));
  __m128 n = _mm_cvtepi32_ps(ni);
  __m128 r = _mm_add_ps(_mm_sub_ps(xc, _mm_mul_ps(n, _mm_set1_ps(0.693359375f))), _mm_mul_ps(n, _mm_set1_ps(2.12194440e-4f)));
  __m128 p = _mm_set1_ps(1.0f / 720);
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f / 120));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f / 24));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f / 6));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(0.5f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f));
  p = _mm_add_ps(_mm_mul_ps(p, r), _mm_set1_ps(1.0f));
  __m128 y = _mm_mul_ps(p, _mm_castsi128_ps(_mm_slli_epi32(_mm_add_epi32(ni, _mm_set1_epi32(127)), 23)));
  y = _mm_and_ps(y, keep);
  return _mm_or_ps(_mm_and_ps(nan, x), _mm_andnot_ps(nan, y));
}
static void exp_sub_f32(float *x, int64_t n, float sub) {
  __m128 vs = _mm_set1_ps(sub);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) _mm_storeu_ps(x + j, exp4_f32(_mm_sub_ps(_mm_loadu_ps(x + j), vs)));
  for (; j < n; j++) x[j] = exp_f32(x[j] - sub);
}
static float row_max_f32(const float *x, int64_t n) {
  __m128 m = _mm_set1_ps(-INFINITY);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) m = _mm_max_ps(_mm_loadu_ps(x + j), m); /* a NaN element is skipped */
  float v[4], r = -INFINITY;
  _mm_storeu_ps(v, m);
  for (int k = 0; k < 4; k++) r = v[k] > r ? v[k] : r;
  for (; j < n; j++) r = x[j] > r ? x[j] : r;
  return r;
}
static float row_sum_f32(const float *x, int64_t n) {
  __m128 s0 = _mm_setzero_ps(), s1 = _mm_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    s0 = _mm_add_ps(s0, _mm_loadu_ps(x + j));
    s1 = _mm_add_ps(s1, _mm_loadu_ps(x + j + 4));
  }
  float v[4], r = 0;
  _mm_storeu_ps(v, _mm_add_ps(s0, s1));
  r = (v[0] + v[1]) + (v[2] + v[3]);
  for (; j < n; j++) r += x[j];
  return r;
}
#else
static void exp_sub_f32(float *x, int64_t n, float sub) {
  for (int64_t j = 0; j < n; j++) x[j] = exp_f32(x[j] - sub);
}
static float row_max_f32(const float *x, int64_t n) {
  float m = -INFINITY;
  for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
  return m;
}
static float row_sum_f32(const float *x, int64_t n) {
  float s = 0;
  for (int64_t j = 0; j < n; j++) s += x[j];
  return s;
}
#endif

DEFINE_ROW_HELPERS(float, f32)
DEFINE_ROW_HELPERS(double, f64)

#define DEFINE_ATTENTION(T, SUF, DT, EXP, LOG)                                                              \
  /* scaled scores + bias + additive mask; -inf where the bool mask, causality or kv padding hide a key */ \
  static void logits_##SUF(const actx *c, int64_t b, int64_t h, int64_t i0, int64_t m, int64_t j0, int64_t n,  \
                           T *s, int64_t lds) {                                                             \
    const T scale = (T)c->scale, *am = c->amask, *bi = c->bias;                                            \
    const uint8_t *bm = c->bmask;                                                                           \
    int64_t kvl = kvlimit(c, b);                                                                            \
    for (int64_t r = 0; r < m; r++) {                                                                       \
      int64_t i = i0 + r, lim = kvl;                                                                        \
      if (c->causal && i + 1 < lim) lim = i + 1;                                                            \
      lim = lathe_clamp64(lim - j0, 0, n);                                                                  \
      T *row = s + r * lds;                                                                                 \
      if (!am && !bi && !bm) {                                                                              \
        scale_##SUF(row, scale, lim);                                                                       \
      } else {                                                                                              \
        int64_t mo = b * c->ms[0] + h * c->ms[1] + i * c->ms[2] + j0 * c->ms[3], m3 = c->ms[3];             \
        int64_t bo = b * c->bs[0] + h * c->bs[1] + i * c->bs[2] + j0 * c->bs[3], b3 = c->bs[3];             \
        for (int64_t j = 0; j < lim; j++) {                                                                 \
          T x = row[j] * scale;                                                                             \
          if (bi) x += bi[bo + j * b3];                                                                     \
          if (am) x += am[mo + j * m3];                                                                     \
          else if (bm && !bm[mo + j * m3]) x = -INFINITY;                                                   \
          row[j] = x;                                                                                       \
        }                                                                                                   \
      }                                                                                                     \
      for (int64_t j = lim; j < n; j++) row[j] = -INFINITY;                                                 \
    }                                                                                                       \
  }                                                                                                         \
  /* s[m x n] = Q[i0..] . K[j0..]^T as raw dot products */                                               \
  static void scores_##SUF(const actx *c, const T *Q, const T *K, int64_t m, int64_t n, T *s) {             \
    if (c->D)                                                                                               \
      lathe_blas_gemm(DT, m, n, c->D, Q, (lathe_blas_mat){false, c->qss}, K, (lathe_blas_mat){true, c->kss}, s, n); \
    else                                                                                                    \
      memset(s, 0, sizeof(T) * (size_t)(m * n));                                                            \
  }                                                                                                         \
  static void fwd_##SUF(void *vc, int64_t lo, int64_t hi) {                                                 \
    actx *c = vc;                                                                                           \
    const int64_t D = c->D, bq = c->bq, bk = c->bk;                                                        \
    T *s = malloc(sizeof(T) * (size_t)(bq * bk + 2 * bq * D + 3 * bq));                                     \
    if (!s) {                                                                                               \
      atomic_store(&c->oom, true);                                                                          \
      return;                                                                                               \
    }                                                                                                       \
    T *acc = s + bq * bk, *tmp = acc + bq * D, *mx = tmp + bq * D, *l = mx + bq, *fac = l + bq;             \
    const T *q = c->q, *k = c->k, *v = c->v;                                                                \
    T *o = c->out, *lse = c->lse;                                                                           \
    for (int64_t it = lo; it < hi; it++) {                                                                  \
      int64_t qb = it % c->nqb, h = (it / c->nqb) % c->H, b = it / (c->nqb * c->H), g = h / c->group;       \
      int64_t i0 = qb * bq, m = c->S - i0 < bq ? c->S - i0 : bq;                                            \
      int64_t mv = lathe_clamp64(qlimit(c, b) - i0, 0, m), jend = kvlimit(c, b);                            \
      if (c->causal && i0 + mv < jend) jend = i0 + mv;                                                      \
      T *L = lse + (b * c->H + h) * c->S + i0;                                                              \
      for (int64_t r = mv; r < m; r++) { /* padded query rows */                                           \
        memset(o + q_off(c, b, h, i0 + r), 0, sizeof(T) * (size_t)D);                                       \
        L[r] = -INFINITY;                                                                                   \
      }                                                                                                     \
      if (!mv) continue;                                                                                    \
      for (int64_t r = 0; r < mv; r++) mx[r] = -INFINITY, l[r] = 0;                                         \
      memset(acc, 0, sizeof(T) * (size_t)(mv * D));                                                         \
      const T *Q = q + q_off(c, b, h, i0);                                                                  \
      for (int64_t j0 = 0; j0 < jend; j0 += bk) {                                                           \
        int64_t n = jend - j0 < bk ? jend - j0 : bk;                                                        \
        scores_##SUF(c, Q, k + k_off(c, b, g, j0), mv, n, s);                                               \
        logits_##SUF(c, b, h, i0, mv, j0, n, s, n);                                                         \
        for (int64_t r = 0; r < mv; r++) { /* online softmax: rescale what came before */                  \
          T *row = s + r * n, bmax = row_max_##SUF(row, n);                                                 \
          T nm = bmax > mx[r] ? bmax : mx[r];                                                               \
          if (nm == -INFINITY) { /* nothing seen yet */                                                     \
            memset(row, 0, sizeof(T) * (size_t)n);                                                          \
            fac[r] = 1;                                                                                     \
            continue;                                                                                       \
          }                                                                                                 \
          fac[r] = EXP(mx[r] - nm);                                                                         \
          exp_sub_##SUF(row, n, nm);                                                                        \
          l[r] = l[r] * fac[r] + row_sum_##SUF(row, n);                                                     \
          mx[r] = nm;                                                                                       \
        }                                                                                                   \
        if (!D) continue;                                                                                   \
        T *dst = j0 ? tmp : acc; /* the first block needs no rescaling */                                   \
        lathe_blas_gemm(DT, mv, D, n, s, (lathe_blas_mat){false, n}, v + k_off(c, b, g, j0),                \
                        (lathe_blas_mat){false, c->kss}, dst, D);                                           \
        for (int64_t r = 0; j0 && r < mv; r++) scale_add_##SUF(acc + r * D, fac[r], tmp + r * D, D);        \
      }                                                                                                     \
      for (int64_t r = 0; r < mv; r++) {                                                                    \
        T *O = o + q_off(c, b, h, i0 + r), inv = l[r] > 0 ? (T)1 / l[r] : 0;                                \
        for (int64_t d = 0; d < D; d++) O[d] = acc[r * D + d] * inv;                                        \
        L[r] = l[r] > 0 ? mx[r] + LOG(l[r]) : -INFINITY;                                                    \
      }                                                                                                     \
    }                                                                                                       \
    free(s);                                                                                                \
  }                                                                                                         \
  /* delta[b, h, i] = rowsum(dOutput * output): the softmax backward's correction term */                 \
  static void delta_##SUF(void *vc, int64_t lo, int64_t hi) {                                               \
    actx *c = vc;                                                                                           \
    const T *o = c->o, *dout = c->dout;                                                                     \
    T *delta = c->delta;                                                                                    \
    for (int64_t r = lo; r < hi; r++) {                                                                     \
      int64_t i = r % c->S, h = (r / c->S) % c->H, b = r / (c->S * c->H), off = q_off(c, b, h, i);           \
      T sum = 0;                                                                                            \
      for (int64_t d = 0; d < c->D; d++) sum += o[off + d] * dout[off + d];                                 \
      delta[r] = sum;                                                                                       \
    }                                                                                                       \
  }                                                                                                         \
  static void add_rows_##SUF(T *dst, int64_t ld, const T *src, int64_t rows, int64_t D) {                   \
    for (int64_t r = 0; r < rows; r++) add_##SUF(dst + r * ld, src + r * D, D);                             \
  }                                                                                                         \
  /* one [m x n] tile of the backward: P from the logsumexp, dS = P (dP - delta) scale, and the */        \
  /* products into dQuery (do_dq) or dKey/dValue (do_dkv) */                                             \
  static void bwd_tile_##SUF(const actx *c, T *w, int64_t b, int64_t h, int64_t i0, int64_t m, int64_t j0,     \
                             int64_t n, bool do_dq, bool do_dkv) {                                          \
    const int64_t D = c->D, g = h / c->group;                                                              \
    T *s = w, *dp = w + c->bq * c->bk, *tmp = dp + c->bq * c->bk;                                            \
    const T *Q = (const T *)c->q + q_off(c, b, h, i0), *dO = (const T *)c->dout + q_off(c, b, h, i0);       \
    const T *K = (const T *)c->k + k_off(c, b, g, j0), *V = (const T *)c->v + k_off(c, b, g, j0);           \
    const T *L = (const T *)c->lse_in + (b * c->H + h) * c->S + i0;                                         \
    const T *dl = (const T *)c->delta + (b * c->H + h) * c->S + i0;                                         \
    scores_##SUF(c, Q, K, m, n, s);                                                                         \
    logits_##SUF(c, b, h, i0, m, j0, n, s, n);                                                              \
    for (int64_t r = 0; r < m; r++) { /* P = e^(logit - logsumexp); rows that see nothing: 0 */            \
      if (L[r] == -INFINITY) memset(s + r * n, 0, sizeof(T) * (size_t)n);                                   \
      else exp_sub_##SUF(s + r * n, n, L[r]);                                                               \
    }                                                                                                       \
    scores_##SUF(c, dO, V, m, n, dp);                                                                       \
    const T scale = (T)c->scale;                                                                            \
    for (int64_t r = 0; r < m; r++) ds_##SUF(dp + r * n, s + r * n, dl[r], scale, n);                        \
    if (!D) return;                                                                                         \
    if (do_dkv) {                                                                                           \
      lathe_blas_gemm(DT, n, D, m, s, (lathe_blas_mat){true, n}, dO, (lathe_blas_mat){false, c->qss}, tmp, D); \
      add_rows_##SUF((T *)c->dv + k_off(c, b, g, j0), c->kss, tmp, n, D);                                   \
      lathe_blas_gemm(DT, n, D, m, dp, (lathe_blas_mat){true, n}, Q, (lathe_blas_mat){false, c->qss}, tmp, D); \
      add_rows_##SUF((T *)c->dk + k_off(c, b, g, j0), c->kss, tmp, n, D);                                   \
    }                                                                                                       \
    if (do_dq) {                                                                                            \
      lathe_blas_gemm(DT, m, D, n, dp, (lathe_blas_mat){false, n}, K, (lathe_blas_mat){false, c->kss}, tmp, D); \
      add_rows_##SUF((T *)c->dq + q_off(c, b, h, i0), c->qss, tmp, m, D);                                   \
    }                                                                                                       \
  }                                                                                                         \
  static T *bwd_scratch_##SUF(actx *c) {                                                                    \
    int64_t rows = c->bq > c->bk ? c->bq : c->bk;                                                           \
    T *w = malloc(sizeof(T) * (size_t)(2 * c->bq * c->bk + rows * c->D + 1));                               \
    if (!w) atomic_store(&c->oom, true);                                                                    \
    return w;                                                                                               \
  }                                                                                                         \
  /* every tile of kv head g's key block kb, over the group's query heads */                              \
  static void bwd_key_block_##SUF(const actx *c, T *w, int64_t b, int64_t g, int64_t kb, bool do_dq) {      \
    for (int64_t hh = 0; hh < c->group; hh++)                                                               \
      for (int64_t qb = 0; qb < c->nqb; qb++) {                                                             \
        int64_t m = c->bq, n = c->bk, i0 = qb * c->bq, j0 = kb * c->bk;                                     \
        if (i0 + m > c->S) m = c->S - i0;                                                                   \
        if (clip_tile(c, b, i0, &m, j0, &n)) bwd_tile_##SUF(c, w, b, g * c->group + hh, i0, m, j0, n, do_dq, true); \
      }                                                                                                     \
  }                                                                                                         \
  /* items (batch, kv head): all of dQuery, dKey, dValue of the group */                                 \
  static void bwd_group_##SUF(void *vc, int64_t lo, int64_t hi) {                                           \
    actx *c = vc;                                                                                           \
    T *w = bwd_scratch_##SUF(c);                                                                            \
    for (int64_t it = lo; w && it < hi; it++)                                                               \
      for (int64_t kb = 0; kb < c->nkb; kb++) bwd_key_block_##SUF(c, w, it / c->Hkv, it % c->Hkv, kb, true); \
    free(w);                                                                                                \
  }                                                                                                         \
  /* items (batch, kv head, key block): dKey, dValue */                                                  \
  static void bwd_dkv_##SUF(void *vc, int64_t lo, int64_t hi) {                                             \
    actx *c = vc;                                                                                           \
    T *w = bwd_scratch_##SUF(c);                                                                            \
    for (int64_t it = lo; w && it < hi; it++) {                                                             \
      int64_t kb = it % c->nkb, g = (it / c->nkb) % c->Hkv, b = it / (c->nkb * c->Hkv);                     \
      bwd_key_block_##SUF(c, w, b, g, kb, false);                                                           \
    }                                                                                                       \
    free(w);                                                                                                \
  }                                                                                                         \
  /* items (batch, head, query block): dQuery */                                                         \
  static void bwd_dq_##SUF(void *vc, int64_t lo, int64_t hi) {                                              \
    actx *c = vc;                                                                                           \
    T *w = bwd_scratch_##SUF(c);                                                                            \
    for (int64_t it = lo; w && it < hi; it++) {                                                             \
      int64_t qb = it % c->nqb, h = (it / c->nqb) % c->H, b = it / (c->nqb * c->H);                         \
      for (int64_t kb = 0; kb < c->nkb; kb++) {                                                             \
        int64_t m = c->bq, n = c->bk, i0 = qb * c->bq, j0 = kb * c->bk;                                     \
        if (i0 + m > c->S) m = c->S - i0;                                                                   \
        if (clip_tile(c, b, i0, &m, j0, &n)) bwd_tile_##SUF(c, w, b, h, i0, m, j0, n, true, false);         \
      }                                                                                                     \
    }                                                                                                       \
    free(w);                                                                                                \
  }                                                                                                         \
  /* items (row block, column tile): three products on column blocks of wQKV, straight into the */      \
  /* outputs (ldb = the full width), bias added while the tile is in cache */                           \
  static void qkv_##SUF(void *vc, int64_t lo, int64_t hi) {                                                 \
    actx *c = vc;                                                                                           \
    for (int64_t it = lo; it < hi; it++) {                                                                  \
      int64_t rb = it / c->ntiles, t = it % c->ntiles, o = 0;                                               \
      while (t >= c->tiles_of[o]) t -= c->tiles_of[o++];                                                    \
      int64_t r0 = rb * c->rows, mr = c->m - r0 < c->rows ? c->m - r0 : c->rows;                            \
      int64_t c0 = t * c->tile_w[o], nc = c->dims[o] - c0 < c->tile_w[o] ? c->dims[o] - c0 : c->tile_w[o];  \
      T *y = (T *)c->qkv_out[o] + r0 * c->dims[o] + c0;                                                     \
      if (c->kin)                                                                                           \
        lathe_blas_gemm(DT, mr, nc, c->kin, (const T *)c->x + r0 * c->kin, (lathe_blas_mat){false, c->kin},   \
                        (const T *)c->w + c->col0[o] + c0, (lathe_blas_mat){false, c->total}, y, c->dims[o]); \
      else                                                                                                  \
        for (int64_t r = 0; r < mr; r++) memset(y + r * c->dims[o], 0, sizeof(T) * (size_t)nc);            \
      const T *bias = c->qkv_bias[o];                                                                       \
      if (bias)                                                                                             \
        for (int64_t r = 0; r < mr; r++)                                                                    \
          for (int64_t j = 0; j < nc; j++) y[r * c->dims[o] + j] += bias[c0 + j];                           \
    }                                                                                                       \
  }

DEFINE_ATTENTION(float, f32, LATHE_DTYPE_FLOAT32, exp_f32, logf)
DEFINE_ATTENTION(double, f64, LATHE_DTYPE_FLOAT64, exp, log)

/* Strides over [batch, heads, seq, kvLen] of a rank-2..4 operand, right-aligned; a BSHD rank-4
 * mask is [batch, seq, heads, kvLen] (see ops_attention.c). */
static void broadcast_strides(const lathe_shape *s, bool bshd_mask, int64_t *out) {
  int64_t st[LATHE_MAX_RANK];
  lathe_shape_strides(s, st);
  int off = 4 - s->rank;
  for (int a = 0; a < 4; a++) out[a] = a < off || s->dims[a - off] == 1 ? 0 : st[a - off];
  if (bshd_mask && s->rank == 4) {
    int64_t t = out[1];
    out[1] = out[2], out[2] = t;
  }
}

static lathe_status_t sdpa_geometry(actx *c, lathe_tensor *const *in, bool vjp) {
  const lathe_node *n = c->n;
  const lathe_shape *qs = &in[0]->shape, *ks = &in[1]->shape;
  bool bhsd = lathe_attr_sdpa_layout(n) == LATHE_ATTENTION_LAYOUT_BHSD;
  int sa = bhsd ? 2 : 1, ha = 3 - sa;
  c->B = qs->dims[0], c->H = qs->dims[ha], c->S = qs->dims[sa], c->D = qs->dims[3];
  c->Hkv = ks->dims[ha], c->Skv = ks->dims[sa];
  c->group = c->Hkv ? c->H / c->Hkv : 1; /* no heads at all (H = Hkv = 0): nothing to compute */
  c->qss = bhsd ? c->D : c->H * c->D, c->qhs = bhsd ? c->S * c->D : c->D, c->qbs = c->H * c->S * c->D;
  c->kss = bhsd ? c->D : c->Hkv * c->D, c->khs = bhsd ? c->Skv * c->D : c->D, c->kbs = c->Hkv * c->Skv * c->D;
  c->causal = lathe_attr_sdpa_causal(n);
  double scale = lathe_attr_sdpa_scale(n);
  c->scale = scale != 0 ? scale : c->D ? 1.0 / sqrt((double)c->D) : 1.0;
  c->q = in[0]->data, c->k = in[1]->data, c->v = in[2]->data;
  int next = vjp ? 6 : 3;
  if (lathe_attr_sdpa_has_mask(n)) {
    const lathe_tensor *mk = in[next++];
    if (mk->shape.dtype == LATHE_DTYPE_BOOL) c->bmask = mk->data;
    else c->amask = mk->data;
    broadcast_strides(&mk->shape, !bhsd, c->ms);
  }
  if (lathe_attr_sdpa_has_seq_lens(n)) {
    c->qlen = in[next++]->data;
    c->kvlen = in[next++]->data;
  }
  if (lathe_attr_sdpa_has_bias(n)) {
    c->bias = in[next]->data;
    broadcast_strides(&in[next]->shape, false, c->bs);
  }
  c->bq = vjp ? BWD_BQ : FWD_BQ;
  c->bk = vjp ? BWD_BK : FWD_BK;
  c->nqb = (c->S + c->bq - 1) / c->bq;
  c->nkb = (c->Skv + c->bk - 1) / c->bk;
  int64_t big = c->S > c->Skv ? c->S : c->Skv;
  if (!lathe_blas_fits(big, big, c->D, (lathe_blas_mat){false, c->qss}, (lathe_blas_mat){false, c->kss}, c->D))
    return LATHE_UNIMPL("%s: tensors too large for BLAS's int arguments", lathe_op_name(n->op));
  return NULL;
}

static lathe_status_t run_typed(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out,
                                bool f64) {
  lathe_pool *pool = lathe_cpu_exec_pool(ex);
  actx c = {.n = n};
  atomic_init(&c.oom, false);
  size_t esz = f64 ? sizeof(double) : sizeof(float);
  switch (n->op) {
    case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION: {
      LATHE_RETURN_IF_ERROR(sdpa_geometry(&c, in, false));
      c.out = out[0]->data, c.lse = out[1]->data;
      int64_t items = c.B * c.H * c.nqb, work = c.bq * (c.Skv + 1) * (c.D + 1);
      lathe_parallel_for(pool, items, 1 + (1 << 16) / work, f64 ? fwd_f64 : fwd_f32, &c);
      break;
    }
    case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP: {
      LATHE_RETURN_IF_ERROR(sdpa_geometry(&c, in, true));
      c.o = in[3]->data, c.lse_in = in[4]->data, c.dout = in[5]->data;
      c.dq = out[0]->data, c.dk = out[1]->data, c.dv = out[2]->data;
      for (int k = 0; k < 3; k++) memset(out[k]->data, 0, out[k]->nbytes);
      int64_t rows = c.B * c.H * c.S;
      c.delta = malloc(esz * (size_t)(rows + 1));
      if (!c.delta) return LATHE_OOM(lathe_op_name(n->op));
      lathe_parallel_for(pool, rows, 1 + 32768 / (c.D + 1), f64 ? delta_f64 : delta_f32, &c);
      int64_t groups = c.B * c.Hkv, threads = lathe_pool_threads(pool);
      int64_t work = c.bq * c.bk * (c.D + 1) * c.nqb * c.group; /* per key block */
      if (groups >= 2 * threads || threads == 1) {
        lathe_parallel_for(pool, groups, 1 + (1 << 16) / (work * c.nkb + 1), f64 ? bwd_group_f64 : bwd_group_f32, &c);
      } else {
        lathe_parallel_for(pool, groups * c.nkb, 1 + (1 << 16) / (work + 1), f64 ? bwd_dkv_f64 : bwd_dkv_f32, &c);
        lathe_parallel_for(pool, c.B * c.H * c.nqb, 1 + (1 << 16) / (c.bq * c.bk * (c.D + 1) * c.nkb + 1),
                           f64 ? bwd_dq_f64 : bwd_dq_f32, &c);
      }
      free(c.delta);
      break;
    }
    case LATHE_OP_FUSED_ATTENTION_QKV_PROJECTION: {
      const lathe_shape *xs = &in[0]->shape;
      c.kin = xs->dims[xs->rank - 1];
      int64_t query_dim = lathe_attr_fused_attention_qkv_projection_query_dim(n);
      c.m = c.kin ? lathe_shape_size(xs) / c.kin : lathe_shape_size(&out[0]->shape) / query_dim;
      c.dims[0] = query_dim, c.dims[1] = c.dims[2] = lathe_attr_fused_attention_qkv_projection_key_value_dim(n);
      c.total = c.dims[0] + 2 * c.dims[1];
      c.col0[0] = 0, c.col0[1] = c.dims[0], c.col0[2] = c.dims[0] + c.dims[1];
      c.x = in[0]->data, c.w = in[1]->data;
      if (!c.m) break;
      /* about two items per thread, as large as possible: row panels first, then column
       * tiles of each output when there are too few rows */
      int64_t threads = lathe_pool_threads(pool), want = 2 * threads, nrb = (c.m + 15) / 16;
      if (nrb > want) nrb = want;
      if (nrb < 1) nrb = 1;
      c.rows = (c.m + nrb - 1) / nrb;
      c.rows = c.rows < 16 ? 16 : (c.rows + 7) / 8 * 8;
      nrb = (c.m + c.rows - 1) / c.rows;
      int64_t split = nrb * 3 >= want ? 1 : (want + nrb * 3 - 1) / (nrb * 3);
      int next = 2;
      const bool has_bias[3] = {lathe_attr_fused_attention_qkv_projection_has_bias_q(n),
                                lathe_attr_fused_attention_qkv_projection_has_bias_k(n),
                                lathe_attr_fused_attention_qkv_projection_has_bias_v(n)};
      for (int o = 0; o < 3; o++) {
        c.qkv_bias[o] = has_bias[o] ? in[next++]->data : NULL;
        c.qkv_out[o] = out[o]->data;
        int64_t w = (c.dims[o] + split - 1) / split;
        c.tile_w[o] = w < 64 ? 64 : (w + 15) / 16 * 16;
        c.tiles_of[o] = (c.dims[o] + c.tile_w[o] - 1) / c.tile_w[o];
        c.ntiles += c.tiles_of[o];
      }
      if (!lathe_blas_fits(c.m, c.total, c.kin, (lathe_blas_mat){false, c.kin ? c.kin : 1},
                           (lathe_blas_mat){false, c.total}, c.total))
        return LATHE_UNIMPL("%s: matrices too large for BLAS's int arguments", lathe_op_name(n->op));
      double work = (double)c.m * (double)c.total * (double)(c.kin + 1);
      if (work < (double)(1 << 20)) (f64 ? qkv_f64 : qkv_f32)(&c, 0, nrb * c.ntiles);
      else lathe_parallel_for(pool, nrb * c.ntiles, 1, f64 ? qkv_f64 : qkv_f32, &c);
      break;
    }
    default:
      return LATHE_UNIMPL("%s: not an attention op", lathe_op_name(n->op));
  }
  if (atomic_load(&c.oom)) return LATHE_OOM(lathe_op_name(n->op));
  return NULL;
}

static bool is_half(lathe_dtype dt) { return dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16; }

lathe_status_t lathe_cpu_run_attention(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                       lathe_tensor **out) {
  lathe_dtype dt = in[0]->shape.dtype;
  if (!is_half(dt)) return run_typed(ex, n, in, out, dt == LATHE_DTYPE_FLOAT64);
  /* Float16/BFloat16: Float32 copies of the half operands and results (Bool masks, Int32
   * lengths and the Float32 logsumexp pass through) */
  enum { MAX_IO = 10 };
  lathe_tensor *win[MAX_IO] = {0}, *wout[MAX_IO] = {0}, *own[2 * MAX_IO] = {0};
  int n_own = 0, nin = n->n_operands, nout = n->n_out;
  lathe_status_t st = nin > MAX_IO || nout > MAX_IO ? LATHE_UNIMPL("%s: too many operands", lathe_op_name(n->op)) : NULL;
  for (int i = 0; !st && i < nin; i++) {
    win[i] = in[i];
    if (is_half(in[i]->shape.dtype) && !(st = lathe_cpu_widen_half(in[i], &win[i]))) own[n_own++] = win[i];
  }
  for (int k = 0; !st && k < nout; k++) {
    wout[k] = out[k];
    if (!is_half(out[k]->shape.dtype)) continue;
    lathe_shape s = out[k]->shape;
    s.dtype = LATHE_DTYPE_FLOAT32;
    if (!(st = lathe_cpu_tensor_new(&s, &wout[k]))) own[n_own++] = wout[k];
  }
  if (!st) st = run_typed(ex, n, win, wout, false);
  for (int k = 0; !st && k < nout; k++)
    if (wout[k] != out[k]) lathe_cpu_narrow_half(wout[k], out[k]);
  for (int i = 0; i < n_own; i++) lathe_tensor_release(own[i]);
  return st;
}

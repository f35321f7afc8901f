/* quantized.c -- FusedQuantizedDense and QuantizedEmbeddingLookup on the CPU.
 *
 * The float weights are never materialised: work is split into panels of output features,
 * and each task dequantizes only its panel into a small f32 scratch before multiplying.
 *  - few rows of x (M <= SMALL_M): the panel is streamed one input feature (Linear/NF4) or one
 *    output row (GGML) at a time from L1 and multiplied with plain loops; the weights are read
 *    once, which is what bounds single-token inference.
 *  - more rows: the whole K x panel block is dequantized once and handed to BLAS; tasks also
 *    split the rows of x when there are too few panels to keep the threads busy.
 * Block layouts of the GGML formats are those of llama.cpp (ggml-common.h); the builder
 * (src/graph/ops_quantized.c) has checked every shape, so kernels only read sizes. */
#include <math.h>
#include <stdatomic.h>

#include "blas.h"
#include "dtype_dispatch.h"
#include "kernels.h"
#include "quantized.h"

bool lathe_cpu_supports_quantized(lathe_op op, lathe_dtype dt) {
  switch (op) {
    case LATHE_OP_FUSED_QUANTIZED_DENSE: return dt == LATHE_DTYPE_FLOAT32;
    case LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP: return dt == LATHE_DTYPE_UINT8;
    default: return false;
  }
}

/* ---- GGML blocks: each decoder turns one block into its values ---- */
static inline float half_at(const uint8_t *p) { return lathe_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

static void dec_q4_0(const uint8_t *restrict b, float *restrict y) { /* d, then value i in the low nibble of byte i, i+16 high */
  float d = half_at(b);
  for (int i = 0; i < 16; i++) {
    y[i] = d * (float)((b[2 + i] & 15) - 8);
    y[i + 16] = d * (float)((b[2 + i] >> 4) - 8);
  }
}

static void dec_iq4_nl(const uint8_t *restrict b, float *restrict y) {
  float d = half_at(b);
  for (int i = 0; i < 16; i++) {
    y[i] = d * lathe_iq4nl_table[b[2 + i] & 15];
    y[i + 16] = d * lathe_iq4nl_table[b[2 + i] >> 4];
  }
}

static void dec_q8_0(const uint8_t *restrict b, float *restrict y) {
  float d = half_at(b);
  for (int i = 0; i < 32; i++) y[i] = d * (float)(int8_t)b[2 + i];
}

/* K-quants: 256 values. Q2_K/Q3_K use 16 sub-blocks of 16, with 2-bit quants of value
 * 128h + 32j + 16s + l at bits 2j of byte 32h + 16s + l. */
static void dec_q2_k(const uint8_t *restrict b, float *restrict y) { /* scales[16] (scale | min << 4), qs[64], d, dmin */
  const uint8_t *sc = b, *qs = b + 16;
  float d = half_at(b + 80), dmin = half_at(b + 82);
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < 4; j++)
      for (int s = 0; s < 2; s++) {
        int is = 8 * h + 2 * j + s;
        float dl = d * (float)(sc[is] & 15), ml = dmin * (float)(sc[is] >> 4);
        const uint8_t *q = qs + 32 * h + 16 * s;
        float *o = y + 128 * h + 32 * j + 16 * s;
        for (int l = 0; l < 16; l++) o[l] = dl * (float)((q[l] >> (2 * j)) & 3) - ml;
      }
}

static void dec_q3_k(const uint8_t *restrict b, float *restrict y) { /* hmask[32], qs[64], scales[12] (16 x 6 bits), d */
  const uint8_t *hm = b, *qs = b + 32, *sc = b + 96;
  float d = half_at(b + 108);
  for (int h = 0; h < 2; h++)
    for (int j = 0; j < 4; j++)
      for (int s = 0; s < 2; s++) {
        int is = 8 * h + 2 * j + s;
        int lo = is < 8 ? sc[is] & 15 : sc[is - 8] >> 4, hi = (sc[8 + is % 4] >> (2 * (is / 4))) & 3;
        float dl = d * (float)((lo | hi << 4) - 32);
        const uint8_t *q = qs + 32 * h + 16 * s, *m = hm + 16 * s;
        float *o = y + 128 * h + 32 * j + 16 * s;
        int bit = 4 * h + j; /* a clear high bit subtracts 4 */
        for (int l = 0; l < 16; l++) o[l] = dl * (float)(((q[l] >> (2 * j)) & 3) - ((m[l] >> bit) & 1 ? 0 : 4));
      }
}

/* Q4_K/Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins packed in 12 bytes. */
static inline void k4_scale_min(const uint8_t *s, int j, int *sc, int *mn) {
  if (j < 4) {
    *sc = s[j] & 63;
    *mn = s[j + 4] & 63;
  } else {
    *sc = (s[j + 4] & 15) | (s[j - 4] >> 6) << 4;
    *mn = (s[j + 4] >> 4) | (s[j] >> 6) << 4;
  }
}

/* Value 64c + 32half + l: nibble (low for half 0) of qs[32c + l]; Q5_K adds bit 2c + half of qh[l] as 16. */
static inline void dec_k45(const uint8_t *restrict b, const uint8_t *restrict qh, const uint8_t *restrict qs,
                           float *restrict y) {
  float d = half_at(b), dmin = half_at(b + 2);
  for (int c = 0; c < 4; c++)
    for (int half = 0; half < 2; half++) {
      int sc, mn;
      k4_scale_min(b + 4, 2 * c + half, &sc, &mn);
      float dl = d * (float)sc, ml = dmin * (float)mn;
      const uint8_t *q = qs + 32 * c;
      float *o = y + 64 * c + 32 * half;
      int sh = 4 * half, hb = 2 * c + half;
      if (qh)
        for (int l = 0; l < 32; l++) o[l] = dl * (float)(((q[l] >> sh) & 15) | ((qh[l] >> hb) & 1) << 4) - ml;
      else
        for (int l = 0; l < 32; l++) o[l] = dl * (float)((q[l] >> sh) & 15) - ml;
    }
}
static void dec_q4_k(const uint8_t *restrict b, float *restrict y) { dec_k45(b, NULL, b + 16, y); } /* d, dmin, scales[12], qs[128] */
static void dec_q5_k(const uint8_t *restrict b, float *restrict y) { dec_k45(b, b + 16, b + 48, y); } /* ..., qh[32], qs[128] */

static void dec_q6_k(const uint8_t *restrict b, float *restrict y) { /* ql[128], qh[64], int8 scales[16], d */
  float d = half_at(b + 208);
  const int8_t *sc = (const int8_t *)(b + 192);
  /* value 128h + 32g + l (g < 4, l < 32): nibble g / 2 of ql[64h + 32(g & 1) + l], bits 2g of
   * qh[32h + l], scale 8h + 2g + l / 16 */
  for (int h = 0; h < 2; h++)
    for (int g = 0; g < 4; g++)
      for (int half = 0; half < 2; half++) {
        const uint8_t *ql = b + 64 * h + 32 * (g & 1) + 16 * half, *qh = b + 128 + 32 * h + 16 * half;
        float dl = d * (float)sc[8 * h + 2 * g + half], *o = y + 128 * h + 32 * g + 16 * half;
        int lo = 4 * (g >> 1), hi = 2 * g;
        for (int l = 0; l < 16; l++) o[l] = dl * (float)((((ql[l] >> lo) & 15) | ((qh[l] >> hi) & 3) << 4) - 32);
      }
}

typedef void (*ggml_dec)(const uint8_t *restrict block, float *restrict y);
static const ggml_dec decoders[] = {
    [LATHE_GGML_Q4_0] = dec_q4_0, [LATHE_GGML_Q8_0] = dec_q8_0, [LATHE_GGML_IQ4_NL] = dec_iq4_nl,
    [LATHE_GGML_Q2_K] = dec_q2_k, [LATHE_GGML_Q3_K] = dec_q3_k, [LATHE_GGML_Q4_K] = dec_q4_k,
    [LATHE_GGML_Q5_K] = dec_q5_k, [LATHE_GGML_Q6_K] = dec_q6_k,
};

/* One row of k values. */
static void ggml_row(lathe_ggml_type t, const uint8_t *row, int64_t k, float *y) {
  int vpb = lathe_ggml_block_values(t), bpb = lathe_ggml_block_bytes(t);
  ggml_dec dec = decoders[t];
  for (int64_t i = 0; i < k / vpb; i++) dec(row + i * bpb, y + i * vpb);
}

/* ---- FusedQuantizedDense ---- */
enum { SMALL_M = 4 }; /* measured: 4 beats 16 (BLAS wins from about 8 rows) */

typedef struct qctx {
  int64_t m, k, nn; /* x [m, k] . W [k, nn] -> y [m, nn] */
  const float *x, *bias;
  float *y;
  int scheme, act;
  const lathe_cpu_kernels *kt; /* the activation's Float32 rows */
  lathe_ggml_type gt;
  const void *w; /* Linear/NF4: [k, nn] of w_dtype; GGML: rows of row_bytes, one per output */
  lathe_dtype w_dtype;
  int64_t row_bytes;
  const float *scale, *zp; /* [k, blocks], f32 */
  int64_t bs, blocks;
  int64_t nb, n_panels, mb; /* tasks: panels of nb outputs x blocks of mb rows */
  atomic_int oom;
} qctx;

/* Bias and activation over rows [m0, m1), outputs [j0, j1) of y. */
static void finish(const qctx *c, int64_t m0, int64_t m1, int64_t j0, int64_t j1) {
  if (!c->bias && c->act == LATHE_ACTIVATION_NONE) return;
  for (int64_t r = m0; r < m1; r++) {
    float *y = c->y + r * c->nn;
    if (c->bias)
      for (int64_t j = j0; j < j1; j++) y[j] += c->bias[j];
    c->kt->act_fwd[c->act](y + j0, y + j0, j1 - j0);
  }
}

/* Loops below run in fixed chunks of 8 on restrict pointers: that is what gcc's -O2 cost model
 * vectorises (no runtime alias checks, no versioned epilogues). */
static inline void axpy(float *restrict a, const float *restrict v, float s, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int u = 0; u < 8; u++) a[i + u] += s * v[i + u];
  for (; i < n; i++) a[i] += s * v[i];
}

/* dst[0, n) = the codes W[kk, j0:j0+n) as floats: the integer (Linear) or the NF4 table entry. */
#define DEFINE_CODES(T, SUF)                                                                       \
  static void codes_##SUF(const T *restrict w, int64_t n, bool nf4, float *restrict dst) {          \
    int64_t i = 0;                                                                                  \
    if (nf4) {                                                                                      \
      for (; i < n; i++) dst[i] = lathe_nf4_table[(uint8_t)w[i] & 15];                              \
      return;                                                                                       \
    }                                                                                               \
    for (; i + 8 <= n; i += 8)                                                                      \
      for (int u = 0; u < 8; u++) dst[i + u] = (float)w[i + u];                                     \
    for (; i < n; i++) dst[i] = (float)w[i];                                                        \
  }
DEFINE_CODES(int8_t, s8)
DEFINE_CODES(uint8_t, u8)

/* Packed Int2/Int4/Uint2/Uint4 codes, read in place: the interpreter widens sub-byte operands
 * to 8 bits before most kernels, a whole extra pass over the weights, which this op does not
 * need when the device hands it the packed tensor. */
static void codes_packed(const uint8_t *restrict p, lathe_dtype dt, int64_t at, int64_t n, bool nf4, float *restrict dst) {
  int bits = lathe_dtype_bits(dt), per = 8 / bits; /* 2 or 4 bits: the builder allows no others */
  unsigned mask = (1u << bits) - 1;
  bool sgn = lathe_dtype_class_of(dt) == LATHE_CLASS_SINT;
  float lut[16]; /* raw field -> code, so the loops below are shifts and loads only */
  for (unsigned v = 0; v <= mask; v++) {
    int q = sgn && v >> (bits - 1) ? (int)v - (1 << bits) : (int)v;
    lut[v] = nf4 ? lathe_nf4_table[q & 15] : (float)q;
  }
  int64_t i = 0;
  for (; i < n && (at + i) % per; i++) dst[i] = lut[(p[(at + i) / per] >> ((at + i) % per * bits)) & mask];
  const uint8_t *b = p + (at + i) / per;
  if (bits == 4)
    for (; i + 2 <= n; i += 2, b++) dst[i] = lut[*b & 15], dst[i + 1] = lut[*b >> 4];
  else
    for (; i + 4 <= n; i += 4, b++)
      for (int u = 0; u < 4; u++) dst[i + u] = lut[(*b >> (2 * u)) & 3];
  for (; i < n; i++) dst[i] = lut[(p[(at + i) / per] >> ((at + i) % per * bits)) & mask];
}

static void codes(const qctx *c, int64_t kk, int64_t j0, int64_t n, float *dst) {
  int64_t at = kk * c->nn + j0;
  bool nf4 = c->scheme == LATHE_QUANT_NF4;
  if (lathe_dtype_bits(c->w_dtype) < 8) codes_packed(c->w, c->w_dtype, at, n, nf4, dst);
  else if (lathe_dtype_class_of(c->w_dtype) == LATHE_CLASS_SINT) codes_s8((const int8_t *)c->w + at, n, nf4, dst);
  else codes_u8((const uint8_t *)c->w + at, n, nf4, dst);
}

/* dst[0, j1 - j0) = dequantized W[kk, j0:j1): codes * scale + zero point, one run per block. */
static void deq(const qctx *c, int64_t kk, int64_t j0, int64_t j1, float *restrict dst) {
  codes(c, kk, j0, j1 - j0, dst);
  const float *s = c->scale + kk * c->blocks, *z = c->zp ? c->zp + kk * c->blocks : NULL;
  for (int64_t j = j0; j < j1;) {
    int64_t b = j / c->bs, e = (b + 1) * c->bs < j1 ? (b + 1) * c->bs : j1;
    float sv = s[b], zv = z ? z[b] : 0, *d = dst + (j - j0);
    int64_t n = e - j, i = 0;
    for (; i + 8 <= n; i += 8)
      for (int u = 0; u < 8; u++) d[i + u] = d[i + u] * sv + zv;
    for (; i < n; i++) d[i] = d[i] * sv + zv;
    j = e;
  }
}

static float dot(const float *restrict a, const float *restrict b, int64_t n) {
  float acc[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) /* eight independent sums: the loop vectorises without -ffast-math */
    for (int u = 0; u < 8; u++) acc[u] += a[i + u] * b[i + u];
  float s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; i++) s += a[i] * b[i];
  return s;
}

/* Scratch floats one task needs. */
static int64_t scratch_floats(const qctx *c, bool small) {
  if (c->scheme == LATHE_QUANT_GGML) return 1 + (small ? c->k : c->nb * c->k);
  return 1 + (small ? c->nb * (SMALL_M + 1) + SMALL_M * (c->nb + 2) : c->nb * c->k);
}

/* Few rows: stream the panel from L1, every weight read once. */
static void small_task(const qctx *c, int64_t p, float *scr) {
  int64_t j0 = p * c->nb, j1 = j0 + c->nb < c->nn ? j0 + c->nb : c->nn, w = j1 - j0;
  if (c->scheme == LATHE_QUANT_GGML) {
    for (int64_t j = j0; j < j1; j++) {
      ggml_row(c->gt, (const uint8_t *)c->w + j * c->row_bytes, c->k, scr);
      for (int64_t r = 0; r < c->m; r++) c->y[r * c->nn + j] = dot(c->x + r * c->k, scr, c->k);
    }
  } else {
    /* y[r, j] = sum_k (x[r, k] * scale[k, b]) * code[k, j] + sum_k x[r, k] * zero_point[k, b], b = j / bs:
     * the codes of row k are converted once and shared by every row of x */
    int64_t b0 = j0 / c->bs, nbk = (j1 - 1) / c->bs - b0 + 1;
    float *row = scr, *acc = row + c->nb, *zs = acc + SMALL_M * c->nb;
    for (int64_t r0 = 0; r0 < c->m; r0 += SMALL_M) { /* more rows only when BLAS cannot take them */
      int64_t r1 = r0 + SMALL_M < c->m ? r0 + SMALL_M : c->m;
      memset(acc, 0, sizeof(float) * (size_t)(SMALL_M * w));
      memset(zs, 0, sizeof(float) * (size_t)(SMALL_M * nbk));
      for (int64_t kk = 0; kk < c->k; kk++) {
        codes(c, kk, j0, w, row);
        const float *s = c->scale + kk * c->blocks, *z = c->zp ? c->zp + kk * c->blocks : NULL;
        for (int64_t j = j0; j < j1;) {
          int64_t b = j / c->bs, e = (b + 1) * c->bs < j1 ? (b + 1) * c->bs : j1;
          for (int64_t r = r0; r < r1; r++) {
            float xv = c->x[r * c->k + kk];
            axpy(acc + (r - r0) * w + (j - j0), row + (j - j0), xv * s[b], e - j);
            if (z) zs[(r - r0) * nbk + b - b0] += xv * z[b];
          }
          j = e;
        }
      }
      for (int64_t r = r0; r < r1; r++) {
        float *y = c->y + r * c->nn;
        const float *a = acc + (r - r0) * w, *zr = zs + (r - r0) * nbk;
        for (int64_t j = j0; j < j1; j++) y[j] = a[j - j0] + (c->zp ? zr[j / c->bs - b0] : 0);
      }
    }
  }
  finish(c, 0, c->m, j0, j1);
}

/* Many rows: dequantize the K x panel block once, BLAS multiplies rows [m0, m1) by it. */
static void blas_task(const qctx *c, int64_t t, float *scr) {
  int64_t p = t % c->n_panels, mbi = t / c->n_panels;
  int64_t j0 = p * c->nb, j1 = j0 + c->nb < c->nn ? j0 + c->nb : c->nn, w = j1 - j0;
  int64_t m0 = mbi * c->mb, m1 = m0 + c->mb < c->m ? m0 + c->mb : c->m;
  lathe_blas_mat bm;
  if (c->scheme == LATHE_QUANT_GGML) { /* panel [w, k]: the transpose of what the product needs */
    for (int64_t j = j0; j < j1; j++) ggml_row(c->gt, (const uint8_t *)c->w + j * c->row_bytes, c->k, scr + (j - j0) * c->k);
    bm = (lathe_blas_mat){true, c->k};
  } else {
    for (int64_t kk = 0; kk < c->k; kk++) deq(c, kk, j0, j1, scr + kk * w);
    bm = (lathe_blas_mat){false, w};
  }
  lathe_blas_gemm(LATHE_DTYPE_FLOAT32, m1 - m0, w, c->k, c->x + m0 * c->k, (lathe_blas_mat){false, c->k}, scr, bm,
                  c->y + m0 * c->nn + j0, c->nn);
  finish(c, m0, m1, j0, j1);
}

static void small_range(void *vc, int64_t b, int64_t e) {
  qctx *c = vc;
  float *scr = malloc(sizeof(float) * (size_t)scratch_floats(c, true));
  if (!scr) {
    atomic_store(&c->oom, 1);
    return;
  }
  for (int64_t p = b; p < e; p++) small_task(c, p, scr);
  free(scr);
}

static void blas_range(void *vc, int64_t b, int64_t e) {
  qctx *c = vc;
  float *scr = malloc(sizeof(float) * (size_t)scratch_floats(c, false));
  if (!scr) {
    atomic_store(&c->oom, 1);
    return;
  }
  for (int64_t t = b; t < e; t++) blas_task(c, t, scr);
  free(scr);
}

static int64_t round16(int64_t v) { return (v + 15) / 16 * 16; }

/* A float copy of a Float32/Float16/BFloat16 [k, blocks] tensor (borrowed if already f32). */
static lathe_status_t scale_f32(const lathe_tensor *t, const float **out, float **owned) {
  *owned = NULL;
  if (t->shape.dtype == LATHE_DTYPE_FLOAT32) {
    *out = t->data;
    return NULL;
  }
  int64_t n = lathe_shape_size(&t->shape);
  float *f = malloc(sizeof(float) * (size_t)(n ? n : 1));
  if (!f) return LATHE_OOM("FusedQuantizedDense");
  lathe_halves_to_f32(t->shape.dtype, t->data, f, n);
  *out = *owned = f;
  return NULL;
}

static lathe_status_t run_dense(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  qctx c = {.scheme = (int)lathe_attr_quantized_scheme(n), .gt = lathe_attr_quantized_ggml_type(n),
            .bs = lathe_attr_quantized_block_size(n), .act = (int)lathe_attr_quantized_activation(n),
            .kt = lathe_cpu_exec_kernels(ex)};
  const lathe_shape *xs = &in[0]->shape;
  c.k = lathe_attr_quantized_in_features(n);
  c.nn = lathe_attr_quantized_out_features(n);
  c.m = c.k ? lathe_shape_size(xs) / c.k : lathe_shape_size(&out[0]->shape) / (c.nn ? c.nn : 1);
  c.x = in[0]->data;
  c.y = out[0]->data;
  c.w = in[1]->data;
  c.w_dtype = in[1]->shape.dtype;
  c.row_bytes = in[1]->shape.rank == 2 ? in[1]->shape.dims[1] : 0;
  int next = 2;
  float *own_scale = NULL, *own_zp = NULL;
  lathe_status_t st = NULL;
  if (c.scheme != LATHE_QUANT_GGML) {
    c.blocks = in[2]->shape.dims[1];
    st = scale_f32(in[next++], &c.scale, &own_scale);
    if (!st && lathe_attr_quantized_has_zero_point(n)) st = scale_f32(in[next++], &c.zp, &own_zp);
  }
  if (lathe_attr_quantized_has_bias(n)) c.bias = in[next]->data;
  if (st || !c.m || !c.nn) goto done;
  atomic_init(&c.oom, 0);
  lathe_pool *pool = lathe_cpu_exec_pool(ex);
  int64_t threads = lathe_pool_threads(pool);
  bool small = c.m <= SMALL_M || !c.k ||
               !lathe_blas_fits(c.m, c.nn, c.k, (lathe_blas_mat){false, c.k}, (lathe_blas_mat){true, c.k}, c.nn);
  if (small) {
    /* GGML decodes whole rows, so any panel width works; Linear/NF4 keep the panel in L1 */
    c.nb = lathe_clamp64(round16(c.nn / (4 * threads)), 16, c.scheme == LATHE_QUANT_GGML ? 1024 : 256);
    c.n_panels = (c.nn + c.nb - 1) / c.nb;
    int64_t work = c.k * c.nb * (c.m + 1); /* per panel */
    lathe_parallel_for(pool, c.n_panels, 1 + (1 << 16) / (work + 1), small_range, &c);
  } else {
    /* a panel of about 1 MiB, at least 64 outputs wide so BLAS's packing of x stays cheap */
    c.nb = lathe_clamp64(round16((1 << 18) / c.k), 64, 512);
    c.nb = c.nb > c.nn ? c.nn : c.nb;
    c.n_panels = (c.nn + c.nb - 1) / c.nb;
    int64_t m_blocks = 1;
    if (c.n_panels < 2 * threads) m_blocks = lathe_clamp64((2 * threads + c.n_panels - 1) / c.n_panels, 1, (c.m + 31) / 32);
    c.mb = (c.m + m_blocks - 1) / m_blocks;
    m_blocks = (c.m + c.mb - 1) / c.mb;
    lathe_parallel_for(pool, c.n_panels * m_blocks, 1, blas_range, &c);
  }
  if (atomic_load(&c.oom)) st = LATHE_OOM("FusedQuantizedDense");
done:
  free(own_scale);
  free(own_zp);
  return st;
}

/* ---- QuantizedEmbeddingLookup ---- */
typedef struct ectx {
  const int64_t *rows;
  const uint8_t *data;
  int64_t row_bytes, k;
  lathe_ggml_type gt;
  float *y;
} ectx;

static void lookup_range(void *vc, int64_t b, int64_t e) {
  ectx *c = vc;
  for (int64_t i = b; i < e; i++) ggml_row(c->gt, c->data + c->rows[i] * c->row_bytes, c->k, c->y + i * c->k);
}

static lathe_status_t run_lookup(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  ectx c = {.data = in[0]->data, .row_bytes = in[0]->shape.dims[1], .k = lathe_attr_quantized_in_features(n),
            .gt = lathe_attr_quantized_ggml_type(n), .y = out[0]->data};
  int64_t vocab = in[0]->shape.dims[0], count = lathe_shape_size(&in[1]->shape);
  if (!count || !c.k) return NULL;
  int64_t *rows = malloc(sizeof(int64_t) * (size_t)count);
  if (!rows) return LATHE_OOM("QuantizedEmbeddingLookup");
  /* every index is checked before any row is read: a bad one fails the execution, as in GoMLX */
  for (int64_t i = 0; i < count; i++) {
    rows[i] = lathe_load_index(in[1]->data, in[1]->shape.dtype, i);
    if (rows[i] < 0 || rows[i] >= vocab) {
      lathe_status_t st = LATHE_INVALID("QuantizedEmbeddingLookup: index %lld (position %lld) out of range [0, %lld)",
                                        (long long)rows[i], (long long)i, (long long)vocab);
      free(rows);
      return st;
    }
  }
  c.rows = rows;
  lathe_parallel_for(lathe_cpu_exec_pool(ex), count, 1 + 32768 / c.k, lookup_range, &c);
  free(rows);
  return NULL;
}

lathe_status_t lathe_cpu_run_quantized(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                       lathe_tensor **out) {
  switch (n->op) {
    case LATHE_OP_FUSED_QUANTIZED_DENSE: return run_dense(ex, n, in, out);
    case LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP: return run_lookup(ex, n, in, out);
    default: return LATHE_UNIMPL("%s: not a quantized op", lathe_op_name(n->op));
  }
}

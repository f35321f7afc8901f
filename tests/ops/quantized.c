/* quantized.c -- conformance rows for FusedQuantizedDense and QuantizedEmbeddingLookup.
 *
 * GGML blocks are built here from known floats by this file's own quantizer (encode), then
 * decoded by this file's reference decoder in double, which addresses every value through
 * its (byte, shift, scale index) position in the block as llama.cpp lays it out; the round
 * trip is checked against the original floats, so a misplaced bit or scale shows up twice.
 * Expected outputs are the decoded weights times x, computed naively in double. */
#include "core/core.h"
#include "testing.h"

#define F32 LATHE_DTYPE_FLOAT32

static uint32_t rng_state = 12345;
static double urand(void) { /* [0, 1) */
  rng_state = rng_state * 1664525u + 1013904223u;
  return (rng_state >> 8) / 16777216.0;
}
static double srand1(void) { return 2 * urand() - 1; }

static const double nf4[16] = {
    -1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334,
    -0.09105003625154495, 0, 0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
    0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0};
static const double iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* ---- the test's GGML codec ---- */
static const int VPB[] = {32, 32, 32, 256, 256, 256, 256, 256};
static const int BPB[] = {18, 34, 18, 84, 110, 144, 176, 210};
static const char *TNAME[] = {"Q4_0", "Q8_0", "IQ4_NL", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"};

static void put_half(uint8_t *p, float v) {
  uint16_t h = lathe_f32_to_f16(v);
  p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}
static double get_half(const uint8_t *p) { return lathe_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }
static void put_bits(uint8_t *p, int shift, int width, int v) {
  *p = (uint8_t)((*p & ~(((1 << width) - 1) << shift)) | (v & ((1 << width) - 1)) << shift);
}
static int get_bits(const uint8_t *p, int shift, int width) { return (*p >> shift) & ((1 << width) - 1); }
static int clampi(long v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

/* Where the quant of value i sits: low bits (byte, shift, width) and, for Q3_K/Q5_K/Q6_K,
 * high bits (hbyte, hshift, hwidth); and the index of its scale (sub-block). */
typedef struct {
  int byte, shift, width, hbyte, hshift, hwidth, sub;
} qpos;
static qpos pos_of(int t, int i) {
  qpos p = {0};
  switch (t) {
    case LATHE_GGML_Q4_0:
    case LATHE_GGML_IQ4_NL: return (qpos){2 + i % 16, i < 16 ? 0 : 4, 4, 0, 0, 0, 0};
    case LATHE_GGML_Q8_0: return (qpos){2 + i, 0, 8, 0, 0, 0, 0};
    case LATHE_GGML_Q2_K: /* qs at 16 */
    case LATHE_GGML_Q3_K: { /* hmask at 0, qs at 32 */
      int h = i / 128, j = i % 128 / 32, s = i % 32 / 16, l = i % 16;
      p = (qpos){(t == LATHE_GGML_Q2_K ? 16 : 32) + 32 * h + 16 * s + l, 2 * j, 2, 0, 0, 0, i / 16};
      if (t == LATHE_GGML_Q3_K) p.hbyte = i % 32, p.hshift = i / 32, p.hwidth = 1;
      return p;
    }
    case LATHE_GGML_Q4_K:
    case LATHE_GGML_Q5_K: {
      int c = i / 64, half = i % 64 / 32, l = i % 32;
      p = (qpos){(t == LATHE_GGML_Q4_K ? 16 : 48) + 32 * c + l, 4 * half, 4, 0, 0, 0, i / 32};
      if (t == LATHE_GGML_Q5_K) p.hbyte = 16 + l, p.hshift = i / 32, p.hwidth = 1;
      return p;
    }
    default: { /* Q6_K: ql at 0, qh at 128 */
      int h = i / 128, g = i % 128 / 32, l = i % 32;
      return (qpos){64 * h + (g & 1) * 32 + l, (g >> 1) * 4, 4, 128 + 32 * h + l, 2 * g, 2, i / 16};
    }
  }
}

/* 6-bit scale/min j of Q4_K/Q5_K at sc (12 bytes). */
static void k4_put(uint8_t *sc, int j, int s, int m) {
  if (j < 4) {
    put_bits(&sc[j], 0, 6, s);
    put_bits(&sc[j + 4], 0, 6, m);
  } else {
    put_bits(&sc[j + 4], 0, 4, s & 15);
    put_bits(&sc[j - 4], 6, 2, s >> 4);
    put_bits(&sc[j + 4], 4, 4, m & 15);
    put_bits(&sc[j], 6, 2, m >> 4);
  }
}
static void k4_get(const uint8_t *sc, int j, int *s, int *m) {
  if (j < 4) {
    *s = get_bits(&sc[j], 0, 6), *m = get_bits(&sc[j + 4], 0, 6);
  } else {
    *s = get_bits(&sc[j + 4], 0, 4) | get_bits(&sc[j - 4], 6, 2) << 4;
    *m = get_bits(&sc[j + 4], 4, 4) | get_bits(&sc[j], 6, 2) << 4;
  }
}
/* 6-bit scale is of Q3_K at sc (12 bytes), stored with +32. */
static void k3_put(uint8_t *sc, int is, int v) {
  put_bits(is < 8 ? &sc[is] : &sc[is - 8], is < 8 ? 0 : 4, 4, v & 15);
  put_bits(&sc[8 + is % 4], 2 * (is / 4), 2, v >> 4);
}
static int k3_get(const uint8_t *sc, int is) {
  return (get_bits(is < 8 ? &sc[is] : &sc[is - 8], is < 8 ? 0 : 4, 4) | get_bits(&sc[8 + is % 4], 2 * (is / 4), 2) << 4);
}

/* Reference: value i of block b in double. */
static double ref_value(int t, const uint8_t *b, int i) {
  qpos p = pos_of(t, i);
  int q = get_bits(b + p.byte, p.shift, p.width);
  if (p.hwidth) q |= get_bits(b + p.hbyte, p.hshift, p.hwidth) << p.width;
  switch (t) {
    case LATHE_GGML_Q4_0: return get_half(b) * (q - 8);
    case LATHE_GGML_IQ4_NL: return get_half(b) * iq4nl[q];
    case LATHE_GGML_Q8_0: return get_half(b) * (int8_t)q;
    case LATHE_GGML_Q2_K: return get_half(b + 80) * (b[p.sub] & 15) * q - get_half(b + 82) * (b[p.sub] >> 4);
    case LATHE_GGML_Q3_K: return get_half(b + 108) * (k3_get(b + 96, p.sub) - 32) * (q - 4);
    case LATHE_GGML_Q4_K:
    case LATHE_GGML_Q5_K: {
      int s, m;
      k4_get(b + 4, p.sub, &s, &m);
      return get_half(b) * s * q - get_half(b + 2) * m;
    }
    default: return get_half(b + 208) * (int8_t)b[192 + p.sub] * (q - 32);
  }
}

/* Encodes vpb floats v into block b (zeroed by the caller). */
static void encode(int t, const float *v, uint8_t *b) {
  int vpb = VPB[t];
  double amax = 0;
  for (int i = 0; i < vpb; i++) amax = fmax(amax, fabs(v[i]));
  switch (t) {
    case LATHE_GGML_Q4_0:
    case LATHE_GGML_Q8_0:
    case LATHE_GGML_IQ4_NL: {
      double d = amax / (t == LATHE_GGML_Q4_0 ? 7 : t == LATHE_GGML_Q8_0 ? 127 : 127);
      put_half(b, (float)d);
      d = get_half(b);
      for (int i = 0; i < vpb; i++) {
        int q;
        if (t == LATHE_GGML_IQ4_NL) {
          q = 0;
          for (int c = 1; c < 16; c++) q = fabs(d * iq4nl[c] - v[i]) < fabs(d * iq4nl[q] - v[i]) ? c : q;
        } else {
          q = d ? (int)lround(v[i] / d) : 0;
          q = t == LATHE_GGML_Q4_0 ? clampi(q + 8, 0, 15) : clampi(q, -127, 127) & 255;
        }
        qpos p = pos_of(t, i);
        put_bits(b + p.byte, p.shift, p.width, q);
      }
      return;
    }
    case LATHE_GGML_Q2_K:
    case LATHE_GGML_Q4_K:
    case LATHE_GGML_Q5_K: { /* affine sub-blocks: value = d*sc*q - dmin*m */
      int sub = t == LATHE_GGML_Q2_K ? 16 : 32, nsub = vpb / sub, qmax = t == LATHE_GGML_Q2_K ? 3 : t == LATHE_GGML_Q4_K ? 15 : 31;
      int smax = t == LATHE_GGML_Q2_K ? 15 : 63;
      double sc[16], mn[16], dmax = 0, mmax = 0;
      for (int s = 0; s < nsub; s++) {
        double lo = 0, hi = 0;
        for (int i = 0; i < sub; i++) lo = fmin(lo, v[s * sub + i]), hi = fmax(hi, v[s * sub + i]);
        sc[s] = (hi - lo) / qmax, mn[s] = -lo;
        dmax = fmax(dmax, sc[s]), mmax = fmax(mmax, mn[s]);
      }
      uint8_t *d_at = t == LATHE_GGML_Q2_K ? b + 80 : b;
      put_half(d_at, (float)(dmax / smax));
      put_half(d_at + 2, (float)(mmax / smax));
      double d = get_half(d_at), dmin = get_half(d_at + 2);
      for (int s = 0; s < nsub; s++) {
        int is = d ? clampi(lround(sc[s] / d), 0, smax) : 0, im = dmin ? clampi(lround(mn[s] / dmin), 0, smax) : 0;
        if (t == LATHE_GGML_Q2_K) b[s] = (uint8_t)(is | im << 4);
        else k4_put(b + 4, s, is, im);
        double step = d * is, off = dmin * im;
        for (int i = s * sub; i < (s + 1) * sub; i++) {
          int q = step ? clampi(lround((v[i] + off) / step), 0, qmax) : 0;
          qpos p = pos_of(t, i);
          put_bits(b + p.byte, p.shift, p.width, q);
          if (p.hwidth) put_bits(b + p.hbyte, p.hshift, p.hwidth, q >> p.width);
        }
      }
      return;
    }
    default: { /* Q3_K, Q6_K: symmetric sub-blocks of 16 with signed scales */
      bool six = t == LATHE_GGML_Q6_K;
      int qlo = six ? -32 : -4, qhi = six ? 31 : 3, smax = six ? 127 : 31;
      double sc[16], dmax = 0;
      for (int s = 0; s < 16; s++) {
        double ext = 0; /* signed extreme, mapped to qlo so the larger side uses the full range */
        for (int i = 0; i < 16; i++) ext = fabs(v[s * 16 + i]) > fabs(ext) ? v[s * 16 + i] : ext;
        sc[s] = ext / qlo;
        dmax = fmax(dmax, fabs(sc[s]));
      }
      uint8_t *d_at = six ? b + 208 : b + 108;
      put_half(d_at, (float)(dmax / smax));
      double d = get_half(d_at);
      for (int s = 0; s < 16; s++) {
        int is = d ? clampi(lround(sc[s] / d), -smax - (six ? 1 : 1), smax) : 0;
        if (six) b[192 + s] = (uint8_t)(int8_t)is;
        else k3_put(b + 96, s, is + 32);
        double step = d * is;
        for (int i = s * 16; i < s * 16 + 16; i++) {
          int q = step ? clampi(lround(v[i] / step), qlo, qhi) : 0, u = q - qlo;
          qpos p = pos_of(t, i);
          put_bits(b + p.byte, p.shift, p.width, u);
          put_bits(b + p.hbyte, p.hshift, p.hwidth, u >> p.width);
        }
      }
      return;
    }
  }
}

/* rows x k floats (varying magnitude per 16 values, so sub-block scales differ) encoded as GGML
 * rows into *bytes, decoded in double into *ref. Checks the codec's round trip. */
static void make_ggml(int t, int64_t rows, int64_t k, uint8_t **bytes, double **ref) {
  int64_t nblk = k / VPB[t], rb = nblk * BPB[t];
  float *v = malloc(sizeof(float) * (size_t)(rows * k + 1));
  *bytes = calloc((size_t)(rows * rb + 1), 1);
  *ref = malloc(sizeof(double) * (size_t)(rows * k + 1));
  double err = 0, mag = 0;
  for (int64_t i = 0; i < rows * k; i += 16) {
    double amp = 0.05 + urand();
    for (int64_t j = i; j < i + 16 && j < rows * k; j++) v[j] = (float)(amp * srand1());
  }
  for (int64_t r = 0; r < rows; r++)
    for (int64_t bl = 0; bl < nblk; bl++) {
      uint8_t *b = *bytes + r * rb + bl * BPB[t];
      encode(t, v + r * k + bl * VPB[t], b);
      for (int i = 0; i < VPB[t]; i++) {
        int64_t at = r * k + bl * VPB[t] + i;
        (*ref)[at] = ref_value(t, b, i);
        err += fabs((*ref)[at] - v[at]), mag += fabs(v[at]);
      }
    }
  /* mean error relative to mean magnitude: 2-bit codes are coarse, 8-bit ones fine */
  double bound = t == LATHE_GGML_Q2_K ? 0.35 : t == LATHE_GGML_Q3_K ? 0.25 : t == LATHE_GGML_Q8_0 ? 0.02 : 0.15;
  CHECK(!mag || err / mag < bound, "%s codec round trip: relative error %g > %g", TNAME[t], err / mag, bound);
  free(v);
}

static void fill_x(float *x, int64_t n) {
  for (int64_t i = 0; i < n; i++) x[i] = (float)srand1();
}

/* Runs b's main on ins and compares its one Float32 output with want. */
static void run_expect(lathe_builder_t b, const void **ins, int n_in, const double *want, int64_t n, double tol,
                       const char *label) {
  float *w32 = malloc(sizeof(float) * (size_t)(n + 1));
  for (int64_t i = 0; i < n; i++) w32[i] = (float)want[i];
  void *got[1] = {NULL};
  lathe_status_t st = tst_run(b, ins, n_in, got, 1, NULL);
  CHECK(st == NULL, "%s run: %s", label, lathe_status_message(st));
  if (!st) tst_expect_close(label, got[0], w32, F32, n, tol);
  lathe_status_free(st);
  tst_free_output(got[0]);
  free(w32);
}

/* ---- FusedQuantizedDense, GGML ---- */
static void ggml_dense_case(int t, int64_t m, int64_t nblk, int64_t nf, bool with_bias, lathe_activation act) {
  int64_t k = nblk * VPB[t], rb = nblk * BPB[t];
  uint8_t *wb;
  double *wref;
  make_ggml(t, nf, k, &wb, &wref);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("qdense_ggml", &fn);
  lathe_shape xs = TST_SHAPE(F32, 2, m, k), ws = TST_SHAPE(LATHE_DTYPE_UINT8, nf, rb), bs = TST_SHAPE(F32, nf);
  lathe_value_t x, w, bias = NULL, y;
  x = tst_param(fn, "x", xs);
  w = tst_param(fn, "w", ws);
  if (with_bias) bias = tst_param(fn, "b", bs);
  lathe_quantization q = {.scheme = LATHE_QUANT_GGML, .ggml_type = (lathe_ggml_type)t};
  CHECK_OK(lathe_fused_quantized_dense(fn, x, w, &q, NULL, NULL, bias, act, &y));
  lathe_shape ys;
  CHECK_OK(lathe_value_shape(y, &ys));
  CHECK(ys.rank == 3 && ys.dims[0] == 2 && ys.dims[1] == m && ys.dims[2] == nf && ys.dtype == F32, "%s result shape",
        TNAME[t]);
  CHECK_OK(lathe_function_return(fn, &y, 1));
  float *xd = malloc(sizeof(float) * (size_t)(2 * m * k + 1)), *bd = malloc(sizeof(float) * (size_t)(nf + 1));
  fill_x(xd, 2 * m * k);
  fill_x(bd, nf);
  double *want = malloc(sizeof(double) * (size_t)(2 * m * nf + 1));
  for (int64_t r = 0; r < 2 * m; r++)
    for (int64_t j = 0; j < nf; j++) {
      double acc = with_bias ? bd[j] : 0;
      for (int64_t i = 0; i < k; i++) acc += xd[r * k + i] * wref[j * k + i];
      want[r * nf + j] = tst_activation_ref(acc, act);
    }
  const void *ins[3] = {xd, wb, bd};
  char label[96];
  snprintf(label, sizeof label, "FusedQuantizedDense %s m=%lld k=%lld n=%lld", TNAME[t], (long long)(2 * m), (long long)k,
           (long long)nf);
  run_expect(b, ins, with_bias ? 3 : 2, want, 2 * m * nf, 2e-6 * (double)(k + 8), label);
  free(xd), free(bd), free(want), free(wb), free(wref);
  lathe_builder_free(b);
}

TEST(quantized_dense_ggml) {
  for (int t = 0; t < 8; t++) {
    ggml_dense_case(t, 1, 1, 7, true, LATHE_ACTIVATION_NONE);  /* 2 rows: the streaming path */
    ggml_dense_case(t, 3, 2, 33, false, LATHE_ACTIVATION_GELU); /* 6 rows: the BLAS path */
    ggml_dense_case(t, 1, 3, 1, false, LATHE_ACTIVATION_RELU);
    ggml_dense_case(t, 0, 1, 5, true, LATHE_ACTIVATION_NONE); /* no rows */
    ggml_dense_case(t, 2, 1, 0, true, LATHE_ACTIVATION_SILU); /* no outputs */
    ggml_dense_case(t, 1, 0, 3, true, LATHE_ACTIVATION_TANH); /* K = 0: bias only */
  }
  /* threaded, both paths, with every activation */
  for (int a = 0; a < LATHE_ACTIVATION_SWIGLU; a++) /* every activation the dense ops take */
    ggml_dense_case(LATHE_GGML_Q8_0, 3, 2, 33, true, (lathe_activation)a);
  ggml_dense_case(LATHE_GGML_Q4_0, 1, 8, 301, true, LATHE_ACTIVATION_HARD_SWISH);
  ggml_dense_case(LATHE_GGML_Q8_0, 40, 8, 131, true, LATHE_ACTIVATION_SILU);
  ggml_dense_case(LATHE_GGML_Q4_K, 33, 2, 97, true, LATHE_ACTIVATION_TANH);
  ggml_dense_case(LATHE_GGML_Q6_K, 1, 3, 257, false, LATHE_ACTIVATION_GELU);
}

/* ---- FusedQuantizedDense, Linear and NF4 ---- */
static void linear_case(lathe_quant_scheme scheme, lathe_dtype wdt, lathe_dtype sdt, int64_t m, int64_t k, int64_t nf,
                        int64_t block, bool with_zp, bool with_bias, lathe_activation act) {
  int64_t blocks = nf ? (nf + block - 1) / block : 0;
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("qdense_linear", &fn);
  lathe_shape xs = TST_SHAPE(F32, m, k), ws = TST_SHAPE(wdt, k, nf), ss = TST_SHAPE(sdt, k, blocks),
              bs = TST_SHAPE(F32, nf);
  lathe_value_t x, w, s, zp = NULL, bias = NULL, y;
  x = tst_param(fn, "x", xs);
  w = tst_param(fn, "w", ws);
  s = tst_param(fn, "scale", ss);
  if (with_zp) zp = tst_param(fn, "zp", ss);
  if (with_bias) bias = tst_param(fn, "b", bs);
  lathe_quantization q = {.scheme = scheme, .block_axis = 1, .block_size = block};
  CHECK_OK(lathe_fused_quantized_dense(fn, x, w, &q, s, zp, bias, act, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  float *xd = malloc(sizeof(float) * (size_t)(m * k + 1)), *bd = malloc(sizeof(float) * (size_t)(nf + 1));
  void *wd = tst_alloc_for(&ws), *sd = tst_alloc_for(&ss), *zd = tst_alloc_for(&ss);
  fill_x(xd, m * k);
  fill_x(bd, nf);
  int bits = lathe_dtype_bits(wdt);
  bool sgn = wdt == LATHE_DTYPE_INT8 || wdt == LATHE_DTYPE_INT4 || wdt == LATHE_DTYPE_INT2;
  for (int64_t i = 0; i < k * nf; i++) {
    int64_t span = (int64_t)1 << bits, v = (int64_t)(urand() * (double)span);
    tst_set(wd, wdt, i, (double)(sgn ? v - span / 2 : v));
  }
  for (int64_t i = 0; i < k * blocks; i++) {
    tst_set(sd, sdt, i, 0.01 + 0.1 * urand());
    tst_set(zd, sdt, i, 0.2 * srand1());
  }
  double *want = malloc(sizeof(double) * (size_t)(m * nf + 1));
  for (int64_t r = 0; r < m; r++)
    for (int64_t j = 0; j < nf; j++) {
      double acc = with_bias ? bd[j] : 0;
      for (int64_t i = 0; i < k; i++) {
        double qv = tst_get(wd, wdt, i * nf + j), sv = tst_get(sd, sdt, i * blocks + j / block);
        double wv = scheme == LATHE_QUANT_NF4 ? nf4[(int64_t)qv & 15] * sv : qv * sv + (with_zp ? tst_get(zd, sdt, i * blocks + j / block) : 0);
        acc += xd[r * k + i] * wv;
      }
      want[r * nf + j] = tst_activation_ref(acc, act);
    }
  const void *ins[5];
  int n_in = 0;
  ins[n_in++] = xd, ins[n_in++] = wd, ins[n_in++] = sd;
  if (with_zp) ins[n_in++] = zd;
  if (with_bias) ins[n_in++] = bd;
  char label[128];
  snprintf(label, sizeof label, "FusedQuantizedDense %s %s scale %s m=%lld k=%lld n=%lld block=%lld",
           scheme == LATHE_QUANT_NF4 ? "NF4" : "Linear", lathe_dtype_name(wdt), lathe_dtype_name(sdt), (long long)m,
           (long long)k, (long long)nf, (long long)block);
  run_expect(b, ins, n_in, want, m * nf, 2e-6 * (double)(k + 8) * (bits + 1), label);
  free(xd), free(bd), free(wd), free(sd), free(zd), free(want);
  lathe_builder_free(b);
}

TEST(quantized_dense_linear_nf4) {
  static const lathe_dtype wdts[] = {LATHE_DTYPE_INT8, LATHE_DTYPE_UINT8, LATHE_DTYPE_INT4,
                                     LATHE_DTYPE_UINT4, LATHE_DTYPE_INT2, LATHE_DTYPE_UINT2};
  static const lathe_dtype sdts[] = {F32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16};
  for (int w = 0; w < 6; w++)
    for (int s = 0; s < 3; s++) {
      lathe_dtype wdt = wdts[w], sdt = sdts[s];
      linear_case(LATHE_QUANT_LINEAR, wdt, sdt, 3, 5, 7, 3, true, true, LATHE_ACTIVATION_NONE);
      linear_case(LATHE_QUANT_LINEAR, wdt, sdt, 6, 9, 11, 11, false, false, LATHE_ACTIVATION_RELU); /* per-axis */
      linear_case(LATHE_QUANT_LINEAR, wdt, sdt, 1, 4, 5, 1, true, false, LATHE_ACTIVATION_GELU);    /* per-element */
      linear_case(LATHE_QUANT_NF4, wdt, sdt, 2, 7, 13, 4, false, true, LATHE_ACTIVATION_SILU);
      linear_case(LATHE_QUANT_NF4, wdt, sdt, 9, 3, 6, 100, false, false, LATHE_ACTIVATION_NONE); /* block > N */
    }
  linear_case(LATHE_QUANT_LINEAR, LATHE_DTYPE_INT8, F32, 0, 4, 5, 2, true, true, LATHE_ACTIVATION_NONE);
  linear_case(LATHE_QUANT_LINEAR, LATHE_DTYPE_INT8, F32, 3, 4, 0, 2, true, true, LATHE_ACTIVATION_NONE);
  linear_case(LATHE_QUANT_LINEAR, LATHE_DTYPE_INT8, F32, 5, 0, 6, 2, true, true, LATHE_ACTIVATION_TANH);
  linear_case(LATHE_QUANT_NF4, LATHE_DTYPE_UINT4, F32, 2, 0, 3, 2, false, true, LATHE_ACTIVATION_HARD_SWISH);
  /* threaded, both paths */
  linear_case(LATHE_QUANT_LINEAR, LATHE_DTYPE_INT8, F32, 1, 300, 517, 32, true, true, LATHE_ACTIVATION_HARD_SWISH);
  linear_case(LATHE_QUANT_LINEAR, LATHE_DTYPE_INT4, LATHE_DTYPE_FLOAT16, 37, 129, 203, 64, true, true, LATHE_ACTIVATION_GELU);
  linear_case(LATHE_QUANT_NF4, LATHE_DTYPE_UINT4, F32, 70, 64, 130, 16, false, true, LATHE_ACTIVATION_TANH);
  linear_case(LATHE_QUANT_NF4, LATHE_DTYPE_INT8, F32, 4, 257, 301, 7, false, false, LATHE_ACTIVATION_RELU);
}

/* ---- QuantizedEmbeddingLookup ---- */
static void lookup_case(int t, int64_t vocab, int64_t nblk, lathe_dtype idt, lathe_shape is, const int64_t *idx,
                        const char *want_err) {
  int64_t k = nblk * VPB[t], rb = nblk * BPB[t];
  uint8_t *db;
  double *ref;
  make_ggml(t, vocab, k, &db, &ref);
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("qlookup", &fn);
  lathe_shape ds = TST_SHAPE(LATHE_DTYPE_UINT8, vocab, rb);
  is.dtype = idt;
  lathe_value_t d, ix, y;
  d = tst_param(fn, "data", ds);
  ix = tst_param(fn, "indices", is);
  lathe_quantization q = {.scheme = LATHE_QUANT_GGML, .ggml_type = (lathe_ggml_type)t};
  CHECK_OK(lathe_quantized_embedding_lookup(fn, d, ix, &q, &y));
  lathe_shape ys;
  CHECK_OK(lathe_value_shape(y, &ys));
  bool shape_ok = ys.dtype == F32 && ys.rank == is.rank && ys.dims[is.rank - 1] == k;
  for (int i = 0; i < is.rank - 1; i++) shape_ok = shape_ok && ys.dims[i] == is.dims[i];
  CHECK(shape_ok, "QuantizedEmbeddingLookup %s result shape", TNAME[t]);
  CHECK_OK(lathe_function_return(fn, &y, 1));
  int64_t count = lathe_shape_num_elements(&is);
  void *id = tst_alloc_for(&is);
  for (int64_t i = 0; i < count; i++) tst_set(id, idt, i, (double)idx[i]);
  const void *ins[2] = {db, id};
  char label[96];
  snprintf(label, sizeof label, "QuantizedEmbeddingLookup %s indices %s", TNAME[t], lathe_dtype_name(idt));
  if (want_err) {
    void *got[1] = {NULL};
    lathe_status_t st = tst_run(b, ins, 2, got, 1, NULL);
    CHECK(st && lathe_status_code_of(st) == LATHE_STATUS_INVALID_ARGUMENT && strstr(lathe_status_message(st), want_err),
          "%s: want INVALID_ARGUMENT with \"%s\", got %s", label, want_err, lathe_status_message(st));
    lathe_status_free(st);
    tst_free_output(got[0]);
  } else {
    double *want = malloc(sizeof(double) * (size_t)(count * k + 1));
    for (int64_t i = 0; i < count; i++)
      for (int64_t j = 0; j < k; j++) want[i * k + j] = ref[idx[i] * k + j];
    run_expect(b, ins, 2, want, count * k, 1e-6, label);
    free(want);
  }
  free(id), free(db), free(ref);
  lathe_builder_free(b);
}

TEST(quantized_embedding_lookup) {
  static const lathe_dtype idts[] = {LATHE_DTYPE_INT32, LATHE_DTYPE_INT64, LATHE_DTYPE_UINT8, LATHE_DTYPE_INT8,
                                     LATHE_DTYPE_UINT64, LATHE_DTYPE_INT16, LATHE_DTYPE_UINT32, LATHE_DTYPE_INT4};
  for (int t = 0; t < 8; t++) {
    lathe_dtype idt = idts[t];
    lookup_case(t, 5, 2, idt, TST_SHAPE(idt, 2, 3, 1), (const int64_t[]){4, 0, 2, 2, 1, 3}, NULL);
    lookup_case(t, 3, 1, idt, TST_SHAPE(idt, 1), (const int64_t[]){2}, NULL);
    lookup_case(t, 4, 1, idt, TST_SHAPE(idt, 0, 1), (const int64_t[]){0}, NULL);
    lookup_case(t, 1, 3, idt, TST_SHAPE(idt, 4, 1), (const int64_t[]){0, 0, 0, 0}, NULL);
    lookup_case(t, 5, 1, idt, TST_SHAPE(idt, 3, 1), (const int64_t[]){1, 5, 0}, "out of range [0, 5)");
  }
  /* lathe:cpu names the index; lathe:cuda's kernel flags the error and the message gives the bound */
  bool cpu = strncmp(lathe_backend_config(tst_backend()), "lathe:cpu", 9) == 0;
  lookup_case(LATHE_GGML_Q8_0, 5, 1, LATHE_DTYPE_INT32, TST_SHAPE(LATHE_DTYPE_INT32, 2, 1), (const int64_t[]){-1, 0},
              cpu ? "index -1 (position 0) out of range" : "QuantizedEmbeddingLookup: an index is out of range [0, 5)");
  lookup_case(LATHE_GGML_Q4_K, 6, 1, LATHE_DTYPE_INT64, TST_SHAPE(LATHE_DTYPE_INT64, 2, 1), (const int64_t[]){3, -7},
              cpu ? "QuantizedEmbeddingLookup: index -7" : "QuantizedEmbeddingLookup: an index is out of range [0, 6)");
  /* threaded */
  int64_t many[3000];
  for (int i = 0; i < 3000; i++) many[i] = (i * 37) % 97;
  lookup_case(LATHE_GGML_Q6_K, 97, 2, LATHE_DTYPE_INT32, TST_SHAPE(LATHE_DTYPE_INT32, 30, 100, 1), many, NULL);
}

TEST(quantized_capabilities) {
  lathe_backend_t be = tst_backend();
  if (tst_backend_is_cpu()) {
    CHECK(lathe_backend_supports_op(be, LATHE_OP_FUSED_QUANTIZED_DENSE, F32), "FusedQuantizedDense Float32 supported");
    CHECK(!lathe_backend_supports_op(be, LATHE_OP_FUSED_QUANTIZED_DENSE, LATHE_DTYPE_FLOAT64), "FusedQuantizedDense Float64 not");
    CHECK(lathe_backend_supports_op(be, LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP, LATHE_DTYPE_UINT8), "QuantizedEmbeddingLookup Uint8");
    CHECK(!lathe_backend_supports_op(be, LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP, F32), "QuantizedEmbeddingLookup Float32 not");
  } else {
    tst_skipf(tst_current, "the capability rows assert lathe:cpu's, not the backend under test's");
  }
  for (int t = 0; t < 8; t++)
    CHECK(lathe_ggml_block_values((lathe_ggml_type)t) == VPB[t] && lathe_ggml_block_bytes((lathe_ggml_type)t) == BPB[t] &&
              strcmp(lathe_ggml_type_name((lathe_ggml_type)t), TNAME[t]) == 0,
          "GGML type %d geometry", t);
  CHECK(lathe_ggml_block_bytes((lathe_ggml_type)8) == 0 && strcmp(lathe_ggml_type_name((lathe_ggml_type)-1), "unknown") == 0,
        "unknown GGML type");
  for (int i = 0; i < 16; i++)
    CHECK(lathe_nf4_table[i] == (float)nf4[i] && lathe_iq4nl_table[i] == (float)iq4nl[i], "lookup tables entry %d", i);
}

/* fft.c -- FFT on the CPU. All arithmetic is in double (lathe_c128), so Complex64 results carry
 * only the rounding of the final store.
 *
 * A 1-D transform of length n is an iterative radix-4 FFT (with one radix-2 stage when log2 n is
 * odd) when n is a power of two; a direct DFT over conjugate pairs of inputs when n is odd and at
 * most FFT_DIRECT_MAX (the structure of pocketfft's odd-length passes -- pocketfft is numpy's and
 * XLA's CPU FFT -- with its order of operations, so lengths 3, 5, 7 and 11 give its bits); and
 * Bluestein's chirp-z algorithm otherwise (a circular convolution of power-of-two size m >= 2n-1
 * done with the same power-of-two core). Inverse transforms are conj(FFT(conj(x)))/n. Multi-axis transforms
 * apply the 1-D transform along each axis in turn; lines along an axis are independent and run
 * in parallel. Real forward transforms take the last axis first (real -> n/2+1 complex); real
 * inverse ones take it last, rebuilding the Hermitian half.
 *
 * The transform of a real block is Hermitian (X[-k] = conj(X[k])). Gradients through |FFT(x)|
 * are real only if that holds exactly, so the output of every block whose input is real is made
 * exactly Hermitian (each conjugate pair averaged, self-conjugate bins made real). */
#include <math.h>
#include <stdatomic.h>

#include "numeric.h"

/* Odd lengths up to FFT_DIRECT_MAX take the direct DFT: its n^2/2 multiply-adds cost a few times
 * what Bluestein costs there, and it is several times more accurate. Up to FFT_DIRECT_EXACT it
 * sums in double in pocketfft's order (pocketfft's bits for 3, 5, 7 and 11, which it transforms
 * in one pass); beyond, it sums in long double, so each output carries little more than its
 * final rounding. */
enum { FFT_DIRECT_EXACT = 11, FFT_DIRECT_MAX = 255 };

typedef struct fft_plan {
  int64_t n;          /* transform length */
  int64_t m;          /* radix-2 size: n, or the Bluestein convolution size; 0 for direct */
  int log2m;          /* log2(m) */
  lathe_c128 *tw;     /* radix-2: 3m/4 twiddles e^{-2 pi i k/m}; direct: e^{-2 pi i k/n}, k <= n/2 */
  int64_t *rev;       /* bit-reversal permutation of m */
  lathe_c128 *chirp;  /* Bluestein only: e^{-i pi k^2/n}, k < n */
  lathe_c128 *filter; /* Bluestein only: FFT of the conjugate chirp, scaled by 1/m */
} fft_plan;

static inline lathe_c128 cmul(lathe_c128 a, lathe_c128 b) {
  return (lathe_c128){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

/* In-place forward FFT of size p->m: bit-reversal, one radix-2 stage when log2(m) is odd, then
 * radix-4 stages. A radix-4 stage needs 3 twiddle products per 4 outputs where two radix-2
 * stages need 4, and twiddle products are most of the rounding error. */
static void fft_pow2(const fft_plan *p, lathe_c128 *a) {
  int64_t m = p->m;
  for (int64_t i = 0; i < m; i++) {
    int64_t j = p->rev[i];
    if (i < j) {
      lathe_c128 t = a[i];
      a[i] = a[j];
      a[j] = t;
    }
  }
  int64_t len = 1;
  if (p->log2m % 2) {
    for (int64_t i = 0; i < m; i += 2) {
      lathe_c128 u = a[i], v = a[i + 1];
      a[i] = (lathe_c128){u.re + v.re, u.im + v.im};
      a[i + 1] = (lathe_c128){u.re - v.re, u.im - v.im};
    }
    len = 2;
  }
  /* Bit-reversed order leaves the sub-transforms of the inputs = 0, 2, 1, 3 (mod 4) at quarters
   * 0..3 of each block of 4q: X[k + rq] combines y0 = E0[k], y1 = w^k E1[k], y2 = w^2k E2[k],
   * y3 = w^3k E3[k] (w = e^{-2 pi i/4q}) with the 4-point DFT. */
  for (len *= 4; len <= m; len *= 4) {
    int64_t q = len / 4, step = m / len;
    for (int64_t i = 0; i < m; i += len)
      for (int64_t k = 0; k < q; k++) {
        lathe_c128 *x = a + i + k;
        lathe_c128 y0 = x[0], y2 = cmul(x[q], p->tw[2 * k * step]), y1 = cmul(x[2 * q], p->tw[k * step]),
                   y3 = cmul(x[3 * q], p->tw[3 * k * step]);
        lathe_c128 t0 = {y0.re + y2.re, y0.im + y2.im}, t1 = {y0.re - y2.re, y0.im - y2.im};
        lathe_c128 t2 = {y1.re + y3.re, y1.im + y3.im}, t3 = {y1.re - y3.re, y1.im - y3.im};
        x[0] = (lathe_c128){t0.re + t2.re, t0.im + t2.im};
        x[2 * q] = (lathe_c128){t0.re - t2.re, t0.im - t2.im};
        x[q] = (lathe_c128){t1.re + t3.im, t1.im - t3.re}; /* t1 - i t3 */
        x[3 * q] = (lathe_c128){t1.re - t3.im, t1.im + t3.re}; /* t1 + i t3 */
      }
  }
}

static void plan_free(fft_plan *p) {
  free(p->tw);
  free(p->rev);
  free(p->chirp);
  free(p->filter);
  memset(p, 0, sizeof *p);
}

/* Direct DFT of odd length n from x into y (x is overwritten with pair sums and differences).
 * With s_j = x_j + x_{n-j}, d_j = x_j - x_{n-j} (j = 1..n/2) and w = e^{-2 pi i/n}:
 * X_u = a + b and X_{n-u} = a - b, where a = x_0 + sum_j s_j cos(2 pi ju/n) and
 * b = i sum_j d_j (-sin(2 pi ju/n)); so a real x gives X_{n-u} = conj(X_u) exactly.
 * ACC is the accumulator type: double, summed left to right from the first term in pocketfft's
 * order, so that short lengths round as it does; or a wider type for the longer ones. */
#define FFT_DIRECT(NAME, ACC)                                                                           \
  static void NAME(const fft_plan *p, lathe_c128 *x, lathe_c128 *y) {                                  \
    int64_t n = p->n, h = n / 2;                                                                        \
    for (int64_t j = 1; j <= h; j++) {                                                                  \
      lathe_c128 a = x[j], b = x[n - j];                                                                \
      x[j] = (lathe_c128){a.re + b.re, a.im + b.im};                                                    \
      x[n - j] = (lathe_c128){a.re - b.re, a.im - b.im};                                                \
    }                                                                                                   \
    ACC dre = x[0].re, dim = x[0].im;                                                                   \
    for (int64_t j = 1; j <= h; j++) dre = dre + x[j].re, dim = dim + x[j].im;                          \
    y[0] = (lathe_c128){(double)dre, (double)dim};                                                      \
    for (int64_t u = 1; u <= h; u++) {                                                                  \
      ACC are = x[0].re, aim = x[0].im, bre = 0, bim = 0;                                               \
      int64_t m = 0; /* j*u mod n */                                                                    \
      for (int64_t j = 1; j <= h; j++) {                                                                \
        m += u;                                                                                         \
        if (m >= n) m -= n;                                                                             \
        ACC c = m <= h ? p->tw[m].re : p->tw[n - m].re, s = m <= h ? p->tw[m].im : -p->tw[n - m].im;   \
        lathe_c128 sj = x[j], dj = x[n - j];                                                            \
        are = are + sj.re * c;                                                                          \
        aim = aim + sj.im * c;                                                                          \
        bim = j == 1 ? s * dj.re : bim + s * dj.re;                                                     \
        bre = j == 1 ? s * dj.im : bre + s * dj.im;                                                     \
      }                                                                                                 \
      bre = -bre;                                                                                       \
      y[u] = (lathe_c128){(double)(are + bre), (double)(aim + bim)};                                    \
      y[n - u] = (lathe_c128){(double)(are - bre), (double)(aim - bim)};                                \
    }                                                                                                   \
  }
FFT_DIRECT(fft_direct, double)
FFT_DIRECT(fft_direct_wide, long double)

/* e^{-2 pi i k/n}, each part rounded once from long double: twiddle errors are most of an
 * FFT's error, and pocketfft's constants are rounded so too. */
static lathe_c128 unit_root(int64_t k, int64_t n) {
  const long double pi = 3.141592653589793238462643383279502884L;
  long double a = 2 * pi * (long double)k / (long double)n;
  return (lathe_c128){(double)cosl(a), -(double)sinl(a)};
}

static lathe_status_t plan_new(int64_t n, fft_plan *p) {
  memset(p, 0, sizeof *p);
  p->n = n;
  if (n % 2 == 1 && n > 1 && n <= FFT_DIRECT_MAX) {
    p->tw = malloc(sizeof(lathe_c128) * (size_t)(n / 2 + 1));
    if (!p->tw) return LATHE_OOM("FFT");
    for (int64_t k = 0; k <= n / 2; k++) p->tw[k] = unit_root(k, n);
    return NULL;
  }
  bool pow2 = (n & (n - 1)) == 0;
  int64_t m = 1;
  while (m < (pow2 ? n : 2 * n - 1)) m <<= 1;
  p->m = m;
  p->tw = malloc(sizeof(lathe_c128) * (size_t)(3 * m / 4 + 1));
  p->rev = malloc(sizeof(int64_t) * (size_t)m);
  if (!p->tw || !p->rev) goto oom;
  for (int64_t k = 0; k < 3 * m / 4; k++) p->tw[k] = unit_root(k, m);
  int bits = 0;
  while ((INT64_C(1) << bits) < m) bits++;
  p->log2m = bits;
  for (int64_t i = 0; i < m; i++) {
    int64_t r = 0;
    for (int b = 0; b < bits; b++) r |= ((i >> b) & 1) << (bits - 1 - b);
    p->rev[i] = r;
  }
  if (pow2) return NULL;
  p->chirp = malloc(sizeof(lathe_c128) * (size_t)n);
  p->filter = calloc((size_t)m, sizeof(lathe_c128));
  if (!p->chirp || !p->filter) goto oom;
  for (int64_t k = 0; k < n; k++) {
    /* k^2 mod 2n keeps the angle exact for large k */
    uint64_t q = ((uint64_t)k * (uint64_t)k) % (2 * (uint64_t)n);
    p->chirp[k] = unit_root((int64_t)q, 2 * n);
  }
  double inv_m = 1.0 / (double)m;
  for (int64_t k = 0; k < n; k++) {
    lathe_c128 c = {p->chirp[k].re * inv_m, -p->chirp[k].im * inv_m};
    p->filter[k] = c;
    if (k) p->filter[m - k] = c;
  }
  fft_pow2(p, p->filter);
  return NULL;
oom:
  plan_free(p);
  return LATHE_OOM("FFT");
}

/* Scratch a line transform needs beyond the line itself (elements). */
static int64_t plan_scratch(const fft_plan *p) { return p->chirp ? p->m : p->m ? 0 : p->n; }

/* In-place transform of one contiguous line of p->n elements. */
static void fft_line(const fft_plan *p, lathe_c128 *x, lathe_c128 *scratch, bool inverse) {
  int64_t n = p->n;
  if (inverse)
    for (int64_t i = 0; i < n; i++) x[i].im = -x[i].im;
  if (!p->m) {
    (n <= FFT_DIRECT_EXACT ? fft_direct : fft_direct_wide)(p, x, scratch);
    memcpy(x, scratch, sizeof(lathe_c128) * (size_t)n);
  } else if (!p->chirp) {
    fft_pow2(p, x);
  } else {
    lathe_c128 *b = scratch;
    for (int64_t j = 0; j < n; j++) b[j] = cmul(x[j], p->chirp[j]);
    for (int64_t j = n; j < p->m; j++) b[j] = (lathe_c128){0, 0};
    fft_pow2(p, b);
    /* multiply by the filter's spectrum, then invert as conj(FFT(conj(.))) */
    for (int64_t j = 0; j < p->m; j++) {
      b[j] = cmul(b[j], p->filter[j]);
      b[j].im = -b[j].im;
    }
    fft_pow2(p, b);
    for (int64_t k = 0; k < n; k++) x[k] = cmul((lathe_c128){b[k].re, -b[k].im}, p->chirp[k]);
  }
  if (inverse) {
    double s = 1.0 / (double)n;
    for (int64_t i = 0; i < n; i++) x[i].re *= s, x[i].im = -x[i].im * s;
  }
}

lathe_status_t lathe_fft_1d(lathe_c128 *x, int64_t n, bool inverse) {
  if (n <= 0) return NULL;
  fft_plan p;
  LATHE_RETURN_IF_ERROR(plan_new(n, &p));
  lathe_c128 *scratch = plan_scratch(&p) ? malloc(sizeof(lathe_c128) * (size_t)plan_scratch(&p)) : NULL;
  if (plan_scratch(&p) && !scratch) {
    plan_free(&p);
    return LATHE_OOM("FFT");
  }
  fft_line(&p, x, scratch, inverse);
  free(scratch);
  plan_free(&p);
  return NULL;
}

/* ---- lines along one axis of a complex work array ---- */
typedef enum { LINE_C2C, LINE_R2C, LINE_C2R } line_kind;

typedef struct axis_ctx {
  const fft_plan *p;
  line_kind kind;
  bool inverse;
  lathe_c128 *w;         /* C2C: the array transformed in place; R2C: destination; C2R: source */
  int64_t n, inner;      /* C2C: axis size and stride; R2C/C2R: lines are contiguous (inner 1) */
  int64_t half;          /* R2C/C2R: n/2+1, the complex line length */
  const void *real_src;  /* R2C: real input */
  void *real_dst;        /* C2R: real output */
  int real_bytes;        /* element size of the real side */
  lathe_num_load_fn load;
  lathe_num_store_fn store;
  atomic_int oom;
} axis_ctx;

enum { GROUP = 8 }; /* strided lines gathered together, so each read is a contiguous run */

static void axis_lines(void *vctx, int64_t begin, int64_t end) {
  axis_ctx *c = vctx;
  int64_t n = c->n, nbuf = c->kind == LINE_C2C && c->inner > 1 ? GROUP * n : n;
  lathe_c128 *buf = malloc(sizeof(lathe_c128) * (size_t)(nbuf + plan_scratch(c->p)));
  double *rbuf = c->kind != LINE_C2C ? malloc(sizeof(double) * (size_t)n) : NULL;
  if (!buf || (c->kind != LINE_C2C && !rbuf)) {
    atomic_store(&c->oom, 1);
    free(buf);
    free(rbuf);
    return;
  }
  lathe_c128 *scratch = buf + nbuf;
  for (int64_t l = begin; l < end;) {
    int64_t step = 1;
    switch (c->kind) {
      case LINE_C2C: {
        int64_t o = l / c->inner, i = l % c->inner, s = c->inner;
        lathe_c128 *base = c->w + o * n * s + i;
        if (s == 1) {
          fft_line(c->p, base, scratch, c->inverse);
          break;
        }
        step = s - i < end - l ? s - i : end - l;
        if (step > GROUP) step = GROUP;
        for (int64_t k = 0; k < n; k++)
          for (int64_t g = 0; g < step; g++) buf[g * n + k] = base[k * s + g];
        for (int64_t g = 0; g < step; g++) fft_line(c->p, buf + g * n, scratch, c->inverse);
        for (int64_t k = 0; k < n; k++)
          for (int64_t g = 0; g < step; g++) base[k * s + g] = buf[g * n + k];
        break;
      }
      case LINE_R2C: {
        c->load((const char *)c->real_src + l * n * c->real_bytes, n, rbuf);
        for (int64_t k = 0; k < n; k++) buf[k] = (lathe_c128){rbuf[k], 0};
        fft_line(c->p, buf, scratch, false);
        memcpy(c->w + l * c->half, buf, sizeof(lathe_c128) * (size_t)c->half);
        break;
      }
      case LINE_C2R: {
        const lathe_c128 *src = c->w + l * c->half;
        for (int64_t k = 0; k < n; k++) buf[k] = k < c->half ? src[k] : (lathe_c128){src[n - k].re, -src[n - k].im};
        fft_line(c->p, buf, scratch, true);
        for (int64_t k = 0; k < n; k++) rbuf[k] = buf[k].re;
        c->store(rbuf, n, (char *)c->real_dst + l * n * c->real_bytes);
        break;
      }
    }
    l += step;
  }
  free(buf);
  free(rbuf);
}

static lathe_status_t run_lines(lathe_cpu_exec *ex, axis_ctx *c, int64_t lines) {
  atomic_init(&c->oom, 0);
  int64_t grain = 32768 / (c->n > 0 ? c->n : 1);
  lathe_parallel_for(lathe_cpu_exec_pool(ex), lines, grain > 0 ? grain : 1, axis_lines, c);
  return atomic_load(&c->oom) ? LATHE_OOM("FFT") : NULL;
}

/* Complex-to-complex transform of axis `axis` of w (shape dims, rank). */
static lathe_status_t transform_axis(lathe_cpu_exec *ex, lathe_c128 *w, const int64_t *dims, int rank, int axis,
                                     const fft_plan *p, bool inverse) {
  int64_t outer = lathe_dims_product(dims, 0, axis), inner = lathe_dims_product(dims, axis + 1, rank);
  axis_ctx c = {.p = p, .kind = LINE_C2C, .inverse = inverse, .w = w, .n = dims[axis], .inner = inner};
  return run_lines(ex, &c, outer * inner);
}

/* Makes one block exactly Hermitian over its k axes: X[-c] = conj(X[c]), coordinates modulo the
 * lengths len. The last axis holds `stored` of its len[k-1] bins (the half spectrum of a real
 * transform); bins whose partner is not stored are left alone. */
static void make_hermitian(lathe_c128 *w, const int64_t *len, int k, int64_t stored) {
  int64_t size = stored, stride[3];
  stride[k - 1] = 1;
  for (int a = k - 2; a >= 0; a--) stride[a] = stride[a + 1] * (a + 1 == k - 1 ? stored : len[a + 1]), size *= len[a];
  for (int64_t i = 0; i < size; i++) {
    int64_t rest = i, partner = 0;
    for (int a = 0; a < k; a++) {
      int64_t c = rest / stride[a], pc = c ? len[a] - c : 0;
      rest %= stride[a];
      if (pc >= (a == k - 1 ? stored : len[a])) {
        partner = -1;
        break;
      }
      partner += pc * stride[a];
    }
    if (partner < i) continue;
    lathe_c128 *x = &w[i], *y = &w[partner];
    if (partner == i) {
      x->im = 0;
    } else if (x->re != y->re || x->im != -y->im) {
      /* halves, not (x+y)/2, so that no sum overflows */
      double re = 0.5 * x->re + 0.5 * y->re, im = 0.5 * x->im - 0.5 * y->im;
      *x = (lathe_c128){re, im};
      *y = (lathe_c128){re, -im};
    }
  }
}

/* Whether block b (of bsize elements) of the complex work array has a zero imaginary part. */
static bool block_is_real(const lathe_c128 *w, int64_t bsize) {
  for (int64_t i = 0; i < bsize; i++)
    if (w[i].im != 0) return false;
  return true;
}

lathe_status_t lathe_cpu_fft(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  lathe_fft_type type = lathe_attr_fft_type(n);
  lathe_ilist length = lathe_attr_fft_length(n);
  int k = length.n;
  const int64_t *len = length.v;
  const lathe_shape *xs = &in[0]->shape, *ys = &out[0]->shape;
  int rank = xs->rank;
  if (lathe_shape_size(xs) == 0 || lathe_shape_size(ys) == 0) return NULL;
  fft_plan plans[3];
  memset(plans, 0, sizeof plans);
  lathe_status_t st = NULL;
  for (int i = 0; i < k && !st; i++) st = plan_new(len[i], &plans[i]);
  bool inverse = type == LATHE_FFT_TYPE_INVERSE || type == LATHE_FFT_TYPE_INVERSE_REAL;
  /* The complex work array: the output itself when it is Complex128. */
  const lathe_shape *ws = type == LATHE_FFT_TYPE_INVERSE_REAL ? xs : ys;
  int64_t wn = lathe_shape_size(ws);
  bool own = ws != ys || ys->dtype != LATHE_DTYPE_COMPLEX128;
  lathe_c128 *w = NULL;
  if (!st) {
    w = own ? malloc(sizeof(lathe_c128) * (size_t)wn) : out[0]->data;
    if (!w) st = LATHE_OOM("FFT");
  }
  if (!st) {
    int64_t nlast = len[k - 1], lines = lathe_shape_size(xs) / xs->dims[rank - 1];
    switch (type) {
      case LATHE_FFT_TYPE_FORWARD:
      case LATHE_FFT_TYPE_INVERSE: {
        lathe_num_complex_loader(xs->dtype)(in[0]->data, wn, w);
        int64_t bsize = lathe_dims_product(len, 0, k), blocks = wn / bsize;
        uint8_t *real = malloc((size_t)blocks);
        if (!real) {
          st = LATHE_OOM("FFT");
          break;
        }
        for (int64_t b = 0; b < blocks; b++) real[b] = block_is_real(w + b * bsize, bsize);
        for (int i = 0; i < k && !st; i++) st = transform_axis(ex, w, ws->dims, rank, rank - k + i, &plans[i], inverse);
        for (int64_t b = 0; b < blocks && !st; b++)
          if (real[b]) make_hermitian(w + b * bsize, len, k, len[k - 1]);
        free(real);
        break;
      }
      case LATHE_FFT_TYPE_FORWARD_REAL: {
        axis_ctx c = {.p = &plans[k - 1], .kind = LINE_R2C, .w = w, .n = nlast, .inner = 1, .half = nlast / 2 + 1,
                      .real_src = in[0]->data, .real_bytes = lathe_dtype_bits(xs->dtype) / 8,
                      .load = lathe_num_real_loader(xs->dtype)};
        st = run_lines(ex, &c, lines);
        for (int i = 0; i < k - 1 && !st; i++) st = transform_axis(ex, w, ws->dims, rank, rank - k + i, &plans[i], false);
        int64_t bsize = lathe_dims_product(ws->dims, rank - k, rank);
        for (int64_t b = 0; b < wn / bsize && !st; b++) make_hermitian(w + b * bsize, len, k, c.half);
        break;
      }
      case LATHE_FFT_TYPE_INVERSE_REAL: {
        lathe_num_complex_loader(xs->dtype)(in[0]->data, wn, w);
        for (int i = 0; i < k - 1 && !st; i++) st = transform_axis(ex, w, ws->dims, rank, rank - k + i, &plans[i], true);
        axis_ctx c = {.p = &plans[k - 1], .kind = LINE_C2R, .w = w, .n = nlast, .inner = 1, .half = nlast / 2 + 1,
                      .real_dst = out[0]->data, .real_bytes = lathe_dtype_bits(ys->dtype) / 8,
                      .store = lathe_num_real_storer(ys->dtype)};
        if (!st) st = run_lines(ex, &c, lines);
        break;
      }
    }
    if (!st && type != LATHE_FFT_TYPE_INVERSE_REAL && own) lathe_num_complex_storer(ys->dtype)(w, wn, out[0]->data);
  }
  if (own) free(w);
  for (int i = 0; i < k; i++) plan_free(&plans[i]);
  return st;
}

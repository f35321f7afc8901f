/* fft.c -- FFT on the CPU. All arithmetic is in double (lathe_c128), so Complex64 results carry
 * only the rounding of the final store.
 *
 * A 1-D transform of length n is an iterative radix-2 FFT when n is a power of two, and
 * Bluestein's chirp-z algorithm otherwise (a circular convolution of power-of-two size
 * m >= 2n-1 done with the same radix-2 core). Inverse transforms are conj(FFT(conj(x)))/n.
 * Multi-axis transforms apply the 1-D transform along each axis in turn; lines along an axis
 * are independent and run in parallel. Real forward transforms take the last axis first (real
 * -> n/2+1 complex); real inverse ones take it last, rebuilding the Hermitian half. */
#include <math.h>
#include <stdatomic.h>

#include "numeric.h"

static const double PI = 3.14159265358979323846;

typedef struct fft_plan {
  int64_t n;          /* transform length */
  int64_t m;          /* radix-2 size: n, or the Bluestein convolution size */
  lathe_c128 *tw;     /* m/2 twiddles e^{-2 pi i k/m} */
  int64_t *rev;       /* bit-reversal permutation of m */
  lathe_c128 *chirp;  /* Bluestein only: e^{-i pi k^2/n}, k < n */
  lathe_c128 *filter; /* Bluestein only: FFT of the conjugate chirp, scaled by 1/m */
} fft_plan;

static inline lathe_c128 cmul(lathe_c128 a, lathe_c128 b) {
  return (lathe_c128){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re};
}

/* In-place forward radix-2 FFT of size p->m. */
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
  for (int64_t len = 2; len <= m; len <<= 1) {
    int64_t half = len >> 1, step = m / len;
    for (int64_t i = 0; i < m; i += len)
      for (int64_t k = 0; k < half; k++) {
        lathe_c128 u = a[i + k], v = cmul(a[i + k + half], p->tw[k * step]);
        a[i + k] = (lathe_c128){u.re + v.re, u.im + v.im};
        a[i + k + half] = (lathe_c128){u.re - v.re, u.im - v.im};
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

static lathe_status_t plan_new(int64_t n, fft_plan *p) {
  memset(p, 0, sizeof *p);
  p->n = n;
  bool pow2 = (n & (n - 1)) == 0;
  int64_t m = 1;
  while (m < (pow2 ? n : 2 * n - 1)) m <<= 1;
  p->m = m;
  p->tw = malloc(sizeof(lathe_c128) * (size_t)(m / 2 + 1));
  p->rev = malloc(sizeof(int64_t) * (size_t)m);
  if (!p->tw || !p->rev) goto oom;
  for (int64_t k = 0; k < m / 2; k++) p->tw[k] = (lathe_c128){cos(2 * PI * (double)k / (double)m), -sin(2 * PI * (double)k / (double)m)};
  int bits = 0;
  while ((INT64_C(1) << bits) < m) bits++;
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
    double a = PI * (double)q / (double)n;
    p->chirp[k] = (lathe_c128){cos(a), -sin(a)};
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
static int64_t plan_scratch(const fft_plan *p) { return p->chirp ? p->m : 0; }

/* In-place transform of one contiguous line of p->n elements. */
static void fft_line(const fft_plan *p, lathe_c128 *x, lathe_c128 *scratch, bool inverse) {
  int64_t n = p->n;
  if (inverse)
    for (int64_t i = 0; i < n; i++) x[i].im = -x[i].im;
  if (!p->chirp) {
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
      case LATHE_FFT_TYPE_INVERSE:
        lathe_num_complex_loader(xs->dtype)(in[0]->data, wn, w);
        for (int i = 0; i < k && !st; i++) st = transform_axis(ex, w, ws->dims, rank, rank - k + i, &plans[i], inverse);
        break;
      case LATHE_FFT_TYPE_FORWARD_REAL: {
        axis_ctx c = {.p = &plans[k - 1], .kind = LINE_R2C, .w = w, .n = nlast, .inner = 1, .half = nlast / 2 + 1,
                      .real_src = in[0]->data, .real_bytes = lathe_dtype_bits(xs->dtype) / 8,
                      .load = lathe_num_real_loader(xs->dtype)};
        st = run_lines(ex, &c, lines);
        for (int i = 0; i < k - 1 && !st; i++) st = transform_axis(ex, w, ws->dims, rank, rank - k + i, &plans[i], false);
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

/* vmath.h -- lathe's vector math for Float32: Exp, Expm1, Log, Log1p, Tanh, Logistic, Erf, Sin,
 * Cos and Pow, replacing ew.def's libm rows for Float32 in every ISA's table (isa_kernels.h).
 *
 * Each function is an element function of plain IEEE operations -- no branches, no tables, no
 * FMA -- that the compiler vectorises across a row with the ISA's widest vectors (conditions are
 * selects between values computed on both sides; see isa_kernels.h on trapping math); because the
 * operations are the same in every lane width, the baseline, AVX2 and AVX-512 tables compute the
 * same bits. An element outside a function's fast range (NaN, infinities, overflow, underflow to
 * subnormals, huge arguments of Sin and Cos, Pow's special cases) is recomputed with libm's
 * function, exactly as ew.def's row would, so those keep libm's results bit for bit.
 *
 * Exp, Expm1, Log, Log1p, Tanh and Logistic compute in float: Cody-Waite reduction by ln 2 (its
 * high part has 15 significant bits, so n * LN2_HI is exact), a degree-6 polynomial for e^r fitted
 * (Chebyshev, by us) on |r| <= 0.357, and for Log the series of 2 atanh(s), s = f / (2 + f),
 * arranged as fdlibm's log1p kernel. Erf, Sin, Cos and Pow compute in double (float inputs
 * convert exactly) and round once: Sin and Cos reduce by pi/2 in two parts (33 + 53 bits, exact
 * for |x| <= 1e5) and use Taylor polynomials; Erf is x P(x^2) below 0.875 and 1 - e^(-x^2) G(1/x)
 * above (P and G fitted by us); Pow is 2^(y log2 x) with a 14-term atanh series for the logarithm.
 * The error bounds against correctly rounded results (tests/unit/test_vmath.c measures them on
 * every ISA) are in docs/CPU.md. */

#define VM_MAGIC_F 12582912.0f        /* 1.5 * 2^23: x + it rounds x to an integer (|x| < 2^22) */
#define VM_MAGIC_D 6755399441055744.0 /* 1.5 * 2^52 */
#define VM_LN2_HI 0.693145751953125f  /* 15 significant bits */
#define VM_LN2_LO 1.42860682030941723e-6f
#define VM_LOG2E_F 1.44269504088896341f
#define VM_LN2_D 0.69314718055994531
#define VM_LOG2E_D 1.4426950408889634

static inline uint32_t vm_f2u(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
static inline float vm_u2f(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static inline uint64_t vm_d2u(double d) {
  uint64_t u;
  memcpy(&u, &d, 8);
  return u;
}
static inline double vm_u2d(uint64_t u) {
  double d;
  memcpy(&d, &u, 8);
  return d;
}

/* ---- float kernels ---- */

/* e^r - 1 - r = r^2 P(r) on |r| <= 0.357 (P's absolute error 1.7e-9) */
static inline float vm_expm1_poly(float r) {
  float p = 0.00019894012218352802f;
  p = 0.0013936370780442122f + r * p;
  p = 0.0083333081207695459f + r * p;
  p = 0.041666439669204373f + r * p;
  p = 0.16666666684516650f + r * p;
  p = 0.50000000160711893f + r * p;
  return r + r * r * p;
}

/* x = n ln2 + r, |r| <= 0.347 (plus rounding); *n2 = 2^n for n in [-126, 127]. */
static inline float vm_reduce_ln2(float x, float *n2) {
  float t = x * VM_LOG2E_F + VM_MAGIC_F;
  float n = t - VM_MAGIC_F;
  uint32_t ni = vm_f2u(t) - vm_f2u(VM_MAGIC_F);
  *n2 = vm_u2f((ni + 127u) << 23);
  return (x - n * VM_LN2_HI) - n * VM_LN2_LO;
}

/* e^x for -86 < x < 88 */
static inline int vm_exp_ok(float x) { return (x > -86.0f) & (x < 88.0f); }
static inline float vm_exp_core(float x) {
  float n2, r = vm_reduce_ln2(x, &n2);
  return (1.0f + vm_expm1_poly(r)) * n2;
}

/* e^x - 1 for x < 88 (below -87 it is -1 in float); keeps -0 */
static inline int vm_expm1_ok(float x) { return x < 88.0f; }
static inline float vm_expm1_core(float x) {
  float xc = x < -87.0f ? -87.0f : x;
  float n2, r = vm_reduce_ln2(xc, &n2);
  float v = (n2 - 1.0f) + n2 * vm_expm1_poly(r);
  return x == 0.0f ? x : v;
}

/* log(m 2^e) for x = m 2^e, m in [sqrt(1/2), sqrt(2)), plus lo (a correction added before the
 * last rounding steps) */
static inline float vm_log_kernel(float x, float lo) {
  uint32_t u = vm_f2u(x);
  float e = (float)((int32_t)(u >> 23) - 127);
  float m = vm_u2f((u & 0x7fffffu) | 0x3f800000u);
  int big = m > 1.41421356f;
  float mh = m * 0.5f, e1 = e + 1.0f; /* both arms computed: a select of values vectorises */
  m = big ? mh : m;
  e = big ? e1 : e;
  float f = m - 1.0f, s = f / (2.0f + f), z = s * s;
  float R = z * (0.66666667f + z * (0.4f + z * (0.28571429f + z * 0.22222222f)));
  float hfsq = 0.5f * f * f;
  return e * VM_LN2_HI + (f - (hfsq - (s * (hfsq + R) + (e * VM_LN2_LO + lo))));
}

/* log x for normal positive finite x */
static inline int vm_log_ok(float x) { return (x >= 1.17549435e-38f) & (x < 3.40282347e+38f); }
static inline float vm_log_core(float x) { return vm_log_kernel(x, 0.0f); }

/* log(1 + x) for -1 < x < FLT_MAX: log(u) for u = 1 + x rounded, corrected by the rounding
 * error c = (u - 1) - x: log(1 + x) = log(u) - c / u; keeps -0 */
static inline int vm_log1p_ok(float x) { return (x > -1.0f) & (x < 3.0e38f); }
static inline float vm_log1p_core(float x) {
  float u = 1.0f + x, c = (u - 1.0f) - x;
  float v = vm_log_kernel(u, -(c / u));
  return x == 0.0f ? x : v;
}

/* tanh x: x + x^3 T(x^2) for |x| < 0.625 (T fitted, absolute error 1.6e-9), else t / (t + 2) for
 * t = e^(2|x|) - 1 with the sign of x; |x| >= 9.5 gives +-1 */
static inline int vm_tanh_ok(float x) { return x == x; }
static inline float vm_tanh_core(float x) {
  float z = x * x;
  float p = 0.0022927448161781423f;
  p = -0.0083439455158391520f + z * p;
  p = 0.021768918651028210f + z * p;
  p = -0.053959259577204543f + z * p;
  p = 0.13333303556915742f + z * p;
  p = -0.33333333172140362f + z * p;
  float small = x + x * (z * p);
  float a = fabsf(x);
  a = a > 9.5f ? 9.5f : a < 0.625f ? 0.625f : a;
  float t = vm_expm1_core(2.0f * a), d = t + 2.0f;
  float r1 = t / d, r2 = 1.0f - 2.0f / d; /* the second rounds better near 1 */
  float r = a < 1.0f ? r1 : r2;
  r = vm_u2f(vm_f2u(r) | (vm_f2u(x) & 0x80000000u));
  return fabsf(x) < 0.625f ? (x == 0.0f ? x : small) : r;
}


/* ---- double kernels (for float results) ---- */

/* 2^t for t in [-1100, 1100] (2^-1022 below -1022, overflowing to inf above 1024) */
static inline double vm_exp2_d(double t) {
  double tt = t + VM_MAGIC_D, n = tt - VM_MAGIC_D;
  int64_t ni = (int64_t)(vm_d2u(tt) - vm_d2u(VM_MAGIC_D));
  ni = ni < -1022 ? -1022 : ni > 1023 ? 1023 : ni;
  double u = (t - n) * VM_LN2_D; /* |u| <= 0.347 */
  double p = 1.0 / 3628800;      /* Taylor to u^10: error 2.2e-13 */
  p = 1.0 / 362880 + u * p;
  p = 1.0 / 40320 + u * p;
  p = 1.0 / 5040 + u * p;
  p = 1.0 / 720 + u * p;
  p = 1.0 / 120 + u * p;
  p = 1.0 / 24 + u * p;
  p = 1.0 / 6 + u * p;
  p = 0.5 + u * p;
  p = 1.0 + u * p;
  p = 1.0 + u * p;
  return p * vm_u2d((uint64_t)(ni + 1023) << 52);
}

/* log2 x for positive finite x (subnormal floats are normal doubles) */
static inline double vm_log2_d(double x) {
  uint64_t u = vm_d2u(x);
  double e = vm_u2d(0x4330000000000000u | (u >> 52)) - (4503599627370496.0 + 1023.0); /* exact */
  double m = vm_u2d((u & 0x000fffffffffffffu) | 0x3ff0000000000000u);
  int big = m > 1.4142135623730951;
  double mh = m * 0.5, e1 = e + 1.0;
  m = big ? mh : m;
  e = big ? e1 : e;
  double f = m - 1.0, s = f / (2.0 + f), z = s * s; /* |s| <= 0.1716 */
  double p = 1.0 / 15;                                  /* 2 atanh s to s^15: error 4e-13 */
  p = 1.0 / 13 + z * p;
  p = 1.0 / 11 + z * p;
  p = 1.0 / 9 + z * p;
  p = 1.0 / 7 + z * p;
  p = 1.0 / 5 + z * p;
  p = 1.0 / 3 + z * p;
  double ln = 2.0 * s + 2.0 * s * z * p;
  return e + ln * VM_LOG2E_D;
}

/* ew.def's 1 / (1 + e^-x), computed in double and rounded once (float's own rounding of 1 + e^-x
 * would cost up to 1 ulp); below -88 e^-x overflows in float, which gives libm's 0 */
static inline int vm_logistic_ok(float x) { return (x > -88.0f) & (x < 88.0f); }
static inline float vm_logistic_core(float x) { return (float)(1.0 / (1.0 + vm_exp2_d((double)x * -VM_LOG2E_D))); }

/* erf: x P(x^2) for |x| < 0.875, 1 - e^(-x^2) G(1/|x|) above (clamped at 4, where erf is 1 in
 * float); P and G fitted on those intervals (absolute errors 2.1e-10 and 4.0e-10) */
static inline int vm_erf_ok(float x) { return x == x; }
static inline float vm_erf_core(float xf) {
  double x = xf, a = fabs(x), z = x * x;
  double ps = 0.000086903689073902624;
  ps = -0.00082145708874545869 + z * ps;
  ps = 0.0052070489106000265 + z * ps;
  ps = -0.026861705831181606 + z * ps;
  ps = 0.11283735210155594 + z * ps;
  ps = -0.37612636213670551 + z * ps;
  ps = 1.1283791668855805 + z * ps;
  ps = x * ps;
  double ac = a < 0.875 ? 0.875 : a > 4.0 ? 4.0 : a, t = 1.0 / ac;
  double g = 0.017284827280240508;
  g = -0.15022477017555263 + t * g;
  g = 0.58707694398089291 + t * g;
  g = -1.3540056909666031 + t * g;
  g = 2.0189669458421480 + t * g;
  g = -1.9677428166605524 + t * g;
  g = 1.1291282490730381 + t * g;
  g = -0.15165138397703581 + t * g;
  g = -0.26513493038718823 + t * g;
  g = -0.00013474759462267914 + t * g;
  g = 0.56400649922241070 + t * g;
  g = 0.000014450223935151971 + t * g;
  double pl = 1.0 - vm_exp2_d(-(ac * ac) * VM_LOG2E_D) * g;
  pl = vm_u2d(vm_d2u(pl) | (vm_d2u(x) & 0x8000000000000000u));
  return (float)(a < 0.875 ? ps : pl);
}

/* sin and cos: x = n pi/2 + r, |r| <= pi/4, for |x| <= 1e5; Taylor to r^11 and r^10 */
#define VM_PIO2_HI 1.5707963267341256     /* 33 significant bits: n * it is exact for n < 2^20 */
#define VM_PIO2_LO 6.077100506506192e-11
static inline int vm_trig_ok(float x) { return fabsf(x) <= 1.0e5f; }
static inline double vm_trig_reduce(float xf, uint64_t *q) {
  double x = xf, t = x * 0.63661977236758134 + VM_MAGIC_D, n = t - VM_MAGIC_D;
  *q = vm_d2u(t); /* n in the low bits */
  return (x - n * VM_PIO2_HI) - n * VM_PIO2_LO;
}
static inline double vm_sin_poly(double r, double z) {
  double p = -1.0 / 39916800;
  p = 1.0 / 362880 + z * p;
  p = -1.0 / 5040 + z * p;
  p = 1.0 / 120 + z * p;
  p = -1.0 / 6 + z * p;
  return r * (1.0 + z * p); /* in double the extra rounding is harmless, and sin(-0) stays -0 */
}
static inline double vm_cos_poly(double z) {
  double p = -1.0 / 3628800;
  p = 1.0 / 40320 + z * p;
  p = -1.0 / 720 + z * p;
  p = 1.0 / 24 + z * p;
  return (1.0 - 0.5 * z) + z * z * p;
}
static inline float vm_sin_core(float x) {
  uint64_t q;
  double r = vm_trig_reduce(x, &q), z = r * r;
  double s = vm_sin_poly(r, z), c = vm_cos_poly(z);
  double v = (q & 1) ? c : s;
  return (float)vm_u2d(vm_d2u(v) ^ ((q & 2) << 62));
}
static inline float vm_cos_core(float x) {
  uint64_t q;
  double r = vm_trig_reduce(x, &q), z = r * r;
  double s = vm_sin_poly(r, z), c = vm_cos_poly(z);
  double v = (q & 1) ? s : c;
  return (float)vm_u2d(vm_d2u(v) ^ (((q + 1) & 2) << 62));
}

/* x^y for finite y and finite nonzero x (negative x only with an integer y): 2^(y log2 |x|),
 * negated for odd y */
static inline int vm_pow_ok(float x, float y) {
  float ay = fabsf(y), yr = (ay + VM_MAGIC_F) - VM_MAGIC_F;
  int integral = (ay >= 8388608.0f) | (yr == ay);
  return (ay < 3.40282347e+38f) & (fabsf(x) < 3.40282347e+38f) & ((x > 0.0f) | ((x < 0.0f) & integral));
}
static inline float vm_pow_core(float xf, float yf) {
  double ax = fabs((double)xf), y = yf;
  double t = y * vm_log2_d(ax);
  t = t < -1100.0 ? -1100.0 : t > 1100.0 ? 1100.0 : t;
  double v = vm_exp2_d(t);
  /* odd integer y: the low bit of |y| rounded (|y| < 2^24, else y is even) */
  float ay = fabsf(yf);
  uint32_t low = vm_f2u(ay + VM_MAGIC_F) & 1u, odd = ay < 16777216.0f ? low : 0u;
  uint64_t neg = (uint64_t)(odd & (vm_f2u(xf) >> 31)) << 63;
  return (float)vm_u2d(vm_d2u(v) ^ neg);
}

/* ---- row kernels: blocks of VM_BLOCK elements through a buffer (so rows may run in place), and
 * libm for the elements outside the fast range ---- */
enum { VM_BLOCK = 256 };

#define VM_UNARY_ROW(NAME, CORE, OK, LIBM)                                                  \
  static void NAME(const void *const *in, const int *step, void *o, int64_t n, int bits) {  \
    const float *x = in[0];                                                                 \
    float *y = o, buf[VM_BLOCK];                                                            \
    (void)step, (void)bits;                                                                 \
    for (int64_t b = 0; b < n; b += VM_BLOCK) {                                             \
      int64_t m = n - b < VM_BLOCK ? n - b : VM_BLOCK;                                      \
      const float *xb = x + b;                                                              \
      int bad = 0;                                                                          \
      for (int64_t i = 0; i < m; i++) {                                                     \
        buf[i] = CORE(xb[i]);                                                               \
        bad |= !OK(xb[i]);                                                                  \
      }                                                                                     \
      if (!bad) {                                                                           \
        memcpy(y + b, buf, (size_t)m * sizeof(float));                                      \
      } else {                                                                              \
        for (int64_t i = 0; i < m; i++) {                                                   \
          float v = xb[i];                                                                  \
          y[b + i] = OK(v) ? buf[i] : LIBM(v);                                              \
        }                                                                                   \
      }                                                                                     \
    }                                                                                       \
  }

static inline float vm_libm_logistic(float x) { return 1.0f / (1.0f + expf(-x)); }

VM_UNARY_ROW(vm_row_exp, vm_exp_core, vm_exp_ok, expf)
VM_UNARY_ROW(vm_row_expm1, vm_expm1_core, vm_expm1_ok, expm1f)
VM_UNARY_ROW(vm_row_log, vm_log_core, vm_log_ok, logf)
VM_UNARY_ROW(vm_row_log1p, vm_log1p_core, vm_log1p_ok, log1pf)
VM_UNARY_ROW(vm_row_tanh, vm_tanh_core, vm_tanh_ok, tanhf)
VM_UNARY_ROW(vm_row_logistic, vm_logistic_core, vm_logistic_ok, vm_libm_logistic)
VM_UNARY_ROW(vm_row_erf, vm_erf_core, vm_erf_ok, erff)
VM_UNARY_ROW(vm_row_sin, vm_sin_core, vm_trig_ok, sinf)
VM_UNARY_ROW(vm_row_cos, vm_cos_core, vm_trig_ok, cosf)

/* Pow: an operand that stays put (step 0) is spread over a block first. */
static void vm_row_pow(const void *const *in, const int *step, void *o, int64_t n, int bits) {
  const float *x = in[0], *yv = in[1];
  float *out = o, buf[VM_BLOCK], xs[VM_BLOCK], ys[VM_BLOCK];
  (void)bits;
  if (!step[0])
    for (int i = 0; i < VM_BLOCK; i++) xs[i] = x[0];
  if (!step[1])
    for (int i = 0; i < VM_BLOCK; i++) ys[i] = yv[0];
  for (int64_t b = 0; b < n; b += VM_BLOCK) {
    int64_t m = n - b < VM_BLOCK ? n - b : VM_BLOCK;
    const float *xb = step[0] ? x + b : xs, *yb = step[1] ? yv + b : ys;
    int bad = 0;
    for (int64_t i = 0; i < m; i++) {
      buf[i] = vm_pow_core(xb[i], yb[i]);
      bad |= !vm_pow_ok(xb[i], yb[i]);
    }
    if (!bad) {
      memcpy(out + b, buf, (size_t)m * sizeof(float));
    } else {
      for (int64_t i = 0; i < m; i++) {
        float u = xb[i], v = yb[i];
        out[b + i] = vm_pow_ok(u, v) ? buf[i] : powf(u, v);
      }
    }
  }
}

/* Entries that replace ew.def's Float32 rows in .ew (after EWK_ENTRIES). */
#define VMK_ENTRIES                                        \
  [LATHE_OP_EXP][LATHE_DDI_FLOAT32] = vm_row_exp,          \
  [LATHE_OP_EXPM1][LATHE_DDI_FLOAT32] = vm_row_expm1,      \
  [LATHE_OP_LOG][LATHE_DDI_FLOAT32] = vm_row_log,          \
  [LATHE_OP_LOG1P][LATHE_DDI_FLOAT32] = vm_row_log1p,      \
  [LATHE_OP_TANH][LATHE_DDI_FLOAT32] = vm_row_tanh,        \
  [LATHE_OP_LOGISTIC][LATHE_DDI_FLOAT32] = vm_row_logistic, \
  [LATHE_OP_ERF][LATHE_DDI_FLOAT32] = vm_row_erf,          \
  [LATHE_OP_SIN][LATHE_DDI_FLOAT32] = vm_row_sin,          \
  [LATHE_OP_COS][LATHE_DDI_FLOAT32] = vm_row_cos,          \
  [LATHE_OP_POW][LATHE_DDI_FLOAT32] = vm_row_pow,

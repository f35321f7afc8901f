/* test_vmath.c -- lathe:cpu's Float32 vector math (src/cpu/vmath.h) on every instruction set this
 * machine runs: the error against the correctly rounded result (libm's double function rounded
 * to float) stays within the bound stated here for each function, special values give what
 * libm's float function gives, and every ISA computes the same bits (NaN payloads aside).
 *
 * Inputs: every 4099th float bit pattern (all signs and exponents: NaN, infinities, subnormals,
 * -0), plus a dense uniform sweep of the range where each function changes most; Pow takes a
 * grid of bases (negative ones with integer exponents) and exponents. */
#include <math.h>

#include "testing.h"

typedef struct {
  const char *name;
  lathe_op op;
  double (*ref)(double);
  float (*libm)(float); /* what ew.def's row computes: special values must equal it */
  double ulp_bound;     /* max error in units of the last place, against ref rounded */
  float lo, hi;         /* the dense sweep */
} vm_fn;

/* ew.def's 1 / (1 + e^-x) in float: e^-x overflows to infinity past 88.72, which gives 0 */
static double ref_logistic(double x) { return exp(-x) > 3.4028234663852886e38 ? 0.0 : 1.0 / (1.0 + exp(-x)); }
static float libm_logistic(float x) { return 1.0f / (1.0f + expf(-x)); }

/* The bounds (docs/CPU.md): what an exhaustive run over every float measured (the same on
 * AVX-512, AVX2 and SSE4.2: identical bits), rounded up to a half ulp. */
static const vm_fn fns[] = {
    {"Exp", LATHE_OP_EXP, exp, expf, 1.0, -20, 20},
    {"Expm1", LATHE_OP_EXPM1, expm1, expm1f, 1.5, -3, 3},
    {"Log", LATHE_OP_LOG, log, logf, 1.0, 0.25f, 4},
    {"Log1p", LATHE_OP_LOG1P, log1p, log1pf, 1.0, -0.9f, 3},
    {"Tanh", LATHE_OP_TANH, tanh, tanhf, 1.5, -5, 5},
    {"Logistic", LATHE_OP_LOGISTIC, ref_logistic, libm_logistic, 1.0, -20, 20},
    {"Erf", LATHE_OP_ERF, erf, erff, 1.0, -4, 4},
    {"Sin", LATHE_OP_SIN, sin, sinf, 1.0, -100, 100},
    {"Cos", LATHE_OP_COS, cos, cosf, 1.0, -100, 100},
};
static const double pow_ulp_bound = 1.0;

static const char *isa_names[] = {"baseline", "avx2", "avx512"};

/* The error of got in units of the last place of the float nearest to ref (infinite when got is
 * not finite and ref is, or they differ in NaN-ness). */
static double ulp_error(float got, double ref) {
  if (isnan(ref) || isnan(got)) return isnan(ref) && isnan(got) ? 0 : INFINITY;
  float rf = (float)ref;
  if (isinf(rf) || isinf(got)) return rf == got ? 0 : INFINITY;
  int e;
  frexp(rf == 0 ? ref : (double)rf, &e);
  if (e < -125) e = -125; /* subnormals: the ulp is 2^-149 */
  return fabs((double)got - ref) / ldexp(1.0, e - 24);
}

/* Runs op on inputs (n values; y: the second operand or NULL) on backend be; out receives n. */
static bool run_op(lathe_backend_t be, lathe_op op, const float *x, const float *y, int64_t n, float *out) {
  lathe_builder_t b;
  lathe_status_t st = lathe_builder_new(be, "vmath", &b);
  CHECK(st == NULL, "builder: %s", lathe_status_message(st));
  if (st) {
    lathe_status_free(st);
    return false;
  }
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, n);
  lathe_value_t px = NULL, py = NULL, r = NULL;
  st = lathe_parameter(fn, "x", &s, &px);
  if (!st && y) st = lathe_parameter(fn, "y", &s, &py);
  if (!st) st = y ? lathe_binary(fn, op, px, py, &r) : lathe_unary(fn, op, px, &r);
  if (!st) st = lathe_function_return(fn, &r, 1);
  lathe_executable_t e = NULL;
  if (!st) st = lathe_builder_compile(b, &e);
  lathe_buffer_t in[2] = {NULL, NULL}, o = NULL;
  size_t nb = sizeof(float) * (size_t)n;
  if (!st) st = lathe_buffer_from_host(be, 0, &s, x, nb, &in[0]);
  if (!st && y) st = lathe_buffer_from_host(be, 0, &s, y, nb, &in[1]);
  if (!st) st = lathe_executable_execute(e, in, NULL, y ? 2 : 1, 0, &o, 1);
  if (!st) st = lathe_buffer_to_host(o, out, nb);
  CHECK(st == NULL, "%s: %s", lathe_op_name(op), lathe_status_message(st));
  bool ok = st == NULL;
  lathe_status_free(st);
  lathe_buffer_free(o);
  lathe_buffer_free(in[0]);
  lathe_buffer_free(in[1]);
  lathe_executable_free(e);
  lathe_builder_free(b);
  return ok;
}

static bool same_bits_or_nan(float a, float b) { return (isnan(a) && isnan(b)) || memcmp(&a, &b, 4) == 0; }

/* The backends of the ISAs this machine runs (NULL for the others). */
static int isa_backends(lathe_backend_t *be) {
  int n = 0;
  for (int i = 0; i < 3; i++) {
    char cfg[64];
    snprintf(cfg, sizeof cfg, "lathe:cpu,threads=2,isa=%s", isa_names[i]);
    be[i] = NULL;
    lathe_status_t st = lathe_backend_new(cfg, &be[i]);
    if (st) {
      CHECK(i > 0 && lathe_status_code_of(st) == LATHE_STATUS_FAILED_PRECONDITION, "%s: %s", cfg,
            lathe_status_message(st));
      lathe_status_free(st);
      continue;
    }
    n++;
  }
  return n;
}

TEST(vmath_accuracy_and_isa_agreement) {
  lathe_backend_t be[3];
  isa_backends(be);
  enum { DENSE = 1 << 18 };
  int64_t n_pat = ((int64_t)1 << 32) / 4099 + 1, n = n_pat + DENSE + 8;
  float *x = malloc(sizeof(float) * (size_t)n), *got[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) got[i] = malloc(sizeof(float) * (size_t)n);
  for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
    const vm_fn *F = &fns[f];
    for (int64_t k = 0; k < n_pat; k++) {
      uint32_t u = (uint32_t)(k * 4099);
      memcpy(&x[k], &u, 4);
    }
    for (int64_t k = 0; k < DENSE; k++) x[n_pat + k] = F->lo + (F->hi - F->lo) * (float)k / DENSE;
    const float specials[8] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -3.4e38f, 3.4e38f};
    memcpy(x + n_pat + DENSE, specials, sizeof specials);
    int ref_isa = -1;
    for (int i = 0; i < 3; i++) {
      if (!be[i] || !run_op(be[i], F->op, x, NULL, n, got[i])) continue;
      double worst = 0;
      int64_t worst_k = 0, bad_special = -1;
      for (int64_t k = 0; k < n; k++) {
        double e = ulp_error(got[i][k], F->ref((double)x[k]));
        if (e > worst) worst = e, worst_k = k;
        /* where the result is not finite or the argument is special, libm's float answer */
        float lm = F->libm(x[k]);
        if ((!isfinite(lm) || !isfinite(x[k]) || x[k] == 0) && !same_bits_or_nan(got[i][k], lm) && bad_special < 0)
          bad_special = k;
      }
      CHECK(worst <= F->ulp_bound, "%s on %s: %.3f ulp at x=%a (got %a, want %a), bound %.1f", F->name, isa_names[i],
            worst, (double)x[worst_k], (double)got[i][worst_k], F->ref((double)x[worst_k]), F->ulp_bound);
      CHECK(bad_special < 0, "%s on %s: at x=%a got %a, libm gives %a", F->name, isa_names[i],
            bad_special < 0 ? 0.0 : (double)x[bad_special], bad_special < 0 ? 0.0 : (double)got[i][bad_special],
            bad_special < 0 ? 0.0 : (double)F->libm(x[bad_special]));
      if (getenv("LATHE_VMATH_REPORT")) printf("  %-9s %-9s max %.3f ulp\n", F->name, isa_names[i], worst);
      if (ref_isa < 0) {
        ref_isa = i;
        continue;
      }
      int64_t diff = -1;
      for (int64_t k = 0; k < n && diff < 0; k++)
        if (!same_bits_or_nan(got[i][k], got[ref_isa][k])) diff = k;
      CHECK(diff < 0, "%s: %s and %s differ at x=%a: %a vs %a", F->name, isa_names[ref_isa], isa_names[i],
            diff < 0 ? 0.0 : (double)x[diff], diff < 0 ? 0.0 : (double)got[ref_isa][diff],
            diff < 0 ? 0.0 : (double)got[i][diff]);
    }
  }
  for (int i = 0; i < 3; i++) free(got[i]);
  free(x);
  for (int i = 0; i < 3; i++) lathe_backend_free(be[i]);
}

TEST(vmath_pow) {
  lathe_backend_t be[3];
  isa_backends(be);
  /* bases: +-(a sweep over 2^-140 .. 2^140), exponents: integers, halves and a sweep */
  enum { NX = 1200, NY = 700 };
  int64_t n = (int64_t)NX * NY + 16;
  float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n), *got[3] = {NULL, NULL, NULL};
  for (int i = 0; i < 3; i++) got[i] = malloc(sizeof(float) * (size_t)n);
  for (int i = 0; i < NX; i++)
    for (int j = 0; j < NY; j++) {
      float xv = ldexpf(1.0f + (float)((i * 7919) % 1000) / 1000.0f, (i % 280) - 140);
      if (i % 3 == 0) xv = -xv;
      float yv = j < 100 ? (float)(j - 50) : j < 200 ? (float)(j - 150) * 0.5f : -40.0f + 80.0f * (float)(j - 200) / 500;
      x[(int64_t)i * NY + j] = xv;
      y[(int64_t)i * NY + j] = yv;
    }
  const float sx[16] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 2.0f, 0.5f, -2.0f, 1e-45f, 3e38f, 1.0f, 2.0f, -8.0f, 4.0f};
  const float sy[16] = {2.0f, 3.0f, 0.5f, -1.0f, 2.0f, NAN, INFINITY, -INFINITY, 0.0f, 1e30f, 2.0f, 2.0f, 1e38f, 130.0f, 1.0f / 3, -160.0f};
  memcpy(x + (int64_t)NX * NY, sx, sizeof sx);
  memcpy(y + (int64_t)NX * NY, sy, sizeof sy);
  int ref_isa = -1;
  for (int i = 0; i < 3; i++) {
    if (!be[i] || !run_op(be[i], LATHE_OP_POW, x, y, n, got[i])) continue;
    double worst = 0;
    int64_t worst_k = 0, bad_special = -1;
    for (int64_t k = 0; k < n; k++) {
      double e = ulp_error(got[i][k], pow((double)x[k], (double)y[k]));
      if (e > worst) worst = e, worst_k = k;
      float lm = powf(x[k], y[k]);
      if ((!isfinite(lm) || !isfinite(x[k]) || !isfinite(y[k]) || x[k] == 0) && !same_bits_or_nan(got[i][k], lm) &&
          bad_special < 0)
        bad_special = k;
    }
    CHECK(worst <= pow_ulp_bound, "Pow on %s: %.3f ulp at %a^%a (got %a)", isa_names[i], worst, (double)x[worst_k],
          (double)y[worst_k], (double)got[i][worst_k]);
    CHECK(bad_special < 0, "Pow on %s: %a^%a gives %a, libm %a", isa_names[i], bad_special < 0 ? 0.0 : (double)x[bad_special],
          bad_special < 0 ? 0.0 : (double)y[bad_special], bad_special < 0 ? 0.0 : (double)got[i][bad_special],
          bad_special < 0 ? 0.0 : (double)powf(x[bad_special], y[bad_special]));
    if (getenv("LATHE_VMATH_REPORT")) printf("  %-9s %-9s max %.3f ulp\n", "Pow", isa_names[i], worst);
    if (ref_isa < 0) {
      ref_isa = i;
      continue;
    }
    int64_t diff = -1;
    for (int64_t k = 0; k < n && diff < 0; k++)
      if (!same_bits_or_nan(got[i][k], got[ref_isa][k])) diff = k;
    CHECK(diff < 0, "Pow: %s and %s differ at %a^%a", isa_names[ref_isa], isa_names[i], diff < 0 ? 0.0 : (double)x[diff],
          diff < 0 ? 0.0 : (double)y[diff]);
  }
  for (int i = 0; i < 3; i++) free(got[i]);
  free(x);
  free(y);
  for (int i = 0; i < 3; i++) lathe_backend_free(be[i]);
}

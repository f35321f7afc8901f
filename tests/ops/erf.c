/* erf.c -- Erf to a few ulp relative to the true value, where a tolerance relative to 1 + |want|
 * (the table's) cannot see it: tiny arguments (erf(x) ~ 2x/sqrt(pi)), signed zeros, the range
 * around 1 and the tails, in Float32, Float16 and BFloat16 (the halves round the Float32 result
 * once). Both the backend under test and, under -b, the reference must pass. */
#include <float.h>

#include "testing.h"

static int64_t ulp_dist(double got, double want, lathe_dtype dt) {
  if (isnan(got) || isnan(want)) return isnan(got) && isnan(want) ? 0 : INT64_MAX;
  if (got == want) return signbit(got) == signbit(want) ? 0 : INT64_MAX; /* erf(+0) = +0, erf(-0) = -0 */
  int mant = dt == LATHE_DTYPE_FLOAT32 ? 24 : dt == LATHE_DTYPE_FLOAT16 ? 11 : 8;
  int emin = dt == LATHE_DTYPE_FLOAT32 ? -125 : dt == LATHE_DTYPE_FLOAT16 ? -13 : -125;
  int e;
  frexp(want != 0 ? want : got, &e);
  if (e < emin) e = emin; /* subnormals: the ulp of the smallest normal */
  double ulp = ldexp(1, e - mant);
  return (int64_t)ceil(fabs(got - want) / ulp);
}

TEST(erf_relative_ulp) {
  static const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16};
  enum { N = 4096 };
  static double xs[N];
  int n = 0;
  static const double fixed[] = {0.0, -0.0, 1e-38, 1e-30, 1e-20, 1e-10, 1e-6, -1e-6, 1e-4, 0.01132106, -0.01132106,
                                 0.5, 0.9, 0.99, 1.0, 1.01, 1.5, 2.0, 2.5, 3.0, 3.9, 4.0, 5.0, 10.0, -10.0,
                                 INFINITY, -INFINITY, NAN};
  for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) xs[n++] = fixed[i];
  while (n < N) { /* log-spaced magnitudes 1e-9 .. 6, both signs */
    int k = n - (int)(sizeof fixed / sizeof fixed[0]);
    double m = pow(10, -9 + 9.8 * (k / 2) / ((N - 30) / 2.0));
    xs[n++] = k % 2 ? -m : m;
  }
  for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
    lathe_dtype dt = dts[t];
    char label[64];
    snprintf(label, sizeof label, "erf_ulp/%s", lathe_dtype_name(dt));
    lathe_function_t fn;
    lathe_builder_t b = tst_builder(label, &fn);
    lathe_shape s = TST_SHAPE(dt, N);
    lathe_value_t x = tst_param(fn, "x", s), y = NULL;
    if (!tst_built(label, lathe_unary(fn, LATHE_OP_ERF, x, &y), b)) continue;
    CHECK_OK(lathe_function_return(fn, &y, 1));
    void *in = tst_alloc_for(&s);
    for (int i = 0; i < N; i++) tst_set(in, dt, i, xs[i]);
    const void *ins[1] = {in};
    void *out[1];
    lathe_status_t st = tst_run(b, ins, 1, out, 1, NULL);
    CHECK(st == NULL, "%s: run: %s", label, lathe_status_message(st));
    if (!st) {
      int64_t worst = 0, at = 0;
      for (int i = 0; i < N; i++) {
        double xv = tst_get(in, dt, i), want = erf(xv); /* the dtype's rounded argument, exact erf */
        void *w1 = tst_alloc_for(&(lathe_shape){.dtype = dt, .rank = 0});
        tst_set(w1, dt, 0, want);
        int64_t dist = ulp_dist(tst_get(out[0], dt, i), tst_get(w1, dt, 0), dt);
        free(w1);
        if (dist > worst) worst = dist, at = i;
      }
      /* Float32: a few ulp (measured: lathe:cpu 1, mlx:cpu 3 at x = 1.349); halves: the rounded Float32
       * value, so at most one ulp of the half (measured: 0) */
      int64_t allowed = dt == LATHE_DTYPE_FLOAT32 ? 4 : 1;
      CHECK(worst <= allowed, "%s: %lld ulp at x = %.9g (got %.9g, want %.9g; %lld allowed)", label, (long long)worst,
            tst_get(in, dt, at), tst_get(out[0], dt, at), erf(tst_get(in, dt, at)), (long long)allowed);
      tst_free_output(out[0]);
    }
    lathe_status_free(st);
    free(in);
    lathe_builder_free(b);
  }
}

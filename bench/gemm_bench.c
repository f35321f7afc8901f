/* gemm_bench.c -- a square Float32 matrix product (default 1024^3) through lathe's DotGeneral
 * against one cblas_sgemm call of the BLAS lathe links (OpenBLAS, set to as many threads as
 * lathe's pool), run alternately; medians. Usage: gemm_bench [config] [repeats] [n].
 * OpenBLAS's core is the one it picked at load time (OPENBLAS_CORETYPE, if the caller set it,
 * changes the competitor only: lathe's own kernels are chosen from cpuid). */
#include <cblas.h>

#include "bench.h"

extern char *openblas_get_corename(void) __attribute__((weak));
extern void openblas_set_num_threads(int) __attribute__((weak));

int main(int argc, char **argv) {
  bench_init(argc, argv);
  int64_t n = argc > 3 && atoi(argv[3]) > 0 ? atoi(argv[3]) : 1024;
  int threads = 2;
  const char *t = argc > 1 ? strstr(argv[1], "threads=") : NULL;
  if (t) threads = atoi(t + 8);

  lathe_builder_t b;
  TRY(lathe_builder_new(be, "gemm", &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape s = {.dtype = LATHE_DTYPE_FLOAT32, .rank = 2, .dims = {n, n}};
  lathe_value_t x, y, z;
  TRY(lathe_parameter(fn, "x", &s, &x));
  TRY(lathe_parameter(fn, "y", &s, &y));
  int c1 = 1, c0 = 0;
  TRY(lathe_dot_general(fn, x, &c1, 1, NULL, 0, y, &c0, 1, NULL, 0, NULL, &z));
  TRY(lathe_function_return(fn, &z, 1));
  bench_graph g;
  bench_prepare(&g, b, NULL, NULL);

  size_t nn = (size_t)(n * n);
  float *a = malloc(nn * sizeof(float)), *bb = malloc(nn * sizeof(float)), *c = malloc(nn * sizeof(float));
  for (size_t k = 0; k < nn; k++) a[k] = bb[k] = (float)((k * 7919 % 1000) / 500.0 - 1.0);
  double *tb = malloc(sizeof(double) * (size_t)repeats);
  for (int r = -2; r < repeats; r++) {
    double tl = bench_run_once(&g);
    if (openblas_set_num_threads) openblas_set_num_threads(threads); /* lathe sets 1 for its own calls */
    double t0 = bench_now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, a, (int)n, bb, (int)n, 0.0f, c,
                (int)n);
    double t1 = bench_now();
    if (r >= 0) g.t[r] = tl, tb[r] = t1 - t0;
  }
  double ml = bench_finish(&g);
  qsort(tb, (size_t)repeats, sizeof(double), bench_cmp_double);
  double mb = tb[repeats / 2];
  double gf = 2.0 * (double)n * (double)n * (double)n * 1e-9;
  printf("Float32 %lldx%lldx%lld on %s, median of %d runs\n", (long long)n, (long long)n, (long long)n,
         lathe_backend_description(be), repeats);
  printf("lathe DotGeneral        %9.3f ms %7.1f GFLOP/s\n", ml * 1e3, gf / ml);
  printf("cblas_sgemm (%s, %d threads) %9.3f ms %7.1f GFLOP/s\n",
         openblas_get_corename ? openblas_get_corename() : "BLAS", threads, mb * 1e3, gf / mb);
  printf("lathe speed / BLAS speed: %.2fx\n", mb / ml);
  free(a), free(bb), free(c), free(tb);
  lathe_backend_free(be);
  return 0;
}

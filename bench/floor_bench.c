/* floor_bench.c -- the per-execution floor: what one Execute of a one-op graph costs through
 * the C API (input checks, plan lookup, the run, output buffers), with and without reading
 * the result back, against a plain memcpy of the same bytes measured in the same run.
 *
 *   make bench && build/floor_bench [config] [repeats]
 *
 * Each sample times a batch of 1000 executions; the median over `repeats` samples is printed
 * per execution. */
#include "bench.h"

enum { BATCH = 1000 };

static double batch_median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, bench_cmp_double);
  return t[n / 2];
}

int main(int argc, char **argv) {
  repeats = 31;
  bench_init(argc, argv);
  lathe_builder_t b;
  TRY(lathe_builder_new(be, "floor", &b));
  lathe_function_t fn = lathe_builder_main(b);
  int64_t dims[1] = {4};
  lathe_shape s;
  TRY(lathe_shape_make(LATHE_DTYPE_FLOAT32, 1, dims, &s));
  lathe_value_t x, y;
  TRY(lathe_parameter(fn, "x", &s, &x));
  TRY(lathe_neg(fn, x, &y));
  TRY(lathe_function_return(fn, &y, 1));
  lathe_executable_t e;
  TRY(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  float host[4] = {1, 2, 3, 4}, back[4];
  lathe_buffer_t in;
  TRY(lathe_buffer_from_host(be, 0, &s, host, sizeof host, &in));

  double *t_exec = malloc(sizeof(double) * (size_t)repeats), *t_read = malloc(sizeof(double) * (size_t)repeats),
         *t_copy = malloc(sizeof(double) * (size_t)repeats);
  volatile float sink = 0;
  for (int r = 0; r < repeats; r++) {
    double t0 = bench_now();
    for (int k = 0; k < BATCH; k++) {
      lathe_buffer_t out;
      TRY(lathe_executable_execute(e, &in, NULL, 1, 0, &out, 1));
      lathe_buffer_free(out);
    }
    double t1 = bench_now();
    for (int k = 0; k < BATCH; k++) {
      lathe_buffer_t out;
      TRY(lathe_executable_execute(e, &in, NULL, 1, 0, &out, 1));
      TRY(lathe_buffer_to_host(out, back, sizeof back));
      if (back[0] != -1) {
        fprintf(stderr, "floor_bench: wrong result %g\n", back[0]);
        return 1;
      }
      lathe_buffer_free(out);
    }
    double t2 = bench_now();
    for (int k = 0; k < BATCH; k++) {
      memcpy(back, host, sizeof back);
      sink += back[k & 3];
    }
    double t3 = bench_now();
    t_exec[r] = (t1 - t0) / BATCH;
    t_read[r] = (t2 - t1) / BATCH;
    t_copy[r] = (t3 - t2) / BATCH;
  }
  (void)sink;
  printf("%-40s %12s\n", "per execution (median of batches)", lathe_backend_config(be));
  printf("%-40s %10.3f µs\n", "Execute Neg(Float32[4]) + free", batch_median(t_exec, repeats) * 1e6);
  printf("%-40s %10.3f µs\n", "Execute + read back + free", batch_median(t_read, repeats) * 1e6);
  printf("%-40s %10.3f µs\n", "memcpy of 16 bytes (reference)", batch_median(t_copy, repeats) * 1e6);
  free(t_exec);
  free(t_read);
  free(t_copy);
  lathe_buffer_free(in);
  lathe_executable_free(e);
  lathe_backend_free(be);
  return 0;
}

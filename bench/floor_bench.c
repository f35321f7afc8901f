/* floor_bench.c -- the per-execution floor: what one Execute of a one-op graph costs through
 * the C API (input checks, plan lookup, the run, output buffers), phase by phase: the upload,
 * the execution, the read-back and the three together (what GoMLX's Exec.Call + Value() does),
 * against a plain memcpy of the same bytes measured in the same run.
 *
 *   make bench && build/floor_bench [config] [repeats] [phase]
 *
 * (phase: a word of one phase's name, to run that phase alone, as for a profile of it)
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
  double t_new = bench_now();
  bench_init(argc, argv);
  t_new = bench_now() - t_new;
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

  /* the phases of GoMLX's Exec.Call + Value() on a one-op graph, each timed alone, then together */
  enum { UPLOAD, EXEC, READ, EXEC_READ, CALL, COPY, N_PHASES };
  static const char *names[N_PHASES] = {
      "upload 16 bytes + free",           "Execute Neg(Float32[4]) + free",
      "read back a computed buffer",      "Execute + read back + free",
      "upload + Execute + read back + free (Call + Value)", "memcpy of 16 bytes (reference)"};
  double *t[N_PHASES];
  for (int p = 0; p < N_PHASES; p++) t[p] = malloc(sizeof(double) * (size_t)repeats);
  lathe_buffer_t done;
  TRY(lathe_executable_execute(e, &in, NULL, 1, 0, &done, 1));
  volatile float sink = 0;
  for (int r = 0; r < repeats; r++) {
    for (int p = 0; p < N_PHASES; p++) {
      if (argc > 3 && !strstr(names[p], argv[3])) continue;
      double t0 = bench_now();
      for (int k = 0; k < BATCH; k++) {
        lathe_buffer_t b0 = NULL, out = NULL;
        switch (p) {
        case UPLOAD:
          TRY(lathe_buffer_from_host(be, 0, &s, host, sizeof host, &b0));
          break;
        case EXEC:
          TRY(lathe_executable_execute(e, &in, NULL, 1, 0, &out, 1));
          break;
        case READ:
          TRY(lathe_buffer_to_host(done, back, sizeof back));
          break;
        case EXEC_READ:
        case CALL:
          if (p == CALL) TRY(lathe_buffer_from_host(be, 0, &s, host, sizeof host, &b0));
          TRY(lathe_executable_execute(e, p == CALL ? &b0 : &in, NULL, 1, 0, &out, 1));
          TRY(lathe_buffer_to_host(out, back, sizeof back));
          if (back[0] != -1) {
            fprintf(stderr, "floor_bench: wrong result %g\n", back[0]);
            return 1;
          }
          break;
        default:
          memcpy(back, host, sizeof back);
          sink += back[k & 3];
        }
        lathe_buffer_free(b0);
        lathe_buffer_free(out);
      }
      t[p][r] = (bench_now() - t0) / BATCH;
    }
  }
  (void)sink;
  printf("%-52s %10.1f ms\n", "backend creation (the first in this process)", t_new * 1e3);
  printf("%-52s %12s\n", "per execution (median of batches)", lathe_backend_config(be));
  for (int p = 0; p < N_PHASES; p++) {
    if (argc <= 3 || strstr(names[p], argv[3]))
      printf("%-52s %10.3f µs\n", names[p], batch_median(t[p], repeats) * 1e6);
    free(t[p]);
  }
  lathe_buffer_free(done);
  lathe_buffer_free(in);
  lathe_executable_free(e);
  lathe_backend_free(be);
  return 0;
}

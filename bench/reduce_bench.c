/* reduce_bench.c -- column sums (the bias gradients of a dense layer: ReduceSum over the rows of
 * [rows, cols]) on a lathe device: one program of K independent sums over K inputs, so the
 * execution's fixed cost spreads over K kernels; prints the median time per sum and the GB/s of
 * the operand read. bench/reduce.sh runs it beside PyTorch's x.sum(0) (bench/reduce_torch.py).
 *
 *   make bench && build/reduce_bench [config (lathe:cuda)] [repeats (20)]
 *
 * One line per case: "reduce dtype=D rows=R cols=C lathe_us=T lathe_gbs=G". */
#include "bench.h"

enum { K = 16 };

static void fill_small(const lathe_shape *s, void *data, size_t nbytes, void *ctx) {
  (void)s, (void)ctx;
  memset(data, 0x3c, nbytes); /* a small positive value in every float dtype */
}

int main(int argc, char **argv) {
  if (argc < 2) argv[1] = "lathe:cuda", argc = 2;
  bench_init(argc, argv);
  static const struct {
    lathe_dtype dt;
    int64_t rows, cols;
  } cases[] = {
      {LATHE_DTYPE_BFLOAT16, 8192, 768}, {LATHE_DTYPE_BFLOAT16, 8192, 3072}, {LATHE_DTYPE_FLOAT32, 8192, 768},
      {LATHE_DTYPE_FLOAT32, 8192, 3072}, {LATHE_DTYPE_FLOAT32, 65536, 64},   {LATHE_DTYPE_FLOAT32, 512, 50304},
  };
  printf("# %s, %d repeats, %d column sums per execution\n", lathe_backend_description(be), repeats, K);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    lathe_builder_t b;
    lathe_function_t fn;
    TRY(lathe_builder_new(be, "column_sums", &b));
    fn = lathe_builder_main(b);
    lathe_shape s;
    TRY(lathe_shape_make(cases[c].dt, 2, (int64_t[]){cases[c].rows, cases[c].cols}, &s));
    lathe_value_t out[K];
    for (int k = 0; k < K; k++) {
      lathe_value_t x;
      TRY(lathe_parameter(fn, NULL, &s, &x));
      TRY(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, x, (int[]){0}, 1, &out[k]));
    }
    TRY(lathe_function_return(fn, out, K));
    bench_graph g;
    bench_prepare(&g, b, fill_small, NULL);
    for (int r = -2; r < repeats; r++) {
      double t = bench_run_once(&g);
      if (r >= 0) g.t[r] = t;
    }
    double med = bench_finish(&g) / K;
    lathe_builder_free(b);
    double bytes = (double)lathe_shape_byte_size(&s);
    printf("reduce dtype=%s rows=%lld cols=%lld lathe_us=%.2f lathe_gbs=%.1f\n", lathe_dtype_name(cases[c].dt),
           (long long)cases[c].rows, (long long)cases[c].cols, med * 1e6, bytes / med / 1e9);
  }
  lathe_backend_free(be);
  return 0;
}

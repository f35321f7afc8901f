/* nvrtc_bench.c -- what NVRTC takes to compile a plan's generated kernels: each kernel as its own
 * program (lathe:cuda before batching) against batches of 8 per program (what a plan does now,
 * lathe_cuda_kernels_batch) and all in one program, in the same run, alternating, medians of
 * `repeats` rounds. The kernels are the LOOP and ROWS regions of training-step pieces as GoMLX
 * builds them (bias + ReLU with a broadcast zero, exact GELU, an Adam update, softmax, layer norm)
 * in Float32 and BFloat16. Needs NVRTC only, no GPU (LATHE_NVRTC_LIBRARY names libnvrtc.so.13
 * when it is not on the library path):
 *   make build/nvrtc_bench && build/nvrtc_bench [repeats] [sm] */
#include "cuda/cuda.h"
#include "graph/program.h"
#include "bench.h"

static lathe_value_t param(lathe_function_t fn, const char *name, lathe_dtype dt, int rank, const int64_t *dims) {
  lathe_shape s = {.dtype = dt, .rank = rank};
  for (int a = 0; a < rank; a++) s.dims[a] = dims[a];
  lathe_value_t v;
  TRY(lathe_parameter(fn, name, &s, &v));
  return v;
}

static lathe_value_t scalar(lathe_function_t fn, double x, lathe_dtype dt, const lathe_shape *to) {
  lathe_value_t c;
  TRY(lathe_constant(fn, &(lathe_shape){.dtype = LATHE_DTYPE_FLOAT64}, &x, sizeof x, &c));
  TRY(lathe_convert_dtype(fn, c, dt, &c));
  TRY(lathe_broadcast_in_dim(fn, c, to, NULL, 0, &c));
  return c;
}

/* Row statistics kept as [rows, 1] and broadcast back over [rows, n]. */
static lathe_value_t row_stat(lathe_function_t fn, lathe_op op, lathe_value_t x, const lathe_shape *xs) {
  int ax = 1, both[] = {0, 1};
  int64_t kd[] = {xs->dims[0], 1};
  lathe_value_t r;
  TRY(lathe_reduce(fn, op, x, &ax, 1, &r));
  TRY(lathe_reshape(fn, r, kd, 2, &r));
  TRY(lathe_broadcast_in_dim(fn, r, xs, both, 2, &r));
  return r;
}

/* Piece `which` of a training step over [256, 1024] in dtype dt. */
static lathe_builder_t piece(int which, lathe_dtype dt) {
  lathe_builder_t b;
  TRY(lathe_builder_new(be, "piece", &b));
  lathe_function_t fn = lathe_builder_main(b);
  int64_t d2[] = {256, 1024}, d1[] = {1024};
  lathe_shape xs = {.dtype = dt, .rank = 2, .dims = {256, 1024}};
  lathe_value_t x = param(fn, "x", dt, 2, d2), y, t, outs[3];
  int ax = 1;
  switch (which) {
    case 0: { /* dense bias + ReLU as GoMLX's activation.Relu builds it: Max against a broadcast zero */
      lathe_value_t bias = param(fn, "b", dt, 1, d1), bb;
      TRY(lathe_broadcast_in_dim(fn, bias, &xs, &ax, 1, &bb));
      TRY(lathe_add(fn, x, bb, &t));
      TRY(lathe_max(fn, t, scalar(fn, 0, dt, &xs), &y));
      TRY(lathe_function_return(fn, &y, 1));
      break;
    }
    case 1: /* exact GELU: x * (1 + erf(x / sqrt 2)) / 2 */
      TRY(lathe_mul(fn, x, scalar(fn, 0.7071067811865476, dt, &xs), &t));
      TRY(lathe_erf(fn, t, &t));
      TRY(lathe_add(fn, t, scalar(fn, 1, dt, &xs), &t));
      TRY(lathe_mul(fn, x, t, &y));
      TRY(lathe_mul(fn, y, scalar(fn, 0.5, dt, &xs), &y));
      TRY(lathe_function_return(fn, &y, 1));
      break;
    case 2: { /* Adam: m, v and the parameter updated from the gradient x */
      lathe_value_t p = param(fn, "p", dt, 2, d2), m = param(fn, "m", dt, 2, d2), v = param(fn, "v", dt, 2, d2), g2, u;
      TRY(lathe_mul(fn, m, scalar(fn, 0.9, dt, &xs), &m));
      TRY(lathe_mul(fn, x, scalar(fn, 0.1, dt, &xs), &t));
      TRY(lathe_add(fn, m, t, &m));
      TRY(lathe_mul(fn, x, x, &g2));
      TRY(lathe_mul(fn, g2, scalar(fn, 0.001, dt, &xs), &g2));
      TRY(lathe_mul(fn, v, scalar(fn, 0.999, dt, &xs), &v));
      TRY(lathe_add(fn, v, g2, &v));
      TRY(lathe_sqrt(fn, v, &u));
      TRY(lathe_add(fn, u, scalar(fn, 1e-8, dt, &xs), &u));
      TRY(lathe_div(fn, m, u, &u));
      TRY(lathe_mul(fn, u, scalar(fn, 1e-3, dt, &xs), &u));
      TRY(lathe_sub(fn, p, u, &p));
      outs[0] = p, outs[1] = m, outs[2] = v;
      TRY(lathe_function_return(fn, outs, 3));
      break;
    }
    case 3: /* softmax over the rows */
      TRY(lathe_sub(fn, x, row_stat(fn, LATHE_OP_REDUCE_MAX, x, &xs), &t));
      TRY(lathe_exp(fn, t, &t));
      TRY(lathe_div(fn, t, row_stat(fn, LATHE_OP_REDUCE_SUM, t, &xs), &y));
      TRY(lathe_function_return(fn, &y, 1));
      break;
    default: { /* layer norm with a gain */
      lathe_value_t g = param(fn, "g", dt, 1, d1), gb, c, var;
      lathe_value_t inv = scalar(fn, 1.0 / 1024, dt, &xs);
      TRY(lathe_mul(fn, row_stat(fn, LATHE_OP_REDUCE_SUM, x, &xs), inv, &t));
      TRY(lathe_sub(fn, x, t, &c));
      TRY(lathe_mul(fn, c, c, &t));
      TRY(lathe_mul(fn, row_stat(fn, LATHE_OP_REDUCE_SUM, t, &xs), inv, &var));
      TRY(lathe_add(fn, var, scalar(fn, 1e-5, dt, &xs), &var));
      TRY(lathe_rsqrt(fn, var, &var));
      TRY(lathe_broadcast_in_dim(fn, g, &xs, &ax, 1, &gb));
      TRY(lathe_mul(fn, c, var, &y));
      TRY(lathe_mul(fn, y, gb, &y));
      TRY(lathe_function_return(fn, &y, 1));
    }
  }
  return b;
}

static double compile(const char *text, int cc) {
  void *cubin = NULL;
  size_t size = 0;
  double t = bench_now();
  TRY(lathe_cuda_compile_source(text, cc, &cubin, &size));
  t = bench_now() - t;
  free(cubin);
  return t;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
  repeats = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 3;
  int cc = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 90;
  TRY(lathe_backend_new("lathe:cpu", &be));
  lathe_program_options opt = {.fuse = true, .plan_memory = true, .alignment = 256, .rows_max = LATHE_CUDA_ROWS_MAX, .rows_lone = 1056};
  lathe_cuda cu;
  memset(&cu, 0, sizeof cu);
  enum { MAXK = 64 };
  lathe_cuda_ewk *ks[MAXK];
  const char *src[MAXK];
  int n = 0;
  lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_BFLOAT16};
  for (int d = 0; d < 2; d++)
    for (int which = 0; which < 5; which++) {
      lathe_builder_t b = piece(which, dts[d]);
      lathe_program *p;
      TRY(lathe_program_build(b, &opt, &p));
      const lathe_pfunc *pf = lathe_program_main(p);
      for (int r = 0; r < pf->n_regions && n < MAXK; r++) {
        if (pf->regions[r].kind == LATHE_PREGION_REDUCE) continue;
        TRY(lathe_cuda_ewk_region(&cu, pf, &pf->regions[r], &ks[n]));
        bool seen = false;
        for (int k = 0; k < n && !seen; k++) seen = !strcmp(src[k], lathe_cuda_ewk_source(ks[n]));
        if (seen) lathe_cuda_ewk_free(ks[n]);
        else src[n] = lathe_cuda_ewk_source(ks[n]), n++;
      }
      lathe_program_free(p);
      lathe_builder_free(b);
    }
  size_t prefix = strlen(lathe_cuda_ew_prelude());
  printf("%d distinct kernels (LOOP and ROWS regions), sm_%d, %d rounds\n", n, cc, repeats);
  compile(src[0], cc); /* NVRTC's own start, outside the rounds */
  double *alone = malloc(sizeof(double) * (size_t)repeats), *by8 = malloc(sizeof(double) * (size_t)repeats),
         *one = malloc(sizeof(double) * (size_t)repeats);
  for (int r = 0; r < repeats; r++) {
    alone[r] = by8[r] = 0;
    for (int i = 0; i < n; i++) alone[r] += compile(src[i], cc);
    for (int i = 0; i < n; i += 8) {
      char *t = lathe_cuda_batch_text(n - i < 8 ? n - i : 8, src + i, prefix);
      by8[r] += compile(t, cc);
      free(t);
    }
    char *t = lathe_cuda_batch_text(n, src, prefix);
    one[r] = compile(t, cc);
    free(t);
  }
  double a = median(alone, repeats), b8 = median(by8, repeats), o = median(one, repeats);
  printf("%-34s %8.3f s  (%.0f ms a kernel)\n", "each kernel its own program", a, a / n * 1e3);
  printf("%-34s %8.3f s  ratio %.2f\n", "batches of 8 (lathe now)", b8, b8 / a);
  printf("%-34s %8.3f s  ratio %.2f\n", "one program", o, o / a);
  for (int i = 0; i < n; i++) lathe_cuda_ewk_free(ks[i]);
  free(alone);
  free(by8);
  free(one);
  lathe_backend_free(be);
  return 0;
}

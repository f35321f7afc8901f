/* mlx_bench.c -- the MLX device against lathe:cpu on the same graphs, and against MLX's own
 * Python API running the same computation (bench/mlx_bench.py): the bridge's overhead.
 *
 *   make bench && build/mlx_bench [repeats] [device] [noref] [resident]   (from the repository root)
 *
 * noref leaves the reference backend out (only MLX runs in the process); resident gives the
 * MLX backends inputs that an execution computed (on the GPU: device memory) instead of uploaded
 * ones (MLX keeps uploads in host-visible unified memory), and has Python compute its inputs too
 * (without it, Python's inputs are copied from host lists, as lathe's uploads are).
 *
 * device is cpu (default) or gpu; on gpu the reference is lathe:cuda instead of lathe:cpu (the
 * GPU half: lathe:cuda vs mlx:gpu on the same graphs). Every graph is built once through the C API and compiled for
 * lathe:cpu, mlx (mx::compile) and mlx:dynamic; executions of the three alternate, so a change of
 * load on a shared machine hits all alike, and each reported time is the median over repeats of
 * one Execute (MLX evaluates its outputs before Execute returns). Halfway through a graph's
 * executions the same graph runs in MLX's Python API (bench/mlx_bench.py), which times
 * mx.eval(f(*inputs)) for f compiled with mx.compile and for f eager, also medians; it runs
 * with the Python found as $LATHE_MLX_PYTHON (default python3, with .deps/mlx on PYTHONPATH,
 * where scripts/setup.sh installs the mlx and mlx-cpu wheels) and with the system's OpenBLAS
 * preloaded and single-threaded: MLX's CPU wheel bundles a reference BLAS, but in this process,
 * which links OpenBLAS for lathe:cpu (and sets it to one thread), MLX's BLAS calls resolve to
 * OpenBLAS, so without this the two sides would not run the same matrix products. Ratios: mlx / lathe:cpu, and
 * lathe's mlx / Python's mx.compile (and mlx:dynamic / Python eager): above 1 is slower. */
#include <math.h>

#include "bench.h"

#define F32 LATHE_DTYPE_FLOAT32

static lathe_shape shp(int rank, const int64_t *dims) {
  lathe_shape s;
  TRY(lathe_shape_make(F32, rank, dims, &s));
  return s;
}
#define SHP(...) shp((int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), (int64_t[]){__VA_ARGS__})

static lathe_value_t param(lathe_function_t fn, const char *name, lathe_shape s) {
  lathe_value_t v;
  TRY(lathe_parameter(fn, name, &s, &v));
  return v;
}
static lathe_value_t scalar(lathe_function_t fn, float v) {
  lathe_shape s = SHP();
  lathe_value_t c;
  TRY(lathe_constant(fn, &s, &v, sizeof v, &c));
  return c;
}
typedef lathe_status_t (*bin_fn)(lathe_function_t, lathe_value_t, lathe_value_t, lathe_value_t *);
static lathe_value_t bin(bin_fn f, lathe_function_t fn, lathe_value_t a, lathe_value_t b) {
  lathe_value_t v;
  TRY(f(fn, a, b, &v));
  return v;
}
static lathe_value_t bcast(lathe_function_t fn, lathe_value_t x, lathe_shape to, const int *axes, int n) {
  lathe_value_t v;
  TRY(lathe_broadcast_in_dim(fn, x, &to, axes, n, &v));
  return v;
}
/* x [.., k] . w [k, n] */
static lathe_value_t matmul(lathe_function_t fn, lathe_value_t x, lathe_value_t w, int x_rank) {
  lathe_value_t v;
  TRY(lathe_dot_general(fn, x, (int[]){x_rank - 1}, 1, NULL, 0, w, (int[]){0}, 1, NULL, 0, NULL, &v));
  return v;
}
/* softmax over the last axis of x [rows, cols] */
static lathe_value_t softmax(lathe_function_t fn, lathe_value_t x, lathe_shape s) {
  int last = s.rank - 1, keep[LATHE_MAX_RANK];
  for (int i = 0; i < last; i++) keep[i] = i;
  lathe_value_t m, e, d;
  TRY(lathe_reduce(fn, LATHE_OP_REDUCE_MAX, x, &last, 1, &m));
  TRY(lathe_exp(fn, bin(lathe_sub, fn, x, bcast(fn, m, s, keep, last)), &e));
  TRY(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, e, &last, 1, &d));
  return bin(lathe_div, fn, e, bcast(fn, d, s, keep, last));
}

/* ---- the graphs (bench/mlx_bench.py builds the same ones) ---- */

static void mlp(lathe_function_t fn) { /* 128x784 -> 512 -> 512 -> 10, ReLU */
  lathe_value_t x = param(fn, "x", SHP(128, 784));
  int64_t widths[4] = {784, 512, 512, 10};
  for (int l = 0; l < 3; l++) {
    char wn[8], bn[8]; /* parameter names are unique per function */
    snprintf(wn, sizeof wn, "w%d", l);
    snprintf(bn, sizeof bn, "b%d", l);
    lathe_value_t w = param(fn, wn, SHP(widths[l], widths[l + 1])), b = param(fn, bn, SHP(widths[l + 1]));
    lathe_shape hs = SHP(128, widths[l + 1]);
    x = bin(lathe_add, fn, matmul(fn, x, w, 2), bcast(fn, b, hs, (int[]){1}, 1));
    if (l < 2) x = bin(lathe_max, fn, x, scalar(fn, 0));
  }
  TRY(lathe_function_return(fn, &x, 1));
}

static void ew_chain(lathe_function_t fn) { /* tanh(x * 1.5 + 0.5) * x - x * x over 2^20 */
  lathe_value_t x = param(fn, "x", SHP(1 << 20)), t;
  TRY(lathe_tanh(fn, bin(lathe_add, fn, bin(lathe_mul, fn, x, scalar(fn, 1.5f)), scalar(fn, 0.5f)), &t));
  lathe_value_t y = bin(lathe_sub, fn, bin(lathe_mul, fn, t, x), bin(lathe_mul, fn, x, x));
  TRY(lathe_function_return(fn, &y, 1));
}

static void softmax_rows(lathe_function_t fn) { /* softmax of 512 rows of 1024 */
  lathe_shape s = SHP(512, 1024);
  lathe_value_t y = softmax(fn, param(fn, "x", s), s);
  TRY(lathe_function_return(fn, &y, 1));
}

static void conv(lathe_function_t fn) { /* NHWC 16x32x32x16, 3x3 kernel to 32 channels, same padding */
  lathe_value_t x = param(fn, "x", SHP(16, 32, 32, 16)), k = param(fn, "k", SHP(3, 3, 16, 32)), y;
  lathe_conv_axes axes = {0, 3, (int[]){1, 2}, 2, 2, 3, (int[]){0, 1}, 2, 0, 3, (int[]){1, 2}, 2};
  lathe_conv_params p = {.paddings = (lathe_padding[]){{1, 1}, {1, 1}}, .n_paddings = 2};
  TRY(lathe_conv_general(fn, x, k, &axes, &p, &y));
  TRY(lathe_function_return(fn, &y, 1));
}

static void attention(lathe_function_t fn) { /* 8 heads, 256 positions, 64 dims: softmax(q k^T / 8) v */
  lathe_value_t q = param(fn, "q", SHP(8, 256, 64)), k = param(fn, "k", SHP(8, 256, 64)), v = param(fn, "v", SHP(8, 256, 64));
  lathe_value_t s, o;
  TRY(lathe_dot_general(fn, q, (int[]){2}, 1, (int[]){0}, 1, k, (int[]){2}, 1, (int[]){0}, 1, NULL, &s));
  lathe_shape ss = SHP(8, 256, 256);
  lathe_value_t p = softmax(fn, bin(lathe_mul, fn, s, scalar(fn, 0.125f)), ss);
  TRY(lathe_dot_general(fn, p, (int[]){2}, 1, (int[]){0}, 1, v, (int[]){1}, 1, (int[]){0}, 1, NULL, &o));
  TRY(lathe_function_return(fn, &o, 1));
}

static void tiny(lathe_function_t fn) { /* the per-execution floor: Neg of 4 values */
  lathe_value_t y;
  TRY(lathe_neg(fn, param(fn, "x", SHP(4)), &y));
  TRY(lathe_function_return(fn, &y, 1));
}

static const struct {
  const char *name;
  void (*build)(lathe_function_t);
} graphs[] = {
    {"mlp", mlp}, {"ew_chain", ew_chain}, {"softmax", softmax_rows}, {"conv", conv}, {"attention", attention}, {"tiny", tiny},
};
enum { N_GRAPHS = sizeof graphs / sizeof graphs[0], N_BE = 3 };
static bool noref, resident;

/* Python's medians (microseconds) for graph g: compiled and eager; -1 when it did not run. */
static void python_times(const char *device, int g, double py[2]) {
  py[0] = py[1] = -1;
  const char *python = getenv("LATHE_MLX_PYTHON");
  char cmd[1024];
  /* MLX's wheel bundles a reference BLAS; in this process MLX's BLAS calls resolve to the
   * OpenBLAS lathe links (loaded first), single-threaded as lathe:cpu sets it: Python gets the
   * same OpenBLAS, preloaded, with one thread */
  snprintf(cmd, sizeof cmd,
           "OPENBLAS_NUM_THREADS=1 LD_PRELOAD=$(ldconfig -p | awk '/libopenblas\\.so\\.0 /{print $NF; exit}') "
           "PYTHONPATH=.deps/mlx${PYTHONPATH:+:$PYTHONPATH} %s bench/mlx_bench.py %d %s %s %s 2>&1",
           python ? python : "python3", repeats, device, resident ? "--computed" : "--host", graphs[g].name);
  FILE *f = popen(cmd, "r");
  if (!f) return;
  char line[512], name[64];
  double c, e;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "%63s %lf %lf", name, &c, &e) == 3 && !strcmp(name, graphs[g].name)) py[0] = c, py[1] = e;
    else fprintf(stderr, "mlx_bench.py: %s", line);
  }
  pclose(f);
}

/* x as an execution leaves it: -(-x) computed on be (x is freed). */
static lathe_buffer_t computed_copy(lathe_backend_t be, lathe_buffer_t x, lathe_shape s) {
  lathe_builder_t b;
  TRY(lathe_builder_new(be, "copy", &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_value_t y, z;
  TRY(lathe_neg(fn, param(fn, "x", s), &y));
  TRY(lathe_neg(fn, y, &z));
  TRY(lathe_function_return(fn, &z, 1));
  lathe_executable_t e;
  TRY(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  lathe_buffer_t out;
  TRY(lathe_executable_execute(e, &x, NULL, 1, 0, &out, 1));
  TRY(lathe_buffer_wait(out));
  lathe_executable_free(e);
  lathe_buffer_free(x);
  return out;
}

/* Median seconds of each backend on graph g, executions alternating, in two halves around the
 * Python run of the same graph (so a change of load hits both sides alike). */
static void time_graph(int g, lathe_backend_t *bes, const char *device, double *med, double py[2]) {
  lathe_builder_t b;
  TRY(lathe_builder_new(bes[0], graphs[g].name, &b));
  graphs[g].build(lathe_builder_main(b));
  lathe_executable_t e[N_BE];
  lathe_buffer_t in[N_BE][16];
  int n_in = 0, n_out = 0;
  double *t[N_BE];
  for (int k = 0; k < N_BE; k++) {
    TRY(lathe_builder_compile_for(b, bes[k], &e[k]));
    n_in = lathe_executable_num_inputs(e[k]), n_out = lathe_executable_num_outputs(e[k]);
    for (int i = 0; i < n_in; i++) {
      lathe_shape s;
      TRY(lathe_executable_input_shape(e[k], i, &s));
      size_t nb = (size_t)lathe_shape_byte_size(&s);
      float *d = malloc(nb + 4);
      bench_fill_default(&s, d, nb, NULL);
      TRY(lathe_buffer_from_host(bes[k], 0, &s, d, nb, &in[k][i]));
      free(d);
      if (resident && k > 0) in[k][i] = computed_copy(bes[k], in[k][i], s);
    }
    t[k] = malloc(sizeof(double) * (size_t)repeats);
  }
  lathe_builder_free(b);
  for (int r = -3; r < repeats; r++) { /* three warm-up runs: MLX traces and builds its kernels */
    if (r == repeats / 2) python_times(device, g, py);
    for (int k = noref ? 1 : 0; k < N_BE; k++) {
      lathe_buffer_t out[4];
      double t0 = bench_now();
      TRY(lathe_executable_execute(e[k], in[k], NULL, n_in, 0, out, n_out));
      for (int o = 0; o < n_out; o++) TRY(lathe_buffer_wait(out[o]));
      double t1 = bench_now();
      for (int o = 0; o < n_out; o++) lathe_buffer_free(out[o]);
      if (r >= 0) t[k][r] = t1 - t0;
    }
  }
  for (int k = 0; k < N_BE; k++) {
    if (k == 0 && noref) med[k] = -1;
    else qsort(t[k], (size_t)repeats, sizeof(double), bench_cmp_double), med[k] = t[k][repeats / 2];
    free(t[k]);
    for (int i = 0; i < n_in; i++) lathe_buffer_free(in[k][i]);
    lathe_executable_free(e[k]);
  }
}

static void cell(double us) {
  if (us < 0) printf(" %10s |", "-");
  else if (us >= 1000) printf(" %7.2f ms |", us / 1000);
  else printf(" %7.1f us |", us);
}

int main(int argc, char **argv) {
  repeats = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 21;
  const char *device = argc > 2 ? argv[2] : "cpu";
  for (int i = 3; i < argc; i++) {
    if (!strcmp(argv[i], "noref")) noref = true;
    else if (!strcmp(argv[i], "resident")) resident = true;
    else {
      printf("mlx_bench: unknown option %s (known: noref, resident)\n", argv[i]);
      return 2;
    }
  }
  char c1[64], c2[64];
  snprintf(c1, sizeof c1, "mlx:%s", device);
  snprintf(c2, sizeof c2, "mlx:%s,dynamic", device);
  const char *names[N_BE] = {strcmp(device, "gpu") == 0 ? "lathe:cuda" : "lathe:cpu", c1, c2};
  lathe_backend_t bes[N_BE];
  for (int k = 0; k < N_BE; k++) {
    lathe_status_t st = lathe_backend_new(names[k], &bes[k]);
    if (st) {
      printf("mlx_bench: %s: %s\n", names[k], lathe_status_message(st));
      return 0;
    }
  }
  double py[N_GRAPHS][2], med[N_GRAPHS][N_BE];
  printf("%s; MLX Python API for reference; medians of %d executions; %s; inputs %s\n\n",
         lathe_backend_description(bes[1]), repeats, noref ? "reference left out" : "reference alternating",
         resident ? "computed by a previous execution" : "uploaded from the host");
  printf("| graph     | %10s |        mlx | mlx:dynamic | mlx / %s | py mx.compile |   py eager | mlx / py compile | "
         "mlx:dynamic / py eager |\n", names[0], names[0]);
  printf("|-----------|-----------:|-----------:|-----------:|------:|-----------:|-----------:|------:|------:|\n");
  for (int g = 0; g < N_GRAPHS; g++) {
    time_graph(g, bes, device, med[g], py[g]);
    printf("| %-9s |", graphs[g].name);
    for (int k = 0; k < N_BE; k++) cell(med[g][k] * 1e6);
    if (med[g][0] > 0) printf(" %5.2f |", med[g][1] / med[g][0]);
    else printf("     - |");
    cell(py[g][0]);
    cell(py[g][1]);
    if (py[g][0] > 0) printf(" %5.2f | %5.2f |\n", med[g][1] * 1e6 / py[g][0], med[g][2] * 1e6 / py[g][1]);
    else printf("     - |     - |\n");
    fflush(stdout);
  }
  for (int k = 0; k < N_BE; k++) lathe_backend_free(bes[k]);
  return 0;
}

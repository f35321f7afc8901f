/* ew_bench.c -- lathe:cpu's elementwise, reduction and window kernels on each instruction set
 * this CPU runs (isa=baseline, avx2, avx512), against the machine's streaming bandwidth, all in
 * one run: every round times each contender once, in turn, so a change of load on a shared
 * machine hits them alike; the tables print medians and ratios.
 *
 *   make bench && build/ew_bench [threads] [repeats]
 *
 * 1. Streaming bandwidth with the backend's thread count: memcpy (the C library's, which stores
 *    non-temporally at this size) and a triad a = b + 1.5 c (plain stores), 64 MiB arrays.
 * 2. The chain relu(1.5 x + 0.5) * x over 16M Float32 (issue 10): GB/s counting 64 MiB read and
 *    64 MiB written, fuse=1 on each ISA and fuse=0, as a share of the best streaming figure.
 * 3. Single ops on 1M Float32 (math, Sign, Max, ...), reductions, max-pool forward
 *    (ReduceWindow) and backward (SelectAndScatter) at CNN shapes: ms per ISA and the ratio
 *    baseline / ISA. */
#include <pthread.h>

#include "bench.h"

enum { MAX_CFG = 8, CHAIN_N = 16 << 20 };

static int threads = 0;
static const char *isa_names[3] = {"baseline", "avx2", "avx512"};
static lathe_backend_t isa_be[3];
static int n_isa;

/* ---- streaming bandwidth ---- */
typedef struct {
  float *a, *b, *c;
  int64_t n;
  int mode; /* 0 memcpy, 1 triad */
  int id, nt;
} stream_job;

static void *stream_worker(void *p) {
  stream_job *j = p;
  int64_t lo = j->n * j->id / j->nt, hi = j->n * (j->id + 1) / j->nt;
  if (j->mode == 0) memcpy(j->a + lo, j->b + lo, (size_t)(hi - lo) * sizeof(float));
  else
    for (int64_t i = lo; i < hi; i++) j->a[i] = j->b[i] + 1.5f * j->c[i];
  return NULL;
}

static double stream_once(float *a, float *b, float *c, int64_t n, int mode) {
  pthread_t tid[64];
  stream_job jobs[64];
  int nt = threads < 64 ? threads : 64;
  double t0 = bench_now();
  for (int i = 0; i < nt; i++) {
    jobs[i] = (stream_job){a, b, c, n, mode, i, nt};
    if (i) pthread_create(&tid[i], NULL, stream_worker, &jobs[i]);
  }
  stream_worker(&jobs[0]);
  for (int i = 1; i < nt; i++) pthread_join(tid[i], NULL);
  return bench_now() - t0;
}

/* ---- graphs ---- */
static lathe_shape shape_of(int rank, const int64_t *dims) {
  lathe_shape s;
  TRY(lathe_shape_make(LATHE_DTYPE_FLOAT32, rank, dims, &s));
  return s;
}

static lathe_value_t scalar(lathe_function_t fn, float v) {
  lathe_shape s = shape_of(0, NULL);
  lathe_value_t c;
  TRY(lathe_constant(fn, &s, &v, sizeof v, &c));
  return c;
}

typedef void (*build_fn)(lathe_function_t fn, const void *arg);

static void build_chain(lathe_function_t fn, const void *arg) {
  int64_t n = *(const int64_t *)arg;
  lathe_shape s = shape_of(1, &n);
  lathe_value_t x, a, b, r, y;
  TRY(lathe_parameter(fn, "x", &s, &x));
  TRY(lathe_mul(fn, x, scalar(fn, 1.5f), &a));
  TRY(lathe_add(fn, a, scalar(fn, 0.5f), &b));
  TRY(lathe_max(fn, b, scalar(fn, 0.0f), &r));
  TRY(lathe_mul(fn, r, x, &y));
  TRY(lathe_function_return(fn, &y, 1));
}

typedef struct {
  const char *name;
  lathe_op op;
  int kind; /* 0 unary, 1 binary, 2 reduce last axis, 3 reduce all, 4 max-pool fwd, 5 max-pool bwd */
  int64_t dims[4];
  int rank;
} op_case;

static void build_op(lathe_function_t fn, const void *arg) {
  const op_case *c = arg;
  lathe_shape s = shape_of(c->rank, c->dims);
  lathe_value_t x, y, out;
  TRY(lathe_parameter(fn, "x", &s, &x));
  switch (c->kind) {
    case 0: TRY(lathe_unary(fn, c->op, x, &out)); break;
    case 1:
      TRY(lathe_parameter(fn, "y", &s, &y));
      TRY(lathe_binary(fn, c->op, x, y, &out));
      break;
    case 2: {
      int axis = c->rank - 1;
      TRY(lathe_reduce(fn, c->op, x, &axis, 1, &out));
      break;
    }
    case 3: TRY(lathe_reduce(fn, c->op, x, NULL, 0, &out)); break;
    default: {
      int64_t win[4] = {1, 2, 2, 1};
      lathe_window_params p = {.window_dims = win, .n_window_dims = 4};
      if (c->kind == 4) {
        TRY(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &p, &out));
      } else {
        int64_t sd[4] = {c->dims[0], c->dims[1] / 2, c->dims[2] / 2, c->dims[3]};
        lathe_shape ss = shape_of(4, sd);
        lathe_value_t src;
        TRY(lathe_parameter(fn, "source", &ss, &src));
        TRY(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, x, src, &p, &out));
      }
    }
  }
  TRY(lathe_function_return(fn, &out, 1));
}

/* Inputs in (0.05, 3] with signs mixed in for ops that take any value. */
static void fill_inputs(const lathe_shape *s, void *data, size_t nbytes, void *ctx) {
  (void)nbytes;
  bool positive = ctx != NULL;
  int64_t n = lathe_shape_num_elements(s);
  uint32_t r = 12345;
  for (int64_t k = 0; k < n; k++) {
    r = r * 1664525u + 1013904223u;
    float v = 0.05f + 2.95f * (float)(r >> 8) / 16777216.0f;
    ((float *)data)[k] = positive || (r & 1) ? v : -v;
  }
}

static bench_graph graph_on(lathe_backend_t b, build_fn build, const void *arg, bool positive) {
  lathe_builder_t bl;
  TRY(lathe_builder_new(b, "ew", &bl));
  build(lathe_builder_main(bl), arg);
  bench_graph g;
  lathe_backend_t saved = be;
  be = b; /* bench_prepare uploads to the global backend */
  bench_prepare(&g, bl, fill_inputs, positive ? (void *)1 : NULL);
  be = saved;
  lathe_builder_free(bl);
  return g;
}

/* Times graphs g[0..n) in turn, `repeats` rounds after 2 warm-up rounds; medians into med. */
static void time_round_robin(bench_graph *g, int n, double *med) {
  for (int r = -2; r < repeats; r++)
    for (int k = 0; k < n; k++) {
      double t = bench_run_once(&g[k]);
      if (r >= 0) g[k].t[r] = t;
    }
  for (int k = 0; k < n; k++) med[k] = bench_finish(&g[k]);
}

int main(int argc, char **argv) {
  if (argc > 1) threads = atoi(argv[1]);
  if (argc > 2 && atoi(argv[2]) > 0) repeats = atoi(argv[2]);
  char cfg[96];
  for (int i = 0; i < 3; i++) {
    snprintf(cfg, sizeof cfg, threads > 0 ? "lathe:cpu,isa=%s,threads=%d" : "lathe:cpu,isa=%s", isa_names[i], threads);
    lathe_status_t st = lathe_backend_new(cfg, &isa_be[n_isa]);
    if (st) {
      lathe_status_free(st);
      continue;
    }
    isa_names[n_isa++] = isa_names[i];
  }
  if (threads <= 0) sscanf(strstr(lathe_backend_config(isa_be[0]), "threads=") + 8, "%d", &threads);
  lathe_backend_t nofuse;
  snprintf(cfg, sizeof cfg, "lathe:cpu,threads=%d,fuse=0", threads);
  TRY(lathe_backend_new(cfg, &nofuse));
  printf("lathe:cpu elementwise benchmark: %d threads, ISAs %s%s%s%s%s (best: %s), median of %d\n\n", threads,
         isa_names[0], n_isa > 1 ? ", " : "", n_isa > 1 ? isa_names[1] : "", n_isa > 2 ? ", " : "",
         n_isa > 2 ? isa_names[2] : "", lathe_backend_description(nofuse), repeats);

  /* 1 + 2: streaming bandwidth and the chain, interleaved */
  int64_t n = CHAIN_N;
  float *a = aligned_alloc(64, (size_t)n * 4), *b = aligned_alloc(64, (size_t)n * 4), *c = aligned_alloc(64, (size_t)n * 4);
  if (!a || !b || !c) return 1;
  memset(a, 0, (size_t)n * 4), memset(b, 0, (size_t)n * 4), memset(c, 0, (size_t)n * 4); /* fault the pages in */
  bench_graph g[MAX_CFG];
  int ng = 0;
  for (int i = 0; i < n_isa; i++) g[ng++] = graph_on(isa_be[i], build_chain, &n, false);
  g[ng++] = graph_on(nofuse, build_chain, &n, false);
  double *t_copy = malloc(sizeof(double) * (size_t)repeats), *t_triad = malloc(sizeof(double) * (size_t)repeats);
  for (int r = -2; r < repeats; r++) {
    double tc = stream_once(a, b, c, n, 0), tt = stream_once(a, b, c, n, 1);
    for (int k = 0; k < ng; k++) {
      double t = bench_run_once(&g[k]);
      if (r >= 0) g[k].t[r] = t;
    }
    if (r >= 0) t_copy[r] = tc, t_triad[r] = tt;
  }
  qsort(t_copy, (size_t)repeats, sizeof(double), bench_cmp_double);
  qsort(t_triad, (size_t)repeats, sizeof(double), bench_cmp_double);
  double bytes2 = 2.0 * (double)n * 4, bw_copy = bytes2 / t_copy[repeats / 2] / 1e9,
         bw_triad = 1.5 * bytes2 / t_triad[repeats / 2] / 1e9, bw = bw_copy > bw_triad ? bw_copy : bw_triad;
  printf("streaming bandwidth (%d threads, 64 MiB arrays)\n", threads);
  printf("  %-44s %8.2f GB/s\n", "memcpy (read + write)", bw_copy);
  printf("  %-44s %8.2f GB/s\n", "triad a = b + 1.5 c (2 reads + 1 write)", bw_triad);
  printf("\nchain relu(1.5x+0.5)*x, 16M Float32 (64 MiB in, 64 MiB out)\n");
  printf("  %-28s %10s %10s %12s %10s\n", "config", "ms", "GB/s", "of stream bw", "vs base");
  double med[MAX_CFG];
  for (int k = 0; k < ng; k++) med[k] = bench_finish(&g[k]);
  for (int k = 0; k < ng; k++) {
    char name[64];
    if (k < n_isa) snprintf(name, sizeof name, "fuse=1 isa=%s", isa_names[k]);
    else snprintf(name, sizeof name, "fuse=0 isa=%s", isa_names[n_isa - 1]);
    double gbs = bytes2 / med[k] / 1e9;
    printf("  %-28s %10.3f %10.2f %11.0f%% %9.2fx\n", name, med[k] * 1e3, gbs, 100 * gbs / bw, med[0] / med[k]);
  }
  free(t_copy);
  free(t_triad);
  free(a);
  free(b);
  free(c);

  /* 3: single ops per ISA */
  static const op_case cases[] = {
      {"Exp", LATHE_OP_EXP, 0, {1 << 20}, 1},
      {"Log", LATHE_OP_LOG, 0, {1 << 20}, 1},
      {"Tanh", LATHE_OP_TANH, 0, {1 << 20}, 1},
      {"Logistic", LATHE_OP_LOGISTIC, 0, {1 << 20}, 1},
      {"Erf", LATHE_OP_ERF, 0, {1 << 20}, 1},
      {"Sin", LATHE_OP_SIN, 0, {1 << 20}, 1},
      {"Cos", LATHE_OP_COS, 0, {1 << 20}, 1},
      {"Expm1", LATHE_OP_EXPM1, 0, {1 << 20}, 1},
      {"Log1p", LATHE_OP_LOG1P, 0, {1 << 20}, 1},
      {"Pow", LATHE_OP_POW, 1, {1 << 20}, 1},
      {"Sign", LATHE_OP_SIGN, 0, {1 << 20}, 1},
      {"Max", LATHE_OP_MAX, 1, {1 << 20}, 1},
      {"Mul", LATHE_OP_MUL, 1, {1 << 20}, 1},
      {"GreaterThan", LATHE_OP_GREATER_THAN, 1, {1 << 20}, 1},
      {"ReduceSum [1024,1024] axis 1", LATHE_OP_REDUCE_SUM, 2, {1024, 1024}, 2},
      {"ReduceMax [1024,1024] axis 1", LATHE_OP_REDUCE_MAX, 2, {1024, 1024}, 2},
      {"ReduceSum [4M] all", LATHE_OP_REDUCE_SUM, 3, {4 << 20}, 1},
      {"MaxPool 2x2 [32,28,28,32]", LATHE_OP_REDUCE_MAX, 4, {32, 28, 28, 32}, 4},
      {"MaxPool grad [32,28,28,32]", LATHE_OP_REDUCE_MAX, 5, {32, 28, 28, 32}, 4},
      {"MaxPool 2x2 [128,28,28,32]", LATHE_OP_REDUCE_MAX, 4, {128, 28, 28, 32}, 4},
      {"MaxPool grad [128,28,28,32]", LATHE_OP_REDUCE_MAX, 5, {128, 28, 28, 32}, 4},
  };
  printf("\nsingle ops, Float32 (ms; ratio = baseline / ISA)\n  %-30s", "op");
  for (int i = 0; i < n_isa; i++) printf(" %10s", isa_names[i]);
  for (int i = 1; i < n_isa; i++) printf(" %8s", isa_names[i]);
  printf("\n");
  for (size_t q = 0; q < sizeof cases / sizeof cases[0]; q++) {
    const op_case *oc = &cases[q];
    bool positive = oc->op == LATHE_OP_LOG || oc->op == LATHE_OP_POW;
    for (int i = 0; i < n_isa; i++) g[i] = graph_on(isa_be[i], build_op, oc, positive);
    time_round_robin(g, n_isa, med);
    printf("  %-30s", oc->name);
    for (int i = 0; i < n_isa; i++) printf(" %10.3f", med[i] * 1e3);
    for (int i = 1; i < n_isa; i++) printf(" %7.2fx", med[0] / med[i]);
    printf("\n");
  }
  for (int i = 0; i < n_isa; i++) lathe_backend_free(isa_be[i]);
  lathe_backend_free(nofuse);
  return 0;
}

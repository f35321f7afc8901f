/* bench.h -- what lathe's C benchmark programs share: fail-fast status checks and the timing
 * of a graph against its competitor in the same run (alternating executions, so a change of
 * load on a shared machine hits both alike; medians, never single times). Header-only: each
 * benchmark is one program. */
#ifndef LATHE_BENCH_H
#define LATHE_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lathe.h"

#define TRY(expr)                                                                                  \
  do {                                                                                             \
    lathe_status_t st_ = (expr);                                                                   \
    if (st_) {                                                                                     \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, lathe_status_message(st_));              \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static lathe_backend_t be;
static int repeats = 20;

/* Parses [config] [repeats] and creates the backend. */
static inline void bench_init(int argc, char **argv) {
  TRY(lathe_backend_new(argc > 1 ? argv[1] : "lathe:cpu", &be));
  if (argc > 2 && atoi(argv[2]) > 0) repeats = atoi(argv[2]);
}

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Fills one input of shape s (nbytes of data); NULL means Float32 values in [-1, 1]. */
typedef void (*bench_fill_fn)(const lathe_shape *s, void *data, size_t nbytes, void *ctx);

static inline void bench_fill_default(const lathe_shape *s, void *data, size_t nbytes, void *ctx) {
  (void)ctx;
  (void)nbytes;
  int64_t n = lathe_shape_num_elements(s);
  for (int64_t k = 0; k < n; k++) ((float *)data)[k] = (float)((k * 7919 % 1000) / 500.0 - 1.0);
}

/* One compiled graph with its inputs. */
typedef struct {
  lathe_executable_t e;
  lathe_buffer_t in[16];
  int n_in, n_out;
  double *t;
} bench_graph;

static inline void bench_prepare(bench_graph *g, lathe_builder_t b, bench_fill_fn fill, void *ctx) {
  TRY(lathe_builder_compile(b, &g->e));
  g->n_in = lathe_executable_num_inputs(g->e), g->n_out = lathe_executable_num_outputs(g->e);
  for (int i = 0; i < g->n_in; i++) {
    lathe_shape s;
    TRY(lathe_executable_input_shape(g->e, i, &s));
    size_t nb = (size_t)lathe_shape_byte_size(&s);
    void *d = calloc(nb ? nb : 1, 1);
    (fill ? fill : bench_fill_default)(&s, d, nb, ctx);
    TRY(lathe_buffer_from_host(be, 0, &s, d, nb, &g->in[i]));
    free(d);
  }
  g->t = malloc(sizeof(double) * (size_t)repeats);
}

static inline double bench_run_once(bench_graph *g) {
  lathe_buffer_t out[16];
  double t0 = bench_now();
  TRY(lathe_executable_execute(g->e, g->in, NULL, g->n_in, 0, out, g->n_out));
  double t1 = bench_now();
  for (int k = 0; k < g->n_out; k++) lathe_buffer_free(out[k]);
  return t1 - t0;
}

static inline double bench_finish(bench_graph *g) {
  qsort(g->t, (size_t)repeats, sizeof(double), bench_cmp_double);
  double med = g->t[repeats / 2];
  free(g->t);
  for (int i = 0; i < g->n_in; i++) lathe_buffer_free(g->in[i]);
  lathe_executable_free(g->e);
  return med;
}

/* Median seconds of graphs a and b (same inputs), run alternately after two warm-up runs. */
static inline void bench_time_pair(lathe_builder_t a, lathe_builder_t b, bench_fill_fn fill, void *ctx, double *ta, double *tb) {
  bench_graph ga, gb;
  bench_prepare(&ga, a, fill, ctx);
  bench_prepare(&gb, b, fill, ctx);
  for (int r = -2; r < repeats; r++) {
    double x = bench_run_once(&ga), y = bench_run_once(&gb);
    if (r >= 0) ga.t[r] = x, gb.t[r] = y;
  }
  *ta = bench_finish(&ga);
  *tb = bench_finish(&gb);
}

#endif

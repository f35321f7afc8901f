/* fused_bench.c -- each fused op against its decomposition into standard ops, both on lathe,
 * measured in the same run: median wall time of repeated executions and the ratio.
 *
 *   make bench && build/fused_bench [config] [repeats]
 *
 * A fused op is declared in lathe's capabilities only if it beats its decomposition here. */
#include <math.h>

#include "bench.h"

static lathe_shape f32(int rank, int64_t a, int64_t b) {
  lathe_shape s;
  int64_t d[2] = {a, b};
  TRY(lathe_shape_make(LATHE_DTYPE_FLOAT32, rank, d, &s));
  return s;
}

static lathe_value_t scalar(lathe_function_t fn, float v) {
  lathe_shape s = f32(0, 0, 0);
  lathe_value_t out;
  TRY(lathe_constant(fn, &s, &v, sizeof v, &out));
  return out;
}

static lathe_value_t bcast_rows(lathe_function_t fn, lathe_value_t v, const lathe_shape *to) {
  int axis = 0;
  lathe_value_t out;
  TRY(lathe_broadcast_in_dim(fn, v, to, &axis, 1, &out));
  return out;
}

static lathe_value_t bcast_cols(lathe_function_t fn, lathe_value_t v, const lathe_shape *to) {
  int axis = 1;
  lathe_value_t out;
  TRY(lathe_broadcast_in_dim(fn, v, to, &axis, 1, &out));
  return out;
}

static lathe_value_t bin(lathe_function_t fn, lathe_op op, lathe_value_t a, lathe_value_t b) {
  lathe_value_t out;
  TRY(lathe_binary(fn, op, a, b, &out));
  return out;
}

static lathe_value_t un(lathe_function_t fn, lathe_op op, lathe_value_t a) {
  lathe_value_t out;
  TRY(lathe_unary(fn, op, a, &out));
  return out;
}

static lathe_value_t red(lathe_function_t fn, lathe_op op, lathe_value_t a, int axis) {
  lathe_value_t out;
  TRY(lathe_reduce(fn, op, a, &axis, 1, &out));
  return out;
}

enum { SOFTMAX, GELU, LAYER_NORM, DENSE, SILU, SILU_VJP, TANH_VJP, N_BENCH };
static const char *names[] = {"FusedSoftmax",     "FusedGelu",          "FusedLayerNorm",    "FusedDense+relu",
                              "FusedAct silu",    "FusedActVJP silu",   "FusedActVJP tanh,y"};

static lathe_builder_t build(int which, bool fused, int64_t rows, int64_t cols) {
  lathe_builder_t b;
  TRY(lathe_builder_new(be, names[which], &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape xs = f32(2, rows, cols), vs = f32(1, cols, 0), ws = f32(2, cols, cols);
  lathe_value_t x, y, g, beta, w;
  TRY(lathe_parameter(fn, "x", &xs, &x));
  switch (which) {
    case SOFTMAX:
      if (fused) TRY(lathe_fused_softmax(fn, x, 1, &y));
      else {
        lathe_value_t e = un(fn, LATHE_OP_EXP, bin(fn, LATHE_OP_SUB, x, bcast_rows(fn, red(fn, LATHE_OP_REDUCE_MAX, x, 1), &xs)));
        y = bin(fn, LATHE_OP_DIV, e, bcast_rows(fn, red(fn, LATHE_OP_REDUCE_SUM, e, 1), &xs));
      }
      break;
    case GELU:
      if (fused) TRY(lathe_fused_gelu(fn, x, true, &y));
      else {
        lathe_value_t e = un(fn, LATHE_OP_ERF, bin(fn, LATHE_OP_MUL, x, scalar(fn, 0.70710678f)));
        y = bin(fn, LATHE_OP_MUL, bin(fn, LATHE_OP_MUL, x, scalar(fn, 0.5f)), bin(fn, LATHE_OP_ADD, e, scalar(fn, 1)));
      }
      break;
    case LAYER_NORM:
      TRY(lathe_parameter(fn, "gamma", &vs, &g));
      TRY(lathe_parameter(fn, "beta", &vs, &beta));
      if (fused) TRY(lathe_fused_layer_norm(fn, x, (int[]){1}, 1, 1e-5, g, beta, &y));
      else {
        lathe_value_t inv_n = scalar(fn, 1.0f / (float)cols);
        lathe_value_t mean = bin(fn, LATHE_OP_MUL, red(fn, LATHE_OP_REDUCE_SUM, x, 1), inv_n);
        lathe_value_t d = bin(fn, LATHE_OP_SUB, x, bcast_rows(fn, mean, &xs));
        lathe_value_t var = bin(fn, LATHE_OP_MUL, red(fn, LATHE_OP_REDUCE_SUM, bin(fn, LATHE_OP_MUL, d, d), 1), inv_n);
        lathe_value_t inv = un(fn, LATHE_OP_RSQRT, bin(fn, LATHE_OP_ADD, var, scalar(fn, 1e-5f)));
        lathe_value_t nrm = bin(fn, LATHE_OP_MUL, d, bcast_rows(fn, inv, &xs));
        y = bin(fn, LATHE_OP_ADD, bin(fn, LATHE_OP_MUL, nrm, bcast_cols(fn, g, &xs)), bcast_cols(fn, beta, &xs));
      }
      break;
    case DENSE:
      TRY(lathe_parameter(fn, "w", &ws, &w));
      TRY(lathe_parameter(fn, "bias", &vs, &beta));
      if (fused) TRY(lathe_fused_dense(fn, x, w, beta, LATHE_ACTIVATION_RELU, LATHE_DENSE_INPUT_OUTPUTS, &y));
      else {
        int c1 = 1, c0 = 0;
        lathe_value_t mm;
        TRY(lathe_dot_general(fn, x, &c1, 1, NULL, 0, w, &c0, 1, NULL, 0, NULL, &mm));
        y = bin(fn, LATHE_OP_MAX, bin(fn, LATHE_OP_ADD, mm, bcast_cols(fn, beta, &xs)), scalar(fn, 0));
      }
      break;
    case SILU:
      if (fused) TRY(lathe_fused_activation(fn, x, LATHE_ACTIVATION_SILU, &y));
      else y = bin(fn, LATHE_OP_MUL, x, un(fn, LATHE_OP_LOGISTIC, x));
      break;
    case SILU_VJP:
    case TANH_VJP: /* x is y for Tanh's derivative from y */
      TRY(lathe_parameter(fn, "g", &xs, &g));
      if (fused && which == SILU_VJP) TRY(lathe_fused_activation_vjp(fn, NULL, x, g, LATHE_ACTIVATION_SILU, &y));
      else if (fused) TRY(lathe_fused_activation_vjp(fn, x, NULL, g, LATHE_ACTIVATION_TANH, &y));
      else if (which == TANH_VJP) y = bin(fn, LATHE_OP_MUL, g, bin(fn, LATHE_OP_SUB, scalar(fn, 1), bin(fn, LATHE_OP_MUL, x, x)));
      else {
        lathe_value_t sg = un(fn, LATHE_OP_LOGISTIC, x), one = scalar(fn, 1);
        y = bin(fn, LATHE_OP_MUL, g, bin(fn, LATHE_OP_MUL, sg, bin(fn, LATHE_OP_ADD, one, bin(fn, LATHE_OP_MUL, x, bin(fn, LATHE_OP_SUB, one, sg)))));
      }
      break;
  }
  TRY(lathe_function_return(fn, &y, 1));
  return b;
}

int main(int argc, char **argv) {
  bench_init(argc, argv);
  printf("lathe fused ops vs their decomposition on %s, Float32, median of %d runs\n\n", lathe_backend_description(be), repeats);
  printf("%-18s %-12s %14s %14s %8s\n", "op", "shape", "decomposed ms", "fused ms", "ratio");
  const int64_t shapes[][2] = {{256, 1024}, {4096, 384}};
  for (int w = 0; w < N_BENCH; w++)
    for (int s = 0; s < 2; s++) {
      int64_t rows = shapes[s][0], cols = w == DENSE ? shapes[s][1] / 2 : shapes[s][1];
      lathe_builder_t bd = build(w, false, rows, cols), bf = build(w, true, rows, cols);
      double td, tf;
      bench_time_pair(bd, bf, NULL, NULL, &td, &tf);
      char shape[32];
      snprintf(shape, sizeof shape, "%lldx%lld", (long long)rows, (long long)cols);
      printf("%-18s %-12s %14.3f %14.3f %7.2fx\n", names[w], shape, td * 1e3, tf * 1e3, td / tf);
      lathe_builder_free(bd);
      lathe_builder_free(bf);
    }
  lathe_backend_free(be);
  return 0;
}

/* fused_ops.c -- conformance rows for FusedSoftmax, FusedGelu, FusedLayerNorm and FusedDense
 * against double-precision references written here. */
#include "core/core.h"
#include "testing.h"

static const lathe_dtype float_dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16};
#define N_FLOAT_DTS 4

static double tol_of(lathe_dtype dt) { return dt == LATHE_DTYPE_FLOAT32 ? 1e-5 : dt == LATHE_DTYPE_FLOAT64 ? 1e-12 : 2 * tst_tol(dt) + 1e-2; }

static void softmax_case(lathe_dtype dt, lathe_shape s, int axis) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("softmax", &fn);
  lathe_value_t x, y;
  x = tst_param(fn, "x", s);
  CHECK_OK(lathe_fused_softmax(fn, x, axis, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  int64_t n = lathe_shape_num_elements(&s);
  void *xd = tst_alloc_for(&s), *want = tst_alloc_for(&s), *got[1];
  tst_fill(xd, dt, n, (unsigned)(axis * 31 + s.rank));
  int64_t len = s.dims[axis], inner = 1;
  for (int i = axis + 1; i < s.rank; i++) inner *= s.dims[i];
  for (int64_t r = 0; len && r < n / len; r++) {
    int64_t base = (r / inner) * len * inner + r % inner;
    double mx = -INFINITY, sum = 0;
    for (int64_t i = 0; i < len; i++) mx = fmax(mx, tst_get(xd, dt, base + i * inner));
    for (int64_t i = 0; i < len; i++) sum += exp(tst_get(xd, dt, base + i * inner) - mx);
    for (int64_t i = 0; i < len; i++) tst_set(want, dt, base + i * inner, exp(tst_get(xd, dt, base + i * inner) - mx) / sum);
  }
  const void *ins[1] = {xd};
  lathe_status_t st = tst_run(b, ins, 1, got, 1, NULL);
  CHECK(st == NULL, "FusedSoftmax run: %s", lathe_status_message(st));
  if (!st) tst_expect_close("FusedSoftmax", got[0], want, dt, n, tol_of(dt));
  lathe_status_free(st);
  tst_free_output(got[0]);
  free(xd), free(want);
  lathe_builder_free(b);
}

TEST(fused_softmax) {
  for (int d = 0; d < N_FLOAT_DTS; d++) {
    softmax_case(float_dts[d], TST_SHAPE(float_dts[d], 7), 0);
    softmax_case(float_dts[d], TST_SHAPE(float_dts[d], 3, 5), 1);
    softmax_case(float_dts[d], TST_SHAPE(float_dts[d], 3, 5), 0);
    softmax_case(float_dts[d], TST_SHAPE(float_dts[d], 2, 4, 3), 1);
    softmax_case(float_dts[d], TST_SHAPE(float_dts[d], 0, 4), 1);
    softmax_case(float_dts[d], TST_SHAPE(float_dts[d], 1, 1), 1);
    /* rows of a multiple of 4 (lathe:cuda's warp rows read in groups of 4), partly filled groups of
     * lanes, every values-per-lane size */
    softmax_case(float_dts[d], TST_SHAPE(float_dts[d], 3, 8), 1);
    softmax_case(float_dts[d], TST_SHAPE(float_dts[d], 33, 100), 1);
    softmax_case(float_dts[d], TST_SHAPE(float_dts[d], 9, 256), 1);
    softmax_case(float_dts[d], TST_SHAPE(float_dts[d], 5, 516), 1);
    softmax_case(float_dts[d], TST_SHAPE(float_dts[d], 4, 1024), 1);
  }
  softmax_case(LATHE_DTYPE_FLOAT32, TST_SHAPE(LATHE_DTYPE_FLOAT32, 300, 257), 1); /* threaded */
}

static void gelu_case(lathe_dtype dt, lathe_shape s, bool exact) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("gelu", &fn);
  lathe_value_t x, y;
  x = tst_param(fn, "x", s);
  CHECK_OK(lathe_fused_gelu(fn, x, exact, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  int64_t n = lathe_shape_num_elements(&s);
  void *xd = tst_alloc_for(&s), *want = tst_alloc_for(&s), *got[1];
  tst_fill(xd, dt, n, 5);
  for (int64_t i = 0; i < n; i++) {
    double v = tst_get(xd, dt, i);
    double g = exact ? 0.5 * v * (1 + erf(v / sqrt(2.0))) : 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    tst_set(want, dt, i, g);
  }
  const void *ins[1] = {xd};
  lathe_status_t st = tst_run(b, ins, 1, got, 1, NULL);
  CHECK(st == NULL, "FusedGelu run: %s", lathe_status_message(st));
  if (!st) tst_expect_close(exact ? "FusedGelu exact" : "FusedGelu tanh", got[0], want, dt, n, tol_of(dt));
  lathe_status_free(st);
  tst_free_output(got[0]);
  free(xd), free(want);
  lathe_builder_free(b);
}

TEST(fused_gelu) {
  for (int d = 0; d < N_FLOAT_DTS; d++)
    for (int e = 0; e < 2; e++) {
      gelu_case(float_dts[d], TST_SHAPE(float_dts[d], 13), e);
      gelu_case(float_dts[d], tst_shape0(float_dts[d]), e);
      gelu_case(float_dts[d], TST_SHAPE(float_dts[d], 0), e);
    }
  gelu_case(LATHE_DTYPE_FLOAT32, TST_SHAPE(LATHE_DTYPE_FLOAT32, 100000), false);
}

static void layer_norm_case(lathe_dtype dt, lathe_shape s, const int *given, int na, bool with_gamma, bool with_beta) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("layernorm", &fn);
  int axes[LATHE_MAX_RANK];
  for (int i = 0; i < na; i++) axes[i] = given[i] < 0 ? given[i] + s.rank : given[i];
  int64_t norm = 1;
  for (int i = 0; i < na; i++) norm *= s.dims[axes[i]];
  lathe_shape gs = TST_SHAPE(dt, norm);
  lathe_value_t x, g = NULL, be = NULL, y;
  x = tst_param(fn, "x", s);
  if (with_gamma) g = tst_param(fn, "gamma", gs);
  if (with_beta) be = tst_param(fn, "beta", gs);
  CHECK_OK(lathe_fused_layer_norm(fn, x, given, na, 1e-5, g, be, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  int64_t n = lathe_shape_num_elements(&s);
  void *xd = tst_alloc_for(&s), *want = tst_alloc_for(&s), *gd = tst_alloc_for(&gs), *bd = tst_alloc_for(&gs), *got[1];
  tst_fill(xd, dt, n, 11);
  tst_fill(gd, dt, norm, 12);
  tst_fill(bd, dt, norm, 13);
  /* reference: for every outer index, gather the normalised elements in axes order */
  int64_t strides[LATHE_MAX_RANK];
  lathe_shape_strides(&s, strides);
  bool isn[LATHE_MAX_RANK] = {0};
  for (int i = 0; i < na; i++) isn[axes[i]] = true;
  int64_t outer = norm ? n / norm : 0;
  for (int64_t o = 0; o < outer; o++) {
    int64_t rem = o, base = 0;
    for (int a = s.rank - 1; a >= 0; a--)
      if (!isn[a]) base += (rem % s.dims[a]) * strides[a], rem /= s.dims[a];
    double sum = 0, sq = 0;
    for (int pass = 0; pass < 3; pass++)
      for (int64_t i = 0; i < norm; i++) {
        int64_t r2 = i, off = base;
        for (int a = na - 1; a >= 0; a--) off += (r2 % s.dims[axes[a]]) * strides[axes[a]], r2 /= s.dims[axes[a]];
        double v = tst_get(xd, dt, off), mean = sum / norm;
        if (pass == 0) sum += v;
        else if (pass == 1) sq += (v - mean) * (v - mean);
        else {
          double r = (v - mean) / sqrt(sq / norm + 1e-5);
          if (with_gamma) r *= tst_get(gd, dt, i);
          if (with_beta) r += tst_get(bd, dt, i);
          tst_set(want, dt, off, r);
        }
      }
  }
  const void *ins[3];
  int k = 0;
  ins[k++] = xd;
  if (with_gamma) ins[k++] = gd;
  if (with_beta) ins[k++] = bd;
  lathe_status_t st = tst_run(b, ins, k, got, 1, NULL);
  CHECK(st == NULL, "FusedLayerNorm run: %s", lathe_status_message(st));
  if (!st) tst_expect_close("FusedLayerNorm", got[0], want, dt, n, tol_of(dt) * 10);
  lathe_status_free(st);
  tst_free_output(got[0]);
  free(xd), free(want), free(gd), free(bd);
  lathe_builder_free(b);
}

TEST(fused_layer_norm) {
  for (int d = 0; d < N_FLOAT_DTS; d++) {
    lathe_dtype dt = float_dts[d];
    layer_norm_case(dt, TST_SHAPE(dt, 4, 9), (int[]){1}, 1, true, true);
    layer_norm_case(dt, TST_SHAPE(dt, 4, 9), (int[]){1}, 1, false, false);
    layer_norm_case(dt, TST_SHAPE(dt, 3, 4, 5), (int[]){1, 2}, 2, true, false);
    layer_norm_case(dt, TST_SHAPE(dt, 3, 4, 5), (int[]){0}, 1, false, true);
    layer_norm_case(dt, TST_SHAPE(dt, 3, 4, 5), (int[]){2, 0}, 2, true, true);
    layer_norm_case(dt, TST_SHAPE(dt, 0, 6), (int[]){1}, 1, true, true);
  }
  layer_norm_case(LATHE_DTYPE_FLOAT32, TST_SHAPE(LATHE_DTYPE_FLOAT32, 512, 384), (int[]){1}, 1, true, true);
  /* rows of every width class of the GPU's warp-per-row kernel, and past it; negative axes */
  for (int d = 0; d < N_FLOAT_DTS; d++) layer_norm_case(float_dts[d], TST_SHAPE(float_dts[d], 5, 200), (int[]){-1}, 1, true, true);
  layer_norm_case(LATHE_DTYPE_FLOAT32, TST_SHAPE(LATHE_DTYPE_FLOAT32, 7, 1000), (int[]){-1}, 1, true, false);
  layer_norm_case(LATHE_DTYPE_FLOAT32, TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 8, 128), (int[]){-2, -1}, 2, false, true);
  layer_norm_case(LATHE_DTYPE_FLOAT32, TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 1025), (int[]){1}, 1, true, true);
  layer_norm_case(LATHE_DTYPE_FLOAT64, TST_SHAPE(LATHE_DTYPE_FLOAT64, 6, 768), (int[]){-1}, 1, true, true);
}

static void dense_case(lathe_dtype dt, int64_t m, int64_t k, int64_t nf, lathe_activation act, lathe_dense_layout layout,
                       bool with_bias) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dense", &fn);
  lathe_shape xs = TST_SHAPE(dt, 2, m, k);
  lathe_shape ws = layout == LATHE_DENSE_INPUT_OUTPUTS ? TST_SHAPE(dt, k, nf) : TST_SHAPE(dt, nf, k);
  lathe_shape bs = TST_SHAPE(dt, nf), ys = TST_SHAPE(dt, 2, m, nf);
  lathe_value_t x, w, bias = NULL, y;
  x = tst_param(fn, "x", xs);
  w = tst_param(fn, "w", ws);
  if (with_bias) bias = tst_param(fn, "b", bs);
  CHECK_OK(lathe_fused_dense(fn, x, w, bias, act, layout, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  void *xd = tst_alloc_for(&xs), *wd = tst_alloc_for(&ws), *bd = tst_alloc_for(&bs), *want = tst_alloc_for(&ys), *got[1];
  tst_fill(xd, dt, 2 * m * k, 21);
  tst_fill(wd, dt, k * nf, 22);
  tst_fill(bd, dt, nf, 23);
  for (int64_t r = 0; r < 2 * m; r++)
    for (int64_t j = 0; j < nf; j++) {
      double acc = with_bias ? tst_get(bd, dt, j) : 0;
      for (int64_t i = 0; i < k; i++)
        acc += tst_get(xd, dt, r * k + i) * tst_get(wd, dt, layout == LATHE_DENSE_INPUT_OUTPUTS ? i * nf + j : j * k + i);
      tst_set(want, dt, r * nf + j, tst_activation_ref(acc, act));
    }
  const void *ins[3] = {xd, wd, bd};
  lathe_status_t st = tst_run(b, ins, with_bias ? 3 : 2, got, 1, NULL);
  CHECK(st == NULL, "FusedDense run: %s", lathe_status_message(st));
  if (!st) tst_expect_close("FusedDense", got[0], want, dt, 2 * m * nf, tol_of(dt) * (double)(k + 1));
  lathe_status_free(st);
  tst_free_output(got[0]);
  free(xd), free(wd), free(bd), free(want);
  lathe_builder_free(b);
}

TEST(fused_dense) {
  for (int d = 0; d < N_FLOAT_DTS; d++)
    for (int a = LATHE_ACTIVATION_NONE; a <= LATHE_ACTIVATION_GELU_APPROXIMATE; a++) { /* all but SwiGLU */
      dense_case(float_dts[d], 3, 5, 4, (lathe_activation)a, LATHE_DENSE_INPUT_OUTPUTS, true);
      dense_case(float_dts[d], 3, 5, 4, (lathe_activation)a, LATHE_DENSE_OUTPUTS_INPUT, a % 2);
    }
  dense_case(LATHE_DTYPE_FLOAT32, 1, 1, 1, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, false);
  dense_case(LATHE_DTYPE_FLOAT32, 4, 0, 3, LATHE_ACTIVATION_SILU, LATHE_DENSE_INPUT_OUTPUTS, true);
  dense_case(LATHE_DTYPE_FLOAT32, 0, 3, 3, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, true);
  dense_case(LATHE_DTYPE_FLOAT32, 129, 67, 33, LATHE_ACTIVATION_GELU, LATHE_DENSE_OUTPUTS_INPUT, true);
  /* a vocabulary's logits: rows of outputs off 16 bytes (lathe:cuda's gemm_pad stages the weights
   * and pitches a half result's Float32 sums) */
  for (int d = 0; d < N_FLOAT_DTS; d++)
    if (float_dts[d] != LATHE_DTYPE_FLOAT64) {
      dense_case(float_dts[d], 256, 96, 1031, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, true);
      dense_case(float_dts[d], 256, 96, 1031, LATHE_ACTIVATION_NONE, LATHE_DENSE_OUTPUTS_INPUT, false);
    }
}

TEST(fused_bad_inputs) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("bad", &fn);
  lathe_shape fs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 4), is = TST_SHAPE(LATHE_DTYPE_INT32, 3, 4);
  lathe_shape g3 = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3), w54 = TST_SHAPE(LATHE_DTYPE_FLOAT32, 5, 4);
  lathe_value_t x, xi, g, w, y;
  x = tst_param(fn, "x", fs);
  xi = tst_param(fn, "xi", is);
  g = tst_param(fn, "g", g3);
  w = tst_param(fn, "w", w54);
  CHECK_ERR(lathe_fused_softmax(fn, x, 2, &y), INVALID_ARGUMENT, "FusedSoftmax");
  CHECK_ERR(lathe_fused_softmax(fn, xi, 0, &y), INVALID_ARGUMENT, "FusedSoftmax");
  CHECK_ERR(lathe_fused_gelu(fn, xi, true, &y), INVALID_ARGUMENT, "FusedGelu");
  CHECK_ERR(lathe_fused_gelu(fn, NULL, true, &y), INVALID_ARGUMENT, "FusedGelu");
  CHECK_ERR(lathe_fused_layer_norm(fn, x, (int[]){1}, 1, 1e-5, g, NULL, &y), INVALID_ARGUMENT, "FusedLayerNorm");
  CHECK_ERR(lathe_fused_layer_norm(fn, x, (int[]){1, 1}, 2, 1e-5, NULL, NULL, &y), INVALID_ARGUMENT, "FusedLayerNorm");
  CHECK_ERR(lathe_fused_layer_norm(fn, x, (int[]){5}, 1, 1e-5, NULL, NULL, &y), INVALID_ARGUMENT, "FusedLayerNorm");
  CHECK_ERR(lathe_fused_layer_norm(fn, x, (int[]){-3}, 1, 1e-5, NULL, NULL, &y), INVALID_ARGUMENT, "FusedLayerNorm");
  CHECK_ERR(lathe_fused_layer_norm(fn, x, (int[]){1, -1}, 2, 1e-5, NULL, NULL, &y), INVALID_ARGUMENT, "FusedLayerNorm");
  CHECK_ERR(lathe_fused_layer_norm(fn, x, NULL, 0, 1e-5, NULL, NULL, &y), INVALID_ARGUMENT, "FusedLayerNorm");
  CHECK_ERR(lathe_fused_dense(fn, x, w, NULL, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, &y), INVALID_ARGUMENT, "FusedDense");
  CHECK_ERR(lathe_fused_dense(fn, x, xi, NULL, LATHE_ACTIVATION_NONE, LATHE_DENSE_OUTPUTS_INPUT, &y), INVALID_ARGUMENT, "FusedDense");
  CHECK_ERR(lathe_fused_dense(fn, x, w, x, LATHE_ACTIVATION_NONE, LATHE_DENSE_OUTPUTS_INPUT, &y), INVALID_ARGUMENT, "FusedDense");
  CHECK_ERR(lathe_fused_dense(fn, x, w, NULL, (lathe_activation)99, LATHE_DENSE_OUTPUTS_INPUT, &y), INVALID_ARGUMENT, "FusedDense");
  CHECK_ERR(lathe_fused_dense(fn, x, w, NULL, LATHE_ACTIVATION_SWIGLU, LATHE_DENSE_OUTPUTS_INPUT, &y), INVALID_ARGUMENT, "FusedDense");
  lathe_builder_free(b);
}

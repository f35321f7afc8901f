/* activation.c -- conformance rows for FusedActivation, FusedActivationVJP and FusedDenseVJP
 * (FusedDense's activations: fused_ops.c) against double-precision references from ew.def's
 * LATHE_ACT rows (tst_activation_ref), and a check of the rows themselves: each VJP against a
 * central difference of its forward, and the y forms against the x forms. */
#include "core/core.h"
#include "graph/ew.h"
#include "testing.h"

static const lathe_dtype float_dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16};
#define N_FLOAT_DTS 4

/* Float32 computes the rows in float (a few ulp, more where tanh or exp cancel); halves round once. */
static double tol_of(lathe_dtype dt) { return dt == LATHE_DTYPE_FLOAT32 ? 2e-5 : dt == LATHE_DTYPE_FLOAT64 ? 1e-12 : 2 * tst_tol(dt) + 1e-2; }

TEST(activation_rows) {
  /* away from the kinks (0, +-2.5, +-3) the VJP is the forward's derivative */
  for (int a = 0; a < LATHE_ACT_COUNT; a++)
    for (double x = -3.93; x < 4; x += 0.137) {
      double h = 1e-6, num = (tst_activation_ref(x + h, a) - tst_activation_ref(x - h, a)) / (2 * h);
      double dx = tst_activation_vjp_ref(x, 1.5, a, false);
      CHECK(fabs(dx - 1.5 * num) < 1e-6 * (1 + fabs(dx)), "%s at %g: VJP %.10g, difference %.10g", lathe_act_name(a), x, dx,
            1.5 * num);
      if (lathe_act_form_of(a) == LATHE_ACT_FORM_Y) {
        double dy = tst_activation_vjp_ref(tst_activation_ref(x, a), 1.5, a, true);
        CHECK(fabs(dy - dx) < 1e-12 * (1 + fabs(dx)), "%s at %g: VJP from y %.17g, from x %.17g", lathe_act_name(a), x, dy, dx);
      }
    }
  /* GoMLX's values at the kinks: ReLU' (0) = 0, LeakyReLU' (0) = 1, HardSwish' (-3) = 0, (3) = 1 */
  CHECK(tst_activation_vjp_ref(0, 1, LATHE_ACTIVATION_RELU, false) == 0, "ReLU'(0)");
  CHECK(tst_activation_vjp_ref(0, 1, LATHE_ACTIVATION_LEAKY_RELU, false) == 1, "LeakyReLU'(0)");
  CHECK(tst_activation_vjp_ref(-3, 1, LATHE_ACTIVATION_HARD_SWISH, false) == 0, "HardSwish'(-3)");
  CHECK(tst_activation_vjp_ref(3, 1, LATHE_ACTIVATION_HARD_SWISH, false) == 1, "HardSwish'(3)");
  CHECK(tst_activation_vjp_ref(2.5, 1, LATHE_ACTIVATION_HARD_SIGMOID, false) == 0, "HardSigmoid'(2.5)");
  CHECK(fabs(tst_activation_ref(1, LATHE_ACTIVATION_SELU) - 1.0507009873554805) < 1e-15, "SELU(1)");
  CHECK(fabs(tst_activation_ref(-1, LATHE_ACTIVATION_SELU) + 1.1113307378125628) < 1e-15, "SELU(-1)");
}

static void act_case(lathe_dtype dt, lathe_shape s, lathe_activation act) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("activation", &fn);
  lathe_value_t x = tst_param(fn, "x", s), y;
  CHECK_OK(lathe_fused_activation(fn, x, act, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  bool glu = lathe_act_form_of(act) == LATHE_ACT_FORM_GLU;
  lathe_shape ys = s;
  if (glu) ys.dims[s.rank - 1] /= 2;
  int64_t n = lathe_shape_num_elements(&s), ny = lathe_shape_num_elements(&ys), h = ys.rank ? ys.dims[ys.rank - 1] : 1;
  void *xd = tst_alloc_for(&s), *want = tst_alloc_for(&ys), *got[1];
  tst_fill(xd, dt, n, 7 + (unsigned)act);
  for (int64_t i = 0; i < ny; i++) {
    if (glu) {
      int64_t r = i / h, j = i % h;
      tst_set(want, dt, i, tst_activation_ref(tst_get(xd, dt, r * 2 * h + j), act) * tst_get(xd, dt, r * 2 * h + h + j));
    } else {
      tst_set(want, dt, i, tst_activation_ref(tst_get(xd, dt, i), act));
    }
  }
  const void *ins[1] = {xd};
  lathe_status_t st = tst_run(b, ins, 1, got, 1, NULL);
  CHECK(st == NULL, "FusedActivation %s run: %s", lathe_act_name(act), lathe_status_message(st));
  if (!st) tst_expect_close(lathe_act_name(act), got[0], want, dt, ny, tol_of(dt));
  lathe_status_free(st);
  tst_free_output(got[0]);
  free(xd), free(want);
  lathe_builder_free(b);
}

TEST(fused_activation) {
  for (int d = 0; d < N_FLOAT_DTS; d++)
    for (int a = 0; a < LATHE_ACT_COUNT; a++) {
      lathe_dtype dt = float_dts[d];
      act_case(dt, TST_SHAPE(dt, 3, 10), a);
      act_case(dt, TST_SHAPE(dt, 2, 1, 6), a);
      act_case(dt, TST_SHAPE(dt, 0, 4), a);
      if (lathe_act_form_of(a) != LATHE_ACT_FORM_GLU) act_case(dt, tst_shape0(dt), a);
      act_case(dt, TST_SHAPE(dt, 3, 600), a); /* rows past the CPU's chunks of 256 */
    }
  act_case(LATHE_DTYPE_FLOAT32, TST_SHAPE(LATHE_DTYPE_FLOAT32, 300, 514), LATHE_ACTIVATION_SIGMOID); /* threaded */
  act_case(LATHE_DTYPE_BFLOAT16, TST_SHAPE(LATHE_DTYPE_BFLOAT16, 300, 514), LATHE_ACTIVATION_SWIGLU);
}

/* which: 0 from x, 1 from y, 2 from y with x given too (y's derivative is used) */
static void vjp_case(lathe_dtype dt, lathe_shape s, lathe_activation act, int which) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("activation_vjp", &fn);
  bool glu = lathe_act_form_of(act) == LATHE_ACT_FORM_GLU;
  lathe_shape gs = s;
  if (glu) gs.dims[s.rank - 1] /= 2;
  lathe_value_t y = NULL, x = NULL, g, dx;
  if (which) y = tst_param(fn, "y", gs);
  if (which != 1) x = tst_param(fn, "x", s);
  g = tst_param(fn, "g", gs);
  CHECK_OK(lathe_fused_activation_vjp(fn, y, x, g, act, &dx));
  CHECK_OK(lathe_function_return(fn, &dx, 1));
  int64_t n = lathe_shape_num_elements(&s), ng = lathe_shape_num_elements(&gs), h = gs.dims[gs.rank - 1];
  void *yd = tst_alloc_for(&gs), *xd = tst_alloc_for(&s), *gd = tst_alloc_for(&gs), *want = tst_alloc_for(&s), *got[1];
  tst_fill(yd, dt, ng, 31 + (unsigned)act);
  tst_fill(xd, dt, n, 37 + (unsigned)act);
  tst_fill(gd, dt, ng, 41);
  for (int64_t i = 0; i < ng; i++) {
    double gv = tst_get(gd, dt, i);
    if (glu) {
      int64_t r = i / h, j = i % h;
      double gate = tst_get(xd, dt, r * 2 * h + j), val = tst_get(xd, dt, r * 2 * h + h + j);
      tst_set(want, dt, r * 2 * h + j, tst_activation_vjp_ref(gate, gv * val, act, false));
      tst_set(want, dt, r * 2 * h + h + j, gv * tst_activation_ref(gate, act));
    } else {
      tst_set(want, dt, i, which ? tst_activation_vjp_ref(tst_get(yd, dt, i), gv, act, true)
                                 : tst_activation_vjp_ref(tst_get(xd, dt, i), gv, act, false));
    }
  }
  const void *ins[3];
  int k = 0;
  if (which) ins[k++] = yd;
  if (which != 1) ins[k++] = xd;
  ins[k++] = gd;
  lathe_status_t st = tst_run(b, ins, k, got, 1, NULL);
  CHECK(st == NULL, "FusedActivationVJP %s run: %s", lathe_act_name(act), lathe_status_message(st));
  if (!st) tst_expect_close(lathe_act_name(act), got[0], want, dt, n, tol_of(dt) * 4);
  lathe_status_free(st);
  tst_free_output(got[0]);
  free(yd), free(xd), free(gd), free(want);
  lathe_builder_free(b);
}

TEST(fused_activation_vjp) {
  for (int d = 0; d < N_FLOAT_DTS; d++)
    for (int a = 0; a < LATHE_ACT_COUNT; a++) {
      lathe_dtype dt = float_dts[d];
      int ways = lathe_act_form_of(a) == LATHE_ACT_FORM_Y ? 3 : 1;
      for (int w = 0; w < ways; w++) {
        vjp_case(dt, TST_SHAPE(dt, 3, 10), a, w);
        vjp_case(dt, TST_SHAPE(dt, 0, 2), a, w);
        vjp_case(dt, TST_SHAPE(dt, 2, 520), a, w);
      }
      if (lathe_act_form_of(a) == LATHE_ACT_FORM_GLU) vjp_case(dt, TST_SHAPE(dt, 2, 3, 2), a, 2); /* y given, ignored */
    }
  vjp_case(LATHE_DTYPE_FLOAT32, TST_SHAPE(LATHE_DTYPE_FLOAT32, 300, 514), LATHE_ACTIVATION_GELU_APPROXIMATE, 0);
}

/* x [batch..., k]; weight per layout; gradients against double loops over the y derivative. */
static void dense_vjp_case(lathe_dtype dt, int batch_rank, int64_t m, int64_t k, int64_t nf, lathe_activation act,
                           lathe_dense_layout layout, bool with_bias) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dense_vjp", &fn);
  lathe_shape xs = batch_rank == 1 ? TST_SHAPE(dt, m, k) : TST_SHAPE(dt, 2, m, k);
  lathe_shape ws = layout == LATHE_DENSE_INPUT_OUTPUTS ? TST_SHAPE(dt, k, nf) : TST_SHAPE(dt, nf, k);
  lathe_shape bs = TST_SHAPE(dt, nf), ys = batch_rank == 1 ? TST_SHAPE(dt, m, nf) : TST_SHAPE(dt, 2, m, nf);
  int64_t rows = batch_rank == 1 ? m : 2 * m;
  lathe_value_t x = tst_param(fn, "x", xs), w = tst_param(fn, "w", ws), bias = NULL, y, g, outs[3];
  if (with_bias) bias = tst_param(fn, "b", bs);
  y = tst_param(fn, "y", ys);
  g = tst_param(fn, "g", ys);
  CHECK_OK(lathe_fused_dense_vjp(fn, x, w, bias, y, g, act, layout, outs));
  CHECK(with_bias == (outs[2] != NULL), "FusedDenseVJP: dBias %s", outs[2] ? "given" : "NULL");
  int n_out = with_bias ? 3 : 2;
  CHECK_OK(lathe_function_return(fn, outs, n_out));
  void *xd = tst_alloc_for(&xs), *wd = tst_alloc_for(&ws), *bd = tst_alloc_for(&bs), *yd = tst_alloc_for(&ys),
       *gd = tst_alloc_for(&ys);
  void *wx = tst_alloc_for(&xs), *ww = tst_alloc_for(&ws), *wb = tst_alloc_for(&bs), *got[3] = {0};
  tst_fill(xd, dt, rows * k, 51);
  tst_fill(wd, dt, k * nf, 52);
  tst_fill(bd, dt, nf, 53);
  tst_fill(yd, dt, rows * nf, 54 + (unsigned)act);
  tst_fill(gd, dt, rows * nf, 55);
  double *dz = malloc(sizeof(double) * (size_t)(rows * nf + 1));
  for (int64_t i = 0; i < rows * nf; i++) dz[i] = tst_activation_vjp_ref(tst_get(yd, dt, i), tst_get(gd, dt, i), act, true);
  bool io = layout == LATHE_DENSE_INPUT_OUTPUTS;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t i = 0; i < k; i++) {
      double acc = 0;
      for (int64_t j = 0; j < nf; j++) acc += dz[r * nf + j] * tst_get(wd, dt, io ? i * nf + j : j * k + i);
      tst_set(wx, dt, r * k + i, acc);
    }
  for (int64_t i = 0; i < k; i++)
    for (int64_t j = 0; j < nf; j++) {
      double acc = 0;
      for (int64_t r = 0; r < rows; r++) acc += tst_get(xd, dt, r * k + i) * dz[r * nf + j];
      tst_set(ww, dt, io ? i * nf + j : j * k + i, acc);
    }
  for (int64_t j = 0; j < nf; j++) {
    double acc = 0;
    for (int64_t r = 0; r < rows; r++) acc += dz[r * nf + j];
    tst_set(wb, dt, j, acc);
  }
  const void *ins[5];
  int ni = 0;
  ins[ni++] = xd, ins[ni++] = wd;
  if (with_bias) ins[ni++] = bd;
  ins[ni++] = yd, ins[ni++] = gd;
  lathe_status_t st = tst_run(b, ins, ni, got, n_out, NULL);
  CHECK(st == NULL, "FusedDenseVJP %s run: %s", lathe_act_name(act), lathe_status_message(st));
  if (!st) {
    tst_expect_close("FusedDenseVJP dx", got[0], wx, dt, rows * k, tol_of(dt) * (double)(nf + 1));
    tst_expect_close("FusedDenseVJP dWeight", got[1], ww, dt, k * nf, tol_of(dt) * (double)(rows + 1));
    if (with_bias) tst_expect_close("FusedDenseVJP dBias", got[2], wb, dt, nf, tol_of(dt) * (double)(rows + 1));
  }
  lathe_status_free(st);
  for (int i = 0; i < n_out; i++) tst_free_output(got[i]);
  free(dz), free(xd), free(wd), free(bd), free(yd), free(gd), free(wx), free(ww), free(wb);
  lathe_builder_free(b);
}

TEST(fused_dense_vjp) {
  for (int d = 0; d < N_FLOAT_DTS; d++)
    for (int a = 0; a < LATHE_ACT_COUNT; a++) {
      if (lathe_act_form_of(a) != LATHE_ACT_FORM_Y) continue;
      for (int l = 0; l < 2; l++)
        for (int br = 1; br <= 2; br++) {
          dense_vjp_case(float_dts[d], br, 3, 5, 4, a, (lathe_dense_layout)l, true);
          dense_vjp_case(float_dts[d], br, 3, 5, 4, a, (lathe_dense_layout)l, false);
        }
    }
  dense_vjp_case(LATHE_DTYPE_FLOAT32, 1, 1, 1, 1, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, true);
  dense_vjp_case(LATHE_DTYPE_FLOAT32, 2, 4, 0, 3, LATHE_ACTIVATION_RELU, LATHE_DENSE_INPUT_OUTPUTS, true);
  dense_vjp_case(LATHE_DTYPE_FLOAT32, 1, 0, 3, 3, LATHE_ACTIVATION_TANH, LATHE_DENSE_OUTPUTS_INPUT, true);
  dense_vjp_case(LATHE_DTYPE_FLOAT32, 2, 129, 67, 33, LATHE_ACTIVATION_SELU, LATHE_DENSE_OUTPUTS_INPUT, true);
  dense_vjp_case(LATHE_DTYPE_FLOAT64, 2, 70, 40, 90, LATHE_ACTIVATION_SIGMOID, LATHE_DENSE_INPUT_OUTPUTS, true);
  /* dBias over thousands of rows: lathe:cuda sums its columns in parallel parts, by 16-byte
   * vectors where the columns allow (256 BFloat16) and element by element where not (90 Float32) */
  dense_vjp_case(LATHE_DTYPE_BFLOAT16, 1, 4096, 16, 256, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, true);
  dense_vjp_case(LATHE_DTYPE_FLOAT32, 2, 1500, 8, 90, LATHE_ACTIVATION_RELU, LATHE_DENSE_OUTPUTS_INPUT, true);
}

/* FusedActivation and its VJP inside elementwise chains (one fusion region on lathe:cpu):
 * y = act(x b) + x, dx = act'(x b) (g b) (from y where the activation allows: y = act(x b)), with a
 * scalar operand where the shape is [1, 1]. */
static void chain_case(lathe_dtype dt, lathe_shape s, lathe_activation act) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("activation_chain", &fn);
  lathe_value_t x = tst_param(fn, "x", s), bv = tst_param(fn, "b", s), g = tst_param(fn, "g", s), t, a, y, gb, d, outs[2];
  CHECK_OK(lathe_mul(fn, x, bv, &t));
  CHECK_OK(lathe_fused_activation(fn, t, act, &a));
  CHECK_OK(lathe_add(fn, a, x, &y));
  CHECK_OK(lathe_mul(fn, g, bv, &gb));
  bool from_y = lathe_act_form_of(act) == LATHE_ACT_FORM_Y;
  CHECK_OK(lathe_fused_activation_vjp(fn, from_y ? a : NULL, from_y ? NULL : t, gb, act, &d));
  outs[0] = y, outs[1] = d;
  CHECK_OK(lathe_function_return(fn, outs, 2));
  int64_t n = lathe_shape_num_elements(&s);
  void *xd = tst_alloc_for(&s), *bd = tst_alloc_for(&s), *gd = tst_alloc_for(&s), *wy = tst_alloc_for(&s),
       *wd = tst_alloc_for(&s), *got[2] = {0};
  tst_fill(xd, dt, n, 61), tst_fill(bd, dt, n, 62), tst_fill(gd, dt, n, 63);
  /* the reference rounds the products as the graph does (to dt), then computes in double */
  lathe_shape one = s;
  void *tmp = tst_alloc_for(&one);
  for (int64_t i = 0; i < n; i++) {
    tst_set(tmp, dt, i, tst_get(xd, dt, i) * tst_get(bd, dt, i));
    double tv = tst_get(tmp, dt, i);
    tst_set(tmp, dt, i, tst_activation_ref(tv, act));
    double av = tst_get(tmp, dt, i); /* a, rounded to dt */
    tst_set(wy, dt, i, av + tst_get(xd, dt, i));
    tst_set(tmp, dt, i, tst_get(gd, dt, i) * tst_get(bd, dt, i));
    double gv = tst_get(tmp, dt, i);
    tst_set(wd, dt, i, from_y ? tst_activation_vjp_ref(av, gv, act, true) : tst_activation_vjp_ref(tv, gv, act, false));
  }
  const void *ins[3] = {xd, bd, gd};
  lathe_status_t st = tst_run(b, ins, 3, got, 2, NULL);
  CHECK(st == NULL, "activation chain %s run: %s", lathe_act_name(act), lathe_status_message(st));
  if (!st) {
    tst_expect_close("activation chain y", got[0], wy, dt, n, tol_of(dt) * 4);
    tst_expect_close("activation chain dx", got[1], wd, dt, n, tol_of(dt) * 8);
  }
  lathe_status_free(st);
  for (int i = 0; i < 2; i++) tst_free_output(got[i]);
  free(xd), free(bd), free(gd), free(wy), free(wd), free(tmp);
  lathe_builder_free(b);
}

TEST(fused_activation_in_chains) {
  for (int d = 0; d < N_FLOAT_DTS; d++)
    for (int a = 0; a < LATHE_ACT_COUNT; a++) {
      if (lathe_act_form_of(a) == LATHE_ACT_FORM_GLU) continue;
      lathe_dtype dt = float_dts[d];
      chain_case(dt, TST_SHAPE(dt, 3, 700), a); /* tiles past 256 and 2048 elements */
      chain_case(dt, TST_SHAPE(dt, 1, 1), a);
      chain_case(dt, TST_SHAPE(dt, 0, 5), a);
    }
  chain_case(LATHE_DTYPE_FLOAT32, TST_SHAPE(LATHE_DTYPE_FLOAT32, 300, 514), LATHE_ACTIVATION_GELU); /* threaded */
}

/* test_mlx.c -- the MLX device beyond the conformance table (which runs on it with
 * LATHE_TEST_BACKEND=mlx...): configurations and capabilities, dynamic axes without recompiling,
 * lazy views, host steps (While, If) in compiled mode, what is UNIMPLEMENTED, errors raised while
 * running, donation, concurrent executions, and mixed graphs on every mlx configuration compared
 * with lathe:cpu. Built only when lathe is built with MLX. */
#include <math.h>
#include <pthread.h>

#include "testing.h"

#define F32 LATHE_DTYPE_FLOAT32
#define I32 LATHE_DTYPE_INT32

/* The configurations every graph runs on. */
static const char *const configs[] = {"mlx:cpu", "mlx:cpu,dynamic", "mlx:cpu,dynamic,lazy_contiguous"};
enum { N_CONFIGS = 3 };

static lathe_backend_t backend(const char *config) {
  lathe_backend_t b = NULL;
  lathe_status_t st = lathe_backend_new(config, &b);
  CHECK(st == NULL, "%s: %s", config, lathe_status_message(st));
  lathe_status_free(st);
  return b;
}

static lathe_value_t cst(lathe_function_t fn, lathe_shape s, const void *data) {
  lathe_value_t v = NULL;
  CHECK_OK(lathe_constant(fn, &s, data, (size_t)lathe_shape_byte_size(&s), &v));
  return v;
}

/* Compiles b for be and runs it on host inputs of the given shapes; out[k] (malloc'd) receives
 * output k and out_shapes[k] its shape. */
static lathe_status_t run_on(lathe_builder_t b, lathe_backend_t be, int n_in, const lathe_shape *shapes,
                             const void *const *data, int n_out, void **out, lathe_shape *out_shapes) {
  lathe_executable_t e = NULL;
  lathe_buffer_t in[8] = {0}, res[8] = {0};
  lathe_status_t st = lathe_builder_compile_for(b, be, &e);
  for (int i = 0; i < n_in && !st; i++)
    st = lathe_buffer_from_host(be, 0, &shapes[i], data[i], (size_t)lathe_shape_byte_size(&shapes[i]), &in[i]);
  if (!st) st = lathe_executable_execute(e, in, NULL, n_in, 0, res, n_out);
  for (int k = 0; k < n_out; k++) out[k] = NULL;
  for (int k = 0; k < n_out && !st; k++) {
    st = lathe_buffer_shape(res[k], &out_shapes[k]);
    size_t nb = st ? 0 : (size_t)lathe_shape_byte_size(&out_shapes[k]);
    out[k] = malloc(nb + 1);
    if (!st) st = lathe_buffer_to_host(res[k], out[k], nb);
  }
  for (int i = 0; i < 8; i++) lathe_buffer_free(in[i]), lathe_buffer_free(res[i]);
  lathe_executable_free(e);
  return st;
}

/* Runs b on lathe:cpu and on every mlx configuration; compares every output with tolerance tol. */
static void compare_with_cpu(const char *label, lathe_builder_t b, int n_in, const lathe_shape *shapes,
                             const void *const *data, int n_out, double tol) {
  lathe_backend_t cpu = backend("lathe:cpu");
  void *want[8];
  lathe_shape ws[8];
  lathe_status_t st = run_on(b, cpu, n_in, shapes, data, n_out, want, ws);
  CHECK(st == NULL, "%s on lathe:cpu: %s", label, lathe_status_message(st));
  lathe_status_free(st);
  for (int c = 0; c < N_CONFIGS; c++) {
    lathe_backend_t be = backend(configs[c]);
    void *got[8];
    lathe_shape gs[8];
    st = run_on(b, be, n_in, shapes, data, n_out, got, gs);
    CHECK(st == NULL, "%s on %s: %s", label, configs[c], lathe_status_message(st));
    for (int k = 0; k < n_out && !st; k++) {
      char l[256];
      snprintf(l, sizeof l, "%s on %s, output %d", label, configs[c], k);
      CHECK(lathe_shape_equal(&gs[k], &ws[k]), "%s: shape", l);
      tst_expect_close(l, got[k], want[k], ws[k].dtype, lathe_shape_num_elements(&ws[k]), tol);
    }
    lathe_status_free(st);
    for (int k = 0; k < n_out; k++) free(got[k]);
    lathe_backend_free(be);
  }
  for (int k = 0; k < n_out; k++) free(want[k]);
  lathe_backend_free(cpu);
}

TEST(mlx_configs_and_capabilities) {
  static const char *const in[][2] = {
      {"mlx:cpu", "mlx:cpu"},
      {"mlx:dynamic,cpu", "mlx:cpu,dynamic"},
      {"mlx:lazy_contiguous,dynamic,device=cpu", "mlx:cpu,dynamic,lazy_contiguous"},
  };
  for (int i = 0; i < 3; i++) {
    lathe_backend_t b = backend(in[i][0]);
    if (!b) continue;
    CHECK(strcmp(lathe_backend_name(b), "mlx") == 0, "name: %s", lathe_backend_name(b));
    CHECK(strcmp(lathe_backend_config(b), in[i][1]) == 0, "%s normalises to %s, got %s", in[i][0], in[i][1],
          lathe_backend_config(b));
    CHECK(strstr(lathe_backend_description(b), "MLX") != NULL, "description: %s", lathe_backend_description(b));
    CHECK(lathe_backend_num_devices(b) == 1, "one device");
    CHECK(!lathe_backend_has_shared_buffers(b), "MLX arrays are not shared host memory");
    CHECK(lathe_backend_supports_dynamic_axes(b), "dynamic axes (specialised, or native with dynamic)");
    CHECK(lathe_backend_supports_dtype(b, LATHE_DTYPE_FLOAT64), "Float64 on the CPU");
    CHECK(lathe_backend_supports_dtype(b, LATHE_DTYPE_BFLOAT16), "BFloat16");
    CHECK(!lathe_backend_supports_dtype(b, LATHE_DTYPE_COMPLEX128), "no Complex128 in MLX");
    CHECK(!lathe_backend_supports_dtype(b, LATHE_DTYPE_INT4), "no Int4 in MLX");
    CHECK(lathe_backend_supports_op(b, LATHE_OP_CONV_GENERAL, F32), "ConvGeneral");
    CHECK(lathe_backend_supports_op(b, LATHE_OP_WHILE, F32), "While");
    CHECK(!lathe_backend_supports_op(b, LATHE_OP_SELECT_AND_SCATTER_SUM, F32), "SelectAndScatterSum");
    CHECK(!lathe_backend_supports_op(b, LATHE_OP_FUSED_QUANTIZED_DENSE, F32), "FusedQuantizedDense");
    CHECK(!lathe_backend_supports_op(b, LATHE_OP_ALL_REDUCE, F32), "AllReduce");
    CHECK(!lathe_backend_supports_op(b, LATHE_OP_ALL_GATHER, F32) && !lathe_backend_supports_op(b, LATHE_OP_REDUCE_SCATTER, F32) &&
              !lathe_backend_supports_op(b, LATHE_OP_ALL_TO_ALL, F32) &&
              !lathe_backend_supports_op(b, LATHE_OP_COLLECTIVE_PERMUTE, F32),
          "the collectives (one device)");
    CHECK(!lathe_backend_supports_op(b, LATHE_OP_ADD, LATHE_DTYPE_COMPLEX128), "Add on Complex128");
    lathe_backend_free(b);
  }
  lathe_backend_t b = NULL;
  CHECK_ERR(lathe_backend_new("mlx:fast", &b), INVALID_ARGUMENT, "lazy_contiguous");
  CHECK_ERR(lathe_backend_new("mlx:cpu,threads=2", &b), INVALID_ARGUMENT, "unknown option \"threads=2\"");
  lathe_status_t st = lathe_backend_new("mlx:gpu", &b);
  if (st) CHECK(lathe_status_code_of(st) == LATHE_STATUS_UNAVAILABLE, "mlx:gpu without a GPU: %s", lathe_status_message(st));
  else lathe_backend_free(b);
  lathe_status_free(st);
}

/* main(x[batch, 3]) = (ReduceSum(x * 2, axis 1), DynamicShape(x)), run at sizes 1, 4, 2, 4. */
TEST(mlx_dynamic_axes_without_recompiling) {
  const int64_t sizes[] = {1, 4, 2, 4};
  for (int c = 0; c < 2; c++) {
    lathe_backend_t be = backend(configs[c]);
    lathe_builder_t b = NULL;
    CHECK_OK(lathe_builder_new(be, "dyn", &b));
    lathe_function_t fn = lathe_builder_main(b);
    lathe_shape ps = TST_SHAPE(F32, -1, 3);
    ps.axis_names[0] = "batch";
    lathe_value_t x = tst_param(fn, "x", ps), two, y, s, shp;
    float tv = 2;
    two = cst(fn, tst_shape0(F32), &tv);
    CHECK_OK(lathe_mul(fn, x, two, &y));
    int axis = 1;
    CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, y, &axis, 1, &s));
    CHECK_OK(lathe_dynamic_shape(fn, x, &shp));
    CHECK_OK(lathe_function_return(fn, (lathe_value_t[]){s, shp}, 2));
    lathe_executable_t e = NULL;
    CHECK_OK(lathe_builder_compile(b, &e));
    for (int i = 0; i < 4 && e; i++) {
      int64_t n = sizes[i];
      float xd[12];
      for (int k = 0; k < n * 3; k++) xd[k] = (float)k;
      lathe_shape xs = TST_SHAPE(F32, n, 3);
      lathe_buffer_t in = NULL, out[2] = {0};
      CHECK_OK(lathe_buffer_from_host(be, 0, &xs, xd, sizeof(float) * (size_t)(n * 3), &in));
      CHECK_OK(lathe_executable_execute(e, &in, NULL, 1, 0, out, 2));
      float got[4] = {0};
      int64_t dims[2] = {0}; /* sizes are Int64 */
      lathe_shape os;
      CHECK_OK(lathe_buffer_shape(out[0], &os));
      CHECK(os.rank == 1 && os.dims[0] == n, "%s: output shape [%lld]", configs[c], (long long)n);
      CHECK_OK(lathe_buffer_to_host(out[0], got, sizeof(float) * (size_t)n));
      CHECK_OK(lathe_buffer_to_host(out[1], dims, sizeof dims));
      for (int r = 0; r < n; r++) CHECK(got[r] == 2 * (3 * (3 * r) + 3), "%s: row %d: %g", configs[c], r, got[r]);
      CHECK(dims[0] == n && dims[1] == 3, "%s: DynamicShape [%lld, %lld]", configs[c], (long long)dims[0], (long long)dims[1]);
      lathe_buffer_free(in), lathe_buffer_free(out[0]), lathe_buffer_free(out[1]);
    }
    lathe_executable_stats stats;
    CHECK_OK(lathe_executable_get_stats(e, &stats));
    /* mlx:dynamic replays the program as built; mlx specialises (and traces) per binding */
    int64_t want = c == 1 ? 1 : 1 + 3;
    CHECK(stats.compiles == want, "%s: %lld compiles, want %lld", configs[c], (long long)stats.compiles, (long long)want);
    lathe_executable_free(e);
    lathe_builder_free(b);
    lathe_backend_free(be);
  }
}

/* Views as outputs: a transposed, broadcast and strided-sliced result read back and used again. */
TEST(mlx_views_as_outputs) {
  for (int c = 0; c < N_CONFIGS; c++) {
    lathe_backend_t be = backend(configs[c]);
    lathe_builder_t b = NULL;
    CHECK_OK(lathe_builder_new(be, "views", &b));
    lathe_function_t fn = lathe_builder_main(b);
    lathe_value_t x = tst_param(fn, "x", TST_SHAPE(F32, 2, 3)), t, br, sl;
    CHECK_OK(lathe_transpose(fn, x, (int[]){1, 0}, 2, &t));
    lathe_shape bs = TST_SHAPE(F32, 4, 2, 3);
    CHECK_OK(lathe_broadcast_in_dim(fn, x, &bs, (int[]){1, 2}, 2, &br));
    CHECK_OK(lathe_slice(fn, x, (int64_t[]){0, 0}, (int64_t[]){2, 3}, (int64_t[]){1, 2}, 2, &sl));
    CHECK_OK(lathe_function_return(fn, (lathe_value_t[]){t, br, sl}, 3));
    lathe_executable_t e = NULL;
    CHECK_OK(lathe_builder_compile(b, &e));
    float xd[6] = {0, 1, 2, 3, 4, 5};
    lathe_shape xs = TST_SHAPE(F32, 2, 3);
    lathe_buffer_t in = NULL, out[3] = {0}, again[3] = {0};
    CHECK_OK(lathe_buffer_from_host(be, 0, &xs, xd, sizeof xd, &in));
    CHECK_OK(lathe_executable_execute(e, &in, NULL, 1, 0, out, 3));
    float tt[6], bb[24], ss[4];
    const float want_t[6] = {0, 3, 1, 4, 2, 5}, want_s[4] = {0, 2, 3, 5};
    CHECK_OK(lathe_buffer_to_host(out[0], tt, sizeof tt));
    CHECK_OK(lathe_buffer_to_host(out[1], bb, sizeof bb));
    CHECK_OK(lathe_buffer_to_host(out[2], ss, sizeof ss));
    for (int i = 0; i < 6; i++) CHECK(tt[i] == want_t[i], "%s: transposed %d", configs[c], i);
    for (int i = 0; i < 24; i++) CHECK(bb[i] == xd[i % 6], "%s: broadcast %d", configs[c], i);
    for (int i = 0; i < 4; i++) CHECK(ss[i] == want_s[i], "%s: sliced %d", configs[c], i);
    /* a view fed back as an input: the transposed [3,2] reshaped is not [2,3] row-major */
    lathe_builder_t b2 = NULL;
    CHECK_OK(lathe_builder_new(be, "again", &b2));
    lathe_function_t f2 = lathe_builder_main(b2);
    lathe_value_t y = tst_param(f2, "y", TST_SHAPE(F32, 3, 2)), r;
    CHECK_OK(lathe_reshape(f2, y, (int64_t[]){6}, 1, &r));
    CHECK_OK(lathe_function_return(f2, &r, 1));
    lathe_executable_t e2 = NULL;
    CHECK_OK(lathe_builder_compile(b2, &e2));
    CHECK_OK(lathe_executable_execute(e2, &out[0], NULL, 1, 0, again, 1));
    float rr[6];
    CHECK_OK(lathe_buffer_to_host(again[0], rr, sizeof rr));
    for (int i = 0; i < 6; i++) CHECK(rr[i] == want_t[i], "%s: reshaped view %d", configs[c], i);
    lathe_buffer_free(in), lathe_buffer_free(again[0]);
    for (int k = 0; k < 3; k++) lathe_buffer_free(out[k]);
    lathe_executable_free(e), lathe_executable_free(e2);
    lathe_builder_free(b), lathe_builder_free(b2);
    lathe_backend_free(be);
  }
}

/* While(i < n) {x = x * 2 + i; i++}, If(p) on the result, and a Call of a function holding a
 * While: host steps between compiled segments in mlx. */
TEST(mlx_while_if_call) {
  lathe_backend_t cpu = backend("lathe:cpu");
  lathe_builder_t b = NULL;
  CHECK_OK(lathe_builder_new(cpu, "control", &b));
  lathe_function_t m = lathe_builder_main(b);
  lathe_shape vs = TST_SHAPE(F32, 4), is = tst_shape0(I32), ps = tst_shape0(LATHE_DTYPE_BOOL);
  lathe_value_t x = tst_param(m, "x", vs), n = tst_param(m, "n", is), p = tst_param(m, "p", ps);
  /* loop(x, i): cond i < n (captured), body (x * 2 + float(i), i + 1) */
  lathe_function_t cond = NULL, body = NULL;
  CHECK_OK(lathe_function_closure(m, &cond));
  CHECK_OK(lathe_function_closure(m, &body));
  lathe_value_t cx = tst_param(cond, NULL, vs), ci = tst_param(cond, NULL, is), lt;
  (void)cx;
  CHECK_OK(lathe_less_than(cond, ci, n, &lt));
  CHECK_OK(lathe_function_return(cond, &lt, 1));
  lathe_value_t bx = tst_param(body, NULL, vs), bi = tst_param(body, NULL, is), two, one, x2, fi, nx, ni;
  float tv = 2;
  int32_t ov = 1;
  two = cst(body, tst_shape0(F32), &tv);
  one = cst(body, tst_shape0(I32), &ov);
  CHECK_OK(lathe_mul(body, bx, two, &x2));
  CHECK_OK(lathe_convert_dtype(body, bi, F32, &fi));
  CHECK_OK(lathe_add(body, x2, fi, &nx));
  CHECK_OK(lathe_add(body, bi, one, &ni));
  CHECK_OK(lathe_function_return(body, (lathe_value_t[]){nx, ni}, 2));
  int32_t zv = 0;
  lathe_value_t zero = cst(m, is, &zv), loop[2], br[1];
  int nout = 0;
  CHECK_OK(lathe_while(m, cond, body, (lathe_value_t[]){x, zero}, 2, loop, 2, &nout));
  /* If(p): negate, else add 100 */
  lathe_function_t tb = NULL, fb = NULL;
  CHECK_OK(lathe_function_closure(m, &tb));
  CHECK_OK(lathe_function_closure(m, &fb));
  lathe_value_t neg, plus, hundred;
  CHECK_OK(lathe_neg(tb, loop[0], &neg));
  CHECK_OK(lathe_function_return(tb, &neg, 1));
  float hv = 100;
  hundred = cst(fb, tst_shape0(F32), &hv);
  CHECK_OK(lathe_add(fb, loop[0], hundred, &plus));
  CHECK_OK(lathe_function_return(fb, &plus, 1));
  CHECK_OK(lathe_if(m, p, tb, fb, br, 1, &nout));
  /* Call(g, x): g holds a While doubling x n times */
  lathe_function_t g = NULL, gc = NULL, gb = NULL;
  CHECK_OK(lathe_builder_new_function(b, "g", &g));
  lathe_value_t gx = tst_param(g, NULL, vs), gn = tst_param(g, NULL, is), gz = cst(g, is, &zv), gl[2];
  CHECK_OK(lathe_function_closure(g, &gc));
  CHECK_OK(lathe_function_closure(g, &gb));
  lathe_value_t gcx = tst_param(gc, NULL, vs), gci = tst_param(gc, NULL, is), glt;
  (void)gcx;
  CHECK_OK(lathe_less_than(gc, gci, gn, &glt));
  CHECK_OK(lathe_function_return(gc, &glt, 1));
  lathe_value_t gbx = tst_param(gb, NULL, vs), gbi = tst_param(gb, NULL, is), gtwo = cst(gb, tst_shape0(F32), &tv),
                gone = cst(gb, tst_shape0(I32), &ov), gx2, gi2;
  CHECK_OK(lathe_mul(gb, gbx, gtwo, &gx2));
  CHECK_OK(lathe_add(gb, gbi, gone, &gi2));
  CHECK_OK(lathe_function_return(gb, (lathe_value_t[]){gx2, gi2}, 2));
  CHECK_OK(lathe_while(g, gc, gb, (lathe_value_t[]){gx, gz}, 2, gl, 2, &nout));
  CHECK_OK(lathe_function_return(g, gl, 1));
  lathe_value_t called[1];
  CHECK_OK(lathe_call(m, g, (lathe_value_t[]){x, n}, 2, called, 1, &nout));
  CHECK_OK(lathe_function_return(m, (lathe_value_t[]){loop[0], loop[1], br[0], called[0]}, 4));
  float xd[4] = {1, -2, 0.5f, 3};
  int32_t nd = 3;
  for (int pv = 0; pv < 2; pv++) {
    uint8_t pd = (uint8_t)pv;
    compare_with_cpu(pv ? "while/if(true)/call" : "while/if(false)/call", b, 3, (lathe_shape[]){vs, is, ps},
                     (const void *[]){xd, &nd, &pd}, 4, 0);
  }
  lathe_builder_free(b);
  lathe_backend_free(cpu);
}

/* A mixed graph: DotGeneral, bias, ReLU, softmax, a 2-D convolution, max pooling, Gather, Sort,
 * ScatterSum and RNGBitGenerator, on every mlx configuration against lathe:cpu. */
TEST(mlx_mixed_graph_matches_cpu) {
  lathe_backend_t cpu = backend("lathe:cpu");
  lathe_builder_t b = NULL;
  CHECK_OK(lathe_builder_new(cpu, "mixed", &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape xs = TST_SHAPE(F32, 8, 16), ws = TST_SHAPE(F32, 16, 10), bs = TST_SHAPE(F32, 10),
              is = TST_SHAPE(I32, 5, 1), ims = TST_SHAPE(F32, 2, 9, 9, 3), ks = TST_SHAPE(F32, 3, 3, 3, 4),
              ss = TST_SHAPE(LATHE_DTYPE_UINT64, 3);
  lathe_value_t x = tst_param(fn, "x", xs), w = tst_param(fn, "w", ws), bias = tst_param(fn, "b", bs),
                idx = tst_param(fn, "i", is), img = tst_param(fn, "img", ims), ker = tst_param(fn, "k", ks),
                seed = tst_param(fn, "s", ss);
  lathe_value_t h, hb, zero, relu, mx, sh, ex, sm, den, soft;
  CHECK_OK(lathe_dot_general(fn, x, (int[]){1}, 1, NULL, 0, w, (int[]){0}, 1, NULL, 0, NULL, &h));
  lathe_shape hs = TST_SHAPE(F32, 8, 10);
  lathe_value_t bb;
  CHECK_OK(lathe_broadcast_in_dim(fn, bias, &hs, (int[]){1}, 1, &bb));
  CHECK_OK(lathe_add(fn, h, bb, &hb));
  float zv = 0;
  zero = cst(fn, tst_shape0(F32), &zv);
  CHECK_OK(lathe_max(fn, hb, zero, &relu));
  int ax = 1;
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_MAX, relu, &ax, 1, &mx));
  lathe_value_t mxb, denb;
  CHECK_OK(lathe_broadcast_in_dim(fn, mx, &hs, (int[]){0}, 1, &mxb));
  CHECK_OK(lathe_sub(fn, relu, mxb, &sh));
  CHECK_OK(lathe_exp(fn, sh, &ex));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, ex, &ax, 1, &den));
  CHECK_OK(lathe_broadcast_in_dim(fn, den, &hs, (int[]){0}, 1, &denb));
  CHECK_OK(lathe_div(fn, ex, denb, &sm));
  soft = sm;
  /* NHWC image, HWIO kernel, stride 2, padding 1 */
  lathe_value_t conv, pool, gath, sorted[1], scat, rng[2];
  lathe_conv_axes axes = {0, 3, (int[]){1, 2}, 2, 2, 3, (int[]){0, 1}, 2, 0, 3, (int[]){1, 2}, 2};
  lathe_conv_params cp = {.strides = (int64_t[]){2, 2}, .n_strides = 2,
                          .paddings = (lathe_padding[]){{1, 1}, {1, 1}}, .n_paddings = 2};
  CHECK_OK(lathe_conv_general(fn, img, ker, &axes, &cp, &conv));
  lathe_window_params wp = {.window_dims = (int64_t[]){1, 2, 2, 1}, .n_window_dims = 4,
                            .strides = (int64_t[]){1, 2, 2, 1}, .n_strides = 4};
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, conv, &wp, &pool));
  CHECK_OK(lathe_gather(fn, w, idx, 1, (int[]){1}, 1, (int[]){0}, 1, (int[]){0}, 1, (int64_t[]){1, 10}, 2, false, &gath));
  lathe_function_t cmp = NULL;
  CHECK_OK(lathe_function_closure(fn, &cmp));
  lathe_value_t a0 = tst_param(cmp, NULL, tst_shape0(F32)), a1 = tst_param(cmp, NULL, tst_shape0(F32)), lt;
  CHECK_OK(lathe_greater_than(cmp, a0, a1, &lt));
  CHECK_OK(lathe_function_return(cmp, &lt, 1));
  CHECK_OK(lathe_sort(fn, cmp, 1, true, &soft, 1, sorted));
  CHECK_OK(lathe_scatter_sum(fn, h, idx, gath, 1, (int[]){1}, 1, (int[]){0}, 1, (int[]){0}, 1, false, false, &scat));
  lathe_shape rs = TST_SHAPE(LATHE_DTYPE_UINT32, 7);
  CHECK_OK(lathe_rng_bit_generator(fn, seed, &rs, rng));
  CHECK_OK(lathe_function_return(fn, (lathe_value_t[]){soft, pool, sorted[0], scat, rng[0], rng[1]}, 6));
  float xd[128], wd[160], bd[10], imd[486], kd[108];
  tst_fill(xd, F32, 128, 1), tst_fill(wd, F32, 160, 2), tst_fill(bd, F32, 10, 3);
  tst_fill(imd, F32, 486, 4), tst_fill(kd, F32, 108, 5);
  int32_t id[5] = {3, 0, 15, 3, 7};
  uint64_t sd[3] = {42, 7, 0};
  compare_with_cpu("mixed", b, 7, (lathe_shape[]){xs, ws, bs, is, ims, ks, ss},
                   (const void *[]){xd, wd, bd, id, imd, kd, sd}, 6, 1e-5);
  lathe_builder_free(b);
  lathe_backend_free(cpu);
}

/* MLX's allocator's counters (process-wide): a 4 MiB buffer shows in current and peak. */
TEST(mlx_memory_stats) {
  lathe_backend_t b = NULL;
  CHECK_OK(lathe_backend_new("mlx:cpu", &b));
  if (!b) return;
  enum { N = 1 << 20 };
  lathe_memory_stats s0, s1, s2;
  CHECK_OK(lathe_backend_memory_stats(b, 0, &s0));
  CHECK(s0.process_wide && s0.peak_bytes >= s0.current_bytes, "stats before: process-wide, peak >= current");
  lathe_shape sh = TST_SHAPE(LATHE_DTYPE_FLOAT32, N);
  float *host = calloc(N, sizeof(float));
  lathe_buffer_t buf = NULL;
  CHECK_OK(lathe_buffer_from_host(b, 0, &sh, host, sizeof(float) * N, &buf));
  CHECK_OK(lathe_buffer_to_host(buf, host, sizeof(float) * N));
  CHECK_OK(lathe_backend_memory_stats(b, 0, &s1));
  CHECK(s1.current_bytes - s0.current_bytes >= 4 * N, "a 4 MiB buffer counted: %lld -> %lld", (long long)s0.current_bytes,
        (long long)s1.current_bytes);
  CHECK(s1.peak_bytes >= s1.current_bytes, "peak %lld >= current %lld", (long long)s1.peak_bytes, (long long)s1.current_bytes);
  lathe_buffer_free(buf);
  CHECK_OK(lathe_backend_memory_reset_peak(b, 0));
  CHECK_OK(lathe_backend_memory_stats(b, 0, &s2));
  CHECK(s2.current_bytes <= s1.current_bytes - 4 * N, "freed: %lld -> %lld", (long long)s1.current_bytes,
        (long long)s2.current_bytes);
  CHECK(s2.peak_bytes <= s2.current_bytes, "reset peak: %lld, current %lld", (long long)s2.peak_bytes, (long long)s2.current_bytes);
  CHECK_ERR(lathe_backend_memory_stats(b, 3, &s2), INVALID_ARGUMENT, "device 3");
  free(host);
  lathe_backend_free(b);
}

TEST(mlx_unimplemented) {
  lathe_backend_t be = backend("mlx:cpu");
  /* a comparator that is not a plain comparison of the first operand */
  lathe_builder_t b = NULL;
  CHECK_OK(lathe_builder_new(be, "sort", &b));
  lathe_function_t fn = lathe_builder_main(b), cmp = NULL;
  lathe_value_t x = tst_param(fn, "x", TST_SHAPE(F32, 5)), out[1];
  CHECK_OK(lathe_function_closure(fn, &cmp));
  lathe_value_t a0 = tst_param(cmp, NULL, tst_shape0(F32)), a1 = tst_param(cmp, NULL, tst_shape0(F32)), n0, n1, lt;
  CHECK_OK(lathe_abs(cmp, a0, &n0));
  CHECK_OK(lathe_abs(cmp, a1, &n1));
  CHECK_OK(lathe_less_than(cmp, n0, n1, &lt));
  CHECK_OK(lathe_function_return(cmp, &lt, 1));
  CHECK_OK(lathe_sort(fn, cmp, 0, true, &x, 1, out));
  CHECK_OK(lathe_function_return(fn, out, 1));
  lathe_executable_t e = NULL;
  CHECK_ERR(lathe_builder_compile(b, &e), UNIMPLEMENTED, "Sort");
  lathe_builder_free(b);
  /* a dtype MLX lacks */
  CHECK_OK(lathe_builder_new(be, "c128", &b));
  fn = lathe_builder_main(b);
  lathe_value_t z = tst_param(fn, "z", TST_SHAPE(LATHE_DTYPE_COMPLEX128, 2)), y;
  CHECK_OK(lathe_neg(fn, z, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  CHECK_ERR(lathe_builder_compile(b, &e), UNIMPLEMENTED, "Complex128");
  lathe_builder_free(b);
  lathe_backend_free(be);
}

/* DynamicReshape of x[batch, 3] sized by a value that disagrees with the element count:
 * INVALID_ARGUMENT when it runs, in both modes (a host step between compiled segments in mlx). */
TEST(mlx_errors_while_running) {
  for (int c = 0; c < 2; c++) {
    lathe_backend_t be = backend(configs[c]);
    lathe_builder_t b = NULL;
    CHECK_OK(lathe_builder_new(be, "reshape", &b));
    lathe_function_t fn = lathe_builder_main(b);
    lathe_shape ds = TST_SHAPE(F32, -1, 3);
    ds.axis_names[0] = "batch";
    lathe_value_t x = tst_param(fn, "x", ds), v = tst_param(fn, "v", tst_shape0(I32)), y;
    lathe_dim_spec spec = {0, "n", v};
    CHECK_OK(lathe_dynamic_reshape(fn, x, &spec, 1, &y));
    CHECK_OK(lathe_function_return(fn, &y, 1));
    lathe_executable_t e = NULL;
    CHECK_OK(lathe_builder_compile(b, &e));
    float xd[6] = {0};
    int32_t good = 6, bad = 5;
    lathe_shape xs = TST_SHAPE(F32, 2, 3), vs = tst_shape0(I32);
    lathe_buffer_t in[2] = {0}, out = NULL;
    CHECK_OK(lathe_buffer_from_host(be, 0, &xs, xd, sizeof xd, &in[0]));
    CHECK_OK(lathe_buffer_from_host(be, 0, &vs, &good, sizeof good, &in[1]));
    CHECK_OK(lathe_executable_execute(e, in, NULL, 2, 0, &out, 1));
    lathe_buffer_free(out), out = NULL;
    lathe_buffer_free(in[1]);
    CHECK_OK(lathe_buffer_from_host(be, 0, &vs, &bad, sizeof bad, &in[1]));
    CHECK_ERR(lathe_executable_execute(e, in, NULL, 2, 0, &out, 1), INVALID_ARGUMENT, "DynamicReshape");
    lathe_buffer_free(in[0]), lathe_buffer_free(in[1]);
    lathe_executable_free(e);
    lathe_builder_free(b);
    lathe_backend_free(be);
  }
}

TEST(mlx_donation) {
  lathe_backend_t be = backend("mlx:cpu,dynamic");
  lathe_builder_t b = NULL;
  CHECK_OK(lathe_builder_new(be, "donate", &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_value_t x = tst_param(fn, "x", TST_SHAPE(F32, 3)), y;
  CHECK_OK(lathe_add(fn, x, x, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  float xd[3] = {1, 2, 3}, got[3];
  lathe_shape xs = TST_SHAPE(F32, 3);
  lathe_buffer_t in = NULL, out = NULL;
  CHECK_OK(lathe_buffer_from_host(be, 0, &xs, xd, sizeof xd, &in));
  CHECK_OK(lathe_executable_execute(e, &in, (bool[]){true}, 1, 0, &out, 1));
  CHECK(lathe_buffer_is_donated(in), "the input is donated");
  CHECK_ERR(lathe_buffer_to_host(in, got, sizeof got), FAILED_PRECONDITION, "donated");
  CHECK_OK(lathe_buffer_to_host(out, got, sizeof got));
  CHECK(got[0] == 2 && got[1] == 4 && got[2] == 6, "x + x");
  lathe_buffer_free(in), lathe_buffer_free(out);
  lathe_executable_free(e);
  lathe_builder_free(b);
  lathe_backend_free(be);
}

/* Several threads run one executable at once (MLX is entered under one lock). */
typedef struct {
  lathe_backend_t be;
  lathe_executable_t e;
  int bad;
} thread_job;

static void *run_many(void *p) {
  thread_job *j = p;
  for (int i = 0; i < 20; i++) {
    float xd[4] = {(float)i, 1, 2, 3}, got[4];
    lathe_shape xs = TST_SHAPE(F32, 4);
    lathe_buffer_t in = NULL, out = NULL;
    lathe_status_t st = lathe_buffer_from_host(j->be, 0, &xs, xd, sizeof xd, &in);
    if (!st) st = lathe_executable_execute(j->e, &in, NULL, 1, 0, &out, 1);
    if (!st) st = lathe_buffer_to_host(out, got, sizeof got);
    if (st || got[0] != 2 * xd[0] + 1 || got[3] != 7) j->bad++;
    lathe_status_free(st);
    lathe_buffer_free(in), lathe_buffer_free(out);
  }
  return NULL;
}

TEST(mlx_concurrent_executions) {
  for (int c = 0; c < 2; c++) {
    lathe_backend_t be = backend(configs[c]);
    lathe_builder_t b = NULL;
    CHECK_OK(lathe_builder_new(be, "threads", &b));
    lathe_function_t fn = lathe_builder_main(b);
    lathe_value_t x = tst_param(fn, "x", TST_SHAPE(F32, 4)), y, z, one;
    float ov = 1;
    one = cst(fn, tst_shape0(F32), &ov);
    CHECK_OK(lathe_add(fn, x, x, &y));
    CHECK_OK(lathe_add(fn, y, one, &z));
    CHECK_OK(lathe_function_return(fn, &z, 1));
    lathe_executable_t e = NULL;
    CHECK_OK(lathe_builder_compile(b, &e));
    thread_job jobs[4];
    pthread_t th[4];
    for (int t = 0; t < 4; t++) jobs[t] = (thread_job){be, e, 0}, pthread_create(&th[t], NULL, run_many, &jobs[t]);
    for (int t = 0; t < 4; t++) {
      pthread_join(th[t], NULL);
      CHECK(jobs[t].bad == 0, "%s: thread %d: %d wrong results", configs[c], t, jobs[t].bad);
    }
    lathe_executable_free(e);
    lathe_builder_free(b);
    lathe_backend_free(be);
  }
}

int main(int argc, char **argv) { return tst_main(argc, argv); }

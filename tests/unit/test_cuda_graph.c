/* test_cuda_graph.c -- lathe:cuda's CUDA graphs (src/cuda/graph.c): a plan captured at its N-th
 * run and replayed must give, run after run, what lathe:cpu gives, with fresh inputs each time,
 * a donated input fed back as in a training loop, outputs that are inputs or constants, and
 * programs whose capture fails (cuDNN still measuring) or that are never captured (While). */
#include "cuda_testing.h"

static lathe_backend_t graph_gpu(int after) {
  static lathe_backend_t b[4];
  static bool tried[4];
  if (!tried[after]) {
    tried[after] = true;
    char cfg[48];
    snprintf(cfg, sizeof cfg, "lathe:cuda,graphs=%d", after);
    lathe_status_t st = lathe_backend_new(cfg, &b[after]);
    lathe_status_free(st);
  }
  return b[after];
}

/* Runs the executables eg (GPU) and ec (CPU) `runs` times on fresh inputs; input `fed` (or -1)
 * is the GPU's output `fed_from` of the run before, donated (the CPU gets the same values). */
static void run_both(const char *label, lathe_backend_t g, lathe_executable_t eg, lathe_executable_t ec, int runs, int fed,
                     int fed_from, double tol) {
  int n_in = lathe_executable_num_inputs(ec), n_out = lathe_executable_num_outputs(ec);
  lathe_buffer_t carried = NULL;
  for (int run = 0; run < runs; run++) {
    lathe_buffer_t gi[8] = {0}, ci[8] = {0}, go[8] = {0}, co[8] = {0};
    bool donate[8] = {false};
    for (int i = 0; i < n_in; i++) {
      lathe_shape s;
      CHECK_OK(lathe_executable_input_shape(ec, i, &s));
      size_t nb = (size_t)lathe_shape_byte_size(&s);
      void *h = tst_alloc_for(&s);
      tst_fill(h, s.dtype, lathe_shape_num_elements(&s), (unsigned)(17 * run + i + 1));
      if (i == fed && carried) {
        CHECK_OK(lathe_buffer_to_host(carried, h, nb));
        gi[i] = carried, donate[i] = true, carried = NULL;
      } else {
        CHECK_OK(lathe_buffer_from_host(g, 0, &s, h, nb, &gi[i]));
      }
      CHECK_OK(lathe_buffer_from_host(tst_backend(), 0, &s, h, nb, &ci[i]));
      free(h);
    }
    lathe_status_t st = lathe_executable_execute(eg, gi, donate, n_in, 0, go, n_out);
    CHECK(!st, "%s run %d: GPU: %s", label, run, lathe_status_message(st));
    lathe_status_free(st);
    CHECK_OK(lathe_executable_execute(ec, ci, NULL, n_in, 0, co, n_out));
    char lr[160];
    snprintf(lr, sizeof lr, "%s run %d", label, run);
    agree_outputs(lr, go, co, n_out, tol);
    if (fed >= 0) carried = go[fed_from], go[fed_from] = NULL;
    for (int i = 0; i < 8; i++) {
      if (!donate[i]) lathe_buffer_free(gi[i]);
      lathe_buffer_free(ci[i]);
      lathe_buffer_free(go[i]);
      lathe_buffer_free(co[i]);
    }
  }
  lathe_buffer_free(carried);
}

static void compare(const char *label, lathe_builder_t b, int after, int runs, int fed, int fed_from, double tol) {
  lathe_executable_t eg = NULL, ec = NULL;
  CHECK_OK(lathe_builder_compile_for(b, graph_gpu(after), &eg));
  CHECK_OK(lathe_builder_compile_for(b, tst_backend(), &ec));
  if (eg && ec) run_both(label, graph_gpu(after), eg, ec, runs, fed, fed_from, tol);
  lathe_executable_free(eg);
  lathe_executable_free(ec);
}

/* Three layers y = tanh(x.w + b), the sum of the last, w1 updated (donated and fed back), b passed
 * through, a constant: more than graph.c's MIN_STEPS steps. */
TEST(cuda_graph_replay_step) {
  if (!gpu() || !graph_gpu(1) || !graph_gpu(3)) SKIP("no usable GPU");
  for (int after = 1; after <= 3; after += 2) {
    lathe_function_t fn;
    lathe_builder_t b = tst_builder("graph_step", &fn);
    lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 64, 32), ws = TST_SHAPE(LATHE_DTYPE_FLOAT32, 32, 32),
                bs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 32);
    lathe_value_t x = tst_param(fn, "x", xs), w[3], bias = tst_param(fn, "b", bs), y = x;
    for (int l = 0; l < 3; l++) {
      char nm[16];
      snprintf(nm, sizeof nm, "w%d", l);
      w[l] = tst_param(fn, nm, ws);
    }
    int lc = 1, rc = 0, ax = 1;
    lathe_dot_config cfg = {LATHE_DTYPE_INVALID, LATHE_DTYPE_INVALID};
    for (int l = 0; l < 3; l++) {
      lathe_value_t h, bb, hb;
      CHECK_OK(lathe_dot_general(fn, y, &lc, 1, NULL, 0, w[l], &rc, 1, NULL, 0, &cfg, &h));
      CHECK_OK(lathe_broadcast_in_dim(fn, bias, &xs, &ax, 1, &bb));
      CHECK_OK(lathe_add(fn, h, bb, &hb));
      CHECK_OK(lathe_tanh(fn, hb, &y));
    }
    lathe_value_t s, c, wh, wn, k, outs[5];
    CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, y, NULL, 0, &s));
    float half = 0.5f;
    lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
    CHECK_OK(lathe_constant(fn, &s0, &half, sizeof half, &c));
    CHECK_OK(lathe_mul(fn, w[0], c, &wh));
    CHECK_OK(lathe_add(fn, wh, c, &wn));
    lathe_shape ks = TST_SHAPE(LATHE_DTYPE_INT32, 3);
    int32_t kv[3] = {7, -1, 3};
    CHECK_OK(lathe_constant(fn, &ks, kv, sizeof kv, &k));
    outs[0] = y, outs[1] = s, outs[2] = wn, outs[3] = bias, outs[4] = k;
    CHECK_OK(lathe_function_return(fn, outs, 5));
    char label[64];
    snprintf(label, sizeof label, "step graphs=%d", after);
    compare(label, b, after, 6, 2, 2, 1e-4);
    lathe_builder_free(b);
  }
}

/* A convolution: cuDNN measures its algorithms on the first run, which cannot be captured (the
 * capture at run 1 fails and the run is walked; run 2 is captured). */
TEST(cuda_graph_replay_conv) {
  if (!gpu() || !graph_gpu(1)) SKIP("no usable GPU");
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("graph_conv", &fn);
  lathe_shape is = TST_SHAPE(LATHE_DTYPE_FLOAT32, 4, 9, 9, 3), ks = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 3, 3, 8);
  lathe_shape k2s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 3, 8, 4);
  lathe_value_t x = tst_param(fn, "x", is), kk = tst_param(fn, "k", ks), k2 = tst_param(fn, "k2", k2s), y, r, y2, r2, s,
                outs[2];
  int sp[2] = {1, 2}, ksp[2] = {0, 1}, perm[4] = {0, 3, 1, 2};
  lathe_conv_axes axes = {0, 3, sp, 2, 2, 3, ksp, 2, 0, 3, sp, 2};
  CHECK_OK(lathe_conv_general(fn, x, kk, &axes, NULL, &y));
  CHECK_OK(lathe_tanh(fn, y, &r));
  CHECK_OK(lathe_conv_general(fn, r, k2, &axes, NULL, &y2));
  CHECK_OK(lathe_tanh(fn, y2, &r2));
  CHECK_OK(lathe_transpose(fn, r2, perm, 4, &outs[0]));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, r2, NULL, 0, &s));
  outs[1] = s;
  CHECK_OK(lathe_function_return(fn, outs, 2));
  compare("conv graphs=1", b, 1, 4, -1, -1, 1e-4);
  lathe_builder_free(b);
}

/* A While reads its predicate on the host: never captured, every run walked. */
TEST(cuda_graph_while_walked) {
  if (!gpu() || !graph_gpu(1)) SKIP("no usable GPU");
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("graph_while", &fn);
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 5);
  lathe_value_t x = tst_param(fn, "x", xs), outs[1];
  lathe_function_t cond, body;
  CHECK_OK(lathe_function_closure(fn, &cond));
  CHECK_OK(lathe_function_closure(fn, &body));
  lathe_value_t cx = tst_param(cond, "x", xs), s, lim, p;
  CHECK_OK(lathe_reduce(cond, LATHE_OP_REDUCE_SUM, cx, NULL, 0, &s));
  float hundred = 100.0f;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  CHECK_OK(lathe_constant(cond, &s0, &hundred, sizeof hundred, &lim));
  CHECK_OK(lathe_less_than(cond, s, lim, &p));
  CHECK_OK(lathe_function_return(cond, &p, 1));
  lathe_value_t bx = tst_param(body, "x", xs), ab, two, nb;
  float tv = 2.0f;
  CHECK_OK(lathe_abs(body, bx, &ab));
  CHECK_OK(lathe_constant(body, &s0, &tv, sizeof tv, &two));
  CHECK_OK(lathe_add(body, ab, two, &nb));
  CHECK_OK(lathe_function_return(body, &nb, 1));
  int n = 0;
  CHECK_OK(lathe_while(fn, cond, body, &x, 1, outs, 1, &n));
  CHECK_OK(lathe_function_return(fn, outs, 1));
  compare("while graphs=1", b, 1, 3, -1, -1, 1e-5);
  lathe_builder_free(b);
}

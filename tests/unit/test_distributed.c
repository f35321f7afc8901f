/* test_distributed.c -- programs over several devices on lathe:cpu,devices=N: SPMD replicas with
 * AllReduce (every reduction, replica groups, dtypes, inside a While), AutoSharding over 1-D and
 * 2-D meshes (sharded and replicated inputs and outputs), and the errors of both. */
#include "core/core.h"
#include "testing.h"

static lathe_backend_t backend_n(int n) {
  char cfg[64];
  snprintf(cfg, sizeof cfg, "lathe:cpu,devices=%d", n);
  lathe_backend_t b = NULL;
  CHECK_OK(lathe_backend_new(cfg, &b));
  return b;
}

static lathe_buffer_t on(lathe_backend_t b, int device, lathe_shape s, const void *data) {
  lathe_buffer_t buf = NULL;
  CHECK_OK(lathe_buffer_from_host(b, device, &s, data, (size_t)lathe_shape_byte_size(&s), &buf));
  return buf;
}

/* y = AllReduce(op)(x) over n replicas in groups; x of shape s. */
static lathe_executable_t all_reduce_exec(lathe_backend_t be, int n, lathe_shape s, lathe_op op, const int *groups,
                                          const int *sizes, int n_groups) {
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "allreduce", &b));
  CHECK_OK(lathe_builder_spmd(b, n));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_value_t x, y = NULL;
  CHECK_OK(lathe_parameter(fn, "x", &s, &x));
  CHECK_OK(lathe_all_reduce(fn, &x, 1, op, groups, sizes, n_groups, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  return e;
}

TEST(spmd_all_reduce) {
  for (int n = 2; n <= 4; n += 2) {
    lathe_backend_t be = backend_n(n);
    if (!be) return;
    lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3);
    const lathe_op ops[] = {LATHE_OP_REDUCE_SUM, LATHE_OP_REDUCE_PRODUCT, LATHE_OP_REDUCE_MAX, LATHE_OP_REDUCE_MIN};
    for (int o = 0; o < 4; o++) {
      lathe_executable_t e = all_reduce_exec(be, n, s, ops[o], NULL, NULL, 0);
      if (!e) continue;
      CHECK(lathe_executable_num_replicas(e) == n, "%d replicas", lathe_executable_num_replicas(e));
      lathe_buffer_t in[4], out[4] = {0};
      float v[4][3];
      for (int r = 0; r < n; r++) {
        for (int k = 0; k < 3; k++) v[r][k] = (float)(r + 1) * (k == 1 ? -1.0f : 1.0f) + 0.5f * (float)k;
        in[r] = on(be, r, s, v[r]);
      }
      CHECK_OK(lathe_executable_execute(e, in, NULL, n, 0, out, n));
      for (int r = 0; r < n; r++) {
        float got[3];
        int dev = -1;
        CHECK_OK(lathe_buffer_device(out[r], &dev));
        CHECK(dev == r, "replica %d's output on device %d", r, dev);
        CHECK_OK(lathe_buffer_to_host(out[r], got, sizeof got));
        for (int k = 0; k < 3; k++) {
          float want = v[0][k];
          for (int q = 1; q < n; q++) {
            float x = v[q][k];
            want = o == 0 ? want + x : o == 1 ? want * x : o == 2 ? (x > want ? x : want) : (x < want ? x : want);
          }
          CHECK(got[k] == want, "n=%d %s replica %d element %d: %g, want %g", n, lathe_op_name(ops[o]), r, k, got[k], want);
        }
      }
      for (int r = 0; r < n; r++) lathe_buffer_free(in[r]), lathe_buffer_free(out[r]);
      lathe_executable_free(e);
    }
    lathe_backend_free(be);
  }
}

TEST(spmd_groups_and_dtypes) {
  lathe_backend_t be = backend_n(4);
  if (!be) return;
  const int groups[] = {0, 2, 3, 1}, sizes[] = {2, 2}; /* {0, 2} and {3, 1} */
  const lathe_dtype dts[] = {LATHE_DTYPE_INT32, LATHE_DTYPE_UINT8, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_FLOAT64,
                             LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_INT64};
  for (int d = 0; d < 6; d++) {
    lathe_shape s = TST_SHAPE(dts[d], 5);
    lathe_executable_t e = all_reduce_exec(be, 4, s, LATHE_OP_REDUCE_SUM, groups, sizes, 2);
    if (!e) continue;
    lathe_buffer_t in[4], out[4] = {0};
    void *v[4];
    for (int r = 0; r < 4; r++) {
      v[r] = tst_alloc_for(&s);
      for (int k = 0; k < 5; k++) tst_set_complex(v[r], dts[d], k, (double)(10 * r + k), lathe_dtype_is_complex(dts[d]) ? r : 0);
      in[r] = on(be, r, s, v[r]);
    }
    CHECK_OK(lathe_executable_execute(e, in, NULL, 4, 0, out, 4));
    for (int r = 0; r < 4; r++) {
      int peer = r == 0 ? 2 : r == 2 ? 0 : r == 3 ? 1 : 3;
      void *got = tst_alloc_for(&s), *want = tst_alloc_for(&s);
      for (int k = 0; k < 5; k++)
        tst_set_complex(want, dts[d], k, (double)(10 * r + k) + (double)(10 * peer + k),
                        lathe_dtype_is_complex(dts[d]) ? r + peer : 0);
      CHECK_OK(lathe_buffer_to_host(out[r], got, (size_t)lathe_shape_byte_size(&s)));
      char label[64];
      snprintf(label, sizeof label, "AllReduce %s replica %d", lathe_dtype_name(dts[d]), r);
      tst_expect_close(label, got, want, dts[d], 5, 0);
      free(got);
      free(want);
    }
    for (int r = 0; r < 4; r++) lathe_buffer_free(in[r]), lathe_buffer_free(out[r]), free(v[r]);
    lathe_executable_free(e);
  }
  lathe_backend_free(be);
}

/* A data-parallel step: each replica takes half of a batch, the gradient of a mean squared error
 * is all-reduced (summed, then scaled), and every replica applies the same update: it matches the
 * single-device step on the whole batch. The gradient runs inside a While (collectives in a
 * sub-function). */
TEST(spmd_data_parallel_step) {
  lathe_backend_t be = backend_n(2);
  if (!be) return;
  /* loss = mean((x w - t)^2) over B rows; grad = 2/B x^T (x w - t); w [3], x [B, 3], t [B] */
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "dp", &b));
  CHECK_OK(lathe_builder_spmd(b, 2));
  lathe_function_t fn = lathe_builder_main(b);
  const int B = 4, Bh = 2;
  lathe_shape ws = TST_SHAPE(LATHE_DTYPE_FLOAT64, 3), xs = TST_SHAPE(LATHE_DTYPE_FLOAT64, Bh, 3),
              ts = TST_SHAPE(LATHE_DTYPE_FLOAT64, Bh);
  lathe_value_t w, x, t, p, r, g, gsum, gs, wn, c;
  CHECK_OK(lathe_parameter(fn, "w", &ws, &w));
  CHECK_OK(lathe_parameter(fn, "x", &xs, &x));
  CHECK_OK(lathe_parameter(fn, "t", &ts, &t));
  int lc = 1, rc = 0, lc0 = 0;
  CHECK_OK(lathe_dot_general(fn, x, &lc, 1, NULL, 0, w, &rc, 1, NULL, 0, NULL, &p));
  CHECK_OK(lathe_sub(fn, p, t, &r));
  CHECK_OK(lathe_dot_general(fn, x, &lc0, 1, NULL, 0, r, &rc, 1, NULL, 0, NULL, &g));
  CHECK_OK(lathe_all_reduce(fn, &g, 1, LATHE_OP_REDUCE_SUM, NULL, NULL, 0, &gsum));
  double k = -0.1 * 2.0 / B; /* learning rate 0.1 times d(mean)/d(sum) */
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT64);
  CHECK_OK(lathe_constant(fn, &s0, &k, sizeof k, &c));
  CHECK_OK(lathe_mul(fn, gsum, c, &gs));
  CHECK_OK(lathe_add(fn, w, gs, &wn));
  CHECK_OK(lathe_function_return(fn, &wn, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  if (!e) {
    lathe_backend_free(be);
    return;
  }
  double wv[3] = {0.5, -1, 2}, xv[4][3] = {{1, 2, 3}, {-1, 0.5, 2}, {3, -2, 1}, {0.25, 1, -1}}, tv[4] = {1, -2, 0.5, 3};
  lathe_buffer_t in[6], out[2] = {0};
  for (int rep = 0; rep < 2; rep++) {
    in[rep * 3 + 0] = on(be, rep, ws, wv);
    in[rep * 3 + 1] = on(be, rep, xs, xv[rep * Bh]);
    in[rep * 3 + 2] = on(be, rep, ts, &tv[rep * Bh]);
  }
  CHECK_OK(lathe_executable_execute(e, in, NULL, 6, 0, out, 2));
  /* the single-device step, in double on the host */
  double grad[3] = {0};
  for (int i = 0; i < B; i++) {
    double pred = 0;
    for (int j = 0; j < 3; j++) pred += xv[i][j] * wv[j];
    for (int j = 0; j < 3; j++) grad[j] += xv[i][j] * (pred - tv[i]);
  }
  for (int rep = 0; rep < 2; rep++) {
    double got[3];
    CHECK_OK(lathe_buffer_to_host(out[rep], got, sizeof got));
    for (int j = 0; j < 3; j++)
      CHECK(fabs(got[j] - (wv[j] + k * grad[j])) < 1e-12, "replica %d w[%d] = %.15g, want %.15g", rep, j, got[j],
            wv[j] + k * grad[j]);
  }
  for (int i = 0; i < 6; i++) lathe_buffer_free(in[i]);
  lathe_buffer_free(out[0]);
  lathe_buffer_free(out[1]);
  lathe_executable_free(e);
  lathe_backend_free(be);
}

TEST(spmd_errors) {
  lathe_backend_t be = backend_n(2);
  if (!be) return;
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "errors", &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2);
  lathe_value_t x, y;
  CHECK_OK(lathe_parameter(fn, "x", &s, &x));
  CHECK_ERR(lathe_all_reduce(fn, &x, 1, LATHE_OP_REDUCE_SUM, NULL, NULL, 0, &y), INVALID_ARGUMENT, "SPMD");
  CHECK_ERR(lathe_builder_spmd(b, 3), INVALID_ARGUMENT, "the backend has 2");
  CHECK_OK(lathe_builder_spmd(b, 2));
  CHECK_ERR(lathe_builder_spmd(b, 2), INVALID_ARGUMENT, "already distributed");
  const int bad[] = {0, 0}, sizes[] = {2}, one[] = {1}, half[] = {1};
  CHECK_ERR(lathe_all_reduce(fn, &x, 1, LATHE_OP_REDUCE_SUM, bad, sizes, 1, &y), INVALID_ARGUMENT, "in two groups");
  CHECK_ERR(lathe_all_reduce(fn, &x, 1, LATHE_OP_REDUCE_SUM, one, half, 1, &y), INVALID_ARGUMENT, "replica 0 is in no group");
  CHECK_ERR(lathe_all_reduce(fn, &x, 1, LATHE_OP_ABS, NULL, NULL, 0, &y), INVALID_ARGUMENT, "reduction must be");
  const int two_devs[] = {1, 0};
  CHECK_ERR(lathe_builder_assign_devices(b, two_devs, 1), INVALID_ARGUMENT, "1 devices for a program distributed over 2");
  CHECK_OK(lathe_builder_assign_devices(b, two_devs, 2));
  CHECK_OK(lathe_all_reduce(fn, &x, 1, LATHE_OP_REDUCE_SUM, NULL, NULL, 0, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  float v[2] = {1, 2};
  lathe_buffer_t a0 = on(be, 0, s, v), a1 = on(be, 1, s, v), out[2];
  lathe_buffer_t wrong[2] = {a0, a1}, right[2] = {a1, a0}; /* replica 0 runs on device 1 */
  CHECK_ERR(lathe_executable_execute(e, wrong, NULL, 2, 0, out, 2), INVALID_ARGUMENT, "is on device 0, not on device 1");
  CHECK_ERR(lathe_executable_execute(e, right, NULL, 1, 0, out, 2), INVALID_ARGUMENT, "per device on 2 devices");
  CHECK_OK(lathe_executable_execute(e, right, NULL, 2, 0, out, 2));
  float got[2];
  CHECK_OK(lathe_buffer_to_host(out[1], got, sizeof got));
  CHECK(got[0] == 2 && got[1] == 4, "sum over the two replicas: %g %g", got[0], got[1]);
  lathe_buffer_free(out[0]);
  lathe_buffer_free(out[1]);
  lathe_buffer_free(a0);
  lathe_buffer_free(a1);
  lathe_executable_free(e);
  lathe_backend_free(be);
}

/* GoMLX's model.Exec attaches a sharding to every variable of an SPMD program: accepted and
 * checked for rank (the replicas' values are whole shards), with no effect on the results. */
TEST(spmd_sharding_annotations) {
  lathe_backend_t be = backend_n(2);
  if (!be) return;
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "annotated", &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2);
  const char *data[] = {"data"};
  lathe_sharding replicated = {.mesh = "mesh", .rank = 0}, split = {.mesh = "mesh", .rank = 1, .axes = {data}, .n_axes = {1}};
  lathe_sharding too_long = {.mesh = "mesh", .rank = 2};
  lathe_value_t x, y;
  CHECK_ERR(lathe_parameter_sharded(fn, "x", &s, &split, &x), INVALID_ARGUMENT, "needs an SPMD or AutoSharding builder");
  CHECK_OK(lathe_builder_spmd(b, 2));
  CHECK_ERR(lathe_parameter_sharded(fn, "x", &s, &too_long, &x), INVALID_ARGUMENT, "rank 2 for a value of rank 1");
  CHECK_OK(lathe_parameter_sharded(fn, "x", &s, &split, &x));
  CHECK_OK(lathe_all_reduce(fn, &x, 1, LATHE_OP_REDUCE_MAX, NULL, NULL, 0, &y));
  const lathe_sharding *outs[] = {&replicated};
  CHECK_OK(lathe_function_return_sharded(fn, &y, outs, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  float v0[2] = {1, 5}, v1[2] = {3, 2};
  lathe_buffer_t in[2] = {on(be, 0, s, v0), on(be, 1, s, v1)}, out[2] = {0};
  CHECK_OK(lathe_executable_execute(e, in, NULL, 2, 0, out, 2));
  for (int r = 0; r < 2; r++) {
    float got[2];
    CHECK_OK(lathe_buffer_to_host(out[r], got, sizeof got));
    CHECK(got[0] == 3 && got[1] == 5, "replica %d: max over replicas %g %g, want 3 5", r, got[0], got[1]);
    lathe_buffer_free(out[r]);
    lathe_buffer_free(in[r]);
  }
  lathe_executable_free(e);
  lathe_backend_free(be);
}

/* ---- AutoSharding ---- */
TEST(auto_sharding_1d) {
  lathe_backend_t be = backend_n(2);
  if (!be) return;
  const int sizes[] = {2};
  const char *names[] = {"sharded"};
  lathe_mesh mesh = {"mesh", 1, sizes, names, NULL};
  const char *ax[] = {"sharded"};
  lathe_sharding spec = {.mesh = "mesh", .rank = 1, .axes = {ax}, .n_axes = {1}};
  /* y = x + w (x a replicated scalar, w sharded [4]), sum = ReduceSum(y) replicated; y sharded */
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "sharded", &b));
  CHECK_OK(lathe_builder_auto_sharding(b, &mesh, 1));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32), s4 = TST_SHAPE(LATHE_DTYPE_FLOAT32, 4);
  lathe_value_t x, w, y, sum, outs[2];
  CHECK_OK(lathe_parameter_sharded(fn, "x", &s0, NULL, &x));
  CHECK_OK(lathe_parameter_sharded(fn, "w", &s4, &spec, &w));
  CHECK_OK(lathe_add(fn, x, w, &y));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, y, NULL, 0, &sum));
  outs[0] = y, outs[1] = sum;
  const lathe_sharding *out_specs[2] = {&spec, NULL};
  CHECK_OK(lathe_function_return_sharded(fn, outs, out_specs, 2));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  if (!e) {
    lathe_backend_free(be);
    return;
  }
  lathe_shape shard;
  CHECK_OK(lathe_executable_input_shape_on(e, 1, 1, &shard));
  CHECK(shard.rank == 1 && shard.dims[0] == 2, "w's shard is [2]");
  float ten = 10, w0[2] = {0, 1}, w1[2] = {2, 3};
  lathe_shape s2 = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2);
  lathe_buffer_t in[4] = {on(be, 0, s0, &ten), on(be, 0, s2, w0), on(be, 1, s0, &ten), on(be, 1, s2, w1)}, out[4] = {0};
  CHECK_OK(lathe_executable_execute(e, in, NULL, 4, 0, out, 4));
  float y0[2], y1[2], t0, t1;
  CHECK_OK(lathe_buffer_to_host(out[0], y0, sizeof y0));
  CHECK_OK(lathe_buffer_to_host(out[2], y1, sizeof y1));
  CHECK_OK(lathe_buffer_to_host(out[1], &t0, sizeof t0));
  CHECK_OK(lathe_buffer_to_host(out[3], &t1, sizeof t1));
  CHECK(y0[0] == 10 && y0[1] == 11 && y1[0] == 12 && y1[1] == 13, "sharded y: [%g %g] [%g %g]", y0[0], y0[1], y1[0], y1[1]);
  CHECK(t0 == 46 && t1 == 46, "replicated sum on both devices: %g %g", t0, t1);
  int dev = -1;
  CHECK_OK(lathe_buffer_device(out[2], &dev));
  CHECK(dev == 1, "device 1's shard on device 1");
  for (int i = 0; i < 4; i++) lathe_buffer_free(in[i]), lathe_buffer_free(out[i]);
  lathe_executable_free(e);
  lathe_backend_free(be);
}

TEST(auto_sharding_2d_mesh) {
  lathe_backend_t be = backend_n(4);
  if (!be) return;
  const int sizes[] = {2, 2}, logical[] = {0, 1, 2, 3};
  const char *names[] = {"a", "b"};
  lathe_mesh mesh = {"m", 2, sizes, names, logical};
  const char *ax_a[] = {"a"}, *ax_b[] = {"b"}, *ax_ab[] = {"a", "b"};
  lathe_sharding in_spec = {.mesh = "m", .rank = 2, .axes = {ax_a, ax_b}, .n_axes = {1, 1}};
  lathe_sharding out_spec = {.mesh = "m", .rank = 1, .axes = {ax_ab}, .n_axes = {2}};
  /* x [4, 8] split 2 x 2 over (a, b); y = transpose(x) * 2 [8, 4] split 4 ways on axis 0 */
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "2d", &b));
  CHECK_OK(lathe_builder_auto_sharding(b, &mesh, 1));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_INT32, 4, 8), s0 = tst_shape0(LATHE_DTYPE_INT32);
  lathe_value_t x, t, c, y;
  int perm[2] = {1, 0}, two = 2;
  CHECK_OK(lathe_parameter_sharded(fn, "x", &xs, &in_spec, &x));
  CHECK_OK(lathe_transpose(fn, x, perm, 2, &t));
  CHECK_OK(lathe_constant(fn, &s0, &two, sizeof two, &c));
  CHECK_OK(lathe_mul(fn, t, c, &y));
  const lathe_sharding *outs[1] = {&out_spec};
  CHECK_OK(lathe_function_return_sharded(fn, &y, outs, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  if (!e) {
    lathe_backend_free(be);
    return;
  }
  int32_t whole[4][8];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 8; j++) whole[i][j] = 10 * i + j;
  lathe_buffer_t in[4], out[4] = {0};
  lathe_shape ss = TST_SHAPE(LATHE_DTYPE_INT32, 2, 4);
  for (int d = 0; d < 4; d++) { /* device d = (a, b) = (d / 2, d % 2): rows 2a.., columns 4b.. */
    int32_t part[2][4];
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 4; j++) part[i][j] = whole[2 * (d / 2) + i][4 * (d % 2) + j];
    in[d] = on(be, d, ss, part);
  }
  CHECK_OK(lathe_executable_execute(e, in, NULL, 4, 0, out, 4));
  for (int d = 0; d < 4; d++) { /* y's 8 rows, 2 per device in (a, b) order */
    lathe_shape os;
    CHECK_OK(lathe_buffer_shape(out[d], &os));
    int32_t got[2][4];
    CHECK(os.rank == 2 && os.dims[0] == 2 && os.dims[1] == 4, "shard shape [2, 4]");
    if (os.rank != 2 || os.dims[0] != 2 || os.dims[1] != 4) continue;
    CHECK_OK(lathe_buffer_to_host(out[d], got, (size_t)lathe_shape_byte_size(&os)));
    for (int i = 0; i < os.dims[0]; i++)
      for (int j = 0; j < 4; j++) {
        int row = (int)os.dims[0] * d + i;
        CHECK(got[i][j] == 2 * whole[j][row], "device %d y[%d][%d] = %d, want %d", d, row, j, got[i][j], 2 * whole[j][row]);
      }
  }
  for (int d = 0; d < 4; d++) lathe_buffer_free(in[d]), lathe_buffer_free(out[d]);
  lathe_executable_free(e);
  lathe_backend_free(be);
}

/* An axis that does not divide: 3 elements over 2 devices are tiles of 2 (as XLA's), the last
 * holding one element of padding, ignored in inputs and zero in outputs. */
TEST(auto_sharding_uneven) {
  lathe_backend_t be = backend_n(2);
  if (!be) return;
  const int sizes[] = {2}, logical[] = {0, 1};
  const char *names[] = {"s"};
  lathe_mesh mesh = {"m", 1, sizes, names, logical};
  const char *ax[] = {"s"};
  lathe_sharding spec = {.mesh = "m", .rank = 1, .axes = {ax}, .n_axes = {1}};
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "uneven", &b));
  CHECK_OK(lathe_builder_auto_sharding(b, &mesh, 1));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3);
  lathe_value_t x, y, sum, outs[2];
  CHECK_OK(lathe_parameter_sharded(fn, "x", &xs, &spec, &x));
  CHECK_OK(lathe_add(fn, x, x, &y));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, y, NULL, 0, &sum));
  outs[0] = y, outs[1] = sum;
  const lathe_sharding *out_specs[2] = {&spec, NULL};
  CHECK_OK(lathe_function_return_sharded(fn, outs, out_specs, 2));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  if (!e) {
    lathe_backend_free(be);
    return;
  }
  lathe_shape shard;
  CHECK_OK(lathe_executable_input_shape_on(e, 0, 1, &shard));
  CHECK(shard.rank == 1 && shard.dims[0] == 2, "x's shards are tiles of 2");
  float x0[2] = {1, 2}, x1[2] = {3, 100 /* padding */};
  lathe_shape s2 = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2);
  lathe_buffer_t in[2] = {on(be, 0, s2, x0), on(be, 1, s2, x1)}, out[4] = {0};
  CHECK_OK(lathe_executable_execute(e, in, NULL, 2, 0, out, 4));
  float y0[2] = {0}, y1[2] = {0}, t0 = 0, t1 = 0;
  CHECK_OK(lathe_buffer_to_host(out[0], y0, sizeof y0));
  CHECK_OK(lathe_buffer_to_host(out[2], y1, sizeof y1));
  CHECK_OK(lathe_buffer_to_host(out[1], &t0, sizeof t0));
  CHECK_OK(lathe_buffer_to_host(out[3], &t1, sizeof t1));
  CHECK(y0[0] == 2 && y0[1] == 4 && y1[0] == 6 && y1[1] == 0, "y shards: [%g %g] [%g %g]", y0[0], y0[1], y1[0], y1[1]);
  CHECK(t0 == 12 && t1 == 12, "the sum ignores the padding: %g %g", t0, t1);
  for (int i = 0; i < 2; i++) lathe_buffer_free(in[i]);
  for (int i = 0; i < 4; i++) lathe_buffer_free(out[i]);
  lathe_executable_free(e);
  lathe_backend_free(be);
}

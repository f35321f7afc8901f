/* fusion.c -- elementwise fusion against the unfused interpreter: random chains of elementwise
 * ops (scalars mixed in, intermediates returned as extra outputs so some values escape the
 * fused run, inputs donated so results land in dying operands) over tensors of several tiles,
 * run on lathe:cpu (or -b's backend) and lathe:cpu,fuse=0; the results must be bit-identical. The
 * sizes include tails of odd length and one result large enough to be stored non-temporally. */
#include "testing.h"

static uint32_t seed;
static uint32_t next(void) {
  seed ^= seed << 13, seed ^= seed >> 17, seed ^= seed << 5;
  return seed;
}

/* Builds a chain of n_ops ops over params a, b (Float32 of shape s) on backend be; returns the
 * compiled executable (outputs: the last value, then up to two intermediates). */
static lathe_executable_t build_chain(lathe_backend_t be, const lathe_shape *s, int n_ops, uint32_t chain_seed, int *n_out) {
  seed = chain_seed;
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "chain", &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_value_t vals[64], outs[3];
  int n = 0, n_o = 1;
  CHECK_OK(lathe_parameter(fn, "a", s, &vals[n++]));
  CHECK_OK(lathe_parameter(fn, "b", s, &vals[n++]));
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  float half = 0.5f;
  lathe_value_t c;
  CHECK_OK(lathe_constant(fn, &s0, &half, sizeof half, &c));
  for (int k = 0; k < n_ops; k++) {
    lathe_value_t x = vals[n - 1 - next() % (n < 3 ? n : 3)], y = vals[next() % n], r = NULL;
    switch (next() % 9) {
      case 0: CHECK_OK(lathe_add(fn, x, y, &r)); break;
      case 1: CHECK_OK(lathe_mul(fn, x, c, &r)); break;
      case 2: CHECK_OK(lathe_sub(fn, x, y, &r)); break;
      case 3: CHECK_OK(lathe_max(fn, x, y, &r)); break;
      case 4: CHECK_OK(lathe_tanh(fn, x, &r)); break;
      case 5: CHECK_OK(lathe_neg(fn, x, &r)); break;
      case 6: {
        lathe_value_t cond;
        CHECK_OK(lathe_greater_than(fn, x, y, &cond));
        CHECK_OK(lathe_where(fn, cond, x, c, &r));
        break;
      }
      case 7: {
        lathe_value_t d;
        CHECK_OK(lathe_convert_dtype(fn, x, LATHE_DTYPE_FLOAT64, &d));
        CHECK_OK(lathe_exp(fn, d, &d));
        CHECK_OK(lathe_convert_dtype(fn, d, LATHE_DTYPE_FLOAT32, &r));
        break;
      }
      default: CHECK_OK(lathe_abs(fn, x, &r)); break;
    }
    if (!r) break;
    vals[n++] = r;
    if (n_o < 3 && next() % 5 == 0) outs[n_o++] = r; /* an intermediate escapes */
  }
  outs[0] = vals[n - 1];
  if (be == tst_backend()) tst_row_graph(b); /* the row under test (-o) */
  CHECK_OK(lathe_function_return(fn, outs, n_o));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  *n_out = n_o;
  return e;
}

static void run_chain(lathe_backend_t be, lathe_executable_t e, const lathe_shape *s, const float *a, const float *b,
                      int n_out, float **got) {
  size_t nb = (size_t)lathe_shape_byte_size(s);
  lathe_buffer_t in[2], out[3] = {0};
  CHECK_OK(lathe_buffer_from_host(be, 0, s, a, nb, &in[0]));
  CHECK_OK(lathe_buffer_from_host(be, 0, s, b, nb, &in[1]));
  bool donate[2] = {true, true};
  CHECK_OK(lathe_executable_execute(e, in, donate, 2, 0, out, n_out));
  for (int k = 0; k < n_out; k++) {
    lathe_shape os;
    got[k] = NULL;
    if (!out[k] || lathe_buffer_shape(out[k], &os)) continue;
    got[k] = malloc((size_t)lathe_shape_byte_size(&os));
    CHECK_OK(lathe_buffer_to_host(out[k], got[k], (size_t)lathe_shape_byte_size(&os)));
    lathe_buffer_free(out[k]);
  }
  lathe_buffer_free(in[0]);
  lathe_buffer_free(in[1]);
}

TEST(fusion_matches_unfused) {
  /* the unfused run on the backend under test: fusion must not change a device's bits */
  lathe_backend_t unfused = tst_backend_variant("fuse=0");
  if (!unfused) SKIP("the backend under test takes no fuse=0");
  /* the last size is past the region's streaming threshold (8 MiB results: non-temporal stores) */
  const int64_t sizes[][2] = {{3, 5000}, {1, 4096}, {2, 3}, {7, 9001}, {1, 2100003}};
  for (int si = 0; si < 5; si++) {
    lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, sizes[si][0], sizes[si][1]);
    int64_t n = lathe_shape_num_elements(&s);
    float *a = malloc(sizeof(float) * (size_t)n), *b = malloc(sizeof(float) * (size_t)n);
    tst_fill(a, LATHE_DTYPE_FLOAT32, n, 1 + (unsigned)si);
    tst_fill(b, LATHE_DTYPE_FLOAT32, n, 7 + (unsigned)si);
    for (uint32_t cs = 1; cs <= 12; cs++) {
      int n_out = 0, n_out2 = 0;
      tst_row_begin();
      lathe_executable_t ef = build_chain(tst_backend(), &s, 2 + (int)cs % 9, cs * 2654435761u, &n_out);
      lathe_executable_t eu = build_chain(unfused, &s, 2 + (int)cs % 9, cs * 2654435761u, &n_out2);
      if (!ef || !eu) {
        lathe_executable_free(ef);
        lathe_executable_free(eu);
        continue;
      }
      float *gf[3], *gu[3];
      run_chain(tst_backend(), ef, &s, a, b, n_out, gf);
      run_chain(unfused, eu, &s, a, b, n_out2, gu);
      for (int k = 0; k < n_out; k++) {
        CHECK(gf[k] && gu[k] && memcmp(gf[k], gu[k], sizeof(float) * (size_t)n) == 0,
              "chain %u on %lldx%lld: output %d differs from the unfused run", cs, (long long)s.dims[0],
              (long long)s.dims[1], k);
        free(gf[k]);
        free(gu[k]);
      }
      lathe_executable_free(ef);
      lathe_executable_free(eu);
    }
    free(a);
    free(b);
  }
}

TEST(fusion_option) {
  lathe_backend_t be = NULL;
  CHECK_OK(lathe_backend_new("lathe:cpu,threads=2,fuse=0", &be));
  if (be) CHECK(strcmp(lathe_backend_config(be), "lathe:cpu,threads=2,fuse=0") == 0, "config %s", lathe_backend_config(be));
  lathe_backend_free(be);
  CHECK_ERR(lathe_backend_new("lathe:cpu,fuse=2", &be), INVALID_ARGUMENT, "fuse=0|1");
}

/* ---- structured graphs: broadcasts into regions, reductions with prologues and epilogues ---- */

static lathe_value_t bcast_rows(lathe_function_t fn, lathe_value_t v, const lathe_shape *to) {
  int axis = 0;
  lathe_value_t out = NULL;
  CHECK_OK(lathe_broadcast_in_dim(fn, v, to, &axis, 1, &out));
  return out;
}

static lathe_value_t row_reduce(lathe_function_t fn, lathe_op op, lathe_value_t v) {
  int axis = 1;
  lathe_value_t out = NULL;
  CHECK_OK(lathe_reduce(fn, op, v, &axis, 1, &out));
  return out;
}

static lathe_value_t scalar_f32(lathe_function_t fn, float v) {
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  lathe_value_t out = NULL;
  CHECK_OK(lathe_constant(fn, &s0, &v, sizeof v, &out));
  return out;
}

/* Decomposed softmax, layer norm and a bias/gate block over x [B, N], g [N] and p [B, 1]; every
 * kind of region input appears: full, scalar, broadcast rows (BroadcastInDim), broadcast
 * columns (a [N] vector to [B, N]) and implicit size-1 broadcasting. */
static lathe_executable_t build_structured(lathe_backend_t be, int64_t B, int64_t N, int which) {
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "structured", &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, B, N), gs = TST_SHAPE(LATHE_DTYPE_FLOAT32, N),
              ps = TST_SHAPE(LATHE_DTYPE_FLOAT32, B, 1);
  lathe_value_t x, g, p, y = NULL, t, u, v, outs[2];
  int n_out = 1;
  CHECK_OK(lathe_parameter(fn, "x", &xs, &x));
  CHECK_OK(lathe_parameter(fn, "g", &gs, &g));
  CHECK_OK(lathe_parameter(fn, "p", &ps, &p));
  switch (which) {
    case 0: { /* softmax */
      lathe_value_t m = row_reduce(fn, LATHE_OP_REDUCE_MAX, x);
      CHECK_OK(lathe_sub(fn, x, bcast_rows(fn, m, &xs), &t));
      CHECK_OK(lathe_exp(fn, t, &u));
      lathe_value_t s = row_reduce(fn, LATHE_OP_REDUCE_SUM, u);
      CHECK_OK(lathe_div(fn, u, bcast_rows(fn, s, &xs), &y));
      break;
    }
    case 1: { /* layer norm with gamma as a column broadcast */
      float inv_n = 1.0f / (float)N;
      lathe_value_t mean, var, inv, gb;
      CHECK_OK(lathe_mul(fn, row_reduce(fn, LATHE_OP_REDUCE_SUM, x), scalar_f32(fn, inv_n), &mean));
      CHECK_OK(lathe_sub(fn, x, bcast_rows(fn, mean, &xs), &t));
      CHECK_OK(lathe_mul(fn, t, t, &u));
      CHECK_OK(lathe_mul(fn, row_reduce(fn, LATHE_OP_REDUCE_SUM, u), scalar_f32(fn, inv_n), &var));
      CHECK_OK(lathe_add(fn, var, scalar_f32(fn, 1e-5f), &v));
      CHECK_OK(lathe_rsqrt(fn, v, &inv));
      CHECK_OK(lathe_mul(fn, t, bcast_rows(fn, inv, &xs), &v));
      int ax = 1;
      CHECK_OK(lathe_broadcast_in_dim(fn, g, &xs, &ax, 1, &gb));
      CHECK_OK(lathe_mul(fn, v, gb, &y));
      outs[n_out++] = t; /* an intermediate escapes */
      break;
    }
    case 3: { /* a one-hot of "labels" (p, g rounded), read by two regions far apart: recomputed
               * for the second where it is large (lathe:cpu's remat, program.c) */
      lathe_value_t pl, gl, g1, eq, oh, m1, a, e, big, m2;
      int64_t dims[2] = {1, N};
      CHECK_OK(lathe_floor(fn, p, &pl));
      CHECK_OK(lathe_floor(fn, g, &gl));
      CHECK_OK(lathe_reshape(fn, gl, dims, 2, &g1));
      CHECK_OK(lathe_equal(fn, pl, g1, &eq));
      CHECK_OK(lathe_convert_dtype(fn, eq, LATHE_DTYPE_FLOAT32, &oh));
      CHECK_OK(lathe_mul(fn, oh, x, &m1));
      a = row_reduce(fn, LATHE_OP_REDUCE_SUM, m1);
      CHECK_OK(lathe_exp(fn, x, &e));
      CHECK_OK(lathe_mul(fn, e, e, &big));
      CHECK_OK(lathe_mul(fn, oh, big, &m2));
      CHECK_OK(lathe_add(fn, m2, bcast_rows(fn, a, &xs), &y));
      outs[n_out++] = a;
      break;
    }
    default: { /* implicit size-1 broadcasting, a gate, a reduction whose result is also used */
      lathe_value_t s, sb;
      CHECK_OK(lathe_add(fn, x, p, &t));
      CHECK_OK(lathe_logistic(fn, t, &u));
      CHECK_OK(lathe_mul(fn, u, x, &v));
      s = row_reduce(fn, LATHE_OP_REDUCE_SUM, v);
      CHECK_OK(lathe_neg(fn, s, &sb));
      CHECK_OK(lathe_add(fn, v, bcast_rows(fn, sb, &xs), &y));
      outs[n_out++] = s;
      break;
    }
  }
  outs[0] = y;
  if (be == tst_backend()) tst_row_graph(b); /* the row under test (-o) */
  CHECK_OK(lathe_function_return(fn, outs, n_out));
  lathe_executable_t e = NULL;
  lathe_status_t st = lathe_builder_compile(b, &e);
  if (lathe_status_code_of(st) == LATHE_STATUS_UNIMPLEMENTED) /* a device without one of the ops */
    tst_skipf(tst_current, "structured graph %d: %s", which, lathe_status_message(st));
  else CHECK_OK(st);
  if (lathe_status_code_of(st) == LATHE_STATUS_UNIMPLEMENTED) lathe_status_free(st);
  lathe_builder_free(b);
  return e;
}

static void run_structured(lathe_backend_t be, lathe_executable_t e, int64_t B, int64_t N, const float *x,
                           const float *g, const float *p, float **got, int64_t *sizes) {
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, B, N), gs = TST_SHAPE(LATHE_DTYPE_FLOAT32, N),
              ps = TST_SHAPE(LATHE_DTYPE_FLOAT32, B, 1);
  lathe_buffer_t in[3] = {0}, out[2] = {0};
  CHECK_OK(lathe_buffer_from_host(be, 0, &xs, x, sizeof(float) * (size_t)(B * N), &in[0]));
  CHECK_OK(lathe_buffer_from_host(be, 0, &gs, g, sizeof(float) * (size_t)N, &in[1]));
  CHECK_OK(lathe_buffer_from_host(be, 0, &ps, p, sizeof(float) * (size_t)B, &in[2]));
  int n_out = lathe_executable_num_outputs(e);
  CHECK_OK(lathe_executable_execute(e, in, NULL, 3, 0, out, n_out));
  for (int k = 0; k < n_out; k++) {
    lathe_shape os;
    got[k] = NULL;
    if (!out[k] || lathe_buffer_shape(out[k], &os)) continue;
    sizes[k] = lathe_shape_byte_size(&os);
    got[k] = malloc((size_t)sizes[k] + 1);
    CHECK_OK(lathe_buffer_to_host(out[k], got[k], (size_t)sizes[k]));
    lathe_buffer_free(out[k]);
  }
  for (int i = 0; i < 3; i++) lathe_buffer_free(in[i]);
}

TEST(fusion_regions_match_unfused) {
  /* the unfused run on the backend under test: fusion must not change a device's bits, except
   * that a device's ROWS regions (rows=0 turns them off) may order a row's sums differently */
  lathe_backend_t unfused = tst_backend_variant("fuse=0");
  if (!unfused) SKIP("the backend under test takes no fuse=0");
  lathe_backend_t norows = strncmp(lathe_backend_config(tst_backend()), "lathe:cuda", 10) == 0 ? tst_backend_variant("rows=0") : NULL;
  const int64_t sizes[][2] = {{3, 5000}, {64, 129}, {1, 1}, {5, 4097}, {0, 7}, {300, 1024}, {7, 9000}};
  for (int si = 0; si < 7; si++) {
    int64_t B = sizes[si][0], N = sizes[si][1];
    float *x = malloc(sizeof(float) * (size_t)(B * N + 1)), *g = malloc(sizeof(float) * (size_t)N),
          *p = malloc(sizeof(float) * (size_t)(B + 1));
    tst_fill(x, LATHE_DTYPE_FLOAT32, B * N, 3 + (unsigned)si);
    tst_fill(g, LATHE_DTYPE_FLOAT32, N, 5 + (unsigned)si);
    tst_fill(p, LATHE_DTYPE_FLOAT32, B, 11 + (unsigned)si);
    for (int which = 0; which < 4; which++)
      for (int v = 0; v < (norows ? 2 : 1); v++) {
        lathe_backend_t be = v ? norows : tst_backend();
        bool exact = !norows || v == 1;
        tst_row_begin();
        lathe_executable_t ef = build_structured(be, B, N, which);
        lathe_executable_t eu = build_structured(unfused, B, N, which);
        if (!ef || !eu) {
          lathe_executable_free(ef);
          lathe_executable_free(eu);
          continue;
        }
        float *gf[2] = {0}, *gu[2] = {0};
        int64_t nf[2] = {0}, nu[2] = {0};
        run_structured(be, ef, B, N, x, g, p, gf, nf);
        run_structured(unfused, eu, B, N, x, g, p, gu, nu);
        for (int k = 0; k < lathe_executable_num_outputs(ef); k++) {
          char label[128];
          snprintf(label, sizeof label, "graph %d on %lldx%lld (%s): output %d against the unfused run", which, (long long)B,
                   (long long)N, lathe_backend_config(be), k);
          bool sized = gf[k] && gu[k] && nf[k] == nu[k];
          CHECK(sized && (!exact || memcmp(gf[k], gu[k], (size_t)nf[k]) == 0), "%s: differs", label);
          /* ROWS regions order a row's sums their own way */
          if (sized && !exact) tst_expect_close(label, gf[k], gu[k], LATHE_DTYPE_FLOAT32, nf[k] / (int64_t)sizeof(float), 2e-5);
          free(gf[k]);
          free(gu[k]);
        }
        lathe_executable_free(ef);
        lathe_executable_free(eu);
      }
    free(x);
    free(g);
    free(p);
  }
}

/* ROWS regions in every float dtype, rows of 64 to 5000 (groups of 32 to 1024 threads on
 * lathe:cuda), a layer norm with a gamma broadcast, a masked softmax whose mask is broadcast
 * over heads (row offsets by axis) and a lone reduction over 1200 rows: against the unfused run
 * within the dtype's tolerance. */
/* Compiles b (freed) on be, runs it on the n_in host inputs of shapes ins, and copies every
 * output back to out[k] (malloc'd), its byte size in bytes[k]. */
static bool exec_graph(lathe_backend_t be, lathe_builder_t b, const char *what, const lathe_shape *const *ins, void *const *in,
                       int n_in, void **out, int64_t *bytes) {
  lathe_executable_t e = NULL;
  if (!b) return false;
  lathe_status_t st = lathe_builder_compile(b, &e);
  lathe_builder_free(b);
  if (st) {
    CHECK(false, "%s on %s: %s", what, lathe_backend_config(be), lathe_status_message(st));
    lathe_status_free(st);
    return false;
  }
  enum { MAX_IO = 4 };
  lathe_buffer_t bi[MAX_IO] = {0}, bo[MAX_IO] = {0};
  int n_out = lathe_executable_num_outputs(e);
  bool ok = n_in <= MAX_IO && n_out <= MAX_IO;
  for (int i = 0; ok && i < n_in; i++) {
    CHECK_OK(lathe_buffer_from_host(be, 0, ins[i], in[i], (size_t)lathe_shape_byte_size(ins[i]), &bi[i]));
    ok &= bi[i] != NULL;
  }
  if (ok) CHECK_OK(lathe_executable_execute(e, bi, NULL, n_in, 0, bo, n_out));
  for (int k = 0; k < n_out && k < MAX_IO; k++) {
    lathe_shape os;
    out[k] = NULL;
    if (!bo[k] || lathe_buffer_shape(bo[k], &os)) {
      ok = false;
      continue;
    }
    bytes[k] = lathe_shape_byte_size(&os);
    out[k] = malloc((size_t)bytes[k] + 1);
    CHECK_OK(lathe_buffer_to_host(bo[k], out[k], (size_t)bytes[k]));
    lathe_buffer_free(bo[k]);
  }
  for (int i = 0; i < n_in && i < MAX_IO; i++) lathe_buffer_free(bi[i]);
  lathe_executable_free(e);
  return ok;
}

static bool run_rows(lathe_backend_t be, lathe_dtype dt, int which, int64_t n, void *const *in, void **out, int64_t *bytes) {
  char what[64];
  snprintf(what, sizeof what, "rows graph %d %s n %lld", which, lathe_dtype_name(dt), (long long)n);
  lathe_shape s0 = which == 1 ? TST_SHAPE(dt, 2, 3, n) : which == 4 ? TST_SHAPE(dt, 2, 4, n, n) : which >= 2 ? TST_SHAPE(dt, 1200, n) : TST_SHAPE(dt, 6, n),
              s1 = which == 1 ? TST_SHAPE(dt, 2, 1, n) : which == 3 ? TST_SHAPE(LATHE_DTYPE_INT32, 1200, 1) : TST_SHAPE(dt, n);
  const lathe_shape *ins[2] = {&s0, &s1};
  /* graph 4's mask is made in the graph */
  return exec_graph(be, tst_rows_graph(be, dt, which, n), what, ins, in, which == 4 ? 1 : 2, out, bytes);
}

TEST(fusion_rows_dtypes) {
  lathe_backend_t unfused = tst_backend_variant("fuse=0");
  if (!unfused) SKIP("the backend under test takes no fuse=0");
  lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT64};
  double tols[] = {2e-5, 1e-2, 3e-2, 1e-12};
  int64_t ns[] = {64, 1000, 5000, 1001, 4099}; /* lengths off 4 too: groups of 4 shifted per row on lathe:cuda */
  for (int d = 0; d < 4; d++)
    for (int which = 0; which < 3; which++)
      for (int ni = 0; ni < 5; ni++) {
        lathe_dtype dt = dts[d];
        int64_t n = ns[ni], n0 = which == 2 ? 1200 * n : 6 * n, n1 = which == 1 ? 2 * n : n;
        if (!lathe_backend_supports_op(tst_backend(), LATHE_OP_REDUCE_SUM, dt)) continue;
        tst_row_begin();
        void *in[2] = {malloc((size_t)(n0 * 8)), malloc((size_t)(n1 * 8))}, *got[2] = {0}, *want[2] = {0};
        int64_t gb[2] = {0}, wb[2] = {0};
        tst_fill(in[0], dt, n0, 17 + (unsigned)(d * 8 + which * 3 + ni));
        tst_fill(in[1], dt, n1, 29 + (unsigned)(d * 8 + which * 3 + ni));
        if (run_rows(tst_backend(), dt, which, n, in, got, gb) && run_rows(unfused, dt, which, n, in, want, wb)) {
          char label[96];
          for (int k = 0; k < (which ? 1 : 2); k++) {
            snprintf(label, sizeof label, "rows graph %d %s n %lld output %d", which, lathe_dtype_name(dt), (long long)n, k);
            CHECK(gb[k] == wb[k], "%s: %lld bytes, want %lld", label, (long long)gb[k], (long long)wb[k]);
            if (gb[k] == wb[k]) tst_expect_close(label, got[k], want[k], dt, gb[k] * 8 / lathe_dtype_bits(dt), tols[d]);
          }
        }
        for (int k = 0; k < 2; k++) free(got[k]), free(want[k]), free(in[k]);
      }
}

/* Rows longer than lathe:cuda keeps in registers (8192; with its option rows_long=1 walked in
 * chunks, once per reduction level): a language model's softmax cross-entropy and its gradient
 * (four reductions at three levels, a one-hot of Int32 labels) over 1200 rows, in rows that end
 * inside a chunk and of lengths off 4, and the masked-softmax and lone-reduction graphs; against the
 * unfused run. */
TEST(fusion_long_rows) {
  lathe_backend_t unfused = tst_backend_variant("fuse=0");
  if (!unfused) SKIP("the backend under test takes no fuse=0");
  const struct {
    lathe_dtype dt;
    int which;
    int64_t n;
    double tol;
  } rows[] = {
      {LATHE_DTYPE_FLOAT32, 3, 8200, 2e-5}, {LATHE_DTYPE_FLOAT32, 3, 20011, 2e-5}, {LATHE_DTYPE_BFLOAT16, 3, 12000, 3e-2},
      {LATHE_DTYPE_BFLOAT16, 3, 20011, 3e-2}, {LATHE_DTYPE_FLOAT16, 3, 16387, 1e-2}, {LATHE_DTYPE_FLOAT32, 3, 16390, 2e-5},
      {LATHE_DTYPE_FLOAT32, 1, 30000, 2e-5}, {LATHE_DTYPE_FLOAT32, 1, 30001, 2e-5}, {LATHE_DTYPE_FLOAT32, 2, 9000, 2e-5},
  };
  for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
    lathe_dtype dt = rows[i].dt;
    int which = rows[i].which;
    int64_t n = rows[i].n, n0 = which == 1 ? 6 * n : 1200 * n, n1 = which == 1 ? 2 * n : which == 3 ? 1200 : n;
    if (!lathe_backend_supports_op(tst_backend(), LATHE_OP_REDUCE_SUM, dt)) continue;
    tst_row_begin();
    void *in[2] = {malloc((size_t)(n0 * 8)), malloc((size_t)(n1 * 8))}, *got[2] = {0}, *want[2] = {0};
    int64_t gb[2] = {0}, wb[2] = {0};
    tst_fill(in[0], dt, n0, 41 + (unsigned)i);
    if (which == 3)
      for (int64_t r = 0; r < n1; r++) ((int32_t *)in[1])[r] = (int32_t)((r * 7919) % n);
    else tst_fill(in[1], dt, n1, 43 + (unsigned)i);
    if (run_rows(tst_backend(), dt, which, n, in, got, gb) && run_rows(unfused, dt, which, n, in, want, wb)) {
      char label[96];
      for (int k = 0; k < (which == 3 ? 2 : 1); k++) {
        snprintf(label, sizeof label, "long rows graph %d %s n %lld output %d", which, lathe_dtype_name(dt), (long long)n, k);
        CHECK(gb[k] == wb[k], "%s: %lld bytes, want %lld", label, (long long)gb[k], (long long)wb[k]);
        if (gb[k] == wb[k]) tst_expect_close(label, got[k], want[k], dt, gb[k] * 8 / lathe_dtype_bits(dt), rows[i].tol);
      }
    }
    for (int k = 0; k < 2; k++) free(got[k]), free(want[k]), free(in[k]);
  }
}

/* GoMLX's MaskedSoftmax of scaled scores (graph 4: one ROWS region on lathe:cuda) in every float
 * dtype, rows of 64 and 1024 keys: against the unfused run, and each row sums to 1 over its
 * visible keys with zeros past them. */
TEST(fusion_masked_softmax) {
  lathe_backend_t unfused = tst_backend_variant("fuse=0");
  if (!unfused) SKIP("the backend under test takes no fuse=0");
  const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT64};
  const double tols[] = {2e-5, 1e-2, 3e-2, 1e-12};
  const int64_t ns[] = {64, 1024};
  for (int d = 0; d < 4; d++)
    for (int i = 0; i < 2; i++) {
      lathe_dtype dt = dts[d];
      int64_t n = ns[i], cnt = 8 * n * n;
      if (!lathe_backend_supports_op(tst_backend(), LATHE_OP_REDUCE_SUM, dt)) continue;
      tst_row_begin();
      void *in[2] = {malloc((size_t)(cnt * 8)), NULL}, *got[2] = {0}, *want[2] = {0};
      int64_t gb[2] = {0}, wb[2] = {0};
      tst_fill(in[0], dt, cnt, 61 + (unsigned)(d * 2 + i));
      if (run_rows(tst_backend(), dt, 4, n, in, got, gb) && run_rows(unfused, dt, 4, n, in, want, wb)) {
        char label[96];
        snprintf(label, sizeof label, "masked softmax %s n %lld", lathe_dtype_name(dt), (long long)n);
        CHECK(gb[0] == wb[0], "%s: %lld bytes, want %lld", label, (long long)gb[0], (long long)wb[0]);
        if (gb[0] == wb[0]) tst_expect_close(label, got[0], want[0], dt, cnt, tols[d]);
        int bad = 0;
        for (int64_t r = 0; r < 8 * n; r++) {
          double sum = 0, past = 0;
          for (int64_t j = 0; j < n; j++) {
            double v = tst_get(got[0], dt, r * n + j);
            if (j <= r % n) sum += v;
            else past += fabs(v);
          }
          bad += fabs(sum - 1) > 4 * tols[d] * (1 + (double)n / 64) || past != 0;
        }
        CHECK(bad == 0, "%s: %d rows do not sum to 1 over their visible keys (or are not 0 past them)", label, bad);
      }
      for (int k = 0; k < 2; k++) free(got[k]), free(want[k]), free(in[k]);
    }
}

/* Column reductions with elementwise work before them (GoMLX's bias and layer-norm gradients),
 * which lathe:cuda runs as one kernel computing the work where it reads the operand: over
 * x [4, 96, c] and y [4, 96, c] (Float32), a column vector g [c] and a row vector w [4, 96, 1],
 *   out0 = ReduceSum(Convert(x, Float32) * y, {0, 1})           (a layer norm's gamma gradient)
 *   s    = x + x * g;  out1 = ReduceSum(s, {0, 1})               (s escapes: read after)
 *   out2 = ReduceMax(x * w - 0.5, {0, 1})
 * in every float dtype, c a multiple of 4 (the fused form) or not; against the unfused run. */
static bool run_colred(lathe_backend_t be, lathe_dtype dt, int64_t c, void *const *in, void **out, int64_t *bytes) {
  char what[64];
  snprintf(what, sizeof what, "column reductions %s c %lld", lathe_dtype_name(dt), (long long)c);
  lathe_shape sx = TST_SHAPE(dt, 4, 96, c), sy = TST_SHAPE(LATHE_DTYPE_FLOAT32, 4, 96, c), sg = TST_SHAPE(dt, c),
              sw = TST_SHAPE(dt, 4, 96, 1);
  const lathe_shape *ins[4] = {&sx, &sy, &sg, &sw};
  return exec_graph(be, tst_colred_graph(be, dt, c), what, ins, in, 4, out, bytes);
}

TEST(fusion_column_reductions) {
  lathe_backend_t unfused = tst_backend_variant("fuse=0");
  if (!unfused) SKIP("the backend under test takes no fuse=0");
  const lathe_dtype dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_FLOAT64};
  const double tols[] = {2e-5, 3e-2, 1e-2, 1e-12};
  const int64_t cs[] = {768, 100, 66};
  for (int d = 0; d < 4; d++)
    for (int ci = 0; ci < 3; ci++) {
      lathe_dtype dt = dts[d];
      int64_t c = cs[ci], n = 4 * 96 * c;
      if (!lathe_backend_supports_op(tst_backend(), LATHE_OP_REDUCE_SUM, dt)) continue;
      tst_row_begin();
      int64_t counts[4] = {n, n, c, 4 * 96};
      lathe_dtype idt[4] = {dt, LATHE_DTYPE_FLOAT32, dt, dt};
      void *in[4], *got[4] = {0}, *want[4] = {0};
      int64_t gb[4] = {0}, wb[4] = {0};
      for (int i = 0; i < 4; i++) {
        in[i] = malloc((size_t)(counts[i] * 8));
        tst_fill(in[i], idt[i], counts[i], 71 + (unsigned)(d * 16 + ci * 4 + i));
      }
      if (run_colred(tst_backend(), dt, c, in, got, gb) && run_colred(unfused, dt, c, in, want, wb)) {
        lathe_dtype odt[4] = {LATHE_DTYPE_FLOAT32, dt, dt, dt};
        for (int k = 0; k < 4; k++) {
          char label[96];
          snprintf(label, sizeof label, "column reductions %s c %lld output %d", lathe_dtype_name(dt), (long long)c, k);
          CHECK(gb[k] == wb[k], "%s: %lld bytes, want %lld", label, (long long)gb[k], (long long)wb[k]);
          /* the sums of 384 rows reassociate: their tolerance grows with the halves' rounding */
          if (gb[k] == wb[k])
            tst_expect_close(label, got[k], want[k], odt[k], gb[k] * 8 / lathe_dtype_bits(odt[k]), k == 2 || k == 3 ? tols[d] : 4 * tols[d]);
        }
      }
      for (int k = 0; k < 4; k++) free(got[k]), free(want[k]), free(in[k]);
    }
}

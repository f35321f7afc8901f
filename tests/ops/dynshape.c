/* dynshape.c -- dynamic axes: one compiled executable run with different sizes (one
 * specialisation per binding), DynamicShape, DynamicDimensionSize and DynamicReshape. */
#include "runtime/runtime.h"
#include "testing.h"

static lathe_shape dyn2(lathe_dtype dt, const char *a, const char *b) {
  lathe_shape s = TST_SHAPE(dt, -1, -1);
  s.axis_names[0] = a;
  s.axis_names[1] = b;
  return s;
}

/* Runs x on one Int32 input of dims (r, c) holding 0..r*c-1; outs gets its output buffers. */
static lathe_status_t run_rc(tst_exec *x, int64_t r, int64_t c, int n_out, lathe_buffer_t *outs) {
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_INT32, r, c);
  int32_t *d = malloc(sizeof(int32_t) * (size_t)(r * c + 1));
  for (int64_t i = 0; i < r * c; i++) d[i] = (int32_t)i;
  const void *in[1] = {d};
  lathe_status_t st = tst_exec_run(x, &s, in, 1, outs, n_out);
  free(d);
  return st;
}

/* The graph both dynamic-axes tests run: main(x[batch, seq]) = (DynamicShape(x),
 * DimensionSize(x, 1), ReduceSum(x * 2, axis 1), DynamicReshape(x, {flat})), the flat axis
 * sized by a value (batch*seq) or inferred from the element count. NULL if it did not build. */
static tst_exec *build_dyn(const char *name, bool value_sized) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder(name, &fn);
  if (!b) return NULL;
  lathe_shape ps = dyn2(LATHE_DTYPE_INT32, "batch", "seq");
  lathe_value_t x = tst_param(fn, "x", ps), shp, seq, batch, two, twice, sum, tokens = NULL, flat;
  CHECK_OK(lathe_dynamic_shape(fn, x, &shp));
  CHECK_OK(lathe_dynamic_dimension_size(fn, x, 1, &seq));
  CHECK_OK(lathe_dynamic_dimension_size(fn, x, 0, &batch));
  int32_t two_v = 2;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_INT32);
  CHECK_OK(lathe_constant(fn, &s0, &two_v, sizeof two_v, &two));
  CHECK_OK(lathe_mul(fn, x, two, &twice));
  int axis = 1;
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, twice, &axis, 1, &sum));
  lathe_shape sum_shape;
  CHECK_OK(lathe_value_shape(sum, &sum_shape));
  CHECK(sum_shape.rank == 1 && sum_shape.dims[0] == -1 && sum_shape.axis_names[0] && strcmp(sum_shape.axis_names[0], "batch") == 0,
        "ReduceSum keeps the dynamic axis and its name");
  if (value_sized) CHECK_OK(lathe_mul(fn, batch, seq, &tokens));
  lathe_dim_spec spec = {0, value_sized ? "num_tokens" : "tokens", tokens};
  CHECK_OK(lathe_dynamic_reshape(fn, x, &spec, 1, &flat));
  lathe_value_t outs[4] = {shp, seq, sum, flat};
  CHECK_OK(lathe_function_return(fn, outs, 4));
  tst_exec *ex = NULL;
  CHECK_OK(tst_compile(b, &ex));
  lathe_builder_free(b);
  return ex;
}

/* main(x[batch, seq]) with the flattened axis sized by a value, run at five sizes. */
/* Whether e's device runs programs with their dynamic axes (mlx:dynamic): then it has no
 * specialisations to count. */
static bool native_dynamic(lathe_executable_t e) { return e && (e->backend->caps & LATHE_DEVCAP_DYNAMIC_AXES); }

TEST(dynamic_axes_specialisations) {
  tst_exec *x = build_dyn("dyn", true);
  if (!x) return;
  const int64_t sizes[][2] = {{2, 3}, {4, 1}, {2, 3}, {0, 5}, {3, 7}};
  for (int k = 0; k < 5; k++) {
    int64_t r = sizes[k][0], c = sizes[k][1];
    lathe_buffer_t o[4] = {0};
    lathe_status_t st = run_rc(x, r, c, 4, o);
    CHECK(st == NULL, "run %lldx%lld: %s", (long long)r, (long long)c, lathe_status_message(st));
    lathe_status_free(st);
    if (!o[0]) continue;
    int64_t dims[2], sq; /* sizes are Int64 */
    int32_t sums[8], flatv[32];
    lathe_shape ds, qs;
    CHECK_OK(lathe_buffer_shape(o[0], &ds));
    CHECK_OK(lathe_buffer_shape(o[1], &qs));
    CHECK(ds.dtype == LATHE_DTYPE_INT64 && ds.rank == 1 && ds.dims[0] == 2 && qs.dtype == LATHE_DTYPE_INT64 && qs.rank == 0,
          "DynamicShape Int64[2] and DynamicDimensionSize Int64: got %s[%lld], %s", lathe_dtype_name(ds.dtype),
          (long long)ds.dims[0], lathe_dtype_name(qs.dtype));
    CHECK_OK(lathe_buffer_to_host(o[0], dims, sizeof dims));
    CHECK(dims[0] == r && dims[1] == c, "DynamicShape %lldx%lld: got %lld,%lld", (long long)r, (long long)c, (long long)dims[0],
          (long long)dims[1]);
    CHECK_OK(lathe_buffer_to_host(o[1], &sq, sizeof sq));
    CHECK(sq == c, "DynamicDimensionSize: got %lld want %lld", (long long)sq, (long long)c);
    CHECK_OK(lathe_buffer_to_host(o[2], sums, sizeof(int32_t) * (size_t)r));
    for (int64_t i = 0; i < r; i++) {
      int32_t want = 0;
      for (int64_t j = 0; j < c; j++) want += 2 * (int32_t)(i * c + j);
      CHECK(sums[i] == want, "row sum %lld: got %d want %d", (long long)i, sums[i], want);
    }
    lathe_shape fs;
    CHECK_OK(lathe_buffer_shape(o[3], &fs));
    CHECK(fs.rank == 1 && fs.dims[0] == r * c, "DynamicReshape result has %lld elements", (long long)fs.dims[0]);
    CHECK_OK(lathe_buffer_to_host(o[3], flatv, sizeof(int32_t) * (size_t)(r * c)));
    for (int64_t i = 0; i < r * c; i++) CHECK(flatv[i] == i, "flat %lld", (long long)i);
    for (int i = 0; i < 4; i++) lathe_buffer_free(o[i]);
  }
  lathe_executable_t e = tst_exec_executable(x);
  if (native_dynamic(e)) tst_skipf(tst_current, "the device keeps dynamic axes: one plan serves every binding");
  else CHECK(e && e->n_specs == 4, "one specialisation per distinct binding: %d", e ? e->n_specs : 0);
  tst_exec_free(x);
}

/* Many threads run one dynamic-axes executable at different sizes at once: specialisations are
 * made and shared under the executable's lock, and every result is right. */
#include <pthread.h>

typedef struct {
  tst_exec *x;
  int id, bad;
} dyn_worker;

static void *dyn_worker_run(void *arg) {
  dyn_worker *w = arg;
  for (int it = 0; it < 40; it++) {
    int64_t r = 1 + (w->id + it) % 5, c = 1 + (w->id * 3 + it) % 4;
    lathe_buffer_t o[4] = {0};
    lathe_status_t st = run_rc(w->x, r, c, 4, o);
    if (st) {
      w->bad++;
      lathe_status_free(st);
      continue;
    }
    int32_t sums[8];
    if (lathe_buffer_to_host(o[2], sums, sizeof(int32_t) * (size_t)r)) w->bad++;
    for (int64_t i = 0; i < r; i++) {
      int32_t want = 0;
      for (int64_t j = 0; j < c; j++) want += 2 * (int32_t)(i * c + j);
      w->bad += sums[i] != want;
    }
    for (int i = 0; i < 4; i++) lathe_buffer_free(o[i]);
  }
  return NULL;
}

TEST(dynamic_axes_concurrent_specialisations) {
  tst_exec *x = build_dyn("dyn_mt", false);
  if (!x) return;
  enum { T = 8 };
  pthread_t th[T];
  dyn_worker w[T];
  for (int i = 0; i < T; i++) {
    w[i] = (dyn_worker){x, i, 0};
    pthread_create(&th[i], NULL, dyn_worker_run, &w[i]);
  }
  int bad = 0;
  for (int i = 0; i < T; i++) pthread_join(th[i], NULL), bad += w[i].bad;
  CHECK(bad == 0, "%d wrong or failed runs across %d threads", bad, T);
  lathe_executable_t e = tst_exec_executable(x);
  if (native_dynamic(e)) tst_skipf(tst_current, "the device keeps dynamic axes: one plan serves every binding");
  else CHECK(e && e->n_specs == 20, "one specialisation per binding (5 x 4 sizes): %d", e ? e->n_specs : 0);
  tst_exec_free(x);
}

/* ---- sizes given by graph values: DynamicBroadcastInDim, DynamicIota, DynamicPad, and
 * DynamicReshape's value form. Values folded from DynamicDimensionSize arithmetic (no run waits on
 * the device), from constants (resolved at compile), or read back from tensor contents (one
 * compile per distinct value). */

static lathe_value_t i32c(lathe_function_t fn, int32_t v) {
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_INT32);
  lathe_value_t c = NULL;
  CHECK_OK(lathe_constant(fn, &s0, &v, sizeof v, &c));
  return c;
}

/* Sizes from DynamicDimensionSize are Int64: arithmetic on them takes Int64 constants. */
static lathe_value_t i64c(lathe_function_t fn, int64_t v) {
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_INT64);
  lathe_value_t c = NULL;
  CHECK_OK(lathe_constant(fn, &s0, &v, sizeof v, &c));
  return c;
}

static void stats_of(tst_exec *x, lathe_executable_stats *st) {
  memset(st, 0, sizeof *st);
  lathe_executable_t e = tst_exec_executable(x);
  if (e) CHECK_OK(lathe_executable_get_stats(e, st));
}

/* main(x[batch, seq] Int32) = (DynamicBroadcastInDim(c[1, 3] -> [batch from DimensionSize, 3]),
 * DynamicIota(Int32, axis 1, [2*batch+1, seq]), DynamicPad(x, -7, start seq, end 1; interior 1 on
 * axis 1), DynamicReshape(x, [batch*seq])): every size folds from the binding. */
TEST(dynamic_size_values_folded) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dyn_sizes_folded", &fn);
  if (!b) return;
  lathe_value_t x = tst_param(fn, "x", dyn2(LATHE_DTYPE_INT32, "batch", "seq")), batch, seq, bc, io, pd, rs, t, n2;
  CHECK_OK(lathe_dynamic_dimension_size(fn, x, 0, &batch));
  CHECK_OK(lathe_dynamic_dimension_size(fn, x, 1, &seq));
  int32_t cv[3] = {10, 20, 30};
  lathe_shape cs = TST_SHAPE(LATHE_DTYPE_INT32, 1, 3);
  lathe_value_t c;
  CHECK_OK(lathe_constant(fn, &cs, cv, sizeof cv, &c));
  lathe_dim_spec bdims[2] = {{0, "batch", batch}, {3, NULL, NULL}};
  CHECK_OK(lathe_dynamic_broadcast_in_dim(fn, c, (const int[]){0, 1}, 2, bdims, 2, &bc));
  CHECK_OK(lathe_mul(fn, batch, i64c(fn, 2), &t));
  CHECK_OK(lathe_add(fn, t, i64c(fn, 1), &n2));
  lathe_dim_spec idims[2] = {{0, "?", n2}, {0, "seq", NULL}};
  CHECK_OK(lathe_dynamic_iota(fn, LATHE_DTYPE_INT32, 1, idims, 2, &io));
  lathe_dynamic_pad_axis pa[2] = {{0, 1, 0, NULL, NULL, NULL, NULL}, {0, 0, 1, seq, NULL, NULL, "padded"}};
  CHECK_OK(lathe_dynamic_pad(fn, x, i32c(fn, -7), pa, 2, &pd));
  lathe_value_t tok;
  CHECK_OK(lathe_mul(fn, batch, seq, &tok));
  lathe_dim_spec rdims[1] = {{0, "tokens", tok}};
  CHECK_OK(lathe_dynamic_reshape(fn, x, rdims, 1, &rs));
  lathe_shape ios;
  CHECK_OK(lathe_value_shape(io, &ios));
  CHECK(ios.dims[0] == -1 && ios.axis_names[0] && ios.axis_names[0][0] == '?', "an anonymous value-sized axis gets a name of its own");
  lathe_value_t outs[4] = {bc, io, pd, rs};
  CHECK_OK(lathe_function_return(fn, outs, 4));
  tst_exec *ex = NULL;
  CHECK_OK(tst_compile(b, &ex));
  lathe_builder_free(b);
  if (!ex) return;
  const int64_t sizes[][2] = {{2, 3}, {0, 2}, {3, 0}, {2, 3}, {1, 1}};
  for (int k = 0; k < 5; k++) {
    int64_t r = sizes[k][0], cc = sizes[k][1];
    lathe_buffer_t o[4] = {0};
    lathe_status_t st = run_rc(ex, r, cc, 4, o);
    CHECK(st == NULL, "run %lldx%lld: %s", (long long)r, (long long)cc, lathe_status_message(st));
    lathe_status_free(st);
    if (!o[0]) continue;
    lathe_shape s[4];
    for (int i = 0; i < 4; i++) CHECK_OK(lathe_buffer_shape(o[i], &s[i]));
    int32_t buf[256];
    /* broadcast [r, 3] */
    CHECK(s[0].rank == 2 && s[0].dims[0] == r && s[0].dims[1] == 3, "DynamicBroadcastInDim shape %lld,%lld", (long long)s[0].dims[0], (long long)s[0].dims[1]);
    CHECK_OK(lathe_buffer_to_host(o[0], buf, sizeof(int32_t) * (size_t)(r * 3)));
    for (int64_t i = 0; i < r * 3; i++) CHECK(buf[i] == cv[i % 3], "DynamicBroadcastInDim [%lld] = %d", (long long)i, buf[i]);
    /* iota [2r+1, c] along axis 1 */
    CHECK(s[1].dims[0] == 2 * r + 1 && s[1].dims[1] == cc, "DynamicIota shape %lld,%lld", (long long)s[1].dims[0], (long long)s[1].dims[1]);
    CHECK_OK(lathe_buffer_to_host(o[1], buf, sizeof(int32_t) * (size_t)((2 * r + 1) * cc)));
    for (int64_t i = 0; i < (2 * r + 1) * cc; i++) CHECK(buf[i] == i % cc, "DynamicIota [%lld] = %d", (long long)i, buf[i]);
    /* pad: axis 0 [0, 1], axis 1 start c, interior 1: [r+1, c + max(2c-1, 0)] */
    int64_t pr = r + 1, pc = cc + (cc ? 2 * cc - 1 : 0);
    CHECK(s[2].dims[0] == pr && s[2].dims[1] == pc, "DynamicPad shape %lld,%lld want %lld,%lld", (long long)s[2].dims[0],
          (long long)s[2].dims[1], (long long)pr, (long long)pc);
    CHECK_OK(lathe_buffer_to_host(o[2], buf, sizeof(int32_t) * (size_t)(pr * pc)));
    for (int64_t i = 0; i < pr; i++)
      for (int64_t j = 0; j < pc; j++) {
        int32_t want = -7;
        int64_t q = j - cc;
        if (i < r && q >= 0 && q % 2 == 0) want = (int32_t)(i * cc + q / 2);
        CHECK(buf[i * pc + j] == want, "DynamicPad [%lld,%lld] = %d want %d", (long long)i, (long long)j, buf[i * pc + j], want);
      }
    CHECK(s[3].rank == 1 && s[3].dims[0] == r * cc, "DynamicReshape %lld", (long long)s[3].dims[0]);
    for (int i = 0; i < 4; i++) lathe_buffer_free(o[i]);
  }
  lathe_executable_stats stt;
  stats_of(ex, &stt);
  if (tst_exec_executable(ex))
    CHECK(stt.compiles == 4 && stt.hits == 1, "folded sizes: one compile per binding, no first runs: %lld compiles, %lld hits",
          (long long)stt.compiles, (long long)stt.hits);
  tst_exec_free(ex);
}

/* A static program whose sizes come from constants: resolved once at compile. */
TEST(dynamic_size_values_from_constants) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dyn_sizes_const", &fn);
  if (!b) return;
  lathe_value_t x = tst_param(fn, "x", TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 2)), y;
  lathe_dim_spec d[2] = {{0, "batch", i32c(fn, 3)}, {2, NULL, NULL}};
  CHECK_OK(lathe_dynamic_broadcast_in_dim(fn, x, (const int[]){0, 1}, 2, d, 2, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  tst_exec *ex = NULL;
  CHECK_OK(tst_compile(b, &ex));
  lathe_builder_free(b);
  if (!ex) return;
  float in[2] = {7, 8};
  const void *ins[1] = {in};
  for (int k = 0; k < 3; k++) {
    lathe_buffer_t o = NULL;
    CHECK_OK(tst_exec_run(ex, NULL, ins, 1, &o, 1));
    float got[6] = {0};
    if (o) CHECK_OK(lathe_buffer_to_host(o, got, sizeof got));
    for (int i = 0; i < 6; i++) CHECK(got[i] == in[i % 2], "broadcast [%d] = %g", i, got[i]);
    lathe_buffer_free(o);
  }
  lathe_executable_stats stt;
  stats_of(ex, &stt);
  if (tst_exec_executable(ex)) CHECK(stt.compiles == 1 && stt.hits == 0, "one compile: %lld, %lld hits", (long long)stt.compiles, (long long)stt.hits);
  tst_exec_free(ex);
}

/* main(n Int32, s Int32) = (DynamicIota(Int32, 0, [n]), DynamicPad(Float32[2] {1, 2}, 0, start s)):
 * sizes from tensor contents. The program that computes them compiles once; the rest once per
 * distinct (n, s), then hits the cache. */
TEST(dynamic_size_values_from_contents) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dyn_sizes_contents", &fn);
  if (!b) return;
  lathe_value_t n = tst_param(fn, "n", tst_shape0(LATHE_DTYPE_INT32)), s = tst_param(fn, "s", tst_shape0(LATHE_DTYPE_INT32)), io, pd;
  lathe_dim_spec d[1] = {{0, "n", n}};
  CHECK_OK(lathe_dynamic_iota(fn, LATHE_DTYPE_INT32, 0, d, 1, &io));
  float xv[2] = {1, 2}, zero = 0;
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2), s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  lathe_value_t xc, fill;
  CHECK_OK(lathe_constant(fn, &xs, xv, sizeof xv, &xc));
  CHECK_OK(lathe_constant(fn, &s0, &zero, sizeof zero, &fill));
  lathe_dynamic_pad_axis pa = {0, 0, 0, s, NULL, NULL, NULL};
  CHECK_OK(lathe_dynamic_pad(fn, xc, fill, &pa, 1, &pd));
  lathe_value_t outs[2] = {io, pd};
  CHECK_OK(lathe_function_return(fn, outs, 2));
  tst_exec *ex = NULL;
  CHECK_OK(tst_compile(b, &ex));
  lathe_builder_free(b);
  if (!ex) return;
  const int32_t runs[][2] = {{3, 1}, {5, 0}, {3, 1}, {0, 2}, {5, 0}, {3, 1}};
  for (int k = 0; k < 6; k++) {
    const void *ins[2] = {&runs[k][0], &runs[k][1]};
    lathe_buffer_t o[2] = {0};
    CHECK_OK(tst_exec_run(ex, NULL, ins, 2, o, 2));
    if (!o[0]) continue;
    lathe_shape s1, s2;
    CHECK_OK(lathe_buffer_shape(o[0], &s1));
    CHECK_OK(lathe_buffer_shape(o[1], &s2));
    CHECK(s1.dims[0] == runs[k][0] && s2.dims[0] == 2 + runs[k][1], "shapes %lld, %lld", (long long)s1.dims[0], (long long)s2.dims[0]);
    int32_t iv[8] = {0};
    float pv[8] = {0};
    CHECK_OK(lathe_buffer_to_host(o[0], iv, sizeof(int32_t) * (size_t)runs[k][0]));
    CHECK_OK(lathe_buffer_to_host(o[1], pv, sizeof(float) * (size_t)(2 + runs[k][1])));
    for (int i = 0; i < runs[k][0]; i++) CHECK(iv[i] == i, "iota [%d] = %d", i, iv[i]);
    for (int i = 0; i < 2 + runs[k][1]; i++) CHECK(pv[i] == (i < runs[k][1] ? 0 : xv[i - runs[k][1]]), "pad [%d] = %g", i, pv[i]);
    for (int i = 0; i < 2; i++) lathe_buffer_free(o[i]);
  }
  lathe_executable_stats stt;
  stats_of(ex, &stt);
  /* 1 first-run program + 3 distinct (n, s); each of the 6 runs looks up the first run, the 3
   * repeats find their program too */
  if (tst_exec_executable(ex))
    CHECK(stt.compiles == 4 && stt.hits == 5 + 3, "recompiles once per distinct value: %lld compiles, %lld hits",
          (long long)stt.compiles, (long long)stt.hits);
  tst_exec_free(ex);
}

/* Every dtype the ops allow: DynamicBroadcastInDim and DynamicPad of any dtype, DynamicIota of
 * every numeric one, sized by DimensionSize of x[batch]. */
TEST(dynamic_size_values_dtypes) {
  for (int di = 0; di < tst_n_all_dtypes; di++) {
    lathe_dtype dt = tst_all_dtypes[di];
    if (!lathe_backend_supports_op(tst_backend(), LATHE_OP_DYNAMIC_BROADCAST_IN_DIM, dt) ||
        !lathe_backend_supports_op(tst_backend(), LATHE_OP_DYNAMIC_PAD, dt))
      continue;
    lathe_function_t fn;
    lathe_builder_t b = tst_builder("dyn_sizes_dtype", &fn);
    if (!b) return;
    lathe_shape ps = TST_SHAPE(dt, -1);
    ps.axis_names[0] = "batch";
    lathe_value_t x = tst_param(fn, "x", ps), batch, bc, pd, io = NULL, one, fill;
    CHECK_OK(lathe_dynamic_dimension_size(fn, x, 0, &batch));
    CHECK_OK(lathe_add(fn, batch, i64c(fn, 1), &one));
    lathe_shape s0 = tst_shape0(dt);
    void *fv = tst_alloc_for(&s0);
    tst_set(fv, dt, 0, 1);
    double fill_v = tst_get(fv, dt, 0); /* 1, or what it wraps to */
    CHECK_OK(lathe_constant(fn, &s0, fv, (size_t)lathe_shape_byte_size(&s0), &fill));
    free(fv);
    lathe_dim_spec bd[2] = {{0, "b1", one}, {0, "batch", NULL}};
    CHECK_OK(lathe_dynamic_broadcast_in_dim(fn, x, (const int[]){1}, 1, bd, 2, &bc));
    lathe_dynamic_pad_axis pa = {1, 0, 0, NULL, batch, NULL, "p"};
    CHECK_OK(lathe_dynamic_pad(fn, x, fill, &pa, 1, &pd));
    bool numeric = dt != LATHE_DTYPE_BOOL && lathe_backend_supports_op(tst_backend(), LATHE_OP_DYNAMIC_IOTA, dt);
    lathe_dim_spec id[1] = {{0, "b1", one}};
    if (numeric) CHECK_OK(lathe_dynamic_iota(fn, dt, 0, id, 1, &io));
    lathe_value_t outs[3] = {bc, pd, io};
    CHECK_OK(lathe_function_return(fn, outs, numeric ? 3 : 2));
    tst_exec *ex = NULL;
    CHECK_OK(tst_compile(b, &ex));
    lathe_builder_free(b);
    if (!ex) continue;
    for (int64_t r = 0; r <= 3; r += 3) {
      lathe_shape xs = TST_SHAPE(dt, r);
      void *xd = tst_alloc_for(&xs);
      tst_fill(xd, dt, r, 7);
      const void *ins[1] = {xd};
      lathe_buffer_t o[3] = {0};
      lathe_status_t st = tst_exec_run(ex, &xs, ins, 1, o, numeric ? 3 : 2);
      CHECK(!st, "%s r=%lld: %s", lathe_dtype_name(dt), (long long)r, lathe_status_message(st));
      lathe_status_free(st);
      if (o[0]) {
        lathe_shape s[3];
        CHECK_OK(lathe_buffer_shape(o[0], &s[0]));
        CHECK_OK(lathe_buffer_shape(o[1], &s[1]));
        CHECK(s[0].dims[0] == r + 1 && s[0].dims[1] == r && s[1].dims[0] == 2 * r + 1, "%s shapes", lathe_dtype_name(dt));
        void *g0 = tst_alloc_for(&s[0]), *g1 = tst_alloc_for(&s[1]);
        CHECK_OK(lathe_buffer_to_host(o[0], g0, (size_t)lathe_shape_byte_size(&s[0])));
        CHECK_OK(lathe_buffer_to_host(o[1], g1, (size_t)lathe_shape_byte_size(&s[1])));
        for (int64_t i = 0; i < (r + 1) * r; i++)
          CHECK(tst_get(g0, dt, i) == tst_get(xd, dt, i % r), "%s broadcast [%lld]", lathe_dtype_name(dt), (long long)i);
        /* pad: start 1 (fill), then x, then r fills */
        for (int64_t i = 0; i < 2 * r + 1; i++) {
          bool is_x = i >= 1 && i <= r;
          if (is_x) CHECK(tst_get(g1, dt, i) == tst_get(xd, dt, i - 1), "%s pad [%lld]", lathe_dtype_name(dt), (long long)i);
          else CHECK(tst_get(g1, dt, i) == fill_v, "%s pad fill [%lld] = %g", lathe_dtype_name(dt), (long long)i, tst_get(g1, dt, i));
        }
        if (numeric && o[2]) {
          CHECK_OK(lathe_buffer_shape(o[2], &s[2]));
          void *g2 = tst_alloc_for(&s[2]);
          CHECK_OK(lathe_buffer_to_host(o[2], g2, (size_t)lathe_shape_byte_size(&s[2])));
          for (int64_t i = 0; i < r + 1; i++) CHECK(tst_get(g2, dt, i) == (lathe_dtype_is_int(dt) ? tst_wrap_value(dt, (uint64_t)i) : (double)i), "%s iota [%lld]", lathe_dtype_name(dt), (long long)i);
          free(g2);
        }
        free(g0);
        free(g1);
      }
      for (int i = 0; i < 3; i++) lathe_buffer_free(o[i]);
      free(xd);
    }
    tst_exec_free(ex);
  }
}

/* Sizes waiting on sizes: main(n) = (DynamicIota([ReduceSum(iota(n))]), DynamicBroadcastInDim(7 ->
 * [2 * DimensionSize(iota(n))])). The reduction needs iota(n)'s size first (a first run reads
 * n), then a second run computes the sum; the doubled size folds once n is known. */
TEST(dynamic_size_values_rounds) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dyn_sizes_rounds", &fn);
  if (!b) return;
  lathe_value_t n = tst_param(fn, "n", tst_shape0(LATHE_DTYPE_INT32)), io, sum, io2, len, twice, bc;
  lathe_dim_spec d[1] = {{0, "n", n}};
  CHECK_OK(lathe_dynamic_iota(fn, LATHE_DTYPE_INT32, 0, d, 1, &io));
  int axis = 0;
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, io, &axis, 1, &sum));
  lathe_dim_spec d2[1] = {{0, NULL, sum}};
  CHECK_OK(lathe_dynamic_iota(fn, LATHE_DTYPE_INT32, 0, d2, 1, &io2));
  CHECK_OK(lathe_dynamic_dimension_size(fn, io, 0, &len));
  CHECK_OK(lathe_mul(fn, len, i64c(fn, 2), &twice));
  lathe_dim_spec d3[1] = {{0, "twice", twice}};
  CHECK_OK(lathe_dynamic_broadcast_in_dim(fn, i32c(fn, 7), NULL, 0, d3, 1, &bc));
  lathe_value_t outs[2] = {io2, bc};
  CHECK_OK(lathe_function_return(fn, outs, 2));
  tst_exec *ex = NULL;
  CHECK_OK(tst_compile(b, &ex));
  lathe_builder_free(b);
  if (!ex) return;
  const int32_t ns[] = {4, 0, 4, 6};
  for (int k = 0; k < 4; k++) {
    const void *ins[1] = {&ns[k]};
    lathe_buffer_t o[2] = {0};
    CHECK_OK(tst_exec_run(ex, NULL, ins, 1, o, 2));
    if (!o[0]) continue;
    lathe_shape s1, s2;
    CHECK_OK(lathe_buffer_shape(o[0], &s1));
    CHECK_OK(lathe_buffer_shape(o[1], &s2));
    int64_t want = (int64_t)ns[k] * (ns[k] - 1) / 2;
    CHECK(s1.dims[0] == want && s2.dims[0] == 2 * ns[k], "n=%d: sizes %lld, %lld", ns[k], (long long)s1.dims[0], (long long)s2.dims[0]);
    int32_t v[32] = {0};
    CHECK_OK(lathe_buffer_to_host(o[0], v, sizeof(int32_t) * (size_t)want));
    for (int64_t i = 0; i < want; i++) CHECK(v[i] == i, "iota [%lld] = %d", (long long)i, v[i]);
    CHECK_OK(lathe_buffer_to_host(o[1], v, sizeof(int32_t) * (size_t)(2 * ns[k])));
    for (int i = 0; i < 2 * ns[k]; i++) CHECK(v[i] == 7, "broadcast [%d] = %d", i, v[i]);
    for (int i = 0; i < 2; i++) lathe_buffer_free(o[i]);
  }
  lathe_executable_stats stt;
  stats_of(ex, &stt);
  /* the first run (reads n); per distinct n (4, 0, 6) a second run (the sum) and the program */
  if (tst_exec_executable(ex))
    CHECK(stt.compiles == 1 + 2 * 3, "%lld compiles, %lld hits", (long long)stt.compiles, (long long)stt.hits);
  tst_exec_free(ex);
}

/* Where broadcasting against dynamic axes: a static 1 broadcasts along a dynamic axis (sized at
 * specialisation, or at run time on mlx:dynamic). main(x[batch, 5], keep[1, 5], pick[batch, 1],
 * y[1, 5]) = (Where(keep, x, -1), Where(pick, y, x)), run at three batch sizes. */
TEST(dynamic_where_broadcast) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dyn_where", &fn);
  if (!b) return;
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, -1, 5), ps = TST_SHAPE(LATHE_DTYPE_BOOL, -1, 1);
  xs.axis_names[0] = ps.axis_names[0] = "batch";
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  lathe_value_t x = tst_param(fn, "x", xs), keep = tst_param(fn, "keep", TST_SHAPE(LATHE_DTYPE_BOOL, 1, 5));
  lathe_value_t pick = tst_param(fn, "pick", ps), y = tst_param(fn, "y", TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 5));
  lathe_value_t fill, r[2] = {0};
  float fv = -1;
  CHECK_OK(lathe_constant(fn, &s0, &fv, sizeof fv, &fill));
  CHECK_OK(lathe_where(fn, keep, x, fill, &r[0]));
  CHECK_OK(lathe_where(fn, pick, y, x, &r[1]));
  for (int k = 0; k < 2; k++) {
    lathe_shape rs = {0};
    if (r[k]) CHECK_OK(lathe_value_shape(r[k], &rs));
    CHECK(rs.rank == 2 && rs.dims[0] == -1 && rs.dims[1] == 5 && rs.axis_names[0] && strcmp(rs.axis_names[0], "batch") == 0,
          "Where %d keeps the dynamic axis \"batch\"", k);
  }
  CHECK_OK(lathe_function_return(fn, r, 2));
  tst_exec *ex = NULL;
  CHECK_OK(tst_compile(b, &ex));
  lathe_builder_free(b);
  if (!ex) return;
  const int64_t batches[] = {3, 1, 0};
  float xd[15], yd[5] = {10, 11, 12, 13, 14};
  uint8_t kd[5] = {1, 0, 1, 1, 0}, pd[3] = {0, 1, 1};
  for (int i = 0; i < 15; i++) xd[i] = (float)i;
  for (int t = 0; t < 3; t++) {
    int64_t n = batches[t];
    lathe_shape in_s[4] = {TST_SHAPE(LATHE_DTYPE_FLOAT32, n, 5), TST_SHAPE(LATHE_DTYPE_BOOL, 1, 5),
                           TST_SHAPE(LATHE_DTYPE_BOOL, n, 1), TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 5)};
    const void *ins[4] = {xd, kd, pd, yd};
    lathe_buffer_t o[2] = {0};
    CHECK_OK(tst_exec_run(ex, in_s, ins, 4, o, 2));
    float got[2][15];
    for (int k = 0; k < 2; k++) {
      lathe_shape os = {0};
      if (o[k]) CHECK_OK(lathe_buffer_shape(o[k], &os));
      CHECK(os.rank == 2 && os.dims[0] == n && os.dims[1] == 5, "batch %lld: output %d's shape", (long long)n, k);
      if (o[k] && n) CHECK_OK(lathe_buffer_to_host(o[k], got[k], sizeof(float) * (size_t)(n * 5)));
      lathe_buffer_free(o[k]);
    }
    for (int64_t i = 0; i < n * 5; i++) {
      float w0 = kd[i % 5] ? xd[i] : -1, w1 = pd[i / 5] ? yd[i % 5] : xd[i];
      CHECK(got[0][i] == w0 && got[1][i] == w1, "batch %lld element %lld: got %g, %g; want %g, %g", (long long)n,
            (long long)i, got[0][i], got[1][i], w0, w1);
    }
  }
  tst_exec_free(ex);
}

static bool has_name(lathe_value_t v, int axis, const char *want) {
  lathe_shape s = {0};
  if (!v || lathe_value_shape(v, &s) || axis >= s.rank) return false;
  return s.dims[axis] == -1 && s.axis_names[axis] && strcmp(s.axis_names[axis], want) == 0;
}

/* Concatenate over dynamic axes (GoMLX's generator grows its sequence so): the result axis is
 * named compute's way ("=3+seq") and sized at specialisation (mlx:dynamic: at run time).
 * main(x[batch, seq], y[batch, 3], z[batch, len], w[batch, =3+seq]) =
 *   (Concat(x, y) + w, Concat(x, x), Concat(x, z), Concat(Concat(x, y), x), ReduceSum(Concat(x, y) + w, 1)),
 * run at four bindings, then with w bound against its name's parts (an error). */
TEST(dynamic_concatenate) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dyn_concat", &fn);
  if (!b) return;
  tst_rows_of(LATHE_OP_CONCATENATE);
  lathe_shape xs = dyn2(LATHE_DTYPE_FLOAT32, "batch", "seq"), ys = TST_SHAPE(LATHE_DTYPE_FLOAT32, -1, 3);
  lathe_shape zs = dyn2(LATHE_DTYPE_FLOAT32, "batch", "len"), ws = dyn2(LATHE_DTYPE_FLOAT32, "batch", "=3+seq");
  ys.axis_names[0] = "batch";
  lathe_value_t x = tst_param(fn, "x", xs), y = tst_param(fn, "y", ys), z = tst_param(fn, "z", zs);
  lathe_value_t w = tst_param(fn, "w", ws), xy = NULL, r[5] = {0};
  lathe_value_t ops_xy[2] = {x, y}, ops_xx[2] = {x, x}, ops_xz[2] = {x, z};
  CHECK_OK(lathe_concatenate(fn, 1, ops_xy, 2, &xy));
  CHECK(has_name(xy, 1, "=3+seq") && has_name(xy, 0, "batch"), "Concat(x, y) axis 1 is \"=3+seq\"");
  if (xy) CHECK_OK(lathe_add(fn, xy, w, &r[0]));
  CHECK_OK(lathe_concatenate(fn, 1, ops_xx, 2, &r[1]));
  CHECK(has_name(r[1], 1, "=seq+seq"), "Concat(x, x) axis 1 is \"=seq+seq\"");
  CHECK_OK(lathe_concatenate(fn, 1, ops_xz, 2, &r[2]));
  CHECK(has_name(r[2], 1, "=len+seq"), "Concat(x, z) axis 1 is \"=len+seq\"");
  lathe_value_t ops_xyx[2] = {xy, x};
  if (xy) CHECK_OK(lathe_concatenate(fn, 1, ops_xyx, 2, &r[3]));
  CHECK(has_name(r[3], 1, "=3+seq+seq"), "Concat(Concat(x, y), x) flattens to \"=3+seq+seq\"");
  int axis = 1;
  if (r[0]) CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, r[0], &axis, 1, &r[4]));
  if (!r[4]) {
    lathe_builder_free(b);
    return;
  }
  CHECK_OK(lathe_function_return(fn, r, 5));
  tst_exec *ex = NULL;
  CHECK_OK(tst_compile(b, &ex));
  lathe_builder_free(b);
  if (!ex) return;
  const int64_t binds[][3] = {{2, 1, 4}, {3, 2, 0}, {1, 5, 2}, {2, 1, 4}}; /* batch, seq, len */
  float xd[64], yd[64], zd[64], wd[64];
  for (int i = 0; i < 64; i++) xd[i] = (float)i, yd[i] = 100.f + (float)i, zd[i] = 200.f + (float)i, wd[i] = 1000.f + (float)i;
  for (int t = 0; t < 4; t++) {
    int64_t n = binds[t][0], sq = binds[t][1], ln = binds[t][2];
    lathe_shape in_s[4] = {TST_SHAPE(LATHE_DTYPE_FLOAT32, n, sq), TST_SHAPE(LATHE_DTYPE_FLOAT32, n, 3),
                           TST_SHAPE(LATHE_DTYPE_FLOAT32, n, ln), TST_SHAPE(LATHE_DTYPE_FLOAT32, n, sq + 3)};
    const void *ins[4] = {xd, yd, zd, wd};
    lathe_buffer_t o[5] = {0};
    lathe_status_t st = tst_exec_run(ex, in_s, ins, 4, o, 5);
    CHECK(st == NULL, "binding %d: %s", t, lathe_status_message(st));
    lathe_status_free(st);
    const int64_t cols[5] = {sq + 3, 2 * sq, sq + ln, 2 * sq + 3, 1};
    for (int k = 0; k < 5 && o[0]; k++) {
      lathe_shape os = {0};
      CHECK_OK(lathe_buffer_shape(o[k], &os));
      int64_t c = cols[k], cnt = k == 4 ? n : n * c;
      CHECK(os.dims[0] == n && (k == 4 ? os.rank == 1 : os.rank == 2 && os.dims[1] == c), "binding %d output %d's shape", t, k);
      float got[256];
      if (cnt) CHECK_OK(lathe_buffer_to_host(o[k], got, sizeof(float) * (size_t)cnt));
      for (int64_t i = 0; i < n; i++) {
        float sum = 0;
        for (int64_t j = 0; j < (k == 4 ? sq + 3 : c); j++) {
          float want;
          switch (k == 4 ? 0 : k) {
            case 0: want = (j < sq ? xd[i * sq + j] : yd[i * 3 + j - sq]) + wd[i * (sq + 3) + j]; break;
            case 1: want = xd[i * sq + j % sq]; break;
            case 2: want = j < sq ? xd[i * sq + j] : zd[i * ln + j - sq]; break;
            default: want = j < sq ? xd[i * sq + j] : j < sq + 3 ? yd[i * 3 + j - sq] : xd[i * sq + j - sq - 3]; break;
          }
          if (k == 4) sum += want;
          else CHECK(got[i * c + j] == want, "binding %d output %d [%lld,%lld]: got %g want %g", t, k, (long long)i,
                     (long long)j, got[i * c + j], want);
        }
        if (k == 4) CHECK(got[i] == sum, "binding %d row sum %lld: got %g want %g", t, (long long)i, got[i], sum);
      }
    }
    for (int k = 0; k < 5; k++) lathe_buffer_free(o[k]);
  }
  lathe_executable_t e = tst_exec_executable(ex);
  if (!native_dynamic(e)) CHECK(e && e->n_specs == 3, "one specialisation per distinct binding: %d", e ? e->n_specs : 0);
  /* w's axis is bound to 5 by the inputs, but its name says seq + 3 = 4 */
  lathe_shape bad[4] = {TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 1), TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 3),
                        TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 4), TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 5)};
  const void *ins[4] = {xd, yd, zd, wd};
  lathe_buffer_t o[5] = {0};
  lathe_status_t st = tst_exec_run(ex, bad, ins, 4, o, 5);
  CHECK(st && lathe_status_code_of(st) == LATHE_STATUS_INVALID_ARGUMENT, "w bound against \"=3+seq\": %s",
        st ? lathe_status_message(st) : "accepted");
  lathe_status_free(st);
  for (int k = 0; k < 5; k++) lathe_buffer_free(o[k]);
  tst_exec_free(ex);
}

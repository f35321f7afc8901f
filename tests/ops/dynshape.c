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
    int32_t dims[2], sq, sums[8], flatv[32];
    CHECK_OK(lathe_buffer_to_host(o[0], dims, sizeof dims));
    CHECK(dims[0] == r && dims[1] == c, "DynamicShape %lldx%lld: got %d,%d", (long long)r, (long long)c, dims[0], dims[1]);
    CHECK_OK(lathe_buffer_to_host(o[1], &sq, sizeof sq));
    CHECK(sq == c, "DynamicDimensionSize: got %d want %lld", sq, (long long)c);
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

/* fuzz_builders.c -- a deterministic random walk over the builder API: random operands
 * (including NULL and values of another builder), random axes, dtypes and attributes, valid or
 * not. Every call must return either OK with a sane result shape, or an error status whose
 * message is not empty; graphs that built are compiled and executed on random data, which must
 * succeed or fail with a status. Run under ASan/UBSan by `make test-sanitize`, this is the
 * "errors, not crashes" check for inputs nobody thought to write a case for.
 * LATHE_FUZZ_ITERS overrides the number of graphs (default 300), LATHE_FUZZ_SEED the seed. */
#include "graph/graph.h"
#include "testing.h"

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
  return rng_state;
}
static int rint_in(int lo, int hi) { return lo + (int)(rnd() % (uint64_t)(hi - lo + 1)); }

static lathe_dtype rand_dtype(void) { return tst_all_dtypes[rnd() % (uint64_t)tst_n_all_dtypes]; }

static lathe_shape rand_shape(lathe_dtype dt) {
  int rank = rint_in(0, 3);
  int64_t dims[4];
  for (int i = 0; i < rank; i++) dims[i] = rint_in(0, 4);
  return tst_shape(dt, rank, dims);
}

#define POOL 24
typedef struct {
  lathe_builder_t b, other;
  lathe_function_t fn;
  lathe_value_t v[POOL];
  int n;
  lathe_value_t foreign; /* a value of another builder */
} world;

static lathe_value_t pick(world *w) {
  int r = rint_in(0, 40);
  if (r == 0) return NULL;
  if (r == 1) return w->foreign;
  return w->v[rnd() % (uint64_t)w->n];
}

static void rand_axes(int *axes, int n, int rank) {
  for (int i = 0; i < n; i++) axes[i] = rint_in(-1, rank);
}

/* An op of the REDUCE kind (ArgMinMax too, which lathe_reduce must reject). */
static lathe_op rand_reduce_op(void) {
  lathe_op ops[LATHE_OP_COUNT];
  int n = 0;
  for (int op = 0; op < LATHE_OP_COUNT; op++)
    if (lathe_op_kind_of((lathe_op)op) == LATHE_KIND_REDUCE) ops[n++] = (lathe_op)op;
  return ops[rint_in(0, n - 1)];
}

static int rank_of(lathe_value_t v) {
  lathe_shape s;
  if (!v || lathe_value_shape(v, &s)) return 0;
  return s.rank;
}

/* One random builder call; returns its status, *out the new value on success. */
static lathe_status_t random_op(world *w, lathe_value_t *out) {
  lathe_function_t fn = w->fn;
  lathe_value_t a = pick(w), b = pick(w), c = pick(w);
  int r = rank_of(a), axes[LATHE_MAX_RANK + 1];
  int n = rint_in(0, r + 1);
  rand_axes(axes, n, r);
  int64_t dims[LATHE_MAX_RANK], lim[LATHE_MAX_RANK], st[LATHE_MAX_RANK];
  for (int i = 0; i < LATHE_MAX_RANK; i++) dims[i] = rint_in(-1, 4), lim[i] = rint_in(0, 5), st[i] = rint_in(0, 2);
  lathe_shape s = rand_shape(rand_dtype());
  switch (rint_in(0, 19)) {
    case 0: return lathe_unary(fn, (lathe_op)rint_in(0, LATHE_OP_COUNT), a, out);
    case 1: return lathe_binary(fn, (lathe_op)rint_in(0, LATHE_OP_COUNT), a, b, out);
    case 2: return lathe_convert_dtype(fn, a, rand_dtype(), out);
    case 3: return lathe_bitcast(fn, a, rand_dtype(), out);
    case 4: return lathe_where(fn, a, b, c, out);
    case 5: return lathe_clamp(fn, a, b, c, out);
    case 6: return lathe_reduce(fn, rand_reduce_op(), a, axes, n, out);
    case 7: {
      int axis = rint_in(-1, r);
      lathe_dtype dt = rand_dtype();
      bool is_min = rnd() & 1;
      return lathe_arg_min_max(fn, a, axis, dt, is_min, out);
    }
    case 8: return lathe_reshape(fn, a, dims, rint_in(0, 3), out);
    case 9: return lathe_transpose(fn, a, axes, n, out);
    case 10: {
      lathe_shape as;
      if (a && !lathe_value_shape(a, &as) && rnd() % 2) s.dtype = as.dtype;
      return lathe_broadcast_in_dim(fn, a, &s, axes, n, out);
    }
    case 11: {
      lathe_value_t ops[3] = {a, b, c};
      int axis = rint_in(-1, r), n_ops = rint_in(1, 3);
      return lathe_concatenate(fn, axis, ops, n_ops, out);
    }
    case 12: return lathe_slice(fn, a, st, lim, rnd() & 1 ? NULL : st, r, out);
    case 13: {
      lathe_pad_axis p[LATHE_MAX_RANK];
      for (int i = 0; i < LATHE_MAX_RANK; i++) {
        p[i].start = rint_in(-2, 2);
        p[i].end = rint_in(-2, 2);
        p[i].interior = rint_in(-1, 1);
      }
      return lathe_pad(fn, a, b, p, rint_in(0, r), out);
    }
    case 14: return lathe_reverse(fn, a, axes, n, out);
    case 15: return lathe_iota(fn, &s, rint_in(-1, s.rank), out);
    case 16: {
      int lc = rint_in(-1, r), rc = rint_in(-1, rank_of(b)), nl = rint_in(0, 1), nr = rint_in(0, 1);
      return lathe_dot_general(fn, a, &lc, nl, NULL, 0, b, &rc, nr, NULL, 0, NULL, out);
    }
    case 17: return lathe_fused_softmax(fn, a, rint_in(-1, r), out);
    case 18: return lathe_fused_layer_norm(fn, a, axes, n, 1e-5, rnd() & 1 ? NULL : b, NULL, out);
    default: {
      lathe_value_t starts[LATHE_MAX_RANK];
      int64_t sizes[LATHE_MAX_RANK];
      for (int i = 0; i < LATHE_MAX_RANK; i++) starts[i] = i % 2 ? b : c, sizes[i] = rint_in(-1, 3);
      return lathe_dynamic_slice(fn, a, starts, r, sizes, r, out);
    }
  }
}

static bool sane(lathe_value_t v) {
  lathe_shape s;
  lathe_status_t st = lathe_value_shape(v, &s);
  bool ok = !st && lathe_dtype_is_valid(s.dtype) && s.rank >= 0 && s.rank <= LATHE_MAX_RANK;
  for (int i = 0; ok && i < s.rank; i++) ok = s.dims[i] >= 0 && s.dims[i] < (1 << 20);
  lathe_status_free(st);
  return ok;
}

static void run_graph(world *w, lathe_value_t result) {
  if (lathe_function_return(w->fn, &result, 1)) return;
  lathe_executable_t e = NULL;
  lathe_status_t st = lathe_builder_compile(w->b, &e);
  if (st) {
    CHECK(lathe_status_code_of(st) == LATHE_STATUS_UNIMPLEMENTED, "compile of a built graph: %s", lathe_status_message(st));
    lathe_status_free(st);
    return;
  }
  int n_in = lathe_executable_num_inputs(e);
  lathe_buffer_t in[8] = {0}, out = NULL;
  for (int i = 0; i < n_in; i++) {
    lathe_shape s;
    CHECK_OK(lathe_executable_input_shape(e, i, &s));
    void *d = tst_alloc_for(&s);
    tst_fill(d, s.dtype, lathe_shape_num_elements(&s), (unsigned)rnd());
    CHECK_OK(lathe_buffer_from_host(tst_backend(), 0, &s, d, (size_t)lathe_shape_byte_size(&s), &in[i]));
    free(d);
  }
  st = lathe_executable_execute(e, in, NULL, n_in, 0, &out, 1);
  /* Data-dependent failures (an out-of-range index) are statuses; anything else built must run. */
  CHECK(st == NULL || *lathe_status_message(st), "execute returned an empty status");
  lathe_status_free(st);
  lathe_buffer_free(out);
  for (int i = 0; i < n_in; i++) lathe_buffer_free(in[i]);
  lathe_executable_free(e);
}

TEST(fuzz_builder_api) {
  const char *seed = getenv("LATHE_FUZZ_SEED");
  rng_state = seed ? strtoull(seed, NULL, 0) | 1 : 0x9E3779B97F4A7C15ull;
  const char *env = getenv("LATHE_FUZZ_ITERS");
  int iters = env ? atoi(env) : 300, calls = 0, errors = 0;
  for (int it = 0; it < iters; it++) {
    world w = {0};
    w.b = tst_builder("fuzz", &w.fn);
    lathe_function_t ofn;
    w.other = tst_builder("fuzz_other", &ofn);
    if (!w.b || !w.other) return;
    lathe_shape fs = rand_shape(LATHE_DTYPE_FLOAT32);
    CHECK_OK(lathe_parameter(ofn, "o", &fs, &w.foreign));
    int n_params = rint_in(1, 4);
    lathe_dtype dt = rand_dtype();
    for (int i = 0; i < n_params; i++) {
      lathe_shape s = rand_shape(rnd() % 3 ? dt : rand_dtype());
      char name[16];
      snprintf(name, sizeof name, "p%d", i);
      CHECK_OK(lathe_parameter(w.fn, name, &s, &w.v[w.n++]));
    }
    lathe_value_t last = w.v[0];
    for (int k = 0; k < 30 && w.n < POOL; k++) {
      lathe_value_t out = NULL;
      lathe_status_t st = random_op(&w, &out);
      calls++;
      if (st) {
        errors++;
        CHECK(*lathe_status_message(st) && (lathe_status_code_of(st) == LATHE_STATUS_INVALID_ARGUMENT ||
                                            lathe_status_code_of(st) == LATHE_STATUS_UNIMPLEMENTED),
              "bad status %s: %s", lathe_status_code_name(lathe_status_code_of(st)), lathe_status_message(st));
        lathe_status_free(st);
      } else if (out) {
        CHECK(sane(out), "an op built a value with an insane shape");
        w.v[w.n++] = last = out;
      }
    }
    run_graph(&w, last);
    lathe_builder_free(w.b);
    lathe_builder_free(w.other);
  }
  CHECK(calls > errors && errors > 0, "the walk hits both valid and invalid calls (%d calls, %d errors)", calls, errors);
  printf("fuzz_builder_api: %d graphs, %d builder calls, %d rejected with a status\n", iters, calls, errors);
}

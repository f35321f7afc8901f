/* test_partition.c -- the AutoSharding partitioner (src/graph/partition.c): each propagation rule
 * and each reshard, run partitioned on lathe:cpu,devices=2 and devices=4 (also with the mesh laid
 * over the devices out of order) against the same program run whole (partition=0), device by
 * device and value by value; the fallback count; bad shardings. */
#include <math.h>

#include "core/core.h"
#include "graph/graph.h"
#include "graph/partition.h"
#include "testing.h"

/* A program under test: params and outputs with shardings written as text, one group per tensor
 * axis separated by ',': "x" (mesh axis x), "xy" (x then y), "-" (replicated); NULL: replicated. */
typedef struct {
  int n_params;
  lathe_shape shape[8];
  const char *spec[8];
  const char *store[16][LATHE_MAX_RANK][2];
  lathe_sharding sh[16];
  int n_sh;
} prog;

static const char *const AXIS_X = "x", *const AXIS_Y = "y";

static const lathe_sharding *sharding_of(prog *p, const char *text, int rank) {
  if (!text) return NULL;
  lathe_sharding *s = &p->sh[p->n_sh];
  memset(s, 0, sizeof *s);
  s->mesh = "m";
  s->rank = rank;
  int a = 0;
  for (const char *c = text; *c && a < rank; c++) {
    if (*c == ',') {
      a++;
      continue;
    }
    if (*c == '-') continue;
    p->store[p->n_sh][a][s->n_axes[a]++] = *c == 'x' ? AXIS_X : AXIS_Y;
    s->axes[a] = p->store[p->n_sh][a];
  }
  p->n_sh++;
  return s;
}

static lathe_value_t param(prog *p, lathe_function_t fn, lathe_shape s, const char *spec) {
  lathe_value_t v = NULL;
  char name[8];
  snprintf(name, sizeof name, "p%d", p->n_params);
  CHECK_OK(lathe_parameter_sharded(fn, name, &s, sharding_of(p, spec, s.rank), &v));
  p->shape[p->n_params] = s;
  p->spec[p->n_params++] = spec;
  return v;
}

static void ret(prog *p, lathe_function_t fn, int n, const lathe_value_t *outs, const char *const *specs) {
  const lathe_sharding *sh[8];
  for (int i = 0; i < n; i++) {
    lathe_shape s;
    CHECK_OK(lathe_value_shape(outs[i], &s));
    sh[i] = sharding_of(p, specs[i], s.rank);
  }
  CHECK_OK(lathe_function_return_sharded(fn, outs, sh, n));
}

typedef void (*build_fn)(prog *p, lathe_function_t fn);

/* Device d's shard of global array g (shape s, element size es) under spec text on mesh (sx, sy)
 * laid out by logical. */
static void cut(const lathe_shape *s, const char *spec, int sx, int sy, const int *logical, int d, const char *g, char *out,
                lathe_shape *ls) {
  int pos = 0;
  for (int i = 0; i < sx * sy; i++)
    if (logical[i] == d) pos = i;
  int c[2] = {pos / sy, pos % sy}, size[2] = {sx, sy};
  int64_t off[LATHE_MAX_RANK] = {0};
  *ls = *s;
  int a = 0;
  int64_t idx = 0, n = 1;
  for (const char *q = spec; spec && *q; q++) {
    if (*q == ',') {
      ls->dims[a] = s->dims[a] / n, off[a] = idx * ls->dims[a];
      a++, idx = 0, n = 1;
      continue;
    }
    if (*q == '-') continue;
    int j = *q == 'x' ? 0 : 1;
    idx = idx * size[j] + c[j], n *= size[j];
  }
  if (spec) ls->dims[a] = s->dims[a] / n, off[a] = idx * ls->dims[a];
  size_t es = (size_t)lathe_dtype_bits(s->dtype) / 8;
  int64_t total = lathe_shape_size(ls);
  for (int64_t k = 0; k < total; k++) {
    int64_t rem = k, gi = 0, stride = 1;
    for (int b = s->rank - 1; b >= 0; b--) {
      int64_t i = rem % ls->dims[b];
      rem /= ls->dims[b];
      gi += (i + off[b]) * stride;
      stride *= s->dims[b];
    }
    memcpy(out + (size_t)k * es, g + (size_t)gi * es, es);
  }
}

/* Runs build partitioned and whole on lathe:cpu,devices=n (mesh x:sx, y:sy laid out by logical)
 * and compares every output of every device; fallbacks >= 0: the partitioned run's count. */
static void check_prog(const char *what, build_fn build, int sx, int sy, const int *logical, int fallbacks, const char *extra) {
  int n = sx * sy;
  lathe_executable_t e[2] = {NULL, NULL};
  lathe_backend_t be[2] = {NULL, NULL};
  prog p[2];
  for (int k = 0; k < 2; k++) {
    char cfg[64];
    snprintf(cfg, sizeof cfg, "lathe:cpu,devices=%d%s%s", n, extra, k ? ",partition=0" : "");
    CHECK_OK(lathe_backend_new(cfg, &be[k]));
    if (!be[k]) return;
    const int sizes[2] = {sx, sy};
    const char *names[2] = {AXIS_X, AXIS_Y};
    lathe_mesh mesh = {"m", 2, sizes, names, logical};
    lathe_builder_t b;
    CHECK_OK(lathe_builder_new(be[k], what, &b));
    CHECK_OK(lathe_builder_auto_sharding(b, &mesh, 1));
    memset(&p[k], 0, sizeof p[k]);
    build(&p[k], lathe_builder_main(b));
    CHECK_OK(lathe_builder_compile(b, &e[k]));
    lathe_builder_free(b);
  }
  if (e[0] && e[1]) {
    lathe_executable_stats st;
    CHECK_OK(lathe_executable_get_stats(e[0], &st));
    CHECK(st.partitioned, "%s (%dx%d): not partitioned: %s", what, sx, sy, st.partition_declined ? st.partition_declined : "?");
    CHECK(fallbacks < 0 || st.partition_fallbacks == fallbacks, "%s: %d fallbacks, want %d", what, st.partition_fallbacks,
          fallbacks);
    CHECK(st.partition_fallback_ops && (fallbacks < 0 || (fallbacks == 0) == (st.partition_fallback_ops[0] == 0)), "%s: fallback ops \"%s\"",
          what, st.partition_fallback_ops ? st.partition_fallback_ops : "(null)");
    CHECK_OK(lathe_executable_get_stats(e[1], &st));
    CHECK(!st.partitioned && st.partition_declined, "%s: partition=0 still partitions", what);
    int np = p[0].n_params, no = lathe_executable_num_outputs(e[0]);
    lathe_buffer_t in[2][8 * 4], out[2][8 * 4];
    CHECK(np <= 8 && no <= 8, "%s: at most 8 parameters and 8 outputs", what);
    memset(out, 0, sizeof out);
    for (int i = 0; i < np; i++) {
      const lathe_shape *s = &p[0].shape[i];
      size_t es = (size_t)lathe_dtype_bits(s->dtype) / 8, bytes = (size_t)lathe_shape_byte_size(s);
      char *g = malloc(bytes + 1), *part = malloc(bytes + 1);
      for (int64_t q = 0; q < lathe_shape_size(s); q++) {
        int v = (int)((q * 7 + i * 3) % 11) - 5;
        if (s->dtype == LATHE_DTYPE_FLOAT32) {
          float f = (float)v;
          memcpy(g + (size_t)q * es, &f, es);
        } else if (s->dtype == LATHE_DTYPE_BOOL) {
          g[q] = v > -2;
        } else {
          int32_t w = v;
          memcpy(g + (size_t)q * es, &w, es);
        }
      }
      for (int d = 0; d < n; d++) {
        lathe_shape ls;
        cut(s, p[0].spec[i], sx, sy, logical, d, g, part, &ls);
        for (int k = 0; k < 2; k++)
          CHECK_OK(lathe_buffer_from_host(be[k], d, &ls, part, (size_t)lathe_shape_byte_size(&ls), &in[k][d * np + i]));
      }
      free(g);
      free(part);
    }
    for (int k = 0; k < 2; k++) CHECK_OK(lathe_executable_execute(e[k], in[k], NULL, np * n, 0, out[k], no * n));
    for (int q = 0; q < no * n; q++) {
      if (!out[0][q] || !out[1][q]) continue;
      lathe_shape s0, s1;
      CHECK_OK(lathe_buffer_shape(out[0][q], &s0));
      CHECK_OK(lathe_buffer_shape(out[1][q], &s1));
      CHECK(lathe_shape_equal(&s0, &s1), "%s: output %d of device %d: shapes differ", what, q % no, q / no);
      if (!lathe_shape_equal(&s0, &s1)) continue;
      size_t bytes = (size_t)lathe_shape_byte_size(&s0);
      char *a = malloc(bytes + 1), *b = malloc(bytes + 1);
      CHECK_OK(lathe_buffer_to_host(out[0][q], a, bytes));
      CHECK_OK(lathe_buffer_to_host(out[1][q], b, bytes));
      /* sums of small integers are exact; others (tanh) may round differently summed in parts */
      double worst = 0;
      bool same = memcmp(a, b, bytes) == 0;
      if (!same && s0.dtype == LATHE_DTYPE_FLOAT32) {
        same = true;
        for (size_t j = 0; j < bytes / 4; j++) {
          float fa, fb;
          memcpy(&fa, a + 4 * j, 4);
          memcpy(&fb, b + 4 * j, 4);
          double err = fabs((double)fa - (double)fb) / (1 + fabs((double)fb));
          worst = err > worst ? err : worst;
          same &= err <= 1e-6;
        }
      }
      CHECK(same, "%s (%dx%d): output %d of device %d differs from the whole run (relative %g)", what, sx, sy, q % no, q / no,
            worst);
      free(a);
      free(b);
    }
    for (int k = 0; k < 2; k++) {
      for (int q = 0; q < np * n; q++) lathe_buffer_free(in[k][q]);
      for (int q = 0; q < no * n; q++) lathe_buffer_free(out[k][q]);
    }
  }
  for (int k = 0; k < 2; k++) {
    lathe_executable_free(e[k]);
    lathe_backend_free(be[k]);
  }
}

/* On 2 devices (x:2), 4 (x:2, y:2), 4 laid out of order, and 4 running asynchronously (each
 * device's run delayed on a worker thread). */
static void check_all(const char *what, build_fn build, int fallbacks) {
  static const int id[4] = {0, 1, 2, 3}, shuffled[4] = {2, 0, 3, 1};
  check_prog(what, build, 2, 1, id, fallbacks, "");
  check_prog(what, build, 2, 2, id, fallbacks, "");
  check_prog(what, build, 2, 2, shuffled, fallbacks, "");
  check_prog(what, build, 2, 2, shuffled, fallbacks, ",async=late");
}

#define F32(...) TST_SHAPE(LATHE_DTYPE_FLOAT32, __VA_ARGS__)

/* ---- elementwise, broadcasting, Convert, constants ---- */
static void b_elementwise(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "x,y"), r = param(p, fn, F32(1, 6), "-,y"), s = param(p, fn, F32(4, 6), "y,x");
  lathe_value_t c, y, z, w, i, o[4];
  float two = 2;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  CHECK_OK(lathe_constant(fn, &s0, &two, sizeof two, &c));
  CHECK_OK(lathe_mul(fn, x, r, &y));        /* broadcast of a size-1 axis */
  CHECK_OK(lathe_add(fn, y, c, &y));        /* a scalar constant */
  CHECK_OK(lathe_sub(fn, y, s, &z));        /* conflicting shardings: one side resharded */
  CHECK_OK(lathe_abs(fn, z, &w));
  CHECK_OK(lathe_convert_dtype(fn, w, LATHE_DTYPE_INT32, &i));
  o[0] = y, o[1] = z, o[2] = i, o[3] = w;
  const char *specs[] = {"x,y", NULL, "x,y", "y,x"};
  ret(p, fn, 4, o, specs);
}
TEST(partition_elementwise) { check_all("elementwise", b_elementwise, 0); }

static void b_where_clamp(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(8, 4), "x,-"), lo = param(p, fn, tst_shape0(LATHE_DTYPE_FLOAT32), NULL);
  lathe_value_t zero, cond, y, hi, o[2];
  float z = 0, h = 3;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  CHECK_OK(lathe_constant(fn, &s0, &z, sizeof z, &zero));
  CHECK_OK(lathe_constant(fn, &s0, &h, sizeof h, &hi));
  CHECK_OK(lathe_greater_than(fn, x, zero, &cond));
  CHECK_OK(lathe_where(fn, cond, x, lo, &y));
  CHECK_OK(lathe_clamp(fn, lo, x, hi, &o[1]));
  o[0] = y;
  const char *specs[] = {"x,-", "-,x"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_where_clamp) { check_all("where_clamp", b_where_clamp, 0); }

/* ---- layout: BroadcastInDim, Reshape, Transpose ---- */
static void b_layout(prog *p, lathe_function_t fn) {
  lathe_value_t v = param(p, fn, F32(6), "x"), x = param(p, fn, F32(4, 6), "x,y");
  lathe_value_t bc, r1, r2, r3, t, o[5];
  lathe_shape bs = F32(4, 6);
  int ax[1] = {1}, perm[2] = {1, 0};
  int64_t d1[3] = {2, 2, 6}, d2[1] = {24}, d3[3] = {4, 3, 2};
  CHECK_OK(lathe_broadcast_in_dim(fn, v, &bs, ax, 1, &bc));
  CHECK_OK(lathe_reshape(fn, x, d1, 3, &r1)); /* axis 0 split 2 -> axis 0 of size 2 */
  CHECK_OK(lathe_reshape(fn, x, d2, 1, &r2)); /* merges a sharded minor axis: gathered */
  CHECK_OK(lathe_reshape(fn, x, d3, 3, &r3)); /* axis 1 (6 over y) -> axis 1 of size 3 */
  CHECK_OK(lathe_transpose(fn, x, perm, 2, &t));
  o[0] = bc, o[1] = r1, o[2] = r2, o[3] = r3, o[4] = t;
  const char *specs[] = {"-,x", "x,-,-", "x", NULL, "y,x"};
  ret(p, fn, 5, o, specs);
}
TEST(partition_layout) { check_all("layout", b_layout, 0); }

/* ---- reductions: over a sharded axis (partial + AllReduce), over an unsharded one ---- */
static void b_reduce(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "x,y"), xi = param(p, fn, TST_SHAPE(LATHE_DTYPE_INT32, 8, 2), "xy,-");
  lathe_value_t o[6];
  int a0[1] = {0}, a1[1] = {1};
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, x, a0, 1, &o[0]));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_MAX, x, a1, 1, &o[1]));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_MIN, x, NULL, 0, &o[2]));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_PRODUCT, xi, a0, 1, &o[3]));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_BITWISE_XOR, xi, a0, 1, &o[4])); /* no AllReduce: gathered first */
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, xi, a1, 1, &o[5]));
  const char *specs[] = {"y", NULL, NULL, NULL, NULL, "xy"};
  ret(p, fn, 6, o, specs);
}
TEST(partition_reduce) { check_all("reduce", b_reduce, 0); }

/* ---- DotGeneral: contracting sharded on both sides, batch, free axes (Megatron MLP) ---- */
static void b_dot(prog *p, lathe_function_t fn) {
  lathe_value_t a = param(p, fn, F32(4, 8), "-,x"), b = param(p, fn, F32(8, 6), "x,-");
  lathe_value_t q = param(p, fn, F32(2, 4, 8), "x,-,y"), k = param(p, fn, F32(2, 6, 8), "x,y,-");
  lathe_value_t h = param(p, fn, F32(4, 8), NULL), w1 = param(p, fn, F32(8, 16), "-,x"), w2 = param(p, fn, F32(16, 8), "x,-");
  lathe_value_t o[4], u;
  int c1[1] = {1}, c0[1] = {0}, c2[1] = {2}, b0[1] = {0};
  CHECK_OK(lathe_dot_general(fn, a, c1, 1, NULL, 0, b, c0, 1, NULL, 0, NULL, &o[0]));
  CHECK_OK(lathe_dot_general(fn, q, c2, 1, b0, 1, k, c2, 1, b0, 1, NULL, &o[1])); /* [2, 4, 6] */
  CHECK_OK(lathe_dot_general(fn, h, c1, 1, NULL, 0, w1, c0, 1, NULL, 0, NULL, &u)); /* [4, 16], columns split */
  CHECK_OK(lathe_tanh(fn, u, &u));
  CHECK_OK(lathe_dot_general(fn, u, c1, 1, NULL, 0, w2, c0, 1, NULL, 0, NULL, &o[2])); /* rows split: AllReduce */
  o[3] = u;
  const char *specs[] = {NULL, "x,-,y", NULL, "-,x"};
  ret(p, fn, 4, o, specs);
}
TEST(partition_dot) { check_all("dot", b_dot, 0); }

/* ---- Slice, Concatenate, Pad on unsharded axes; on a sharded one (gathered) ---- */
static void b_slice_concat_pad(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "x,-"), y = param(p, fn, F32(4, 2), "x,-");
  lathe_value_t o[5], fill, parts[2];
  int64_t st[2] = {0, 1}, li[2] = {4, 5}, st2[2] = {1, 0}, li2[2] = {3, 6};
  float z = -1;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  CHECK_OK(lathe_constant(fn, &s0, &z, sizeof z, &fill));
  CHECK_OK(lathe_slice(fn, x, st, li, NULL, 2, &o[0]));
  CHECK_OK(lathe_slice(fn, x, st2, li2, NULL, 2, &o[1])); /* the sharded axis: gathered */
  parts[0] = x, parts[1] = y;
  CHECK_OK(lathe_concatenate(fn, 1, parts, 2, &o[2]));
  lathe_pad_axis pad[2] = {{0, 0, 0}, {1, 2, 1}};
  CHECK_OK(lathe_pad(fn, x, fill, pad, 2, &o[3]));
  CHECK_OK(lathe_concatenate(fn, 0, parts, 1, &o[4]));
  const char *specs[] = {"x,-", NULL, "x,-", "x,-", "-,x"};
  ret(p, fn, 5, o, specs);
}
TEST(partition_slice_concat_pad) { check_all("slice_concat_pad", b_slice_concat_pad, 0); }

/* ---- Iota (replicated, sliced where it meets a sharded value) ---- */
static void b_iota(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "x,y"), io, o[2];
  lathe_shape s = F32(4, 6);
  CHECK_OK(lathe_iota(fn, &s, 1, &io));
  CHECK_OK(lathe_add(fn, x, io, &o[0]));
  o[1] = io;
  const char *specs[] = {"x,y", "y,x"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_iota) { check_all("iota", b_iota, 0); }

/* ---- reshards between a parameter's and an output's sharding ---- */
static void b_reshard(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 8), "x,-"), r = param(p, fn, F32(4, 8), NULL), b = param(p, fn, F32(4, 8), "x,y");
  lathe_value_t o[7] = {x, x, x, r, r, b, b};
  const char *specs[] = {"-,x", NULL, "x,-", "x,y", "yx,-", "y,x", "-,xy"};
  ret(p, fn, 7, o, specs);
}
TEST(partition_reshard) { check_all("reshard", b_reshard, 0); }

/* a split moving between mesh axes, shard counts unchanged: one CollectivePermute (each device
 * sends its shard to one that wants it), not a gather and a slice */
static void b_permute(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 8), "x,y"), y = param(p, fn, F32(4, 8), "x,-");
  lathe_value_t o[4] = {x, y, x, y};
  const char *specs[] = {"y,x", "y,-", "yx,-", "-,y"};
  ret(p, fn, 4, o, specs);
}
static void check_stats_on(int sx, int sy, const char *what, build_fn build, const char *want_ops, int want_collectives);
TEST(partition_reshard_permutes) {
  static const int id[4] = {0, 1, 2, 3}, shuffled[4] = {2, 0, 3, 1};
  check_prog("permute", b_permute, 2, 2, id, 0, "");
  check_prog("permute", b_permute, 2, 2, shuffled, 0, "");
  check_prog("permute", b_permute, 2, 2, shuffled, 0, ",async=late");
  /* two CollectivePermutes; "yx,-" (4 shards of axis 0) gathers both axes (2) and "-,y" axis 0 (1) */
  check_stats_on(2, 2, "permute", b_permute, "", 5);
}

/* ---- the fallback: a form its rule cannot split (a window over every split axis, an FFT over
 * its split axis) gets its operands gathered, and is counted ---- */
static void b_fallback(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "x,y"), o[2];
  int64_t dims[2] = {2, 2}, n[2] = {4, 6}, ones[2] = {1, 1}; /* [3, 5] windows: neither divides in 2 */
  lathe_window_params w = {.window_dims = dims, .n_window_dims = 2, .strides = ones, .n_strides = 2};
  CHECK_OK(lathe_fft(fn, x, LATHE_FFT_TYPE_FORWARD_REAL, n, 2, &o[0])); /* over both split axes */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &w, &o[1]));
  const char *specs[] = {NULL, NULL};
  ret(p, fn, 2, o, specs);
}
/* Compiles b (then freed) and reads the executable's stats (zeroed when it did not compile). */
static lathe_executable_t compile_stats(lathe_builder_t b, lathe_executable_stats *st) {
  lathe_executable_t e = NULL;
  memset(st, 0, sizeof *st);
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  if (e) CHECK_OK(lathe_executable_get_stats(e, st));
  return e;
}

/* Build partitioned on a mesh x:sx, y:sy: the stats name the ops that ran whole (want_ops) and
 * count want_collectives collectives (< 0: any). */
static void check_stats_on(int sx, int sy, const char *what, build_fn build, const char *want_ops, int want_collectives) {
  lathe_backend_t be = NULL;
  char cfg[32];
  snprintf(cfg, sizeof cfg, "lathe:cpu,devices=%d", sx * sy);
  CHECK_OK(lathe_backend_new(cfg, &be));
  if (!be) return;
  const int sizes[2] = {sx, sy};
  const char *names[2] = {AXIS_X, AXIS_Y};
  lathe_mesh mesh = {"m", 2, sizes, names, NULL};
  lathe_builder_t b;
  prog p;
  memset(&p, 0, sizeof p);
  CHECK_OK(lathe_builder_new(be, what, &b));
  CHECK_OK(lathe_builder_auto_sharding(b, &mesh, 1));
  build(&p, lathe_builder_main(b));
  lathe_executable_stats st;
  lathe_executable_t e = compile_stats(b, &st);
  if (e) {
    CHECK(st.partition_fallback_ops && !strcmp(st.partition_fallback_ops, want_ops), "%s: fallback ops \"%s\", want \"%s\"",
          what, st.partition_fallback_ops ? st.partition_fallback_ops : "(null)", want_ops);
    CHECK(want_collectives < 0 || st.partition_collectives == want_collectives, "%s: %d collectives, want %d", what,
          st.partition_collectives, want_collectives);
  }
  lathe_executable_free(e);
  lathe_backend_free(be);
}

/* check_stats_on a 2x1 mesh */
static void check_stats(const char *what, build_fn build, const char *want_ops, int want_collectives) {
  check_stats_on(2, 1, what, build, want_ops, want_collectives);
}

TEST(partition_fallback) {
  check_all("fallback", b_fallback, 2);
  check_stats("fallback", b_fallback, "FFT, ReduceWindow", -1);
}

/* ---- Bitcast: shared axes keep their split, the axis a width change adds or drops replicated;
 * the optimization and scheduling barriers: their operands' shardings ---- */
static void b_bitcast(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "x,y"), y = param(p, fn, F32(4, 6), "y,-"), o[5], bar[2];
  CHECK_OK(lathe_bitcast(fn, x, LATHE_DTYPE_INT32, &o[0]));      /* same width: every axis keeps its split */
  CHECK_OK(lathe_bitcast(fn, x, LATHE_DTYPE_UINT8, &o[1]));      /* [4, 6, 4]: the new axis replicated */
  CHECK_OK(lathe_bitcast(fn, o[1], LATHE_DTYPE_FLOAT32, &o[2])); /* back: the axis dropped */
  lathe_value_t xy[2] = {x, y};
  CHECK_OK(lathe_optimization_barrier(fn, xy, 2, bar));
  CHECK_OK(lathe_scheduling_barrier(fn, bar[0], &o[0], 1, &o[3]));
  CHECK_OK(lathe_add(fn, o[3], bar[0], &o[3]));
  o[4] = bar[1];
  const char *specs[] = {"x,y", "x,y,-", NULL, "x,y", "y,-"};
  ret(p, fn, 5, o, specs);
}
TEST(partition_bitcast_barrier) { check_all("bitcast", b_bitcast, 0); }

/* ---- FusedQuantizedDense: x's batch axes keep their split (K gathered), QuantizedEmbeddingLookup:
 * the indices' split; FusedActivationVJP of SwiGLU: all but the halved last axis ---- */
static void b_quantized(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "x,y"), w = param(p, fn, TST_SHAPE(LATHE_DTYPE_INT8, 6, 6), NULL);
  lathe_value_t sc = param(p, fn, F32(6, 2), NULL), b = param(p, fn, F32(6), NULL);
  lathe_value_t tab = param(p, fn, TST_SHAPE(LATHE_DTYPE_UINT8, 8, 34), NULL);
  lathe_value_t ix = param(p, fn, TST_SHAPE(LATHE_DTYPE_INT32, 4, 2, 1), "x,y,-"), g = param(p, fn, F32(4, 8), "x,y");
  lathe_value_t ia, dy, o[3];
  lathe_quantization lin = {.scheme = LATHE_QUANT_LINEAR, .block_axis = 1, .block_size = 3};
  lathe_quantization q8 = {.scheme = LATHE_QUANT_GGML, .ggml_type = LATHE_GGML_Q8_0};
  CHECK_OK(lathe_fused_quantized_dense(fn, x, w, &lin, sc, NULL, b, LATHE_ACTIVATION_RELU, &o[0])); /* K == N */
  CHECK_OK(lathe_abs(fn, ix, &ia)); /* indices 0..5 of 8 rows */
  CHECK_OK(lathe_quantized_embedding_lookup(fn, tab, ia, &q8, &o[1])); /* [4, 2, 32] */
  CHECK_OK(lathe_fused_activation(fn, g, LATHE_ACTIVATION_SWIGLU, &dy)); /* [4, 4], a stand-in gradient */
  CHECK_OK(lathe_fused_activation_vjp(fn, NULL, g, dy, LATHE_ACTIVATION_SWIGLU, &o[2]));
  const char *specs[] = {"x,-", "x,y,-", "x,-"};
  ret(p, fn, 3, o, specs);
}
TEST(partition_quantized_gated) { check_all("quantized", b_quantized, 0); }

/* ---- While (an If in its body, closures capturing main's and the body's values), Sort and Call:
 * run whole on gathered operands and captured values, their sub-functions copied, each counted ---- */
static lathe_function_t closure_of(lathe_function_t f) {
  lathe_function_t c = NULL;
  CHECK_OK(lathe_function_closure(f, &c));
  return c;
}
static lathe_value_t i32(lathe_function_t f, int32_t v) {
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_INT32);
  lathe_value_t out = NULL;
  CHECK_OK(lathe_constant(f, &s0, &v, sizeof v, &out));
  return out;
}
static void b_control(prog *p, lathe_function_t fn) {
  lathe_value_t c = param(p, fn, F32(4, 6), "x,y"), x0 = param(p, fn, F32(4, 6), "y,-"), o[4], v;
  lathe_shape si = tst_shape0(LATHE_DTYPE_INT32), sx = F32(4, 6), f0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  lathe_function_t cond = closure_of(fn), body = closure_of(fn);
  lathe_value_t ci = tst_param(cond, NULL, si);
  tst_param(cond, NULL, sx);
  CHECK_OK(lathe_less_than(cond, ci, i32(cond, 4), &v));
  CHECK_OK(lathe_function_return(cond, &v, 1));
  lathe_value_t bi = tst_param(body, NULL, si), bx = tst_param(body, NULL, sx), r[2], pred, next;
  lathe_function_t t = closure_of(body), e = closure_of(body);
  CHECK_OK(lathe_add(t, bx, c, &v)); /* a body value and a main value, captured two levels down */
  CHECK_OK(lathe_function_return(t, &v, 1));
  CHECK_OK(lathe_mul(e, bx, c, &v));
  CHECK_OK(lathe_function_return(e, &v, 1));
  int n = 0;
  CHECK_OK(lathe_less_than(body, bi, i32(body, 2), &pred));
  CHECK_OK(lathe_if(body, pred, t, e, r, 1, &n));
  CHECK_OK(lathe_add(body, bi, i32(body, 1), &next));
  lathe_value_t bo[2] = {next, r[0]};
  CHECK_OK(lathe_function_return(body, bo, 2));
  lathe_value_t st[2] = {i32(fn, 0), x0};
  CHECK_OK(lathe_while(fn, cond, body, st, 2, r, 2, &n));
  o[0] = r[1];
  lathe_function_t cmp = closure_of(fn);
  lathe_value_t a = tst_param(cmp, NULL, f0), b = tst_param(cmp, NULL, f0);
  CHECK_OK(lathe_less_than(cmp, a, b, &v));
  CHECK_OK(lathe_function_return(cmp, &v, 1));
  CHECK_OK(lathe_sort(fn, cmp, 1, true, &c, 1, &o[1])); /* rows split: each device sorts its own */
  lathe_value_t x1 = param(p, fn, F32(4, 6), "x,-");
  CHECK_OK(lathe_sort(fn, cmp, 0, true, &x1, 1, &o[3])); /* along its only split axis: whole */
  lathe_function_t twice = NULL;
  CHECK_OK(lathe_builder_new_function(fn->builder, "twice", &twice)); /* top-level */
  lathe_value_t tv = tst_param(twice, NULL, sx);
  CHECK_OK(lathe_add(twice, tv, tv, &v));
  CHECK_OK(lathe_function_return(twice, &v, 1));
  CHECK_OK(lathe_call(fn, twice, &c, 1, &o[2], 1, &n));
  const char *specs[] = {"x,y", "x,-", "x,y", "-,y"};
  ret(p, fn, 4, o, specs);
}
/* While, If and Call partition (the loop's state keeps its sharding, an If's branches agree, a
 * callee takes its arguments' shardings); Sort splits its other axes, runs whole along a split one */
TEST(partition_control_flow) {
  check_all("control", b_control, 1);
  check_stats("control", b_control, "Sort", -1);
}

/* ---- a While whose body computes on the split state: a tensor-parallel layer iterated (weights
 * captured from main, split by columns: the body gathers its result back to the state's rows
 * split), a nested While, an If on a predicate reduced from split values ---- */
static void b_loop(prog *p, lathe_function_t fn) {
  lathe_value_t h0 = param(p, fn, F32(4, 8), "x,-"), w = param(p, fn, F32(8, 8), "-,y"), o[3], v, r[2];
  lathe_shape si = tst_shape0(LATHE_DTYPE_INT32), sh = F32(4, 8);
  lathe_function_t cond = closure_of(fn), body = closure_of(fn);
  lathe_value_t ci = tst_param(cond, NULL, si);
  tst_param(cond, NULL, sh);
  CHECK_OK(lathe_less_than(cond, ci, i32(cond, 3), &v));
  CHECK_OK(lathe_function_return(cond, &v, 1));
  lathe_value_t bi = tst_param(body, NULL, si), bh = tst_param(body, NULL, sh), y, next;
  int ca = 1, cb = 0, n = 0;
  CHECK_OK(lathe_dot_general(body, bh, &ca, 1, NULL, 0, w, &cb, 1, NULL, 0, NULL, &y));
  CHECK_OK(lathe_tanh(body, y, &y));
  /* an inner loop over the body's value: y halved twice */
  lathe_function_t c2 = closure_of(body), b2 = closure_of(body);
  lathe_value_t c2i = tst_param(c2, NULL, si);
  tst_param(c2, NULL, sh);
  CHECK_OK(lathe_less_than(c2, c2i, i32(c2, 2), &v));
  CHECK_OK(lathe_function_return(c2, &v, 1));
  lathe_value_t b2i = tst_param(b2, NULL, si), b2y = tst_param(b2, NULL, sh), b2o[2];
  CHECK_OK(lathe_add(b2, b2i, i32(b2, 1), &b2o[0]));
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  float half = 0.5f;
  lathe_value_t hv;
  CHECK_OK(lathe_constant(b2, &s0, &half, sizeof half, &hv));
  CHECK_OK(lathe_mul(b2, b2y, hv, &b2o[1]));
  CHECK_OK(lathe_function_return(b2, b2o, 2));
  lathe_value_t st2[2] = {i32(body, 0), y}, r2[2];
  CHECK_OK(lathe_while(body, c2, b2, st2, 2, r2, 2, &n));
  CHECK_OK(lathe_add(body, r2[1], bh, &y));
  CHECK_OK(lathe_add(body, bi, i32(body, 1), &next));
  lathe_value_t bo[2] = {next, y};
  CHECK_OK(lathe_function_return(body, bo, 2));
  lathe_value_t st[2] = {i32(fn, 0), h0};
  CHECK_OK(lathe_while(fn, cond, body, st, 2, r, 2, &n));
  o[0] = r[1];
  /* If: its predicate from split values (a sum AllReduced), branches on split values */
  lathe_value_t sum, pred;
  int all[2] = {0, 1};
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, h0, all, 2, &sum));
  float zero = 0;
  lathe_value_t z;
  CHECK_OK(lathe_constant(fn, &s0, &zero, sizeof zero, &z));
  CHECK_OK(lathe_greater_than(fn, sum, z, &pred));
  lathe_function_t t = closure_of(fn), e = closure_of(fn);
  CHECK_OK(lathe_mul(t, h0, h0, &v));
  CHECK_OK(lathe_function_return(t, &v, 1));
  CHECK_OK(lathe_neg(e, h0, &v));
  CHECK_OK(lathe_function_return(e, &v, 1));
  CHECK_OK(lathe_if(fn, pred, t, e, &o[1], 1, &n));
  o[2] = r[1];
  const char *specs[] = {"x,-", "x,-", NULL};
  ret(p, fn, 3, o, specs);
}
TEST(partition_loop) {
  check_all("loop", b_loop, 0);
  check_stats("loop", b_loop, "", -1);
}

/* ---- a While's state follows the sharding its body computes it in (a fixed point of dry runs of
 * the body, docs/ARCHITECTURE.md "Control flow"): checked on the partitioned body (collectives,
 * the state's local shape), then run as above ---- */

/* A While of 3 iterations over (i, acc), acc from init: acc' = step(body, acc, x), x from main. */
typedef lathe_value_t (*step_fn)(lathe_function_t body, lathe_value_t acc, lathe_value_t x);
static lathe_value_t counted_loop(lathe_function_t fn, lathe_value_t init, lathe_value_t x, step_fn step) {
  lathe_shape si = tst_shape0(LATHE_DTYPE_INT32), sa;
  CHECK_OK(lathe_value_shape(init, &sa));
  lathe_function_t cond = closure_of(fn), body = closure_of(fn);
  lathe_value_t ci = tst_param(cond, NULL, si), v, r[2];
  tst_param(cond, NULL, sa);
  CHECK_OK(lathe_less_than(cond, ci, i32(cond, 3), &v));
  CHECK_OK(lathe_function_return(cond, &v, 1));
  lathe_value_t bi = tst_param(body, NULL, si), ba = tst_param(body, NULL, sa), bo[2];
  CHECK_OK(lathe_add(body, bi, i32(body, 1), &bo[0]));
  bo[1] = step(body, ba, x);
  CHECK_OK(lathe_function_return(body, bo, 2));
  lathe_value_t st[2] = {i32(fn, 0), init};
  int n = 0;
  CHECK_OK(lathe_while(fn, cond, body, st, 2, r, 2, &n));
  return r[1];
}
static lathe_value_t step_add(lathe_function_t body, lathe_value_t acc, lathe_value_t x) {
  lathe_value_t v = NULL;
  CHECK_OK(lathe_add(body, x, acc, &v));
  return v;
}
static lathe_value_t step_transpose(lathe_function_t body, lathe_value_t acc, lathe_value_t x) {
  const int perm[2] = {1, 0};
  lathe_value_t v = NULL;
  CHECK_OK(lathe_transpose(body, acc, perm, 2, &v));
  return v;
}

/* a zeros accumulator (replicated: a broadcast constant) plus a parameter split by rows: the state
 * is sliced once before the loop and computed split, not gathered every iteration */
static void b_loop_follow(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(8, 6), "x,-"), z, o;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32), s = F32(8, 6);
  float zero = 0;
  CHECK_OK(lathe_constant(fn, &s0, &zero, sizeof zero, &z));
  CHECK_OK(lathe_broadcast_in_dim(fn, z, &s, NULL, 0, &z));
  o = counted_loop(fn, z, x, step_add);
  const char *specs[] = {"x,-"};
  ret(p, fn, 1, &o, specs);
}
/* the body keeps the state's split: nothing changes */
static void b_loop_keep(prog *p, lathe_function_t fn) {
  lathe_value_t a = param(p, fn, F32(8, 6), "x,-"), x = param(p, fn, F32(8, 6), "x,-");
  lathe_value_t o = counted_loop(fn, a, x, step_add);
  const char *specs[] = {NULL};
  ret(p, fn, 1, &o, specs);
}
/* the state split by rows, the body computing it split by columns (over both mesh axes where the
 * mesh has two): moving the initial value once beats resharding the result every iteration */
static void b_loop_conflict(prog *p, lathe_function_t fn) {
  lathe_value_t a = param(p, fn, F32(8, 8), "x,-"), x = param(p, fn, F32(8, 8), "-,xy");
  lathe_value_t o = counted_loop(fn, a, x, step_add);
  const char *specs[] = {"x,-"};
  ret(p, fn, 1, &o, specs);
}
/* a transposed state: each sharding makes the body prefer the other, no fixed point -- after the
 * dry runs' cap the state keeps its initial split, the body's result moved back to it */
static void b_loop_oscillate(prog *p, lathe_function_t fn) {
  lathe_value_t a = param(p, fn, F32(8, 8), "x,-");
  lathe_value_t o = counted_loop(fn, a, NULL, step_transpose);
  const char *specs[] = {"x,-"};
  ret(p, fn, 1, &o, specs);
}

/* build partitioned by the pass alone on an sx x sy mesh: its While's body holds want_coll
 * collectives and takes the accumulator (state 1) in local shape want; the program has main, cond
 * and body only (the dry runs of the body leave nothing behind). */
static void check_loop_body(const char *what, build_fn build, int sx, int sy, int want_coll, lathe_shape want) {
  lathe_backend_t be = NULL;
  char cfg[32];
  snprintf(cfg, sizeof cfg, "lathe:cpu,devices=%d", sx * sy);
  CHECK_OK(lathe_backend_new(cfg, &be));
  if (!be) return;
  const int sizes[2] = {sx, sy};
  const char *names[2] = {AXIS_X, AXIS_Y};
  lathe_mesh mesh = {"m", 2, sizes, names, NULL};
  lathe_builder_t b, dst = NULL;
  prog p;
  memset(&p, 0, sizeof p);
  CHECK_OK(lathe_builder_new(be, what, &b));
  CHECK_OK(lathe_builder_auto_sharding(b, &mesh, 1));
  build(&p, lathe_builder_main(b));
  lathe_partition_report rep;
  CHECK_OK(lathe_partition(b, &dst, &rep));
  CHECK(dst, "%s: not partitioned: %s", what, rep.declined ? rep.declined : "?");
  const lathe_function *body = NULL;
  for (int i = 0; dst && i < dst->main_fn->n_nodes; i++)
    if (dst->main_fn->nodes[i]->op == LATHE_OP_WHILE) body = lathe_attr_while_body(dst->main_fn->nodes[i]);
  CHECK(!dst || body, "%s: no While", what);
  if (body) {
    int coll = 0;
    for (int i = 0; i < body->n_nodes; i++) coll += lathe_op_kind_of(body->nodes[i]->op) == LATHE_KIND_COLLECTIVE;
    CHECK(coll == want_coll, "%s (%dx%d): %d collectives in the body, want %d", what, sx, sy, coll, want_coll);
    const lathe_shape *ls = &body->params[1]->shape;
    CHECK(ls->dims[0] == want.dims[0] && ls->dims[1] == want.dims[1], "%s (%dx%d): state local [%lld, %lld], want [%lld, %lld]",
          what, sx, sy, (long long)ls->dims[0], (long long)ls->dims[1], (long long)want.dims[0], (long long)want.dims[1]);
    CHECK(dst->n_fns == 3, "%s: %d functions, want 3", what, dst->n_fns);
  }
  lathe_builder_free(dst);
  lathe_builder_free(b);
  lathe_backend_free(be);
}

TEST(partition_loop_state_follows_body) {
  check_loop_body("loop follow", b_loop_follow, 2, 1, 0, F32(4, 6));
  check_loop_body("loop follow", b_loop_follow, 2, 2, 0, F32(4, 6));
  check_all("loop follow", b_loop_follow, 0);
  check_loop_body("loop keep", b_loop_keep, 2, 1, 0, F32(4, 6));
  check_all("loop keep", b_loop_keep, 0);
  /* 2x1: an AllToAll either way, a tie the body's split takes; 2x2: the body's [8, 2] shards (half a
   * row shard's bytes moved once) beat gathering them every iteration */
  check_loop_body("loop conflict", b_loop_conflict, 2, 1, 0, F32(8, 4));
  check_loop_body("loop conflict", b_loop_conflict, 2, 2, 0, F32(8, 2));
  check_all("loop conflict", b_loop_conflict, 0);
  check_loop_body("loop oscillate", b_loop_oscillate, 2, 1, 1, F32(4, 8));
  check_all("loop oscillate", b_loop_oscillate, 0);
}

/* ---- DynamicSlice and DynamicUpdateSlice: axes taken whole keep their split ---- */
static void b_dynamic_slice(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "x,y"), u = param(p, fn, F32(4, 2), "x,-"), o[2], start[2];
  int64_t dims[2] = {4, 3};
  int32_t one = 1, zero = 0;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_INT32);
  CHECK_OK(lathe_constant(fn, &s0, &zero, sizeof zero, &start[0]));
  CHECK_OK(lathe_constant(fn, &s0, &one, sizeof one, &start[1]));
  CHECK_OK(lathe_dynamic_slice(fn, x, start, 2, dims, 2, &o[0]));       /* rows whole: their split kept */
  CHECK_OK(lathe_dynamic_update_slice(fn, x, u, start, 2, &o[1]));      /* columns 1..2 updated */
  const char *specs[] = {"x,-", "x,y"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_dynamic_slice) { check_all("dynamic_slice", b_dynamic_slice, 0); }

/* ---- ops along some axes: Reverse, CumSum, ArgMinMax, FusedSoftmax, FusedLayerNorm,
 * FusedActivation keep the other axes' split ---- */
static void b_axis_local(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "x,y"), g = param(p, fn, F32(6), "x"), o[6];
  int ax[1] = {1}, ln[1] = {-1};
  CHECK_OK(lathe_reverse(fn, x, ax, 1, &o[0]));
  CHECK_OK(lathe_cum_sum(fn, x, 0, false, false, &o[1]));
  CHECK_OK(lathe_arg_min_max(fn, x, 1, LATHE_DTYPE_INT32, false, &o[2]));
  CHECK_OK(lathe_fused_softmax(fn, x, 1, &o[3]));
  CHECK_OK(lathe_fused_layer_norm(fn, x, ln, 1, 1e-5, g, NULL, &o[4]));
  CHECK_OK(lathe_fused_activation(fn, x, LATHE_ACTIVATION_SIGMOID, &o[5]));
  const char *specs[] = {"x,y", "x,-", "x", "x,-", NULL, "y,x"};
  ret(p, fn, 6, o, specs);
}
TEST(partition_axis_local) { check_all("axis_local", b_axis_local, 0); }

/* ---- bad shardings; uneven shards run whole (padded, as XLA's tiles) ---- */
/* ---- FusedDense: batch split (data parallel), output columns split (its bias alike), input rows
 * split alike on x and w (partial sums; with a bias and an activation, which follow the sum), rows
 * split on w only (x sliced), the [out, in] layout; FusedActivationVJP elementwise ---- */
static void b_fused_dense(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 8), "x,-"), h = param(p, fn, F32(4, 8), NULL), w1 = param(p, fn, F32(8, 16), "-,y");
  lathe_value_t b1 = param(p, fn, F32(16), "y"), w2 = param(p, fn, F32(16, 6), "y,-"), b2 = param(p, fn, F32(6), NULL);
  lathe_value_t wt = param(p, fn, F32(6, 8), "-,x"), h2 = param(p, fn, F32(4, 16), NULL);
  lathe_value_t o[7], u;
  CHECK_OK(lathe_fused_dense(fn, x, wt, b2, LATHE_ACTIVATION_TANH, LATHE_DENSE_OUTPUTS_INPUT, &o[0])); /* batch */
  CHECK_OK(lathe_fused_dense(fn, h, w1, b1, LATHE_ACTIVATION_RELU, LATHE_DENSE_INPUT_OUTPUTS, &u));    /* columns */
  CHECK_OK(lathe_fused_dense(fn, u, w2, b2, LATHE_ACTIVATION_SIGMOID, LATHE_DENSE_INPUT_OUTPUTS, &o[1])); /* rows, bias */
  CHECK_OK(lathe_fused_dense(fn, u, w2, NULL, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, &o[2])); /* rows, bare */
  CHECK_OK(lathe_fused_dense(fn, h2, w2, NULL, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, &o[3])); /* x sliced */
  CHECK_OK(lathe_fused_dense(fn, h2, w2, b2, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, &o[6]));
  CHECK_OK(lathe_fused_activation_vjp(fn, NULL, u, u, LATHE_ACTIVATION_GELU, &o[4])); /* [4, 16], columns split */
  CHECK_OK(lathe_fused_activation_vjp(fn, o[0], NULL, o[0], LATHE_ACTIVATION_TANH, &o[5]));
  const char *specs[] = {"x,-", NULL, "-,y", NULL, "-,y", "x,-", NULL};
  ret(p, fn, 7, o, specs);
}
TEST(partition_fused_dense) { check_all("fused_dense", b_fused_dense, 0); }

TEST(partition_bad_shardings) {
  lathe_backend_t be = NULL;
  CHECK_OK(lathe_backend_new("lathe:cpu,devices=2", &be));
  if (!be) return;
  const int sizes[1] = {2};
  const char *names[1] = {"x"}, *bad[1] = {"model"}, *good[1] = {"x"};
  lathe_mesh mesh = {"m", 1, sizes, names, NULL};
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "bad", &b));
  CHECK_OK(lathe_builder_auto_sharding(b, &mesh, 1));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape s = F32(3, 4);
  lathe_sharding sh = {.mesh = "m", .rank = 2, .axes = {NULL, bad}, .n_axes = {0, 1}};
  lathe_value_t w, y;
  CHECK_ERR(lathe_parameter_sharded(fn, "w", &s, &sh, &w), INVALID_ARGUMENT,
            "Parameter \"w\": mesh \"m\" has no axis \"model\" (sharding of axis 1; the mesh's axes: \"x\")");
  sh.mesh = "other";
  CHECK_ERR(lathe_parameter_sharded(fn, "w", &s, &sh, &w), INVALID_ARGUMENT, "Parameter \"w\": unknown mesh \"other\"");
  const int assign1[1] = {1};
  CHECK_ERR(lathe_builder_assign_devices(b, assign1, 1), INVALID_ARGUMENT, "1 devices for a program distributed over 2");
  lathe_sharding uneven = {.mesh = "m", .rank = 1, .axes = {good}, .n_axes = {1}};
  CHECK_OK(lathe_parameter_sharded(fn, "w", &s, &uneven, &w));
  CHECK_OK(lathe_neg(fn, w, &y));
  const lathe_sharding *outs[1] = {&uneven};
  CHECK_OK(lathe_function_return_sharded(fn, &y, outs, 1));
  lathe_executable_stats st;
  lathe_executable_t e = compile_stats(b, &st);
  if (e)
    CHECK(!st.partitioned && st.partition_declined && strstr(st.partition_declined, "does not divide"),
          "3 rows over 2 devices run whole: %s", st.partition_declined ? st.partition_declined : "(none)");
  lathe_executable_free(e);
  lathe_backend_free(be);
}

/* ---- backward: values computed from replicated ones take the outputs' sharding ---- */
static void b_backward(prog *p, lathe_function_t fn) {
  lathe_value_t r = param(p, fn, F32(6), NULL), x = param(p, fn, F32(4, 6), "x,-");
  lathe_value_t io, bc, y, t, o[3];
  lathe_shape s = F32(6, 4), bs = F32(6, 4);
  int ax[1] = {0}, perm[2] = {1, 0};
  CHECK_OK(lathe_iota(fn, &s, 1, &io));               /* [6, 4] counting along axis 1 */
  CHECK_OK(lathe_broadcast_in_dim(fn, r, &bs, ax, 1, &bc));
  CHECK_OK(lathe_add(fn, io, bc, &y));
  CHECK_OK(lathe_transpose(fn, y, perm, 2, &t));      /* [4, 6] */
  CHECK_OK(lathe_mul(fn, t, x, &o[1]));
  o[0] = y, o[2] = t;
  const char *specs[] = {"y,x", "x,y", "yx,-"};
  ret(p, fn, 3, o, specs);
}
TEST(partition_backward) { check_all("backward", b_backward, 0); }

/* ---- backward hints through the other ops whose rule keeps a split: each program's iotas (open
 * values) take the split their consumers' rule would keep from the outputs' shardings, and are
 * computed split; where the rule would gather, no hint reaches them and they are computed whole.
 * Checked on the partitioned program's local shapes (the pass alone), then run as above. ---- */

/* build partitioned by the pass alone on a 2x1 mesh: the local shapes of its main function's
 * nodes of op `op`, in order, equal want[0..n). */
static void check_local(const char *what, build_fn build, lathe_op op, const lathe_shape *want, int n) {
  lathe_backend_t be = NULL;
  CHECK_OK(lathe_backend_new("lathe:cpu,devices=2", &be));
  if (!be) return;
  const int sizes[2] = {2, 1};
  const char *names[2] = {AXIS_X, AXIS_Y};
  lathe_mesh mesh = {"m", 2, sizes, names, NULL};
  lathe_builder_t b, dst = NULL;
  prog p;
  memset(&p, 0, sizeof p);
  CHECK_OK(lathe_builder_new(be, what, &b));
  CHECK_OK(lathe_builder_auto_sharding(b, &mesh, 1));
  build(&p, lathe_builder_main(b));
  lathe_partition_report rep;
  CHECK_OK(lathe_partition(b, &dst, &rep));
  CHECK(dst, "%s: not partitioned: %s", what, rep.declined ? rep.declined : "?");
  int k = 0;
  for (int i = 0; dst && i < dst->main_fn->n_nodes; i++) {
    const lathe_node *nd = dst->main_fn->nodes[i];
    if (nd->op != op) continue;
    bool same = k < n && nd->shape.rank == want[k].rank;
    for (int a = 0; same && a < want[k].rank; a++) same = nd->shape.dims[a] == want[k].dims[a];
    CHECK(same, "%s: %s %d has local dims [%lld, %lld, %lld] (rank %d)", what, lathe_op_name(op), k,
          (long long)nd->shape.dims[0], (long long)nd->shape.dims[1], (long long)nd->shape.dims[2], nd->shape.rank);
    k++;
  }
  CHECK(!dst || k == n, "%s: %d %s nodes, want %d", what, k, lathe_op_name(op), n);
  lathe_builder_free(dst);
  lathe_builder_free(b);
  lathe_backend_free(be);
}

static lathe_value_t iota(lathe_function_t fn, lathe_shape s, int axis) {
  lathe_value_t v = NULL;
  CHECK_OK(lathe_iota(fn, &s, axis, &v));
  return v;
}

/* Reshape: a result split maps back to the operand axis starting at the same element where both
 * divide by it; else (no axis starts there, or it does not divide) no hint: the iota runs whole */
static void b_hint_reshape(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(2, 2, 6), "x,-,-"), y = param(p, fn, F32(4, 6), "-,x"), z = param(p, fn, F32(12), "x");
  lathe_value_t o[4];
  int64_t d1[3] = {2, 2, 6}, d2[1] = {24}, d3[2] = {4, 6}, d4[1] = {12};
  CHECK_OK(lathe_reshape(fn, iota(fn, F32(4, 6), 1), d1, 3, &o[0])); /* axis 0: 4 -> 2, both split */
  CHECK_OK(lathe_add(fn, o[0], x, &o[0]));
  CHECK_OK(lathe_reshape(fn, iota(fn, F32(4, 6), 1), d2, 1, &o[1])); /* axis 0 -> the merged axis */
  CHECK_OK(lathe_reshape(fn, iota(fn, F32(6, 4), 0), d3, 2, &o[2])); /* result axis 1 starts at element 4 */
  CHECK_OK(lathe_add(fn, o[2], y, &o[2]));
  CHECK_OK(lathe_reshape(fn, iota(fn, F32(3, 4), 1), d4, 1, &o[3])); /* axis 0 of 3: no split of 2 */
  CHECK_OK(lathe_add(fn, o[3], z, &o[3]));
  const char *specs[] = {"x,-,-", "x", "-,x", "x"};
  ret(p, fn, 4, o, specs);
}
TEST(partition_hint_reshape) {
  const lathe_shape want[] = {F32(2, 6), F32(2, 6), F32(6, 4), F32(3, 4)};
  check_local("hint reshape", b_hint_reshape, LATHE_OP_IOTA, want, 4);
  check_all("hint reshape", b_hint_reshape, 0);
}

/* reductions: kept axes map back, reduced axes stay whole */
static void b_hint_reduce(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 2), "x,-"), o[2];
  int a1[1] = {1}, a0[1] = {0};
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, iota(fn, F32(4, 6, 2), 2), a1, 1, &o[0]));
  CHECK_OK(lathe_add(fn, o[0], x, &o[0]));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_MAX, iota(fn, F32(6, 4), 0), a0, 1, &o[1]));
  const char *specs[] = {"x,-", "x"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_hint_reduce) {
  const lathe_shape want[] = {F32(2, 6, 2), F32(6, 2)};
  check_local("hint reduce", b_hint_reduce, LATHE_OP_IOTA, want, 2);
  check_all("hint reduce", b_hint_reduce, 0);
}

/* DotGeneral: result batch axes to both operands' batch axes, free axes to the operand's; the
 * contracting axes stay whole */
static void b_hint_dot(prog *p, lathe_function_t fn) {
  lathe_value_t w = param(p, fn, F32(8, 6), NULL), a = param(p, fn, F32(4, 8), NULL), o[3];
  int c0[1] = {0}, c1[1] = {1}, c2[1] = {2}, b0[1] = {0};
  CHECK_OK(lathe_dot_general(fn, iota(fn, F32(4, 8), 1), c1, 1, NULL, 0, w, c0, 1, NULL, 0, NULL, &o[0]));
  CHECK_OK(lathe_dot_general(fn, a, c1, 1, NULL, 0, iota(fn, F32(8, 6), 0), c0, 1, NULL, 0, NULL, &o[1]));
  lathe_value_t l = iota(fn, F32(2, 4, 8), 2), r = iota(fn, F32(2, 8, 6), 1);
  CHECK_OK(lathe_dot_general(fn, l, c2, 1, b0, 1, r, c1, 1, b0, 1, NULL, &o[2]));
  const char *specs[] = {"x,-", "-,x", "x,-,-"};
  ret(p, fn, 3, o, specs);
}
TEST(partition_hint_dot) {
  const lathe_shape want[] = {F32(2, 8), F32(8, 3), F32(1, 4, 8), F32(1, 8, 6)};
  check_local("hint dot", b_hint_dot, LATHE_OP_IOTA, want, 4);
  check_all("hint dot", b_hint_dot, 0);
}

/* FusedDense: x's batch axes, the weight's and the bias's output axes */
static void b_hint_dense(prog *p, lathe_function_t fn) {
  lathe_value_t w = param(p, fn, F32(8, 6), NULL), x = param(p, fn, F32(4, 8), NULL), b = param(p, fn, F32(6), NULL);
  lathe_value_t o[2], nb[2];
  CHECK_OK(lathe_neg(fn, b, &nb[0]));
  CHECK_OK(lathe_neg(fn, b, &nb[1]));
  CHECK_OK(lathe_fused_dense(fn, iota(fn, F32(4, 8), 1), w, nb[0], LATHE_ACTIVATION_TANH, LATHE_DENSE_INPUT_OUTPUTS, &o[0]));
  CHECK_OK(lathe_fused_dense(fn, x, iota(fn, F32(8, 6), 0), nb[1], LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, &o[1]));
  const char *specs[] = {"x,-", "-,x"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_hint_dense) {
  const lathe_shape want[] = {F32(2, 8), F32(8, 3)}, neg[] = {F32(6), F32(3)};
  check_local("hint dense", b_hint_dense, LATHE_OP_IOTA, want, 2);
  check_local("hint dense", b_hint_dense, LATHE_OP_NEG, neg, 2);
  check_all("hint dense", b_hint_dense, 0);
}

/* A contraction whose other operand's contracting axis is split (and kept: partial sums cost less
 * than gathering it) takes that mesh axis: no hint on it reaches the iota, which runs whole and is
 * sliced for free (one ReduceScatter each; hinted, it would be moved by an AllToAll as well) */
static void b_hint_dot_taken(prog *p, lathe_function_t fn) {
  lathe_value_t a = param(p, fn, F32(2, 64), "-,x"), x = param(p, fn, F32(2, 64), "-,x"), o[2];
  int c0[1] = {0}, c1[1] = {1};
  CHECK_OK(lathe_dot_general(fn, a, c1, 1, NULL, 0, iota(fn, F32(64, 4), 0), c0, 1, NULL, 0, NULL, &o[0]));
  CHECK_OK(lathe_fused_dense(fn, x, iota(fn, F32(64, 4), 0), NULL, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, &o[1]));
  const char *specs[] = {"-,x", "-,x"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_hint_dot_taken) {
  const lathe_shape want[] = {F32(64, 4), F32(64, 4)};
  check_local("hint dot taken", b_hint_dot_taken, LATHE_OP_IOTA, want, 2);
  check_stats("hint dot taken", b_hint_dot_taken, "", 2);
  check_all("hint dot taken", b_hint_dot_taken, 0);
}

/* ... but not where the rule gathers that side instead (its shard is smaller than the result's),
 * nor where it is split over another mesh axis (y, of size 1 on check_local's mesh): the iotas are
 * computed split (one AllGather, of a) */
static void b_hint_dot_kept(prog *p, lathe_function_t fn) {
  lathe_value_t a = param(p, fn, F32(2, 4), "-,x"), x = param(p, fn, F32(2, 64), "-,y"), o[2];
  int c0[1] = {0}, c1[1] = {1};
  CHECK_OK(lathe_dot_general(fn, a, c1, 1, NULL, 0, iota(fn, F32(4, 64), 0), c0, 1, NULL, 0, NULL, &o[0]));
  CHECK_OK(lathe_fused_dense(fn, x, iota(fn, F32(64, 4), 0), NULL, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, &o[1]));
  const char *specs[] = {"-,x", "-,x"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_hint_dot_kept) {
  const lathe_shape want[] = {F32(4, 32), F32(64, 2)};
  check_local("hint dot kept", b_hint_dot_kept, LATHE_OP_IOTA, want, 2);
  check_stats("hint dot kept", b_hint_dot_kept, "", 1);
  check_all("hint dot kept", b_hint_dot_kept, 0);
}

/* Slice, Pad, Concatenate: the axes they leave alone (every operand of a Concatenate, which takes
 * the split though its first operand is replicated); the axes they change stay whole */
static void b_hint_slice_pad_concat(prog *p, lathe_function_t fn) {
  lathe_value_t r = param(p, fn, F32(4, 3), NULL), o[7], fill, two[2];
  int64_t st[2] = {0, 1}, li[2] = {4, 5}, st2[2] = {1, 0}, li2[2] = {5, 4};
  float z = -1;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  CHECK_OK(lathe_constant(fn, &s0, &z, sizeof z, &fill));
  lathe_pad_axis cols[2] = {{0, 0, 0}, {1, 0, 0}}, rows[2] = {{1, 1, 0}, {0, 0, 0}}, shift[2] = {{1, -1, 0}, {0, 0, 0}};
  CHECK_OK(lathe_slice(fn, iota(fn, F32(4, 6), 1), st, li, NULL, 2, &o[0]));
  CHECK_OK(lathe_pad(fn, iota(fn, F32(4, 5), 1), fill, cols, 2, &o[1]));
  two[0] = r, two[1] = iota(fn, F32(4, 3), 1);
  CHECK_OK(lathe_concatenate(fn, 1, two, 2, &o[2]));
  CHECK_OK(lathe_slice(fn, iota(fn, F32(6, 4), 1), st2, li2, NULL, 2, &o[3])); /* rows 1..4: gathered */
  CHECK_OK(lathe_pad(fn, iota(fn, F32(4, 5), 1), fill, rows, 2, &o[4]));      /* padded rows */
  two[1] = iota(fn, F32(4, 3), 0);
  CHECK_OK(lathe_concatenate(fn, 1, two, 2, &o[5])); /* split along the concatenated axis */
  CHECK_OK(lathe_pad(fn, iota(fn, F32(4, 5), 1), fill, shift, 2, &o[6]));     /* rows shifted: sizes kept */
  const char *specs[] = {"x,-", "x,-", "x,-", "x,-", "x,-", "-,x", "x,-"};
  ret(p, fn, 7, o, specs);
}
TEST(partition_hint_slice_pad_concat) {
  const lathe_shape want[] = {F32(2, 6), F32(2, 5), F32(2, 3), F32(6, 4), F32(4, 5), F32(4, 3), F32(4, 5)};
  check_local("hint slice_pad_concat", b_hint_slice_pad_concat, LATHE_OP_IOTA, want, 7);
  const lathe_shape cat[] = {F32(2, 6), F32(4, 6)};
  check_local("hint slice_pad_concat", b_hint_slice_pad_concat, LATHE_OP_CONCATENATE, cat, 2);
  check_all("hint slice_pad_concat", b_hint_slice_pad_concat, 0);
}

/* ops along some axes (Reverse, CumSum, ArgMinMax, FusedSoftmax, FusedLayerNorm, FusedActivation,
 * FFT, a gated FusedActivationVJP): the other axes; split along their axis, no hint */
static void b_hint_axis_local(prog *p, lathe_function_t fn) {
  lathe_value_t o[8];
  int ax[1] = {1}, ln[1] = {-1};
  int64_t n6[1] = {6};
  CHECK_OK(lathe_reverse(fn, iota(fn, F32(4, 6), 1), ax, 1, &o[0]));
  CHECK_OK(lathe_cum_sum(fn, iota(fn, F32(4, 6), 1), 1, false, false, &o[1]));
  CHECK_OK(lathe_arg_min_max(fn, iota(fn, F32(4, 6), 1), 1, LATHE_DTYPE_INT32, false, &o[2]));
  CHECK_OK(lathe_fused_softmax(fn, iota(fn, F32(4, 6), 1), 1, &o[3]));
  CHECK_OK(lathe_fused_layer_norm(fn, iota(fn, F32(4, 6), 1), ln, 1, 1e-5, NULL, NULL, &o[4]));
  CHECK_OK(lathe_fused_activation(fn, iota(fn, F32(4, 6), 1), LATHE_ACTIVATION_SWIGLU, &o[5])); /* [4, 3] */
  CHECK_OK(lathe_fft(fn, iota(fn, F32(4, 6), 1), LATHE_FFT_TYPE_FORWARD_REAL, n6, 1, &o[6]));
  lathe_value_t x = iota(fn, F32(4, 6), 1), dy = iota(fn, F32(4, 3), 1);
  CHECK_OK(lathe_fused_activation_vjp(fn, NULL, x, dy, LATHE_ACTIVATION_SWIGLU, &o[7]));
  const char *specs[] = {"x,-", "x,-", "x", "x,-", "x,-", "x,-", "x,-", "x,-"};
  ret(p, fn, 8, o, specs);
}

static void b_hint_axis_local_whole(prog *p, lathe_function_t fn) {
  lathe_value_t o[4];
  int64_t n6[1] = {6};
  CHECK_OK(lathe_cum_sum(fn, iota(fn, F32(4, 6), 0), 1, false, false, &o[0]));
  CHECK_OK(lathe_fused_softmax(fn, iota(fn, F32(4, 6), 0), 1, &o[1]));
  CHECK_OK(lathe_fused_activation(fn, iota(fn, F32(4, 8), 0), LATHE_ACTIVATION_SWIGLU, &o[2])); /* resized */
  CHECK_OK(lathe_fft(fn, iota(fn, F32(4, 6), 0), LATHE_FFT_TYPE_FORWARD_REAL, n6, 1, &o[3]));
  const char *specs[] = {"-,x", "-,x", "-,x", "-,x"};
  ret(p, fn, 4, o, specs);
}
TEST(partition_hint_axis_local) {
  lathe_shape want[9], whole[4];
  for (int i = 0; i < 9; i++) want[i] = i < 8 ? F32(2, 6) : F32(2, 3); /* the last: the VJP's gradient */
  for (int i = 0; i < 4; i++) whole[i] = i == 2 ? F32(4, 8) : F32(4, 6);
  check_local("hint axis_local", b_hint_axis_local, LATHE_OP_IOTA, want, 9);
  check_all("hint axis_local", b_hint_axis_local, 0);
  check_local("hint axis_local whole", b_hint_axis_local_whole, LATHE_OP_IOTA, whole, 4);
  check_all("hint axis_local whole", b_hint_axis_local_whole, 0);
}

/* ConvGeneral: the input's batch axis and the kernel's output channels (not with channel groups);
 * spatial axes get no hint */
static void b_hint_conv(prog *p, lathe_function_t fn) {
  lathe_value_t k = param(p, fn, F32(4, 2, 3), NULL), x = param(p, fn, F32(4, 2, 6), NULL), xg = param(p, fn, F32(4, 4, 6), NULL);
  lathe_value_t o[4];
  const int sp[1] = {2};
  lathe_conv_axes axes = {.input_batch = 0, .input_channels = 1, .input_spatial = sp, .n_input_spatial = 1,
                          .kernel_input_channels = 1, .kernel_output_channels = 0, .kernel_spatial = sp,
                          .n_kernel_spatial = 1, .output_batch = 0, .output_channels = 1, .output_spatial = sp,
                          .n_output_spatial = 1};
  lathe_conv_params groups = {.channel_group_count = 2};
  CHECK_OK(lathe_conv_general(fn, iota(fn, F32(4, 2, 6), 2), k, &axes, NULL, &o[0]));  /* [4, 4, 4]: batch */
  CHECK_OK(lathe_conv_general(fn, x, iota(fn, F32(4, 2, 3), 2), &axes, NULL, &o[1]));  /* output channels */
  CHECK_OK(lathe_conv_general(fn, iota(fn, F32(4, 2, 6), 0), k, &axes, NULL, &o[2]));  /* width split */
  CHECK_OK(lathe_conv_general(fn, xg, iota(fn, F32(4, 2, 3), 2), &axes, &groups, &o[3])); /* grouped */
  const char *specs[] = {"x,-,-", "-,x,-", "-,-,x", "-,x,-"};
  ret(p, fn, 4, o, specs);
}
TEST(partition_hint_conv) {
  const lathe_shape want[] = {F32(2, 2, 6), F32(2, 2, 3), F32(4, 2, 6), F32(4, 2, 3)};
  check_local("hint conv", b_hint_conv, LATHE_OP_IOTA, want, 4);
  check_all("hint conv", b_hint_conv, 0);
}

/* DynamicSlice and DynamicUpdateSlice: the axes they take whole (operand and update) */
static void b_hint_dynamic_slice(prog *p, lathe_function_t fn) {
  lathe_value_t o[4], start[2];
  int64_t cols[2] = {4, 3}, rows[2] = {2, 6};
  int32_t one = 1, zero = 0;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_INT32);
  CHECK_OK(lathe_constant(fn, &s0, &zero, sizeof zero, &start[0]));
  CHECK_OK(lathe_constant(fn, &s0, &one, sizeof one, &start[1]));
  CHECK_OK(lathe_dynamic_slice(fn, iota(fn, F32(4, 6), 1), start, 2, cols, 2, &o[0]));
  lathe_value_t x = iota(fn, F32(4, 6), 1), u = iota(fn, F32(4, 2), 1);
  CHECK_OK(lathe_dynamic_update_slice(fn, x, u, start, 2, &o[1]));
  CHECK_OK(lathe_dynamic_slice(fn, iota(fn, F32(4, 6), 1), start, 2, rows, 2, &o[2])); /* rows not whole */
  lathe_value_t y = iota(fn, F32(4, 6), 1), v = iota(fn, F32(2, 6), 1);
  CHECK_OK(lathe_dynamic_update_slice(fn, y, v, start, 2, &o[3])); /* rows 0..1 updated */
  const char *specs[] = {"x,-", "x,-", "x,-", "x,-"};
  ret(p, fn, 4, o, specs);
}
TEST(partition_hint_dynamic_slice) {
  const lathe_shape want[] = {F32(2, 6), F32(2, 6), F32(2, 2), F32(4, 6), F32(4, 6), F32(2, 6)};
  check_local("hint dynamic_slice", b_hint_dynamic_slice, LATHE_OP_IOTA, want, 6);
  check_all("hint dynamic_slice", b_hint_dynamic_slice, 0);
}

/* Gather: the result's batch axes to the indices' axes, its offset axes to the operand's axes taken
 * whole and not indexed; an indexed axis stays whole (iotas along axes the hints leave whole) */
static void b_hint_gather(prog *p, lathe_function_t fn) {
  lathe_value_t ids = param(p, fn, TST_SHAPE(LATHE_DTYPE_INT32, 4), NULL), o[2];
  const int off[1] = {1}, col[1] = {0}, map[1] = {0};
  const int64_t sizes[2] = {1, 6};
  lathe_value_t t0 = iota(fn, F32(8, 6), 0), t1 = iota(fn, F32(6, 6), 0), i1 = iota(fn, TST_SHAPE(LATHE_DTYPE_INT32, 4, 1), 1);
  CHECK_OK(lathe_gather(fn, t0, ids, 1, off, 1, col, 1, map, 1, sizes, 2, false, &o[0]));
  CHECK_OK(lathe_gather(fn, t1, i1, 1, off, 1, col, 1, map, 1, sizes, 2, false, &o[1]));
  const char *specs[] = {"-,x", "x,-"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_hint_gather) {
  const lathe_shape want[] = {F32(8, 3), F32(6, 6), TST_SHAPE(LATHE_DTYPE_INT32, 2, 1)};
  check_local("hint gather", b_hint_gather, LATHE_OP_IOTA, want, 3);
  check_all("hint gather", b_hint_gather, 0);
}

/* ScatterSum/Max/Min: the result's axes that are neither indexed nor inserted to the operand's and
 * the updates' window axes; an indexed axis and the indices stay whole */
static void b_hint_scatter(prog *p, lathe_function_t fn) {
  lathe_value_t ids = param(p, fn, TST_SHAPE(LATHE_DTYPE_INT32, 4), NULL), o[2];
  const int win[1] = {1}, ins[1] = {0}, map[1] = {0};
  lathe_value_t t0 = iota(fn, F32(8, 6), 0), u0 = iota(fn, F32(4, 6), 0), t1 = iota(fn, F32(8, 6), 1), u1 = iota(fn, F32(4, 6), 1);
  CHECK_OK(lathe_scatter_sum(fn, t0, ids, u0, 1, win, 1, ins, 1, map, 1, false, false, &o[0]));
  CHECK_OK(lathe_scatter_max(fn, t1, ids, u1, 1, win, 1, ins, 1, map, 1, false, false, &o[1]));
  const char *specs[] = {"-,x", "x,-"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_hint_scatter) {
  const lathe_shape want[] = {F32(8, 3), F32(4, 3), F32(8, 6), F32(4, 6)};
  check_local("hint scatter", b_hint_scatter, LATHE_OP_IOTA, want, 4);
  check_all("hint scatter", b_hint_scatter, 0);
}

/* A hinted op of a replicated parameter: the parameter arrives sliced to the split the hint asks
 * of it (free), so the op itself runs on its local shape; a split it cannot keep (a reduced or
 * contracting axis, a sliced one) leaves it whole */
static void b_hint_forward(prog *p, lathe_function_t fn) {
  lathe_value_t w = param(p, fn, F32(4, 6), NULL), a = param(p, fn, F32(8, 6), NULL), b = param(p, fn, F32(6, 4), NULL);
  lathe_value_t o[5];
  int64_t d[3] = {2, 2, 6}, st[2] = {0, 1}, li[2] = {8, 5};
  int ax1[1] = {1}, c1[1] = {1}, c0[1] = {0};
  CHECK_OK(lathe_reshape(fn, w, d, 3, &o[0]));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, a, ax1, 1, &o[1]));
  CHECK_OK(lathe_dot_general(fn, a, c1, 1, NULL, 0, b, c0, 1, NULL, 0, NULL, &o[2]));
  CHECK_OK(lathe_slice(fn, a, st, li, NULL, 2, &o[3]));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_MAX, b, ax1, 1, &o[4])); /* replicated result: whole */
  const char *specs[] = {"x,-,-", "x", "-,x", "x,-", NULL};
  ret(p, fn, 5, o, specs);
}
TEST(partition_hint_forward) {
  /* the local slices take each device's offset: a Slice of the partition ids and a Reshape to a scalar */
  const lathe_shape reshape[] = {tst_shape0(LATHE_DTYPE_INT32), F32(1, 2, 6)}, slice[] = {F32(1), F32(4, 4)};
  const lathe_shape sum[] = {F32(4)}, dot[] = {F32(8, 2)}, max[] = {F32(6)};
  check_local("hint forward reshape", b_hint_forward, LATHE_OP_RESHAPE, reshape, 2);
  check_local("hint forward sum", b_hint_forward, LATHE_OP_REDUCE_SUM, sum, 1);
  check_local("hint forward max", b_hint_forward, LATHE_OP_REDUCE_MAX, max, 1);
  check_local("hint forward dot", b_hint_forward, LATHE_OP_DOT_GENERAL, dot, 1);
  check_local("hint forward slice", b_hint_forward, LATHE_OP_SLICE, slice, 2);
  check_all("hint forward", b_hint_forward, 0);
}

/* A value gathered for one reader (CumSum along its split axis) and wanted split on its other
 * axis by another (an Add to a value split so): the whole copy is sliced, no AllToAll from the
 * split */
static void b_slice_from_whole(prog *p, lathe_function_t fn) {
  lathe_value_t w = param(p, fn, F32(8, 6), "x,-"), v = param(p, fn, F32(8, 6), "-,x"), o[2];
  CHECK_OK(lathe_cum_sum(fn, w, 0, false, false, &o[0]));
  CHECK_OK(lathe_add(fn, w, v, &o[1]));
  const char *specs[] = {NULL, "-,x"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_slice_from_whole) {
  check_stats("slice from whole", b_slice_from_whole, "", 1); /* the AllGather */
  check_all("slice from whole", b_slice_from_whole, 0);
}

/* ---- partial results whose consumer wants them split: ReduceScatter ---- */
static void b_reduce_scatter(prog *p, lathe_function_t fn) {
  lathe_value_t a = param(p, fn, F32(4, 8), "-,xy"), b = param(p, fn, F32(8, 6), "xy,-"), x = param(p, fn, F32(8, 4), "x,-");
  lathe_value_t o[3], d;
  int c1[1] = {1}, c0[1] = {0}, a0[1] = {0};
  CHECK_OK(lathe_dot_general(fn, a, c1, 1, NULL, 0, b, c0, 1, NULL, 0, NULL, &d)); /* [4, 6] partial sums */
  CHECK_OK(lathe_neg(fn, d, &o[0]));
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, x, a0, 1, &o[1])); /* [4] partial over x */
  o[2] = d;
  const char *specs[] = {"yx,-", "x", NULL};
  ret(p, fn, 3, o, specs);
}
TEST(partition_reduce_scatter) { check_all("reduce_scatter", b_reduce_scatter, 0); }

/* ---- many operands (a Concatenate of 70) ---- */
static void b_many(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 1), "x,-"), parts[70], o[1];
  for (int i = 0; i < 70; i++) parts[i] = x;
  CHECK_OK(lathe_concatenate(fn, 1, parts, 70, &o[0]));
  const char *specs[] = {"x,-"};
  ret(p, fn, 1, o, specs);
}
TEST(partition_many_operands) { check_all("many", b_many, 0); }

/* ---- what the pass inserts: a Megatron MLP (columns then rows split) needs one AllReduce, and
 * each device's program plans for its half of the hidden layer only ---- */
static lathe_executable_t megatron(const char *config, lathe_backend_t *out_be);
TEST(partition_megatron_one_all_reduce) {
  lathe_backend_t be = NULL, whole_be = NULL;
  lathe_executable_t e = megatron("lathe:cpu,devices=2", &be), whole = megatron("lathe:cpu,devices=2,partition=0", &whole_be);
  lathe_executable_stats st;
  if (e) {
    CHECK_OK(lathe_executable_get_stats(e, &st));
    CHECK(st.partitioned && st.partition_collectives == 1 && st.partition_fallbacks == 0,
          "partitioned %d, %d collectives (want 1), %d fallbacks", st.partitioned, st.partition_collectives,
          st.partition_fallbacks);
  }
  if (e && whole) {
    int64_t part_bytes = 0, whole_bytes = 0;
    CHECK_OK(lathe_executable_arena_bytes(e, &part_bytes));
    CHECK_OK(lathe_executable_arena_bytes(whole, &whole_bytes));
    /* the hidden layer [8, 256] is the arena's bulk: halved on each device */
    tst_log("megatron MLP arena: %lld bytes per device partitioned, %lld whole", (long long)part_bytes, (long long)whole_bytes);
    CHECK(part_bytes > 0 && part_bytes * 3 <= whole_bytes * 2, "arena per device %lld bytes, whole %lld",
          (long long)part_bytes, (long long)whole_bytes);
  }
  lathe_executable_free(e);
  lathe_executable_free(whole);
  lathe_backend_free(be);
  lathe_backend_free(whole_be);
}

static lathe_executable_t megatron(const char *config, lathe_backend_t *out_be) {
  lathe_backend_t be = NULL;
  CHECK_OK(lathe_backend_new(config, &be));
  *out_be = be;
  if (!be) return NULL;
  const int sizes[1] = {2};
  const char *names[1] = {"model"}, *model[1] = {"model"};
  lathe_mesh mesh = {"m", 1, sizes, names, NULL};
  lathe_sharding cols = {.mesh = "m", .rank = 2, .axes = {NULL, model}, .n_axes = {0, 1}};
  lathe_sharding rows = {.mesh = "m", .rank = 2, .axes = {model, NULL}, .n_axes = {1, 0}};
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "mlp", &b));
  CHECK_OK(lathe_builder_auto_sharding(b, &mesh, 1));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_shape xs = F32(8, 16), w1s = F32(16, 256), w2s = F32(256, 16);
  lathe_value_t x, w1, w2, h, y;
  int c1[1] = {1}, c0[1] = {0};
  CHECK_OK(lathe_parameter_sharded(fn, "x", &xs, NULL, &x));
  CHECK_OK(lathe_parameter_sharded(fn, "w1", &w1s, &cols, &w1));
  CHECK_OK(lathe_parameter_sharded(fn, "w2", &w2s, &rows, &w2));
  CHECK_OK(lathe_dot_general(fn, x, c1, 1, NULL, 0, w1, c0, 1, NULL, 0, NULL, &h));
  CHECK_OK(lathe_tanh(fn, h, &h));
  CHECK_OK(lathe_dot_general(fn, h, c1, 1, NULL, 0, w2, c0, 1, NULL, 0, NULL, &y));
  CHECK_OK(lathe_function_return_sharded(fn, &y, NULL, 1));
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_builder_free(b);
  return e;
}

/* ---- ConvGeneral: batch (data parallel), output channels, input channels (partial sums) ---- */
static void b_conv(prog *p, lathe_function_t fn) {
  /* input [batch 4, channels 4, width 6], kernel [out 4, in 4, width 3] */
  lathe_value_t x = param(p, fn, F32(4, 4, 6), "x,y,-"), k = param(p, fn, F32(4, 4, 3), "-,y,-");
  lathe_value_t x2 = param(p, fn, F32(4, 4, 6), "x,-,-"), k2 = param(p, fn, F32(4, 4, 3), "y,-,-"), o[2];
  const int sp[1] = {2};
  lathe_conv_axes axes = {.input_batch = 0, .input_channels = 1, .input_spatial = sp, .n_input_spatial = 1,
                          .kernel_input_channels = 1, .kernel_output_channels = 0, .kernel_spatial = sp,
                          .n_kernel_spatial = 1, .output_batch = 0, .output_channels = 1, .output_spatial = sp,
                          .n_output_spatial = 1};
  CHECK_OK(lathe_conv_general(fn, x, k, &axes, NULL, &o[0]));   /* batch over x, channels summed over y */
  CHECK_OK(lathe_conv_general(fn, x2, k2, &axes, NULL, &o[1])); /* batch over x, output channels over y */
  const char *specs[] = {"x,-,-", "x,y,-"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_conv) { check_all("conv", b_conv, 0); }

/* ---- Gather: an embedding table split along its features, indices along the batch ---- */
static void b_gather(prog *p, lathe_function_t fn) {
  lathe_value_t table = param(p, fn, F32(8, 6), "-,y"), ids = param(p, fn, TST_SHAPE(LATHE_DTYPE_INT32, 4), "x");
  lathe_value_t t2 = param(p, fn, F32(8, 6), "x,-"), o[2];
  const int off[1] = {1}, col[1] = {0}, map[1] = {0};
  const int64_t sizes[2] = {1, 6};
  CHECK_OK(lathe_gather(fn, table, ids, 1, off, 1, col, 1, map, 1, sizes, 2, false, &o[0]));
  CHECK_OK(lathe_gather(fn, t2, ids, 1, off, 1, col, 1, map, 1, sizes, 2, false, &o[1])); /* indexed axis split: gathered */
  const char *specs[] = {"x,y", "x,-"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_gather) { check_all("gather", b_gather, 0); }

/* ---- Scatter: an embedding's gradient into a table split along its features ---- */
static void b_scatter(prog *p, lathe_function_t fn) {
  lathe_value_t table = param(p, fn, F32(8, 6), NULL), ids = param(p, fn, TST_SHAPE(LATHE_DTYPE_INT32, 4), NULL);
  lathe_value_t dy = param(p, fn, F32(4, 6), "-,y"), t2 = param(p, fn, F32(8, 6), "x,-"), o[3];
  const int win[1] = {1}, ins[1] = {0}, map[1] = {0};
  CHECK_OK(lathe_scatter_sum(fn, table, ids, dy, 1, win, 1, ins, 1, map, 1, false, false, &o[0])); /* split from dy */
  CHECK_OK(lathe_scatter_max(fn, t2, ids, dy, 1, win, 1, ins, 1, map, 1, false, false, &o[1]));   /* indexed axis split: gathered */
  CHECK_OK(lathe_scatter_min(fn, table, ids, dy, 1, win, 1, ins, 1, map, 1, false, false, &o[2])); /* split from the output */
  const char *specs[] = {"-,y", "x,-", "-,x"};
  ret(p, fn, 3, o, specs);
}
TEST(partition_scatter) { check_all("scatter", b_scatter, 0); }

/* ---- FusedScaledDotProductAttention and its VJP: batch and heads keep their split, sequence and
 * head-dim axes are gathered; masks, bias and sequence lengths follow the batch and heads ---- */
typedef struct {
  lathe_attention_layout layout;
  int64_t heads, kv_heads;
  const char *q_spec, *kv_spec; /* shardings of q (and dOutput), of k and v */
  const char *out_spec, *lse_spec;
  int mask; /* 0 none, 1 Bool [batch, 1, seq, kv] (BHSD) or [batch, seq, heads, kv] (BSHD), 2 Float32 [seq, kv] */
  bool causal, bias, seq_lens, vjp;
} attn_case;

static attn_case AC;

/* [batch 4, heads, seq 6, headDim 4] (BHSD) or [batch 4, seq 6, heads, headDim 4] (BSHD); kvLen 5 */
static lathe_shape attn_shape(bool bshd, int64_t heads, int64_t seq) {
  return bshd ? F32(4, seq, heads, 4) : F32(4, heads, seq, 4);
}

static void b_attention(prog *p, lathe_function_t fn) {
  bool bshd = AC.layout == LATHE_ATTENTION_LAYOUT_BSHD;
  lathe_value_t q = param(p, fn, attn_shape(bshd, AC.heads, 6), AC.q_spec);
  lathe_value_t k = param(p, fn, attn_shape(bshd, AC.kv_heads, 5), AC.kv_spec);
  lathe_value_t v = param(p, fn, attn_shape(bshd, AC.kv_heads, 5), AC.kv_spec);
  lathe_attention_config cfg = {.causal = AC.causal, .scale = 0.25};
  if (AC.mask == 1) {
    lathe_shape ms = bshd ? TST_SHAPE(LATHE_DTYPE_BOOL, 4, 6, AC.heads, 5) : TST_SHAPE(LATHE_DTYPE_BOOL, 4, 1, 6, 5);
    cfg.mask = param(p, fn, ms, bshd ? "-,-,-,-" : NULL); /* replicated: sliced to the batch and heads */
  } else if (AC.mask == 2) {
    cfg.mask = param(p, fn, F32(6, 5), "x,-"); /* broadcast over batch and heads: gathered */
  }
  /* a BSHD rank-4 bias may split only its batch ([batch, 1, 1, kvLen]: lathe's check_broadcast) */
  if (AC.bias) cfg.bias = param(p, fn, bshd ? F32(4, 1, 1, 5) : F32(4, AC.heads, 6, 5), "x,-,-,-");
  if (AC.seq_lens) {
    int32_t ql[4] = {6, 3, 5, 1}, kl[4] = {5, 2, 0, 4};
    lathe_shape s = TST_SHAPE(LATHE_DTYPE_INT32, 4);
    CHECK_OK(lathe_constant(fn, &s, ql, sizeof ql, &cfg.query_seq_len));
    CHECK_OK(lathe_constant(fn, &s, kl, sizeof kl, &cfg.key_value_seq_len));
  }
  lathe_value_t fw[2], o[4];
  CHECK_OK(lathe_fused_scaled_dot_product_attention(fn, q, k, v, AC.layout, &cfg, fw));
  if (!AC.vjp) {
    const char *specs[] = {AC.out_spec, AC.lse_spec};
    ret(p, fn, 2, fw, specs);
    return;
  }
  lathe_value_t d = param(p, fn, attn_shape(bshd, AC.heads, 6), AC.q_spec);
  CHECK_OK(lathe_fused_scaled_dot_product_attention_vjp(fn, q, k, v, AC.layout, &cfg, fw[0], &fw[1], 1, d, o));
  o[3] = fw[0];
  const char *specs[] = {AC.q_spec, AC.kv_spec, AC.kv_spec, AC.out_spec};
  ret(p, fn, 4, o, specs);
}

static void check_attention(const char *what, attn_case c, int fallbacks) {
  AC = c;
  check_all(what, b_attention, fallbacks);
}

TEST(partition_attention_batch) {
  check_attention("attention batch", (attn_case){.heads = 4, .kv_heads = 4, .q_spec = "x,-,-,-", .kv_spec = "x,-,-,-",
                                                 .out_spec = "x,-,-,-", .lse_spec = "x,-,-"}, 0);
  check_attention("attention batch xy, BSHD", (attn_case){.layout = LATHE_ATTENTION_LAYOUT_BSHD, .heads = 4, .kv_heads = 4,
                                                          .q_spec = "xy,-,-,-", .kv_spec = "xy,-,-,-", .out_spec = NULL,
                                                          .lse_spec = "xy,-,-"}, 0);
}

TEST(partition_attention_heads) {
  check_attention("attention heads", (attn_case){.heads = 4, .kv_heads = 4, .q_spec = "-,x,-,-", .kv_spec = "-,x,-,-",
                                                 .out_spec = "-,x,-,-", .lse_spec = "-,x,-"}, 0);
  /* GQA: 4 query heads read 2 KV heads; on 2 devices each holds one group (2 query heads, 1 KV head) */
  check_attention("attention heads GQA", (attn_case){.heads = 4, .kv_heads = 2, .q_spec = "-,x,-,-", .kv_spec = "-,x,-,-",
                                                     .out_spec = "-,x,-,-", .lse_spec = NULL}, 0);
  /* BSHD, the KV heads split and the query's heads taken from them (q sliced); output back whole */
  check_attention("attention heads GQA BSHD", (attn_case){.layout = LATHE_ATTENTION_LAYOUT_BSHD, .heads = 4, .kv_heads = 2,
                                                          .q_spec = NULL, .kv_spec = "-,-,x,-", .out_spec = NULL,
                                                          .lse_spec = "-,x,-"}, 0);
}

TEST(partition_attention_batch_heads) {
  check_attention("attention batch x heads y", (attn_case){.heads = 4, .kv_heads = 2, .q_spec = "x,y,-,-", .kv_spec = "x,y,-,-",
                                                           .out_spec = "x,y,-,-", .lse_spec = "x,y,-", .causal = true}, 0);
  /* q split along its sequence, k and v along batch and heads: the sequence is gathered */
  check_attention("attention seq gathered", (attn_case){.heads = 4, .kv_heads = 4, .q_spec = "x,-,y,-", .kv_spec = "x,y,-,-",
                                                        .out_spec = "x,y,-,-", .lse_spec = NULL}, 0);
}

TEST(partition_attention_masks) {
  check_attention("attention Bool mask", (attn_case){.heads = 4, .kv_heads = 4, .q_spec = "x,y,-,-", .kv_spec = "x,y,-,-",
                                                     .out_spec = "x,y,-,-", .lse_spec = "x,y,-", .mask = 1}, 0);
  check_attention("attention Bool mask BSHD", (attn_case){.layout = LATHE_ATTENTION_LAYOUT_BSHD, .heads = 4, .kv_heads = 2,
                                                          .q_spec = "x,-,y,-", .kv_spec = "x,-,y,-", .out_spec = "x,-,y,-",
                                                          .lse_spec = "x,y,-", .mask = 1, .causal = true}, 0);
  check_attention("attention float mask, bias, seq lens",
                  (attn_case){.heads = 4, .kv_heads = 4, .q_spec = "x,y,-,-", .kv_spec = "x,y,-,-", .out_spec = "x,y,-,-",
                              .lse_spec = "x,y,-", .mask = 2, .bias = true, .seq_lens = true}, 0);
}

TEST(partition_attention_vjp) {
  check_attention("attention VJP batch", (attn_case){.heads = 4, .kv_heads = 4, .q_spec = "x,-,-,-", .kv_spec = "x,-,-,-",
                                                     .out_spec = "x,-,-,-", .vjp = true}, 0);
  check_attention("attention VJP GQA batch x heads y, causal, mask",
                  (attn_case){.heads = 4, .kv_heads = 2, .q_spec = "x,y,-,-", .kv_spec = "x,y,-,-", .out_spec = "x,y,-,-",
                              .mask = 1, .causal = true, .vjp = true}, 0);
  check_attention("attention VJP BSHD heads, bias, seq lens",
                  (attn_case){.layout = LATHE_ATTENTION_LAYOUT_BSHD, .heads = 4, .kv_heads = 4, .q_spec = "-,-,x,-",
                              .kv_spec = "-,-,x,-", .out_spec = NULL, .bias = true, .seq_lens = true, .vjp = true}, 0);
}

/* Heads split where the KV heads (one: multi-query attention) cannot follow, nothing else split:
 * the attention runs whole, a counted fallback (forward and VJP) */
TEST(partition_attention_fallback) {
  check_attention("attention MQA heads split", (attn_case){.heads = 4, .kv_heads = 1, .q_spec = "-,x,-,-", .kv_spec = NULL,
                                                           .out_spec = "-,x,-,-", .lse_spec = NULL}, 1);
  check_attention("attention MQA heads split VJP", (attn_case){.heads = 4, .kv_heads = 1, .q_spec = "-,x,-,-", .kv_spec = NULL,
                                                               .out_spec = "-,x,-,-", .vjp = true}, 2);
}

/* ---- batch normalisation: the feature axis keeps its split (training and gradient gather the
 * others; inference keeps them too) ---- */
static void b_batch_norm(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "y,x"), scale = param(p, fn, F32(6), NULL), offset = param(p, fn, F32(6), "x");
  lathe_value_t g = param(p, fn, F32(4, 6), NULL), t[3], d[3], var, one, o[6];
  float f1 = 1;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  CHECK_OK(lathe_constant(fn, &s0, &f1, sizeof f1, &one));
  CHECK_OK(lathe_batch_norm_for_training(fn, x, scale, offset, 1e-3f, 1, t));
  CHECK_OK(lathe_batch_norm_gradient(fn, x, scale, t[1], t[2], g, 1e-3f, 1, d));
  CHECK_OK(lathe_abs(fn, offset, &var));
  CHECK_OK(lathe_add(fn, var, one, &var));
  CHECK_OK(lathe_batch_norm_for_inference(fn, x, scale, offset, scale, var, 1e-3f, 1, &o[5]));
  o[0] = t[0], o[1] = t[1], o[2] = t[2], o[3] = d[0], o[4] = d[1];
  const char *specs[] = {"-,x", "x", NULL, "y,x", "x", "y,x"};
  ret(p, fn, 6, o, specs);
}
TEST(partition_batch_norm) { check_all("batch_norm", b_batch_norm, 0); }

/* only the batch split: the statistics would need an AllReduce inside the op -- the fallback */
static void b_batch_norm_batch(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "x,-"), scale = param(p, fn, F32(6), NULL), t[3];
  CHECK_OK(lathe_batch_norm_for_training(fn, x, scale, scale, 1e-3f, 1, t));
  const char *specs[] = {"x,-", NULL, NULL};
  ret(p, fn, 3, t, specs);
}
TEST(partition_batch_norm_batch_falls_back) { check_all("batch_norm batch", b_batch_norm_batch, 1); }

/* ---- FusedAttentionQKVProjection: x's batch axes keep their split; its features, wQKV and the
 * biases are gathered; with only the features split, the fallback ---- */
static void b_qkv(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 2, 6), "x,y,-"), w = param(p, fn, F32(6, 16), "-,x"), bq = param(p, fn, F32(8), "y");
  lathe_value_t bv = param(p, fn, F32(4), NULL), o[3];
  CHECK_OK(lathe_fused_attention_qkv_projection(fn, x, w, bq, NULL, bv, 8, 4, o));
  const char *specs[] = {"x,y,-", NULL, "-,x,-"};
  ret(p, fn, 3, o, specs);
}
TEST(partition_qkv_projection) { check_all("qkv_projection", b_qkv, 0); }

static void b_qkv_features(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "-,x"), w = param(p, fn, F32(6, 16), NULL), o[3];
  CHECK_OK(lathe_fused_attention_qkv_projection(fn, x, w, NULL, NULL, NULL, 8, 4, o));
  const char *specs[] = {NULL, NULL, NULL};
  ret(p, fn, 3, o, specs);
}
TEST(partition_qkv_projection_features_fall_back) { check_all("qkv_projection features", b_qkv_features, 1); }

/* ---- ReduceWindow and SelectAndScatter: an axis whose window is one element (stride 1, no
 * dilation, no padding) keeps its split -- pooling over a CNN's spatial axes with its batch and
 * channels split --; the axes the windows slide along are gathered ---- */
static const int64_t POOL2[4] = {1, 2, 2, 1}, POOL3[4] = {1, 3, 3, 1}, ONES4[4] = {1, 1, 1, 1}, STRIDE2[4] = {1, 2, 2, 1};
static const lathe_padding SAME4[4] = {{0, 0}, {1, 1}, {1, 1}, {0, 0}};

static void b_pool(prog *p, lathe_function_t fn) {
  /* NHWC [batch 4, height 6, width 6, channels 2]; NCHW Int32 [4, 2, 6, 6] */
  lathe_value_t x = param(p, fn, F32(4, 6, 6, 2), "x,-,-,y"), m = param(p, fn, TST_SHAPE(LATHE_DTYPE_BOOL, 4, 6, 6, 2), "xy,-,-,-");
  lathe_value_t xi = param(p, fn, TST_SHAPE(LATHE_DTYPE_INT32, 4, 2, 6, 6), "x,y,-,-"), o[6];
  const int64_t nchw[4] = {1, 1, 3, 3}, dil[4] = {1, 1, 2, 1};
  lathe_window_params max2 = {.window_dims = POOL2, .n_window_dims = 4}; /* 2x2, stride 2 */
  lathe_window_params sum3 = {.window_dims = POOL3, .n_window_dims = 4, .strides = ONES4, .n_strides = 4,
                              .paddings = SAME4, .n_paddings = 4};
  lathe_window_params over = {.window_dims = POOL3, .n_window_dims = 4, .strides = STRIDE2, .n_strides = 4,
                              .paddings = SAME4, .n_paddings = 4}; /* overlapping windows */
  lathe_window_params prod = {.window_dims = nchw, .n_window_dims = 4, .strides = ONES4, .n_strides = 4};
  lathe_window_params dilated = {.window_dims = nchw, .n_window_dims = 4, .strides = ONES4, .n_strides = 4,
                                 .input_dilations = dil, .n_input_dilations = 4, .window_dilations = dil,
                                 .n_window_dilations = 4};
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &max2, &o[0]));     /* max pool */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_SUM, x, &sum3, &o[1]));     /* average pool's sums, SAME */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MIN, m, &max2, &o[2]));     /* DropBlock's Bool min-pool */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_PRODUCT, xi, &prod, &o[3])); /* NCHW */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_SUM, xi, &dilated, &o[4]));
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &over, &o[5]));
  const char *specs[] = {"x,-,-,y", NULL, "xy,-,-,-", "x,y,-,-", "xy,-,-,-", "y,-,-,x"};
  ret(p, fn, 6, o, specs);
}
TEST(partition_reduce_window_pooling) { check_all("reduce_window pooling", b_pool, 0); }

/* a CNN block on a split batch: convolution, max pool, and the pool's gradient -- no collective
 * but the output's */
static void b_cnn(prog *p, lathe_function_t fn) {
  /* NCHW input [4, 2, 6, 6], kernel [out 3, in 2, 3, 3] */
  lathe_value_t x = param(p, fn, F32(4, 2, 6, 6), "x,-,-,-"), k = param(p, fn, F32(3, 2, 3, 3), NULL), c, o[2];
  const int sp[2] = {2, 3};
  const lathe_padding pad[2] = {{1, 1}, {1, 1}};
  lathe_conv_axes axes = {.input_batch = 0, .input_channels = 1, .input_spatial = sp, .n_input_spatial = 2,
                          .kernel_input_channels = 1, .kernel_output_channels = 0, .kernel_spatial = sp,
                          .n_kernel_spatial = 2, .output_batch = 0, .output_channels = 1, .output_spatial = sp,
                          .n_output_spatial = 2};
  lathe_conv_params cp = {.paddings = pad, .n_paddings = 2};
  const int64_t pool[4] = {1, 1, 2, 2};
  lathe_window_params w = {.window_dims = pool, .n_window_dims = 4};
  CHECK_OK(lathe_conv_general(fn, x, k, &axes, &cp, &c)); /* [4, 3, 6, 6] */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, c, &w, &o[0]));       /* [4, 3, 3, 3] */
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, c, o[0], &w, &o[1]));
  const char *specs[] = {"x,-,-,-", "x,-,-,-"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_cnn_pooling) {
  check_all("cnn pooling", b_cnn, 0);
  check_stats("cnn pooling", b_cnn, "", 0);
}

/* max pooling's gradient: the operand's split, else the source's, else the consumers' */
static void b_pool_grad(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6, 6, 2), "x,-,-,y"), g = param(p, fn, F32(4, 3, 3, 2), "x,-,-,y");
  lathe_value_t xr = param(p, fn, F32(4, 6, 6, 2), NULL), gr = param(p, fn, F32(4, 3, 3, 2), NULL), o[5];
  lathe_value_t xh = param(p, fn, F32(4, 6, 6, 2), "x,y,-,-"); /* height split: gathered */
  lathe_window_params max2 = {.window_dims = POOL2, .n_window_dims = 4};
  lathe_window_params over = {.window_dims = POOL3, .n_window_dims = 4, .strides = STRIDE2, .n_strides = 4,
                              .paddings = SAME4, .n_paddings = 4};
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, x, g, &max2, &o[0]));
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MIN, xr, g, &over, &o[1])); /* split from g */
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, x, gr, &over, &o[2])); /* gr sliced */
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, xr, gr, &max2, &o[3])); /* the output's split */
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MIN, xh, g, &max2, &o[4]));
  const char *specs[] = {"x,-,-,y", "x,-,-,-", NULL, "-,-,-,x", "x,y,-,-"};
  ret(p, fn, 5, o, specs);
}
TEST(partition_select_and_scatter) { check_all("select_and_scatter", b_pool_grad, 0); }

/* split axes a window slides along, strides, padding or dilation change: gathered, the others kept */
static void b_window_partial(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "x,y"), o[5];
  const int64_t w13[2] = {1, 3}, ones[2] = {1, 1}, s12[2] = {1, 2};
  const lathe_padding pad[2] = {{0, 0}, {1, 0}};
  lathe_window_params slide = {.window_dims = w13, .n_window_dims = 2, .strides = ones, .n_strides = 2};
  lathe_window_params strided = {.window_dims = ones, .n_window_dims = 2, .strides = s12, .n_strides = 2};
  lathe_window_params padded = {.window_dims = ones, .n_window_dims = 2, .paddings = pad, .n_paddings = 2};
  lathe_window_params idil = {.window_dims = ones, .n_window_dims = 2, .input_dilations = s12, .n_input_dilations = 2};
  lathe_window_params wdil = {.window_dims = ones, .n_window_dims = 2, .window_dilations = s12, .n_window_dilations = 2};
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_SUM, x, &slide, &o[0]));    /* [4, 4] */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &strided, &o[1]));  /* [4, 3] */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MIN, x, &padded, &o[2]));   /* [4, 7] */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_SUM, x, &idil, &o[3]));     /* [4, 11] */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_PRODUCT, x, &wdil, &o[4])); /* [4, 6] */
  const char *specs[] = {"x,-", "x,-", NULL, "x,-", "x,y"};
  ret(p, fn, 5, o, specs);
}
TEST(partition_reduce_window_partial) { check_all("reduce_window partial", b_window_partial, 0); }

/* every split axis under a window: gathered, the op runs whole, a counted fallback */
static void b_window_whole(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 6), "x,-"), g = param(p, fn, F32(3, 6), NULL), o[2];
  const int64_t w21[2] = {2, 1}, ones[2] = {1, 1}; /* unpadded windows of stride 1: 3 outputs of 4, not split in 2 */
  lathe_window_params w = {.window_dims = w21, .n_window_dims = 2, .strides = ones, .n_strides = 2};
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &w, &o[0]));
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, x, g, &w, &o[1]));
  const char *specs[] = {NULL, "x,-"};
  ret(p, fn, 2, o, specs);
}
TEST(partition_window_falls_back) {
  check_all("window whole", b_window_whole, 2);
  check_stats("window whole", b_window_whole, "ReduceWindow, SelectAndScatterMax", -1);
}

/* ---- halo exchange: spatial axes split over the mesh (an image's height over x, its width over
 * y) stay split under convolutions and pooling whose windows cross the shards' edges ---- */
static const int NHWC_SP[2] = {1, 2}, HWIO_SP[2] = {0, 1};

static lathe_conv_axes nhwc_axes(void) {
  lathe_conv_axes a = {.input_batch = 0, .input_channels = 3, .input_spatial = NHWC_SP, .n_input_spatial = 2,
                       .kernel_input_channels = 2, .kernel_output_channels = 3, .kernel_spatial = HWIO_SP,
                       .n_kernel_spatial = 2, .output_batch = 0, .output_channels = 3, .output_spatial = NHWC_SP,
                       .n_output_spatial = 2};
  return a;
}

static void b_halo_conv(prog *p, lathe_function_t fn) {
  /* NHWC [2, 8, 8, 2], HWIO kernel [3, 3, 2, 3], output gradient NHWC [2, 8, 8, 3] */
  lathe_value_t x = param(p, fn, F32(2, 8, 8, 2), "-,x,y,-"), k = param(p, fn, F32(3, 3, 2, 3), NULL);
  lathe_value_t dy = param(p, fn, F32(2, 8, 8, 3), "-,x,y,-"), ds = param(p, fn, F32(2, 4, 4, 3), "-,x,y,-"), o[8];
  lathe_conv_axes axes = nhwc_axes();
  const lathe_padding same[2] = {{1, 1}, {1, 1}}, wide[2] = {{2, 2}, {2, 2}}, causal[2] = {{2, 0}, {1, 1}};
  const int64_t two[2] = {2, 2};
  lathe_conv_params p_same = {.paddings = same, .n_paddings = 2};
  lathe_conv_params p_strided = {.paddings = same, .n_paddings = 2, .strides = two, .n_strides = 2};
  lathe_conv_params p_dilated = {.paddings = wide, .n_paddings = 2, .kernel_dilations = two, .n_kernel_dilations = 2};
  lathe_conv_params p_causal = {.paddings = causal, .n_paddings = 2};
  lathe_conv_params p_transposed = {.paddings = same, .n_paddings = 2, .input_dilations = two, .n_input_dilations = 2};
  CHECK_OK(lathe_conv_general(fn, x, k, &axes, &p_same, &o[0]));       /* halos of 1 both sides */
  CHECK_OK(lathe_conv_general(fn, x, k, &axes, &p_strided, &o[1]));    /* [2, 4, 4, 3]: a left halo only */
  CHECK_OK(lathe_conv_general(fn, x, k, &axes, &p_dilated, &o[2]));    /* halos of 2 */
  CHECK_OK(lathe_conv_general(fn, x, k, &axes, &p_causal, &o[3]));     /* height: 2 on the left, none right */
  CHECK_OK(lathe_conv_general(fn, x, k, &axes, &p_transposed, &o[4])); /* [2, 15, 15, 3]: gathered */
  /* the kernel gradient as GoMLX builds it: x's channels as batch, its batch contracted, the output
   * gradient as the kernel -- its taps split like x: partial sums over both mesh axes */
  lathe_conv_axes kg = {.input_batch = 3, .input_channels = 0, .input_spatial = NHWC_SP, .n_input_spatial = 2,
                        .kernel_input_channels = 0, .kernel_output_channels = 3, .kernel_spatial = NHWC_SP,
                        .n_kernel_spatial = 2, .output_batch = 0, .output_channels = 3, .output_spatial = NHWC_SP,
                        .n_output_spatial = 2};
  CHECK_OK(lathe_conv_general(fn, x, dy, &kg, &p_same, &o[5])); /* [2, 3, 3, 3] */
  /* and the input gradient: the output gradient against the kernel reversed, halos of 1 */
  lathe_value_t kr, kt;
  const int rev[2] = {0, 1};
  const int perm[4] = {0, 1, 3, 2};
  CHECK_OK(lathe_reverse(fn, k, rev, 2, &kr));
  CHECK_OK(lathe_transpose(fn, kr, perm, 4, &kt));
  CHECK_OK(lathe_conv_general(fn, dy, kt, &axes, &p_same, &o[6]));
  /* the strided convolution's input gradient: its output gradient [2, 4, 4, 3] dilated by the
   * stride, padded (1, 2) back to [2, 8, 8, 2]: a halo of one element from the next shard */
  const lathe_padding back[2] = {{1, 2}, {1, 2}};
  lathe_conv_params p_back = {.paddings = back, .n_paddings = 2, .input_dilations = two, .n_input_dilations = 2};
  CHECK_OK(lathe_conv_general(fn, ds, kt, &axes, &p_back, &o[7]));
  const char *specs[] = {"-,x,y,-", "-,x,y,-", NULL, "-,x,y,-", NULL, NULL, "-,x,y,-", "-,x,y,-"};
  ret(p, fn, 8, o, specs);
}

static void b_halo_pool(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(2, 8, 8, 2), "-,x,y,-"), xi = param(p, fn, TST_SHAPE(LATHE_DTYPE_INT32, 2, 8, 8, 2), "-,x,y,-");
  lathe_value_t m = param(p, fn, TST_SHAPE(LATHE_DTYPE_BOOL, 2, 8, 8, 2), "-,y,x,-"), g = param(p, fn, F32(2, 4, 4, 2), "-,x,y,-");
  lathe_value_t o[8];
  lathe_window_params same = {.window_dims = POOL3, .n_window_dims = 4, .strides = ONES4, .n_strides = 4,
                              .paddings = SAME4, .n_paddings = 4};
  lathe_window_params over = {.window_dims = POOL3, .n_window_dims = 4, .strides = STRIDE2, .n_strides = 4,
                              .paddings = SAME4, .n_paddings = 4};
  lathe_window_params max2 = {.window_dims = POOL2, .n_window_dims = 4};
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &same, &o[0]));        /* the ends get -inf */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &over, &o[1]));        /* [2, 4, 4, 2], left halos */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_SUM, x, &same, &o[2]));        /* zeros */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_PRODUCT, xi, &same, &o[3]));   /* ones */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MIN, xi, &same, &o[4]));       /* the largest Int32 */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MIN, m, &same, &o[5]));        /* true */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &max2, &o[6]));        /* windows tile the shards */
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, x, g, &max2, &o[7])); /* the same */
  const char *specs[] = {"-,x,y,-", NULL, "-,y,x,-", "-,x,y,-", NULL, "-,y,x,-", "-,x,y,-", "-,x,y,-"};
  ret(p, fn, 8, o, specs);
}

static lathe_value_t f32s(lathe_function_t f, float v) {
  lathe_value_t c;
  lathe_shape s = tst_shape0(LATHE_DTYPE_FLOAT32);
  CHECK_OK(lathe_constant(f, &s, &v, sizeof v, &c));
  return c;
}

/* max pooling's gradient with windows across the shards' edges: the operand widened, halos in,
 * the result's halos folded back to their owners. Rows 0, 1 and 3-5 are -inf and the 5s NaN, so
 * that windows of nothing but -inf (at the top edge, where the padding lies, and across the
 * shards' edge, rows 3-5) pick their first real element, and NaNs win. */
static void b_halo_sas(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(2, 8, 8, 2), "-,x,y,-"), g = param(p, fn, F32(2, 4, 4, 2), "-,x,y,-");
  lathe_value_t gs = param(p, fn, F32(2, 8, 8, 2), "-,x,y,-"), xi = param(p, fn, TST_SHAPE(LATHE_DTYPE_INT32, 2, 8, 8, 2), "-,y,x,-");
  lathe_value_t gi = param(p, fn, TST_SHAPE(LATHE_DTYPE_INT32, 2, 8, 8, 2), "-,y,x,-"), o[6], h, c1, c2, xs, xb, gb;
  lathe_window_params same = {.window_dims = POOL3, .n_window_dims = 4, .strides = ONES4, .n_strides = 4,
                              .paddings = SAME4, .n_paddings = 4};
  lathe_window_params over = {.window_dims = POOL3, .n_window_dims = 4, .strides = STRIDE2, .n_strides = 4,
                              .paddings = SAME4, .n_paddings = 4};
  lathe_shape si = TST_SHAPE(LATHE_DTYPE_INT32, 2, 8, 8, 2);
  CHECK_OK(lathe_iota(fn, &si, 1, &h));
  CHECK_OK(lathe_less_than(fn, h, i32(fn, 6), &c1));
  CHECK_OK(lathe_not_equal(fn, h, i32(fn, 2), &c2));
  CHECK_OK(lathe_logical_and(fn, c1, c2, &c1));
  CHECK_OK(lathe_where(fn, c1, f32s(fn, -INFINITY), x, &xs));
  CHECK_OK(lathe_equal(fn, x, f32s(fn, 5), &c2));
  CHECK_OK(lathe_where(fn, c2, f32s(fn, NAN), xs, &xs));
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, x, g, &over, &o[0])); /* a left halo */
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MIN, x, gs, &same, &o[1])); /* both sides */
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, xs, g, &over, &o[2]));
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, xs, gs, &same, &o[3]));
  CHECK_OK(lathe_convert_dtype(fn, x, LATHE_DTYPE_BFLOAT16, &xb));
  CHECK_OK(lathe_convert_dtype(fn, g, LATHE_DTYPE_BFLOAT16, &gb));
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, xb, gb, &over, &o[4])); /* through Float32 */
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MIN, xi, gi, &same, &o[5])); /* through Int64 */
  const char *specs[] = {"-,x,y,-", NULL, "-,x,y,-", "-,y,x,-", "-,x,y,-", "-,y,x,-"};
  ret(p, fn, 6, o, specs);
}

/* "valid" windows (GoMLX's default convolution): fewer outputs than inputs, so shard k reads from
 * an offset that moves with k -- halos from both neighbours, then a dynamic slice */
static void b_halo_valid(prog *p, lathe_function_t fn) {
  /* NHWC [2, 8, 8, 2], HWIO kernel [3, 3, 2, 3], output gradient [2, 6, 6, 3]; a [2, 10, 10, 2] image */
  lathe_value_t x = param(p, fn, F32(2, 8, 8, 2), "-,x,y,-"), k = param(p, fn, F32(3, 3, 2, 3), NULL);
  lathe_value_t dy = param(p, fn, F32(2, 6, 6, 3), "-,x,y,-"), x10 = param(p, fn, F32(2, 10, 10, 2), "-,x,y,-");
  lathe_value_t xi = param(p, fn, TST_SHAPE(LATHE_DTYPE_INT32, 2, 8, 8, 2), "-,y,x,-"), o[8], kr, kt;
  lathe_conv_axes axes = nhwc_axes();
  const lathe_padding full[2] = {{2, 2}, {2, 2}};
  const int64_t two[2] = {2, 2};
  lathe_conv_params valid = {0}, strided = {.strides = two, .n_strides = 2}, p_full = {.paddings = full, .n_paddings = 2};
  CHECK_OK(lathe_conv_general(fn, x, k, &axes, &valid, &o[0]));      /* [2, 6, 6, 3]: shards of 3 from 4 */
  CHECK_OK(lathe_conv_general(fn, x10, k, &axes, &strided, &o[1]));  /* [2, 4, 4, 3]: shards of 2 from 5 */
  const int rev[2] = {0, 1}, perm[4] = {0, 1, 3, 2};
  CHECK_OK(lathe_reverse(fn, k, rev, 2, &kr));
  CHECK_OK(lathe_transpose(fn, kr, perm, 4, &kt));
  CHECK_OK(lathe_conv_general(fn, dy, kt, &axes, &p_full, &o[2])); /* the input gradient: [2, 8, 8, 2] from 6 */
  /* the kernel gradient: the output gradient's taps split like x, read from 3k: partial sums */
  lathe_conv_axes kg = {.input_batch = 3, .input_channels = 0, .input_spatial = NHWC_SP, .n_input_spatial = 2,
                        .kernel_input_channels = 0, .kernel_output_channels = 3, .kernel_spatial = NHWC_SP,
                        .n_kernel_spatial = 2, .output_batch = 0, .output_channels = 3, .output_spatial = NHWC_SP,
                        .n_output_spatial = 2};
  CHECK_OK(lathe_conv_general(fn, x, dy, &kg, &valid, &o[3])); /* [2, 3, 3, 3] */
  lathe_window_params w3 = {.window_dims = POOL3, .n_window_dims = 4, .strides = ONES4, .n_strides = 4};
  lathe_window_params w3s2 = {.window_dims = POOL3, .n_window_dims = 4, .strides = STRIDE2, .n_strides = 4};
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &w3, &o[4]));    /* [2, 6, 6, 2], -inf at the ends */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MIN, xi, &w3, &o[5]));   /* Int32 */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_SUM, x10, &w3s2, &o[6])); /* [2, 4, 4, 2] */
  CHECK_OK(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, x, o[4], &w3, &o[7])); /* read and written back from 3k */
  const char *specs[] = {"-,x,y,-", "-,x,y,-", "-,x,y,-", NULL, "-,y,x,-", "-,y,x,-", "-,x,y,-", "-,x,y,-"};
  ret(p, fn, 8, o, specs);
}

/* input-dilated convolutions whose outputs do not step over their dilated shards: strided
 * "valid" convolutions' input gradients; each shard dilated before its halos */
static void b_halo_dilated(prog *p, lathe_function_t fn) {
  lathe_value_t x10 = param(p, fn, F32(2, 10, 10, 2), "-,x,y,-"), x8 = param(p, fn, F32(2, 8, 8, 2), "-,x,y,-");
  lathe_value_t k = param(p, fn, F32(3, 3, 2, 3), NULL), kr, kt, d2, d3, o[4];
  lathe_conv_axes axes = nhwc_axes();
  const int64_t two[2] = {2, 2}, three[2] = {3, 3};
  const lathe_padding back2[2] = {{2, 3}, {2, 3}}, back3[2] = {{2, 4}, {2, 4}};
  lathe_conv_params s2 = {.strides = two, .n_strides = 2}, s3 = {.strides = three, .n_strides = 2};
  lathe_conv_params g2 = {.paddings = back2, .n_paddings = 2, .input_dilations = two, .n_input_dilations = 2};
  lathe_conv_params g3 = {.paddings = back3, .n_paddings = 2, .input_dilations = three, .n_input_dilations = 2};
  const int rev[2] = {0, 1}, perm[4] = {0, 1, 3, 2};
  CHECK_OK(lathe_reverse(fn, k, rev, 2, &kr));
  CHECK_OK(lathe_transpose(fn, kr, perm, 4, &kt));
  CHECK_OK(lathe_conv_general(fn, x10, k, &axes, &s2, &d2)); /* [2, 4, 4, 3] */
  CHECK_OK(lathe_conv_general(fn, x8, k, &axes, &s3, &d3));  /* [2, 2, 2, 3] */
  CHECK_OK(lathe_conv_general(fn, d2, kt, &axes, &g2, &o[0])); /* back to [2, 10, 10, 2]: 5 rows a shard from 2 */
  CHECK_OK(lathe_conv_general(fn, d3, kt, &axes, &g3, &o[1])); /* back to [2, 8, 8, 2]: 4 rows a shard from 1 */
  o[2] = d2, o[3] = d3;
  const char *specs[] = {"-,x,y,-", "-,y,x,-", "-,x,y,-", NULL};
  ret(p, fn, 4, o, specs);
}

/* ---- random window geometry along a split axis: whatever the rules keep split or gather, the
 * partitioned run equals the whole one ---- */
static struct {
  int64_t n, taps, stride, lo, hi, in_dil, k_dil;
  const char *split; /* the signal's spec: "-,x,-" or, over 4 devices, "-,xy,-" */
} g_win;

static void b_random_window(prog *p, lathe_function_t fn) {
  /* NWC signal [2, n, 2] split along its length; kernel WIO [taps, 2, 3] */
  lathe_value_t x = param(p, fn, F32(2, g_win.n, 2), g_win.split), k = param(p, fn, F32(g_win.taps, 2, 3), NULL), o[3];
  const int sp[1] = {1}, ksp[1] = {0};
  lathe_conv_axes axes = {.input_batch = 0, .input_channels = 2, .input_spatial = sp, .n_input_spatial = 1,
                          .kernel_input_channels = 1, .kernel_output_channels = 2, .kernel_spatial = ksp,
                          .n_kernel_spatial = 1, .output_batch = 0, .output_channels = 2, .output_spatial = sp,
                          .n_output_spatial = 1};
  const lathe_padding pad[1] = {{g_win.lo, g_win.hi}}, wpad[3] = {{0, 0}, {g_win.lo, g_win.hi}, {0, 0}};
  const int64_t st[1] = {g_win.stride}, id[1] = {g_win.in_dil}, kd[1] = {g_win.k_dil};
  const int64_t wd[3] = {1, g_win.taps, 1}, ws[3] = {1, g_win.stride, 1}, wi[3] = {1, g_win.in_dil, 1};
  const int64_t wk[3] = {1, g_win.k_dil, 1};
  lathe_conv_params cp = {.paddings = pad, .n_paddings = 1, .strides = st, .n_strides = 1, .input_dilations = id,
                          .n_input_dilations = 1, .kernel_dilations = kd, .n_kernel_dilations = 1};
  lathe_window_params rw = {.window_dims = wd, .n_window_dims = 3, .strides = ws, .n_strides = 3, .paddings = wpad,
                            .n_paddings = 3, .input_dilations = wi, .n_input_dilations = 3, .window_dilations = wk,
                            .n_window_dilations = 3};
  lathe_window_params sw = {.window_dims = wd, .n_window_dims = 3, .strides = ws, .n_strides = 3, .paddings = wpad,
                            .n_paddings = 3};
  CHECK_OK(lathe_conv_general(fn, x, k, &axes, &cp, &o[0]));
  CHECK_OK(lathe_reduce_window(fn, g_win.lo % 2 ? LATHE_OP_REDUCE_MAX : LATHE_OP_REDUCE_SUM, x, &rw, &o[1]));
  int n = 2;
  lathe_value_t m; /* SelectAndScatter (no dilations): its source is the max pool's shape */
  if (lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, x, &sw, &m) == NULL)
    CHECK_OK(lathe_select_and_scatter(fn, g_win.hi % 2 ? LATHE_OP_SELECT_AND_SCATTER_MIN : LATHE_OP_SELECT_AND_SCATTER_MAX,
                                      x, m, &sw, &o[n++]));
  const char *specs[3];
  for (int i = 0; i < n; i++) {
    lathe_shape s;
    CHECK_OK(lathe_value_shape(o[i], &s));
    specs[i] = s.dims[1] % (g_win.split[2] == 'x' && g_win.split[3] == 'y' ? 4 : 2) ? NULL : g_win.split; /* where it divides */
  }
  ret(p, fn, n, o, specs);
}

TEST(partition_random_windows) {
  static const int id[4] = {0, 1, 2, 3};
  uint64_t r = 0x9e3779b97f4a7c15u;
  int ran = 0;
  for (int t = 0; t < 120; t++) {
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    static const int64_t ns[4] = {8, 10, 12, 16};
    g_win.n = ns[r % 4], g_win.taps = 1 + (int64_t)(r >> 4) % 4, g_win.stride = 1 + (int64_t)(r >> 8) % 3;
    g_win.lo = (int64_t)(r >> 12) % 4, g_win.hi = (int64_t)(r >> 16) % 4;
    g_win.in_dil = (r >> 20) % 3 ? 1 : 2 + (int64_t)(r >> 22) % 2, g_win.k_dil = (r >> 24) % 3 ? 1 : 2;
    int64_t span = (g_win.n - 1) * g_win.in_dil + 1 + g_win.lo + g_win.hi, ext = (g_win.taps - 1) * g_win.k_dil + 1;
    if (span < ext || (g_win.n - 1 + g_win.lo + g_win.hi + 1) < g_win.taps) continue; /* no output */
    char what[96];
    snprintf(what, sizeof what, "random window n%lld t%lld s%lld p%lld,%lld d%lld k%lld", (long long)g_win.n,
             (long long)g_win.taps, (long long)g_win.stride, (long long)g_win.lo, (long long)g_win.hi,
             (long long)g_win.in_dil, (long long)g_win.k_dil);
    g_win.split = "-,x,-";
    check_prog(what, b_random_window, 2, 1, id, -1, "");
    if (g_win.n % 4 == 0) { /* 4 shards over both mesh axes */
      static const int shuffled[4] = {2, 0, 3, 1};
      g_win.split = "-,xy,-";
      check_prog(what, b_random_window, 2, 2, shuffled, -1, "");
    }
    ran++;
  }
  CHECK(ran >= 60, "only %d random windows had outputs", ran);
}

/* one convolution with "same" padding on a height split over 2 devices: two CollectivePermutes */
static void b_halo_count(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(2, 8, 8, 2), "-,x,-,-"), k = param(p, fn, F32(3, 3, 2, 3), NULL), o;
  lathe_conv_axes axes = nhwc_axes();
  const lathe_padding same[2] = {{1, 1}, {1, 1}};
  lathe_conv_params cp = {.paddings = same, .n_paddings = 2};
  CHECK_OK(lathe_conv_general(fn, x, k, &axes, &cp, &o));
  const char *specs[] = {"-,x,-,-"};
  ret(p, fn, 1, &o, specs);
}

/* a While whose body smooths a signal split along its length: a "same" convolution and a max
 * over 3 neighbours, each with its halos, on every iteration */
static void b_loop_halo(prog *p, lathe_function_t fn) {
  /* NWC signal [2, 16, 2], kernel WIO [3, 2, 2] */
  lathe_value_t u0 = param(p, fn, F32(2, 16, 2), "-,xy,-"), k = param(p, fn, F32(3, 2, 2), NULL), v, r[2];
  lathe_shape si = tst_shape0(LATHE_DTYPE_INT32), su = F32(2, 16, 2);
  lathe_function_t cond = closure_of(fn), body = closure_of(fn);
  lathe_value_t ci = tst_param(cond, NULL, si);
  tst_param(cond, NULL, su);
  CHECK_OK(lathe_less_than(cond, ci, i32(cond, 3), &v));
  CHECK_OK(lathe_function_return(cond, &v, 1));
  lathe_value_t bi = tst_param(body, NULL, si), bu = tst_param(body, NULL, su), c, m, bo[2];
  const int sp[1] = {1}, ksp[1] = {0};
  lathe_conv_axes axes = {.input_batch = 0, .input_channels = 2, .input_spatial = sp, .n_input_spatial = 1,
                          .kernel_input_channels = 1, .kernel_output_channels = 2, .kernel_spatial = ksp,
                          .n_kernel_spatial = 1, .output_batch = 0, .output_channels = 2, .output_spatial = sp,
                          .n_output_spatial = 1};
  const lathe_padding same[1] = {{1, 1}}, wsame[3] = {{0, 0}, {1, 1}, {0, 0}};
  const int64_t w3[3] = {1, 3, 1}, ones[3] = {1, 1, 1};
  lathe_conv_params cp = {.paddings = same, .n_paddings = 1};
  lathe_window_params wp = {.window_dims = w3, .n_window_dims = 3, .strides = ones, .n_strides = 3, .paddings = wsame,
                            .n_paddings = 3};
  CHECK_OK(lathe_conv_general(body, bu, k, &axes, &cp, &c)); /* k captured from main */
  CHECK_OK(lathe_tanh(body, c, &c));
  CHECK_OK(lathe_reduce_window(body, LATHE_OP_REDUCE_MAX, c, &wp, &m));
  CHECK_OK(lathe_add(body, bi, i32(body, 1), &bo[0]));
  bo[1] = m;
  CHECK_OK(lathe_function_return(body, bo, 2));
  lathe_value_t st[2] = {i32(fn, 0), u0};
  int n = 0;
  CHECK_OK(lathe_while(fn, cond, body, st, 2, r, 2, &n));
  const char *specs[] = {"-,xy,-"};
  ret(p, fn, 1, &r[1], specs);
}

/* spatial splits beside batch and channel splits: batch over x and height over y; height over x
 * and output channels over y; input channels (partial sums) over x and width over y */
static void b_halo_mixed(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(2, 8, 8, 2), "x,y,-,-"), k = param(p, fn, F32(3, 3, 2, 4), NULL);
  lathe_value_t x2 = param(p, fn, F32(2, 8, 8, 2), "-,x,-,-"), k2 = param(p, fn, F32(3, 3, 2, 4), "-,-,-,y");
  lathe_value_t x3 = param(p, fn, F32(2, 8, 8, 2), "-,-,y,x"), k3 = param(p, fn, F32(3, 3, 2, 4), "-,-,x,-"), o[4];
  lathe_conv_axes axes = nhwc_axes();
  const lathe_padding same[2] = {{1, 1}, {1, 1}};
  lathe_conv_params cp = {.paddings = same, .n_paddings = 2};
  CHECK_OK(lathe_conv_general(fn, x, k, &axes, &cp, &o[0]));
  CHECK_OK(lathe_conv_general(fn, x2, k2, &axes, &cp, &o[1]));
  CHECK_OK(lathe_conv_general(fn, x3, k3, &axes, &cp, &o[2]));
  lathe_window_params wp = {.window_dims = POOL3, .n_window_dims = 4, .strides = ONES4, .n_strides = 4, .paddings = SAME4,
                            .n_paddings = 4};
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_MAX, o[0], &wp, &o[3]));
  const char *specs[] = {"x,y,-,-", "-,x,-,y", "-,-,y,-", "x,y,-,-"};
  ret(p, fn, 4, o, specs);
}

TEST(partition_halo_exchange) {
  check_all("halo conv", b_halo_conv, 0);
  check_all("halo pool", b_halo_pool, 0);
  check_stats("halo count", b_halo_count, "", 2);
  check_all("halo loop", b_loop_halo, 0);
  check_all("halo mixed", b_halo_mixed, 0);
  check_all("halo select and scatter", b_halo_sas, 0);
  check_all("halo valid", b_halo_valid, 0);
  check_all("halo dilated", b_halo_dilated, 0);
  /* on 2x2: a halo each way per split spatial axis (8 CollectivePermutes) and the input channels'
   * AllReduce: nothing gathered */
  check_stats_on(2, 2, "halo mixed stats", b_halo_mixed, "", 9);
  check_stats("halo loop", b_loop_halo, "", 4); /* in the body: two halos each for the convolution and the max */
  /* on x:2 only (heights split): 9 CollectivePermutes (the kernel gradient reuses the first
   * convolution's halos of x), its AllReduce, an AllGather of x for the transposed convolution
   * and one of the dilated one's output; and 11 CollectivePermutes, then two AllGathers and an
   * AllToAll for the outputs' shardings */
  check_stats("halo conv", b_halo_conv, "", 12);
  check_stats("halo pool", b_halo_pool, "", 14);
  /* a halo in and a fold back per side: 2 for each "over" (a left halo), 4 for each "same"; an
   * AllGather and an AllToAll for two outputs' shardings */
  check_stats("halo select and scatter", b_halo_sas, "", 20);
  /* valid windows on x:2: halos of 2, 1, 2 and 2 (the kernel gradient reuses the first
   * convolution's, the strided sum the strided convolution's), the kernel gradient's AllReduce, the
   * Int32 min's 2, the SelectAndScatter's 2 halos and 2 folds; an AllToAll for an output */
  check_stats("halo valid", b_halo_valid, "", 15);
  /* on x:2: the strided forward convolutions a halo each, the dilated ones 2 each; an AllToAll and
   * an AllGather for the outputs */
  check_stats("halo dilated", b_halo_dilated, "", 8);
}

/* ---- FFT: the axes it does not transform keep their split, the transformed ones are gathered ---- */
static void b_fft(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 2, 8), "x,y,-"), r = param(p, fn, F32(4, 8), NULL), c, o[5];
  const int64_t n8[1] = {8}, n25[2] = {2, 5}, n5[1] = {5};
  CHECK_OK(lathe_fft(fn, x, LATHE_FFT_TYPE_FORWARD_REAL, n8, 1, &c));   /* Complex64 [4, 2, 5] */
  CHECK_OK(lathe_fft(fn, c, LATHE_FFT_TYPE_FORWARD, n25, 2, &o[1]));    /* axis 1 transformed: gathered */
  CHECK_OK(lathe_fft(fn, c, LATHE_FFT_TYPE_INVERSE_REAL, n8, 1, &o[2])); /* Float32 [4, 2, 8] */
  CHECK_OK(lathe_fft(fn, r, LATHE_FFT_TYPE_FORWARD_REAL, n8, 1, &o[3])); /* replicated: the output's split */
  CHECK_OK(lathe_fft(fn, c, LATHE_FFT_TYPE_INVERSE, n5, 1, &o[4]));
  o[0] = c;
  const char *specs[] = {"x,y,-", "x,-,-", "x,y,-", "x,-", "y,x,-"};
  ret(p, fn, 5, o, specs);
}
TEST(partition_fft) { check_all("fft", b_fft, 0); }

static void b_fft_whole(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 8), "-,x"), o[1];
  const int64_t n8[1] = {8};
  CHECK_OK(lathe_fft(fn, x, LATHE_FFT_TYPE_FORWARD_REAL, n8, 1, &o[0])); /* only the transformed axis split */
  const char *specs[] = {"x,-"};
  ret(p, fn, 1, o, specs);
}
TEST(partition_fft_falls_back) {
  check_all("fft whole", b_fft_whole, 1);
  check_stats("fft whole", b_fft_whole, "FFT", -1);
}

/* ---- FusedDenseVJP: a split batch keeps dx split, dWeight and dBias are partial sums (AllReduce);
 * the weight's output features split (Megatron columns) keep dWeight and dBias split, dx is a
 * partial sum; the input features split (rows) keep dx and dWeight split ---- */
static void b_dense_vjp_batch(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 8), "xy,-"), w = param(p, fn, F32(8, 6), NULL), b = param(p, fn, F32(6), NULL);
  lathe_value_t y = param(p, fn, F32(4, 6), "x,-"), g = param(p, fn, F32(4, 6), "xy,-"), d[3], e[3], o[5];
  CHECK_OK(lathe_fused_dense_vjp(fn, x, w, b, y, g, LATHE_ACTIVATION_TANH, LATHE_DENSE_INPUT_OUTPUTS, d));
  CHECK_OK(lathe_fused_dense_vjp(fn, x, w, NULL, y, g, LATHE_ACTIVATION_RELU, LATHE_DENSE_INPUT_OUTPUTS, e));
  o[0] = d[0], o[1] = d[1], o[2] = d[2], o[3] = e[0], o[4] = e[1];
  const char *specs[] = {"xy,-", NULL, NULL, "x,-", "-,x"};
  ret(p, fn, 5, o, specs);
}
TEST(partition_dense_vjp_batch) {
  check_all("dense_vjp batch", b_dense_vjp_batch, 0);
  check_stats("dense_vjp batch", b_dense_vjp_batch, "", 3); /* AllReduce of dW, db; of dW */
}

/* data parallel with sharded weights (FSDP's layout): dWeight and dBias, partial sums over the
 * batch's mesh axis, are wanted split over that same axis: ReduceScattered, not AllReduced */
static void b_dense_vjp_fsdp(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 8), "x,-"), w = param(p, fn, F32(8, 6), "x,-"), b = param(p, fn, F32(6), NULL);
  lathe_value_t y = param(p, fn, F32(4, 6), "x,-"), g = param(p, fn, F32(4, 6), "x,-"), d[3], o[3];
  CHECK_OK(lathe_fused_dense_vjp(fn, x, w, b, y, g, LATHE_ACTIVATION_TANH, LATHE_DENSE_INPUT_OUTPUTS, d));
  CHECK_OK(lathe_neg(fn, d[1], &o[1])); /* the update's shape: wanted split as the weight */
  o[0] = d[0], o[2] = d[2];
  const char *specs[] = {"x,-", "x,-", "x"};
  ret(p, fn, 3, o, specs);
}
TEST(partition_dense_vjp_reduce_scatter) {
  check_all("dense_vjp fsdp", b_dense_vjp_fsdp, 0);
  check_stats("dense_vjp fsdp", b_dense_vjp_fsdp, "", 3); /* AllGather of w; ReduceScatter of dW and of db */
}

static void b_dense_vjp_columns(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 8), NULL), w = param(p, fn, F32(8, 16), "-,x"), b = param(p, fn, F32(16), "x");
  lathe_value_t y = param(p, fn, F32(4, 16), "-,x"), g = param(p, fn, F32(4, 16), NULL), wt = param(p, fn, F32(16, 8), NULL);
  lathe_value_t d[3], e[3], o[6];
  CHECK_OK(lathe_fused_dense_vjp(fn, x, w, b, y, g, LATHE_ACTIVATION_RELU, LATHE_DENSE_INPUT_OUTPUTS, d));
  /* [out, in] layout, the split from the bias (the weight sliced) */
  CHECK_OK(lathe_fused_dense_vjp(fn, x, wt, b, y, g, LATHE_ACTIVATION_SIGMOID, LATHE_DENSE_OUTPUTS_INPUT, e));
  o[0] = d[0], o[1] = d[1], o[2] = d[2], o[3] = e[0], o[4] = e[1], o[5] = e[2];
  const char *specs[] = {NULL, "-,x", "x", "x,-", "x,-", NULL};
  ret(p, fn, 6, o, specs);
}
TEST(partition_dense_vjp_columns) {
  check_all("dense_vjp columns", b_dense_vjp_columns, 0);
  check_stats("dense_vjp columns", b_dense_vjp_columns, "", 3); /* AllReduce of each dx; the last dBias gathered */
}

/* batch over x and output features over y at once; the input features split (rows); a weight of
 * two output axes */
static void b_dense_vjp_2d(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 8), "x,-"), w = param(p, fn, F32(6, 8), "y,-"), y = param(p, fn, F32(4, 6), "x,y");
  lathe_value_t g = param(p, fn, F32(4, 6), "x,-"), h = param(p, fn, F32(4, 16), "-,x"), w2 = param(p, fn, F32(16, 2, 3), "x,y,-");
  lathe_value_t y2 = param(p, fn, F32(4, 2, 3), NULL), d[3], e[3], o[5];
  CHECK_OK(lathe_fused_dense_vjp(fn, x, w, NULL, y, g, LATHE_ACTIVATION_SIGMOID, LATHE_DENSE_OUTPUTS_INPUT, d));
  CHECK_OK(lathe_fused_dense_vjp(fn, h, w2, NULL, y2, y2, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, e));
  o[0] = d[0], o[1] = d[1], o[2] = e[0], o[3] = e[1], o[4] = d[0];
  const char *specs[] = {"x,-", "y,-", "-,x", "x,y,-", "-,y"};
  ret(p, fn, 5, o, specs);
}
TEST(partition_dense_vjp_2d) { check_all("dense_vjp 2d", b_dense_vjp_2d, 0); }

/* y and dOutput split along the output features with the weight whole: gathered, a fallback */
static void b_dense_vjp_whole(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, F32(4, 8), NULL), w = param(p, fn, F32(8, 6), NULL), y = param(p, fn, F32(4, 6), "-,x");
  lathe_value_t d[3];
  CHECK_OK(lathe_fused_dense_vjp(fn, x, w, NULL, y, y, LATHE_ACTIVATION_TANH, LATHE_DENSE_INPUT_OUTPUTS, d));
  const char *specs[] = {"x,-", NULL};
  ret(p, fn, 2, d, specs);
}
TEST(partition_dense_vjp_falls_back) {
  check_all("dense_vjp whole", b_dense_vjp_whole, 1);
  check_stats("dense_vjp whole", b_dense_vjp_whole, "FusedDenseVJP", -1);
}

/* ---- RNGBitGenerator runs whole on every device by design (a split would change which bits each
 * element gets), counted; its consumers slice the values ---- */
static void b_rng(prog *p, lathe_function_t fn) {
  lathe_value_t x = param(p, fn, TST_SHAPE(LATHE_DTYPE_INT32, 4, 6), "x,y"), state, r[2], o[3];
  const uint64_t st[3] = {42, 7, 0};
  lathe_shape ss = TST_SHAPE(LATHE_DTYPE_UINT64, 3), vs = TST_SHAPE(LATHE_DTYPE_INT32, 4, 6);
  CHECK_OK(lathe_constant(fn, &ss, st, sizeof st, &state));
  CHECK_OK(lathe_rng_bit_generator(fn, state, &vs, r));
  CHECK_OK(lathe_bitwise_xor(fn, x, r[1], &o[0]));
  o[1] = r[1], o[2] = r[0];
  const char *specs[] = {"x,y", "y,x", NULL};
  ret(p, fn, 3, o, specs);
}
TEST(partition_rng_whole) {
  check_all("rng", b_rng, 1);
  check_stats("rng", b_rng, "RNGBitGenerator", -1);
}

/* ---- bad input to the ops above, on sharded values: errors naming the op, and the builder still
 * compiles what was built right ---- */
TEST(partition_new_rules_bad_inputs) {
  lathe_backend_t be = NULL;
  CHECK_OK(lathe_backend_new("lathe:cpu,devices=2", &be));
  if (!be) return;
  const int sizes[1] = {2};
  const char *names[1] = {"x"}, *ax[1] = {"x"};
  lathe_mesh mesh = {"m", 1, sizes, names, NULL};
  lathe_builder_t b;
  CHECK_OK(lathe_builder_new(be, "bad_new_rules", &b));
  CHECK_OK(lathe_builder_auto_sharding(b, &mesh, 1));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_sharding rows = {.mesh = "m", .rank = 2, .axes = {ax, NULL}, .n_axes = {1, 0}};
  lathe_shape s = F32(4, 8), s3 = F32(4, 2, 8), bad_state = TST_SHAPE(LATHE_DTYPE_UINT64, 4);
  lathe_value_t x, w, st, y, out[3];
  CHECK_OK(lathe_parameter_sharded(fn, "x", &s, &rows, &x));
  CHECK_OK(lathe_parameter_sharded(fn, "w", &s3, NULL, &w));
  CHECK_OK(lathe_parameter_sharded(fn, "state", &bad_state, NULL, &st));
  const int64_t dims1[1] = {2}, dims2[2] = {1, 2}, n[3] = {4, 2, 8}, zero[1] = {0};
  lathe_window_params wp = {.window_dims = dims1, .n_window_dims = 1};
  CHECK_ERR(lathe_reduce_window(fn, LATHE_OP_REDUCE_SUM, x, &wp, &y), INVALID_ARGUMENT,
            "ReduceWindow: window_dims has 1 entries, but the operand has rank 2");
  wp = (lathe_window_params){.window_dims = dims2, .n_window_dims = 2};
  CHECK_ERR(lathe_reduce_window(fn, LATHE_OP_REDUCE_BITWISE_AND, x, &wp, &y), INVALID_ARGUMENT, "ReduceWindow: reduction");
  CHECK_ERR(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, x, x, &wp, &y), INVALID_ARGUMENT,
            "SelectAndScatterMax: source shape");
  CHECK_ERR(lathe_fft(fn, x, LATHE_FFT_TYPE_FORWARD_REAL, n, 3, &y), INVALID_ARGUMENT, "needs an operand of rank >= 3");
  CHECK_ERR(lathe_fft(fn, x, LATHE_FFT_TYPE_FORWARD_REAL, zero, 1, &y), INVALID_ARGUMENT, "must be positive");
  CHECK_ERR(lathe_fused_dense_vjp(fn, x, w, NULL, x, x, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, out),
            INVALID_ARGUMENT, "FusedDenseVJP: x has 8 input features, weight 4");
  lathe_shape vs = F32(4);
  CHECK_ERR(lathe_rng_bit_generator(fn, st, &vs, out), INVALID_ARGUMENT, "RNGBitGenerator: state must be shaped Uint64[3]");
  /* what was built right still partitions */
  CHECK_OK(lathe_reduce_window(fn, LATHE_OP_REDUCE_SUM, x, &wp, &y));
  const lathe_sharding *outs[1] = {&rows};
  CHECK_OK(lathe_function_return_sharded(fn, &y, outs, 1));
  lathe_executable_stats es;
  lathe_executable_t e = compile_stats(b, &es);
  if (e) CHECK(es.partitioned && es.partition_fallbacks == 0, "partitioned %d, %d fallbacks", es.partitioned, es.partition_fallbacks);
  lathe_executable_free(e);
  lathe_backend_free(be);
}

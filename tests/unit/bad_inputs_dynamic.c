/* bad_inputs_dynamic.c -- sizes that pair across operands when one side is a dynamic axis. A
 * dynamic axis pairs only with itself (the same name) where the kernels trust the pairing: such
 * graphs are INVALID_ARGUMENT at build time; where a dynamic axis may meet a static one
 * (DotGeneral, Concatenate), an inconsistent binding is INVALID_ARGUMENT at execution, never an
 * out-of-bounds access. Common-subexpression elimination keeps apart nodes that differ only by
 * the names of their dynamic axes (specialised graphs have them apart by size anyway). */
#include "graph/graph.h"
#include "testing.h"

static lathe_shape dyn(lathe_dtype dt, int rank, const int64_t *dims, const char *const *names) {
  lathe_shape s = tst_shape(dt, rank, dims);
  for (int i = 0; i < rank; i++) s.axis_names[i] = names[i];
  return s;
}
#define DYN(dt, dims, ...) \
  dyn((dt), (int)(sizeof((int64_t[])dims) / sizeof(int64_t)), (int64_t[])dims, (const char *const[]){__VA_ARGS__})
#define D(...) {__VA_ARGS__}

/* Runs b (two Float32 inputs of the given concrete shapes, zeros) and returns the status. */
static lathe_status_t run2(lathe_builder_t b, lathe_shape s0, lathe_shape s1, int n_out) {
  lathe_executable_t e = NULL;
  lathe_status_t st = lathe_builder_compile(b, &e);
  lathe_buffer_t in[2] = {NULL, NULL}, out[2] = {NULL, NULL};
  void *d0 = tst_alloc_for(&s0), *d1 = tst_alloc_for(&s1);
  if (!st) st = lathe_buffer_from_host(tst_backend(), 0, &s0, d0, (size_t)lathe_shape_byte_size(&s0), &in[0]);
  if (!st) st = lathe_buffer_from_host(tst_backend(), 0, &s1, d1, (size_t)lathe_shape_byte_size(&s1), &in[1]);
  if (!st) st = lathe_executable_execute(e, in, NULL, 2, 0, out, n_out);
  for (int i = 0; i < 2; i++) lathe_buffer_free(in[i]), lathe_buffer_free(out[i]);
  lathe_executable_free(e);
  free(d0);
  free(d1);
  return st;
}

TEST(dynamic_pairs_checked_at_execution) {
  /* DotGeneral: lhs [batch, 4] . rhs [5, 4] contracting axis 1 with a batch axis paired to a
   * static 5... here the contracting axis: lhs [2, k] . rhs [3, 3], k dynamic, bound to 7. */
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dyn_dot", &fn);
  if (!b) return;
  lathe_value_t x = tst_param(fn, "x", DYN(LATHE_DTYPE_FLOAT32, D(2, -1), NULL, "k"));
  lathe_value_t y = tst_param(fn, "y", TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 3));
  lathe_value_t d = NULL;
  CHECK_OK(lathe_dot_general(fn, x, (const int[]){1}, 1, NULL, 0, y, (const int[]){0}, 1, NULL, 0, NULL, &d));
  if (d) {
    CHECK_OK(lathe_function_return(fn, &d, 1));
    CHECK_ERR(run2(b, TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 7), TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 3), 1), INVALID_ARGUMENT,
              "DotGeneral: batch sizes 1 and 1, contracting sizes 7 and 3: dynamic axes bound to inconsistent sizes");
    CHECK_OK(run2(b, TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 3), TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 3), 1));
  }
  lathe_builder_free(b);

  /* Concatenate [batch, 3] and [5, 3] along axis 1: batch must be bound to 5 */
  b = tst_builder("dyn_concat", &fn);
  if (!b) return;
  x = tst_param(fn, "x", DYN(LATHE_DTYPE_FLOAT32, D(-1, 3), "batch", NULL));
  y = tst_param(fn, "y", TST_SHAPE(LATHE_DTYPE_FLOAT32, 5, 3));
  lathe_value_t c = NULL, ops[2] = {x, y};
  CHECK_OK(lathe_concatenate(fn, 1, ops, 2, &c));
  if (c) {
    CHECK_OK(lathe_function_return(fn, &c, 1));
    CHECK_ERR(run2(b, TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 3), TST_SHAPE(LATHE_DTYPE_FLOAT32, 5, 3), 1), INVALID_ARGUMENT,
              "Concatenate: operand 1 has size 5 on axis 0, the result 2: dynamic axes bound to inconsistent sizes");
    CHECK_OK(run2(b, TST_SHAPE(LATHE_DTYPE_FLOAT32, 5, 3), TST_SHAPE(LATHE_DTYPE_FLOAT32, 5, 3), 1));
  }
  lathe_builder_free(b);
}

TEST(dynamic_pairs_checked_at_build) {
  lathe_function_t fn, cl;
  lathe_builder_t b = tst_builder("dyn_build", &fn);
  if (!b) return;
  lathe_value_t a = tst_param(fn, "a", DYN(LATHE_DTYPE_FLOAT32, D(-1, 3), "a", NULL));
  lathe_value_t bb = tst_param(fn, "b", DYN(LATHE_DTYPE_FLOAT32, D(-1, 3), "b", NULL));
  lathe_value_t cond = tst_param(fn, "cond", DYN(LATHE_DTYPE_BOOL, D(-1, 3), "b", NULL));
  lathe_value_t f3 = tst_param(fn, "f3", TST_SHAPE(LATHE_DTYPE_FLOAT32, 3));
  lathe_value_t out = NULL, outs[3];
  int n0 = fn->n_nodes, n_out = 0;
  /* Reshape [a, 3] to [a, 4]: the element counts differ for every binding */
  CHECK_ERR(lathe_reshape(fn, a, (const int64_t[]){-1, 4}, 2, &out), INVALID_ARGUMENT,
            "Reshape: cannot reshape Float32[a,3] to Float32[a,4]: their static sizes multiply to 3 and 4");
  CHECK_ERR(lathe_where(fn, cond, a, a, &out), INVALID_ARGUMENT, "Where");
  CHECK_ERR(lathe_where(fn, cond, a, bb, &out), INVALID_ARGUMENT, "Where");
  CHECK_ERR(lathe_clamp(fn, a, bb, a, &out), INVALID_ARGUMENT, "Clamp");
  /* BatchNorm: a static scale for a dynamic feature axis */
  CHECK_ERR(lathe_batch_norm_for_inference(fn, a, f3, f3, f3, f3, 1e-3f, 0, &out), INVALID_ARGUMENT,
            "BatchNormForInference: scale must be shaped");
  /* FFT over a dynamic axis */
  lathe_value_t cx = tst_param(fn, "cx", DYN(LATHE_DTYPE_COMPLEX64, D(-1), "a"));
  n0 = fn->n_nodes;
  CHECK_ERR(lathe_fft(fn, cx, LATHE_FFT_TYPE_FORWARD, (const int64_t[]){4}, 1, &out), INVALID_ARGUMENT, "FFT");
  /* ConvGeneral with a dynamic input channels axis */
  lathe_value_t ci = tst_param(fn, "ci", DYN(LATHE_DTYPE_FLOAT32, D(1, -1, 4), NULL, "a", NULL));
  lathe_value_t ck = tst_param(fn, "ck", TST_SHAPE(LATHE_DTYPE_FLOAT32, 1, 2, 2));
  n0 = fn->n_nodes;
  lathe_conv_axes ax = {0, 1, (const int[]){2}, 1, 1, 0, (const int[]){2}, 1, 0, 1, (const int[]){2}, 1};
  CHECK_ERR(lathe_conv_general(fn, ci, ck, &ax, NULL, &out), INVALID_ARGUMENT, "ConvGeneral: input Float32[1,a,4] has a dynamic channels axis");
  /* FusedDense: x's features dynamic "a", weight's dynamic "b" */
  lathe_value_t w = tst_param(fn, "w", DYN(LATHE_DTYPE_FLOAT32, D(-1, 2), "b", NULL));
  lathe_value_t xt = tst_param(fn, "xt", DYN(LATHE_DTYPE_FLOAT32, D(3, -1), NULL, "a"));
  n0 = fn->n_nodes;
  CHECK_ERR(lathe_fused_dense(fn, xt, w, NULL, LATHE_ACTIVATION_NONE, LATHE_DENSE_INPUT_OUTPUTS, &out), INVALID_ARGUMENT,
            "FusedDense");
  /* Call: a value [a, 3] into a closure parameter [b, 3] */
  CHECK_OK(lathe_function_closure(fn, &cl));
  lathe_value_t p = NULL;
  lathe_shape ps = DYN(LATHE_DTYPE_FLOAT32, D(-1, 3), "b", NULL);
  CHECK_OK(lathe_parameter(cl, "p", &ps, &p));
  CHECK_OK(lathe_function_return(cl, &p, 1));
  CHECK_ERR(lathe_call(fn, cl, &a, 1, outs, 3, &n_out), INVALID_ARGUMENT, "Call: input 0 has shape Float32[a,3]");
  CHECK_OK(lathe_call(fn, cl, &bb, 1, outs, 3, &n_out));
  /* Sort: inputs [a, 3] and [b, 3] */
  lathe_value_t si[2] = {a, bb};
  lathe_function_t cmp;
  CHECK_OK(lathe_function_closure(fn, &cmp));
  lathe_value_t c0 = NULL, c1 = NULL, c2 = NULL, c3 = NULL, lt = NULL;
  lathe_shape sc = tst_shape0(LATHE_DTYPE_FLOAT32);
  CHECK_OK(lathe_parameter(cmp, "l0", &sc, &c0));
  CHECK_OK(lathe_parameter(cmp, "r0", &sc, &c1));
  CHECK_OK(lathe_parameter(cmp, "l1", &sc, &c2));
  CHECK_OK(lathe_parameter(cmp, "r1", &sc, &c3));
  CHECK_OK(lathe_less_than(cmp, c0, c1, &lt));
  CHECK_OK(lathe_function_return(cmp, &lt, 1));
  n0 = fn->n_nodes;
  CHECK_ERR(lathe_sort(fn, cmp, 1, false, si, 2, outs), INVALID_ARGUMENT, "Sort: input 1 has shape Float32[b,3]");
  /* ConvGeneral with batch groups over a dynamic batch */
  lathe_value_t bi = tst_param(fn, "bi", DYN(LATHE_DTYPE_FLOAT32, D(-1, 1, 4), "a", NULL, NULL));
  lathe_value_t bk = tst_param(fn, "bk", TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 1, 2));
  /* SelectAndScatterMax: source [b, 3] for an operand [a, 3] */
  lathe_value_t src = tst_param(fn, "src", DYN(LATHE_DTYPE_FLOAT32, D(-1, 3), "b", NULL));
  n0 = fn->n_nodes;
  lathe_conv_params bg = {.batch_group_count = 2};
  CHECK_ERR(lathe_conv_general(fn, bi, bk, &ax, &bg, &out), INVALID_ARGUMENT,
            "ConvGeneral: batch_group_count 2 needs a static input batch axis");
  CHECK_ERR(lathe_select_and_scatter(fn, LATHE_OP_SELECT_AND_SCATTER_MAX, a, src, NULL, &out), INVALID_ARGUMENT,
            "SelectAndScatterMax: source shape Float32[b,3] does not match");
  /* FusedLayerNorm over two dynamic axes, whose sizes multiply to 1 at build time, with gamma */
  lathe_value_t ab = tst_param(fn, "ab", DYN(LATHE_DTYPE_FLOAT32, D(-1, -1), "a", "b"));
  lathe_value_t g1 = tst_param(fn, "g1", TST_SHAPE(LATHE_DTYPE_FLOAT32, 1));
  n0 = fn->n_nodes;
  CHECK_ERR(lathe_fused_layer_norm(fn, ab, (const int[]){0, 1}, 2, 1e-5, g1, NULL, &out), INVALID_ARGUMENT,
            "FusedLayerNorm: gamma and beta need static normalised axes");
  CHECK(fn->n_nodes == n0, "failed builders left %d nodes", fn->n_nodes - n0);
  lathe_builder_free(b);
}

/* Two broadcasts of one scalar to [a] and to [b] are different values once a and b are bound:
 * common-subexpression elimination must not merge them. */
TEST(dynamic_cse_keeps_axis_names_apart) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dyn_cse", &fn);
  if (!b) return;
  lathe_value_t pa = tst_param(fn, "pa", DYN(LATHE_DTYPE_FLOAT32, D(-1), "a"));
  lathe_value_t pb = tst_param(fn, "pb", DYN(LATHE_DTYPE_FLOAT32, D(-1), "b"));
  lathe_value_t one = NULL, ba = NULL, bbv = NULL, sa = NULL, sb = NULL;
  const float v = 1;
  lathe_shape s0 = tst_shape0(LATHE_DTYPE_FLOAT32), ta = DYN(LATHE_DTYPE_FLOAT32, D(-1), "a"),
              tb = DYN(LATHE_DTYPE_FLOAT32, D(-1), "b");
  CHECK_OK(lathe_constant(fn, &s0, &v, sizeof v, &one));
  CHECK_OK(lathe_broadcast_in_dim(fn, one, &ta, NULL, 0, &ba));
  CHECK_OK(lathe_broadcast_in_dim(fn, one, &tb, NULL, 0, &bbv));
  CHECK_OK(lathe_add(fn, pa, ba, &sa));
  CHECK_OK(lathe_add(fn, pb, bbv, &sb));
  if (!sa || !sb) {
    lathe_builder_free(b);
    return;
  }
  lathe_value_t outs[2] = {sa, sb};
  CHECK_OK(lathe_function_return(fn, outs, 2));
  const float xa[2] = {1, 2}, xb[5] = {1, 2, 3, 4, 5};
  lathe_executable_t e = NULL;
  CHECK_OK(lathe_builder_compile(b, &e));
  lathe_shape ia = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2), ib = TST_SHAPE(LATHE_DTYPE_FLOAT32, 5);
  lathe_buffer_t in[2] = {NULL, NULL}, out[2] = {NULL, NULL};
  CHECK_OK(lathe_buffer_from_host(tst_backend(), 0, &ia, xa, sizeof xa, &in[0]));
  CHECK_OK(lathe_buffer_from_host(tst_backend(), 0, &ib, xb, sizeof xb, &in[1]));
  if (e && in[0] && in[1]) {
    CHECK_OK(lathe_executable_execute(e, in, NULL, 2, 0, out, 2));
    float ga[2] = {0}, gb[5] = {0};
    if (out[0] && out[1]) {
      CHECK_OK(lathe_buffer_to_host(out[0], ga, sizeof ga));
      CHECK_OK(lathe_buffer_to_host(out[1], gb, sizeof gb));
      CHECK(ga[1] == 3 && gb[4] == 6, "pa+1 = {2,3}, pb+1 = {2,...,6}; got %g and %g", ga[1], gb[4]);
    }
  }
  for (int i = 0; i < 2; i++) lathe_buffer_free(in[i]), lathe_buffer_free(out[i]);
  lathe_executable_free(e);
  lathe_builder_free(b);
}

/* ---- sizes given by graph values ---- */

static lathe_value_t cint(lathe_function_t fn, lathe_dtype dt, int64_t v) {
  lathe_shape s0 = tst_shape0(dt);
  uint64_t raw = (uint64_t)v;
  lathe_value_t c = NULL;
  CHECK_OK(lathe_constant(fn, &s0, &raw, (size_t)lathe_shape_byte_size(&s0), &c));
  return c;
}

TEST(dynamic_size_values_bad_builds) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dyn_size_bad_build", &fn);
  if (!b) return;
  lathe_value_t x = tst_param(fn, "x", DYN(LATHE_DTYPE_FLOAT32, D(-1, 3), "batch", NULL)), y = NULL;
  lathe_value_t f = tst_param(fn, "f", tst_shape0(LATHE_DTYPE_FLOAT32));
  lathe_value_t v = tst_param(fn, "v", TST_SHAPE(LATHE_DTYPE_INT32, 2));
  lathe_dim_spec fdim[2] = {{0, "n", f}, {3, NULL, NULL}};
  CHECK_ERR(lathe_dynamic_iota(fn, LATHE_DTYPE_INT32, 0, fdim, 2, &y), INVALID_ARGUMENT, "DynamicIota: the size value of axis 0 must be an integer scalar");
  lathe_dim_spec vdim[1] = {{0, "n", v}};
  CHECK_ERR(lathe_dynamic_iota(fn, LATHE_DTYPE_INT32, 0, vdim, 1, &y), INVALID_ARGUMENT, "integer scalar");
  lathe_dim_spec neg[1] = {{-2, NULL, NULL}};
  CHECK_ERR(lathe_dynamic_iota(fn, LATHE_DTYPE_INT32, 0, neg, 1, &y), INVALID_ARGUMENT, "DynamicIota: static dimension 0 is negative");
  lathe_dim_spec unk[1] = {{0, "nowhere", NULL}};
  CHECK_ERR(lathe_dynamic_iota(fn, LATHE_DTYPE_INT32, 0, unk, 1, &y), INVALID_ARGUMENT, "no input binds");
  lathe_dim_spec ok1[1] = {{4, NULL, NULL}};
  CHECK_ERR(lathe_dynamic_iota(fn, LATHE_DTYPE_BOOL, 0, ok1, 1, &y), INVALID_ARGUMENT, "DynamicIota: dtype must be numeric");
  CHECK_ERR(lathe_dynamic_iota(fn, LATHE_DTYPE_INT32, 1, ok1, 1, &y), INVALID_ARGUMENT, "DynamicIota");
  /* broadcast: a dynamic operand axis must stay itself; axes increasing; sizes 1 or equal */
  lathe_dim_spec st2[2] = {{2, NULL, NULL}, {3, NULL, NULL}};
  CHECK_ERR(lathe_dynamic_broadcast_in_dim(fn, x, (const int[]){0, 1}, 2, st2, 2, &y), INVALID_ARGUMENT,
            "DynamicBroadcastInDim: dynamic axis 0 (\"batch\") of the operand must stay");
  lathe_dim_spec st3[3] = {{0, "batch", NULL}, {3, NULL, NULL}, {3, NULL, NULL}};
  CHECK_ERR(lathe_dynamic_broadcast_in_dim(fn, x, (const int[]){0, 0}, 2, st3, 3, &y), INVALID_ARGUMENT, "strictly increasing");
  lathe_dim_spec st5[2] = {{0, "batch", NULL}, {0, "m", f}};
  CHECK_ERR(lathe_dynamic_broadcast_in_dim(fn, x, (const int[]){0, 1}, 2, st5, 2, &y), INVALID_ARGUMENT, "integer scalar");
  lathe_dim_spec st6[2] = {{0, "batch", NULL}, {0, "m", v}};
  CHECK_ERR(lathe_dynamic_broadcast_in_dim(fn, x, (const int[]){0, 1}, 2, st6, 2, &y), INVALID_ARGUMENT, "integer scalar");
  lathe_dim_spec st4[2] = {{0, "batch", NULL}, {4, NULL, NULL}};
  CHECK_ERR(lathe_dynamic_broadcast_in_dim(fn, x, (const int[]){0, 1}, 2, st4, 2, &y), INVALID_ARGUMENT,
            "DynamicBroadcastInDim: operand axis 1 has size 3, output axis 1 has size 4");
  CHECK_ERR(lathe_dynamic_broadcast_in_dim(fn, x, (const int[]){0}, 1, st4, 2, &y), INVALID_ARGUMENT, "one per axis");
  /* pad: interior, fill */
  lathe_dynamic_pad_axis pa = {0, 0, -1, NULL, NULL, NULL, NULL};
  CHECK_ERR(lathe_dynamic_pad(fn, x, f, &pa, 1, &y), INVALID_ARGUMENT, "DynamicPad: interior padding must be non-negative");
  lathe_dynamic_pad_axis pb = {0, 0, 0, f, NULL, NULL, NULL};
  CHECK_ERR(lathe_dynamic_pad(fn, x, f, &pb, 1, &y), INVALID_ARGUMENT, "DynamicPad: the start padding of axis 0 must be an integer scalar");
  lathe_dynamic_pad_axis pc = {0, 0, 0, NULL, NULL, NULL, NULL};
  CHECK_ERR(lathe_dynamic_pad(fn, x, v, &pc, 1, &y), INVALID_ARGUMENT, "DynamicPad: the fill value must be a Float32 scalar");
  /* sizes lathe makes are Int64; size operands take Int32 and Int64, never another class */
  lathe_value_t sz = NULL, shp = NULL, bv = tst_param(fn, "bv", tst_shape0(LATHE_DTYPE_BOOL));
  lathe_value_t i32 = tst_param(fn, "i32", tst_shape0(LATHE_DTYPE_INT32));
  CHECK_OK(lathe_dynamic_dimension_size(fn, x, 0, &sz));
  CHECK_OK(lathe_dynamic_shape(fn, x, &shp));
  lathe_shape ss = {0}, hs = {0};
  if (sz) CHECK_OK(lathe_value_shape(sz, &ss));
  if (shp) CHECK_OK(lathe_value_shape(shp, &hs));
  CHECK(ss.dtype == LATHE_DTYPE_INT64 && ss.rank == 0, "DynamicDimensionSize is an Int64 scalar: %s", lathe_dtype_name(ss.dtype));
  CHECK(hs.dtype == LATHE_DTYPE_INT64 && hs.rank == 1 && hs.dims[0] == 2, "DynamicShape is Int64[2]: %s", lathe_dtype_name(hs.dtype));
  lathe_dim_spec rf[2] = {{0, "n", f}, {3, NULL, NULL}};
  CHECK_ERR(lathe_dynamic_reshape(fn, x, rf, 2, &y), INVALID_ARGUMENT, "DynamicReshape: the size value of an axis must be an integer scalar, got Float32");
  lathe_dim_spec bd[1] = {{0, "n", bv}};
  CHECK_ERR(lathe_dynamic_iota(fn, LATHE_DTYPE_INT32, 0, bd, 1, &y), INVALID_ARGUMENT, "DynamicIota: the size value of axis 0 must be an integer scalar");
  lathe_dynamic_pad_axis pbv = {0, 0, 0, NULL, bv, NULL, NULL};
  CHECK_ERR(lathe_dynamic_pad(fn, x, f, &pbv, 1, &y), INVALID_ARGUMENT, "DynamicPad: the end padding of axis 0 must be an integer scalar");
  lathe_dim_spec r64[2] = {{0, "batch", sz}, {3, NULL, NULL}}, i64d[1] = {{0, "n64", sz}}, i32d[1] = {{0, "n32", i32}};
  CHECK_OK(lathe_dynamic_reshape(fn, x, r64, 2, &y));
  CHECK_OK(lathe_dynamic_iota(fn, LATHE_DTYPE_INT32, 0, i64d, 1, &y));
  CHECK_OK(lathe_dynamic_iota(fn, LATHE_DTYPE_INT32, 0, i32d, 1, &y));
  lathe_dynamic_pad_axis p32 = {0, 0, 0, i32, sz, NULL, NULL};
  CHECK_OK(lathe_dynamic_pad(fn, x, f, &p32, 1, &y));
  lathe_builder_free(b);
}

/* Runs main(n Int64 scalar) -> op(n) once with n = v; returns the status. */
typedef lathe_status_t (*sized_fn)(lathe_function_t fn, lathe_value_t n, lathe_value_t *out);

static lathe_status_t run_sized(sized_fn make, lathe_dtype dt, int64_t v) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dyn_size_bad_run", &fn);
  if (!b) return LATHE_INVALID("no builder");
  lathe_value_t n = tst_param(fn, "n", tst_shape0(dt)), y = NULL;
  lathe_status_t st = make(fn, n, &y);
  if (!st) st = lathe_function_return(fn, &y, 1);
  lathe_executable_t e = NULL;
  if (!st) st = lathe_builder_compile(b, &e);
  lathe_shape s0 = tst_shape0(dt);
  lathe_buffer_t in = NULL, out = NULL;
  if (!st) st = lathe_buffer_from_host(tst_backend(), 0, &s0, &v, (size_t)lathe_shape_byte_size(&s0), &in);
  if (!st) st = lathe_executable_execute(e, &in, NULL, 1, 0, &out, 1);
  lathe_buffer_free(in);
  lathe_buffer_free(out);
  lathe_executable_free(e);
  lathe_builder_free(b);
  return st;
}

static lathe_status_t iota_n(lathe_function_t fn, lathe_value_t n, lathe_value_t *out) {
  lathe_dim_spec d[2] = {{0, "n", n}, {4, NULL, NULL}};
  return lathe_dynamic_iota(fn, LATHE_DTYPE_INT32, 0, d, 2, out);
}
static lathe_status_t reshape_n(lathe_function_t fn, lathe_value_t n, lathe_value_t *out) {
  float v[6] = {0};
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 3);
  lathe_value_t c;
  LATHE_RETURN_IF_ERROR(lathe_constant(fn, &s, v, sizeof v, &c));
  lathe_dim_spec d[1] = {{0, "flat", n}};
  return lathe_dynamic_reshape(fn, c, d, 1, out);
}
static lathe_status_t broadcast_n(lathe_function_t fn, lathe_value_t n, lathe_value_t *out) {
  float v[1] = {0};
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 1);
  lathe_value_t c;
  LATHE_RETURN_IF_ERROR(lathe_constant(fn, &s, v, sizeof v, &c));
  lathe_dim_spec d[2] = {{2, NULL, NULL}, {0, "m", n}};
  return lathe_dynamic_broadcast_in_dim(fn, c, (const int[]){1}, 1, d, 2, out);
}
static lathe_status_t pad_interior_n(lathe_function_t fn, lathe_value_t n, lathe_value_t *out) {
  float v[3] = {0}, z = 0;
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3), s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  lathe_value_t c, fill;
  LATHE_RETURN_IF_ERROR(lathe_constant(fn, &s, v, sizeof v, &c));
  LATHE_RETURN_IF_ERROR(lathe_constant(fn, &s0, &z, sizeof z, &fill));
  lathe_dynamic_pad_axis pa = {0, 0, 0, NULL, NULL, n, NULL};
  return lathe_dynamic_pad(fn, c, fill, &pa, 1, out);
}
static lathe_status_t pad_start_n(lathe_function_t fn, lathe_value_t n, lathe_value_t *out) {
  float v[3] = {0}, z = 0;
  lathe_shape s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3), s0 = tst_shape0(LATHE_DTYPE_FLOAT32);
  lathe_value_t c, fill;
  LATHE_RETURN_IF_ERROR(lathe_constant(fn, &s, v, sizeof v, &c));
  LATHE_RETURN_IF_ERROR(lathe_constant(fn, &s0, &z, sizeof z, &fill));
  lathe_dynamic_pad_axis pa = {0, 0, 0, n, NULL, NULL, NULL};
  return lathe_dynamic_pad(fn, c, fill, &pa, 1, out);
}

TEST(dynamic_size_values_bad_at_execution) {
  CHECK_ERR(run_sized(iota_n, LATHE_DTYPE_INT64, -1), INVALID_ARGUMENT, "DynamicIota: axis 0 (\"n\") has negative size -1 from its value");
  CHECK_ERR(run_sized(iota_n, LATHE_DTYPE_INT64, INT64_C(1) << 61), INVALID_ARGUMENT, "DynamicIota");
  CHECK_ERR(run_sized(iota_n, LATHE_DTYPE_INT64, INT64_MAX), INVALID_ARGUMENT, "beyond the size limit");
  CHECK_ERR(run_sized(iota_n, LATHE_DTYPE_UINT64, -1), INVALID_ARGUMENT, "DynamicIota: the size value of axis 0, 18446744073709551615, is beyond");
  CHECK_OK(run_sized(iota_n, LATHE_DTYPE_INT8, 0));
  CHECK_ERR(run_sized(reshape_n, LATHE_DTYPE_INT32, 5), INVALID_ARGUMENT, "DynamicReshape: operand has 6 elements, the resolved target 5");
  CHECK_OK(run_sized(reshape_n, LATHE_DTYPE_INT32, 6));
  CHECK_ERR(run_sized(broadcast_n, LATHE_DTYPE_INT32, -2), INVALID_ARGUMENT,
            "DynamicBroadcastInDim: axis 1 (\"m\") has negative size -2 from its value");
  CHECK_OK(run_sized(broadcast_n, LATHE_DTYPE_INT32, 5));
  CHECK_OK(run_sized(broadcast_n, LATHE_DTYPE_INT16, 0));
  CHECK_ERR(run_sized(pad_interior_n, LATHE_DTYPE_INT32, -1), INVALID_ARGUMENT, "DynamicPad: interior padding of axis 0 is negative (-1)");
  CHECK_ERR(run_sized(pad_start_n, LATHE_DTYPE_INT32, -4), INVALID_ARGUMENT, "DynamicPad: axis 0 of size 3 with padding [-4, 0, interior 0] would get negative size -1");
  CHECK_OK(run_sized(pad_start_n, LATHE_DTYPE_INT32, -3)); /* crops everything */
  CHECK_ERR(run_sized(pad_interior_n, LATHE_DTYPE_INT64, INT64_C(1) << 62), INVALID_ARGUMENT, "DynamicPad: axis 0 of size 3");

  /* a value-sized axis named like a bound axis must agree with it (folded from a constant) */
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dyn_size_conflict", &fn);
  if (!b) return;
  lathe_value_t x = tst_param(fn, "x", DYN(LATHE_DTYPE_FLOAT32, D(-1), "batch")), y = NULL, z = NULL;
  tst_param(fn, "w", TST_SHAPE(LATHE_DTYPE_FLOAT32, 2));
  lathe_dim_spec d[1] = {{0, "batch", cint(fn, LATHE_DTYPE_INT32, 5)}};
  CHECK_OK(lathe_dynamic_iota(fn, LATHE_DTYPE_FLOAT32, 0, d, 1, &y));
  if (y) CHECK_OK(lathe_add(fn, x, y, &z));
  if (z) {
    CHECK_OK(lathe_function_return(fn, &z, 1));
    CHECK_ERR(run2(b, TST_SHAPE(LATHE_DTYPE_FLOAT32, 2), TST_SHAPE(LATHE_DTYPE_FLOAT32, 2), 1), INVALID_ARGUMENT,
              "DynamicIota: axis 0 (\"batch\") has size 5 from its value, but \"batch\" is bound to 2");
  }
  lathe_builder_free(b);
}

/* The name of a concatenation axis, as compute v0.1.14's shapeinference.Concatenate gives it
 * (its tests ConcatAxisNameSymbolicDynamic, DynamicConcatAxisSymbolic, ConcatOnDynamicAxis,
 * UnifiesNames, ConcatPreservesDynamicNonConcatAxes, NonConcatAxisNameConflictErrors), and
 * what specialisation makes of symbolic and anonymous names. */
static const char *concat_name(lathe_function_t fn, int axis, lathe_shape a, lathe_shape b, int at, int64_t *dim) {
  static char name[128];
  lathe_value_t ops[2] = {tst_param(fn, "a", a), tst_param(fn, "b", b)}, out = NULL;
  lathe_shape s = {0};
  lathe_status_t st = lathe_concatenate(fn, axis, ops, 2, &out);
  CHECK(st == NULL, "Concatenate: %s", lathe_status_message(st));
  lathe_status_free(st);
  if (!out) return "(error)";
  lathe_value_shape(out, &s);
  *dim = s.dims[at];
  snprintf(name, sizeof name, "%s", s.axis_names[at] ? s.axis_names[at] : "");
  return name;
}

TEST(dynamic_concatenate_axis_names) {
  const struct {
    int axis, at;
    lathe_shape a, b;
    const char *want;
    int64_t dim;
  } cases[] = {
      {0, 0, DYN(LATHE_DTYPE_FLOAT32, D(-1, 10), "batch", "a"), DYN(LATHE_DTYPE_FLOAT32, D(-1, 10), "batch", "a"), "=batch+batch", -1},
      {0, 1, DYN(LATHE_DTYPE_FLOAT32, D(-1, 10), "batch", "a"), DYN(LATHE_DTYPE_FLOAT32, D(-1, 10), "batch", "a"), "a", 10},
      {1, 1, DYN(LATHE_DTYPE_FLOAT32, D(-1, -1), "batch", "seq"), DYN(LATHE_DTYPE_FLOAT32, D(-1, 128), "batch", NULL), "=128+seq", -1},
      {1, 0, DYN(LATHE_DTYPE_FLOAT32, D(-1, -1), "batch", "seq"), DYN(LATHE_DTYPE_FLOAT32, D(-1, 128), "batch", NULL), "batch", -1},
      {1, 0, DYN(LATHE_DTYPE_FLOAT32, D(-1, 512), "batch", NULL), DYN(LATHE_DTYPE_FLOAT32, D(-1, 256), "batch", NULL), "batch", -1},
      {1, 1, DYN(LATHE_DTYPE_FLOAT32, D(-1, 10), "batch", NULL), DYN(LATHE_DTYPE_FLOAT32, D(-1, 20), "batch", NULL), "", 30},
      /* bytewise order as Go's sort.Strings: "128" < "9" < "a"; symbolic names flatten */
      {0, 0, DYN(LATHE_DTYPE_FLOAT32, D(-1, 2), "=9+a", NULL), DYN(LATHE_DTYPE_FLOAT32, D(128, 2), NULL, NULL), "=128+9+a", -1},
      {0, 0, DYN(LATHE_DTYPE_FLOAT32, D(-1, 2), "=b + a", NULL), DYN(LATHE_DTYPE_FLOAT32, D(-1, 2), "a", NULL), "=a+a+b", -1},
      /* a static axis counts by size even when named, where the result is dynamic */
      {0, 0, DYN(LATHE_DTYPE_FLOAT32, D(-1, 2), "x", NULL), DYN(LATHE_DTYPE_FLOAT32, D(4, 2), "y", NULL), "=4+x", -1},
      /* static result: named where an operand names it */
      {0, 0, DYN(LATHE_DTYPE_FLOAT32, D(3, 2), "x", NULL), DYN(LATHE_DTYPE_FLOAT32, D(4, 2), NULL, NULL), "=4+x", 7},
      /* anonymous */
      {0, 0, DYN(LATHE_DTYPE_FLOAT32, D(-1, 2), "?", NULL), DYN(LATHE_DTYPE_FLOAT32, D(-1, 2), "a", NULL), "?", -1},
      {0, 0, DYN(LATHE_DTYPE_FLOAT32, D(-1, 2), "=?+a", NULL), DYN(LATHE_DTYPE_FLOAT32, D(4, 2), NULL, NULL), "?", -1},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    lathe_function_t fn;
    lathe_builder_t b = tst_builder("concat_names", &fn);
    if (!b) return;
    int64_t dim = 0;
    const char *got = concat_name(fn, cases[i].axis, cases[i].a, cases[i].b, cases[i].at, &dim);
    CHECK(strcmp(got, cases[i].want) == 0 && dim == cases[i].dim, "case %zu: axis %d named \"%s\" (size %lld), want \"%s\" (%lld)",
          i, cases[i].at, got, (long long)dim, cases[i].want, (long long)cases[i].dim);
    lathe_builder_free(b);
  }

  /* non-concat axes unify names as compute's UnifyAxisName: different names and "?" conflict */
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("concat_conflicts", &fn);
  if (!b) return;
  lathe_value_t x = tst_param(fn, "x", DYN(LATHE_DTYPE_FLOAT32, D(-1, 512), "batch", NULL));
  lathe_value_t t = tst_param(fn, "t", DYN(LATHE_DTYPE_FLOAT32, D(-1, 512), "time", NULL));
  lathe_value_t q = tst_param(fn, "q", DYN(LATHE_DTYPE_FLOAT32, D(-1, 512), "?", NULL));
  lathe_value_t s = tst_param(fn, "s", DYN(LATHE_DTYPE_FLOAT32, D(3, 512), "h", NULL));
  lathe_value_t u = tst_param(fn, "u", DYN(LATHE_DTYPE_FLOAT32, D(3, 512), "w", NULL)), out = NULL;
  CHECK_ERR(lathe_concatenate(fn, 1, (lathe_value_t[]){x, t}, 2, &out), INVALID_ARGUMENT, "axis name conflict at axis 0");
  CHECK_ERR(lathe_concatenate(fn, 1, (lathe_value_t[]){q, q}, 2, &out), INVALID_ARGUMENT, "axis name conflict at axis 0");
  CHECK_ERR(lathe_concatenate(fn, 1, (lathe_value_t[]){s, u}, 2, &out), INVALID_ARGUMENT, "axis name conflict at axis 0");
  /* "?" pairs with nothing, itself included */
  CHECK_ERR(lathe_add(fn, q, q, &out), INVALID_ARGUMENT, "Add");
  lathe_builder_free(b);
  /* a concatenation of x and q: the anonymous result cannot be sized at specialisation */
  b = tst_builder("concat_anonymous", &fn);
  if (!b) return;
  x = tst_param(fn, "x", DYN(LATHE_DTYPE_FLOAT32, D(-1, 512), "batch", NULL));
  q = tst_param(fn, "q", DYN(LATHE_DTYPE_FLOAT32, D(-1, 512), "?", NULL));
  lathe_value_t a = NULL;
  CHECK_OK(lathe_concatenate(fn, 0, (lathe_value_t[]){x, q}, 2, &a));
  if (a) {
    CHECK_OK(lathe_function_return(fn, &a, 1));
    CHECK_ERR(run2(b, TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 512), TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 512), 1), INVALID_ARGUMENT,
              "dynamic axis 0 is anonymous");
  }
  lathe_builder_free(b);
}

/* lathe_axis_resolve: symbolic sums over a binding, and the errors that name op and axis. */
static int64_t get_ab(const void *ctx, const char *name) {
  (void)ctx;
  return !strcmp(name, "a") ? 5 : !strcmp(name, "b") ? 7 : !strcmp(name, "=a+1") ? 6 : !strcmp(name, "=a+2") ? 9 : -1;
}

TEST(dynamic_symbolic_axis_resolve) {
  static const struct {
    const char *name;
    int64_t want;
    const char *err;
  } cases[] = {
      {"a", 5, NULL},
      {"=a+b+128", 140, NULL},
      {"=10+a", 15, NULL},
      {"= a + b ", 12, NULL},
      {"=a+1", 6, NULL},
      {"=a+2", 0, "Op: dynamic axis 3 (\"=a+2\") is bound to 9 by the inputs, but its parts add up to 7"},
      {"c", 0, "Op: dynamic axis 3 (\"c\") is not bound by the inputs"},
      {"=a+c", 0, "Op: dynamic axis 3 (\"=a+c\"): part \"c\" is not bound by the inputs"},
      {"=a+?", 0, "Op: dynamic axis 3 (\"=a+?\") has an anonymous part"},
      {"?", 0, "Op: dynamic axis 3 is anonymous"},
      {"=a++b", 0, "malformed symbolic name"},
      {"=", 0, "malformed symbolic name"},
      {"", 0, "Op: dynamic axis 3 has no name"},
      {"=-9+a", 0, "resolves to a negative size"},
      {"=9223372036854775807+a", 0, "add up beyond the size limit"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t v = -1;
    lathe_status_t st = lathe_axis_resolve("Op", 3, cases[i].name, get_ab, NULL, &v);
    if (cases[i].err)
      CHECK(st && strstr(lathe_status_message(st), cases[i].err), "\"%s\": %s", cases[i].name,
            st ? lathe_status_message(st) : "resolved");
    else
      CHECK(!st && v == cases[i].want, "\"%s\": %lld (%s), want %lld", cases[i].name, (long long)v,
            st ? lathe_status_message(st) : "ok", (long long)cases[i].want);
    lathe_status_free(st);
  }
}

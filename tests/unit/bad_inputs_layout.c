/* bad_inputs_layout.c -- the REDUCE, SCAN, LAYOUT and Iota builders reject bad shapes, axes, dtypes
 * and attributes with INVALID_ARGUMENT naming the op, and leave no node behind; plus the
 * shape inference of good calls (result shapes, axis names, dynamic axes). */
#include "graph/graph.h"
#include "testing.h"

typedef struct {
  lathe_builder_t b;
  lathe_function_t fn;
  lathe_value_t x, x3, i, bo, s, is, c;
} fixture;

/* x: Float32[7,5]; x3: Float32[3,4,5]; i: Int32[4,6]; bo: Bool[2,3]; s: Float32 scalar;
 * is: Int32 scalar; c: Complex64[3]. */
static bool setup(fixture *f) {
  memset(f, 0, sizeof *f);
  f->b = tst_builder("bad_layout", &f->fn);
  if (!f->b) return false;
  lathe_shape x = TST_SHAPE(LATHE_DTYPE_FLOAT32, 7, 5), x3 = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 4, 5);
  lathe_shape i = TST_SHAPE(LATHE_DTYPE_INT32, 4, 6), bo = TST_SHAPE(LATHE_DTYPE_BOOL, 2, 3);
  lathe_shape s = tst_shape0(LATHE_DTYPE_FLOAT32), is = tst_shape0(LATHE_DTYPE_INT32), c = TST_SHAPE(LATHE_DTYPE_COMPLEX64, 3);
  CHECK_OK(lathe_parameter(f->fn, "x", &x, &f->x));
  CHECK_OK(lathe_parameter(f->fn, "x3", &x3, &f->x3));
  CHECK_OK(lathe_parameter(f->fn, "i", &i, &f->i));
  CHECK_OK(lathe_parameter(f->fn, "bo", &bo, &f->bo));
  CHECK_OK(lathe_parameter(f->fn, "s", &s, &f->s));
  CHECK_OK(lathe_parameter(f->fn, "is", &is, &f->is));
  CHECK_OK(lathe_parameter(f->fn, "c", &c, &f->c));
  return true;
}

TEST(bad_inputs_reduce) {
  fixture f;
  if (!setup(&f)) return;
  lathe_value_t out = NULL;
  int n0 = f.fn->n_nodes;
  const int a2[] = {2}, dup[] = {0, 0}, neg[] = {-1}, a0[] = {0}, a01[] = {0, 1}, a012[] = {0, 1, 2};
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_REDUCE_SUM, f.x, a2, 1, &out), INVALID_ARGUMENT, "ReduceSum");
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_REDUCE_MAX, f.x, dup, 2, &out), INVALID_ARGUMENT, "ReduceMax");
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_REDUCE_MIN, f.x, neg, 1, &out), INVALID_ARGUMENT, "ReduceMin");
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_REDUCE_SUM, f.x, a012, 3, &out), INVALID_ARGUMENT, "ReduceSum");
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_REDUCE_LOGICAL_AND, f.x, a0, 1, &out), INVALID_ARGUMENT, "ReduceLogicalAnd");
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_REDUCE_LOGICAL_XOR, f.i, a0, 1, &out), INVALID_ARGUMENT, "ReduceLogicalXor");
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_REDUCE_BITWISE_OR, f.x, a0, 1, &out), INVALID_ARGUMENT, "ReduceBitwiseOr");
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_REDUCE_BITWISE_AND, f.bo, a0, 1, &out), INVALID_ARGUMENT, "ReduceBitwiseAnd");
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_REDUCE_SUM, f.bo, a0, 1, &out), INVALID_ARGUMENT, "ReduceSum");
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_REDUCE_MAX, f.c, a0, 1, &out), INVALID_ARGUMENT, "ReduceMax");
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_ADD, f.x, a0, 1, &out), INVALID_ARGUMENT, "Reduce");
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_ARG_MIN_MAX, f.x, a0, 1, &out), INVALID_ARGUMENT, "Reduce");
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_REDUCE_SUM, NULL, a0, 1, &out), INVALID_ARGUMENT, "ReduceSum");
  CHECK_ERR(lathe_reduce(f.fn, LATHE_OP_REDUCE_SUM, f.x, NULL, 1, &out), INVALID_ARGUMENT, "ReduceSum");
  /* ArgMinMax */
  CHECK_ERR(lathe_arg_min_max(f.fn, f.x, 0, LATHE_DTYPE_FLOAT32, true, &out), INVALID_ARGUMENT, "ArgMinMax");
  CHECK_ERR(lathe_arg_min_max(f.fn, f.x, 0, LATHE_DTYPE_BOOL, false, &out), INVALID_ARGUMENT, "ArgMinMax");
  CHECK_ERR(lathe_arg_min_max(f.fn, f.x, 2, LATHE_DTYPE_INT32, false, &out), INVALID_ARGUMENT, "ArgMinMax");
  CHECK_ERR(lathe_arg_min_max(f.fn, f.x, -1, LATHE_DTYPE_INT32, false, &out), INVALID_ARGUMENT, "ArgMinMax");
  CHECK_ERR(lathe_arg_min_max(f.fn, f.s, 0, LATHE_DTYPE_INT32, false, &out), INVALID_ARGUMENT, "ArgMinMax");
  CHECK_ERR(lathe_arg_min_max(f.fn, f.c, 0, LATHE_DTYPE_INT32, false, &out), INVALID_ARGUMENT,
            "must be an integer, a float or a Bool");
  CHECK(f.fn->n_nodes == n0, "failed builders left %d nodes", f.fn->n_nodes - n0);
  CHECK_OK(lathe_arg_min_max(f.fn, f.bo, 0, LATHE_DTYPE_INT32, false, &out)); /* Bool: false < true */
  /* good calls: result shapes */
  lathe_shape s;
  CHECK_OK(lathe_reduce(f.fn, LATHE_OP_REDUCE_SUM, f.x3, (const int[]){2, 0}, 2, &out));
  if (out) {
    lathe_value_shape(out, &s);
    CHECK(s.rank == 1 && s.dims[0] == 4 && s.dtype == LATHE_DTYPE_FLOAT32, "ReduceSum x3 {2,0} -> [4]");
    lathe_ilist axes = lathe_attr_reduce_axes(out);
    CHECK(axes.n == 2 && axes.v[0] == 0 && axes.v[1] == 2, "axes stored sorted");
  }
  CHECK_OK(lathe_reduce(f.fn, LATHE_OP_REDUCE_MAX, f.x, a01, 2, &out));
  if (out) {
    lathe_value_shape(out, &s);
    CHECK(s.rank == 0, "full reduction is a scalar");
  }
  CHECK_OK(lathe_reduce(f.fn, LATHE_OP_REDUCE_PRODUCT, f.x, NULL, 0, &out));
  if (out) {
    lathe_value_shape(out, &s);
    CHECK(s.rank == 0, "no axes reduces every axis, as GoMLX defines");
  }
  CHECK_OK(lathe_arg_min_max(f.fn, f.x3, 1, LATHE_DTYPE_INT64, true, &out));
  if (out) {
    lathe_value_shape(out, &s);
    CHECK(s.rank == 2 && s.dims[0] == 3 && s.dims[1] == 5 && s.dtype == LATHE_DTYPE_INT64, "ArgMinMax shape");
  }
  lathe_builder_free(f.b);
}

TEST(bad_inputs_cum_sum) {
  fixture f;
  if (!setup(&f)) return;
  lathe_value_t out = NULL;
  int n0 = f.fn->n_nodes;
  CHECK_ERR(lathe_cum_sum(f.fn, f.x, 2, false, false, &out), INVALID_ARGUMENT, "CumSum: axis 2 is out of range");
  CHECK_ERR(lathe_cum_sum(f.fn, f.x, -1, true, false, &out), INVALID_ARGUMENT, "CumSum: axis -1");
  CHECK_ERR(lathe_cum_sum(f.fn, f.s, 0, false, false, &out), INVALID_ARGUMENT, "CumSum: the operand must not be a scalar");
  CHECK_ERR(lathe_cum_sum(f.fn, f.bo, 0, false, false, &out), INVALID_ARGUMENT, "CumSum");
  CHECK_ERR(lathe_cum_sum(f.fn, f.c, 0, false, true, &out), INVALID_ARGUMENT, "must be an integer or a float");
  CHECK_ERR(lathe_cum_sum(f.fn, NULL, 0, false, false, &out), INVALID_ARGUMENT, "CumSum");
  CHECK(f.fn->n_nodes == n0, "failed builders left %d nodes", f.fn->n_nodes - n0);
  /* good calls: x's shape, axis names kept */
  lathe_shape s, d = TST_SHAPE(LATHE_DTYPE_INT4, -1, 3);
  d.axis_names[0] = "batch";
  lathe_value_t dv = NULL;
  CHECK_OK(lathe_parameter(f.fn, "d", &d, &dv));
  CHECK_OK(lathe_cum_sum(f.fn, dv, 0, true, true, &out));
  if (out) {
    lathe_value_shape(out, &s);
    CHECK(s.rank == 2 && s.dims[0] == -1 && s.dims[1] == 3 && s.dtype == LATHE_DTYPE_INT4 && s.axis_names[0] &&
              strcmp(s.axis_names[0], "batch") == 0,
          "CumSum shape");
  }
  CHECK_OK(lathe_cum_sum(f.fn, f.i, 1, false, false, &out));
  lathe_builder_free(f.b);
}

TEST(bad_inputs_layout_ops) {
  fixture f;
  if (!setup(&f)) return;
  lathe_value_t out = NULL;
  int n0 = f.fn->n_nodes;
  /* Reshape */
  CHECK_ERR(lathe_reshape(f.fn, f.x, (const int64_t[]){6, 6}, 2, &out), INVALID_ARGUMENT, "Reshape");
  CHECK_ERR(lathe_reshape(f.fn, f.x, (const int64_t[]){-1, 5}, 2, &out), INVALID_ARGUMENT, "Reshape");
  CHECK_ERR(lathe_reshape(f.fn, f.x, (const int64_t[]){-3, 5}, 2, &out), INVALID_ARGUMENT, "Reshape");
  CHECK_ERR(lathe_reshape(f.fn, f.x, NULL, 2, &out), INVALID_ARGUMENT, "Reshape");
  CHECK_ERR(lathe_reshape(f.fn, f.x, (const int64_t[]){35}, 17, &out), INVALID_ARGUMENT, "Reshape");
  /* Transpose */
  CHECK_ERR(lathe_transpose(f.fn, f.x3, (const int[]){0, 1}, 2, &out), INVALID_ARGUMENT, "Transpose");
  CHECK_ERR(lathe_transpose(f.fn, f.x3, (const int[]){0, 1, 1}, 3, &out), INVALID_ARGUMENT, "Transpose");
  CHECK_ERR(lathe_transpose(f.fn, f.x3, (const int[]){0, 1, 3}, 3, &out), INVALID_ARGUMENT, "Transpose");
  CHECK_ERR(lathe_transpose(f.fn, f.x3, (const int[]){0, -1, 2}, 3, &out), INVALID_ARGUMENT, "Transpose");
  /* BroadcastInDim */
  lathe_shape b35 = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2, 7, 5), b75 = TST_SHAPE(LATHE_DTYPE_FLOAT32, 7, 5);
  lathe_shape bi = TST_SHAPE(LATHE_DTYPE_INT32, 2, 7, 5);
  CHECK_ERR(lathe_broadcast_in_dim(f.fn, f.x, &b35, (const int[]){0, 1}, 2, &out), INVALID_ARGUMENT, "BroadcastInDim");
  CHECK_ERR(lathe_broadcast_in_dim(f.fn, f.x, &b35, (const int[]){1}, 1, &out), INVALID_ARGUMENT, "BroadcastInDim");
  CHECK_ERR(lathe_broadcast_in_dim(f.fn, f.x, &b35, (const int[]){1, 1}, 2, &out), INVALID_ARGUMENT, "BroadcastInDim");
  CHECK_ERR(lathe_broadcast_in_dim(f.fn, f.x, &b35, (const int[]){1, 3}, 2, &out), INVALID_ARGUMENT, "BroadcastInDim");
  CHECK_ERR(lathe_broadcast_in_dim(f.fn, f.x, &bi, (const int[]){1, 2}, 2, &out), INVALID_ARGUMENT, "BroadcastInDim");
  CHECK_ERR(lathe_broadcast_in_dim(f.fn, f.x, NULL, (const int[]){1, 2}, 2, &out), INVALID_ARGUMENT, "BroadcastInDim");
  CHECK_ERR(lathe_broadcast_in_dim(f.fn, f.x, &b75, (const int[]){1, 0}, 2, &out), INVALID_ARGUMENT, "BroadcastInDim");
  /* Concatenate */
  lathe_value_t xi[2] = {f.x, f.i}, xx3[2] = {f.x, f.x3}, xx[2] = {f.x, f.x}, xs[2] = {f.x, NULL};
  CHECK_ERR(lathe_concatenate(f.fn, 0, xi, 2, &out), INVALID_ARGUMENT, "Concatenate");
  CHECK_ERR(lathe_concatenate(f.fn, 0, xx3, 2, &out), INVALID_ARGUMENT, "Concatenate");
  CHECK_ERR(lathe_concatenate(f.fn, 2, xx, 2, &out), INVALID_ARGUMENT, "Concatenate");
  CHECK_ERR(lathe_concatenate(f.fn, 0, xx, 0, &out), INVALID_ARGUMENT, "Concatenate");
  CHECK_ERR(lathe_concatenate(f.fn, 0, xs, 2, &out), INVALID_ARGUMENT, "Concatenate");
  lathe_value_t x_t = NULL;
  CHECK_OK(lathe_transpose(f.fn, f.x, (const int[]){1, 0}, 2, &x_t));
  n0 = f.fn->n_nodes;
  lathe_value_t mism[2] = {f.x, x_t};
  CHECK_ERR(lathe_concatenate(f.fn, 0, mism, 2, &out), INVALID_ARGUMENT, "Concatenate");
  /* Slice */
  const int64_t st0[] = {0, 0}, lim[] = {7, 5};
  CHECK_ERR(lathe_slice(f.fn, f.x, st0, (const int64_t[]){8, 5}, NULL, 2, &out), INVALID_ARGUMENT, "Slice");
  CHECK_ERR(lathe_slice(f.fn, f.x, (const int64_t[]){-1, 0}, lim, NULL, 2, &out), INVALID_ARGUMENT, "Slice");
  CHECK_ERR(lathe_slice(f.fn, f.x, (const int64_t[]){4, 0}, (const int64_t[]){3, 5}, NULL, 2, &out), INVALID_ARGUMENT, "Slice");
  CHECK_ERR(lathe_slice(f.fn, f.x, st0, lim, (const int64_t[]){1, 0}, 2, &out), INVALID_ARGUMENT, "stride");
  CHECK_ERR(lathe_slice(f.fn, f.x, st0, lim, (const int64_t[]){-2, 1}, 2, &out), INVALID_ARGUMENT, "Slice");
  CHECK_ERR(lathe_slice(f.fn, f.x, st0, lim, NULL, 1, &out), INVALID_ARGUMENT, "Slice");
  /* Pad */
  lathe_pad_axis ok2[2] = {{1, 1, 0}, {0, 0, 0}}, negint[1] = {{0, 0, -1}}, tooneg[1] = {{-5, -3, 0}};
  lathe_pad_axis three[3] = {{0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
  CHECK_ERR(lathe_pad(f.fn, f.x, f.s, negint, 1, &out), INVALID_ARGUMENT, "Pad");
  CHECK_ERR(lathe_pad(f.fn, f.x, f.x, ok2, 2, &out), INVALID_ARGUMENT, "scalar");
  CHECK_ERR(lathe_pad(f.fn, f.x, f.is, ok2, 2, &out), INVALID_ARGUMENT, "Pad");
  CHECK_ERR(lathe_pad(f.fn, f.x, f.s, tooneg, 1, &out), INVALID_ARGUMENT, "Pad");
  CHECK_ERR(lathe_pad(f.fn, f.x, f.s, three, 3, &out), INVALID_ARGUMENT, "Pad");
  CHECK_ERR(lathe_pad(f.fn, f.x, NULL, ok2, 2, &out), INVALID_ARGUMENT, "Pad");
  /* Reverse */
  CHECK_ERR(lathe_reverse(f.fn, f.x, (const int[]){2}, 1, &out), INVALID_ARGUMENT, "Reverse");
  CHECK_ERR(lathe_reverse(f.fn, f.x, (const int[]){1, 1}, 2, &out), INVALID_ARGUMENT, "Reverse");
  CHECK_ERR(lathe_reverse(f.fn, f.x, (const int[]){-1}, 1, &out), INVALID_ARGUMENT, "Reverse");
  /* Iota */
  lathe_shape i34 = TST_SHAPE(LATHE_DTYPE_INT32, 3, 4), ib = TST_SHAPE(LATHE_DTYPE_BOOL, 3), i0 = tst_shape0(LATHE_DTYPE_INT32);
  lathe_shape ineg = TST_SHAPE(LATHE_DTYPE_FLOAT32, -2), idyn = TST_SHAPE(LATHE_DTYPE_FLOAT32, -1);
  idyn.axis_names[0] = "nobody";
  CHECK_ERR(lathe_iota(f.fn, &i34, 2, &out), INVALID_ARGUMENT, "Iota");
  CHECK_ERR(lathe_iota(f.fn, &i34, -1, &out), INVALID_ARGUMENT, "Iota");
  CHECK_ERR(lathe_iota(f.fn, &ib, 0, &out), INVALID_ARGUMENT, "Iota");
  CHECK_ERR(lathe_iota(f.fn, &i0, 0, &out), INVALID_ARGUMENT, "Iota");
  CHECK_ERR(lathe_iota(f.fn, &ineg, 0, &out), INVALID_ARGUMENT, "Iota");
  CHECK_ERR(lathe_iota(f.fn, &idyn, 0, &out), INVALID_ARGUMENT, "Iota");
  CHECK_ERR(lathe_iota(f.fn, NULL, 0, &out), INVALID_ARGUMENT, "Iota");
  CHECK(f.fn->n_nodes == n0, "failed builders left %d nodes", f.fn->n_nodes - n0);
  /* good calls: shapes */
  lathe_shape s;
  CHECK_OK(lathe_pad(f.fn, f.x, f.s, (lathe_pad_axis[]){{-1, 2, 1}}, 1, &out));
  if (out) {
    lathe_value_shape(out, &s);
    CHECK(s.dims[0] == 7 + 1 + 6 && s.dims[1] == 5, "Pad shape %lld", (long long)s.dims[0]);
  }
  CHECK_OK(lathe_slice(f.fn, f.x, (const int64_t[]){1, 0}, lim, (const int64_t[]){2, 3}, 2, &out));
  if (out) {
    lathe_value_shape(out, &s);
    CHECK(s.dims[0] == 3 && s.dims[1] == 2, "Slice shape");
  }
  CHECK_OK(lathe_concatenate(f.fn, 1, xx, 2, &out));
  if (out) {
    lathe_value_shape(out, &s);
    CHECK(s.dims[0] == 7 && s.dims[1] == 10, "Concatenate shape");
  }
  CHECK_OK(lathe_broadcast_in_dim(f.fn, f.x, &b35, (const int[]){1, 2}, 2, &out));
  if (out) {
    lathe_value_shape(out, &s);
    CHECK(s.rank == 3 && s.dims[0] == 2, "BroadcastInDim shape");
  }
  lathe_builder_free(f.b);
}

/* Dynamic axes: names follow the data through reshape, transpose, reduce and broadcast. */
TEST(layout_dynamic_axes) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("dyn", &fn);
  if (!b) return;
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_FLOAT32, -1, 3, 4);
  xs.axis_names[0] = "batch";
  lathe_value_t x = NULL, out = NULL;
  lathe_shape s;
  x = tst_param(fn, "x", xs);
  CHECK_OK(lathe_reshape(fn, x, (const int64_t[]){-1, 12}, 2, &out));
  if (out) {
    lathe_value_shape(out, &s);
    CHECK(s.dims[0] == -1 && s.axis_names[0] && !strcmp(s.axis_names[0], "batch"), "Reshape keeps the name");
  }
  CHECK_ERR(lathe_reshape(fn, x, (const int64_t[]){12, 2}, 2, &out), INVALID_ARGUMENT, "Reshape");
  CHECK_OK(lathe_transpose(fn, x, (const int[]){2, 0, 1}, 3, &out));
  if (out) {
    lathe_value_shape(out, &s);
    CHECK(s.dims[1] == -1 && !strcmp(s.axis_names[1], "batch"), "Transpose moves the name");
  }
  CHECK_OK(lathe_reduce(fn, LATHE_OP_REDUCE_SUM, x, (const int[]){1}, 1, &out));
  if (out) {
    lathe_value_shape(out, &s);
    CHECK(s.rank == 2 && s.dims[0] == -1 && !strcmp(s.axis_names[0], "batch"), "Reduce keeps the name");
  }
  lathe_shape bs = TST_SHAPE(LATHE_DTYPE_FLOAT32, -1, 3, 4);
  bs.axis_names[0] = "batch";
  CHECK_OK(lathe_broadcast_in_dim(fn, x, &bs, (const int[]){0, 1, 2}, 3, &out));
  bs.axis_names[0] = "other";
  CHECK_ERR(lathe_broadcast_in_dim(fn, x, &bs, (const int[]){0, 1, 2}, 3, &out), INVALID_ARGUMENT, "BroadcastInDim");
  CHECK_ERR(lathe_slice(fn, x, (const int64_t[]){1, 0, 0}, (const int64_t[]){-1, 3, 4}, NULL, 3, &out), INVALID_ARGUMENT, "Slice");
  CHECK_ERR(lathe_pad(fn, x, x, (lathe_pad_axis[]){{1, 0, 0}}, 1, &out), INVALID_ARGUMENT, "Pad");
  lathe_builder_free(b);
}

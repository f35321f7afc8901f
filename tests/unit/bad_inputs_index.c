/* bad_inputs_index.c -- the INDEX family's builders reject bad shapes, axes, dtypes and
 * attributes with INVALID_ARGUMENT naming the op, and leave no node behind. */
#include "graph/graph.h"
#include "testing.h"

typedef struct {
  lathe_builder_t b;
  lathe_function_t fn;
  lathe_value_t x, x3, i, i2, fi, u, s, fs, s2;
} fixture;

/* x: Float32[7,5]; x3: Float32[3,4,5]; i: Int32[4,1]; i2: Int32[4,2]; fi: Float32[4,1];
 * u: Float32[4,5]; s: Int32 scalar; fs: Float32 scalar; s2: Int32[2]. */
static bool setup(fixture *f) {
  memset(f, 0, sizeof *f);
  f->b = tst_builder("bad_index", &f->fn);
  if (!f->b) return false;
  lathe_shape x = TST_SHAPE(LATHE_DTYPE_FLOAT32, 7, 5), x3 = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 4, 5);
  lathe_shape i = TST_SHAPE(LATHE_DTYPE_INT32, 4, 1), i2 = TST_SHAPE(LATHE_DTYPE_INT32, 4, 2);
  lathe_shape fi = TST_SHAPE(LATHE_DTYPE_FLOAT32, 4, 1), u = TST_SHAPE(LATHE_DTYPE_FLOAT32, 4, 5);
  lathe_shape s = tst_shape0(LATHE_DTYPE_INT32), fs = tst_shape0(LATHE_DTYPE_FLOAT32), s2 = TST_SHAPE(LATHE_DTYPE_INT32, 2);
  CHECK_OK(lathe_parameter(f->fn, "x", &x, &f->x));
  CHECK_OK(lathe_parameter(f->fn, "x3", &x3, &f->x3));
  CHECK_OK(lathe_parameter(f->fn, "i", &i, &f->i));
  CHECK_OK(lathe_parameter(f->fn, "i2", &i2, &f->i2));
  CHECK_OK(lathe_parameter(f->fn, "fi", &fi, &f->fi));
  CHECK_OK(lathe_parameter(f->fn, "u", &u, &f->u));
  CHECK_OK(lathe_parameter(f->fn, "s", &s, &f->s));
  CHECK_OK(lathe_parameter(f->fn, "fs", &fs, &f->fs));
  CHECK_OK(lathe_parameter(f->fn, "s2", &s2, &f->s2));
  return true;
}

static const int OFF1[] = {1}, COL0[] = {0}, MAP0[] = {0};
static const int64_t ROW[] = {1, 5};

TEST(bad_gather) {
  fixture f;
  if (!setup(&f)) return;
  lathe_value_t y = NULL;
  int before = f.fn->n_nodes;
  /* a good one, for reference */
  CHECK_OK(lathe_gather(f.fn, f.x, f.i, 1, OFF1, 1, COL0, 1, MAP0, 1, ROW, 2, false, &y));
  before = f.fn->n_nodes;
  CHECK_ERR(lathe_gather(f.fn, f.s, f.i, 1, NULL, 0, NULL, 0, MAP0, 1, NULL, 0, false, &y), INVALID_ARGUMENT,
            "Gather: requires a non-scalar operand");
  CHECK_ERR(lathe_gather(f.fn, f.x, f.fi, 1, OFF1, 1, COL0, 1, MAP0, 1, ROW, 2, false, &y), INVALID_ARGUMENT,
            "Gather: start_indices must have an integer dtype");
  const int col2[] = {2};
  CHECK_ERR(lathe_gather(f.fn, f.x, f.i, 1, OFF1, 1, col2, 1, MAP0, 1, ROW, 2, false, &y), INVALID_ARGUMENT,
            "Gather: collapsed_slice_axes[0]=2 is out of range");
  const int col00[] = {0, 0};
  CHECK_ERR(lathe_gather(f.fn, f.x, f.i, 1, NULL, 0, col00, 2, MAP0, 1, ROW, 2, false, &y), INVALID_ARGUMENT,
            "Gather: collapsed_slice_axes lists axis 0 twice");
  CHECK_ERR(lathe_gather(f.fn, f.x, f.i, 1, OFF1, 1, COL0, 1, MAP0, 1, ROW, 1, false, &y), INVALID_ARGUMENT,
            "Gather: slice_sizes has 1 entries");
  const int64_t big[] = {1, 6}, neg[] = {1, -2}, notone[] = {2, 5};
  CHECK_ERR(lathe_gather(f.fn, f.x, f.i, 1, OFF1, 1, COL0, 1, MAP0, 1, big, 2, false, &y), INVALID_ARGUMENT,
            "Gather: slice size 6 for axis 1 is larger");
  CHECK_ERR(lathe_gather(f.fn, f.x, f.i, 1, OFF1, 1, COL0, 1, MAP0, 1, neg, 2, false, &y), INVALID_ARGUMENT,
            "Gather: slice size -2 for axis 1 is negative");
  CHECK_ERR(lathe_gather(f.fn, f.x, f.i, 1, OFF1, 1, COL0, 1, MAP0, 1, notone, 2, false, &y), INVALID_ARGUMENT,
            "Gather: collapsed slice axis 0 must have slice size 1");
  const int off12[] = {1, 2};
  CHECK_ERR(lathe_gather(f.fn, f.x, f.i, 1, off12, 2, COL0, 1, MAP0, 1, ROW, 2, false, &y), INVALID_ARGUMENT,
            "Gather: collapsed_slice_axes (1) + offset_output_axes (2)");
  CHECK_ERR(lathe_gather(f.fn, f.x, f.i, 3, OFF1, 1, COL0, 1, MAP0, 1, ROW, 2, false, &y), INVALID_ARGUMENT,
            "Gather: index_vector_axis=3 is out of range");
  CHECK_ERR(lathe_gather(f.fn, f.x, f.i2, 1, OFF1, 1, COL0, 1, MAP0, 1, ROW, 2, false, &y), INVALID_ARGUMENT,
            "Gather: start_index_map has 1 entries");
  const int map5[] = {5}, map00[] = {0, 0};
  CHECK_ERR(lathe_gather(f.fn, f.x, f.i, 1, OFF1, 1, COL0, 1, map5, 1, ROW, 2, false, &y), INVALID_ARGUMENT,
            "Gather: start_index_map[0]=5 is out of range");
  CHECK_ERR(lathe_gather(f.fn, f.x, f.i2, 1, OFF1, 1, COL0, 1, map00, 2, ROW, 2, false, &y), INVALID_ARGUMENT,
            "Gather: start_index_map lists axis 0 twice");
  const int off2[] = {2};
  CHECK_ERR(lathe_gather(f.fn, f.x, f.i, 1, off2, 1, COL0, 1, MAP0, 1, ROW, 2, false, &y), INVALID_ARGUMENT,
            "Gather: offset_output_axes[0]=2 is out of range");
  CHECK_ERR(lathe_gather(f.fn, f.x, NULL, 1, OFF1, 1, COL0, 1, MAP0, 1, ROW, 2, false, &y), INVALID_ARGUMENT, "Gather");
  CHECK_ERR(lathe_gather(f.fn, f.x, f.i, 1, OFF1, 1, COL0, 1, MAP0, 1, NULL, 2, false, &y), INVALID_ARGUMENT,
            "Gather: slice_sizes is NULL");
  CHECK(f.fn->n_nodes == before, "failed builders leave no node (%d -> %d)", before, f.fn->n_nodes);
  lathe_builder_free(f.b);
}

TEST(bad_scatter) {
  fixture f;
  if (!setup(&f)) return;
  lathe_value_t y = NULL;
  const int uwa1[] = {1}, iwa0[] = {0}, sa0[] = {0};
  CHECK_OK(lathe_scatter_sum(f.fn, f.x, f.i, f.u, 1, uwa1, 1, iwa0, 1, sa0, 1, false, false, &y));
  int before = f.fn->n_nodes;
  CHECK_ERR(lathe_scatter(f.fn, LATHE_OP_ADD, f.x, f.i, f.u, 1, uwa1, 1, iwa0, 1, sa0, 1, false, false, &y),
            INVALID_ARGUMENT, "Scatter: op Add is not one of");
  CHECK_ERR(lathe_scatter_max(f.fn, f.x, f.i, f.i, 1, uwa1, 1, iwa0, 1, sa0, 1, false, false, &y), INVALID_ARGUMENT,
            "ScatterMax: operand Float32[7,5] and updates Int32[4,1] must have the same dtype");
  CHECK_ERR(lathe_scatter_min(f.fn, f.x, f.fi, f.u, 1, uwa1, 1, iwa0, 1, sa0, 1, false, false, &y), INVALID_ARGUMENT,
            "ScatterMin: indices must have an integer dtype");
  CHECK_ERR(lathe_scatter_sum(f.fn, f.x, f.i, f.u, 3, uwa1, 1, iwa0, 1, sa0, 1, false, false, &y), INVALID_ARGUMENT,
            "ScatterSum: index_vector_axis=3 is out of range");
  CHECK_ERR(lathe_scatter_sum(f.fn, f.x, f.i2, f.u, 1, uwa1, 1, iwa0, 1, sa0, 1, false, false, &y), INVALID_ARGUMENT,
            "ScatterSum: scatter_axes_to_operand_axes has 1 entries");
  const int sa2[] = {2};
  CHECK_ERR(lathe_scatter_sum(f.fn, f.x, f.i, f.u, 1, uwa1, 1, iwa0, 1, sa2, 1, false, false, &y), INVALID_ARGUMENT,
            "ScatterSum: scatter_axes_to_operand_axes[0]=2 is out of range");
  const int uwa2[] = {2};
  CHECK_ERR(lathe_scatter_sum(f.fn, f.x, f.i, f.u, 1, uwa2, 1, iwa0, 1, sa0, 1, false, false, &y), INVALID_ARGUMENT,
            "ScatterSum: update_window_axes[0]=2 is out of range");
  const int uwa01[] = {0, 1};
  CHECK_ERR(lathe_scatter_sum(f.fn, f.x, f.i, f.u, 1, uwa01, 2, NULL, 0, sa0, 1, false, false, &y), INVALID_ARGUMENT,
            "ScatterSum: update_window_axes (2) + batch axes of indices (1)");
  CHECK_ERR(lathe_scatter_sum(f.fn, f.x, f.i, f.u, 1, uwa1, 1, NULL, 0, sa0, 1, false, false, &y), INVALID_ARGUMENT,
            "ScatterSum: update_window_axes (1) + inserted_window_axes (0) must be the operand's rank (2)");
  lathe_shape ub = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, 5), u9s = TST_SHAPE(LATHE_DTYPE_FLOAT32, 4, 9);
  lathe_value_t u3, u9;
  CHECK_OK(lathe_parameter(f.fn, "u3", &ub, &u3));
  CHECK_OK(lathe_parameter(f.fn, "u9", &u9s, &u9));
  before = f.fn->n_nodes;
  const int iwa1[] = {1}; /* window axis 1 of updates (9) lands on operand axis 0 (7) */
  CHECK_ERR(lathe_scatter_sum(f.fn, f.x, f.i, u9, 1, uwa1, 1, iwa1, 1, sa0, 1, false, false, &y), INVALID_ARGUMENT,
            "ScatterSum: updates axis 1 has size 9, larger than operand axis 0 (7)");
  CHECK_ERR(lathe_scatter_sum(f.fn, f.x, f.i, u3, 1, uwa1, 1, iwa0, 1, sa0, 1, false, false, &y), INVALID_ARGUMENT,
            "ScatterSum: updates batch axis 0 has size 3, but the matching indices axis 0 has size 4");
  CHECK_ERR(lathe_scatter_sum(f.fn, f.x, f.i, NULL, 1, uwa1, 1, iwa0, 1, sa0, 1, false, false, &y), INVALID_ARGUMENT,
            "ScatterSum");
  CHECK(f.fn->n_nodes == before, "failed builders leave no node (%d -> %d)", before, f.fn->n_nodes);
  lathe_builder_free(f.b);
}

TEST(bad_dynamic_slices) {
  fixture f;
  if (!setup(&f)) return;
  lathe_value_t y = NULL;
  lathe_value_t ss[2] = {f.s, f.s}, one[1] = {f.s}, fl[2] = {f.s, f.fs}, vec[2] = {f.s, f.s2};
  const int64_t sz[2] = {2, 3}, big[2] = {8, 3}, neg[2] = {-1, 3};
  CHECK_OK(lathe_dynamic_slice(f.fn, f.x, ss, 2, sz, 2, &y));
  CHECK_OK(lathe_dynamic_update_slice(f.fn, f.x, f.u, ss, 2, &y));
  /* all starts in one vector (XLA's other form) */
  lathe_shape s3s = TST_SHAPE(LATHE_DTYPE_INT32, 3), fvs = TST_SHAPE(LATHE_DTYPE_FLOAT32, 2);
  lathe_value_t s3, fv;
  CHECK_OK(lathe_parameter(f.fn, "s3", &s3s, &s3));
  CHECK_OK(lathe_parameter(f.fn, "fv", &fvs, &fv));
  CHECK_OK(lathe_dynamic_slice(f.fn, f.x, &f.s2, 1, sz, 2, &y));
  CHECK_OK(lathe_dynamic_update_slice(f.fn, f.x, f.u, &f.s2, 1, &y));
  int before = f.fn->n_nodes;
  CHECK_ERR(lathe_dynamic_slice(f.fn, f.x, &s3, 1, sz, 2, &y), INVALID_ARGUMENT,
            "DynamicSlice: start indices Int32[3] must be an integer vector of length 2 (one per operand axis)");
  CHECK_ERR(lathe_dynamic_update_slice(f.fn, f.x, f.u, &fv, 1, &y), INVALID_ARGUMENT,
            "DynamicUpdateSlice: start indices Float32[2] must be an integer vector of length 2");
  CHECK_ERR(lathe_dynamic_slice(f.fn, f.x, &f.i, 1, sz, 2, &y), INVALID_ARGUMENT,
            "DynamicSlice: got 1 start indices, the operand Float32[7,5] needs one per axis (2)");
  CHECK_ERR(lathe_dynamic_slice(f.fn, f.x, one, 1, sz, 2, &y), INVALID_ARGUMENT,
            "DynamicSlice: got 1 start indices, the operand Float32[7,5] needs one per axis (2)");
  CHECK_ERR(lathe_dynamic_slice(f.fn, f.x, fl, 2, sz, 2, &y), INVALID_ARGUMENT,
            "DynamicSlice: start index 1 must be an integer scalar, got Float32");
  CHECK_ERR(lathe_dynamic_slice(f.fn, f.x, vec, 2, sz, 2, &y), INVALID_ARGUMENT,
            "DynamicSlice: start index 1 must be an integer scalar, got Int32[2]");
  CHECK_ERR(lathe_dynamic_slice(f.fn, f.x, ss, 2, sz, 1, &y), INVALID_ARGUMENT, "DynamicSlice: slice_dims has 1 entries");
  CHECK_ERR(lathe_dynamic_slice(f.fn, f.x, ss, 2, big, 2, &y), INVALID_ARGUMENT,
            "DynamicSlice: slice size 8 for axis 0 is larger than the operand's dimension 7");
  CHECK_ERR(lathe_dynamic_slice(f.fn, f.x, ss, 2, neg, 2, &y), INVALID_ARGUMENT,
            "DynamicSlice: slice size -1 for axis 0 is negative");
  CHECK_ERR(lathe_dynamic_slice(f.fn, f.x, NULL, 2, sz, 2, &y), INVALID_ARGUMENT, "DynamicSlice: start_indices is NULL");
  CHECK_ERR(lathe_dynamic_slice(f.fn, f.x, ss, 40, sz, 2, &y), INVALID_ARGUMENT, "DynamicSlice: 40 start indices");
  CHECK_ERR(lathe_dynamic_update_slice(f.fn, f.x, f.i, ss, 2, &y), INVALID_ARGUMENT,
            "DynamicUpdateSlice: operand Float32[7,5] and update Int32[4,1] must have the same dtype");
  CHECK_ERR(lathe_dynamic_update_slice(f.fn, f.x, f.x3, ss, 2, &y), INVALID_ARGUMENT,
            "DynamicUpdateSlice: operand Float32[7,5] and update Float32[3,4,5] must have the same rank");
  CHECK_ERR(lathe_dynamic_update_slice(f.fn, f.u, f.x, ss, 2, &y), INVALID_ARGUMENT,
            "DynamicUpdateSlice: update Float32[7,5] does not fit in operand Float32[4,5] along axis 0");
  CHECK_ERR(lathe_dynamic_update_slice(f.fn, f.x, f.u, one, 1, &y), INVALID_ARGUMENT,
            "DynamicUpdateSlice: got 1 start indices");
  CHECK_ERR(lathe_dynamic_update_slice(f.fn, f.x, f.u, fl, 2, &y), INVALID_ARGUMENT,
            "DynamicUpdateSlice: start index 1 must be an integer scalar");
  CHECK(f.fn->n_nodes == before, "failed builders leave no node (%d -> %d)", before, f.fn->n_nodes);
  lathe_builder_free(f.b);
}

TEST(bad_index_unsupported_dtype_compile) {
  /* ScatterMax of complex is meaningless: it builds (shape rules hold) but does not compile. */
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("unsup", &fn);
  if (!b) return;
  lathe_shape xs = TST_SHAPE(LATHE_DTYPE_COMPLEX64, 4), is = TST_SHAPE(LATHE_DTYPE_INT32, 2, 1);
  lathe_shape us = TST_SHAPE(LATHE_DTYPE_COMPLEX64, 2);
  lathe_value_t x, i, u, y;
  x = tst_param(fn, "x", xs);
  i = tst_param(fn, "i", is);
  u = tst_param(fn, "u", us);
  const int sa[] = {0};
  CHECK_OK(lathe_scatter_max(fn, x, i, u, 1, NULL, 0, sa, 1, sa, 1, false, false, &y));
  CHECK_OK(lathe_function_return(fn, &y, 1));
  lathe_executable_t e = NULL;
  CHECK_ERR(lathe_builder_compile(b, &e), UNIMPLEMENTED, "ScatterMax");
  lathe_executable_free(e);
  lathe_builder_free(b);
}

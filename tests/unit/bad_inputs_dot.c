/* bad_inputs_dot.c -- DotGeneral rejects bad dtypes, axes, sizes and configs with
 * INVALID_ARGUMENT naming the op and the mismatch, and a rejected op leaves no node. */
#include "graph/graph.h"
#include "testing.h"

#define F32 LATHE_DTYPE_FLOAT32

/* lathe_dot_general with int-array literals: DOT(lhs, (lc), nlc, (lb), nlb, rhs, ...). */
#define A(...) ((const int[]){__VA_ARGS__})

TEST(bad_dot_general) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("bad_dot", &m);
  lathe_value_t x = tst_param(m, NULL, TST_SHAPE(F32, 2, 3)), y = tst_param(m, NULL, TST_SHAPE(F32, 4, 5)), z = tst_param(m, NULL, TST_SHAPE(F32, 3, 5));
  lathe_value_t xi = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_INT32, 3, 5)), xb = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_BOOL, 2, 3));
  lathe_value_t xc = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_COMPLEX64, 2, 3)), zc = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_COMPLEX64, 3, 5));
  lathe_value_t bx = tst_param(m, NULL, TST_SHAPE(F32, 6, 2, 3)), by = tst_param(m, NULL, TST_SHAPE(F32, 7, 3, 5));
  lathe_value_t out = NULL;
  int before = m->n_nodes;

  CHECK_ERR(lathe_dot_general(m, x, A(1), 1, NULL, 0, y, A(0), 1, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: lhs contracting axis 1 has size 3, rhs contracting axis 0 has size 4");
  CHECK_ERR(lathe_dot_general(m, x, A(1), 1, NULL, 0, xi, A(0), 1, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: lhs and rhs must have the same dtype, got lhs Float32 and rhs Int32");
  CHECK_ERR(lathe_dot_general(m, xb, A(1), 1, NULL, 0, xb, A(1), 1, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: Bool operands");
  CHECK_ERR(lathe_dot_general(m, x, A(1), 1, NULL, 0, z, A(0, 1), 2, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: lhs has 1 contracting axes but rhs has 2");
  CHECK_ERR(lathe_dot_general(m, bx, A(2), 1, A(0), 1, by, A(1), 1, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: lhs has 1 batch axes but rhs has 0");
  CHECK_ERR(lathe_dot_general(m, x, A(2), 1, NULL, 0, z, A(0), 1, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: lhs contracting axis 2 out of range for rank 2");
  CHECK_ERR(lathe_dot_general(m, x, A(-1), 1, NULL, 0, z, A(0), 1, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: lhs contracting axis -1 out of range");
  CHECK_ERR(lathe_dot_general(m, x, A(1), 1, NULL, 0, z, A(5), 1, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: rhs contracting axis 5 out of range for rank 2");
  CHECK_ERR(lathe_dot_general(m, bx, A(2), 1, A(3), 1, by, A(1), 1, A(0), 1, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: lhs batch axis 3 out of range");
  CHECK_ERR(lathe_dot_general(m, bx, A(2), 1, A(0), 1, by, A(1), 1, A(-2), 1, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: rhs batch axis -2 out of range");
  CHECK_ERR(lathe_dot_general(m, bx, A(2), 1, A(0), 1, by, A(1), 1, A(0), 1, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: lhs batch axis 0 has size 6, rhs batch axis 0 has size 7");
  CHECK_ERR(lathe_dot_general(m, x, A(1, 1), 2, NULL, 0, z, A(0, 1), 2, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: lhs axis 1 used more than once");
  CHECK_ERR(lathe_dot_general(m, bx, A(2), 1, A(2), 1, by, A(1), 1, A(0), 1, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: lhs axis 2 used more than once");
  CHECK_ERR(lathe_dot_general(m, x, A(1, 0), 2, NULL, 0, z, A(0, 0), 2, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: rhs axis 0 used more than once");
  CHECK_ERR(lathe_dot_general(m, x, NULL, 1, NULL, 0, z, A(0), 1, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: lhs contracting axes is NULL");
  CHECK_ERR(lathe_dot_general(m, x, A(1), 1, NULL, -1, z, A(0), 1, NULL, -1, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: lhs batch axes count is negative");
  CHECK_ERR(lathe_dot_general(m, x, A(1), 1, NULL, 0, NULL, A(0), 1, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: operand 1 is NULL");
  CHECK_ERR(lathe_dot_general(m, x, A(1), 1, NULL, 0, z, A(0), 1, NULL, 0, NULL, NULL), INVALID_ARGUMENT,
            "DotGeneral: output pointer is NULL");
  CHECK_ERR(lathe_dot_general(NULL, x, A(1), 1, NULL, 0, z, A(0), 1, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: function is NULL");

  lathe_dot_config cfg = {LATHE_DTYPE_BOOL, 0};
  CHECK_ERR(lathe_dot_general(m, x, A(1), 1, NULL, 0, z, A(0), 1, NULL, 0, &cfg, &out), INVALID_ARGUMENT,
            "DotGeneral: accumulator dtype Bool");
  cfg = (lathe_dot_config){0, (lathe_dtype)99};
  CHECK_ERR(lathe_dot_general(m, x, A(1), 1, NULL, 0, z, A(0), 1, NULL, 0, &cfg, &out), INVALID_ARGUMENT,
            "DotGeneral: output dtype 99 is not a known dtype");
  cfg = (lathe_dot_config){LATHE_DTYPE_INT4, 0};
  CHECK_ERR(lathe_dot_general(m, x, A(1), 1, NULL, 0, z, A(0), 1, NULL, 0, &cfg, &out), INVALID_ARGUMENT,
            "DotGeneral: accumulator dtype Int4");
  cfg = (lathe_dot_config){F32, 0};
  CHECK_ERR(lathe_dot_general(m, xc, A(1), 1, NULL, 0, zc, A(0), 1, NULL, 0, &cfg, &out), INVALID_ARGUMENT,
            "DotGeneral: accumulator dtype Float32 cannot hold Complex64");
  cfg = (lathe_dot_config){0, F32};
  CHECK_ERR(lathe_dot_general(m, xc, A(1), 1, NULL, 0, zc, A(0), 1, NULL, 0, &cfg, &out), INVALID_ARGUMENT,
            "DotGeneral: output dtype Float32 cannot hold a Complex64");

  CHECK(m->n_nodes == before, "rejected DotGenerals leave no node (%d -> %d)", before, m->n_nodes);

  /* result rank above LATHE_MAX_RANK: two rank-9 operands crossed */
  lathe_shape r9 = TST_SHAPE(F32, 1, 1, 1, 1, 1, 1, 1, 1);
  r9.rank = 9, r9.dims[8] = 1;
  lathe_value_t h = tst_param(m, NULL, r9);
  before = m->n_nodes;
  CHECK_ERR(lathe_dot_general(m, h, NULL, 0, NULL, 0, h, NULL, 0, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: result rank 18 exceeds the maximum rank 16");

  /* dynamic axes: two dynamic contracting axes must share a name */
  lathe_shape d1 = TST_SHAPE(F32, 2, 3), d2 = TST_SHAPE(F32, 3, 4);
  d1.dims[1] = -1, d1.axis_names[1] = "k";
  d2.dims[0] = -1, d2.axis_names[0] = "j";
  lathe_value_t dx = tst_param(m, NULL, d1), dy = tst_param(m, NULL, d2);
  before = m->n_nodes;
  CHECK_ERR(lathe_dot_general(m, dx, A(1), 1, NULL, 0, dy, A(0), 1, NULL, 0, NULL, &out), INVALID_ARGUMENT,
            "DotGeneral: lhs contracting axis 1 is dynamic \"k\" but rhs contracting axis 0 is dynamic \"j\"");
  CHECK(m->n_nodes == before, "a rejected DotGeneral leaves no node (%d -> %d)", before, m->n_nodes);
  lathe_builder_free(b);
}

TEST(dot_general_shapes) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("dot_shapes", &m);
  lathe_value_t x = tst_param(m, NULL, TST_SHAPE(F32, 5, 2, 3, 7)), y = tst_param(m, NULL, TST_SHAPE(F32, 3, 4, 5));
  lathe_value_t out = NULL;
  lathe_shape s;
  /* batch 0<->2, contract 2<->0: [batch 5, lhs cross 2,7, rhs cross 4] */
  CHECK_OK(lathe_dot_general(m, x, A(2), 1, A(0), 1, y, A(0), 1, A(2), 1, NULL, &out));
  CHECK_OK(lathe_value_shape(out, &s));
  CHECK(s.rank == 4 && s.dims[0] == 5 && s.dims[1] == 2 && s.dims[2] == 7 && s.dims[3] == 4 && s.dtype == F32,
        "DotGeneral result shape");
  CHECK(lathe_attr_dot_general_accumulator(out) == F32 && lathe_attr_dot_general_output(out) == F32 &&
            lathe_attr_dot_general_lhs_contracting(out).n == 1 && lathe_attr_dot_general_lhs_batch(out).v[0] == 0 &&
            lathe_attr_dot_general_rhs_batch(out).v[0] == 2,
        "DotGeneral attributes");
  lathe_dot_config cfg = {0, LATHE_DTYPE_FLOAT64};
  lathe_value_t h = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT16, 2, 3)), hz = tst_param(m, NULL, TST_SHAPE(LATHE_DTYPE_FLOAT16, 3));
  CHECK_OK(lathe_dot_general(m, h, A(1), 1, NULL, 0, hz, A(0), 1, NULL, 0, &cfg, &out));
  CHECK_OK(lathe_value_shape(out, &s));
  CHECK(s.rank == 1 && s.dims[0] == 2 && s.dtype == LATHE_DTYPE_FLOAT64, "output dtype Float64");
  CHECK(lathe_attr_dot_general_accumulator(out) == F32, "Float16 accumulates in Float32 by default");
  /* dynamic batch axis: the result keeps it dynamic with its name */
  lathe_shape d1 = TST_SHAPE(F32, 2, 3), d2 = TST_SHAPE(F32, 2, 3, 4);
  d1.dims[0] = -1, d1.axis_names[0] = "batch";
  d2.dims[0] = -1, d2.axis_names[0] = "batch";
  lathe_value_t dx = tst_param(m, NULL, d1), dy = tst_param(m, NULL, d2);
  CHECK_OK(lathe_dot_general(m, dx, A(1), 1, A(0), 1, dy, A(1), 1, A(0), 1, NULL, &out));
  CHECK_OK(lathe_value_shape(out, &s));
  CHECK(s.rank == 2 && s.dims[0] == -1 && s.axis_names[0] && strcmp(s.axis_names[0], "batch") == 0 && s.dims[1] == 4,
        "dynamic batch axis kept");
  lathe_builder_free(b);
}

/* bad_inputs_control.c -- Call, While, If, Sort and the barriers reject bad functions, shapes,
 * axes and arrays with INVALID_ARGUMENT naming the op, and a rejected op leaves no node. */
#include "graph/graph.h"
#include "testing.h"

#define F32 LATHE_DTYPE_FLOAT32
#define I32 LATHE_DTYPE_INT32
#define BOOL LATHE_DTYPE_BOOL

/* A function (closure of parent, or top-level when parent is NULL) taking params of the given
 * shapes and returning outputs picked among its parameters by index. */
static lathe_function_t fn_of(lathe_builder_t b, lathe_function_t parent, const char *name, const lathe_shape *params,
                              int np, const int *ret, int nr) {
  lathe_function_t f = NULL;
  if (parent) CHECK_OK(lathe_function_closure(parent, &f));
  else CHECK_OK(lathe_builder_new_function(b, name, &f));
  lathe_value_t p[8], o[8];
  for (int i = 0; i < np; i++) p[i] = tst_param(f, NULL, params[i]);
  for (int i = 0; i < nr; i++) o[i] = p[ret[i]];
  CHECK_OK(lathe_function_return(f, o, nr));
  return f;
}

TEST(bad_call) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("bad_call", &m);
  lathe_shape s3 = TST_SHAPE(F32, 3), s2 = TST_SHAPE(F32, 2);
  lathe_value_t x = tst_param(m, NULL, s3), y = tst_param(m, NULL, s2);
  lathe_function_t f = fn_of(b, NULL, "f", (lathe_shape[]){s3, s3}, 2, (int[]){0, 1}, 2);
  lathe_value_t outs[4];
  int n_out = -1;
  int before = m->n_nodes;
  CHECK_ERR(lathe_call(m, f, (lathe_value_t[]){x}, 1, outs, 4, &n_out), INVALID_ARGUMENT, "Call: function \"f\" takes 2");
  CHECK_ERR(lathe_call(m, f, (lathe_value_t[]){x, y}, 2, outs, 4, &n_out), INVALID_ARGUMENT,
            "Call: input 1 has shape Float32[2], parameter 1 of \"f\" is Float32[3]");
  CHECK_ERR(lathe_call(m, f, (lathe_value_t[]){x, x}, 2, outs, 1, &n_out), INVALID_ARGUMENT, "room for 1");
  CHECK_ERR(lathe_call(m, f, (lathe_value_t[]){x, x}, 2, outs, 4, NULL), INVALID_ARGUMENT, "Call: out_n");
  CHECK_ERR(lathe_call(m, NULL, NULL, 0, outs, 4, &n_out), INVALID_ARGUMENT, "Call: callee is NULL");
  CHECK_ERR(lathe_call(m, f, (lathe_value_t[]){x, NULL}, 2, outs, 4, &n_out), INVALID_ARGUMENT, "Call");
  /* not returned yet */
  lathe_function_t g = NULL;
  CHECK_OK(lathe_builder_new_function(b, "g", &g));
  CHECK_ERR(lathe_call(m, g, NULL, 0, outs, 4, &n_out), INVALID_ARGUMENT, "has not returned");
  /* a closure of another function sees values the caller cannot provide */
  lathe_function_t h = fn_of(b, g, NULL, (lathe_shape[]){s3}, 1, (int[]){0}, 1);
  CHECK_ERR(lathe_call(m, h, (lathe_value_t[]){x}, 1, outs, 4, &n_out), INVALID_ARGUMENT, "is a closure of \"g\"");
  CHECK(n_out == -1, "out_n untouched on error");
  CHECK(m->n_nodes == before, "rejected ops leave no node: %d -> %d", before, m->n_nodes);
  /* a function of another builder */
  lathe_builder_t b2 = NULL;
  CHECK_OK(lathe_builder_new(tst_backend(), "other", &b2));
  lathe_function_t f2 = fn_of(b2, NULL, "f2", (lathe_shape[]){s3}, 1, (int[]){0}, 1);
  CHECK_ERR(lathe_call(m, f2, (lathe_value_t[]){x}, 1, outs, 4, &n_out), INVALID_ARGUMENT, "another builder");
  lathe_builder_free(b2);
  lathe_builder_free(b);
}

TEST(bad_while) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("bad_while", &m);
  lathe_shape sb = tst_shape0(BOOL), s3 = TST_SHAPE(F32, 3), s2 = TST_SHAPE(F32, 2), sf = tst_shape0(F32);
  lathe_value_t flag = tst_param(m, NULL, sb), x = tst_param(m, NULL, s2), z = tst_param(m, NULL, s3);
  lathe_value_t outs[4];
  int n_out = -1, before = m->n_nodes;
  lathe_function_t cond = fn_of(b, m, NULL, (lathe_shape[]){sb, s2}, 2, (int[]){0}, 1);
  lathe_function_t body = fn_of(b, m, NULL, (lathe_shape[]){sb, s2}, 2, (int[]){0, 1}, 2);
  lathe_value_t st[2] = {flag, x};
  CHECK_ERR(lathe_while(m, cond, body, st, 0, outs, 4, &n_out), INVALID_ARGUMENT, "While: needs at least one state");
  CHECK_ERR(lathe_while(m, cond, body, (lathe_value_t[]){flag, z}, 2, outs, 4, &n_out), INVALID_ARGUMENT,
            "While: cond parameter 1 has shape Float32[2], state 1 is Float32[3]");
  CHECK_ERR(lathe_while(m, cond, body, (lathe_value_t[]){flag}, 1, outs, 4, &n_out), INVALID_ARGUMENT,
            "While: cond \"");
  lathe_function_t cond_f32 = fn_of(b, m, NULL, (lathe_shape[]){sf, s2}, 2, (int[]){0}, 1);
  lathe_value_t fs = tst_param(m, NULL, sf);
  CHECK_ERR(lathe_while(m, cond_f32, body, (lathe_value_t[]){fs, x}, 2, outs, 4, &n_out), INVALID_ARGUMENT,
            "While: cond must return a scalar Bool, it returns Float32[]");
  lathe_function_t cond2 = fn_of(b, m, NULL, (lathe_shape[]){sb, s2}, 2, (int[]){0, 0}, 2);
  CHECK_ERR(lathe_while(m, cond2, body, st, 2, outs, 4, &n_out), INVALID_ARGUMENT, "returns 2 values");
  /* body returns state 1 with another shape: a body of (Bool, Float32[2]) -> (Bool, Float32[3]) */
  lathe_function_t body_bad = NULL;
  CHECK_OK(lathe_function_closure(m, &body_bad));
  lathe_value_t bp0 = tst_param(body_bad, NULL, sb);
  tst_param(body_bad, NULL, s2);
  lathe_value_t bz = NULL;
  float zeros[3] = {0};
  CHECK_OK(lathe_constant(body_bad, &s3, zeros, sizeof zeros, &bz));
  CHECK_OK(lathe_function_return(body_bad, (lathe_value_t[]){bp0, bz}, 2));
  CHECK_ERR(lathe_while(m, cond, body_bad, st, 2, outs, 4, &n_out), INVALID_ARGUMENT,
            "While: body output 1 has shape Float32[3], state 1 is Float32[2]");
  lathe_function_t body_short = fn_of(b, m, NULL, (lathe_shape[]){sb, s2}, 2, (int[]){0}, 1);
  CHECK_ERR(lathe_while(m, cond, body_short, st, 2, outs, 4, &n_out), INVALID_ARGUMENT, "returns 1 values, the state has 2");
  CHECK_ERR(lathe_while(m, cond, body, st, 2, outs, 1, &n_out), INVALID_ARGUMENT, "While: the op has 2 results");
  CHECK(n_out == -1, "out_n untouched on error");
  CHECK(m->n_nodes == before + 1, "rejected ops leave no node (one parameter added): %d -> %d", before, m->n_nodes);
  /* the good one */
  CHECK_OK(lathe_while(m, cond, body, st, 2, outs, 4, &n_out));
  CHECK(n_out == 2, "While has 2 results, got %d", n_out);
  lathe_builder_free(b);
}

TEST(bad_if) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("bad_if", &m);
  lathe_shape sb = tst_shape0(BOOL), s3 = TST_SHAPE(F32, 3), sb2 = TST_SHAPE(BOOL, 2);
  lathe_value_t pred = tst_param(m, NULL, sb), pv = tst_param(m, NULL, sb2), pf = tst_param(m, NULL, tst_shape0(F32));
  lathe_value_t outs[4];
  int n_out = -1, before = m->n_nodes;
  lathe_function_t t3 = fn_of(b, m, NULL, NULL, 0, NULL, 0), t_p = fn_of(b, m, NULL, &s3, 1, (int[]){0}, 1);
  CHECK_ERR(lathe_if(m, pv, t3, t3, outs, 4, &n_out), INVALID_ARGUMENT, "If: pred must be a scalar Bool, got Bool[2]");
  CHECK_ERR(lathe_if(m, pf, t3, t3, outs, 4, &n_out), INVALID_ARGUMENT, "If: pred must be a scalar Bool, got Float32[]");
  CHECK_ERR(lathe_if(m, pred, t3, t_p, outs, 4, &n_out), INVALID_ARGUMENT, "If: branches take no parameters");
  CHECK_ERR(lathe_if(m, NULL, t3, t3, outs, 4, &n_out), INVALID_ARGUMENT, "If");
  /* branches that return different counts / shapes (constants) */
  float c3[3] = {0}, c2[2] = {0};
  lathe_function_t a = NULL, c = NULL, d = NULL;
  lathe_value_t va, vc, vd;
  CHECK_OK(lathe_function_closure(m, &a));
  CHECK_OK(lathe_constant(a, &s3, c3, sizeof c3, &va));
  CHECK_OK(lathe_function_return(a, &va, 1));
  CHECK_OK(lathe_function_closure(m, &c));
  lathe_shape s2 = TST_SHAPE(F32, 2);
  CHECK_OK(lathe_constant(c, &s2, c2, sizeof c2, &vc));
  CHECK_OK(lathe_function_return(c, &vc, 1));
  CHECK_OK(lathe_function_closure(m, &d));
  CHECK_OK(lathe_constant(d, &s3, c3, sizeof c3, &vd));
  CHECK_OK(lathe_function_return(d, (lathe_value_t[]){vd, vd}, 2));
  CHECK_ERR(lathe_if(m, pred, a, c, outs, 4, &n_out), INVALID_ARGUMENT,
            "If: output 0 of the true branch has shape Float32[3], of the false branch Float32[2]");
  CHECK_ERR(lathe_if(m, pred, a, d, outs, 4, &n_out), INVALID_ARGUMENT, "If: the true branch returns 1 values");
  CHECK_ERR(lathe_if(m, pred, a, NULL, outs, 4, &n_out), INVALID_ARGUMENT, "If: false branch is NULL");
  CHECK(n_out == -1 && m->n_nodes == before, "rejected ops leave no node");
  CHECK_OK(lathe_if(m, pred, a, a, outs, 4, &n_out));
  CHECK(n_out == 1, "If has 1 result");
  lathe_builder_free(b);
}

TEST(bad_sort) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("bad_sort", &m);
  lathe_shape s23 = TST_SHAPE(F32, 2, 3), i23 = TST_SHAPE(I32, 2, 3), s32 = TST_SHAPE(F32, 3, 2);
  lathe_shape f0 = tst_shape0(F32), i0 = tst_shape0(I32), b0 = tst_shape0(BOOL);
  lathe_value_t x = tst_param(m, NULL, s23), k = tst_param(m, NULL, i23), y = tst_param(m, NULL, s32), sc = tst_param(m, NULL, f0);
  lathe_value_t outs[4];
  int before = m->n_nodes;
  /* comparators: (f32, f32) -> Bool is built from a Bool parameter so no compare op is needed */
  lathe_function_t cmp1 = NULL;
  CHECK_OK(lathe_function_closure(m, &cmp1));
  tst_param(cmp1, NULL, f0), tst_param(cmp1, NULL, f0);
  lathe_value_t bres = tst_param(cmp1, NULL, b0);
  CHECK_OK(lathe_function_return(cmp1, &bres, 1));
  lathe_function_t cmp_ok = NULL;
  CHECK_OK(lathe_function_closure(m, &cmp_ok));
  tst_param(cmp_ok, NULL, f0), tst_param(cmp_ok, NULL, f0);
  lathe_value_t res = NULL;
  CHECK_OK(lathe_constant(cmp_ok, &b0, (uint8_t[]){0}, 1, &res));
  CHECK_OK(lathe_function_return(cmp_ok, &res, 1));
  lathe_function_t cmp_f = fn_of(b, m, NULL, (lathe_shape[]){f0, f0}, 2, (int[]){0}, 1);
  lathe_function_t cmp_dt = NULL;
  CHECK_OK(lathe_function_closure(m, &cmp_dt));
  tst_param(cmp_dt, NULL, f0), tst_param(cmp_dt, NULL, f0), tst_param(cmp_dt, NULL, f0), tst_param(cmp_dt, NULL, i0);
  CHECK_OK(lathe_constant(cmp_dt, &b0, (uint8_t[]){0}, 1, &res));
  CHECK_OK(lathe_function_return(cmp_dt, &res, 1));

  CHECK_ERR(lathe_sort(m, cmp_ok, 0, true, NULL, 0, outs), INVALID_ARGUMENT, "Sort: needs at least one input");
  CHECK_ERR(lathe_sort(m, cmp_ok, 0, true, (lathe_value_t[]){x, y}, 2, outs), INVALID_ARGUMENT,
            "Sort: input 1 has shape Float32[3,2], input 0 has Float32[2,3]");
  CHECK_ERR(lathe_sort(m, cmp_ok, 2, true, &x, 1, outs), INVALID_ARGUMENT, "Sort: axis 2 out of range for rank 2");
  CHECK_ERR(lathe_sort(m, cmp_ok, -3, true, &x, 1, outs), INVALID_ARGUMENT, "Sort: axis -3 out of range");
  CHECK_ERR(lathe_sort(m, cmp_ok, 0, true, &sc, 1, outs), INVALID_ARGUMENT, "out of range for rank 0");
  CHECK_ERR(lathe_sort(m, cmp_ok, 0, true, (lathe_value_t[]){x, k}, 2, outs), INVALID_ARGUMENT,
            "Sort: comparator takes 2 parameters, want 4");
  CHECK_ERR(lathe_sort(m, cmp_dt, 0, true, (lathe_value_t[]){x, x}, 2, outs), INVALID_ARGUMENT,
            "Sort: comparator parameter 3 (rhs_1) is Int32[], want a scalar Float32");
  CHECK_ERR(lathe_sort(m, cmp1, 0, true, &x, 1, outs), INVALID_ARGUMENT, "comparator takes 3 parameters, want 2");
  CHECK_ERR(lathe_sort(m, cmp_f, 1, true, &x, 1, outs), INVALID_ARGUMENT,
            "Sort: comparator must return a scalar Bool, it returns Float32[]");
  CHECK_ERR(lathe_sort(m, cmp_ok, 0, true, &x, 1, NULL), INVALID_ARGUMENT, "Sort: out_values is NULL");
  CHECK(m->n_nodes == before, "rejected ops leave no node");
  CHECK_OK(lathe_sort(m, cmp_ok, -1, false, &x, 1, outs));
  lathe_builder_free(b);
}

TEST(bad_barriers) {
  lathe_function_t m;
  lathe_builder_t b = tst_builder("bad_barriers", &m);
  lathe_value_t x = tst_param(m, NULL, TST_SHAPE(F32, 3)), outs[2], out = NULL;
  CHECK_ERR(lathe_optimization_barrier(m, &x, 0, outs), INVALID_ARGUMENT, "OptimizationBarrier: needs at least one");
  CHECK_ERR(lathe_optimization_barrier(m, (lathe_value_t[]){x, NULL}, 2, outs), INVALID_ARGUMENT,
            "OptimizationBarrier: operand 1 is NULL");
  CHECK_ERR(lathe_scheduling_barrier(m, NULL, &x, 1, &out), INVALID_ARGUMENT, "SchedulingBarrier: operand 0 is NULL");
  CHECK_ERR(lathe_scheduling_barrier(m, x, NULL, 2, &out), INVALID_ARGUMENT, "SchedulingBarrier: bad deps");
  CHECK_ERR(lathe_scheduling_barrier(m, x, (lathe_value_t[]){x, NULL}, 2, &out), INVALID_ARGUMENT,
            "SchedulingBarrier: operand 2 is NULL");
  /* a value of another function that is not an ancestor */
  lathe_function_t c = NULL;
  CHECK_OK(lathe_function_closure(m, &c));
  lathe_value_t cx = tst_param(c, NULL, TST_SHAPE(F32, 3));
  CHECK_ERR(lathe_scheduling_barrier(m, x, &cx, 1, &out), INVALID_ARGUMENT, "SchedulingBarrier: operand 1 belongs to");
  CHECK_OK(lathe_scheduling_barrier(m, x, NULL, 0, &out));
  lathe_builder_free(b);
}

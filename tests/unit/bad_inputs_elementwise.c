/* bad_inputs_elementwise.c -- every elementwise builder rejects bad input with
 * INVALID_ARGUMENT and a message naming the op, and leaves no node behind. */
#include "graph/graph.h"
#include "testing.h"

typedef struct {
  lathe_builder_t b;
  lathe_function_t fn;
  lathe_value_t f32_35, f32_31, f32_15, f32_45, f32_s, i32_35, i32_s, bool_35, bool_s, u8_3, f32_3, c64_35;
} env;

static lathe_value_t param(env *e, lathe_dtype dt, int rank, const int64_t *dims) {
  return tst_param(e->fn, NULL, tst_shape(dt, rank, dims));
}

static void env_new(env *e) {
  memset(e, 0, sizeof *e);
  e->b = tst_builder("bad", &e->fn);
  e->f32_35 = param(e, LATHE_DTYPE_FLOAT32, 2, (int64_t[]){3, 5});
  e->f32_31 = param(e, LATHE_DTYPE_FLOAT32, 2, (int64_t[]){3, 1});
  e->f32_15 = param(e, LATHE_DTYPE_FLOAT32, 2, (int64_t[]){1, 5});
  e->f32_45 = param(e, LATHE_DTYPE_FLOAT32, 2, (int64_t[]){4, 5});
  e->f32_s = param(e, LATHE_DTYPE_FLOAT32, 0, NULL);
  e->i32_35 = param(e, LATHE_DTYPE_INT32, 2, (int64_t[]){3, 5});
  e->i32_s = param(e, LATHE_DTYPE_INT32, 0, NULL);
  e->bool_35 = param(e, LATHE_DTYPE_BOOL, 2, (int64_t[]){3, 5});
  e->bool_s = param(e, LATHE_DTYPE_BOOL, 0, NULL);
  e->u8_3 = param(e, LATHE_DTYPE_UINT8, 1, (int64_t[]){3});
  e->f32_3 = param(e, LATHE_DTYPE_FLOAT32, 1, (int64_t[]){3});
  e->c64_35 = param(e, LATHE_DTYPE_COMPLEX64, 2, (int64_t[]){3, 5});
}

TEST(bad_inputs_elementwise_binary) {
  env e;
  env_new(&e);
  lathe_value_t out = NULL;
  int before = e.fn->n_nodes;
  CHECK_ERR(lathe_add(e.fn, e.f32_35, e.i32_35, &out), INVALID_ARGUMENT, "Add");
  CHECK_ERR(lathe_add(e.fn, e.f32_35, e.i32_35, &out), INVALID_ARGUMENT, "same dtype");
  CHECK_ERR(lathe_mul(e.fn, e.f32_35, e.f32_45, &out), INVALID_ARGUMENT, "Mul: axis 0 has sizes 3 and 4");
  CHECK_ERR(lathe_sub(e.fn, e.f32_35, e.f32_3, &out), INVALID_ARGUMENT, "Sub: operands must have the same rank");
  CHECK_ERR(lathe_div(e.fn, NULL, e.f32_35, &out), INVALID_ARGUMENT, "Div: operand 0 is NULL");
  CHECK_ERR(lathe_max(e.fn, e.f32_35, NULL, &out), INVALID_ARGUMENT, "Max");
  CHECK_ERR(lathe_logical_and(e.fn, e.f32_35, e.f32_35, &out), INVALID_ARGUMENT, "LogicalAnd");
  CHECK_ERR(lathe_bitwise_or(e.fn, e.f32_35, e.f32_35, &out), INVALID_ARGUMENT, "BitwiseOr");
  CHECK_ERR(lathe_shift_left(e.fn, e.f32_35, e.f32_35, &out), INVALID_ARGUMENT, "ShiftLeft");
  CHECK_ERR(lathe_atan2(e.fn, e.i32_35, e.i32_35, &out), INVALID_ARGUMENT, "Atan2");
  CHECK_ERR(lathe_complex(e.fn, e.i32_35, e.i32_35, &out), INVALID_ARGUMENT, "Complex");
  CHECK_ERR(lathe_add(e.fn, e.bool_35, e.bool_35, &out), INVALID_ARGUMENT, "Add");
  CHECK_ERR(lathe_max(e.fn, e.c64_35, e.c64_35, &out), INVALID_ARGUMENT, "Max");
  CHECK_ERR(lathe_less_than(e.fn, e.c64_35, e.c64_35, &out), INVALID_ARGUMENT, "LessThan");
  CHECK_ERR(lathe_equal(e.fn, e.f32_35, e.i32_s, &out), INVALID_ARGUMENT, "Equal");
  CHECK_ERR(lathe_binary(e.fn, LATHE_OP_EXP, e.f32_35, e.f32_35, &out), INVALID_ARGUMENT, "Exp");
  CHECK_ERR(lathe_binary(e.fn, LATHE_OP_COUNT, e.f32_35, e.f32_35, &out), INVALID_ARGUMENT, "Binary");
  CHECK_ERR(lathe_add(NULL, e.f32_35, e.f32_35, &out), INVALID_ARGUMENT, "Add");
  CHECK_ERR(lathe_add(e.fn, e.f32_35, e.f32_35, NULL), INVALID_ARGUMENT, "Add");
  /* a value of another builder */
  env o;
  env_new(&o);
  CHECK_ERR(lathe_add(e.fn, e.f32_35, o.f32_35, &out), INVALID_ARGUMENT, "Add: operand 1 belongs to another builder");
  lathe_builder_free(o.b);
  CHECK(e.fn->n_nodes == before, "failed ops left %d nodes behind", e.fn->n_nodes - before);
  /* good ones still work: broadcasting and scalars */
  CHECK_OK(lathe_add(e.fn, e.f32_31, e.f32_15, &out));
  CHECK_OK(lathe_add(e.fn, e.f32_s, e.f32_35, &out));
  lathe_builder_free(e.b);
}

TEST(bad_inputs_elementwise_unary) {
  env e;
  env_new(&e);
  lathe_value_t out = NULL;
  CHECK_ERR(lathe_sqrt(e.fn, e.i32_35, &out), INVALID_ARGUMENT, "Sqrt");
  CHECK_ERR(lathe_sqrt(e.fn, e.i32_35, &out), INVALID_ARGUMENT, "Int32[3,5]");
  CHECK_ERR(lathe_logical_not(e.fn, e.f32_35, &out), INVALID_ARGUMENT, "LogicalNot");
  CHECK_ERR(lathe_bitwise_not(e.fn, e.f32_35, &out), INVALID_ARGUMENT, "BitwiseNot");
  CHECK_ERR(lathe_clz(e.fn, e.bool_35, &out), INVALID_ARGUMENT, "Clz");
  CHECK_ERR(lathe_neg(e.fn, e.u8_3, &out), INVALID_ARGUMENT, "Neg");
  CHECK_ERR(lathe_erf(e.fn, e.c64_35, &out), INVALID_ARGUMENT, "Erf");
  CHECK_ERR(lathe_conj(e.fn, e.f32_35, &out), INVALID_ARGUMENT, "Conj");
  CHECK_ERR(lathe_abs(e.fn, e.bool_35, &out), INVALID_ARGUMENT, "Abs");
  CHECK_ERR(lathe_exp(e.fn, NULL, &out), INVALID_ARGUMENT, "Exp: operand 0 is NULL");
  CHECK_ERR(lathe_unary(e.fn, LATHE_OP_ADD, e.f32_35, &out), INVALID_ARGUMENT, "Add");
  lathe_builder_free(e.b);
}

TEST(bad_inputs_elementwise_convert_bitcast) {
  env e;
  env_new(&e);
  lathe_value_t out = NULL;
  CHECK_ERR(lathe_convert_dtype(e.fn, e.f32_35, (lathe_dtype)99, &out), INVALID_ARGUMENT, "ConvertDType");
  CHECK_ERR(lathe_convert_dtype(e.fn, e.f32_35, LATHE_DTYPE_INVALID, &out), INVALID_ARGUMENT, "ConvertDType");
  CHECK_ERR(lathe_convert_dtype(e.fn, NULL, LATHE_DTYPE_INT8, &out), INVALID_ARGUMENT, "ConvertDType");
  CHECK_ERR(lathe_bitcast(e.fn, e.u8_3, LATHE_DTYPE_UINT32, &out), INVALID_ARGUMENT, "Bitcast");
  CHECK_ERR(lathe_bitcast(e.fn, e.u8_3, LATHE_DTYPE_UINT32, &out), INVALID_ARGUMENT, "last axis of size 32/8 = 4, got 3");
  CHECK_ERR(lathe_bitcast(e.fn, e.i32_s, LATHE_DTYPE_INT64, &out), INVALID_ARGUMENT, "Bitcast: a scalar");
  CHECK_ERR(lathe_bitcast(e.fn, e.f32_35, (lathe_dtype)17, &out), INVALID_ARGUMENT, "Bitcast");
  lathe_builder_free(e.b);
}

TEST(bad_inputs_elementwise_select) {
  env e;
  env_new(&e);
  lathe_value_t out = NULL;
  CHECK_ERR(lathe_where(e.fn, e.f32_35, e.f32_35, e.f32_35, &out), INVALID_ARGUMENT, "Where: condition must be Bool");
  CHECK_ERR(lathe_where(e.fn, e.bool_35, e.f32_35, e.i32_35, &out), INVALID_ARGUMENT, "Where");
  CHECK_ERR(lathe_where(e.fn, e.bool_35, e.f32_35, e.f32_45, &out), INVALID_ARGUMENT, "Where");
  CHECK_ERR(lathe_where(e.fn, e.bool_35, e.f32_45, e.f32_s, &out), INVALID_ARGUMENT, "Where: axis 0 has sizes 3 and 4");
  CHECK_ERR(lathe_where(e.fn, e.bool_35, NULL, e.f32_s, &out), INVALID_ARGUMENT, "Where");
  CHECK_ERR(lathe_where(e.fn, e.bool_s, e.f32_35, e.f32_3, &out), INVALID_ARGUMENT,
            "Where: operands must have the same rank or be scalars, got condition Bool[], on_true Float32[3,5] and on_false Float32[3]");
  /* every operand's shape in the message, whichever two disagree */
  CHECK_ERR(lathe_where(e.fn, e.bool_35, e.f32_31, e.f32_45, &out), INVALID_ARGUMENT,
            "Where: axis 0 has sizes 3 and 4, which cannot broadcast: condition Bool[3,5], on_true Float32[3,1] and on_false Float32[4,5]");
  lathe_value_t b45 = param(&e, LATHE_DTYPE_BOOL, 2, (int64_t[]){4, 5}), b14 = param(&e, LATHE_DTYPE_BOOL, 2, (int64_t[]){1, 4});
  CHECK_ERR(lathe_where(e.fn, b45, e.f32_31, e.f32_15, &out), INVALID_ARGUMENT, "axis 0 has sizes 4 and 3");
  CHECK_ERR(lathe_where(e.fn, b14, e.f32_15, e.f32_31, &out), INVALID_ARGUMENT, "Where: axis 1 has sizes 4 and 5");
  /* dynamic axes: a static size other than 1, or another name, might disagree at run time */
  lathe_shape ds = TST_SHAPE(LATHE_DTYPE_FLOAT32, -1, 5);
  ds.axis_names[0] = "batch";
  lathe_value_t dyn = tst_param(e.fn, NULL, ds);
  ds.axis_names[0] = "seq";
  ds.dtype = LATHE_DTYPE_BOOL;
  lathe_value_t dyn_seq = tst_param(e.fn, NULL, ds);
  CHECK_ERR(lathe_where(e.fn, e.bool_35, dyn, e.f32_s, &out), INVALID_ARGUMENT,
            "Where: axis 0 is dynamic in one operand and 3 in another, which cannot broadcast: condition Bool[3,5], on_true Float32[batch,5] and on_false Float32[]");
  CHECK_ERR(lathe_where(e.fn, dyn_seq, dyn, dyn, &out), INVALID_ARGUMENT, "Where: axis 0 is dynamic in two operands but named");
  int before = e.fn->n_nodes;
  CHECK_ERR(lathe_where(e.fn, e.bool_35, e.f32_31, e.f32_45, &out), INVALID_ARGUMENT, "Where");
  CHECK(e.fn->n_nodes == before, "a failed Where left %d nodes behind", e.fn->n_nodes - before);
  /* what broadcasts: scalars, 1s in any operand, a static 1 along a dynamic axis */
  lathe_shape got;
  CHECK_OK(lathe_where(e.fn, e.bool_35, e.f32_31, e.f32_15, &out));
  CHECK_OK(lathe_value_shape(out, &got));
  CHECK(got.dtype == LATHE_DTYPE_FLOAT32 && got.rank == 2 && got.dims[0] == 3 && got.dims[1] == 5, "Where [3,5]/[3,1]/[1,5]");
  CHECK_OK(lathe_where(e.fn, b14, e.f32_31, e.f32_s, &out));
  CHECK_OK(lathe_value_shape(out, &got));
  CHECK(got.rank == 2 && got.dims[0] == 3 && got.dims[1] == 4, "Where [1,4]/[3,1]/scalar is [3,4]");
  lathe_value_t b15 = param(&e, LATHE_DTYPE_BOOL, 2, (int64_t[]){1, 5});
  CHECK_OK(lathe_where(e.fn, b15, dyn, e.f32_s, &out));
  CHECK_OK(lathe_value_shape(out, &got));
  CHECK(got.rank == 2 && got.dims[0] == -1 && got.axis_names[0] && strcmp(got.axis_names[0], "batch") == 0,
        "Where keeps the dynamic axis");
  CHECK_ERR(lathe_clamp(e.fn, e.f32_31, e.f32_35, e.f32_s, &out), INVALID_ARGUMENT, "Clamp");
  CHECK_ERR(lathe_clamp(e.fn, e.i32_s, e.f32_35, e.f32_s, &out), INVALID_ARGUMENT, "Clamp: min, x and max");
  CHECK_ERR(lathe_clamp(e.fn, e.bool_s, e.bool_35, e.bool_s, &out), INVALID_ARGUMENT, "Clamp");
  CHECK_OK(lathe_where(e.fn, e.bool_s, e.f32_s, e.f32_35, &out));
  CHECK_OK(lathe_clamp(e.fn, e.f32_s, e.f32_35, e.f32_35, &out));
  lathe_builder_free(e.b);
}

TEST(bad_inputs_shape_rules) {
  lathe_shape a = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, -1), b = TST_SHAPE(LATHE_DTYPE_FLOAT32, 3, -1), o;
  a.axis_names[1] = "batch";
  b.axis_names[1] = "seq";
  lathe_status_t st = lathe_infer_broadcast("Add", &a, &b, &o);
  CHECK(lathe_status_code_of(st) == LATHE_STATUS_INVALID_ARGUMENT && strstr(lathe_status_message(st), "Add"),
        "dynamic axes with different names: %s", lathe_status_message(st));
  lathe_status_free(st);
  b.dims[1] = 4;
  b.axis_names[1] = NULL;
  CHECK_ERR(lathe_infer_broadcast("Add", &a, &b, &o), INVALID_ARGUMENT, "dynamic in one operand");
  b.dims[1] = 1;
  CHECK_OK(lathe_infer_broadcast("Add", &a, &b, &o));
  CHECK(o.dims[1] == -1 && o.axis_names[1] && strcmp(o.axis_names[1], "batch") == 0, "dynamic axis broadcast");
  CHECK_ERR(lathe_check_axis("Reduce", "axis", 2, 2), INVALID_ARGUMENT, "Reduce: axis 2 is out of range for rank 2");
  CHECK_ERR(lathe_check_axis("Reduce", "axis", -1, 2), INVALID_ARGUMENT, "Reduce");
  CHECK_OK(lathe_check_axis("Reduce", "axis", 1, 2));
}

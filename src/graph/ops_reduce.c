/* ops_reduce.c -- builders and shape inference of the reductions, ArgMinMax and CumSum.
 * Attributes: op_attrs.def, groups reduce, arg_min_max (read by src/cpu/reduce.c) and cum_sum
 * (src/cpu/scan.c). */
#include "graph.h"

/* Whether op reduces operands of dtype dt; names the accepted dtypes in *want otherwise. */
static bool reduce_dtype_ok(lathe_op op, lathe_dtype dt, const char **want) {
  lathe_dtype_class c = lathe_dtype_class_of(dt);
  switch (op) {
    case LATHE_OP_REDUCE_SUM:
    case LATHE_OP_REDUCE_PRODUCT:
      *want = "a number (integer, float or complex)";
      return c != LATHE_CLASS_BOOL && c != LATHE_CLASS_NONE;
    case LATHE_OP_REDUCE_MAX:
    case LATHE_OP_REDUCE_MIN:
      *want = "an integer or a float";
      return lathe_dtype_is_int(dt) || lathe_dtype_is_float(dt);
    case LATHE_OP_REDUCE_BITWISE_AND:
    case LATHE_OP_REDUCE_BITWISE_OR:
    case LATHE_OP_REDUCE_BITWISE_XOR:
      *want = "an integer";
      return lathe_dtype_is_int(dt);
    case LATHE_OP_REDUCE_LOGICAL_AND:
    case LATHE_OP_REDUCE_LOGICAL_OR:
    case LATHE_OP_REDUCE_LOGICAL_XOR:
      *want = "Bool";
      return c == LATHE_CLASS_BOOL;
    default:
      *want = "";
      return false;
  }
}

lathe_status_t lathe_reduce(lathe_function_t fn, lathe_op op, lathe_value_t x, const int *axes, int n_axes,
                            lathe_value_t *out) {
  if (lathe_op_kind_of(op) != LATHE_KIND_REDUCE || op == LATHE_OP_ARG_MIN_MAX)
    return LATHE_INVALID("Reduce: op %d (%s) is not a reduction", (int)op,
                         (int)op >= 0 && op < LATHE_OP_COUNT ? lathe_op_name(op) : "unknown");
  const char *name = lathe_op_name(op);
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, op, &x, 1, &n));
  char buf[LATHE_SHAPE_STR_MAX];
  const lathe_shape *xs = &x->shape;
  const char *want;
  if (!reduce_dtype_ok(op, xs->dtype, &want))
    return LATHE_INVALID("%s: operand %s must be %s", name, lathe_shape_str(xs, buf, sizeof buf), want);
  if (n_axes < 0 || n_axes > xs->rank)
    return LATHE_INVALID("%s: %d axes given for operand %s of rank %d", name, n_axes, lathe_shape_str(xs, buf, sizeof buf),
                         xs->rank);
  if (n_axes && !axes) return LATHE_INVALID("%s: axes is NULL", name);
  /* No axes reduces every axis, as GoMLX's Reduce* ops define. */
  int all_axes[LATHE_MAX_RANK];
  if (n_axes == 0) {
    for (int i = 0; i < xs->rank; i++) all_axes[i] = i;
    axes = all_axes;
    n_axes = xs->rank;
  }
  bool reduced[LATHE_MAX_RANK] = {false};
  for (int i = 0; i < n_axes; i++) {
    if (axes[i] < 0 || axes[i] >= xs->rank)
      return LATHE_INVALID("%s: axis %d is out of range for operand %s of rank %d", name, axes[i],
                           lathe_shape_str(xs, buf, sizeof buf), xs->rank);
    if (reduced[axes[i]]) return LATHE_INVALID("%s: axis %d is given twice", name, axes[i]);
    reduced[axes[i]] = true;
  }
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = xs->dtype;
  int64_t sorted[LATHE_MAX_RANK];
  int ns = 0;
  for (int a = 0; a < xs->rank; a++) {
    if (reduced[a]) {
      sorted[ns++] = a;
      continue;
    }
    s.dims[s.rank] = xs->dims[a];
    s.axis_names[s.rank++] = xs->axis_names[a];
  }
  n->shape = s;
  LATHE_RETURN_IF_ERROR(lathe_attr_set_reduce_axes(n, sorted, ns));
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_arg_min_max(lathe_function_t fn, lathe_value_t x, int axis, lathe_dtype output_dtype,
                                 bool is_min, lathe_value_t *out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_ARG_MIN_MAX, &x, 1, &n));
  char buf[LATHE_SHAPE_STR_MAX];
  const lathe_shape *xs = &x->shape;
  if (!lathe_dtype_is_int(output_dtype))
    return LATHE_INVALID("ArgMinMax: output dtype must be an integer, got %s", lathe_dtype_name(output_dtype));
  /* Bool orders false < true, as in XLA (GoMLX's piecewise-constant KAN layer takes ArgMax of a mask). */
  if (!lathe_dtype_is_int(xs->dtype) && !lathe_dtype_is_float(xs->dtype) && xs->dtype != LATHE_DTYPE_BOOL)
    return LATHE_INVALID("ArgMinMax: operand %s must be an integer, a float or a Bool", lathe_shape_str(xs, buf, sizeof buf));
  if (xs->rank == 0) return LATHE_INVALID("ArgMinMax: the operand must not be a scalar");
  if (axis < 0 || axis >= xs->rank)
    return LATHE_INVALID("ArgMinMax: axis %d is out of range for operand %s of rank %d", axis,
                         lathe_shape_str(xs, buf, sizeof buf), xs->rank);
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = output_dtype;
  for (int a = 0; a < xs->rank; a++) {
    if (a == axis) continue;
    s.dims[s.rank] = xs->dims[a];
    s.axis_names[s.rank++] = xs->axis_names[a];
  }
  n->shape = s;
  lathe_attr_set_arg_min_max_axis(n, axis);
  lathe_attr_set_arg_min_max_is_min(n, is_min);
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_cum_sum(lathe_function_t fn, lathe_value_t x, int axis, bool exclusive, bool reverse,
                             lathe_value_t *out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_CUM_SUM, &x, 1, &n));
  char buf[LATHE_SHAPE_STR_MAX];
  const lathe_shape *xs = &x->shape;
  /* GoMLX's definition: integers (sub-byte ones included) and real floats; no Bool, no complex */
  if (!lathe_dtype_is_int(xs->dtype) && !lathe_dtype_is_float(xs->dtype))
    return LATHE_INVALID("CumSum: operand %s must be an integer or a float", lathe_shape_str(xs, buf, sizeof buf));
  if (xs->rank == 0) return LATHE_INVALID("CumSum: the operand must not be a scalar");
  if (axis < 0 || axis >= xs->rank)
    return LATHE_INVALID("CumSum: axis %d is out of range for operand %s of rank %d", axis,
                         lathe_shape_str(xs, buf, sizeof buf), xs->rank);
  n->shape = *xs;
  lathe_attr_set_cum_sum_axis(n, axis);
  lathe_attr_set_cum_sum_exclusive(n, exclusive);
  lathe_attr_set_cum_sum_reverse(n, reverse);
  return lathe_node_commit(n, out);
}

/* ops_dynshape.c -- DynamicShape, DynamicDimensionSize, DynamicReshape. Sizes lathe produces are
 * Int64 (compute v0.1.12's Capabilities.DynamicDimDType, unset, means Int64, as GoMLX's Go
 * backend makes them); size operands of the dynamic-size ops take any integer dtype. */
#include "graph.h"

lathe_status_t lathe_dynamic_shape(lathe_function_t fn, lathe_value_t x, lathe_value_t *out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_DYNAMIC_SHAPE, &x, 1, &n));
  int64_t rank = x->shape.rank;
  LATHE_RETURN_IF_ERROR(lathe_shape_make(LATHE_DTYPE_INT64, 1, &rank, &n->shape));
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_dynamic_dimension_size(lathe_function_t fn, lathe_value_t x, int axis, lathe_value_t *out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_DYNAMIC_DIMENSION_SIZE, &x, 1, &n));
  LATHE_RETURN_IF_ERROR(lathe_check_axis("DynamicDimensionSize", "axis", axis, x->shape.rank));
  lathe_attr_set_dynamic_dimension_size_axis(n, axis);
  LATHE_RETURN_IF_ERROR(lathe_shape_make(LATHE_DTYPE_INT64, 0, NULL, &n->shape));
  return lathe_node_commit(n, out);
}

/* Attributes: op_attrs.def, dynamic_reshape. Axis names live in the result shape. */
lathe_status_t lathe_dynamic_reshape(lathe_function_t fn, lathe_value_t x, const lathe_dim_spec *dims, int n_dims,
                                     lathe_value_t *out) {
  const char *op = "DynamicReshape";
  if (n_dims < 1 || n_dims > LATHE_MAX_RANK) return LATHE_INVALID("%s: needs 1 to %d dimension specs, got %d", op, LATHE_MAX_RANK, n_dims);
  if (!dims) return LATHE_INVALID("%s: dims is NULL", op);
  lathe_value_t operands[LATHE_MAX_RANK + 1];
  int64_t sizes[LATHE_MAX_RANK], value_of[LATHE_MAX_RANK];
  int n_ops = 1, inferred = -1;
  operands[0] = x;
  for (int i = 0; i < n_dims; i++) {
    value_of[i] = -1;
    if (dims[i].name && *dims[i].name) {
      if (dims[i].static_size != 0)
        return LATHE_INVALID("%s: spec %d has name \"%s\" and static size %lld (must be 0 when named)", op, i, dims[i].name,
                             (long long)dims[i].static_size);
      sizes[i] = -1;
      if (dims[i].value) {
        value_of[i] = n_ops;
        operands[n_ops++] = dims[i].value;
      } else if (inferred >= 0) {
        return LATHE_INVALID("%s: at most one inferred dimension, found %d and %d", op, inferred, i);
      } else {
        inferred = i;
      }
    } else {
      if (dims[i].value) return LATHE_INVALID("%s: spec %d has a value but no name", op, i);
      if (dims[i].static_size < 0) return LATHE_INVALID("%s: static dimension %d is negative (%lld)", op, i, (long long)dims[i].static_size);
      sizes[i] = dims[i].static_size;
    }
  }
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_DYNAMIC_RESHAPE, operands, n_ops, &n));
  for (int k = 1; k < n_ops; k++)
    if (!lathe_dtype_is_int(operands[k]->shape.dtype) || operands[k]->shape.rank != 0)
      return LATHE_INVALID("%s: the size value of an axis must be an integer scalar, got %s", op,
                           lathe_dtype_name(operands[k]->shape.dtype));
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = x->shape.dtype;
  s.rank = n_dims;
  for (int i = 0; i < n_dims; i++) {
    s.dims[i] = sizes[i];
    s.axis_names[i] = dims[i].name && *dims[i].name ? dims[i].name : NULL;
  }
  /* A static operand with no size values resolves now. */
  if (!lathe_shape_is_dynamic(&x->shape) && n_ops == 1) {
    int64_t known = 1;
    for (int i = 0; i < n_dims; i++)
      if (i != inferred && lathe_mul_overflow(known, sizes[i], &known))
        return LATHE_INVALID("%s: the static dimensions multiply beyond the size limit", op);
    int64_t total = lathe_shape_size(&x->shape);
    if (inferred >= 0) {
      if (known == 0) return LATHE_INVALID("%s: cannot infer a dimension when the static ones multiply to 0", op);
      if (total % known) return LATHE_INVALID("%s: size %lld is not divisible by the static product %lld", op, (long long)total, (long long)known);
      s.dims[inferred] = total / known;
      known *= s.dims[inferred];
    }
    if (known != total) return LATHE_INVALID("%s: operand has %lld elements, target %lld", op, (long long)total, (long long)known);
  }
  n->shape = s;
  lathe_attr_set_dynamic_reshape_inferred(n, inferred);
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_reshape_sizes(n, sizes, n_dims));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_reshape_value_of(n, value_of, n_dims));
  return lathe_node_commit(n, out);
}

/* ---- sizes given by graph values: DynamicBroadcastInDim, DynamicIota, DynamicPad ----
 * Their result axes may be sized by integer scalar values of the graph. No device runs them:
 * specialisation (specialize.c) resolves the sizes -- folded from the bound axes and constants,
 * or read back from a first run that computes them (src/runtime/executable.c) -- and lowers
 * each to its static op. */

/* GoMLX's anonymous axis name ("?"), or none, never matches another axis: each becomes a name of
 * its own, "?<function>.<node>.<axis>", so that axes resolved from different values keep apart. */
static const char *axis_name_of(lathe_function_t fn, int axis, const char *name, char (*buf)[32]) {
  if (name && *name && strcmp(name, "?") != 0) return name;
  int f = 0;
  while (f < fn->builder->n_fns && fn->builder->fns[f] != fn) f++;
  snprintf(buf[axis], sizeof buf[axis], "?%d.%d.%d", f, fn->n_nodes, axis);
  return buf[axis];
}

static lathe_status_t check_size_value(const char *op, lathe_function_t fn, lathe_value_t v, const char *what, int axis) {
  LATHE_RETURN_IF_ERROR(lathe_check_value(op, fn, v, what));
  if (!lathe_dtype_is_int(v->shape.dtype) || v->shape.rank != 0)
    return LATHE_INVALID("%s: the %s of axis %d must be an integer scalar, got %s of rank %d", op, what, axis,
                         lathe_dtype_name(v->shape.dtype), v->shape.rank);
  return NULL;
}

/* Parses the result dims of DynamicBroadcastInDim or DynamicIota: static sizes, named axes with
 * a size value (appended to operands), or named axes without one (bound by the parameters or,
 * for a broadcast, kept from the operand x). Fills s's dims and names (in buf), sizes, value_of. */
static lathe_status_t parse_dims(const char *op, lathe_function_t fn, const lathe_shape *x, const lathe_dim_spec *dims,
                                 int n_dims, lathe_value_t *operands, int *n_ops, lathe_shape *s, int64_t *sizes,
                                 int64_t *value_of, char (*buf)[32]) {
  if (n_dims < 1 || n_dims > LATHE_MAX_RANK) return LATHE_INVALID("%s: needs 1 to %d dimension specs, got %d", op, LATHE_MAX_RANK, n_dims);
  if (!dims) return LATHE_INVALID("%s: dims is NULL", op);
  s->rank = n_dims;
  for (int i = 0; i < n_dims; i++) {
    value_of[i] = -1;
    s->axis_names[i] = NULL;
    bool named = dims[i].name && *dims[i].name;
    if (!named && !dims[i].value) {
      if (dims[i].static_size < 0) return LATHE_INVALID("%s: static dimension %d is negative (%lld)", op, i, (long long)dims[i].static_size);
      s->dims[i] = sizes[i] = dims[i].static_size;
      continue;
    }
    if (dims[i].static_size != 0)
      return LATHE_INVALID("%s: spec %d has a name or a value and static size %lld (must be 0)", op, i, (long long)dims[i].static_size);
    s->dims[i] = sizes[i] = -1;
    s->axis_names[i] = axis_name_of(fn, i, dims[i].name, buf);
    if (dims[i].value) {
      LATHE_RETURN_IF_ERROR(check_size_value(op, fn, dims[i].value, "size value", i));
      value_of[i] = *n_ops;
      operands[(*n_ops)++] = dims[i].value;
      continue;
    }
    bool known = lathe_axis_name_known(fn, s->axis_names[i]);
    for (int k = 0; x && !known && k < x->rank; k++)
      known = x->dims[k] < 0 && strcmp(x->axis_names[k], s->axis_names[i]) == 0;
    if (!known)
      return LATHE_INVALID("%s: axis %d is named \"%s\" without a size value, and no input binds that dynamic axis", op, i,
                           s->axis_names[i]);
  }
  return NULL;
}

lathe_status_t lathe_dynamic_broadcast_in_dim(lathe_function_t fn, lathe_value_t x, const int *broadcast_axes, int n_axes,
                                              const lathe_dim_spec *dims, int n_dims, lathe_value_t *out) {
  const char *op = "DynamicBroadcastInDim";
  LATHE_RETURN_IF_ERROR(lathe_check_fn(op, fn));
  LATHE_RETURN_IF_ERROR(lathe_check_value(op, fn, x, "operand"));
  lathe_value_t operands[LATHE_MAX_RANK + 1] = {x};
  int64_t sizes[LATHE_MAX_RANK], value_of[LATHE_MAX_RANK], axes[LATHE_MAX_RANK];
  char buf[LATHE_MAX_RANK][32];
  int n_ops = 1;
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = x->shape.dtype;
  const lathe_shape *xs = &x->shape;
  LATHE_RETURN_IF_ERROR(parse_dims(op, fn, xs, dims, n_dims, operands, &n_ops, &s, sizes, value_of, buf));
  if (n_axes != xs->rank)
    return LATHE_INVALID("%s: %d broadcast axes given for an operand of rank %d: there must be one per axis", op, n_axes, xs->rank);
  if (n_axes && !broadcast_axes) return LATHE_INVALID("%s: broadcast_axes is NULL", op);
  for (int i = 0; i < n_axes; i++) {
    int a = broadcast_axes[i];
    if (a < 0 || a >= s.rank) return LATHE_INVALID("%s: broadcast_axes[%d]=%d is out of range [0, %d)", op, i, a, s.rank);
    if (i > 0 && a <= broadcast_axes[i - 1])
      return LATHE_INVALID("%s: broadcast_axes must be strictly increasing, got broadcast_axes[%d]=%d after %d", op, i, a,
                           broadcast_axes[i - 1]);
    axes[i] = a;
    int64_t in_d = xs->dims[i], out_d = s.dims[a];
    if (in_d < 0) {
      if (out_d >= 0 || strcmp(xs->axis_names[i], s.axis_names[a]) != 0)
        return LATHE_INVALID("%s: dynamic axis %d (\"%s\") of the operand must stay that dynamic axis in the output (axis %d)",
                             op, i, xs->axis_names[i], a);
    } else if (in_d != 1 && out_d < 0) {
      return LATHE_INVALID("%s: operand axis %d of size %lld cannot broadcast to dynamic output axis %d (\"%s\")", op, i,
                           (long long)in_d, a, s.axis_names[a]);
    } else if (in_d != 1 && in_d != out_d) {
      return LATHE_INVALID("%s: operand axis %d has size %lld, output axis %d has size %lld: they must be equal or the "
                           "operand's 1", op, i, (long long)in_d, a, (long long)out_d);
    }
  }
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_DYNAMIC_BROADCAST_IN_DIM, operands, n_ops, &n));
  n->shape = s;
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_broadcast_in_dim_axes(n, axes, n_axes));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_broadcast_in_dim_sizes(n, sizes, s.rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_broadcast_in_dim_value_of(n, value_of, s.rank));
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_dynamic_iota(lathe_function_t fn, lathe_dtype dtype, int iota_axis, const lathe_dim_spec *dims, int n_dims,
                                  lathe_value_t *out) {
  const char *op = "DynamicIota";
  LATHE_RETURN_IF_ERROR(lathe_check_fn(op, fn));
  if (!lathe_dtype_is_valid(dtype)) return LATHE_INVALID("%s: invalid dtype %d", op, (int)dtype);
  if (dtype == LATHE_DTYPE_BOOL) return LATHE_INVALID("%s: dtype must be numeric, got Bool", op);
  lathe_value_t operands[LATHE_MAX_RANK];
  int64_t sizes[LATHE_MAX_RANK], value_of[LATHE_MAX_RANK];
  char buf[LATHE_MAX_RANK][32];
  int n_ops = 0;
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = dtype;
  LATHE_RETURN_IF_ERROR(parse_dims(op, fn, NULL, dims, n_dims, operands, &n_ops, &s, sizes, value_of, buf));
  LATHE_RETURN_IF_ERROR(lathe_check_axis(op, "iota axis", iota_axis, s.rank));
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_DYNAMIC_IOTA, operands, n_ops, &n));
  n->shape = s;
  lathe_attr_set_dynamic_iota_axis(n, iota_axis);
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_iota_sizes(n, sizes, s.rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_iota_value_of(n, value_of, s.rank));
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_dynamic_pad(lathe_function_t fn, lathe_value_t x, lathe_value_t fill, const lathe_dynamic_pad_axis *axes,
                                 int n_axes, lathe_value_t *out) {
  const char *op = "DynamicPad";
  LATHE_RETURN_IF_ERROR(lathe_check_fn(op, fn));
  LATHE_RETURN_IF_ERROR(lathe_check_value(op, fn, x, "operand"));
  LATHE_RETURN_IF_ERROR(lathe_check_value(op, fn, fill, "fill value"));
  const lathe_shape *xs = &x->shape;
  if (fill->shape.rank != 0 || fill->shape.dtype != xs->dtype)
    return LATHE_INVALID("%s: the fill value must be a %s scalar, got %s of rank %d", op, lathe_dtype_name(xs->dtype),
                         lathe_dtype_name(fill->shape.dtype), fill->shape.rank);
  if (n_axes < 0 || n_axes > xs->rank) return LATHE_INVALID("%s: %d axes configured for an operand of rank %d", op, n_axes, xs->rank);
  if (n_axes && !axes) return LATHE_INVALID("%s: axes is NULL", op);
  lathe_value_t operands[2 + 3 * LATHE_MAX_RANK] = {x, fill};
  int64_t amt[3][LATHE_MAX_RANK] = {{0}}, of[3][LATHE_MAX_RANK];
  char buf[LATHE_MAX_RANK][32];
  int n_ops = 2;
  lathe_shape s = *xs;
  for (int a = 0; a < xs->rank; a++) {
    of[0][a] = of[1][a] = of[2][a] = -1;
    if (a >= n_axes) continue;
    const lathe_dynamic_pad_axis *p = &axes[a];
    const int64_t st[3] = {p->start, p->end, p->interior};
    const lathe_value_t v[3] = {p->start_value, p->end_value, p->interior_value};
    static const char *const what[3] = {"start padding", "end padding", "interior padding"};
    bool dyn = xs->dims[a] < 0;
    for (int k = 0; k < 3; k++) {
      if (v[k]) {
        LATHE_RETURN_IF_ERROR(check_size_value(op, fn, v[k], what[k], a));
        of[k][a] = n_ops;
        operands[n_ops++] = v[k];
        dyn = true;
      } else if (st[k] <= -LATHE_MAX_TENSOR_SIZE || st[k] >= LATHE_MAX_TENSOR_SIZE) {
        return LATHE_INVALID("%s: %s %lld of axis %d is beyond the size limit (2^62)", op, what[k], (long long)st[k], a);
      }
      amt[k][a] = v[k] ? 0 : st[k];
    }
    if (!p->interior_value && p->interior < 0)
      return LATHE_INVALID("%s: interior padding must be non-negative, got %lld for axis %d", op, (long long)p->interior, a);
    const char *target = p->target_name && *p->target_name ? p->target_name : NULL;
    if (dyn) {
      s.dims[a] = -1;
      if (target || xs->dims[a] >= 0 || amt[0][a] || amt[1][a] || amt[2][a] || of[0][a] >= 0 || of[1][a] >= 0 || of[2][a] >= 0)
        s.axis_names[a] = axis_name_of(fn, a, target, buf);
      continue;
    }
    int64_t d = xs->dims[a], od, holes = 0;
    if ((d > 0 && lathe_mul_overflow(d - 1, amt[2][a], &holes)) || lathe_add_overflow(d + amt[0][a], amt[1][a], &od) ||
        lathe_add_overflow(od, holes, &od))
      return LATHE_INVALID("%s: axis %d with its padding exceeds the size limit", op, a);
    if (od < 0) return LATHE_INVALID("%s: axis %d would get negative size %lld", op, a, (long long)od);
    s.dims[a] = od;
    if (target) s.axis_names[a] = target;
  }
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_DYNAMIC_PAD, operands, n_ops, &n));
  n->shape = s;
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_pad_start(n, amt[0], xs->rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_pad_end(n, amt[1], xs->rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_pad_interior(n, amt[2], xs->rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_pad_start_of(n, of[0], xs->rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_pad_end_of(n, of[1], xs->rank));
  LATHE_RETURN_IF_ERROR(lathe_attr_set_dynamic_pad_interior_of(n, of[2], xs->rank));
  return lathe_node_commit(n, out);
}

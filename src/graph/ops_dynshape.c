/* ops_dynshape.c -- DynamicShape, DynamicDimensionSize, DynamicReshape. */
#include "graph.h"

lathe_status_t lathe_dynamic_shape(lathe_function_t fn, lathe_value_t x, lathe_value_t *out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_DYNAMIC_SHAPE, &x, 1, &n));
  int64_t rank = x->shape.rank;
  LATHE_RETURN_IF_ERROR(lathe_shape_make(LATHE_DTYPE_INT32, 1, &rank, &n->shape));
  return lathe_node_commit(n, out);
}

lathe_status_t lathe_dynamic_dimension_size(lathe_function_t fn, lathe_value_t x, int axis, lathe_value_t *out) {
  lathe_node *n;
  LATHE_RETURN_IF_ERROR(lathe_node_new(fn, LATHE_OP_DYNAMIC_DIMENSION_SIZE, &x, 1, &n));
  LATHE_RETURN_IF_ERROR(lathe_check_axis("DynamicDimensionSize", "axis", axis, x->shape.rank));
  lathe_attr_set_dynamic_dimension_size_axis(n, axis);
  LATHE_RETURN_IF_ERROR(lathe_shape_make(LATHE_DTYPE_INT32, 0, NULL, &n->shape));
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

/* dynshape.c -- DynamicShape, DynamicDimensionSize, DynamicReshape on the CPU. Shapes are
 * concrete here: executions of graphs with dynamic axes run a specialisation. */
#include "dtype_dispatch.h"

bool lathe_cpu_supports_dynshape(lathe_op op, lathe_dtype dtype) {
  (void)dtype;
  return op == LATHE_OP_DYNAMIC_SHAPE || op == LATHE_OP_DYNAMIC_DIMENSION_SIZE || op == LATHE_OP_DYNAMIC_RESHAPE;
}

lathe_status_t lathe_cpu_run_dynshape(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  (void)ex;
  int32_t *o = out[0]->data;
  switch (n->op) {
    case LATHE_OP_DYNAMIC_SHAPE:
      for (int i = 0; i < in[0]->shape.rank; i++) o[i] = (int32_t)in[0]->shape.dims[i];
      return NULL;
    case LATHE_OP_DYNAMIC_DIMENSION_SIZE:
      o[0] = (int32_t)in[0]->shape.dims[lathe_attr_dynamic_dimension_size_axis(n)];
      return NULL;
    case LATHE_OP_DYNAMIC_RESHAPE:
      /* The specialisation resolved the sizes (and checked the element count); sizes given by
       * values must agree with them. */
      for (int i = 0; i < n->shape.rank; i++) {
        int64_t k = lathe_attr_dynamic_reshape_value_of(n).v[i];
        if (k < 0) continue;
        int64_t v = lathe_load_index(in[k]->data, in[k]->shape.dtype, 0);
        if (v != out[0]->shape.dims[i])
          return LATHE_INVALID("DynamicReshape: axis %d (\"%s\") has size %lld from its value, but the operand's %lld "
                               "elements resolve it to %lld", i, n->shape.axis_names[i] ? n->shape.axis_names[i] : "",
                               (long long)v, (long long)lathe_shape_size(&in[0]->shape), (long long)out[0]->shape.dims[i]);
      }
      if (in[0]->nbytes) memcpy(out[0]->data, in[0]->data, in[0]->nbytes);
      return NULL;
    default:
      return LATHE_UNIMPL("%s: not a dynamic-shape op", lathe_op_name(n->op));
  }
}

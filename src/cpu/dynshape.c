/* dynshape.c -- DynamicShape, DynamicDimensionSize, DynamicReshape on the CPU. Shapes are
 * concrete here: executions of graphs with dynamic axes run a specialisation, which also resolves
 * sizes given by values and lowers the dynamic-size ops (DynamicBroadcastInDim, DynamicIota,
 * DynamicPad) to their static ones (src/graph/specialize.c). */
#include "dtype_dispatch.h"

bool lathe_cpu_supports_dynshape(lathe_op op, lathe_dtype dtype) {
  (void)dtype;
  return op == LATHE_OP_DYNAMIC_SHAPE || op == LATHE_OP_DYNAMIC_DIMENSION_SIZE || op == LATHE_OP_DYNAMIC_RESHAPE;
}

lathe_status_t lathe_cpu_run_dynshape(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  (void)ex;
  int64_t *o = out[0]->data; /* sizes are Int64 (ops_dynshape.c) */
  switch (n->op) {
    case LATHE_OP_DYNAMIC_SHAPE:
      for (int i = 0; i < in[0]->shape.rank; i++) o[i] = in[0]->shape.dims[i];
      return NULL;
    case LATHE_OP_DYNAMIC_DIMENSION_SIZE:
      o[0] = in[0]->shape.dims[lathe_attr_dynamic_dimension_size_axis(n)];
      return NULL;
    case LATHE_OP_DYNAMIC_RESHAPE: /* specialisation lowers it to Reshape; kept for a program run as built */
      if (in[0]->nbytes) memcpy(out[0]->data, in[0]->data, in[0]->nbytes);
      return NULL;
    default:
      return LATHE_UNIMPL("%s: not a dynamic-shape op", lathe_op_name(n->op));
  }
}

/* dynshape.c -- DynamicShape, DynamicDimensionSize, DynamicReshape on the CPU. Shapes are
 * concrete here: executions of graphs with dynamic axes run a specialisation. */
#include "cpu.h"

/* Element 0 of an integer tensor (byte-sized dtypes: the interpreter widens packed ones). */
static int64_t lathe_load_int(const void *p, lathe_dtype dt, int64_t i) {
  switch (dt) {
    case LATHE_DTYPE_INT8: return ((const int8_t *)p)[i];
    case LATHE_DTYPE_INT16: return ((const int16_t *)p)[i];
    case LATHE_DTYPE_INT32: return ((const int32_t *)p)[i];
    case LATHE_DTYPE_INT64: return ((const int64_t *)p)[i];
    case LATHE_DTYPE_UINT8: return ((const uint8_t *)p)[i];
    case LATHE_DTYPE_UINT16: return ((const uint16_t *)p)[i];
    case LATHE_DTYPE_UINT32: return ((const uint32_t *)p)[i];
    default: return (int64_t)((const uint64_t *)p)[i];
  }
}

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
      o[0] = (int32_t)in[0]->shape.dims[n->a.i[0]];
      return NULL;
    case LATHE_OP_DYNAMIC_RESHAPE:
      /* The specialisation resolved the sizes (and checked the element count); sizes given by
       * values must agree with them. */
      for (int i = 0; i < n->shape.rank; i++) {
        int64_t k = n->a.list[1][i];
        if (k < 0) continue;
        int64_t v = lathe_load_int(in[k]->data, in[k]->shape.dtype, 0);
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

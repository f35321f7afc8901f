/* control.c -- the control family on the GPU: Call, While and If are the executor's
 * (src/exec/control.c: predicates read back where the host must decide, the chosen
 * sub-function's steps launched on the same stream); Sort is in sort.c. And the barriers. */
#include "exec.h"
#include "kernels/zkernels.h"

lathe_status_t lathe_cuda_run_sort(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out);
bool lathe_cuda_supports_sort(lathe_dtype dtype);

bool lathe_cuda_supports_control(lathe_op op, lathe_dtype dtype) {
  switch (op) {
    case LATHE_OP_CALL:
    case LATHE_OP_WHILE:
    case LATHE_OP_IF:
      return lathe_dtype_is_valid(dtype);
    case LATHE_OP_SORT:
      return lathe_cuda_supports_sort(dtype);
    default:
      return false;
  }
}

lathe_status_t lathe_cuda_run_control(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  if (n->op == LATHE_OP_SORT) return lathe_cuda_run_sort(ex, n, in, out);
  return lathe_exec_control(&ex->x, n, in, out); /* Call, While, If */
}

bool lathe_cuda_supports_barrier(lathe_op op, lathe_dtype dtype) {
  return (op == LATHE_OP_OPTIMIZATION_BARRIER || op == LATHE_OP_SCHEDULING_BARRIER) && lathe_dtype_is_valid(dtype);
}

lathe_status_t lathe_cuda_run_barrier(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  (void)ex;
  for (int k = 0; k < (n->op == LATHE_OP_OPTIMIZATION_BARRIER ? n->n_out : 1); k++) out[k] = lathe_tensor_retain(in[k]);
  return NULL;
}

void lathe_cuda_sources_control(lathe_cuda_source_fn fn, void *ctx) { lathe_cuda_sources_sort(fn, ctx); }
void lathe_cuda_sources_barrier(lathe_cuda_source_fn fn, void *ctx) { (void)fn, (void)ctx; }
/* Sort's comparators are generated per launch; Call, While and If launch their sub-functions' steps */
void lathe_cuda_texts_control(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  (void)d, (void)n, (void)fn, (void)ctx;
}
void lathe_cuda_texts_barrier(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  (void)d, (void)n, (void)fn, (void)ctx;
}

/* ---- dynamic shapes: the sizes are known on the host once a binding is specialised ---- */
static const char dynshape_src[] = LT_CUH_DYNSHAPE;

void lathe_cuda_sources_dynshape(lathe_cuda_source_fn fn, void *ctx) { fn(ctx, "dynshape", dynshape_src); }
void lathe_cuda_texts_dynshape(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  (void)d, (void)n;
  fn(ctx, dynshape_src);
}

bool lathe_cuda_supports_dynshape(lathe_op op, lathe_dtype dtype) {
  return (op == LATHE_OP_DYNAMIC_SHAPE || op == LATHE_OP_DYNAMIC_DIMENSION_SIZE || op == LATHE_OP_DYNAMIC_RESHAPE) &&
         lathe_dtype_is_valid(dtype);
}

lathe_status_t lathe_cuda_run_dynshape(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  if (n->op == LATHE_OP_DYNAMIC_RESHAPE) {
    /* sizes given by values computed on the device must agree with the specialisation's */
    for (int i = 0; i < n->shape.rank; i++) {
      int64_t k = lathe_attr_dynamic_reshape_value_of(n).v[i];
      if (k < 0) continue;
      lathe_dtype dt = in[k]->shape.dtype;
      int w = lathe_dtype_bits(dt) / 8;
      union {
        int8_t i8;
        int16_t i16;
        int32_t i32;
        int64_t i64;
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
      } raw = {0};
      LATHE_RETURN_IF_ERROR(lathe_cuda_read(ex, in[k], &raw, (size_t)w));
      bool sign = lathe_dtype_class_of(dt) == LATHE_CLASS_SINT;
      int64_t v = w == 1 ? (sign ? raw.i8 : raw.u8) : w == 2 ? (sign ? raw.i16 : raw.u16)
                : w == 4 ? (sign ? raw.i32 : (int64_t)raw.u32) : raw.i64;
      if (v != out[0]->shape.dims[i])
        return LATHE_INVALID("DynamicReshape: axis %d (\"%s\") has size %lld from its value, but the operand's %lld "
                             "elements resolve it to %lld", i, n->shape.axis_names[i] ? n->shape.axis_names[i] : "",
                             (long long)v, (long long)lathe_shape_size(&in[0]->shape), (long long)out[0]->shape.dims[i]);
    }
    return lathe_cuda_copy(ex, in[0], out[0]);
  }
  struct {
    int64_t v[LATHE_MAX_RANK]; /* lt_sizes of dynshape.cuh: Int64 sizes */
  } sizes;
  memset(&sizes, 0, sizeof sizes);
  int count = 1;
  if (n->op == LATHE_OP_DYNAMIC_SHAPE) {
    count = in[0]->shape.rank;
    for (int i = 0; i < count; i++) sizes.v[i] = in[0]->shape.dims[i];
  } else {
    sizes.v[0] = in[0]->shape.dims[lathe_attr_dynamic_dimension_size_axis(n)];
  }
  if (!count) return NULL;
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), dynshape_src, "lt_write_sizes", &f));
  lcuDeviceptr po = lathe_cuda_ptr(out[0]);
  void *args[] = {&po, &sizes, &count};
  return lathe_cuda_launch(ex, f, 1, 32, 0, args);
}

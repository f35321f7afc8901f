/* unary.c -- elementwise ops of one operand (the UNARY kind): the UNARY rows of
 * src/graph/ew.def, instantiated for every byte-sized dtype of their class once per ISA
 * (ew_kernels.h; Float32 math through the vector library of vmath.h). Sub-byte integers arrive
 * widened to 8 bits, with their true width in `bits` (BitCount, Clz mask to it). */
#include "kernels.h"

bool lathe_cpu_supports_unary(lathe_op op, lathe_dtype dtype) {
  return lathe_cpu_ew_fn(lathe_cpu_kernels_of(LATHE_CPU_ISA_BASELINE), op, dtype) != NULL;
}

typedef struct {
  lathe_ew_fn fn;
  const char *in;
  char *out;
  size_t in_es, out_es;
  int bits;
} un_ctx;

static void un_chunk(void *c, int64_t begin, int64_t end) {
  const un_ctx *u = c;
  const void *in = u->in + (size_t)begin * u->in_es;
  static const int step[1] = {1};
  u->fn(&in, step, u->out + (size_t)begin * u->out_es, end - begin, u->bits);
}

lathe_status_t lathe_cpu_run_unary(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                   lathe_tensor **out) {
  lathe_dtype dt = lathe_ew_in_shape(n, 0).dtype;
  lathe_ew_fn fn = lathe_cpu_ew_fn(lathe_cpu_exec_kernels(ex), n->op, dt);
  if (!fn) return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  if (n->op == LATHE_OP_IDENTITY) { /* the row moves bits: a copy does the same */
    if (out[0]->data != in[0]->data && out[0]->nbytes) memcpy(out[0]->data, in[0]->data, out[0]->nbytes);
    return NULL;
  }
  un_ctx c = {fn, in[0]->data, out[0]->data, lathe_dd_esize(dt), lathe_dd_esize(out[0]->shape.dtype),
              lathe_dtype_bits(n->in[0]->shape.dtype)};
  lathe_ew_parallel(ex, lathe_shape_size(&out[0]->shape), un_chunk, &c);
  return NULL;
}

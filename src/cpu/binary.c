/* binary.c -- elementwise ops of two operands with broadcasting (the BINARY kind): the BINARY
 * rows of src/graph/ew.def (which states the integer, shift and NaN semantics), instantiated for
 * every byte-sized dtype of their class once per ISA (ew_kernels.h). */
#include "kernels.h"

bool lathe_cpu_supports_binary(lathe_op op, lathe_dtype dtype) {
  return lathe_cpu_ew_fn(lathe_cpu_kernels_of(LATHE_CPU_ISA_BASELINE), op, dtype) != NULL;
}

lathe_status_t lathe_cpu_run_binary(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                    lathe_tensor **out) {
  lathe_dtype dt = lathe_ew_in_shape(n, 0).dtype;
  lathe_ew_fn_ctx c = {lathe_cpu_ew_fn(lathe_cpu_exec_kernels(ex), n->op, dt), lathe_dtype_bits(n->in[0]->shape.dtype)};
  if (!c.fn) return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  return lathe_ew_run(ex, n, in, 2, out[0], lathe_ew_fn_row, &c);
}

/* compare.c -- comparisons with broadcasting, Bool results (the COMPARE kind): the COMPARE rows
 * of src/graph/ew.def, instantiated for every byte-sized dtype of their class once per ISA
 * (ew_kernels.h). Floats compare as IEEE; the *TotalOrder variants compare IEEE totalOrder keys
 * (lt_key); complex numbers support only (Not)Equal; Bool orders false < true. */
#include "kernels.h"

bool lathe_cpu_supports_compare(lathe_op op, lathe_dtype dtype) {
  return lathe_cpu_ew_fn(lathe_cpu_kernels_of(LATHE_CPU_ISA_BASELINE), op, dtype) != NULL;
}

lathe_status_t lathe_cpu_run_compare(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                     lathe_tensor **out) {
  lathe_dtype dt = lathe_ew_in_shape(n, 0).dtype;
  lathe_ew_fn_ctx c = {lathe_cpu_ew_fn(lathe_cpu_exec_kernels(ex), n->op, dt), lathe_dtype_bits(n->in[0]->shape.dtype)};
  if (!c.fn) return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  return lathe_ew_run(ex, n, in, 2, out[0], lathe_ew_fn_row, &c);
}

/* select.c -- Where and Clamp (the SELECT kind): the SELECT rows of src/graph/ew.def,
 * instantiated for every byte-sized dtype of their class once per ISA (ew_kernels.h). Where moves
 * storage bits (NaN payloads survive); Clamp is Min(Max(min, x), max), so a NaN anywhere gives
 * NaN. Operands broadcast through the elementwise driver (scalars have step 0). */
#include "kernels.h"

/* dtype is the first operand's: Bool for Where, whose values may have any dtype. */
bool lathe_cpu_supports_select(lathe_op op, lathe_dtype dtype) {
  if (op == LATHE_OP_WHERE) return dtype == LATHE_DTYPE_BOOL;
  return lathe_cpu_ew_fn(lathe_cpu_kernels_of(LATHE_CPU_ISA_BASELINE), op, dtype) != NULL;
}

lathe_status_t lathe_cpu_run_select(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                    lathe_tensor **out) {
  lathe_dtype dt = out[0]->shape.dtype; /* the rows are indexed by the result's dtype */
  lathe_ew_fn_ctx c = {lathe_cpu_ew_fn(lathe_cpu_exec_kernels(ex), n->op, dt), lathe_dtype_bits(n->shape.dtype)};
  if (!c.fn) return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  return lathe_ew_run(ex, n, in, 3, out[0], lathe_ew_fn_row, &c);
}

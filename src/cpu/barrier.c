/* barrier.c -- OptimizationBarrier and SchedulingBarrier on the CPU: both pass their operands
 * through without copying. The interpreter runs nodes in creation order and a SchedulingBarrier's
 * dependencies are real operands, so they are computed before it runs. */
#include "cpu.h"

bool lathe_cpu_supports_barrier(lathe_op op, lathe_dtype dtype) {
  return (op == LATHE_OP_OPTIMIZATION_BARRIER || op == LATHE_OP_SCHEDULING_BARRIER) && lathe_dtype_is_valid(dtype);
}

lathe_status_t lathe_cpu_run_barrier(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                     lathe_tensor **out) {
  (void)ex;
  switch (n->op) {
    case LATHE_OP_OPTIMIZATION_BARRIER:
      for (int k = 0; k < n->n_out; k++) out[k] = lathe_tensor_retain(in[k]);
      return NULL;
    case LATHE_OP_SCHEDULING_BARRIER:
      out[0] = lathe_tensor_retain(in[0]);
      return NULL;
    default:
      return LATHE_UNIMPL("%s: not a barrier op", lathe_op_name(n->op));
  }
}

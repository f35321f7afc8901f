/* absent.c -- kernel families the CPU device does not have yet. Their ops are reported as
 * unsupported (absent from capabilities) and fail at compile with UNIMPLEMENTED.
 * A family leaves this file when its own src/cpu/<family>.c lands. */
#include "cpu.h"

#define ABSENT(fam)                                                                              \
  bool lathe_cpu_supports_##fam(lathe_op op, lathe_dtype dtype) {                                \
    (void)op;                                                                                    \
    (void)dtype;                                                                                 \
    return false;                                                                                \
  }                                                                                              \
  lathe_status_t lathe_cpu_run_##fam(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, \
                                     lathe_tensor **out) {                                        \
    (void)ex;                                                                                    \
    (void)in;                                                                                    \
    (void)out;                                                                                   \
    return LATHE_UNIMPL("%s: not implemented on lathe:cpu", lathe_op_name(n->op));               \
  }


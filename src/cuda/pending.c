/* pending.c -- kernel families lathe:cuda does not have yet: every op of them is absent from the
 * capabilities and compiles to UNIMPLEMENTED (never a wrong answer). Each moves to a file of its
 * own as it is written. */
#include "cuda.h"

#define PENDING(K)                                                                                       \
  bool lathe_cuda_supports_##K(lathe_op op, lathe_dtype dtype) {                                         \
    (void)op, (void)dtype;                                                                               \
    return false;                                                                                        \
  }                                                                                                      \
  lathe_status_t lathe_cuda_run_##K(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,    \
                                    lathe_tensor **out) {                                                \
    (void)ex, (void)in, (void)out;                                                                       \
    return LATHE_UNIMPL("%s: not implemented on lathe:cuda", lathe_op_name(n->op));                     \
  }                                                                                                      \
  void lathe_cuda_sources_##K(lathe_cuda_source_fn fn, void *ctx) { (void)fn, (void)ctx; }

PENDING(dot)
PENDING(conv)
PENDING(fused)
PENDING(collective)

/* attention.h -- the fused attention kernels of the CPU device (FusedScaledDotProductAttention,
 * FusedScaledDotProductAttentionVJP, FusedAttentionQKVProjection). They are FUSED-kind ops:
 * fused_ops.c delegates them here. */
#ifndef LATHE_CPU_ATTENTION_H
#define LATHE_CPU_ATTENTION_H

#include "cpu.h"

/* Whether op is one of the three attention ops handled here. */
bool lathe_cpu_attention_op(lathe_op op);
bool lathe_cpu_supports_attention(lathe_op op, lathe_dtype dtype);
/* As every family's run: in and out borrowed, out already allocated with the node's results. */
lathe_status_t lathe_cpu_run_attention(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                       lathe_tensor **out);

#endif

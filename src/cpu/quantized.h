/* quantized.h -- FusedQuantizedDense and QuantizedEmbeddingLookup on the CPU (quantized.c).
 * fused_ops.c delegates these two ops of its family here; the signatures are those of a family
 * (see cpu.h): in/out tensors are borrowed, out already allocated with the result shape. */
#ifndef LATHE_CPU_QUANTIZED_H
#define LATHE_CPU_QUANTIZED_H

#include "cpu.h"

/* Whether op (one of the two) runs with first-operand dtype dtype: Float32 x for the dense,
 * Uint8 data for the lookup. */
bool lathe_cpu_supports_quantized(lathe_op op, lathe_dtype dtype);
lathe_status_t lathe_cpu_run_quantized(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                       lathe_tensor **out);

#endif

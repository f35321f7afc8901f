/* numeric.h -- internals of the CUDA NUMERIC family (RNGBitGenerator, FFT, BatchNorm), shared by
 * numeric.c (capabilities, dispatch, kernel sources), rng.c, fft.c and batchnorm.c. */
#ifndef LATHE_CUDA_NUMERIC_H
#define LATHE_CUDA_NUMERIC_H

#include "cuda.h"

/* The kernels behind lathe_cuda_run_numeric (same contract). */
lathe_status_t lathe_cuda_rng_bit_generator(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                            lathe_tensor **out);
lathe_status_t lathe_cuda_fft(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out);
lathe_status_t lathe_cuda_batch_norm(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                     lathe_tensor **out);

/* Their kernel sources, for the NVRTC compile test. */
void lathe_cuda_sources_rng(lathe_cuda_source_fn fn, void *ctx);
void lathe_cuda_sources_fft(lathe_cuda_source_fn fn, void *ctx);
void lathe_cuda_sources_batch_norm(lathe_cuda_source_fn fn, void *ctx);
/* The families' lasting texts (rng.c, fft.c, batchnorm.c: the one of a dtype). */
const char *lathe_cuda_rng_text(void);
const char *lathe_cuda_fft_text(void);
const char *lathe_cuda_batch_norm_text(lathe_dtype dt);

/* A rank-1 scratch tensor of n elements of dtype, borrowed: freed with the execution. */
lathe_status_t lathe_cuda_numeric_scratch(lathe_cuda_exec *ex, lathe_dtype dtype, int64_t n, lathe_tensor **out);

#endif

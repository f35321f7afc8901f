/* numeric.c -- the CUDA NUMERIC family: capabilities and dispatch to rng.c (RNGBitGenerator,
 * Philox on the GPU), fft.c (cuFFT) and batchnorm.c (per-feature reductions and a fused
 * elementwise pass). Dtypes are lathe:cpu's for every op. */
#include "numeric.h"

bool lathe_cuda_supports_numeric(lathe_op op, lathe_dtype dtype) {
  switch (op) {
    case LATHE_OP_RNG_BIT_GENERATOR: /* dtype: the state's; every values dtype works */
      return dtype == LATHE_DTYPE_UINT64;
    case LATHE_OP_FFT: /* dtype: the operand's */
      return (dtype == LATHE_DTYPE_FLOAT32 || dtype == LATHE_DTYPE_FLOAT64 || dtype == LATHE_DTYPE_COMPLEX64 ||
              dtype == LATHE_DTYPE_COMPLEX128) &&
             lathe_cuda_have_cufft();
    case LATHE_OP_BATCH_NORM_FOR_INFERENCE:
    case LATHE_OP_BATCH_NORM_FOR_TRAINING:
    case LATHE_OP_BATCH_NORM_GRADIENT:
      return dtype == LATHE_DTYPE_FLOAT16 || dtype == LATHE_DTYPE_BFLOAT16 || dtype == LATHE_DTYPE_FLOAT32 ||
             dtype == LATHE_DTYPE_FLOAT64;
    default:
      return false;
  }
}

lathe_status_t lathe_cuda_run_numeric(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                      lathe_tensor **out) {
  switch (n->op) {
    case LATHE_OP_RNG_BIT_GENERATOR: return lathe_cuda_rng_bit_generator(ex, n, in, out);
    case LATHE_OP_FFT: return lathe_cuda_fft(ex, n, in, out);
    case LATHE_OP_BATCH_NORM_FOR_INFERENCE:
    case LATHE_OP_BATCH_NORM_FOR_TRAINING:
    case LATHE_OP_BATCH_NORM_GRADIENT: return lathe_cuda_batch_norm(ex, n, in, out);
    default: return LATHE_UNIMPL("%s: not a NUMERIC op on lathe:cuda", lathe_op_name(n->op));
  }
}

void lathe_cuda_sources_numeric(lathe_cuda_source_fn fn, void *ctx) {
  lathe_cuda_sources_rng(fn, ctx);
  lathe_cuda_sources_fft(fn, ctx);
  lathe_cuda_sources_batch_norm(fn, ctx);
}

void lathe_cuda_texts_numeric(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  (void)d;
  switch (n->op) {
    case LATHE_OP_RNG_BIT_GENERATOR: fn(ctx, lathe_cuda_rng_text()); break;
    case LATHE_OP_FFT: fn(ctx, lathe_cuda_fft_text()); break;
    case LATHE_OP_BATCH_NORM_FOR_INFERENCE:
    case LATHE_OP_BATCH_NORM_FOR_TRAINING:
    case LATHE_OP_BATCH_NORM_GRADIENT:
      if (n->n_operands) fn(ctx, lathe_cuda_batch_norm_text(n->in[0]->shape.dtype));
      break;
    default: break;
  }
}

lathe_status_t lathe_cuda_numeric_scratch(lathe_cuda_exec *ex, lathe_dtype dtype, int64_t n, lathe_tensor **out) {
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = dtype;
  s.rank = 1;
  s.dims[0] = n;
  LATHE_RETURN_IF_ERROR(lathe_cuda_exec_tensor(ex, &s, out));
  lathe_tensor_release(*out); /* ours; the execution keeps its own until the stream is done */
  return NULL;
}

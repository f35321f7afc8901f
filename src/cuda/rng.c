/* rng.c -- RNGBitGenerator on the GPU: the Philox4x32-10 of src/cpu/rng.c (XLA's
 * RngBitGenerator(PHILOX) layout), so a state gives the same bits and the same next state as on
 * lathe:cpu.
 *
 * state = {key, counter_lo, counter_hi}: block b is Philox(counter + b, key), its four 32-bit
 * words land in 4 elements (32-bit dtypes; 8- and 16-bit ones keep each word's low bits) or 2
 * (64-bit dtypes: w0|w1<<32, w2|w3<<32). One thread computes one block and stores it with one
 * vector store; the state stays on the GPU (every thread reads it; thread 0 writes the next
 * one, a different buffer since the op never runs in place). */
#include "numeric.h"
#include "kernels/zkernels.h"

static const char rng_src[] = LT_CUH_RNG;

void lathe_cuda_sources_rng(lathe_cuda_source_fn fn, void *ctx) { fn(ctx, "rng", rng_src); }
const char *lathe_cuda_rng_text(void) { return rng_src; }

lathe_status_t lathe_cuda_rng_bit_generator(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                            lathe_tensor **out) {
  int bytes = lathe_dtype_bits(out[1]->shape.dtype) / 8;
  if (bytes != 1 && bytes != 2 && bytes != 4 && bytes != 8)
    return lathe_status_new(LATHE_STATUS_INTERNAL, "%s: unexpected values dtype %s", lathe_op_name(n->op),
                            lathe_dtype_name(out[1]->shape.dtype));
  int64_t count = lathe_shape_size(&out[1]->shape);
  int64_t blocks = bytes == 8 ? (count + 1) / 2 : (count + 3) / 4;
  char name[24];
  snprintf(name, sizeof name, "lt_rng_%d", bytes);
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), rng_src, name, &f));
  lcuDeviceptr ps = lathe_cuda_ptr(in[0]), pn = lathe_cuda_ptr(out[0]), pv = lathe_cuda_ptr(out[1]);
  void *args[] = {&ps, &pn, &pv, &count, &blocks};
  unsigned b, t;
  lathe_cuda_grid(blocks, &b, &t); /* at least one thread: it writes the next state */
  return lathe_cuda_launch(ex, f, b, t, 0, args);
}

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

static const char rng_src[] =
    "LT_DEV void lt_philox(uint32_t c[4], uint32_t k0, uint32_t k1) {\n"
    "#pragma unroll\n"
    "  for (int r = 0; r < 10; r++) {\n"
    "    if (r) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;\n"
    "    uint32_t h0 = __umulhi(0xD2511F53u, c[0]), l0 = 0xD2511F53u * c[0];\n"
    "    uint32_t h1 = __umulhi(0xCD9E8D57u, c[2]), l1 = 0xCD9E8D57u * c[2];\n"
    "    uint32_t n0 = h1 ^ c[1] ^ k0, n2 = h0 ^ c[3] ^ k1;\n"
    "    c[0] = n0, c[1] = l1, c[2] = n2, c[3] = l0;\n"
    "  }\n"
    "}\n"
    "struct alignas(16) lt_u64x2 { uint64_t a, b; };\n"
    "struct alignas(16) lt_u32x4 { uint32_t a, b, c, d; };\n"
    "struct alignas(8) lt_u16x4 { uint16_t a, b, c, d; };\n"
    "/* W: the element width in bytes; n elements, from `blocks` Philox blocks */\n"
    "template <int W> __device__ void rng(const uint64_t *state, uint64_t *next, void *dst, int64_t n, int64_t blocks) {\n"
    "  uint64_t key = state[0], lo = state[1], hi = state[2];\n"
    "  if (blockIdx.x == 0 && threadIdx.x == 0) {\n"
    "    uint64_t nl = lo + (uint64_t)blocks;\n"
    "    next[0] = key, next[1] = nl, next[2] = hi + (nl < lo ? 1 : 0);\n"
    "  }\n"
    "  LT_LOOP(b, blocks) {\n"
    "    uint64_t a = lo + (uint64_t)b, h = hi + (a < lo ? 1 : 0);\n"
    "    uint32_t c[4] = {(uint32_t)a, (uint32_t)(a >> 32), (uint32_t)h, (uint32_t)(h >> 32)};\n"
    "    lt_philox(c, (uint32_t)key, (uint32_t)(key >> 32));\n"
    "    if (W == 8) {\n"
    "      uint64_t *d = (uint64_t *)dst, v0 = c[0] | (uint64_t)c[1] << 32, v1 = c[2] | (uint64_t)c[3] << 32;\n"
    "      if (2 * b + 1 < n) ((lt_u64x2 *)d)[b] = lt_u64x2{v0, v1};\n"
    "      else d[2 * b] = v0;\n"
    "    } else if (4 * b + 3 < n) { /* a whole block */\n"
    "      if (W == 4) ((lt_u32x4 *)dst)[b] = lt_u32x4{c[0], c[1], c[2], c[3]};\n"
    "      else if (W == 2) ((lt_u16x4 *)dst)[b] = lt_u16x4{(uint16_t)c[0], (uint16_t)c[1], (uint16_t)c[2], (uint16_t)c[3]};\n"
    "      else ((uint32_t *)dst)[b] = (c[0] & 0xffu) | (c[1] & 0xffu) << 8 | (c[2] & 0xffu) << 16 | c[3] << 24;\n"
    "    } else { /* the last, partial block */\n"
    "      for (int j = 0; j < 4 && 4 * b + j < n; j++) {\n"
    "        if (W == 4) ((uint32_t *)dst)[4 * b + j] = c[j];\n"
    "        else if (W == 2) ((uint16_t *)dst)[4 * b + j] = (uint16_t)c[j];\n"
    "        else ((uint8_t *)dst)[4 * b + j] = (uint8_t)c[j];\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n"
    "#define LT_RNG(w) extern \"C\" __global__ void lt_rng_##w(const uint64_t *s, uint64_t *ns, void *d, int64_t n, int64_t b) { rng<w>(s, ns, d, n, b); }\n"
    "LT_RNG(1) LT_RNG(2) LT_RNG(4) LT_RNG(8)\n";

void lathe_cuda_sources_rng(lathe_cuda_source_fn fn, void *ctx) { fn(ctx, "rng", rng_src); }

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
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel(lathe_cuda_exec_dev(ex), rng_src, name, &f));
  lcuDeviceptr ps = lathe_cuda_ptr(in[0]), pn = lathe_cuda_ptr(out[0]), pv = lathe_cuda_ptr(out[1]);
  void *args[] = {&ps, &pn, &pv, &count, &blocks};
  unsigned b, t;
  lathe_cuda_grid(blocks, &b, &t); /* at least one thread: it writes the next state */
  return lathe_cuda_launch(ex, f, b, t, 0, args);
}

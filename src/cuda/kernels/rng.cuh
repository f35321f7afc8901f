LT_DEV void lt_philox(uint32_t c[4], uint32_t k0, uint32_t k1) {
#pragma unroll
  for (int r = 0; r < 10; r++) {
    if (r) k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    uint32_t h0 = __umulhi(0xD2511F53u, c[0]), l0 = 0xD2511F53u * c[0];
    uint32_t h1 = __umulhi(0xCD9E8D57u, c[2]), l1 = 0xCD9E8D57u * c[2];
    uint32_t n0 = h1 ^ c[1] ^ k0, n2 = h0 ^ c[3] ^ k1;
    c[0] = n0, c[1] = l1, c[2] = n2, c[3] = l0;
  }
}
struct alignas(16) lt_u64x2 { uint64_t a, b; };
struct alignas(16) lt_u32x4 { uint32_t a, b, c, d; };
struct alignas(8) lt_u16x4 { uint16_t a, b, c, d; };
/* W: the element width in bytes; n elements, from `blocks` Philox blocks */
template <int W> __device__ void rng(const uint64_t *state, uint64_t *next, void *dst, int64_t n, int64_t blocks) {
  uint64_t key = state[0], lo = state[1], hi = state[2];
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    uint64_t nl = lo + (uint64_t)blocks;
    next[0] = key, next[1] = nl, next[2] = hi + (nl < lo ? 1 : 0);
  }
  LT_LOOP(b, blocks) {
    uint64_t a = lo + (uint64_t)b, h = hi + (a < lo ? 1 : 0);
    uint32_t c[4] = {(uint32_t)a, (uint32_t)(a >> 32), (uint32_t)h, (uint32_t)(h >> 32)};
    lt_philox(c, (uint32_t)key, (uint32_t)(key >> 32));
    if (W == 8) {
      uint64_t *d = (uint64_t *)dst, v0 = c[0] | (uint64_t)c[1] << 32, v1 = c[2] | (uint64_t)c[3] << 32;
      if (2 * b + 1 < n) ((lt_u64x2 *)d)[b] = lt_u64x2{v0, v1};
      else d[2 * b] = v0;
    } else if (4 * b + 3 < n) { /* a whole block */
      if (W == 4) ((lt_u32x4 *)dst)[b] = lt_u32x4{c[0], c[1], c[2], c[3]};
      else if (W == 2) ((lt_u16x4 *)dst)[b] = lt_u16x4{(uint16_t)c[0], (uint16_t)c[1], (uint16_t)c[2], (uint16_t)c[3]};
      else ((uint32_t *)dst)[b] = (c[0] & 0xffu) | (c[1] & 0xffu) << 8 | (c[2] & 0xffu) << 16 | c[3] << 24;
    } else { /* the last, partial block */
      for (int j = 0; j < 4 && 4 * b + j < n; j++) {
        if (W == 4) ((uint32_t *)dst)[4 * b + j] = c[j];
        else if (W == 2) ((uint16_t *)dst)[4 * b + j] = (uint16_t)c[j];
        else ((uint8_t *)dst)[4 * b + j] = (uint8_t)c[j];
      }
    }
  }
}
#define LT_RNG(w) extern "C" __global__ void lt_rng_##w(const uint64_t *s, uint64_t *ns, void *d, int64_t n, int64_t b) { rng<w>(s, ns, d, n, b); }
LT_RNG(1) LT_RNG(2) LT_RNG(4) LT_RNG(8)

struct lt_w16 { uint64_t a, b; };
template <typename W> __device__ void lt_permute(const W *x, W *y, const int32_t *perm, int64_t n, int64_t m,
                                                 int64_t inner, int lp) {
  LT_LOOP(i, n) {
    int64_t row = i / m, k = i - row * m, base = (row / inner) * m * inner + row % inner;
    y[base + k * inner] = x[base + (int64_t)perm[(row << lp) + k] * inner];
  }
}
#define LT_PERMUTE(w, W)                                                                              \
  extern "C" __global__ void lt_sort_permute_##w(const W *x, W *y, const int32_t *perm, int64_t n, int64_t m, \
      int64_t inner, int lp) { lt_permute(x, y, perm, n, m, inner, lp); }
LT_PERMUTE(1, uint8_t)
LT_PERMUTE(2, uint16_t)
LT_PERMUTE(4, uint32_t)
LT_PERMUTE(8, uint64_t)
LT_PERMUTE(16, lt_w16)
extern "C" __global__ void lt_sort_iota(int32_t *perm, int64_t G, int lp) {
  LT_LOOP(g, G) perm[g] = (int32_t)(g & (((int64_t)1 << lp) - 1));
}
extern "C" __global__ void lt_sort_unpack(const uint8_t *p, int8_t *w, int64_t n, int bits, int sign) {
  LT_LOOP(i, n) {
    int64_t bit = i * bits;
    unsigned v = (p[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1);
    w[i] = sign && (v >> (bits - 1)) ? (int8_t)((int)v - (1 << bits)) : (int8_t)v;
  }
}
extern "C" __global__ void lt_sort_pack(uint8_t *p, const int8_t *w, int64_t n, int bits) {
  int per = 8 / bits;
  int64_t bytes = (n * bits + 7) / 8;
  LT_LOOP(b, bytes) {
    unsigned v = 0;
    for (int k = 0; k < per && b * per + k < n; k++) v |= ((unsigned)(uint8_t)w[b * per + k] & ((1u << bits) - 1)) << (k * bits);
    p[b] = (uint8_t)v;
  }
}

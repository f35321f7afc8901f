struct lt_key_less {
  LT_M bool lt(int64_t, const uint64_t *k, const int32_t *p, int64_t a, int64_t b) const {
    return k[a] < k[b] || (k[a] == k[b] && p[a] < p[b]);
  }
};
LT_SORT_KERNELS(key, lt_key_less, true, lt_key_less())
/* keys whose unsigned order is the value order; floats by their bits (B bits, sign bit S): without
 * total order every NaN becomes the positive quiet NaN Q and -0 becomes +0 */
template <typename U> LT_DEV uint64_t lt_fkey(U u, int total, int bits, U nan_min, U q) {
  U sign = (U)((U)1 << (bits - 1)), mag = (U)(u & (U)(sign - 1));
  if (!total) { if (mag > nan_min) u = q; else if (mag == 0) u = 0; }
  return (u & sign) ? (uint64_t)(U)~u : (uint64_t)(U)(u | sign);
}
LT_DEV uint64_t lt_key_of(uint8_t v, int, int kind) { return kind ? (uint64_t)(int64_t)(int8_t)v ^ (1ULL << 63) : (uint64_t)v; }
LT_DEV uint64_t lt_key_of(int16_t v, int, int) { return (uint64_t)(int64_t)v ^ (1ULL << 63); }
LT_DEV uint64_t lt_key_of(int32_t v, int, int) { return (uint64_t)(int64_t)v ^ (1ULL << 63); }
LT_DEV uint64_t lt_key_of(int64_t v, int, int) { return (uint64_t)v ^ (1ULL << 63); }
LT_DEV uint64_t lt_key_of(uint16_t v, int total, int kind) {
  if (kind == 1) return lt_fkey<uint16_t>(v, total, 16, 0x7c00, 0x7e00);
  if (kind == 2) return lt_fkey<uint16_t>(v, total, 16, 0x7f80, 0x7fc0);
  return (uint64_t)v;
}
LT_DEV uint64_t lt_key_of(uint32_t v, int total, int kind) { return kind ? lt_fkey<uint32_t>(v, total, 32, 0x7f800000u, 0x7fc00000u) : (uint64_t)v; }
LT_DEV uint64_t lt_key_of(uint64_t v, int total, int kind) {
  return kind ? lt_fkey<uint64_t>(v, total, 64, 0x7ff0000000000000ULL, 0x7ff8000000000000ULL) : v;
}
/* element k of row `row` (positions past m are padding: the largest key) */
template <typename S> __device__ void lt_keys(const S *x, uint64_t *keys, int32_t *perm, int64_t G, int lp, int64_t m,
                                              int64_t inner, int total, uint64_t flip, int kind) {
  LT_LOOP(g, G) {
    int64_t row = g >> lp, k = g & (((int64_t)1 << lp) - 1);
    perm[g] = (int32_t)k;
    keys[g] = k < m ? lt_key_of(x[(row / inner) * m * inner + row % inner + k * inner], total, kind) ^ flip : ~0ULL;
  }
}
/* S: the storage type read as its integer bits; kind: 0 unsigned/Bool, 1 signed 8-bit or Float16, 2 BFloat16,
 * 1 float bits for 32/64 (see lt_key_of) */
#define LT_KEYS(NAME, S)                                                                                \
  extern "C" __global__ void lt_sort_keys_##NAME(const S *x, uint64_t *keys, int32_t *perm, int64_t G, int lp, \
      int64_t m, int64_t inner, int total, uint64_t flip, int kind) {                                  \
    lt_keys(x, keys, perm, G, lp, m, inner, total, flip, kind);                                         \
  }
LT_KEYS(8, uint8_t)
LT_KEYS(s16, int16_t)
LT_KEYS(s32, int32_t)
LT_KEYS(s64, int64_t)
LT_KEYS(u16, uint16_t)
LT_KEYS(u32, uint32_t)
LT_KEYS(u64, uint64_t)

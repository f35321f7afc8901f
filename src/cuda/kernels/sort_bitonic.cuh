#define LT_M __device__ __forceinline__
#define LT_TILE 2048
struct lt_sort_ops { const void *p[16]; };
struct lt_sort_caps { const void *p[8]; };
/* one tile of LT_TILE elements in shared memory: the steps k in [kmin, kmax], j < LT_TILE */
template <class L, bool KEYS> __device__ void lt_bitonic_tile(const L &less, uint64_t *keys, int32_t *perm, int64_t G,
                                                            int lp, int64_t kmin, int64_t kmax) {
  extern __shared__ __align__(16) unsigned char lt_sort_sm[];
  uint64_t *sk = (uint64_t *)lt_sort_sm;
  int32_t *sp = (int32_t *)(lt_sort_sm + (KEYS ? LT_TILE * 8 : 0));
  int64_t g0 = (int64_t)blockIdx.x * LT_TILE, P = (int64_t)1 << lp;
  for (int e = threadIdx.x; e < LT_TILE; e += blockDim.x)
    if (g0 + e < G) { sp[e] = perm[g0 + e]; if (KEYS) sk[e] = keys[g0 + e]; }
  __syncthreads();
  for (int64_t k = kmin; k <= kmax; k <<= 1)
    for (int j = (int)((k >> 1) < LT_TILE / 2 ? (k >> 1) : LT_TILE / 2); j > 0; j >>= 1) {
      for (int t = threadIdx.x; t < LT_TILE / 2; t += blockDim.x) {
        int e = ((t & ~(j - 1)) << 1) | (t & (j - 1)), f = e + j;
        int64_t g = g0 + e;
        if (g < G) {
          int64_t row = g >> lp;
          bool asc = ((g & (P - 1)) & k) == 0;
          if (asc ? less.lt(row, sk, sp, f, e) : less.lt(row, sk, sp, e, f)) {
            int32_t q = sp[e]; sp[e] = sp[f]; sp[f] = q;
            if (KEYS) { uint64_t w = sk[e]; sk[e] = sk[f]; sk[f] = w; }
          }
        }
      }
      __syncthreads();
    }
  for (int e = threadIdx.x; e < LT_TILE; e += blockDim.x)
    if (g0 + e < G) { perm[g0 + e] = sp[e]; if (KEYS) keys[g0 + e] = sk[e]; }
}
/* one global step (k, j >= LT_TILE) */
template <class L, bool KEYS> __device__ void lt_bitonic_step(const L &less, uint64_t *keys, int32_t *perm, int64_t G,
                                                            int lp, int64_t k, int64_t j) {
  LT_LOOP(t, G >> 1) {
    int64_t e = ((t & ~(j - 1)) << 1) | (t & (j - 1)), f = e + j, row = e >> lp;
    bool asc = ((e & (((int64_t)1 << lp) - 1)) & k) == 0;
    if (asc ? less.lt(row, keys, perm, f, e) : less.lt(row, keys, perm, e, f)) {
      int32_t q = perm[e]; perm[e] = perm[f]; perm[f] = q;
      if (KEYS) { uint64_t w = keys[e]; keys[e] = keys[f]; keys[f] = w; }
    }
  }
}
#define LT_SORT_KERNELS(NAME, L, KEYS, MAKE)                                                          \
  extern "C" __global__ void __launch_bounds__(1024) lt_sort_tile_##NAME(uint64_t *keys, int32_t *perm, \
      int64_t G, int lp, int64_t k0, int64_t k1, lt_sort_ops o, const __grid_constant__ lt_sort_caps c, int64_t m, int64_t inner) { \
    L less = MAKE;                                                                                    \
    lt_bitonic_tile<L, KEYS>(less, keys, perm, G, lp, k0, k1);                                        \
  }                                                                                                   \
  extern "C" __global__ void __launch_bounds__(256) lt_sort_step_##NAME(uint64_t *keys, int32_t *perm,  \
      int64_t G, int lp, int64_t k, int64_t j, lt_sort_ops o, const __grid_constant__ lt_sort_caps c, int64_t m, int64_t inner) { \
    L less = MAKE;                                                                                    \
    lt_bitonic_step<L, KEYS>(less, keys, perm, G, lp, k, j);                                          \
  }

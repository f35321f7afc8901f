/* A warp per row. vec (rows of a multiple of 4, both pointers aligned to a group): a lane takes
 * groups of 4 in a row, 4(lane + 32u) + q, instead of lane + 32k -- a quarter of the load and
 * store instructions; each lane then sums other elements, so the row's sum is ordered differently
 * (within rounding, as between two of the reduction kernels). */
template <typename S, int PER> __device__ void softmax_warp(const S *x, S *y, int64_t rows, int len, int vec) {
  typedef typename lt_ct<S>::T T;
  int lane = threadIdx.x & 31, rpb = blockDim.x >> 5;
#define LT_SMJ(k) (vec ? 4 * (lane + 32 * ((k) >> 2)) + ((k) & 3) : lane + 32 * (k))
  for (int64_t row = (int64_t)blockIdx.x * rpb + (threadIdx.x >> 5); row < rows; row += (int64_t)gridDim.x * rpb) {
    const S *xr = x + row * len;
    S *yr = y + row * len;
    T v[PER], mx = -lt_inf<T>();
    if (vec) {
#pragma unroll
      for (int u = 0; u < PER / 4; u++) {
        int j = 4 * (lane + 32 * u);
        lt_v4<S> w;
        if (j < len) w = *(const lt_v4<S> *)(xr + j);
#pragma unroll
        for (int q = 0; q < 4; q++) v[4 * u + q] = j < len ? lt_g(w.v, q) : (T)0;
      }
    } else {
#pragma unroll
      for (int k = 0; k < PER; k++) v[k] = lane + 32 * k < len ? lt_g(xr, lane + 32 * k) : (T)0;
    }
#pragma unroll
    for (int k = 0; k < PER; k++)
      if (LT_SMJ(k) < len) mx = (v[k] > mx || v[k] != v[k]) ? v[k] : mx;
    mx = lt_row_max(mx, 32, (T *)0);
    T sum = 0;
#pragma unroll
    for (int k = 0; k < PER; k++)
      if (LT_SMJ(k) < len) v[k] = lt_exp(v[k] - mx), sum += v[k];
    sum = lt_row_sum(sum, 32, (T *)0);
    T inv = (T)1 / sum;
    if (vec) {
#pragma unroll
      for (int u = 0; u < PER / 4; u++) {
        int j = 4 * (lane + 32 * u);
        lt_v4<S> w;
#pragma unroll
        for (int q = 0; q < 4; q++) lt_s(w.v, q, v[4 * u + q] * inv);
        if (j < len) *(lt_v4<S> *)(yr + j) = w;
      }
    } else {
#pragma unroll
      for (int k = 0; k < PER; k++)
        if (lane + 32 * k < len) lt_s(yr, lane + 32 * k, v[k] * inv);
    }
  }
#undef LT_SMJ
}
/* Blocks of 256 (the host's launch); MINB blocks per SM caps the registers: left to itself the
 * compiler gave the 32-value Float32 rows 82 registers, 25% occupancy, and the loads too few warps
 * to hide their latency (ncu: 68% of issue gaps on L1TEX). 4 blocks: 64 registers, 50%. Float64
 * rows hold twice the registers and keep 2. */
#define LT_SOFTMAX_WARP(name, S, PER, MINB) \
  extern "C" __global__ void __launch_bounds__(256, MINB) lt_softmax_warp##PER##_##name(const S *x, S *y, int64_t rows, int len, \
      int vec) { softmax_warp<S, PER>(x, y, rows, len, vec); }
#define LT_SOFTMAX_WARPS(name, S, MINB) LT_SOFTMAX_WARP(name, S, 4, MINB) LT_SOFTMAX_WARP(name, S, 8, MINB) \
  LT_SOFTMAX_WARP(name, S, 16, MINB) LT_SOFTMAX_WARP(name, S, 32, MINB)

/* The text's instantiations: fused.c makes one text per group of kernels (LT_FG: 0 softmax, 1
 * GELU, 2 layer norm, 3 dense epilogue, 4 activations) and dtype (LT_FD: 0 Float32, 1 Float64, 2 Float16, 3
 * BFloat16), so that a model compiles only what it runs: all of them in one text took NVRTC 5.7 s,
 * a first step's worth. The arguments after the storage and compute types are the blocks per SM
 * of the softmax rows and of the layer norm's 4, 8, 16 and 32-value rows. */
#if LT_FD == 0
#define LT_FUSED_TYPE(M) M(Float32, float, float, 4, 4, 4, 3, 2)
#elif LT_FD == 1
#define LT_FUSED_TYPE(M) M(Float64, double, double, 2, 2, 2, 2, 1)
#elif LT_FD == 2
#define LT_FUSED_TYPE(M) M(Float16, lt_f16s, float, 4, 4, 4, 3, 2)
#else
#define LT_FUSED_TYPE(M) M(BFloat16, lt_bf16s, float, 4, 4, 4, 3, 2)
#endif
#if LT_FG == 0
#define LT_FUSED_GROUP(name, S, A, SM, L4, L8, L16, L32) LT_FUSED_SOFTMAX(name, S) LT_SOFTMAX_WARPS(name, S, SM)
#elif LT_FG == 1
#define LT_FUSED_GROUP(name, S, A, SM, L4, L8, L16, L32) LT_FUSED_GELU(name, S)
#elif LT_FG == 2
#define LT_FUSED_GROUP(name, S, A, SM, L4, L8, L16, L32) LT_FUSED_LAYER_NORM(name, S) LT_LAYER_NORM_WARPS(name, S, L4, L8, L16, L32)
#elif LT_FG == 3
#define LT_FUSED_GROUP(name, S, A, SM, L4, L8, L16, L32) LT_FUSED_DENSE(name, S, A)
#else
#define LT_FUSED_GROUP(name, S, A, SM, L4, L8, L16, L32) LT_FUSED_ACT(name, S)
#endif
LT_FUSED_TYPE(LT_FUSED_GROUP)

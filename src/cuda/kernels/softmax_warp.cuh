template <typename S, int PER> __device__ void softmax_warp(const S *x, S *y, int64_t rows, int len) {
  typedef typename lt_ct<S>::T T;
  int lane = threadIdx.x & 31, rpb = blockDim.x >> 5;
  for (int64_t row = (int64_t)blockIdx.x * rpb + (threadIdx.x >> 5); row < rows; row += (int64_t)gridDim.x * rpb) {
    const S *xr = x + row * len;
    S *yr = y + row * len;
    T v[PER], mx = -lt_inf<T>();
#pragma unroll
    for (int k = 0; k < PER; k++) {
      int i = lane + 32 * k;
      v[k] = i < len ? lt_g(xr, i) : (T)0;
      if (i < len) mx = (v[k] > mx || v[k] != v[k]) ? v[k] : mx;
    }
    mx = lt_row_max(mx, 32, (T *)0);
    T sum = 0;
#pragma unroll
    for (int k = 0; k < PER; k++)
      if (lane + 32 * k < len) v[k] = lt_exp(v[k] - mx), sum += v[k];
    sum = lt_row_sum(sum, 32, (T *)0);
    T inv = (T)1 / sum;
#pragma unroll
    for (int k = 0; k < PER; k++)
      if (lane + 32 * k < len) lt_s(yr, lane + 32 * k, v[k] * inv);
  }
}
/* Blocks of 256 (the host's launch); MINB blocks per SM caps the registers: left to itself the
 * compiler gave the 32-value Float32 rows 82 registers, 25% occupancy, and the loads too few warps
 * to hide their latency (ncu: 68% of issue gaps on L1TEX). 4 blocks: 64 registers, 50%. Float64
 * rows hold twice the registers and keep 2. */
#define LT_SOFTMAX_WARP(name, S, PER, MINB) \
  extern "C" __global__ void __launch_bounds__(256, MINB) lt_softmax_warp##PER##_##name(const S *x, S *y, int64_t rows, int len) { \
    softmax_warp<S, PER>(x, y, rows, len); }
#define LT_SOFTMAX_WARPS(name, S, MINB) LT_SOFTMAX_WARP(name, S, 4, MINB) LT_SOFTMAX_WARP(name, S, 8, MINB) \
  LT_SOFTMAX_WARP(name, S, 16, MINB) LT_SOFTMAX_WARP(name, S, 32, MINB)
LT_SOFTMAX_WARPS(Float32, float, 4)
LT_SOFTMAX_WARPS(Float64, double, 2)
LT_SOFTMAX_WARPS(Float16, lt_f16s, 4)
LT_SOFTMAX_WARPS(BFloat16, lt_bf16s, 4)

template <typename T> struct lt_sum_op { __device__ __forceinline__ T operator()(T a, T b) const { return a + b; } };
template <typename T> struct lt_max_op { __device__ __forceinline__ T operator()(T a, T b) const { return (a > b || a != a) ? a : b; } };
template <typename T, typename F> __device__ T lt_row_reduce(T v, int tpr, T *smem, F f) {
  int w = tpr < 32 ? tpr : 32;
  for (int m = w / 2; m > 0; m >>= 1) v = f(v, __shfl_xor_sync(0xffffffffu, v, m));
  if (tpr <= 32) return v;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = tpr >> 5;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = smem[0];
  for (int i = 1; i < nw; i++) v = f(v, smem[i]);
  return v;
}
template <typename T> __device__ T lt_row_sum(T v, int tpr, T *smem) { return lt_row_reduce(v, tpr, smem, lt_sum_op<T>()); }
template <typename T> __device__ T lt_row_max(T v, int tpr, T *smem) { return lt_row_reduce(v, tpr, smem, lt_max_op<T>()); }
/* max that skips NaN (NaN only when every value is NaN) */
template <typename T> struct lt_fmax_op { __device__ __forceinline__ T operator()(T a, T b) const { return (a > b || b != b) ? a : b; } };
template <typename T> __device__ T lt_row_fmax(T v, int tpr, T *smem) { return lt_row_reduce(v, tpr, smem, lt_fmax_op<T>()); }

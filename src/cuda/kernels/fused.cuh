/* softmax of rows of len contiguous elements */
template <typename S> __device__ void softmax_rows(const S *x, S *y, int64_t rows, int64_t len, int tpr) {
  typedef typename lt_ct<S>::T T;
  __shared__ T smem[32];
  int rpb = blockDim.x / tpr, sub = threadIdx.x / tpr, lane = threadIdx.x % tpr;
  for (int64_t base = (int64_t)blockIdx.x * rpb; base < rows; base += (int64_t)gridDim.x * rpb) {
    int64_t row = base + sub;
    bool ok = row < rows;
    const S *xr = x + (ok ? row : 0) * len;
    S *yr = y + (ok ? row : 0) * len;
    T mx = -lt_inf<T>();
    for (int64_t i = lane; ok && i < len; i += tpr) { T v = lt_g(xr, i); mx = (v > mx || v != v) ? v : mx; }
    mx = lt_row_max(mx, tpr, smem);
    T sum = 0;
    for (int64_t i = lane; ok && i < len; i += tpr) sum += lt_exp(lt_g(xr, i) - mx);
    sum = lt_row_sum(sum, tpr, smem);
    T inv = (T)1 / sum;
    for (int64_t i = lane; ok && i < len; i += tpr) lt_s(yr, i, lt_exp(lt_g(xr, i) - mx) * inv);
  }
}
/* softmax along an axis of stride inner: a thread per (outer, inner) column */
template <typename S> __device__ void softmax_cols(const S *x, S *y, int64_t cols, int64_t len, int64_t inner) {
  typedef typename lt_ct<S>::T T;
  LT_LOOP(c, cols) {
    int64_t base = c / inner * len * inner + c % inner;
    T mx = -lt_inf<T>();
    for (int64_t i = 0; i < len; i++) { T v = lt_g(x, base + i * inner); mx = (v > mx || v != v) ? v : mx; }
    T sum = 0;
    for (int64_t i = 0; i < len; i++) sum += lt_exp(lt_g(x, base + i * inner) - mx);
    T inv = (T)1 / sum;
    for (int64_t i = 0; i < len; i++) lt_s(y, base + i * inner, lt_exp(lt_g(x, base + i * inner) - mx) * inv);
  }
}
template <typename S> __device__ void gelu(const S *x, S *y, int64_t n, int exact) {
  typedef typename lt_ct<S>::T T;
  LT_LOOP(i, n) {
    T v = lt_g(x, i);
    if (exact) lt_s(y, i, v * (T)0.5 * ((T)1 + lt_erf(v * (T)0.70710678118654752440)));
    else lt_s(y, i, v * (T)0.5 * ((T)1 + lt_tanh((T)0.79788456080286535588 * (v + (T)0.044715 * v * v * v))));
  }
}
/* layer norm of outer rows: row o's elements at lt_offset(o, od, os) + lt_offset(i, nd, ns), i in
 * gamma's order; mean and variance in double */
template <typename S> __device__ void layer_norm(const S *x, S *y, const S *gamma, const S *beta, int64_t rows,
                                               int64_t norm, lt_dims od, lt_strides os, lt_dims nd, lt_strides ns,
                                               double eps, int tpr) {
  typedef typename lt_ct<S>::T T;
  __shared__ double smem[32];
  int rpb = blockDim.x / tpr, sub = threadIdx.x / tpr, lane = threadIdx.x % tpr;
  for (int64_t base = (int64_t)blockIdx.x * rpb; base < rows; base += (int64_t)gridDim.x * rpb) {
    int64_t row = base + sub;
    bool ok = row < rows;
    int64_t xo = ok ? lt_offset(row, od, os) : 0;
    double s = 0;
    for (int64_t i = lane; ok && i < norm; i += tpr) s += (double)lt_g(x, xo + lt_offset(i, nd, ns));
    double mean = lt_row_sum(s, tpr, smem) / (double)norm, q = 0;
    for (int64_t i = lane; ok && i < norm; i += tpr) { double d = (double)lt_g(x, xo + lt_offset(i, nd, ns)) - mean; q += d * d; }
    q = lt_row_sum(q, tpr, smem);
    T mu = (T)mean, inv = (T)(1.0 / sqrt(q / (double)norm + eps));
    for (int64_t i = lane; ok && i < norm; i += tpr) {
      int64_t off = xo + lt_offset(i, nd, ns);
      T v = (lt_g(x, off) - mu) * inv;
      if (gamma) v *= lt_g(gamma, i);
      if (beta) v += lt_g(beta, i);
      lt_s(y, off, v);
    }
  }
}
/* layer_norm of contiguous rows of up to 32 PER elements: a warp per row, the row in registers
 * (one read, no block barrier, no index arithmetic per element); sums in double as above */
template <typename S, int PER> __device__ void layer_norm_warp(const S *x, S *y, const S *gamma, const S *beta, int64_t rows,
                                                               int norm, double eps) {
  typedef typename lt_ct<S>::T T;
  int lane = threadIdx.x & 31, rpb = blockDim.x >> 5;
  for (int64_t row = (int64_t)blockIdx.x * rpb + (threadIdx.x >> 5); row < rows; row += (int64_t)gridDim.x * rpb) {
    const S *xr = x + row * norm;
    S *yr = y + row * norm;
    T v[PER];
    double s = 0, q = 0;
#pragma unroll
    for (int k = 0; k < PER; k++) {
      int i = lane + 32 * k;
      v[k] = i < norm ? lt_g(xr, i) : (T)0;
      s += (double)v[k];
    }
    double mean = lt_row_sum(s, 32, (double *)0) / (double)norm;
#pragma unroll
    for (int k = 0; k < PER; k++)
      if (lane + 32 * k < norm) { double d = (double)v[k] - mean; q += d * d; }
    q = lt_row_sum(q, 32, (double *)0);
    T mu = (T)mean, inv = (T)(1.0 / sqrt(q / (double)norm + eps));
#pragma unroll
    for (int k = 0; k < PER; k++) {
      int i = lane + 32 * k;
      if (i >= norm) continue;
      T o = (v[k] - mu) * inv;
      if (gamma) o *= lt_g(gamma, i);
      if (beta) o += lt_g(beta, i);
      lt_s(yr, i, o);
    }
  }
}
/* y[r, j] = act(acc[r * lda + j] + bias[j]): tpr threads a row, so a column is a loop index, not a
 * 64-bit remainder per element */
template <typename A, typename S> __device__ void dense_epi(const A *acc, int64_t lda, S *y, const S *bias, int64_t m, int64_t n,
                                                           int act, int tpr) {
  typedef typename lt_ct<S>::T T;
  int rpb = blockDim.x / tpr, sub = threadIdx.x / tpr, lane = threadIdx.x % tpr;
  for (int64_t r = (int64_t)blockIdx.x * rpb + sub; r < m; r += (int64_t)gridDim.x * rpb) {
    const A *ar = acc + r * lda;
    S *yr = y + r * n;
    for (int64_t j = lane; j < n; j += tpr) {
      T v = (T)lt_g(ar, j);
      if (bias) v += lt_g(bias, j);
      lt_s(yr, j, lt_act(v, act));
    }
  }
}
/* Kernels by group, instantiated by the tail of softmax_warp.cuh (the text's last piece) */
#define LT_FUSED_SOFTMAX(name, S)                                                                        \
  extern "C" __global__ void lt_softmax_rows_##name(const S *x, S *y, int64_t rows, int64_t len, int tpr) { \
    softmax_rows(x, y, rows, len, tpr); }                                                                  \
  extern "C" __global__ void lt_softmax_cols_##name(const S *x, S *y, int64_t cols, int64_t len, int64_t in) { \
    softmax_cols(x, y, cols, len, in); }
#define LT_FUSED_GELU(name, S) \
  extern "C" __global__ void lt_gelu_##name(const S *x, S *y, int64_t n, int exact) { gelu(x, y, n, exact); }
#define LT_FUSED_LAYER_NORM(name, S)                                                                     \
  extern "C" __global__ void lt_layer_norm_##name(const S *x, S *y, const S *g, const S *b, int64_t rows,   \
      int64_t norm, const __grid_constant__ lt_dims od, const __grid_constant__ lt_strides os, const __grid_constant__ lt_dims nd, const __grid_constant__ lt_strides ns, double eps, int tpr) {            \
    layer_norm(x, y, g, b, rows, norm, od, os, nd, ns, eps, tpr); }
#define LT_FUSED_DENSE(name, S, A)                                                                       \
  extern "C" __global__ void lt_dense_epi_##name(const A *acc, int64_t lda, S *y, const S *b, int64_t m, int64_t n, \
      int act, int tpr) { dense_epi(acc, lda, y, b, m, n, act, tpr); }
/* blocks of 256; MINB blocks per SM cap the registers (softmax_warp.cuh says why), as high as the
 * row's values allow without spilling: ptxas spilled 32-value Float32 rows at 4 blocks (64
 * registers) and 16-value ones at 4 */
#define LT_LAYER_NORM_WARP(name, S, PER, MINB) \
  extern "C" __global__ void __launch_bounds__(256, MINB) lt_layer_norm_warp##PER##_##name(const S *x, S *y, const S *g, \
      const S *b, int64_t rows, int norm, double eps) { layer_norm_warp<S, PER>(x, y, g, b, rows, norm, eps); }
#define LT_LAYER_NORM_WARPS(name, S, M4, M8, M16, M32) LT_LAYER_NORM_WARP(name, S, 4, M4) \
  LT_LAYER_NORM_WARP(name, S, 8, M8) LT_LAYER_NORM_WARP(name, S, 16, M16) LT_LAYER_NORM_WARP(name, S, 32, M32)

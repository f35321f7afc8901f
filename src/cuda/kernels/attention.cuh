struct lt_att {
  int64_t B, H, S, Skv, D, group, j0, jn1, jA, jB, nt, t0, dp, i0, sq, ms[4], bs[4];
  double scale;
  int64_t causal, has_amask, has_bmask, has_bias, has_lens, qss, qhs, qbs;
  int64_t kss, khs, kbs, vec; /* key/value strides; vec: 16-byte loads (flash.cuh) */
};
/* visible keys of query row i of batch b: [0, lim) */
LT_DEV int64_t lt_clamp(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }
LT_DEV int64_t lt_kvlim(const lt_att &a, const int32_t *kvlen, int64_t b, int64_t i) {
  int64_t lim = a.has_lens ? lt_clamp(kvlen[b], 0, a.Skv) : a.Skv;
  if (a.causal && i + 1 < lim) lim = i + 1;
  return lim;
}
LT_DEV int64_t lt_qlim(const lt_att &a, const int32_t *qlen, int64_t b) {
  return a.has_lens ? lt_clamp(qlen[b], 0, a.S) : a.S;
}
/* (b, h, i) of score row `row`: rows go [job j0 + jj][pair t0 + t of nt][query i0 + r of sq]; job
 * j's first pair is (j / jn1) jA + (j % jn1) jB, its pairs dp apart (host: jobs_of). */
LT_DEV void lt_att_row(const lt_att &a, int64_t row, int64_t &b, int64_t &h, int64_t &i) {
  int64_t ta = row / a.sq, jg = a.j0 + ta / a.nt;
  int64_t p = jg / a.jn1 * a.jA + jg % a.jn1 * a.jB + (a.t0 + ta % a.nt) * a.dp;
  i = a.i0 + row % a.sq, b = p / a.H, h = p % a.H;
}
/* the logit of raw dot product x for (b, h, i, j) visible by position: scale, bias, mask */
template <typename T> LT_DEV T lt_logit(const lt_att &a, T x, const T *amask, const uint8_t *bmask, const T *bias,
                                        int64_t b, int64_t h, int64_t i, int64_t j) {
  x = x * (T)a.scale;
  if (a.has_bias) x += bias[b * a.bs[0] + h * a.bs[1] + i * a.bs[2] + j * a.bs[3]];
  int64_t mo = b * a.ms[0] + h * a.ms[1] + i * a.ms[2] + j * a.ms[3];
  if (a.has_amask) x += amask[mo];
  else if (a.has_bmask && !bmask[mo]) x = -lt_inf<T>();
  return x;
}
/* scores [rows = pairs x sq][Skv] -> probabilities; lse[b, h, i] */
template <typename T> __device__ void att_softmax(T *sc, T *lse, const T *amask, const uint8_t *bmask, const T *bias,
                                                  const int32_t *qlen, const int32_t *kvlen, const lt_att &a, int64_t rows,
                                                  int tpr) {
  __shared__ T smem[32];
  int rpb = blockDim.x / tpr, sub = threadIdx.x / tpr, lane = threadIdx.x % tpr;
  for (int64_t base = (int64_t)blockIdx.x * rpb; base < rows; base += (int64_t)gridDim.x * rpb) {
    int64_t row = base + sub;
    bool ok = row < rows;
    int64_t b, h, i;
    lt_att_row(a, ok ? row : 0, b, h, i);
    T *s = sc + (ok ? row : 0) * a.Skv;
    int64_t lim = ok && i < lt_qlim(a, qlen, b) ? lt_kvlim(a, kvlen, b, i) : 0;
    T mx = -lt_inf<T>();
    for (int64_t j = lane; ok && j < a.Skv; j += tpr) {
      T x = j < lim ? lt_logit(a, s[j], amask, bmask, bias, b, h, i, j) : -lt_inf<T>();
      s[j] = x;
      mx = (x > mx) ? x : mx;
    }
    mx = lt_row_fmax(mx, tpr, smem);
    bool none = !(mx > -lt_inf<T>()); /* nothing visible */
    T l = 0;
    for (int64_t j = lane; ok && !none && j < a.Skv; j += tpr) l += lt_exp(s[j] - mx);
    l = lt_row_sum(l, tpr, smem);
    T inv = !none && l > 0 ? (T)1 / l : (T)0;
    for (int64_t j = lane; ok && j < a.Skv; j += tpr) s[j] = none ? (T)0 : lt_exp(s[j] - mx) * inv;
    if (ok && lane == 0 && i < a.S) lse[(b * a.H + h) * a.S + i] = !none && l > 0 ? mx + lt_log(l) : -lt_inf<T>();
  }
}
/* att_softmax for rows of up to 32 PER keys: a warp per row, the row in registers (one read and
 * one write of the scores, where the general kernel above passes over them five times). */
template <typename T, int PER> __device__ void att_softmax_warp(T *sc, T *lse, const T *amask, const uint8_t *bmask,
                                                                const T *bias, const int32_t *qlen, const int32_t *kvlen,
                                                                const lt_att &a, int64_t rows) {
  int lane = threadIdx.x & 31, rpb = blockDim.x >> 5;
  for (int64_t row = (int64_t)blockIdx.x * rpb + (threadIdx.x >> 5); row < rows; row += (int64_t)gridDim.x * rpb) {
    int64_t b, h, i;
    lt_att_row(a, row, b, h, i);
    T *s = sc + row * a.Skv;
    int64_t lim = i < lt_qlim(a, qlen, b) ? lt_kvlim(a, kvlen, b, i) : 0;
    T v[PER], mx = -lt_inf<T>();
#pragma unroll
    for (int k = 0; k < PER; k++) {
      int64_t j = lane + 32 * k;
      v[k] = j < lim ? lt_logit(a, s[j], amask, bmask, bias, b, h, i, j) : -lt_inf<T>();
      mx = (v[k] > mx) ? v[k] : mx;
    }
    mx = lt_row_fmax(mx, 32, (T *)0);
    bool none = !(mx > -lt_inf<T>());
    T l = 0;
#pragma unroll
    for (int k = 0; k < PER; k++)
      if (!none) v[k] = lt_exp(v[k] - mx), l += v[k];
    l = lt_row_sum(l, 32, (T *)0);
    T inv = !none && l > 0 ? (T)1 / l : (T)0;
#pragma unroll
    for (int k = 0; k < PER; k++)
      if (lane + 32 * k < a.Skv) s[lane + 32 * k] = none ? (T)0 : v[k] * inv;
    if (lane == 0 && i < a.S) lse[(b * a.H + h) * a.S + i] = !none && l > 0 ? mx + lt_log(l) : -lt_inf<T>();
  }
}
/* P = e^(logit - lse) (0 where hidden), dS = P (dP - delta) scale, over rows of Skv: tpr threads a
 * row, so a row's position, limits and statistics are found once, not per element. */
template <typename T> __device__ void att_grad(T *sc, T *dp, const T *lse, const T *delta, const T *amask,
                                               const uint8_t *bmask, const T *bias, const int32_t *qlen,
                                               const int32_t *kvlen, const lt_att &a, int64_t rows, int tpr) {
  int rpb = blockDim.x / tpr, sub = threadIdx.x / tpr, lane = threadIdx.x % tpr;
  for (int64_t row = (int64_t)blockIdx.x * rpb + sub; row < rows; row += (int64_t)gridDim.x * rpb) {
    int64_t b, h, i;
    lt_att_row(a, row, b, h, i);
    int64_t r = (b * a.H + h) * a.S + i, lim = i < lt_qlim(a, qlen, b) ? lt_kvlim(a, kvlen, b, i) : 0;
    T L = lse[r], dl = delta[r], scale = (T)a.scale;
    if (L == -lt_inf<T>()) lim = 0;
    T *s = sc + row * a.Skv, *d = dp + row * a.Skv;
    for (int64_t j = lane; j < a.Skv; j += tpr) {
      T P = j < lim ? lt_exp(lt_logit(a, s[j], amask, bmask, bias, b, h, i, j) - L) : (T)0;
      s[j] = P;
      d[j] = P * (d[j] - dl) * scale;
    }
  }
}
/* delta[b, h, i] = sum_d o * dout, rows B x H x S */
/* delta = rowsum(o * dout) in the compute type (Float32 for half storage) */
template <typename S> __device__ void att_delta(const S *o, const S *dout, typename lt_ct<S>::T *delta, const lt_att &a,
                                                int64_t rows, int tpr) {
  typedef typename lt_ct<S>::T T;
  __shared__ T smem[32];
  int rpb = blockDim.x / tpr, sub = threadIdx.x / tpr, lane = threadIdx.x % tpr;
  for (int64_t base = (int64_t)blockIdx.x * rpb; base < rows; base += (int64_t)gridDim.x * rpb) {
    int64_t row = base + sub;
    bool ok = row < rows;
    int64_t i = row % a.S, h = row / a.S % a.H, b = row / (a.S * a.H), off = b * a.qbs + h * a.qhs + i * a.qss;
    T s = 0;
    for (int64_t d = lane; ok && d < a.D; d += tpr) s += (T)lt_g(o, off + d) * (T)lt_g(dout, off + d);
    s = lt_row_sum(s, tpr, smem);
    if (ok && lane == 0) delta[row] = s;
  }
}
#ifndef LT_FA_D /* the streaming kernels' texts (flash.cuh) take the helpers above, not these kernels */
#define LT_ATT(name, T)                                                                                  \
  extern "C" __global__ void lt_att_softmax_##name(T *sc, T *lse, const T *am, const uint8_t *bm, const T *bi, \
      const int32_t *ql, const int32_t *kl, const __grid_constant__ lt_att a, int64_t rows, int tpr) {                             \
    att_softmax(sc, lse, am, bm, bi, ql, kl, a, rows, tpr); }                                              \
  extern "C" __global__ void lt_att_grad_##name(T *sc, T *dp, const T *lse, const T *delta, const T *am,     \
      const uint8_t *bm, const T *bi, const int32_t *ql, const int32_t *kl, const __grid_constant__ lt_att a, int64_t rows, \
      int tpr) {                                                                                          \
    att_grad(sc, dp, lse, delta, am, bm, bi, ql, kl, a, rows, tpr); }                                     \
  extern "C" __global__ void lt_att_delta_##name(const T *o, const T *d, T *delta, const __grid_constant__ lt_att a, int64_t rows, int tpr) { \
    att_delta(o, d, delta, a, rows, tpr); }
#if LT_AD == 0 /* attention.c makes a text per dtype: both in one took NVRTC 1.7 s */
LT_ATT(Float32, float)
#else
LT_ATT(Float64, double)
#endif
/* blocks of 256; launch bounds as the plain warp softmax's (softmax_warp.cuh says why), lower where
 * ptxas would spill (32-value Float32 rows at 4 blocks) */
#define LT_ATT_WARP(name, T, PER, MINB)                                                                          \
  extern "C" __global__ void __launch_bounds__(256, MINB) lt_att_softmax_warp##PER##_##name(T *sc, T *lse,         \
      const T *am, const uint8_t *bm, const T *bi, const int32_t *ql, const int32_t *kl, const __grid_constant__ lt_att a, \
      int64_t rows) {                                                                                             \
    att_softmax_warp<T, PER>(sc, lse, am, bm, bi, ql, kl, a, rows); }
#define LT_ATT_WARPS(name, T, M4, M8, M16, M32) LT_ATT_WARP(name, T, 4, M4) LT_ATT_WARP(name, T, 8, M8) \
  LT_ATT_WARP(name, T, 16, M16) LT_ATT_WARP(name, T, 32, M32)
#if LT_AD == 0
LT_ATT_WARPS(Float32, float, 4, 4, 4, 3)
#else
LT_ATT_WARPS(Float64, double, 2, 2, 2, 2)
#endif
#endif

struct lt_att {
  int64_t B, H, S, Skv, D, group, p0, dp, i0, sq, ms[4], bs[4];
  double scale;
  int64_t causal, has_amask, has_bmask, has_bias, has_lens, qss, qhs, qbs;
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
    int64_t t = row / a.sq, i = a.i0 + row % a.sq, p = a.p0 + t * a.dp, b = p / a.H, h = p % a.H;
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
/* P = e^(logit - lse) (0 where hidden), dS = P (dP - delta) scale, over [pairs][sq][Skv] */
template <typename T> __device__ void att_grad(T *sc, T *dp, const T *lse, const T *delta, const T *amask,
                                               const uint8_t *bmask, const T *bias, const int32_t *qlen,
                                               const int32_t *kvlen, const lt_att &a, int64_t n) {
  LT_LOOP(e, n) {
    int64_t j = e % a.Skv, row = e / a.Skv, t = row / a.sq, i = a.i0 + row % a.sq;
    int64_t p = a.p0 + t * a.dp, b = p / a.H, h = p % a.H, r = (b * a.H + h) * a.S + i;
    T L = lse[r], P = 0;
    if (i < lt_qlim(a, qlen, b) && j < lt_kvlim(a, kvlen, b, i) && L != -lt_inf<T>())
      P = lt_exp(lt_logit(a, sc[e], amask, bmask, bias, b, h, i, j) - L);
    sc[e] = P;
    dp[e] = P * (dp[e] - delta[r]) * (T)a.scale;
  }
}
/* delta[b, h, i] = sum_d o * dout, rows B x H x S */
template <typename T> __device__ void att_delta(const T *o, const T *dout, T *delta, const lt_att &a, int64_t rows, int tpr) {
  __shared__ T smem[32];
  int rpb = blockDim.x / tpr, sub = threadIdx.x / tpr, lane = threadIdx.x % tpr;
  for (int64_t base = (int64_t)blockIdx.x * rpb; base < rows; base += (int64_t)gridDim.x * rpb) {
    int64_t row = base + sub;
    bool ok = row < rows;
    int64_t i = row % a.S, h = row / a.S % a.H, b = row / (a.S * a.H), off = b * a.qbs + h * a.qhs + i * a.qss;
    T s = 0;
    for (int64_t d = lane; ok && d < a.D; d += tpr) s += o[off + d] * dout[off + d];
    s = lt_row_sum(s, tpr, smem);
    if (ok && lane == 0) delta[row] = s;
  }
}
#define LT_ATT(name, T)                                                                                  \
  extern "C" __global__ void lt_att_softmax_##name(T *sc, T *lse, const T *am, const uint8_t *bm, const T *bi, \
      const int32_t *ql, const int32_t *kl, const __grid_constant__ lt_att a, int64_t rows, int tpr) {                             \
    att_softmax(sc, lse, am, bm, bi, ql, kl, a, rows, tpr); }                                              \
  extern "C" __global__ void lt_att_grad_##name(T *sc, T *dp, const T *lse, const T *delta, const T *am,     \
      const uint8_t *bm, const T *bi, const int32_t *ql, const int32_t *kl, const __grid_constant__ lt_att a, int64_t n) {           \
    att_grad(sc, dp, lse, delta, am, bm, bi, ql, kl, a, n); }                                              \
  extern "C" __global__ void lt_att_delta_##name(const T *o, const T *d, T *delta, const __grid_constant__ lt_att a, int64_t rows, int tpr) { \
    att_delta(o, d, delta, a, rows, tpr); }
LT_ATT(Float32, float)
LT_ATT(Float64, double)

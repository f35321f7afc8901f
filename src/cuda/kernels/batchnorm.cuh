struct lt_bn_geo { int64_t units, groups, cols, per, inner, len; };
LT_DEV int64_t lt_bn_group(int gs) { return ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / gs; }
/* the feature of group grp: groups is a multiple of cols, so it never changes */
LT_DEV int64_t lt_bn_feature(const lt_bn_geo &g, int64_t grp) { return (grp % g.cols) / g.per; }
/* f(e) for every element of group grp: units are elements (GS 1), or chunks of len elements of
 * a run of inner (GS 32: per chunks per run) */
template <int GS, typename Fn> LT_DEV void lt_bn_walk(const lt_bn_geo &g, int64_t grp, Fn f) {
  if constexpr (GS == 1) {
    for (int64_t e = grp; e < g.units; e += g.groups) f(e);
  } else {
    int lane = threadIdx.x & 31;
    for (int64_t u = grp; u < g.units; u += g.groups) {
      int64_t s = u / g.per, start = s * g.inner + (u - s * g.per) * g.len, end = start + g.len, lim = (s + 1) * g.inner;
      if (end > lim) end = lim;
      for (int64_t e = start + lane; e < end; e += 32) f(e);
    }
  }
}
/* partial sums per group: MODE 0 sum x; 1 sum (x-q)^2; 2 sum dy and sum dy*(x-q) */
template <int GS, int MODE> __device__ void bn_part(const S *x, const S *dy, const double *qd, const S *qs,
                                                    double *part, lt_bn_geo g) {
  int64_t grp = lt_bn_group(GS);
  if (grp >= g.groups) return;
  int64_t c = lt_bn_feature(g, grp);
  double q = MODE == 0 ? 0.0 : qd ? qd[c] : lt_bn_ld(qs, c), a0 = 0, a1 = 0;
  lt_bn_walk<GS>(g, grp, [&](int64_t e) {
    double v = lt_bn_ld(x, e);
    if constexpr (MODE == 0) a0 += v;
    else if constexpr (MODE == 1) { double d = v - q; a0 += d * d; }
    else { double t = lt_bn_ld(dy, e); a0 += t; a1 += t * (v - q); }
  });
  if constexpr (GS == 32) {
    for (int o = 16; o > 0; o >>= 1) {
      a0 += __shfl_down_sync(0xffffffffu, a0, o);
      a1 += __shfl_down_sync(0xffffffffu, a1, o);
    }
    if (threadIdx.x & 31) return;
  }
  part[grp] = a0;
  if (MODE == 2) part[g.groups + grp] = a1;
}
/* feature c's coefficients from its sums. mode 0 (training, pass 1): Q = mean; mode 1
 * (training, pass 2; v0 scale, v1 offset): P, R, outputs mean and variance; mode 2 (gradient;
 * v0 scale, v1 mean, v2 variance): P, Q, R, S, outputs grad_scale and grad_offset */
LT_DEV void lt_bn_coef(int mode, int64_t c, int64_t f, double a0, double a1, double count, double eps,
                       const S *v0, const S *v1, const S *v2, double *coef, S *o1, S *o2) {
  double *P = coef, *Q = coef + f, *R = coef + 2 * f, *Sc = coef + 3 * f;
  if (mode == 0) {
    Q[c] = a0 / count;
  } else if (mode == 1) {
    double var = a0 / count, mean = Q[c];
    P[c] = lt_bn_ld(v0, c) / sqrt(var + eps);
    R[c] = lt_bn_ld(v1, c);
    lt_bn_st(o1, c, mean);
    lt_bn_st(o2, c, var);
  } else {
    double scale = lt_bn_ld(v0, c), inv = 1 / sqrt(lt_bn_ld(v2, c) + eps), g_off = a0, g_scale = a1 * inv;
    /* dx = scale*inv * (dy - mean(dy) - xhat * mean(dy*xhat)), xhat = (x-mean)*inv */
    Sc[c] = scale * inv;
    P[c] = -scale * inv * inv * g_scale / count;
    Q[c] = lt_bn_ld(v1, c);
    R[c] = -scale * inv * g_off / count;
    lt_bn_st(o1, c, g_scale);
    lt_bn_st(o2, c, g_off);
  }
}
/* sums each feature's m partial sums (two arrays when two) with gsize threads, then its
 * coefficients; a block holds 256/gsize features */
extern "C" __global__ void lt_bn_finish(const double *part, int two, const __grid_constant__ lt_bn_geo g, int64_t f, int64_t m, int gsize,
                                        int mode, double count, double eps, const S *v0, const S *v1, const S *v2,
                                        double *coef, S *o1, S *o2) {
  __shared__ double s0[256], s1[256];
  int t = threadIdx.x, per_block = blockDim.x / gsize, lane = t % gsize;
  for (int64_t c0 = (int64_t)blockIdx.x * per_block; c0 < f; c0 += (int64_t)gridDim.x * per_block) {
    int64_t c = c0 + t / gsize;
    double a0 = 0, a1 = 0;
    if (c < f)
      for (int64_t j = lane; j < m; j += gsize) {
        int64_t i = (j / g.per) * g.cols + c * g.per + j % g.per; /* the group's index */
        a0 += part[i];
        if (two) a1 += part[g.groups + i];
      }
    s0[t] = a0, s1[t] = a1;
    __syncthreads();
    for (int s = gsize / 2; s > 0; s >>= 1) {
      if (lane < s) s0[t] += s0[t + s], s1[t] += s1[t + s];
      __syncthreads();
    }
    if (c < f && lane == 0) lt_bn_coef(mode, c, f, s0[t], s1[t], count, eps, v0, v1, v2, coef, o1, o2);
    __syncthreads();
  }
}
/* the output pass: MODE 0 inference (coefficients from v0 scale, v1 offset, v2 mean, v3
 * variance); 1 from coef; 2 from coef, with dy */
template <int GS, int MODE> __device__ void bn_apply(const S *x, const S *dy, S *y, const double *coef, int64_t f,
                                                     const S *v0, const S *v1, const S *v2, const S *v3, double eps,
                                                     lt_bn_geo g) {
  int64_t grp = lt_bn_group(GS);
  if (grp >= g.groups) return;
  int64_t c = lt_bn_feature(g, grp);
  double p, q, r, s = 0;
  if constexpr (MODE == 0) {
    p = lt_bn_ld(v0, c) / sqrt(lt_bn_ld(v3, c) + eps), q = lt_bn_ld(v2, c), r = lt_bn_ld(v1, c);
  } else {
    p = coef[c], q = coef[f + c], r = coef[2 * f + c];
    if (MODE == 2) s = coef[3 * f + c];
  }
  lt_bn_walk<GS>(g, grp, [&](int64_t e) {
    double v = p * (lt_bn_ld(x, e) - q) + r;
    if constexpr (MODE == 2) v += s * lt_bn_ld(dy, e);
    lt_bn_st(y, e, v);
  });
}
#define LT_BN(gs, m)                                                                                        \
  extern "C" __global__ void lt_bn_part_##gs##_##m(const S *x, const S *dy, const double *qd, const S *qs,   \
                                                  double *p, const __grid_constant__ lt_bn_geo g) { bn_part<gs, m>(x, dy, qd, qs, p, g); } \
  extern "C" __global__ void lt_bn_apply_##gs##_##m(const S *x, const S *dy, S *y, const double *c, int64_t f, \
      const S *v0, const S *v1, const S *v2, const S *v3, double eps, const __grid_constant__ lt_bn_geo g) {                        \
    bn_apply<gs, m>(x, dy, y, c, f, v0, v1, v2, v3, eps, g);                                              \
  }
LT_BN(1, 0) LT_BN(1, 1) LT_BN(1, 2) LT_BN(32, 0) LT_BN(32, 1) LT_BN(32, 2)

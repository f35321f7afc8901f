template <class F> LT_DEV void lt_window32(const lt_wgeom &g, int i, F f) {
  int oc[LT_MAX_RANK], wi[LT_MAX_RANK], total = 1;
  for (int a = g.rank - 1; a >= 0; a--) { int d = (int)g.od[a]; oc[a] = i % d; i /= d; wi[a] = 0; total *= (int)g.wd[a]; }
  for (int q = 0; q < total; q++) {
    int off = 0;
    bool ok = true;
    for (int a = 0; a < g.rank && ok; a++) {
      int p = oc[a] * (int)g.st[a] - (int)g.lo[a] + wi[a] * (int)g.wdil[a], id = (int)g.idil[a];
      if (id != 1) { ok = p >= 0 && p % id == 0; p /= id; }
      ok = ok && p >= 0 && p < (int)g.xd[a];
      off += p * (int)g.xs[a];
    }
    if (ok) f(off);
    for (int a = g.rank - 1; a >= 0; a--) { if (++wi[a] < (int)g.wd[a]) break; wi[a] = 0; }
  }
}
#define LT_LOOP32(i, n) for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += gridDim.x * blockDim.x)
#define LT_WIN_FAST(S, A, LD, ST)                                                                   \
  template <int K> __device__ void lt_rw32(const S *x, S *y, int n, A ident, const lt_wgeom &g) {     \
    LT_LOOP32(i, n) {                                                                                \
      A acc = ident;                                                                                 \
      lt_window32(g, i, [&](int off) {                                                               \
        A v = LD(x[off]);                                                                            \
        if (K == 0) acc = LT_ADD(acc, v);                                                            \
        else if (K == 1) acc = LT_MUL(acc, v);                                                       \
        else if (K == 2) acc = ((v > acc || v != v) && !(acc != acc)) ? v : acc;                     \
        else acc = ((v < acc || v != v) && !(acc != acc)) ? v : acc;                                 \
      });                                                                                            \
      y[i] = ST(acc);                                                                                \
    }                                                                                                \
  }                                                                                                  \
  extern "C" __global__ void lt_rw32_sum(const S *x, S *y, int n, A id, const __grid_constant__ lt_wgeom g) { lt_rw32<0>(x, y, n, id, g); } \
  extern "C" __global__ void lt_rw32_prod(const S *x, S *y, int n, A id, const __grid_constant__ lt_wgeom g) { lt_rw32<1>(x, y, n, id, g); } \
  extern "C" __global__ void lt_rw32_max(const S *x, S *y, int n, A id, const __grid_constant__ lt_wgeom g) { lt_rw32<2>(x, y, n, id, g); } \
  extern "C" __global__ void lt_rw32_min(const S *x, S *y, int n, A id, const __grid_constant__ lt_wgeom g) { lt_rw32<3>(x, y, n, id, g); } \
  template <bool MAX> __device__ void lt_sasd(const S *x, const S *src, S *y, int n, const lt_wgeom &g) { \
    LT_LOOP32(i, n) {                                                                                \
      int best = -1;                                                                                 \
      A bv = 0;                                                                                      \
      lt_window32(g, i, [&](int off) {                                                               \
        A v = LD(x[off]);                                                                            \
        if (best < 0 || (MAX ? v > bv : v < bv) || v != v) { best = off; bv = v; }                   \
      });                                                                                            \
      if (best >= 0) y[best] = ST((A)((LT_ACC)0 + (LT_ACC)LD(src[i])));                              \
    }                                                                                                \
  }                                                                                                  \
  extern "C" __global__ void lt_sasd_max(const S *x, const S *s, S *y, int n, const __grid_constant__ lt_wgeom g) { lt_sasd<true>(x, s, y, n, g); } \
  extern "C" __global__ void lt_sasd_min(const S *x, const S *s, S *y, int n, const __grid_constant__ lt_wgeom g) { lt_sasd<false>(x, s, y, n, g); }
#define LT_WIN_ALL(S, A, LD, ST) LT_WIN(S, A, LD, ST) LT_WIN_FAST(S, A, LD, ST)

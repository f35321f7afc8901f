struct lt_wgeom {
  int rank;
  int64_t od[LT_MAX_RANK], xd[LT_MAX_RANK], xs[LT_MAX_RANK], wd[LT_MAX_RANK], st[LT_MAX_RANK], lo[LT_MAX_RANK],
      idil[LT_MAX_RANK], wdil[LT_MAX_RANK];
};
/* Visits window i's real operand offsets in row-major window order: f(offset). */
template <class F> LT_DEV void lt_window(const lt_wgeom &g, int64_t i, F f) {
  int64_t oc[LT_MAX_RANK], wi[LT_MAX_RANK], total = 1;
  for (int a = g.rank - 1; a >= 0; a--) { oc[a] = i % g.od[a]; i /= g.od[a]; wi[a] = 0; total *= g.wd[a]; }
  for (int64_t q = 0; q < total; q++) {
    int64_t off = 0;
    bool ok = true;
    for (int a = 0; a < g.rank && ok; a++) {
      int64_t p = oc[a] * g.st[a] - g.lo[a] + wi[a] * g.wdil[a];
      if (g.idil[a] != 1) { ok = p >= 0 && p % g.idil[a] == 0; p /= g.idil[a]; }
      ok = ok && p >= 0 && p < g.xd[a];
      off += p * g.xs[a];
    }
    if (ok) f(off);
    for (int a = g.rank - 1; a >= 0; a--) { if (++wi[a] < g.wd[a]) break; wi[a] = 0; }
  }
}
/* per dtype: storage S, accumulator A (double, int64_t or uint64_t), LD: S -> A, ST: A -> S */
#define LT_WIN(S, A, LD, ST)                                                                      \
  typedef A lt_acc_t;                                                                              \
  LT_DEV A lt_sum(A a, A v) { return (A)((uint64_t)a + (uint64_t)v); }                            \
  LT_DEV A lt_prod(A a, A v) { return (A)((uint64_t)a * (uint64_t)v); }                           \
  template <int K> __device__ void lt_rw(const S *x, S *y, int64_t n, A ident, const lt_wgeom &g) {      \
    LT_LOOP(i, n) {                                                                              \
      A acc = ident;                                                                             \
      lt_window(g, i, [&](int64_t off) {                                                         \
        A v = LD(x[off]);                                                                        \
        if (K == 0) acc = LT_ADD(acc, v);                                                        \
        else if (K == 1) acc = LT_MUL(acc, v);                                                   \
        else if (K == 2) acc = ((v > acc || v != v) && !(acc != acc)) ? v : acc;                 \
        else acc = ((v < acc || v != v) && !(acc != acc)) ? v : acc;                             \
      });                                                                                        \
      y[i] = ST(acc);                                                                            \
    }                                                                                            \
  }                                                                                              \
  extern "C" __global__ void lt_rw_sum(const S *x, S *y, int64_t n, A id, const __grid_constant__ lt_wgeom g) { lt_rw<0>(x, y, n, id, g); } \
  extern "C" __global__ void lt_rw_prod(const S *x, S *y, int64_t n, A id, const __grid_constant__ lt_wgeom g) { lt_rw<1>(x, y, n, id, g); } \
  extern "C" __global__ void lt_rw_max(const S *x, S *y, int64_t n, A id, const __grid_constant__ lt_wgeom g) { lt_rw<2>(x, y, n, id, g); } \
  extern "C" __global__ void lt_rw_min(const S *x, S *y, int64_t n, A id, const __grid_constant__ lt_wgeom g) { lt_rw<3>(x, y, n, id, g); } \
  /* SelectAndScatter: source element i adds into acc at its window's selected element */      \
  template <bool MAX> __device__ void lt_sas(const S *x, const S *src, LT_ACC *acc, int64_t n, const lt_wgeom &g) { \
    LT_LOOP(i, n) {                                                                              \
      int64_t best = -1;                                                                         \
      A bv = 0;                                                                                  \
      lt_window(g, i, [&](int64_t off) {                                                         \
        A v = LD(x[off]);                                                                        \
        if (best < 0 || (MAX ? v > bv : v < bv) || v != v) { best = off; bv = v; }               \
      });                                                                                        \
      if (best >= 0) atomicAdd(acc + best, (LT_ACC)LD(src[i]));                                  \
    }                                                                                            \
  }                                                                                              \
  extern "C" __global__ void lt_sas_max(const S *x, const S *s, LT_ACC *acc, int64_t n, const __grid_constant__ lt_wgeom g) { lt_sas<true>(x, s, acc, n, g); } \
  extern "C" __global__ void lt_sas_min(const S *x, const S *s, LT_ACC *acc, int64_t n, const __grid_constant__ lt_wgeom g) { lt_sas<false>(x, s, acc, n, g); } \
  extern "C" __global__ void lt_sas_store(const LT_ACC *acc, S *y, int64_t n) { LT_LOOP(i, n) y[i] = ST((A)acc[i]); }
#define LT_SAME(v) (v)
#define LT_TO_INT(v) ((lt_acc_t)(v))
#define LT_FADD(a, v) ((a) + (v))
#define LT_FMUL(a, v) ((a) * (v))

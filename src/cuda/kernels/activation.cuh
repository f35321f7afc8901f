/* activation.cuh -- FusedActivation, FusedActivationVJP and FusedDenseVJP's pieces over lt_act,
 * lt_act_vjp_x and lt_act_vjp_y, whose text is generated from src/graph/ew.def's LATHE_ACT rows
 * (lathe_act_source_cuda): elementwise passes, the gated (GLU) rows, and column sums. Halves
 * compute in f32 and round once, as on lathe:cpu. */
/* vec (option act_vec=1): elements in groups of 4 (one vector access each: a thread's loads and
 * stores are as wide for halves as for Float32) where every pointer allows, the rest one at a time. */
template <typename S> LT_DEV bool act_vec(const void *p, const void *q, const void *r) {
  return (((unsigned long long)p | (unsigned long long)q | (unsigned long long)r) % alignof(lt_v4<S>)) == 0;
}
template <typename S> __device__ void act_fwd(const S *x, S *y, int64_t n, int act, int vec) {
  typedef typename lt_ct<S>::T T;
  int64_t done = 0;
  if (vec && act_vec<S>(x, y, y)) {
    done = n / 4 * 4;
    LT_LOOP(i, n / 4) {
      lt_v4<S> u = ((const lt_v4<S> *)x)[i], w;
#pragma unroll
      for (int q = 0; q < 4; q++) lt_s(w.v, q, lt_act((T)lt_g(u.v, q), act));
      ((lt_v4<S> *)y)[i] = w;
    }
  }
  LT_LOOP(j, n - done) lt_s(y, done + j, lt_act((T)lt_g(x, done + j), act));
}
/* a: y (from_y) or x */
template <typename S> __device__ void act_vjp(const S *a, const S *g, S *d, int64_t n, int act, int from_y, int vec) {
  typedef typename lt_ct<S>::T T;
  int64_t done = 0;
  if (vec && act_vec<S>(a, g, d)) {
    done = n / 4 * 4;
    LT_LOOP(i, n / 4) {
      lt_v4<S> u = ((const lt_v4<S> *)a)[i], h = ((const lt_v4<S> *)g)[i], w;
#pragma unroll
      for (int q = 0; q < 4; q++) {
        T v = lt_g(u.v, q), gv = lt_g(h.v, q);
        lt_s(w.v, q, from_y ? lt_act_vjp_y(v, gv, act) : lt_act_vjp_x(v, gv, act));
      }
      ((lt_v4<S> *)d)[i] = w;
    }
  }
  LT_LOOP(j, n - done) {
    T v = lt_g(a, done + j), gv = lt_g(g, done + j);
    lt_s(d, done + j, from_y ? lt_act_vjp_y(v, gv, act) : lt_act_vjp_x(v, gv, act));
  }
}
/* x rows [gate | value] of 2h: y = act(gate) * value */
template <typename S> __device__ void act_glu(const S *x, S *y, int64_t rows, int64_t h, int act) {
  typedef typename lt_ct<S>::T T;
  LT_LOOP(i, rows * h) {
    int64_t xo = (i / h) * 2 * h + i % h;
    lt_s(y, i, lt_act((T)lt_g(x, xo), act) * (T)lt_g(x, xo + h));
  }
}
/* dgate = g value act'(gate), dvalue = g act(gate) */
template <typename S> __device__ void act_glu_vjp(const S *x, const S *g, S *d, int64_t rows, int64_t h, int act) {
  typedef typename lt_ct<S>::T T;
  LT_LOOP(i, rows * h) {
    int64_t xo = (i / h) * 2 * h + i % h;
    T gate = lt_g(x, xo), val = lt_g(x, xo + h), gv = lt_g(g, i);
    lt_s(d, xo, lt_act_vjp_x(gate, gv * val, act));
    lt_s(d, xo + h, gv * lt_act(gate, act));
  }
}
#define LT_FUSED_ACT(name, S)                                                                               \
  extern "C" __global__ void lt_act_fwd_##name(const S *x, S *y, int64_t n, int act, int vec) { act_fwd(x, y, n, act, vec); } \
  extern "C" __global__ void lt_act_vjp_##name(const S *a, const S *g, S *d, int64_t n, int act, int from_y, int vec) { \
    act_vjp(a, g, d, n, act, from_y, vec); }                                                                     \
  extern "C" __global__ void lt_act_glu_##name(const S *x, S *y, int64_t rows, int64_t h, int act) {         \
    act_glu(x, y, rows, h, act); }                                                                          \
  extern "C" __global__ void lt_act_glu_vjp_##name(const S *x, const S *g, S *d, int64_t rows, int64_t h, int act) { \
    act_glu_vjp(x, g, d, rows, h, act); }                                                                  

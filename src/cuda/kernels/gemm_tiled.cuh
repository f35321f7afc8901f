struct lt_f16s { uint16_t h; }; struct lt_bf16s { uint16_t h; };
template <typename T> LT_DEV T lt_g(const T *p, int64_t i) { return p[i]; }
LT_DEV float lt_g(const lt_f16s *p, int64_t i) { return lt_f16_to_f32(p[i].h); }
LT_DEV float lt_g(const lt_bf16s *p, int64_t i) { return lt_bf16_to_f32(p[i].h); }
template <typename T, typename A> LT_DEV void lt_s(T *p, int64_t i, A v) { p[i] = v; }
LT_DEV void lt_s(lt_f16s *p, int64_t i, float v) { p[i].h = lt_f32_to_f16(v); }
LT_DEV void lt_s(lt_bf16s *p, int64_t i, float v) { p[i].h = lt_f32_to_bf16(v); }
template <typename A> LT_DEV A lt_mac(A s, A a, A b) { return s + a * b; }
template <typename A> LT_DEV A lt_add(A s, A a) { return s + a; }
LT_DEV lt_c64 lt_mac(lt_c64 s, lt_c64 a, lt_c64 b) {
  return lt_c64(s.re + (a.re * b.re - a.im * b.im), s.im + (a.re * b.im + a.im * b.re));
}
LT_DEV lt_c128 lt_mac(lt_c128 s, lt_c128 a, lt_c128 b) {
  return lt_c128(s.re + (a.re * b.re - a.im * b.im), s.im + (a.re * b.im + a.im * b.re));
}
LT_DEV lt_c64 lt_add(lt_c64 s, lt_c64 a) { return lt_c64(s.re + a.re, s.im + a.im); }
LT_DEV lt_c128 lt_add(lt_c128 s, lt_c128 a) { return lt_c128(s.re + a.re, s.im + a.im); }
template <typename S, typename A, typename D>
__device__ void lt_tiled(const S *pa, const S *pb, D *pd, int64_t batch, int64_t M, int64_t N, int64_t K,
                         int64_t abs_, int64_t ars, int64_t acs, int64_t bbs, int64_t brs, int64_t bcs,
                         int64_t dbs, int64_t drs, int64_t dcs, int accumulate) {
  __shared__ A sa[16][65];
  __shared__ A sb[16][65];
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
  const int64_t tm = (M + 63) / 64, tn = (N + 63) / 64, tiles = batch * tm * tn;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    int64_t bt = t / (tm * tn), r = t - bt * tm * tn, m0 = r / tn * 64, n0 = r % tn * 64;
    const S *a = pa + bt * abs_, *b = pb + bt * bbs;
    A acc[4][4];
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++) acc[i][j] = A(0);
    for (int64_t k0 = 0; k0 < K; k0 += 16) {
      for (int e = tid; e < 1024; e += 256) {
        int i = e >> 4, kk = e & 15, kb = e >> 6, j = e & 63;
        int64_t gm = m0 + i, gk = k0 + kk, gk2 = k0 + kb, gn = n0 + j;
        sa[kk][i] = gm < M && gk < K ? (A)lt_g(a, gm * ars + gk * acs) : A(0);
        sb[kb][j] = gk2 < K && gn < N ? (A)lt_g(b, gk2 * brs + gn * bcs) : A(0);
      }
      __syncthreads();
#pragma unroll 4
      for (int kk = 0; kk < 16; kk++) {
        A av[4], bv[4];
        for (int i = 0; i < 4; i++) av[i] = sa[kk][ty + 16 * i], bv[i] = sb[kk][tx + 16 * i];
        for (int i = 0; i < 4; i++)
          for (int j = 0; j < 4; j++) acc[i][j] = lt_mac(acc[i][j], av[i], bv[j]);
      }
      __syncthreads();
    }
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++) {
        int64_t gm = m0 + ty + 16 * i, gn = n0 + tx + 16 * j;
        if (gm >= M || gn >= N) continue;
        int64_t o = bt * dbs + gm * drs + gn * dcs;
        A v = acc[i][j];
        if (accumulate) v = lt_add((A)lt_g((const D *)pd, o), v);
        lt_s(pd, o, v);
      }
  }
}
#define LT_TILED(name, S, A, D)                                                                        \
  extern "C" __global__ void __launch_bounds__(256) lt_gemm_##name(                                \
      const S *pa, const S *pb, D *pd, int64_t batch, int64_t M, int64_t N, int64_t K, int64_t abs_,  \
      int64_t ars, int64_t acs, int64_t bbs, int64_t brs, int64_t bcs, int64_t dbs, int64_t drs,      \
      int64_t dcs, int accumulate) {                                                                   \
    lt_tiled<S, A, D>(pa, pb, pd, batch, M, N, K, abs_, ars, acs, bbs, brs, bcs, dbs, drs, dcs, accumulate); \
  }
LT_TILED(u32, uint32_t, uint32_t, uint32_t)
LT_TILED(u64, uint64_t, uint64_t, uint64_t)
LT_TILED(f32, float, float, float)
LT_TILED(f64, double, double, double)
LT_TILED(c64, lt_c64, lt_c64, lt_c64)
LT_TILED(c128, lt_c128, lt_c128, lt_c128)
LT_TILED(f16_f32, lt_f16s, float, float)
LT_TILED(f16_f16, lt_f16s, float, lt_f16s)
LT_TILED(bf16_f32, lt_bf16s, float, float)
LT_TILED(bf16_bf16, lt_bf16s, float, lt_bf16s)

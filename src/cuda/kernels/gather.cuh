struct lt_w16 { uint64_t a, b; };
/* Gather: result axis a is an offset axis over operand axis rk[a] >= 0, or a batch axis
 * (rk[a] < 0) whose coordinate steps the indices by ristr[a] */
struct lt_ggeom {
  int rrank, nvec, icode;
  int64_t vec_str;
  int64_t rd[LT_MAX_RANK], rk[LT_MAX_RANK], ristr[LT_MAX_RANK], od[LT_MAX_RANK], sl[LT_MAX_RANK], ostr[LT_MAX_RANK],
      map[LT_MAX_RANK];
};
template <typename W> __device__ void lt_gather(const W *x, W *y, const void *idx, int64_t n, const lt_ggeom &g) {
  LT_LOOP(i, n) {
    int64_t rem = i, src = 0, i0 = 0;
    for (int a = g.rrank - 1; a >= 0; a--) {
      int64_t c = rem % g.rd[a];
      rem /= g.rd[a];
      if (g.rk[a] >= 0) src += c * g.ostr[g.rk[a]];
      else i0 += c * g.ristr[a];
    }
    for (int k = 0; k < g.nvec; k++) {
      int64_t a = g.map[k], hi = g.od[a] - g.sl[a], v = lt_index(idx, g.icode, i0 + k * g.vec_str);
      src += (v < 0 ? 0 : v > hi ? hi : v) * g.ostr[a];
    }
    y[i] = x[src];
  }
}
#define LT_MOVE(w, W)                                                                                    \
  extern "C" __global__ void lt_gather_##w(const W *x, W *y, const void *idx, int64_t n, const __grid_constant__ lt_ggeom g) {    \
    lt_gather(x, y, idx, n, g);                                                                        \
  }
LT_MOVE(1, uint8_t)
LT_MOVE(2, uint16_t)
LT_MOVE(4, uint32_t)
LT_MOVE(8, uint64_t)
LT_MOVE(16, lt_w16)

struct lt_w16 { uint64_t a, b; };
/* DynamicSlice / DynamicUpdateSlice: a box of dims bd at clamped starts of an operand of dims od */
struct lt_dgeom { int rank; int64_t bd[LT_MAX_RANK], od[LT_MAX_RANK], ostr[LT_MAX_RANK]; };
struct lt_starts { const void *p[LT_MAX_RANK]; int code[LT_MAX_RANK]; };
template <typename W> __device__ void lt_box(const W *x, W *y, int64_t n, const lt_dgeom &g, const lt_starts &s, bool update) {
  int64_t base = 0;
  for (int a = 0; a < g.rank; a++) {
    int64_t v = lt_index(s.p[a], s.code[a], 0), hi = g.od[a] - g.bd[a];
    base += (v < 0 ? 0 : v > hi ? hi : v) * g.ostr[a];
  }
  LT_LOOP(i, n) {
    int64_t rem = i, off = base;
    for (int a = g.rank - 1; a >= 0; a--) { off += (rem % g.bd[a]) * g.ostr[a]; rem /= g.bd[a]; }
    if (update) y[off] = x[i];
    else y[i] = x[off];
  }
}
#define LT_MOVE(w, W)                                                                                    \
  extern "C" __global__ void lt_dslice_##w(const W *x, W *y, int64_t n, const __grid_constant__ lt_dgeom g, const __grid_constant__ lt_starts s) {       \
    lt_box(x, y, n, g, s, false);                                                                      \
  }                                                                                                    \
  extern "C" __global__ void lt_dupdate_##w(const W *x, W *y, int64_t n, const __grid_constant__ lt_dgeom g, const __grid_constant__ lt_starts s) {      \
    lt_box(x, y, n, g, s, true);                                                                       \
  }
LT_MOVE(1, uint8_t)
LT_MOVE(2, uint16_t)
LT_MOVE(4, uint32_t)
LT_MOVE(8, uint64_t)
LT_MOVE(16, lt_w16)

#define LT_SP 14
struct lt_conv {
  int64_t ns, kic, K, S, rc, r0;
  int64_t in_sb, in_sc, cg_off, bg_off;
  int64_t out_sb, out_sc, ocg;
  int64_t osp[LT_SP], ksp[LT_SP], idim[LT_SP], ist[LT_SP], str[LT_SP], kdil[LT_SP], idil[LT_SP], plo[LT_SP], ost[LT_SP];
};
/* col[g][r][kk] = input value under kernel position kk / kic, channel kk % kic, of output row r0 + r */
extern "C" __global__ void lt_im2col(const lt_si *in, lt_so *col, int64_t n, const __grid_constant__ lt_conv c) {
  LT_LOOP(e, n) {
    int64_t kk = e % c.K, t = e / c.K, r = t % c.rc, g = t / c.rc;
    int64_t row = c.r0 + r, b = row / c.S, s = row % c.S, ci = kk % c.kic, kp = kk / c.kic;
    int64_t off = g * (c.bg_off + c.cg_off) + b * c.in_sb + ci * c.in_sc;
    bool ok = true;
    for (int d = (int)c.ns - 1; d >= 0; d--) {
      int64_t o = s % c.osp[d], kx = kp % c.ksp[d];
      s /= c.osp[d], kp /= c.ksp[d];
      int64_t pos = o * c.str[d] + kx * c.kdil[d] - c.plo[d];
      if (pos < 0 || pos % c.idil[d] != 0 || pos / c.idil[d] >= c.idim[d]) ok = false;
      else off += pos / c.idil[d] * c.ist[d];
    }
    lt_st(col, e, ok ? lt_cv(lt_ld(in, off)) : (lt_co)0);
  }
}
/* *flag = 1 when w[0, n) has a NaN or an infinity */
extern "C" __global__ void lt_conv_nonfinite(const lt_si *w, unsigned *flag, int64_t n) {
  LT_LOOP(i, n) { lt_ci v = lt_ld(w, i); if (v - v != v - v) *flag = 1; }
}
/* under a set flag, each NaN output of the n = G * R * ocg again, summed without the holes */
extern "C" __global__ void lt_conv_fix(const lt_si *in, const lt_si *w, lt_so *out, const unsigned *flag,
                                        int64_t n, const __grid_constant__ lt_conv c) {
  if (!*flag) return;
  LT_LOOP(e, n) {
    int64_t o = e % c.ocg, t = e / c.ocg, row = t % c.rc, g = t / c.rc, b = row / c.S, s0 = row % c.S;
    int64_t oo = b * c.out_sb + (g * c.ocg + o) * c.out_sc;
    for (int64_t d = c.ns - 1, s = s0; d >= 0; d--) { oo += s % c.osp[d] * c.ost[d]; s /= c.osp[d]; }
    lt_ci y = lt_ld((const lt_si *)out, oo);
    if (y == y) continue;
    lt_ci acc = 0;
    const lt_si *wr = w + (g * c.ocg + o) * c.K;
    for (int64_t kk = 0; kk < c.K; kk++) {
      int64_t ci = kk % c.kic, kp = kk / c.kic, s = s0, off = g * (c.bg_off + c.cg_off) + b * c.in_sb + ci * c.in_sc;
      bool ok = true;
      for (int d = (int)c.ns - 1; d >= 0; d--) {
        int64_t od = s % c.osp[d], kx = kp % c.ksp[d];
        s /= c.osp[d], kp /= c.ksp[d];
        int64_t pos = od * c.str[d] + kx * c.kdil[d] - c.plo[d];
        if (pos < 0 || pos % c.idil[d] != 0 || pos / c.idil[d] >= c.idim[d]) ok = false;
        else off += pos / c.idil[d] * c.ist[d];
      }
      if (ok) acc += lt_ld(in, off) * lt_ld(wr, kk);
    }
    lt_st(out, oo, acc);
  }
}
/* out[row r0 + r, channel g * ocg + o] = tile[g][r][o] */
extern "C" __global__ void lt_conv_scatter(const lt_si *tile, lt_so *out, int64_t n, const __grid_constant__ lt_conv c) {
  LT_LOOP(e, n) {
    int64_t o = e % c.ocg, t = e / c.ocg, r = t % c.rc, g = t / c.rc;
    int64_t row = c.r0 + r, b = row / c.S, s = row % c.S, off = b * c.out_sb + (g * c.ocg + o) * c.out_sc;
    for (int d = (int)c.ns - 1; d >= 0; d--) { off += s % c.osp[d] * c.ost[d]; s /= c.osp[d]; }
    lt_st(out, off, lt_cv(lt_ld(tile, e)));
  }
}

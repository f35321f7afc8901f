struct lt_w16 { uint64_t a, b; };
template <typename W> __device__ void gather(const W *in, W *out, int64_t n, const lt_dims &d, const lt_strides &s, int64_t base) {
  LT_LOOP(i, n) out[i] = in[base + lt_offset(i, d, s)];
}
template <typename W> __device__ void scatter(const W *in, W *out, int64_t n, const lt_dims &d, const lt_strides &s, int64_t base) {
  LT_LOOP(i, n) out[base + lt_offset(i, d, s)] = in[i];
}
template <typename W> __device__ void pad(const W *in, W *out, const W *fill, int64_t n, const lt_dims &od, const lt_dims &id,
                                        const lt_strides &lo, const lt_strides &interior) {
  LT_LOOP(i, n) {
    int64_t rem = i, src = 0, mult = 1; bool inside = true;
    for (int a = od.rank - 1; a >= 0; a--) {
      int64_t o = rem % od.d[a]; rem /= od.d[a];
      int64_t t = o - lo.s[a], step = interior.s[a] + 1;
      if (t < 0 || t % step != 0 || t / step >= id.d[a]) inside = false;
      else src += (t / step) * mult;
      mult *= id.d[a];
    }
    out[i] = inside ? in[src] : fill[0];
  }
}
#define LT_W(w, W) \
  extern "C" __global__ void lt_gather_##w(const W *in, W *out, int64_t n, const __grid_constant__ lt_dims d, const __grid_constant__ lt_strides s, int64_t b) { gather(in, out, n, d, s, b); } \
  extern "C" __global__ void lt_scatter_##w(const W *in, W *out, int64_t n, const __grid_constant__ lt_dims d, const __grid_constant__ lt_strides s, int64_t b) { scatter(in, out, n, d, s, b); } \
  extern "C" __global__ void lt_pad_##w(const W *in, W *out, const W *f, int64_t n, const __grid_constant__ lt_dims od, const __grid_constant__ lt_dims id, const __grid_constant__ lt_strides lo, const __grid_constant__ lt_strides in_) { pad(in, out, f, n, od, id, lo, in_); }
/* layout.c makes a text per width (LT_LW): a model compiles the widths it moves */
#if LT_LW == 1
LT_W(1, uint8_t)
#elif LT_LW == 2
LT_W(2, uint16_t)
#elif LT_LW == 4
LT_W(4, uint32_t)
#elif LT_LW == 8
LT_W(8, uint64_t)
#else
LT_W(16, lt_w16)
#endif

struct lt_w16 { uint64_t a, b; };
template <typename W> __device__ void gather(const W *in, W *out, int64_t n, const lt_dims &d, const lt_strides &s, int64_t base) {
  LT_LOOP(i, n) out[i] = in[base + lt_offset(i, d, s)];
}
template <typename W> __device__ void scatter(const W *in, W *out, int64_t n, const lt_dims &d, const lt_strides &s, int64_t base) {
  LT_LOOP(i, n) out[base + lt_offset(i, d, s)] = in[i];
}
/* the same moves for sizes below 2^31 (lt_offset32) */
template <typename W> __device__ void gather32(const W *in, W *out, uint32_t n, const lt_dims32 &g, int32_t base) {
  LT_LOOP32(i, n) out[i] = in[base + lt_offset32(i, g)];
}
template <typename W> __device__ void scatter32(const W *in, W *out, uint32_t n, const lt_dims32 &g, int32_t base) {
  LT_LOOP32(i, n) out[base + lt_offset32(i, g)] = in[i];
}
/* n copies of *v (a broadcast of one element: every stride 0), in 16-byte stores between an
 * unaligned head and tail */
template <typename W> __device__ void fill(const W *v, W *out, int64_t n) {
  constexpr int K = 16 / sizeof(W);
  union { W w[K]; uint4 u; } pat;
  const W x = *v;
  for (int k = 0; k < K; k++) pat.w[k] = x;
  int64_t head = (int64_t)(((16 - ((uint64_t)out & 15)) & 15) / sizeof(W));
  if (head > n) head = n;
  const int64_t body = (n - head) / K, done = head + body * K;
  uint4 *ob = (uint4 *)(out + head);
  LT_LOOP(i, body) ob[i] = pat.u;
  LT_LOOP(i, head) out[i] = x;
  LT_LOOP(i, n - done) out[done + i] = x;
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
/* lines of a matrix between pitches (gemm.c's staging): out line l < n_out, element j < len_out
 * (at l * op + j) gets in[l * ip + j] where l < n_in and j < len_in, else zero; the grid's
 * blocks are bx per line, so a lane walks a line without dividing */
template <typename W> __device__ void lines(const W *in, W *out, int64_t n_out, int64_t len_out, int64_t op, int64_t n_in,
                                          int64_t len_in, int64_t ip, int64_t bx) {
  const W z = W();
  const int64_t step_l = gridDim.x / bx, step_j = bx * blockDim.x;
  for (int64_t l = blockIdx.x / bx; l < n_out; l += step_l)
    for (int64_t j = (blockIdx.x % bx) * blockDim.x + threadIdx.x; j < len_out; j += step_j)
      out[l * op + j] = l < n_in && j < len_in ? in[l * ip + j] : z;
}
#define LT_W(w, W) \
  extern "C" __global__ void lt_gather_##w(const W *in, W *out, int64_t n, const __grid_constant__ lt_dims d, const __grid_constant__ lt_strides s, int64_t b) { gather(in, out, n, d, s, b); } \
  extern "C" __global__ void lt_scatter_##w(const W *in, W *out, int64_t n, const __grid_constant__ lt_dims d, const __grid_constant__ lt_strides s, int64_t b) { scatter(in, out, n, d, s, b); } \
  extern "C" __global__ void lt_gather32_##w(const W *in, W *out, uint32_t n, const __grid_constant__ lt_dims32 g, int32_t b) { gather32(in, out, n, g, b); } \
  extern "C" __global__ void lt_scatter32_##w(const W *in, W *out, uint32_t n, const __grid_constant__ lt_dims32 g, int32_t b) { scatter32(in, out, n, g, b); } \
  extern "C" __global__ void lt_fill_##w(const W *v, W *out, int64_t n) { fill(v, out, n); } \
  extern "C" __global__ void lt_lines_##w(const W *in, W *out, int64_t no, int64_t lo, int64_t op, int64_t ni, int64_t li, int64_t ip, int64_t bx) { lines(in, out, no, lo, op, ni, li, ip, bx); } \
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

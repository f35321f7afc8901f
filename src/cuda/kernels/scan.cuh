#define LT_M __device__ __forceinline__
struct lt_sgeom { int64_t lines, len, post, nch, ch; int excl, rev; };
/* the offset of scan position t of line l */
LT_DEV int64_t lt_soff(const lt_sgeom &g, int64_t l, int64_t t) {
  int64_t k = g.rev ? g.len - 1 - t : t;
  if (g.post == 1) return l * g.len + k;
  int64_t p = l / g.post, c = l - p * g.post;
  return (p * g.len + k) * g.post + c;
}
/* any type of up to 8 bytes through 32-bit shuffles */
template <typename T> LT_DEV T lt_sshfl_up(T v, int delta) {
  constexpr int W = (int)((sizeof(T) + 3) / 4);
  union U { T t; unsigned u[W]; } a;
  for (int k = 0; k < W; k++) a.u[k] = 0;
  a.t = v;
  for (int k = 0; k < W; k++) a.u[k] = __shfl_up_sync(0xffffffffu, a.u[k], delta);
  return a.t;
}
template <typename T> LT_DEV T lt_sshfl_idx(T v, int lane) {
  constexpr int W = (int)((sizeof(T) + 3) / 4);
  union U { T t; unsigned u[W]; } a;
  for (int k = 0; k < W; k++) a.u[k] = 0;
  a.t = v;
  for (int k = 0; k < W; k++) a.u[k] = __shfl_sync(0xffffffffu, a.u[k], lane);
  return a.t;
}
__shared__ __align__(16) unsigned char lt_scan_sm[8 * 8];
/* inclusive (*inc) and exclusive (*exc) scans of v over a group of 32 or blockDim.x threads,
 * and the group's total (every thread of the group calls it) */
template <class Op> LT_DEV void lt_gscan(const Op &op, typename Op::A v, int gs, typename Op::A *inc,
    typename Op::A *exc, typename Op::A *tot) {
  typedef typename Op::A A;
  int lane = threadIdx.x & 31;
  A x = v;
  for (int d = 1; d < 32; d <<= 1) { A u = lt_sshfl_up(x, d); if (lane >= d) x = op.add(u, x); }
  A e = lt_sshfl_up(x, 1);
  if (lane == 0) e = (A)0;
  if (gs == 32) { *inc = x; *exc = e; *tot = lt_sshfl_idx(x, 31); return; }
  A *sm = (A *)lt_scan_sm;
  int warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 31) sm[warp] = x;
  __syncthreads();
  A off = (A)0, t = (A)0;
  for (int w = 0; w < nw; w++) { if (w == warp) off = t; t = op.add(t, sm[w]); }
  *inc = op.add(off, x); *exc = op.add(off, e); *tot = t;
}
template <class Op, bool PART> LT_DEV typename Op::A lt_sld(const Op &op, const void *p, int64_t i) {
  if (PART) return ((const typename Op::A *)p)[i];
  return op.load(((const typename Op::S *)p)[i]);
}
template <class Op, bool PART> LT_DEV void lt_sst(const Op &op, void *p, int64_t i, typename Op::A a) {
  if (PART) ((typename Op::A *)p)[i] = a;
  else ((typename Op::S *)p)[i] = op.store(a);
}
/* rows: work item w = l * nch + c is chunk c of line l, taken by a group of gs threads. mode 0
 * stores the scan (starting from carry[w] when carry is given), mode 1 only its total in part[w]. */
template <class Op, bool PART> __device__ void lt_rows_engine(const Op &op, const void *in, void *out,
    const void *carry, void *part, const lt_sgeom &g, int gs, int mode) {
  typedef typename Op::A A;
  int gpb = blockDim.x / gs, gid = threadIdx.x / gs, lane = threadIdx.x % gs;
  int64_t n_work = g.lines * g.nch;
  for (int64_t w = (int64_t)blockIdx.x * gpb + gid; w < n_work; w += (int64_t)gridDim.x * gpb) {
    int64_t l = w / g.nch, t0 = (w - l * g.nch) * g.ch, t1 = t0 + g.ch < g.len ? t0 + g.ch : g.len;
    A acc = carry ? ((const A *)carry)[w] : (A)0;
    for (int64_t t = t0; t < t1; t += gs) {
      int64_t tt = t + lane;
      bool ok = tt < t1;
      int64_t o = ok ? lt_soff(g, l, tt) : 0;
      A v = ok ? lt_sld<Op, PART>(op, in, o) : (A)0, inc, exc, tot;
      lt_gscan(op, v, gs, &inc, &exc, &tot);
      if (mode == 0 && ok) lt_sst<Op, PART>(op, out, o, op.add(acc, g.excl ? exc : inc));
      acc = op.add(acc, tot);
    }
    if (mode == 1 && lane == 0) ((A *)part)[w] = acc;
  }
}
/* cols: work item w = c * lines + l (consecutive threads, consecutive lines) is chunk c of
 * line l, summed in order by one thread; chunk totals and carries are indexed l * nch + c */
template <class Op> __device__ void lt_cols_engine(const Op &op, const void *in, void *out, const void *carry,
    void *part, const lt_sgeom &g, int mode) {
  typedef typename Op::A A;
  int64_t n_work = g.lines * g.nch;
  for (int64_t w = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; w < n_work; w += (int64_t)gridDim.x * blockDim.x) {
    int64_t c = w / g.lines, l = w - c * g.lines, t0 = c * g.ch, t1 = t0 + g.ch < g.len ? t0 + g.ch : g.len;
    A acc = carry ? ((const A *)carry)[l * g.nch + c] : (A)0;
    for (int64_t t = t0; t < t1; t++) {
      int64_t o = lt_soff(g, l, t);
      A v = lt_sld<Op, false>(op, in, o), next = op.add(acc, v);
      if (mode == 0) lt_sst<Op, false>(op, out, o, g.excl ? acc : next);
      acc = next;
    }
    if (mode == 1) ((A *)part)[l * g.nch + c] = acc;
  }
}
#define LT_SCAN(S_, A_, LOAD, ADD, STORE)                                                        \
  struct sop {                                                                                   \
    typedef S_ S;                                                                                \
    typedef A_ A;                                                                                \
    LT_M A load(S x) const { return LOAD; }                                                      \
    LT_M A add(A a, A b) const { return ADD; }                                                   \
    LT_M S store(A a) const { return STORE; }                                                    \
  };                                                                                             \
  extern "C" __global__ void __launch_bounds__(256) lt_scan_rows(const void *in, void *out,    \
      const void *carry, void *part, const __grid_constant__ lt_sgeom g, int gs, int mode) {                             \
    lt_rows_engine<sop, false>(sop(), in, out, carry, part, g, gs, mode);                          \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(256) lt_scan_rowsp(const void *in, void *out,   \
      const void *carry, void *part, const __grid_constant__ lt_sgeom g, int gs, int mode) {                             \
    lt_rows_engine<sop, true>(sop(), in, out, carry, part, g, gs, mode);                           \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(256) lt_scan_cols(const void *in, void *out,    \
      const void *carry, void *part, const __grid_constant__ lt_sgeom g, int gs, int mode) {                             \
    (void)gs;                                                                                    \
    lt_cols_engine<sop>(sop(), in, out, carry, part, g, mode);                                     \
  }
#define LT_SCAN_INT(T, U) LT_SCAN(T, U, (U)x, (U)(a + b), (T)a)
#define LT_SCAN_FLOAT(T) LT_SCAN(T, T, x, a + b, a)
#define LT_SCAN_HALF(H) LT_SCAN(uint16_t, float, lt_##H##_to_f32(x), a + b, lt_f32_to_##H(a))

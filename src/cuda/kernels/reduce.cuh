#define LT_M __device__ __forceinline__
#define LT_INFF __int_as_float(0x7f800000)
/* vec: the reduced range is one contiguous run, read in aligned groups of 4 (the host checks) */
struct lt_rgeom { int nk, nr, vec; int64_t kd[LT_MAX_RANK], ks[LT_MAX_RANK], rd[LT_MAX_RANK], rs[LT_MAX_RANK]; };
template <typename S> struct alignas(sizeof(S) * 4 > 16 ? 16 : sizeof(S) * 4) lt_rv4 { S v[4]; };
/* offset of index i of groups (d, s); one group inline, more through a call (smaller code) */
__device__ __noinline__ int64_t lt_goff_n(int64_t i, int n, const int64_t *d, const int64_t *s) {
  int64_t off = 0;
  for (int a = n - 1; a >= 0; a--) { int64_t q = i / d[a]; off += (i - q * d[a]) * s[a]; i = q; }
  return off;
}
LT_DEV int64_t lt_goff(int64_t i, int n, const int64_t *d, const int64_t *s) {
  return n == 1 ? i * s[0] : lt_goff_n(i, n, d, s);
}
/* any type of up to 16 bytes through 32-bit shuffles */
template <typename T> LT_DEV T lt_shfl_down(T v, int delta) {
  constexpr int W = (int)((sizeof(T) + 3) / 4);
  union U { T t; unsigned u[W]; } a;
  for (int k = 0; k < W; k++) a.u[k] = 0;
  a.t = v;
  for (int k = 0; k < W; k++) a.u[k] = __shfl_down_sync(0xffffffffu, a.u[k], delta);
  return a.t;
}
__shared__ __align__(16) unsigned char lt_red_sm[32 * 16];
/* the accumulators of a group of 1, 32 or blockDim.x threads combined; valid in its first thread */
template <class Op> LT_DEV typename Op::A lt_group(const Op &op, typename Op::A acc, int group) {
  typedef typename Op::A A;
  if (group == 1) return acc;
  for (int d = 16; d > 0; d >>= 1) acc = op.comb(acc, lt_shfl_down(acc, d));
  if (group <= 32) return acc;
  A *sm = (A *)lt_red_sm;
  int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) sm[warp] = acc;
  __syncthreads();
  if (warp == 0) {
    acc = lane < nw ? sm[lane] : op.ident();
    for (int d = 16; d > 0; d >>= 1) acc = op.comb(acc, lt_shfl_down(acc, d));
  }
  return acc;
}
template <typename A> LT_DEV A lt_part_ld(const void *p, int64_t i) { return ((const A *)p)[i]; }
/* work item w = s * n_out + o: output o's part s of the reduced range (splits parts); with one
 * part the result is stored, else the partial accumulator goes to part[w] */
template <class Op, bool PART> __device__ void lt_reduce(const Op &op, const void *in, void *out, void *part,
    int64_t n_out, int64_t n_red, int64_t splits, int group, const lt_rgeom &g) {
  typedef typename Op::A A;
  typedef typename Op::S S;
  int gpb = blockDim.x / group, gid = threadIdx.x / group, lane = threadIdx.x % group;
  int64_t chunk = (n_red + splits - 1) / splits, n_work = n_out * splits;
  for (int64_t w = (int64_t)blockIdx.x * gpb + gid; w < n_work; w += (int64_t)gridDim.x * gpb) {
    int64_t o = w % n_out, s = w / n_out, r0 = s * chunk, r1 = r0 + chunk < n_red ? r0 + chunk : n_red;
    int64_t base = lt_goff(o, g.nk, g.kd, g.ks);
    A a0 = op.ident(), a1 = a0, a2 = a0, a3 = a0;
    int64_t r = r0 + lane;
    const int64_t st = group;
#define LT_LD(rr) (PART ? lt_part_ld<A>(in, base + lt_goff(rr, g.nr, g.rd, g.rs)) \
                       : op.load(((const S *)in)[base + lt_goff(rr, g.nr, g.rd, g.rs)], rr))
    if (!PART && g.vec) { /* two vector loads in flight per thread */
      const S *p = (const S *)in + base;
      for (r = r0 + 4 * lane; r + 4 * st + 3 < r1; r += 8 * st) {
        lt_rv4<S> u = *(const lt_rv4<S> *)(p + r), v = *(const lt_rv4<S> *)(p + r + 4 * st);
        a0 = op.comb(a0, op.load(u.v[0], r)); a1 = op.comb(a1, op.load(u.v[1], r + 1));
        a2 = op.comb(a2, op.load(u.v[2], r + 2)); a3 = op.comb(a3, op.load(u.v[3], r + 3));
        int64_t q = r + 4 * st;
        a0 = op.comb(a0, op.load(v.v[0], q)); a1 = op.comb(a1, op.load(v.v[1], q + 1));
        a2 = op.comb(a2, op.load(v.v[2], q + 2)); a3 = op.comb(a3, op.load(v.v[3], q + 3));
      }
      for (; r + 3 < r1; r += 4 * st) {
        lt_rv4<S> u = *(const lt_rv4<S> *)(p + r);
        a0 = op.comb(a0, op.load(u.v[0], r)); a1 = op.comb(a1, op.load(u.v[1], r + 1));
        a2 = op.comb(a2, op.load(u.v[2], r + 2)); a3 = op.comb(a3, op.load(u.v[3], r + 3));
      }
      r = r1;
    }
    for (; r + 3 * st < r1; r += 4 * st) {
      A x0 = LT_LD(r), x1 = LT_LD(r + st), x2 = LT_LD(r + 2 * st), x3 = LT_LD(r + 3 * st);
      a0 = op.comb(a0, x0); a1 = op.comb(a1, x1); a2 = op.comb(a2, x2); a3 = op.comb(a3, x3);
    }
    for (; r < r1; r += st) a0 = op.comb(a0, LT_LD(r));
#undef LT_LD
    A acc = lt_group(op, op.comb(op.comb(a0, a1), op.comb(a2, a3)), group);
    if (lane == 0) {
      if (splits > 1) ((A *)part)[w] = acc;
      else op.store(out, o, acc);
    }
  }
}
template <bool B, class X, class Y> struct lt_pick_t { typedef X T; };
template <class X, class Y> struct lt_pick_t<false, X, Y> { typedef Y T; };
__shared__ __align__(16) unsigned char lt_cols_sm[8 * 32 * 32];
/* Column reductions (the innermost kept run contiguous): a block of 8 warps takes 32 vectors of V
 * adjacent outputs (16-byte loads: a warp reads 512 consecutive bytes of a row) over one part of
 * the reduced range, each warp every 8th row of it with 4 rows in flight; the warps' accumulators
 * then combine in shared memory in warp order. Blocks are (tile of 32 vectors, part); with several
 * parts each writes its accumulators to part[s * n_out + o], which a pass of lt_redcp_* (PART:
 * reading accumulators) reduces as a column reduction of its own. */
template <class Op, bool PART> __device__ void lt_reduce_cols(const Op &op, const void *in, void *out, void *part,
    int64_t n_out, int64_t n_red, int64_t splits, const lt_rgeom &g) {
  typedef typename Op::A A;
  typedef typename lt_pick_t<PART, A, typename Op::S>::T T;
  enum { V = 16 / sizeof(T) };
  struct alignas(16) vec { T v[V]; };
  int64_t nv = n_out / V, tiles = (nv + 31) / 32, tile = blockIdx.x % tiles, s = blockIdx.x / tiles;
  int lane = threadIdx.x & 31, wy = threadIdx.x >> 5;
  int64_t cv = tile * 32 + lane, chunk = (n_red + splits - 1) / splits, r0 = s * chunk;
  int64_t r1 = r0 + chunk < n_red ? r0 + chunk : n_red;
  A acc[V];
  for (int k = 0; k < V; k++) acc[k] = op.ident();
#define LT_CLD(x, rr) (PART ? (A)(x) : op.load(x, rr))
  if (cv < nv) {
    const T *p = (const T *)in + lt_goff(cv * V, g.nk, g.kd, g.ks);
    int64_t r = r0 + wy;
    for (; r + 24 < r1; r += 32) {
      vec u0 = *(const vec *)(p + lt_goff(r, g.nr, g.rd, g.rs)), u1 = *(const vec *)(p + lt_goff(r + 8, g.nr, g.rd, g.rs));
      vec u2 = *(const vec *)(p + lt_goff(r + 16, g.nr, g.rd, g.rs)), u3 = *(const vec *)(p + lt_goff(r + 24, g.nr, g.rd, g.rs));
      for (int k = 0; k < V; k++) {
        acc[k] = op.comb(acc[k], LT_CLD(u0.v[k], r));
        acc[k] = op.comb(acc[k], LT_CLD(u1.v[k], r + 8));
        acc[k] = op.comb(acc[k], LT_CLD(u2.v[k], r + 16));
        acc[k] = op.comb(acc[k], LT_CLD(u3.v[k], r + 24));
      }
    }
    for (; r < r1; r += 8) {
      vec u = *(const vec *)(p + lt_goff(r, g.nr, g.rd, g.rs));
      for (int k = 0; k < V; k++) acc[k] = op.comb(acc[k], LT_CLD(u.v[k], r));
    }
  }
#undef LT_CLD
  A *sm = (A *)lt_cols_sm; /* [warp][k][lane]: no bank conflicts */
  for (int k = 0; k < V; k++) sm[(wy * V + k) * 32 + lane] = acc[k];
  __syncthreads();
  if (wy || cv >= nv) return;
  for (int w = 1; w < 8; w++)
    for (int k = 0; k < V; k++) acc[k] = op.comb(acc[k], sm[(w * V + k) * 32 + lane]);
  for (int k = 0; k < V; k++) {
    if (splits > 1) ((A *)part)[s * n_out + cv * V + k] = acc[k];
    else op.store(out, cv * V + k, acc[k]);
  }
}
/* a module instantiates one op: its prefix defines LT_PICK_<op> to expand */
#define LT_PICK(NAME, ...) LT_PICK_##NAME(__VA_ARGS__)
#ifndef LT_PICK_sum
#define LT_PICK_sum(...)
#endif
#ifndef LT_PICK_prod
#define LT_PICK_prod(...)
#endif
#ifndef LT_PICK_max
#define LT_PICK_max(...)
#endif
#ifndef LT_PICK_min
#define LT_PICK_min(...)
#endif
#ifndef LT_PICK_band
#define LT_PICK_band(...)
#endif
#ifndef LT_PICK_bor
#define LT_PICK_bor(...)
#endif
#ifndef LT_PICK_bxor
#define LT_PICK_bxor(...)
#endif
#ifndef LT_PICK_land
#define LT_PICK_land(...)
#endif
#ifndef LT_PICK_lor
#define LT_PICK_lor(...)
#endif
#ifndef LT_PICK_lxor
#define LT_PICK_lxor(...)
#endif
#ifndef LT_PICK_arg
#define LT_PICK_arg(...)
#endif
#define LT_ROP(NAME, S_, A_, IDENT, LOAD, COMB, STORE)                                             \
  struct rop_##NAME {                                                                            \
    typedef S_ S;                                                                                \
    typedef A_ A;                                                                                \
    LT_M A ident() const { return IDENT; }                                                       \
    LT_M A load(S x, int64_t r) const { return LOAD; }                                           \
    LT_M A comb(A a, A b) const { return COMB; }                                                 \
    LT_M void store(void *o, int64_t i, A a) const { ((S *)o)[i] = STORE; }                      \
  };                                                                                             \
  extern "C" __global__ void __launch_bounds__(256) lt_red_##NAME(const void *in, void *out, void *part, \
      int64_t n_out, int64_t n_red, int64_t splits, int group, const __grid_constant__ lt_rgeom g) {                     \
    lt_reduce<rop_##NAME, false>(rop_##NAME(), in, out, part, n_out, n_red, splits, group, g);               \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(256) lt_redp_##NAME(const void *in, void *out, void *part, \
      int64_t n_out, int64_t n_red, int64_t splits, int group, const __grid_constant__ lt_rgeom g) {                     \
    lt_reduce<rop_##NAME, true>(rop_##NAME(), in, out, part, n_out, n_red, splits, group, g);                \
  } \
  extern "C" __global__ void __launch_bounds__(256) lt_redc_##NAME(const void *in, void *out, void *part,  \
      int64_t n_out, int64_t n_red, int64_t splits, const __grid_constant__ lt_rgeom g) {                 \
    lt_reduce_cols<rop_##NAME, false>(rop_##NAME(), in, out, part, n_out, n_red, splits, g);             \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(256) lt_redcp_##NAME(const void *in, void *out, void *part, \
      int64_t n_out, int64_t n_red, int64_t splits, const __grid_constant__ lt_rgeom g) {                 \
    lt_reduce_cols<rop_##NAME, true>(rop_##NAME(), in, out, part, n_out, n_red, splits, g);              \
  }
/* integers (T, its unsigned U, and the extremes): arithmetic wraps through U */
#define LT_RED_INT(T, U, MN, MX)                                                                 \
  LT_PICK(sum, LT_ROP(sum, T, T, (T)0, x, (T)(U)((U)a + (U)b), a))                                              \
  LT_PICK(prod, LT_ROP(prod, T, T, (T)1, x, (T)(U)((uint64_t)(U)a * (uint64_t)(U)b), a))                        \
  LT_PICK(max, LT_ROP(max, T, T, (T)(MN), x, (b > a ? b : a), a))                                              \
  LT_PICK(min, LT_ROP(min, T, T, (T)(MX), x, (b < a ? b : a), a))                                              \
  LT_PICK(band, LT_ROP(band, T, T, (T)~(U)0, x, (T)(a & b), a))                                                  \
  LT_PICK(bor, LT_ROP(bor, T, T, (T)0, x, (T)(a | b), a))                                                       \
  LT_PICK(bxor, LT_ROP(bxor, T, T, (T)0, x, (T)(a ^ b), a))
/* floats (T stored, A accumulated; halves through LD/ST): Max/Min let NaN through */
#define LT_RED_FLOAT(S, A, LD, ST)                                                               \
  LT_PICK(sum, LT_ROP(sum, S, A, (A)0, LD(x), a + b, ST(a)))                                                   \
  LT_PICK(prod, LT_ROP(prod, S, A, (A)1, LD(x), a * b, ST(a)))                                                  \
  LT_PICK(max, LT_ROP(max, S, A, -(A)LT_INFF, LD(x), ((b > a || b != b) ? b : a), ST(a)))                      \
  LT_PICK(min, LT_ROP(min, S, A, (A)LT_INFF, LD(x), ((b < a || b != b) ? b : a), ST(a)))
#define LT_SAME(x) (x)
#define LT_RED_COMPLEX(C)                                                                        \
  LT_PICK(sum, LT_ROP(sum, C, C, C(0, 0), x, C(a.re + b.re, a.im + b.im), a))                                  \
  LT_PICK(prod, LT_ROP(prod, C, C, C(1, 0), x, C(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re), a))
#define LT_RED_BOOL                                                                              \
  LT_PICK(land, LT_ROP(land, uint8_t, uint8_t, (uint8_t)1, x, (uint8_t)(a & (b != 0)), a))                      \
  LT_PICK(lor, LT_ROP(lor, uint8_t, uint8_t, (uint8_t)0, x, (uint8_t)(a | (b != 0)), a))                       \
  LT_PICK(lxor, LT_ROP(lxor, uint8_t, uint8_t, (uint8_t)0, x, (uint8_t)(a ^ (b != 0)), a))
/* ArgMinMax: (value, index) pairs; index -1 is the empty pair. The first NaN wins, then the
 * strictly better value, then the lower index: associative, so any tree gives the CPU's answer.
 * Indices are written wrapped into an integer output of ow bytes. */
#define LT_RED_ARG(S_, V, LD) LT_PICK(arg, LT_RED_ARG_(S_, V, LD))
#define LT_RED_ARG_(S_, V, LD)                                                                   \
  struct rop_arg {                                                                                   \
    typedef S_ S;                                                                                \
    struct A { V v; int64_t i; };                                                                \
    int is_min, ow;                                                                              \
    LT_M A ident() const { A a; a.v = (V)0; a.i = -1; return a; }                                \
    LT_M A load(S x, int64_t r) const { A a; a.v = LD(x); a.i = r; return a; }                   \
    LT_M A comb(A a, A b) const {                                                                \
      if (a.i < 0) return b;                                                                     \
      if (b.i < 0) return a;                                                                     \
      bool an = a.v != a.v, bn = b.v != b.v;                                                     \
      if (an || bn) return (an && bn) ? (a.i < b.i ? a : b) : (an ? a : b);                      \
      if (is_min ? b.v < a.v : b.v > a.v) return b;                                              \
      if (is_min ? a.v < b.v : a.v > b.v) return a;                                              \
      return a.i < b.i ? a : b;                                                                  \
    }                                                                                            \
    LT_M void store(void *o, int64_t k, A a) const {                                             \
      uint64_t v = a.i < 0 ? 0 : (uint64_t)a.i;                                                  \
      if (ow == 1) ((uint8_t *)o)[k] = (uint8_t)v;                                               \
      else if (ow == 2) ((uint16_t *)o)[k] = (uint16_t)v;                                        \
      else if (ow == 4) ((uint32_t *)o)[k] = (uint32_t)v;                                        \
      else ((uint64_t *)o)[k] = v;                                                               \
    }                                                                                            \
  };                                                                                             \
  extern "C" __global__ void __launch_bounds__(256) lt_red_arg(const void *in, void *out, void *part, \
      int64_t n_out, int64_t n_red, int64_t splits, int group, const __grid_constant__ lt_rgeom g, int is_min, int ow) {  \
    rop_arg op; op.is_min = is_min; op.ow = ow;                                                      \
    lt_reduce<rop_arg, false>(op, in, out, part, n_out, n_red, splits, group, g);                    \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(256) lt_redp_arg(const void *in, void *out, void *part, \
      int64_t n_out, int64_t n_red, int64_t splits, int group, const __grid_constant__ lt_rgeom g, int is_min, int ow) {  \
    rop_arg op; op.is_min = is_min; op.ow = ow;                                                      \
    lt_reduce<rop_arg, true>(op, in, out, part, n_out, n_red, splits, group, g);                     \
  }

struct lt_sgeom {
  int urank, orank, nvec, icode;
  int64_t vec_str;
  int64_t ud[LT_MAX_RANK], uk[LT_MAX_RANK], uistr[LT_MAX_RANK], od[LT_MAX_RANK], ostr[LT_MAX_RANK], ws[LT_MAX_RANK],
      map[LT_MAX_RANK];
};
template <typename S, class C> __device__ void lt_scatter(S *y, const S *u, const void *idx, int64_t n, const lt_sgeom &g) {
  LT_LOOP(i, n) {
    int64_t rem = i, off = 0, i0 = 0;
    for (int a = g.urank - 1; a >= 0; a--) {
      int64_t c = rem % g.ud[a];
      rem /= g.ud[a];
      if (g.uk[a] >= 0) off += c * g.ostr[g.uk[a]];
      else i0 += c * g.uistr[a];
    }
    bool fits = true;
    for (int k = 0; k < g.nvec; k++) {
      int64_t a = g.map[k], v = lt_index(idx, g.icode, i0 + k * g.vec_str);
      if (v < 0 || v > g.od[a] - g.ws[a]) fits = false;
      else off += v * g.ostr[a];
    }
    if (fits) C::apply(y + off, u[i]);
  }
}
/* an 8- or 16-bit lane updated through its aligned 32-bit word: f(old lane bits) -> new bits */
template <class F> LT_DEV void lt_cas_lane(void *p, int bytes, F f) {
  uint64_t ad = (uint64_t)p;
  unsigned *w = (unsigned *)(ad & ~(uint64_t)3);
  int sh = (int)(ad & 3) * 8;
  unsigned lane = bytes == 1 ? 0xffu : 0xffffu, old = *w, seen;
  do {
    seen = old;
    unsigned cur = (seen >> sh) & lane, nv = f(cur) & lane;
    if (nv == cur) return;
    old = atomicCAS(w, seen, (seen & ~(lane << sh)) | (nv << sh));
  } while (old != seen);
}
/* a float or double replaced by f(old) through compare-and-swap on its bits */
template <class F> LT_DEV void lt_cas_f32(float *p, F f) {
  unsigned *w = (unsigned *)p, old = *w, seen;
  do {
    seen = old;
    unsigned nv = __float_as_uint(f(__uint_as_float(seen)));
    if (nv == seen) return;
    old = atomicCAS(w, seen, nv);
  } while (old != seen);
}
template <class F> LT_DEV void lt_cas_f64(double *p, F f) {
  unsigned long long *w = (unsigned long long *)p, old = *w, seen;
  do {
    seen = old;
    unsigned long long nv = (unsigned long long)__double_as_longlong(f(__longlong_as_double((long long)seen)));
    if (nv == seen) return;
    old = atomicCAS(w, seen, nv);
  } while (old != seen);
}
#define LT_SM static __device__ __forceinline__
#define LT_FMAX(a, b) ((b > a || b != b) ? b : a)
#define LT_FMIN(a, b) ((b < a || b != b) ? b : a)
/* narrow integers: T, its unsigned U, lane bytes */
#define LT_SC_NARROW(T, U, B)                                                                    \
  struct lt_c_sum { LT_SM void apply(T *p, T v) {                                        \
    lt_cas_lane(p, B, [=](unsigned c) { return (unsigned)(U)((U)c + (U)v); }); } };              \
  struct lt_c_max { LT_SM void apply(T *p, T v) {                                        \
    lt_cas_lane(p, B, [=](unsigned c) { T a = (T)(U)c; return (unsigned)(U)(v > a ? v : a); }); } }; \
  struct lt_c_min { LT_SM void apply(T *p, T v) {                                        \
    lt_cas_lane(p, B, [=](unsigned c) { T a = (T)(U)c; return (unsigned)(U)(v < a ? v : a); }); } };
/* 32- and 64-bit integers: native atomics (AT: the type they take) */
#define LT_SC_WIDE(T, AT, UT)                                                                    \
  struct lt_c_sum { LT_SM void apply(T *p, T v) { atomicAdd((UT *)p, (UT)v); } };       \
  struct lt_c_max { LT_SM void apply(T *p, T v) { atomicMax((AT *)p, (AT)v); } };       \
  struct lt_c_min { LT_SM void apply(T *p, T v) { atomicMin((AT *)p, (AT)v); } };
#define LT_SC_FLOAT(T, CAS)                                                                      \
  struct lt_c_sum { LT_SM void apply(T *p, T v) { atomicAdd(p, v); } };                 \
  struct lt_c_max { LT_SM void apply(T *p, T v) { CAS(p, [=](T a) { return LT_FMAX(a, v); }); } }; \
  struct lt_c_min { LT_SM void apply(T *p, T v) { CAS(p, [=](T a) { return LT_FMIN(a, v); }); } };
/* halves: the lane as float, rounded back per update as on the CPU */
#define LT_SC_HALF(LD, ST)                                                                       \
  struct lt_c_sum { LT_SM void apply(uint16_t *p, uint16_t v) { float b = LD(v);        \
    lt_cas_lane(p, 2, [=](unsigned c) { return (unsigned)ST(LD((uint16_t)c) + b); }); } };        \
  struct lt_c_max { LT_SM void apply(uint16_t *p, uint16_t v) { float b = LD(v);        \
    lt_cas_lane(p, 2, [=](unsigned c) { float a = LD((uint16_t)c); return (b > a || b != b) ? (unsigned)v : c; }); } }; \
  struct lt_c_min { LT_SM void apply(uint16_t *p, uint16_t v) { float b = LD(v);        \
    lt_cas_lane(p, 2, [=](unsigned c) { float a = LD((uint16_t)c); return (b < a || b != b) ? (unsigned)v : c; }); } };
#define LT_SC_COMPLEX(C)                                                                         \
  struct lt_c_sum { LT_SM void apply(C *p, C v) { atomicAdd(&p->re, v.re); atomicAdd(&p->im, v.im); } };
#define LT_SC_KERNEL(S, OP)                                                                      \
  extern "C" __global__ void lt_scatter_##OP(S *y, const S *u, const void *idx, int64_t n, const __grid_constant__ lt_sgeom g) { \
    lt_scatter<S, lt_c_##OP>(y, u, idx, n, g);                                                     \
  }

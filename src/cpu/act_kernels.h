/* act_kernels.h -- src/graph/ew.def's activation rows (LATHE_ACT) on Float32 rows, for each ISA's
 * table (included by isa_kernels.h after vmath.h). A chunk of 256 elements whose every x lies in
 * |x| < 9 computes with vmath.h's exp, expm1, tanh and erf (every argument the rows pass them then
 * lies in those functions' fast ranges, and the loop vectorises); any other chunk (a NaN, an
 * infinity, a large value) computes with libm, as src/cpu/activation.c's portable rows do. The
 * derivatives from y call no math function. */
#define ACTK_CH 256

#define ACTK_ELEMS(E, SUF, FWD, VJP_X)                                          \
  static inline float actk_fwd_##E##_##SUF(float x) {                          \
    typedef float T;                                                           \
    return (T)(FWD);                                                           \
  }                                                                            \
  static inline float actk_vx_##E##_##SUF(float x, float g) {                  \
    typedef float T;                                                           \
    (void)x;                                                                   \
    return (T)(VJP_X);                                                         \
  }
#define LATHE_EW(OP, KIND, CLASS, RULE, EXPR)
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y)                             \
  ACTK_ELEMS(E, libm, FWD, VJP_X)                                              \
  static inline float actk_vy_##E(float y, float g) {                          \
    typedef float T;                                                           \
    (void)y, (void)g;                                                          \
    return (T)(VJP_Y);                                                         \
  }
#include "../graph/ew.def"
#undef LATHE_ACT
/* the same rows over vmath.h's functions */
#pragma push_macro("exp")
#pragma push_macro("expm1")
#pragma push_macro("tanh")
#pragma push_macro("erf")
#undef exp
#undef expm1
#undef tanh
#undef erf
#define exp(v) vm_exp_core(v)
#define expm1(v) vm_expm1_core(v)
#define tanh(v) vm_tanh_core(v)
#define erf(v) vm_erf_core(v)
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y) ACTK_ELEMS(E, vm, FWD, VJP_X)
#include "../graph/ew.def"
#undef LATHE_ACT
#undef exp
#undef expm1
#undef tanh
#undef erf
#pragma pop_macro("exp")
#pragma pop_macro("expm1")
#pragma pop_macro("tanh")
#pragma pop_macro("erf")

static inline int actk_fast(const float *x, int64_t n) {
  int ok = 1;
  for (int64_t i = 0; i < n; i++) ok &= fabsf(x[i]) < 9.0f; /* false for NaN */
  return ok;
}

/* rows; y (d) may be x */
#define LATHE_ACT(E, NUM, FORM, FWD, VJP_X, VJP_Y)                                                 \
  static void actk_fwd_##E(const float *x, float *y, int64_t n) {                                  \
    for (int64_t i0 = 0; i0 < n; i0 += ACTK_CH) {                                                  \
      int64_t m = n - i0 < ACTK_CH ? n - i0 : ACTK_CH;                                             \
      const float *xs = x + i0;                                                                    \
      float *ys = y + i0;                                                                          \
      if (actk_fast(xs, m))                                                                        \
        for (int64_t i = 0; i < m; i++) ys[i] = actk_fwd_##E##_vm(xs[i]);                          \
      else                                                                                         \
        for (int64_t i = 0; i < m; i++) ys[i] = actk_fwd_##E##_libm(xs[i]);                        \
    }                                                                                              \
  }                                                                                                \
  static void actk_vx_##E(const float *x, const float *g, float *d, int64_t n) {                   \
    for (int64_t i0 = 0; i0 < n; i0 += ACTK_CH) {                                                  \
      int64_t m = n - i0 < ACTK_CH ? n - i0 : ACTK_CH;                                             \
      const float *xs = x + i0, *gs = g + i0;                                                      \
      float *ds = d + i0;                                                                          \
      if (actk_fast(xs, m))                                                                        \
        for (int64_t i = 0; i < m; i++) ds[i] = actk_vx_##E##_vm(xs[i], gs[i]);                    \
      else                                                                                         \
        for (int64_t i = 0; i < m; i++) ds[i] = actk_vx_##E##_libm(xs[i], gs[i]);                  \
    }                                                                                              \
  }                                                                                                \
  static void actk_vy_rows_##E(const float *y, const float *g, float *d, int64_t n) {              \
    for (int64_t i = 0; i < n; i++) d[i] = actk_vy_##E(y[i], g[i]);                                \
  }
#include "../graph/ew.def"
#undef LATHE_ACT
#undef LATHE_EW

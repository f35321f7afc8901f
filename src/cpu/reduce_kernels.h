/* reduce_kernels.h -- the reduction kernels (Reduce{Sum,Product,Max,Min}, bitwise and logical
 * reductions, ArgMinMax), instantiated per (dtype, op) from lathe_dtypes.def and included once per
 * ISA by isa_kernels.h (kernels.h says why); reduce.c collapses the problem and drives them.
 * Integers wrap (arithmetic is done unsigned); Float16/BFloat16 accumulate in float; Max/Min
 * propagate NaN. Float sums keep 8 partial sums in every ISA, so results do not depend on it. */

/* Walks the outer groups of chunk [lo, hi) of group p; STMT sees ioff_/ooff_ (offsets of the
 * innermost run) and b_/e_ (its range). */
#define RED_WALK(j, lo, hi, STMT)                                                             \
  do {                                                                                        \
    int G_ = (j)->g, last_ = G_ - 1;                                                          \
    int64_t idx_[LATHE_MAX_RANK], st_[LATHE_MAX_RANK], en_[LATHE_MAX_RANK];                   \
    int64_t ioff_ = 0, ooff_ = 0;                                                             \
    for (int g_ = 0; g_ < G_; g_++) {                                                         \
      st_[g_] = g_ == (j)->p ? (lo) : 0;                                                      \
      en_[g_] = g_ == (j)->p ? (hi) : (j)->dims[g_];                                          \
      idx_[g_] = st_[g_];                                                                     \
      if (g_ < last_) ioff_ += st_[g_] * (j)->is[g_], ooff_ += st_[g_] * (j)->os[g_];         \
    }                                                                                         \
    const int64_t b_ = st_[last_], e_ = en_[last_];                                           \
    for (;;) {                                                                                \
      STMT;                                                                                   \
      int g_ = last_ - 1;                                                                     \
      for (; g_ >= 0; g_--) {                                                                 \
        idx_[g_]++, ioff_ += (j)->is[g_], ooff_ += (j)->os[g_];                               \
        if (idx_[g_] < en_[g_]) break;                                                        \
        ioff_ -= (en_[g_] - st_[g_]) * (j)->is[g_], ooff_ -= (en_[g_] - st_[g_]) * (j)->os[g_]; \
        idx_[g_] = st_[g_];                                                                   \
      }                                                                                       \
      if (g_ < 0) break;                                                                      \
    }                                                                                         \
  } while (0)

/* Horizontal folds of a contiguous run. LANES keeps 8 partial sums so float sums vectorise
 * (and round better); GEN is a plain fold. */
#define HRED_GEN(NAME, S, A, LOAD, IDENT, COMB)              \
  static A NAME##_hred(const S *x, int64_t n) {              \
    A r = IDENT;                                             \
    for (int64_t i = 0; i < n; i++) r = COMB(r, LOAD(x[i])); \
    return r;                                                \
  }
#define HRED_LANES(NAME, S, A, LOAD, IDENT, COMB)                                                  \
  static A NAME##_hred(const S *x, int64_t n) {                                                    \
    A s[8];                                                                                        \
    for (int k = 0; k < 8; k++) s[k] = IDENT;                                                      \
    int64_t i = 0;                                                                                 \
    for (; i + 8 <= n; i += 8)                                                                     \
      for (int k = 0; k < 8; k++) s[k] = COMB(s[k], x[i + k]);                                     \
    for (; i < n; i++) s[0] = COMB(s[0], x[i]);                                                    \
    return COMB(COMB(COMB(s[0], s[4]), COMB(s[1], s[5])), COMB(COMB(s[2], s[6]), COMB(s[3], s[7]))); \
  }

/* One (dtype, op) kernel: S storage type, A accumulator type, LOAD S->A, STORE A->S. The
 * element-wise combine of a kept run takes restrict pointers (accumulators never alias the
 * operand) and blocks of 8, which vectorise even under gcc's -O2 cost model. */
#define RED_KERNEL(NAME, S, A, LOAD, STORE, IDENT, COMB, HRED)                          \
  HRED(NAME, S, A, LOAD, IDENT, COMB)                                                   \
  static void NAME##_keep(A *restrict a, const S *restrict x, int64_t b, int64_t e) {   \
    int64_t t = b;                                                                      \
    for (; t + 8 <= e; t += 8)                                                          \
      for (int k = 0; k < 8; k++) a[t + k] = COMB(a[t + k], LOAD(x[t + k]));           \
    for (; t < e; t++) a[t] = COMB(a[t], LOAD(x[t]));                                   \
  }                                                                                     \
  static void NAME##_chunk(void *ctx, int64_t lo, int64_t hi) {                         \
    const lathe_red_job *j = ctx;                                                             \
    const S *in = j->in;                                                                \
    A *acc = j->acc;                                                                    \
    int64_t o0 = lo * j->os[j->p], o1 = hi * j->os[j->p];                               \
    for (int64_t o = o0; o < o1; o++) acc[o] = IDENT;                                   \
    if (j->red[j->g - 1]) {                                                             \
      RED_WALK(j, lo, hi, (acc[ooff_] = COMB(acc[ooff_], NAME##_hred(in + ioff_, e_ - b_)))); \
    } else {                                                                            \
      RED_WALK(j, lo, hi, NAME##_keep(acc + ooff_, in + ioff_, b_, e_));                 \
    }                                                                                   \
    if ((void *)acc != j->out) {                                                        \
      S *out = j->out;                                                                  \
      for (int64_t o = o0; o < o1; o++) out[o] = STORE(acc[o]);                         \
    }                                                                                   \
  }                                                                                     \
  static void NAME##_part(void *ctx, int64_t lo, int64_t hi) {                          \
    const lathe_red_job *j = ctx;                                                             \
    int64_t n = j->dims[0];                                                             \
    for (int64_t t = lo; t < hi; t++) {                                                 \
      int64_t b = n * t / j->parts, e = n * (t + 1) / j->parts;                         \
      ((A *)j->partials)[t] = NAME##_hred((const S *)j->in + b, e - b);                 \
    }                                                                                   \
  }                                                                                     \
  static void NAME##_finish(const lathe_red_job *j) {                                         \
    const A *pa = j->partials;                                                          \
    A r = IDENT;                                                                        \
    for (int64_t t = 0; t < j->parts; t++) r = COMB(r, pa[t]);                          \
    *(S *)j->out = STORE(r);                                                            \
  }                                                                                     \
  static void NAME##_fill(const lathe_red_job *j, int64_t n) {                                \
    S *out = j->out;                                                                    \
    for (int64_t o = 0; o < n; o++) out[o] = STORE(IDENT);                              \
  }                                                                                     \
  static const lathe_red_kernel NAME = {NAME##_chunk, NAME##_part, NAME##_finish, NAME##_fill, sizeof(A)};

/* ---- combine operations ---- */
#define SAME(x) (x)
#define SUM_(a, x) ((a) + (x))
#define PROD_(a, x) ((a) * (x))
/* NaN sticks; "|" rather than "||" keeps the select branch-free (vectorisable) */
#define MAX_F(a, x) (((int)((x) > (a)) | (int)((x) != (x))) ? (x) : (a))
#define MIN_F(a, x) (((int)((x) < (a)) | (int)((x) != (x))) ? (x) : (a))
#define MAX_I(a, x) ((x) > (a) ? (x) : (a))
#define MIN_I(a, x) ((x) < (a) ? (x) : (a))
#define AND_(a, x) ((a) & (x))
#define OR_(a, x) ((a) | (x))
#define XOR_(a, x) ((a) ^ (x))
#define LAND_(a, x) ((uint8_t)((a) & ((x) != 0)))
#define LOR_(a, x) ((uint8_t)((a) | ((x) != 0)))
#define LXOR_(a, x) ((uint8_t)((a) ^ ((x) != 0)))

/* ---- instantiation per dtype class: (ENUM, storage/compute type T, bits) ----
 * Integers compute through the unsigned type of their width, so overflow wraps without UB. */
#define RED_SINT(E, T, B)                                                                         \
  typedef uint##B##_t u_##E;                                                                      \
  static inline T sum_##E(T a, T x) { return (T)(u_##E)((u_##E)a + (u_##E)x); }                   \
  static inline T prod_##E(T a, T x) { return (T)(u_##E)((uint64_t)(u_##E)a * (uint64_t)(u_##E)x); } \
  RED_KERNEL(sum_k_##E, T, T, SAME, SAME, 0, sum_##E, HRED_GEN)                                   \
  RED_KERNEL(prod_k_##E, T, T, SAME, SAME, 1, prod_##E, HRED_GEN)                                 \
  RED_KERNEL(max_k_##E, T, T, SAME, SAME, (T)LATHE_SINT_MIN(B), MAX_I, HRED_GEN)                  \
  RED_KERNEL(min_k_##E, T, T, SAME, SAME, (T)LATHE_SINT_MAX(B), MIN_I, HRED_GEN)                  \
  RED_KERNEL(and_k_##E, T, T, SAME, SAME, (T) ~(T)0, AND_, HRED_GEN)                              \
  RED_KERNEL(or_k_##E, T, T, SAME, SAME, 0, OR_, HRED_GEN)                                        \
  RED_KERNEL(xor_k_##E, T, T, SAME, SAME, 0, XOR_, HRED_GEN)
#define RED_UINT(E, T, B)                                                                           \
  static inline T sum_##E(T a, T x) { return (T)((uint64_t)a + (uint64_t)x); }                      \
  static inline T prod_##E(T a, T x) { return (T)((uint64_t)a * (uint64_t)x); }                     \
  RED_KERNEL(sum_k_##E, T, T, SAME, SAME, 0, sum_##E, HRED_GEN)                                     \
  RED_KERNEL(prod_k_##E, T, T, SAME, SAME, 1, prod_##E, HRED_GEN)                                   \
  RED_KERNEL(max_k_##E, T, T, SAME, SAME, 0, MAX_I, HRED_GEN)                                       \
  RED_KERNEL(min_k_##E, T, T, SAME, SAME, (T) ~(T)0, MIN_I, HRED_GEN)                               \
  RED_KERNEL(and_k_##E, T, T, SAME, SAME, (T) ~(T)0, AND_, HRED_GEN)                                \
  RED_KERNEL(or_k_##E, T, T, SAME, SAME, 0, OR_, HRED_GEN)                                          \
  RED_KERNEL(xor_k_##E, T, T, SAME, SAME, 0, XOR_, HRED_GEN)
#define RED_FLOAT(E, T, B)                                                 \
  RED_KERNEL(sum_k_##E, T, T, SAME, SAME, 0, SUM_, HRED_LANES)              \
  RED_KERNEL(prod_k_##E, T, T, SAME, SAME, 1, PROD_, HRED_GEN)              \
  RED_KERNEL(max_k_##E, T, T, SAME, SAME, -(T)INFINITY, MAX_F, HRED_LANES)    \
  RED_KERNEL(min_k_##E, T, T, SAME, SAME, (T)INFINITY, MIN_F, HRED_LANES)
#define RED_HALF(E, T, B)                                                                   \
  RED_KERNEL(sum_k_##E, uint16_t, float, load_##E, store_##E, 0.f, SUM_, HRED_GEN)          \
  RED_KERNEL(prod_k_##E, uint16_t, float, load_##E, store_##E, 1.f, PROD_, HRED_GEN)        \
  RED_KERNEL(max_k_##E, uint16_t, float, load_##E, store_##E, -INFINITY, MAX_F, HRED_GEN)   \
  RED_KERNEL(min_k_##E, uint16_t, float, load_##E, store_##E, INFINITY, MIN_F, HRED_GEN)
/* GCC 12's vectoriser turns a complex product into FMAs (vfmaddsub) even under -ffp-contract=off;
 * an empty asm on two of the products keeps each product rounded, so every ISA gives the
 * baseline's bits (tests/ops: build/test_ops -b lathe:cpu,isa=baseline -e). */
#if defined(__GNUC__) && !defined(__clang__) && defined(LATHE_ISA_X86)
#define RED_ROUNDED(a, b) __asm__("" : "+x"(a), "+x"(b))
#else
#define RED_ROUNDED(a, b) ((void)0)
#endif
#define RED_CPART_64 float
#define RED_CPART_128 double
#define RED_COMPLEX(E, T, B)                                                              \
  static inline T csum_##E(T a, T x) { return (T){a.re + x.re, a.im + x.im}; }            \
  static inline T cprod_##E(T a, T x) {                                                   \
    RED_CPART_##B rr = a.re * x.re, ii = a.im * x.im, ri = a.re * x.im, ir = a.im * x.re;   \
    RED_ROUNDED(rr, ri);                                                                  \
    return (T){rr - ii, ri + ir};                                                         \
  }                                                                                       \
  RED_KERNEL(sum_k_##E, T, T, SAME, SAME, ((T){0, 0}), csum_##E, HRED_GEN)                                  \
  RED_KERNEL(prod_k_##E, T, T, SAME, SAME, ((T){1, 0}), cprod_##E, HRED_GEN)
#define RED_BOOL(E, T, B)                                                         \
  RED_KERNEL(land_k_##E, uint8_t, uint8_t, SAME, SAME, 1, LAND_, HRED_GEN)         \
  RED_KERNEL(lor_k_##E, uint8_t, uint8_t, SAME, SAME, 0, LOR_, HRED_GEN)           \
  RED_KERNEL(lxor_k_##E, uint8_t, uint8_t, SAME, SAME, 0, LXOR_, HRED_GEN)

static inline float load_FLOAT16(uint16_t h) { return lathe_f16_to_f32(h); }
static inline float load_BFLOAT16(uint16_t h) { return lathe_bf16_to_f32(h); }
static inline uint16_t store_FLOAT16(float f) { return lathe_f32_to_f16(f); }
static inline uint16_t store_BFLOAT16(float f) { return lathe_f32_to_bf16(f); }

/* Sub-byte integers (widened to 8 bits before kernels run) get no instantiation of their own. */
#define INST_BOOL_8 RED_BOOL
#define INST_SINT_8 RED_SINT
#define INST_SINT_16 RED_SINT
#define INST_SINT_32 RED_SINT
#define INST_SINT_64 RED_SINT
#define INST_SINT_4(E, T, B)
#define INST_SINT_2(E, T, B)
#define INST_SINT_1(E, T, B)
#define INST_UINT_8 RED_UINT
#define INST_UINT_16 RED_UINT
#define INST_UINT_32 RED_UINT
#define INST_UINT_64 RED_UINT
#define INST_UINT_4(E, T, B)
#define INST_UINT_2(E, T, B)
#define INST_UINT_1(E, T, B)
#define INST_FLOAT_32 RED_FLOAT
#define INST_FLOAT_64 RED_FLOAT
#define INST_HALF_16 RED_HALF
#define INST_COMPLEX_64 RED_COMPLEX
#define INST_COMPLEX_128 RED_COMPLEX
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) INST_##CLASS##_##bits(ENUM, compute_t, bits)
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

/* Table initialisers: REDK_ENTRIES for lathe_cpu_kernels.red (by dtype id, then column), REDK_ARG_ENTRIES
 * for .arg. */
#define K_SINT(E)                                                                                        \
  [LATHE_DTYPE_##E] = {[LATHE_RED_SUM] = &sum_k_##E, [LATHE_RED_PROD] = &prod_k_##E, [LATHE_RED_MAX] = &max_k_##E, [LATHE_RED_MIN] = &min_k_##E, \
                       [LATHE_RED_AND] = &and_k_##E, [LATHE_RED_OR] = &or_k_##E, [LATHE_RED_XOR] = &xor_k_##E},
#define K_UINT K_SINT
#define K_FLOAT(E) \
  [LATHE_DTYPE_##E] = {[LATHE_RED_SUM] = &sum_k_##E, [LATHE_RED_PROD] = &prod_k_##E, [LATHE_RED_MAX] = &max_k_##E, [LATHE_RED_MIN] = &min_k_##E},
#define K_HALF K_FLOAT
#define K_COMPLEX(E) [LATHE_DTYPE_##E] = {[LATHE_RED_SUM] = &sum_k_##E, [LATHE_RED_PROD] = &prod_k_##E},
#define K_BOOL(E) [LATHE_DTYPE_##E] = {[LATHE_RED_LAND] = &land_k_##E, [LATHE_RED_LOR] = &lor_k_##E, [LATHE_RED_LXOR] = &lxor_k_##E},
#define KT_BOOL_8 K_BOOL
#define KT_SINT_8 K_SINT
#define KT_SINT_16 K_SINT
#define KT_SINT_32 K_SINT
#define KT_SINT_64 K_SINT
#define KT_SINT_4(E)
#define KT_SINT_2(E)
#define KT_SINT_1(E)
#define KT_UINT_8 K_UINT
#define KT_UINT_16 K_UINT
#define KT_UINT_32 K_UINT
#define KT_UINT_64 K_UINT
#define KT_UINT_4(E)
#define KT_UINT_2(E)
#define KT_UINT_1(E)
#define KT_FLOAT_32 K_FLOAT
#define KT_FLOAT_64 K_FLOAT
#define KT_HALF_16 K_HALF
#define KT_COMPLEX_64 K_COMPLEX
#define KT_COMPLEX_128 K_COMPLEX
/* ---- ArgMinMax: per input dtype, index of the first extreme (NaN first of all) ---- */

/* Work item w is column tile w % tiles of row block w / tiles; each keeps the best value and
 * index of LATHE_ARG_TILE columns while walking the reduced axis. A candidate replaces the best when
 * strictly better or the first NaN; a NaN best is final. */
#define ARG_KERNEL(NAME, S, A, LOAD, ISNAN)                                                \
  static void NAME(void *ctx, int64_t lo, int64_t hi) {                                    \
    const lathe_arg_job *j = ctx;                                                                \
    const S *in = j->in;                                                                   \
    int64_t tiles = (j->post + LATHE_ARG_TILE - 1) / LATHE_ARG_TILE;                                   \
    for (int64_t w = lo; w < hi; w++) {                                                    \
      int64_t a = w / tiles, c0 = (w % tiles) * LATHE_ARG_TILE;                                  \
      int64_t nc = j->post - c0 < LATHE_ARG_TILE ? j->post - c0 : LATHE_ARG_TILE;                      \
      A best[LATHE_ARG_TILE];                                                                    \
      int64_t *bi = j->idx + a * j->post + c0;                                             \
      const S *row = in + a * j->len * j->post + c0;                                       \
      for (int64_t c = 0; c < nc; c++) bi[c] = 0;                                          \
      if (!j->len) continue;                                                               \
      for (int64_t c = 0; c < nc; c++) best[c] = LOAD(row[c]);                             \
      for (int64_t r = 1; r < j->len; r++) {                                               \
        const S *x = row + r * j->post;                                                    \
        for (int64_t c = 0; c < nc; c++) {                                                 \
          A v = LOAD(x[c]), b = best[c];                                                   \
          if (ISNAN(b)) continue;                                                          \
          if (ISNAN(v) || (j->is_min ? v < b : v > b)) best[c] = v, bi[c] = r;             \
        }                                                                                  \
      }                                                                                    \
    }                                                                                      \
  }
#define NAN_F(x) ((x) != (x))
#define NAN_I(x) 0
#define ARG_SINT(E, T, B) ARG_KERNEL(arg_##E, T, T, SAME, NAN_I)
#define ARG_FLOAT(E, T, B) ARG_KERNEL(arg_##E, T, T, SAME, NAN_F)
#define ARG_HALF(E, T, B) ARG_KERNEL(arg_##E, uint16_t, float, load_##E, NAN_F)
#define ARG_NONE(E, T, B)
#define AI_BOOL_8 ARG_SINT /* false < true */
#define AI_SINT_8 ARG_SINT
#define AI_SINT_16 ARG_SINT
#define AI_SINT_32 ARG_SINT
#define AI_SINT_64 ARG_SINT
#define AI_SINT_4 ARG_NONE
#define AI_SINT_2 ARG_NONE
#define AI_SINT_1 ARG_NONE
#define AI_UINT_8 ARG_SINT
#define AI_UINT_16 ARG_SINT
#define AI_UINT_32 ARG_SINT
#define AI_UINT_64 ARG_SINT
#define AI_UINT_4 ARG_NONE
#define AI_UINT_2 ARG_NONE
#define AI_UINT_1 ARG_NONE
#define AI_FLOAT_32 ARG_FLOAT
#define AI_FLOAT_64 ARG_FLOAT
#define AI_HALF_16 ARG_HALF
#define AI_COMPLEX_64 ARG_NONE
#define AI_COMPLEX_128 ARG_NONE
#define LATHE_DTYPE(ENUM, GoName, id, bits, compute_t, CLASS) AI_##CLASS##_##bits(ENUM, compute_t, bits)
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

#define AT_YES(E) [LATHE_DTYPE_##E] = arg_##E,
#define AT_NO(E)
#define AT_BOOL_8 AT_YES
#define AT_SINT_8 AT_YES
#define AT_SINT_16 AT_YES
#define AT_SINT_32 AT_YES
#define AT_SINT_64 AT_YES
#define AT_SINT_4 AT_NO
#define AT_SINT_2 AT_NO
#define AT_SINT_1 AT_NO
#define AT_UINT_8 AT_YES
#define AT_UINT_16 AT_YES
#define AT_UINT_32 AT_YES
#define AT_UINT_64 AT_YES
#define AT_UINT_4 AT_NO
#define AT_UINT_2 AT_NO
#define AT_UINT_1 AT_NO
#define AT_FLOAT_32 AT_YES
#define AT_FLOAT_64 AT_YES
#define AT_HALF_16 AT_YES
#define AT_COMPLEX_64 AT_NO
#define AT_COMPLEX_128 AT_NO

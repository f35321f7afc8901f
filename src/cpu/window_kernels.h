/* window_kernels.h -- the kernels of ReduceWindow and SelectAndScatterMax/Min, instantiated per
 * dtype from lathe_dtypes.def and included once per ISA by isa_kernels.h (kernels.h says why);
 * window.c builds the window lists and drives them.
 *
 * ReduceWindow accumulates floats in double, integers in 64 bits with wrapping (equal to wrapping
 * in the dtype); max/min let NaN through. Empty windows give the identity. SelectAndScatter
 * selects, per source element, the operand element (first on ties, a NaN replaces the current
 * choice); the scatter adds the source values into an accumulator of the operand's shape, in
 * source order, and stores it in the dtype. */

/* Loads the window lists of output index o into (L, cnt); false when the window is empty. */
static inline bool window_lists(const lathe_win_ctx *c, const int64_t *o, const int64_t **L, int64_t *cnt) {
  for (int d = 0; d < c->rank; d++) {
    cnt[d] = c->cnt[d][o[d]];
    L[d] = c->offs[d] + o[d] * c->win[d];
    if (!cnt[d]) return false;
  }
  return true;
}

/* Visits the window's operand offsets row-major, calling BODY with `off` set. */
#define FOR_WINDOW(c, L, cnt, BODY)                                              \
  do {                                                                           \
    int r_ = (c)->rank;                                                          \
    if (r_ == 0) {                                                               \
      int64_t off = 0;                                                           \
      BODY;                                                                      \
      break;                                                                     \
    }                                                                            \
    int64_t j_[LATHE_MAX_RANK] = {0};                                            \
    for (;;) {                                                                   \
      int64_t base_ = 0;                                                         \
      for (int d_ = 0; d_ < r_ - 1; d_++) base_ += L[d_][j_[d_]];                \
      for (int64_t q_ = 0; q_ < cnt[r_ - 1]; q_++) {                             \
        int64_t off = base_ + L[r_ - 1][q_];                                     \
        BODY;                                                                    \
      }                                                                          \
      int d_ = r_ - 2;                                                           \
      for (; d_ >= 0; d_--) {                                                    \
        if (++j_[d_] < cnt[d_]) break;                                           \
        j_[d_] = 0;                                                              \
      }                                                                          \
      if (d_ < 0) break;                                                         \
    }                                                                            \
  } while (0)

/* ---- per-dtype instances ---- */
#define IS_NAN_F(v) isnan(v)
#define IS_NAN_I(v) 0
#define ADD_F(A, a, b) ((a) + (b))
#define MUL_F(A, a, b) ((a) * (b))
#define ADD_I(A, a, b) ((A)((uint64_t)(a) + (uint64_t)(b))) /* wraps; no signed overflow */
#define MUL_I(A, a, b) ((A)((uint64_t)(a) * (uint64_t)(b)))

#define RW_FN(ENUM, NAME, A, INIT, UPDATE)                                        \
  static void rw_##NAME##_##ENUM(void *vc, int64_t b, int64_t e) {                   \
    const lathe_win_ctx *c = vc;                                                           \
    const void *x = c->x;                                                            \
    void *y = c->y;                                                                  \
    int64_t o[LATHE_MAX_RANK], cnt[LATHE_MAX_RANK];                                  \
    const int64_t *L[LATHE_MAX_RANK];                                                \
    lathe_unflatten(b, c->odims, c->rank, o);                                        \
    for (int64_t i = b; i < e; i++) {                                                \
      A acc = INIT;                                                                  \
      if (window_lists(c, o, L, cnt)) FOR_WINDOW(c, L, cnt, {                        \
          A v = (A)LATHE_LD(ENUM, x, off);                                                  \
          acc = UPDATE;                                                              \
        });                                                                          \
      LATHE_ST(ENUM, y, i, (LATHE_C(ENUM))acc);                                      \
      lathe_odometer(o, c->odims, c->rank);                                          \
    }                                                                                \
  }

#define SEL_FN(ENUM, NAME, A, BETTER, ISNAN)                                      \
  static void sel_##NAME##_##ENUM(void *vc, int64_t b, int64_t e) {                  \
    const lathe_win_ctx *c = vc;                                                           \
    const void *x = c->x;                                                            \
    int64_t o[LATHE_MAX_RANK], cnt[LATHE_MAX_RANK];                                  \
    const int64_t *L[LATHE_MAX_RANK];                                                \
    lathe_unflatten(b, c->odims, c->rank, o);                                        \
    for (int64_t i = b; i < e; i++) {                                                \
      int64_t best = -1;                                                             \
      A bv = 0;                                                                      \
      if (window_lists(c, o, L, cnt)) FOR_WINDOW(c, L, cnt, {                        \
          A v = (A)LATHE_LD(ENUM, x, off);                                                  \
          if (best < 0 || (v BETTER bv) || ISNAN(v)) {                             \
            best = off;                                                              \
            bv = v;                                                                  \
          }                                                                          \
        });                                                                          \
      c->sel[i] = best;                                                              \
      lathe_odometer(o, c->odims, c->rank);                                          \
    }                                                                                \
  }

/* K: F (float accumulation) or I (integer, wrapping). */
#define WIN_INST(ENUM, A, K, LOWEST, HIGHEST)                                                      \
  RW_FN(ENUM, sum, A, (A)0, ADD_##K(A, acc, v))                                                    \
  RW_FN(ENUM, prod, A, (A)1, MUL_##K(A, acc, v))                                                   \
  RW_FN(ENUM, max, A, LOWEST, ((v > acc || IS_NAN_##K(v)) && !IS_NAN_##K(acc) ? v : acc)) \
  RW_FN(ENUM, min, A, HIGHEST, ((v < acc || IS_NAN_##K(v)) && !IS_NAN_##K(acc) ? v : acc)) \
  SEL_FN(ENUM, max, A, >, IS_NAN_##K)                                                              \
  SEL_FN(ENUM, min, A, <, IS_NAN_##K)                                                              \
  static void scatter_##ENUM(const void *vs, const int64_t *sel, int64_t n_src, void *vacc, void *vy, \
                             int64_t n) {                                                             \
    A *acc = vacc;                                                                                    \
    for (int64_t i = 0; i < n_src; i++)                                                               \
      if (sel[i] >= 0) acc[sel[i]] = ADD_##K(A, acc[sel[i]], (A)LATHE_LD(ENUM, vs, i));                   \
    for (int64_t i = 0; i < n; i++) LATHE_ST(ENUM, vy, i, (LATHE_C(ENUM))acc[i]);                                         \
  }                                                                                                   \
  static const lathe_win_type win_##ENUM = {                                                        \
      .asize = sizeof(A),                                                                             \
      .rw = {rw_sum_##ENUM, rw_prod_##ENUM, rw_max_##ENUM, rw_min_##ENUM},                            \
      .select = {sel_max_##ENUM, sel_min_##ENUM},                                                     \
      .scatter = scatter_##ENUM};

/* Instances from the dtype table: integers and real floats (sub-byte integers arrive widened);
 * Bool for ReduceWindow Max (any) and Min (all) only. */
#define WIN_BOOL(ENUM, bits)                                                                     \
  RW_FN(ENUM, max, uint64_t, 0, (v > acc ? v : acc))                                             \
  RW_FN(ENUM, min, uint64_t, 1, (v < acc ? v : acc))                                             \
  static const lathe_win_type win_##ENUM = {.asize = sizeof(uint64_t), .rw = {NULL, NULL, rw_max_##ENUM, rw_min_##ENUM}};
#define WIN_COMPLEX(ENUM, bits)
#define WIN_FLOAT(ENUM, bits) WIN_INST(ENUM, double, F, -INFINITY, INFINITY)
#define WIN_HALF WIN_FLOAT
#define WIN_SINT(ENUM, bits) \
  WIN_INST(ENUM, int64_t, I, LATHE_SINT_MIN(bits), LATHE_SINT_MAX(bits))
#define WIN_UINT(ENUM, bits) WIN_INST(ENUM, uint64_t, I, (uint64_t)0, LATHE_UINT_MAX(bits))
#define LATHE_DTYPE(ENUM, GoName, id, bits, ct, CLASS) LATHE_DD_KEEP_##bits(WIN_##CLASS(ENUM, bits))
#include "lathe_dtypes.def"
#undef LATHE_DTYPE

/* Table initialiser: WINK_ENTRIES for lathe_cpu_kernels.win (by dtype id). */
#define WINK_NONE(ENUM)
#define WINK_YES(ENUM) [LATHE_DTYPE_##ENUM] = &win_##ENUM,
#define WINK_E_BOOL WINK_YES
#define WINK_E_FLOAT WINK_YES
#define WINK_E_HALF WINK_YES
#define WINK_E_SINT WINK_YES
#define WINK_E_UINT WINK_YES
#define WINK_E_COMPLEX WINK_NONE

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
#define WIN_INST(ENUM, A, K, LOWEST, HIGHEST, POOL)                                                      \
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
      .scatter = scatter_##ENUM POOL};

/* ---- pooling (lathe_win_ctx's fast path) ----
 * Rows r of [outer, out_h]; a window's positions are rows i * sh + di and columns ow * sw + dj of
 * the operand, with the channels contiguous: the inner loops run along the channels (vectorised).
 * Positions are visited row-major, as FOR_WINDOW visits them, so ties and NaNs pick what the
 * general kernels pick; max and min of values are exact in any type, so no accumulator is needed. */
enum { POOL_BLOCK = 256 }; /* channels per step of a selection */

/* The operand offset of each window position (row-major) from the window's first element (the
 * pooling path takes windows of at most LATHE_WIN_POOL_MAX positions). */
static void pool_offsets(const lathe_win_ctx *c, int64_t *o) {
  for (int64_t k = 0; k < c->kh * c->kw; k++) o[k] = (k / c->kw * c->in_w + k % c->kw) * c->ch;
}

#define POOL_PICK_LOOP(T, ISNAN, CMP)                                                               \
  for (int64_t q = 0; q < n; q++) {                                                                 \
    T v = xp[q];                                                                                    \
    int take = (v CMP bv[q]) | ISNAN(v);                                                            \
    bv[q] = take ? v : bv[q];                                                                       \
    best[q] = take ? k : best[q];                                                                   \
  }
#define POOL_INST(ENUM, T, ISNAN)                                                                     \
  static void pool_max_run_##ENUM(T *restrict a, const T *restrict x, int64_t n) {                 \
    for (int64_t q = 0; q < n; q++) {                                                               \
      T v = x[q], b = a[q];                                                                         \
      a[q] = (((v > b) | ISNAN(v)) & !ISNAN(b)) ? v : b;                                            \
    }                                                                                               \
  }                                                                                                 \
  static void pool_min_run_##ENUM(T *restrict a, const T *restrict x, int64_t n) {                 \
    for (int64_t q = 0; q < n; q++) {                                                               \
      T v = x[q], b = a[q];                                                                         \
      a[q] = (((v < b) | ISNAN(v)) & !ISNAN(b)) ? v : b;                                            \
    }                                                                                               \
  }                                                                                                 \
  static void pool_rw_##ENUM(const lathe_win_ctx *c, int64_t b, int64_t e, bool is_min) {           \
    const T *x = c->x;                                                                              \
    T *y = c->y;                                                                                    \
    int64_t C = c->ch;                                                                              \
    for (int64_t r = b; r < e; r++) {                                                               \
      int64_t o = r / c->out_h, i = r % c->out_h;                                                   \
      const T *xr = x + (o * c->in_h + i * c->sh) * c->in_w * C;                                    \
      for (int64_t ow = 0; ow < c->out_w; ow++) {                                                   \
        T *acc = y + (r * c->out_w + ow) * C;                                                       \
        const T *x0 = xr + ow * c->sw * C;                                                          \
        memcpy(acc, x0, sizeof(T) * (size_t)C);                                                     \
        for (int64_t di = 0; di < c->kh; di++)                                                      \
          for (int64_t dj = di == 0; dj < c->kw; dj++) {                                            \
            if (is_min) pool_min_run_##ENUM(acc, x0 + (di * c->in_w + dj) * C, C);                  \
            else pool_max_run_##ENUM(acc, x0 + (di * c->in_w + dj) * C, C);                         \
          }                                                                                         \
      }                                                                                             \
    }                                                                                               \
  }                                                                                                 \
  static void pool_rw_max_##ENUM(void *vc, int64_t b, int64_t e) { pool_rw_##ENUM(vc, b, e, false); } \
  static void pool_rw_min_##ENUM(void *vc, int64_t b, int64_t e) { pool_rw_##ENUM(vc, b, e, true); }  \
  /* the window position (row-major index) of n channels' selection: the first position, then a  \
   * later one when better, or a NaN (a NaN replaces the current choice) */                        \
  static void pool_pick_##ENUM(const lathe_win_ctx *c, const T *x0, int64_t n, bool is_min, int32_t *best) { \
    T bv[POOL_BLOCK];                                                                               \
    int64_t C = c->ch;                                                                              \
    for (int64_t q = 0; q < n; q++) bv[q] = x0[q], best[q] = 0;                                     \
    for (int64_t di = 0; di < c->kh; di++)                                                          \
      for (int64_t dj = di == 0; dj < c->kw; dj++) {                                                \
        const T *xp = x0 + (di * c->in_w + dj) * C;                                                 \
        int32_t k = (int32_t)(di * c->kw + dj);                                                     \
        if (is_min) /* two loops, so that each vectorises */                                        \
          POOL_PICK_LOOP(T, ISNAN, <)                                                               \
        else                                                                                        \
          POOL_PICK_LOOP(T, ISNAN, >)                                                               \
      }                                                                                             \
  }                                                                                                 \
  static void pool_select_##ENUM(const lathe_win_ctx *c, int64_t b, int64_t e, bool is_min) {       \
    const T *x = c->x;                                                                              \
    int64_t C = c->ch, offs[LATHE_WIN_POOL_MAX];                                                    \
    int32_t best[POOL_BLOCK];                                                                       \
    pool_offsets(c, offs);                                                                          \
    for (int64_t r = b; r < e; r++) {                                                               \
      int64_t o = r / c->out_h, i = r % c->out_h;                                                   \
      for (int64_t ow = 0; ow < c->out_w; ow++) {                                                   \
        int64_t base = ((o * c->in_h + i * c->sh) * c->in_w + ow * c->sw) * C;                      \
        int64_t *sel = c->sel + (r * c->out_w + ow) * C;                                            \
        for (int64_t q0 = 0; q0 < C; q0 += POOL_BLOCK) {                                            \
          int64_t n = C - q0 < POOL_BLOCK ? C - q0 : POOL_BLOCK;                                    \
          pool_pick_##ENUM(c, x + base + q0, n, is_min, best);                                      \
          for (int64_t q = 0; q < n; q++)                                                           \
            sel[q0 + q] = base + q0 + q + offs[best[q]];                                            \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
  }                                                                                                 \
  static void pool_select_max_##ENUM(void *vc, int64_t b, int64_t e) { pool_select_##ENUM(vc, b, e, false); } \
  static void pool_select_min_##ENUM(void *vc, int64_t b, int64_t e) { pool_select_##ENUM(vc, b, e, true); }  \
  /* windows that do not overlap: the operand rows of source rows [b, e) are zeroed (the last     \
   * source row of an outer index takes the rows below it too), then each source value, plus 0    \
   * as the general scatter adds it (-0 becomes +0), lands on its selected element */              \
  static void pool_disjoint_##ENUM(const lathe_win_ctx *c, int64_t b, int64_t e, bool is_min) {     \
    const T *x = c->x, *src = c->src;                                                               \
    T *y = c->y;                                                                                    \
    int64_t C = c->ch, offs[LATHE_WIN_POOL_MAX];                                                    \
    int32_t best[POOL_BLOCK];                                                                       \
    pool_offsets(c, offs);                                                                          \
    for (int64_t r = b; r < e; r++) {                                                               \
      int64_t o = r / c->out_h, i = r % c->out_h;                                                   \
      int64_t h0 = i * c->sh, h1 = i == c->out_h - 1 ? c->in_h : h0 + c->sh;                        \
      memset(y + (o * c->in_h + h0) * c->in_w * C, 0, sizeof(T) * (size_t)((h1 - h0) * c->in_w * C)); \
      for (int64_t ow = 0; ow < c->out_w; ow++) {                                                   \
        int64_t base = ((o * c->in_h + h0) * c->in_w + ow * c->sw) * C;                             \
        const T *s = src + (r * c->out_w + ow) * C;                                                 \
        for (int64_t q0 = 0; q0 < C; q0 += POOL_BLOCK) {                                            \
          int64_t n = C - q0 < POOL_BLOCK ? C - q0 : POOL_BLOCK;                                    \
          pool_pick_##ENUM(c, x + base + q0, n, is_min, best);                                      \
          for (int64_t q = 0; q < n; q++)                                                           \
            y[base + q0 + q + offs[best[q]]] = (T)(s[q0 + q] + (T)0);                               \
        }                                                                                           \
      }                                                                                             \
    }                                                                                               \
  }                                                                                                 \
  static void pool_disjoint_max_##ENUM(void *vc, int64_t b, int64_t e) { pool_disjoint_##ENUM(vc, b, e, false); } \
  static void pool_disjoint_min_##ENUM(void *vc, int64_t b, int64_t e) { pool_disjoint_##ENUM(vc, b, e, true); }

#define POOL_NAN_F(v) ((v) != (v))
#define POOL_NAN_I(v) 0
#define POOL_FIELDS(ENUM)                                                                \
  , .pool_rw = {pool_rw_max_##ENUM, pool_rw_min_##ENUM},                                  \
    .pool_select = {pool_select_max_##ENUM, pool_select_min_##ENUM},                      \
    .pool_disjoint = {pool_disjoint_max_##ENUM, pool_disjoint_min_##ENUM}

/* Instances from the dtype table: integers and real floats (sub-byte integers arrive widened);
 * Bool for ReduceWindow Max (any) and Min (all) only. */
#define WIN_BOOL(ENUM, bits)                                                                     \
  RW_FN(ENUM, max, uint64_t, 0, (v > acc ? v : acc))                                             \
  RW_FN(ENUM, min, uint64_t, 1, (v < acc ? v : acc))                                             \
  static const lathe_win_type win_##ENUM = {.asize = sizeof(uint64_t), .rw = {NULL, NULL, rw_max_##ENUM, rw_min_##ENUM}};
#define WIN_COMPLEX(ENUM, bits)
/* pooling for the dtypes whose storage is their value (not the halves) */
#define WIN_FLOAT(ENUM, bits) \
  POOL_INST(ENUM, LATHE_C(ENUM), POOL_NAN_F) WIN_INST(ENUM, double, F, -INFINITY, INFINITY, POOL_FIELDS(ENUM))
#define WIN_HALF(ENUM, bits) WIN_INST(ENUM, double, F, -INFINITY, INFINITY, )
#define WIN_SINT(ENUM, bits)            \
  POOL_INST(ENUM, LATHE_C(ENUM), POOL_NAN_I) \
  WIN_INST(ENUM, int64_t, I, LATHE_SINT_MIN(bits), LATHE_SINT_MAX(bits), POOL_FIELDS(ENUM))
#define WIN_UINT(ENUM, bits)            \
  POOL_INST(ENUM, LATHE_C(ENUM), POOL_NAN_I) \
  WIN_INST(ENUM, uint64_t, I, (uint64_t)0, LATHE_UINT_MAX(bits), POOL_FIELDS(ENUM))
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

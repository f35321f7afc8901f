/* elementwise.h -- the broadcasting driver shared by the elementwise kernel families (binary,
 * compare, select) and usable by any kernel that maps up to LATHE_EW_MAX_IN operands, each of
 * the output's rank (or scalars) with size-1 axes broadcasting, to one output; and the macros
 * that instantiate the families' row kernels from src/graph/ew.def.
 *
 * The driver collapses the iteration space (drops size-1 output axes, merges neighbouring
 * axes that broadcast alike) into rows along which every operand either advances by one
 * element (step 1) or stays put (step 0), and calls a row function per row, splitting large
 * work over the pool. Row functions therefore see plain contiguous loops the compiler
 * vectorises. */
#ifndef LATHE_CPU_ELEMENTWISE_H
#define LATHE_CPU_ELEMENTWISE_H

#include "dtype_dispatch.h"

#define LATHE_EW_MAX_IN 3

/* One row: n elements; in[k] points at operand k's first element, step[k] is 0 or 1. */
typedef void (*lathe_ew_row_fn)(void *ctx, const void *const *in, const int *step, void *out, int64_t n);

/* The shape of node n's operand k as the kernel receives it: the built shape with a sub-byte
 * dtype widened to 8 bits. Kernels read operand shapes from here; the original (narrow) dtype
 * stays available for ops whose result depends on the true bit width (BitCount, Clz, shifts). */
lathe_shape lathe_ew_in_shape(const lathe_node *n, int k);

/* Runs row over the output tensor out for node n's operands in[0..n_in) (same rank as out or
 * scalars). Element sizes come from the operands' dtypes (byte-sized only). When out aliases an
 * operand that broadcasts, the result is computed into a temporary first. ctx is passed
 * through to row (borrowed). */
lathe_status_t lathe_ew_run(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, int n_in,
                            lathe_tensor *out, lathe_ew_row_fn row, void *ctx);

/* Splits n contiguous elements over the pool in chunks of at least LATHE_EW_GRAIN elements;
 * fn(ctx, begin, end) as for lathe_parallel_for. */
#define LATHE_EW_GRAIN 32768
void lathe_ew_parallel(lathe_cpu_exec *ex, int64_t n, lathe_range_fn fn, void *ctx);

/* ---- row kernels instantiated from src/graph/ew.def ----
 *
 * A row kernel computes n elements into out: operand k starts at in[k] and advances by step[k]
 * (0 or 1) elements per element; bits is the operands' true width (sub-byte integers compute
 * widened). The families (unary.c, binary.c, compare.c, select.c) instantiate one per ew.def
 * row and dtype of its class, and index them by op and dtype (lathe_dd_index). The macros
 * below need dtype_dispatch.h and ../graph/ew_helpers.h (the lt_* helpers). */
typedef void (*lathe_ew_fn)(const void *const *in, const int *step, void *out, int64_t n, int bits);

/* ctx of lathe_ew_run for row kernels. */
typedef struct lathe_ew_fn_ctx {
  lathe_ew_fn fn;
  int bits;
} lathe_ew_fn_ctx;
void lathe_ew_fn_row(void *ctx, const void *const *in, const int *step, void *out, int64_t n);

/* The result dtype of a row of ew.def by its RULE. */
#define LATHE_EW_OUT_SAME(D) D
#define LATHE_EW_OUT_PICK(D) D
#define LATHE_EW_OUT_BOOL(D) BOOL
#define LATHE_EW_OUT_REAL(D) LATHE_REAL(D)
#define LATHE_EW_OUT_CPLX(D) LATHE_CPLX(D)
/* How a row reads and writes elements by its RULE: compute values (VAL), or storage bits for
 * the ops that only move values (RAW: Where and Identity keep every bit, NaN payloads too). */
#define LATHE_EW_MODE_SAME VAL
#define LATHE_EW_MODE_BOOL VAL
#define LATHE_EW_MODE_REAL VAL
#define LATHE_EW_MODE_CPLX VAL
#define LATHE_EW_MODE_PICK RAW
#define LATHE_EW_TY_VAL(D) LATHE_C(D)
#define LATHE_EW_TY_RAW(D) LATHE_S(D)
#define LATHE_EW_LD_VAL(D, p, i) LATHE_LD(D, p, i)
#define LATHE_EW_LD_RAW(D, p, i) (((const LATHE_S(D) *)(p))[i])
#define LATHE_EW_ST_VAL(D, p, i, v) LATHE_ST(D, p, i, v)
#define LATHE_EW_ST_RAW(D, p, i, v) (((LATHE_S(D) *)(p))[i] = (v))

/* The dialect's names (see ew.def) for operands of dtype D read as type TT, and a result of
 * type OTT; `bits` is the kernel's argument. */
#define LATHE_EW_NAMES(TT, D, OTT)                                                              \
  typedef TT T;                                                                                 \
  typedef lathe_ut_##D UT;                                                                      \
  typedef lathe_uw_##D UW;                                                                      \
  typedef lathe_rt_##D RT;                                                                      \
  typedef OTT OT;                                                                               \
  const int BITS = bits;                                                                        \
  (void)sizeof(T), (void)sizeof(UT), (void)sizeof(UW), (void)sizeof(RT), (void)sizeof(OT), (void)BITS

/* One operand (always dense). */
#define LATHE_EW_ROW1(NAME, M, D, OD, EXPR) LATHE_EW_ROW1_(NAME, M, D, OD, EXPR) /* expands M */
#define LATHE_EW_ROW1_(NAME, M, D, OD, EXPR)                                                      \
  static void NAME(const void *const *in, const int *step, void *o, int64_t n, int bits) {       \
    LATHE_EW_NAMES(LATHE_EW_TY_##M(D), D, LATHE_EW_TY_##M(OD));                                  \
    const void *a = in[0];                                                                       \
    (void)step;                                                                                  \
    for (int64_t i = 0; i < n; i++) {                                                            \
      T x = LATHE_EW_LD_##M(D, a, i);                                                            \
      (void)x;                                                                                   \
      LATHE_EW_ST_##M(OD, o, i, (OT)(EXPR));                                                     \
    }                                                                                            \
  }

/* Two operands: one loop per step pattern (s0, s1 are constants, so each loop is plain and
 * vectorises; an operand that stays put is read once). */
#define LATHE_EW_LOOP2(M, D, OD, s0, s1, EXPR)                                                   \
  {                                                                                              \
    T x0 = LATHE_EW_LD_##M(D, a, 0), y0 = LATHE_EW_LD_##M(D, b, 0);                              \
    for (int64_t i = 0; i < n; i++) {                                                            \
      T x = (s0) ? LATHE_EW_LD_##M(D, a, i) : x0, y = (s1) ? LATHE_EW_LD_##M(D, b, i) : y0;      \
      (void)x, (void)y;                                                                          \
      LATHE_EW_ST_##M(OD, o, i, (OT)(EXPR));                                                     \
    }                                                                                            \
  }
#define LATHE_EW_ROW2(NAME, M, D, OD, EXPR) LATHE_EW_ROW2_(NAME, M, D, OD, EXPR) /* expands M */
#define LATHE_EW_ROW2_(NAME, M, D, OD, EXPR)                                                      \
  static void NAME(const void *const *in, const int *step, void *o, int64_t n, int bits) {       \
    LATHE_EW_NAMES(LATHE_EW_TY_##M(D), D, LATHE_EW_TY_##M(OD));                                  \
    const void *a = in[0], *b = in[1];                                                           \
    switch (step[0] | step[1] << 1) {                                                            \
      case 3: LATHE_EW_LOOP2(M, D, OD, 1, 1, EXPR) break;                                        \
      case 1: LATHE_EW_LOOP2(M, D, OD, 1, 0, EXPR) break;                                        \
      case 2: LATHE_EW_LOOP2(M, D, OD, 0, 1, EXPR) break;                                        \
      default: LATHE_EW_LOOP2(M, D, OD, 0, 0, EXPR) break;                                       \
    }                                                                                            \
  }

/* Three operands of dtypes D0, D1, D2 (Where: Bool, D, D; Clamp: D, D, D). */
#define LATHE_EW_LOOP3(M, D0, D1, D2, OD, s0, s1, s2, EXPR)                                      \
  {                                                                                              \
    LATHE_EW_TY_##M(D0) x0 = LATHE_EW_LD_##M(D0, a, 0);                                          \
    LATHE_EW_TY_##M(D1) y0 = LATHE_EW_LD_##M(D1, b, 0);                                          \
    LATHE_EW_TY_##M(D2) z0 = LATHE_EW_LD_##M(D2, c, 0);                                          \
    for (int64_t i = 0; i < n; i++) {                                                            \
      LATHE_EW_TY_##M(D0) x = (s0) ? LATHE_EW_LD_##M(D0, a, i) : x0;                             \
      LATHE_EW_TY_##M(D1) y = (s1) ? LATHE_EW_LD_##M(D1, b, i) : y0;                             \
      LATHE_EW_TY_##M(D2) z = (s2) ? LATHE_EW_LD_##M(D2, c, i) : z0;                             \
      (void)x, (void)y, (void)z;                                                                 \
      LATHE_EW_ST_##M(OD, o, i, (OT)(EXPR));                                                     \
    }                                                                                            \
  }
#define LATHE_EW_ROW3(NAME, M, D, OD, D0, EXPR) LATHE_EW_ROW3_(NAME, M, D, OD, D0, EXPR) /* expands M */
#define LATHE_EW_ROW3_(NAME, M, D, OD, D0, EXPR)                                                  \
  static void NAME(const void *const *in, const int *step, void *o, int64_t n, int bits) {       \
    LATHE_EW_NAMES(LATHE_EW_TY_##M(D), D, LATHE_EW_TY_##M(OD));                                  \
    const void *a = in[0], *b = in[1], *c = in[2];                                               \
    switch (step[0] | step[1] << 1 | step[2] << 2) {                                             \
      case 7: LATHE_EW_LOOP3(M, D0, D, D, OD, 1, 1, 1, EXPR) break;                              \
      case 6: LATHE_EW_LOOP3(M, D0, D, D, OD, 0, 1, 1, EXPR) break;                              \
      case 5: LATHE_EW_LOOP3(M, D0, D, D, OD, 1, 0, 1, EXPR) break;                              \
      case 4: LATHE_EW_LOOP3(M, D0, D, D, OD, 0, 0, 1, EXPR) break;                              \
      case 3: LATHE_EW_LOOP3(M, D0, D, D, OD, 1, 1, 0, EXPR) break;                              \
      case 2: LATHE_EW_LOOP3(M, D0, D, D, OD, 0, 1, 0, EXPR) break;                              \
      case 1: LATHE_EW_LOOP3(M, D0, D, D, OD, 1, 0, 0, EXPR) break;                              \
      default: LATHE_EW_LOOP3(M, D0, D, D, OD, 0, 0, 0, EXPR) break;                             \
    }                                                                                            \
  }

/* ConvertDType, n dense elements from dtype D to dtype OD; obits is the target's true width. */
typedef void (*lathe_ew_convert_fn)(const void *in, void *out, int64_t n, int bits, int obits);
#define LATHE_EW_CONVERT_ROW(NAME, D, OD, EXPR)                                                  \
  static void NAME(const void *in, void *o, int64_t n, int bits, int obits) {                    \
    LATHE_EW_NAMES(LATHE_C(D), D, LATHE_C(OD));                                                  \
    const int OBITS = obits;                                                                     \
    (void)OBITS;                                                                                 \
    for (int64_t i = 0; i < n; i++) {                                                            \
      T x = LATHE_LD(D, in, i);                                                                  \
      LATHE_ST(OD, o, i, (OT)(EXPR));                                                            \
    }                                                                                            \
  }

/* ConvertDType's conversion between two byte-sized dtypes (NULL otherwise): what DotGeneral uses
 * to reach its accumulator and output dtypes too. */
lathe_ew_convert_fn lathe_cpu_convert_fn(lathe_dtype from, lathe_dtype to);

#endif

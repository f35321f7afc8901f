/* elementwise.h -- the broadcasting driver shared by the elementwise kernel families (binary,
 * compare, select) and usable by any kernel that maps up to LATHE_EW_MAX_IN operands, each of
 * the output's rank (or scalars) with size-1 axes broadcasting, to one output.
 *
 * The driver collapses the iteration space (drops size-1 output axes, merges neighbouring
 * axes that broadcast alike) into rows along which every operand either advances by one
 * element (step 1) or stays put (step 0), and calls a row function per row, splitting large
 * work over the pool. Row functions therefore see plain contiguous loops the compiler
 * vectorises. */
#ifndef LATHE_CPU_ELEMENTWISE_H
#define LATHE_CPU_ELEMENTWISE_H

#include "cpu.h"

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

/* Defines a binary row kernel
 *   static void NAME(const void *a, const void *b, void *o, int64_t n, int sa, int sb, int bits)
 * computing EXPR (in x = lhs, y = rhs, of compute type LATHE_C(D); `bits` is the true bit width
 * of the operands, for sub-byte integers computed widened) into dtype OD. One loop per
 * step pattern, so each is a plain loop the compiler vectorises. Needs dtype_dispatch.h. */
#define LATHE_EW_BINARY_ROW(NAME, D, OD, EXPR)                                              \
  static void NAME(const void *a, const void *b, void *o, int64_t n, int sa, int sb, int bits) { \
    (void)bits;                                                                             \
    if (sa && sb) {                                                                         \
      for (int64_t i = 0; i < n; i++) {                                                     \
        LATHE_C(D) x = LATHE_LD(D, a, i), y = LATHE_LD(D, b, i);                            \
        LATHE_ST(OD, o, i, EXPR);                                                           \
      }                                                                                     \
    } else if (sa) {                                                                        \
      LATHE_C(D) y = LATHE_LD(D, b, 0);                                                     \
      for (int64_t i = 0; i < n; i++) {                                                     \
        LATHE_C(D) x = LATHE_LD(D, a, i);                                                   \
        LATHE_ST(OD, o, i, EXPR);                                                           \
      }                                                                                     \
    } else if (sb) {                                                                        \
      LATHE_C(D) x = LATHE_LD(D, a, 0);                                                     \
      for (int64_t i = 0; i < n; i++) {                                                     \
        LATHE_C(D) y = LATHE_LD(D, b, i);                                                   \
        LATHE_ST(OD, o, i, EXPR);                                                           \
      }                                                                                     \
    } else {                                                                                \
      LATHE_C(D) x = LATHE_LD(D, a, 0), y = LATHE_LD(D, b, 0);                              \
      for (int64_t i = 0; i < n; i++) LATHE_ST(OD, o, i, EXPR);                             \
    }                                                                                       \
  }

/* The row callback for binary row kernels: ctx points at this. */
typedef void (*lathe_ew_binary_fn)(const void *a, const void *b, void *o, int64_t n, int sa, int sb, int bits);
typedef struct lathe_ew_binary_ctx {
  lathe_ew_binary_fn fn;
  int bits;
} lathe_ew_binary_ctx;
void lathe_ew_binary_row(void *ctx, const void *const *in, const int *step, void *out, int64_t n);

#endif

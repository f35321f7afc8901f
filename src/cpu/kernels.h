/* kernels.h -- the kernels that exist once per instruction set, and the runtime dispatch between
 * them (docs/CPU.md, "Instruction sets").
 *
 * The hot kernels -- elementwise rows instantiated from src/graph/ew.def, the vector math that
 * replaces libm for Float32, reductions, windows and the stores of fusion regions -- are compiled
 * once per ISA: each src/cpu/isa_<name>.c includes the kernel bodies (isa_kernels.h) under its
 * target attributes and exports one table, lathe_cpu_kernels_<name>. A backend picks its table
 * once, when it is created (cpuid, or the option isa=...), and kernels reach it through
 * lathe_cpu_exec_kernels(ex).
 *
 * Every table computes the same bits: the kernels are the same C, built without floating-point
 * contraction (-ffp-contract=off: no FMA unless an op says fma), and the vector math is written
 * as element functions of plain IEEE operations, so the compiler's vectors of 4, 8 or 16 lanes
 * round exactly as its scalar code does. Only NaN payloads may differ (which NaN operand an
 * instruction propagates), as ew_helpers.h allows. */
#ifndef LATHE_CPU_KERNELS_H
#define LATHE_CPU_KERNELS_H

#include "../graph/ew.h"
#include "elementwise.h"

typedef enum lathe_cpu_isa {
  LATHE_CPU_ISA_BASELINE = 0, /* what the build targets (x86-64-v2: SSE4.2), no dispatch */
  LATHE_CPU_ISA_AVX2,         /* AVX2 + FMA + F16C + BMI1/2 (x86-64-v3) */
  LATHE_CPU_ISA_AVX512,       /* AVX-512 F, BW, CD, DQ, VL (x86-64-v4) */
  LATHE_CPU_ISA_COUNT
} lathe_cpu_isa;

/* ---- reductions (reduce.c drives them) ---- */
typedef struct lathe_red_job {
  int g; /* number of groups */
  int64_t dims[LATHE_MAX_RANK];
  int64_t is[LATHE_MAX_RANK]; /* input strides (elements) */
  int64_t os[LATHE_MAX_RANK]; /* output strides; 0 for reduced groups */
  bool red[LATHE_MAX_RANK];
  int p; /* the first kept group; -1 when the output is a scalar */
  const void *in;
  void *out;
  void *acc;      /* accumulators: out itself, or a float buffer for halves */
  void *partials; /* full reductions: one accumulator per part */
  int64_t parts;
} lathe_red_job;

typedef struct lathe_red_kernel {
  lathe_range_fn chunk, part; /* ctx: a lathe_red_job */
  void (*finish)(const lathe_red_job *j);
  void (*fill)(const lathe_red_job *j, int64_t n);
  size_t acc_size;
} lathe_red_kernel;

/* ArgMinMax: the operand viewed as [pre, len, post], the result as [pre, post]; work item w is
 * column tile w % tiles of row block w / tiles, LATHE_ARG_TILE columns wide. */
typedef struct lathe_arg_job {
  int64_t pre, len, post;
  const void *in;
  int64_t *idx; /* pre*post indices */
  bool is_min;
} lathe_arg_job;
enum { LATHE_ARG_TILE = 256 };

enum { LATHE_RED_SUM, LATHE_RED_PROD, LATHE_RED_MAX, LATHE_RED_MIN, LATHE_RED_AND, LATHE_RED_OR, LATHE_RED_XOR,
       LATHE_RED_LAND, LATHE_RED_LOR, LATHE_RED_LXOR, LATHE_RED_COLUMNS };

/* ---- windows (window.c drives them) ---- */
enum { LATHE_WIN_POOL_MAX = 64 };
typedef struct lathe_win_ctx {
  int rank;
  int64_t odims[LATHE_MAX_RANK]; /* ReduceWindow output dims, or SelectAndScatter source dims */
  int64_t win[LATHE_MAX_RANK];
  const int64_t *cnt[LATHE_MAX_RANK];  /* [axis][out index]: valid positions */
  const int64_t *offs[LATHE_MAX_RANK]; /* [axis][out index * win + j]: operand offsets */
  const void *x;
  void *y;
  int64_t *sel; /* SelectAndScatter: chosen operand offset per source element, -1 if none */
  /* pooling (no padding or dilation; the window spans at most two neighbouring axes h, w): the
   * operand as [outer, in_h, in_w, ch], the result or source as [outer, out_h, out_w, ch] */
  int64_t outer, in_h, in_w, out_h, out_w, ch, kh, kw, sh, sw; /* kh * kw <= LATHE_WIN_POOL_MAX */
  const void *src; /* SelectAndScatter's source */
} lathe_win_ctx;

typedef struct lathe_win_type {
  size_t asize;             /* bytes of the accumulator type */
  lathe_range_fn rw[4];     /* ReduceWindow: sum, product, max, min (ctx: a lathe_win_ctx) */
  lathe_range_fn select[2]; /* SelectAndScatter: max, min */
  /* acc (asize * n_operand bytes, zeroed) += source at sel; then y = acc in the dtype */
  void (*scatter)(const void *src, const int64_t *sel, int64_t n_src, void *acc, void *y, int64_t n_operand);
  /* pooling (lathe_win_ctx's fast path), over ranges of rows [outer, out_h] (NULL when absent):
   * ReduceWindow max / min; SelectAndScatter max / min's selection into sel; and, for windows
   * that do not overlap, SelectAndScatter max / min whole: the rows of the result that the
   * range's windows cover are zeroed and each source value lands on its selected element */
  lathe_range_fn pool_rw[2], pool_select[2], pool_disjoint[2];
} lathe_win_type;

/* ---- the table of one ISA ---- */
typedef struct lathe_cpu_kernels {
  lathe_cpu_isa isa;
  /* elementwise rows by op and dtype index (lathe_dd_index): UNARY, BINARY and COMPARE ops by
   * their operand's dtype, SELECT ops by their result's */
  lathe_ew_fn ew[LATHE_OP_COUNT][LATHE_DD_COUNT];
  lathe_ew_convert_fn cv[LATHE_DD_COUNT][LATHE_DD_COUNT]; /* ConvertDType [from][to] */
  const lathe_red_kernel *red[LATHE_DTYPE_LIMIT][LATHE_RED_COLUMNS];
  lathe_range_fn arg[LATHE_DTYPE_LIMIT]; /* ArgMinMax, ctx: a lathe_arg_job */
  const lathe_win_type *win[LATHE_DTYPE_LIMIT];
  /* copies n bytes to dst with stores that bypass the caches where the ISA has them (the
   * full-size results of large fusion regions); dst and src 64-byte aligned, n a multiple of 64 */
  void (*stream_copy)(void *dst, const void *src, size_t n);
  void (*stream_fence)(void);
  /* Float32 rows of ew.def's activations by number (act_kernels.h): y = f(x), d = f'(x) g,
   * d = f'(y) g (the rows of FORM Y); outputs may be their first operand */
  void (*act_fwd[LATHE_ACT_COUNT])(const float *x, float *y, int64_t n);
  void (*act_vx[LATHE_ACT_COUNT])(const float *x, const float *g, float *d, int64_t n);
  void (*act_vy[LATHE_ACT_COUNT])(const float *y, const float *g, float *d, int64_t n);
} lathe_cpu_kernels;

/* The tables this build has (NULL for ISAs it does not have on this architecture). */
const lathe_cpu_kernels *lathe_cpu_kernels_of(lathe_cpu_isa isa);
/* The best ISA this CPU and OS support among those built. */
lathe_cpu_isa lathe_cpu_isa_detect(void);
const char *lathe_cpu_isa_name(lathe_cpu_isa isa);
/* isa=NAME (baseline, avx2, avx512, auto) for a backend; "auto" and NULL give the detected one.
 * Errors: INVALID_ARGUMENT for an unknown name, FAILED_PRECONDITION for an ISA this CPU (or this
 * build) lacks. */
lathe_status_t lathe_cpu_isa_parse(const char *name, lathe_cpu_isa *out);

/* The table of the running execution (the baseline's when ex is NULL). */
const lathe_cpu_kernels *lathe_cpu_exec_kernels(lathe_cpu_exec *ex);

/* Lookups in a table (NULL when the op is not defined for the dtype). */
static inline lathe_ew_fn lathe_cpu_ew_fn(const lathe_cpu_kernels *k, lathe_op op, lathe_dtype dt) {
  int d = lathe_dd_index(dt);
  if ((int)op < 0 || op >= LATHE_OP_COUNT || d < 0) return NULL;
  return k->ew[op][d];
}

/* ConvertDType's row from -> to in table k (NULL when either is not byte-sized). */
lathe_ew_convert_fn lathe_cpu_convert_fn_of(const lathe_cpu_kernels *k, lathe_dtype from, lathe_dtype to);

#endif

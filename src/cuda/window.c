/* window.c -- ReduceWindow and SelectAndScatterMax/Min on the GPU, with lathe:cpu's semantics
 * (src/cpu/window.c): a window visits the operand positions that fall on real elements --
 * padding and input-dilation holes are skipped, so padding contributes the identity -- in
 * row-major window order; floats accumulate in double and integers in 64 bits (wrapping), Max/Min
 * let NaN through, an empty window gives the identity (that of the node's own dtype, which for
 * sub-byte integers is narrower than the 8 bits they compute in).
 *
 * ReduceWindow: one thread per output element walks its window, so results are those of the CPU
 * (same order, same accumulator). SelectAndScatter: one thread per source element selects its
 * window's element as the CPU does (first on ties, a NaN replaces the current choice) and adds the
 * source value into an accumulator of the operand's shape with an atomic add (double for floats:
 * the order of additions, hence the rounding, may differ from the CPU's; 64-bit integers: exact),
 * then a second kernel stores the accumulator in the dtype. One module per dtype. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>

#include "cuda.h"
#include "kernels/zkernels.h"

static const char win_lib[] = LT_CUH_WINDOW;

/* Fast paths, same results: windows whose offsets fit in 32 bits walk with 32-bit index
 * arithmetic (64-bit division is a long instruction sequence); SelectAndScatter whose windows
 * cannot overlap (each axis's window extent within its stride) writes each selected element once
 * into the zeroed output, 0 + v rounded as the accumulator would, instead of atomics into 8-byte
 * accumulators and a second pass. */
static const char win_fast[] = LT_CUH_WINDOW_FAST;

/* The instantiation of dt: its types, and the accumulator atomics work on. */
static void inst_of(lathe_dtype dt, char *buf, size_t cap) {
  static const char *const sint[] = {"int8_t", "int16_t", "int32_t", "int64_t"}, *const uint[] = {"uint8_t", "uint16_t", "uint32_t", "uint64_t"};
  int bits = lathe_dtype_bits(dt), k = bits == 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : 3;
  buf[0] = 0;
  switch (lathe_dtype_class_of(dt)) {
    case LATHE_CLASS_SINT:
    case LATHE_CLASS_UINT: {
      bool s = lathe_dtype_class_of(dt) == LATHE_CLASS_SINT;
      /* integers wrap in 64 bits; the atomic accumulator is unsigned (the same bits) */
      snprintf(buf, cap,
               "#define LT_ACC unsigned long long\n#define LT_ADD lt_sum\n#define LT_MUL lt_prod\n"
               "LT_WIN_ALL(%s, %s, LT_TO_INT, (%s))\n",
               s ? sint[k] : uint[k], s ? "int64_t" : "uint64_t", s ? sint[k] : uint[k]);
      break;
    }
    case LATHE_CLASS_BOOL: /* ReduceWindow Max/Min only (or / and of 0/1 bytes) */
      snprintf(buf, cap,
               "#define LT_ACC unsigned long long\n#define LT_ADD lt_sum\n#define LT_MUL lt_prod\n"
               "LT_WIN_ALL(uint8_t, uint64_t, LT_TO_INT, (uint8_t))\n");
      break;
    case LATHE_CLASS_FLOAT:
      snprintf(buf, cap,
               "#define LT_ACC double\n#define LT_ADD LT_FADD\n#define LT_MUL LT_FMUL\n"
               "LT_DEV double lt_ld(%s v) { return (double)v; }\nLT_WIN_ALL(%s, double, lt_ld, (%s))\n",
               bits == 32 ? "float" : "double", bits == 32 ? "float" : "double", bits == 32 ? "float" : "double");
      break;
    case LATHE_CLASS_HALF: {
      const char *h = dt == LATHE_DTYPE_FLOAT16 ? "f16" : "bf16";
      snprintf(buf, cap,
               "#define LT_ACC double\n#define LT_ADD LT_FADD\n#define LT_MUL LT_FMUL\n"
               "LT_DEV double lt_ld(uint16_t v) { return (double)lt_%s_to_f32(v); }\n"
               "LT_DEV uint16_t lt_st(double v) { return lt_f32_to_%s((float)v); }\n"
               "LT_WIN_ALL(uint16_t, double, lt_ld, lt_st)\n",
               h, h);
      break;
    }
    default:
      break;
  }
}

static char *sources[LATHE_DTYPE_LIMIT];
static pthread_once_t sources_once = PTHREAD_ONCE_INIT;

static void make_sources(void) {
  for (int d = 1; d < LATHE_DTYPE_LIMIT; d++) {
    lathe_dtype dt = (lathe_dtype)d;
    if (!lathe_dtype_is_valid(dt) || lathe_dtype_is_packed(dt)) continue;
    char line[512];
    inst_of(dt, line, sizeof line);
    if (!line[0]) continue;
    size_t n = sizeof win_lib + sizeof win_fast + strlen(line) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s%s%s", win_lib, win_fast, line);
    sources[d] = s;
  }
}

static const char *source_of(lathe_dtype dt) {
  pthread_once(&sources_once, make_sources);
  return (int)dt > 0 && dt < LATHE_DTYPE_LIMIT ? sources[dt] : NULL;
}

void lathe_cuda_sources_window(lathe_cuda_source_fn fn, void *ctx) {
  for (int d = 1; d < LATHE_DTYPE_LIMIT; d++) {
    const char *s = source_of((lathe_dtype)d);
    char label[64];
    snprintf(label, sizeof label, "window %s", lathe_dtype_name((lathe_dtype)d));
    if (s) fn(ctx, label, s);
  }
}

void lathe_cuda_texts_window(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  (void)d;
  const char *s = n->n_operands ? source_of(n->in[0]->shape.dtype) : NULL;
  if (s) fn(ctx, s);
}

bool lathe_cuda_supports_window(lathe_op op, lathe_dtype dtype) {
  if (dtype == LATHE_DTYPE_BOOL) return op == LATHE_OP_REDUCE_WINDOW && source_of(dtype) != NULL; /* as lathe:cpu */
  return (op == LATHE_OP_REDUCE_WINDOW || op == LATHE_OP_SELECT_AND_SCATTER_MAX || op == LATHE_OP_SELECT_AND_SCATTER_MIN) &&
         source_of(dtype) != NULL;
}

/* ---- host side ---- */
typedef struct wgeom_h { /* lt_wgeom */
  int rank;
  int64_t od[16], xd[16], xs[16], wd[16], st[16], lo[16], idil[16], wdil[16];
} wgeom_h;

static void geom_of(const lathe_node *n, const lathe_shape *xs, const int64_t *odims, wgeom_h *g) {
  memset(g, 0, sizeof *g);
  const int64_t *wd = lathe_attr_window_dims(n).v, *st = lathe_attr_window_strides(n).v;
  const int64_t *idil = lathe_attr_window_input_dilations(n).v, *wdil = lathe_attr_window_window_dilations(n).v;
  const int64_t *pads = lathe_attr_window_paddings(n).v;
  int64_t xst[LATHE_MAX_RANK];
  lathe_shape_strides(xs, xst);
  g->rank = xs->rank;
  for (int a = 0; a < xs->rank; a++) {
    g->od[a] = odims[a];
    g->xd[a] = xs->dims[a];
    g->xs[a] = xst[a];
    g->wd[a] = wd[a];
    g->st[a] = st[a];
    g->lo[a] = pads[2 * a];
    g->idil[a] = idil[a];
    g->wdil[a] = wdil[a];
  }
}

/* Whether every index and offset of windows over an operand of nx elements fits in 32 bits. */
static bool fits32(const wgeom_h *g, int64_t nx, int64_t n) {
  const int64_t lim = (int64_t)1 << 30;
  if (nx >= lim || n >= lim) return false;
  for (int a = 0; a < g->rank; a++)
    if (g->od[a] * g->st[a] + g->lo[a] + g->wd[a] * g->wdil[a] >= lim || g->xd[a] >= lim) return false;
  return true;
}

/* Whether no two windows share an operand element (each axis's window extent within its stride). */
static bool disjoint(const wgeom_h *g) {
  for (int a = 0; a < g->rank; a++)
    if ((g->wd[a] - 1) * g->wdil[a] + 1 > g->st[a]) return false;
  return true;
}

/* The accumulator's value of v, as the kernel argument of dtype dt's instantiation. */
typedef union {
  double f;
  int64_t i;
  uint64_t u;
} acc_arg;

static acc_arg ident_of(lathe_op red, lathe_dtype node_dt) {
  acc_arg v;
  v.u = 0;
  bool fl = lathe_dtype_is_float(node_dt), sint = lathe_dtype_class_of(node_dt) == LATHE_CLASS_SINT;
  int bits = lathe_dtype_bits(node_dt); /* the node's own dtype: sub-byte identities are narrow */
  if (node_dt == LATHE_DTYPE_BOOL) { /* Max: false, Min: true (the builder allows no other) */
    v.u = red == LATHE_OP_REDUCE_MIN;
    return v;
  }
  switch (red) {
    case LATHE_OP_REDUCE_PRODUCT:
      if (fl) v.f = 1;
      else v.i = 1;
      break;
    case LATHE_OP_REDUCE_MAX:
      if (fl) v.f = -INFINITY;
      else v.i = sint ? LATHE_SINT_MIN(bits) : 0;
      break;
    case LATHE_OP_REDUCE_MIN:
      if (fl) v.f = INFINITY;
      else if (sint) v.i = LATHE_SINT_MAX(bits);
      else v.u = LATHE_UINT_MAX(bits);
      break;
    default:
      if (fl) v.f = 0;
      break;
  }
  return v;
}

lathe_status_t lathe_cuda_run_window(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  const lathe_shape *xs = &in[0]->shape;
  const char *src = source_of(xs->dtype);
  if (!src || !lathe_cuda_supports_window(n->op, xs->dtype))
    return LATHE_UNIMPL("%s: not implemented on lathe:cuda for %s", lathe_op_name(n->op), lathe_dtype_name(xs->dtype));
  cuda_dev *d = lathe_cuda_exec_dev(ex);
  wgeom_h g;
  lcuFunction f;
  unsigned b, t;
  if (n->op == LATHE_OP_REDUCE_WINDOW) {
    int64_t ny = lathe_shape_size(&out[0]->shape);
    if (!ny) return NULL;
    geom_of(n, xs, out[0]->shape.dims, &g);
    lathe_op red = lathe_attr_window_reduction(n);
    bool small = fits32(&g, lathe_shape_size(xs), ny);
    const char *kind = red == LATHE_OP_REDUCE_SUM ? "sum" : red == LATHE_OP_REDUCE_PRODUCT ? "prod"
                     : red == LATHE_OP_REDUCE_MAX ? "max" : "min";
    char name[24];
    snprintf(name, sizeof name, "lt_rw%s_%s", small ? "32" : "", kind);
    LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(d, src, name, &f));
    acc_arg id = ident_of(red, n->shape.dtype);
    lcuDeviceptr px = lathe_cuda_ptr(in[0]), py = lathe_cuda_ptr(out[0]);
    int ny32 = (int)ny;
    void *args[] = {&px, &py, small ? (void *)&ny32 : (void *)&ny, &id, &g};
    lathe_cuda_grid(ny, &b, &t);
    return lathe_cuda_launch(ex, f, b, t, 0, args);
  }
  /* SelectAndScatter: zeroed 8-byte accumulators, scatter-add, then the store */
  const lathe_shape *ss = &in[1]->shape;
  int64_t nx = lathe_shape_size(xs), ns = lathe_shape_size(ss);
  if (!nx) return NULL;
  const lcu_api *api = lathe_cuda_exec_api(ex);
  geom_of(n, xs, ss->dims, &g);
  if (disjoint(&g) && fits32(&g, nx, ns)) { /* each element selected at most once: written in place */
    LATHE_CU_TRY(api, cuMemsetD8Async(lathe_cuda_ptr(out[0]), 0, out[0]->nbytes, lathe_cuda_exec_stream(ex)),
                 "lathe:cuda: SelectAndScatter");
    if (!ns) return NULL;
    LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(d, src, n->op == LATHE_OP_SELECT_AND_SCATTER_MAX ? "lt_sasd_max" : "lt_sasd_min", &f));
    lcuDeviceptr px = lathe_cuda_ptr(in[0]), ps = lathe_cuda_ptr(in[1]), py = lathe_cuda_ptr(out[0]);
    int ns32 = (int)ns;
    void *args[] = {&px, &ps, &py, &ns32, &g};
    lathe_cuda_grid(ns, &b, &t);
    return lathe_cuda_launch(ex, f, b, t, 0, args);
  }
  lathe_shape as;
  memset(&as, 0, sizeof as);
  as.dtype = LATHE_DTYPE_UINT64;
  as.rank = 1;
  as.dims[0] = nx;
  lathe_tensor *acc;
  LATHE_RETURN_IF_ERROR(lathe_cuda_exec_tensor(ex, &as, &acc));
  lathe_tensor_release(acc); /* ours; the execution keeps its own until the stream is done */
  LATHE_CU_TRY(api, cuMemsetD8Async(lathe_cuda_ptr(acc), 0, (size_t)nx * 8, lathe_cuda_exec_stream(ex)),
               "lathe:cuda: SelectAndScatter accumulator");
  lcuDeviceptr px = lathe_cuda_ptr(in[0]), ps = lathe_cuda_ptr(in[1]), pa = lathe_cuda_ptr(acc), py = lathe_cuda_ptr(out[0]);
  if (ns) {
    LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(d, src, n->op == LATHE_OP_SELECT_AND_SCATTER_MAX ? "lt_sas_max" : "lt_sas_min", &f));
    void *args[] = {&px, &ps, &pa, &ns, &g};
    lathe_cuda_grid(ns, &b, &t);
    LATHE_RETURN_IF_ERROR(lathe_cuda_launch(ex, f, b, t, 0, args));
  }
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(d, src, "lt_sas_store", &f));
  void *args[] = {&pa, &py, &nx};
  lathe_cuda_grid(nx, &b, &t);
  return lathe_cuda_launch(ex, f, b, t, 0, args);
}

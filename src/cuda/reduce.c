/* reduce.c -- the REDUCE family on the GPU: Reduce{Sum,Product,Max,Min}, ReduceBitwise{And,Or,Xor},
 * ReduceLogical{And,Or,Xor} and ArgMinMax, with lathe:cpu's semantics (src/cpu/reduce.c): integers
 * wrap, halves accumulate in float, Max/Min propagate NaN, complex products are the plain formula;
 * ArgMinMax takes the first NaN, else the first index of the extreme.
 *
 * The operand's axes collapse as on the CPU into kept and reduced groups (size-1 axes dropped,
 * neighbours of a kind merged); an output element o then reads the elements
 * kept_offset(o) + reduced_offset(r) for r in [0, n_red). One kernel engine covers every layout:
 * each work item (an output, or a part of one) is reduced by a group of 1, 32 or 256 threads --
 * 32 or 256 when the reduced run is innermost (consecutive threads read consecutive elements),
 * 1 when a kept axis is innermost (consecutive threads take consecutive outputs) -- each thread
 * folding a strided share into four accumulators, then a warp-shuffle tree and, for 256, a tree
 * over the block's warps. When there are too few outputs to fill the GPU, the reduced range is
 * split into parts whose partial accumulators a second pass of the same engine combines (a full
 * reduction is the case of one output). Sizes are arguments: one module per (dtype, op) serves
 * every shape, and a program compiles only the modules it uses. */
#include <pthread.h>
#include <stdio.h>

#include "cuda.h"
#include "kernels/zkernels.h"

/* The engine. An op is a struct with S (storage) and A (accumulator) types and ident(),
 * load(x, r), comb(a, b), store(out, i, a); lt_redp_* read partial accumulators instead of the
 * operand. Geometry: kept groups (dims, input strides) give an output's base offset, reduced
 * groups a reduced index's offset. */
static const char red_lib[] = LT_CUH_REDUCE;

/* ---- per dtype: which ops exist, and the line instantiating them ---- */
enum { R_SUM, R_PROD, R_MAX, R_MIN, R_AND, R_OR, R_XOR, R_LAND, R_LOR, R_LXOR, R_ARG, R_COUNT };
static const char *const op_names[R_COUNT] = {"sum", "prod", "max", "min", "band", "bor", "bxor", "land", "lor", "lxor", "arg"};

static int column_of(lathe_op op) {
  switch (op) {
    case LATHE_OP_REDUCE_SUM: return R_SUM;
    case LATHE_OP_REDUCE_PRODUCT: return R_PROD;
    case LATHE_OP_REDUCE_MAX: return R_MAX;
    case LATHE_OP_REDUCE_MIN: return R_MIN;
    case LATHE_OP_REDUCE_BITWISE_AND: return R_AND;
    case LATHE_OP_REDUCE_BITWISE_OR: return R_OR;
    case LATHE_OP_REDUCE_BITWISE_XOR: return R_XOR;
    case LATHE_OP_REDUCE_LOGICAL_AND: return R_LAND;
    case LATHE_OP_REDUCE_LOGICAL_OR: return R_LOR;
    case LATHE_OP_REDUCE_LOGICAL_XOR: return R_LXOR;
    case LATHE_OP_ARG_MIN_MAX: return R_ARG;
    default: return -1;
  }
}

/* Whether column c exists for dtype dt (sub-byte integers arrive widened: none of their own). */
static bool has_column(lathe_dtype dt, int c) {
  if (!lathe_dtype_is_valid(dt) || lathe_dtype_is_packed(dt) || c < 0) return false;
  switch (lathe_dtype_class_of(dt)) {
    case LATHE_CLASS_SINT:
    case LATHE_CLASS_UINT: return c <= R_XOR || c == R_ARG;
    case LATHE_CLASS_FLOAT:
    case LATHE_CLASS_HALF: return c <= R_MIN || c == R_ARG;
    case LATHE_CLASS_COMPLEX: return c == R_SUM || c == R_PROD;
    case LATHE_CLASS_BOOL: return c == R_LAND || c == R_LOR || c == R_LXOR || c == R_ARG; /* ArgMinMax: false < true */
    default: return false;
  }
}

/* Bytes of the accumulator of column c for dt (partials of the two-pass scheme). */
static size_t acc_size(lathe_dtype dt, int c) {
  if (c == R_ARG) return 16;
  if (lathe_dtype_class_of(dt) == LATHE_CLASS_HALF) return 4;
  return (size_t)lathe_dtype_bits(dt) / 8;
}

static const char *int_type(lathe_dtype dt, bool want_unsigned) {
  static const char *const s[] = {"int8_t", "int16_t", "int32_t", "int64_t"}, *const u[] = {"uint8_t", "uint16_t", "uint32_t", "uint64_t"};
  int k = lathe_dtype_bits(dt) == 8 ? 0 : lathe_dtype_bits(dt) == 16 ? 1 : lathe_dtype_bits(dt) == 32 ? 2 : 3;
  return want_unsigned ? u[k] : s[k];
}

/* The instantiation line of dt (empty when the REDUCE family has nothing for it). */
static void inst_line(lathe_dtype dt, char *buf, size_t cap) {
  int bits = lathe_dtype_bits(dt);
  buf[0] = 0;
  switch (lathe_dtype_class_of(dt)) {
    case LATHE_CLASS_SINT:
      snprintf(buf, cap, "LT_RED_INT(%s, %s, (%lldLL - 1), %lldLL)\nLT_RED_ARG(%s, %s, LT_SAME)\n", int_type(dt, false),
               int_type(dt, true), (long long)LATHE_SINT_MIN(bits) + 1, (long long)LATHE_SINT_MAX(bits), int_type(dt, false),
               int_type(dt, false));
      break;
    case LATHE_CLASS_UINT:
      snprintf(buf, cap, "LT_RED_INT(%s, %s, 0, %lluULL)\nLT_RED_ARG(%s, %s, LT_SAME)\n", int_type(dt, true), int_type(dt, true),
               (unsigned long long)LATHE_UINT_MAX(bits), int_type(dt, true), int_type(dt, true));
      break;
    case LATHE_CLASS_FLOAT: {
      const char *t = bits == 32 ? "float" : "double";
      snprintf(buf, cap, "LT_RED_FLOAT(%s, %s, LT_SAME, LT_SAME)\nLT_RED_ARG(%s, %s, LT_SAME)\n", t, t, t, t);
      break;
    }
    case LATHE_CLASS_HALF: {
      const char *h = dt == LATHE_DTYPE_FLOAT16 ? "f16" : "bf16";
      snprintf(buf, cap, "LT_RED_FLOAT(uint16_t, float, lt_%s_to_f32, lt_f32_to_%s)\nLT_RED_ARG(uint16_t, float, lt_%s_to_f32)\n",
               h, h, h);
      break;
    }
    case LATHE_CLASS_COMPLEX:
      snprintf(buf, cap, "LT_RED_COMPLEX(%s)\n", bits == 64 ? "lt_c64" : "lt_c128");
      break;
    case LATHE_CLASS_BOOL:
      snprintf(buf, cap, "LT_RED_BOOL\nLT_RED_ARG(uint8_t, uint8_t, LT_SAME)\n");
      break;
    default:
      break;
  }
}

/* One module per (dtype, op), made once: only what a program uses is compiled. */
static char *sources[LATHE_DTYPE_LIMIT][R_COUNT];
static pthread_once_t sources_once = PTHREAD_ONCE_INIT;

static void make_sources(void) {
  for (int d = 1; d < LATHE_DTYPE_LIMIT; d++) {
    lathe_dtype dt = (lathe_dtype)d;
    char line[256];
    inst_line(dt, line, sizeof line);
    for (int c = 0; c < R_COUNT && line[0]; c++) {
      if (!has_column(dt, c)) continue;
      size_t n = sizeof red_lib + strlen(line) + 64;
      char *s = malloc(n);
      if (s) snprintf(s, n, "#define LT_PICK_%s(...) __VA_ARGS__\n%s%s", op_names[c], red_lib, line);
      sources[d][c] = s;
    }
  }
}

static const char *source_of(lathe_dtype dt, int c) {
  pthread_once(&sources_once, make_sources);
  return (int)dt > 0 && dt < LATHE_DTYPE_LIMIT && c >= 0 && c < R_COUNT ? sources[dt][c] : NULL;
}

void lathe_cuda_sources_reduce(lathe_cuda_source_fn fn, void *ctx) {
  for (int d = 1; d < LATHE_DTYPE_LIMIT; d++)
    for (int c = 0; c < R_COUNT; c++) {
      const char *s = source_of((lathe_dtype)d, c);
      char label[64];
      snprintf(label, sizeof label, "reduce %s %s", op_names[c], lathe_dtype_name((lathe_dtype)d));
      if (s) fn(ctx, label, s);
    }
}

void lathe_cuda_texts_reduce(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  (void)d;
  if (!n->n_operands) return;
  const char *s = source_of(n->in[0]->shape.dtype, column_of(n->op));
  if (s) fn(ctx, s);
}

bool lathe_cuda_supports_reduce(lathe_op op, lathe_dtype dtype) { return source_of(dtype, column_of(op)) != NULL; }

/* ---- host side ---- */
typedef struct rgeom_h { /* lt_rgeom */
  int nk, nr, vec;
  int64_t kd[16], ks[16], rd[16], rs[16];
} rgeom_h;

typedef struct red_launch {
  const char *source;
  int col;
  int is_min, ow; /* ArgMinMax */
  int es;         /* bytes of an operand element as stored */
} red_launch;

/* Threads per work item and parts of the reduced range, from the sizes and the device. */
static void plan(const cuda_dev *d, int64_t n_out, int64_t n_red, bool inner_reduced, int *group, int64_t *splits) {
  int64_t target = (int64_t)(d->sm_count > 0 ? d->sm_count : 80) * 2048;
  *group = !inner_reduced || n_red < 16 ? 1 : n_red >= 2048 ? 256 : 32;
  *splits = 1;
  int64_t threads = n_out * *group;
  /* the least work worth a part: a thread of a column reduction (group 1) keeps only 4 loads in
   * flight, so parts of 32 rows, for enough threads to cover the card's memory latency (a bias
   * gradient of 768 columns over 4096 rows ran at 0.9 TB/s with parts of 128) */
  int64_t per = *group == 1 ? 32 : (int64_t)*group * 128;
  if (threads < target && n_red > 2 * per) {
    int64_t s = (target + threads - 1) / threads, most = (n_red + per - 1) / per;
    if (s > most) s = most;
    if (s > 4096) s = 4096;
    *splits = s < 1 ? 1 : s;
  }
}

/* Bytes of one stored operand element (0: no vector reads). */
static int acc_size_of_storage(const red_launch *L, bool partial_in) {
  if (partial_in || L->es <= 0 || L->es > 16) return 0;
  return L->es;
}

static lathe_status_t launch_one(lathe_cuda_exec *ex, const red_launch *L, bool partial_in, const void *in, void *out,
                                 void *part, int64_t n_out, int64_t n_red, int64_t splits, int group, const rgeom_h *g) {
  char name[32];
  snprintf(name, sizeof name, "lt_red%s_%s", partial_in ? "p" : "", op_names[L->col]);
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), L->source, name, &f));
  lcuDeviceptr pi = (lcuDeviceptr)(uintptr_t)in, po = (lcuDeviceptr)(uintptr_t)out, pp = (lcuDeviceptr)(uintptr_t)part;
  rgeom_h gg = *g;
  /* aligned groups of 4 along a contiguous reduced run: every part and row starts on one */
  int64_t chunk = splits > 0 ? (n_red + splits - 1) / splits : n_red;
  int es = acc_size_of_storage(L, partial_in);
  bool vec = !partial_in && es > 0 && g->nr == 1 && g->rs[0] == 1 && group >= 32 && n_red % 4 == 0 && chunk % 4 == 0 &&
             lathe_cuda_v4_aligned((uintptr_t)in, (size_t)es);
  for (int k = 0; vec && k < g->nk; k++) vec = g->ks[k] % 4 == 0;
  gg.vec = vec;
  int is_min = L->is_min, ow = L->ow;
  void *args[] = {&pi, &po, &pp, &n_out, &n_red, &splits, &group, &gg, &is_min, &ow};
  int64_t work = n_out * splits, gpb = 256 / group, blocks = (work + gpb - 1) / gpb;
  if (blocks < 1) blocks = 1;
  if (blocks > (1 << 20)) blocks = 1 << 20; /* the loop strides over the rest */
  return lathe_cuda_launch(ex, f, (unsigned)blocks, 256, 0, args);
}

/* Whether the column kernels (lt_redc_*) take geometry g for elements of es bytes at p: the
 * innermost kept run contiguous in whole 16-byte vectors, and every vector's start aligned. */
static bool cols_fit(const rgeom_h *g, int es, uintptr_t p) {
  if (es <= 0 || 16 % es || p % 16 || g->nk < 1 || g->ks[g->nk - 1] != 1) return false;
  int64_t v = 16 / es;
  if (g->kd[g->nk - 1] % v) return false;
  for (int k = 0; k < g->nk - 1; k++)
    if (g->ks[k] % v) return false;
  for (int k = 0; k < g->nr; k++)
    if (g->rs[k] % v) return false;
  return true;
}

/* A column reduction through lt_redc_*: parts enough for 4 blocks an SM, each warp of a block
 * taking at least 8 rows; their accumulators ([splits][n_out]) reduced again, as columns (in one
 * part unless a warp would take more than 64 of them), until one part is left. */
static lathe_status_t reduce_cols(lathe_cuda_exec *ex, const red_launch *L, lathe_dtype dt, const void *in, void *out,
                                  int64_t n_out, int64_t n_red, const rgeom_h *g, bool partial_in) {
  cuda_dev *d = lathe_cuda_exec_dev(ex);
  int64_t want = 4 * (int64_t)(d->sm_count > 0 ? d->sm_count : 80);
  size_t as = acc_size(dt, L->col);
  rgeom_h gg = *g;
  for (;;) {
    int64_t v = partial_in ? 16 / (int64_t)as : 16 / L->es, tiles = (n_out / v + 31) / 32;
    int64_t splits = (want + tiles - 1) / tiles, most = n_red / (partial_in ? 512 : 64);
    if (splits > most) splits = most;
    if (splits < 1) splits = 1;
    if (tiles * splits > INT32_MAX) splits = INT32_MAX / tiles;
    void *part = NULL;
    if (splits > 1) {
      lathe_shape ps;
      memset(&ps, 0, sizeof ps);
      ps.dtype = LATHE_DTYPE_UINT8, ps.rank = 1, ps.dims[0] = (int64_t)as * n_out * splits;
      lathe_tensor *t;
      LATHE_RETURN_IF_ERROR(lathe_cuda_exec_tensor(ex, &ps, &t));
      lathe_tensor_release(t); /* ours; the execution keeps its own until the stream is done */
      part = t->data;
    }
    char name[32];
    snprintf(name, sizeof name, "lt_redc%s_%s", partial_in ? "p" : "", op_names[L->col]);
    lcuFunction f;
    LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(d, L->source, name, &f));
    lcuDeviceptr pi = (lcuDeviceptr)(uintptr_t)in, po = (lcuDeviceptr)(uintptr_t)out, pp = (lcuDeviceptr)(uintptr_t)part;
    void *args[] = {&pi, &po, &pp, &n_out, &n_red, &splits, &gg};
    LATHE_RETURN_IF_ERROR(lathe_cuda_launch(ex, f, (unsigned)(tiles * splits), 256, 0, args));
    if (splits == 1) return NULL;
    /* the partials, [splits][n_out], reduced along splits */
    memset(&gg, 0, sizeof gg);
    gg.nk = 1, gg.kd[0] = n_out, gg.ks[0] = 1;
    gg.nr = 1, gg.rd[0] = splits, gg.rs[0] = n_out;
    in = part, n_red = splits, partial_in = true;
  }
}

/* Reduces x (laid out by g: n_out outputs of n_red elements) into out, in one or two passes. */
static lathe_status_t reduce_any(lathe_cuda_exec *ex, const red_launch *L, lathe_dtype dt, const void *x, void *out,
                                 int64_t n_out, int64_t n_red, bool inner_reduced, const rgeom_h *g) {
  cuda_dev *d = lathe_cuda_exec_dev(ex);
  /* fewer than 16 vectors of outputs leave most of a block's lanes idle (the other path); the
   * partials' vectors (of accumulators, as wide as the elements or twice: halves) divide n_out too */
  if (d->cu->reduce_cols && !inner_reduced && L->col != R_ARG && cols_fit(g, L->es, (uintptr_t)x) &&
      n_out / (16 / L->es) >= 16)
    return reduce_cols(ex, L, dt, x, out, n_out, n_red, g, false);
  int group;
  int64_t splits;
  plan(d, n_out, n_red, inner_reduced, &group, &splits);
  if (splits == 1) return launch_one(ex, L, false, x, out, NULL, n_out, n_red, 1, group, g);
  lathe_shape ps;
  memset(&ps, 0, sizeof ps);
  ps.dtype = LATHE_DTYPE_UINT8;
  ps.rank = 1;
  ps.dims[0] = (int64_t)acc_size(dt, L->col) * n_out * splits;
  lathe_tensor *part;
  LATHE_RETURN_IF_ERROR(lathe_cuda_exec_tensor(ex, &ps, &part));
  lathe_tensor_release(part); /* ours; the execution keeps its own until the stream is done */
  LATHE_RETURN_IF_ERROR(launch_one(ex, L, false, x, NULL, part->data, n_out, n_red, splits, group, g));
  /* the partials, [splits][n_out], reduced along splits */
  rgeom_h g2;
  memset(&g2, 0, sizeof g2);
  g2.nk = 1, g2.kd[0] = n_out, g2.ks[0] = 1;
  g2.nr = 1, g2.rd[0] = splits, g2.rs[0] = n_out;
  int64_t target = (int64_t)(d->sm_count > 0 ? d->sm_count : 80) * 2048;
  int group2 = n_out * 32 > target ? 1 : splits >= 1024 && n_out * 256 <= target ? 256 : 32;
  return launch_one(ex, L, true, part->data, out, NULL, n_out, splits, 1, group2, &g2);
}

/* Appends a group (dims, stride) to a side of g, merging it into the previous group of that side
 * when they are contiguous. */
static void add_group(int *n, int64_t *dims, int64_t *strides, int64_t dim, int64_t stride) {
  if (dim == 1) return;
  if (*n && strides[*n - 1] == dim * stride) {
    dims[*n - 1] *= dim;
    strides[*n - 1] = stride;
    return;
  }
  dims[*n] = dim;
  strides[*n] = stride;
  (*n)++;
}

static lathe_status_t run_reduce(lathe_cuda_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *out) {
  const lathe_shape *xs = &x->shape;
  lathe_dtype dt = xs->dtype;
  red_launch L = {.source = source_of(dt, column_of(n->op)), .col = column_of(n->op), .es = lathe_dtype_bits(dt) / 8};
  if (!L.source)
    return LATHE_UNIMPL("%s: not implemented on lathe:cuda for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  int64_t on = lathe_shape_size(&out->shape), xn = lathe_shape_size(xs);
  if (!on) return NULL;
  rgeom_h g;
  memset(&g, 0, sizeof g);
  if (!xn) { /* every output is the identity (no kept geometry is read) */
    LATHE_RETURN_IF_ERROR(launch_one(ex, &L, false, x->data, out->data, NULL, on, 0, 1, 1, &g));
    /* sub-byte integers run widened to 8 bits: Max/Min identities are those of the narrow type */
    lathe_dtype orig = n->in[0]->shape.dtype;
    if (lathe_dtype_is_packed(orig) && (L.col == R_MAX || L.col == R_MIN)) {
      int bits = lathe_dtype_bits(orig);
      bool sint = lathe_dtype_class_of(orig) == LATHE_CLASS_SINT;
      int64_t v = L.col == R_MAX ? (sint ? LATHE_SINT_MIN(bits) : 0) : (sint ? LATHE_SINT_MAX(bits) : (int64_t)LATHE_UINT_MAX(bits));
      const lcu_api *api = lathe_cuda_exec_api(ex);
      LATHE_CU_TRY(api, cuMemsetD8Async(lathe_cuda_ptr(out), (unsigned char)(v & 0xff), (size_t)on, lathe_cuda_exec_stream(ex)),
                   "lathe:cuda: reduction identity");
    }
    return NULL;
  }
  /* collapse into kept and reduced groups, in memory order */
  bool red[LATHE_MAX_RANK] = {false};
  lathe_ilist axes = lathe_attr_reduce_axes(n);
  for (int i = 0; i < axes.n; i++) red[axes.v[i]] = true;
  int64_t st[LATHE_MAX_RANK];
  lathe_shape_strides(xs, st);
  int last = -1; /* the innermost axis of size > 1 */
  for (int a = 0; a < xs->rank; a++) {
    if (xs->dims[a] == 1) continue;
    last = a;
    if (red[a]) add_group(&g.nr, g.rd, g.rs, xs->dims[a], st[a]);
    else add_group(&g.nk, g.kd, g.ks, xs->dims[a], st[a]);
  }
  if (g.nr == 0) return lathe_cuda_copy(ex, x, out); /* nothing is reduced */
  return reduce_any(ex, &L, dt, x->data, out->data, on, xn / on, last >= 0 && red[last], &g);
}

static bool is_byte_int(lathe_dtype dt) { return lathe_dtype_is_int(dt) && !lathe_dtype_is_packed(dt); }

static lathe_status_t run_arg_min_max(lathe_cuda_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *out) {
  lathe_dtype dt = x->shape.dtype, odt = out->shape.dtype;
  red_launch L = {.source = source_of(dt, R_ARG), .col = R_ARG, .is_min = lathe_attr_arg_min_max_is_min(n) ? 1 : 0,
                  .ow = lathe_dtype_bits(odt) / 8, .es = lathe_dtype_bits(dt) / 8};
  if (!L.source || !is_byte_int(odt))
    return LATHE_UNIMPL("ArgMinMax: not implemented on lathe:cuda for %s -> %s", lathe_dtype_name(dt), lathe_dtype_name(odt));
  int axis = (int)lathe_attr_arg_min_max_axis(n);
  int64_t pre = lathe_dims_product(x->shape.dims, 0, axis), len = x->shape.dims[axis];
  int64_t post = lathe_dims_product(x->shape.dims, axis + 1, x->shape.rank), on = pre * post;
  if (!on) return NULL;
  rgeom_h g;
  memset(&g, 0, sizeof g);
  add_group(&g.nk, g.kd, g.ks, pre, len * post);
  add_group(&g.nk, g.kd, g.ks, post, 1);
  g.nr = 1, g.rd[0] = len, g.rs[0] = post; /* reduced indices are positions along the axis */
  return reduce_any(ex, &L, dt, x->data, out->data, on, len, post == 1, &g);
}

lathe_status_t lathe_cuda_sum_columns(lathe_cuda_exec *ex, lathe_dtype dt, lcuDeviceptr in, lcuDeviceptr out, int64_t m,
                                      int64_t n) {
  red_launch L = {.source = source_of(dt, R_SUM), .col = R_SUM, .es = lathe_dtype_bits(dt) / 8};
  if (!L.source) return LATHE_UNIMPL("lathe:cuda: no column sum for %s", lathe_dtype_name(dt));
  if (m <= 0 || n <= 0) return NULL;
  rgeom_h g;
  memset(&g, 0, sizeof g);
  g.nk = 1, g.kd[0] = n, g.ks[0] = 1;
  g.nr = 1, g.rd[0] = m, g.rs[0] = n;
  return reduce_any(ex, &L, dt, (const void *)(uintptr_t)in, (void *)(uintptr_t)out, n, m, false, &g);
}

const char *lathe_cuda_sum_columns_text(lathe_dtype dt) { return source_of(dt, R_SUM); }

lathe_status_t lathe_cuda_reduce_partials(lathe_cuda_exec *ex, const lathe_node *n, const void *part, int64_t splits,
                                          int64_t n_out, lathe_tensor *out) {
  lathe_dtype dt = n->in[0]->shape.dtype;
  red_launch L = {.source = source_of(dt, column_of(n->op)), .col = column_of(n->op), .es = lathe_dtype_bits(dt) / 8};
  if (!L.source || 16 % acc_size(dt, L.col) || n_out % (int64_t)(16 / acc_size(dt, L.col)))
    return lathe_status_new(LATHE_STATUS_INTERNAL, "%s: no column pass for its partial results", lathe_op_name(n->op));
  rgeom_h g;
  memset(&g, 0, sizeof g);
  g.nk = 1, g.kd[0] = n_out, g.ks[0] = 1;
  g.nr = 1, g.rd[0] = splits, g.rs[0] = n_out;
  return reduce_cols(ex, &L, dt, part, out->data, n_out, splits, &g, true);
}

lathe_status_t lathe_cuda_run_reduce(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  if (n->op == LATHE_OP_ARG_MIN_MAX) return run_arg_min_max(ex, n, in[0], out[0]);
  return run_reduce(ex, n, in[0], out[0]);
}

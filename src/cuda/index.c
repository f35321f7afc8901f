/* index.c -- the INDEX family on the GPU: Gather, ScatterSum/Max/Min, DynamicSlice and
 * DynamicUpdateSlice, with lathe:cpu's semantics (src/cpu/index.c; attribute slots in
 * src/graph/ops_index.c): XLA's general gather and scatter, gather starts clamped into the
 * operand, scatter updates whose window does not fit dropped, dynamic starts clamped.
 *
 * Gather, DynamicSlice and DynamicUpdateSlice move elements by width (1..16 bytes), one thread per
 * result (or update) element, which decodes its position into operand offsets and reads its start
 * indices on the device (nothing is read back to the host). Scatter runs one thread per update
 * element and combines it into the result (a copy of the operand) atomically, per dtype: integer
 * sums with wrapping atomicAdd, integer max/min with atomicMax/atomicMin (8- and 16-bit lanes by a
 * compare-and-swap on their 32-bit word), so integer results are exact whatever the order; float
 * sums with atomicAdd (Float16/BFloat16 and narrow lanes by compare-and-swap, complex per part),
 * so the order of duplicate updates -- and the rounding -- may differ from the CPU's sequential
 * order; float max/min by compare-and-swap with the CPU's NaN rule. */
#include <pthread.h>
#include <stdio.h>

#include "cuda.h"
#include "kernels/zkernels.h"

/* Index loads: code = bytes | 0x100 for unsigned; Uint64 values past INT64_MAX saturate. */
static const char index_helpers[] = LT_CUH_INDEX_HELPERS;

static const char gather_src[] = LT_CUH_GATHER;

static const char box_src[] = LT_CUH_BOX;

/* Scatter: update axis a is a window axis over operand axis uk[a] >= 0, or a batch axis (uk[a] < 0)
 * stepping the indices by uistr[a]. C::apply(p, v) combines v into *p atomically. */
static const char scatter_lib[] = LT_CUH_SCATTER;

/* The instantiation of dt's combiners and kernels (empty when Scatter has none for dt). */
static void scatter_inst(lathe_dtype dt, char *buf, size_t cap) {
  static const char *const st[] = {"int8_t", "int16_t", "int32_t", "int64_t"}, *const ut[] = {"uint8_t", "uint16_t", "uint32_t", "uint64_t"};
  int bits = lathe_dtype_bits(dt), k = bits == 8 ? 0 : bits == 16 ? 1 : bits == 32 ? 2 : 3;
  const char *t = NULL;
  buf[0] = 0;
  int o = 0;
  switch (lathe_dtype_class_of(dt)) {
    case LATHE_CLASS_SINT:
    case LATHE_CLASS_UINT: {
      bool s = lathe_dtype_class_of(dt) == LATHE_CLASS_SINT;
      t = s ? st[k] : ut[k];
      if (bits <= 16) o = snprintf(buf, cap, "LT_SC_NARROW(%s, %s, %d)\n", t, ut[k], bits / 8);
      else if (bits == 32) o = snprintf(buf, cap, "LT_SC_WIDE(%s, %s, unsigned)\n", t, s ? "int" : "unsigned");
      else o = snprintf(buf, cap, "LT_SC_WIDE(%s, %s, unsigned long long)\n", t, s ? "long long" : "unsigned long long");
      break;
    }
    case LATHE_CLASS_FLOAT:
      t = bits == 32 ? "float" : "double";
      o = snprintf(buf, cap, "LT_SC_FLOAT(%s, %s)\n", t, bits == 32 ? "lt_cas_f32" : "lt_cas_f64");
      break;
    case LATHE_CLASS_HALF:
      t = "uint16_t";
      o = snprintf(buf, cap, "LT_SC_HALF(%s, %s)\n", dt == LATHE_DTYPE_FLOAT16 ? "lt_f16_to_f32" : "lt_bf16_to_f32",
                   dt == LATHE_DTYPE_FLOAT16 ? "lt_f32_to_f16" : "lt_f32_to_bf16");
      break;
    case LATHE_CLASS_COMPLEX:
      t = bits == 64 ? "lt_c64" : "lt_c128";
      snprintf(buf, cap, "LT_SC_COMPLEX(%s)\nLT_SC_KERNEL(%s, sum)\n", t, t);
      return;
    default:
      return;
  }
  snprintf(buf + o, cap - (size_t)o, "LT_SC_KERNEL(%s, sum)\nLT_SC_KERNEL(%s, max)\nLT_SC_KERNEL(%s, min)\n", t, t, t);
}

static char *move_sources[2], *scatter_sources[LATHE_DTYPE_LIMIT];
static pthread_once_t sources_once = PTHREAD_ONCE_INIT;

static char *concat3(const char *a, const char *b, const char *c) {
  size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
  char *s = malloc(n);
  if (s) snprintf(s, n, "%s%s%s", a, b, c);
  return s;
}

static void make_sources(void) {
  move_sources[0] = concat3(index_helpers, gather_src, "");
  move_sources[1] = concat3(index_helpers, box_src, "");
  for (int d = 1; d < LATHE_DTYPE_LIMIT; d++) {
    lathe_dtype dt = (lathe_dtype)d;
    if (!lathe_dtype_is_valid(dt) || lathe_dtype_is_packed(dt)) continue;
    char line[512];
    scatter_inst(dt, line, sizeof line);
    if (line[0]) scatter_sources[d] = concat3(index_helpers, scatter_lib, line);
  }
}

/* Gather's module (0), or that of the dynamic slices (1). */
static const char *move_src_get(int k) {
  pthread_once(&sources_once, make_sources);
  return move_sources[k];
}

static const char *scatter_src_get(lathe_dtype dt) {
  pthread_once(&sources_once, make_sources);
  return (int)dt > 0 && dt < LATHE_DTYPE_LIMIT ? scatter_sources[dt] : NULL;
}

void lathe_cuda_sources_index(lathe_cuda_source_fn fn, void *ctx) {
  if (move_src_get(0)) fn(ctx, "gather", move_src_get(0));
  if (move_src_get(1)) fn(ctx, "dynamic slices", move_src_get(1));
  for (int d = 1; d < LATHE_DTYPE_LIMIT; d++) {
    const char *s = scatter_src_get((lathe_dtype)d);
    char label[64];
    snprintf(label, sizeof label, "scatter %s", lathe_dtype_name((lathe_dtype)d));
    if (s) fn(ctx, label, s);
  }
}

void lathe_cuda_texts_index(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  (void)d;
  const char *s = NULL;
  switch (n->op) {
    case LATHE_OP_GATHER: s = move_src_get(0); break;
    case LATHE_OP_DYNAMIC_SLICE:
    case LATHE_OP_DYNAMIC_UPDATE_SLICE: s = move_src_get(1); break;
    case LATHE_OP_SCATTER_SUM:
    case LATHE_OP_SCATTER_MAX:
    case LATHE_OP_SCATTER_MIN: s = scatter_src_get(n->shape.dtype); break;
    default: break;
  }
  if (s) fn(ctx, s);
}

bool lathe_cuda_supports_index(lathe_op op, lathe_dtype dtype) {
  if (!lathe_dtype_is_valid(dtype)) return false;
  switch (op) {
    case LATHE_OP_GATHER:
      return move_src_get(0) != NULL;
    case LATHE_OP_DYNAMIC_SLICE:
    case LATHE_OP_DYNAMIC_UPDATE_SLICE:
      return move_src_get(1) != NULL;
    case LATHE_OP_SCATTER_SUM:
      return scatter_src_get(dtype) != NULL;
    case LATHE_OP_SCATTER_MAX:
    case LATHE_OP_SCATTER_MIN:
      return scatter_src_get(dtype) != NULL && !lathe_dtype_is_complex(dtype);
    default:
      return false;
  }
}

/* ---- host side ---- */
static int index_code(lathe_dtype dt) {
  return lathe_dtype_bits(dt) / 8 | (lathe_dtype_class_of(dt) == LATHE_CLASS_UINT ? 0x100 : 0);
}

/* Sizes that only dynamic axes can get wrong (the build checked every static one). */
static lathe_status_t shape_mismatch(const lathe_node *n, const char *what, int64_t size, const char *where, int axis,
                                     int64_t dim) {
  return LATHE_INVALID("%s: %s %lld against %s %d of size %lld: dynamic axes bound to inconsistent sizes",
                       lathe_op_name(n->op), what, (long long)size, where, axis, (long long)dim);
}

static lathe_status_t move_kernel(lathe_cuda_exec *ex, const char *what, lathe_dtype dt, lcuFunction *f) {
  const char *src = move_src_get(strcmp(what, "gather") ? 1 : 0);
  if (!src) return LATHE_OOM("lathe:cuda: index kernels");
  char name[32];
  snprintf(name, sizeof name, "lt_%s_%d", what, lathe_dtype_bits(dt) / 8);
  return lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), src, name, f);
}

typedef struct ggeom_h { /* lt_ggeom */
  int rrank, nvec, icode;
  int64_t vec_str;
  int64_t rd[16], rk[16], ristr[16], od[16], sl[16], ostr[16], map[16];
} ggeom_h;

static lathe_status_t run_gather(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  const lathe_shape *os = &in[0]->shape, *is = &in[1]->shape, *rs = &out[0]->shape;
  ggeom_h g;
  memset(&g, 0, sizeof g);
  int iva = (int)lathe_attr_gather_index_vector_axis(n);
  lathe_ilist offset = lathe_attr_gather_offset_output_axes(n), coll = lathe_attr_gather_collapsed_slice_axes(n);
  lathe_ilist start_map = lathe_attr_gather_start_index_map(n);
  const int64_t *sizes = lathe_attr_gather_slice_sizes(n).v;
  int64_t istr[LATHE_MAX_RANK];
  lathe_shape_strides(os, g.ostr);
  lathe_shape_strides(is, istr);
  g.rrank = rs->rank;
  g.nvec = start_map.n;
  g.icode = index_code(is->dtype);
  g.vec_str = iva < is->rank ? istr[iva] : 0;
  for (int k = 0; k < g.nvec; k++) g.map[k] = start_map.v[k];
  for (int a = 0; a < os->rank; a++) {
    g.od[a] = os->dims[a];
    g.sl[a] = sizes[a] < 0 ? os->dims[a] : sizes[a];
    if (g.sl[a] > g.od[a]) return shape_mismatch(n, "slice size", g.sl[a], "operand axis", a, g.od[a]);
  }
  /* result axes: offset ones take the non-collapsed operand axes in order, the rest are batch */
  bool is_offset[LATHE_MAX_RANK] = {false}, is_collapsed[LATHE_MAX_RANK] = {false};
  for (int i = 0; i < offset.n; i++) is_offset[offset.v[i]] = true;
  for (int i = 0; i < coll.n; i++) is_collapsed[coll.v[i]] = true;
  int next_operand = 0, next_batch = 0;
  for (int axis = 0; axis < rs->rank; axis++) {
    g.rd[axis] = rs->dims[axis];
    if (is_offset[axis]) {
      while (is_collapsed[next_operand]) next_operand++;
      g.rk[axis] = next_operand++;
    } else {
      if (next_batch == iva) next_batch++;
      g.rk[axis] = -1;
      g.ristr[axis] = istr[next_batch++];
    }
  }
  int64_t total = lathe_shape_size(rs);
  if (!total) return NULL;
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(move_kernel(ex, "gather", os->dtype, &f));
  lcuDeviceptr px = lathe_cuda_ptr(in[0]), py = lathe_cuda_ptr(out[0]), pi = lathe_cuda_ptr(in[1]);
  void *args[] = {&px, &py, &pi, &total, &g};
  unsigned b, t;
  lathe_cuda_grid(total, &b, &t);
  return lathe_cuda_launch(ex, f, b, t, 0, args);
}

typedef struct sgeom_h { /* lt_sgeom */
  int urank, orank, nvec, icode;
  int64_t vec_str;
  int64_t ud[16], uk[16], uistr[16], od[16], ostr[16], ws[16], map[16];
} sgeom_h;

static lathe_status_t run_scatter(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  const lathe_shape *os = &in[0]->shape, *is = &in[1]->shape, *us = &in[2]->shape;
  const char *src = scatter_src_get(os->dtype);
  if (!src || !lathe_cuda_supports_index(n->op, os->dtype))
    return LATHE_UNIMPL("%s: not implemented on lathe:cuda for %s", lathe_op_name(n->op), lathe_dtype_name(os->dtype));
  sgeom_h g;
  memset(&g, 0, sizeof g);
  int iva = (int)lathe_attr_scatter_index_vector_axis(n);
  lathe_ilist uwa = lathe_attr_scatter_update_window_axes(n), iwa = lathe_attr_scatter_inserted_window_axes(n);
  lathe_ilist to_operand = lathe_attr_scatter_scatter_axes_to_operand_axes(n);
  int64_t ustr[LATHE_MAX_RANK], istr[LATHE_MAX_RANK];
  lathe_shape_strides(os, g.ostr);
  lathe_shape_strides(us, ustr);
  lathe_shape_strides(is, istr);
  g.urank = us->rank;
  g.orank = os->rank;
  g.nvec = to_operand.n;
  g.icode = index_code(is->dtype);
  g.vec_str = iva < is->rank ? istr[iva] : 0;
  for (int k = 0; k < g.nvec; k++) g.map[k] = to_operand.v[k];
  bool inserted[LATHE_MAX_RANK] = {false}, window[LATHE_MAX_RANK] = {false};
  for (int i = 0; i < iwa.n; i++) inserted[iwa.v[i]] = true;
  for (int a = 0; a < os->rank; a++) g.od[a] = os->dims[a], g.ws[a] = 1;
  for (int i = 0; i < us->rank; i++) g.ud[i] = us->dims[i], g.uk[i] = -1;
  for (int i = 0, oa = 0; i < uwa.n; i++, oa++) {
    while (inserted[oa]) oa++;
    int ua = (int)uwa.v[i];
    window[ua] = true;
    g.uk[ua] = oa;
    g.ws[oa] = us->dims[ua];
    if (g.ws[oa] > g.od[oa]) return shape_mismatch(n, "update window", g.ws[oa], "operand axis", oa, g.od[oa]);
  }
  for (int ua = 0, ib = 0; ua < us->rank; ua++) {
    if (window[ua]) continue;
    if (ib == iva) ib++;
    if (us->dims[ua] != is->dims[ib]) return shape_mismatch(n, "updates batch axis", us->dims[ua], "indices axis", ib, is->dims[ib]);
    g.uistr[ua] = istr[ib++];
  }
  LATHE_RETURN_IF_ERROR(lathe_cuda_copy(ex, in[0], out[0]));
  int64_t total = lathe_shape_size(us);
  if (!total || !lathe_shape_size(os)) return NULL;
  const char *name = n->op == LATHE_OP_SCATTER_SUM ? "lt_scatter_sum" : n->op == LATHE_OP_SCATTER_MAX ? "lt_scatter_max" : "lt_scatter_min";
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), src, name, &f));
  lcuDeviceptr py = lathe_cuda_ptr(out[0]), pu = lathe_cuda_ptr(in[2]), pi = lathe_cuda_ptr(in[1]);
  void *args[] = {&py, &pu, &pi, &total, &g};
  unsigned b, t;
  lathe_cuda_grid(total, &b, &t);
  return lathe_cuda_launch(ex, f, b, t, 0, args);
}

typedef struct dgeom_h { /* lt_dgeom */
  int rank;
  int64_t bd[16], od[16], ostr[16];
} dgeom_h;

typedef struct starts_h { /* lt_starts */
  lcuDeviceptr p[16];
  int code[16];
} starts_h;

/* DynamicSlice (update false: in[1..] are the starts) or DynamicUpdateSlice (in[2..]). */
static lathe_status_t run_box(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out, bool update) {
  const lathe_shape *os = &in[0]->shape, *bs = update ? &in[1]->shape : &out[0]->shape;
  dgeom_h g;
  starts_h s;
  memset(&g, 0, sizeof g);
  memset(&s, 0, sizeof s);
  g.rank = os->rank;
  lathe_shape_strides(os, g.ostr);
  /* starts come as one scalar per axis or as one vector of them (the builder checked which): a
   * vector's element a is read through a pointer to it */
  lathe_tensor *const *starts = in + (update ? 2 : 1);
  bool vector = os->rank > 0 && starts[0]->shape.rank == 1;
  for (int a = 0; a < os->rank; a++) {
    if (bs->dims[a] > os->dims[a]) return shape_mismatch(n, "size", bs->dims[a], "operand axis", a, os->dims[a]);
    g.bd[a] = bs->dims[a];
    g.od[a] = os->dims[a];
    const lathe_tensor *t = vector ? starts[0] : starts[a];
    s.p[a] = lathe_cuda_ptr(t) + (vector ? (lcuDeviceptr)a * (lcuDeviceptr)(lathe_dtype_bits(t->shape.dtype) / 8) : 0);
    s.code[a] = index_code(t->shape.dtype);
  }
  if (update) LATHE_RETURN_IF_ERROR(lathe_cuda_copy(ex, in[0], out[0]));
  int64_t total = lathe_shape_size(bs);
  if (!total) return NULL;
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(move_kernel(ex, update ? "dupdate" : "dslice", os->dtype, &f));
  lcuDeviceptr px = lathe_cuda_ptr(in[update ? 1 : 0]), py = lathe_cuda_ptr(out[0]);
  void *args[] = {&px, &py, &total, &g, &s};
  unsigned b, t;
  lathe_cuda_grid(total, &b, &t);
  return lathe_cuda_launch(ex, f, b, t, 0, args);
}

lathe_status_t lathe_cuda_run_index(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  switch (n->op) {
    case LATHE_OP_GATHER: return run_gather(ex, n, in, out);
    case LATHE_OP_SCATTER_SUM:
    case LATHE_OP_SCATTER_MAX:
    case LATHE_OP_SCATTER_MIN: return run_scatter(ex, n, in, out);
    case LATHE_OP_DYNAMIC_SLICE: return run_box(ex, n, in, out, false);
    case LATHE_OP_DYNAMIC_UPDATE_SLICE: return run_box(ex, n, in, out, true);
    default: return LATHE_UNIMPL("%s: not an index op", lathe_op_name(n->op));
  }
}

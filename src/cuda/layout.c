/* layout.c -- data movement on the GPU: Reshape, Transpose, BroadcastInDim, Concatenate, Slice,
 * Pad, Reverse (the LAYOUT kind) and Iota (LEAF). Every op but Pad and Iota is one strided copy:
 * output element i reads input element base + sum(idx[a] * strides[a]) (strides 0 where it
 * broadcasts, negative where it reverses), or -- Concatenate -- an operand's element i lands at
 * such an offset of the output. Kernels move elements of 1, 2, 4, 8 or 16 bytes, whatever the
 * dtype, so one compiled kernel serves every dtype of a width. */
#include <stdio.h>

#include "gemm.h"
#include "kernels/zkernels.h"

static const char layout_src[] = LT_CUH_LAYOUT;

/* Iota: output element i is its index along the axis, converted to the dtype as ConvertDType
 * would convert an Int64. */
static const char iota_src[] = LT_CUH_IOTA;

/* Texts per element width (1, 2, 4, 8, 16 bytes) and per Iota dtype, each made once (kernels are
 * found by its address: lathe_cuda_kernel_lasting) and compiled on first use: a model compiles
 * the few it runs (all widths in one text took NVRTC 0.7 s, all Iotas 0.4 s). */
enum { N_WIDTHS = 5 };
/* Iota's element type of dt: the kernels' storage type (iota.cuh's own structs for halves), or
 * NULL where Iota has no kernel (Bool, sub-byte integers: widened first) */
static const char *iota_type(lathe_dtype dt) {
  if (dt == LATHE_DTYPE_BOOL || lathe_dtype_is_packed(dt)) return NULL;
  if (dt == LATHE_DTYPE_FLOAT16) return "lt_f16";
  if (dt == LATHE_DTYPE_BFLOAT16) return "lt_bf16";
  return lathe_cuda_storage_type(dt);
}
static char *width_text(int w) {
  lt_text t = {0};
  lt_put(&t, "#define LT_LW %d\n%s", w, layout_src);
  if (t.oom) free(t.s);
  return t.oom ? NULL : t.s;
}
static char *iota_text(lathe_dtype dt) {
  lt_text t = {0};
  lt_put(&t, "%s\nLT_IOTA(%s, %s)\n", iota_src, lathe_dtype_name(dt), iota_type(dt));
  if (t.oom) free(t.s);
  return t.oom ? NULL : t.s;
}
static const char *width_sources[N_WIDTHS], *iota_sources[LATHE_DTYPE_LIMIT];
static pthread_once_t sources_once = PTHREAD_ONCE_INIT;
static void make_sources(void) {
  for (int i = 0; i < N_WIDTHS; i++) width_sources[i] = width_text(1 << i);
  for (int d = 1; d < LATHE_DTYPE_LIMIT; d++)
    if (lathe_dtype_is_valid((lathe_dtype)d) && iota_type((lathe_dtype)d)) iota_sources[d] = iota_text((lathe_dtype)d);
}

/* The text of the kernels that move elements of w bytes (1 .. 16), or NULL */
static const char *width_source(int w) {
  pthread_once(&sources_once, make_sources);
  for (int i = 0; i < N_WIDTHS; i++)
    if (w == 1 << i) return width_sources[i];
  return NULL;
}

void lathe_cuda_sources_layout(lathe_cuda_source_fn fn, void *ctx) {
  char label[48];
  for (int i = 0; i < N_WIDTHS; i++) {
    char *t = width_text(1 << i);
    snprintf(label, sizeof label, "layout %d bytes", 1 << i);
    if (t) fn(ctx, label, t);
    free(t);
  }
  for (int d = 1; d < LATHE_DTYPE_LIMIT; d++) {
    if (!lathe_dtype_is_valid((lathe_dtype)d) || !iota_type((lathe_dtype)d)) continue;
    char *t = iota_text((lathe_dtype)d);
    snprintf(label, sizeof label, "iota %s", lathe_dtype_name((lathe_dtype)d));
    if (t) fn(ctx, label, t);
    free(t);
  }
}

static int width_of(lathe_dtype dt) { return lathe_dtype_bits(dt) / 8; }

/* The same move with fewer, wider steps: size-1 axes dropped, neighbouring axes merged where the
 * strided side walks them as one, and, while the innermost axis is unit-stride and even, element
 * pairs moved as one element of twice the width (up to 16 bytes) where every stride, the base and
 * both pointers allow. A transpose that keeps the last axis (attention's head transposes) then
 * moves 16-byte words with a rank-3 index instead of 4-byte ones with a rank-4 index. */
void lathe_cuda_strided_simplify(lt_dims_h *d, lt_strides_h *s, int64_t n, int64_t *base, int *w, lcuDeviceptr strided_p,
                                 lcuDeviceptr plain_p) {
  int64_t all = 1;
  for (int a = 0; a < d->rank; a++) all *= d->d[a];
  int r = 0;
  for (int a = 0; a < d->rank; a++) {
    if (d->d[a] == 1) continue;
    if (r > 0 && s->s[r - 1] == s->s[a] * d->d[a]) { /* merges with the axis outside it */
      d->d[r - 1] *= d->d[a];
      s->s[r - 1] = s->s[a];
      continue;
    }
    d->d[r] = d->d[a], s->s[r] = s->s[a], r++;
  }
  if (r == 0) d->d[r] = 1, s->s[r] = 0, r = 1;
  d->rank = r;
  while (n == all && *w > 0 && *w < 16 && s->s[r - 1] == 1 && d->d[r - 1] % 2 == 0 && *base % 2 == 0) {
    bool even = true;
    for (int a = 0; a < r - 1; a++) even &= s->s[a] % 2 == 0;
    int nw = 2 * *w;
    if (!even || (strided_p + (lcuDeviceptr)(*base * *w)) % (lcuDeviceptr)nw || plain_p % (lcuDeviceptr)nw) break;
    d->d[r - 1] /= 2;
    for (int a = 0; a < r - 1; a++) s->s[a] /= 2;
    *base /= 2, *w = nw;
  }
}

bool lathe_cuda_dims32(const lt_dims_h *d, const lt_strides_h *s, int64_t n, int64_t base, lt_dims32_h *g) {
  int64_t lo = base, hi = base;
  for (int a = 0; a < d->rank; a++) {
    int64_t span = (d->d[a] - 1) * s->s[a];
    if (span < 0) lo += span;
    else hi += span;
  }
  if (n > INT32_MAX || lo < 0 || hi > INT32_MAX) return false;
  g->rank = d->rank;
  for (int a = 0; a < d->rank; a++) g->q[a] = lathe_cuda_div32((uint32_t)d->d[a]), g->s[a] = (int32_t)s->s[a];
  return true;
}

lathe_status_t lathe_cuda_move(lathe_cuda_exec *ex, bool scatter, lcuDeviceptr pi, lcuDeviceptr po, int w, int64_t n,
                               const lt_dims_h *dims, const lt_strides_h *strides, int64_t base) {
  if (n == 0) return NULL;
  lt_dims_h d = *dims;
  lt_strides_h s = *strides;
  int w0 = w;
  lathe_cuda_strided_simplify(&d, &s, n, &base, &w, scatter ? po : pi, scatter ? pi : po);
  if (w != w0) n /= w / w0;
  const char *src = width_source(w);
  if (!src) return LATHE_OOM("lathe:cuda: codegen");
  cuda_dev *dv = lathe_cuda_exec_dev(ex);
  char name[32];
  lcuFunction f;
  unsigned b, t;
  if (!scatter && d.rank == 1 && s.s[0] == 0) { /* one element everywhere (a fill, a scalar broadcast) */
    snprintf(name, sizeof name, "lt_fill_%d", w);
    LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(dv, src, name, &f));
    lcuDeviceptr v = pi + (lcuDeviceptr)(base * w);
    void *args[] = {&v, &po, &n};
    lathe_cuda_grid(n / (16 / w) + 1, &b, &t);
    return lathe_cuda_launch(ex, f, b, t, 0, args);
  }
  lt_dims32_h g;
  if (lathe_cuda_dims32(&d, &s, n, base, &g)) {
    uint32_t n32 = (uint32_t)n;
    int32_t b32 = (int32_t)base;
    snprintf(name, sizeof name, "lt_%s32_%d", scatter ? "scatter" : "gather", w);
    LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(dv, src, name, &f));
    void *args[] = {&pi, &po, &n32, &g, &b32};
    lathe_cuda_grid(n, &b, &t);
    return lathe_cuda_launch(ex, f, b, t, 0, args);
  }
  snprintf(name, sizeof name, "lt_%s_%d", scatter ? "scatter" : "gather", w);
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(dv, src, name, &f));
  void *args[] = {&pi, &po, &n, &d, &s, &base};
  lathe_cuda_grid(n, &b, &t);
  return lathe_cuda_launch(ex, f, b, t, 0, args);
}

lathe_status_t lathe_cuda_lines(lathe_cuda_exec *ex, lcuDeviceptr in, lcuDeviceptr out, int w, int64_t n_out, int64_t len_out,
                                int64_t op, int64_t n_in, int64_t len_in, int64_t ip) {
  if (n_out <= 0 || len_out <= 0) return NULL;
  const char *src = width_source(w);
  if (!src) return LATHE_OOM("lathe:cuda: codegen");
  char name[32];
  snprintf(name, sizeof name, "lt_lines_%d", w);
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), src, name, &f));
  /* bx blocks of 256 cover a line (at most 64: they loop), as many lines at once as a grid of
   * 2^16 blocks holds */
  int64_t bx = (len_out + 255) / 256;
  if (bx > 64) bx = 64;
  int64_t by = n_out < 65536 / bx ? n_out : 65536 / bx;
  unsigned blocks = (unsigned)(bx * by);
  void *args[] = {&in, &out, &n_out, &len_out, &op, &n_in, &len_in, &ip, &bx};
  return lathe_cuda_launch(ex, f, blocks, 256, 0, args);
}

lathe_status_t lathe_cuda_strided(lathe_cuda_exec *ex, bool scatter, const lathe_tensor *in, lathe_tensor *out,
                                  int64_t n, const lt_dims_h *dims, const lt_strides_h *strides, int64_t base) {
  return lathe_cuda_move(ex, scatter, lathe_cuda_ptr(in), lathe_cuda_ptr(out), width_of(in->shape.dtype), n, dims, strides,
                         base);
}

/* Row-major element strides of a shape. */
static void strides_of(const lathe_shape *s, int64_t *st) {
  int64_t acc = 1;
  for (int a = s->rank - 1; a >= 0; a--) {
    st[a] = acc;
    acc *= s->dims[a];
  }
}

static lt_dims_h dims_of(const lathe_shape *s) {
  lt_dims_h d;
  memset(&d, 0, sizeof d);
  d.rank = s->rank;
  for (int a = 0; a < s->rank; a++) d.d[a] = s->dims[a];
  if (d.rank == 0) { /* a scalar is one element */
    d.rank = 1;
    d.d[0] = 1;
  }
  return d;
}

lathe_status_t lathe_cuda_copy(lathe_cuda_exec *ex, const lathe_tensor *in, lathe_tensor *out) {
  if (in->data == out->data || !out->nbytes) return NULL;
  const lcu_api *api = lathe_cuda_exec_api(ex);
  return lathe_cuda_error(api, api->cuMemcpyDtoDAsync(lathe_cuda_ptr(out), lathe_cuda_ptr(in), out->nbytes,
                                                      lathe_cuda_exec_stream(ex)), "lathe:cuda: copy");
}

static lathe_status_t run_transpose(lathe_cuda_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *y) {
  lathe_ilist perm = lathe_attr_transpose_permutation(n);
  int64_t ist[LATHE_MAX_RANK];
  strides_of(&x->shape, ist);
  lt_dims_h d = dims_of(&y->shape);
  lt_strides_h s;
  memset(&s, 0, sizeof s);
  for (int a = 0; a < perm.n; a++) s.s[a] = ist[perm.v[a]];
  if (y->shape.rank == 0) s.s[0] = 1;
  return lathe_cuda_strided(ex, false, x, y, lathe_shape_size(&y->shape), &d, &s, 0);
}

static lathe_status_t run_broadcast(lathe_cuda_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *y) {
  lathe_ilist axes = lathe_attr_broadcast_in_dim_axes(n);
  int64_t ist[LATHE_MAX_RANK];
  strides_of(&x->shape, ist);
  lt_dims_h d = dims_of(&y->shape);
  lt_strides_h s;
  memset(&s, 0, sizeof s);
  for (int i = 0; i < axes.n; i++)
    if (x->shape.dims[i] != 1) s.s[axes.v[i]] = ist[i];
  return lathe_cuda_strided(ex, false, x, y, lathe_shape_size(&y->shape), &d, &s, 0);
}

static lathe_status_t run_slice(lathe_cuda_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *y) {
  lathe_ilist starts = lathe_attr_slice_starts(n), strides = lathe_attr_slice_strides(n);
  int64_t ist[LATHE_MAX_RANK], base = 0;
  strides_of(&x->shape, ist);
  lt_dims_h d = dims_of(&y->shape);
  lt_strides_h s;
  memset(&s, 0, sizeof s);
  for (int a = 0; a < x->shape.rank; a++) {
    int64_t step = strides.n ? strides.v[a] : 1;
    s.s[a] = ist[a] * step;
    base += starts.v[a] * ist[a];
  }
  if (y->shape.rank == 0) s.s[0] = 1;
  return lathe_cuda_strided(ex, false, x, y, lathe_shape_size(&y->shape), &d, &s, base);
}

static lathe_status_t run_reverse(lathe_cuda_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *y) {
  lathe_ilist axes = lathe_attr_reverse_axes(n);
  int64_t ist[LATHE_MAX_RANK], base = 0;
  strides_of(&x->shape, ist);
  lt_dims_h d = dims_of(&y->shape);
  lt_strides_h s;
  memset(&s, 0, sizeof s);
  for (int a = 0; a < x->shape.rank; a++) s.s[a] = ist[a];
  if (y->shape.rank == 0) s.s[0] = 1;
  for (int i = 0; i < axes.n; i++) {
    int a = (int)axes.v[i];
    if (x->shape.dims[a] == 0) return NULL;
    base += (x->shape.dims[a] - 1) * ist[a];
    s.s[a] = -ist[a];
  }
  return lathe_cuda_strided(ex, false, x, y, lathe_shape_size(&y->shape), &d, &s, base);
}

static lathe_status_t run_concatenate(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor *y) {
  int axis = (int)lathe_attr_concatenate_axis(n);
  int64_t ost[LATHE_MAX_RANK], offset = 0;
  strides_of(&y->shape, ost);
  for (int k = 0; k < n->n_operands; k++) {
    const lathe_tensor *x = in[k];
    lt_dims_h d = dims_of(&x->shape);
    lt_strides_h s;
    memset(&s, 0, sizeof s);
    for (int a = 0; a < x->shape.rank; a++) s.s[a] = ost[a];
    if (x->shape.rank == 0) s.s[0] = 1;
    LATHE_RETURN_IF_ERROR(lathe_cuda_strided(ex, true, x, y, lathe_shape_size(&x->shape), &d, &s,
                                             x->shape.rank ? offset * ost[axis] : 0));
    if (x->shape.rank) offset += x->shape.dims[axis];
  }
  return NULL;
}

static lathe_status_t run_pad(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor *y) {
  const lathe_tensor *x = in[0], *fill = in[1];
  int64_t total = lathe_shape_size(&y->shape);
  if (!total) return NULL;
  lathe_ilist lo = lathe_attr_pad_start(n), interior = lathe_attr_pad_interior(n);
  lt_dims_h od = dims_of(&y->shape), id = dims_of(&x->shape);
  lt_strides_h l, it;
  memset(&l, 0, sizeof l);
  memset(&it, 0, sizeof it);
  for (int a = 0; a < x->shape.rank; a++) {
    l.s[a] = a < lo.n ? lo.v[a] : 0;
    it.s[a] = a < interior.n ? interior.v[a] : 0;
  }
  /* No cropping (every low and high padding at least 0): the fill value everywhere, then x
   * scattered into its places -- two strided moves at the memory's speed, where the kernel below
   * finds each output element's source by divisions over every axis (a Slice's gradient, a
   * [1, ...] block padded into [3, ...], ran at a twelfth of the memory's speed). */
  bool crop = x->shape.rank == 0 || width_of(x->shape.dtype) == 0;
  int64_t ost[LATHE_MAX_RANK], base = 0;
  lathe_cuda_row_strides(&y->shape, ost);
  lt_strides_h sst;
  memset(&sst, 0, sizeof sst);
  for (int a = 0; a < x->shape.rank && !crop; a++) {
    int64_t step = it.s[a] + 1, d = x->shape.dims[a];
    crop = l.s[a] < 0 || (d > 0 && l.s[a] + (d - 1) * step >= y->shape.dims[a]);
    sst.s[a] = ost[a] * step, base += l.s[a] * ost[a];
  }
  if (!crop) {
    lt_dims_h fd = {.rank = 1, .d = {total}};
    lt_strides_h zero;
    memset(&zero, 0, sizeof zero);
    LATHE_RETURN_IF_ERROR(lathe_cuda_strided(ex, false, fill, y, total, &fd, &zero, 0));
    int64_t nx = lathe_shape_size(&x->shape);
    return nx ? lathe_cuda_strided(ex, true, x, y, nx, &id, &sst, base) : NULL;
  }
  char name[32];
  snprintf(name, sizeof name, "lt_pad_%d", width_of(x->shape.dtype));
  lcuFunction f;
  const char *src = width_source(width_of(x->shape.dtype));
  if (!src) return LATHE_OOM("lathe:cuda: codegen");
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), src, name, &f));
  lcuDeviceptr pi = lathe_cuda_ptr(x), po = lathe_cuda_ptr(y), pf = lathe_cuda_ptr(fill);
  void *args[] = {&pi, &po, &pf, &total, &od, &id, &l, &it};
  unsigned b, t;
  lathe_cuda_grid(total, &b, &t);
  return lathe_cuda_launch(ex, f, b, t, 0, args);
}

bool lathe_cuda_supports_layout(lathe_op op, lathe_dtype dtype) {
  switch (op) {
    case LATHE_OP_RESHAPE:
    case LATHE_OP_TRANSPOSE:
    case LATHE_OP_BROADCAST_IN_DIM:
    case LATHE_OP_CONCATENATE:
    case LATHE_OP_SLICE:
    case LATHE_OP_PAD:
    case LATHE_OP_REVERSE:
      return lathe_dtype_is_valid(dtype);
    default:
      return false;
  }
}

void lathe_cuda_move_texts(int w, lathe_cuda_text_fn fn, void *ctx) {
  const char *a = width_source(w), *b = w < 16 ? width_source(16) : NULL;
  if (a) fn(ctx, a);
  if (b) fn(ctx, b);
}

void lathe_cuda_texts_layout(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  (void)d;
  if (n->op != LATHE_OP_RESHAPE && n->n_operands) lathe_cuda_move_texts(width_of(n->in[0]->shape.dtype), fn, ctx);
}

lathe_status_t lathe_cuda_run_layout(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  switch (n->op) {
    case LATHE_OP_RESHAPE: return lathe_cuda_copy(ex, in[0], out[0]);
    case LATHE_OP_TRANSPOSE: return run_transpose(ex, n, in[0], out[0]);
    case LATHE_OP_BROADCAST_IN_DIM: return run_broadcast(ex, n, in[0], out[0]);
    case LATHE_OP_CONCATENATE: return run_concatenate(ex, n, in, out[0]);
    case LATHE_OP_SLICE: return run_slice(ex, n, in[0], out[0]);
    case LATHE_OP_PAD: return run_pad(ex, n, in, out[0]);
    case LATHE_OP_REVERSE: return run_reverse(ex, n, in[0], out[0]);
    default: return LATHE_UNIMPL("%s: not a layout op", lathe_op_name(n->op));
  }
}

/* ---- LEAF: Iota (Parameter and Constant never reach a kernel: the executor binds them, so
 * they are in the capabilities for every dtype, as on lathe:cpu) ---- */
bool lathe_cuda_supports_leaf(lathe_op op, lathe_dtype dtype) {
  if (!lathe_dtype_is_valid(dtype)) return false;
  if (op == LATHE_OP_PARAMETER || op == LATHE_OP_CONSTANT) return true;
  return op == LATHE_OP_IOTA && dtype != LATHE_DTYPE_BOOL; /* as lathe:cpu: no Iota of Bool */
}

void lathe_cuda_sources_leaf(lathe_cuda_source_fn fn, void *ctx) {
  (void)fn, (void)ctx; /* iota's source is listed with the layout family */
}

void lathe_cuda_texts_leaf(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  (void)d;
  if (n->op != LATHE_OP_IOTA) return;
  pthread_once(&sources_once, make_sources);
  lathe_dtype dt = lathe_dtype_widened(n->shape.dtype);
  if (lathe_dtype_is_valid(dt) && iota_sources[dt]) fn(ctx, iota_sources[dt]);
}

lathe_status_t lathe_cuda_run_leaf(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  (void)in;
  if (n->op != LATHE_OP_IOTA) return LATHE_UNIMPL("%s: no CUDA kernel", lathe_op_name(n->op));
  lathe_tensor *y = out[0], *w = y; /* Iota takes its output packed (PACKED in the op table) */
  int axis = (int)lathe_attr_iota_axis(n);
  int64_t total = lathe_shape_size(&y->shape);
  if (!total) return NULL;
  int64_t dim = y->shape.rank ? y->shape.dims[axis] : 1, inner = lathe_dims_product(y->shape.dims, axis + 1, y->shape.rank);
  bool packed = lathe_dtype_is_packed(y->shape.dtype);
  if (packed) { /* sub-byte integers: one byte per value, then packed (keeping the low bits wraps) */
    lathe_shape ws = y->shape;
    ws.dtype = lathe_dtype_widened(ws.dtype);
    LATHE_RETURN_IF_ERROR(lathe_cuda_exec_tensor(ex, &ws, &w));
  }
  char name[48];
  snprintf(name, sizeof name, "lt_iota_%s", lathe_dtype_name(w->shape.dtype));
  lcuFunction f;
  pthread_once(&sources_once, make_sources);
  lathe_dtype dt = w->shape.dtype;
  lathe_status_t st = !iota_type(dt) ? LATHE_UNIMPL("Iota: %s", lathe_dtype_name(dt))
                      : !iota_sources[dt] ? LATHE_OOM("lathe:cuda: codegen")
                                          : lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), iota_sources[dt], name, &f);
  lcuDeviceptr po = lathe_cuda_ptr(w);
  void *args[] = {&po, &total, &dim, &inner};
  unsigned b, t;
  lathe_cuda_grid(total, &b, &t);
  if (!st) st = lathe_cuda_launch(ex, f, b, t, 0, args);
  if (!st && packed) st = lathe_cuda_pack(ex, w, y);
  if (packed) lathe_tensor_release(w);
  return st;
}

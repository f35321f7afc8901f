/* fused.c -- the FUSED family on the GPU: FusedSoftmax, FusedGelu, FusedLayerNorm, FusedDense,
 * FusedDenseVJP (the y derivative, two cuBLASLt products and column sums), FusedActivation and
 * its VJP (kernels over the activations generated from src/graph/ew.def) here; the attention ops in attention.c, the quantized ones in quantized.c.
 *
 * Semantics are lathe:cpu's (src/cpu/fused.c): Float32 and Float64 compute natively,
 * Float16/BFloat16 compute in f32 and round once when stored. Row ops (softmax over its axis,
 * layer norm over its axes) give each row a group of threads (a power of two, from a few lanes
 * of a warp to a whole block) that reduce with warp shuffles; softmax over a non-last axis gives
 * each thread a column instead, so that neighbouring threads read neighbouring elements. Layer
 * norm sums in double, as the CPU does. FusedDense is a cuBLASLt product (half operands as they
 * are, f32 sums) followed by one pass for the bias and the activation. */
#include <stdio.h>

#include "../graph/ew.h"
#include "gemm.h"
#include "kernels/zkernels.h"

static const char fused_src[] = LT_CUH_FUSED;
static const char act_src[] = LT_CUH_ACTIVATION;

/* Softmax of rows of at most 32 * PER elements, a warp per row: each lane keeps its elements and
 * their exponentials in registers, so the row is read once and exp runs once per element, and the
 * row's max and sum are warp shuffles (no block barrier). */
static const char softmax_warp_src[] = LT_CUH_SOFTMAX_WARP;

/* Texts by group of kernels and dtype (softmax_warp.cuh's tail instantiates one of each), each
 * made once and compiled on first use: one text of them all took NVRTC 5.7 s. */
enum { FG_SOFTMAX, FG_GELU, FG_LAYER_NORM, FG_DENSE, FG_ACT, N_FG };
enum { N_FD = 4 };
static const lathe_dtype fused_dts[N_FD] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16};

/* The text of group g and dtype index d: access helpers, reductions, activations, kernels. */
static char *fused_text(int g, int d) {
  lt_text t = {0};
  lt_put(&t, "#define LT_FG %d\n#define LT_FD %d\n%s%s%s%s%s%s", g, d, lathe_cuda_access_source(), lathe_cuda_reduce_source(),
         lathe_cuda_activation_source(), fused_src, act_src, softmax_warp_src);
  if (t.oom) free(t.s);
  return t.oom ? NULL : t.s;
}

/* Kernels are found by their text's address (lathe_cuda_kernel_lasting), so each is made once. */
static const char *sources[N_FG][N_FD];
static pthread_once_t sources_once = PTHREAD_ONCE_INIT;
static void make_sources(void) {
  for (int g = 0; g < N_FG; g++)
    for (int d = 0; d < N_FD; d++) sources[g][d] = fused_text(g, d);
}

/* lt_<what>_<dtype> of group g */
static lathe_status_t fused_kernel(lathe_cuda_exec *ex, int g, const char *what, lathe_dtype dt, lcuFunction *f) {
  pthread_once(&sources_once, make_sources);
  int d = 0;
  while (d < N_FD && fused_dts[d] != dt) d++;
  if (d == N_FD) return LATHE_UNIMPL("lathe:cuda: %s on %s", what, lathe_dtype_name(dt));
  if (!sources[g][d]) return LATHE_OOM("lathe:cuda: codegen");
  char name[64];
  snprintf(name, sizeof name, "lt_%s_%s", what, lathe_dtype_name(dt));
  return lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), sources[g][d], name, f);
}

/* The lasting text of group g and dtype dt, or NULL. */
static const char *fused_source(int g, lathe_dtype dt) {
  pthread_once(&sources_once, make_sources);
  for (int d = 0; d < N_FD; d++)
    if (fused_dts[d] == dt) return sources[g][d];
  return NULL;
}

const char *lathe_cuda_dense_epilogue_text(lathe_dtype dt) { return fused_source(FG_DENSE, dt); }

void lathe_cuda_texts_fused(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  if (!n->n_operands) return;
  lathe_dtype dt = n->in[0]->shape.dtype;
  int g = n->op == LATHE_OP_FUSED_SOFTMAX      ? FG_SOFTMAX
          : n->op == LATHE_OP_FUSED_GELU       ? FG_GELU
          : n->op == LATHE_OP_FUSED_LAYER_NORM ? FG_LAYER_NORM
          : n->op == LATHE_OP_FUSED_DENSE      ? FG_DENSE
                                               : -1;
  if (n->op == LATHE_OP_FUSED_ACTIVATION || n->op == LATHE_OP_FUSED_ACTIVATION_VJP || n->op == LATHE_OP_FUSED_DENSE_VJP)
    g = FG_ACT;
  const char *t = g >= 0 ? fused_source(g, dt) : NULL;
  if (t) fn(ctx, t);
  if (n->op == LATHE_OP_FUSED_DENSE_VJP && (t = fused_source(FG_DENSE, dt))) fn(ctx, t); /* halves' conversions */
  if (n->op == LATHE_OP_FUSED_DENSE_VJP && lathe_attr_fused_dense_vjp_has_bias(n) && (t = lathe_cuda_sum_columns_text(dt)))
    fn(ctx, t); /* dBias */
  if (lathe_cuda_attention_op(n->op)) lathe_cuda_texts_attention(d, n, fn, ctx);
  if (n->op == LATHE_OP_FUSED_QUANTIZED_DENSE || n->op == LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP) {
    if ((t = lathe_cuda_quantized_text())) fn(ctx, t);
  }
}

bool lathe_cuda_supports_fused(lathe_op op, lathe_dtype dt) {
  bool fl = dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16 || dt == LATHE_DTYPE_FLOAT32 || dt == LATHE_DTYPE_FLOAT64;
  switch (op) {
    case LATHE_OP_FUSED_SOFTMAX:
    case LATHE_OP_FUSED_GELU:
    case LATHE_OP_FUSED_LAYER_NORM:
    case LATHE_OP_FUSED_DENSE:
    case LATHE_OP_FUSED_DENSE_VJP:
    case LATHE_OP_FUSED_ACTIVATION:
    case LATHE_OP_FUSED_ACTIVATION_VJP:
    case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION:
    case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP:
    case LATHE_OP_FUSED_ATTENTION_QKV_PROJECTION: return fl;
    case LATHE_OP_FUSED_QUANTIZED_DENSE: return dt == LATHE_DTYPE_FLOAT32;
    case LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP: return dt == LATHE_DTYPE_UINT8;
    default: return false;
  }
}

void lathe_cuda_sources_fused(lathe_cuda_source_fn fn, void *ctx) {
  static const char *groups[N_FG] = {"softmax", "GELU", "layer norm", "dense epilogue", "activations"};
  for (int g = 0; g < N_FG; g++)
    for (int d = 0; d < N_FD; d++) {
      char *t = fused_text(g, d), label[64];
      snprintf(label, sizeof label, "fused %s %s", groups[g], lathe_dtype_name(fused_dts[d]));
      if (t) fn(ctx, label, t);
      free(t);
    }
  lathe_cuda_sources_attention(fn, ctx);
  lathe_cuda_sources_quantized(fn, ctx);
}

/* A warp-per-row kernel <what>_warp<PER> for rows of len <= 1024, launched 8 rows a block. */
static lathe_status_t launch_warp_rows(lathe_cuda_exec *ex, int g, const char *what, lathe_dtype dt, int64_t rows, int64_t len,
                                       void **args) {
  char name[32];
  snprintf(name, sizeof name, "%s_warp%d", what, lathe_cuda_warp_values(len));
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(fused_kernel(ex, g, name, dt, &f));
  unsigned b, th;
  lathe_cuda_row_grid(rows, 32, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

static lathe_status_t run_softmax(lathe_cuda_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *y) {
  const lathe_shape *s = &x->shape;
  int axis = (int)lathe_attr_fused_softmax_axis(n);
  int64_t len = s->dims[axis], inner = lathe_dims_product(s->dims, axis + 1, s->rank), total = lathe_shape_size(s);
  if (!total) return NULL;
  lcuDeviceptr px = lathe_cuda_ptr(x), py = lathe_cuda_ptr(y);
  lcuFunction f;
  if (inner == 1 && lathe_cuda_warp_values(len)) {
    int64_t rows = total / len;
    int ilen = (int)len;
    /* rows in groups of 4 elements as single accesses where every row starts on one (the
     * kernel's lt_v4: 4 elements, aligned to at most 16 bytes) */
    size_t es = (size_t)lathe_dtype_bits(s->dtype) / 8;
    int vec = len % 4 == 0 && lathe_cuda_v4_aligned(px, es) && lathe_cuda_v4_aligned(py, es);
    void *args[] = {&px, &py, &rows, &ilen, &vec};
    return launch_warp_rows(ex, FG_SOFTMAX, "softmax", s->dtype, rows, len, args);
  }
  if (inner == 1) {
    int64_t rows = total / len;
    int tpr = lathe_cuda_row_threads(len);
    LATHE_RETURN_IF_ERROR(fused_kernel(ex, FG_SOFTMAX, "softmax_rows", s->dtype, &f));
    unsigned b, th;
    lathe_cuda_row_grid(rows, tpr, &b, &th);
    void *args[] = {&px, &py, &rows, &len, &tpr};
    return lathe_cuda_launch(ex, f, b, th, 0, args);
  }
  int64_t cols = total / len;
  LATHE_RETURN_IF_ERROR(fused_kernel(ex, FG_SOFTMAX, "softmax_cols", s->dtype, &f));
  unsigned b, th;
  lathe_cuda_grid(cols, &b, &th);
  void *args[] = {&px, &py, &cols, &len, &inner};
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

static lathe_status_t run_gelu(lathe_cuda_exec *ex, const lathe_node *n, const lathe_tensor *x, lathe_tensor *y) {
  int64_t total = lathe_shape_size(&x->shape);
  if (!total) return NULL;
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(fused_kernel(ex, FG_GELU, "gelu", x->shape.dtype, &f));
  lcuDeviceptr px = lathe_cuda_ptr(x), py = lathe_cuda_ptr(y);
  int exact = lathe_attr_fused_gelu_exact(n);
  void *args[] = {&px, &py, &total, &exact};
  unsigned b, th;
  lathe_cuda_grid(total, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

static lathe_status_t run_layer_norm(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor *y) {
  const lathe_shape *s = &in[0]->shape;
  int64_t st[LATHE_MAX_RANK];
  lathe_cuda_row_strides(s, st);
  lathe_ilist axes = lathe_attr_fused_layer_norm_axes(n);
  bool is_norm[LATHE_MAX_RANK] = {0};
  int64_t norm = 1;
  for (int i = 0; i < axes.n; i++) is_norm[axes.v[i]] = true, norm *= s->dims[axes.v[i]];
  int64_t total = lathe_shape_size(s), rows = norm ? total / norm : 0;
  if (!rows || !norm) return NULL;
  lt_dims_h od, nd;
  lt_strides_h os, nst;
  memset(&od, 0, sizeof od), memset(&nd, 0, sizeof nd), memset(&os, 0, sizeof os), memset(&nst, 0, sizeof nst);
  /* the usual case, the last axes in order: one contiguous run per row */
  bool trailing = true;
  for (int i = 0; i < axes.n; i++) trailing &= axes.v[i] == s->rank - axes.n + i;
  if (trailing) {
    od.rank = nd.rank = 1;
    od.d[0] = rows, os.s[0] = norm;
    nd.d[0] = norm, nst.s[0] = 1;
  } else {
    for (int i = 0; i < axes.n; i++) nd.d[nd.rank] = s->dims[axes.v[i]], nst.s[nd.rank++] = st[axes.v[i]];
    for (int a = 0; a < s->rank; a++)
      if (!is_norm[a]) od.d[od.rank] = s->dims[a], os.s[od.rank++] = st[a];
    if (!od.rank) od.rank = 1, od.d[0] = 1;
  }
  int k = 1;
  lcuDeviceptr px = lathe_cuda_ptr(in[0]), py = lathe_cuda_ptr(y), pg = 0, pb = 0;
  if (lathe_attr_fused_layer_norm_has_gamma(n)) pg = lathe_cuda_ptr(in[k++]);
  if (lathe_attr_fused_layer_norm_has_beta(n)) pb = lathe_cuda_ptr(in[k]);
  double eps = lathe_attr_fused_layer_norm_epsilon(n);
  if (trailing && lathe_cuda_warp_values(norm)) {
    int inorm = (int)norm;
    void *args[] = {&px, &py, &pg, &pb, &rows, &inorm, &eps};
    return launch_warp_rows(ex, FG_LAYER_NORM, "layer_norm", s->dtype, rows, norm, args);
  }
  lcuFunction f;
  int tpr = lathe_cuda_row_threads(norm);
  LATHE_RETURN_IF_ERROR(fused_kernel(ex, FG_LAYER_NORM, "layer_norm", s->dtype, &f));
  void *args[] = {&px, &py, &pg, &pb, &rows, &norm, &od, &os, &nd, &nst, &eps, &tpr};
  unsigned b, th;
  lathe_cuda_row_grid(rows, tpr, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

static int64_t round8(int64_t v) { return (v + 7) / 8 * 8; }

/* Float32 sums of an m x n result in scratch, padded as a staged product writes them (gemm_pad:
 * rows and lines to 8 values) and in blocks of at most gemm_pad bytes (*rows_per rows each, at
 * least 64). */
static lathe_status_t acc_scratch(lathe_cuda_exec *ex, int64_t m, int64_t n, lcuDeviceptr *out, int64_t *rows_per,
                                  int64_t *pitch, bool *room) {
  int64_t pad = lathe_cuda_exec_dev(ex)->cu->gemm_pad;
  *room = pad > 0;
  *pitch = *room ? round8(n) : n;
  *rows_per = m;
  if (*room) {
    int64_t fit = pad / (*pitch * 4);
    if (fit < m) *rows_per = fit / 8 * 8 > 64 ? fit / 8 * 8 : 64;
  }
  return lathe_cuda_scratch(ex, LATHE_DTYPE_FLOAT32, (*room ? round8(*rows_per) : m) * *pitch, out, NULL);
}

lathe_status_t lathe_cuda_dense_epilogue(lathe_cuda_exec *ex, lathe_dtype out_dt, lcuDeviceptr acc, int64_t lda, lcuDeviceptr y,
                                         lcuDeviceptr bias, int64_t m, int64_t n, int act) {
  if (m * n == 0 || (acc == y && !bias && act == LATHE_ACTIVATION_NONE)) return NULL;
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(fused_kernel(ex, FG_DENSE, "dense_epi", out_dt, &f));
  int tpr = lathe_cuda_row_threads(n);
  tpr = tpr < 256 ? tpr : 256;
  void *args[] = {&acc, &lda, &y, &bias, &m, &n, &act, &tpr};
  unsigned b, th;
  lathe_cuda_row_grid(m, tpr, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

/* c [rows x cols] (dt, contiguous) = act(a . b + bias) (kk summed). Without an activation the
 * product writes c itself, its bias added by cuBLASLt's epilogue to the Float32 sums before their
 * one rounding (no pass over the result). Otherwise, or where cuBLASLt cannot take the bias, a
 * half result goes through Float32 sums in scratch and the epilogue kernel's rounding; so does a
 * Float32 one on TF32 whose rows start off 16 bytes where products stage (gemm_pad), which the
 * product then writes in place; such sums in blocks of rows (acc_scratch). */
static lathe_status_t dense_product(lathe_cuda_exec *ex, lathe_dtype dt, int64_t rows, int64_t cols, int64_t kk, lt_mat a,
                                    lt_mat b, lcuDeviceptr c, lcuDeviceptr bias, int act) {
  if (act == LATHE_ACTIVATION_NONE && lathe_cuda_exec_dev(ex)->cu->dense_bias) {
    lt_gemm g = {.ab = dt, .d = dt, .batch = 1, .m = rows, .n = cols, .k = kk, .a = a, .b = b, .c = {c, cols, 1, 0}, .bias = bias};
    bool done;
    LATHE_RETURN_IF_ERROR(lathe_cuda_gemm_bias(ex, &g, &done));
    if (done) return NULL;
  }
  bool half = dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16;
  bool via = half || (dt == LATHE_DTYPE_FLOAT32 && (cols % 4 || c % 16) && lathe_cuda_gemm_stages(ex, dt, rows, cols, kk));
  lt_gemm g = {.ab = dt, .d = half ? LATHE_DTYPE_FLOAT32 : dt, .batch = 1, .m = rows, .n = cols, .k = kk, .a = a, .b = b};
  lcuDeviceptr acc = c;
  int64_t lda = cols, per = rows, es = lathe_dtype_bits(dt) / 8;
  if (via) LATHE_RETURN_IF_ERROR(acc_scratch(ex, rows, cols, &acc, &per, &lda, &g.c_room));
  for (int64_t r0 = 0; r0 < rows; r0 += per) {
    g.m = rows - r0 < per ? rows - r0 : per;
    g.a.p = a.p + (lcuDeviceptr)(r0 * a.rs * es);
    g.c = (lt_mat){acc, lda, 1, 0};
    LATHE_RETURN_IF_ERROR(lathe_cuda_gemm(ex, &g));
    LATHE_RETURN_IF_ERROR(lathe_cuda_dense_epilogue(ex, dt, acc, lda, c + (lcuDeviceptr)(r0 * cols * es), bias, g.m, cols, act));
  }
  return NULL;
}

static lathe_status_t run_dense(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor *y) {
  const lathe_shape *xs = &in[0]->shape, *os = &y->shape;
  lathe_dtype dt = xs->dtype;
  int64_t k = xs->dims[xs->rank - 1], m = lathe_dims_product(xs->dims, 0, xs->rank - 1);
  int64_t nn = lathe_dims_product(os->dims, xs->rank - 1, os->rank);
  if (!m || !nn) return NULL;
  bool io = lathe_attr_fused_dense_layout(n) == LATHE_DENSE_INPUT_OUTPUTS;
  lt_mat a = {lathe_cuda_ptr(in[0]), k, 1, 0};
  lt_mat b = io ? (lt_mat){lathe_cuda_ptr(in[1]), nn, 1, 0} : (lt_mat){lathe_cuda_ptr(in[1]), 1, k, 0};
  lcuDeviceptr bias = lathe_attr_fused_dense_has_bias(n) ? lathe_cuda_ptr(in[2]) : 0;
  return dense_product(ex, dt, m, nn, k, a, b, lathe_cuda_ptr(y), bias, (int)lathe_attr_fused_dense_activation(n));
}

/* A grid-stride kernel of group FG_ACT over n elements (n > 0). */
static lathe_status_t launch_act(lathe_cuda_exec *ex, const char *what, lathe_dtype dt, int64_t n, void **args) {
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(fused_kernel(ex, FG_ACT, what, dt, &f));
  unsigned b, th;
  lathe_cuda_grid(n, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

static lathe_status_t run_activation(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor *out) {
  bool vjp = n->op == LATHE_OP_FUSED_ACTIVATION_VJP;
  int act = (int)(vjp ? lathe_attr_fused_activation_vjp_activation(n) : lathe_attr_fused_activation_activation(n));
  lathe_dtype dt = out->shape.dtype;
  int64_t total = lathe_shape_size(&out->shape);
  if (!total) return NULL;
  lcuDeviceptr po = lathe_cuda_ptr(out);
  bool glu = lathe_act_form_of((lathe_activation)act) == LATHE_ACT_FORM_GLU;
  if (!vjp) {
    lcuDeviceptr px = lathe_cuda_ptr(in[0]);
    if (glu) {
      int64_t h = out->shape.dims[out->shape.rank - 1], rows = total / h;
      void *args[] = {&px, &po, &rows, &h, &act};
      return launch_act(ex, "act_glu", dt, total, args);
    }
    int vec = lathe_cuda_exec_dev(ex)->cu->act_vec;
    void *args[] = {&px, &po, &total, &act, &vec};
    return launch_act(ex, "act_fwd", dt, total, args);
  }
  bool has_y = lathe_attr_fused_activation_vjp_has_y(n), has_x = lathe_attr_fused_activation_vjp_has_x(n);
  int from_y = has_y && lathe_act_form_of((lathe_activation)act) == LATHE_ACT_FORM_Y; /* as lathe:cpu */
  lcuDeviceptr pa = lathe_cuda_ptr(in[from_y || !has_y ? 0 : 1]), pg = lathe_cuda_ptr(in[(has_y ? 1 : 0) + (has_x ? 1 : 0)]);
  if (glu) {
    int64_t h = out->shape.dims[out->shape.rank - 1] / 2, rows = total / (2 * h);
    void *args[] = {&pa, &pg, &po, &rows, &h, &act};
    return launch_act(ex, "act_glu_vjp", dt, rows * h, args);
  }
  int vec = lathe_cuda_exec_dev(ex)->cu->act_vec;
  void *args[] = {&pa, &pg, &po, &total, &act, &from_y, &vec};
  return launch_act(ex, "act_vjp", dt, total, args);
}

/* c [rows x cols] = a . b (inner dimension kk), rounded into dt's storage once. */
static lathe_status_t vjp_product(lathe_cuda_exec *ex, lathe_dtype dt, int64_t rows, int64_t cols, int64_t kk, lt_mat a,
                                  lt_mat b, lcuDeviceptr c) {
  return dense_product(ex, dt, rows, cols, kk, a, b, c, 0, LATHE_ACTIVATION_NONE);
}

/* dz = act'(y) g (in the operands' dtype), dx = dz . weight', dWeight = x' . dz (io) or dz' . x
 * (oi), dBias = the column sums of dz. */
static lathe_status_t run_dense_vjp(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  bool hb = lathe_attr_fused_dense_vjp_has_bias(n), io = lathe_attr_fused_dense_vjp_layout(n) == LATHE_DENSE_INPUT_OUTPUTS;
  int act = (int)lathe_attr_fused_dense_vjp_activation(n), from_y = 1;
  const lathe_shape *xs = &in[0]->shape, *ys = &in[hb ? 3 : 2]->shape;
  lathe_dtype dt = xs->dtype;
  int64_t k = xs->dims[xs->rank - 1], m = lathe_dims_product(xs->dims, 0, xs->rank - 1);
  int64_t nn = lathe_dims_product(ys->dims, xs->rank - 1, ys->rank);
  for (int i = 0; i < n->n_out; i++)
    if (out[i]->nbytes) LATHE_RETURN_IF_ERROR(lathe_cuda_zero(ex, lathe_cuda_ptr(out[i]), out[i]->nbytes));
  if (!m || !nn) return NULL; /* empty sums */
  lcuDeviceptr px = lathe_cuda_ptr(in[0]), pw = lathe_cuda_ptr(in[1]), py = lathe_cuda_ptr(in[hb ? 3 : 2]);
  lcuDeviceptr pg = lathe_cuda_ptr(in[hb ? 4 : 3]), dz;
  int64_t total = m * nn;
  LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, dt, total, &dz, NULL));
  int vec = lathe_cuda_exec_dev(ex)->cu->act_vec;
  void *args[] = {&py, &pg, &dz, &total, &act, &from_y, &vec};
  LATHE_RETURN_IF_ERROR(launch_act(ex, "act_vjp", dt, total, args));
  if (k) {
    lt_mat wt = io ? (lt_mat){pw, 1, nn, 0} : (lt_mat){pw, k, 1, 0}; /* weight as [nn, k] */
    LATHE_RETURN_IF_ERROR(vjp_product(ex, dt, m, k, nn, (lt_mat){dz, nn, 1, 0}, wt, lathe_cuda_ptr(out[0])));
    if (io)
      LATHE_RETURN_IF_ERROR(vjp_product(ex, dt, k, nn, m, (lt_mat){px, 1, k, 0}, (lt_mat){dz, nn, 1, 0}, lathe_cuda_ptr(out[1])));
    else
      LATHE_RETURN_IF_ERROR(vjp_product(ex, dt, nn, k, m, (lt_mat){dz, 1, nn, 0}, (lt_mat){px, k, 1, 0}, lathe_cuda_ptr(out[1])));
  }
  if (!hb) return NULL;
  return lathe_cuda_sum_columns(ex, dt, dz, lathe_cuda_ptr(out[2]), m, nn);
}

lathe_status_t lathe_cuda_run_fused(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  switch (n->op) {
    case LATHE_OP_FUSED_SOFTMAX: return run_softmax(ex, n, in[0], out[0]);
    case LATHE_OP_FUSED_GELU: return run_gelu(ex, n, in[0], out[0]);
    case LATHE_OP_FUSED_LAYER_NORM: return run_layer_norm(ex, n, in, out[0]);
    case LATHE_OP_FUSED_DENSE: return run_dense(ex, n, in, out[0]);
    case LATHE_OP_FUSED_DENSE_VJP: return run_dense_vjp(ex, n, in, out);
    case LATHE_OP_FUSED_ACTIVATION:
    case LATHE_OP_FUSED_ACTIVATION_VJP: return run_activation(ex, n, in, out[0]);
    case LATHE_OP_FUSED_QUANTIZED_DENSE:
    case LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP: return lathe_cuda_run_quantized(ex, n, in, out);
    default:
      if (lathe_cuda_attention_op(n->op)) return lathe_cuda_run_attention(ex, n, in, out);
      return LATHE_UNIMPL("%s: not a fused op", lathe_op_name(n->op));
  }
}

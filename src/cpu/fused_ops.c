/* fused_ops.c -- the CPU family of the FUSED kind: the fused ops of the op table (not fusion
 * regions, which are src/graph/program.c and region.c). FusedSoftmax, FusedGelu, FusedLayerNorm
 * and FusedDense are computed here (activations: activation.c, which also runs FusedActivation,
 * its VJP and FusedDenseVJP), each reading and writing memory once per pass where the
 * decomposition materialises several temporaries; Float32 and Float64 compute natively,
 * Float16/BFloat16 are widened to Float32 around the Float32 kernel. The attention ops go to
 * attention.c and the quantized ops to quantized.c. */
#include <math.h>

#include "activation.h"
#include "attention.h"
#include "blas.h"
#include "cpu.h"
#include "gemm.h"
#include "kernels.h"
#include "quantized.h"

bool lathe_cpu_supports_fused(lathe_op op, lathe_dtype dt) {
  switch (op) {
    case LATHE_OP_FUSED_SOFTMAX:
    case LATHE_OP_FUSED_GELU:
    case LATHE_OP_FUSED_LAYER_NORM:
    case LATHE_OP_FUSED_DENSE:
      return lathe_dtype_is_float(dt);
    case LATHE_OP_FUSED_QUANTIZED_DENSE:
    case LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP:
      return lathe_cpu_supports_quantized(op, dt);
    case LATHE_OP_FUSED_ACTIVATION:
    case LATHE_OP_FUSED_ACTIVATION_VJP:
    case LATHE_OP_FUSED_DENSE_VJP:
      return lathe_cpu_supports_activation(op, dt);
    case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION:
    case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP:
    case LATHE_OP_FUSED_ATTENTION_QKV_PROJECTION:
      return lathe_cpu_supports_attention(op, dt);
    default:
      return false;
  }
}

/* ---- geometry shared by the kernels ---- */
typedef struct {
  const lathe_node *n;
  lathe_tensor *const *in;
  lathe_tensor **out;
  int64_t outer, len, inner; /* softmax: outer x len x inner */
  int64_t *norm_off, *outer_off, norm; /* layer norm: element offsets */
  int64_t m, k, nn;                    /* dense: [m, k] x [k, nn] */
  lathe_blas_mat wm;
  const lathe_cpu_kernels *kt; /* the activations' Float32 rows (vector math) */
} fctx;

/* ---- typed kernels: instantiated for float and double ---- */
#define DEFINE_FUSED(T, SUF, EXP, ERF, TANH, SQRT)                                                 \
  static void softmax_##SUF(void *vc, int64_t b, int64_t e) {                                    \
    fctx *c = vc;                                                                                \
    const T *x = c->in[0]->data;                                                                 \
    T *y = c->out[0]->data;                                                                      \
    for (int64_t r = b; r < e; r++) {                                                            \
      int64_t base = (r / c->inner) * c->len * c->inner + r % c->inner, st = c->inner;           \
      T mx = -INFINITY;                                                                          \
      for (int64_t i = 0; i < c->len; i++) mx = x[base + i * st] > mx || isnan(x[base + i * st]) ? x[base + i * st] : mx; \
      T sum = 0;                                                                                 \
      for (int64_t i = 0; i < c->len; i++) sum += (y[base + i * st] = EXP(x[base + i * st] - mx)); \
      T inv = (T)1 / sum;                                                                        \
      for (int64_t i = 0; i < c->len; i++) y[base + i * st] *= inv;                             \
    }                                                                                            \
  }                                                                                              \
  static inline T gelu1_##SUF(T v, bool exact) {                                                 \
    if (exact) return v * (T)0.5 * ((T)1 + ERF(v * (T)0.70710678118654752440));                 \
    return v * (T)0.5 * ((T)1 + TANH((T)0.79788456080286535588 * (v + (T)0.044715 * v * v * v))); \
  }                                                                                              \
  static void gelu_##SUF(void *vc, int64_t b, int64_t e) {                                       \
    fctx *c = vc;                                                                                \
    const T *x = c->in[0]->data;                                                                 \
    T *y = c->out[0]->data;                                                                      \
    bool exact = lathe_attr_fused_gelu_exact(c->n);                                              \
    for (int64_t i = b; i < e; i++) y[i] = gelu1_##SUF(x[i], exact);                             \
  }                                                                                              \
  static void layer_norm_##SUF(void *vc, int64_t b, int64_t e) {                                 \
    fctx *c = vc;                                                                                \
    const T *x = c->in[0]->data;                                                                 \
    T *y = c->out[0]->data;                                                                      \
    int k = 1;                                                                                   \
    const T *gamma = lathe_attr_fused_layer_norm_has_gamma(c->n) ? c->in[k++]->data : NULL;      \
    const T *beta = lathe_attr_fused_layer_norm_has_beta(c->n) ? c->in[k]->data : NULL;          \
    double eps = lathe_attr_fused_layer_norm_epsilon(c->n);                                      \
    for (int64_t r = b; r < e; r++) {                                                            \
      const T *xr = x + c->outer_off[r];                                                         \
      T *yr = y + c->outer_off[r];                                                               \
      double sum = 0, sq = 0;                                                                    \
      for (int64_t i = 0; i < c->norm; i++) sum += xr[c->norm_off[i]];                           \
      double mean = sum / (double)c->norm;                                                       \
      for (int64_t i = 0; i < c->norm; i++) {                                                    \
        double d = xr[c->norm_off[i]] - mean;                                                    \
        sq += d * d;                                                                             \
      }                                                                                          \
      T mu = (T)mean, inv = (T)(1.0 / sqrt(sq / (double)c->norm + eps));                         \
      for (int64_t i = 0; i < c->norm; i++) {                                                    \
        T v = (xr[c->norm_off[i]] - mu) * inv;                                                   \
        if (gamma) v *= gamma[i];                                                                \
        if (beta) v += beta[i];                                                                  \
        yr[c->norm_off[i]] = v;                                                                  \
      }                                                                                          \
    }                                                                                            \
  }                                                                                              \
  /* rows [b, e) of the product, then bias and activation while the rows are in cache */         \
  static void dense_##SUF(void *vc, int64_t b, int64_t e) {                                      \
    fctx *c = vc;                                                                                \
    const T *x = c->in[0]->data;                                                                 \
    T *y = c->out[0]->data;                                                                      \
    lathe_blas_mat xm = {false, c->k ? c->k : 1};                                                \
    if (c->k) lathe_blas_gemm(sizeof(T) == 4 ? LATHE_DTYPE_FLOAT32 : LATHE_DTYPE_FLOAT64, e - b, c->nn, c->k, \
                    x + b * c->k, xm, c->in[1]->data, c->wm, y + b * c->nn, c->nn);              \
    const T *bias = lathe_attr_fused_dense_has_bias(c->n) ? c->in[2]->data : NULL;               \
    int64_t act = lathe_attr_fused_dense_activation(c->n);                                       \
    if (!bias && act == LATHE_ACTIVATION_NONE) return;                                           \
    for (int64_t r = b; r < e; r++) {                                                            \
      T *yr = y + r * c->nn;                                                                     \
      if (bias)                                                                                  \
        for (int64_t j = 0; j < c->nn; j++) yr[j] += bias[j];                                    \
      lathe_cpu_act_##SUF((int)act, yr, yr, c->nn);                                              \
    }                                                                                            \
  }

DEFINE_FUSED(float, f32, expf, erff, tanhf, sqrtf)
DEFINE_FUSED(double, f64, exp, erf, tanh, sqrt)

/* FusedGelu, Float32: the same formulas with Erf and Tanh from the backend's ISA table (the
 * vector math of vmath.h: the same bits on every ISA), 256 elements at a time. */
typedef struct {
  const fctx *c;
  lathe_ew_fn erf, tanh;
} gelu_vec_ctx;

static void gelu_vec_f32(void *vc, int64_t b, int64_t e) {
  const gelu_vec_ctx *g = vc;
  const float *x = g->c->in[0]->data;
  float *y = g->c->out[0]->data;
  bool exact = lathe_attr_fused_gelu_exact(g->c->n);
  const int step[1] = {1};
  for (int64_t i0 = b; i0 < e; i0 += 256) {
    int64_t n = e - i0 < 256 ? e - i0 : 256;
    const float *xs = x + i0;
    float t[256], u[256];
    const void *in[1] = {t};
    if (exact) {
      for (int64_t i = 0; i < n; i++) t[i] = xs[i] * 0.70710678118654752440f;
      g->erf(in, step, u, n, 32);
    } else {
      for (int64_t i = 0; i < n; i++) t[i] = 0.79788456080286535588f * (xs[i] + 0.044715f * xs[i] * xs[i] * xs[i]);
      g->tanh(in, step, u, n, 32);
    }
    for (int64_t i = 0; i < n; i++) y[i0 + i] = xs[i] * 0.5f * (1.0f + u[i]);
  }
}

/* FusedDense's bias and activation (as dense_f32 applies them) on a finished block of lathe's
 * own gemm. */
/* v + bias (or + 0, as dense_f32 adds), then ReLU or nothing: the same expressions in blocks of
 * 8 over restrict rows, which vectorise; the common epilogues. */
static void bias_relu_row(float *restrict y, const float *restrict bias, int64_t n, bool relu) {
  static const float zeros[8];
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const float *b = bias ? bias + j : zeros;
    float v[8];
    for (int k = 0; k < 8; k++) v[k] = y[j + k] + b[k];
    if (relu)
      for (int k = 0; k < 8; k++) v[k] = v[k] < 0 ? 0 : v[k];
    for (int k = 0; k < 8; k++) y[j + k] = v[k];
  }
  for (; j < n; j++) {
    float v = y[j] + (bias ? bias[j] : 0);
    y[j] = relu && v < 0 ? 0 : v;
  }
}

static void dense_ep_f32(void *vc, float *y, int64_t ldy, int64_t i0, int64_t j0, int64_t rows, int64_t cols) {
  const fctx *c = vc;
  const float *bias = lathe_attr_fused_dense_has_bias(c->n) ? (const float *)c->in[2]->data + j0 : NULL;
  int64_t act = lathe_attr_fused_dense_activation(c->n);
  (void)i0;
  if (act == LATHE_ACTIVATION_NONE || act == LATHE_ACTIVATION_RELU) {
    for (int64_t r = 0; r < rows; r++) bias_relu_row(y + r * ldy, bias, cols, act == LATHE_ACTIVATION_RELU);
    return;
  }
  for (int64_t r = 0; r < rows; r++) {
    float *yr = y + r * ldy;
    if (bias)
      for (int64_t j = 0; j < cols; j++) yr[j] += bias[j];
    c->kt->act_fwd[act](yr, yr, cols);
  }
}

/* ---- geometry ---- */
static lathe_status_t layer_norm_offsets(fctx *c) {
  const lathe_shape *s = &c->in[0]->shape;
  int64_t strides[LATHE_MAX_RANK];
  lathe_shape_strides(s, strides);
  lathe_ilist norm_axes = lathe_attr_fused_layer_norm_axes(c->n);
  const int64_t *axes = norm_axes.v;
  int na = norm_axes.n;
  bool is_norm[LATHE_MAX_RANK] = {0};
  c->norm = 1;
  for (int i = 0; i < na; i++) is_norm[axes[i]] = true, c->norm *= s->dims[axes[i]];
  int64_t total = lathe_shape_size(s);
  c->outer = c->norm ? total / c->norm : 0;
  c->norm_off = malloc(sizeof(int64_t) * (size_t)(c->norm + 1));
  c->outer_off = malloc(sizeof(int64_t) * (size_t)(c->outer + 1));
  if (!c->norm_off || !c->outer_off) return LATHE_OOM("FusedLayerNorm");
  /* offsets of the normalised elements in the order of the given axes (gamma's order) */
  for (int64_t i = 0; i < c->norm; i++) {
    int64_t rem = i, off = 0;
    for (int a = na - 1; a >= 0; a--) {
      off += (rem % s->dims[axes[a]]) * strides[axes[a]];
      rem /= s->dims[axes[a]];
    }
    c->norm_off[i] = off;
  }
  for (int64_t o = 0; o < c->outer; o++) {
    int64_t rem = o, off = 0;
    for (int a = s->rank - 1; a >= 0; a--) {
      if (is_norm[a]) continue;
      off += (rem % s->dims[a]) * strides[a];
      rem /= s->dims[a];
    }
    c->outer_off[o] = off;
  }
  return NULL;
}

static lathe_status_t run_typed(lathe_cpu_exec *ex, fctx *c, bool f64) {
  lathe_pool *pool = lathe_cpu_exec_pool(ex);
  const lathe_shape *s = &c->in[0]->shape;
  int64_t total = lathe_shape_size(s);
  switch (c->n->op) {
    case LATHE_OP_FUSED_SOFTMAX: {
      int axis = (int)lathe_attr_fused_softmax_axis(c->n);
      c->len = s->dims[axis];
      c->inner = lathe_dims_product(s->dims, axis + 1, s->rank);
      c->outer = c->len ? total / c->len / (c->inner ? c->inner : 1) : 0;
      int64_t rows = c->outer * c->inner, grain = c->len ? 1 + 16384 / c->len : rows;
      if (c->len && c->inner) lathe_parallel_for(pool, rows, grain, f64 ? softmax_f64 : softmax_f32, c);
      return NULL;
    }
    case LATHE_OP_FUSED_GELU: {
      const lathe_cpu_kernels *kt = lathe_cpu_exec_kernels(ex);
      gelu_vec_ctx g = {c, lathe_cpu_ew_fn(kt, LATHE_OP_ERF, LATHE_DTYPE_FLOAT32), lathe_cpu_ew_fn(kt, LATHE_OP_TANH, LATHE_DTYPE_FLOAT32)};
      if (!f64 && g.erf && g.tanh) lathe_parallel_for(pool, total, 16384, gelu_vec_f32, &g);
      else lathe_parallel_for(pool, total, 16384, f64 ? gelu_f64 : gelu_f32, c);
      return NULL;
    }
    case LATHE_OP_FUSED_LAYER_NORM: {
      lathe_status_t st = layer_norm_offsets(c);
      if (!st && c->norm) lathe_parallel_for(pool, c->outer, 1 + 16384 / c->norm, f64 ? layer_norm_f64 : layer_norm_f32, c);
      return st;
    }
    case LATHE_OP_FUSED_DENSE: {
      const lathe_shape *os = &c->out[0]->shape;
      c->k = s->dims[s->rank - 1];
      c->m = lathe_dims_product(s->dims, 0, s->rank - 1);
      c->nn = lathe_dims_product(os->dims, s->rank - 1, os->rank);
      if (!c->m || !c->nn) return NULL;
      bool io = lathe_attr_fused_dense_layout(c->n) == LATHE_DENSE_INPUT_OUTPUTS;
      c->wm = (lathe_blas_mat){!io, io ? c->nn : (c->k ? c->k : 1)};
      if (!lathe_blas_fits(c->m, c->nn, c->k, (lathe_blas_mat){false, c->k ? c->k : 1}, c->wm, c->nn))
        return LATHE_UNIMPL("FusedDense: matrices too large for BLAS's int arguments");
      if (!f64 && lathe_blas_has(LATHE_DTYPE_FLOAT32) && lathe_blas_own_f32()) {
        /* one product threaded as a whole (its packed operands shared by all threads), bias and
         * activation applied to each block as it is finished */
        lathe_gemm_epilogue ep = {dense_ep_f32, c};
        bool plain = !lathe_attr_fused_dense_has_bias(c->n) && lathe_attr_fused_dense_activation(c->n) == LATHE_ACTIVATION_NONE;
        lathe_status_t st = lathe_gemm_f32_ep(pool, c->m, c->nn, c->k, c->in[0]->data, c->k, 1, c->in[1]->data,
                                              io ? c->nn : 1, io ? 1 : c->k, c->out[0]->data, c->nn, plain ? NULL : &ep);
        if (!st) return NULL;
        lathe_status_free(st); /* no memory for the packed copies: the row blocks below pack less */
      }
      if (!c->k) memset(c->out[0]->data, 0, c->out[0]->nbytes); /* an empty sum; gemm with k=0 is skipped */
      lathe_parallel_for(pool, c->m, 1 + (1 << 18) / (c->k * c->nn + 1), f64 ? dense_f64 : dense_f32, c);
      return NULL;
    }
    default:
      return LATHE_UNIMPL("%s: not a fused op", lathe_op_name(c->n->op));
  }
}

lathe_status_t lathe_cpu_run_fused(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  if (lathe_cpu_supports_activation(n->op, in[0]->shape.dtype)) return lathe_cpu_run_activation(ex, n, in, out);
  if (n->op == LATHE_OP_FUSED_QUANTIZED_DENSE || n->op == LATHE_OP_QUANTIZED_EMBEDDING_LOOKUP)
    return lathe_cpu_run_quantized(ex, n, in, out);
  if (lathe_cpu_attention_op(n->op)) return lathe_cpu_run_attention(ex, n, in, out);
  lathe_dtype dt = in[0]->shape.dtype;
  fctx c = {.n = n, .in = in, .out = out, .kt = lathe_cpu_exec_kernels(ex)};
  lathe_status_t st;
  if (dt == LATHE_DTYPE_FLOAT32 || dt == LATHE_DTYPE_FLOAT64) {
    st = run_typed(ex, &c, dt == LATHE_DTYPE_FLOAT64);
  } else { /* Float16/BFloat16: widen operands to Float32 tensors, run, narrow the result */
    lathe_tensor *win[3] = {0}, *wout = NULL;
    st = NULL;
    for (int i = 0; i < n->n_operands && !st; i++) st = lathe_cpu_widen_half(in[i], &win[i]);
    if (!st) {
      lathe_shape s = out[0]->shape;
      s.dtype = LATHE_DTYPE_FLOAT32;
      st = lathe_cpu_tensor_new(&s, &wout);
    }
    if (!st) {
      c.in = win;
      c.out = &wout;
      st = run_typed(ex, &c, false);
    }
    if (!st) lathe_cpu_narrow_half(wout, out[0]);
    for (int i = 0; i < 3; i++) lathe_tensor_release(win[i]);
    lathe_tensor_release(wout);
  }
  free(c.norm_off);
  free(c.outer_off);
  return st;
}

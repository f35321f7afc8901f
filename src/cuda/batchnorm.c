/* batchnorm.c -- BatchNormForInference / ForTraining / Gradient on the GPU, with lathe:cpu's
 * arithmetic (src/cpu/batchnorm.c): every dtype computes in double (Float16/BFloat16 stored as
 * 16-bit patterns), per-feature statistics are two-pass (mean, then centred squares), and the
 * output is one fused pass
 *   out = P[c] * (x - Q[c]) + R[c] + S[c] * dy      (dy only for the gradient)
 * with per-feature coefficients computed in double by the kernel that finishes the sums.
 *
 * The operand is [outer, F, inner] around the feature axis. Work is split into units walked by
 * "groups" -- a thread per element when inner < 32 (the feature is a strided column), a warp per
 * chunk of a contiguous run of `inner` elements otherwise -- and the number of groups is a
 * multiple of the number of columns (F*inner, or F*chunks per run), so each group only ever sees
 * one feature: its statistics are plain register sums (warp-shuffled for warps), written once
 * per group, and a second kernel reduces each feature's partial sums with a block or a warp and
 * computes its coefficients. Reads are coalesced in both layouts (NHWC: consecutive threads read
 * consecutive features; NCHW: a warp reads a run). The split depends only on the shape and the
 * device, so results are deterministic. */
#include "kernels/zkernels.h"
#include "numeric.h"

#define BN_BODY LT_CUH_BATCHNORM

/* One source per dtype: the storage type S and its conversions to and from double (as
 * lathe:cpu's row loaders: halves through float). */
static const char bn_f32[] = "typedef float S;\n"
                             "LT_DEV double lt_bn_ld(const S *p, int64_t i) { return (double)p[i]; }\n"
                             "LT_DEV void lt_bn_st(S *p, int64_t i, double v) { p[i] = (float)v; }\n" BN_BODY;
static const char bn_f64[] = "typedef double S;\n"
                             "LT_DEV double lt_bn_ld(const S *p, int64_t i) { return p[i]; }\n"
                             "LT_DEV void lt_bn_st(S *p, int64_t i, double v) { p[i] = v; }\n" BN_BODY;
static const char bn_f16[] = "typedef uint16_t S;\n"
                             "LT_DEV double lt_bn_ld(const S *p, int64_t i) { return (double)lt_f16_to_f32(p[i]); }\n"
                             "LT_DEV void lt_bn_st(S *p, int64_t i, double v) { p[i] = lt_f32_to_f16((float)v); }\n" BN_BODY;
static const char bn_bf16[] = "typedef uint16_t S;\n"
                              "LT_DEV double lt_bn_ld(const S *p, int64_t i) { return (double)lt_bf16_to_f32(p[i]); }\n"
                              "LT_DEV void lt_bn_st(S *p, int64_t i, double v) { p[i] = lt_f32_to_bf16((float)v); }\n" BN_BODY;

void lathe_cuda_sources_batch_norm(lathe_cuda_source_fn fn, void *ctx) {
  fn(ctx, "batchnorm Float32", bn_f32);
  fn(ctx, "batchnorm Float64", bn_f64);
  fn(ctx, "batchnorm Float16", bn_f16);
  fn(ctx, "batchnorm BFloat16", bn_bf16);
}

static const char *source_of(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_FLOAT64: return bn_f64;
    case LATHE_DTYPE_FLOAT16: return bn_f16;
    case LATHE_DTYPE_BFLOAT16: return bn_bf16;
    default: return bn_f32;
  }
}

const char *lathe_cuda_batch_norm_text(lathe_dtype dt) { return source_of(dt); }

/* The kernels' lt_bn_geo. */
typedef struct bn_geo {
  int64_t units, groups, cols, per, inner, len;
} bn_geo;

typedef struct bn_run {
  lathe_cuda_exec *ex;
  const char *src;
  int gs;            /* threads per group: 1 or 32 */
  bn_geo g;
  int64_t f;
  double count, eps;
} bn_run;

/* The split of [outer, f, inner] (count = outer * inner > 0, f > 0) into groups. */
static void plan_split(bn_run *r, int64_t outer, int64_t f, int64_t inner) {
  cuda_dev *d = lathe_cuda_exec_dev(r->ex);
  int64_t threads = (int64_t)(d->sm_count > 0 ? d->sm_count : 16) * 1024; /* enough to fill the GPU */
  bn_geo *g = &r->g;
  memset(g, 0, sizeof *g);
  g->inner = inner;
  int64_t want;
  if (inner < 32) { /* a thread per element; columns are the f*inner positions of a row */
    r->gs = 1;
    g->per = inner;
    g->len = 1;
    want = threads;
  } else { /* a warp per chunk; enough chunks per run to give every warp work */
    r->gs = 32;
    int64_t runs = outer * f, warps = threads / 32, q = (warps + runs - 1) / runs, qmax = (inner + 31) / 32;
    if (q > qmax) q = qmax;
    if (q < 1) q = 1;
    int64_t len = (inner + q - 1) / q;
    g->len = (len + 31) / 32 * 32;
    g->per = (inner + g->len - 1) / g->len;
    want = warps;
  }
  g->cols = f * g->per;
  g->units = outer * g->cols;
  int64_t rows = want / g->cols; /* groups per column */
  if (rows < 1) rows = 1;
  if (rows > outer) rows = outer;
  g->groups = g->cols * rows;
}

static lathe_status_t launch_groups(bn_run *r, const char *name, void **args) {
  lcuFunction fn;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(r->ex), r->src, name, &fn));
  int64_t blocks = (r->g.groups * r->gs + 255) / 256;
  if (blocks > INT32_MAX) return LATHE_UNIMPL("BatchNorm: %lld thread blocks are too many for one launch", (long long)blocks);
  return lathe_cuda_launch(r->ex, fn, (unsigned)blocks, 256, 0, args);
}

/* Partial sums (mode 0, 1 or 2 of bn_part) into part; the centre is qd (doubles) or qs. */
static lathe_status_t partial(bn_run *r, int mode, const lathe_tensor *x, const lathe_tensor *dy, lcuDeviceptr pqd,
                              const lathe_tensor *qs, lathe_tensor *part) {
  char name[32];
  snprintf(name, sizeof name, "lt_bn_part_%d_%d", r->gs, mode);
  lcuDeviceptr px = lathe_cuda_ptr(x), pdy = dy ? lathe_cuda_ptr(dy) : 0, pqs = qs ? lathe_cuda_ptr(qs) : 0,
               pp = lathe_cuda_ptr(part);
  void *args[] = {&px, &pdy, &pqd, &pqs, &pp, &r->g};
  return launch_groups(r, name, args);
}

/* Sums of each feature (m partial sums; none when count is 0), then its coefficients (mode of
 * lt_bn_coef) into coef and the outputs o1, o2. */
static lathe_status_t finish(bn_run *r, int mode, const lathe_tensor *part, const lathe_tensor *v0,
                             const lathe_tensor *v1, const lathe_tensor *v2, lathe_tensor *coef, lathe_tensor *o1,
                             lathe_tensor *o2) {
  lcuFunction fn;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(r->ex), r->src, "lt_bn_finish", &fn));
  int64_t m = r->count > 0 ? r->g.groups / r->g.cols * r->g.per : 0;
  int two = mode == 2, gsize = m >= 1024 ? 256 : m > 2 ? 32 : 1;
  int64_t per_block = 256 / gsize, blocks = (r->f + per_block - 1) / per_block;
  if (blocks > 65535 * 8) blocks = 65535 * 8; /* the kernel loops over the rest */
  lcuDeviceptr pp = part ? lathe_cuda_ptr(part) : 0, p0 = v0 ? lathe_cuda_ptr(v0) : 0, p1 = v1 ? lathe_cuda_ptr(v1) : 0,
               p2 = v2 ? lathe_cuda_ptr(v2) : 0, pc = lathe_cuda_ptr(coef), q1 = o1 ? lathe_cuda_ptr(o1) : 0,
               q2 = o2 ? lathe_cuda_ptr(o2) : 0;
  void *args[] = {&pp, &two, &r->g, &r->f, &m, &gsize, &mode, &r->count, &r->eps, &p0, &p1, &p2, &pc, &q1, &q2};
  return lathe_cuda_launch(r->ex, fn, (unsigned)blocks, 256, 0, args);
}

/* The output pass (mode of bn_apply). */
static lathe_status_t apply(bn_run *r, int mode, const lathe_tensor *x, const lathe_tensor *dy, lathe_tensor *y,
                            const lathe_tensor *coef, lathe_tensor *const *v) {
  if (r->count == 0) return NULL;
  char name[32];
  snprintf(name, sizeof name, "lt_bn_apply_%d_%d", r->gs, mode);
  lcuDeviceptr px = lathe_cuda_ptr(x), pdy = dy ? lathe_cuda_ptr(dy) : 0, py = lathe_cuda_ptr(y),
               pc = coef ? lathe_cuda_ptr(coef) : 0, pv[4] = {0, 0, 0, 0};
  for (int i = 0; v && i < 4; i++) pv[i] = lathe_cuda_ptr(v[i]);
  void *args[] = {&px, &pdy, &py, &pc, &r->f, &pv[0], &pv[1], &pv[2], &pv[3], &r->eps, &r->g};
  return launch_groups(r, name, args);
}

lathe_status_t lathe_cuda_batch_norm(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                     lathe_tensor **out) {
  const lathe_tensor *x = in[0];
  const lathe_shape *s = &x->shape;
  int axis = (int)lathe_attr_batch_norm_feature_axis(n);
  int64_t outer = lathe_dims_product(s->dims, 0, axis), f = s->dims[axis],
          inner = lathe_dims_product(s->dims, axis + 1, s->rank);
  if (f == 0) return NULL; /* every output is empty */
  bn_run r = {.ex = ex, .src = source_of(s->dtype), .f = f, .count = (double)(outer * inner),
              .eps = lathe_attr_batch_norm_epsilon(n)};
  if (r.count > 0) {
    plan_split(&r, outer, f, inner);
  } else { /* no values: no partial sums, NaN statistics as on lathe:cpu (0/0) */
    r.gs = 1;
    r.g.cols = r.g.per = r.g.groups = 1;
  }
  if (n->op == LATHE_OP_BATCH_NORM_FOR_INFERENCE) return apply(&r, 0, x, NULL, out[0], NULL, in + 1);
  lathe_tensor *part = NULL, *coef = NULL;
  bool grad = n->op == LATHE_OP_BATCH_NORM_GRADIENT;
  LATHE_RETURN_IF_ERROR(lathe_cuda_numeric_scratch(ex, LATHE_DTYPE_FLOAT64, 4 * f, &coef));
  if (r.count > 0) LATHE_RETURN_IF_ERROR(lathe_cuda_numeric_scratch(ex, LATHE_DTYPE_FLOAT64, (grad ? 2 : 1) * r.g.groups, &part));
  if (grad) { /* in: operand, scale, mean, variance, grad_output */
    if (part) LATHE_RETURN_IF_ERROR(partial(&r, 2, x, in[4], 0, in[2], part));
    LATHE_RETURN_IF_ERROR(finish(&r, 2, part, in[1], in[2], in[3], coef, out[1], out[2]));
    return apply(&r, 2, x, in[4], out[0], coef, NULL);
  }
  /* training; in: operand, scale, offset */
  if (part) LATHE_RETURN_IF_ERROR(partial(&r, 0, x, NULL, 0, NULL, part));
  LATHE_RETURN_IF_ERROR(finish(&r, 0, part, NULL, NULL, NULL, coef, NULL, NULL));
  if (part) /* centred on Q, coef's second quarter */
    LATHE_RETURN_IF_ERROR(partial(&r, 1, x, NULL, lathe_cuda_ptr(coef) + (lcuDeviceptr)(8 * f), NULL, part));
  LATHE_RETURN_IF_ERROR(finish(&r, 1, part, in[1], in[2], NULL, coef, out[1], out[2]));
  return apply(&r, 1, x, NULL, out[0], coef, NULL);
}

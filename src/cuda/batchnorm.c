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
#include "numeric.h"

#define BN_BODY                                                                                                       \
  "struct lt_bn_geo { int64_t units, groups, cols, per, inner, len; };\n"                                             \
  "LT_DEV int64_t lt_bn_group(int gs) { return ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / gs; }\n"           \
  "/* the feature of group grp: groups is a multiple of cols, so it never changes */\n"                               \
  "LT_DEV int64_t lt_bn_feature(const lt_bn_geo &g, int64_t grp) { return (grp % g.cols) / g.per; }\n"             \
  "/* f(e) for every element of group grp: units are elements (GS 1), or chunks of len elements of\n"                \
  " * a run of inner (GS 32: per chunks per run) */\n"                                                                \
  "template <int GS, typename Fn> LT_DEV void lt_bn_walk(const lt_bn_geo &g, int64_t grp, Fn f) {\n"                 \
  "  if constexpr (GS == 1) {\n"                                                                                      \
  "    for (int64_t e = grp; e < g.units; e += g.groups) f(e);\n"                                                     \
  "  } else {\n"                                                                                                      \
  "    int lane = threadIdx.x & 31;\n"                                                                                \
  "    for (int64_t u = grp; u < g.units; u += g.groups) {\n"                                                         \
  "      int64_t s = u / g.per, start = s * g.inner + (u - s * g.per) * g.len, end = start + g.len, lim = (s + 1) * g.inner;\n" \
  "      if (end > lim) end = lim;\n"                                                                                 \
  "      for (int64_t e = start + lane; e < end; e += 32) f(e);\n"                                                    \
  "    }\n"                                                                                                           \
  "  }\n"                                                                                                             \
  "}\n"                                                                                                               \
  "/* partial sums per group: MODE 0 sum x; 1 sum (x-q)^2; 2 sum dy and sum dy*(x-q) */\n"                          \
  "template <int GS, int MODE> __device__ void bn_part(const S *x, const S *dy, const double *qd, const S *qs,\n"    \
  "                                                    double *part, lt_bn_geo g) {\n"                                \
  "  int64_t grp = lt_bn_group(GS);\n"                                                                                \
  "  if (grp >= g.groups) return;\n"                                                                                  \
  "  int64_t c = lt_bn_feature(g, grp);\n"                                                                            \
  "  double q = MODE == 0 ? 0.0 : qd ? qd[c] : lt_bn_ld(qs, c), a0 = 0, a1 = 0;\n"                                   \
  "  lt_bn_walk<GS>(g, grp, [&](int64_t e) {\n"                                                                       \
  "    double v = lt_bn_ld(x, e);\n"                                                                                  \
  "    if constexpr (MODE == 0) a0 += v;\n"                                                                           \
  "    else if constexpr (MODE == 1) { double d = v - q; a0 += d * d; }\n"                                           \
  "    else { double t = lt_bn_ld(dy, e); a0 += t; a1 += t * (v - q); }\n"                                            \
  "  });\n"                                                                                                           \
  "  if constexpr (GS == 32) {\n"                                                                                     \
  "    for (int o = 16; o > 0; o >>= 1) {\n"                                                                          \
  "      a0 += __shfl_down_sync(0xffffffffu, a0, o);\n"                                                               \
  "      a1 += __shfl_down_sync(0xffffffffu, a1, o);\n"                                                               \
  "    }\n"                                                                                                           \
  "    if (threadIdx.x & 31) return;\n"                                                                               \
  "  }\n"                                                                                                             \
  "  part[grp] = a0;\n"                                                                                               \
  "  if (MODE == 2) part[g.groups + grp] = a1;\n"                                                                     \
  "}\n"                                                                                                               \
  "/* feature c's coefficients from its sums. mode 0 (training, pass 1): Q = mean; mode 1\n"                         \
  " * (training, pass 2; v0 scale, v1 offset): P, R, outputs mean and variance; mode 2 (gradient;\n"                 \
  " * v0 scale, v1 mean, v2 variance): P, Q, R, S, outputs grad_scale and grad_offset */\n"                          \
  "LT_DEV void lt_bn_coef(int mode, int64_t c, int64_t f, double a0, double a1, double count, double eps,\n"          \
  "                       const S *v0, const S *v1, const S *v2, double *coef, S *o1, S *o2) {\n"                     \
  "  double *P = coef, *Q = coef + f, *R = coef + 2 * f, *Sc = coef + 3 * f;\n"                                       \
  "  if (mode == 0) {\n"                                                                                              \
  "    Q[c] = a0 / count;\n"                                                                                          \
  "  } else if (mode == 1) {\n"                                                                                       \
  "    double var = a0 / count, mean = Q[c];\n"                                                                       \
  "    P[c] = lt_bn_ld(v0, c) / sqrt(var + eps);\n"                                                                   \
  "    R[c] = lt_bn_ld(v1, c);\n"                                                                                     \
  "    lt_bn_st(o1, c, mean);\n"                                                                                      \
  "    lt_bn_st(o2, c, var);\n"                                                                                       \
  "  } else {\n"                                                                                                      \
  "    double scale = lt_bn_ld(v0, c), inv = 1 / sqrt(lt_bn_ld(v2, c) + eps), g_off = a0, g_scale = a1 * inv;\n"     \
  "    /* dx = scale*inv * (dy - mean(dy) - xhat * mean(dy*xhat)), xhat = (x-mean)*inv */\n"                          \
  "    Sc[c] = scale * inv;\n"                                                                                        \
  "    P[c] = -scale * inv * inv * g_scale / count;\n"                                                                \
  "    Q[c] = lt_bn_ld(v1, c);\n"                                                                                     \
  "    R[c] = -scale * inv * g_off / count;\n"                                                                        \
  "    lt_bn_st(o1, c, g_scale);\n"                                                                                   \
  "    lt_bn_st(o2, c, g_off);\n"                                                                                     \
  "  }\n"                                                                                                             \
  "}\n"                                                                                                               \
  "/* sums each feature's m partial sums (two arrays when two) with gsize threads, then its\n"                       \
  " * coefficients; a block holds 256/gsize features */\n"                                                            \
  "extern \"C\" __global__ void lt_bn_finish(const double *part, int two, const __grid_constant__ lt_bn_geo g, int64_t f, int64_t m, int gsize,\n" \
  "                                        int mode, double count, double eps, const S *v0, const S *v1, const S *v2,\n" \
  "                                        double *coef, S *o1, S *o2) {\n"                                             \
  "  __shared__ double s0[256], s1[256];\n"                                                                           \
  "  int t = threadIdx.x, per_block = blockDim.x / gsize, lane = t % gsize;\n"                                        \
  "  for (int64_t c0 = (int64_t)blockIdx.x * per_block; c0 < f; c0 += (int64_t)gridDim.x * per_block) {\n"           \
  "    int64_t c = c0 + t / gsize;\n"                                                                                 \
  "    double a0 = 0, a1 = 0;\n"                                                                                      \
  "    if (c < f)\n"                                                                                                  \
  "      for (int64_t j = lane; j < m; j += gsize) {\n"                                                               \
  "        int64_t i = (j / g.per) * g.cols + c * g.per + j % g.per; /* the group's index */\n"                       \
  "        a0 += part[i];\n"                                                                                          \
  "        if (two) a1 += part[g.groups + i];\n"                                                                      \
  "      }\n"                                                                                                         \
  "    s0[t] = a0, s1[t] = a1;\n"                                                                                     \
  "    __syncthreads();\n"                                                                                            \
  "    for (int s = gsize / 2; s > 0; s >>= 1) {\n"                                                                   \
  "      if (lane < s) s0[t] += s0[t + s], s1[t] += s1[t + s];\n"                                                     \
  "      __syncthreads();\n"                                                                                          \
  "    }\n"                                                                                                           \
  "    if (c < f && lane == 0) lt_bn_coef(mode, c, f, s0[t], s1[t], count, eps, v0, v1, v2, coef, o1, o2);\n"         \
  "    __syncthreads();\n"                                                                                            \
  "  }\n"                                                                                                             \
  "}\n"                                                                                                               \
  "/* the output pass: MODE 0 inference (coefficients from v0 scale, v1 offset, v2 mean, v3\n"                       \
  " * variance); 1 from coef; 2 from coef, with dy */\n"                                                              \
  "template <int GS, int MODE> __device__ void bn_apply(const S *x, const S *dy, S *y, const double *coef, int64_t f,\n" \
  "                                                     const S *v0, const S *v1, const S *v2, const S *v3, double eps,\n" \
  "                                                     lt_bn_geo g) {\n"                                               \
  "  int64_t grp = lt_bn_group(GS);\n"                                                                                \
  "  if (grp >= g.groups) return;\n"                                                                                  \
  "  int64_t c = lt_bn_feature(g, grp);\n"                                                                            \
  "  double p, q, r, s = 0;\n"                                                                                        \
  "  if constexpr (MODE == 0) {\n"                                                                                    \
  "    p = lt_bn_ld(v0, c) / sqrt(lt_bn_ld(v3, c) + eps), q = lt_bn_ld(v2, c), r = lt_bn_ld(v1, c);\n"                \
  "  } else {\n"                                                                                                      \
  "    p = coef[c], q = coef[f + c], r = coef[2 * f + c];\n"                                                          \
  "    if (MODE == 2) s = coef[3 * f + c];\n"                                                                         \
  "  }\n"                                                                                                             \
  "  lt_bn_walk<GS>(g, grp, [&](int64_t e) {\n"                                                                       \
  "    double v = p * (lt_bn_ld(x, e) - q) + r;\n"                                                                    \
  "    if constexpr (MODE == 2) v += s * lt_bn_ld(dy, e);\n"                                                          \
  "    lt_bn_st(y, e, v);\n"                                                                                          \
  "  });\n"                                                                                                           \
  "}\n"                                                                                                               \
  "#define LT_BN(gs, m)                                                                                        \\\n"  \
  "  extern \"C\" __global__ void lt_bn_part_##gs##_##m(const S *x, const S *dy, const double *qd, const S *qs,   \\\n" \
  "                                                  double *p, const __grid_constant__ lt_bn_geo g) { bn_part<gs, m>(x, dy, qd, qs, p, g); } \\\n" \
  "  extern \"C\" __global__ void lt_bn_apply_##gs##_##m(const S *x, const S *dy, S *y, const double *c, int64_t f, \\\n" \
  "      const S *v0, const S *v1, const S *v2, const S *v3, double eps, const __grid_constant__ lt_bn_geo g) {                        \\\n"  \
  "    bn_apply<gs, m>(x, dy, y, c, f, v0, v1, v2, v3, eps, g);                                              \\\n"  \
  "  }\n"                                                                                                             \
  "LT_BN(1, 0) LT_BN(1, 1) LT_BN(1, 2) LT_BN(32, 0) LT_BN(32, 1) LT_BN(32, 2)\n"

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
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel(lathe_cuda_exec_dev(r->ex), r->src, name, &fn));
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
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel(lathe_cuda_exec_dev(r->ex), r->src, "lt_bn_finish", &fn));
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

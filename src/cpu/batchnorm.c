/* batchnorm.c -- BatchNormForInference / ForTraining / Gradient on the CPU.
 *
 * The operand is seen as [outer, F, inner] around the feature axis. Every dtype computes in
 * double (Float16/BFloat16/Float32 included), converting rows through the float row loaders.
 * Per-feature sums are two-pass (mean, then centred squares) and are reduced from fixed
 * partial sums, so results do not depend on the thread count. Elementwise passes are
 *   out = P[c] * (x - Q[c]) + R[c] + S[c] * dy      (dy only for the gradient)
 * with per-feature coefficients computed once. */
#include <math.h>
#include <stdatomic.h>

#include "numeric.h"

enum { CHUNK = 2048 }; /* elements converted to double at a time */

typedef struct geom {
  int64_t outer, f, inner;
} geom;

static geom geom_of(const lathe_shape *s, int axis) {
  return (geom){lathe_dims_product(s->dims, 0, axis), s->dims[axis], lathe_dims_product(s->dims, axis + 1, s->rank)};
}

/* ---- per-feature sums ---- */
typedef enum { SUM_X, SUM_SQ_DEV, SUM_GRAD } sum_kind; /* Σx; Σ(x-Q)²; Σdy and Σdy(x-Q) */

typedef struct sum_ctx {
  geom g;
  sum_kind kind;
  const void *x, *dy;
  int bytes;
  lathe_num_load_fn load;
  const double *q;     /* per-feature centre */
  int64_t nb, cb;      /* blocks over outer and over features */
  double *partial;     /* [nb][f][2] */
  atomic_int oom;
} sum_ctx;

static void sum_units(void *vctx, int64_t begin, int64_t end) {
  sum_ctx *c = vctx;
  double *xb = malloc(sizeof(double) * 2 * CHUNK), *db = xb + CHUNK;
  if (!xb) {
    atomic_store(&c->oom, 1);
    return;
  }
  const geom g = c->g;
  for (int64_t u = begin; u < end; u++) {
    int64_t bo = u / c->cb, bc = u % c->cb;
    int64_t o0 = g.outer * bo / c->nb, o1 = g.outer * (bo + 1) / c->nb;
    int64_t c0 = g.f * bc / c->cb, c1 = g.f * (bc + 1) / c->cb;
    double *acc = c->partial + bo * g.f * 2;
    for (int64_t ch = c0; ch < c1; ch++) acc[2 * ch] = acc[2 * ch + 1] = 0;
    for (int64_t o = o0; o < o1; o++) {
      /* features [c0, c1) of row o are one contiguous run */
      int64_t start = (o * g.f + c0) * g.inner, len = (c1 - c0) * g.inner, ch = c0, i = 0;
      for (int64_t done = 0; done < len;) {
        int64_t m = len - done < CHUNK ? len - done : CHUNK;
        c->load((const char *)c->x + (start + done) * c->bytes, m, xb);
        if (c->kind == SUM_GRAD) c->load((const char *)c->dy + (start + done) * c->bytes, m, db);
        for (int64_t j = 0; j < m; j++) {
          switch (c->kind) {
            case SUM_X: acc[2 * ch] += xb[j]; break;
            case SUM_SQ_DEV: {
              double d = xb[j] - c->q[ch];
              acc[2 * ch] += d * d;
              break;
            }
            case SUM_GRAD:
              acc[2 * ch] += db[j];
              acc[2 * ch + 1] += db[j] * (xb[j] - c->q[ch]);
              break;
          }
          if (++i == g.inner) i = 0, ch++;
        }
        done += m;
      }
    }
  }
  free(xb);
}

/* sums[2*f]: per feature {first sum, second sum}. */
static lathe_status_t feature_sums(lathe_cpu_exec *ex, geom g, sum_kind kind, const lathe_tensor *x,
                                   const lathe_tensor *dy, const double *q, double *sums) {
  lathe_pool *pool = lathe_cpu_exec_pool(ex);
  int64_t t = lathe_pool_threads(pool), want = 4 * t;
  sum_ctx c = {.g = g, .kind = kind, .x = x->data, .dy = dy ? dy->data : NULL,
               .bytes = lathe_dtype_bits(x->shape.dtype) / 8, .load = lathe_num_real_loader(x->shape.dtype), .q = q};
  c.nb = g.outer < want ? (g.outer > 0 ? g.outer : 1) : want;
  c.cb = c.nb >= 2 * t ? 1 : (want + c.nb - 1) / c.nb;
  if (c.cb > g.f) c.cb = g.f > 0 ? g.f : 1;
  c.partial = calloc((size_t)(c.nb * g.f * 2 + 1), sizeof(double));
  if (!c.partial) return LATHE_OOM("BatchNorm");
  atomic_init(&c.oom, 0);
  int64_t per_unit = g.outer * g.f * g.inner / (c.nb * c.cb) + 1;
  int64_t grain = 32768 / per_unit;
  lathe_parallel_for(pool, c.nb * c.cb, grain > 0 ? grain : 1, sum_units, &c);
  if (atomic_load(&c.oom)) {
    free(c.partial);
    return LATHE_OOM("BatchNorm");
  }
  memset(sums, 0, sizeof(double) * 2 * (size_t)g.f);
  for (int64_t b = 0; b < c.nb; b++)
    for (int64_t k = 0; k < 2 * g.f; k++) sums[k] += c.partial[b * g.f * 2 + k];
  free(c.partial);
  return NULL;
}

/* ---- elementwise pass ---- */
typedef struct ew_ctx {
  geom g;
  const void *x, *dy;
  void *out;
  int bytes;
  lathe_num_load_fn load;
  lathe_num_store_fn store;
  const double *p, *q, *r, *s; /* per-feature coefficients; s only with dy */
  atomic_int oom;
} ew_ctx;

static void ew_range(void *vctx, int64_t begin, int64_t end) {
  ew_ctx *c = vctx;
  double *xb = malloc(sizeof(double) * 2 * CHUNK), *db = xb + CHUNK;
  if (!xb) {
    atomic_store(&c->oom, 1);
    return;
  }
  int64_t ch = (begin / c->g.inner) % c->g.f, i = begin % c->g.inner;
  for (int64_t at = begin; at < end;) {
    int64_t m = end - at < CHUNK ? end - at : CHUNK;
    c->load((const char *)c->x + at * c->bytes, m, xb);
    if (c->dy) c->load((const char *)c->dy + at * c->bytes, m, db);
    for (int64_t j = 0; j < m; j++) {
      double v = c->p[ch] * (xb[j] - c->q[ch]) + c->r[ch];
      if (c->dy) v += c->s[ch] * db[j];
      xb[j] = v;
      if (++i == c->g.inner) {
        i = 0;
        if (++ch == c->g.f) ch = 0;
      }
    }
    c->store(xb, m, (char *)c->out + at * c->bytes);
    at += m;
  }
  free(xb);
}

static lathe_status_t elementwise(lathe_cpu_exec *ex, geom g, const lathe_tensor *x, const lathe_tensor *dy,
                                  lathe_tensor *out, const double *p, const double *q, const double *r,
                                  const double *s) {
  ew_ctx c = {.g = g, .x = x->data, .dy = dy ? dy->data : NULL, .out = out->data,
              .bytes = lathe_dtype_bits(x->shape.dtype) / 8, .load = lathe_num_real_loader(x->shape.dtype),
              .store = lathe_num_real_storer(out->shape.dtype), .p = p, .q = q, .r = r, .s = s};
  atomic_init(&c.oom, 0);
  int64_t total = g.outer * g.f * g.inner;
  if (total == 0) return NULL;
  lathe_parallel_for(lathe_cpu_exec_pool(ex), total, 32768, ew_range, &c);
  return atomic_load(&c.oom) ? LATHE_OOM("BatchNorm") : NULL;
}

/* ---- the three ops ---- */
lathe_status_t lathe_cpu_batch_norm(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                    lathe_tensor **out) {
  const lathe_tensor *x = in[0];
  geom g = geom_of(&x->shape, (int)lathe_attr_batch_norm_feature_axis(n));
  double eps = lathe_attr_batch_norm_epsilon(n), count = (double)(g.outer * g.inner);
  int64_t f = g.f;
  lathe_num_load_fn load = lathe_num_real_loader(x->shape.dtype);
  lathe_num_store_fn store = lathe_num_real_storer(x->shape.dtype);
  /* per-feature vectors: inputs (up to 4), sums (2f), coefficients (4) */
  double *buf = malloc(sizeof(double) * (size_t)(12 * f + 1));
  if (!buf) return LATHE_OOM(lathe_op_name(n->op));
  double *v0 = buf, *v1 = v0 + f, *v2 = v1 + f, *v3 = v2 + f, *sums = v3 + f, *p = sums + 2 * f, *q = p + f,
         *r = q + f, *s = r + f, *t1 = s + f, *t2 = t1 + f;
  lathe_status_t st = NULL;
  switch (n->op) {
    case LATHE_OP_BATCH_NORM_FOR_INFERENCE: { /* in: operand, scale, offset, mean, variance */
      load(in[1]->data, f, v0), load(in[2]->data, f, v1), load(in[3]->data, f, v2), load(in[4]->data, f, v3);
      for (int64_t c = 0; c < f; c++) p[c] = v0[c] / sqrt(v3[c] + eps), q[c] = v2[c], r[c] = v1[c];
      st = elementwise(ex, g, x, NULL, out[0], p, q, r, NULL);
      break;
    }
    case LATHE_OP_BATCH_NORM_FOR_TRAINING: { /* in: operand, scale, offset */
      load(in[1]->data, f, v0), load(in[2]->data, f, v1);
      st = feature_sums(ex, g, SUM_X, x, NULL, NULL, sums);
      for (int64_t c = 0; c < f; c++) t1[c] = sums[2 * c] / count;
      if (!st) st = feature_sums(ex, g, SUM_SQ_DEV, x, NULL, t1, sums);
      if (st) break;
      for (int64_t c = 0; c < f; c++) {
        t2[c] = sums[2 * c] / count;
        p[c] = v0[c] / sqrt(t2[c] + eps), q[c] = t1[c], r[c] = v1[c];
      }
      st = elementwise(ex, g, x, NULL, out[0], p, q, r, NULL);
      store(t1, f, out[1]->data);
      store(t2, f, out[2]->data);
      break;
    }
    case LATHE_OP_BATCH_NORM_GRADIENT: { /* in: operand, scale, mean, variance, grad_output */
      load(in[1]->data, f, v0), load(in[2]->data, f, v1), load(in[3]->data, f, v2);
      st = feature_sums(ex, g, SUM_GRAD, x, in[4], v1, sums);
      if (st) break;
      for (int64_t c = 0; c < f; c++) {
        double inv = 1 / sqrt(v2[c] + eps), g_off = sums[2 * c], g_scale = sums[2 * c + 1] * inv;
        t1[c] = g_scale, t2[c] = g_off;
        /* dx = scale*inv * (dy - mean(dy) - xhat * mean(dy*xhat)), xhat = (x-mean)*inv */
        s[c] = v0[c] * inv;
        p[c] = -v0[c] * inv * inv * g_scale / count;
        q[c] = v1[c];
        r[c] = -v0[c] * inv * g_off / count;
      }
      if (count > 0) st = elementwise(ex, g, x, in[4], out[0], p, q, r, s);
      store(t1, f, out[1]->data);
      store(t2, f, out[2]->data);
      break;
    }
    default:
      st = LATHE_UNIMPL("%s: not a BatchNorm op", lathe_op_name(n->op));
  }
  free(buf);
  return st;
}

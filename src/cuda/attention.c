/* attention.c -- FusedScaledDotProductAttention, its VJP and FusedAttentionQKVProjection on the
 * GPU.
 *
 * Design: batched GEMMs + a softmax kernel (not a flash-style kernel), so the products run on
 * cuBLASLt. Work goes by chunks of query rows: for a set of (batch, head) pairs whose query,
 * key and value matrices lie at one stride from each other (all pairs in BHSD; per batch or per
 * head in BSHD; GQA by the query heads' position in their group), one product makes the
 * [pairs, rows, kvLen] scores, a row kernel turns them into probabilities (scale, bias, additive
 * or Bool mask, causality, sequence-length padding, max-subtracted exponentials) and writes the
 * logsumexp, and a second product multiplies them into the values, straight into the output.
 * Chunks bound the scores' memory (SCORE_BUDGET), so any sequence length runs.
 * The VJP recomputes probabilities from the logsumexp (no stored scores): per chunk, scores and
 * dP = dOutput . V^T, a kernel makes P and dS = P (dP - delta) scale (delta = rowsum(dOutput *
 * output)), then dV += P^T dOutput and dKey += dS^T Query accumulate in place (the pairs of one
 * product never share a kv head, and products run in order on the stream), dQuery = dS . Key.
 * Float16/BFloat16 operands are widened to Float32 copies around the Float32 path and results
 * rounded once, as lathe:cpu does; the logsumexp is Float32 (Float64 for Float64). */
#include <math.h>
#include <stdio.h>

#include "gemm.h"
#include "kernels/zkernels.h"

bool lathe_cuda_attention_op(lathe_op op) {
  return op == LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION || op == LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP ||
         op == LATHE_OP_FUSED_ATTENTION_QKV_PROJECTION;
}

/* Kernel arguments (host image of lt_att; 8-byte fields). */
typedef struct att_args {
  int64_t B, H, S, Skv, D, group;
  int64_t p0, dp; /* pair of batch entry t: p0 + t * dp = b * H + h */
  int64_t i0, sq; /* query rows [i0, i0 + sq) */
  int64_t ms[4], bs[4];
  double scale;
  int64_t causal, has_amask, has_bmask, has_bias, has_lens;
  int64_t qss, qhs, qbs; /* query/output strides (delta kernel) */
} att_args;

static const char att_src[] = LT_CUH_ATTENTION;

/* The family's kernel text, made once (kernels are found by its address: lathe_cuda_kernel_lasting). */
static const char *source;
static pthread_once_t source_once = PTHREAD_ONCE_INIT;
static void make_source(void) {
  lt_text t = {0};
  lt_put(&t, "%s%s%s", lathe_cuda_access_source(), lathe_cuda_reduce_source(), att_src);
  if (!t.oom) source = t.s;
}

static lathe_status_t att_kernel(lathe_cuda_exec *ex, const char *what, bool f64, lcuFunction *f) {
  pthread_once(&source_once, make_source);
  if (!source) return LATHE_OOM("lathe:cuda: codegen");
  char name[64];
  snprintf(name, sizeof name, "lt_att_%s_%s", what, f64 ? "Float64" : "Float32");
  return lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), source, name, f);
}

void lathe_cuda_sources_attention(lathe_cuda_source_fn fn, void *ctx) {
  lt_text t = {0};
  lt_put(&t, "%s%s%s", lathe_cuda_access_source(), lathe_cuda_reduce_source(), att_src);
  if (!t.oom) fn(ctx, "attention", t.s);
  free(t.s);
}

/* ---- geometry ---- */
typedef struct att {
  att_args a;
  int64_t Hkv, qss, qhs, qbs, kss, khs, kbs;
  bool f64, bhsd;
  lathe_dtype dt; /* what the kernels compute in: Float32 or Float64 */
  lcuDeviceptr q, k, v, amask, bmask, bias, qlen, kvlen;
} att;

static int64_t q_off(const att *c, int64_t p) { return p / c->a.H * c->qbs + p % c->a.H * c->qhs; }
static int64_t k_off(const att *c, int64_t p) { return p / c->a.H * c->kbs + p % c->a.H / c->a.group * c->khs; }

/* Strides over [batch, heads, seq, kvLen] of a rank-2..4 mask or bias, right-aligned and 0 where
 * it broadcasts; a BSHD rank-4 mask is [batch, seq, heads, kvLen]. */
static void broadcast_strides(const lathe_shape *s, bool bshd_mask, int64_t *out) {
  int64_t st[LATHE_MAX_RANK];
  lathe_cuda_row_strides(s, st);
  int off = 4 - s->rank;
  for (int a = 0; a < 4; a++) out[a] = a < off || s->dims[a - off] == 1 ? 0 : st[a - off];
  if (bshd_mask && s->rank == 4) {
    int64_t t = out[1];
    out[1] = out[2], out[2] = t;
  }
}

static bool is_half(lathe_dtype dt) { return dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16; }

/* t's data as the compute dtype: itself, or a widened Float32 copy of a half tensor. */
static lathe_status_t as_compute(lathe_cuda_exec *ex, const lathe_tensor *t, lcuDeviceptr *out) {
  if (!is_half(t->shape.dtype)) {
    *out = lathe_cuda_ptr(t);
    return NULL;
  }
  int64_t n = lathe_shape_size(&t->shape);
  LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_FLOAT32, n, out, NULL));
  lathe_dtype path[2] = {t->shape.dtype, LATHE_DTYPE_FLOAT32};
  return lathe_cuda_convert(ex, lathe_cuda_ptr(t), *out, path, 2, n, NULL, NULL, 0);
}

static lathe_status_t geometry(lathe_cuda_exec *ex, att *c, const lathe_node *n, lathe_tensor *const *in, bool vjp) {
  memset(c, 0, sizeof *c);
  const lathe_shape *qs = &in[0]->shape, *ks = &in[1]->shape;
  c->bhsd = lathe_attr_sdpa_layout(n) == LATHE_ATTENTION_LAYOUT_BHSD;
  c->f64 = qs->dtype == LATHE_DTYPE_FLOAT64;
  c->dt = c->f64 ? LATHE_DTYPE_FLOAT64 : LATHE_DTYPE_FLOAT32;
  int sa = c->bhsd ? 2 : 1, ha = 3 - sa;
  att_args *a = &c->a;
  a->B = qs->dims[0], a->H = qs->dims[ha], a->S = qs->dims[sa], a->D = qs->dims[3];
  c->Hkv = ks->dims[ha], a->Skv = ks->dims[sa];
  a->group = c->Hkv ? a->H / c->Hkv : 1;
  c->qss = c->bhsd ? a->D : a->H * a->D, c->qhs = c->bhsd ? a->S * a->D : a->D, c->qbs = a->H * a->S * a->D;
  c->kss = c->bhsd ? a->D : c->Hkv * a->D, c->khs = c->bhsd ? a->Skv * a->D : a->D, c->kbs = c->Hkv * a->Skv * a->D;
  a->qss = c->qss, a->qhs = c->qhs, a->qbs = c->qbs;
  a->causal = lathe_attr_sdpa_causal(n);
  double scale = lathe_attr_sdpa_scale(n);
  a->scale = scale != 0 ? scale : a->D ? 1.0 / sqrt((double)a->D) : 1.0;
  LATHE_RETURN_IF_ERROR(as_compute(ex, in[0], &c->q));
  LATHE_RETURN_IF_ERROR(as_compute(ex, in[1], &c->k));
  LATHE_RETURN_IF_ERROR(as_compute(ex, in[2], &c->v));
  int next = vjp ? 6 : 3;
  if (lathe_attr_sdpa_has_mask(n)) {
    const lathe_tensor *mk = in[next++];
    if (mk->shape.dtype == LATHE_DTYPE_BOOL) {
      c->bmask = lathe_cuda_ptr(mk), a->has_bmask = 1;
    } else {
      LATHE_RETURN_IF_ERROR(as_compute(ex, mk, &c->amask));
      a->has_amask = 1;
    }
    broadcast_strides(&mk->shape, !c->bhsd, a->ms);
  }
  if (lathe_attr_sdpa_has_seq_lens(n)) {
    c->qlen = lathe_cuda_ptr(in[next++]);
    c->kvlen = lathe_cuda_ptr(in[next++]);
    a->has_lens = 1;
  }
  if (lathe_attr_sdpa_has_bias(n)) {
    LATHE_RETURN_IF_ERROR(as_compute(ex, in[next], &c->bias));
    broadcast_strides(&in[next]->shape, false, a->bs);
    a->has_bias = 1;
  }
  return NULL;
}

/* Batches of (batch, head) pairs p0 + t * dp, t < nt, whose matrices lie at one stride. */
typedef struct job {
  int64_t p0, dp, nt;
} job;

static int64_t jobs_of(const att *c, job *out, int64_t cap) {
  int64_t B = c->a.B, H = c->a.H, G = c->a.group, Hkv = c->Hkv, n = 0;
#define JOB(P0, DP, NT)                         \
  do {                                          \
    if (n < cap) out[n] = (job){(P0), (DP), (NT)}; \
    n++;                                        \
  } while (0)
  if (c->bhsd) {
    if (G == 1) JOB(0, 1, B * H);
    else
      for (int64_t hh = 0; hh < G; hh++) JOB(hh, G, B * Hkv);
  } else if (G == 1) {
    if (B <= H)
      for (int64_t b = 0; b < B; b++) JOB(b * H, 1, H);
    else
      for (int64_t h = 0; h < H; h++) JOB(h, H, B);
  } else if (B * G <= H) {
    for (int64_t b = 0; b < B; b++)
      for (int64_t hh = 0; hh < G; hh++) JOB(b * H + hh, G, Hkv);
  } else {
    for (int64_t h = 0; h < H; h++) JOB(h, H, B);
  }
#undef JOB
  return n;
}

enum { SCORE_BUDGET = 256 << 20 };

/* Rows per chunk and pairs per chunk for scores of Skv elements of es bytes (bufs buffers). */
static void chunking(const att *c, int64_t nt, int bufs, int64_t *sq, int64_t *ntc) {
  int64_t es = c->f64 ? 8 : 4, per_row = (c->a.Skv > 0 ? c->a.Skv : 1) * es * bufs;
  int64_t rows = SCORE_BUDGET / per_row;
  if (rows < 1) rows = 1;
  *sq = c->a.S < rows ? c->a.S : rows;
  if (*sq < 1) *sq = 1;
  int64_t pairs = rows / *sq;
  *ntc = nt < pairs ? nt : pairs;
  if (*ntc < 1) *ntc = 1;
}

static lathe_status_t launch_rows(lathe_cuda_exec *ex, lcuFunction f, int64_t rows, int tpr, void **args) {
  unsigned b, th;
  lathe_cuda_row_grid(rows, tpr, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

/* Strides between consecutive pairs of a job (0 when it has one). */
static void pair_strides(const att *c, const job *jb, int64_t *qst, int64_t *kst) {
  *qst = jb->nt > 1 ? q_off(c, jb->p0 + jb->dp) - q_off(c, jb->p0) : 0;
  *kst = jb->nt > 1 ? k_off(c, jb->p0 + jb->dp) - k_off(c, jb->p0) : 0;
}

static lathe_status_t run_forward(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  att c;
  LATHE_RETURN_IF_ERROR(geometry(ex, &c, n, in, false));
  att_args *a = &c.a;
  if (!a->B || !a->H || !a->S) return NULL;
  size_t es = c.f64 ? 8 : 4;
  lcuDeviceptr o = lathe_cuda_ptr(out[0]), lse = lathe_cuda_ptr(out[1]);
  bool half = is_half(out[0]->shape.dtype);
  if (half) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_FLOAT32, lathe_shape_size(&out[0]->shape), &o, NULL));
  int64_t n_jobs = jobs_of(&c, NULL, 0);
  job *jobs = malloc(sizeof(job) * (size_t)n_jobs);
  if (!jobs) return LATHE_OOM(lathe_op_name(n->op));
  jobs_of(&c, jobs, n_jobs);
  int64_t max_nt = 0;
  for (int64_t j = 0; j < n_jobs; j++) max_nt = jobs[j].nt > max_nt ? jobs[j].nt : max_nt;
  int64_t sq, ntc;
  chunking(&c, max_nt, 1, &sq, &ntc);
  lcuDeviceptr sc;
  lathe_status_t st = lathe_cuda_scratch(ex, c.dt, ntc * sq * a->Skv, &sc, NULL);
  lcuFunction fsm = NULL;
  if (!st) st = att_kernel(ex, "softmax", c.f64, &fsm);
  int tpr = lathe_cuda_row_threads(a->Skv);
  for (int64_t j = 0; j < n_jobs && !st; j++) {
    int64_t qst, kst;
    pair_strides(&c, &jobs[j], &qst, &kst);
    for (int64_t t0 = 0; t0 < jobs[j].nt && !st; t0 += ntc) {
      int64_t nt = jobs[j].nt - t0 < ntc ? jobs[j].nt - t0 : ntc, p0 = jobs[j].p0 + t0 * jobs[j].dp;
      for (int64_t i0 = 0; i0 < a->S && !st; i0 += sq) {
        int64_t rows = a->S - i0 < sq ? a->S - i0 : sq;
        lcuDeviceptr qp = c.q + (lcuDeviceptr)((size_t)(q_off(&c, p0) + i0 * c.qss) * es);
        lcuDeviceptr kp = c.k + (lcuDeviceptr)((size_t)k_off(&c, p0) * es), vp = c.v + (lcuDeviceptr)((size_t)k_off(&c, p0) * es);
        lt_gemm g1 = {.ab = c.dt, .d = c.dt, .batch = nt, .m = rows, .n = a->Skv, .k = a->D};
        g1.a = (lt_mat){qp, c.qss, 1, qst};
        g1.b = (lt_mat){kp, 1, c.kss, kst};
        g1.c = (lt_mat){sc, a->Skv, 1, rows * a->Skv};
        st = lathe_cuda_gemm(ex, &g1);
        if (st) break;
        att_args aa = *a;
        aa.p0 = p0, aa.dp = jobs[j].dp, aa.i0 = i0, aa.sq = rows;
        int64_t n_rows = nt * rows;
        void *args[] = {&sc, &lse, &c.amask, &c.bmask, &c.bias, &c.qlen, &c.kvlen, &aa, &n_rows, &tpr};
        st = launch_rows(ex, fsm, n_rows, tpr, args);
        if (st) break;
        lt_gemm g2 = {.ab = c.dt, .d = c.dt, .batch = nt, .m = rows, .n = a->D, .k = a->Skv};
        g2.a = (lt_mat){sc, a->Skv, 1, rows * a->Skv};
        g2.b = (lt_mat){vp, c.kss, 1, kst};
        g2.c = (lt_mat){o + (lcuDeviceptr)((size_t)(q_off(&c, p0) + i0 * c.qss) * es), c.qss, 1, qst};
        st = lathe_cuda_gemm(ex, &g2);
      }
    }
  }
  free(jobs);
  if (!st && half) {
    lathe_dtype path[2] = {LATHE_DTYPE_FLOAT32, out[0]->shape.dtype};
    st = lathe_cuda_convert(ex, o, lathe_cuda_ptr(out[0]), path, 2, lathe_shape_size(&out[0]->shape), NULL, NULL, 0);
  }
  return st;
}

static lathe_status_t run_vjp(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  att c;
  LATHE_RETURN_IF_ERROR(geometry(ex, &c, n, in, true));
  att_args *a = &c.a;
  size_t es = c.f64 ? 8 : 4;
  bool half = is_half(out[0]->shape.dtype);
  lcuDeviceptr grads[3], o, dout, lse = lathe_cuda_ptr(in[4]);
  for (int k = 0; k < 3; k++) {
    int64_t cnt = lathe_shape_size(&out[k]->shape);
    grads[k] = lathe_cuda_ptr(out[k]);
    if (half) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_FLOAT32, cnt, &grads[k], NULL));
    LATHE_RETURN_IF_ERROR(lathe_cuda_zero(ex, grads[k], (size_t)cnt * es));
  }
  if (a->B && a->H && a->S) {
    LATHE_RETURN_IF_ERROR(as_compute(ex, in[3], &o));
    LATHE_RETURN_IF_ERROR(as_compute(ex, in[5], &dout));
    int64_t rows = a->B * a->H * a->S;
    lcuDeviceptr delta;
    LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, c.dt, rows, &delta, NULL));
    lcuFunction fd, fg;
    LATHE_RETURN_IF_ERROR(att_kernel(ex, "delta", c.f64, &fd));
    LATHE_RETURN_IF_ERROR(att_kernel(ex, "grad", c.f64, &fg));
    int tpr = lathe_cuda_row_threads(a->D);
    void *dargs[] = {&o, &dout, &delta, a, &rows, &tpr};
    LATHE_RETURN_IF_ERROR(launch_rows(ex, fd, rows, tpr, dargs));
    int64_t n_jobs = jobs_of(&c, NULL, 0);
    job *jobs = malloc(sizeof(job) * (size_t)n_jobs);
    if (!jobs) return LATHE_OOM(lathe_op_name(n->op));
    jobs_of(&c, jobs, n_jobs);
    int64_t max_nt = 0;
    for (int64_t j = 0; j < n_jobs; j++) max_nt = jobs[j].nt > max_nt ? jobs[j].nt : max_nt;
    int64_t sq, ntc;
    chunking(&c, max_nt, 2, &sq, &ntc);
    lcuDeviceptr sc, dp;
    lathe_status_t st = lathe_cuda_scratch(ex, c.dt, ntc * sq * a->Skv, &sc, NULL);
    if (!st) st = lathe_cuda_scratch(ex, c.dt, ntc * sq * a->Skv, &dp, NULL);
    for (int64_t j = 0; j < n_jobs && !st; j++) {
      int64_t qst, kst;
      pair_strides(&c, &jobs[j], &qst, &kst);
      for (int64_t t0 = 0; t0 < jobs[j].nt && !st; t0 += ntc) {
        int64_t nt = jobs[j].nt - t0 < ntc ? jobs[j].nt - t0 : ntc, p0 = jobs[j].p0 + t0 * jobs[j].dp;
        size_t qo = (size_t)q_off(&c, p0) * es, ko = (size_t)k_off(&c, p0) * es;
        for (int64_t i0 = 0; i0 < a->S && !st; i0 += sq) {
          int64_t m = a->S - i0 < sq ? a->S - i0 : sq;
          size_t qr = qo + (size_t)(i0 * c.qss) * es;
          lt_mat Q = {c.q + qr, c.qss, 1, qst}, dO = {dout + qr, c.qss, 1, qst}, dQ = {grads[0] + qr, c.qss, 1, qst};
          lt_mat Kt = {c.k + ko, 1, c.kss, kst}, Vt = {c.v + ko, 1, c.kss, kst}, Kn = {c.k + ko, c.kss, 1, kst};
          lt_mat dK = {grads[1] + ko, c.kss, 1, kst}, dV = {grads[2] + ko, c.kss, 1, kst};
          lt_mat S = {sc, a->Skv, 1, m * a->Skv}, St = {sc, 1, a->Skv, m * a->Skv};
          lt_mat dP = {dp, a->Skv, 1, m * a->Skv}, dPt = {dp, 1, a->Skv, m * a->Skv};
          lt_gemm g = {.ab = c.dt, .d = c.dt, .batch = nt};
          /* scores and dP = dO . V^T */
          g.m = m, g.n = a->Skv, g.k = a->D, g.a = Q, g.b = Kt, g.c = S;
          st = lathe_cuda_gemm(ex, &g);
          g.a = dO, g.b = Vt, g.c = dP;
          if (!st) st = lathe_cuda_gemm(ex, &g);
          if (st) break;
          att_args aa = *a;
          aa.p0 = p0, aa.dp = jobs[j].dp, aa.i0 = i0, aa.sq = m;
          int64_t cnt = nt * m * a->Skv;
          if (cnt) {
            void *args[] = {&sc, &dp, &lse, &delta, &c.amask, &c.bmask, &c.bias, &c.qlen, &c.kvlen, &aa, &cnt};
            unsigned b, th;
            lathe_cuda_grid(cnt, &b, &th);
            st = lathe_cuda_launch(ex, fg, b, th, 0, args);
            if (st) break;
          }
          /* dV += P^T dO, dK += dS^T Q, dQ = dS K */
          g.accumulate = true;
          g.m = a->Skv, g.n = a->D, g.k = m, g.a = St, g.b = dO, g.c = dV;
          st = lathe_cuda_gemm(ex, &g);
          g.a = dPt, g.b = Q, g.c = dK;
          if (!st) st = lathe_cuda_gemm(ex, &g);
          g.accumulate = false;
          g.m = m, g.n = a->D, g.k = a->Skv, g.a = dP, g.b = Kn, g.c = dQ;
          if (!st) st = lathe_cuda_gemm(ex, &g);
        }
      }
    }
    free(jobs);
    LATHE_RETURN_IF_ERROR(st);
  }
  for (int k = 0; half && k < 3; k++) {
    lathe_dtype path[2] = {LATHE_DTYPE_FLOAT32, out[k]->shape.dtype};
    LATHE_RETURN_IF_ERROR(
        lathe_cuda_convert(ex, grads[k], lathe_cuda_ptr(out[k]), path, 2, lathe_shape_size(&out[k]->shape), NULL, NULL, 0));
  }
  return NULL;
}

/* x [m, kin] . wQKV [kin, total] into three outputs of widths dims[], plus their biases. */
static lathe_status_t run_qkv(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  const lathe_shape *xs = &in[0]->shape;
  lathe_dtype dt = xs->dtype;
  bool half = is_half(dt);
  int64_t kin = xs->dims[xs->rank - 1], qd = lathe_attr_fused_attention_qkv_projection_query_dim(n);
  int64_t m = kin ? lathe_shape_size(xs) / kin : lathe_shape_size(&out[0]->shape) / qd;
  int64_t dims[3] = {qd, 0, 0};
  dims[1] = dims[2] = lathe_attr_fused_attention_qkv_projection_key_value_dim(n);
  int64_t total = dims[0] + dims[1] + dims[2], col0 = 0;
  if (!m) return NULL;
  const bool has_bias[3] = {lathe_attr_fused_attention_qkv_projection_has_bias_q(n),
                            lathe_attr_fused_attention_qkv_projection_has_bias_k(n),
                            lathe_attr_fused_attention_qkv_projection_has_bias_v(n)};
  size_t es = (size_t)lathe_dtype_bits(dt) / 8;
  int next = 2;
  for (int o = 0; o < 3; o++) {
    lcuDeviceptr acc = lathe_cuda_ptr(out[o]), bias = has_bias[o] ? lathe_cuda_ptr(in[next++]) : 0;
    if (half) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_FLOAT32, m * dims[o], &acc, NULL));
    lt_gemm g = {.ab = dt, .d = half ? LATHE_DTYPE_FLOAT32 : dt, .batch = 1, .m = m, .n = dims[o], .k = kin};
    g.a = (lt_mat){lathe_cuda_ptr(in[0]), kin, 1, 0};
    g.b = (lt_mat){lathe_cuda_ptr(in[1]) + (lcuDeviceptr)((size_t)col0 * es), total, 1, 0};
    g.c = (lt_mat){acc, dims[o], 1, 0};
    LATHE_RETURN_IF_ERROR(lathe_cuda_gemm(ex, &g));
    LATHE_RETURN_IF_ERROR(lathe_cuda_dense_epilogue(ex, dt, acc, lathe_cuda_ptr(out[o]), bias, m, dims[o], LATHE_ACTIVATION_NONE));
    col0 += dims[o];
  }
  return NULL;
}

lathe_status_t lathe_cuda_run_attention(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                        lathe_tensor **out) {
  switch (n->op) {
    case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION: return run_forward(ex, n, in, out);
    case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP: return run_vjp(ex, n, in, out);
    case LATHE_OP_FUSED_ATTENTION_QKV_PROJECTION: return run_qkv(ex, n, in, out);
    default: return LATHE_UNIMPL("%s: not an attention op", lathe_op_name(n->op));
  }
}

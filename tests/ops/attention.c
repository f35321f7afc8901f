/* attention.c -- conformance rows for FusedScaledDotProductAttention, its VJP and
 * FusedAttentionQKVProjection against a naive double-precision softmax attention written here
 * (and, for the VJP, its analytic gradient, itself checked by finite differences in f64). */
#include "core/core.h"
#include "testing.h"

static const lathe_dtype float_dts[] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16};
#define N_FLOAT_DTS 4

static double tol_of(lathe_dtype dt) {
  return dt == LATHE_DTYPE_FLOAT32 ? 2e-5 : dt == LATHE_DTYPE_FLOAT64 ? 1e-11 : 2 * tst_tol(dt) + 1e-2;
}

enum { MASK_NONE, MASK_BOOL, MASK_ADD, MASK_ADD_INF };

typedef struct acase {
  lathe_dtype dt;
  lathe_attention_layout layout;
  int64_t B, H, Hkv, S, Skv, D;
  bool causal;
  double scale;
  int mask;               /* MASK_* */
  int mask_rank;          /* 2, 3 or 4 */
  bool mask_heads;        /* rank-4 mask: a heads axis (else 1) */
  bool mask_batch;        /* rank-4 mask: a batch axis (else 1) */
  int bias_rank;          /* 0: no bias; 2 or 4 ([1 or B, H, S, Skv]; [B, 1, 1, Skv] for BSHD) */
  bool seqlens;
  bool vjp;
} acase;

/* ---- geometry shared by the graph and the reference ---- */
typedef struct {
  const acase *c;
  lathe_shape qs, ks, ms, bs, ls;
  int64_t group;
} geo;

static lathe_shape layout_shape(const acase *c, int64_t heads, int64_t seq) {
  return c->layout == LATHE_ATTENTION_LAYOUT_BHSD ? TST_SHAPE(c->dt, c->B, heads, seq, c->D)
                                                  : TST_SHAPE(c->dt, c->B, seq, heads, c->D);
}

static geo make_geo(const acase *c) {
  geo g = {.c = c, .group = c->H / c->Hkv};
  g.qs = layout_shape(c, c->H, c->S);
  g.ks = layout_shape(c, c->Hkv, c->Skv);
  lathe_dtype mdt = c->mask == MASK_BOOL ? LATHE_DTYPE_BOOL : c->dt;
  int64_t mh = c->mask_heads ? c->H : 1, mb = c->mask_batch ? c->B : 1;
  if (c->mask_rank == 2) g.ms = TST_SHAPE(mdt, c->S, c->Skv);
  else if (c->mask_rank == 3) g.ms = TST_SHAPE(mdt, 1, c->S, c->Skv);
  else if (c->layout == LATHE_ATTENTION_LAYOUT_BHSD) g.ms = TST_SHAPE(mdt, mb, mh, c->S, c->Skv);
  else g.ms = TST_SHAPE(mdt, mb, c->S, mh, c->Skv);
  if (c->bias_rank == 2) g.bs = TST_SHAPE(c->dt, c->S, c->Skv);
  else if (c->layout == LATHE_ATTENTION_LAYOUT_BHSD) g.bs = TST_SHAPE(c->dt, 1, c->H, c->S, c->Skv);
  else g.bs = TST_SHAPE(c->dt, c->B, 1, 1, c->Skv);
  g.ls = TST_SHAPE(c->dt == LATHE_DTYPE_FLOAT64 ? LATHE_DTYPE_FLOAT64 : LATHE_DTYPE_FLOAT32, c->B, c->H, c->S);
  return g;
}

/* Element offsets of a query-like / key-like tensor. */
static int64_t qoff(const geo *g, int64_t b, int64_t h, int64_t i, int64_t d) {
  const acase *c = g->c;
  return c->layout == LATHE_ATTENTION_LAYOUT_BHSD ? ((b * c->H + h) * c->S + i) * c->D + d : ((b * c->S + i) * c->H + h) * c->D + d;
}
static int64_t koff(const geo *g, int64_t b, int64_t h, int64_t j, int64_t d) {
  const acase *c = g->c;
  return c->layout == LATHE_ATTENTION_LAYOUT_BHSD ? ((b * c->Hkv + h) * c->Skv + j) * c->D + d
                                                  : ((b * c->Skv + j) * c->Hkv + h) * c->D + d;
}
/* Offset in a broadcast operand of score element (b, h, i, j); seq_first: a [B, S, H, Skv] rank 4. */
static int64_t boff(const lathe_shape *s, bool seq_first, int64_t b, int64_t h, int64_t i, int64_t j) {
  int64_t idx[4] = {b, h, i, j};
  if (seq_first && s->rank == 4) idx[1] = i, idx[2] = h;
  int64_t off = 0;
  for (int a = 0; a < s->rank; a++) {
    int64_t v = s->dims[a] == 1 ? 0 : idx[4 - s->rank + a];
    off = off * s->dims[a] + v;
  }
  return off;
}

typedef struct {
  void *q, *k, *v, *mask, *bias, *dout;
  int32_t qlen[8], kvlen[8];
} adata;

/* Probabilities p[j] of query row (b, h, i); returns false when the row sees no key. */
static bool ref_probs(const geo *g, const adata *in, int64_t b, int64_t h, int64_t i, double *p, double *lse) {
  const acase *c = g->c;
  int64_t kh = h / g->group, qlim = c->S, kvlim = c->Skv;
  if (c->seqlens) {
    qlim = in->qlen[b] < 0 ? 0 : in->qlen[b] > c->S ? c->S : in->qlen[b];
    kvlim = in->kvlen[b] < 0 ? 0 : in->kvlen[b] > c->Skv ? c->Skv : in->kvlen[b];
  }
  double scale = c->scale != 0 ? c->scale : c->D ? 1 / sqrt((double)c->D) : 1;
  double mx = -INFINITY;
  bool seq_first = c->layout == LATHE_ATTENTION_LAYOUT_BSHD;
  for (int64_t j = 0; j < c->Skv; j++) {
    p[j] = -INFINITY;
    if (i >= qlim || j >= kvlim || (c->causal && j > i)) continue;
    double dot = 0;
    for (int64_t d = 0; d < c->D; d++) dot += tst_get(in->q, c->dt, qoff(g, b, h, i, d)) * tst_get(in->k, c->dt, koff(g, b, kh, j, d));
    double x = dot * scale;
    if (c->bias_rank) x += tst_get(in->bias, c->dt, boff(&g->bs, false, b, h, i, j));
    if (c->mask == MASK_BOOL && !tst_get(in->mask, LATHE_DTYPE_BOOL, boff(&g->ms, seq_first, b, h, i, j))) continue;
    if (c->mask >= MASK_ADD) x += tst_get(in->mask, c->dt, boff(&g->ms, seq_first, b, h, i, j));
    p[j] = x;
    if (x > mx) mx = x;
  }
  if (mx == -INFINITY) {
    for (int64_t j = 0; j < c->Skv; j++) p[j] = 0;
    *lse = -INFINITY;
    return false;
  }
  double sum = 0;
  for (int64_t j = 0; j < c->Skv; j++) sum += (p[j] = exp(p[j] - mx));
  for (int64_t j = 0; j < c->Skv; j++) p[j] /= sum;
  *lse = mx + log(sum);
  return true;
}

/* Forward (out, lse) and, with want_grads, the analytic gradients for dOutput. Results in double. */
static void reference(const geo *g, const adata *in, double *out, double *lse, double *dq, double *dk, double *dv) {
  const acase *c = g->c;
  double *p = malloc(sizeof(double) * (size_t)(c->Skv + 1)), *dp = malloc(sizeof(double) * (size_t)(c->Skv + 1));
  double scale = c->scale != 0 ? c->scale : c->D ? 1 / sqrt((double)c->D) : 1;
  for (int64_t b = 0; b < c->B; b++)
    for (int64_t h = 0; h < c->H; h++)
      for (int64_t i = 0; i < c->S; i++) {
        int64_t kh = h / g->group;
        bool any = ref_probs(g, in, b, h, i, p, &lse[(b * c->H + h) * c->S + i]);
        for (int64_t d = 0; d < c->D; d++) {
          double acc = 0;
          for (int64_t j = 0; any && j < c->Skv; j++) acc += p[j] * tst_get(in->v, c->dt, koff(g, b, kh, j, d));
          out[qoff(g, b, h, i, d)] = acc;
        }
        if (!dq || !any) continue;
        double delta = 0;
        for (int64_t j = 0; j < c->Skv; j++) {
          dp[j] = 0;
          for (int64_t d = 0; d < c->D; d++) dp[j] += tst_get(in->dout, c->dt, qoff(g, b, h, i, d)) * tst_get(in->v, c->dt, koff(g, b, kh, j, d));
          delta += p[j] * dp[j];
        }
        for (int64_t j = 0; j < c->Skv; j++) {
          double ds = p[j] * (dp[j] - delta) * scale;
          for (int64_t d = 0; d < c->D; d++) {
            dv[koff(g, b, kh, j, d)] += p[j] * tst_get(in->dout, c->dt, qoff(g, b, h, i, d));
            dq[qoff(g, b, h, i, d)] += ds * tst_get(in->k, c->dt, koff(g, b, kh, j, d));
            dk[koff(g, b, kh, j, d)] += ds * tst_get(in->q, c->dt, qoff(g, b, h, i, d));
          }
        }
      }
  free(p);
  free(dp);
}

static void fill_scaled(void *d, lathe_dtype dt, int64_t n, unsigned seed, double f) {
  tst_fill(d, dt, n, seed);
  for (int64_t i = 0; i < n; i++) tst_set(d, dt, i, tst_get(d, dt, i) * f);
}

static void make_inputs(const geo *g, adata *in, unsigned seed) {
  const acase *c = g->c;
  in->q = tst_alloc_for(&g->qs), in->k = tst_alloc_for(&g->ks), in->v = tst_alloc_for(&g->ks);
  in->dout = tst_alloc_for(&g->qs);
  in->mask = tst_alloc_for(&g->ms), in->bias = tst_alloc_for(&g->bs);
  fill_scaled(in->q, c->dt, lathe_shape_num_elements(&g->qs), seed, 0.5);
  fill_scaled(in->k, c->dt, lathe_shape_num_elements(&g->ks), seed + 1, 0.5);
  fill_scaled(in->v, c->dt, lathe_shape_num_elements(&g->ks), seed + 2, 1);
  fill_scaled(in->dout, c->dt, lathe_shape_num_elements(&g->qs), seed + 3, 1);
  int64_t nm = lathe_shape_num_elements(&g->ms);
  if (c->mask == MASK_BOOL) tst_fill(in->mask, LATHE_DTYPE_BOOL, nm, seed + 4);
  else fill_scaled(in->mask, c->dt, nm, seed + 4, 0.5);
  if (c->mask == MASK_ADD_INF) /* some hidden keys, and row 0 fully hidden */
    for (int64_t e = 0; e < nm; e++)
      if (e % 3 == 1 || e < c->Skv) tst_set(in->mask, c->dt, e, -INFINITY);
  fill_scaled(in->bias, c->dt, lathe_shape_num_elements(&g->bs), seed + 5, 1);
  const int32_t ql[8] = {(int32_t)c->S - 1, (int32_t)c->S + 2, 0, -3, 1, 2, 3, 4};
  const int32_t kl[8] = {(int32_t)c->Skv - 2, (int32_t)c->Skv + 5, 1, 2, 0, 3, 1, 2};
  memcpy(in->qlen, ql, sizeof ql);
  memcpy(in->kvlen, kl, sizeof kl);
}

static void free_inputs(adata *in) { free(in->q), free(in->k), free(in->v), free(in->dout), free(in->mask), free(in->bias); }

/* Builds main: parameters q, k, v, [mask], [qlen, kvlen], [bias], [dOutput]; returns out, lse
 * and, for the VJP, dq, dk, dv. Fills ins (by parameter order). */
static lathe_status_t build(const geo *g, adata *in, lathe_builder_t *out_b, const void **ins, int *n_ins) {
  const acase *c = g->c;
  lathe_builder_t b;
  LATHE_RETURN_IF_ERROR(tst_builder_new("sdpa", &b));
  lathe_function_t fn = lathe_builder_main(b);
  lathe_value_t q, k, v, res[5];
  lathe_attention_config cfg = {.scale = c->scale, .causal = c->causal};
  lathe_shape ls = TST_SHAPE(LATHE_DTYPE_INT32, c->B);
  int n = 0;
  lathe_status_t st = NULL;
#define PARAM(shape, dst, data) \
  if (!st) st = lathe_parameter(fn, NULL, &(shape), &(dst)), ins[n++] = (data)
  PARAM(g->qs, q, in->q);
  PARAM(g->ks, k, in->k);
  PARAM(g->ks, v, in->v);
  if (c->mask) PARAM(g->ms, cfg.mask, in->mask);
  if (c->seqlens) {
    PARAM(ls, cfg.query_seq_len, in->qlen);
    PARAM(ls, cfg.key_value_seq_len, in->kvlen);
  }
  if (c->bias_rank) PARAM(g->bs, cfg.bias, in->bias);
  lathe_value_t dout = NULL;
  if (c->vjp) PARAM(g->qs, dout, in->dout);
#undef PARAM
  if (!st) st = lathe_fused_scaled_dot_product_attention(fn, q, k, v, c->layout, &cfg, res);
  if (!st && c->vjp) st = lathe_fused_scaled_dot_product_attention_vjp(fn, q, k, v, c->layout, &cfg, res[0], &res[1], 1, dout, res + 2);
  if (!st) st = lathe_function_return(fn, res, c->vjp ? 5 : 2);
  if (st) {
    lathe_builder_free(b);
    return st;
  }
  *out_b = b;
  *n_ins = n;
  return NULL;
}

static void to_dtype(void *dst, lathe_dtype dt, const double *src, int64_t n) {
  for (int64_t i = 0; i < n; i++) tst_set(dst, dt, i, src[i]);
}

static void sdpa_case(acase c) {
  geo g = make_geo(&c);
  adata in;
  make_inputs(&g, &in, (unsigned)(c.S * 7 + c.Skv * 3 + c.D + c.mask * 11 + c.causal));
  lathe_builder_t b;
  const void *ins[10];
  int n_ins;
  char label[160];
  snprintf(label, sizeof label, "SDPA%s %s %s B%lld H%lld/%lld S%lld Skv%lld D%lld%s mask%d/r%d bias%d%s",
           c.vjp ? "VJP" : "", lathe_dtype_name(c.dt), c.layout == LATHE_ATTENTION_LAYOUT_BHSD ? "BHSD" : "BSHD", (long long)c.B,
           (long long)c.H, (long long)c.Hkv, (long long)c.S, (long long)c.Skv, (long long)c.D, c.causal ? " causal" : "",
           c.mask, c.mask_rank, c.bias_rank, c.seqlens ? " seqlens" : "");
  lathe_status_t st = build(&g, &in, &b, ins, &n_ins);
  CHECK(st == NULL, "%s build: %s", label, lathe_status_message(st));
  if (st) {
    lathe_status_free(st);
    free_inputs(&in);
    return;
  }
  int64_t nq = lathe_shape_num_elements(&g.qs), nk = lathe_shape_num_elements(&g.ks), nl = lathe_shape_num_elements(&g.ls);
  double *out = calloc((size_t)nq + 1, sizeof(double)), *lse = calloc((size_t)nl + 1, sizeof(double));
  double *dq = calloc((size_t)nq + 1, sizeof(double)), *dk = calloc((size_t)nk + 1, sizeof(double));
  double *dv = calloc((size_t)nk + 1, sizeof(double));
  reference(&g, &in, out, lse, c.vjp ? dq : NULL, dk, dv);
  void *got[5] = {0};
  st = tst_run(b, ins, n_ins, got, c.vjp ? 5 : 2, NULL);
  CHECK(st == NULL, "%s run: %s", label, lathe_status_message(st));
  if (!st) {
    void *want = tst_alloc_for(&g.qs), *wantl = tst_alloc_for(&g.ls);
    double tol = tol_of(c.dt);
    to_dtype(want, c.dt, out, nq);
    to_dtype(wantl, g.ls.dtype, lse, nl);
    tst_expect_close(label, got[0], want, c.dt, nq, tol);
    tst_expect_close(label, got[1], wantl, g.ls.dtype, nl, g.ls.dtype == LATHE_DTYPE_FLOAT64 ? 1e-11 : 1e-4);
    if (c.vjp) {
      void *wk = tst_alloc_for(&g.ks);
      to_dtype(want, c.dt, dq, nq);
      tst_expect_close("dQuery", got[2], want, c.dt, nq, tol * 4);
      to_dtype(wk, c.dt, dk, nk);
      tst_expect_close("dKey", got[3], wk, c.dt, nk, tol * 4);
      to_dtype(wk, c.dt, dv, nk);
      tst_expect_close("dValue", got[4], wk, c.dt, nk, tol * 4);
      free(wk);
    }
    free(want), free(wantl);
  }
  lathe_status_free(st);
  for (int i = 0; i < 5; i++) tst_free_output(got[i]);
  free(out), free(lse), free(dq), free(dk), free(dv);
  free_inputs(&in);
  lathe_builder_free(b);
}

#define BHSD LATHE_ATTENTION_LAYOUT_BHSD
#define BSHD LATHE_ATTENTION_LAYOUT_BSHD

/* The same row of cases for forward and VJP. */
static void sdpa_rows(bool vjp) {
  for (int d = 0; d < N_FLOAT_DTS; d++) {
    lathe_dtype dt = float_dts[d];
    for (int lay = 0; lay < 2; lay++) {
      lathe_attention_layout l = lay ? BSHD : BHSD;
      for (int causal = 0; causal < 2; causal++) {
        /* plain, GQA, seq != kvLen, odd headDim */
        sdpa_case((acase){dt, l, 2, 4, 2, 5, 7, 3, causal, 0, .vjp = vjp});
        sdpa_case((acase){dt, l, 1, 2, 2, 6, 4, 8, causal, 0.7, .vjp = vjp});
        /* Bool masks of each rank, with and without heads/batch axes */
        sdpa_case((acase){dt, l, 2, 4, 2, 5, 6, 3, causal, 0, MASK_BOOL, 2, .vjp = vjp});
        sdpa_case((acase){dt, l, 2, 2, 1, 4, 5, 3, causal, 0, MASK_BOOL, 3, .vjp = vjp});
        sdpa_case((acase){dt, l, 2, 4, 2, 5, 6, 3, causal, 0, MASK_BOOL, 4, true, true, .vjp = vjp});
        sdpa_case((acase){dt, l, 2, 4, 2, 5, 6, 3, causal, 0, MASK_BOOL, 4, false, true, .vjp = vjp});
        /* additive masks and bias */
        sdpa_case((acase){dt, l, 2, 4, 2, 5, 6, 3, causal, 0, MASK_ADD, 4, true, false, .vjp = vjp});
        sdpa_case((acase){dt, l, 2, 2, 2, 3, 5, 4, causal, 0, MASK_ADD, 2, .bias_rank = 2, .vjp = vjp});
        sdpa_case((acase){dt, l, 2, 4, 2, 5, 6, 3, causal, 0.5, .bias_rank = 4, .vjp = vjp});
        /* padding masks, alone and with the rest */
        sdpa_case((acase){dt, l, 4, 2, 1, 5, 6, 3, causal, 0, .seqlens = true, .vjp = vjp});
        sdpa_case((acase){dt, l, 3, 4, 2, 5, 7, 5, causal, 0, MASK_BOOL, 4, true, true, 4, true, .vjp = vjp});
      }
      /* sizes 0 and 1 */
      sdpa_case((acase){dt, l, 1, 1, 1, 1, 1, 1, false, 0, .vjp = vjp});
      sdpa_case((acase){dt, l, 2, 2, 1, 0, 3, 2, false, 0, .vjp = vjp});
      sdpa_case((acase){dt, l, 2, 2, 1, 3, 0, 2, true, 0, .vjp = vjp});
      sdpa_case((acase){dt, l, 0, 2, 1, 3, 3, 2, false, 0, .vjp = vjp});
    }
  }
  for (int lay = 0; lay < 2; lay++)
    for (int f64 = 0; f64 < 2; f64++) {
      lathe_dtype dt = f64 ? LATHE_DTYPE_FLOAT64 : LATHE_DTYPE_FLOAT32;
      lathe_attention_layout l = lay ? BSHD : BHSD;
      /* -inf in the additive mask, rows fully hidden */
      sdpa_case((acase){dt, l, 2, 2, 1, 4, 6, 3, false, 0, MASK_ADD_INF, 2, .vjp = vjp});
      /* headDim 0: empty outputs, the logsumexp still counts the keys */
      sdpa_case((acase){dt, l, 1, 2, 1, 3, 4, 0, true, 0, .vjp = vjp});
      /* several query and key blocks (64 x 256 forward, 128 x 128 backward), both VJP schedules */
      sdpa_case((acase){dt, l, 1, 2, 1, 70, 300, 5, false, 0, .vjp = vjp});
      sdpa_case((acase){dt, l, 1, 4, 2, 130, 150, 9, true, 0, MASK_BOOL, 2, .seqlens = false, .vjp = vjp});
      sdpa_case((acase){dt, l, 3, 4, 2, 67, 70, 4, true, 0, MASK_ADD, 4, true, true, 4, true, vjp});
    }
}

TEST(fused_sdpa) { sdpa_rows(false); }
TEST(fused_sdpa_vjp) { sdpa_rows(true); }

/* causal GQA, a boolean mask over batch and heads, a bias */
static void sdpa_head_forms(lathe_dtype dt, int64_t D, bool vjp) {
  sdpa_case((acase){dt, BHSD, 2, 4, 2, 70, 130, D, true, 0, .vjp = vjp});
  sdpa_case((acase){dt, BSHD, 1, 2, 2, 96, 96, D, false, 0, MASK_BOOL, 4, true, true, .vjp = vjp});
  sdpa_case((acase){dt, BHSD, 2, 2, 2, 64, 64, D, true, 0, .bias_rank = 4, .vjp = vjp});
}

/* Head sizes of real models (32 to 128, and 40, which the streaming kernels pad to 64), several
 * query and key blocks, causal and masked, GQA, both layouts: on lathe:cuda the streaming kernels'
 * texts per head size (forward and both backwards: half_bwd=0 and 1) and cuDNN's fused attention
 * (cudnn_sdpa=1: the unmasked rows without GQA) against the reference. Heads of 80 (padded to the
 * 128 text) and 256 (past the streaming kernels: batched products) take sdpa_head_forms' three. */
static void sdpa_head_rows(bool vjp) {
  const int64_t heads[] = {32, 40, 64, 128}, more[] = {80, 256};
  const lathe_dtype dts[] = {LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_FLOAT32};
  for (int d = 0; d < 3; d++) {
    for (int i = 0; i < 4; i++) {
      lathe_dtype dt = dts[d];
      int64_t D = heads[i];
      sdpa_head_forms(dt, D, vjp);
      sdpa_case((acase){dt, BSHD, 2, 4, 1, 65, 65, D, true, 0, MASK_ADD, 2, .seqlens = true, .vjp = vjp});
      /* forms cuDNN's fused attention takes (cudnn_sdpa): unmasked; with an additive mask or a
       * bias whose rows are whole 16 bytes (GQA too: the first row of sdpa_head_forms) */
      sdpa_case((acase){dt, BHSD, 2, 3, 3, 70, 130, D, true, 0, .vjp = vjp});
      sdpa_case((acase){dt, BSHD, 2, 2, 2, 128, 128, D, true, 0, .vjp = vjp});
      sdpa_case((acase){dt, BSHD, 1, 2, 2, 100, 36, D, false, 0, .vjp = vjp});
      sdpa_case((acase){dt, BHSD, 2, 4, 2, 64, 96, D, false, 0, MASK_ADD, 4, true, true, .vjp = vjp});
      sdpa_case((acase){dt, BSHD, 1, 4, 4, 70, 72, D, true, 0, MASK_ADD, 2, .vjp = vjp});
    }
    for (int i = 0; i < 2; i++) sdpa_head_forms(dts[d], more[i], vjp);
  }
}
TEST(fused_sdpa_heads) { sdpa_head_rows(false); }
TEST(fused_sdpa_vjp_heads) { sdpa_head_rows(true); }

/* The VJP kernel against finite differences of L = sum(output * dOutput) in Float64, through
 * the reference forward (which the rows above check against the kernel's forward). */
TEST(fused_sdpa_vjp_finite_differences) {
  acase c = {LATHE_DTYPE_FLOAT64, BSHD, 1, 2, 1, 3, 4, 3, true, 0, MASK_ADD, 2, .bias_rank = 2, .vjp = true};
  geo g = make_geo(&c);
  adata in;
  make_inputs(&g, &in, 99);
  lathe_builder_t b;
  const void *ins[10];
  int n_ins;
  CHECK_OK(build(&g, &in, &b, ins, &n_ins));
  void *got[5] = {0};
  lathe_status_t st = tst_run(b, ins, n_ins, got, 5, NULL);
  CHECK(st == NULL, "run: %s", lathe_status_message(st));
  int64_t nq = lathe_shape_num_elements(&g.qs), nk = lathe_shape_num_elements(&g.ks);
  double *out = calloc((size_t)nq, sizeof(double)), lse[64];
  void *targets[3] = {in.q, in.k, in.v};
  int64_t sizes[3] = {nq, nk, nk};
  const double eps = 1e-6;
  int bad = 0;
  for (int t = 0; !st && t < 3; t++)
    for (int64_t e = 0; e < sizes[t]; e++) {
      double x0 = tst_get(targets[t], c.dt, e), l[2];
      for (int sgn = 0; sgn < 2; sgn++) {
        tst_set(targets[t], c.dt, e, x0 + (sgn ? -eps : eps));
        reference(&g, &in, out, lse, NULL, NULL, NULL);
        l[sgn] = 0;
        for (int64_t i = 0; i < nq; i++) l[sgn] += out[i] * tst_get(in.dout, c.dt, i);
      }
      tst_set(targets[t], c.dt, e, x0);
      double fd = (l[0] - l[1]) / (2 * eps), an = tst_get(got[2 + t], c.dt, e);
      if (fabs(fd - an) > 1e-6 * (1 + fabs(fd))) {
        if (bad++ < 3) printf("  d%s[%lld]: finite differences %.10g, VJP %.10g\n", t == 0 ? "Query" : t == 1 ? "Key" : "Value", (long long)e, fd, an);
      }
    }
  CHECK(bad == 0, "VJP vs finite differences: %d mismatches", bad);
  lathe_status_free(st);
  for (int i = 0; i < 5; i++) tst_free_output(got[i]);
  free(out);
  free_inputs(&in);
  lathe_builder_free(b);
}

/* ---- FusedAttentionQKVProjection ---- */
static void qkv_case(lathe_dtype dt, int64_t b0, int64_t b1, int64_t kin, int64_t qd, int64_t kvd, int bias_bits) {
  lathe_function_t fn;
  lathe_builder_t b = tst_builder("qkv", &fn);
  int64_t total = qd + 2 * kvd, m = b0 * b1;
  lathe_shape xs = TST_SHAPE(dt, b0, b1, kin), ws = TST_SHAPE(dt, kin, total);
  lathe_shape bsh[3] = {TST_SHAPE(dt, qd), TST_SHAPE(dt, kvd), TST_SHAPE(dt, kvd)};
  lathe_value_t x, w, bias[3] = {0}, res[3];
  const void *ins[5];
  void *bd[3], *xd = tst_alloc_for(&xs), *wd = tst_alloc_for(&ws);
  int n = 0;
  x = tst_param(fn, "x", xs);
  w = tst_param(fn, "w", ws);
  ins[n++] = xd, ins[n++] = wd;
  tst_fill(xd, dt, m * kin, 31);
  tst_fill(wd, dt, kin * total, 32);
  for (int o = 0; o < 3; o++) {
    bd[o] = tst_alloc_for(&bsh[o]);
    tst_fill(bd[o], dt, bsh[o].dims[0], 33 + o);
    if (bias_bits >> o & 1) {
      bias[o] = tst_param(fn, NULL, bsh[o]);
      ins[n++] = bd[o];
    }
  }
  CHECK_OK(lathe_fused_attention_qkv_projection(fn, x, w, bias[0], bias[1], bias[2], qd, kvd, res));
  CHECK_OK(lathe_function_return(fn, res, 3));
  void *got[3] = {0};
  lathe_shape shapes[3];
  lathe_status_t st = tst_run(b, ins, n, got, 3, shapes);
  CHECK(st == NULL, "FusedAttentionQKVProjection run: %s", lathe_status_message(st));
  int64_t dims[3] = {qd, kvd, kvd}, col0[3] = {0, qd, qd + kvd};
  for (int o = 0; !st && o < 3; o++) {
    lathe_shape want_s = TST_SHAPE(dt, b0, b1, dims[o]);
    CHECK(lathe_shape_equal(&shapes[o], &want_s), "QKV output %d shape", o);
    void *want = tst_alloc_for(&want_s);
    for (int64_t r = 0; r < m; r++)
      for (int64_t j = 0; j < dims[o]; j++) {
        double acc = bias_bits >> o & 1 ? tst_get(bd[o], dt, j) : 0;
        for (int64_t i = 0; i < kin; i++) acc += tst_get(xd, dt, r * kin + i) * tst_get(wd, dt, i * total + col0[o] + j);
        tst_set(want, dt, r * dims[o] + j, acc);
      }
    tst_expect_close(o == 0 ? "QKV query" : o == 1 ? "QKV key" : "QKV value", got[o], want, dt, m * dims[o],
                     tol_of(dt) * (double)(kin + 1));
    free(want);
  }
  lathe_status_free(st);
  for (int o = 0; o < 3; o++) tst_free_output(got[o]), free(bd[o]);
  free(xd), free(wd);
  lathe_builder_free(b);
}

TEST(fused_qkv_projection) {
  for (int d = 0; d < N_FLOAT_DTS; d++)
    for (int bits = 0; bits < 8; bits++) qkv_case(float_dts[d], 2, 3, 5, 4, 3, bits);
  qkv_case(LATHE_DTYPE_FLOAT32, 1, 1, 1, 1, 1, 7);
  qkv_case(LATHE_DTYPE_FLOAT32, 0, 3, 4, 2, 2, 7);   /* no rows */
  qkv_case(LATHE_DTYPE_FLOAT64, 2, 2, 0, 3, 2, 5);   /* no input features: the biases */
  qkv_case(LATHE_DTYPE_FLOAT32, 3, 100, 70, 300, 130, 6); /* several row blocks and column tiles */
  qkv_case(LATHE_DTYPE_FLOAT64, 2, 65, 33, 257, 3, 1);
}

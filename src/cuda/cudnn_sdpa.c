/* cudnn_sdpa.c -- FusedScaledDotProductAttention and its VJP through cuDNN's fused attention
 * (option cudnn_sdpa: 1, the default, where measured faster; 2 wherever it takes the form, for tests;
 * 0 never).
 *
 * cuDNN 9 offers attention on Hopper as an operation graph in the pattern its flash-attention
 * engines recognise (the one NVIDIA's cudnn-frontend builds): forward S = scale Q K^T, the causal
 * mask from generated row and column indices, P = softmax(S) with its logsumexp (Stats, which is
 * lathe's lse: [batch, heads, seq] Float32, natural log), O = P V. The backward recomputes P
 * from Stats: dV = P^T dO, dP = dO V^T, dS = P (dP - rowsum(dO O)) scale, dK = dS^T Q, and
 * dQ = dS K summed in a Float32 buffer, then rounded. Forms taken (lathe_cuda_sdpa_form):
 * Float16/BFloat16; causal or not; one additive mask or bias over the scores (not both, not a Bool
 * mask, not sequence lengths), [1 or batch, 1 or heads, seq, kv]; grouped-query attention (the
 * key-side gradients summed over each group by a reduction); heads of 8 to 128 values in
 * multiples of 8; 16-byte aligned tensors with a contiguous head axis (BHSD and BSHD alike).
 * Every other form, and a shape cuDNN refuses, runs lathe's own kernels
 * (attention.c). The first time a form and shape runs on a device, the first SD_TRY plans of the
 * heuristics' list are timed against lathe's own kernels and the fastest is kept for the device's
 * lifetime (not on disk: a plan is made in milliseconds, not a convolution's seconds of search). */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dnn.h"

enum { U_Q = 1, U_K, U_V, U_O, U_LSE, U_SCALE, U_NEG_INF, U_DO, U_DQ, U_DK, U_DV, U_ONE, U_SUM, U_DQ_ACC, U_BIAS,
       U_VIRTUAL = 100 };
enum { SD_MAX = 176, SD_OPS = 44, SD_CFGS = 16, SD_TRY = 3, KEYN = 32, N_UIDS = 16 };

/* An operation graph being built: every descriptor made (destroyed in reverse), the operations,
 * and the first failing call's status (later calls then do nothing). */
typedef struct sdpa_graph {
  const lcu_api *api;
  lcudnnBackendDesc d[SD_MAX], ops[SD_OPS], graph;
  int n, nops;
  int64_t uid; /* the next virtual tensor's */
  lcudnnStatus s;
} sdpa_graph;

static lcudnnBackendDesc make(sdpa_graph *g, int type) {
  lcudnnBackendDesc d = NULL;
  if (g->s) return NULL;
  if (g->n == SD_MAX) {
    g->s = -1;
    return NULL;
  }
  g->s = g->api->cudnnBackendCreateDescriptor(type, &d);
  if (!g->s) g->d[g->n++] = d;
  return g->s ? NULL : d;
}

static void set(sdpa_graph *g, lcudnnBackendDesc d, int name, int type, int64_t n, const void *v) {
  if (!g->s) g->s = g->api->cudnnBackendSetAttribute(d, name, type, n, v);
}

static void fin(sdpa_graph *g, lcudnnBackendDesc d) {
  if (!g->s) g->s = g->api->cudnnBackendFinalize(d);
}

static void graph_free(sdpa_graph *g) {
  for (int i = g->n - 1; i >= 0; i--) g->api->cudnnBackendDestroyDescriptor(g->d[i]);
  g->n = g->nops = 0;
  g->graph = NULL;
}

/* A tensor of four axes; uid 0: a virtual one (the next virtual uid). */
static lcudnnBackendDesc tensor(sdpa_graph *g, int type, const int64_t *dim, const int64_t *st, int64_t uid, bool by_value) {
  lcudnnBackendDesc t = make(g, G_TENSOR);
  bool virt = uid == 0;
  int64_t align = 16;
  if (virt) uid = g->uid++;
  set(g, t, A_T_DATA_TYPE, G_T_DATA_TYPE, 1, &type);
  set(g, t, A_T_DIMS, G_T_INT64, 4, dim);
  set(g, t, A_T_STRIDES, G_T_INT64, 4, st);
  set(g, t, A_T_UID, G_T_INT64, 1, &uid);
  set(g, t, A_T_ALIGN, G_T_INT64, 1, &align);
  if (virt) set(g, t, A_T_VIRTUAL, G_T_BOOLEAN, 1, &virt);
  if (by_value) set(g, t, A_T_BY_VALUE, G_T_BOOLEAN, 1, &by_value);
  fin(g, t);
  return t;
}

static void add_op(sdpa_graph *g, lcudnnBackendDesc op) {
  fin(g, op);
  if (g->s) return;
  if (g->nops == SD_OPS) g->s = -1;
  else g->ops[g->nops++] = op;
}

/* y = mode(x, b, t) computed in prec (b, t optional; axis: GEN_INDEX's, else -1). */
static void pw(sdpa_graph *g, int mode, int prec, lcudnnBackendDesc x, lcudnnBackendDesc b, lcudnnBackendDesc t,
               lcudnnBackendDesc y, int64_t axis) {
  lcudnnBackendDesc p = make(g, G_POINTWISE);
  set(g, p, A_PW_MODE, G_T_POINTWISE_MODE, 1, &mode);
  set(g, p, A_PW_MATH_PREC, G_T_DATA_TYPE, 1, &prec);
  if (axis >= 0) set(g, p, A_PW_AXIS, G_T_INT64, 1, &axis);
  fin(g, p);
  lcudnnBackendDesc op = make(g, G_OP_POINTWISE);
  set(g, op, A_OPPW_DESC, G_T_DESC, 1, &p);
  set(g, op, A_OPPW_X, G_T_DESC, 1, &x);
  if (b) set(g, op, A_OPPW_B, G_T_DESC, 1, &b);
  if (t) set(g, op, A_OPPW_T, G_T_DESC, 1, &t);
  set(g, op, A_OPPW_Y, G_T_DESC, 1, &y);
  add_op(g, op);
}

/* c = a b (batched over the first two axes), summed in Float32. */
static void matmul(sdpa_graph *g, lcudnnBackendDesc a, lcudnnBackendDesc b, lcudnnBackendDesc c) {
  int f32 = LCUDNN_DATA_FLOAT;
  lcudnnBackendDesc m = make(g, G_MATMUL);
  set(g, m, A_MM_COMP_TYPE, G_T_DATA_TYPE, 1, &f32);
  fin(g, m);
  lcudnnBackendDesc op = make(g, G_OP_MATMUL);
  set(g, op, A_OPMM_A, G_T_DESC, 1, &a);
  set(g, op, A_OPMM_B, G_T_DESC, 1, &b);
  set(g, op, A_OPMM_C, G_T_DESC, 1, &c);
  set(g, op, A_OPMM_DESC, G_T_DESC, 1, &m);
  add_op(g, op);
}

/* y = x reduced by how over the axes where y has size 1, in Float32. */
static void reduce(sdpa_graph *g, int how, lcudnnBackendDesc x, lcudnnBackendDesc y) {
  int f32 = LCUDNN_DATA_FLOAT;
  lcudnnBackendDesc r = make(g, G_REDUCTION);
  set(g, r, A_RED_OPERATOR, G_T_REDUCTION_OP, 1, &how);
  set(g, r, A_RED_COMP_TYPE, G_T_DATA_TYPE, 1, &f32);
  fin(g, r);
  lcudnnBackendDesc op = make(g, G_OP_REDUCTION);
  set(g, op, A_OPRED_X, G_T_DESC, 1, &x);
  set(g, op, A_OPRED_Y, G_T_DESC, 1, &y);
  set(g, op, A_OPRED_DESC, G_T_DESC, 1, &r);
  add_op(g, op);
}

/* y: x's values seen with y's dims and strides (a transpose, as cuDNN's patterns write it). */
static void reshape(sdpa_graph *g, lcudnnBackendDesc x, lcudnnBackendDesc y) {
  lcudnnBackendDesc op = make(g, G_OP_RESHAPE);
  set(g, op, A_RESHAPE_X, G_T_DESC, 1, &x);
  set(g, op, A_RESHAPE_Y, G_T_DESC, 1, &y);
  add_op(g, op);
}

/* The shapes of one attention's graph. */
typedef struct sdpa_dims {
  int64_t q[4], k[4], t[4], tst[4]; /* query, key (value), and key^T (value^T) with its strides */
  int64_t s[4], sst[4], p[4], pst[4]; /* scores [b, h, s, kv] (packed) and their transpose */
  int64_t r[4], rst[4], qp[4], one[4]; /* a value per query row; packed query strides; a scalar */
  int64_t kf[4], kfst[4];              /* a key-side gradient over every query head (GQA), packed */
} sdpa_dims;

static void dims_of(const lt_sdpa_desc *s, sdpa_dims *m) {
  int64_t B = s->B, H = s->H, G = s->Hkv, S = s->S, K = s->Skv, D = s->D;
  const int64_t v[][4] = {{B, H, S, D},         {B, G, K, D},     {B, G, D, K},          {s->kst[0], s->kst[1], s->kst[3], s->kst[2]},
                          {B, H, S, K},         {H * S * K, S * K, K, 1}, {B, H, K, S},  {H * S * K, S * K, 1, K},
                          {B, H, S, 1},         {H * S, S, 1, 1}, {H * S * D, S * D, D, 1}, {1, 1, 1, 1},
                          {B, H, K, D},         {H * K * D, K * D, D, 1}};
  int64_t *out[] = {m->q, m->k, m->t, m->tst, m->s, m->sst, m->p, m->pst, m->r, m->rst, m->qp, m->one, m->kf, m->kfst};
  for (int i = 0; i < 14; i++) memcpy(out[i], v[i], sizeof v[i]);
}

static int dnn_type(lathe_dtype dt) {
  return dt == LATHE_DTYPE_BFLOAT16 ? LCUDNN_DATA_BFLOAT16 : dt == LATHE_DTYPE_FLOAT16 ? LCUDNN_DATA_HALF : LCUDNN_DATA_FLOAT;
}

/* The scaled scores x plus the additive mask or bias, where s has one. */
static lcudnnBackendDesc add_bias(sdpa_graph *g, const lt_sdpa_desc *s, const sdpa_dims *m, lcudnnBackendDesc x,
                                  lcudnnBackendDesc bias) {
  if (!s->bias) return x;
  lcudnnBackendDesc y = tensor(g, LCUDNN_DATA_FLOAT, m->s, m->sst, 0, false);
  pw(g, PW_ADD, LCUDNN_DATA_FLOAT, x, bias, NULL, y, -1);
  return y;
}

/* c = a b into d over every query head, then summed over each KV head's group into d (GQA: the
 * key-side gradients), or straight into d (as many KV as query heads). */
static void matmul_heads(sdpa_graph *g, const lt_sdpa_desc *s, const sdpa_dims *m, int io, lcudnnBackendDesc a,
                         lcudnnBackendDesc b, lcudnnBackendDesc d) {
  if (s->Hkv == s->H) {
    matmul(g, a, b, d);
    return;
  }
  lcudnnBackendDesc full = tensor(g, io, m->kf, m->kfst, 0, false);
  matmul(g, a, b, full);
  reduce(g, RED_ADD, full, d);
}

/* x with -inf above the diagonal (key j > query i hidden: the top-left causality lathe:cpu has). */
static lcudnnBackendDesc causal(sdpa_graph *g, const sdpa_dims *m, lcudnnBackendDesc x, lcudnnBackendDesc ninf) {
  const int F = LCUDNN_DATA_FLOAT;
  lcudnnBackendDesc row = tensor(g, DNN_INT32, m->s, m->sst, 0, false), col = tensor(g, DNN_INT32, m->s, m->sst, 0, false);
  lcudnnBackendDesc keep = tensor(g, DNN_BOOLEAN, m->s, m->sst, 0, false), y = tensor(g, F, m->s, m->sst, 0, false);
  pw(g, PW_GEN_INDEX, F, x, NULL, NULL, row, 2);
  pw(g, PW_GEN_INDEX, F, x, NULL, NULL, col, 3);
  pw(g, PW_CMP_GE, DNN_BOOLEAN, row, col, NULL, keep, -1);
  pw(g, PW_BINARY_SELECT, F, x, ninf, keep, y, -1);
  return y;
}

/* Builds and finalizes s's operation graph on handle h into g (g->graph; g->s: the status). */
static void build(sdpa_graph *g, lcudnnHandle h, const lt_sdpa_desc *s, bool vjp) {
  const int F = LCUDNN_DATA_FLOAT, io = dnn_type(s->dt);
  sdpa_dims m;
  dims_of(s, &m);
  g->uid = U_VIRTUAL;
  /* cuDNN's patterns take the key (and the value, for dP) transposed: the same memory */
  lcudnnBackendDesc q = tensor(g, io, m.q, s->qst, U_Q, false), kt = tensor(g, io, m.t, m.tst, U_K, false);
  lcudnnBackendDesc o = tensor(g, io, m.q, s->qst, U_O, false), lse = tensor(g, F, m.r, m.rst, U_LSE, false);
  lcudnnBackendDesc scale = tensor(g, F, m.one, m.one, U_SCALE, true);
  lcudnnBackendDesc ninf = s->causal ? tensor(g, F, m.one, m.one, U_NEG_INF, true) : NULL;
  lcudnnBackendDesc bias = s->bias ? tensor(g, dnn_type(s->bdt), s->bdim, s->bst, U_BIAS, false) : NULL;
  lcudnnBackendDesc sc = tensor(g, F, m.s, m.sst, 0, false), ss = tensor(g, F, m.s, m.sst, 0, false);
  if (!vjp) {
    lcudnnBackendDesc v = tensor(g, io, m.k, s->kst, U_V, false);
    matmul(g, q, kt, sc);
    pw(g, PW_MUL, F, sc, scale, NULL, ss, -1);
    ss = add_bias(g, s, &m, ss, bias);
    if (s->causal) ss = causal(g, &m, ss, ninf);
    lcudnnBackendDesc mx = tensor(g, F, m.r, m.rst, 0, false), x = tensor(g, F, m.s, m.sst, 0, false);
    lcudnnBackendDesc e = tensor(g, F, m.s, m.sst, 0, false), sum = tensor(g, F, m.r, m.rst, 0, false);
    lcudnnBackendDesc lg = tensor(g, F, m.r, m.rst, 0, false), p = tensor(g, io, m.s, m.sst, 0, false);
    reduce(g, RED_MAX, ss, mx);
    pw(g, PW_SUB, F, ss, mx, NULL, x, -1);
    pw(g, PW_EXP, F, x, NULL, NULL, e, -1);
    reduce(g, RED_ADD, e, sum);
    pw(g, PW_LOG, F, sum, NULL, NULL, lg, -1);
    pw(g, PW_ADD, F, mx, lg, NULL, lse, -1);
    pw(g, PW_DIV, F, e, sum, NULL, p, -1);
    matmul(g, p, v, o);
  } else {
    lcudnnBackendDesc vt = tensor(g, io, m.t, m.tst, U_V, false), dout = tensor(g, io, m.q, s->qst, U_DO, false);
    lcudnnBackendDesc dq = tensor(g, io, m.q, s->qst, U_DQ, false), dk = tensor(g, io, m.k, s->kst, U_DK, false);
    lcudnnBackendDesc dv = tensor(g, io, m.k, s->kst, U_DV, false), one = tensor(g, F, m.one, m.one, U_ONE, true);
    lcudnnBackendDesc sum = tensor(g, F, m.r, m.rst, U_SUM, false), dqa = tensor(g, F, m.q, m.qp, U_DQ_ACC, false);
    /* rowsum(dO O), into a Float32 buffer of the plan's */
    lcudnnBackendDesc t = tensor(g, F, m.q, m.qp, 0, false), r = tensor(g, F, m.r, m.rst, 0, false);
    pw(g, PW_MUL, F, dout, o, NULL, t, -1);
    reduce(g, RED_ADD, t, r);
    pw(g, PW_MUL, F, r, one, NULL, sum, -1);
    /* P = exp(scale Q K^T - lse), masked; dV = P^T dO */
    lcudnnBackendDesc x = tensor(g, F, m.s, m.sst, 0, false), e = tensor(g, F, m.s, m.sst, 0, false);
    lcudnnBackendDesc pt = tensor(g, io, m.p, m.pst, 0, false);
    matmul(g, q, kt, sc);
    pw(g, PW_MUL, F, sc, scale, NULL, ss, -1);
    pw(g, PW_SUB, F, add_bias(g, s, &m, ss, bias), lse, NULL, x, -1);
    if (s->causal) x = causal(g, &m, x, ninf);
    pw(g, PW_EXP, F, x, NULL, NULL, e, -1);
    reshape(g, e, pt);
    matmul_heads(g, s, &m, io, pt, dout, dv);
    /* dS = P (dO V^T - rowsum) scale; dK = dS^T Q; dQ = dS K through the Float32 buffer */
    lcudnnBackendDesc dp = tensor(g, F, m.s, m.sst, 0, false), a = tensor(g, F, m.s, m.sst, 0, false);
    lcudnnBackendDesc b = tensor(g, F, m.s, m.sst, 0, false), ds = tensor(g, F, m.s, m.sst, 0, false);
    lcudnnBackendDesc dst = tensor(g, io, m.p, m.pst, 0, false), kn = tensor(g, io, m.k, s->kst, 0, false);
    matmul(g, dout, vt, dp);
    pw(g, PW_SUB, F, dp, sum, NULL, a, -1);
    pw(g, PW_MUL, F, a, e, NULL, b, -1);
    pw(g, PW_MUL, F, b, scale, NULL, ds, -1);
    reshape(g, ds, dst);
    matmul_heads(g, s, &m, io, dst, q, dk);
    reshape(g, kt, kn);
    matmul(g, ds, kn, dqa);
    pw(g, PW_IDENTITY, F, dqa, NULL, NULL, dq, -1);
  }
  lcudnnBackendDesc graph = make(g, G_OPGRAPH);
  set(g, graph, A_GRAPH_OPS, G_T_DESC, g->nops, g->ops);
  set(g, graph, A_GRAPH_HANDLE, G_T_HANDLE, 1, &h);
  fin(g, graph);
  g->graph = g->s ? NULL : graph;
}

lcudnnStatus lathe_cuda_sdpa_graph_check(const lcu_api *api, lcudnnHandle h, const lt_sdpa_desc *s, bool vjp) {
  sdpa_graph g = {.api = api};
  build(&g, h, s, vjp);
  lcudnnStatus st = g.s;
  graph_free(&g);
  return st;
}

bool lathe_cuda_sdpa_form(const lt_sdpa_desc *s) {
  if (s->dt != LATHE_DTYPE_FLOAT16 && s->dt != LATHE_DTYPE_BFLOAT16) return false;
  if (s->B < 1 || s->H < 1 || s->S < 1 || s->Skv < 1 || s->D < 8 || s->D > 128 || s->D % 8) return false;
  if (s->Hkv < 1 || s->H % s->Hkv) return false;
  if (s->qst[3] != 1 || s->kst[3] != 1) return false;
  for (int i = 0; i < 3; i++)
    if (s->qst[i] % 8 || s->kst[i] % 8) return false;
  if (s->bias) { /* [1 or batch, 1 or heads, seq, kv], rows of whole 16 bytes */
    int64_t per16 = s->bdt == LATHE_DTYPE_FLOAT32 ? 4 : 8;
    if (s->bdt != s->dt && s->bdt != LATHE_DTYPE_FLOAT32) return false;
    if ((s->bdim[0] != 1 && s->bdim[0] != s->B) || (s->bdim[1] != 1 && s->bdim[1] != s->H)) return false;
    if (s->bdim[2] != s->S || s->bdim[3] != s->Skv || s->bst[3] != 1 || (s->S > 1 && s->bst[2] % per16)) return false;
    for (int a = 0; a < 4; a++)
      if (s->bst[a] < 0) return false;
  }
  const lcuDeviceptr p[] = {s->q, s->k, s->v, s->o, s->lse, s->dout, s->dq, s->dk, s->dv, s->bias};
  for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
    if (p[i] % 16) return false;
  return true;
}

/* ---- plans, their choice and their runs ---- */
typedef struct sdpa_plan {
  sdpa_graph g;
  lcudnnBackendDesc cfg, plan;
  int64_t ws;
} sdpa_plan;

typedef struct sdpa_choice {
  struct sdpa_choice *next;
  int64_t key[KEYN];
  sdpa_plan *p; /* NULL: lathe's own kernels */
} sdpa_choice;

static void plan_free(sdpa_plan *p) {
  if (!p) return;
  const lcu_api *api = p->g.api;
  if (p->plan) api->cudnnBackendDestroyDescriptor(p->plan);
  if (p->cfg) api->cudnnBackendDestroyDescriptor(p->cfg);
  graph_free(&p->g);
  free(p);
}

void lathe_cuda_sdpa_release(cuda_dev *d) {
  for (sdpa_choice *c = d->sdpa_choices, *next; c; c = next) next = c->next, plan_free(c->p), free(c);
  d->sdpa_choices = NULL;
}

static void make_key(const lt_sdpa_desc *s, bool vjp, int64_t *key) {
  int k = 0;
  uint32_t bits;
  memcpy(&bits, &s->scale, sizeof bits);
  memset(key, 0, sizeof(int64_t) * KEYN);
  key[k++] = vjp, key[k++] = s->dt, key[k++] = s->causal, key[k++] = bits;
  key[k++] = s->B, key[k++] = s->H, key[k++] = s->Hkv, key[k++] = s->S, key[k++] = s->Skv, key[k++] = s->D;
  key[k++] = s->bias ? s->bdt + 1 : 0;
  for (int i = 0; i < 4; i++)
    key[k++] = s->qst[i], key[k++] = s->kst[i], key[k++] = s->bias ? s->bdim[i] : 0, key[k++] = s->bias ? s->bst[i] : 0;
}

static lathe_status_t sdpa_error(const lcu_api *api, lcudnnStatus st, bool vjp, const char *what) {
  if (st == LCUDNN_STATUS_SUCCESS) return NULL;
  return lathe_status_new(LATHE_STATUS_INTERNAL, "FusedScaledDotProductAttention%s: cuDNN %s failed: %s (status %d)",
                          vjp ? "VJP" : "", what, st > 0 ? api->cudnnGetErrorString(st) : "no plan", st);
}

typedef struct sdpa_run {
  lathe_cuda_exec *ex;
  const lt_sdpa_desc *s;
  bool vjp;
  const sdpa_plan *p;
} sdpa_run;

/* Runs plan p on s: its workspace and, for the VJP, its Float32 buffers from the step's scratch. */
static lathe_status_t execute(void *arg) {
  const sdpa_run *r = arg;
  const lt_sdpa_desc *s = r->s;
  const lcu_api *api = lathe_cuda_exec_api(r->ex);
  lcuDeviceptr ws = 0, sum = 0, dqa = 0;
  if (r->p->ws) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(r->ex, LATHE_DTYPE_UINT8, r->p->ws, &ws, NULL));
  /* cuDNN before 9.10 takes the mask's value as the lowest float (cudnn-frontend does the same) */
  float scale = s->scale, one = 1, ninf = api->cudnnGetVersion() < 91000 ? -FLT_MAX : -INFINITY;
  int64_t uids[N_UIDS];
  void *ptrs[N_UIDS];
  int n = 0;
#define PUT(u, ptr) (uids[n] = (u), ptrs[n++] = (void *)(ptr))
#define DEV(p) ((void *)(uintptr_t)(p))
  PUT(U_Q, DEV(s->q)), PUT(U_K, DEV(s->k)), PUT(U_V, DEV(s->v)), PUT(U_O, DEV(s->o)), PUT(U_LSE, DEV(s->lse));
  PUT(U_SCALE, &scale);
  if (s->causal) PUT(U_NEG_INF, &ninf);
  if (s->bias) PUT(U_BIAS, DEV(s->bias));
  if (r->vjp) {
    LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(r->ex, LATHE_DTYPE_FLOAT32, s->B * s->H * s->S, &sum, NULL));
    LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(r->ex, LATHE_DTYPE_FLOAT32, s->B * s->H * s->S * s->D, &dqa, NULL));
    /* cuDNN 9.6 and later clear the dQ buffer themselves (cudnn-frontend clears it before) */
    if (api->cudnnGetVersion() < 90600)
      LATHE_RETURN_IF_ERROR(lathe_cuda_zero(r->ex, dqa, (size_t)(s->B * s->H * s->S * s->D) * 4));
    PUT(U_DO, DEV(s->dout)), PUT(U_DQ, DEV(s->dq)), PUT(U_DK, DEV(s->dk)), PUT(U_DV, DEV(s->dv));
    PUT(U_ONE, &one), PUT(U_SUM, DEV(sum)), PUT(U_DQ_ACC, DEV(dqa));
  }
#undef PUT
#undef DEV
  return sdpa_error(api, lathe_cuda_dnn_execute(r->ex, r->p->plan, n, uids, ptrs, ws), r->vjp, "attention");
}

/* The fastest of the first SD_TRY plans cuDNN makes for s (*best NULL: none), and its time. */
static lathe_status_t measure(lathe_cuda_exec *ex, const lt_sdpa_desc *s, bool vjp, sdpa_plan **best, float *best_ms) {
  cuda_dev *d = lathe_cuda_exec_dev(ex);
  const lcu_api *api = d->cu->api;
  *best = NULL;
  lathe_status_t st = NULL;
  sdpa_plan *p = calloc(1, sizeof *p);
  if (!p) return LATHE_OOM("FusedScaledDotProductAttention");
  p->g.api = api;
  build(&p->g, d->dnn, s, vjp);
  lcudnnBackendDesc cfg[SD_CFGS] = {0};
  int64_t n = 0;
  if (!p->g.s) lathe_cuda_dnn_configs(api, p->g.graph, cfg, SD_CFGS, &n);
  for (int i = 0, tried = 0; i < n && tried < SD_TRY && !st; i++) {
    if (lathe_cuda_dnn_plan(d, cfg[i], &p->plan, &p->ws)) continue;
    tried++;
    float t = 0;
    sdpa_run run = {ex, s, vjp, p};
    lathe_status_t e = lathe_cuda_time_runs(ex, execute, &run, 3, &t);
    if (e && lathe_status_code_of(e) != LATHE_STATUS_INTERNAL) st = e; /* out of memory, say: not the engine's */
    else if (e) lathe_status_free(e);
    if (e || (*best && t >= *best_ms)) {
      api->cudnnBackendDestroyDescriptor(p->plan);
      p->plan = NULL;
      continue;
    }
    /* the faster plan, with its configuration (the graph's descriptors stay with p until the end) */
    plan_free(*best);
    *best = NULL;
    sdpa_plan *keep = calloc(1, sizeof *keep);
    if (!keep) {
      st = LATHE_OOM("FusedScaledDotProductAttention");
      break;
    }
    keep->g.api = api, keep->cfg = cfg[i], keep->plan = p->plan, keep->ws = p->ws;
    cfg[i] = NULL, p->plan = NULL;
    *best = keep, *best_ms = t;
  }
  for (int i = 0; i < SD_CFGS; i++)
    if (cfg[i]) api->cudnnBackendDestroyDescriptor(cfg[i]);
  if (*best && !st) { /* the plan keeps the graph's descriptors */
    memcpy((*best)->g.d, p->g.d, sizeof p->g.d);
    (*best)->g.n = p->g.n, (*best)->g.graph = p->g.graph;
    p->g.n = 0;
  }
  plan_free(p);
  if (st) plan_free(*best), *best = NULL;
  return st;
}

lathe_status_t lathe_cuda_cudnn_sdpa(lathe_cuda_exec *ex, const lt_sdpa_desc *s, bool vjp, lathe_status_t (*own)(void *),
                                     void *own_ctx, bool *done) {
  *done = false;
  cuda_dev *d = lathe_cuda_exec_dev(ex);
  if (!d->cu->cudnn_sdpa || d->cc < 80 || !lathe_cuda_sdpa_form(s) || !lathe_cuda_dnn_ready(d)) return NULL;
  int64_t key[KEYN];
  make_key(s, vjp, key);
  pthread_mutex_lock(&d->dnn_mu);
  sdpa_choice *ch = d->sdpa_choices;
  while (ch && memcmp(ch->key, key, sizeof key) != 0) ch = ch->next;
  pthread_mutex_unlock(&d->dnn_mu);
  if (!ch && lathe_cuda_exec_capturing(ex)) /* measuring needs the GPU to run: not inside a graph's capture */
    return lathe_status_new(LATHE_STATUS_UNIMPLEMENTED,
                            "FusedScaledDotProductAttention: cuDNN's plans are measured outside a CUDA graph");
  if (!ch) {
    lathe_trace *tr = lathe_cuda_exec_trace(ex);
    int64_t t0 = tr ? lathe_trace_now() : 0;
    sdpa_plan *best = NULL;
    float best_ms = 0, own_ms = -1;
    LATHE_RETURN_IF_ERROR(measure(ex, s, vjp, &best, &best_ms));
    if (best && d->cu->cudnn_sdpa == 1) {
      lathe_status_t st = lathe_cuda_time_runs(ex, own, own_ctx, 3, &own_ms);
      if (st) {
        plan_free(best);
        return st;
      }
      if (own_ms < best_ms) plan_free(best), best = NULL;
    }
    const char *what = vjp ? "FusedScaledDotProductAttentionVJP" : "FusedScaledDotProductAttention";
    if (lathe_cuda_exec_dump_dir(ex))
      lathe_profile_note(lathe_cuda_exec_dump_dir(ex), LATHE_CUDA_LIBRARY_NOTES,
                         "cuDNN %s %s b%lld h%lld/%lld s%lld kv%lld d%lld%s%s: %s, %.4f ms (cuDNN's best %.4f ms, lathe's own %.4f ms)",
                         lathe_dtype_name(s->dt), what, (long long)s->B, (long long)s->H, (long long)s->Hkv, (long long)s->S,
                         (long long)s->Skv, (long long)s->D, s->causal ? " causal" : "", s->bias ? " bias" : "",
                         best ? "cuDNN's fused attention" : "lathe's own kernels", best ? best_ms : own_ms, best_ms, own_ms);
    if (tr) {
      char args[96];
      snprintf(args, sizeof args, "\"op\":\"%s\",\"chosen\":\"%s\"", what, best ? "cuDNN" : "lathe");
      lathe_trace_complete(tr, "cuDNN engine search", "compile", t0, lathe_trace_now(), args);
    }
    sdpa_choice *n = malloc(sizeof *n);
    if (!n) {
      plan_free(best);
      return LATHE_OOM("FusedScaledDotProductAttention");
    }
    memcpy(n->key, key, sizeof key);
    n->p = best;
    pthread_mutex_lock(&d->dnn_mu);
    n->next = d->sdpa_choices, d->sdpa_choices = n;
    pthread_mutex_unlock(&d->dnn_mu);
    ch = n;
  }
  if (!ch->p) return NULL; /* lathe's own kernels */
  sdpa_run run = {ex, s, vjp, ch->p};
  LATHE_RETURN_IF_ERROR(execute(&run));
  *done = true;
  return NULL;
}

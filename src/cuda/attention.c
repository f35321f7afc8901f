/* attention.c -- FusedScaledDotProductAttention, its VJP and FusedAttentionQKVProjection on the
 * GPU.
 *
 * Two designs. The streaming kernels (flash.cuh, FlashAttention's scheme) on tensor cores serve
 * Float16/BFloat16 (sm_80 and later) and Float32 with tf32=1. Otherwise batched GEMMs + a
 * softmax kernel, so the products run on cuBLASLt (exact Float32, Float64). Work goes by chunks
 * of query rows: for a set of (batch, head) pairs whose query, key and value matrices lie at one
 * stride from each other (all pairs in BHSD; per batch or per head in BSHD; GQA by the query
 * heads' position in their group), one product makes the
 * [pairs, rows, kvLen] scores, a row kernel turns them into probabilities (scale, bias, additive
 * or Bool mask, causality, sequence-length padding, max-subtracted exponentials) and writes the
 * logsumexp, and a second product multiplies them into the values, straight into the output.
 * Chunks bound the scores' memory (SCORE_BUDGET), so any sequence length runs.
 * The VJP recomputes probabilities from the logsumexp (no stored scores): per chunk, scores and
 * dP = dOutput . V^T, a kernel makes P and dS = P (dP - delta) scale (delta = rowsum(dOutput *
 * output)), then dV += P^T dOutput and dKey += dS^T Query accumulate in place (the pairs of one
 * product never share a kv head, and products run in order on the stream), dQuery = dS . Key.
 * Float16/BFloat16 operands are widened to Float32 copies around the Float32 path and results
 * rounded once, as lathe:cpu does; the logsumexp is Float32 (Float64 for Float64). The streaming
 * kernels (flash.cuh) read and write half tensors as they are. */
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
  int64_t j0, jn1, jA, jB; /* the launch's first job, and the rule of a job's first pair (jobs) */
  int64_t nt, t0, dp;      /* pairs t0 .. t0 + nt of each job, dp apart: p = b * H + h */
  int64_t i0, sq;          /* query rows [i0, i0 + sq) */
  int64_t ms[4], bs[4];
  double scale;
  int64_t causal, has_amask, has_bmask, has_bias, has_lens;
  int64_t qss, qhs, qbs; /* query/output strides (delta kernel) */
  int64_t kss, khs, kbs, vec; /* key/value strides; vec: 16-byte loads (flash kernels) */
} att_args;

static const char att_src[] = LT_CUH_ATTENTION;

/* The row kernels' texts, one per dtype (Float32, Float64), each made once (kernels are found by
 * its address: lathe_cuda_kernel_lasting) and compiled on first use. */
static char *att_text(int f64) {
  lt_text t = {0};
  lt_put(&t, "#define LT_AD %d\n%s%s%s", f64, lathe_cuda_access_source(), lathe_cuda_reduce_source(), att_src);
  if (t.oom) free(t.s);
  return t.oom ? NULL : t.s;
}
static const char *sources[2];
static pthread_once_t sources_once = PTHREAD_ONCE_INIT;
static void make_sources(void) {
  for (int i = 0; i < 2; i++) sources[i] = att_text(i);
}

/* lt_att_<what>[_warp<per>]_<dtype> */
static lathe_status_t att_kernel(lathe_cuda_exec *ex, const char *what, int per, bool f64, lcuFunction *f) {
  pthread_once(&sources_once, make_sources);
  if (!sources[f64]) return LATHE_OOM("lathe:cuda: codegen");
  char name[64], warp[16] = "";
  if (per) snprintf(warp, sizeof warp, "_warp%d", per);
  snprintf(name, sizeof name, "lt_att_%s%s_%s", what, warp, f64 ? "Float64" : "Float32");
  return lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), sources[f64], name, f);
}

/* The streaming kernels (flash.cuh): a text per rounded head size, form (plain, masked) and
 * storage (Float32, Float16, BFloat16), made once each and compiled on first use. */
static const char flash_src[] = LT_CUH_FLASH;
enum { N_FLASH = 4, N_FLASH_T = 3 };
static const int flash_sizes[N_FLASH] = {16, 32, 64, 128};
static const lathe_dtype flash_types[N_FLASH_T] = {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_BFLOAT16};
/* [..][N_FLASH_T]: Float32 with tf32x3=1, its products as three TF32 products (LT_FA_X3) */
static const char *flash_source[N_FLASH][2][N_FLASH_T + 1];
static pthread_once_t flash_once = PTHREAD_ONCE_INIT;
static char *make_flash_text(int dt, int masked, int type) {
  lt_text t = {0};
  bool x3 = type == N_FLASH_T;
  lt_put(&t, "#define LT_FA_D %d\n#define LT_FA_MASKED %d\n#define LT_FA_T %d\n#define LT_FA_X3 %d\n%s%s%s%s", dt, masked,
         x3 ? 0 : type, x3, lathe_cuda_access_source(), lathe_cuda_reduce_source(), att_src, flash_src);
  if (t.oom) free(t.s);
  return t.oom ? NULL : t.s;
}
static void make_flash_sources(void) {
  for (int i = 0; i < N_FLASH; i++)
    for (int m = 0; m < 2; m++)
      for (int y = 0; y <= N_FLASH_T; y++) flash_source[i][m][y] = make_flash_text(flash_sizes[i], m, y);
}

void lathe_cuda_sources_attention(lathe_cuda_source_fn fn, void *ctx) {
  for (int i = 0; i < 2; i++) {
    char *t = att_text(i);
    if (t) fn(ctx, i ? "attention Float64" : "attention Float32", t);
    free(t);
  }
  for (int i = 0; i < N_FLASH; i++)
    for (int m = 0; m < 2; m++)
      for (int y = 0; y <= N_FLASH_T; y++) {
        char *f = make_flash_text(flash_sizes[i], m, y), label[80];
        snprintf(label, sizeof label, "attention (streaming) D%d %s %s", flash_sizes[i], m ? "masked" : "plain",
                 y < N_FLASH_T ? lathe_dtype_name(flash_types[y]) : "Float32 tf32x3");
        if (f) fn(ctx, label, f);
        free(f);
      }
}

/* ---- geometry ---- */
typedef struct att {
  att_args a;
  int64_t Hkv, qss, qhs, qbs, kss, khs, kbs;
  bool f64, bhsd, half;
  lathe_dtype dt;  /* what the kernels compute in: Float32 or Float64 */
  lathe_dtype sdt; /* the query's (key's, value's) dtype; q, k, v hold it until widen_qkv */
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

/* t's data from src, the compute dtype's result: rounded once into t, a half tensor. */
static lathe_status_t from_compute(lathe_cuda_exec *ex, lcuDeviceptr src, lathe_tensor *t) {
  lathe_dtype path[2] = {LATHE_DTYPE_FLOAT32, t->shape.dtype};
  return lathe_cuda_convert(ex, src, lathe_cuda_ptr(t), path, 2, lathe_shape_size(&t->shape), NULL, NULL, 0);
}

/* What the shapes and attributes say (no pointers, no masks). */
static void shape_geometry(att *c, const lathe_node *n, const lathe_shape *qs, const lathe_shape *ks) {
  memset(c, 0, sizeof *c);
  c->bhsd = lathe_attr_sdpa_layout(n) == LATHE_ATTENTION_LAYOUT_BHSD;
  c->f64 = qs->dtype == LATHE_DTYPE_FLOAT64;
  c->dt = c->f64 ? LATHE_DTYPE_FLOAT64 : LATHE_DTYPE_FLOAT32;
  c->sdt = qs->dtype, c->half = is_half(qs->dtype);
  int sa = c->bhsd ? 2 : 1, ha = 3 - sa;
  att_args *a = &c->a;
  a->B = qs->dims[0], a->H = qs->dims[ha], a->S = qs->dims[sa], a->D = qs->dims[3];
  c->Hkv = ks->dims[ha], a->Skv = ks->dims[sa];
  a->group = c->Hkv ? a->H / c->Hkv : 1;
  c->qss = c->bhsd ? a->D : a->H * a->D, c->qhs = c->bhsd ? a->S * a->D : a->D, c->qbs = a->H * a->S * a->D;
  c->kss = c->bhsd ? a->D : c->Hkv * a->D, c->khs = c->bhsd ? a->Skv * a->D : a->D, c->kbs = c->Hkv * a->Skv * a->D;
  a->qss = c->qss, a->qhs = c->qhs, a->qbs = c->qbs;
  a->kss = c->kss, a->khs = c->khs, a->kbs = c->kbs;
  a->causal = lathe_attr_sdpa_causal(n);
  double scale = lathe_attr_sdpa_scale(n);
  a->scale = scale != 0 ? scale : a->D ? 1.0 / sqrt((double)a->D) : 1.0;
}

static lathe_status_t geometry(lathe_cuda_exec *ex, att *c, const lathe_node *n, lathe_tensor *const *in, bool vjp) {
  shape_geometry(c, n, &in[0]->shape, &in[1]->shape);
  att_args *a = &c->a;
  c->q = lathe_cuda_ptr(in[0]), c->k = lathe_cuda_ptr(in[1]), c->v = lathe_cuda_ptr(in[2]);
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

/* The batched products' operands: widened Float32 copies of half queries, keys and values. */
static lathe_status_t widen_qkv(lathe_cuda_exec *ex, att *c, lathe_tensor *const *in) {
  for (int i = 0; i < 3; i++) LATHE_RETURN_IF_ERROR(as_compute(ex, in[i], i == 0 ? &c->q : i == 1 ? &c->k : &c->v));
  c->sdt = c->dt;
  return NULL;
}

/* Jobs: sets of nt (batch, head) pairs p = p0(j) + t dp, t < nt, whose matrices lie at one stride
 * (one strided-batched product each); job j's first pair is p0(j) = (j / jn1) jA + (j % jn1) jB. */
typedef struct jobs {
  int64_t n, jn1, jA, jB, nt, dp;
} jobs;

static jobs jobs_of(const att *c) {
  int64_t B = c->a.B, H = c->a.H, G = c->a.group, Hkv = c->Hkv;
  if (c->bhsd) return G == 1 ? (jobs){1, 1, 0, 0, B * H, 1} : (jobs){G, G, 0, 1, B * Hkv, G};
  if (G == 1) return B <= H ? (jobs){B, 1, H, 0, H, 1} : (jobs){H, 1, 1, 0, B, H};
  if (B * G <= H) return (jobs){B * G, G, H, 1, Hkv, G};
  return (jobs){H, 1, 1, 0, B, H};
}

static int64_t job_p0(const jobs *jb, int64_t j) { return j / jb->jn1 * jb->jA + j % jb->jn1 * jb->jB; }

enum { SCORE_BUDGET = 256 << 20 };

/* A chunk: jpc whole jobs at once when a job's scores fit the budget (one row kernel then serves
 * them all), else ntc pairs of sq query rows of one job; scores of Skv elements of es bytes, bufs
 * buffers. */
static void chunking(const att *c, const jobs *jb, int bufs, int64_t *jpc, int64_t *ntc, int64_t *sq) {
  int64_t es = c->f64 ? 8 : 4, per_row = (c->a.Skv > 0 ? c->a.Skv : 1) * es * bufs;
  int64_t rows = SCORE_BUDGET / per_row;
  if (rows < 1) rows = 1;
  *sq = c->a.S < rows ? c->a.S : rows;
  if (*sq < 1) *sq = 1;
  int64_t pairs = rows / *sq;
  *ntc = jb->nt < pairs ? jb->nt : pairs;
  if (*ntc < 1) *ntc = 1;
  *jpc = *ntc == jb->nt && *sq == c->a.S ? pairs / jb->nt : 1;
  if (*jpc > jb->n) *jpc = jb->n;
  if (*jpc < 1) *jpc = 1;
}

static lathe_status_t launch_rows(lathe_cuda_exec *ex, lcuFunction f, int64_t rows, int tpr, void **args) {
  unsigned b, th;
  lathe_cuda_row_grid(rows, tpr, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

/* Strides between consecutive pairs of a job (0 when it has one). */
static void pair_strides(const att *c, const jobs *jb, int64_t *qst, int64_t *kst) {
  *qst = jb->nt > 1 ? q_off(c, jb->dp) - q_off(c, 0) : 0;
  *kst = jb->nt > 1 ? k_off(c, jb->dp) - k_off(c, 0) : 0;
}

/* The kernel arguments of a chunk: jobs j0.., pairs t0 .. t0 + nt, query rows i0 .. i0 + sq. */
static att_args chunk_args(const att *c, const jobs *jb, int64_t j0, int64_t t0, int64_t nt, int64_t i0, int64_t sq) {
  att_args aa = c->a;
  aa.j0 = j0, aa.jn1 = jb->jn1, aa.jA = jb->jA, aa.jB = jb->jB;
  aa.nt = nt, aa.t0 = t0, aa.dp = jb->dp, aa.i0 = i0, aa.sq = sq;
  return aa;
}

/* Threads per row of the gradient kernel (no reduction: a warp at most, looping over the row). */
static int tpr_grad(int64_t skv) {
  int t = lathe_cuda_row_threads(skv);
  return t < 32 ? t : 32;
}

/* The matrices of one VJP product set: job j, pairs from t0, query rows i0 .. i0 + m. */
enum { M_Q, M_DO, M_DQ, M_KT, M_VT, M_KN, M_DK, M_DV, M_S, M_ST, M_DP, M_DPT, M_COUNT };
static void vjp_mats(const att *c, const jobs *jb, int64_t j, int64_t t0, int64_t i0, int64_t m, int64_t qst, int64_t kst,
                     lcuDeviceptr dout, const lcuDeviceptr *grads, lcuDeviceptr sc, lcuDeviceptr dp, lt_mat *mt) {
  size_t es = c->f64 ? 8 : 4;
  int64_t p0 = job_p0(jb, j) + t0 * jb->dp, skv = c->a.Skv;
  size_t qr = (size_t)(q_off(c, p0) + i0 * c->qss) * es, ko = (size_t)k_off(c, p0) * es;
  mt[M_Q] = (lt_mat){c->q + qr, c->qss, 1, qst};
  mt[M_DO] = (lt_mat){dout + qr, c->qss, 1, qst};
  mt[M_DQ] = (lt_mat){grads[0] + qr, c->qss, 1, qst};
  mt[M_KT] = (lt_mat){c->k + ko, 1, c->kss, kst};
  mt[M_VT] = (lt_mat){c->v + ko, 1, c->kss, kst};
  mt[M_KN] = (lt_mat){c->k + ko, c->kss, 1, kst};
  mt[M_DK] = (lt_mat){grads[1] + ko, c->kss, 1, kst};
  mt[M_DV] = (lt_mat){grads[2] + ko, c->kss, 1, kst};
  mt[M_S] = (lt_mat){sc, skv, 1, m * skv};
  mt[M_ST] = (lt_mat){sc, 1, skv, m * skv};
  mt[M_DP] = (lt_mat){dp, skv, 1, m * skv};
  mt[M_DPT] = (lt_mat){dp, 1, skv, m * skv};
}

/* ---- streaming kernels (flash.cuh) ---- */
enum { FA_BQ = 64, FA_BK = 64, FA_BQB = 32, FA_PS = 40 }; /* as flash.cuh's LT_FA_* */

/* Whether c's Float32 attention streams with its products split in three (tf32x3=1). */
static bool flash_x3(const cuda_dev *d, const att *c) { return !c->f64 && !c->half && d->cu->tf32x3 && !d->cu->tf32; }

/* Which of flash_sizes c's heads take, or -1 where the batched products serve instead: the
 * streaming kernels multiply on TF32 tensor cores (mma.sync: sm_80 and later), heads of up to 128
 * values. Half operands are TF32 values exactly, so halves stream by default; Float32 with tf32=1,
 * or with tf32x3=1 as three TF32 products of split operands. */
static int flash_size(const cuda_dev *d, const att *c) {
  const att_args *a = &c->a;
  if (c->f64 || (!c->half && !d->cu->tf32 && !flash_x3(d, c)) || !d->cu->flash || d->cc < 80 || a->D < 1 || a->Skv < 1)
    return -1;
  if (a->B * a->H * ((a->S + FA_BQ - 1) / FA_BQ) > INT32_MAX || a->B * c->Hkv * ((a->Skv + FA_BK - 1) / FA_BK) > INT32_MAX)
    return -1;
  for (int i = 0; i < N_FLASH; i++)
    if (a->D <= flash_sizes[i]) return i;
  return -1;
}

/* The streaming text of flash_sizes[size], a form and c's storage dtype on d (NULL: out of memory). */
static const char *flash_text(const cuda_dev *d, const att *c, int size, bool masked) {
  pthread_once(&flash_once, make_flash_sources);
  int y = 0;
  while (y < N_FLASH_T - 1 && flash_types[y] != c->sdt) y++;
  return flash_source[size][masked][flash_x3(d, c) ? N_FLASH_T : y];
}

static lathe_status_t flash_kernel(lathe_cuda_exec *ex, const att *c, int size, bool masked, const char *name,
                                   lcuFunction *f) {
  const char *src = flash_text(lathe_cuda_exec_dev(ex), c, size, masked);
  if (!src) return LATHE_OOM("lathe:cuda: codegen");
  return lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), src, name, f);
}

static bool flash_masked(const att *c) { return c->a.has_amask || c->a.has_bmask || c->a.has_bias; }

/* How the kernels can move every matrix they read or write (all in the storage dtype): 1 by groups
 * of 4 values, 2 (halves) by groups of 8, 16-byte copies the half forward makes asynchronously; 0
 * one value at a time. */
static int64_t flash_vec(const att *c, const lcuDeviceptr *p, int n) {
  size_t es = (size_t)lathe_dtype_bits(c->sdt) / 8;
  int64_t best = es == 2 ? 2 : 1;
  for (int64_t v = best; v >= 1; v--) {
    int64_t m = 4 * v; /* values a group */
    bool ok = !(c->a.D % m || c->qss % m || c->qhs % m || c->qbs % m || c->kss % m || c->khs % m || c->kbs % m);
    for (int i = 0; ok && i < n; i++) ok = (uintptr_t)p[i] % (m * es) == 0;
    if (ok) return v;
  }
  return 0;
}

static lathe_status_t flash_forward(lathe_cuda_exec *ex, att *c, int size, lcuDeviceptr o, lcuDeviceptr lse) {
  lcuFunction f;
  bool masked = flash_masked(c);
  LATHE_RETURN_IF_ERROR(flash_kernel(ex, c, size, masked, masked ? "lt_att_flash_fwd_masked" : "lt_att_flash_fwd", &f));
  const lcuDeviceptr mats[] = {c->q, c->k, c->v, o};
  c->a.vec = flash_vec(c, mats, 4);
  unsigned blocks = (unsigned)(c->a.B * c->a.H * ((c->a.S + FA_BQ - 1) / FA_BQ));
  int dsz = flash_sizes[size];
  /* Float32: a K and a V tile of TF32 words; halves: two of each, as stored (flash.cuh's pitches) */
  unsigned shared = c->sdt == LATHE_DTYPE_FLOAT32 ? (unsigned)(2 * FA_BK * (dsz + 4) * 4)
                                                  : (unsigned)(4 * FA_BK * (dsz / 2 + 4) * 4);
  void *args[] = {&c->q, &c->k, &c->v, &o, &lse, &c->amask, &c->bmask, &c->bias, &c->qlen, &c->kvlen, &c->a};
  return lathe_cuda_launch(ex, f, blocks, 128, shared, args);
}

/* grads[0] (dQuery, Float32) must be zero: every key block adds to it; dKey and dValue (the storage
 * dtype) are written whole. */
static lathe_status_t flash_backward(lathe_cuda_exec *ex, att *c, int size, lcuDeviceptr dout, lcuDeviceptr lse,
                                     lcuDeviceptr delta, lcuDeviceptr *grads) {
  lcuFunction f;
  bool masked = flash_masked(c);
  /* halves on the half tensor cores (half_bwd=1, heads of 32 or more), else the TF32 kernel */
  bool half = c->half && flash_sizes[size] >= 32 && lathe_cuda_exec_dev(ex)->cu->half_bwd;
  const char *name = half ? (masked ? "lt_att_flash_bwd_h_masked" : "lt_att_flash_bwd_h")
                          : (masked ? "lt_att_flash_bwd_masked" : "lt_att_flash_bwd");
  LATHE_RETURN_IF_ERROR(flash_kernel(ex, c, size, masked, name, &f));
  const lcuDeviceptr mats[] = {c->q, c->k, c->v, dout, grads[1], grads[2]};
  c->a.vec = flash_vec(c, mats, 6);
  unsigned blocks = (unsigned)(c->a.B * c->Hkv * ((c->a.Skv + FA_BK - 1) / FA_BK));
  /* flash.cuh's shared layouts: K, V, Q and dO tiles, dS (TF32 words, or halves as stored), the
   * step's logsumexp and delta */
  int p = half ? flash_sizes[size] / 2 + 4 : flash_sizes[size] + 4;
  unsigned shared = half ? (unsigned)((2 * FA_BK * p + 2 * FA_BQB * p + FA_BQB * (FA_BK / 2 + 4) + 2 * FA_BQB) * 4)
                         : (unsigned)((2 * FA_BK * p + 2 * FA_BQB * p + FA_BK * FA_PS + 2 * FA_BQB) * 4);
  void *args[] = {&c->q,     &c->k,     &c->v,     &dout,     &lse,       &delta, &grads[0], &grads[1],
                  &grads[2], &c->amask, &c->bmask, &c->bias, &c->qlen, &c->kvlen, &c->a};
  return lathe_cuda_launch(ex, f, blocks, 128, shared, args);
}

/* ---- batched products and row kernels ---- */
/* The forward by batched products: per chunk, scores, the softmax row kernel, then probabilities
 * times values into o. */
static lathe_status_t products_forward(lathe_cuda_exec *ex, const att *cp, lcuDeviceptr o, lcuDeviceptr lse) {
  att c = *cp; /* a copy: the row kernel's arguments take its fields' addresses */
  const att_args *a = &c.a;
  size_t es = c.f64 ? 8 : 4;
  jobs jb = jobs_of(&c);
  int64_t jpc, ntc, sq, qst, kst;
  chunking(&c, &jb, 1, &jpc, &ntc, &sq);
  pair_strides(&c, &jb, &qst, &kst);
  lcuDeviceptr sc;
  lathe_status_t st = lathe_cuda_scratch(ex, c.dt, jpc * ntc * sq * a->Skv, &sc, NULL);
  lcuFunction fsm = NULL;
  int per = lathe_cuda_warp_values(a->Skv); /* rows of up to 1024 keys: a warp each */
  if (!st) st = att_kernel(ex, "softmax", per, c.f64, &fsm);
  int tpr = lathe_cuda_row_threads(a->Skv);
  for (int64_t j0 = 0; j0 < jb.n && !st; j0 += jpc) {
    int64_t nj = jb.n - j0 < jpc ? jb.n - j0 : jpc;
    for (int64_t t0 = 0; t0 < jb.nt && !st; t0 += ntc) {
      int64_t nt = jb.nt - t0 < ntc ? jb.nt - t0 : ntc;
      for (int64_t i0 = 0; i0 < a->S && !st; i0 += sq) {
        int64_t rows = a->S - i0 < sq ? a->S - i0 : sq, block = nt * rows * a->Skv;
        for (int64_t jj = 0; jj < nj && !st; jj++) { /* scores of each job */
          int64_t p0 = job_p0(&jb, j0 + jj) + t0 * jb.dp;
          lt_gemm g1 = {.ab = c.dt, .d = c.dt, .batch = nt, .m = rows, .n = a->Skv, .k = a->D};
          g1.a = (lt_mat){c.q + (lcuDeviceptr)((size_t)(q_off(&c, p0) + i0 * c.qss) * es), c.qss, 1, qst};
          g1.b = (lt_mat){c.k + (lcuDeviceptr)((size_t)k_off(&c, p0) * es), 1, c.kss, kst};
          g1.c = (lt_mat){sc + (lcuDeviceptr)((size_t)(jj * block) * es), a->Skv, 1, rows * a->Skv};
          st = lathe_cuda_gemm(ex, &g1);
        }
        if (st) break;
        att_args aa = chunk_args(&c, &jb, j0, t0, nt, i0, rows);
        int64_t n_rows = nj * nt * rows;
        void *args[] = {&sc, &lse, &c.amask, &c.bmask, &c.bias, &c.qlen, &c.kvlen, &aa, &n_rows, &tpr};
        st = per ? launch_rows(ex, fsm, n_rows, 32, args) : launch_rows(ex, fsm, n_rows, tpr, args);
        for (int64_t jj = 0; jj < nj && !st; jj++) { /* probabilities times values, into the output */
          int64_t p0 = job_p0(&jb, j0 + jj) + t0 * jb.dp;
          lt_gemm g2 = {.ab = c.dt, .d = c.dt, .batch = nt, .m = rows, .n = a->D, .k = a->Skv};
          g2.a = (lt_mat){sc + (lcuDeviceptr)((size_t)(jj * block) * es), a->Skv, 1, rows * a->Skv};
          g2.b = (lt_mat){c.v + (lcuDeviceptr)((size_t)k_off(&c, p0) * es), c.kss, 1, kst};
          g2.c = (lt_mat){o + (lcuDeviceptr)((size_t)(q_off(&c, p0) + i0 * c.qss) * es), c.qss, 1, qst};
          st = lathe_cuda_gemm(ex, &g2);
        }
      }
    }
  }
  return st;
}

/* One attention op's operands, for lathe's own path run as a callback (own_forward, own_vjp). */
typedef struct own_att {
  lathe_cuda_exec *ex;
  const lathe_node *n;
  lathe_tensor *const *in;
  lathe_tensor **out;
} own_att;

/* The op as cuDNN's fused attention would see it (lathe_cuda_cudnn_sdpa); false where it cannot
 * take it: a Bool mask, sequence lengths, both an additive mask and a bias, a dtype other than
 * Float16/BFloat16, a mask broadcast along the query or key axis. */
static bool sdpa_desc(const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out, bool vjp, lt_sdpa_desc *s) {
  bool has_mask = lathe_attr_sdpa_has_mask(n), has_bias = lathe_attr_sdpa_has_bias(n);
  if (lathe_attr_sdpa_has_seq_lens(n) || (has_mask && has_bias)) return false;
  att c;
  shape_geometry(&c, n, &in[0]->shape, &in[1]->shape);
  if (!c.half) return false;
  memset(s, 0, sizeof *s);
  if (has_mask || has_bias) { /* the additive mask or the bias: 1 where they broadcast */
    const lathe_tensor *b = in[vjp ? 6 : 3];
    if (b->shape.dtype == LATHE_DTYPE_BOOL) return false;
    broadcast_strides(&b->shape, has_mask && !c.bhsd, s->bst);
    const int64_t full[4] = {c.a.B, c.a.H, c.a.S, c.a.Skv};
    for (int a = 0; a < 4; a++) s->bdim[a] = s->bst[a] ? full[a] : 1;
    s->bdim[2] = c.a.S, s->bdim[3] = c.a.Skv; /* broadcast along these: not a form cuDNN takes */
    if ((!s->bst[2] && c.a.S > 1) || (!s->bst[3] && c.a.Skv > 1)) return false;
    for (int a = 3; a >= 0; a--) /* an axis of size 1: any positive stride (cuDNN takes no 0) */
      if (s->bdim[a] == 1) s->bst[a] = a == 3 ? 1 : s->bst[a + 1] * s->bdim[a + 1];
    s->bias = lathe_cuda_ptr(b), s->bdt = b->shape.dtype;
  }
  s->dt = c.sdt, s->B = c.a.B, s->H = c.a.H, s->Hkv = c.Hkv, s->S = c.a.S, s->Skv = c.a.Skv, s->D = c.a.D;
  const int64_t qst[4] = {c.qbs, c.qhs, c.qss, 1}, kst[4] = {c.kbs, c.khs, c.kss, 1};
  memcpy(s->qst, qst, sizeof qst), memcpy(s->kst, kst, sizeof kst);
  s->causal = c.a.causal, s->scale = (float)c.a.scale;
  s->q = lathe_cuda_ptr(in[0]), s->k = lathe_cuda_ptr(in[1]), s->v = lathe_cuda_ptr(in[2]);
  if (vjp) {
    s->o = lathe_cuda_ptr(in[3]), s->lse = lathe_cuda_ptr(in[4]), s->dout = lathe_cuda_ptr(in[5]);
    s->dq = lathe_cuda_ptr(out[0]), s->dk = lathe_cuda_ptr(out[1]), s->dv = lathe_cuda_ptr(out[2]);
  } else {
    s->o = lathe_cuda_ptr(out[0]), s->lse = lathe_cuda_ptr(out[1]);
  }
  return true; /* lathe_cuda_cudnn_sdpa checks the rest (lathe_cuda_sdpa_form) */
}

/* cuDNN's fused attention where it takes the op and is chosen (*done), else nothing. */
static lathe_status_t try_cudnn(own_att *o, bool vjp, lathe_status_t (*own)(void *), bool *done) {
  lt_sdpa_desc s;
  *done = false;
  if (!sdpa_desc(o->n, o->in, o->out, vjp, &s)) return NULL;
  return lathe_cuda_cudnn_sdpa(o->ex, &s, vjp, own, o, done);
}

static lathe_status_t run_forward(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  att c;
  LATHE_RETURN_IF_ERROR(geometry(ex, &c, n, in, false));
  if (!c.a.B || !c.a.H || !c.a.S) return NULL;
  lcuDeviceptr o = lathe_cuda_ptr(out[0]), lse = lathe_cuda_ptr(out[1]);
  int fs = flash_size(lathe_cuda_exec_dev(ex), &c);
  if (fs >= 0) return flash_forward(ex, &c, fs, o, lse); /* the output in its own dtype */
  LATHE_RETURN_IF_ERROR(widen_qkv(ex, &c, in));
  if (c.half) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_FLOAT32, lathe_shape_size(&out[0]->shape), &o, NULL));
  LATHE_RETURN_IF_ERROR(products_forward(ex, &c, o, lse));
  return c.half ? from_compute(ex, o, out[0]) : NULL;
}

/* The VJP by batched products: per chunk, scores and dP, the row kernel fg (P and dS), then the
 * three gradient products; grads zeroed. */
static lathe_status_t products_vjp(lathe_cuda_exec *ex, const att *c, lcuFunction fg, lcuDeviceptr dout, lcuDeviceptr lse,
                                   lcuDeviceptr delta, const lcuDeviceptr *grads) {
  const att_args *a = &c->a;
  size_t es = c->f64 ? 8 : 4;
  jobs jb = jobs_of(c);
  int64_t jpc, ntc, sq, qst, kst;
  chunking(c, &jb, 2, &jpc, &ntc, &sq);
  pair_strides(c, &jb, &qst, &kst);
  lcuDeviceptr sc, dp;
  lathe_status_t st = lathe_cuda_scratch(ex, c->dt, jpc * ntc * sq * a->Skv, &sc, NULL);
  if (!st) st = lathe_cuda_scratch(ex, c->dt, jpc * ntc * sq * a->Skv, &dp, NULL);
  int gtpr = tpr_grad(a->Skv);
  for (int64_t j0 = 0; j0 < jb.n && !st; j0 += jpc) {
    int64_t nj = jb.n - j0 < jpc ? jb.n - j0 : jpc;
    for (int64_t t0 = 0; t0 < jb.nt && !st; t0 += ntc) {
      int64_t nt = jb.nt - t0 < ntc ? jb.nt - t0 : ntc;
      for (int64_t i0 = 0; i0 < a->S && !st; i0 += sq) {
        int64_t m = a->S - i0 < sq ? a->S - i0 : sq, block = nt * m * a->Skv;
        lt_mat mats[M_COUNT];
        for (int64_t jj = 0; jj < nj && !st; jj++) { /* scores and dP = dO . V^T */
          vjp_mats(c, &jb, j0 + jj, t0, i0, m, qst, kst, dout, grads, sc + (lcuDeviceptr)((size_t)(jj * block) * es),
                   dp + (lcuDeviceptr)((size_t)(jj * block) * es), mats);
          lt_gemm g = {.ab = c->dt, .d = c->dt, .batch = nt, .m = m, .n = a->Skv, .k = a->D};
          g.a = mats[M_Q], g.b = mats[M_KT], g.c = mats[M_S];
          st = lathe_cuda_gemm(ex, &g);
          g.a = mats[M_DO], g.b = mats[M_VT], g.c = mats[M_DP];
          if (!st) st = lathe_cuda_gemm(ex, &g);
        }
        if (st) break;
        att_args aa = chunk_args(c, &jb, j0, t0, nt, i0, m);
        int64_t n_rows = nj * nt * m;
        void *args[] = {&sc, &dp, &lse, &delta, (void *)&c->amask, (void *)&c->bmask, (void *)&c->bias, (void *)&c->qlen,
                        (void *)&c->kvlen, &aa, &n_rows, &gtpr};
        st = launch_rows(ex, fg, n_rows, gtpr, args);
        for (int64_t jj = 0; jj < nj && !st; jj++) { /* dV += P^T dO, dK += dS^T Q, dQ = dS K */
          vjp_mats(c, &jb, j0 + jj, t0, i0, m, qst, kst, dout, grads, sc + (lcuDeviceptr)((size_t)(jj * block) * es),
                   dp + (lcuDeviceptr)((size_t)(jj * block) * es), mats);
          lt_gemm g = {.ab = c->dt, .d = c->dt, .batch = nt, .accumulate = true};
          g.m = a->Skv, g.n = a->D, g.k = m, g.a = mats[M_ST], g.b = mats[M_DO], g.c = mats[M_DV];
          st = lathe_cuda_gemm(ex, &g);
          g.a = mats[M_DPT], g.b = mats[M_Q], g.c = mats[M_DK];
          if (!st) st = lathe_cuda_gemm(ex, &g);
          g.accumulate = false;
          g.m = m, g.n = a->D, g.k = a->Skv, g.a = mats[M_DP], g.b = mats[M_KN], g.c = mats[M_DQ];
          if (!st) st = lathe_cuda_gemm(ex, &g);
        }
      }
    }
  }
  return st;
}

static lathe_status_t run_vjp(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  att c;
  LATHE_RETURN_IF_ERROR(geometry(ex, &c, n, in, true));
  att_args *a = &c.a;
  size_t es = c.f64 ? 8 : 4;
  lcuDeviceptr grads[3], o = lathe_cuda_ptr(in[3]), dout = lathe_cuda_ptr(in[5]), lse = lathe_cuda_ptr(in[4]);
  bool work = a->B && a->H && a->S;
  int fs = work ? flash_size(lathe_cuda_exec_dev(ex), &c) : -1;
  /* Float32 gradients the kernels make, rounded into half outputs at the end: all three on the
   * batched products, dQuery alone (added to by atomics) when streaming */
  bool wide[3];
  for (int k = 0; k < 3; k++) {
    int64_t cnt = lathe_shape_size(&out[k]->shape);
    grads[k] = lathe_cuda_ptr(out[k]);
    wide[k] = c.half && (fs < 0 || k == 0);
    if (wide[k]) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_FLOAT32, cnt, &grads[k], NULL));
    if (fs < 0 || k == 0) LATHE_RETURN_IF_ERROR(lathe_cuda_zero(ex, grads[k], (size_t)cnt * es));
  }
  if (work) {
    if (fs < 0) {
      LATHE_RETURN_IF_ERROR(widen_qkv(ex, &c, in));
      LATHE_RETURN_IF_ERROR(as_compute(ex, in[3], &o));
      LATHE_RETURN_IF_ERROR(as_compute(ex, in[5], &dout));
    }
    int64_t rows = a->B * a->H * a->S;
    lcuDeviceptr delta;
    LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, c.dt, rows, &delta, NULL));
    lcuFunction fd, fg = NULL; /* the streaming texts have their own delta: the row kernels' module stays uncompiled */
    if (fs >= 0) LATHE_RETURN_IF_ERROR(flash_kernel(ex, &c, fs, flash_masked(&c), "lt_att_flash_delta", &fd));
    else LATHE_RETURN_IF_ERROR(att_kernel(ex, "delta", 0, c.f64, &fd));
    if (fs < 0) LATHE_RETURN_IF_ERROR(att_kernel(ex, "grad", 0, c.f64, &fg));
    int tpr = lathe_cuda_row_threads(a->D);
    void *dargs[] = {&o, &dout, &delta, a, &rows, &tpr};
    LATHE_RETURN_IF_ERROR(launch_rows(ex, fd, rows, tpr, dargs));
    LATHE_RETURN_IF_ERROR(fs >= 0 ? flash_backward(ex, &c, fs, dout, lse, delta, grads)
                                  : products_vjp(ex, &c, fg, dout, lse, delta, grads));
  }
  for (int k = 0; k < 3; k++)
    if (wide[k]) LATHE_RETURN_IF_ERROR(from_compute(ex, grads[k], out[k]));
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
    LATHE_RETURN_IF_ERROR(
        lathe_cuda_dense_epilogue(ex, dt, acc, dims[o], lathe_cuda_ptr(out[o]), bias, m, dims[o], LATHE_ACTIVATION_NONE));
    col0 += dims[o];
  }
  return NULL;
}

/* lathe's own paths as callbacks (cuDNN's measuring times them) */
static lathe_status_t own_forward(void *arg) {
  const own_att *o = arg;
  return run_forward(o->ex, o->n, o->in, o->out);
}
static lathe_status_t own_vjp(void *arg) {
  const own_att *o = arg;
  return run_vjp(o->ex, o->n, o->in, o->out);
}

lathe_status_t lathe_cuda_run_attention(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                        lathe_tensor **out) {
  switch (n->op) {
    case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION:
    case LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP: {
      bool vjp = n->op == LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP, done;
      own_att o = {ex, n, in, out};
      LATHE_RETURN_IF_ERROR(try_cudnn(&o, vjp, vjp ? own_vjp : own_forward, &done));
      return done ? NULL : vjp ? run_vjp(ex, n, in, out) : run_forward(ex, n, in, out);
    }
    case LATHE_OP_FUSED_ATTENTION_QKV_PROJECTION: return run_qkv(ex, n, in, out);
    default: return LATHE_UNIMPL("%s: not an attention op", lathe_op_name(n->op));
  }
}

/* Attention's texts (lathe_cuda_texts_of): the streaming text of the head size, form and storage,
 * or the row kernels' text; half tensors' conversions; the QKV projection's dense epilogue. */
void lathe_cuda_texts_attention(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  if (n->n_operands < 2) return;
  lathe_dtype dt = n->in[0]->shape.dtype;
  if (n->op == LATHE_OP_FUSED_ATTENTION_QKV_PROJECTION) {
    const char *t = lathe_cuda_dense_epilogue_text(dt);
    if (t) fn(ctx, t);
    return;
  }
  att c;
  shape_geometry(&c, n, &n->in[0]->shape, &n->in[1]->shape);
  if (!c.a.B || !c.a.H || !c.a.S) return;
  int fs = flash_size(d, &c);
  lathe_dtype wide[2] = {dt, LATHE_DTYPE_FLOAT32}, narrow[2] = {LATHE_DTYPE_FLOAT32, dt};
  bool masked = lathe_attr_sdpa_has_mask(n) || lathe_attr_sdpa_has_bias(n);
  if (fs >= 0) {
    const char *t = flash_text(d, &c, fs, masked);
    if (t) fn(ctx, t);
    if (c.half && masked && (t = lathe_cuda_convert_text(wide, 2)))
      fn(ctx, t); /* an additive mask or bias read as Float32 */
    if (c.half && n->op == LATHE_OP_FUSED_SCALED_DOT_PRODUCT_ATTENTION_VJP && (t = lathe_cuda_convert_text(narrow, 2)))
      fn(ctx, t); /* dQuery, summed in Float32 */
    return;
  }
  pthread_once(&sources_once, make_sources);
  if (sources[c.f64]) fn(ctx, sources[c.f64]);
  const char *t;
  if (c.half && (t = lathe_cuda_convert_text(wide, 2))) fn(ctx, t);
  if (c.half && (t = lathe_cuda_convert_text(narrow, 2))) fn(ctx, t);
}

/* dot.c -- DotGeneral on the GPU.
 *
 * As on the CPU (src/cpu/dot.c), each operand is seen as [B, R, K] (batch axes in the node's
 * order, cross axes in increasing order, contracting axes in the node's order) and the result is
 * a row-major [B, M, N]. Values reach the accumulator dtype by ConvertDType and the result the
 * output dtype the same way (kernels generated from ew.def, gemm.c):
 *  - float accumulators (Float32, Float64, Complex64, Complex128, and Float16/BFloat16, which
 *    accumulate in f32) go to cuBLASLt as one strided-batched product. An operand is read in
 *    place when its dtype is the product's and each of its three groups of axes walks memory
 *    with one stride, one of R and K unit-stride (a transpose flag covers the other); otherwise
 *    it is gathered into a contiguous [B, R, K] copy, converting on the way. Float16/BFloat16
 *    operands with a Float32 accumulator enter cuBLASLt as they are (their widening is exact)
 *    and a Float16/BFloat16 result is rounded by cuBLASLt from its f32 sums.
 *  - integer accumulators run lathe's tiled kernel on the unsigned type of the accumulator's
 *    width or more (32 or 64 bits), which wraps like the CPU's loops; results are converted
 *    through the accumulator to the output dtype.
 * TF32 is used for Float32 only with the backend option tf32=1. */
#include "gemm.h"

bool lathe_cuda_supports_dot(lathe_op op, lathe_dtype dtype) {
  return op == LATHE_OP_DOT_GENERAL && lathe_dtype_is_valid(dtype) && dtype != LATHE_DTYPE_BOOL &&
         lathe_cuda_storage_type(dtype) != NULL;
}

void lathe_cuda_sources_dot(lathe_cuda_source_fn fn, void *ctx) {
  (void)fn, (void)ctx; /* the product and conversion sources are gemm.c's (listed with the conv family) */
}

typedef struct opnd {
  const lathe_tensor *t;
  int64_t B, R, K;
  lt_dims_h gd;    /* axes in [batch..., cross..., contracting...] order */
  lt_strides_h gs; /* their strides in t */
  bool merged;     /* each group walks memory with one stride */
  int64_t bs, rs, ks;
  lcuDeviceptr p;  /* what the product reads, with these strides */
  int64_t ubs, urs, uks;
} opnd;

/* Whether a group of axes walks memory with one stride (size-1 axes do not matter). */
static bool group_merge(const int64_t *dims, const int64_t *strides, int n, int64_t *stride) {
  int64_t inner_stride = 0, inner_dim = 0;
  bool any = false;
  for (int a = n - 1; a >= 0; a--) {
    if (dims[a] == 1) continue;
    if (any && strides[a] != inner_stride * inner_dim) return false;
    if (!any) *stride = strides[a];
    any = true;
    inner_stride = strides[a], inner_dim = dims[a];
  }
  if (!any) *stride = 0;
  return true;
}

static void opnd_init(opnd *o, const lathe_shape *s, lathe_ilist contr, lathe_ilist batch) {
  int64_t st[LATHE_MAX_RANK];
  lathe_cuda_row_strides(s, st);
  memset(o, 0, sizeof *o);
  bool used[LATHE_MAX_RANK] = {0};
  int64_t gd[3][LATHE_MAX_RANK], gs[3][LATHE_MAX_RANK];
  int gn[3] = {0, 0, 0};
  for (int i = 0; i < batch.n; i++) used[batch.v[i]] = true, gd[0][gn[0]] = s->dims[batch.v[i]], gs[0][gn[0]++] = st[batch.v[i]];
  for (int i = 0; i < contr.n; i++) used[contr.v[i]] = true, gd[2][gn[2]] = s->dims[contr.v[i]], gs[2][gn[2]++] = st[contr.v[i]];
  for (int a = 0; a < s->rank; a++)
    if (!used[a]) gd[1][gn[1]] = s->dims[a], gs[1][gn[1]++] = st[a];
  int64_t size[3], merged_stride[3];
  bool ok = true;
  for (int g = 0; g < 3; g++) {
    size[g] = lathe_dims_product(gd[g], 0, gn[g]);
    ok &= group_merge(gd[g], gs[g], gn[g], &merged_stride[g]);
    for (int i = 0; i < gn[g]; i++) {
      o->gd.d[o->gd.rank] = gd[g][i];
      o->gs.s[o->gd.rank++] = gs[g][i];
    }
  }
  if (!o->gd.rank) o->gd.rank = 1, o->gd.d[0] = 1;
  o->B = size[0], o->R = size[1], o->K = size[2];
  o->merged = ok;
  o->bs = merged_stride[0], o->rs = merged_stride[1], o->ks = merged_stride[2];
}

static void use_in_place(opnd *o) {
  o->p = lathe_cuda_ptr(o->t);
  o->ubs = o->bs, o->urs = o->rs, o->uks = o->ks;
}

/* A contiguous [B, R, K] copy of o in dtype path[n_path - 1], converted along path. */
static lathe_status_t pack(lathe_cuda_exec *ex, opnd *o, const lathe_dtype *path, int n_path) {
  int64_t n = o->B * o->R * o->K;
  lathe_tensor *t;
  LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, path[n_path - 1], n, &o->p, &t));
  bool raw = true;
  for (int k = 1; k < n_path; k++) raw &= path[k] == path[0];
  if (raw) LATHE_RETURN_IF_ERROR(lathe_cuda_strided(ex, false, o->t, t, n, &o->gd, &o->gs, 0));
  else LATHE_RETURN_IF_ERROR(lathe_cuda_convert(ex, lathe_cuda_ptr(o->t), o->p, path, n_path, n, &o->gd, &o->gs, 0));
  o->ubs = o->R * o->K, o->urs = o->K, o->uks = 1;
  return NULL;
}

/* Integer accumulators: the unsigned type of 32 or 64 bits the kernel wraps in. */
static lathe_dtype int_ctype(lathe_dtype acc) { return lathe_dtype_bits(acc) > 32 ? LATHE_DTYPE_UINT64 : LATHE_DTYPE_UINT32; }

static bool same_bits(lathe_dtype dt, lathe_dtype ct) {
  return lathe_dtype_is_int(dt) && !lathe_dtype_is_packed(dt) && lathe_dtype_bits(dt) == lathe_dtype_bits(ct);
}

/* How a product runs, from the shapes alone: each operand read in place or packed along a
 * conversion path, the product's dtypes, and the result's way to the output dtype. */
typedef struct dot_plan {
  opnd l, r;
  int64_t B, M, N, K;
  bool pack[2];
  lathe_dtype path_in[3], path_out[3];
  int n_in, n_out;
  bool direct; /* the product writes the output */
  lt_gemm g;   /* dtypes and sizes; matrices set at run time */
} dot_plan;

static void plan_dot(const lathe_node *n, const lathe_shape *ls, const lathe_shape *rs, dot_plan *P) {
  memset(P, 0, sizeof *P);
  lathe_dtype dt = ls->dtype, acc = lathe_attr_dot_general_accumulator(n), odt = n->shape.dtype;
  opnd_init(&P->l, ls, lathe_attr_dot_general_lhs_contracting(n), lathe_attr_dot_general_lhs_batch(n));
  opnd_init(&P->r, rs, lathe_attr_dot_general_rhs_contracting(n), lathe_attr_dot_general_rhs_batch(n));
  P->B = P->l.B, P->M = P->l.R, P->N = P->r.R, P->K = P->l.K;
  opnd *ops[2] = {&P->l, &P->r};
  if (lathe_dtype_is_int(acc)) {
    lathe_dtype ct = int_ctype(acc);
    P->path_in[0] = dt, P->path_in[1] = acc, P->path_in[2] = ct, P->n_in = 3;
    for (int i = 0; i < 2; i++) P->pack[i] = !(dt == acc && same_bits(dt, ct) && ops[i]->merged);
    P->g.ab = P->g.d = ct;
    P->path_out[0] = ct, P->path_out[1] = acc, P->path_out[2] = odt, P->n_out = 3;
    P->direct = odt == acc && same_bits(acc, ct);
  } else {
    /* halves with a Float32 accumulator multiply as they are; everything else in the accumulator */
    bool half = dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16;
    lathe_dtype p = acc == LATHE_DTYPE_FLOAT32 && half ? dt : acc;
    P->path_in[0] = dt, P->path_in[1] = p, P->n_in = 2; /* a raw copy when dt == p */
    for (int i = 0; i < 2; i++)
      P->pack[i] = !(dt == p && ops[i]->merged && lathe_cuda_gemm_viewable(ops[i]->R, ops[i]->K, ops[i]->rs, ops[i]->ks));
    lathe_dtype d = p;
    if (p != acc) d = odt == p ? p : LATHE_DTYPE_FLOAT32; /* half operands, f32 accumulator */
    P->g.ab = p, P->g.d = d;
    P->path_out[0] = d, P->path_out[1] = odt, P->n_out = 2;
    P->direct = d == odt;
  }
  P->g.batch = P->B, P->g.m = P->M, P->g.n = P->N, P->g.k = P->K;
}

void lathe_cuda_texts_dot(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  (void)d;
  if (n->n_operands < 2) return;
  dot_plan P;
  plan_dot(n, &n->in[0]->shape, &n->in[1]->shape, &P);
  if (!P.B || !P.M || !P.N || !P.K) return;
  const char *t;
  if (P.pack[0] || P.pack[1]) {
    bool raw = true;
    for (int k = 1; k < P.n_in; k++) raw &= P.path_in[k] == P.path_in[0];
    if (raw) lathe_cuda_move_texts(lathe_dtype_bits(P.path_in[0]) / 8, fn, ctx);
    else if ((t = lathe_cuda_convert_text(P.path_in, P.n_in))) fn(ctx, t);
  }
  lathe_cuda_gemm_texts(&P.g, fn, ctx);
  if (!P.direct && (t = lathe_cuda_convert_text(P.path_out, P.n_out))) fn(ctx, t);
}

lathe_status_t lathe_cuda_run_dot(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  lathe_tensor *o = out[0];
  dot_plan P;
  plan_dot(n, &in[0]->shape, &in[1]->shape, &P);
  opnd *ops[2] = {&P.l, &P.r};
  int64_t total = P.B * P.M * P.N;
  if (total == 0) return NULL;
  if (P.K == 0) return lathe_cuda_zero(ex, lathe_cuda_ptr(o), o->nbytes); /* empty sums: zero bits in every dtype */
  for (int i = 0; i < 2; i++) {
    ops[i]->t = in[i];
    if (P.pack[i]) LATHE_RETURN_IF_ERROR(pack(ex, ops[i], P.path_in, P.n_in));
    else use_in_place(ops[i]);
  }
  lt_gemm g = P.g;
  g.a = (lt_mat){P.l.p, P.l.urs, P.l.uks, P.l.ubs};
  g.b = (lt_mat){P.r.p, P.r.uks, P.r.urs, P.r.ubs}; /* [K, N]: rhs's contracting index is the row */
  lcuDeviceptr res = lathe_cuda_ptr(o);
  if (!P.direct) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, g.d, total, &res, NULL));
  g.c = (lt_mat){res, P.N, 1, P.M * P.N};
  LATHE_RETURN_IF_ERROR(lathe_cuda_gemm(ex, &g));
  if (P.direct) return NULL;
  return lathe_cuda_convert(ex, res, lathe_cuda_ptr(o), P.path_out, P.n_out, total, NULL, NULL, 0);
}

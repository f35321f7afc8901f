/* gemm.c -- shared parts of the DOT, CONV and FUSED families on the GPU (gemm.h): conversion
 * kernels generated from ew.def, matrix products (cuBLASLt, or lathe's tiled kernel), block
 * reductions and the activations of the dense ops.
 *
 * cuBLASLt is column-major; a row-major result is computed as its transpose (d^T = b^T a^T),
 * so every operand whose rows or columns are unit-stride is read in place with a transpose flag.
 * The algorithm cuBLASLt's heuristic picks is cached per device and problem (the heuristic costs
 * more than a small product); its workspace is scratch memory of the execution, never the
 * device's shared lt_workspace (another stream may be using that one). */
#include <stdarg.h>
#include <stdio.h>

#include "../graph/ew.h"
#include "gemm.h"
#include "kernels/zkernels.h"


/* ---- dtypes in kernels ---- */
const char *lathe_cuda_storage_type(lathe_dtype dt) {
  switch (lathe_dtype_widened(dt)) {
    case LATHE_DTYPE_BOOL: return "uint8_t";
    case LATHE_DTYPE_INT8: return "int8_t";
    case LATHE_DTYPE_INT16: return "int16_t";
    case LATHE_DTYPE_INT32: return "int32_t";
    case LATHE_DTYPE_INT64: return "int64_t";
    case LATHE_DTYPE_UINT8: return "uint8_t";
    case LATHE_DTYPE_UINT16: return "uint16_t";
    case LATHE_DTYPE_UINT32: return "uint32_t";
    case LATHE_DTYPE_UINT64: return "uint64_t";
    case LATHE_DTYPE_FLOAT16:
    case LATHE_DTYPE_BFLOAT16: return "uint16_t";
    case LATHE_DTYPE_FLOAT32: return "float";
    case LATHE_DTYPE_FLOAT64: return "double";
    case LATHE_DTYPE_COMPLEX64: return "lt_c64";
    case LATHE_DTYPE_COMPLEX128: return "lt_c128";
    default: return NULL;
  }
}

static bool is_half(lathe_dtype dt) { return dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16; }

const char *lathe_cuda_compute_type(lathe_dtype dt) { return is_half(dt) ? "float" : lathe_cuda_storage_type(dt); }

static const char *half_prefix(lathe_dtype dt) { return dt == LATHE_DTYPE_FLOAT16 ? "f16" : "bf16"; }

/* ---- conversions ---- */
lathe_status_t lathe_cuda_cvt_source(lt_text *t, const lathe_dtype *path, int n_path) {
  lathe_dtype step[8] = {LATHE_DTYPE_INVALID};
  int n_step = 0;
  if (n_path < 1 || n_path > 8) return lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: a conversion path of %d", n_path);
  for (int k = 0; k < n_path; k++) {
    if (!lathe_cuda_storage_type(path[k]))
      return LATHE_UNIMPL("lathe:cuda: no kernel type for %s", lathe_dtype_name(path[k]));
    if (!n_step || step[n_step - 1] != path[k]) step[n_step++] = path[k];
  }
  lathe_dtype first = step[0], last = step[n_step - 1];
  lt_put(t, "%s", lathe_cuda_ew_prelude());
  char names[8][96];
  for (int k = 1; k < n_step; k++) {
    size_t len = 0;
    lathe_status_t st = lathe_ew_source(LATHE_OP_CONVERT_DTYPE, step[k - 1], step[k], NULL, 0, &len);
    if (st && lathe_status_code_of(st) != LATHE_STATUS_RESOURCE_EXHAUSTED) return st;
    lathe_status_free(st);
    char *src = malloc(len + 1);
    if (!src) return LATHE_OOM("lathe:cuda: codegen");
    st = lathe_ew_source(LATHE_OP_CONVERT_DTYPE, step[k - 1], step[k], src, len + 1, NULL);
    if (!st) {
      const char *paren = strchr(src, '('), *start = paren;
      while (start && start > src && start[-1] != ' ') start--;
      if (!paren) st = lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: an element function without a name");
      else snprintf(names[k], sizeof names[k], "%.*s", (int)(paren - start), start);
      lt_put(t, "%s\n", src);
    }
    free(src);
    if (st) return st;
  }
  lt_put(t, "typedef %s lt_si;\ntypedef %s lt_so;\ntypedef %s lt_ci;\ntypedef %s lt_co;\n", lathe_cuda_storage_type(first),
         lathe_cuda_storage_type(last), lathe_cuda_compute_type(first), lathe_cuda_compute_type(last));
  if (is_half(first))
    lt_put(t, "LT_DEV lt_ci lt_ld(const lt_si *p, int64_t i) { return lt_%s_to_f32(p[i]); }\n", half_prefix(first));
  else
    lt_put(t, "LT_DEV lt_ci lt_ld(const lt_si *p, int64_t i) { return p[i]; }\n");
  if (is_half(last))
    lt_put(t, "LT_DEV void lt_st(lt_so *p, int64_t i, lt_co v) { p[i] = lt_f32_to_%s(v); }\n", half_prefix(last));
  else
    lt_put(t, "LT_DEV void lt_st(lt_so *p, int64_t i, lt_co v) { p[i] = v; }\n");
  lt_put(t, "LT_DEV lt_co lt_cv(lt_ci x0) {\n");
  for (int k = 1; k < n_step; k++) {
    lt_put(t, "  auto x%d = %s(x%d);\n", k, names[k], k - 1);
    if (k < n_step - 1 && is_half(step[k])) /* a half on the way is a stored half */
      lt_put(t, "  x%d = lt_%s_to_f32(lt_f32_to_%s(x%d));\n", k, half_prefix(step[k]), half_prefix(step[k]), k);
  }
  lt_put(t, "  return x%d;\n}\n", n_step - 1);
  return t->oom ? LATHE_OOM("lathe:cuda: codegen") : NULL;
}

static const char convert_kernel[] = LT_CUH_GEMM_CONVERT;

char *lathe_cuda_cvt_text(const lathe_dtype *path, int n_path, const char *kernels) {
  lt_text t = {0};
  lathe_status_t st = lathe_cuda_cvt_source(&t, path, n_path);
  lt_put(&t, "%s", kernels);
  if (st || t.oom) {
    lathe_status_free(st);
    free(t.s);
    return NULL;
  }
  return t.s;
}

/* The conversion text of a path (a key of n / sizeof(lathe_dtype) dtypes), made once per path. */
static char *convert_text(const void *key, size_t n) {
  return lathe_cuda_cvt_text(key, (int)(n / sizeof(lathe_dtype)), convert_kernel);
}

const char *lathe_cuda_convert_text(const lathe_dtype *path, int n_path) {
  return n_path > 0 && n_path <= 8 ? lathe_cuda_memo_text(convert_text, path, sizeof *path * (size_t)n_path) : NULL;
}

lathe_status_t lathe_cuda_convert(lathe_cuda_exec *ex, lcuDeviceptr in, lcuDeviceptr out, const lathe_dtype *path,
                                  int n_path, int64_t n, const lt_dims_h *dims, const lt_strides_h *strides, int64_t base) {
  if (n <= 0) return NULL;
  bool same = n_path >= 1 && !lathe_dtype_is_packed(path[0]) && lathe_cuda_storage_type(path[0]);
  for (int k = 1; same && k < n_path; k++) same = path[k] == path[0];
  lt_dims_h d;
  lt_strides_h s;
  memset(&d, 0, sizeof d);
  memset(&s, 0, sizeof s);
  if (dims) d = *dims, s = *strides;
  else d.rank = 1, d.d[0] = n, s.s[0] = 1;
  if (same) return lathe_cuda_move(ex, false, in, out, lathe_dtype_bits(path[0]) / 8, n, &d, &s, base); /* a copy */
  const char *src = lathe_cuda_convert_text(path, n_path);
  if (!src) { /* the generator's own reason, else memory */
    lt_text t = {0};
    lathe_status_t st = lathe_cuda_cvt_source(&t, path, n_path);
    free(t.s);
    return st ? st : LATHE_OOM("lathe:cuda: codegen");
  }
  cuda_dev *dv = lathe_cuda_exec_dev(ex);
  lcuFunction f;
  unsigned b, th;
  lathe_cuda_grid(n, &b, &th);
  int w = 0;
  lathe_cuda_strided_simplify(&d, &s, n, &base, &w, 0, 0); /* axes merged (w 0: never widened) */
  int plain = d.rank == 1 && s.s[0] == 1;
  lt_dims32_h g;
  if (!plain && lathe_cuda_dims32(&d, &s, n, base, &g)) {
    LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(dv, src, "lt_convert32", &f));
    uint32_t n32 = (uint32_t)n;
    int32_t b32 = (int32_t)base;
    void *args[] = {&in, &out, &n32, &g, &b32};
    return lathe_cuda_launch(ex, f, b, th, 0, args);
  }
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(dv, src, "lt_convert", &f));
  void *args[] = {&in, &out, &n, &d, &s, &base, &plain};
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

/* ---- scratch and geometry ---- */
lathe_status_t lathe_cuda_scratch(lathe_cuda_exec *ex, lathe_dtype dt, int64_t n, lcuDeviceptr *out, lathe_tensor **out_t) {
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = dt;
  s.rank = 1;
  s.dims[0] = n > 0 ? n : 0;
  lathe_tensor *t;
  /* a caller that takes the tensor reads its shape: only a pointer may be another step's memory */
  LATHE_RETURN_IF_ERROR(lathe_cuda_exec_scratch(ex, &s, out_t == NULL, &t));
  *out = lathe_cuda_ptr(t);
  if (out_t) *out_t = t;
  return NULL;
}

lathe_status_t lathe_cuda_zero(lathe_cuda_exec *ex, lcuDeviceptr p, size_t nbytes) {
  if (!nbytes) return NULL;
  const lcu_api *api = lathe_cuda_exec_api(ex);
  return lathe_cuda_error(api, api->cuMemsetD8Async(p, 0, nbytes, lathe_cuda_exec_stream(ex)), "lathe:cuda: memset");
}

void lathe_cuda_row_strides(const lathe_shape *s, int64_t *st) {
  int64_t acc = 1;
  for (int a = s->rank - 1; a >= 0; a--) {
    st[a] = acc;
    acc *= s->dims[a];
  }
}

/* ---- lathe's tiled product: 64 x 64 result tiles, 16-deep slices of k through shared memory,
 * 256 threads of 4 x 4 results each; tiles of every batch in one grid-stride loop. Used for
 * integers (wrapping: unsigned arithmetic) and as the fallback of cuBLASLt. ---- */
static const char tiled_src[] = LT_CUH_GEMM_TILED;

static const char *tiled_name(lathe_dtype ab, lathe_dtype d) {
  switch (ab) {
    case LATHE_DTYPE_UINT32: return d == ab ? "lt_gemm_u32" : NULL;
    case LATHE_DTYPE_UINT64: return d == ab ? "lt_gemm_u64" : NULL;
    case LATHE_DTYPE_FLOAT32: return d == ab ? "lt_gemm_f32" : NULL;
    case LATHE_DTYPE_FLOAT64: return d == ab ? "lt_gemm_f64" : NULL;
    case LATHE_DTYPE_COMPLEX64: return d == ab ? "lt_gemm_c64" : NULL;
    case LATHE_DTYPE_COMPLEX128: return d == ab ? "lt_gemm_c128" : NULL;
    case LATHE_DTYPE_FLOAT16: return d == ab ? "lt_gemm_f16_f16" : d == LATHE_DTYPE_FLOAT32 ? "lt_gemm_f16_f32" : NULL;
    case LATHE_DTYPE_BFLOAT16: return d == ab ? "lt_gemm_bf16_bf16" : d == LATHE_DTYPE_FLOAT32 ? "lt_gemm_bf16_f32" : NULL;
    default: return NULL;
  }
}

static lathe_status_t tiled(lathe_cuda_exec *ex, const lt_gemm *g) {
  const char *name = tiled_name(g->ab, g->d);
  if (!name)
    return lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: no product of %s operands into %s", lathe_dtype_name(g->ab),
                            lathe_dtype_name(g->d));
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), tiled_src, name, &f));
  lcuDeviceptr pa = g->a.p, pb = g->b.p, pd = g->c.p;
  int64_t batch = g->batch, m = g->m, n = g->n, k = g->k;
  lt_mat a = g->a, b = g->b, c = g->c;
  int acc = g->accumulate;
  void *args[] = {&pa, &pb, &pd, &batch, &m, &n, &k, &a.bs, &a.rs, &a.cs, &b.bs, &b.rs, &b.cs, &c.bs, &c.rs, &c.cs, &acc};
  int64_t tiles = batch * ((m + 63) / 64) * ((n + 63) / 64);
  unsigned blocks = (unsigned)(tiles < 65535 * 8 ? tiles : 65535 * 8);
  return lathe_cuda_launch(ex, f, blocks, 256, 0, args);
}

/* ---- cuBLASLt ---- */
typedef struct lt_view {
  int trans;
  int64_t rows, cols, ld;
} lt_view;

/* A rows x cols matrix of strides rs, cs as a column-major cuBLASLt matrix, transposed (T) or
 * not; strides of axes of size <= 1 are free. */
static bool col_view(int64_t r, int64_t c, int64_t rs, int64_t cs, bool allow_t, lt_view *v) {
  int64_t r1 = r > 1 ? r : 1, c1 = c > 1 ? c : 1;
  if (rs == 1 || r <= 1) {
    int64_t ld = c <= 1 ? r1 : cs;
    if (ld >= r1) {
      *v = (lt_view){LCUBLAS_OP_N, r, c, ld};
      return true;
    }
  }
  if (allow_t && (cs == 1 || c <= 1)) {
    int64_t ld = r <= 1 ? c1 : rs;
    if (ld >= c1) {
      *v = (lt_view){LCUBLAS_OP_T, c, r, ld};
      return true;
    }
  }
  return false;
}

bool lathe_cuda_gemm_viewable(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  lt_view v;
  return col_view(rows, cols, rs, cs, true, &v);
}

static int lt_type(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_FLOAT16: return LCUDA_R_16F;
    case LATHE_DTYPE_BFLOAT16: return LCUDA_R_16BF;
    case LATHE_DTYPE_FLOAT32: return LCUDA_R_32F;
    case LATHE_DTYPE_FLOAT64: return LCUDA_R_64F;
    case LATHE_DTYPE_COMPLEX64: return LCUDA_C_32F;
    case LATHE_DTYPE_COMPLEX128: return LCUDA_C_64F;
    default: return -1;
  }
}

/* The (operand, result) dtypes cuBLASLt multiplies. */
static bool lt_pair(lathe_dtype ab, lathe_dtype d) {
  if (lt_type(ab) < 0) return false;
  if (is_half(ab)) return d == ab || d == LATHE_DTYPE_FLOAT32;
  return d == ab;
}

/* The largest power of two <= 256 dividing the address and (when several matrices) the batch
 * stride in bytes: what cuBLASLt's heuristic must assume of the buffer. */
static uint32_t alignment(lcuDeviceptr p, int64_t bs_bytes, bool batched) {
  uint64_t v = p | (batched ? (uint64_t)bs_bytes : 0) | 256;
  return (uint32_t)(v & (~v + 1));
}

/* Cached heuristic results, per device and problem. */
typedef struct heur_key {
  const cuda_dev *d;
  int32_t ta, td, compute, transa, transb, beta, epilogue;
  int64_t m, n, k, lda, ldb, ldd, sa, sb, sd, batch;
  uint32_t align[3];
} heur_key;

typedef struct heur_entry {
  heur_key key;
  bool used, found;
  lcublasLtMatmulAlgo algo;
  size_t ws;
} heur_entry;

enum { HEUR_CACHE = 256 };
static heur_entry heur_cache[HEUR_CACHE];
static unsigned heur_next;
static pthread_mutex_t heur_mu = PTHREAD_MUTEX_INITIALIZER;

static bool heur_lookup(const heur_key *k, heur_entry *out) {
  bool hit = false;
  pthread_mutex_lock(&heur_mu);
  for (int i = 0; i < HEUR_CACHE && !hit; i++)
    if (heur_cache[i].used && !memcmp(&heur_cache[i].key, k, sizeof *k)) *out = heur_cache[i], hit = true;
  pthread_mutex_unlock(&heur_mu);
  return hit;
}

static void heur_store(const heur_entry *e) {
  pthread_mutex_lock(&heur_mu);
  heur_cache[heur_next++ % HEUR_CACHE] = *e;
  pthread_mutex_unlock(&heur_mu);
}

/* While dumping: the heuristic's answer for a problem, when first asked in the process. The
 * algorithm's configuration (cublasLtMatmulAlgoConfigAttributes_t): 0 its id, 1 the tile, 2 the
 * split-K count, 6 the stages. */
static void note_heuristic(lathe_cuda_exec *ex, const lt_gemm *g, const heur_key *k, const heur_entry *he) {
  const lcu_api *api = lathe_cuda_exec_api(ex);
  char what[160];
  snprintf(what, sizeof what, "cuBLASLt %s GEMM m=%lld n=%lld k=%lld batch=%lld trans=%d%d compute=%d", lathe_dtype_name(g->ab),
           (long long)k->m, (long long)k->n, (long long)k->k, (long long)k->batch, k->transa, k->transb, k->compute);
  if (!he->found) {
    lathe_profile_note(lathe_cuda_exec_dump_dir(ex), LATHE_CUDA_LIBRARY_NOTES, "%s: no algorithm (lathe's own kernel)", what);
    return;
  }
  int32_t id = -1;
  uint32_t tile = 0, splitk = 0, stages = 0;
  size_t w;
  api->cublasLtMatmulAlgoConfigGetAttribute(&he->algo, 0, &id, sizeof id, &w);
  api->cublasLtMatmulAlgoConfigGetAttribute(&he->algo, 1, &tile, sizeof tile, &w);
  api->cublasLtMatmulAlgoConfigGetAttribute(&he->algo, 2, &splitk, sizeof splitk, &w);
  api->cublasLtMatmulAlgoConfigGetAttribute(&he->algo, 6, &stages, sizeof stages, &w);
  lathe_profile_note(lathe_cuda_exec_dump_dir(ex), LATHE_CUDA_LIBRARY_NOTES,
                     "%s: algorithm %d, tile %u, stages %u, split-K %u, workspace %zu bytes", what, id, tile, stages, splitk, he->ws);
}

#define LT_TRY(call, what)                                                                              \
  do {                                                                                                  \
    lcublasStatus s_ = (call);                                                                          \
    if (s_ != LCUBLAS_STATUS_SUCCESS && !st)                                                            \
      st = lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: cuBLASLt %s failed (status %d)", what, s_); \
  } while (0)

/* One cuBLASLt product of at most INT32_MAX batches; *done false: no algorithm (use the kernel),
 * nothing queued. probe: only whether cuBLASLt has an algorithm (*done), nothing run. A bias
 * needs the row-major result's view (d^T), where it is a column of cuBLASLt's matrix. */
static lathe_status_t lt_matmul(lathe_cuda_exec *ex, const lt_gemm *g, bool probe, bool *done) {
  *done = false;
  cuda_dev *d = lathe_cuda_exec_dev(ex);
  const lcu_api *api = d->cu->api;
  lt_view va, vb, vd;
  lcuDeviceptr pa, pb;
  int64_t sa, sb;
  /* a row-major result as its transpose: d^T = b^T a^T */
  if (col_view(g->n, g->m, g->c.cs, g->c.rs, false, &vd) && col_view(g->n, g->k, g->b.cs, g->b.rs, true, &va) &&
      col_view(g->k, g->m, g->a.cs, g->a.rs, true, &vb)) {
    pa = g->b.p, pb = g->a.p, sa = g->b.bs, sb = g->a.bs;
  } else if (!g->bias && col_view(g->m, g->n, g->c.rs, g->c.cs, false, &vd) &&
             col_view(g->m, g->k, g->a.rs, g->a.cs, true, &va) && col_view(g->k, g->n, g->b.rs, g->b.cs, true, &vb)) {
    pa = g->a.p, pb = g->b.p, sa = g->a.bs, sb = g->b.bs;
  } else {
    return NULL;
  }
  bool batched = g->batch > 1;
  size_t es_ab = (size_t)lathe_dtype_bits(g->ab) / 8, es_d = (size_t)lathe_dtype_bits(g->d) / 8;
  int compute, scale;
  switch (g->ab) {
    case LATHE_DTYPE_FLOAT32:
      compute = d->cu->tf32 || g->tf32 ? LCUBLAS_COMPUTE_32F_FAST_TF32 : LCUBLAS_COMPUTE_32F, scale = LCUDA_R_32F;
      break;
    case LATHE_DTYPE_FLOAT16:
    case LATHE_DTYPE_BFLOAT16: compute = LCUBLAS_COMPUTE_32F, scale = LCUDA_R_32F; break;
    case LATHE_DTYPE_FLOAT64: compute = LCUBLAS_COMPUTE_64F, scale = LCUDA_R_64F; break;
    case LATHE_DTYPE_COMPLEX64: compute = LCUBLAS_COMPUTE_32F, scale = LCUDA_C_32F; break;
    default: compute = LCUBLAS_COMPUTE_64F, scale = LCUDA_C_64F; break;
  }
  heur_key key;
  memset(&key, 0, sizeof key);
  key.d = d;
  key.ta = lt_type(g->ab), key.td = lt_type(g->d), key.compute = compute;
  key.transa = va.trans, key.transb = vb.trans, key.beta = g->accumulate;
  key.epilogue = g->bias ? LCUBLASLT_EPILOGUE_BIAS : 0;
  key.m = vd.rows, key.n = vd.cols, key.k = g->k;
  key.lda = va.ld, key.ldb = vb.ld, key.ldd = vd.ld;
  key.sa = batched ? sa : 0, key.sb = batched ? sb : 0, key.sd = batched ? g->c.bs : 0;
  key.batch = g->batch;
  key.align[0] = alignment(pa, sa * (int64_t)es_ab, batched);
  key.align[1] = alignment(pb, sb * (int64_t)es_ab, batched);
  key.align[2] = alignment(g->c.p, g->c.bs * (int64_t)es_d, batched);

  lathe_status_t st = NULL;
  lcublasLtMatmulDesc desc = NULL;
  lcublasLtMatrixLayout la = NULL, lb = NULL, ld = NULL;
  lcublasLtMatmulPreference pref = NULL;
  LT_TRY(api->cublasLtMatmulDescCreate(&desc, compute, scale), "matmul descriptor");
  int32_t ta = va.trans, tb = vb.trans;
  if (!st) LT_TRY(api->cublasLtMatmulDescSetAttribute(desc, LCUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
  if (!st) LT_TRY(api->cublasLtMatmulDescSetAttribute(desc, LCUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
  if (!st && g->bias) {
    uint32_t epi = LCUBLASLT_EPILOGUE_BIAS;
    const void *bias = (const void *)(uintptr_t)g->bias;
    LT_TRY(api->cublasLtMatmulDescSetAttribute(desc, LCUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "epilogue");
    if (!st) LT_TRY(api->cublasLtMatmulDescSetAttribute(desc, LCUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias), "bias");
  }
  if (!st) LT_TRY(api->cublasLtMatrixLayoutCreate(&la, key.ta, (uint64_t)va.rows, (uint64_t)va.cols, va.ld), "layout");
  if (!st) LT_TRY(api->cublasLtMatrixLayoutCreate(&lb, key.ta, (uint64_t)vb.rows, (uint64_t)vb.cols, vb.ld), "layout");
  if (!st) LT_TRY(api->cublasLtMatrixLayoutCreate(&ld, key.td, (uint64_t)vd.rows, (uint64_t)vd.cols, vd.ld), "layout");
  if (!st && batched) {
    int32_t count = (int32_t)g->batch;
    lcublasLtMatrixLayout lays[3] = {la, lb, ld};
    int64_t strides[3] = {sa, sb, g->c.bs};
    for (int i = 0; i < 3 && !st; i++) {
      LT_TRY(api->cublasLtMatrixLayoutSetAttribute(lays[i], LCUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
             "batch count");
      if (!st)
        LT_TRY(api->cublasLtMatrixLayoutSetAttribute(lays[i], LCUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                                                     sizeof strides[i]),
               "batch stride");
    }
  }
  heur_entry he;
  memset(&he, 0, sizeof he);
  if (!st && !heur_lookup(&key, &he)) {
    memset(&he, 0, sizeof he);
    he.key = key;
    he.used = true;
    uint64_t max_ws = d->lt_workspace_bytes;
    LT_TRY(api->cublasLtMatmulPreferenceCreate(&pref), "preference");
    if (!st) LT_TRY(api->cublasLtMatmulPreferenceSetAttribute(pref, LCUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws), "workspace");
    const int align_attr[4] = {LCUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, LCUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                               LCUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, LCUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && !st; i++) {
      uint32_t al = key.align[i < 2 ? i : 2];
      LT_TRY(api->cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &al, sizeof al), "alignment");
    }
    if (!st) {
      lcublasLtMatmulHeuristicResult res;
      int returned = 0;
      memset(&res, 0, sizeof res);
      pthread_mutex_lock(&d->lt_mu);
      lcublasStatus hs = api->cublasLtMatmulAlgoGetHeuristic(d->lt, desc, la, lb, ld, ld, pref, 1, &res, &returned);
      pthread_mutex_unlock(&d->lt_mu);
      he.found = hs == LCUBLAS_STATUS_SUCCESS && returned > 0 && res.state == LCUBLAS_STATUS_SUCCESS;
      if (he.found) he.algo = res.algo, he.ws = res.workspaceSize;
      heur_store(&he);
      if (lathe_cuda_exec_dump_dir(ex)) note_heuristic(ex, g, &key, &he);
    }
  }
  if (!st && he.found && probe) *done = true;
  if (!st && he.found && !probe) {
    lcuDeviceptr ws = 0;
    if (he.ws) st = lathe_cuda_scratch(ex, LATHE_DTYPE_UINT8, (int64_t)he.ws, &ws, NULL);
    double alpha[2] = {1, 0}, beta[2] = {g->accumulate ? 1 : 0, 0};
    float alpha_f[2] = {1, 0}, beta_f[2] = {g->accumulate ? 1.0f : 0.0f, 0};
    bool single = scale == LCUDA_R_32F || scale == LCUDA_C_32F;
    if (!st) {
      pthread_mutex_lock(&d->lt_mu);
      lcublasStatus ms = api->cublasLtMatmul(
          d->lt, desc, single ? (const void *)alpha_f : (const void *)alpha, (const void *)(uintptr_t)pa, la,
          (const void *)(uintptr_t)pb, lb, single ? (const void *)beta_f : (const void *)beta,
          (const void *)(uintptr_t)g->c.p, ld, (void *)(uintptr_t)g->c.p, ld, &he.algo, (void *)(uintptr_t)ws, he.ws,
          lathe_cuda_exec_stream(ex));
      pthread_mutex_unlock(&d->lt_mu);
      if (ms == LCUBLAS_STATUS_SUCCESS)
        *done = true;
      else if (ms != LCUBLAS_STATUS_NOT_SUPPORTED) /* not supported: lathe's kernel instead */
        st = lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: cublasLtMatmul failed (status %d) for %s [%lld x %lld x %lld]",
                              ms, lathe_dtype_name(g->ab), (long long)g->m, (long long)g->n, (long long)g->k);
    }
  }
  if (pref) api->cublasLtMatmulPreferenceDestroy(pref);
  if (la) api->cublasLtMatrixLayoutDestroy(la);
  if (lb) api->cublasLtMatrixLayoutDestroy(lb);
  if (ld) api->cublasLtMatrixLayoutDestroy(ld);
  if (desc) api->cublasLtMatmulDescDestroy(desc);
  return st;
}

void lathe_cuda_gemm_texts(const lt_gemm *g, lathe_cuda_text_fn fn, void *ctx) {
  if (g->batch <= 0 || g->m <= 0 || g->n <= 0 || !tiled_name(g->ab, g->d)) return;
  /* as lathe_cuda_gemm decides (cuBLASLt may still decline a problem: its tiled fallback then
   * compiles at that launch) */
  if (g->k <= 0 ? !g->accumulate : !lt_pair(g->ab, g->d) || (double)g->batch * (double)g->m * (double)g->n * (double)g->k <= 65536.0)
    fn(ctx, tiled_src);
}

/* ---- products staged in padded lines ----
 * cuBLASLt's fastest kernels on Hopper (through TMA) need each line of a matrix (a row, or a
 * column when it is column-major) to start on 16 bytes, and m, n and k of whole 16 bytes. A
 * vocabulary of 50257 gives neither: GPT-2's logits product and its two gradients ran at about
 * 100 TFLOP/s in BFloat16 on an H100 where aligned products reach 600. With gemm_pad=MiB such a
 * tensor-core product (halves, and Float32 with tf32=1) copies the operands that need it into
 * lines padded to 16 bytes with m, n and k rounded up (zeros in the padding, so the sums are the
 * same), runs on the copies and copies the staged result back. The copies are step scratch, in
 * blocks of at most the option's size: rows of the result, and, where the result is Float32 (the
 * blocks' partial sums then add in Float32, as a split-k product's do), parts of k. Only where the product does
 * at least 160 multiply-adds per value moved: about where a BFloat16 product's time saved
 * (1/100 - 1/600 ms per TFLOP) pays for a copy at 1.5 TB/s. */
typedef struct {
  bool rows;             /* lines are rows (cs == 1), else columns (rs == 1) */
  int64_t n, len, pitch; /* lines, their length, elements from one to the next */
} lines_of;

static bool lines_init(const lt_mat *x, int64_t R, int64_t C, lines_of *o) {
  if (x->cs == 1 && x->rs >= C) *o = (lines_of){true, R, C, x->rs};
  else if (x->rs == 1 && x->cs >= R) *o = (lines_of){false, C, R, x->cs};
  else return false;
  return true;
}

static int64_t round_up(int64_t v, int64_t unit) { return (v + unit - 1) / unit * unit; }
static int64_t clamp64(int64_t v, int64_t hi) { return v < 0 ? 0 : v > hi ? hi : v; }

static bool off16(const lines_of *l, lcuDeviceptr p, size_t es) { return (l->pitch * (int64_t)es) % 16 || p % 16; }

/* An R2 x C2 matrix at buf laid out as l's lines (rows or columns), each padded to 16 bytes. */
static lt_mat staged_view(const lines_of *l, size_t es, int64_t R2, int64_t C2, lcuDeviceptr buf) {
  int64_t pitch2 = round_up(l->rows ? C2 : R2, 16 / (int64_t)es);
  return l->rows ? (lt_mat){buf, pitch2, 1, 0} : (lt_mat){buf, 1, pitch2, 0};
}

/* A block of x (lines l): rows [r0, r0 + R2), columns [c0, c0 + C2), as a matrix of lines padded
 * to 16 bytes at buf (elements outside x read as zeros; back: buf's block is copied into x
 * instead, x's part of it only). */
static lathe_status_t stage_block(lathe_cuda_exec *ex, const lt_mat *x, const lines_of *l, size_t es, int64_t r0, int64_t c0,
                                  int64_t R2, int64_t C2, lcuDeviceptr buf, lt_mat *out, bool back) {
  int64_t line0 = l->rows ? r0 : c0, elem0 = l->rows ? c0 : r0;
  int64_t n2 = l->rows ? R2 : C2, len2 = l->rows ? C2 : R2;
  int64_t nv = clamp64(l->n - line0, n2), lv = clamp64(l->len - elem0, len2);
  lcuDeviceptr at = x->p + (lcuDeviceptr)((line0 * l->pitch + elem0) * (int64_t)es);
  *out = staged_view(l, es, R2, C2, buf);
  int64_t pitch2 = l->rows ? out->rs : out->cs;
  if (back) return lathe_cuda_lines(ex, buf, at, (int)es, nv, lv, l->pitch, nv, lv, pitch2);
  return lathe_cuda_lines(ex, at, buf, (int)es, n2, pitch2, pitch2, nv, lv, l->pitch);
}

static lt_mat block_of(const lt_mat *x, size_t es, int64_t r0, int64_t c0) {
  lt_mat b = *x;
  b.p += (lcuDeviceptr)((r0 * x->rs + c0 * x->cs) * (int64_t)es);
  return b;
}

static bool stages(const lathe_cuda *cu, lathe_dtype ab, bool tf32, int64_t m, int64_t n, int64_t k) {
  bool tensor_cores = is_half(ab) || (ab == LATHE_DTYPE_FLOAT32 && (cu->tf32 || tf32));
  return cu->gemm_pad > 0 && tensor_cores && m >= 64 && n >= 64 && k >= 64;
}

static bool tf32x3_on(const cuda_dev *d, lathe_dtype ab, lathe_dtype out) {
  return d->cu->tf32x3 && !d->cu->tf32 && d->cc >= 80 && ab == LATHE_DTYPE_FLOAT32 && out == LATHE_DTYPE_FLOAT32;
}

bool lathe_cuda_gemm_stages(lathe_cuda_exec *ex, lathe_dtype ab, int64_t m, int64_t n, int64_t k) {
  const cuda_dev *d = lathe_cuda_exec_dev(ex);
  return stages(d->cu, ab, tf32x3_on(d, ab, ab), m, n, k);
}

/* g (one matrix) on staged copies where that pays; *done false: not staged, nothing queued, and
 * *refused (with a bias) where staging would pay but cuBLASLt cannot add the bias to a block. */
static lathe_status_t staged_gemm_blocks(lathe_cuda_exec *ex, const lt_gemm *g, bool *done, bool *refused) {
  *done = false;
  cuda_dev *d = lathe_cuda_exec_dev(ex);
  if (g->batch != 1 || !stages(d->cu, g->ab, g->tf32, g->m, g->n, g->k)) return NULL;
  size_t ea = (size_t)lathe_dtype_bits(g->ab) / 8, ed = (size_t)lathe_dtype_bits(g->d) / 8;
  lines_of la, lb, lc;
  if (!lines_init(&g->a, g->m, g->k, &la) || !lines_init(&g->b, g->k, g->n, &lb) || !lines_init(&g->c, g->m, g->n, &lc))
    return NULL;
  int64_t u = 16 / (int64_t)ea, m2 = round_up(g->m, u), n2 = round_up(g->n, u), k2 = round_up(g->k, u);
  bool sa = !g->ab_room && (off16(&la, g->a.p, ea) || m2 != g->m || k2 != g->k);
  bool sb = !g->ab_room && (off16(&lb, g->b.p, ea) || k2 != g->k || n2 != g->n);
  bool sc = off16(&lc, g->c.p, ed) || (!g->c_room && (m2 != g->m || n2 != g->n));
  if (!sa && !sb && !sc) return NULL;
  double moved = (sa ? (double)g->m * (double)g->k : 0) + (sb ? (double)g->k * (double)g->n : 0) +
                 (sc ? (g->accumulate ? 2.0 : 1.0) * (double)g->m * (double)g->n : 0);
  if ((double)g->m * (double)g->n * (double)g->k < 160.0 * moved) return NULL;
  /* blocks: mc rows of the result, kc of k (only into a Float32 result) */
  bool split_k = g->d == LATHE_DTYPE_FLOAT32;
  int64_t mc = m2, kc = k2;
  for (;;) { /* the result's rows where its copy is the most, else k (products keep their m x n) */
    int64_t ab = sa ? mc * kc * (int64_t)ea : 0, bb = sb ? kc * n2 * (int64_t)ea : 0, cb = sc ? mc * n2 * (int64_t)ed : 0;
    if (ab + bb + cb <= d->cu->gemm_pad) break;
    if (cb >= ab + bb && mc > 64 * u) mc = round_up(mc / 2, u);
    else if (split_k && kc > 64 * u) kc = round_up(kc / 2, u);
    else if (mc > 64 * u && ab + cb > 0) mc = round_up(mc / 2, u);
    else break; /* blocks this small would be slow products: more memory instead */
  }
  lcuDeviceptr pa = 0, pb = 0, pc = 0;
  if (sa) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_UINT8, mc * kc * (int64_t)ea, &pa, NULL));
  if (sb) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_UINT8, kc * n2 * (int64_t)ea, &pb, NULL));
  if (sc) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_UINT8, mc * n2 * (int64_t)ed, &pc, NULL));
  lt_gemm q = *g;
  q.n = n2;
  lcuDeviceptr bias = g->bias; /* n2 values (zeros past n): the first k block of each row block adds it */
  if (g->bias) {
    if (n2 != g->n) LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_UINT8, n2 * (int64_t)ed, &bias, NULL));
    if (bias % 16) {
      *refused = true;
      return NULL;
    }
    /* each block's product asked for first, so that a refusal leaves nothing queued */
    for (int64_t m0 = 0; m0 < m2; m0 += mc) {
      q.m = m2 - m0 < mc ? m2 - m0 : mc, q.k = k2 < kc ? k2 : kc, q.bias = bias;
      q.a = sa ? staged_view(&la, ea, q.m, q.k, pa) : block_of(&g->a, ea, m0, 0);
      q.b = sb ? staged_view(&lb, ea, q.k, n2, pb) : block_of(&g->b, ea, 0, 0);
      q.c = sc ? staged_view(&lc, ed, q.m, n2, pc) : block_of(&g->c, ed, m0, 0);
      bool ok;
      LATHE_RETURN_IF_ERROR(lt_matmul(ex, &q, true, &ok));
      if (!ok) {
        *refused = true;
        return NULL;
      }
    }
    if (bias != g->bias) LATHE_RETURN_IF_ERROR(lathe_cuda_lines(ex, g->bias, bias, (int)ed, 1, n2, n2, 1, g->n, g->n));
  }
  if (sb && kc == k2) LATHE_RETURN_IF_ERROR(stage_block(ex, &g->b, &lb, ea, 0, 0, k2, n2, pb, &q.b, false));
  for (int64_t m0 = 0; m0 < m2; m0 += mc) {
    q.m = m2 - m0 < mc ? m2 - m0 : mc;
    if (!sc) q.c = block_of(&g->c, ed, m0, 0);
    else if (g->accumulate) LATHE_RETURN_IF_ERROR(stage_block(ex, &g->c, &lc, ed, m0, 0, q.m, n2, pc, &q.c, false));
    else q.c = staged_view(&lc, ed, q.m, n2, pc); /* room only */
    for (int64_t k0 = 0; k0 < k2; k0 += kc) {
      q.k = k2 - k0 < kc ? k2 - k0 : kc;
      q.accumulate = g->accumulate || k0 > 0;
      q.bias = k0 ? 0 : bias;
      if (sa) LATHE_RETURN_IF_ERROR(stage_block(ex, &g->a, &la, ea, m0, k0, q.m, q.k, pa, &q.a, false));
      else q.a = block_of(&g->a, ea, m0, k0);
      if (sb && kc < k2) LATHE_RETURN_IF_ERROR(stage_block(ex, &g->b, &lb, ea, k0, 0, q.k, n2, pb, &q.b, false));
      else if (!sb) q.b = block_of(&g->b, ea, k0, 0);
      bool ok;
      LATHE_RETURN_IF_ERROR(lt_matmul(ex, &q, false, &ok));
      if (!ok && q.bias) /* asked above: cuBLASLt went back on its answer */
        return lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: cuBLASLt refused a %s product [%lld x %lld x %lld] with a bias",
                                lathe_dtype_name(g->ab), (long long)q.m, (long long)q.n, (long long)q.k);
      if (!ok) LATHE_RETURN_IF_ERROR(tiled(ex, &q)); /* no algorithm even so */
    }
    lt_mat unused;
    if (sc) LATHE_RETURN_IF_ERROR(stage_block(ex, &g->c, &lc, ed, m0, 0, q.m, n2, pc, &unused, true));
  }
  *done = true;
  return NULL;
}

/* The staged copies go back to the execution's free scratch once the blocks are queued: later
 * products of the same stream (FusedDense's row blocks, the next layer) reuse them. */
static lathe_status_t staged_gemm(lathe_cuda_exec *ex, const lt_gemm *g, bool *done, bool *refused) {
  int mark = lathe_cuda_exec_scratch_mark(ex);
  lathe_status_t st = staged_gemm_blocks(ex, g, done, refused);
  lathe_cuda_exec_scratch_done(ex, mark);
  return st;
}

static lathe_status_t gemm_large(lathe_cuda_exec *ex, const lt_gemm *g);

/* ---- Float32 products as three TF32 products (option tf32x3=1) ----
 * Each operand split as x = hi + lo, both exact in TF32 (kernels/tf32x3.cuh: hi + lo is x within
 * about 2^-22 |x|), and a.b = lo_a.hi_b + hi_a.lo_b + hi_a.hi_b computed as one TF32 product of
 * three times the k: a' = [lo_a | hi_a | hi_a] along k, b' = [hi_b ; lo_b ; hi_b]. One product
 * instead of three accumulated ones: the result is written once (three passes read and wrote it
 * three times, a third of a 768-wide layer's time) and cuBLASLt gets a deeper k. The small parts
 * come first along k, so that the sum rounds them while it is small: with hi.hi first, the 2k small
 * terms each rounded against the whole sum, and a batched case came to 1.13 of the bound (an H200).
 * The split operands are step scratch whose lines (rows, or columns for an operand read
 * transposed) start on 16 bytes, so that the product reads them in place. The dropped lo_a.lo_b is within 2^-22 of a
 * term, so an element's error is within 2^-19 of the sum of |a||b| over k with Float32's own
 * summation error (three separate products measured 0.94 of 2^-20 at most, SGEMM 0.56). Float32
 * results only (Float64 and complex products as they were); needs sm_80; with tf32=1 the products
 * are one TF32 pass instead. */
static const char tf32x3_src[] = LT_CUH_TF32X3;

static bool tf32x3(lathe_cuda_exec *ex, const lt_gemm *g) { return !g->tf32 && tf32x3_on(lathe_cuda_exec_dev(ex), g->ab, g->d); }

/* How x (batch matrices of R x C, k along C when it is the left operand, else along R) becomes its
 * split operand of 3 k2 along k (k2: k rounded up to 16 bytes, as R and C are; zeros in the
 * padding, so staged products read it in place: ab_room). x is read as its unit-stride lines
 * (rows when cs is 1, else columns when rs is 1, else rows read with stride). Where k runs along a
 * line, each line holds the three parts one after the other (a line of 3 len2); where it runs
 * across the lines, the parts are three blocks of lines2 lines. A batch stride of 0 (one matrix for
 * every batch) stays one. */
typedef struct {
  bool cols;
  int64_t lines, lines2, len, len2, ls, es, nb, lstride, each; /* each: elements of one split matrix */
  int64_t at[3]; /* where hi, hi and lo start in a line (k along it) or in the matrix */
} split_geom;

static split_geom split_of(const lt_mat *x, int64_t batch, int64_t R, int64_t C, bool left) {
  split_geom s;
  s.cols = x->cs != 1 && x->rs == 1;
  s.lines = s.cols ? C : R, s.len = s.cols ? R : C, s.ls = s.cols ? x->cs : x->rs, s.es = s.cols ? 1 : x->cs;
  s.nb = x->bs ? batch : 1, s.len2 = round_up(s.len, 4), s.lines2 = round_up(s.lines, 4), s.each = 3 * s.lines2 * s.len2;
  bool along = left != s.cols; /* k runs along each line */
  int64_t part = along ? s.len2 : s.lines2 * s.len2;
  s.lstride = along ? 3 * s.len2 : s.len2;
  s.at[0] = left ? part : 0, s.at[1] = 2 * part, s.at[2] = left ? 0 : part;
  return s;
}

/* x split at p (s.nb * s.each Float32) as its product's operand (k 3 k2, ab_room). */
static lathe_status_t split_into(lathe_cuda_exec *ex, const lt_mat *x, split_geom s, lcuDeviceptr p, lt_mat *out) {
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), tf32x3_src, "lt_split_tf32", &f));
  int64_t total = s.nb * s.lines2 * s.len2, blocks = (total + 255) / 256, bs = x->bs;
  unsigned grid = (unsigned)(blocks < (1 << 20) ? blocks : (1 << 20));
  lcuDeviceptr px = x->p;
  void *args[] = {&px, &p, &s.nb, &s.lines, &s.lines2, &s.len, &s.len2, &s.lstride, &s.each, &bs, &s.ls, &s.es, &s.at[0], &s.at[1], &s.at[2]};
  LATHE_RETURN_IF_ERROR(lathe_cuda_launch(ex, f, grid, 256, 0, args));
  int64_t sb = x->bs ? s.each : 0;
  *out = s.cols ? (lt_mat){p, 1, s.lstride, sb} : (lt_mat){p, s.lstride, 1, sb};
  return NULL;
}

/* The split operands of a k chunk of kc: bytes of both. */
static int64_t split_bytes(const lt_gemm *g, int64_t kc) {
  split_geom a = split_of(&g->a, g->batch, g->m, kc, true), b = split_of(&g->b, g->batch, kc, g->n, false);
  return 4 * (a.nb * a.each + b.nb * b.each);
}

/* k in chunks whose split operands take at most gemm_pad's MiB (512 without it), the same scratch
 * for each: a vocabulary's gradient products ([8192 x 50257] operands) need no 5 GB of it. The
 * chunks' products accumulate into the result in Float32, as a split-k product's do. A result
 * whose lines start off 16 bytes (one matrix, within the same MiB) is staged once for all the
 * chunks rather than by each chunk's product; a result with room (staged here, or the caller's
 * padded sums: c_room) takes the product padded to whole 16 bytes, the split operands' zeros giving
 * zeros there. The scratch goes back when the product is queued, for the next product of the step
 * (FusedDense's blocks of rows each split their weight again into the same memory). */
static lathe_status_t gemm_tf32x3_chunks(lathe_cuda_exec *ex, const lt_gemm *g, int64_t limit) {
  int64_t kc = g->k;
  while (kc > 256 && split_bytes(g, kc) > limit) kc = round_up(kc / 2, 4);
  split_geom ga = split_of(&g->a, g->batch, g->m, kc, true), gb = split_of(&g->b, g->batch, kc, g->n, false);
  lcuDeviceptr pa, pb, pc = 0;
  LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_FLOAT32, ga.nb * ga.each, &pa, NULL));
  LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_FLOAT32, gb.nb * gb.each, &pb, NULL));
  lt_gemm q = *g;
  q.tf32 = q.ab_room = true;
  int64_t m2 = round_up(g->m, 4), n2 = round_up(g->n, 4);
  lines_of lc;
  bool stage_c = g->batch == 1 && lines_init(&g->c, g->m, g->n, &lc) &&
                 (off16(&lc, g->c.p, 4) || (!g->c_room && (m2 != g->m || n2 != g->n))) && m2 * n2 * 4 <= limit;
  if (stage_c) {
    LATHE_RETURN_IF_ERROR(lathe_cuda_scratch(ex, LATHE_DTYPE_FLOAT32, m2 * n2, &pc, NULL));
    if (g->accumulate) LATHE_RETURN_IF_ERROR(stage_block(ex, &g->c, &lc, 4, 0, 0, m2, n2, pc, &q.c, false));
    else q.c = staged_view(&lc, 4, m2, n2, pc);
    q.c_room = true;
  }
  if (q.c_room && g->batch == 1) q.m = m2, q.n = n2;
  for (int64_t k0 = 0; k0 < g->k; k0 += kc) {
    int64_t kk = g->k - k0 < kc ? g->k - k0 : kc;
    lt_mat a = g->a, b = g->b;
    a.p += (lcuDeviceptr)(k0 * g->a.cs * 4), b.p += (lcuDeviceptr)(k0 * g->b.rs * 4);
    LATHE_RETURN_IF_ERROR(split_into(ex, &a, split_of(&a, g->batch, g->m, kk, true), pa, &q.a));
    LATHE_RETURN_IF_ERROR(split_into(ex, &b, split_of(&b, g->batch, kk, g->n, false), pb, &q.b));
    q.k = 3 * round_up(kk, 4), q.accumulate = g->accumulate || k0 > 0;
    LATHE_RETURN_IF_ERROR(gemm_large(ex, &q));
  }
  lt_mat unused;
  if (stage_c) LATHE_RETURN_IF_ERROR(stage_block(ex, &g->c, &lc, 4, 0, 0, m2, n2, pc, &unused, true));
  return NULL;
}

static lathe_status_t gemm_tf32x3(lathe_cuda_exec *ex, const lt_gemm *g) {
  const lathe_cuda *cu = lathe_cuda_exec_dev(ex)->cu;
  int mark = lathe_cuda_exec_scratch_mark(ex);
  lathe_status_t st = gemm_tf32x3_chunks(ex, g, cu->gemm_pad > 0 ? cu->gemm_pad : (int64_t)512 << 20);
  lathe_cuda_exec_scratch_done(ex, mark);
  return st;
}

lathe_status_t lathe_cuda_gemm(lathe_cuda_exec *ex, const lt_gemm *g) {
  if (g->batch <= 0 || g->m <= 0 || g->n <= 0) return NULL;
  if (g->k <= 0) {
    if (g->accumulate) return NULL;
    return tiled(ex, g); /* writes zeros through the result's strides */
  }
  /* Small products (up to 64K multiply-adds) run on the tiled kernel: one launch beats
   * cuBLASLt's call there, and it sums k in order, as lathe:cpu does, so a small product gives
   * the CPU's result where cuBLASLt's split order would round otherwise. */
  if (!lt_pair(g->ab, g->d) || (double)g->batch * (double)g->m * (double)g->n * (double)g->k <= 65536.0) return tiled(ex, g);
  if (g->bias) return lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: a product's bias goes through lathe_cuda_gemm_bias");
  if (tf32x3(ex, g)) return gemm_tf32x3(ex, g);
  return gemm_large(ex, g);
}

/* A product past the tiled kernel's sizes: staged where that pays, else cuBLASLt in batches of
 * at most 2^30 (the tiled kernel where it has no algorithm). */
static lathe_status_t gemm_large(lathe_cuda_exec *ex, const lt_gemm *g) {
  bool staged, refused = false;
  LATHE_RETURN_IF_ERROR(staged_gemm(ex, g, &staged, &refused));
  if (staged) return NULL;
  size_t es_ab = (size_t)lathe_dtype_bits(g->ab) / 8, es_d = (size_t)lathe_dtype_bits(g->d) / 8;
  enum { CHUNK = 1 << 30 };
  for (int64_t b0 = 0; b0 < g->batch; b0 += CHUNK) {
    lt_gemm part = *g;
    part.batch = g->batch - b0 < CHUNK ? g->batch - b0 : CHUNK;
    part.a.p += (lcuDeviceptr)(b0 * g->a.bs * (int64_t)es_ab);
    part.b.p += (lcuDeviceptr)(b0 * g->b.bs * (int64_t)es_ab);
    part.c.p += (lcuDeviceptr)(b0 * g->c.bs * (int64_t)es_d);
    bool done;
    LATHE_RETURN_IF_ERROR(lt_matmul(ex, &part, false, &done));
    if (!done) LATHE_RETURN_IF_ERROR(tiled(ex, &part));
  }
  return NULL;
}

lathe_status_t lathe_cuda_gemm_bias(lathe_cuda_exec *ex, const lt_gemm *g, bool *done) {
  *done = false;
  if (!g->bias) {
    *done = true;
    return lathe_cuda_gemm(ex, g);
  }
  if (g->batch != 1 || g->m <= 0 || g->n <= 0 || g->k <= 0 || g->accumulate || g->bias % 16 || !lt_pair(g->ab, g->d) ||
      (double)g->m * (double)g->n * (double)g->k <= 65536.0 || tf32x3(ex, g))
    return NULL; /* tf32x3: three products, the bias added after them */
  bool refused = false;
  LATHE_RETURN_IF_ERROR(staged_gemm(ex, g, done, &refused));
  if (*done || refused) return NULL;
  return lt_matmul(ex, g, false, done);
}

/* ---- reductions over the threads of a row ---- */
static const char reduce_src[] = LT_CUH_ROW_REDUCE;

const char *lathe_cuda_reduce_source(void) { return reduce_src; }

static const char access_src[] = LT_CUH_ACCESS;

const char *lathe_cuda_access_source(void) { return access_src; }

int lathe_cuda_row_threads(int64_t len) {
  int tpr = 1;
  while (tpr < 1024 && (int64_t)tpr * 4 < len) tpr *= 2;
  return tpr;
}

int lathe_cuda_warp_values(int64_t len) {
  for (int per = 4; per <= 32; per *= 2)
    if (len <= 32 * per) return per;
  return 0;
}

void lathe_cuda_row_grid(int64_t rows, int tpr, unsigned *blocks, unsigned *threads) {
  unsigned th = tpr > 32 ? (unsigned)tpr : 256;
  int64_t rpb = th / (unsigned)tpr, b = (rows + rpb - 1) / rpb;
  if (b < 1) b = 1;
  if (b > 65535 * 8) b = 65535 * 8;
  *blocks = (unsigned)b;
  *threads = th;
}

/* ---- activations (FusedDense, FusedQuantizedDense, the activation ops): ew.def's LATHE_ACT rows as text ---- */
const char *lathe_cuda_activation_source(void) { return lathe_act_source_cuda(); }

/* ---- sources for the NVRTC test ---- */
void lathe_cuda_sources_gemm(lathe_cuda_source_fn fn, void *ctx) {
  fn(ctx, "gemm tiled", tiled_src);
  fn(ctx, "gemm tf32x3 split", tf32x3_src);
  /* conversions: every dtype as a source and as a destination at least once, through the
   * chains DotGeneral uses (operand -> accumulator -> compute type, result -> output) */
  static const lathe_dtype paths[][3] = {
      {LATHE_DTYPE_INT8, LATHE_DTYPE_INT32, LATHE_DTYPE_UINT32},
      {LATHE_DTYPE_UINT16, LATHE_DTYPE_INT64, LATHE_DTYPE_UINT64},
      {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_FLOAT16},
      {LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_FLOAT32, LATHE_DTYPE_FLOAT32},
      {LATHE_DTYPE_FLOAT64, LATHE_DTYPE_BFLOAT16, LATHE_DTYPE_BFLOAT16},
      {LATHE_DTYPE_UINT32, LATHE_DTYPE_INT16, LATHE_DTYPE_INT4},
      {LATHE_DTYPE_UINT64, LATHE_DTYPE_UINT8, LATHE_DTYPE_UINT2},
      {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX128},
      {LATHE_DTYPE_COMPLEX128, LATHE_DTYPE_FLOAT64, LATHE_DTYPE_BOOL},
      {LATHE_DTYPE_INT16, LATHE_DTYPE_FLOAT16, LATHE_DTYPE_FLOAT32},
      {LATHE_DTYPE_FLOAT32, LATHE_DTYPE_INT32, LATHE_DTYPE_UINT32},
      {LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_COMPLEX64, LATHE_DTYPE_INT8},
      {LATHE_DTYPE_UINT8, LATHE_DTYPE_UINT8, LATHE_DTYPE_UINT8},
  };
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    const char *t = lathe_cuda_convert_text(paths[i], 3);
    char label[96];
    snprintf(label, sizeof label, "convert %s -> %s -> %s", lathe_dtype_name(paths[i][0]), lathe_dtype_name(paths[i][1]),
             lathe_dtype_name(paths[i][2]));
    if (t) fn(ctx, label, t);
  }
}

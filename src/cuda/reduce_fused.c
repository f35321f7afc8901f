/* reduce_fused.c -- a REDUCE region whose reduction is a column reduction (a bias or layer-norm
 * gradient: a float Sum, Product, Max or Min over the leading axes, the kept run innermost) as
 * one generated kernel: its prologue's members are computed where the reduction reads them, so
 * the operand never goes through memory. A block of 8 warps takes 32 groups of 4 adjacent
 * columns (loaded and stored as vectors where the pointers allow) over one part of the rows, each
 * warp every 8th row of it; the warps' accumulators combine in shared memory in warp order, then
 * the parts' accumulators are reduced as columns by reduce.c's second pass, as lathe:cuda's
 * column reductions do. Prologue values read after the region are written as the prologue would.
 * The epilogue runs as its own kernel. Regions of another form keep the three kernels; so does
 * every region with the option reduce_fuse=0. */
#include <stdio.h>

#include "cuda.h"
#include "kernels/zkernels.h"

enum { RF_MAX = 64, RF_V = 4 };
enum { RF_ELEM, RF_COL, RF_ROW, RF_ONE }; /* an input per element, per column, per row, once */

struct lathe_cuda_redk {
  int64_t R, C;    /* rows reduced, columns kept */
  int n_inputs, n_outputs;
  int kind[RF_MAX];
  int in_bytes[RF_MAX], out_bytes[RF_MAX];
  int out_slot[RF_MAX]; /* the slot each output fills */
  const lathe_node *reduce;
};

static const char rows_lib[] = LT_CUH_ROWS; /* the folds (lt_rsum, lt_rmax, ...) */

static bool is_float(lathe_dtype dt) {
  return dt == LATHE_DTYPE_FLOAT32 || dt == LATHE_DTYPE_FLOAT64 || dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16;
}

/* How an input with strides st over the region's axes (p leading reduced ones of R rows, then
 * kept ones of C columns; size-1 axes skipped) is read, or -1 for another pattern. */
static int classify(const lathe_shape *F, int p, const int64_t *st) {
  bool rows_zero = true, cols_zero = true, rows_rm = true, cols_rm = true;
  int64_t acc = 1;
  for (int a = F->rank - 1; a >= 0; a--) {
    if (F->dims[a] == 1) continue;
    bool kept = a >= p;
    if (kept) {
      cols_zero &= st[a] == 0;
      cols_rm &= st[a] == acc;
    } else {
      rows_zero &= st[a] == 0;
      rows_rm &= st[a] == acc;
    }
    acc *= F->dims[a];
  }
  if (rows_zero && cols_zero) return RF_ONE;
  if (rows_rm && cols_rm) return RF_ELEM;
  if (rows_zero && cols_rm) return RF_COL;
  if (cols_zero) { /* the rows' offsets row-major on their own */
    int64_t r = 1;
    for (int a = p - 1; a >= 0; a--) {
      if (F->dims[a] == 1) continue;
      if (st[a] != r) return -1;
      r *= F->dims[a];
    }
    return RF_ROW;
  }
  return -1;
}

static lathe_status_t gen(lt_text *t, const lathe_pfunc *pf, const lathe_pregion *g, int red, const int *out_of,
                          const lathe_cuda_redk *k) {
  char names[RF_MAX][96], c[160], a[64];
  const lathe_node *n = k->reduce;
  lathe_dtype dt = n->in[0]->shape.dtype, odt = n->shape.dtype;
  const char *A = dt == LATHE_DTYPE_FLOAT64 ? "double" : "float";
  lt_put(t, "%s%s", lathe_cuda_ew_prelude(), rows_lib);
  LATHE_RETURN_IF_ERROR(lathe_cuda_ew_member_fns(t, g, names));
  lt_put(t, "extern \"C\" __global__ void __launch_bounds__(256) %s(int64_t R, int64_t C, int64_t splits, int vec, %s *part, %s *out",
         LATHE_CUDA_EWK_ANON, A, lathe_cuda_ew_storage(odt));
  for (int o = 0; o < k->n_outputs; o++) lt_put(t, ", %s *o%d", lathe_cuda_ew_storage(lathe_dtype_widened(pf->slots[k->out_slot[o]].shape.dtype)), o);
  for (int i = 0; i < k->n_inputs; i++)
    lt_put(t, ", const %s *__restrict__ i%d", lathe_cuda_ew_storage(lathe_dtype_widened(pf->slots[g->inputs[i].slot].shape.dtype)), i);
  lt_put(t, ") {\n  typedef %s A;\n  typedef %s<A> FOLD;\n  enum { V = %d };\n", A, lathe_cuda_rows_fold(n->op), RF_V);
  lt_put(t, "  const int64_t nv = C / V, tiles = (nv + 31) / 32, tile = blockIdx.x %% tiles, s = blockIdx.x / tiles;\n");
  lt_put(t, "  const int lane = threadIdx.x & 31, wy = threadIdx.x >> 5;\n");
  lt_put(t, "  const int64_t cv = tile * 32 + lane, c0 = cv * V, chunk = (R + splits - 1) / splits, r0 = s * chunk;\n");
  lt_put(t, "  const int64_t r1 = r0 + chunk < R ? r0 + chunk : R;\n");
  lt_put(t, "  A acc[V];\n#pragma unroll\n  for (int q = 0; q < V; q++) acc[q] = FOLD::id();\n");
  lt_put(t, "  if (cv < nv) {\n");
  /* inputs read once: per column (a vector of the group) or a scalar */
  for (int i = 0; i < k->n_inputs; i++) {
    lathe_dtype idt = lathe_dtype_widened(pf->slots[g->inputs[i].slot].shape.dtype);
    const char *S = lathe_cuda_ew_storage(idt);
    if (k->kind[i] == RF_ONE) {
      lt_put(t, "    const %s h%d = i%d[0];\n", S, i, i);
    } else if (k->kind[i] == RF_COL) {
      lt_put(t, "    lt_v4<%s> h%d;\n    if (vec) h%d = *(const lt_v4<%s> *)(i%d + c0);\n", S, i, i, S, i);
      lt_put(t, "    else\n#pragma unroll\n      for (int q = 0; q < V; q++) h%d.v[q] = i%d[c0 + q];\n", i, i);
    }
  }
  lt_put(t, "#pragma unroll 4\n    for (int64_t r = r0 + wy; r < r1; r += 8) {\n      const int64_t e = r * C + c0;\n");
  for (int i = 0; i < k->n_inputs; i++) {
    lathe_dtype idt = lathe_dtype_widened(pf->slots[g->inputs[i].slot].shape.dtype);
    const char *S = lathe_cuda_ew_storage(idt);
    if (k->kind[i] == RF_ELEM) {
      lt_put(t, "      lt_v4<%s> h%d;\n      if (vec) h%d = *(const lt_v4<%s> *)(i%d + e);\n", S, i, i, S, i);
      lt_put(t, "      else\n#pragma unroll\n        for (int q = 0; q < V; q++) h%d.v[q] = i%d[e + q];\n", i, i);
    } else if (k->kind[i] == RF_ROW) {
      lt_put(t, "      const %s h%d = i%d[r];\n", S, i, i);
    }
  }
  for (int o = 0; o < k->n_outputs; o++)
    lt_put(t, "      lt_v4<%s> w%d;\n", lathe_cuda_ew_storage(lathe_dtype_widened(pf->slots[k->out_slot[o]].shape.dtype)), o);
  lt_put(t, "#pragma unroll\n      for (int q = 0; q < V; q++) {\n");
  for (int i = 0; i < k->n_inputs; i++) {
    lathe_dtype idt = lathe_dtype_widened(pf->slots[g->inputs[i].slot].shape.dtype);
    snprintf(a, sizeof a, k->kind[i] == RF_ELEM || k->kind[i] == RF_COL ? "h%d.v[q]" : "h%d", i);
    lt_put(t, "      const %s x%d = %s;\n", lathe_cuda_ew_compute(idt), i, lathe_cuda_ew_load(c, sizeof c, idt, a));
  }
  /* escaping values kept in w<o>.v[q], the operand folded */
  lathe_cuda_ew_members(t, g, names, out_of, "      ", "w%d.v[q] = %s;");
  lt_put(t, "      acc[q] = FOLD::f(acc[q], (A)v%d);\n", red);
  lt_put(t, "      }\n");
  for (int o = 0; o < k->n_outputs; o++) {
    lt_put(t, "      if (vec) *(lt_v4<%s> *)(o%d + e) = w%d;\n",
           lathe_cuda_ew_storage(lathe_dtype_widened(pf->slots[k->out_slot[o]].shape.dtype)), o, o);
    lt_put(t, "      else\n#pragma unroll\n        for (int q = 0; q < V; q++) o%d[e + q] = w%d.v[q];\n", o, o);
  }
  lt_put(t, "    }\n  }\n");
  /* the warps' accumulators in warp order; [warp][q][lane]: no bank conflicts */
  lt_put(t, "  __shared__ A sm[8 * V * 32];\n#pragma unroll\n  for (int q = 0; q < V; q++) sm[(wy * V + q) * 32 + lane] = acc[q];\n");
  lt_put(t, "  __syncthreads();\n  if (wy || cv >= nv) return;\n");
  lt_put(t, "  for (int w = 1; w < 8; w++)\n#pragma unroll\n    for (int q = 0; q < V; q++) acc[q] = FOLD::f(acc[q], sm[(w * V + q) * 32 + lane]);\n");
  snprintf(a, sizeof a, "acc[q]");
  lt_put(t, "#pragma unroll\n  for (int q = 0; q < V; q++) {\n    if (splits > 1) part[s * C + c0 + q] = acc[q];\n");
  lt_put(t, "    else out[c0 + q] = %s;\n  }\n}\n", lathe_cuda_ew_store(c, sizeof c, lathe_dtype_widened(odt), a));
  return t->oom ? LATHE_OOM("lathe:cuda: codegen") : NULL;
}

lathe_status_t lathe_cuda_redk_new(const lathe_pfunc *pf, const lathe_pregion *g, lathe_cuda_redk **out, char **source) {
  *out = NULL;
  *source = NULL;
  if (g->kind != LATHE_PREGION_REDUCE || g->prologue < 0) return NULL;
  const lathe_pregion *pro = &pf->regions[g->prologue];
  const lathe_node *n = g->reduce;
  lathe_dtype dt = n->in[0]->shape.dtype;
  const lathe_shape *F = &pro->shape;
  if (!lathe_cuda_rows_fold(n->op) || !is_float(dt) || n->shape.dtype != dt || pro->kind != LATHE_PREGION_LOOP ||
      pro->n_members > RF_MAX || pro->n_inputs > RF_MAX || F->rank != n->in[0]->shape.rank)
    return NULL;
  for (int a = 0; a < F->rank; a++)
    if (F->dims[a] != n->in[0]->shape.dims[a]) return NULL;
  /* the reduced axes: every axis longer than 1 before the first kept one */
  bool reduced[LATHE_MAX_RANK] = {false};
  lathe_ilist axes = lathe_attr_reduce_axes(n);
  for (int i = 0; i < axes.n; i++) reduced[axes.v[i]] = true;
  int p = 0;
  while (p < F->rank && (reduced[p] || F->dims[p] == 1)) p++;
  for (int a = p; a < F->rank; a++)
    if (reduced[a] && F->dims[a] != 1) return NULL;
  int64_t R = 1, C = 1;
  for (int a = 0; a < F->rank; a++) *(a < p ? &R : &C) *= F->dims[a];
  if (C % RF_V || C < 64 || R < 2) return NULL;
  lathe_cuda_redk *k = calloc(1, sizeof *k);
  if (!k) return LATHE_OOM("lathe:cuda: codegen");
  k->R = R, k->C = C, k->reduce = n, k->n_inputs = pro->n_inputs;
  for (int i = 0; i < pro->n_inputs; i++) {
    const lathe_pinput *in = &pro->inputs[i];
    int64_t st[LATHE_MAX_RANK] = {0}, acc = 1;
    if (in->access == LATHE_PACCESS_FULL)
      for (int a = F->rank - 1; a >= 0; a--) st[a] = acc, acc *= F->dims[a];
    else if (in->access == LATHE_PACCESS_STRIDED) memcpy(st, in->strides, sizeof st);
    k->kind[i] = classify(F, p, st);
    lathe_dtype idt = lathe_dtype_widened(pf->slots[in->slot].shape.dtype);
    k->in_bytes[i] = lathe_dtype_bits(idt) / 8;
    if (k->kind[i] < 0 || !lathe_cuda_ew_storage(idt) || !lathe_cuda_ew_compute(idt) || lathe_dtype_bits(idt) > 64) {
      free(k);
      return NULL;
    }
  }
  /* the operand: the member that writes reduce_in; written out only when read after the region */
  int red = -1, out_of[RF_MAX], pos = -1;
  for (int s = 0; s < pf->n_steps && pos < 0; s++)
    if (pf->steps[s].region == (int)(g - pf->regions)) pos = s;
  for (int i = 0; i < pro->n_members; i++) {
    const lathe_pmember *m = &pro->members[i];
    out_of[i] = -1;
    if (m->out_slot == g->reduce_in) red = i;
    if (m->out_slot < 0 || (m->out_slot == g->reduce_in && pf->slots[m->out_slot].last_use <= pos)) continue;
    k->out_slot[k->n_outputs] = m->out_slot;
    k->out_bytes[k->n_outputs] = lathe_dtype_bits(lathe_dtype_widened(pf->slots[m->out_slot].shape.dtype)) / 8;
    out_of[i] = k->n_outputs++;
  }
  if (red < 0 || pos < 0) {
    free(k);
    return NULL;
  }
  lt_text t = {0};
  lathe_status_t st = gen(&t, pf, pro, red, out_of, k);
  if (st) {
    free(t.s);
    free(k);
    /* a member without a CUDA element function: the region keeps its three kernels */
    if (lathe_status_code_of(st) == LATHE_STATUS_UNIMPLEMENTED) {
      lathe_status_free(st);
      return NULL;
    }
    return st;
  }
  *out = k;
  *source = t.s;
  return NULL;
}

void lathe_cuda_redk_free(lathe_cuda_redk *k) { free(k); }

int lathe_cuda_redk_outputs(const lathe_cuda_redk *k, const int **slots) {
  *slots = k->out_slot;
  return k->n_outputs;
}

lathe_status_t lathe_cuda_redk_launch(lathe_cuda_exec *ex, const lathe_cuda_redk *k, lcuFunction f, lathe_tensor **outs,
                                      lathe_tensor *const *ins, lathe_tensor *result) {
  cuda_dev *d = lathe_cuda_exec_dev(ex);
  int64_t want = 4 * (int64_t)(d->sm_count > 0 ? d->sm_count : 80), tiles = (k->C / RF_V + 31) / 32;
  int64_t splits = (want + tiles - 1) / tiles, most = k->R / 64;
  if (splits > most) splits = most;
  if (splits < 1) splits = 1;
  lathe_dtype dt = k->reduce->in[0]->shape.dtype;
  size_t as = dt == LATHE_DTYPE_FLOAT64 ? 8 : 4;
  lcuDeviceptr part = 0, res = lathe_cuda_ptr(result), ptrs[2 * RF_MAX];
  if (splits > 1) {
    lathe_shape ps;
    memset(&ps, 0, sizeof ps);
    ps.dtype = LATHE_DTYPE_UINT8, ps.rank = 1, ps.dims[0] = (int64_t)as * k->C * splits;
    lathe_tensor *t;
    LATHE_RETURN_IF_ERROR(lathe_cuda_exec_tensor(ex, &ps, &t));
    lathe_tensor_release(t); /* ours; the execution keeps its own until the stream is done */
    part = lathe_cuda_ptr(t);
  }
  int64_t R = k->R, C = k->C;
  int vec = 1, a = 0, p = 0;
  void *args[6 + 2 * RF_MAX];
  args[a++] = &R, args[a++] = &C, args[a++] = &splits, args[a++] = &vec, args[a++] = &part, args[a++] = &res;
  for (int o = 0; o < k->n_outputs; o++) {
    ptrs[p] = lathe_cuda_ptr(outs[o]);
    vec &= lathe_cuda_v4_aligned(ptrs[p], (size_t)k->out_bytes[o]);
    args[a++] = &ptrs[p++];
  }
  for (int i = 0; i < k->n_inputs; i++) {
    ptrs[p] = lathe_cuda_ptr(ins[i]);
    if (k->kind[i] == RF_ELEM || k->kind[i] == RF_COL) vec &= lathe_cuda_v4_aligned(ptrs[p], (size_t)k->in_bytes[i]);
    args[a++] = &ptrs[p++];
  }
  if (tiles * splits > INT32_MAX) return LATHE_UNIMPL("lathe:cuda: a fused column reduction of %lld columns", (long long)C);
  LATHE_RETURN_IF_ERROR(lathe_cuda_launch(ex, f, (unsigned)(tiles * splits), 256, 0, args));
  if (splits == 1) return NULL;
  return lathe_cuda_reduce_partials(ex, k->reduce, (const void *)(uintptr_t)part, splits, C, result);
}

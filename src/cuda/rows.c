/* rows.c -- ROWS regions on the GPU (cuda.h says what a kernel does): softmax, layer norm and
 * their gradients as GoMLX's graph package writes them, one pass over memory instead of a
 * kernel per reduction and per elementwise run between them.
 *
 * A group of G threads (32 to 1024, a power of two) takes a row of N elements, a thread the
 * elements lane + t*G for t < PER, so that N <= G * PER with PER <= 8 and each load of a warp
 * is one run of memory. Values over the row live in registers (PER a thread); values per row
 * (a reduction's result and what is computed from such values) are one register, the same in
 * every thread of the group. A reduction folds a thread's PER values in order, then the group's
 * threads by a shuffle tree (and across its warps through shared memory): its sums are ordered
 * differently from lathe:cuda's reduction kernels, as between two sizes of those kernels. When
 * every row read whole starts on a multiple of 4 elements, a thread takes groups of 4 in a row
 * (elements 4(lane + u*G) + q), loaded and stored as one vector where the pointers allow. With
 * LATHE_CUDA_ROWS_SHIFT (option rows_shift=1), rows of a length off 4 (a vocabulary of 50257)
 * take the groups too when every row read whole and every row written starts off 4 alike: row
 * r's groups then start sh = (r*N) mod 4 elements before it (elements 4(lane + u*G) + q - sh), so
 * they fall on 4 alike in every operand. With LATHE_CUDA_ROWS_IOTA (rows_iota=1) an input made by
 * Iota (the one-hot's column index) is computed from its offset, not read. Both are on by default
 * (GPT-2 small's step 2 % faster with them on an H100; 0 turns each off). */
#include <stdio.h>

#include "cuda.h"
#include "kernels/zkernels.h"

enum { ROWS_MAX_VALUES = 160, ROWS_PER = 8 }; /* values: a region of 48 members reads at most 144 inputs */

enum { IN_SCALAR, IN_ROW, IN_ELEM }; /* one value; one per row; one per element of a row */

typedef struct {
  int kind;
  lathe_dtype dtype;
  bool iota;                   /* made by an Iota whose value is its offset: computed, not read */
  bool linear;                 /* the row's offset is r * mul */
  int64_t mul;                 /* linear: the multiplier */
  int64_t rs[LATHE_MAX_RANK];  /* not linear: strides over the kept row axes */
  int64_t cs;                  /* IN_ELEM: stride along the row */
} row_input;

struct lathe_cuda_rowk {
  int64_t R;
  int N, G, PER, block;
  int chunks;                  /* > 1: a long row, read again by each pass in chunks of G * PER */
  int nk;                      /* row axes of size > 1 */
  int64_t kd[LATHE_MAX_RANK];  /* their sizes */
  bool decompose;              /* some input's row offset is not linear */
  bool vec;                    /* rows in groups of 4 (a thread's values: 4 in a row at a time) */
  bool shift;                  /* vec over rows of a length off 4: row r's groups start (r*N) mod 4 before it */
  int n_inputs, n_outputs;
  row_input in[ROWS_MAX_VALUES];
};

static const char rows_lib[] = LT_CUH_ROWS;

/* Whether a slot holds an Iota of 32- or 64-bit integers along its only axis longer than 1: each
 * element's value is then its offset in the slot. */
static bool offset_is_value(const lathe_pslot *s) {
  if (s->kind != LATHE_PSLOT_VALUE || s->node->op != LATHE_OP_IOTA) return false;
  lathe_dtype dt = s->shape.dtype;
  if (dt != LATHE_DTYPE_INT32 && dt != LATHE_DTYPE_INT64 && dt != LATHE_DTYPE_UINT32 && dt != LATHE_DTYPE_UINT64) return false;
  int axis = (int)lathe_attr_iota_axis(s->node);
  for (int a = 0; a < s->shape.rank; a++)
    if (a != axis && s->shape.dims[a] != 1) return false;
  return lathe_shape_size(&s->shape) <= INT32_MAX;
}

/* How region input i is read: per element (a stride along the row), per row or once. */
static void classify(lathe_cuda_rowk *k, const lathe_pfunc *pf, const lathe_pregion *g, int i) {
  const lathe_pinput *pi = &g->inputs[i];
  const lathe_shape *F = &g->shape;
  row_input *ri = &k->in[i];
  memset(ri, 0, sizeof *ri);
  ri->dtype = lathe_dtype_widened(pf->slots[pi->slot].shape.dtype);
  int64_t st[LATHE_MAX_RANK] = {0};
  if (pi->access == LATHE_PACCESS_SCALAR) {
    ri->kind = IN_SCALAR;
    return;
  }
  if (pi->access == LATHE_PACCESS_FULL) {
    int64_t acc = 1;
    for (int a = F->rank - 1; a >= 0; a--) st[a] = acc, acc *= F->dims[a];
  } else {
    memcpy(st, pi->strides, sizeof st);
  }
  /* along the row: the innermost trailing axis's stride (the program checked they walk as one) */
  ri->cs = 0;
  for (int a = F->rank - 1; a >= g->row_axes; a--)
    if (F->dims[a] != 1) {
      ri->cs = st[a];
      break;
    }
  /* across rows: r * mul when the strides are row-major scaled, else per kept axis */
  int64_t acc = 1, mul = -1;
  ri->linear = true;
  int j = k->nk;
  for (int a = g->row_axes - 1; a >= 0; a--) {
    if (F->dims[a] == 1) continue;
    j--;
    ri->rs[j] = st[a];
    if (mul < 0) mul = st[a];
    else if (st[a] != mul * acc) ri->linear = false;
    acc *= F->dims[a];
  }
  ri->mul = mul < 0 ? 0 : mul;
  bool moves = false;
  for (int a = 0; a < g->row_axes; a++) moves |= F->dims[a] != 1 && st[a] != 0;
  ri->kind = ri->cs != 0 ? IN_ELEM : moves ? IN_ROW : IN_SCALAR;
  if (!ri->linear && ri->kind != IN_SCALAR) k->decompose = true;
  ri->iota = ri->kind != IN_SCALAR && offset_is_value(&pf->slots[pi->slot]);
}

/* ---- the source ---- */
typedef struct {
  bool varying; /* one value per element of the row (else one per row) */
  bool red;
  int out;      /* output index, or -1 */
  const char *T;
  lathe_dtype dt; /* widened */
  int level;      /* reductions on the way from the inputs to it (a long row's pass) */
} mem_info;

const char *lathe_cuda_rows_fold(lathe_op op) {
  switch (op) {
    case LATHE_OP_REDUCE_SUM: return "lt_rsum";
    case LATHE_OP_REDUCE_PRODUCT: return "lt_rprod";
    case LATHE_OP_REDUCE_MAX: return "lt_rmax";
    case LATHE_OP_REDUCE_MIN: return "lt_rmin";
    default: return NULL;
  }
}

/* Operand q of a member, at element t of the thread (when varying). */
static void operand(char *buf, size_t cap, int q, const mem_info *mi, const lathe_cuda_rowk *k) {
  if (q >= 0) snprintf(buf, cap, mi[q].varying ? "v%d[t]" : "v%d", q);
  else snprintf(buf, cap, k->in[-q - 1].kind == IN_ELEM ? "x%d[t]" : "x%d", -q - 1);
}

static bool operand_varies(int q, const mem_info *mi, const lathe_cuda_rowk *k) {
  return q >= 0 ? mi[q].varying : k->in[-q - 1].kind == IN_ELEM;
}

/* Loads region input i's values of the thread's part of the chunk at base_ (IN_ELEM only). */
static void load_elem(lt_text *t, const lathe_cuda_rowk *k, int i) {
  const row_input *ri = &k->in[i];
  const char *S = lathe_cuda_ew_storage(ri->dtype), *T = lathe_cuda_ew_compute(ri->dtype);
  char a[64], c[160];
  lt_put(t, "  %s x%d[PER];\n", T, i);
  if (ri->iota) {
    lt_put(t, "#pragma unroll\n  for (int t = 0; t < PER; t++) x%d[t] = (%s)(ro%d + (int64_t)(base_ + LT_J(t)) * c%d);\n", i, T, i, i);
    return;
  }
  if (k->vec) { /* cs == 1 here: groups of 4 in a row */
    lt_put(t, "#pragma unroll\n  for (int u = 0; u < PER / 4; u++) {\n    const int j = base_ + 4 * (lane + u * G)%s;\n",
           k->shift ? " - sh_" : "");
    lt_put(t, "    lt_v4<%s> w;\n    if (live && %s && vec) w = *(const lt_v4<%s> *)(i%d + ro%d + j);\n", S,
           k->shift ? "j >= 0 && j + 3 < N" : "j < N", S, i, i);
    lt_put(t, "    else\n#pragma unroll\n      for (int q = 0; q < 4; q++) w.v[q] = live && %s ? i%d[ro%d + j + q] : (%s)0;\n",
           k->shift ? "(unsigned)(j + q) < (unsigned)N" : "j + q < N", i, i, S);
    lt_put(t, "#pragma unroll\n    for (int q = 0; q < 4; q++) x%d[4 * u + q] = %s;\n  }\n", i,
           lathe_cuda_ew_load(c, sizeof c, ri->dtype, "w.v[q]"));
    return;
  }
  lt_put(t, "#pragma unroll\n  for (int t = 0; t < PER; t++) {\n    const int j = base_ + lane + t * G;\n");
  if (ri->cs == 1) snprintf(a, sizeof a, "i%d[ro%d + j]", i, i);
  else snprintf(a, sizeof a, "i%d[ro%d + (int64_t)j * c%d]", i, i, i);
  lt_put(t, "    x%d[t] = live && j < N ? %s : (%s)0;\n  }\n", i, lathe_cuda_ew_load(c, sizeof c, ri->dtype, a), T);
}

/* Member i (not a reduction): its value(s) from its operands. */
static void compute(lt_text *t, const lathe_pregion *g, const lathe_cuda_rowk *k, const mem_info *mi, char names[][96],
                    int i) {
  const lathe_pmember *m = &g->members[i];
  char ops[LATHE_PMEMBER_MAX_IN][48], expr[320], rounded[400];
  bool half = mi[i].dt == LATHE_DTYPE_FLOAT16 || mi[i].dt == LATHE_DTYPE_BFLOAT16;
  const char *hs = mi[i].dt == LATHE_DTYPE_FLOAT16 ? "f16" : "bf16";
  for (int q = 0; q < m->n_in; q++) operand(ops[q], sizeof ops[q], m->in[q], mi, k);
  if (m->identity) {
    snprintf(expr, sizeof expr, "%s", ops[0]);
  } else {
    int w = snprintf(expr, sizeof expr, "%s(", names[i]);
    for (int q = 0; q < m->n_in; q++) w += snprintf(expr + w, sizeof expr - (size_t)w, "%s%s", q ? ", " : "", ops[q]);
    snprintf(expr + w, sizeof expr - (size_t)w, ")");
  }
  /* a Float16/BFloat16 value is stored between ops when unfused: round it alike */
  if (half && !m->identity) snprintf(rounded, sizeof rounded, "lt_%s_to_f32(lt_f32_to_%s(%s))", hs, hs, expr);
  else snprintf(rounded, sizeof rounded, "%s", expr);
  if (mi[i].varying)
    lt_put(t, "  %s v%d[PER];\n#pragma unroll\n  for (int t = 0; t < PER; t++) v%d[t] = %s;\n", mi[i].T, i, i, rounded);
  else lt_put(t, "  const %s v%d = %s;\n", mi[i].T, i, rounded);
}

/* Folds the thread's part of the chunk into reduction i's accumulator acc<i>. */
static void accumulate(lt_text *t, const lathe_pregion *g, const lathe_cuda_rowk *k, const mem_info *mi, int i) {
  char op[48];
  bool half = mi[i].dt == LATHE_DTYPE_FLOAT16 || mi[i].dt == LATHE_DTYPE_BFLOAT16;
  const char *A = half ? "float" : mi[i].T;
  operand(op, sizeof op, g->members[i].in[0], mi, k);
  const char *in_row = k->shift ? "(unsigned)(base_ + LT_J(t)) < (unsigned)N" : "base_ + LT_J(t) < N";
  lt_put(t, "#pragma unroll\n  for (int t = 0; t < PER; t++)\n    if (%s) acc%d = %s<%s>::f(acc%d, (%s)%s);\n", in_row, i,
         lathe_cuda_rows_fold(g->members[i].node->op), A, i, A, op);
}

/* Reduction i's accumulator, its sm<i> and its result v<i> (declared). */
static void reduction_decl(lt_text *t, const lathe_pregion *g, const lathe_cuda_rowk *k, const mem_info *mi, int i) {
  bool half = mi[i].dt == LATHE_DTYPE_FLOAT16 || mi[i].dt == LATHE_DTYPE_BFLOAT16;
  const char *A = half ? "float" : mi[i].T;
  lt_put(t, "  __shared__ %s sm%d[%d];\n  %s v%d;\n  %s acc%d = %s<%s>::id();\n", A, i, k->block / 32, mi[i].T, i, A, i,
         lathe_cuda_rows_fold(g->members[i].node->op), A);
}

/* Folds reduction i's accumulators over the group into v<i>. */
static void reduction_fold(lt_text *t, const lathe_pregion *g, const mem_info *mi, int i) {
  bool half = mi[i].dt == LATHE_DTYPE_FLOAT16 || mi[i].dt == LATHE_DTYPE_BFLOAT16;
  const char *A = half ? "float" : mi[i].T, *hs = mi[i].dt == LATHE_DTYPE_FLOAT16 ? "f16" : "bf16";
  lt_put(t, "  acc%d = lt_rows_fold<%s<%s>, G, %s>(acc%d, sm%d);\n", i, lathe_cuda_rows_fold(g->members[i].node->op), A, A, i, i);
  if (half) lt_put(t, "  v%d = lt_%s_to_f32(lt_f32_to_%s(acc%d));\n", i, hs, hs, i);
  else lt_put(t, "  v%d = acc%d;\n", i, i);
}

/* Stores member i's row value, or its values over the chunk at base_. */
static void store(lt_text *t, const lathe_pregion *g, const lathe_cuda_rowk *k, const mem_info *mi, int i) {
  char a[64], c[160];
  if (g->members[i].row) {
    snprintf(a, sizeof a, "v%d", i);
    lt_put(t, "  if (live && lane == 0) o%d[r] = %s;\n", mi[i].out, lathe_cuda_ew_store(c, sizeof c, mi[i].dt, a));
  } else if (k->vec) {
    const char *S = lathe_cuda_ew_storage(mi[i].dt);
    snprintf(a, sizeof a, mi[i].varying ? "v%d[4 * u + q]" : "v%d", i);
    lt_put(t, "#pragma unroll\n  for (int u = 0; u < PER / 4; u++) {\n    const int j = base_ + 4 * (lane + u * G)%s;\n",
           k->shift ? " - sh_" : "");
    lt_put(t, "    lt_v4<%s> w;\n#pragma unroll\n    for (int q = 0; q < 4; q++) w.v[q] = %s;\n", S,
           lathe_cuda_ew_store(c, sizeof c, mi[i].dt, a));
    if (k->shift) {
      lt_put(t, "    if (live) {\n      if (vec && j >= 0 && j + 3 < N) *(lt_v4<%s> *)(o%d + r * N + j) = w;\n", S, mi[i].out);
      lt_put(t, "      else\n#pragma unroll\n        for (int q = 0; q < 4; q++) if ((unsigned)(j + q) < (unsigned)N) o%d[r * N + j + q] = w.v[q];\n"
                "    }\n  }\n", mi[i].out);
    } else {
      lt_put(t, "    if (live && j < N) {\n      if (vec) *(lt_v4<%s> *)(o%d + r * N + j) = w;\n", S, mi[i].out);
      lt_put(t, "      else\n#pragma unroll\n        for (int q = 0; q < 4; q++) if (j + q < N) o%d[r * N + j + q] = w.v[q];\n    }\n  }\n",
             mi[i].out);
    }
  } else {
    snprintf(a, sizeof a, mi[i].varying ? "v%d[t]" : "v%d", i);
    lt_put(t, "#pragma unroll\n  for (int t = 0; t < PER; t++)\n    if (live && base_ + LT_J(t) < N) o%d[r * N + base_ + LT_J(t)] = %s;\n",
           mi[i].out, lathe_cuda_ew_store(c, sizeof c, mi[i].dt, a));
  }
}

static lathe_status_t gen(lt_text *t, const lathe_pregion *g, lathe_cuda_rowk *k) {
  int n = g->n_members;
  mem_info mi[ROWS_MAX_VALUES];
  char names[ROWS_MAX_VALUES][96], a[64], c[160];
  lt_put(t, "%s%s", lathe_cuda_ew_prelude(), rows_lib);
  for (int i = 0; i < n; i++) {
    const lathe_pmember *m = &g->members[i];
    const lathe_node *nd = m->node;
    mi[i].dt = lathe_dtype_widened(nd->shape.dtype);
    mi[i].T = lathe_cuda_ew_compute(mi[i].dt);
    mi[i].red = lathe_op_kind_of(nd->op) == LATHE_KIND_REDUCE;
    mi[i].out = -1;
    if (!mi[i].T) return LATHE_UNIMPL("lathe:cuda: a fused row region over %s", lathe_dtype_name(nd->shape.dtype));
    if (mi[i].red && !lathe_cuda_rows_fold(nd->op)) return LATHE_UNIMPL("lathe:cuda: %s in a fused row region", lathe_op_name(nd->op));
    mi[i].varying = false;
    mi[i].level = 0;
    for (int q = 0; q < m->n_in; q++) {
      if (!mi[i].red) mi[i].varying |= operand_varies(m->in[q], mi, k);
      int l = m->in[q] >= 0 ? mi[m->in[q]].level : 0;
      if (l > mi[i].level) mi[i].level = l;
    }
    if (mi[i].red) mi[i].level++;
    names[i][0] = 0;
    if (mi[i].red || m->identity) continue;
    bool dup = false;
    for (int j = 0; j < i && !dup; j++) {
      const lathe_node *o = g->members[j].node;
      if (mi[j].red || g->members[j].identity || o->op != nd->op || o->shape.dtype != nd->shape.dtype) continue;
      int w = nd->op == LATHE_OP_WHERE ? 1 : 0;
      if (o->in[w]->shape.dtype != nd->in[w]->shape.dtype) continue;
      memcpy(names[i], names[j], sizeof names[i]);
      dup = true;
    }
    if (!dup) LATHE_RETURN_IF_ERROR(lathe_cuda_ew_element_fn(t, nd, names[i], sizeof names[i]));
  }
  for (int i = 0; i < n; i++)
    if (g->members[i].out_slot >= 0) mi[i].out = k->n_outputs++;
  if (k->n_outputs > ROWS_MAX_VALUES) return LATHE_UNIMPL("lathe:cuda: a fused row region with %d results", k->n_outputs);

  /* the signature */
  lt_put(t, "extern \"C\" __global__ void __launch_bounds__(%d) %s(int64_t R, int N, int vec", k->block, LATHE_CUDA_EWK_ANON);
  for (int x = 1; k->decompose && x < k->nk; x++) lt_put(t, ", int64_t d%d", x);
  for (int i = 0; i < n; i++)
    if (mi[i].out >= 0) lt_put(t, ", %s *o%d", lathe_cuda_ew_storage(mi[i].dt), mi[i].out);
  for (int i = 0; i < k->n_inputs; i++) {
    const row_input *ri = &k->in[i];
    lt_put(t, ", const %s *__restrict__ i%d", lathe_cuda_ew_storage(ri->dtype), i);
    if (ri->kind == IN_SCALAR) continue;
    if (ri->linear) lt_put(t, ", int64_t m%d", i);
    else
      for (int x = 0; x < k->nk; x++) lt_put(t, ", int64_t s%d_%d", i, x);
    if (ri->kind == IN_ELEM) lt_put(t, ", int64_t c%d", i);
  }
  lt_put(t, ") {\n");
  lt_put(t, "  enum { G = %d, PER = %d };\n", k->G, k->PER);
  /* the row position of a thread's value t (in its chunk, from base_) */
  if (k->vec) lt_put(t, "#define LT_J(t) (4 * (lane + ((t) >> 2) * G) + ((t) & 3)%s)\n", k->shift ? " - sh_" : "");
  else lt_put(t, "#define LT_J(t) (lane + (t) * G)\n");
  lt_put(t, "  const int lane = threadIdx.x %% G;\n");
  lt_put(t, "  const int64_t r = (int64_t)blockIdx.x * (%d / G) + threadIdx.x / G;\n", k->block);
  lt_put(t, "  const bool live = r < R;\n");
  if (k->shift) lt_put(t, "  const int sh_ = (int)((r * (int64_t)N) & 3);\n");
  if (k->decompose) {
    lt_put(t, "  int64_t q_ = live ? r : 0;\n");
    for (int x = k->nk - 1; x >= 1; x--) lt_put(t, "  const int64_t a%d = q_ %% d%d; q_ /= d%d;\n", x, x, x);
    lt_put(t, "  const int64_t a0 = q_;\n");
  }
  /* inputs: row offsets and the values read once per row */
  for (int i = 0; i < k->n_inputs; i++) {
    const row_input *ri = &k->in[i];
    const char *S = lathe_cuda_ew_storage(ri->dtype), *T = lathe_cuda_ew_compute(ri->dtype);
    if (!S || !T) return LATHE_UNIMPL("lathe:cuda: a fused row region over %s", lathe_dtype_name(ri->dtype));
    if (ri->kind == IN_SCALAR) {
      snprintf(a, sizeof a, "i%d[0]", i);
      lt_put(t, "  const %s x%d = %s;\n", T, i, lathe_cuda_ew_load(c, sizeof c, ri->dtype, a));
      continue;
    }
    if (ri->linear) {
      lt_put(t, "  const int64_t ro%d = live ? r * m%d : 0;\n", i, i);
    } else {
      lt_put(t, "  const int64_t ro%d = ", i);
      for (int x = 0; x < k->nk; x++) lt_put(t, "%sa%d * s%d_%d", x ? " + " : "", x, i, x);
      lt_put(t, ";\n");
    }
    if (ri->kind == IN_ROW && ri->iota) {
      lt_put(t, "  const %s x%d = (%s)ro%d;\n", T, i, T, i);
    } else if (ri->kind == IN_ROW) {
      snprintf(a, sizeof a, "i%d[ro%d]", i, i);
      lt_put(t, "  const %s x%d = %s;\n", T, i, lathe_cuda_ew_load(c, sizeof c, ri->dtype, a));
    }
  }
  if (k->chunks == 1) {
    /* the row in registers: every load in flight first, then the members in order */
    lt_put(t, "  const int base_ = 0;\n");
    for (int i = 0; i < k->n_inputs; i++)
      if (k->in[i].kind == IN_ELEM) load_elem(t, k, i);
    for (int i = 0; i < n; i++) {
      if (mi[i].red) {
        reduction_decl(t, g, k, mi, i);
        accumulate(t, g, k, mi, i);
        reduction_fold(t, g, mi, i);
      } else {
        compute(t, g, k, mi, names, i);
      }
      if (mi[i].out >= 0) store(t, g, k, mi, i);
    }
  } else {
    /* a long row, in chunks of G * PER: pass p reads the row again to fold the reductions of
     * values of level p (the values that need p reductions before them), recomputing those values
     * from the inputs, and writes the results over the row of that level; values per row of level
     * p + 1 follow its folds. The row's later passes mostly hit L2. */
    int passes = 1;
    for (int i = 0; i < n; i++) {
      if (mi[i].red && mi[i].level > passes) passes = mi[i].level;
      if (mi[i].out >= 0 && !g->members[i].row && mi[i].level + 1 > passes) passes = mi[i].level + 1;
    }
    for (int i = 0; i < n; i++) {
      if (mi[i].red) reduction_decl(t, g, k, mi, i);
      else if (!mi[i].varying && mi[i].level == 0) compute(t, g, k, mi, names, i);
      if (mi[i].out >= 0 && g->members[i].row && !mi[i].red && !mi[i].varying && mi[i].level == 0) store(t, g, k, mi, i);
    }
    for (int p = 0; p < passes; p++) {
      lt_put(t, "  for (int ch_ = 0; ch_ < %d; ch_++) {\n  const int base_ = ch_ * (G * PER);\n", k->chunks);
      for (int i = 0; i < k->n_inputs; i++)
        if (k->in[i].kind == IN_ELEM) load_elem(t, k, i);
      for (int i = 0; i < n; i++) {
        if (mi[i].red || !mi[i].varying || mi[i].level > p) continue;
        compute(t, g, k, mi, names, i);
        if (mi[i].out >= 0 && mi[i].level == p) store(t, g, k, mi, i);
      }
      for (int i = 0; i < n; i++) {
        if (mi[i].red && mi[i].level == p + 1) accumulate(t, g, k, mi, i);
        /* a value per row written over the row */
        if (!mi[i].red && !mi[i].varying && !g->members[i].row && mi[i].out >= 0 && mi[i].level == p) store(t, g, k, mi, i);
      }
      lt_put(t, "  }\n");
      for (int i = 0; i < n; i++) {
        if (mi[i].red && mi[i].level == p + 1) reduction_fold(t, g, mi, i);
        else if (!mi[i].red && !mi[i].varying && mi[i].level == p + 1) compute(t, g, k, mi, names, i);
        else continue;
        if (mi[i].out >= 0 && g->members[i].row) store(t, g, k, mi, i);
      }
    }
  }
  lt_put(t, "#undef LT_J\n}\n");
  return t->oom ? LATHE_OOM("lathe:cuda: codegen") : NULL;
}

lathe_status_t lathe_cuda_rowk_new(const lathe_pfunc *pf, const lathe_pregion *g, unsigned flags, lathe_cuda_rowk **out,
                                   char **source) {
  *out = NULL;
  *source = NULL;
  if (g->n_members > ROWS_MAX_VALUES || g->n_inputs > ROWS_MAX_VALUES)
    return LATHE_UNIMPL("lathe:cuda: a fused row region of %d members", g->n_members);
  lathe_cuda_rowk *k = calloc(1, sizeof *k);
  if (!k) return LATHE_OOM("lathe:cuda: codegen");
  const lathe_shape *F = &g->shape;
  int64_t R = 1, N = 1;
  for (int a = 0; a < F->rank; a++) {
    if (a < g->row_axes) R *= F->dims[a];
    else N *= F->dims[a];
    if (a < g->row_axes && F->dims[a] != 1) k->kd[k->nk++] = F->dims[a];
  }
  if (N > LATHE_CUDA_ROWS_LONG_MAX) {
    free(k);
    return LATHE_UNIMPL("lathe:cuda: a fused row region over rows of %lld", (long long)N);
  }
  k->R = R, k->N = (int)N;
  k->n_inputs = g->n_inputs;
  for (int i = 0; i < g->n_inputs; i++) {
    classify(k, pf, g, i);
    k->in[i].iota &= (flags & LATHE_CUDA_ROWS_IOTA) != 0;
  }
  /* groups of 4: every row read whole starts on a multiple of 4 (rows of a multiple of 4), or
   * off 4 as the results' rows r * N do (linear rows of a stride equal to N mod 4) */
  k->vec = N % 4 == 0;
  k->shift = !k->vec && (flags & LATHE_CUDA_ROWS_SHIFT);
  for (int i = 0; (k->vec || k->shift) && i < k->n_inputs; i++) {
    const row_input *ri = &k->in[i];
    if (ri->kind != IN_ELEM || ri->iota) continue;
    if (ri->cs != 1 || (ri->linear && ri->mul % 4)) k->vec = false;
    for (int x = 0; !ri->linear && x < k->nk; x++)
      if (ri->rs[x] % 4) k->vec = false;
    if (ri->cs != 1 || !ri->linear || (ri->mul - N) % 4) k->shift = false;
  }
  k->vec |= k->shift;
  int64_t span = N + (k->shift ? 3 : 0); /* the row's groups: up to 3 elements before it */
  for (k->G = 32; k->G < 1024 && (int64_t)k->G * ROWS_PER < span; k->G *= 2) {
  }
  k->PER = (int)((span + k->G - 1) / k->G);
  if (k->PER < 1) k->PER = 1;
  if (k->PER > ROWS_PER) k->PER = ROWS_PER; /* a long row: walked in chunks of G * PER */
  if (k->vec) k->PER = (k->PER + 3) / 4 * 4;
  k->chunks = (int)((span + (int64_t)k->G * k->PER - 1) / ((int64_t)k->G * k->PER));
  k->block = k->G >= 128 ? k->G : 128;
  lt_text t = {0};
  lathe_status_t st = gen(&t, g, k);
  if (st) {
    free(t.s);
    free(k);
    return st;
  }
  *out = k;
  *source = t.s;
  return NULL;
}

void lathe_cuda_rowk_free(lathe_cuda_rowk *k) { free(k); }

lathe_status_t lathe_cuda_rowk_launch(lathe_cuda_exec *ex, const lathe_cuda_rowk *k, lcuFunction f, lathe_tensor **outs,
                                      lathe_tensor *const *ins) {
  if (k->R == 0) return NULL;
  enum { MAXA = 2 + LATHE_MAX_RANK + ROWS_MAX_VALUES * (3 + LATHE_MAX_RANK) };
  void *args[MAXA];
  lcuDeviceptr ptrs[2 * ROWS_MAX_VALUES];
  int64_t R = k->R;
  int N = k->N, a = 0, p = 0, vec = k->vec;
  args[a++] = &R;
  args[a++] = &N;
  args[a++] = &vec;
  for (int x = 1; k->decompose && x < k->nk; x++) args[a++] = (void *)&k->kd[x];
  /* vector loads and stores where every pointer read or written by rows is 16-byte aligned */
  for (int o = 0; o < k->n_outputs; o++) {
    ptrs[p] = lathe_cuda_ptr(outs[o]);
    vec &= (ptrs[p] & 15) == 0;
    args[a++] = &ptrs[p++];
  }
  for (int i = 0; i < k->n_inputs; i++) {
    const row_input *ri = &k->in[i];
    ptrs[p] = lathe_cuda_ptr(ins[i]);
    if (ri->kind == IN_ELEM && !ri->iota) vec &= (ptrs[p] & 15) == 0;
    args[a++] = &ptrs[p++];
    if (ri->kind == IN_SCALAR) continue;
    if (ri->linear) args[a++] = (void *)&ri->mul;
    else
      for (int x = 0; x < k->nk; x++) args[a++] = (void *)&ri->rs[x];
    if (ri->kind == IN_ELEM) args[a++] = (void *)&ri->cs;
  }
  int64_t per_block = k->block / k->G, blocks = (R + per_block - 1) / per_block;
  if (blocks > INT32_MAX) return LATHE_UNIMPL("lathe:cuda: a fused row region of %lld rows", (long long)R);
  return lathe_cuda_launch(ex, f, (unsigned)blocks, (unsigned)k->block, 0, args);
}

/* ew.c -- elementwise ops and fusion regions on the GPU, generated from the one table of
 * elementwise semantics (src/graph/ew.def through lathe_ew_source): each op's element function
 * is the same expression the CPU kernels compile, over this file's CUDA prelude of the lt_*
 * helpers (the contract is in src/graph/ew_helpers.h). A kernel is generated per step or region
 * shape of the code -- ops, dtypes and how each input is read (whole, scalar, strided) -- never
 * per size: sizes and strides are arguments, so a new batch size reuses the kernel. */
#include <stdio.h>

#include "../graph/ew.h"
#include "cuda.h"
#include "exec.h"
#include "kernels/zkernels.h"

/* ---- the CUDA helper prelude (C++ overloads where C has generic macros) ---- */
static const char ew_prelude[] = LT_CUH_EW_PRELUDE;

const char *lathe_cuda_ew_prelude(void) { return ew_prelude; }

/* Storage (S) and compute (T) types per dtype, and the loads and stores between them. Sub-byte
 * integers never reach a kernel here (the executor widens them). */
static const char *storage_of(lathe_dtype dt) {
  switch (dt) {
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

static const char *compute_of(lathe_dtype dt) {
  return dt == LATHE_DTYPE_FLOAT16 || dt == LATHE_DTYPE_BFLOAT16 ? "float" : storage_of(dt);
}

/* The element function of node n (an op of ew.def) into t; its name into name. */
static lathe_status_t element_fn(lt_text *t, const lathe_node *n, char *name, size_t name_cap) {
  /* sub-byte dtypes as they are: their element functions compute widened, with the true BITS */
  lathe_dtype dt = n->in[n->op == LATHE_OP_WHERE ? 1 : 0]->shape.dtype, to = n->shape.dtype;
  size_t len = 0;
  lathe_status_t st = lathe_ew_source(n->op, dt, to, NULL, 0, &len);
  if (st && lathe_status_code_of(st) != LATHE_STATUS_RESOURCE_EXHAUSTED) return st;
  lathe_status_free(st);
  char *src = malloc(len + 1);
  if (!src) return LATHE_OOM("lathe:cuda: codegen");
  st = lathe_ew_source(n->op, dt, to, src, len + 1, NULL);
  if (!st) {
    /* "static inline <type> <name>(" : the name is the token before the parenthesis */
    const char *paren = strchr(src, '(');
    const char *start = paren;
    while (start > src && start[-1] != ' ') start--;
    snprintf(name, name_cap, "%.*s", (int)(paren - start), start);
    lt_put(t, "%s\n", src);
  }
  free(src);
  return st;
}

const char *lathe_cuda_ew_storage(lathe_dtype dt) { return storage_of(dt); }
const char *lathe_cuda_ew_compute(lathe_dtype dt) { return compute_of(dt); }
lathe_status_t lathe_cuda_ew_element_fn(lt_text *t, const lathe_node *n, char *name, size_t name_cap) {
  return element_fn(t, n, name, name_cap);
}

/* ---- kernels for a step or a region ----
 * Both are a list of members over one iteration space: a single elementwise op is a region of
 * one member whose operands are all inputs. The kernel of a plan's step is built when the plan
 * is compiled (exec.c): its source, its geometry and its function on every GPU, so that a launch
 * only fills in pointers. */
typedef struct {
  const lathe_node *node;
  int n_in;
  int in[LATHE_PMEMBER_MAX_IN]; /* >= 0 member, < 0 input -(k+1) */
  int out;                      /* output index, or -1 */
  bool identity;
} gen_member;

enum { EW_MAX_VALUES = 64, EW_VEC = 4 };

/* An input as the kernel reads it, over the collapsed iteration axes. */
typedef struct {
  lathe_dtype dtype;
  int access;                       /* LATHE_PACCESS_* after collapsing */
  int64_t strides[LATHE_MAX_RANK];  /* STRIDED */
} gen_input;

struct lathe_cuda_ewk {
  char *source;
  char name[32]; /* its kernel's (name_kernel) */
  int n_devices;
  lcuFunction *fns; /* per GPU of the backend, NULL until resolved */
  lathe_cuda_rowk *rows; /* a ROWS region's kernel: its geometry (the fields below unused) */
  lathe_cuda_redk *redc; /* a REDUCE region's fused kernel: its geometry (likewise) */
  int64_t n;
  int rank;                      /* collapsed iteration axes, >= 1 */
  int64_t dims[LATHE_MAX_RANK];
  bool idx32;                    /* every index and offset fits 31 bits */
  bool vec;                      /* groups of EW_VEC elements when the pointers allow it */
  int n_inputs, n_outputs;
  gen_input in[EW_MAX_VALUES];
  int in_bytes[EW_MAX_VALUES], out_bytes[EW_MAX_VALUES];
  int sm_count;
};

/* Collapses the iteration space: size-1 axes go; neighbours merge where every strided input
 * walks them as one axis; an input whose strides are all 0 is a scalar, one that walks the
 * collapsed space in row-major order is read whole. Twice: a reclassified input frees axes. */
static void collapse(lathe_cuda_ewk *k, const lathe_shape *it) {
  int r = 0;
  int64_t dims[LATHE_MAX_RANK];
  int64_t st[EW_MAX_VALUES][LATHE_MAX_RANK];
  for (int a = 0; a < it->rank; a++) {
    if (it->dims[a] == 1) continue;
    dims[r] = it->dims[a];
    for (int i = 0; i < k->n_inputs; i++) st[i][r] = k->in[i].strides[a];
    r++;
  }
  for (int pass = 0; pass < 2; pass++) {
    int w = r ? 1 : 0; /* merged axes, innermost kept last: walk from the inside out */
    int64_t md[LATHE_MAX_RANK], ms[EW_MAX_VALUES][LATHE_MAX_RANK];
    if (r) {
      md[LATHE_MAX_RANK - 1] = dims[r - 1];
      for (int i = 0; i < k->n_inputs; i++) ms[i][LATHE_MAX_RANK - 1] = st[i][r - 1];
    }
    for (int a = r - 2; a >= 0; a--) {
      int top = LATHE_MAX_RANK - w;
      bool merge = true;
      for (int i = 0; i < k->n_inputs && merge; i++)
        if (k->in[i].access == LATHE_PACCESS_STRIDED && st[i][a] != ms[i][top] * md[top]) merge = false;
      if (merge) {
        md[top] *= dims[a];
      } else {
        md[top - 1] = dims[a];
        for (int i = 0; i < k->n_inputs; i++) ms[i][top - 1] = st[i][a];
        w++;
      }
    }
    r = w;
    for (int a = 0; a < r; a++) {
      dims[a] = md[LATHE_MAX_RANK - r + a];
      for (int i = 0; i < k->n_inputs; i++) st[i][a] = ms[i][LATHE_MAX_RANK - r + a];
    }
    for (int i = 0; i < k->n_inputs; i++) {
      if (k->in[i].access != LATHE_PACCESS_STRIDED) continue;
      bool zero = true, rowmajor = true;
      int64_t acc = 1;
      for (int a = r - 1; a >= 0; a--) {
        zero &= st[i][a] == 0;
        rowmajor &= st[i][a] == acc;
        acc *= dims[a];
      }
      if (zero) k->in[i].access = LATHE_PACCESS_SCALAR;
      else if (rowmajor) k->in[i].access = LATHE_PACCESS_FULL;
    }
  }
  if (r == 0) dims[r++] = 1;
  k->rank = r;
  k->n = 1;
  for (int a = 0; a < r; a++) k->dims[a] = dims[a], k->n *= dims[a];
  k->idx32 = k->n <= INT32_MAX;
  for (int i = 0; i < k->n_inputs; i++) {
    if (k->in[i].access != LATHE_PACCESS_STRIDED) continue;
    int64_t top = 0;
    for (int a = 0; a < r; a++) {
      k->in[i].strides[a] = st[i][a];
      if (st[i][a] < 0 || st[i][a] > INT32_MAX) k->idx32 = false;
      else top += (dims[a] - 1) * st[i][a];
      if (top > INT32_MAX) k->idx32 = false;
    }
  }
  /* groups of EW_VEC: a flat space (its tail goes one by one), or rows that split into whole
   * groups where each strided input reads a group as one element or as EW_VEC in a row */
  k->vec = true;
  for (int i = 0; i < k->n_inputs; i++) {
    if (k->in[i].access != LATHE_PACCESS_STRIDED) continue;
    int64_t inner = k->in[i].strides[r - 1];
    if (r == 1 || dims[r - 1] % EW_VEC || (inner != 0 && inner != 1)) k->vec = false;
    for (int a = 0; a < r - 1 && inner == 1; a++)
      if (k->in[i].strides[a] % EW_VEC) k->vec = false;
  }
}

lt_div32_h lathe_cuda_div32(uint32_t d) {
  uint32_t s = 0;
  while (((uint64_t)1 << s) < d) s++;
  lt_div32_h q = {d, (uint32_t)((((uint64_t)1 << 32) * (((uint64_t)1 << s) - d)) / d + 1), s};
  return q;
}

uint32_t lathe_cuda_udiv_host(uint32_t n, uint32_t d) { /* the device's arithmetic, for tests */
  lt_div32_h q = lathe_cuda_div32(d);
  uint32_t t = (uint32_t)(((uint64_t)n * q.m) >> 32);
  return (t + n) >> q.s;
}

static const char *conv_in(char *buf, size_t cap, lathe_dtype dt, const char *v) {
  if (dt == LATHE_DTYPE_FLOAT16) snprintf(buf, cap, "lt_f16_to_f32(%s)", v);
  else if (dt == LATHE_DTYPE_BFLOAT16) snprintf(buf, cap, "lt_bf16_to_f32(%s)", v);
  else snprintf(buf, cap, "%s", v);
  return buf;
}

static const char *conv_out(char *buf, size_t cap, lathe_dtype dt, const char *v) {
  if (dt == LATHE_DTYPE_FLOAT16) snprintf(buf, cap, "lt_f32_to_f16(%s)", v);
  else if (dt == LATHE_DTYPE_BFLOAT16) snprintf(buf, cap, "lt_f32_to_bf16(%s)", v);
  else snprintf(buf, cap, "%s", v);
  return buf;
}

const char *lathe_cuda_ew_load(char *buf, size_t cap, lathe_dtype dt, const char *v) { return conv_in(buf, cap, dt, v); }
const char *lathe_cuda_ew_store(char *buf, size_t cap, lathe_dtype dt, const char *v) { return conv_out(buf, cap, dt, v); }

/* The members' evaluation over loaded inputs x<k>; each escaping member's value goes to
 * `store` with %d the output index and %s the value (a printf format). */
static void gen_members(lt_text *t, const gen_member *m, int n_members, char names[][96], const char *ind,
                        const char *store_fmt) {
  char v[32], c[96];
  for (int i = 0; i < n_members; i++) {
    if (m[i].identity) {
      int s = m[i].in[0];
      if (s >= 0) lt_put(t, "%sauto v%d = v%d;\n", ind, i, s);
      else lt_put(t, "%sauto v%d = x%d;\n", ind, i, -s - 1);
    } else {
      lt_put(t, "%sauto v%d = %s(", ind, i, names[i]);
      for (int k = 0; k < m[i].n_in; k++) {
        int s = m[i].in[k];
        if (s >= 0) lt_put(t, "%sv%d", k ? ", " : "", s);
        else lt_put(t, "%sx%d", k ? ", " : "", -s - 1);
      }
      lt_put(t, ");\n");
      /* a Float16/BFloat16 value is stored between ops when unfused: round it alike */
      lathe_dtype od = m[i].node->shape.dtype;
      if (od == LATHE_DTYPE_FLOAT16) lt_put(t, "%sv%d = lt_f16_to_f32(lt_f32_to_f16(v%d));\n", ind, i, i);
      if (od == LATHE_DTYPE_BFLOAT16) lt_put(t, "%sv%d = lt_bf16_to_f32(lt_f32_to_bf16(v%d));\n", ind, i, i);
    }
    if (m[i].out >= 0) {
      snprintf(v, sizeof v, "v%d", i);
      lt_put(t, "%s", ind);
      lt_put(t, store_fmt, m[i].out, conv_out(c, sizeof c, lathe_dtype_widened(m[i].node->shape.dtype), v));
      lt_put(t, "\n");
    }
  }
}

/* Row-major indices of element e over the collapsed axes, then each strided input's offset. */
static void gen_offsets(lt_text *t, const lathe_cuda_ewk *k, const char *ix, const char *ind) {
  bool any = false;
  for (int i = 0; i < k->n_inputs; i++) any |= k->in[i].access == LATHE_PACCESS_STRIDED;
  if (!any) return;
  lt_put(t, "%s%s r_ = e;\n", ind, ix);
  for (int a = k->rank - 1; a >= 1; a--) {
    if (k->idx32) lt_put(t, "%s%s q%d_ = lt_udiv(r_, q%d), ax%d_ = r_ - q%d_ * q%d.d; r_ = q%d_;\n", ind, ix, a, a, a, a, a, a);
    else lt_put(t, "%s%s q%d_ = r_ / d%d, ax%d_ = r_ - q%d_ * d%d; r_ = q%d_;\n", ind, ix, a, a, a, a, a, a);
  }
  lt_put(t, "%s%s ax0_ = r_;\n", ind, ix);
  for (int i = 0; i < k->n_inputs; i++) {
    if (k->in[i].access != LATHE_PACCESS_STRIDED) continue;
    lt_put(t, "%s%s o%d_ = ", ind, ix, i);
    for (int a = 0; a < k->rank; a++) lt_put(t, "%sax%d_ * s%d_%d", a ? " + " : "", a, i, a);
    lt_put(t, ";\n");
  }
}

/* Generates the kernel `name` computing members over the inputs, writing the outputs.
 * Arguments: (IX n, int vec, divisors of axes 1.. (lt_div32, or int64_t sizes), S *out..,
 * then per input const S *in and, when strided, its strides IX s<k>_<axis>...). */
/* The element functions of the members (one per op and dtypes) into t, their names into names. */
static lathe_status_t member_fns(lt_text *t, const gen_member *m, int n_members, char names[][96]) {
  for (int i = 0; i < n_members; i++) {
    names[i][0] = 0;
    if (m[i].identity) continue;
    bool dup = false;
    for (int j = 0; j < i && !dup; j++)
      if (!m[j].identity && m[j].node->op == m[i].node->op && m[j].node->shape.dtype == m[i].node->shape.dtype &&
          m[j].node->in[m[j].node->op == LATHE_OP_WHERE ? 1 : 0]->shape.dtype ==
              m[i].node->in[m[i].node->op == LATHE_OP_WHERE ? 1 : 0]->shape.dtype) {
        memcpy(names[i], names[j], sizeof names[i]);
        dup = true;
      }
    if (!dup) LATHE_RETURN_IF_ERROR(element_fn(t, m[i].node, names[i], sizeof names[i]));
  }
  return NULL;
}

static lathe_status_t gen_kernel(lt_text *t, const gen_member *m, int n_members, const lathe_cuda_ewk *k, const char *name) {
  char names[64][96];
  if (n_members > 64) return LATHE_UNIMPL("lathe:cuda: a fused region of %d members", n_members);
  LATHE_RETURN_IF_ERROR(member_fns(t, m, n_members, names));
  const char *ix = k->idx32 ? "uint32_t" : "int64_t";
  lathe_dtype odt[EW_MAX_VALUES];
  for (int o = 0; o < k->n_outputs; o++) odt[o] = LATHE_DTYPE_INVALID;
  for (int i = 0; i < n_members; i++)
    if (m[i].out >= 0) odt[m[i].out] = lathe_dtype_widened(m[i].node->shape.dtype);
  lt_put(t, "extern \"C\" __global__ void %s(%s n, int vec", name, ix);
  for (int a = 1; a < k->rank; a++) lt_put(t, k->idx32 ? ", lt_div32 q%d" : ", int64_t d%d", a);
  for (int o = 0; o < k->n_outputs; o++) lt_put(t, ", %s *o%d", storage_of(odt[o]), o);
  for (int i = 0; i < k->n_inputs; i++) {
    lt_put(t, ", const %s *i%d", storage_of(k->in[i].dtype), i);
    for (int a = 0; k->in[i].access == LATHE_PACCESS_STRIDED && a < k->rank; a++) lt_put(t, ", %s s%d_%d", ix, i, a);
  }
  lt_put(t, ") {\n");
  lt_put(t, "  %s step = (%s)gridDim.x * blockDim.x, first = (%s)blockIdx.x * blockDim.x + threadIdx.x, done = 0;\n", ix, ix, ix);
  char c[160], p[48];
  if (k->vec) { /* groups of EW_VEC consecutive elements, loaded and stored as vectors */
    lt_put(t, "  if (vec) {\n    done = n / %d * %d;\n    for (%s e = first * %d; e < done; e += step * %d) {\n", EW_VEC, EW_VEC, ix,
           EW_VEC, EW_VEC);
    gen_offsets(t, k, ix, "      ");
    for (int i = 0; i < k->n_inputs; i++) {
      const char *S = storage_of(k->in[i].dtype);
      int acc = k->in[i].access;
      bool row = acc == LATHE_PACCESS_FULL || (acc == LATHE_PACCESS_STRIDED && k->in[i].strides[k->rank - 1] == 1);
      const char *at = acc == LATHE_PACCESS_FULL ? "e" : acc == LATHE_PACCESS_SCALAR ? "0" : NULL;
      snprintf(p, sizeof p, "o%d_", i);
      if (row) lt_put(t, "      lt_v4<%s> a%d = *(const lt_v4<%s> *)(i%d + %s);\n", S, i, S, i, at ? at : p);
      else lt_put(t, "      %s a%d = i%d[%s];\n", S, i, i, at ? at : p);
    }
    for (int o = 0; o < k->n_outputs; o++) lt_put(t, "      lt_v4<%s> r%d;\n", storage_of(odt[o]), o);
    lt_put(t, "#pragma unroll\n      for (int j = 0; j < %d; j++) {\n", EW_VEC);
    for (int i = 0; i < k->n_inputs; i++) {
      int acc = k->in[i].access;
      bool row = acc == LATHE_PACCESS_FULL || (acc == LATHE_PACCESS_STRIDED && k->in[i].strides[k->rank - 1] == 1);
      snprintf(p, sizeof p, row ? "a%d.v[j]" : "a%d", i);
      lt_put(t, "        %s x%d = %s;\n", compute_of(k->in[i].dtype), i, conv_in(c, sizeof c, k->in[i].dtype, p));
    }
    gen_members(t, m, n_members, names, "        ", "r%d.v[j] = %s;");
    lt_put(t, "      }\n");
    for (int o = 0; o < k->n_outputs; o++) lt_put(t, "      *(lt_v4<%s> *)(o%d + e) = r%d;\n", storage_of(odt[o]), o, o);
    lt_put(t, "    }\n  }\n");
  }
  /* one element at a time: the whole space, or the tail after the groups */
  lt_put(t, "  for (%s e = done + first; e < n; e += step) {\n", ix);
  gen_offsets(t, k, ix, "    ");
  for (int i = 0; i < k->n_inputs; i++) {
    int acc = k->in[i].access;
    snprintf(p, sizeof p, acc == LATHE_PACCESS_FULL ? "i%d[e]" : acc == LATHE_PACCESS_SCALAR ? "i%d[0]" : "i%d[o%d_]", i, i);
    lt_put(t, "    %s x%d = %s;\n", compute_of(k->in[i].dtype), i, conv_in(c, sizeof c, k->in[i].dtype, p));
  }
  gen_members(t, m, n_members, names, "    ", "o%d[e] = %s;");
  lt_put(t, "  }\n}\n");
  return t->oom ? LATHE_OOM("lathe:cuda: codegen") : NULL;
}

/* A generated kernel's name: lt_fused_ and a hash of its text, written over the text's
 * LATHE_CUDA_EWK_ANON (the hash taken with it there), so that kernels batched into one program
 * (lathe_cuda_kernels_batch) never share a name and a text always has the same one. */
static lathe_status_t name_kernel(lathe_cuda_ewk *k) {
  char *at = strstr(k->source, LATHE_CUDA_EWK_ANON);
  if (!at) return lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: a generated kernel without its name");
  uint64_t h = 1469598103934665603ull;
  for (const unsigned char *c = (const unsigned char *)k->source; *c; c++) h = (h ^ *c) * 1099511628211ull;
  snprintf(k->name, sizeof k->name, "lt_fused_%016llx", (unsigned long long)h);
  memcpy(at, k->name, strlen(LATHE_CUDA_EWK_ANON));
  return NULL;
}

/* The kernel of members over inputs (dtype, access, strides over `it`), its source made, its
 * functions not yet resolved. */
static lathe_status_t ewk_new(lathe_cuda *cu, const gen_member *m, int n_members, const gen_input *in, int n_inputs,
                              int n_outputs, const lathe_shape *it, lathe_cuda_ewk **out) {
  if (n_inputs > EW_MAX_VALUES || n_outputs > EW_MAX_VALUES)
    return LATHE_UNIMPL("lathe:cuda: a fused region with %d values", n_inputs + n_outputs);
  lathe_cuda_ewk *k = calloc(1, sizeof *k);
  if (!k) return LATHE_OOM("lathe:cuda: codegen");
  k->n_inputs = n_inputs;
  k->n_outputs = n_outputs;
  k->n_devices = cu->n_devices;
  k->sm_count = cu->n_devices && cu->devs[0].sm_count > 0 ? cu->devs[0].sm_count : 80;
  for (int i = 0; i < n_inputs; i++) {
    k->in[i] = in[i];
    k->in_bytes[i] = lathe_dtype_bits(in[i].dtype) / 8;
  }
  for (int i = 0; i < n_members; i++)
    if (m[i].out >= 0) k->out_bytes[m[i].out] = lathe_dtype_bits(lathe_dtype_widened(m[i].node->shape.dtype)) / 8;
  collapse(k, it);
  lt_text t = {0};
  lt_put(&t, "%s", ew_prelude);
  lathe_status_t st = gen_kernel(&t, m, n_members, k, LATHE_CUDA_EWK_ANON);
  k->source = t.s;
  k->fns = calloc((size_t)k->n_devices + 1, sizeof *k->fns);
  if (!st && !k->fns) st = LATHE_OOM("lathe:cuda: codegen");
  if (!st) st = name_kernel(k);
  if (st) {
    lathe_cuda_ewk_free(k);
    return st;
  }
  *out = k;
  return NULL;
}

void lathe_cuda_ewk_free(lathe_cuda_ewk *k) {
  if (!k) return;
  lathe_cuda_rowk_free(k->rows);
  lathe_cuda_redk_free(k->redc);
  free(k->source);
  free(k->fns);
  free(k);
}

const char *lathe_cuda_ewk_source(const lathe_cuda_ewk *k) { return k->source; }
const char *lathe_cuda_ewk_name(const lathe_cuda_ewk *k) { return k->name; }

void lathe_cuda_ewk_describe(const lathe_cuda_ewk *k, int *rank, int64_t *dims, bool *idx32, bool *vec, int *access) {
  *rank = k->rank;
  for (int a = 0; a < k->rank; a++) dims[a] = k->dims[a];
  *idx32 = k->idx32;
  *vec = k->vec;
  for (int i = 0; i < k->n_inputs; i++) access[i] = k->in[i].access;
}

lathe_status_t lathe_cuda_ewk_resolve(lathe_cuda *cu, lathe_cuda_ewk *k, int device) {
  if (k->fns[device]) return NULL;
  return lathe_cuda_kernel(&cu->devs[device], k->source, k->name, &k->fns[device]);
}

lathe_status_t lathe_cuda_ewk_resolve_batch(lathe_cuda *cu, lathe_cuda_ewk *const *ks, int n, int device) {
  const char **src = malloc(sizeof *src * (size_t)(n + 1)), **names = malloc(sizeof *names * (size_t)(n + 1));
  lcuFunction *fns = malloc(sizeof *fns * (size_t)(n + 1));
  lathe_cuda_ewk **todo = malloc(sizeof *todo * (size_t)(n + 1));
  lathe_status_t st = src && names && fns && todo ? NULL : LATHE_OOM("lathe:cuda: compile");
  int m = 0;
  for (int i = 0; !st && i < n; i++)
    if (!ks[i]->fns[device]) {
      todo[m] = ks[i];
      src[m] = ks[i]->source;
      names[m++] = ks[i]->name;
    }
  /* every generated kernel, a ROWS one too, starts with ew_prelude: kept once in the program */
  if (!st && m) st = lathe_cuda_kernels_batch(&cu->devs[device], m, src, names, strlen(ew_prelude), fns);
  for (int i = 0; !st && i < m; i++) todo[i]->fns[device] = fns[i];
  free(src);
  free(names);
  free(fns);
  free(todo);
  return st;
}

lathe_status_t lathe_cuda_ewk_launch(lathe_cuda_exec *ex, lathe_cuda_ewk *k, lathe_tensor **outs, lathe_tensor *const *ins) {
  if (k->redc) return lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: a fused reduction launched as a loop");
  if (k->n == 0 && !k->rows) return NULL;
  cuda_dev *d = lathe_cuda_exec_dev(ex);
  if (!k->fns[d->ordinal]) LATHE_RETURN_IF_ERROR(lathe_cuda_ewk_resolve(d->cu, k, d->ordinal));
  if (k->rows) return lathe_cuda_rowk_launch(ex, k->rows, k->fns[d->ordinal], outs, ins);
  enum { MAXA = 2 + LATHE_MAX_RANK + EW_MAX_VALUES * (1 + LATHE_MAX_RANK) + EW_MAX_VALUES };
  void *args[MAXA];
  lcuDeviceptr ptrs[2 * EW_MAX_VALUES];
  lt_div32_h q[LATHE_MAX_RANK];
  uint32_t s32[EW_MAX_VALUES][LATHE_MAX_RANK];
  uint32_t n32 = (uint32_t)k->n;
  int a = 0, p = 0, vec = k->vec;
  args[a++] = k->idx32 ? (void *)&n32 : (void *)&k->n;
  args[a++] = &vec;
  for (int x = 1; x < k->rank; x++) {
    if (k->idx32) {
      q[x] = lathe_cuda_div32((uint32_t)k->dims[x]);
      args[a++] = &q[x];
    } else {
      args[a++] = &k->dims[x];
    }
  }
  for (int o = 0; o < k->n_outputs; o++) {
    ptrs[p] = lathe_cuda_ptr(outs[o]);
    vec &= lathe_cuda_v4_aligned(ptrs[p], (size_t)k->out_bytes[o]);
    args[a++] = &ptrs[p++];
  }
  for (int i = 0; i < k->n_inputs; i++) {
    ptrs[p] = lathe_cuda_ptr(ins[i]);
    if (k->in[i].access == LATHE_PACCESS_FULL || k->in[i].access == LATHE_PACCESS_STRIDED)
      vec &= lathe_cuda_v4_aligned(ptrs[p], (size_t)k->in_bytes[i]);
    args[a++] = &ptrs[p++];
    for (int x = 0; k->in[i].access == LATHE_PACCESS_STRIDED && x < k->rank; x++) {
      s32[i][x] = (uint32_t)k->in[i].strides[x];
      args[a++] = k->idx32 ? (void *)&s32[i][x] : (void *)&k->in[i].strides[x];
    }
  }
  /* a grid-stride loop over a grid that fills the SMs (8 blocks of 256 each), smaller when the
   * work is */
  int64_t items = vec ? k->n / EW_VEC : k->n, blocks = (items + 255) / 256, cap = (int64_t)k->sm_count * 8;
  if (blocks > cap) blocks = cap;
  if (blocks < 1) blocks = 1;
  return lathe_cuda_launch(ex, k->fns[d->ordinal], (unsigned)blocks, 256, 0, args);
}

/* ---- single elementwise ops ---- */
static bool ew_supported(lathe_op op, lathe_dtype dt) {
  if (op == LATHE_OP_BITCAST) return lathe_dtype_is_valid(dt);
  if (!storage_of(dt)) return false;
  if (op == LATHE_OP_CONVERT_DTYPE) { /* every target the CPU converts to */
    for (int t = 1; t < LATHE_DTYPE_LIMIT; t++)
      if (lathe_dtype_is_valid((lathe_dtype)t) && lathe_ew_defined(op, dt, (lathe_dtype)t)) return true;
    return false;
  }
  return lathe_ew_defined(op, dt, dt);
}

bool lathe_cuda_ewk_step_kind(const lathe_node *n) {
  switch (lathe_op_kind_of(n->op)) {
    case LATHE_KIND_UNARY:
    case LATHE_KIND_BINARY:
    case LATHE_KIND_COMPARE:
    case LATHE_KIND_SELECT:
    case LATHE_KIND_CONVERT: return n->op != LATHE_OP_BITCAST;
    default: return false;
  }
}

lathe_status_t lathe_cuda_ewk_step(lathe_cuda *cu, const lathe_node *n, const lathe_shape *const *in, const lathe_shape *out,
                                   lathe_cuda_ewk **k) {
  gen_member m = {.node = n, .n_in = n->n_operands, .out = 0};
  gen_input gi[LATHE_PMEMBER_MAX_IN];
  memset(gi, 0, sizeof gi);
  for (int i = 0; i < n->n_operands; i++) {
    const lathe_shape *s = in[i];
    m.in[i] = -(i + 1);
    gi[i].dtype = lathe_dtype_widened(s->dtype);
    if (s->rank == 0) {
      gi[i].access = LATHE_PACCESS_SCALAR;
    } else if (lathe_shape_size(s) == lathe_shape_size(out) && s->rank == out->rank) {
      gi[i].access = LATHE_PACCESS_FULL;
    } else { /* implicit size-1 broadcasting */
      gi[i].access = LATHE_PACCESS_STRIDED;
      int64_t acc = 1;
      for (int a = s->rank - 1; a >= 0; a--) {
        gi[i].strides[a] = s->dims[a] == 1 && out->dims[a] != 1 ? 0 : acc;
        acc *= s->dims[a];
      }
    }
  }
  return ewk_new(cu, &m, 1, gi, n->n_operands, 1, out, k);
}

static lathe_status_t run_ew(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  if (n->op == LATHE_OP_BITCAST) return lathe_cuda_copy(ex, in[0], out[0]); /* the same bytes, another shape */
  const lathe_shape *shapes[LATHE_PMEMBER_MAX_IN];
  for (int i = 0; i < n->n_operands; i++) shapes[i] = &in[i]->shape;
  lathe_cuda_ewk *k;
  LATHE_RETURN_IF_ERROR(lathe_cuda_ewk_step(lathe_cuda_exec_dev(ex)->cu, n, shapes, &out[0]->shape, &k));
  lathe_status_t st = lathe_cuda_ewk_launch(ex, k, out, in);
  lathe_cuda_ewk_free(k);
  return st;
}

#define EW_FAMILY(K)                                                                                          \
  bool lathe_cuda_supports_##K(lathe_op op, lathe_dtype dtype) { return ew_supported(op, dtype); }            \
  lathe_status_t lathe_cuda_run_##K(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,         \
                                    lathe_tensor **out) {                                                     \
    return run_ew(ex, n, in, out);                                                                            \
  }
EW_FAMILY(unary)
EW_FAMILY(binary)
EW_FAMILY(compare)
EW_FAMILY(select)
EW_FAMILY(convert)

/* ---- fusion regions ---- */
/* Region g's members as the generator's, member i escaping as output out[i] (-1: not; out NULL:
 * the escaping ones numbered in order); false past 64 members. */
static bool region_members(const lathe_pregion *g, const int *out, gen_member *m) {
  if (g->n_members > 64) return false;
  int n_out = 0;
  for (int i = 0; i < g->n_members; i++) {
    const lathe_pmember *pm = &g->members[i];
    m[i] = (gen_member){.node = pm->node, .n_in = pm->n_in, .identity = pm->identity, .out = -1};
    for (int k = 0; k < pm->n_in; k++) m[i].in[k] = pm->in[k];
    if (out) m[i].out = out[i];
    else if (pm->out_slot >= 0) m[i].out = n_out++;
  }
  return true;
}

lathe_status_t lathe_cuda_ew_member_fns(lt_text *t, const lathe_pregion *g, char names[][96]) {
  gen_member m[64];
  if (!region_members(g, NULL, m)) return LATHE_UNIMPL("lathe:cuda: a fused region of %d members", g->n_members);
  return member_fns(t, m, g->n_members, names);
}

void lathe_cuda_ew_members(lt_text *t, const lathe_pregion *g, char names[][96], const int *out, const char *ind,
                           const char *store_fmt) {
  gen_member m[64];
  if (region_members(g, out, m)) gen_members(t, m, g->n_members, names, ind, store_fmt);
}

static unsigned rows_flags(const lathe_cuda *cu) {
  return (cu->rows_shift ? LATHE_CUDA_ROWS_SHIFT : 0u) | (cu->rows_iota ? LATHE_CUDA_ROWS_IOTA : 0u);
}

lathe_status_t lathe_cuda_ewk_region(lathe_cuda *cu, const lathe_pfunc *pf, const lathe_pregion *g, lathe_cuda_ewk **k) {
  *k = NULL;
  if (g->kind == LATHE_PREGION_REDUCE && !cu->reduce_fuse) return NULL;
  if (g->kind == LATHE_PREGION_ROWS || g->kind == LATHE_PREGION_REDUCE) {
    lathe_cuda_ewk *r = calloc(1, sizeof *r);
    if (!r) return LATHE_OOM("lathe:cuda: codegen");
    r->n_devices = cu->n_devices;
    r->fns = calloc((size_t)r->n_devices + 1, sizeof *r->fns);
    lathe_status_t st = !r->fns                          ? LATHE_OOM("lathe:cuda: codegen")
                        : g->kind == LATHE_PREGION_ROWS ? lathe_cuda_rowk_new(pf, g, rows_flags(cu), &r->rows, &r->source)
                                                        : lathe_cuda_redk_new(pf, g, &r->redc, &r->source);
    if (!st && !r->source) { /* a REDUCE region of another form: its parts run as they are */
      lathe_cuda_ewk_free(r);
      return NULL;
    }
    if (!st) st = name_kernel(r);
    if (st) {
      lathe_cuda_ewk_free(r);
      return st;
    }
    *k = r;
    return NULL;
  }
  gen_member m[64];
  gen_input gi[EW_MAX_VALUES];
  if (g->n_inputs > EW_MAX_VALUES || !region_members(g, NULL, m))
    return LATHE_UNIMPL("lathe:cuda: a fused region of %d members", g->n_members);
  int n_out = 0;
  for (int i = 0; i < g->n_members; i++) n_out += g->members[i].out_slot >= 0;
  memset(gi, 0, sizeof gi);
  for (int i = 0; i < g->n_inputs; i++) {
    gi[i].dtype = lathe_dtype_widened(pf->slots[g->inputs[i].slot].shape.dtype);
    gi[i].access = g->inputs[i].access;
    if (gi[i].access == LATHE_PACCESS_FULL) { /* as strides, so that collapsing treats all alike */
      gi[i].access = LATHE_PACCESS_STRIDED;
      int64_t acc = 1;
      for (int a = g->shape.rank - 1; a >= 0; a--) gi[i].strides[a] = acc, acc *= g->shape.dims[a];
    } else if (gi[i].access == LATHE_PACCESS_STRIDED) {
      for (int a = 0; a < g->shape.rank; a++) gi[i].strides[a] = g->inputs[i].strides[a];
    }
  }
  return ewk_new(cu, m, g->n_members, gi, g->n_inputs, n_out, &g->shape, k);
}

/* Region g's inputs, as computed by the steps before it. */
static lathe_status_t region_inputs(const lathe_pregion *g, lathe_tensor **vals, lathe_tensor **ins) {
  for (int i = 0; i < g->n_inputs; i++)
    if (!(ins[i] = vals[g->inputs[i].slot]))
      return lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: a region input is not computed");
  return NULL;
}

lathe_status_t lathe_cuda_region_loop(lathe_cuda_exec *ex, const lathe_pfunc *pf, const lathe_pregion *g, lathe_cuda_ewk *bound,
                                      int pos, bool in_place, lathe_tensor **vals,
                                      lathe_status_t (*result)(lathe_cuda_exec *, int slot, lathe_tensor **)) {
  lathe_tensor *ins[EW_MAX_VALUES], *outs[EW_MAX_VALUES];
  lathe_cuda_ewk *k = bound;
  if (!k) LATHE_RETURN_IF_ERROR(lathe_cuda_ewk_region(lathe_cuda_exec_dev(ex)->cu, pf, g, &k));
  lathe_status_t err = region_inputs(g, vals, ins);
  int made = 0;
  for (int i = 0; i < g->n_members && !err; i++)
    if (g->members[i].out_slot >= 0) {
      outs[made] = in_place ? lathe_exec_loop_in_place(&ex->x, pos, g, i, ins, outs, made) : NULL;
      if (!outs[made]) err = result(ex, g->members[i].out_slot, &outs[made]);
      if (!err) made++;
    }
  if (!err) err = lathe_cuda_ewk_launch(ex, k, outs, ins);
  int n_out = made;
  made = 0;
  for (int i = 0; i < g->n_members; i++) {
    if (g->members[i].out_slot < 0) continue;
    if (!err && !vals[g->members[i].out_slot]) vals[g->members[i].out_slot] = outs[made];
    else if (made < n_out && outs[made]) lathe_tensor_release(outs[made]);
    made++;
  }
  if (k != bound) lathe_cuda_ewk_free(k);
  return err;
}

lathe_status_t lathe_cuda_region_reduce(lathe_cuda_exec *ex, const lathe_pfunc *pf, const lathe_pregion *g, lathe_cuda_ewk *bound,
                                        lathe_tensor **vals, lathe_status_t (*result)(lathe_cuda_exec *, int slot, lathe_tensor **)) {
  const lathe_pregion *pro = &pf->regions[g->prologue];
  lathe_tensor *ins[EW_MAX_VALUES], *outs[EW_MAX_VALUES], *red = NULL;
  const int *slots;
  int n_out = lathe_cuda_redk_outputs(bound->redc, &slots), made = 0;
  cuda_dev *d = lathe_cuda_exec_dev(ex);
  lathe_status_t err = bound->fns[d->ordinal] ? NULL : lathe_cuda_ewk_resolve(d->cu, bound, d->ordinal);
  if (!err) err = region_inputs(pro, vals, ins);
  while (!err && made < n_out)
    if (!(err = result(ex, slots[made], &outs[made]))) made++;
  if (!err) err = result(ex, g->reduce_out, &red);
  if (!err) err = lathe_cuda_redk_launch(ex, bound->redc, bound->fns[d->ordinal], outs, ins, red);
  for (int o = 0; o < made; o++) {
    if (!err && !vals[slots[o]]) vals[slots[o]] = outs[o];
    else lathe_tensor_release(outs[o]);
  }
  if (!err && !vals[g->reduce_out]) vals[g->reduce_out] = red;
  else if (red) lathe_tensor_release(red);
  return err;
}

/* ---- sources for the NVRTC test: one kernel per (op, dtype) that ew.def defines, grouped in
 * namespaces so that one program holds every dtype of an op ---- */
static void each_ew_source(lathe_cuda_source_fn fn, void *ctx, lathe_op_kind kind) {
  for (int op = 0; op < LATHE_OP_COUNT; op++) {
    if (lathe_op_kind_of((lathe_op)op) != kind || op == LATHE_OP_BITCAST) continue;
    lt_text t = {0};
    lt_put(&t, "%s", ew_prelude);
    int count = 0;
    for (int d = 1; d < LATHE_DTYPE_LIMIT; d++) {
      lathe_dtype dt = (lathe_dtype)d;
      if (!lathe_dtype_is_valid(dt) || !storage_of(dt)) continue;
      for (int o = 1; o < LATHE_DTYPE_LIMIT; o++) {
        lathe_dtype to = (lathe_dtype)o;
        if (op != LATHE_OP_CONVERT_DTYPE && to != dt) continue;
        if (!lathe_dtype_is_valid(to) || !storage_of(to) || !lathe_ew_defined((lathe_op)op, dt, to)) continue;
        /* a node for the generator: operands of dt (Where: a Bool condition), result of the
         * rule's dtype as the builder would infer it */
        lathe_node x, c, node;
        lathe_node *ins[3] = {&x, &x, &x};
        memset(&x, 0, sizeof x);
        memset(&c, 0, sizeof c);
        memset(&node, 0, sizeof node);
        x.shape.dtype = dt;
        c.shape.dtype = LATHE_DTYPE_BOOL;
        if (op == LATHE_OP_WHERE) ins[0] = &c;
        node.op = (lathe_op)op;
        node.in = ins;
        node.n_operands = node.n_in = lathe_op_kind_of((lathe_op)op) == LATHE_KIND_SELECT ? 3
                                      : (kind == LATHE_KIND_BINARY || kind == LATHE_KIND_COMPARE) ? 2 : 1;
        lathe_dtype od = to;
        if (kind == LATHE_KIND_COMPARE) od = LATHE_DTYPE_BOOL;
        else if ((op == LATHE_OP_ABS || op == LATHE_OP_REAL || op == LATHE_OP_IMAG) && lathe_dtype_is_complex(dt))
          od = lathe_dtype_real_of(dt);
        else if (op == LATHE_OP_IS_FINITE || op == LATHE_OP_IS_NAN) od = LATHE_DTYPE_BOOL;
        else if (op == LATHE_OP_COMPLEX) od = dt == LATHE_DTYPE_FLOAT64 ? LATHE_DTYPE_COMPLEX128 : LATHE_DTYPE_COMPLEX64;
        node.shape.dtype = od;
        node.shape.rank = 1;
        gen_member m = {.node = &node, .n_in = node.n_operands, .out = 0, .in = {-1, -2, -3}};
        /* every way an input is read: whole, a row broadcast (vector groups), a scalar; 31-bit
         * and 64-bit indices in turn */
        static lathe_cuda_ewk k;
        memset(&k, 0, sizeof k);
        k.rank = 2;
        k.idx32 = count % 2 == 0;
        k.vec = true;
        k.n_inputs = node.n_operands;
        k.n_outputs = 1;
        k.in[0] = (gen_input){.dtype = ins[0]->shape.dtype, .access = LATHE_PACCESS_FULL};
        k.in[1] = (gen_input){.dtype = dt, .access = LATHE_PACCESS_STRIDED, .strides = {0, 1}};
        k.in[2] = (gen_input){.dtype = dt, .access = LATHE_PACCESS_SCALAR};
        char name[32];
        snprintf(name, sizeof name, "lt_fused_%d", count);
        lt_put(&t, "namespace n%d {\n", count);
        lathe_status_t st = gen_kernel(&t, &m, 1, &k, name);
        lt_put(&t, "}\n");
        lathe_status_free(st);
        count++;
      }
    }
    if (count && t.s && !t.oom) {
      char label[64];
      snprintf(label, sizeof label, "elementwise %s", lathe_op_name((lathe_op)op));
      fn(ctx, label, t.s);
    }
    free(t.s);
  }
}

/* Elementwise steps and regions get their kernels bound when the plan is made (exec.c) */
#define LATHE_EW_NO_TEXTS(K) \
  void lathe_cuda_texts_##K(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) { \
    (void)d, (void)n, (void)fn, (void)ctx;                                                                \
  }
LATHE_EW_NO_TEXTS(unary)
LATHE_EW_NO_TEXTS(binary)
LATHE_EW_NO_TEXTS(compare)
LATHE_EW_NO_TEXTS(select)
LATHE_EW_NO_TEXTS(convert)
void lathe_cuda_sources_unary(lathe_cuda_source_fn fn, void *ctx) { each_ew_source(fn, ctx, LATHE_KIND_UNARY); }
void lathe_cuda_sources_binary(lathe_cuda_source_fn fn, void *ctx) { each_ew_source(fn, ctx, LATHE_KIND_BINARY); }
void lathe_cuda_sources_compare(lathe_cuda_source_fn fn, void *ctx) { each_ew_source(fn, ctx, LATHE_KIND_COMPARE); }
void lathe_cuda_sources_select(lathe_cuda_source_fn fn, void *ctx) { each_ew_source(fn, ctx, LATHE_KIND_SELECT); }
void lathe_cuda_sources_convert(lathe_cuda_source_fn fn, void *ctx) { each_ew_source(fn, ctx, LATHE_KIND_CONVERT); }

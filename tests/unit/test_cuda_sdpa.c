/* test_cuda_sdpa.c -- the operation graphs lathe:cuda gives cuDNN for fused attention
 * (src/cuda/cudnn_sdpa.c), checked without a GPU or cuDNN against a stand-in of cuDNN's backend
 * API that records every descriptor and refuses what cuDNN refuses: an attribute set after
 * finalizing, an unfinalized descriptor used as an attribute, a tensor or an operation missing a
 * required attribute, operand shapes that do not agree, a unique id used twice. The recorded
 * graph must then compute attention: every virtual tensor made by one operation and read by
 * another, every input read and made by none, every output made exactly once, and the operations
 * the pattern needs (two products forward, five backward; the causal mask's index comparison);
 * plain, grouped-query (the key-side gradients summed over each group) and with an additive mask. */
#include <string.h>

#include "cuda/dnn.h"
#include "testing.h"

enum { FAKE_MAX = 512, FAKE_ATTRS = 12, FAKE_VALS = 48 }; /* FAKE_VALS: a graph's operations */
typedef struct fake_attr {
  int name, type;
  int64_t n;
  int64_t v[FAKE_VALS]; /* integers, enums and bools widened; descriptors as indices + 1 */
} fake_attr;
typedef struct fake_desc {
  int type, n_attrs;
  bool final;
  fake_attr a[FAKE_ATTRS];
} fake_desc;
static fake_desc fake[FAKE_MAX];
static int n_fake, fake_errors;
static char fake_why[256];

static int fake_index(lcudnnBackendDesc d) { return (int)((intptr_t)d - 1); }
static fake_desc *fake_of(lcudnnBackendDesc d) {
  int i = fake_index(d);
  return i >= 0 && i < n_fake ? &fake[i] : NULL;
}
static lcudnnStatus refuse(const char *why, int what) {
  if (!fake_errors++) snprintf(fake_why, sizeof fake_why, "%s (%d)", why, what);
  return 2000; /* CUDNN_STATUS_BAD_PARAM */
}

static lcudnnStatus fake_create(int type, lcudnnBackendDesc *d) {
  if (n_fake == FAKE_MAX) return refuse("too many descriptors", n_fake);
  memset(&fake[n_fake], 0, sizeof fake[n_fake]);
  fake[n_fake].type = type;
  *d = (lcudnnBackendDesc)(intptr_t)(++n_fake);
  return 0;
}
static lcudnnStatus fake_destroy(lcudnnBackendDesc d) { return fake_of(d) ? 0 : refuse("destroying an unknown descriptor", 0); }

static lcudnnStatus fake_set(lcudnnBackendDesc d, int name, int type, int64_t count, const void *values) {
  fake_desc *f = fake_of(d);
  if (!f) return refuse("setting an attribute of an unknown descriptor", name);
  if (f->final) return refuse("attribute set after finalizing", name);
  if (f->n_attrs == FAKE_ATTRS || count < 0 || count > FAKE_VALS) return refuse("attribute count", name);
  fake_attr *a = &f->a[f->n_attrs++];
  a->name = name, a->type = type, a->n = count;
  for (int64_t i = 0; i < count && i < FAKE_VALS; i++) {
    switch (type) {
      case G_T_INT64: a->v[i] = ((const int64_t *)values)[i]; break;
      case G_T_BOOLEAN: a->v[i] = ((const bool *)values)[i]; break;
      case G_T_DESC: {
        fake_desc *r = fake_of(((const lcudnnBackendDesc *)values)[i]);
        if (!r || !r->final) return refuse("an unfinalized descriptor as an attribute", name);
        a->v[i] = fake_index(((const lcudnnBackendDesc *)values)[i]) + 1;
        break;
      }
      case G_T_HANDLE: a->v[i] = 1; break;
      default: a->v[i] = ((const int *)values)[i]; break; /* data types, modes, operators: C enums */
    }
  }
  return 0;
}

static const fake_attr *attr(const fake_desc *f, int name) {
  for (int i = f->n_attrs - 1; i >= 0; i--)
    if (f->a[i].name == name) return &f->a[i];
  return NULL;
}
static const fake_desc *ref(const fake_desc *f, int name) {
  const fake_attr *a = attr(f, name);
  return a && a->type == G_T_DESC && a->n == 1 ? &fake[a->v[0] - 1] : NULL;
}
static const int64_t *dims(const fake_desc *t) {
  const fake_attr *a = t ? attr(t, A_T_DIMS) : NULL;
  return a && a->n == 4 ? a->v : NULL;
}
static int64_t uid(const fake_desc *t) { return attr(t, A_T_UID)->v[0]; }
static bool is_virtual(const fake_desc *t) {
  const fake_attr *a = attr(t, A_T_VIRTUAL);
  return a && a->v[0];
}

/* out = x (pointwise, b broadcasting into it); each of b's axes 1 or equal */
static bool broadcasts(const int64_t *from, const int64_t *to) {
  for (int i = 0; i < 4; i++)
    if (from[i] != 1 && from[i] != to[i]) return false;
  return true;
}

static lcudnnStatus fake_finalize(lcudnnBackendDesc d) {
  fake_desc *f = fake_of(d);
  if (!f || f->final) return refuse("finalizing twice", 0);
  const int need_tensor[] = {A_T_DATA_TYPE, A_T_DIMS, A_T_STRIDES, A_T_UID, A_T_ALIGN};
  switch (f->type) {
    case G_TENSOR:
      for (size_t i = 0; i < sizeof need_tensor / sizeof *need_tensor; i++)
        if (!attr(f, need_tensor[i])) return refuse("tensor without attribute", need_tensor[i]);
      if (attr(f, A_T_DIMS)->n != attr(f, A_T_STRIDES)->n) return refuse("tensor dims and strides differ in count", 0);
      for (int i = 0; i < 4; i++)
        if (attr(f, A_T_DIMS)->v[i] < 1 || attr(f, A_T_STRIDES)->v[i] < 1) return refuse("tensor size or stride < 1", i);
      break;
    case G_POINTWISE:
      if (!attr(f, A_PW_MODE) || !attr(f, A_PW_MATH_PREC)) return refuse("pointwise without mode or precision", 0);
      if (attr(f, A_PW_MODE)->v[0] == PW_GEN_INDEX && !attr(f, A_PW_AXIS)) return refuse("GEN_INDEX without axis", 0);
      break;
    case G_OP_POINTWISE: {
      const fake_desc *p = ref(f, A_OPPW_DESC), *x = ref(f, A_OPPW_X), *b = ref(f, A_OPPW_B), *t = ref(f, A_OPPW_T);
      const fake_desc *y = ref(f, A_OPPW_Y);
      if (!p || !x || !y) return refuse("pointwise op without descriptor, x or y", 0);
      int64_t mode = attr(p, A_PW_MODE)->v[0];
      bool unary = mode == PW_EXP || mode == PW_LOG || mode == PW_IDENTITY || mode == PW_GEN_INDEX;
      if (unary == (b != NULL)) return refuse("pointwise op's b operand and mode disagree", (int)mode);
      if ((mode == PW_BINARY_SELECT) != (t != NULL)) return refuse("BINARY_SELECT needs t (and only it)", (int)mode);
      if (!broadcasts(dims(x), dims(y)) || (b && !broadcasts(dims(b), dims(y))) || (t && !broadcasts(dims(t), dims(y))))
        return refuse("pointwise operands do not broadcast to y", (int)mode);
      if (mode == PW_GEN_INDEX && attr(y, A_T_DATA_TYPE)->v[0] != DNN_INT32) return refuse("GEN_INDEX into a non-Int32", 0);
      if (mode == PW_CMP_GE && attr(y, A_T_DATA_TYPE)->v[0] != DNN_BOOLEAN) return refuse("a comparison into a non-Bool", 0);
      break;
    }
    case G_MATMUL:
      if (!attr(f, A_MM_COMP_TYPE)) return refuse("matmul without compute type", 0);
      break;
    case G_OP_MATMUL: {
      const int64_t *a = dims(ref(f, A_OPMM_A)), *b = dims(ref(f, A_OPMM_B)), *c = dims(ref(f, A_OPMM_C));
      if (!a || !b || !c || !ref(f, A_OPMM_DESC)) return refuse("matmul op without a, b, c or descriptor", 0);
      /* batch axes equal, or (grouped heads) dividing the result's */
      if (a[0] != c[0] || c[1] % a[1] || b[0] != c[0] || c[1] % b[1] || a[2] != c[2] || b[3] != c[3] || a[3] != b[2])
        return refuse("matmul shapes disagree", 0);
      break;
    }
    case G_REDUCTION:
      if (!attr(f, A_RED_OPERATOR) || !attr(f, A_RED_COMP_TYPE)) return refuse("reduction without operator or type", 0);
      break;
    case G_OP_REDUCTION: {
      const int64_t *x = dims(ref(f, A_OPRED_X)), *y = dims(ref(f, A_OPRED_Y));
      bool groups = x && y; /* each axis kept, reduced to 1, or summed in groups (GQA's heads) */
      for (int i = 0; groups && i < 4; i++) groups = y[i] >= 1 && x[i] % y[i] == 0;
      if (!groups || !ref(f, A_OPRED_DESC)) return refuse("reduction op shapes", 0);
      break;
    }
    case G_OP_RESHAPE: {
      const int64_t *x = dims(ref(f, A_RESHAPE_X)), *y = dims(ref(f, A_RESHAPE_Y));
      if (!x || !y || x[0] * x[1] * x[2] * x[3] != y[0] * y[1] * y[2] * y[3]) return refuse("reshape sizes", 0);
      break;
    }
    case G_OPGRAPH:
      if (!attr(f, A_GRAPH_OPS) || !attr(f, A_GRAPH_HANDLE)) return refuse("graph without ops or handle", 0);
      break;
    default: return refuse("an unexpected descriptor type", f->type);
  }
  f->final = true;
  return 0;
}

/* The tensors an operation reads and writes (descriptor indices + 1). */
static int op_io(const fake_desc *f, int64_t *in, int *n_in, int64_t *out) {
  static const int rd[][4] = {{A_OPPW_X, A_OPPW_B, A_OPPW_T, 0}, {A_OPMM_A, A_OPMM_B, 0, 0}, {A_OPRED_X, 0, 0, 0}, {A_RESHAPE_X, 0, 0, 0}};
  static const int wr[] = {A_OPPW_Y, A_OPMM_C, A_OPRED_Y, A_RESHAPE_Y};
  int k = f->type == G_OP_POINTWISE ? 0 : f->type == G_OP_MATMUL ? 1 : f->type == G_OP_REDUCTION ? 2 : 3;
  *n_in = 0;
  for (int i = 0; i < 4 && rd[k][i]; i++) {
    const fake_attr *a = attr(f, rd[k][i]);
    if (a) in[(*n_in)++] = a->v[0];
  }
  *out = attr(f, wr[k])->v[0];
  return k;
}

/* Checks the recorded graph: its dataflow, its want_mm products and whether it has the causal comparison. */
static void check_graph(const char *what, const int64_t *inputs, int n_inputs, const int64_t *outputs, int n_outputs,
                        int want_mm, bool causal) {
  const fake_desc *g = NULL;
  for (int i = 0; i < n_fake; i++)
    if (fake[i].type == G_OPGRAPH) g = &fake[i];
  CHECK(g && g->final, "%s: a finalized operation graph", what);
  if (!g) return;
  const fake_attr *ops = attr(g, A_GRAPH_OPS);
  int made[FAKE_MAX] = {0}, read[FAKE_MAX] = {0}, mm = 0, cmp = 0;
  for (int64_t i = 0; i < ops->n; i++) {
    int64_t in[4], out;
    int n_in;
    if (op_io(&fake[ops->v[i] - 1], in, &n_in, &out) == 1) mm++;
    const fake_desc *p = ref(&fake[ops->v[i] - 1], A_OPPW_DESC);
    if (p && attr(p, A_PW_MODE)->v[0] == PW_CMP_GE) cmp++;
    made[out - 1]++;
    for (int k = 0; k < n_in; k++) read[in[k] - 1]++;
  }
  CHECK(mm == want_mm, "%s: %d products, want %d", what, mm, want_mm);
  CHECK(cmp == (causal ? 1 : 0), "%s: %d causal comparisons", what, cmp);
  int64_t seen_uid[FAKE_MAX];
  int n_uid = 0;
  for (int i = 0; i < n_fake; i++) {
    if (fake[i].type != G_TENSOR || (!made[i] && !read[i])) continue;
    int64_t u = uid(&fake[i]);
    for (int k = 0; k < n_uid; k++) CHECK(seen_uid[k] != u, "%s: unique id %lld used twice", what, (long long)u);
    seen_uid[n_uid++] = u;
    bool is_in = false, is_out = false;
    for (int k = 0; k < n_inputs; k++) is_in |= inputs[k] == u;
    for (int k = 0; k < n_outputs; k++) is_out |= outputs[k] == u;
    if (is_virtual(&fake[i])) CHECK(made[i] == 1 && read[i] >= 1, "%s: virtual tensor %lld made %d times, read %d", what, (long long)u, made[i], read[i]);
    else if (is_in) CHECK(!made[i] && read[i], "%s: input %lld made %d times, read %d", what, (long long)u, made[i], read[i]);
    else CHECK(is_out && made[i] == 1, "%s: tensor %lld (an output: %d) made %d times", what, (long long)u, is_out, made[i]);
  }
  for (int k = 0; k < n_outputs; k++) {
    bool found = false;
    for (int i = 0; i < n_uid; i++) found |= seen_uid[i] == outputs[k];
    CHECK(found, "%s: output %lld is made", what, (long long)outputs[k]);
  }
}

static lcu_api fake_api(void) {
  lcu_api api;
  memset(&api, 0, sizeof api);
  api.cudnnBackendCreateDescriptor = fake_create;
  api.cudnnBackendDestroyDescriptor = fake_destroy;
  api.cudnnBackendSetAttribute = fake_set;
  api.cudnnBackendFinalize = fake_finalize;
  return api;
}

/* GPT-2's attention: batch 2, 12 heads (kv_heads of keys and values), 64 query rows over 80
 * keys, heads of 64 values. */
static lt_sdpa_desc attention_of(bool bshd, bool causal, int64_t kv_heads) {
  lt_sdpa_desc s = {.dt = LATHE_DTYPE_BFLOAT16, .B = 2, .H = 12, .Hkv = kv_heads, .S = 64, .Skv = 80, .D = 64,
                    .causal = causal, .scale = 0.125f};
  int64_t D = s.D;
  for (int t = 0; t < 2; t++) {
    int64_t L = t ? s.Skv : s.S, H = t ? s.Hkv : s.H, *st = t ? s.kst : s.qst;
    int64_t v[4] = {H * L * D, bshd ? D : L * D, bshd ? H * D : D, 1};
    memcpy(st, v, sizeof v);
  }
  s.q = 1 << 20, s.k = 2 << 20, s.v = 3 << 20, s.o = 4 << 20, s.lse = 5 << 20, s.dout = 6 << 20, s.dq = 7 << 20;
  s.dk = 8 << 20, s.dv = 9 << 20;
  return s;
}
static lt_sdpa_desc gpt2_like(bool bshd, bool causal) { return attention_of(bshd, causal, 12); }

/* ... with an additive mask [1, heads, seq, kv] of the query's dtype */
static lt_sdpa_desc with_bias(lt_sdpa_desc s) {
  const int64_t dim[4] = {1, s.H, s.S, s.Skv}, st[4] = {s.H * s.S * s.Skv, s.S * s.Skv, s.Skv, 1};
  memcpy(s.bdim, dim, sizeof dim), memcpy(s.bst, st, sizeof st);
  s.bias = 10 << 20, s.bdt = s.dt;
  return s;
}

TEST(cuda_sdpa_graphs_on_a_stand_in) {
  lcu_api api = fake_api();
  for (int form = 0; form < 3; form++) /* plain; GQA (4 KV heads); an additive mask */
    for (int layout = 0; layout < 2; layout++)
      for (int causal = 0; causal < 2; causal++)
        for (int vjp = 0; vjp < 2; vjp++) {
          lt_sdpa_desc s = form == 1 ? attention_of(layout, causal, 4) : gpt2_like(layout, causal);
          if (form == 2) s = with_bias(s);
          char what[64];
          snprintf(what, sizeof what, "%s%s %s%s", vjp ? "VJP" : "forward", causal ? " causal" : "", layout ? "BSHD" : "BHSD",
                   form == 1 ? " GQA" : form == 2 ? " masked" : "");
          int64_t in[12] = {1, 2, 3, 6}, n_in = 4, out[6], n_out = 0;
          if (vjp) in[n_in++] = 4, in[n_in++] = 5, in[n_in++] = 8, in[n_in++] = 12;
          if (causal) in[n_in++] = 7;
          if (form == 2) in[n_in++] = 15;
          if (vjp) out[n_out++] = 9, out[n_out++] = 10, out[n_out++] = 11, out[n_out++] = 13, out[n_out++] = 14;
          else out[n_out++] = 4, out[n_out++] = 5;
          n_fake = fake_errors = 0;
          CHECK(lathe_cuda_sdpa_form(&s), "%s: a form cuDNN takes", what);
          lcudnnStatus st = lathe_cuda_sdpa_graph_check(&api, (lcudnnHandle)&api, &s, vjp);
          CHECK(st == 0 && fake_errors == 0, "%s: the stand-in refused: %s", what, fake_why);
          check_graph(what, in, (int)n_in, out, (int)n_out, vjp ? 5 : 2, causal);
        }
  /* a refusal mid-way comes back as the first failing call's status, and nothing leaks */
  lt_sdpa_desc s = gpt2_like(false, true);
  s.Skv = 0; /* a tensor of size 0: refused at its finalize */
  n_fake = fake_errors = 0;
  CHECK(lathe_cuda_sdpa_graph_check(&api, (lcudnnHandle)&api, &s, true) == 2000, "a size-0 tensor is refused");
}

TEST(cuda_sdpa_forms) {
  lt_sdpa_desc s = gpt2_like(false, true);
  CHECK(lathe_cuda_sdpa_form(&s), "BFloat16 heads of 64");
  s.dt = LATHE_DTYPE_FLOAT16;
  CHECK(lathe_cuda_sdpa_form(&s), "Float16");
  s.dt = LATHE_DTYPE_FLOAT32;
  CHECK(!lathe_cuda_sdpa_form(&s), "not Float32 (lathe's TF32 or exact kernels)");
  s = gpt2_like(false, true), s.D = 136, s.qst[2] = s.kst[2] = 136;
  CHECK(!lathe_cuda_sdpa_form(&s), "not heads over 128");
  s = gpt2_like(false, true), s.D = 20, s.qst[2] = s.kst[2] = 20;
  CHECK(!lathe_cuda_sdpa_form(&s), "not heads off a multiple of 8");
  s = gpt2_like(false, true), s.k += 2;
  CHECK(!lathe_cuda_sdpa_form(&s), "not a key off 16 bytes");
  s = gpt2_like(true, true), s.qst[1] += 4;
  CHECK(!lathe_cuda_sdpa_form(&s), "not rows off 16 bytes");
  s = gpt2_like(false, false), s.S = 0;
  CHECK(!lathe_cuda_sdpa_form(&s), "not an empty query");
  s = attention_of(false, true, 5);
  CHECK(!lathe_cuda_sdpa_form(&s), "not 12 query heads over 5 KV heads");
  s = with_bias(gpt2_like(false, true));
  CHECK(lathe_cuda_sdpa_form(&s), "an additive mask [1, H, S, Skv]");
  s.bdt = LATHE_DTYPE_FLOAT32;
  CHECK(lathe_cuda_sdpa_form(&s), "a Float32 one");
  s.bdt = LATHE_DTYPE_FLOAT16;
  CHECK(!lathe_cuda_sdpa_form(&s), "not a Float16 mask on BFloat16 attention");
  s = with_bias(gpt2_like(false, true)), s.bdim[2] = 1;
  CHECK(!lathe_cuda_sdpa_form(&s), "not a mask broadcast along the query rows");
  s = with_bias(gpt2_like(false, true)), s.bdim[1] = 3;
  CHECK(!lathe_cuda_sdpa_form(&s), "not a mask of 3 heads for 12");
}

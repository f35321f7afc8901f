/* sort.c -- Sort on the GPU (called from control.c), with lathe:cpu's results (src/cpu/control.c):
 * a stable sort of each row along the axis, every operand permuted alike.
 *
 * Both paths sort a permutation per row with a bitonic network: rows padded to a power of two P
 * (padding goes last), a block sorts tiles of 2048 elements in shared memory and, for longer rows,
 * one kernel per global merge step joins tiles. Ties are broken by the original position, which
 * makes the network stable (and the result a permutation even for a comparator that is no strict
 * weak order, where a merge by ranks could lose elements).
 *  - Key path, when lathe_sort_comparator_order recognises a plain LessThan/GreaterThan (or
 *    their TotalOrder forms) of the first operand: the first operand becomes 64-bit keys whose
 *    unsigned order is the requested one, with the CPU's placement of NaNs and zeros (plain: every
 *    NaN after +Inf, -0 equal to +0; TotalOrder: -NaN < -Inf < ... < -0 < +0 < ... < +NaN; the
 *    key's bits flipped for descending), compared with the position as tie-break.
 *  - Comparator path, otherwise: the comparator sub-function becomes a device function when every
 *    op it uses is an elementwise op of ew.def (its element functions, the same the CPU compiles)
 *    on single values -- parameters, captured values, constants, reshapes of one element; its
 *    strict order is completed by the positions (a before b when less(a, b), or neither less(a, b)
 *    nor less(b, a) and a comes first). Other comparators are UNIMPLEMENTED.
 * Sub-byte operands (Sort sees them packed) are widened to 8 bits around the sort. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

#include "../graph/ew.h"
#include "cuda.h"
#include "kernels/zkernels.h"

enum { TILE = 2048, MAX_SORT_OPS = 16, MAX_SORT_CAPS = 8 };

/* The bitonic network over a permutation (and keys), generic in the order L::lt(row, keys, perm,
 * a, b): whether element a (a position of the arrays) goes strictly before element b. */
static const char bitonic_lib[] = LT_CUH_SORT_BITONIC;

/* The key path: keys, then (key, position) order. */
static const char key_src[] = LT_CUH_SORT_KEY;

/* Moving rows by the sorted permutation, the comparator path's starting permutation, and the
 * widening of sub-byte operands. */
static const char move_src[] = LT_CUH_SORT_MOVE;

/* The comparator path's order around the generated lt_user_less. */
static const char cmp_kernels[] = LT_CUH_SORT_COMPARE;

static char *key_source, *move_source;
static pthread_once_t sources_once = PTHREAD_ONCE_INIT;

static void make_sources(void) {
  size_t n = sizeof bitonic_lib + sizeof key_src;
  key_source = malloc(n);
  if (key_source) snprintf(key_source, n, "%s%s", bitonic_lib, key_src);
  move_source = malloc(sizeof move_src);
  if (move_source) memcpy(move_source, move_src, sizeof move_src);
}

static const char *key_src_get(void) {
  pthread_once(&sources_once, make_sources);
  return key_source;
}

static const char *move_src_get(void) {
  pthread_once(&sources_once, make_sources);
  return move_source;
}

/* ---- the comparator as a device function ---- */

/* The compute type of dt in element functions (sub-byte integers: 8 bits), and its storage once
 * widened. */
static const char *compute_type(lathe_dtype dt) {
  switch (lathe_dtype_class_of(dt)) {
    case LATHE_CLASS_BOOL: return "uint8_t";
    case LATHE_CLASS_HALF: return "float";
    case LATHE_CLASS_COMPLEX: return lathe_dtype_bits(dt) == 64 ? "lt_c64" : "lt_c128";
    case LATHE_CLASS_FLOAT: return lathe_dtype_bits(dt) == 32 ? "float" : "double";
    case LATHE_CLASS_SINT:
      switch (lathe_dtype_bits(dt)) {
        case 16: return "int16_t";
        case 32: return "int32_t";
        case 64: return "int64_t";
        default: return "int8_t";
      }
    case LATHE_CLASS_UINT:
      switch (lathe_dtype_bits(dt)) {
        case 16: return "uint16_t";
        case 32: return "uint32_t";
        case 64: return "uint64_t";
        default: return "uint8_t";
      }
    default: return NULL;
  }
}

/* The expression reading element `idx` of a widened operand p of dtype dt. */
static void load_expr(lt_text *t, lathe_dtype dt, const char *p, const char *idx) {
  if (dt == LATHE_DTYPE_FLOAT16) lt_put(t, "lt_f16_to_f32(((const uint16_t *)%s)[%s])", p, idx);
  else if (dt == LATHE_DTYPE_BFLOAT16) lt_put(t, "lt_bf16_to_f32(((const uint16_t *)%s)[%s])", p, idx);
  else lt_put(t, "((const %s *)%s)[%s]", compute_type(dt), p, idx);
}

/* Element 0 of packed bytes b (sub-byte dtype dt) as an expression of its compute type. */
static void packed_expr(lt_text *t, lathe_dtype dt, const char *b) {
  int bits = lathe_dtype_bits(dt);
  if (lathe_dtype_class_of(dt) == LATHE_CLASS_SINT)
    lt_put(t, "(int8_t)((int8_t)(uint8_t)((%s) << %d) >> %d)", b, 8 - bits, 8 - bits);
  else lt_put(t, "(uint8_t)((%s) & 0x%x)", b, (1u << bits) - 1);
}

/* The literal of a constant's first element. */
static void const_expr(lt_text *t, lathe_dtype dt, const void *data) {
  const unsigned char *b = data;
  uint64_t u[2] = {0, 0};
  memcpy(u, b, (size_t)(lathe_dtype_bits(dt) >= 8 ? lathe_dtype_bits(dt) / 8 : 1));
  if (lathe_dtype_is_packed(dt)) {
    char lit[16];
    snprintf(lit, sizeof lit, "0x%x", (unsigned)b[0]);
    packed_expr(t, dt, lit);
    return;
  }
  switch (lathe_dtype_class_of(dt)) {
    case LATHE_CLASS_BOOL: lt_put(t, "(uint8_t)%u", (unsigned)b[0]); break;
    case LATHE_CLASS_HALF: lt_put(t, "lt_%s_to_f32((uint16_t)0x%x)", dt == LATHE_DTYPE_FLOAT16 ? "f16" : "bf16", (unsigned)(u[0] & 0xffff)); break;
    case LATHE_CLASS_FLOAT:
      if (lathe_dtype_bits(dt) == 32) lt_put(t, "__uint_as_float(0x%xu)", (unsigned)(u[0] & 0xffffffffu));
      else lt_put(t, "__longlong_as_double(0x%llxLL)", (unsigned long long)u[0]);
      break;
    case LATHE_CLASS_COMPLEX:
      if (lathe_dtype_bits(dt) == 64)
        lt_put(t, "lt_c64(__uint_as_float(0x%xu), __uint_as_float(0x%xu))", (unsigned)(u[0] & 0xffffffffu), (unsigned)(u[0] >> 32));
      else lt_put(t, "lt_c128(__longlong_as_double(0x%llxLL), __longlong_as_double(0x%llxLL))", (unsigned long long)u[0], (unsigned long long)u[1]);
      break;
    default: { /* integers by their bits, truncated to the type */
      int bits = lathe_dtype_bits(dt);
      uint64_t v = bits >= 64 ? u[0] : u[0] & ((1ull << bits) - 1);
      lt_put(t, "(%s)0x%llxULL", compute_type(dt), (unsigned long long)v);
    }
  }
}

static bool ew_op(const lathe_node *n) {
  lathe_op_kind k = lathe_op_kind_of(n->op);
  if (n->op == LATHE_OP_BITCAST) return false;
  if (k != LATHE_KIND_UNARY && k != LATHE_KIND_BINARY && k != LATHE_KIND_COMPARE && k != LATHE_KIND_SELECT &&
      k != LATHE_KIND_CONVERT)
    return false;
  lathe_dtype dt = n->in[n->op == LATHE_OP_WHERE ? 1 : 0]->shape.dtype;
  return lathe_ew_defined(n->op, dt, n->shape.dtype);
}

/* Appends n's element function to fns unless a function of that name is there; its name into name. */
static lathe_status_t element_fn(lt_text *fns, const lathe_node *n, char *name, size_t cap) {
  lathe_dtype dt = n->in[n->op == LATHE_OP_WHERE ? 1 : 0]->shape.dtype, to = n->shape.dtype;
  size_t len = 0;
  lathe_status_t st = lathe_ew_source(n->op, dt, to, NULL, 0, &len);
  if (st && lathe_status_code_of(st) != LATHE_STATUS_RESOURCE_EXHAUSTED) return st;
  lathe_status_free(st);
  char *src = malloc(len + 1);
  if (!src) return LATHE_OOM("Sort: comparator");
  st = lathe_ew_source(n->op, dt, to, src, len + 1, NULL);
  if (!st) { /* "static inline <type> <name>(": the name is the token before the parenthesis */
    const char *paren = strchr(src, '('), *start = paren;
    while (start > src && start[-1] != ' ') start--;
    snprintf(name, cap, "%.*s", (int)(paren - start), start);
    char probe[160];
    snprintf(probe, sizeof probe, " %s(", name);
    if (!fns->s || !strstr(fns->s, probe)) lt_put(fns, "%s\n", src);
  }
  free(src);
  return st;
}

/* lt_user_less for Sort node n's comparator: body into fns (element functions first); captured
 * value j is caps.p[j], operand t is ops.p[t] (widened to 8 bits when packed). */
static lathe_status_t gen_comparator(const lathe_node *sort, lt_text *fns) {
  const lathe_function *c = lathe_attr_sort_comparator(sort);
  if (c->n_outputs != 1) return LATHE_UNIMPL("Sort: a comparator with %d outputs on lathe:cuda", c->n_outputs);
  int nn = c->n_nodes;
  bool *live = calloc((size_t)nn + 1, sizeof *live);
  int *stack = malloc(sizeof(int) * ((size_t)nn + 1));
  lt_text body = {0};
  lathe_status_t st = (!live || !stack) ? LATHE_OOM("Sort: comparator") : NULL;
  int sp = 0;
  if (!st) {
    stack[sp++] = c->outputs[0]->id;
    live[c->outputs[0]->id] = true;
  }
  while (!st && sp) {
    const lathe_node *v = c->nodes[stack[--sp]];
    for (int i = 0; i < v->n_in; i++) {
      const lathe_node *u = v->in[i];
      if (u->fn != c || u->id < 0 || u->id >= nn) {
        st = lathe_status_new(LATHE_STATUS_INTERNAL, "Sort: comparator operand outside the comparator");
        break;
      }
      if (!live[u->id]) live[u->id] = true, stack[sp++] = u->id;
    }
  }
  lt_put(&body, "LT_DEV bool lt_user_less(const lt_sort_ops &o, const lt_sort_caps &c, int64_t ea, int64_t eb) {\n");
  for (int id = 0; !st && id < nn; id++) {
    if (!live[id]) continue;
    const lathe_node *v = c->nodes[id];
    lathe_dtype dt = v->shape.dtype;
    if (v->multi || lathe_shape_size(&v->shape) != 1 || !compute_type(dt)) {
      st = LATHE_UNIMPL("Sort: the comparator computes %s of %lld elements, which lathe:cuda cannot run in a GPU sort "
                        "(only single values)", lathe_op_name(v->op), (long long)lathe_shape_size(&v->shape));
      break;
    }
    lt_put(&body, "  %s v%d = ", compute_type(dt), id);
    if (v->op == LATHE_OP_PARAMETER) {
      int p = v->param_index, t = p / 2;
      if (t >= MAX_SORT_OPS) {
        st = LATHE_UNIMPL("Sort: a comparator reading operand %d (lathe:cuda compares the first %d)", t, MAX_SORT_OPS);
        break;
      }
      char ptr[32];
      snprintf(ptr, sizeof ptr, "o.p[%d]", t);
      load_expr(&body, dt, ptr, p % 2 ? "eb" : "ea");
    } else if (v->op == LATHE_OP_CAPTURE) {
      int j = 0;
      while (j < c->n_captures && c->captures[j] != v) j++;
      if (j == c->n_captures || j >= MAX_SORT_CAPS) {
        st = LATHE_UNIMPL("Sort: a comparator capturing more than %d values on lathe:cuda", MAX_SORT_CAPS);
        break;
      }
      char ptr[32];
      snprintf(ptr, sizeof ptr, "c.p[%d]", j);
      if (lathe_dtype_is_packed(dt)) {
        char b[48];
        snprintf(b, sizeof b, "((const uint8_t *)c.p[%d])[0]", j);
        packed_expr(&body, dt, b);
      } else {
        load_expr(&body, dt, ptr, "0");
      }
    } else if (v->op == LATHE_OP_CONSTANT) {
      lathe_bytes bytes = lathe_attr_constant_value(v);
      if (!bytes.size) {
        st = lathe_status_new(LATHE_STATUS_INTERNAL, "Sort: an empty constant in the comparator");
        break;
      }
      const_expr(&body, dt, bytes.data);
    } else if ((v->op == LATHE_OP_RESHAPE || v->op == LATHE_OP_BROADCAST_IN_DIM) && v->in[0]->shape.dtype == dt) {
      lt_put(&body, "v%d", v->in[0]->id);
    } else if (ew_op(v)) {
      char name[128];
      if ((st = element_fn(fns, v, name, sizeof name))) break;
      lt_put(&body, "%s(", name);
      for (int i = 0; i < v->n_operands; i++) lt_put(&body, "%sv%d", i ? ", " : "", v->in[i]->id);
      lt_put(&body, ")");
    } else {
      st = LATHE_UNIMPL("Sort: the comparator uses %s, which lathe:cuda cannot run inside a GPU sort (only elementwise ops)",
                        lathe_op_name(v->op));
      break;
    }
    lt_put(&body, ";\n");
  }
  lt_put(&body, "  return v%d != 0;\n}\n", c->outputs[0]->id);
  if (!st) lt_put(fns, "%s", body.s ? body.s : "");
  if (!st && (fns->oom || body.oom)) st = LATHE_OOM("Sort: comparator");
  free(body.s);
  free(live);
  free(stack);
  return st;
}

/* The whole source of the comparator path for sort node n (malloc'd into *out). */
static lathe_status_t comparator_source(const lathe_node *n, char **out) {
  lt_text t = {0};
  lt_put(&t, "%s%s", lathe_cuda_ew_prelude(), bitonic_lib);
  lathe_status_t st = gen_comparator(n, &t);
  lt_put(&t, "%s", cmp_kernels);
  if (!st && t.oom) st = LATHE_OOM("Sort: comparator");
  if (st) {
    free(t.s);
    return st;
  }
  *out = t.s;
  return NULL;
}

/* ---- sources for the NVRTC test: the fixed ones, and comparators over every dtype ---- */
typedef struct fake_fn {
  lathe_function fn;
  lathe_node nodes[160];
  lathe_node *ptrs[160];
  lathe_node *ins[160][3];
  lathe_node *caps[4];
  lathe_node *out;
  unsigned char consts[8][16];
  int n_consts;
} fake_fn;

static lathe_node *fake_node(fake_fn *f, lathe_op op, lathe_dtype dt, lathe_node *a, lathe_node *b, lathe_node *c) {
  int id = f->fn.n_nodes++;
  lathe_node *v = &f->nodes[id];
  memset(v, 0, sizeof *v);
  v->id = id;
  v->op = op;
  v->fn = &f->fn;
  v->shape.dtype = dt;
  v->n_out = 1;
  v->in = f->ins[id];
  lathe_node *ops[3] = {a, b, c};
  for (int i = 0; i < 3 && ops[i]; i++) v->in[v->n_in++] = ops[i];
  v->n_operands = v->n_in;
  f->ptrs[id] = v;
  return v;
}

/* A comparator over operands of dtypes dts (lhs, rhs each): the disjunction over them of an
 * ordering (Real parts for complex, LogicalNot(l) & r for Bool) where each also meets a constant
 * and a captured value of its dtype. */
static void fake_comparator(fake_fn *f, const lathe_dtype *dts, int n) {
  memset(&f->fn, 0, sizeof f->fn);
  f->fn.nodes = f->ptrs;
  f->fn.captures = f->caps;
  f->fn.outputs = &f->out;
  f->fn.n_outputs = 1;
  f->n_consts = 0;
  lathe_node *acc = NULL;
  for (int t = 0; t < n; t++) {
    lathe_dtype dt = dts[t];
    lathe_node *l = fake_node(f, LATHE_OP_PARAMETER, dt, NULL, NULL, NULL), *r = fake_node(f, LATHE_OP_PARAMETER, dt, NULL, NULL, NULL);
    l->param_index = 2 * t, r->param_index = 2 * t + 1;
    lathe_node *k = fake_node(f, LATHE_OP_CONSTANT, dt, NULL, NULL, NULL);
    memset(f->consts[f->n_consts % 8], 0x3c, 16);
    k->a.data = f->consts[f->n_consts++ % 8];
    k->a.data_size = 16;
    lathe_node *cmp;
    if (lathe_dtype_class_of(dt) == LATHE_CLASS_BOOL) {
      lathe_node *nl = fake_node(f, LATHE_OP_LOGICAL_NOT, dt, l, NULL, NULL);
      lathe_node *x = fake_node(f, LATHE_OP_LOGICAL_AND, dt, nl, r, NULL);
      cmp = fake_node(f, LATHE_OP_LOGICAL_AND, dt, x, k, NULL);
    } else {
      if (lathe_dtype_is_complex(dt)) {
        lathe_dtype rt = lathe_dtype_real_of(dt);
        lathe_node *s = fake_node(f, LATHE_OP_ADD, dt, l, k, NULL);
        l = fake_node(f, LATHE_OP_REAL, rt, s, NULL, NULL);
        r = fake_node(f, LATHE_OP_REAL, rt, r, NULL, NULL);
      } else {
        l = fake_node(f, LATHE_OP_MUL, dt, l, k, NULL);
      }
      cmp = fake_node(f, LATHE_OP_LESS_THAN, LATHE_DTYPE_BOOL, l, r, NULL);
    }
    if (t < 4) { /* a captured value of the dtype, compared for equality */
      lathe_node *cv = fake_node(f, LATHE_OP_CAPTURE, dt, NULL, NULL, NULL);
      f->caps[f->fn.n_captures++] = cv;
      lathe_node *e = fake_node(f, LATHE_OP_EQUAL, LATHE_DTYPE_BOOL, fake_node(f, LATHE_OP_RESHAPE, dt, cv, NULL, NULL), k, NULL);
      cmp = fake_node(f, LATHE_OP_WHERE, LATHE_DTYPE_BOOL, e, cmp, cmp);
    }
    acc = acc ? fake_node(f, LATHE_OP_LOGICAL_OR, LATHE_DTYPE_BOOL, acc, cmp, NULL) : cmp;
  }
  f->out = acc;
}

void lathe_cuda_sources_sort(lathe_cuda_source_fn fn, void *ctx) {
  if (key_src_get()) fn(ctx, "sort keys", key_src_get());
  if (move_src_get()) fn(ctx, "sort moves", move_src_get());
  /* comparators over every dtype, in groups of at most 11 operands */
  lathe_dtype all[LATHE_DTYPE_LIMIT];
  int n_all = 0;
  for (int d = 1; d < LATHE_DTYPE_LIMIT; d++)
    if (lathe_dtype_is_valid((lathe_dtype)d) && compute_type((lathe_dtype)d)) all[n_all++] = (lathe_dtype)d;
  fake_fn *f = malloc(sizeof *f);
  if (!f) return;
  for (int first = 0; first < n_all; first += 11) {
    int cnt = n_all - first < 11 ? n_all - first : 11;
    fake_comparator(f, all + first, cnt);
    lathe_node sort;
    memset(&sort, 0, sizeof sort);
    sort.op = LATHE_OP_SORT;
    lathe_attr_set_sort_comparator(&sort, &f->fn);
    char *src = NULL;
    lathe_status_t st = comparator_source(&sort, &src);
    char label[64];
    snprintf(label, sizeof label, "sort comparator (dtypes %d..%d)", first, first + cnt - 1);
    if (!st) {
      fn(ctx, label, src);
    } else { /* fails the compile test, naming the problem */
      char err[512];
      snprintf(err, sizeof err, "#error %s\n", lathe_status_message(st));
      fn(ctx, label, err);
    }
    lathe_status_free(st);
    free(src);
  }
  free(f);
}

/* ---- running a sort ---- */
bool lathe_cuda_supports_sort(lathe_dtype dtype) { return lathe_dtype_is_valid(dtype) && compute_type(dtype) != NULL; }

static lathe_status_t launch(lathe_cuda_exec *ex, const char *src, const char *name, unsigned blocks, unsigned threads,
                             unsigned smem, void **args) {
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel(lathe_cuda_exec_dev(ex), src, name, &f));
  return lathe_cuda_launch(ex, f, blocks, threads, smem, args);
}

static lathe_status_t scratch(lathe_cuda_exec *ex, lathe_dtype dt, int64_t n, lathe_tensor **out) {
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = dt;
  s.rank = 1;
  s.dims[0] = n;
  LATHE_RETURN_IF_ERROR(lathe_cuda_exec_tensor(ex, &s, out));
  lathe_tensor_release(*out); /* ours; the execution keeps its own until the stream is done */
  return NULL;
}

typedef struct sort_args { /* the bitonic kernels' arguments */
  lcuDeviceptr keys, perm;
  int64_t G;
  int lp;
  int64_t k0, k1;
  struct {
    lcuDeviceptr p[MAX_SORT_OPS];
  } ops;
  struct {
    lcuDeviceptr p[MAX_SORT_CAPS];
  } caps;
  int64_t m, inner;
} sort_args;

/* The bitonic network over G = rows << lp elements (kernels lt_sort_{tile,step}_<kind> of src,
 * looked up once: a long row takes dozens of launches). */
static lathe_status_t bitonic(lathe_cuda_exec *ex, const char *src, const char *kind, bool keys, sort_args *a) {
  char name[48];
  lcuFunction tile, step;
  cuda_dev *d = lathe_cuda_exec_dev(ex);
  snprintf(name, sizeof name, "lt_sort_tile_%s", kind);
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel(d, src, name, &tile));
  snprintf(name, sizeof name, "lt_sort_step_%s", kind);
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel(d, src, name, &step));
  void *args[] = {&a->keys, &a->perm, &a->G, &a->lp, &a->k0, &a->k1, &a->ops, &a->caps, &a->m, &a->inner};
  int64_t P = (int64_t)1 << a->lp, blocks = (a->G + TILE - 1) / TILE;
  unsigned smem = (unsigned)(TILE * (keys ? 12 : 4)), sb, st;
  lathe_cuda_grid(a->G / 2, &sb, &st);
  a->k0 = 2;
  a->k1 = P < TILE ? P : TILE;
  LATHE_RETURN_IF_ERROR(lathe_cuda_launch(ex, tile, (unsigned)blocks, 1024, smem, args));
  for (int64_t k = 2 * TILE; k <= P; k *= 2) {
    for (int64_t j = k / 2; j >= TILE; j /= 2) {
      a->k0 = k, a->k1 = j;
      LATHE_RETURN_IF_ERROR(lathe_cuda_launch(ex, step, sb, st, 0, args));
    }
    a->k0 = a->k1 = k;
    LATHE_RETURN_IF_ERROR(lathe_cuda_launch(ex, tile, (unsigned)blocks, 1024, smem, args));
  }
  return NULL;
}

/* Sub-byte tensor t as 8-bit values in scratch (*out). */
static lathe_status_t unpack(lathe_cuda_exec *ex, const lathe_tensor *t, lathe_tensor **out) {
  int64_t n = lathe_shape_size(&t->shape);
  LATHE_RETURN_IF_ERROR(scratch(ex, lathe_dtype_widened(t->shape.dtype), n, out));
  lcuDeviceptr p = lathe_cuda_ptr(t), w = lathe_cuda_ptr(*out);
  int bits = lathe_dtype_bits(t->shape.dtype), sign = lathe_dtype_class_of(t->shape.dtype) == LATHE_CLASS_SINT;
  void *args[] = {&p, &w, &n, &bits, &sign};
  unsigned b, th;
  lathe_cuda_grid(n, &b, &th);
  return launch(ex, move_src_get(), "lt_sort_unpack", b, th, 0, args);
}

static lathe_status_t pack(lathe_cuda_exec *ex, const lathe_tensor *wide, lathe_tensor *t) {
  int64_t n = lathe_shape_size(&t->shape);
  lcuDeviceptr p = lathe_cuda_ptr(t), w = lathe_cuda_ptr(wide);
  int bits = lathe_dtype_bits(t->shape.dtype);
  void *args[] = {&p, &w, &n, &bits};
  unsigned b, th;
  lathe_cuda_grid((n * bits + 7) / 8, &b, &th);
  return launch(ex, move_src_get(), "lt_sort_pack", b, th, 0, args);
}

/* The keys kernel of dtype dt (widened) and its kind argument. */
static const char *keys_kernel(lathe_dtype dt, int *kind) {
  *kind = 0;
  switch (lathe_dtype_class_of(dt)) {
    case LATHE_CLASS_BOOL: return "lt_sort_keys_8";
    case LATHE_CLASS_UINT:
      switch (lathe_dtype_bits(dt)) {
        case 8: return "lt_sort_keys_8";
        case 16: return "lt_sort_keys_u16";
        case 32: return "lt_sort_keys_u32";
        default: return "lt_sort_keys_u64";
      }
    case LATHE_CLASS_SINT:
      switch (lathe_dtype_bits(dt)) {
        case 8: *kind = 1; return "lt_sort_keys_8";
        case 16: return "lt_sort_keys_s16";
        case 32: return "lt_sort_keys_s32";
        default: return "lt_sort_keys_s64";
      }
    case LATHE_CLASS_HALF: *kind = dt == LATHE_DTYPE_FLOAT16 ? 1 : 2; return "lt_sort_keys_u16";
    case LATHE_CLASS_FLOAT: *kind = 1; return lathe_dtype_bits(dt) == 32 ? "lt_sort_keys_u32" : "lt_sort_keys_u64";
    default: return NULL;
  }
}

static lathe_status_t sort_rows(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **w_in,
                                lathe_tensor **w_out, int64_t rows, int64_t m, int64_t inner) {
  int ni = n->n_operands;
  const char *msrc = move_src_get(), *ksrc = key_src_get();
  if (!msrc || !ksrc) return LATHE_OOM("Sort");
  bool desc = false, total = false;
  int kind = 0;
  const char *kk = keys_kernel(w_in[0]->shape.dtype, &kind);
  bool native = kk && lathe_sort_comparator_order(n, &desc, &total);
  char *csrc = NULL;
  if (!native) LATHE_RETURN_IF_ERROR(comparator_source(n, &csrc));
  sort_args a;
  memset(&a, 0, sizeof a);
  a.lp = 1;
  while (((int64_t)1 << a.lp) < m) a.lp++;
  a.G = rows << a.lp;
  a.m = m;
  a.inner = inner;
  lathe_tensor *perm = NULL, *keys = NULL;
  lathe_status_t st = scratch(ex, LATHE_DTYPE_INT32, a.G, &perm);
  if (!st) a.perm = lathe_cuda_ptr(perm);
  if (!st && native) {
    st = scratch(ex, LATHE_DTYPE_UINT64, a.G, &keys);
    if (!st) {
      a.keys = lathe_cuda_ptr(keys);
      lcuDeviceptr px = lathe_cuda_ptr(w_in[0]);
      int tot = total;
      uint64_t flip = desc ? ~0ull : 0;
      void *args[] = {&px, &a.keys, &a.perm, &a.G, &a.lp, &a.m, &a.inner, &tot, &flip, &kind};
      unsigned b, t;
      lathe_cuda_grid(a.G, &b, &t);
      st = launch(ex, ksrc, kk, b, t, 0, args);
    }
    if (!st) st = bitonic(ex, ksrc, "key", true, &a);
  } else if (!st) {
    for (int t = 0; t < ni && t < MAX_SORT_OPS; t++) a.ops.p[t] = lathe_cuda_ptr(w_in[t]);
    for (int j = 0; j < MAX_SORT_CAPS && ni + j < n->n_in; j++) a.caps.p[j] = lathe_cuda_ptr(in[ni + j]);
    void *args[] = {&a.perm, &a.G, &a.lp};
    unsigned b, t;
    lathe_cuda_grid(a.G, &b, &t);
    st = launch(ex, msrc, "lt_sort_iota", b, t, 0, args);
    if (!st) st = bitonic(ex, csrc, "cmp", false, &a);
  }
  free(csrc);
  int64_t total_n = rows * m;
  for (int t = 0; !st && t < ni; t++) {
    char name[32];
    snprintf(name, sizeof name, "lt_sort_permute_%d", lathe_dtype_bits(w_in[t]->shape.dtype) / 8);
    lcuDeviceptr px = lathe_cuda_ptr(w_in[t]), py = lathe_cuda_ptr(w_out[t]);
    void *args[] = {&px, &py, &a.perm, &total_n, &a.m, &a.inner, &a.lp};
    unsigned b, th;
    lathe_cuda_grid(total_n, &b, &th);
    st = launch(ex, msrc, name, b, th, 0, args);
  }
  return st;
}

lathe_status_t lathe_cuda_run_sort(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  int ni = n->n_operands, axis = (int)lathe_attr_sort_axis(n);
  const lathe_shape *s = &in[0]->shape;
  int64_t outer = lathe_dims_product(s->dims, 0, axis), inner = lathe_dims_product(s->dims, axis + 1, s->rank);
  int64_t m = s->dims[axis], rows = outer * inner;
  cuda_dev *d = lathe_cuda_exec_dev(ex);
  lathe_status_t st = NULL;
  for (int t = 0; t < ni; t++) out[t] = NULL;
  for (int t = 0; t < ni && !st; t++) st = lathe_cuda_tensor_new(d, &in[t]->shape, &out[t]);
  if (!st && (m <= 1 || rows == 0)) {
    for (int t = 0; t < ni && !st; t++) st = lathe_cuda_copy(ex, in[t], out[t]);
  } else if (!st && m > INT32_MAX) {
    st = LATHE_UNIMPL("Sort: rows of %lld elements on lathe:cuda (at most %d)", (long long)m, INT32_MAX);
  } else if (!st) {
    lathe_tensor **w = calloc(2 * (size_t)ni + 1, sizeof *w), **w_in = w, **w_out = w ? w + ni : NULL;
    if (!w) st = LATHE_OOM("Sort");
    for (int t = 0; t < ni && !st; t++) {
      if (lathe_dtype_is_packed(in[t]->shape.dtype)) {
        st = unpack(ex, in[t], &w_in[t]);
        if (!st) st = scratch(ex, lathe_dtype_widened(in[t]->shape.dtype), lathe_shape_size(&in[t]->shape), &w_out[t]);
      } else {
        w_in[t] = in[t];
        w_out[t] = out[t];
      }
    }
    if (!st) st = sort_rows(ex, n, in, w_in, w_out, rows, m, inner);
    for (int t = 0; t < ni && !st; t++)
      if (lathe_dtype_is_packed(in[t]->shape.dtype)) st = pack(ex, w_out[t], out[t]);
    free(w);
  }
  if (st) { /* kernels already queued may still write the results: let them finish first */
    lathe_cuda_exec_api(ex)->cuStreamSynchronize(lathe_cuda_exec_stream(ex));
    for (int t = 0; t < ni; t++) lathe_tensor_release(out[t]), out[t] = NULL;
  }
  return st;
}

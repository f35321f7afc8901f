/* device.c -- the CPU device: options, memory, compile (schedules + constants) and the
 * interpreter that runs a schedule with reference-counted tensors. */
#include <stdio.h>
#include <unistd.h>

#include "cpu.h"
#include "fusion.h"

/* ---- memory ---- */
static lathe_status_t tensor_new(void *ctx, const lathe_shape *shape, lathe_tensor **out) {
  (void)ctx;
  return lathe_cpu_tensor_new(shape, out);
}

lathe_status_t lathe_cpu_tensor_new(const lathe_shape *shape, lathe_tensor **out) {
  int64_t nbytes = lathe_shape_byte_size(shape);
  if (nbytes < 0) return LATHE_INVALID("Tensor: shape has dynamic axes");
  lathe_tensor *t = calloc(1, sizeof *t);
  void *data = lathe_aligned_alloc((size_t)nbytes);
  if (!t || !data) {
    free(t);
    lathe_aligned_free(data);
    return lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED, "Tensor: out of memory allocating %lld bytes", (long long)nbytes);
  }
  atomic_init(&t->refs, 1);
  t->shape = *shape;
  for (int i = 0; i < LATHE_MAX_RANK; i++) t->shape.axis_names[i] = NULL;
  t->data = data;
  t->nbytes = (size_t)nbytes;
  /* packed tails: keep unused bits zero so equal tensors have equal bytes */
  if (lathe_dtype_is_packed(shape->dtype) && nbytes) ((uint8_t *)data)[nbytes - 1] = 0;
  *out = t;
  return NULL;
}

static void tensor_free_data(void *ctx, void *data) {
  (void)ctx;
  lathe_aligned_free(data);
}

static lathe_status_t upload(void *ctx, lathe_tensor *t, const void *src, size_t nbytes) {
  (void)ctx;
  if (nbytes) memcpy(t->data, src, nbytes);
  return NULL;
}

static lathe_status_t download(void *ctx, const lathe_tensor *t, void *dst, size_t nbytes) {
  (void)ctx;
  if (nbytes) memcpy(dst, t->data, nbytes);
  return NULL;
}

/* ---- capabilities ---- */
static bool supports_dtype(void *ctx, lathe_dtype dt) {
  (void)ctx;
  return lathe_dtype_is_valid(dt);
}

static bool supports_op(void *ctx, lathe_op op, lathe_dtype dt) {
  (void)ctx;
  if (!lathe_dtype_is_valid(dt)) return false;
  /* sub-byte integers compute widened to 8 bits */
  if (lathe_dtype_is_packed(dt) && op != LATHE_OP_BITCAST)
    dt = lathe_dtype_class_of(dt) == LATHE_CLASS_SINT ? LATHE_DTYPE_INT8 : LATHE_DTYPE_UINT8;
  switch (lathe_op_kind_of(op)) {
#define K(KIND, fam) \
  case LATHE_KIND_##KIND: return lathe_cpu_supports_##fam(op, dt);
    K(LEAF, leaf) K(UNARY, unary) K(CONVERT, convert) K(BINARY, binary) K(COMPARE, compare) K(SELECT, select)
    K(REDUCE, reduce) K(LAYOUT, layout) K(DOT, dot) K(CONV, conv) K(WINDOW, window) K(INDEX, index)
    K(CONTROL, control) K(NUMERIC, numeric) K(DYNSHAPE, dynshape) K(BARRIER, barrier) K(FUSED, fused)
#undef K
    default: return false;
  }
}

lathe_status_t lathe_cpu_run_kernel(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  switch (lathe_op_kind_of(n->op)) {
#define K(KIND, fam) \
  case LATHE_KIND_##KIND: return lathe_cpu_run_##fam(ex, n, in, out);
    K(LEAF, leaf) K(UNARY, unary) K(CONVERT, convert) K(BINARY, binary) K(COMPARE, compare) K(SELECT, select)
    K(REDUCE, reduce) K(LAYOUT, layout) K(DOT, dot) K(CONV, conv) K(WINDOW, window) K(INDEX, index)
    K(CONTROL, control) K(NUMERIC, numeric) K(DYNSHAPE, dynshape) K(BARRIER, barrier) K(FUSED, fused)
#undef K
    default: return lathe_status_new(LATHE_STATUS_INTERNAL, "%s: no CPU kernel family", lathe_op_name(n->op));
  }
}

/* ---- plans ---- */
typedef struct fn_plan {
  const lathe_function *fn;
  lathe_schedule s;
  lathe_tensor **consts;     /* by node id */
  lathe_fusion_plan fusion;  /* empty when fusion is off */
} fn_plan;

struct lathe_plan {
  fn_plan *fns;
  int n_fns;
  const lathe_function *main_fn;
};

static void plan_free(void *ctx, lathe_plan *p) {
  (void)ctx;
  if (!p) return;
  for (int i = 0; i < p->n_fns; i++) {
    fn_plan *f = &p->fns[i];
    for (int k = 0; f->consts && k < f->s.n_nodes; k++) lathe_tensor_release(f->consts[k]);
    free(f->consts);
    lathe_fusion_plan_free(&f->fusion);
    lathe_schedule_free(&f->s);
  }
  free(p->fns);
  free(p);
}

static lathe_status_t check_supported(const lathe_node *n) {
  lathe_op_kind k = lathe_op_kind_of(n->op);
  if (k == LATHE_KIND_INTERNAL || n->op == LATHE_OP_PARAMETER || n->op == LATHE_OP_CONSTANT) return NULL;
  lathe_dtype dt = n->n_operands ? n->in[0]->shape.dtype : (n->multi ? n->out_shapes[0].dtype : n->shape.dtype);
  if (!supports_op(NULL, n->op, dt))
    return LATHE_UNIMPL("%s: not implemented on lathe:cpu for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  return NULL;
}

static lathe_status_t compile(void *ctx, struct lathe_builder *b, lathe_plan **out) {
  const lathe_cpu *cpu = ctx;
  lathe_plan *p = calloc(1, sizeof *p);
  if (!p) return LATHE_OOM("Compile");
  p->fns = calloc((size_t)b->n_fns, sizeof(fn_plan));
  if (!p->fns) {
    free(p);
    return LATHE_OOM("Compile");
  }
  p->main_fn = b->main_fn;
  lathe_status_t st = NULL;
  for (int i = 0; i < b->n_fns && !st; i++) {
    lathe_function *fn = b->fns[i];
    if (!fn->returned) continue; /* an unused, empty function */
    fn_plan *f = &p->fns[p->n_fns];
    f->fn = fn;
    st = lathe_schedule_build(fn, &f->s);
    if (st) break;
    p->n_fns++;
    f->consts = calloc((size_t)f->s.n_nodes + 1, sizeof(lathe_tensor *));
    if (!f->consts) st = LATHE_OOM("Compile");
    for (int k = 0; !st && k < f->s.n_order; k++) {
      const lathe_node *n = fn->nodes[f->s.order[k]];
      st = check_supported(n);
      if (!st && n->op == LATHE_OP_CONSTANT) {
        st = lathe_cpu_tensor_new(&n->shape, &f->consts[n->id]);
        if (!st && n->a.data_size) memcpy(f->consts[n->id]->data, n->a.data, n->a.data_size);
      }
    }
    if (!st && cpu->fuse) st = lathe_fusion_plan_build(fn, &f->s, &f->fusion);
  }
  if (st) {
    plan_free(NULL, p);
    return st;
  }
  *out = p;
  return NULL;
}

static const fn_plan *find_plan(const lathe_plan *p, const lathe_function *fn) {
  for (int i = 0; i < p->n_fns; i++)
    if (p->fns[i].fn == fn) return &p->fns[i];
  return NULL;
}

/* ---- execution ---- */
typedef struct frame {
  const fn_plan *fp;
  lathe_tensor **vals;   /* by node id */
  lathe_tensor ***multi; /* by node id: results of multi-result nodes */
  struct frame *parent;
} frame;

struct lathe_cpu_exec {
  lathe_cpu *cpu;
  const lathe_plan *plan;
  frame *cur;
};

lathe_pool *lathe_cpu_exec_pool(lathe_cpu_exec *ex) { return ex->cpu->pool; }

/* Sub-byte integer tensors are widened to 8 bits around kernels that compute on values. */
static bool packed_native(lathe_op op) {
  lathe_op_kind k = lathe_op_kind_of(op);
  /* FusedQuantizedDense unpacks Int2/Int4 weights itself, panel by panel, in parallel. */
  return op == LATHE_OP_BITCAST || op == LATHE_OP_FUSED_QUANTIZED_DENSE || k == LATHE_KIND_CONTROL || k == LATHE_KIND_INTERNAL || k == LATHE_KIND_LEAF ||
         k == LATHE_KIND_BARRIER;
}

static lathe_dtype widened(lathe_dtype dt) {
  if (!lathe_dtype_is_packed(dt)) return dt;
  return lathe_dtype_class_of(dt) == LATHE_CLASS_SINT ? LATHE_DTYPE_INT8 : LATHE_DTYPE_UINT8;
}

/* Unpacking works a byte (8/bits elements) at a time, byte ranges split over the pool; a packed
 * tensor's unused tail bits stay zero. */
typedef struct {
  uint8_t *packed;
  int8_t *wide;
  int64_t n;
  int bits;
  bool sign;
} pack_job;

static void unpack_bytes(void *ctx, int64_t b, int64_t e) {
  const pack_job *j = ctx;
  int per = 8 / j->bits, shift = 8 - j->bits;
  unsigned mask = (1u << j->bits) - 1;
  for (int64_t byte = b; byte < e; byte++) {
    unsigned v = j->packed[byte];
    int64_t base = byte * per, lim = j->n - base < per ? j->n - base : per;
    for (int k = 0; k < lim; k++, v >>= j->bits)
      j->wide[base + k] = j->sign ? (int8_t)((int8_t)((v & mask) << shift) >> shift) : (int8_t)(v & mask);
  }
}

static void pack_bytes(void *ctx, int64_t b, int64_t e) {
  const pack_job *j = ctx;
  int per = 8 / j->bits;
  unsigned mask = (1u << j->bits) - 1;
  for (int64_t byte = b; byte < e; byte++) {
    unsigned v = 0;
    int64_t base = byte * per, lim = j->n - base < per ? j->n - base : per;
    for (int k = 0; k < lim; k++) v |= ((unsigned)(uint8_t)j->wide[base + k] & mask) << (k * j->bits);
    j->packed[byte] = (uint8_t)v;
  }
}

static pack_job pack_job_of(const lathe_tensor *packed, const lathe_tensor *wide) {
  return (pack_job){packed->data, wide->data, lathe_shape_size(&packed->shape), lathe_dtype_bits(packed->shape.dtype),
                    lathe_dtype_class_of(packed->shape.dtype) == LATHE_CLASS_SINT};
}

static lathe_status_t widen(lathe_cpu_exec *ex, lathe_tensor *t, lathe_tensor **out) {
  lathe_shape s = t->shape;
  s.dtype = widened(s.dtype);
  LATHE_RETURN_IF_ERROR(lathe_cpu_tensor_new(&s, out));
  pack_job j = pack_job_of(t, *out);
  lathe_parallel_for(ex->cpu->pool, (int64_t)t->nbytes, 1 << 14, unpack_bytes, &j);
  return NULL;
}

static void narrow(lathe_cpu_exec *ex, const lathe_tensor *wide, lathe_tensor *t) {
  pack_job j = pack_job_of(t, wide);
  lathe_parallel_for(ex->cpu->pool, (int64_t)t->nbytes, 1 << 14, pack_bytes, &j);
}

static bool may_run_in_place(lathe_op op) {
  switch (lathe_op_kind_of(op)) {
    case LATHE_KIND_UNARY:
    case LATHE_KIND_BINARY:
    case LATHE_KIND_COMPARE:
    case LATHE_KIND_SELECT:
      return true;
    default:
      return op == LATHE_OP_CONVERT_DTYPE;
  }
}

static lathe_status_t run_node(lathe_cpu_exec *ex, frame *f, int pos, const lathe_node *n) {
  const lathe_schedule *s = &f->fp->s;
  enum { MAXS = 16 };
  lathe_tensor *in_s[MAXS], *out_s[MAXS], *win_s[MAXS], *wout_s[MAXS];
  int nin = n->n_operands, nout = n->n_out;
  lathe_tensor **in = nin <= MAXS ? in_s : calloc((size_t)nin, sizeof *in);
  lathe_tensor **win = nin <= MAXS ? win_s : calloc((size_t)nin, sizeof *win);
  lathe_tensor **out = nout <= MAXS ? out_s : calloc((size_t)nout, sizeof *out);
  lathe_tensor **wout = nout <= MAXS ? wout_s : calloc((size_t)nout, sizeof *wout);
  lathe_status_t st = (!in || !win || !out || !wout) ? LATHE_OOM(lathe_op_name(n->op)) : NULL;
  if (st) goto done;
  memset(out, 0, sizeof *out * (size_t)nout);
  memset(wout, 0, sizeof *wout * (size_t)nout);
  memset(win, 0, sizeof *win * (size_t)nin);
  for (int i = 0; i < nin; i++) in[i] = f->vals[s->remap[n->in[i]->id]];
  bool control = lathe_op_kind_of(n->op) == LATHE_KIND_CONTROL || lathe_op_kind_of(n->op) == LATHE_KIND_BARRIER;
  /* Allocate results, reusing the memory of an operand that dies here when nothing else holds it. */
  for (int k = 0; k < nout && !control; k++) {
    const lathe_shape *sh = n->multi ? &n->out_shapes[k] : &n->shape;
    if (may_run_in_place(n->op))
      for (int i = 0; i < nin; i++) {
        lathe_tensor *t = in[i];
        int cid = s->remap[n->in[i]->id];
        /* Same dtype and dims only: the kernel reads the operand's shape from the tensor. */
        if (s->last_use[cid] == pos && atomic_load(&t->refs) == 1 && lathe_shape_equal(&t->shape, sh) &&
            !lathe_dtype_is_packed(sh->dtype)) {
          bool taken = false;
          for (int j = 0; j < k; j++) taken |= out[j] == t;
          if (taken) continue;
          out[k] = lathe_tensor_retain(t);
          break;
        }
      }
    if (!out[k] && (st = lathe_cpu_tensor_new(sh, &out[k]))) {
      /* nocrash: name the op whose result could not be allocated */
      st = lathe_status_annotate(st, "executing %s (node %d of \"%s\")", lathe_op_name(n->op), n->id, f->fp->fn->name);
      goto done;
    }
  }
  if (control || packed_native(n->op)) {
    st = lathe_cpu_run_kernel(ex, n, in, out);
  } else {
    for (int i = 0; i < nin && !st; i++)
      st = lathe_dtype_is_packed(in[i]->shape.dtype) ? widen(ex, in[i], &win[i]) : (win[i] = lathe_tensor_retain(in[i]), NULL);
    for (int k = 0; k < nout && !st; k++) {
      if (lathe_dtype_is_packed(out[k]->shape.dtype)) {
        lathe_shape ws = out[k]->shape;
        ws.dtype = widened(ws.dtype);
        st = lathe_cpu_tensor_new(&ws, &wout[k]);
      } else {
        wout[k] = lathe_tensor_retain(out[k]);
      }
    }
    if (!st) st = lathe_cpu_run_kernel(ex, n, win, wout);
    for (int k = 0; k < nout && !st; k++)
      if (wout[k] != out[k]) narrow(ex, wout[k], out[k]);
  }
  if (st) {
    st = lathe_status_annotate(st, "executing %s (node %d of \"%s\")", lathe_op_name(n->op), n->id, f->fp->fn->name);
    goto done;
  }
  if (n->multi) {
    f->multi[n->id] = calloc((size_t)nout, sizeof(lathe_tensor *));
    if (!f->multi[n->id]) {
      st = LATHE_OOM(lathe_op_name(n->op));
      goto done;
    }
    for (int k = 0; k < nout; k++) f->multi[n->id][k] = out[k], out[k] = NULL;
  } else {
    f->vals[n->id] = out[0];
    out[0] = NULL;
  }
done:
  for (int i = 0; win && i < nin; i++) lathe_tensor_release(win[i]);
  for (int k = 0; out && k < nout; k++) lathe_tensor_release(out[k]);
  for (int k = 0; wout && k < nout; k++) lathe_tensor_release(wout[k]);
  if (in != in_s) free(in);
  if (win != win_s) free(win);
  if (out != out_s) free(out);
  if (wout != wout_s) free(wout);
  return st;
}

static void release_multi(frame *f, int id) {
  lathe_tensor **m = f->multi[id];
  if (!m) return;
  for (int k = 0; k < f->fp->fn->nodes[id]->n_out; k++) lathe_tensor_release(m[k]);
  free(m);
  f->multi[id] = NULL;
}

/* Releases the values whose last use is node n at schedule position pos. */
static void release_dead(frame *f, const lathe_schedule *s, int pos, const lathe_node *n) {
  for (int i = 0; i < n->n_in; i++) {
    int cid = s->remap[n->in[i]->id];
    if (s->last_use[cid] != pos) continue;
    lathe_tensor_release(f->vals[cid]);
    f->vals[cid] = NULL;
    release_multi(f, cid);
  }
  if (s->last_use[n->id] < 0 && !n->multi) {
    lathe_tensor_release(f->vals[n->id]);
    f->vals[n->id] = NULL;
  }
}

static lathe_status_t run_function(lathe_cpu_exec *ex, const fn_plan *fp, lathe_tensor *const *inputs, int n_inputs,
                                   lathe_tensor **outputs, frame *parent) {
  const lathe_function *fn = fp->fn;
  const lathe_schedule *s = &fp->s;
  if (n_inputs != fn->n_params)
    return lathe_status_new(LATHE_STATUS_INTERNAL, "function \"%s\" takes %d inputs, got %d", fn->name, fn->n_params, n_inputs);
  frame f = {.fp = fp, .parent = parent};
  f.vals = calloc((size_t)s->n_nodes + 1, sizeof(lathe_tensor *));
  f.multi = calloc((size_t)s->n_nodes + 1, sizeof(lathe_tensor **));
  lathe_status_t st = (!f.vals || !f.multi) ? LATHE_OOM("Execute") : NULL;
  frame *saved = ex->cur;
  ex->cur = &f;
  for (int pos = 0; !st && pos < s->n_order; pos++) {
    const lathe_node *n = fn->nodes[s->order[pos]];
    int gi = fp->fusion.group_at ? fp->fusion.group_at[pos] : -1;
    if (gi >= 0) { /* a fused elementwise run: positions first..last at once */
      const lathe_fusion_group *g = &fp->fusion.groups[gi];
      st = lathe_fusion_run(ex, fn, s, g, f.vals);
      if (st) break;
      for (int q = g->first; q <= g->last; q++) release_dead(&f, s, q, fn->nodes[s->order[q]]);
      pos = g->last;
      continue;
    }
    switch (n->op) {
      case LATHE_OP_PARAMETER:
        f.vals[n->id] = lathe_tensor_retain(inputs[n->param_index]);
        break;
      case LATHE_OP_CONSTANT:
        f.vals[n->id] = lathe_tensor_retain(fp->consts[n->id]);
        break;
      case LATHE_OP_CAPTURE: {
        const lathe_node *c = n->captured;
        frame *a = parent;
        while (a && a->fp->fn != c->fn) a = a->parent;
        lathe_tensor *t = a ? a->vals[a->fp->s.remap[c->id]] : NULL;
        if (!t) st = lathe_status_new(LATHE_STATUS_INTERNAL, "function \"%s\": captured value not available", fn->name);
        else f.vals[n->id] = lathe_tensor_retain(t);
        break;
      }
      case LATHE_OP_TUPLE_ELEMENT: {
        int src = s->remap[n->in[0]->id];
        f.vals[n->id] = lathe_tensor_retain(f.multi[src][n->a.i[0]]);
        break;
      }
      default:
        st = run_node(ex, &f, pos, n);
    }
    if (st) break;
    release_dead(&f, s, pos, n);
  }
  int made = 0;
  for (; !st && made < fn->n_outputs; made++) outputs[made] = lathe_tensor_retain(f.vals[s->remap[fn->outputs[made]->id]]);
  for (int i = 0; f.vals && i < s->n_nodes; i++) lathe_tensor_release(f.vals[i]);
  for (int i = 0; f.multi && i < s->n_nodes; i++) release_multi(&f, i);
  free(f.vals);
  free(f.multi);
  ex->cur = saved;
  return st;
}

lathe_status_t lathe_cpu_exec_call(lathe_cpu_exec *ex, const lathe_function *fn, lathe_tensor *const *inputs,
                                   int n_inputs, lathe_tensor **outputs) {
  const fn_plan *fp = find_plan(ex->plan, fn);
  if (!fp) return lathe_status_new(LATHE_STATUS_INTERNAL, "function \"%s\" was not compiled", fn->name);
  return run_function(ex, fp, inputs, n_inputs, outputs, fn->parent ? ex->cur : NULL);
}

/* Outputs handed to the caller must not share memory with anything else (inputs, constants,
 * other outputs), since shared buffers may be written in place. */
static lathe_status_t unshare(lathe_tensor **t) {
  if (atomic_load(&(*t)->refs) == 1) return NULL;
  lathe_tensor *c;
  LATHE_RETURN_IF_ERROR(lathe_cpu_tensor_new(&(*t)->shape, &c));
  if ((*t)->nbytes) memcpy(c->data, (*t)->data, (*t)->nbytes);
  lathe_tensor_release(*t);
  *t = c;
  return NULL;
}

static lathe_status_t execute(void *ctx, lathe_plan *p, lathe_tensor **inputs, int n_inputs, lathe_tensor **outputs,
                              int n_outputs) {
  lathe_cpu_exec ex = {.cpu = ctx, .plan = p};
  const fn_plan *fp = find_plan(p, p->main_fn);
  lathe_status_t st = fp ? run_function(&ex, fp, inputs, n_inputs, outputs, NULL)
                         : lathe_status_new(LATHE_STATUS_INTERNAL, "Execute: main function was not compiled");
  for (int i = 0; i < n_inputs; i++) lathe_tensor_release(inputs[i]);
  for (int k = 0; !st && k < n_outputs; k++) st = unshare(&outputs[k]);
  if (st) {
    for (int k = 0; k < n_outputs; k++) lathe_tensor_release(outputs[k]), outputs[k] = NULL;
  }
  return st;
}

static const char *description(void *ctx) {
  static _Thread_local char buf[64];
  snprintf(buf, sizeof buf, "cpu (%d threads)", ((lathe_cpu *)ctx)->threads);
  return buf;
}

static void destroy(void *ctx) {
  lathe_cpu *c = ctx;
  lathe_pool_free(c->pool);
  free(c);
}

static const lathe_device_i cpu_device = {
    .name = "cpu",
    .tensor_new = tensor_new,
    .tensor_free_data = tensor_free_data,
    .upload = upload,
    .download = download,
    .compile = compile,
    .execute = execute,
    .plan_free = plan_free,
    .supports_op = supports_op,
    .supports_dtype = supports_dtype,
    .description = description,
    .destroy = destroy,
    .shared_buffers = true,
};

lathe_status_t lathe_cpu_device_new(const char *options, const lathe_device_i **out_dev, void **out_ctx,
                                    char **out_config) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = ncpu > 0 ? (int)ncpu : 1;
  bool fuse = true;
  /* options: comma-separated key=value */
  const char *p = options ? options : "";
  while (*p) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len > 8 && strncmp(p, "threads=", 8) == 0) {
      char num[32];
      size_t nl = len - 8 < sizeof num - 1 ? len - 8 : sizeof num - 1;
      memcpy(num, p + 8, nl);
      num[nl] = 0;
      char *e;
      long v = strtol(num, &e, 10);
      if (*e || v < 1 || v > 1024) return LATHE_INVALID("lathe:cpu: threads must be an integer in [1, 1024], got \"%s\"", num);
      threads = (int)v;
    } else if (len == 6 && (strncmp(p, "fuse=0", 6) == 0 || strncmp(p, "fuse=1", 6) == 0)) {
      fuse = p[5] == '1';
    } else if (len) {
      return LATHE_INVALID("lathe:cpu: unknown option \"%.*s\"; known options: threads=N, fuse=0|1", (int)len, p);
    }
    p += len;
    if (*p == ',') p++;
  }
  lathe_cpu *c = calloc(1, sizeof *c);
  if (!c) return LATHE_OOM("lathe:cpu");
  c->threads = threads;
  c->fuse = fuse;
  lathe_status_t st = lathe_pool_new(threads, &c->pool);
  if (st) {
    free(c);
    return st;
  }
  char *conf = malloc(48);
  if (!conf) {
    destroy(c);
    return LATHE_OOM("lathe:cpu");
  }
  snprintf(conf, 48, "cpu,threads=%d%s", threads, fuse ? "" : ",fuse=0");
  *out_dev = &cpu_device;
  *out_ctx = c;
  *out_config = conf;
  return NULL;
}

/* exec.c -- CUDA plans and execution. An execution walks the program's steps on the calling
 * thread and launches kernels on one stream of its device (one stream per execution, taken in
 * turn from a pool); it returns once the launches are queued. Its outputs carry an event backed
 * by a CUDA event recorded at the end; the device's completion thread waits for it, then
 * signals the event and releases what the execution used: inputs, intermediates (kept until the
 * stream is done, so no other stream reuses their memory early) and the arenas.
 *
 * Control flow runs on the host: While and If read their predicate back (the stream is waited
 * for at that point), then launch the chosen sub-function's steps on the same stream. */
#include <stdio.h>
#include <unistd.h>

#include "exec.h"
#include "kernels/zkernels.h"

enum { MAX_SPARE_ARENAS = 8 };

void lathe_cuda_arena_set_free(lathe_plan *p, arena_set *a) {
  if (!a) return;
  cuda_dev *d = &p->cu->devs[a->device];
  for (int f = 0; f < p->n_fns; f++) {
    if (a->fns[f].mem) lathe_cuda_free(d, a->fns[f].mem, (size_t)p->fns[f].pf->arena_bytes);
    free(a->fns[f].views);
  }
  free(a->fns);
  free(a);
}

void lathe_cuda_plan_free(void *ctx, lathe_plan *p) {
  (void)ctx;
  if (!p) return;
  lathe_cuda_replay_free(p);
  for (int dv = 0; p->consts && dv < p->cu->n_devices; dv++) {
    for (int64_t k = 0; p->consts[dv] && k < p->n_const_entries; k++) lathe_tensor_release(p->consts[dv][k]);
    free(p->consts[dv]);
  }
  free(p->consts);
  while (p->spare) {
    arena_set *a = p->spare;
    p->spare = a->next;
    lathe_cuda_arena_set_free(p, a);
  }
  for (int i = 0; p->fns && i < p->n_fns; i++) {
    free(p->fns[i].const_slots);
    for (int k = 0; p->fns[i].step_k && k < p->fns[i].pf->n_steps; k++) lathe_cuda_ewk_free(p->fns[i].step_k[k]);
    for (int k = 0; p->fns[i].region_k && k < p->fns[i].pf->n_regions; k++) lathe_cuda_ewk_free(p->fns[i].region_k[k]);
    free(p->fns[i].step_k);
    free(p->fns[i].region_k);
  }
  free(p->fns);
  free(p->const_base);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

static lathe_status_t check_supported(const lathe_node *n) {
  lathe_op_kind k = lathe_op_kind_of(n->op);
  if (k == LATHE_KIND_INTERNAL || n->op == LATHE_OP_PARAMETER || n->op == LATHE_OP_CONSTANT) return NULL;
  lathe_dtype dt = n->n_operands ? n->in[0]->shape.dtype : (n->multi ? n->out_shapes[0].dtype : n->shape.dtype);
  if (!lathe_cuda_supports_op(n->op, dt))
    return LATHE_UNIMPL("%s: not implemented on lathe:cuda for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  return NULL;
}

static lathe_status_t check_step(const lathe_pfunc *pf, const lathe_pstep *s) {
  if (s->region < 0) return check_supported(s->node);
  const lathe_pregion *g = &pf->regions[s->region];
  const lathe_pregion *parts[3] = {g, NULL, NULL};
  if (g->kind == LATHE_PREGION_REDUCE) {
    LATHE_RETURN_IF_ERROR(check_supported(g->reduce));
    parts[0] = g->prologue >= 0 ? &pf->regions[g->prologue] : NULL;
    parts[1] = g->epilogue >= 0 ? &pf->regions[g->epilogue] : NULL;
  }
  for (int k = 0; k < 3; k++)
    for (int m = 0; parts[k] && m < parts[k]->n_members; m++) LATHE_RETURN_IF_ERROR(check_supported(parts[k]->members[m].node));
  return NULL;
}

/* ---- kernels bound at compile ----
 * Every elementwise step and LOOP region gets its kernel now: sources made, then compiled (or
 * found in the caches) by several threads at once, then loaded on every GPU. A kernel that
 * cannot be made (UNIMPLEMENTED) stays unbound: its step then fails as it runs, as before. */
typedef struct bind_job {
  lathe_cuda *cu;
  lathe_cuda_ewk **ks;
  int n;
  atomic_int next;
  lathe_status_t st; /* the first error */
  pthread_mutex_t mu;
} bind_job;

static void *bind_worker(void *arg) {
  bind_job *j = arg;
  for (int i; (i = atomic_fetch_add(&j->next, 1)) < j->n;) {
    lathe_status_t st = lathe_cuda_ewk_resolve(j->cu, j->ks[i], 0);
    if (!st) continue;
    pthread_mutex_lock(&j->mu);
    if (!j->st) j->st = st;
    else lathe_status_free(st);
    pthread_mutex_unlock(&j->mu);
  }
  return NULL;
}

static lathe_status_t keep_unimplemented(lathe_status_t st) {
  if (st && lathe_status_code_of(st) == LATHE_STATUS_UNIMPLEMENTED) {
    lathe_status_free(st);
    return NULL;
  }
  return st;
}

static lathe_status_t bind_kernels(lathe_cuda *cu, lathe_plan *p) {
  int total = 0;
  lathe_status_t st = NULL;
  for (int i = 0; !st && i < p->n_fns; i++) {
    cuda_fn *f = &p->fns[i];
    const lathe_pfunc *pf = f->pf;
    if (pf->dynamic) continue;
    f->step_k = calloc((size_t)pf->n_steps + 1, sizeof *f->step_k);
    f->region_k = calloc((size_t)pf->n_regions + 1, sizeof *f->region_k);
    if (!f->step_k || !f->region_k) return LATHE_OOM("Compile");
    for (int r = 0; !st && r < pf->n_regions; r++)
      if (pf->regions[r].kind == LATHE_PREGION_LOOP)
        if (!(st = keep_unimplemented(lathe_cuda_ewk_region(cu, pf, &pf->regions[r], &f->region_k[r]))) && f->region_k[r]) total++;
    for (int s = 0; !st && s < pf->n_steps; s++) {
      const lathe_pstep *sp = &pf->steps[s];
      if (sp->region >= 0 || !lathe_cuda_ewk_step_kind(sp->node)) continue;
      const lathe_shape *in[LATHE_PMEMBER_MAX_IN];
      lathe_shape ws[LATHE_PMEMBER_MAX_IN], wo = pf->slots[sp->out[0]].shape;
      for (int k = 0; k < sp->n_in && k < LATHE_PMEMBER_MAX_IN; k++) {
        ws[k] = pf->slots[sp->in[k]].shape;
        ws[k].dtype = lathe_cuda_widened(ws[k].dtype);
        in[k] = &ws[k];
      }
      if (!(st = keep_unimplemented(lathe_cuda_ewk_step(cu, sp->node, in, &wo, &f->step_k[s]))) && f->step_k[s]) total++;
    }
  }
  if (st || !total || !cu->n_devices) return st;
  lathe_cuda_ewk **ks = malloc(sizeof *ks * (size_t)total);
  if (!ks) return LATHE_OOM("Compile");
  int n = 0;
  for (int i = 0; i < p->n_fns; i++) {
    cuda_fn *f = &p->fns[i];
    for (int s = 0; f->step_k && s < f->pf->n_steps; s++)
      if (f->step_k[s]) ks[n++] = f->step_k[s];
    for (int r = 0; f->region_k && r < f->pf->n_regions; r++)
      if (f->region_k[r]) ks[n++] = f->region_k[r];
  }
  /* identical kernels (a region shape that recurs) compile once: the threads take the first of
   * each, the rest then find it in the module table */
  lathe_cuda_ewk **uniq = malloc(sizeof *uniq * (size_t)n);
  size_t *len = malloc(sizeof *len * (size_t)n);
  if (!uniq || !len) {
    free(uniq);
    free(len);
    free(ks);
    return LATHE_OOM("Compile");
  }
  int nu = 0;
  for (int i = 0; i < n; i++) {
    len[i] = strlen(lathe_cuda_ewk_source(ks[i]));
    bool seen = false;
    for (int k = 0; k < i && !seen; k++)
      seen = len[k] == len[i] && !memcmp(lathe_cuda_ewk_source(ks[k]), lathe_cuda_ewk_source(ks[i]), len[i]);
    if (!seen) uniq[nu++] = ks[i];
  }
  free(len);
  bind_job j = {.cu = cu, .ks = uniq, .n = nu};
  pthread_mutex_init(&j.mu, NULL);
  enum { MAX_BINDERS = 8 };
  pthread_t tid[MAX_BINDERS];
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = nu < 4 ? 1 : (int)(cpus < 2 ? 1 : cpus > MAX_BINDERS ? MAX_BINDERS : cpus), started = 0;
  if (nt > nu) nt = nu;
  for (int t = 1; t < nt; t++)
    if (pthread_create(&tid[started], NULL, bind_worker, &j) == 0) started++;
  bind_worker(&j);
  for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
  st = j.st;
  for (int d = 0; !st && d < cu->n_devices; d++) /* the rest, and other GPUs: compiled by now */
    for (int i = 0; !st && i < n; i++) st = lathe_cuda_ewk_resolve(cu, ks[i], d);
  pthread_mutex_destroy(&j.mu);
  free(uniq);
  free(ks);
  return st;
}

lathe_status_t lathe_cuda_compile(void *ctx, const lathe_program *prog, lathe_plan **out) {
  lathe_cuda *cu = ctx;
  lathe_plan *p = calloc(1, sizeof *p);
  if (!p) return LATHE_OOM("Compile");
  p->cu = cu;
  p->prog = prog;
  p->n_fns = prog->n_fns;
  p->fns = calloc((size_t)prog->n_fns, sizeof(cuda_fn));
  p->const_base = calloc((size_t)prog->n_fns + 1, sizeof(int64_t));
  p->consts = calloc((size_t)cu->n_devices, sizeof(lathe_tensor **));
  lathe_status_t st = (!p->fns || !p->const_base || !p->consts || pthread_mutex_init(&p->mu, NULL)) ? LATHE_OOM("Compile") : NULL;
  for (int i = 0; !st && i < prog->n_fns; i++) {
    const lathe_pfunc *pf = &prog->fns[i];
    cuda_fn *f = &p->fns[i];
    f->pf = pf;
    p->const_base[i] = p->n_const_entries;
    p->n_const_entries += pf->n_slots;
    for (int s = 0; !st && s < pf->n_steps; s++) {
      st = check_step(pf, &pf->steps[s]);
      if (pf->steps[s].n_in > f->max_in) f->max_in = pf->steps[s].n_in;
    }
    f->const_slots = malloc(sizeof(int) * (size_t)(pf->n_slots + 1));
    if (!st && !f->const_slots) st = LATHE_OOM("Compile");
    for (int k = 0; !st && k < pf->n_slots; k++)
      if (pf->slots[k].kind == LATHE_PSLOT_CONST) f->const_slots[f->n_consts++] = k;
  }
  if (!st) st = bind_kernels(cu, p);
  if (!st) st = lathe_cuda_replay_new(p, &p->replay);
  if (st) {
    lathe_cuda_plan_free(NULL, p);
    return st;
  }
  *out = p;
  return NULL;
}

/* Constant tensors of function fi on device d (uploaded on first use, then kept by the plan). */
static lathe_status_t consts_on(lathe_plan *p, cuda_dev *d, int fi, lathe_tensor ***out) {
  pthread_mutex_lock(&p->mu);
  lathe_status_t st = NULL;
  if (!p->consts[d->ordinal]) {
    p->consts[d->ordinal] = calloc((size_t)p->n_const_entries + 1, sizeof(lathe_tensor *));
    if (!p->consts[d->ordinal]) st = LATHE_OOM("Execute");
  }
  lathe_tensor **c = st ? NULL : p->consts[d->ordinal] + p->const_base[fi];
  const cuda_fn *f = &p->fns[fi];
  for (int k = 0; !st && k < f->n_consts; k++) {
    int slot = f->const_slots[k];
    if (c[slot]) continue;
    const lathe_pslot *sl = &f->pf->slots[slot];
    lathe_tensor *t;
    st = lathe_cuda_tensor_new(d, &sl->shape, &t);
    lathe_bytes v = lathe_attr_constant_value(sl->node);
    if (!st && v.size) st = lathe_cuda_device.upload(p->cu, t, v.data, v.size);
    if (st) lathe_tensor_release(t);
    else c[slot] = t;
  }
  pthread_mutex_unlock(&p->mu);
  *out = c;
  return st;
}

lathe_status_t lathe_cuda_arenas_take(lathe_plan *p, int device, arena_set **out) {
  pthread_mutex_lock(&p->mu);
  arena_set **pp = &p->spare;
  while (*pp && (*pp)->device != device) pp = &(*pp)->next;
  arena_set *a = *pp;
  if (a) {
    *pp = a->next;
    p->n_spare--;
  }
  pthread_mutex_unlock(&p->mu);
  if (!a) {
    a = calloc(1, sizeof *a);
    if (a) a->fns = calloc((size_t)p->n_fns, sizeof(cuda_arena));
    if (!a || !a->fns) {
      free(a);
      return LATHE_OOM("Execute");
    }
    a->device = device;
  }
  *out = a;
  return NULL;
}

void lathe_cuda_arenas_give_back(lathe_plan *p, arena_set *a) {
  pthread_mutex_lock(&p->mu);
  if (p->n_spare < MAX_SPARE_ARENAS) {
    a->next = p->spare;
    p->spare = a;
    p->n_spare++;
    a = NULL;
  }
  pthread_mutex_unlock(&p->mu);
  lathe_cuda_arena_set_free(p, a);
}

static lathe_status_t arena_ready(cuda_dev *d, const cuda_fn *f, cuda_arena *a) {
  const lathe_pfunc *pf = f->pf;
  if (a->views || !pf->arena_bytes) return NULL;
  a->views = calloc((size_t)pf->n_slots + 1, sizeof(lathe_tensor));
  if (!a->views) return LATHE_OOM("Execute");
  lathe_status_t st = lathe_cuda_malloc(d, (size_t)pf->arena_bytes, &a->mem);
  if (st) {
    free(a->views);
    a->views = NULL;
    return st;
  }
  for (int k = 0; k < pf->n_slots; k++) {
    const lathe_pslot *sl = &pf->slots[k];
    if (sl->offset < 0) continue;
    lathe_tensor *v = &a->views[k];
    v->flags = LATHE_TENSOR_VIEW;
    v->shape = sl->shape;
    for (int i = 0; i < LATHE_MAX_RANK; i++) v->shape.axis_names[i] = NULL;
    v->nbytes = (size_t)sl->nbytes;
    v->data = (void *)(uintptr_t)(a->mem + (lcuDeviceptr)sl->offset);
    v->device = d->ordinal;
    v->dev = &lathe_cuda_device;
    v->dev_ctx = d->cu;
  }
  return NULL;
}

/* ---- execution ---- */
lathe_collective *lathe_cuda_exec_group(lathe_cuda_exec *ex, int *out_replica) {
  *out_replica = ex->replica;
  return ex->group;
}

cuda_dev *lathe_cuda_exec_dev(lathe_cuda_exec *ex) { return ex->d; }
lcuStream lathe_cuda_exec_stream(lathe_cuda_exec *ex) { return ex->stream; }
const lcu_api *lathe_cuda_exec_api(lathe_cuda_exec *ex) { return ex->cu->api; }
bool lathe_cuda_exec_capturing(const lathe_cuda_exec *ex) { return ex->capturing; }

void lathe_cuda_grid(int64_t n, unsigned *blocks, unsigned *threads) {
  *threads = 256;
  int64_t b = (n + 255) / 256;
  if (b < 1) b = 1;
  if (b > 65535 * 8) b = 65535 * 8; /* grid-stride loops cover the rest */
  *blocks = (unsigned)b;
}

lathe_status_t lathe_cuda_launch(lathe_cuda_exec *ex, lcuFunction f, unsigned blocks, unsigned threads,
                                 unsigned shared_bytes, void **args) {
  const lcu_api *api = ex->cu->api;
  if (shared_bytes > 48 * 1024)
    LATHE_CU_TRY(api, cuFuncSetAttribute(f, LCU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)shared_bytes),
                 "lathe:cuda: cuFuncSetAttribute");
  return lathe_cuda_error(api, api->cuLaunchKernel(f, blocks, 1, 1, threads, 1, 1, shared_bytes, ex->stream, args, NULL),
                          "lathe:cuda: cuLaunchKernel");
}

/* Keeps t until the stream is done (releasing it now could hand its memory to another stream). */
static void bury(lathe_cuda_exec *ex, lathe_tensor *t) {
  if (!t || (t->flags & LATHE_TENSOR_VIEW)) return;
  if (ex->n_dead == ex->cap_dead) {
    int nc = ex->cap_dead ? 2 * ex->cap_dead : 64;
    lathe_tensor **n = realloc(ex->dead, sizeof *n * (size_t)nc);
    if (!n) { /* cannot keep it: wait for the stream instead, then release */
      ex->cu->api->cuStreamSynchronize(ex->stream);
      lathe_tensor_release(t);
      return;
    }
    ex->dead = n;
    ex->cap_dead = nc;
  }
  ex->dead[ex->n_dead++] = t;
}

lathe_status_t lathe_cuda_exec_tensor(lathe_cuda_exec *ex, const lathe_shape *shape, lathe_tensor **out) {
  /* Room for the execution's reference first: callers drop theirs at once, so that reference is
   * what keeps the memory alive until the stream is done (bury's fallback would free it early). */
  if (ex->n_dead == ex->cap_dead) {
    int nc = ex->cap_dead ? 2 * ex->cap_dead : 64;
    lathe_tensor **n = realloc(ex->dead, sizeof *n * (size_t)nc);
    if (!n) return LATHE_OOM("lathe:cuda: scratch tensor");
    ex->dead = n;
    ex->cap_dead = nc;
  }
  lathe_tensor *t;
  LATHE_RETURN_IF_ERROR(lathe_cuda_tensor_new(ex->d, shape, &t));
  lathe_tensor_retain(t);
  bury(ex, t); /* the execution's reference, dropped when the stream is done */
  *out = t;
  return NULL;
}

lathe_status_t lathe_cuda_read(lathe_cuda_exec *ex, const lathe_tensor *t, void *dst, size_t nbytes) {
  const lcu_api *api = ex->cu->api;
  if (ex->capturing) /* the value does not exist yet: this program cannot be a graph */
    return lathe_status_new(LATHE_STATUS_UNIMPLEMENTED, "lathe:cuda: a value read back while capturing a CUDA graph");
  LATHE_CU_TRY(api, cuMemcpyDtoHAsync(dst, lathe_cuda_ptr(t), nbytes, ex->stream), "lathe:cuda: reading a value back");
  return lathe_cuda_error(api, api->cuStreamSynchronize(ex->stream), "lathe:cuda: reading a value back");
}

/* The tensor for result slot (a reference): an arena view, the output shell, or fresh memory. */
static lathe_status_t result_tensor(lathe_cuda_exec *ex, int slot, lathe_tensor **out) {
  frame *f = ex->cur;
  const lathe_pslot *sl = &f->f->pf->slots[slot];
  if (sl->offset >= 0 && f->arena->views) {
    *out = &f->arena->views[slot];
    return NULL;
  }
  lathe_tensor *shell = f->shells ? f->shells[slot] : NULL;
  if (shell && !shell->data && shell->nbytes == (size_t)sl->nbytes) {
    lcuDeviceptr p;
    LATHE_RETURN_IF_ERROR(lathe_cuda_malloc(ex->d, shell->nbytes, &p));
    shell->data = (void *)(uintptr_t)p;
    *out = lathe_tensor_retain(shell);
    return NULL;
  }
  return lathe_cuda_tensor_new(ex->d, &sl->shape, out);
}

/* Sub-byte integers: widened to 8 bits around kernels that compute on values, as on the CPU. */
static const char pack_src[] = LT_CUH_PACK;

lathe_dtype lathe_cuda_widened(lathe_dtype dt) {
  if (!lathe_dtype_is_valid(dt) || !lathe_dtype_is_packed(dt)) return dt;
  return lathe_dtype_class_of(dt) == LATHE_CLASS_SINT ? LATHE_DTYPE_INT8 : LATHE_DTYPE_UINT8;
}

static lathe_status_t widen(lathe_cuda_exec *ex, lathe_tensor *t, lathe_tensor **out) {
  lathe_shape s = t->shape;
  s.dtype = lathe_cuda_widened(s.dtype);
  LATHE_RETURN_IF_ERROR(lathe_cuda_exec_tensor(ex, &s, out));
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel(ex->d, pack_src, "lt_unpack", &f));
  lcuDeviceptr p = lathe_cuda_ptr(t), w = lathe_cuda_ptr(*out);
  int64_t n = lathe_shape_size(&t->shape);
  int bits = lathe_dtype_bits(t->shape.dtype), sign = lathe_dtype_class_of(t->shape.dtype) == LATHE_CLASS_SINT;
  void *args[] = {&p, &w, &n, &bits, &sign};
  unsigned b, th;
  lathe_cuda_grid(n, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

lathe_status_t lathe_cuda_pack(lathe_cuda_exec *ex, const lathe_tensor *wide, lathe_tensor *t) {
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel(ex->d, pack_src, "lt_pack", &f));
  lcuDeviceptr p = lathe_cuda_ptr(t), w = lathe_cuda_ptr(wide);
  int64_t n = lathe_shape_size(&t->shape);
  int bits = lathe_dtype_bits(t->shape.dtype);
  void *args[] = {&p, &w, &n, &bits};
  unsigned b, th;
  lathe_cuda_grid((n * bits + 7) / 8, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

/* A copy of t in fresh device memory (for views leaving their arena). */
static lathe_status_t detach(lathe_cuda_exec *ex, lathe_tensor **t) {
  lathe_tensor *c;
  LATHE_RETURN_IF_ERROR(lathe_cuda_tensor_new(ex->d, &(*t)->shape, &c));
  lathe_status_t st = (*t)->nbytes ? lathe_cuda_error(ex->cu->api,
                                                      ex->cu->api->cuMemcpyDtoDAsync(lathe_cuda_ptr(c), lathe_cuda_ptr(*t),
                                                                                     (*t)->nbytes, ex->stream),
                                                      "lathe:cuda: copy")
                                   : NULL;
  if (st) {
    lathe_tensor_release(c);
    return st;
  }
  *t = c;
  return NULL;
}

static lathe_status_t run_node(lathe_cuda_exec *ex, frame *f, int pos, const lathe_pstep *sp) {
  const lathe_pfunc *pf = f->f->pf;
  const lathe_node *n = sp->node;
  enum { MAXS = 16 };
  lathe_tensor *out_s[MAXS], *win_s[MAXS], *wout_s[MAXS];
  int nin = n->n_operands, nout = sp->n_out;
  lathe_tensor **in = f->step_in;
  lathe_tensor **win = nin <= MAXS ? win_s : calloc((size_t)nin, sizeof *win);
  lathe_tensor **out = nout <= MAXS ? out_s : calloc((size_t)nout, sizeof *out);
  lathe_tensor **wout = nout <= MAXS ? wout_s : calloc((size_t)nout, sizeof *wout);
  lathe_status_t st = (!win || !out || !wout) ? LATHE_OOM(lathe_op_name(n->op)) : NULL;
  if (st) goto done;
  memset(out, 0, sizeof *out * (size_t)nout);
  memset(wout, 0, sizeof *wout * (size_t)nout);
  memset(win, 0, sizeof *win * (size_t)nin);
  lathe_op_kind kind = lathe_op_kind_of(n->op);
  bool makes_results = kind == LATHE_KIND_CONTROL || kind == LATHE_KIND_BARRIER;
  for (int k = 0; k < nout && !makes_results; k++) {
    const lathe_pslot *sl = &pf->slots[sp->out[k]];
    if (lathe_op_has(n->op, LATHE_OPF_INPLACE) && sl->offset < 0)
      for (int i = 0; i < nin; i++) { /* a dying, unshared operand (a donated input) */
        lathe_tensor *t = in[i];
        if (pf->slots[sp->in[i]].last_use != pos || (t->flags & LATHE_TENSOR_VIEW) || atomic_load(&t->refs) != 1 ||
            !lathe_shape_equal(&t->shape, &sl->shape) || lathe_dtype_is_packed(sl->shape.dtype))
          continue;
        bool taken = false;
        for (int j = 0; j < k; j++) taken |= out[j] == t;
        if (taken) continue;
        out[k] = lathe_tensor_retain(t);
        break;
      }
    if (!out[k] && (st = result_tensor(ex, sp->out[k], &out[k]))) goto done;
  }
  if (makes_results || lathe_op_has(n->op, LATHE_OPF_PACKED)) {
    st = lathe_cuda_run_kernel(ex, n, in, out);
  } else {
    for (int i = 0; i < nin && !st; i++)
      st = lathe_dtype_is_packed(in[i]->shape.dtype) ? widen(ex, in[i], &win[i]) : (win[i] = lathe_tensor_retain(in[i]), NULL);
    for (int k = 0; k < nout && !st; k++) {
      if (lathe_dtype_is_packed(out[k]->shape.dtype)) {
        lathe_shape ws = out[k]->shape;
        ws.dtype = lathe_cuda_widened(ws.dtype);
        st = lathe_cuda_exec_tensor(ex, &ws, &wout[k]);
      } else {
        wout[k] = lathe_tensor_retain(out[k]);
      }
    }
    lathe_cuda_ewk *bound = f->f->step_k ? f->f->step_k[pos] : NULL;
    if (!st) st = bound ? lathe_cuda_ewk_launch(ex, bound, wout, win) : lathe_cuda_run_kernel(ex, n, win, wout);
    for (int k = 0; k < nout && !st; k++)
      if (wout[k] != out[k]) st = lathe_cuda_pack(ex, wout[k], out[k]);
  }
  for (int k = 0; k < nout && !st && kind == LATHE_KIND_CONTROL; k++)
    if (out[k] && (out[k]->flags & LATHE_TENSOR_VIEW)) st = detach(ex, &out[k]);
  if (st) {
    st = lathe_status_annotate(st, "executing %s (node %d of \"%s\") on lathe:cuda", lathe_op_name(n->op), n->id,
                               pf->fn->name);
    goto done;
  }
  for (int k = 0; k < nout; k++) f->vals[sp->out[k]] = out[k], out[k] = NULL;
done:
  for (int i = 0; win && i < nin; i++) bury(ex, win[i]);
  for (int k = 0; out && k < nout; k++) bury(ex, out[k]);
  for (int k = 0; wout && k < nout; k++) bury(ex, wout[k]);
  if (win != win_s) free(win);
  if (out != out_s) free(out);
  if (wout != wout_s) free(wout);
  return st;
}

/* A region: one generated kernel for a LOOP; a REDUCE region runs its prologue, the reduction
 * and its epilogue in turn (through the region's internal slots). */
static lathe_status_t run_region(lathe_cuda_exec *ex, const lathe_pstep *sp) {
  frame *f = ex->cur;
  const lathe_pfunc *pf = f->f->pf;
  const lathe_pregion *g = &pf->regions[sp->region];
  lathe_status_t st = NULL;
  lathe_cuda_ewk **rk = f->f->region_k;
  if (g->kind == LATHE_PREGION_LOOP) {
    st = lathe_cuda_region_loop(ex, pf, g, rk ? rk[sp->region] : NULL, f->vals, result_tensor);
  } else {
    if (g->prologue >= 0)
      st = lathe_cuda_region_loop(ex, pf, &pf->regions[g->prologue], rk ? rk[g->prologue] : NULL, f->vals, result_tensor);
    lathe_tensor *in = f->vals[g->reduce_in], *out = NULL;
    if (!st && !in) st = lathe_status_new(LATHE_STATUS_INTERNAL, "fused reduction: operand not computed");
    if (!st) st = result_tensor(ex, g->reduce_out, &out);
    if (!st) st = lathe_cuda_run_kernel(ex, g->reduce, &in, &out);
    if (!st) f->vals[g->reduce_out] = out;
    else bury(ex, out);
    if (!st && g->epilogue >= 0)
      st = lathe_cuda_region_loop(ex, pf, &pf->regions[g->epilogue], rk ? rk[g->epilogue] : NULL, f->vals, result_tensor);
  }
  if (st)
    st = lathe_status_annotate(st, "executing a fused region ending in %s (node %d of \"%s\") on lathe:cuda",
                               lathe_op_name(sp->node->op), sp->node->id, pf->fn->name);
  return st;
}

static lathe_status_t run_function(lathe_cuda_exec *ex, int fi, lathe_tensor *const *args, int n_args,
                                   lathe_tensor **outputs, lathe_tensor **shells) {
  const cuda_fn *cf = &ex->plan->fns[fi];
  const lathe_pfunc *pf = cf->pf;
  if (n_args != pf->n_params)
    return lathe_status_new(LATHE_STATUS_INTERNAL, "function \"%s\" takes %d inputs, got %d", pf->fn->name, pf->n_params, n_args);
  frame f = {.f = cf, .fi = fi, .arena = &ex->arenas->fns[fi], .shells = shells};
  f.vals = calloc((size_t)pf->n_slots + 1, sizeof(lathe_tensor *));
  f.step_in = calloc((size_t)cf->max_in + 1, sizeof(lathe_tensor *));
  lathe_status_t st = (!f.vals || !f.step_in) ? LATHE_OOM("Execute") : arena_ready(ex->d, cf, f.arena);
  if (!st) st = consts_on(ex->plan, ex->d, fi, &f.consts);
  frame *saved = ex->cur;
  ex->cur = &f;
  for (int i = 0; !st && i < pf->n_params; i++) f.vals[pf->params[i]] = lathe_tensor_retain(args[i]);
  for (int k = 0; !st && k < cf->n_consts; k++) f.vals[cf->const_slots[k]] = lathe_tensor_retain(f.consts[cf->const_slots[k]]);
  for (int pos = 0; !st && pos < pf->n_steps; pos++) {
    const lathe_pstep *sp = &pf->steps[pos];
    f.step = sp;
    for (int i = 0; i < sp->n_in; i++) f.step_in[i] = f.vals[sp->in[i]];
    st = sp->region >= 0 ? run_region(ex, sp) : run_node(ex, &f, pos, sp);
    for (int d = 0; d < sp->n_dead; d++) {
      bury(ex, f.vals[sp->dead[d]]);
      f.vals[sp->dead[d]] = NULL;
    }
  }
  int made = 0;
  for (; !st && made < pf->n_outputs; made++) {
    outputs[made] = lathe_tensor_retain(f.vals[pf->outputs[made]]);
    if (outputs[made] && (outputs[made]->flags & LATHE_TENSOR_VIEW)) st = detach(ex, &outputs[made]);
  }
  if (st)
    for (int k = 0; k < made; k++) bury(ex, outputs[k]), outputs[k] = NULL;
  for (int i = 0; f.vals && i < pf->n_slots; i++) bury(ex, f.vals[i]);
  free(f.vals);
  free(f.step_in);
  ex->cur = saved;
  return st;
}

lathe_status_t lathe_cuda_exec_call(lathe_cuda_exec *ex, const lathe_function *fn, lathe_tensor *const *inputs,
                                    int n_inputs, lathe_tensor **outputs) {
  int fi = lathe_program_fn_index(ex->plan->prog, fn);
  frame *caller = ex->cur;
  if (fi < 0 || !caller || !caller->step)
    return lathe_status_new(LATHE_STATUS_INTERNAL, "function \"%s\" was not compiled", fn->name);
  const lathe_pfunc *pf = ex->plan->fns[fi].pf;
  int n_caps = pf->n_params - pf->n_declared, cap = -1;
  for (int k = 0; k < caller->step->n_sub; k++)
    if (caller->step->sub_fn[k] == fi) cap = caller->step->sub_cap[k];
  if (cap < 0 || n_inputs != pf->n_declared)
    return lathe_status_new(LATHE_STATUS_INTERNAL, "function \"%s\" called with %d inputs from outside its op", fn->name, n_inputs);
  lathe_tensor **args = malloc(sizeof(lathe_tensor *) * (size_t)(pf->n_params + 1));
  if (!args) return LATHE_OOM("Call");
  for (int i = 0; i < n_inputs; i++) args[i] = inputs[i];
  for (int j = 0; j < n_caps; j++) args[n_inputs + j] = caller->step_in[cap + j];
  lathe_status_t st = run_function(ex, fi, args, pf->n_params, outputs, NULL);
  free(args);
  return st;
}

lathe_status_t lathe_cuda_exec_walk(lathe_cuda_exec *ex, lathe_tensor *const *inputs, int n_inputs, lathe_tensor **results) {
  return run_function(ex, 0, inputs, n_inputs, results, NULL);
}

/* Results into the output shells: moved when unshared, else copied on the stream. */
static lathe_status_t fill_outputs(lathe_cuda_exec *ex, lathe_tensor **results, lathe_tensor **shells, int n) {
  lathe_status_t st = NULL;
  for (int k = 0; k < n; k++) {
    lathe_tensor *r = results[k], *o = shells[k];
    if (r == o) {
      lathe_tensor_release(r);
      continue;
    }
    if (!st && !(r->flags & LATHE_TENSOR_VIEW) && atomic_load(&r->refs) == 1 && r->nbytes == o->nbytes &&
        r->device == o->device) {
      o->data = r->data;
      r->data = NULL;
      lathe_tensor_release(r);
      continue;
    }
    if (!st) {
      lcuDeviceptr p;
      st = lathe_cuda_malloc(ex->d, o->nbytes, &p);
      if (!st) {
        o->data = (void *)(uintptr_t)p;
        if (o->nbytes)
          st = lathe_cuda_error(ex->cu->api, ex->cu->api->cuMemcpyDtoDAsync(p, lathe_cuda_ptr(r), o->nbytes, ex->stream),
                                "lathe:cuda: output copy");
      }
    }
    bury(ex, r);
  }
  return st;
}

/* The CUDA event behind an execution's lathe_event lives as long as that event: later work on
 * the same device waits on it. */
typedef struct native_event {
  const lcu_api *api;
  cuda_dev *d;
  lcuEvent ev;
} native_event;

static void free_native_event(void *p) {
  native_event *n = p;
  n->api->cuEventDestroy(n->ev);
  free(n);
}

/* A reader of the outputs waits on the CUDA event itself rather than for the completion thread
 * (set only for executions whose success the GPU alone decides: no kernel error flags). */
static lathe_status_t wait_native_event(void *p) {
  native_event *n = p;
  LATHE_RETURN_IF_ERROR(lathe_cuda_use(n->d));
  return lathe_cuda_error(n->api, n->api->cuEventSynchronize(n->ev), "lathe:cuda: execution");
}

lathe_status_t lathe_cuda_exec_error_flag(lathe_cuda_exec *ex, const char *message, lcuDeviceptr *out_flag,
                                         uint32_t *out_code) {
  if (ex->n_err_msgs == 8) return lathe_status_new(LATHE_STATUS_INTERNAL, "lathe:cuda: too many error kinds in one run");
  if (!ex->err_word) {
    lathe_shape s;
    memset(&s, 0, sizeof s);
    s.dtype = LATHE_DTYPE_UINT32;
    LATHE_RETURN_IF_ERROR(lathe_cuda_exec_tensor(ex, &s, &ex->err_word));
    LATHE_CU_TRY(ex->cu->api, cuMemsetD8Async(lathe_cuda_ptr(ex->err_word), 0, 4, ex->stream), "lathe:cuda: error flag");
  }
  size_t n = strlen(message) + 1;
  char *m = malloc(n);
  if (!m) return LATHE_OOM("lathe:cuda");
  memcpy(m, message, n);
  ex->err_msgs[ex->n_err_msgs] = m;
  *out_code = 1u << ex->n_err_msgs++;
  *out_flag = lathe_cuda_ptr(ex->err_word);
  return NULL;
}

/* Everything an execution holds goes once its stream is done (on the completion thread). */
static void finish(void *arg, lathe_status_t st) {
  lathe_cuda_exec *ex = arg;
  if (!st && ex->err_word) { /* the stream is done: read what the kernels reported */
    uint32_t w = 0;
    const lcu_api *api = ex->cu->api;
    st = lathe_cuda_use(ex->d);
    if (!st) st = lathe_cuda_error(api, api->cuMemcpyDtoHAsync(&w, lathe_cuda_ptr(ex->err_word), 4, ex->stream), "lathe:cuda: error flag");
    if (!st) st = lathe_cuda_error(api, api->cuStreamSynchronize(ex->stream), "lathe:cuda: error flag");
    for (int k = 0; !st && k < ex->n_err_msgs; k++)
      if (w & (1u << k)) st = lathe_status_new(LATHE_STATUS_INVALID_ARGUMENT, "%s", ex->err_msgs[k]);
  }
  for (int k = 0; k < ex->n_err_msgs; k++) free(ex->err_msgs[k]);
  for (int i = 0; i < ex->n_dead; i++) lathe_tensor_release(ex->dead[i]);
  for (int i = 0; i < ex->n_inputs; i++) lathe_tensor_release(ex->inputs[i]);
  if (ex->arenas) lathe_cuda_arenas_give_back(ex->plan, ex->arenas);
  if (ex->ev && !ex->ev_owned) ex->cu->api->cuEventDestroy(ex->ev);
  lathe_collective_release(ex->group);
  ex->release(ex->token);
  lathe_event_signal(ex->done, st);
  lathe_event_release(ex->done);
  free(ex->dead);
  free(ex->inputs);
  free(ex);
}

lathe_status_t lathe_cuda_exec_wait_inputs(lathe_cuda_exec *ex, const lathe_launch *l) {
  const lcu_api *api = ex->cu->api;
  lathe_status_t st = NULL;
  /* inputs still being computed: a CUDA event of this device is waited for on the stream; any
   * other (another GPU, the host) on the host */
  for (int i = 0; !st && i < l->n_inputs; i++) {
    lathe_event *ev = atomic_load(&l->inputs[i]->ready);
    if (!ev || lathe_event_is_ready(ev)) {
      st = lathe_tensor_wait(l->inputs[i]);
      continue;
    }
    /* made by an earlier SPMD launch of this GPU's worker: queued already, on this same stream */
    if (l->group && lathe_event_native(ev, lathe_cuda_spmd_key(ex->d))) continue;
    native_event *native = lathe_event_native(ev, ex->d);
    st = native ? lathe_cuda_error(api, api->cuStreamWaitEvent(ex->stream, native->ev, 0), "Execute: cuStreamWaitEvent")
                : lathe_tensor_wait(l->inputs[i]);
  }
  return st;
}

/* The ordinary execution: the program's steps walked and launched one by one. */
static lathe_status_t walk_launch(lathe_cuda_exec *ex, const lathe_launch *l) {
  lathe_plan *plan = ex->plan;
  /* SPMD runs keep to one stream per device, so that their collectives run in launch order */
  ex->stream = l->group ? ex->d->streams[0]
                        : ex->d->streams[atomic_fetch_add(&ex->d->next_stream, 1) % (unsigned)ex->d->n_streams];
  lathe_status_t st = lathe_cuda_exec_wait_inputs(ex, l);
  if (!st) st = lathe_cuda_arenas_take(plan, l->device, &ex->arenas);
  lathe_tensor *res_s[16];
  lathe_tensor **res = l->n_outputs <= 16 ? res_s : calloc((size_t)l->n_outputs, sizeof *res);
  lathe_tensor **by_slot = NULL;
  if (!st && !res) st = LATHE_OOM("Execute");
  if (!st) {
    const lathe_pfunc *pf = plan->fns[0].pf;
    by_slot = calloc((size_t)pf->n_slots + 1, sizeof(lathe_tensor *));
    if (!by_slot) st = LATHE_OOM("Execute");
    for (int k = pf->n_outputs - 1; !st && k >= 0; k--)
      if (pf->slots[pf->outputs[k]].kind == LATHE_PSLOT_VALUE) by_slot[pf->outputs[k]] = l->outputs[k];
  }
  if (!st) st = run_function(ex, 0, l->inputs, l->n_inputs, res, by_slot);
  if (!st) st = fill_outputs(ex, res, l->outputs, l->n_outputs);
  free(by_slot);
  if (res != res_s) free(res);
  return st;
}

static lathe_status_t copy_status(lathe_status_t st) {
  return st ? lathe_status_new(lathe_status_code_of(st), "%s", lathe_status_message(st)) : NULL;
}

lathe_status_t lathe_cuda_execute_now(void *ctx, lathe_plan *plan, const lathe_launch *l, lathe_event *given) {
  lathe_cuda *cu = ctx;
  const lcu_api *api = cu->api;
  lathe_cuda_exec *ex = calloc(1, sizeof *ex);
  lathe_status_t st = ex ? NULL : LATHE_OOM("Execute");
  if (ex) {
    ex->cu = cu;
    ex->d = &cu->devs[l->device];
    ex->plan = plan;
    ex->release = l->release;
    ex->token = l->token;
    ex->replica = l->replica;
    ex->group = l->group;
    ex->done = lathe_event_retain(given);
    ex->n_inputs = l->n_inputs;
    ex->inputs = malloc(sizeof(lathe_tensor *) * (size_t)(l->n_inputs + 1));
    if (!ex->inputs) { /* nothing to keep them in: let them go now */
      for (int i = 0; i < l->n_inputs; i++) lathe_tensor_release(l->inputs[i]);
      ex->n_inputs = 0;
      st = LATHE_OOM("Execute");
    }
    for (int i = 0; !st && i < l->n_inputs; i++) ex->inputs[i] = l->inputs[i];
  }
  if (!st) st = lathe_cuda_use(ex->d);
  if (!st && !ex->done) st = lathe_event_new(&ex->done);
  bool replayed = false;
  if (!st && plan->replay && !l->group) st = lathe_cuda_replay(ex, l, &replayed);
  if (!st && !replayed) st = walk_launch(ex, l);
  if (!st) st = lathe_cuda_error(api, api->cuEventCreate(&ex->ev, LCU_EVENT_DISABLE_TIMING), "Execute: cuEventCreate");
  if (!st) st = lathe_cuda_error(api, api->cuEventRecord(ex->ev, ex->stream), "Execute: cuEventRecord");
  if (st) {
    if (ex && ex->stream) api->cuStreamSynchronize(ex->stream); /* launches already queued must end first */
    if (ex && ex->done) {
      finish(ex, copy_status(given ? st : NULL)); /* without `given`, nothing waits on the event */
    } else if (ex) { /* ex->done is NULL: no `given` */
      for (int i = 0; i < ex->n_inputs; i++) lathe_tensor_release(ex->inputs[i]);
      lathe_collective_release(l->group);
      l->release(l->token);
      free(ex->inputs);
      free(ex);
    } else {
      for (int i = 0; i < l->n_inputs; i++) lathe_tensor_release(l->inputs[i]);
      lathe_collective_release(l->group);
      l->release(l->token);
      if (given) lathe_event_signal(given, copy_status(st));
    }
    return st;
  }
  /* the outputs' event: signalled by the completion thread; the CUDA event lets later work on
   * this device wait on the GPU instead of the host */
  native_event *nat = given ? NULL : malloc(sizeof *nat); /* `given` is shared already */
  if (nat) {
    nat->api = api;
    nat->d = ex->d;
    nat->ev = ex->ev;
    ex->ev_owned = true;
    lathe_event_set_native(ex->done, ex->d, nat, free_native_event);
    if (!ex->err_word) lathe_event_set_native_wait(ex->done, wait_native_event);
  }
  for (int k = 0; k < l->n_outputs && !given; k++) atomic_store(&l->outputs[k]->ready, lathe_event_retain(ex->done));
  return lathe_cuda_when_done(ex->d, ex->ev, finish, ex);
}

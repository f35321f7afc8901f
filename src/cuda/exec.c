/* exec.c -- lathe:cuda's side of the executor (src/exec): plans with their kernels bound at
 * compile, memory, copies and launches. An execution walks the program's steps on the calling
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

void lathe_cuda_plan_free(void *ctx, lathe_plan *p) {
  (void)ctx;
  if (!p) return;
  lathe_cuda_replay_free(p);
  for (int i = 0; p->fns && i < p->x.n_fns; i++) {
    for (int k = 0; p->fns[i].step_k && k < p->x.fns[i].pf->n_steps; k++) lathe_cuda_ewk_free(p->fns[i].step_k[k]);
    for (int k = 0; p->fns[i].region_k && k < p->x.fns[i].pf->n_regions; k++) lathe_cuda_ewk_free(p->fns[i].region_k[k]);
    free(p->fns[i].step_k);
    free(p->fns[i].region_k);
  }
  free(p->fns);
  lathe_xplan_release(&p->x);
  free(p);
}

static lathe_status_t check_supported(const lathe_node *n) {
  lathe_op_kind k = lathe_op_kind_of(n->op);
  if (k == LATHE_KIND_INTERNAL || n->op == LATHE_OP_PARAMETER || n->op == LATHE_OP_CONSTANT) return NULL;
  lathe_dtype dt = n->n_operands ? n->in[0]->shape.dtype : (n->multi ? n->out_shapes[0].dtype : n->shape.dtype);
  if (!lathe_cuda_supports_op(n->op, dt) && k == LATHE_KIND_COLLECTIVE && n->op != LATHE_OP_ALL_REDUCE)
    return LATHE_UNIMPL("%s: not implemented on lathe:cuda yet (its NCCL path is written but has not run on GPUs; "
                        "lathe:cpu runs it)", lathe_op_name(n->op));
  if (!lathe_cuda_supports_op(n->op, dt))
    return LATHE_UNIMPL("%s: not implemented on lathe:cuda for %s", lathe_op_name(n->op), lathe_dtype_name(dt));
  return NULL;
}

/* ---- kernels bound at compile ----
 * Every elementwise step and LOOP or ROWS region gets its kernel now: sources made, then compiled
 * (or found in the caches) in batches of up to BIND_BATCH kernels per NVRTC program
 * (lathe_cuda_kernels_batch) by several threads at once, then loaded on every GPU. A kernel that
 * cannot be made (UNIMPLEMENTED) stays unbound: its step then fails as it runs, as before. The
 * lasting texts the other steps will launch (lathe_cuda_texts_of) are compiled and loaded by the
 * same threads, so that a first execution finds them ready instead of compiling each at its
 * first launch, one after the other.
 * Batches of 8: build/nvrtc_bench compiled a plan's kernels in 0.65-0.72x the time of one program
 * each on the 2-core machine, about as fast as all in one program (NVRTC's fixed cost per program
 * is gone by then), and several batches keep threads busy where NVRTC compiles programs in
 * parallel (it did not on the H200's). */
enum { BIND_BATCH = 8 };
typedef struct bind_job {
  lathe_cuda *cu;
  lathe_cuda_ewk **ks;
  int n;              /* kernels: after the texts, jobs of BIND_BATCH kernels */
  const char **texts; /* texts, per device: jobs 0 .. n_text_jobs - 1 (taken first: the long compiles) */
  int n_texts, n_text_jobs;
  int total;
  atomic_int next;
  lathe_status_t st; /* the first error */
  pthread_mutex_t mu;
} bind_job;

static void *bind_worker(void *arg) {
  bind_job *j = arg;
  for (int i; (i = atomic_fetch_add(&j->next, 1)) < j->total;) {
    if (i < j->n_text_jobs) { /* best effort: a text that fails here fails again, with its error, at its launch */
      lathe_status_free(lathe_cuda_module_prepare(&j->cu->devs[i / j->n_texts], j->texts[i % j->n_texts]));
      continue;
    }
    int b = (i - j->n_text_jobs) * BIND_BATCH, m = j->n - b < BIND_BATCH ? j->n - b : BIND_BATCH;
    lathe_status_t st = lathe_cuda_ewk_resolve_batch(j->cu, j->ks + b, m, 0);
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

/* The distinct texts of a plan's steps, gathered by add_text. */
typedef struct text_set {
  const char **v;
  int n, cap;
  bool oom;
} text_set;

static void add_text(void *ctx, const char *source) {
  text_set *t = ctx;
  if (!source || t->oom) return;
  for (int i = 0; i < t->n; i++)
    if (t->v[i] == source) return;
  if (t->n == t->cap) {
    int cap = t->cap ? 2 * t->cap : 16;
    const char **v = realloc(t->v, sizeof *v * (size_t)cap);
    if (!v) {
      t->oom = true;
      return;
    }
    t->v = v, t->cap = cap;
  }
  t->v[t->n++] = source;
}

static void plan_texts(const cuda_dev *d, const lathe_pfunc *pf, text_set *ts) {
  for (int r = 0; r < pf->n_regions; r++)
    if (pf->regions[r].kind == LATHE_PREGION_REDUCE) lathe_cuda_texts_of(d, pf->regions[r].reduce, add_text, ts);
  for (int s = 0; s < pf->n_steps; s++) {
    const lathe_pstep *sp = &pf->steps[s];
    if (sp->region < 0 && !lathe_cuda_ewk_step_kind(sp->node)) lathe_cuda_texts_of(d, sp->node, add_text, ts);
  }
}

static lathe_status_t bind_kernels(lathe_cuda *cu, lathe_plan *p) {
  int total = 0;
  lathe_status_t st = NULL;
  text_set ts = {0};
  for (int i = 0; !st && i < p->x.n_fns; i++) {
    cuda_fn *f = &p->fns[i];
    const lathe_pfunc *pf = p->x.fns[i].pf;
    if (pf->dynamic) continue;
    f->step_k = calloc((size_t)pf->n_steps + 1, sizeof *f->step_k);
    f->region_k = calloc((size_t)pf->n_regions + 1, sizeof *f->region_k);
    if (!f->step_k || !f->region_k) st = LATHE_OOM("Compile");
    /* REDUCE regions first: a prologue that a fused one computes itself needs no kernel of its own */
    bool *inside = st ? NULL : calloc((size_t)pf->n_regions + 1, sizeof *inside);
    if (!st && !inside) st = LATHE_OOM("Compile");
    for (int pass = 0; pass < 2; pass++)
      for (int r = 0; !st && r < pf->n_regions; r++) {
        const lathe_pregion *g = &pf->regions[r];
        if ((g->kind == LATHE_PREGION_REDUCE) != (pass == 0) || inside[r]) continue;
        if (!(st = keep_unimplemented(lathe_cuda_ewk_region(cu, pf, g, &f->region_k[r]))) && f->region_k[r]) {
          total++;
          if (g->kind == LATHE_PREGION_REDUCE) inside[g->prologue] = true;
        }
      }
    free(inside);
    for (int s = 0; !st && s < pf->n_steps; s++) {
      const lathe_pstep *sp = &pf->steps[s];
      if (sp->region >= 0 || !lathe_cuda_ewk_step_kind(sp->node)) continue;
      const lathe_shape *in[LATHE_PMEMBER_MAX_IN];
      lathe_shape ws[LATHE_PMEMBER_MAX_IN], wo = pf->slots[sp->out[0]].shape;
      for (int k = 0; k < sp->n_in && k < LATHE_PMEMBER_MAX_IN; k++) {
        ws[k] = pf->slots[sp->in[k]].shape;
        ws[k].dtype = lathe_dtype_widened(ws[k].dtype);
        in[k] = &ws[k];
      }
      if (!(st = keep_unimplemented(lathe_cuda_ewk_step(cu, sp->node, in, &wo, &f->step_k[s]))) && f->step_k[s]) total++;
    }
    if (!st && cu->n_devices) plan_texts(&cu->devs[0], pf, &ts);
  }
  if (st || (!total && !ts.n) || !cu->n_devices) {
    free(ts.v);
    return st;
  }
  lathe_cuda_ewk **ks = malloc(sizeof *ks * (size_t)(total + 1));
  lathe_cuda_ewk **uniq = malloc(sizeof *uniq * (size_t)(total + 1));
  size_t *len = malloc(sizeof *len * (size_t)(total + 1));
  if (!ks || !uniq || !len) {
    free(uniq);
    free(len);
    free(ks);
    free(ts.v);
    return LATHE_OOM("Compile");
  }
  int n = 0;
  for (int i = 0; i < p->x.n_fns; i++) {
    cuda_fn *f = &p->fns[i];
    for (int s = 0; f->step_k && s < p->x.fns[i].pf->n_steps; s++)
      if (f->step_k[s]) ks[n++] = f->step_k[s];
    for (int r = 0; f->region_k && r < p->x.fns[i].pf->n_regions; r++)
      if (f->region_k[r]) ks[n++] = f->region_k[r];
  }
  /* identical kernels (a region shape that recurs) compile once: the threads take the first of
   * each, the rest then find it in the module table */
  int nu = 0;
  for (int i = 0; i < n; i++) {
    len[i] = strlen(lathe_cuda_ewk_source(ks[i]));
    bool seen = false;
    for (int k = 0; k < i && !seen; k++)
      seen = len[k] == len[i] && !memcmp(lathe_cuda_ewk_source(ks[k]), lathe_cuda_ewk_source(ks[i]), len[i]);
    if (!seen) uniq[nu++] = ks[i];
  }
  free(len);
  bind_job j = {.cu = cu, .ks = uniq, .n = nu, .texts = ts.v, .n_texts = ts.n, .n_text_jobs = ts.n * cu->n_devices};
  j.total = j.n_text_jobs + (nu + BIND_BATCH - 1) / BIND_BATCH;
  pthread_mutex_init(&j.mu, NULL);
  enum { MAX_BINDERS = 8 };
  pthread_t tid[MAX_BINDERS];
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int nt = j.total < 2 ? 1 : (int)(cpus < 2 ? 1 : cpus > MAX_BINDERS ? MAX_BINDERS : cpus), started = 0;
  if (nt > j.total) nt = j.total;
  for (int t = 1; t < nt; t++)
    if (pthread_create(&tid[started], NULL, bind_worker, &j) == 0) started++;
  bind_worker(&j);
  for (int t = 0; t < started; t++) pthread_join(tid[t], NULL);
  st = j.st;
  for (int d = 1; !st && d < cu->n_devices; d++) /* other GPUs: from the disk cache, or compiled again */
    st = lathe_cuda_ewk_resolve_batch(cu, uniq, nu, d);
  for (int d = 0; !st && d < cu->n_devices; d++) /* the repeats: their modules loaded by now */
    for (int i = 0; !st && i < n; i++) st = lathe_cuda_ewk_resolve(cu, ks[i], d);
  pthread_mutex_destroy(&j.mu);
  free(uniq);
  free(ks);
  free(ts.v);
  return st;
}

/* ---- dumps (option dump=): the kernels of each step, their sources once at the end ---- */
/* The number of source in ts, by content (a kernel that recurs is listed once). */
static int text_index(text_set *ts, const char *source) {
  for (int i = 0; i < ts->n; i++)
    if (!strcmp(ts->v[i], source)) return i;
  int before = ts->n;
  add_text(ts, source);
  return before; /* without memory to keep it: numbered past the list, not printed */
}

typedef struct step_texts {
  text_set *ts;
  FILE *f;
  int n; /* texts printed for the step */
} step_texts;

static void print_text(void *ctx, const char *source) {
  step_texts *c = ctx;
  fprintf(c->f, " #%d", text_index(c->ts, source));
  c->n++;
}

void lathe_cuda_dump_plan(void *ctx, const lathe_plan *p, FILE *f) {
  lathe_cuda *cu = ctx;
  const cuda_dev *d = cu->n_devices ? &cu->devs[0] : NULL;
  text_set ts = {0};
  step_texts c = {&ts, f, 0};
  fprintf(f, "# \"%s\" on lathe:cuda: each step's kernels (#k: the sources below). Elementwise steps and LOOP/ROWS\n"
             "# regions have their own kernel, generated and compiled with the plan; the other families launch lathe's\n"
             "# kernels (the texts listed, compiled with the plan) or a library: cuBLASLt, cuDNN and cuFFT choose at\n"
             "# a shape's first run, noted in cuda-libraries.txt\n",
          p->x.prog->name ? p->x.prog->name : "");
  for (int i = 0; i < p->x.n_fns; i++) {
    const lathe_pfunc *pf = p->x.fns[i].pf;
    const cuda_fn *cf = &p->fns[i];
    fprintf(f, "\nfunction \"%s\": %d step(s)%s\n", pf->fn->name, pf->n_steps, pf->dynamic ? " (dynamic shapes: kernels made per run)" : "");
    for (int s = 0; s < pf->n_steps; s++) {
      const lathe_pstep *sp = &pf->steps[s];
      char name[200];
      const char *kind;
      lathe_exec_step_name(pf, s, name, sizeof name, &kind);
      fprintf(f, "  %4d: %s [%s]", s, name, kind);
      lathe_cuda_ewk *k = sp->region >= 0 ? (cf->region_k ? cf->region_k[sp->region] : NULL) : (cf->step_k ? cf->step_k[s] : NULL);
      if (k) {
        fprintf(f, ": kernel %s #%d\n", lathe_cuda_ewk_name(k), text_index(&ts, lathe_cuda_ewk_source(k)));
        continue;
      }
      c.n = 0;
      fprintf(f, ":");
      if (d && sp->region >= 0 && pf->regions[sp->region].kind == LATHE_PREGION_REDUCE)
        lathe_cuda_texts_of(d, pf->regions[sp->region].reduce, print_text, &c);
      else if (d && sp->region < 0)
        lathe_cuda_texts_of(d, sp->node, print_text, &c);
      int kd = sp->region < 0 ? (int)lathe_op_kind_of(sp->node->op) : -1;
      const char *lib = kd == LATHE_KIND_DOT ? " cuBLASLt where it takes the shape" : kd == LATHE_KIND_CONV ? " cuDNN where measured faster" : "";
      fprintf(f, "%s%s\n", lib, !c.n && !*lib ? " kernels chosen at run time" : "");
    }
  }
  for (int i = 0; i < ts.n; i++) fprintf(f, "\n// ---- #%d ----\n%s\n", i, ts.v[i]);
  free(ts.v);
}

extern const lathe_exec_device lathe_cuda_exec_device;

lathe_status_t lathe_cuda_compile(void *ctx, const lathe_program *prog, lathe_plan **out) {
  lathe_cuda *cu = ctx;
  lathe_plan *p = calloc(1, sizeof *p);
  if (!p) return LATHE_OOM("Compile");
  p->cu = cu;
  lathe_status_t st = lathe_xplan_init(&p->x, &lathe_cuda_exec_device, cu, cu->n_devices, prog, check_supported);
  /* in_place=1: the frame takes the launch's inputs and drops each after its last use (to the
   * stream's end), so that a donated input held by nothing else can take a LOOP region's result;
   * otherwise the execution keeps them to its end, and every input has two references */
  p->x.takes_inputs = cu->loop_in_place;
  if (!st && !(p->fns = calloc((size_t)prog->n_fns + 1, sizeof *p->fns))) st = LATHE_OOM("Compile");
  if (!st) st = bind_kernels(cu, p);
  if (!st) st = lathe_cuda_replay_new(p, &p->replay);
  p->x.trace_replay = cu->trace_graphs;
  if (st) {
    lathe_cuda_plan_free(NULL, p);
    return st;
  }
  *out = p;
  return NULL;
}

/* ---- memory of a plan on GPU `domain` ---- */
static void view_init(void *dev, int domain, lathe_tensor *v) {
  v->device = domain;
  v->dev = &lathe_cuda_device;
  v->dev_ctx = dev;
}

static lathe_status_t const_new(void *dev, int domain, const lathe_pslot *sl, lathe_tensor **out) {
  lathe_cuda *cu = dev;
  lathe_tensor *t;
  LATHE_RETURN_IF_ERROR(lathe_cuda_tensor_new(&cu->devs[domain], &sl->shape, &t));
  lathe_bytes v = lathe_attr_constant_value(sl->node);
  lathe_status_t st = v.size ? lathe_cuda_device.upload(cu, t, v.data, v.size) : NULL;
  /* An execution's stream waits for its parameters, not for its constants: a small upload is
   * queued on the upload stream, so the first execution, which makes them, waits for them here
   * (once per plan; a GPU kept busy by other processes once let a product read one unwritten). */
  if (!st) st = lathe_tensor_wait(t);
  if (st) {
    lathe_tensor_release(t);
    return st;
  }
  *out = t;
  return NULL;
}

/* ---- execution ---- */
lathe_collective *lathe_cuda_exec_group(lathe_cuda_exec *ex, int *out_replica) {
  *out_replica = ex->x.replica;
  return ex->x.group;
}

static lathe_cuda_exec *cuda_exec(lathe_exec *x) { return (lathe_cuda_exec *)x; }

cuda_dev *lathe_cuda_exec_dev(lathe_cuda_exec *ex) { return ex->d; }
lcuStream lathe_cuda_exec_stream(lathe_cuda_exec *ex) { return ex->stream; }
const lcu_api *lathe_cuda_exec_api(lathe_cuda_exec *ex) { return ex->cu->api; }
const char *lathe_cuda_exec_dump_dir(const lathe_cuda_exec *ex) { return ex->plan->x.prog->options.dump_dir; }
lathe_trace *lathe_cuda_exec_trace(const lathe_cuda_exec *ex) { return ex->plan->x.prog->options.trace; }
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

static bool push(lathe_tensor ***list, int *n, int *cap, lathe_tensor *t) {
  if (*n == *cap) {
    int nc = *cap ? 2 * *cap : 16;
    lathe_tensor **l = realloc(*list, sizeof *l * (size_t)nc);
    if (!l) return false;
    *list = l, *cap = nc;
  }
  (*list)[(*n)++] = t;
  return true;
}

lathe_status_t lathe_cuda_exec_scratch(lathe_cuda_exec *ex, const lathe_shape *shape, bool reuse, lathe_tensor **out) {
  size_t need = (size_t)lathe_shape_byte_size(shape);
  int best = -1;
  /* the smallest that fits, and not more than twice the need (a small request would otherwise
   * hold a large buffer that a later large one then allocates again) */
  for (int i = 0; reuse && i < ex->n_free_scratch; i++) {
    size_t have = ex->free_scratch[i]->nbytes;
    if (have >= need && have <= 2 * need + 65536 && (best < 0 || have < ex->free_scratch[best]->nbytes)) best = i;
  }
  lathe_tensor *t;
  if (best >= 0) {
    t = ex->free_scratch[best];
    ex->free_scratch[best] = ex->free_scratch[--ex->n_free_scratch];
  } else {
    LATHE_RETURN_IF_ERROR(lathe_cuda_exec_tensor(ex, shape, &t));
    lathe_tensor_release(t); /* the execution keeps its own reference until the stream is done */
  }
  /* not listed (no memory for the list): kept to the execution's end, as before reuse */
  push(&ex->step_scratch, &ex->n_step_scratch, &ex->cap_step_scratch, t);
  *out = t;
  return NULL;
}

int lathe_cuda_exec_scratch_mark(const lathe_cuda_exec *ex) { return ex->n_step_scratch; }

void lathe_cuda_exec_scratch_done(lathe_cuda_exec *ex, int mark) {
  for (int i = mark; i < ex->n_step_scratch; i++)
    push(&ex->free_scratch, &ex->n_free_scratch, &ex->cap_free_scratch, ex->step_scratch[i]);
  if (mark < ex->n_step_scratch) ex->n_step_scratch = mark;
}

lathe_status_t lathe_cuda_read(lathe_cuda_exec *ex, const lathe_tensor *t, void *dst, size_t nbytes) {
  const lcu_api *api = ex->cu->api;
  if (ex->capturing) /* the value does not exist yet: this program cannot be a graph */
    return lathe_status_new(LATHE_STATUS_UNIMPLEMENTED, "lathe:cuda: a value read back while capturing a CUDA graph");
  LATHE_CU_TRY(api, cuMemcpyDtoHAsync(dst, lathe_cuda_ptr(t), nbytes, ex->stream), "lathe:cuda: reading a value back");
  return lathe_cuda_error(api, api->cuStreamSynchronize(ex->stream), "lathe:cuda: reading a value back");
}

/* A region's results (lathe_cuda_region_loop's callback). */
static lathe_status_t result_tensor(lathe_cuda_exec *ex, int slot, lathe_tensor **out) { return lathe_exec_result(&ex->x, slot, out); }

static lathe_status_t tensor_new(lathe_exec *x, const lathe_shape *shape, lathe_tensor **out) {
  return lathe_cuda_tensor_new(cuda_exec(x)->d, shape, out);
}

static lathe_status_t scratch_new(lathe_exec *x, const lathe_shape *shape, lathe_tensor **out) {
  return lathe_cuda_exec_tensor(cuda_exec(x), shape, out);
}

static lathe_status_t shell_fill(lathe_exec *x, lathe_tensor *shell) {
  lcuDeviceptr p;
  LATHE_RETURN_IF_ERROR(lathe_cuda_malloc(cuda_exec(x)->d, shell->nbytes, &p));
  shell->data = (void *)(uintptr_t)p;
  return NULL;
}

static lathe_status_t copy(lathe_exec *x, const lathe_tensor *src, lathe_tensor *dst) {
  lathe_cuda_exec *ex = cuda_exec(x);
  return lathe_cuda_error(ex->cu->api, ex->cu->api->cuMemcpyDtoDAsync(lathe_cuda_ptr(dst), lathe_cuda_ptr(src), dst->nbytes, ex->stream),
                          "lathe:cuda: copy");
}

static void drop(lathe_exec *x, lathe_tensor *t) { bury(cuda_exec(x), t); }

static lathe_status_t read_bytes(lathe_exec *x, const lathe_tensor *t, void *dst, size_t nbytes) {
  return lathe_cuda_read(cuda_exec(x), t, dst, nbytes);
}

/* Sub-byte integers: widened to 8 bits around kernels that compute on values, as on the CPU. */
static const char pack_src[] = LT_CUH_PACK;


static lathe_status_t widen(lathe_exec *x, lathe_tensor *t, lathe_tensor **out) {
  lathe_cuda_exec *ex = cuda_exec(x);
  lathe_shape s = t->shape;
  s.dtype = lathe_dtype_widened(s.dtype);
  LATHE_RETURN_IF_ERROR(lathe_cuda_exec_tensor(ex, &s, out));
  lcuFunction f;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(ex->d, pack_src, "lt_unpack", &f));
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
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(ex->d, pack_src, "lt_pack", &f));
  lcuDeviceptr p = lathe_cuda_ptr(t), w = lathe_cuda_ptr(wide);
  int64_t n = lathe_shape_size(&t->shape);
  int bits = lathe_dtype_bits(t->shape.dtype);
  void *args[] = {&p, &w, &n, &bits};
  unsigned b, th;
  lathe_cuda_grid((n * bits + 7) / 8, &b, &th);
  return lathe_cuda_launch(ex, f, b, th, 0, args);
}

static lathe_status_t narrow(lathe_exec *x, const lathe_tensor *wide, lathe_tensor *t) { return lathe_cuda_pack(cuda_exec(x), wide, t); }

/* A step: its kernel bound at compile when it has one, else the family's. */
static lathe_status_t launch(lathe_exec *x, int fi, int pos, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  lathe_cuda_exec *ex = cuda_exec(x);
  lathe_cuda_ewk *const *sk = ex->plan->fns[fi].step_k;
  lathe_cuda_ewk *bound = sk && pos >= 0 ? sk[pos] : NULL;
  int mark = lathe_cuda_exec_scratch_mark(ex);
  lathe_status_t st = bound ? lathe_cuda_ewk_launch(ex, bound, out, in) : lathe_cuda_run_kernel(ex, n, in, out);
  lathe_cuda_exec_scratch_done(ex, mark);
  return st;
}

/* A REDUCE region with a fused kernel (reduce_fused.c): its prologue and reduction at once. */
static lathe_status_t launch_reduce(lathe_exec *x, int pos, int region, bool *done) {
  (void)pos;
  lathe_cuda_exec *ex = cuda_exec(x);
  lathe_cuda_ewk *const *rk = ex->plan->fns[lathe_exec_fn_index(x)].region_k;
  *done = rk && rk[region];
  if (!*done) return NULL;
  const lathe_pfunc *pf = lathe_exec_pfunc(x);
  int mark = lathe_cuda_exec_scratch_mark(ex);
  lathe_status_t st = lathe_cuda_region_reduce(ex, pf, &pf->regions[region], rk[region], lathe_exec_vals(x), result_tensor);
  lathe_cuda_exec_scratch_done(ex, mark);
  return st;
}

/* A LOOP or ROWS region: one generated kernel (bound at compile when it could be made then). A
 * LOOP's result may take a donated input's memory (an optimizer's update written over the
 * weights and moments it reads): the stream orders every earlier use of that memory before it. */
static lathe_status_t launch_loop(lathe_exec *x, int pos, int region, bool in_place) {
  lathe_cuda_exec *ex = cuda_exec(x);
  const lathe_pfunc *pf = lathe_exec_pfunc(x);
  lathe_cuda_ewk *const *rk = ex->plan->fns[lathe_exec_fn_index(x)].region_k;
  int mark = lathe_cuda_exec_scratch_mark(ex);
  lathe_status_t st = lathe_cuda_region_loop(ex, pf, &pf->regions[region], rk ? rk[region] : NULL, pos,
                                             in_place && ex->cu->loop_in_place, lathe_exec_vals(x), result_tensor);
  lathe_cuda_exec_scratch_done(ex, mark);
  return st;
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

/* ---- tracing: the GPU's times of a traced execution's steps (src/exec/xtrace.c) ---- */
static void forget_marks(lathe_cuda_exec *ex) {
  for (int i = 0; i < ex->n_marks; i++) ex->cu->api->cuEventDestroy(ex->marks[i]);
  ex->n_marks = 0;
}

/* A timing event (cuEventCreate without DISABLE_TIMING, unlike the pool's) recorded on the stream. */
static int trace_mark(lathe_exec *x) {
  lathe_cuda_exec *ex = cuda_exec(x);
  const lcu_api *api = ex->cu->api;
  if (ex->capturing || !ex->stream) return -1;
  if (ex->n_marks == ex->cap_marks) {
    int cap = ex->cap_marks ? 2 * ex->cap_marks : 64;
    lcuEvent *v = realloc(ex->marks, sizeof *v * (size_t)cap);
    if (!v) return -1;
    ex->marks = v, ex->cap_marks = cap;
  }
  lcuEvent e;
  if (api->cuEventCreate(&e, 0) != LCU_SUCCESS) return -1;
  /* the first waits for the stream, so that the GPU reaches it at about the host's time now */
  if (!ex->n_marks && api->cuStreamSynchronize(ex->stream) != LCU_SUCCESS) {
    api->cuEventDestroy(e);
    return -1;
  }
  if (!ex->n_marks) ex->t_first = lathe_trace_now();
  if (api->cuEventRecord(e, ex->stream) != LCU_SUCCESS) {
    api->cuEventDestroy(e);
    return -1;
  }
  ex->marks[ex->n_marks] = e;
  return ex->n_marks++;
}

static lathe_status_t trace_times(lathe_exec *x, int64_t *t, int n, int *track, char *track_name, size_t cap) {
  lathe_cuda_exec *ex = cuda_exec(x);
  const lcu_api *api = ex->cu->api;
  lathe_status_t st = NULL;
  if (t && n > ex->n_marks) st = lathe_status_new(LATHE_STATUS_INTERNAL, "trace: %d GPU marks asked, %d made", n, ex->n_marks);
  if (!st && t && n) st = lathe_cuda_error(api, api->cuEventSynchronize(ex->marks[n - 1]), "trace: cuEventSynchronize");
  for (int i = 0; !st && t && i < n; i++) {
    float ms = 0;
    st = lathe_cuda_error(api, api->cuEventElapsedTime(&ms, ex->marks[0], ex->marks[i]), "trace: cuEventElapsedTime");
    t[i] = ex->t_first + (int64_t)((double)ms * 1e6);
  }
  int s = 0;
  while (s < ex->d->n_streams && ex->d->streams[s] != ex->stream) s++;
  *track = LATHE_TRACE_TRACK_BASE + ex->d->ordinal * 64 + s;
  if (s < ex->d->n_streams) snprintf(track_name, cap, "GPU %d stream %d", ex->d->ordinal, s);
  else snprintf(track_name, cap, "GPU %d graphs", ex->d->ordinal); /* a CUDA graph's own stream */
  forget_marks(ex);
  return st;
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
  lathe_exec_arenas_give_back(&ex->plan->x, ex->x.arenas);
  if (ex->ev && !ex->ev_owned) lathe_cuda_event_put(ex->d, ex->ev);
  forget_marks(ex); /* a traced execution that failed before its marks were read */
  free(ex->marks);
  lathe_collective_release(ex->x.group);
  ex->release(ex->token);
  lathe_event_signal(ex->done, st);
  lathe_event_release(ex->done);
  free(ex->dead);
  free(ex->step_scratch);
  free(ex->free_scratch);
  free(ex->inputs);
  free(ex);
}

lathe_status_t lathe_cuda_exec_wait_inputs(lathe_cuda_exec *ex, const lathe_launch *l) {
  lathe_status_t st = NULL;
  /* inputs still being computed: a CUDA event of this device is waited for on the stream; any
   * other (another GPU, the host) on the host */
  for (int i = 0; !st && i < l->n_inputs; i++) {
    lathe_event *ev = atomic_load(&l->inputs[i]->ready);
    /* made by an earlier SPMD launch of this GPU's worker: queued already, on this same stream */
    if (l->group && ev && !lathe_event_is_ready(ev) && lathe_event_native(ev, lathe_cuda_spmd_key(ex->d))) continue;
    st = lathe_cuda_stream_wait_tensor(ex->d, ex->stream, l->inputs[i], false, NULL);
  }
  return st;
}

/* Before the walk: a stream (SPMD runs keep to one stream per device, so that their
 * collectives run in launch order), waiting there for pending inputs. */
static lathe_status_t begin(lathe_exec *x, const lathe_launch *l) {
  lathe_cuda_exec *ex = cuda_exec(x);
  ex->stream = l->group ? ex->d->streams[0]
                        : ex->d->streams[atomic_fetch_add(&ex->d->next_stream, 1) % (unsigned)ex->d->n_streams];
  return lathe_cuda_exec_wait_inputs(ex, l);
}

static lathe_status_t launch_program(lathe_exec *x, const lathe_launch *l, bool *handled) {
  lathe_cuda_exec *ex = cuda_exec(x);
  *handled = false;
  if (!ex->plan->replay || l->group) return NULL;
  lathe_status_t st = lathe_cuda_replay(ex, l, handled);
  /* where the frame takes the inputs (and holds each to the stream's end: drop), what a replay
   * queued reads them after lathe_exec_program has let the launch's references go */
  for (int i = 0; x->plan->takes_inputs && (*handled || st) && i < l->n_inputs; i++)
    bury(ex, lathe_tensor_retain(l->inputs[i]));
  return st;
}

const lathe_exec_device lathe_cuda_exec_device = {
    .where = " on lathe:cuda",
    .keeps_arenas = true, /* until the stream is done (finish) */
    .device = &lathe_cuda_device,
    .view_init = view_init,
    .const_new = const_new,
    .tensor_new = tensor_new,
    .scratch_new = scratch_new,
    .shell_fill = shell_fill,
    .copy = copy,
    .drop = drop,
    .widen = widen,
    .narrow = narrow,
    .read = read_bytes,
    .launch = launch,
    .launch_loop = launch_loop,
    .launch_reduce = launch_reduce,
    .launch_program = launch_program,
    .begin = begin,
    .trace_mark = trace_mark,
    .trace_times = trace_times,
};

static lathe_status_t copy_status(lathe_status_t st) {
  return st ? lathe_status_new(lathe_status_code_of(st), "%s", lathe_status_message(st)) : NULL;
}

lathe_status_t lathe_cuda_execute_now(void *ctx, lathe_plan *plan, const lathe_launch *l, lathe_event *given) {
  lathe_cuda *cu = ctx;
  const lcu_api *api = cu->api;
  lathe_cuda_exec *ex = calloc(1, sizeof *ex);
  lathe_status_t st = ex ? NULL : LATHE_OOM("Execute");
  bool takes = plan->x.takes_inputs;
  if (ex) {
    ex->cu = cu;
    ex->d = &cu->devs[l->device];
    ex->plan = plan;
    ex->release = l->release;
    ex->token = l->token;
    ex->x.plan = &plan->x;
    ex->x.domain = l->device;
    ex->x.replica = l->replica;
    ex->x.group = l->group;
    ex->done = lathe_event_retain(given);
    ex->n_inputs = takes ? 0 : l->n_inputs; /* else lathe_exec_program takes them */
    ex->inputs = malloc(sizeof(lathe_tensor *) * (size_t)(l->n_inputs + 1));
    if (!ex->inputs) { /* nothing to keep them in: let them go now */
      for (int i = 0; i < l->n_inputs; i++) lathe_tensor_release(l->inputs[i]);
      ex->n_inputs = 0;
      st = LATHE_OOM("Execute");
    }
    for (int i = 0; !st && i < ex->n_inputs; i++) ex->inputs[i] = l->inputs[i];
  }
  if (!st) st = lathe_cuda_use(ex->d);
  if (!st && !ex->done) st = lathe_event_new(&ex->done);
  if (!st) st = lathe_exec_program(&ex->x, l); /* where `takes`, it consumes the inputs on every path */
  else if (takes && ex && ex->inputs) /* not handed over (without ex or ex->inputs: released below or above) */
    for (int i = 0; i < l->n_inputs; i++) lathe_tensor_release(l->inputs[i]);
  if (!st) st = lathe_cuda_event_get(ex->d, &ex->ev);
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
      free(ex->marks);
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
   * this device wait on the GPU instead of the host (`given` is shared already: none) */
  if (!given) ex->ev_owned = lathe_cuda_event_attach(ex->d, ex->done, ex->ev, !ex->err_word);
  for (int k = 0; k < l->n_outputs && !given; k++) atomic_store(&l->outputs[k]->ready, lathe_event_retain(ex->done));
  return lathe_cuda_when_done(ex->d, ex->ev, finish, ex);
}

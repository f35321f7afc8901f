/* graph.c -- a plan's launches captured once as a CUDA graph and replayed (option graphs=N).
 *
 * Walking a program costs host time per step (argument set-up, library calls, one driver call per
 * launch): for a training step of small kernels the GPU waits on the host between launches. At
 * the N-th execution of a plan on a GPU (N = 2 by default: the first run has compiled its kernels
 * and measured cuDNN's algorithms), the walk is run once more under stream capture, so nothing
 * executes and every launch, copy and library call becomes a node of one graph. Later executions
 * replay it: a copy per input, one graph launch, a copy per output.
 *
 * A graph's device addresses are fixed, so the graph owns its memory: a copy of each input (the
 * walk reads these, never the caller's buffers), the arenas, every scratch and result tensor the
 * walk made. Inputs are copied in and results copied out on every execution: the caller's buffers
 * move from call to call, the graph's stay. Replays of one plan on one GPU go through its own
 * stream, one at a time (the lock), so they never share that memory.
 *
 * Not captured: programs with sub-functions (a While or If reads its predicate on the host),
 * collectives, dynamic shapes or fewer than MIN_STEPS steps; programs whose inputs and outputs take
 * more than 1/64 of the GPU's memory, or more than BYTES_PER_STEP per step (the copies would
 * cost more than the launches they save), or whose capture runs out of memory. A run whose capture
 * fails otherwise (a kernel or library call that cannot be captured) takes the ordinary walk, as
 * does every run after three failures. docs/CUDA.md gives the measured effect. */
#include "exec.h"

/* A replay costs a copy per input and output besides its launch: a program of a step or two
 * (GoMLX's one-op graphs) launches faster without a graph. */
enum { MAX_CAPTURE_FAILURES = 3, MIN_STEPS = 4 };

typedef struct cuda_replay {
  pthread_mutex_t mu;
  int runs, failures;
  bool off;
  lcuStream stream; /* the graph's: replays are ordered on it */
  lcuGraphExec exec;
  lathe_xarena_set *arenas;
  lathe_tensor **in, **out; /* the graph's copies of the inputs; the results it leaves */
  int n_in, n_out;
  lathe_tensor **kept; /* references to everything the captured walk made */
  int n_kept;
  lathe_tensor *err_word; /* kernels' error flags (one of kept), and each flag's message */
  char *err_msgs[8];
  int n_err_msgs;
} cuda_replay;

static bool capturable(const lathe_program *prog) {
  if (prog->n_fns != 1 || prog->fns[0].dynamic || prog->fns[0].n_steps < MIN_STEPS) return false;
  const lathe_pfunc *pf = &prog->fns[0];
  for (int s = 0; s < pf->n_steps; s++) {
    lathe_op_kind k = lathe_op_kind_of(pf->steps[s].node->op);
    if (k == LATHE_KIND_CONTROL || k == LATHE_KIND_COLLECTIVE) return false;
  }
  return true;
}

lathe_status_t lathe_cuda_replay_new(lathe_plan *p, cuda_replay **out) {
  *out = NULL;
  if (p->cu->graph_after <= 0 || !capturable(p->x.prog)) return NULL;
  cuda_replay *r = calloc((size_t)p->cu->n_devices, sizeof *r);
  if (!r) return LATHE_OOM("Compile");
  for (int d = 0; d < p->cu->n_devices; d++)
    if (pthread_mutex_init(&r[d].mu, NULL)) {
      while (d-- > 0) pthread_mutex_destroy(&r[d].mu);
      free(r);
      return LATHE_OOM("Compile");
    }
  *out = r;
  return NULL;
}

static void release_all(lathe_tensor **ts, int n) {
  for (int i = 0; ts && i < n; i++) lathe_tensor_release(ts[i]);
  free(ts);
}

/* What a capture made goes (nothing of it is queued: a graph is only destroyed once no replay is
 * in flight, and a failed capture ran nothing). */
static void drop(lathe_plan *p, cuda_replay *r) {
  const lcu_api *api = p->cu->api;
  if (r->exec) api->cuGraphExecDestroy(r->exec);
  r->exec = NULL;
  release_all(r->in, r->n_in);
  release_all(r->out, r->n_out);
  release_all(r->kept, r->n_kept);
  r->in = r->out = r->kept = NULL;
  r->n_in = r->n_out = r->n_kept = 0;
  r->err_word = NULL;
  for (int k = 0; k < r->n_err_msgs; k++) free(r->err_msgs[k]);
  r->n_err_msgs = 0;
  lathe_exec_arena_set_free(&p->x, r->arenas);
  r->arenas = NULL;
}

void lathe_cuda_replay_free(lathe_plan *p) {
  if (!p->replay) return;
  for (int d = 0; d < p->cu->n_devices; d++) {
    cuda_replay *r = &p->replay[d];
    lathe_status_t st = lathe_cuda_use(&p->cu->devs[d]);
    if (!st) {
      drop(p, r);
      if (r->stream) p->cu->api->cuStreamDestroy(r->stream);
    }
    lathe_status_free(st);
    pthread_mutex_destroy(&r->mu);
  }
  free(p->replay);
  p->replay = NULL;
}

/* The walk of this launch's program, captured into r->exec on r's stream, over the graph's own
 * copies of the inputs. On failure nothing was queued and r holds nothing. */
static lathe_status_t capture(lathe_cuda_exec *ex, cuda_replay *r, const lathe_launch *l) {
  const lcu_api *api = ex->cu->api;
  lathe_status_t st = NULL;
  if (!r->stream)
    st = lathe_cuda_error(api, api->cuStreamCreate(&r->stream, LCU_STREAM_NON_BLOCKING), "Execute: cuStreamCreate");
  r->in = calloc((size_t)l->n_inputs + 1, sizeof *r->in);
  r->out = calloc((size_t)l->n_outputs + 1, sizeof *r->out);
  if (!st && (!r->in || !r->out)) st = LATHE_OOM("Execute");
  for (int i = 0; !st && i < l->n_inputs; i++) {
    st = lathe_cuda_tensor_new(ex->d, &l->inputs[i]->shape, &r->in[i]);
    if (!st) r->n_in++;
    if (!st && r->in[i]->nbytes != l->inputs[i]->nbytes)
      st = lathe_status_new(LATHE_STATUS_INTERNAL, "Execute: input %d has %zu bytes for its shape's %zu", i,
                            l->inputs[i]->nbytes, r->in[i]->nbytes);
  }
  if (!st) st = lathe_exec_arenas_take(&ex->plan->x, l->device, &r->arenas);
  if (!st) st = lathe_cuda_error(api, api->cuStreamBeginCapture(r->stream, LCU_STREAM_CAPTURE_MODE_RELAXED),
                                 "Execute: cuStreamBeginCapture");
  if (!st) {
    ex->stream = r->stream;
    ex->x.arenas = r->arenas;
    ex->capturing = true;
    /* a frame that takes its inputs (in_place=1) gets references of its own: r->in stays the
     * graph's, and what the frame drops goes to r->kept with the rest of the walk's */
    for (int i = 0; ex->plan->x.takes_inputs && i < l->n_inputs; i++) lathe_tensor_retain(r->in[i]);
    lathe_status_t walked = lathe_exec_walk(&ex->x, r->in, l->n_inputs, r->out, NULL);
    if (!walked) r->n_out = l->n_outputs;
    ex->capturing = false;
    ex->x.arenas = NULL;
    lcuGraph g = NULL;
    st = lathe_cuda_error(api, api->cuStreamEndCapture(r->stream, &g), "Execute: cuStreamEndCapture");
    if (walked) {
      lathe_status_free(st);
      st = walked;
    }
    if (!st) st = lathe_cuda_error(api, api->cuGraphInstantiateWithFlags(&r->exec, g, 0), "Execute: cuGraphInstantiate");
    if (g) api->cuGraphDestroy(g);
  }
  /* what the walk made (its scratch, results, error flags) now belongs to the graph */
  r->kept = ex->dead;
  r->n_kept = ex->n_dead;
  ex->dead = NULL;
  ex->n_dead = ex->cap_dead = 0;
  ex->n_step_scratch = ex->n_free_scratch = 0; /* theirs too */
  r->err_word = ex->err_word;
  ex->err_word = NULL;
  for (int k = 0; k < ex->n_err_msgs; k++) r->err_msgs[k] = ex->err_msgs[k];
  r->n_err_msgs = ex->n_err_msgs;
  ex->n_err_msgs = 0;
  if (st) drop(ex->plan, r);
  return st;
}

/* Whether a graph would pay. It keeps a copy of the inputs and results for as long as the
 * executable lives: a program whose inputs and outputs take more than 1/64 of the GPU (a model's
 * weights and optimizer state) keeps that memory for its own work instead, and such a program's
 * steps keep the GPU busy while the host launches the next ones anyway (GPT-2 small's training
 * step, 3.9 GB of inputs and outputs over 1349 steps, on an H100: walked 55.2 ms and 14.2 GiB,
 * replayed 58.9 ms and 17.7 GiB in BFloat16; 73.9 and 79.1 ms in TF32). And every run copies them:
 * a step's launch costs the host a few microseconds, in which the card copies about
 * BYTES_PER_STEP, so a program that moves more than that per step (a layer norm over a large
 * tensor: measured 1000 -> 588 GB/s when captured) runs faster walked. */
enum { BYTES_PER_STEP = 6 << 20 };

static lathe_status_t not_worth(const cuda_dev *d, const lathe_program *prog, const lathe_launch *l) {
  size_t bytes = 0;
  for (int i = 0; i < l->n_inputs; i++) bytes += l->inputs[i]->nbytes;
  for (int k = 0; k < l->n_outputs; k++) bytes += l->outputs[k]->nbytes;
  if (bytes > d->total_mem / 64)
    return lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED, "lathe:cuda: a graph would keep %zu bytes of copies", bytes);
  if (bytes > (size_t)prog->fns[0].n_steps * BYTES_PER_STEP)
    return lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "lathe:cuda: a graph would copy %zu bytes a run for %d steps",
                            bytes, prog->fns[0].n_steps);
  return NULL;
}

lathe_status_t lathe_cuda_replay(lathe_cuda_exec *ex, const lathe_launch *l, bool *handled) {
  *handled = false;
  cuda_replay *r = &ex->plan->replay[l->device];
  const lcu_api *api = ex->cu->api;
  pthread_mutex_lock(&r->mu);
  if (r->off || (!r->exec && ++r->runs < ex->cu->graph_after)) {
    pthread_mutex_unlock(&r->mu);
    return NULL;
  }
  lathe_status_t st = r->exec ? NULL : not_worth(ex->d, ex->plan->x.prog, l);
  if (!st && !r->exec) st = capture(ex, r, l);
  if (st) { /* this run takes the ordinary walk; a later one tries again, a few times */
    lathe_status_code c = lathe_status_code_of(st);
    r->off = ++r->failures >= MAX_CAPTURE_FAILURES || c == LATHE_STATUS_RESOURCE_EXHAUSTED || c == LATHE_STATUS_FAILED_PRECONDITION;
    lathe_status_free(st);
    pthread_mutex_unlock(&r->mu);
    return NULL;
  }
  *handled = true;
  ex->stream = r->stream;
  st = lathe_cuda_exec_wait_inputs(ex, l);
  lathe_exec_trace_gpu_mark(&ex->x); /* tracing (trace_graphs=1): the replay's span on the GPU */
  for (int i = 0; !st && i < l->n_inputs; i++)
    if (r->in[i]->nbytes)
      st = lathe_cuda_error(api, api->cuMemcpyDtoDAsync(lathe_cuda_ptr(r->in[i]), lathe_cuda_ptr(l->inputs[i]), r->in[i]->nbytes,
                                                        r->stream),
                            "Execute: input copy");
  if (!st) st = lathe_cuda_error(api, api->cuGraphLaunch(r->exec, r->stream), "Execute: cuGraphLaunch");
  for (int k = 0; !st && k < l->n_outputs; k++) {
    lathe_tensor *o = l->outputs[k], *res = r->out[k];
    lcuDeviceptr p;
    if (res->nbytes != o->nbytes) {
      st = lathe_status_new(LATHE_STATUS_INTERNAL, "Execute: output %d has %zu bytes, its graph result %zu", k, o->nbytes,
                            res->nbytes);
      break;
    }
    st = lathe_cuda_malloc(ex->d, o->nbytes, &p);
    if (st) break;
    o->data = (void *)(uintptr_t)p;
    if (o->nbytes)
      st = lathe_cuda_error(api, api->cuMemcpyDtoDAsync(p, lathe_cuda_ptr(res), o->nbytes, r->stream), "Execute: output copy");
  }
  lathe_exec_trace_gpu_mark(&ex->x);
  /* the flags are the graph's (it clears them first): this run's copy, for finish to read */
  if (!st && r->err_word) st = lathe_cuda_exec_tensor(ex, &r->err_word->shape, &ex->err_word);
  if (!st && r->err_word)
    st = lathe_cuda_error(api, api->cuMemcpyDtoDAsync(lathe_cuda_ptr(ex->err_word), lathe_cuda_ptr(r->err_word), 4, r->stream),
                          "Execute: error flags");
  for (int k = 0; !st && k < r->n_err_msgs; k++) {
    size_t n = strlen(r->err_msgs[k]) + 1;
    if (!(ex->err_msgs[k] = malloc(n))) st = LATHE_OOM("Execute");
    else memcpy(ex->err_msgs[k], r->err_msgs[k], n), ex->n_err_msgs++;
  }
  pthread_mutex_unlock(&r->mu);
  return st;
}

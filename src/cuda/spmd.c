/* spmd.c -- SPMD replicas on lathe:cuda: one host worker thread per GPU.
 *
 * NCCL wants each rank's calls from a thread of its own (or every rank's calls from one thread
 * inside one ncclGroupStart/End), and a rank's call may block its thread until the peers call
 * too (connections are set up lazily). The runtime launches replica 0 completely before replica
 * 1, from one thread; so a launch with a group does not run on the caller's thread: execute
 * gives its outputs a pending event, queues the launch on its device's worker and returns. The
 * worker runs the launch (lathe_cuda_execute_now: kernels and NCCL calls on the device's SPMD
 * stream) and the event is signalled when the stream has done it, with the error if any. Each
 * worker takes its jobs in order, so the replicas of successive executions meet in their
 * collectives in the same order on every GPU. Plain launches still run on the caller's thread. */
#include "../exec/exec.h"
#include "cuda.h"

typedef struct spmd_job {
  lathe_exec_job q; /* first: the queue's view of the job */
  lathe_cuda *cu;
  lathe_plan *plan;
  lathe_launch l;          /* inputs and outputs point into the arrays below */
  lathe_tensor **inputs;   /* the launch's references */
  lathe_tensor **outputs;  /* a reference each, on the runtime's shells */
  lathe_event *done;       /* the outputs' ready event */
} spmd_job;

struct cuda_spmd {
  lathe_exec_queue **q; /* per device (src/exec/queue.c) */
  int n;
};

/* made on first need; creation is rare, one lock for every backend is enough */
static pthread_mutex_t make_mu = PTHREAD_MUTEX_INITIALIZER;

/* Once the job's work is done: its output references go (the last may take the backend with
 * it: see destroy in device.c). */
static void job_done(void *arg, lathe_status_t st) {
  (void)st;
  spmd_job *j = arg;
  for (int k = 0; k < j->l.n_outputs; k++) lathe_tensor_release(j->outputs[k]);
  free(j->inputs);
  free(j->outputs);
  free(j);
}

static void run_job(lathe_exec_job *qj) {
  spmd_job *j = (spmd_job *)qj;
  lathe_event *done = j->done;
  lathe_status_t st = lathe_cuda_execute_now(j->cu, j->plan, &j->l, done); /* signals done */
  lathe_status_free(st);
  /* the outputs' memory stays ours until the stream has written it, even if the caller frees
   * the buffers at once */
  st = lathe_event_on_ready(done, job_done, j);
  if (st) { /* out of memory: wait here instead */
    lathe_status_free(st);
    lathe_status_free(lathe_event_wait(done));
    job_done(j, NULL);
  }
  lathe_event_release(done);
}

bool lathe_cuda_spmd_is_worker(lathe_cuda *cu) {
  pthread_mutex_lock(&make_mu);
  bool self = false;
  for (int i = 0; cu->spmd && i < cu->spmd->n; i++) self |= lathe_exec_queue_is_worker(cu->spmd->q[i]);
  pthread_mutex_unlock(&make_mu);
  return self;
}

/* Called at teardown, never from a worker (device.c moves teardown to a thread of its own). */
void lathe_cuda_spmd_stop(lathe_cuda *cu) {
  struct cuda_spmd *s = cu->spmd;
  if (!s) return;
  for (int i = 0; i < s->n; i++) lathe_exec_queue_free(s->q[i]);
  free(s->q);
  free(s);
  cu->spmd = NULL;
}

static lathe_status_t workers(lathe_cuda *cu, struct cuda_spmd **out) {
  pthread_mutex_lock(&make_mu);
  lathe_status_t st = NULL;
  if (!cu->spmd) {
    struct cuda_spmd *s = calloc(1, sizeof *s);
    if (s) s->q = calloc((size_t)cu->n_devices, sizeof *s->q);
    if (!s || !s->q) {
      if (s) free(s->q);
      free(s);
      st = LATHE_OOM("lathe:cuda");
    } else {
      s->n = cu->n_devices;
      for (int i = 0; !st && i < s->n; i++) st = lathe_exec_queue_new("lathe:cuda", &s->q[i]);
      cu->spmd = s; /* also when incomplete: teardown stops the threads that started */
    }
  }
  struct cuda_spmd *s = cu->spmd;
  if (!st && s)
    for (int i = 0; i < s->n; i++)
      if (!s->q[i]) st = lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED, "lathe:cuda: no SPMD worker thread");
  pthread_mutex_unlock(&make_mu);
  *out = s;
  return st;
}

lathe_status_t lathe_cuda_execute(void *ctx, lathe_plan *plan, const lathe_launch *l) {
  lathe_cuda *cu = ctx;
  if (!l->group) return lathe_cuda_execute_now(ctx, plan, l, NULL);
  struct cuda_spmd *s = NULL;
  spmd_job *j = NULL;
  lathe_status_t st = workers(cu, &s);
  if (!st) {
    j = calloc(1, sizeof *j);
    if (j) {
      j->inputs = calloc((size_t)l->n_inputs + 1, sizeof *j->inputs);
      j->outputs = calloc((size_t)l->n_outputs + 1, sizeof *j->outputs);
    }
    st = (!j || !j->inputs || !j->outputs) ? LATHE_OOM("Execute") : lathe_event_new(&j->done);
  }
  if (st) { /* as execute must on failure: inputs, group and plan let go, nothing signalled */
    if (j) free(j->inputs), free(j->outputs), free(j);
    for (int i = 0; i < l->n_inputs; i++) lathe_tensor_release(l->inputs[i]);
    lathe_collective_release(l->group);
    l->release(l->token);
    return st;
  }
  j->q.run = run_job;
  j->cu = cu;
  j->plan = plan;
  j->l = *l;
  j->l.donated = NULL; /* the caller's array goes when this returns; execution does not use it */
  j->l.inputs = j->inputs;
  j->l.outputs = j->outputs;
  for (int i = 0; i < l->n_inputs; i++) j->inputs[i] = l->inputs[i];
  /* later SPMD launches of this GPU need not wait on the host: they follow on the same stream */
  const void *key = lathe_cuda_spmd_key(&cu->devs[l->device]);
  lathe_event_set_native(j->done, key, (void *)key, NULL);
  for (int k = 0; k < l->n_outputs; k++) {
    j->outputs[k] = lathe_tensor_retain(l->outputs[k]);
    atomic_store(&l->outputs[k]->ready, lathe_event_retain(j->done));
  }
  lathe_exec_queue_push(s->q[l->device], &j->q);
  return NULL;
}

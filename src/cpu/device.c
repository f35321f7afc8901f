/* device.c -- the CPU device: options, memory, capabilities, kernel dispatch, and the queues
 * that run executions inline (async=0), on a worker thread per ordinal (async=1), or late on
 * purpose (async=late, for tests). Plans and the interpreter are in exec.c. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "exec.h"
#include "kernels.h"
#include "../runtime/job.h"

/* ---- memory ---- */
static lathe_status_t mem_alloc(void *ctx, int device, size_t nbytes, void **out) {
  (void)ctx, (void)device;
  void *p = lathe_cpu_mem_alloc(nbytes);
  if (!p) return lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED, "Tensor: out of memory allocating %zu bytes", nbytes);
  *out = p;
  return NULL;
}

static void mem_free(void *ctx, int device, void *mem, size_t nbytes) {
  (void)ctx, (void)device;
  lathe_cpu_mem_free(mem, nbytes);
}

/* Host memory is one process-wide pool (hostmem.c): every ordinal and CPU backend shares it. */
static lathe_status_t memory_stats(void *ctx, int device, bool reset_peak, lathe_memory_stats *out) {
  (void)ctx, (void)device;
  lathe_cpu_mem_stats(reset_peak, out);
  return NULL;
}

lathe_status_t lathe_cpu_tensor_new(const lathe_shape *shape, lathe_tensor **out) {
  lathe_tensor *t;
  LATHE_RETURN_IF_ERROR(lathe_tensor_alloc(&lathe_cpu_device, NULL, 0, shape, &t));
  /* packed tails: keep unused bits zero so equal tensors have equal bytes */
  if (lathe_dtype_is_packed(shape->dtype) && t->nbytes) ((uint8_t *)t->data)[t->nbytes - 1] = 0;
  *out = t;
  return NULL;
}

static lathe_status_t upload(void *ctx, lathe_tensor *t, const void *src, size_t nbytes) {
  (void)ctx;
  if (nbytes) memcpy(t->data, src, nbytes);
  return NULL;
}

static lathe_status_t download(void *ctx, lathe_tensor *t, void *dst, size_t nbytes) {
  (void)ctx;
  if (nbytes) memcpy(dst, t->data, nbytes);
  return NULL;
}

/* ---- capabilities ---- */
static bool supports_dtype(void *ctx, lathe_dtype dt) {
  (void)ctx;
  return lathe_dtype_is_valid(dt);
}

bool lathe_cpu_supports_op(lathe_op op, lathe_dtype dt) {
  if (!lathe_dtype_is_valid(dt)) return false;
  /* sub-byte integers compute widened to 8 bits */
  if (op != LATHE_OP_BITCAST) dt = lathe_dtype_widened(dt);
  switch (lathe_op_kind_of(op)) {
#define LATHE_KIND(NAME, family) \
  LATHE_KIND_IF_FAMILY(family, case LATHE_KIND_##NAME: return lathe_cpu_supports_##family(op, dt);)
#include "../graph/kinds.def"
#undef LATHE_KIND
    default: return false;
  }
}

static bool supports_op(void *ctx, lathe_op op, lathe_dtype dt) {
  /* FusedDenseVJP runs (a C caller may build it) but is advertised only with dense_vjp=1: GoMLX
   * takes it over its own decomposition whenever it is advertised, and that decomposition, fused
   * by lathe, measured as fast or faster (docs/CPU.md "FusedDenseVJP"). */
  if (op == LATHE_OP_FUSED_DENSE_VJP && !((lathe_cpu *)ctx)->dense_vjp) return false;
  return lathe_cpu_supports_op(op, dt);
}

lathe_status_t lathe_cpu_run_kernel(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out) {
  switch (lathe_op_kind_of(n->op)) {
#define LATHE_KIND(NAME, family) \
  LATHE_KIND_IF_FAMILY(family, case LATHE_KIND_##NAME: return lathe_cpu_run_##family(ex, n, in, out);)
#include "../graph/kinds.def"
#undef LATHE_KIND
    default: return lathe_status_new(LATHE_STATUS_INTERNAL, "%s: no CPU kernel family", lathe_op_name(n->op));
  }
}

/* ---- queues (async=1, async=late): one worker thread per ordinal, jobs in order ---- */
typedef enum { JOB_RUN, JOB_COPY } job_kind;

typedef struct job {
  lathe_exec_job q; /* first: the queue's view of the job */
  job_kind kind;
  bool late; /* async=late, kept here: a copy job must not read cpu, which may be gone */
  lathe_cpu *cpu;
  lathe_plan *plan;
  lathe_tensor **inputs; /* references */
  int n_inputs;
  lathe_tensor **outputs; /* references on the shells */
  int n_outputs;
  void (*release)(void *token);
  void *token;
  int replica;
  lathe_collective *group;
  lathe_event *done;
} job;

static void job_free(job *j) {
  for (int i = 0; i < j->n_outputs; i++) lathe_tensor_release(j->outputs[i]);
  lathe_collective_release(j->group);
  lathe_event_release(j->done);
  free(j->inputs);
  free(j->outputs);
  free(j);
}

static void run_job(lathe_exec_job *qj) {
  job *j = (job *)qj;
  if (j->late) { /* complete late on purpose: tests see real waiting */
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  lathe_status_t st;
  if (j->kind == JOB_RUN) {
    lathe_launch l = {.inputs = j->inputs, .n_inputs = j->n_inputs, .outputs = j->outputs, .n_outputs = j->n_outputs,
                      .replica = j->replica, .group = j->group};
    st = lathe_cpu_run_launch(j->cpu, j->plan, &l);
    j->release(j->token);
  } else { /* JOB_COPY: inputs[0] -> outputs[0] */
    st = lathe_tensor_wait(j->inputs[0]);
    if (!st && j->outputs[0]->nbytes) memcpy(j->outputs[0]->data, j->inputs[0]->data, j->outputs[0]->nbytes);
    lathe_tensor_release(j->inputs[0]);
  }
  lathe_event_signal(j->done, st);
  job_free(j);
}

/* Queues job j on ordinal device: its outputs get j's event as their ready event first. */
static void enqueue(lathe_cpu *cpu, int device, job *j) {
  for (int k = 0; k < j->n_outputs; k++) atomic_store(&j->outputs[k]->ready, lathe_event_retain(j->done));
  lathe_exec_queue_push(cpu->queues[device], &j->q);
}

static lathe_status_t job_new(lathe_cpu *cpu, job_kind kind, int n_inputs, int n_outputs, job **out) {
  job *j = calloc(1, sizeof *j);
  if (!j) return LATHE_OOM("Execute");
  j->q.run = run_job;
  j->kind = kind;
  j->late = cpu->async == LATHE_CPU_LATE;
  j->cpu = cpu;
  j->inputs = calloc((size_t)n_inputs + 1, sizeof(lathe_tensor *));
  j->outputs = calloc((size_t)n_outputs + 1, sizeof(lathe_tensor *));
  lathe_status_t st = (!j->inputs || !j->outputs) ? LATHE_OOM("Execute") : lathe_event_new(&j->done);
  if (st) {
    free(j->inputs);
    free(j->outputs);
    free(j);
    return st;
  }
  *out = j;
  return NULL;
}

/* The queues, made on first need in the inline mode (SPMD replicas must run at once). */
static lathe_status_t queues_ready(lathe_cpu *cpu) {
  pthread_mutex_lock(cpu->queues_mu);
  lathe_status_t st = NULL;
  if (!cpu->queues) {
    lathe_exec_queue **q = calloc((size_t)cpu->n_devices, sizeof *q);
    if (!q) st = LATHE_OOM("lathe:cpu");
    for (int i = 0; !st && i < cpu->n_devices; i++) st = lathe_exec_queue_new("lathe:cpu", &q[i]);
    if (st && q)
      for (int i = 0; i < cpu->n_devices; i++) lathe_exec_queue_free(q[i]);
    if (!st) cpu->queues = q;
    else free(q);
  }
  pthread_mutex_unlock(cpu->queues_mu);
  return st;
}

static lathe_status_t execute(void *ctx, lathe_plan *plan, const lathe_launch *l) {
  lathe_cpu *cpu = ctx;
  lathe_status_t st = NULL;
  if (cpu->async == LATHE_CPU_INLINE && !l->group) {
    st = lathe_cpu_run_launch(cpu, plan, l);
    l->release(l->token);
    return st;
  }
  job *j = NULL;
  if (l->group) st = queues_ready(cpu);
  if (!st) st = job_new(cpu, JOB_RUN, l->n_inputs, l->n_outputs, &j);
  if (st) {
    for (int i = 0; i < l->n_inputs; i++) lathe_tensor_release(l->inputs[i]);
    lathe_collective_release(l->group);
    l->release(l->token);
    return st;
  }
  j->replica = l->replica;
  j->group = l->group;
  j->plan = plan;
  j->n_inputs = l->n_inputs;
  j->n_outputs = l->n_outputs;
  for (int i = 0; i < l->n_inputs; i++) j->inputs[i] = l->inputs[i];
  for (int k = 0; k < l->n_outputs; k++) j->outputs[k] = lathe_tensor_retain(l->outputs[k]);
  j->release = l->release;
  j->token = l->token;
  enqueue(cpu, l->device, j);
  return NULL;
}

/* CopyToDevice: dst (fresh, on its ordinal) receives src's contents, after the work that
 * computes them; in the asynchronous modes as a job of dst's queue. */
static lathe_status_t copy(void *ctx, lathe_tensor *src, lathe_tensor *dst) {
  lathe_cpu *cpu = ctx;
  if (cpu->async == LATHE_CPU_INLINE) {
    LATHE_RETURN_IF_ERROR(lathe_tensor_wait(src));
    if (dst->nbytes) memcpy(dst->data, src->data, dst->nbytes);
    return NULL;
  }
  job *j;
  LATHE_RETURN_IF_ERROR(job_new(cpu, JOB_COPY, 1, 1, &j));
  j->inputs[0] = lathe_tensor_retain(src);
  j->outputs[0] = lathe_tensor_retain(dst);
  j->n_inputs = j->n_outputs = 1;
  enqueue(cpu, dst->device, j);
  return NULL;
}

/* ---- the device ---- */
static uint32_t caps(void *ctx) {
  const lathe_cpu *c = ctx;
  /* SPMD replicas always run on the queues: with several devices, work may complete late */
  return LATHE_DEVCAP_SHARED_BUFFERS | (c->async != LATHE_CPU_INLINE || c->n_devices > 1 ? LATHE_DEVCAP_ASYNC : 0);
}

static int num_devices(void *ctx) { return ((lathe_cpu *)ctx)->n_devices; }

static const char *description(void *ctx, int device) {
  lathe_cpu *c = ctx;
  return device >= 0 && device < c->n_devices ? c->descriptions[device + 1] : c->descriptions[0];
}

static void program_options(void *ctx, lathe_program_options *opt) {
  opt->fuse = ((lathe_cpu *)ctx)->fuse;
  opt->plan_memory = true;
  opt->alignment = 64;
  opt->alias_reshape = true; /* layout.c skips the copy */
  opt->fuse_activations = true; /* region.c runs them tile by tile (activation.c) */
  opt->remat = ((lathe_cpu *)ctx)->fuse; /* copies pay when fusion joins them to their readers */
}

static void destroy(void *ctx) {
  lathe_cpu *c = ctx;
  for (int i = 0; c->queues && i < c->n_devices; i++) lathe_exec_queue_free(c->queues[i]);
  free(c->queues);
  if (c->queues_mu) {
    pthread_mutex_destroy(c->queues_mu);
    free(c->queues_mu);
  }
  for (int i = 0; c->descriptions && i <= c->n_devices; i++) free(c->descriptions[i]);
  free(c->descriptions);
  lathe_pool_free(c->pool);
  lathe_job_release(c->job);
  free(c);
  lathe_cpu_mem_detach();
}

const lathe_device_i lathe_cpu_device = {
    .struct_size = sizeof(lathe_device_i),
    .api_version = LATHE_DEVICE_API_VERSION,
    .name = "cpu",
    .caps = caps,
    .num_devices = num_devices,
    .description = description,
    .supports_op = supports_op,
    .supports_dtype = supports_dtype,
    .destroy = destroy,
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .upload = upload,
    .download = download,
    .copy = copy,
    .program_options = program_options,
    .compile = lathe_cpu_compile,
    .plan_free = lathe_cpu_plan_free,
    .execute = execute,
    .memory_stats = memory_stats,
};

/* lathe:cpu's options (docs/CPU.md), parsed by the runtime (runtime/options.c). */
enum { OPT_THREADS, OPT_DEVICES, OPT_FUSE, OPT_ASYNC, OPT_ISA, OPT_COORDINATOR, OPT_PROCESSES, OPT_PROCESS, OPT_TOKEN, OPT_TIMEOUT,
       OPT_DENSE_VJP, OPT_RUNTIME /* then the runtime's (trace, dump) */ };
const lathe_option_spec lathe_cpu_options[] = {
    [OPT_THREADS] = {"threads", LATHE_OPTION_INT, "N", 1, 1024, false, "all online cores; in a job, their share",
                     "threads in all, the calling thread included"},
    [OPT_DEVICES] = {"devices", LATHE_OPTION_INT, "N", 1, 256, false, "1",
                     "devices (ordinals 0..N-1) sharing the thread pool and host memory"},
    [OPT_FUSE] = {"fuse", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1", "fusion regions on or off"},
    [OPT_ASYNC] = {"async", LATHE_OPTION_CHOICE, "0|1|late", 0, 0, false, "0",
                   "executions inline (0), on a worker thread per device (1), or delayed on purpose (late: tests)"},
    [OPT_ISA] = {"isa", LATHE_OPTION_CHOICE, "auto|baseline|avx2|avx512", 0, 0, false, "auto (LATHE_CPU_ISA if set)",
                 "the kernel table to run (the Float32 GEMM micro-kernel follows cpuid); one the CPU lacks fails"},
    /* a job of several processes (docs/CPU.md "A job of several processes"); unset: LATHE_* and
     * torchrun's, Slurm's, Open MPI's variables */
    [OPT_COORDINATOR] = {"coordinator", LATHE_OPTION_TEXT, "HOST:PORT", 0, 0, false, "LATHE_COORDINATOR",
                         "process 0's coordinator: where it listens, where the others connect"},
    [OPT_PROCESSES] = {"processes", LATHE_OPTION_INT, "P", 1, 65536, false, "LATHE_NUM_PROCESSES", "processes in the job"},
    [OPT_PROCESS] = {"process", LATHE_OPTION_INT, "I", 0, 65535, false, "LATHE_PROCESS_ID", "this process's index, 0..P-1"},
    [OPT_TOKEN] = {"token", LATHE_OPTION_TEXT, "T", 0, 0, false, "LATHE_JOB_TOKEN",
                   "the job's secret: connections without it are refused"},
    [OPT_TIMEOUT] = {"timeout", LATHE_OPTION_TEXT, "SECONDS", 0, 0, false, "60",
                     "how long a wait for another process may take before it is an error"},
    [OPT_DENSE_VJP] = {"dense_vjp", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "0",
                       "advertise FusedDenseVJP, GoMLX's fully fused dense gradient (measured no faster than its decomposition)"},
    LATHE_RUNTIME_OPTION_SPECS,
};
const int lathe_cpu_n_options = (int)(sizeof lathe_cpu_options / sizeof lathe_cpu_options[0]);

lathe_status_t lathe_cpu_device_new(const lathe_option_value *opt, const lathe_device_i **out_dev, void **out_ctx,
                                    char **out_config) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = opt[OPT_THREADS].set ? (int)opt[OPT_THREADS].value : ncpu > 0 ? (int)ncpu : 1;
  int devices = opt[OPT_DEVICES].set ? (int)opt[OPT_DEVICES].value : 1;
  bool fuse = !opt[OPT_FUSE].set || opt[OPT_FUSE].value == 1;
  lathe_cpu_async async = !opt[OPT_ASYNC].set         ? LATHE_CPU_INLINE
                          : opt[OPT_ASYNC].value == 0 ? LATHE_CPU_INLINE
                          : opt[OPT_ASYNC].value == 1 ? LATHE_CPU_THREAD
                                                      : LATHE_CPU_LATE;
  /* LATHE_CPU_ISA sets the default ISA of every backend (tests run whole suites on one) */
  const char *isa_env = getenv("LATHE_CPU_ISA");
  lathe_cpu_isa isa;
  lathe_status_t ist = lathe_cpu_isa_parse(isa_env && *isa_env ? isa_env : NULL, &isa);
  if (ist) return lathe_status_annotate(ist, "from the environment variable LATHE_CPU_ISA");
  bool isa_forced = opt[OPT_ISA].set && opt[OPT_ISA].value != 0;
  if (opt[OPT_ISA].set) LATHE_RETURN_IF_ERROR(lathe_cpu_isa_parse(opt[OPT_ISA].text, &isa));
  /* a job of several processes: the job's options, then the environment (runtime/job.c) */
  lathe_job_config job;
  lathe_job_config_init(&job);
  bool is_job = false;
  for (int k = OPT_COORDINATOR; k <= OPT_TIMEOUT; k++) {
    if (!opt[k].set) continue;
    char kv[300];
    int len = snprintf(kv, sizeof kv, "%s=%s", lathe_cpu_options[k].name, opt[k].text);
    LATHE_RETURN_IF_ERROR(lathe_job_option("lathe:cpu", kv, (size_t)len, &job));
  }
  LATHE_RETURN_IF_ERROR(lathe_job_config_resolve("lathe:cpu", &job, &is_job));
  /* the job's processes on this host share its cores: without threads=, each takes its share
   * (as torchrun sets OMP_NUM_THREADS=1), else their pools contend for them: 10-15% slower
   * measured with 2 processes on 2 cores */
  if (is_job && !opt[OPT_THREADS].set && job.local_processes > 1)
    threads = threads / job.local_processes > 1 ? threads / job.local_processes : 1;
  lathe_cpu *c = calloc(1, sizeof *c);
  if (!c) return LATHE_OOM("lathe:cpu");
  lathe_cpu_mem_attach();
  c->threads = threads;
  c->fuse = fuse;
  c->dense_vjp = opt[OPT_DENSE_VJP].set && opt[OPT_DENSE_VJP].value == 1;
  c->kernels = lathe_cpu_kernels_of(isa);
  c->isa_forced = isa_forced;
  c->n_devices = devices;
  c->async = async;
  lathe_status_t st = lathe_pool_new(threads, &c->pool);
  c->queues_mu = st ? NULL : malloc(sizeof(pthread_mutex_t));
  if (!st && (!c->queues_mu || pthread_mutex_init(c->queues_mu, NULL))) {
    free(c->queues_mu);
    c->queues_mu = NULL;
    st = LATHE_OOM("lathe:cpu");
  }
  c->descriptions = st ? NULL : calloc((size_t)devices + 1, sizeof(char *));
  if (!st && !c->descriptions) st = LATHE_OOM("lathe:cpu");
  for (int i = 0; !st && i <= devices; i++) {
    c->descriptions[i] = malloc(96);
    if (!c->descriptions[i]) {
      st = LATHE_OOM("lathe:cpu");
      break;
    }
    /* [0] describes the whole context, [1 + k] ordinal k */
    const char *in = lathe_cpu_isa_name(isa);
    if (i > 0) snprintf(c->descriptions[i], 96, "cpu:%d (%d threads, %s)", i - 1, threads, in);
    else if (devices > 1) snprintf(c->descriptions[0], 96, "cpu, %d devices (%d threads, %s)", devices, threads, in);
    else snprintf(c->descriptions[0], 96, "cpu (%d threads, %s)", threads, in);
  }
  if (!st && async != LATHE_CPU_INLINE) st = queues_ready(c);
  if (!st && is_job) st = lathe_job_acquire(&job, &c->job);
  char *conf = st ? NULL : malloc(96);
  if (!st && !conf) st = LATHE_OOM("lathe:cpu");
  if (st) {
    destroy(c);
    return st;
  }
  int n = snprintf(conf, 96, "cpu,threads=%d", threads);
  if (devices > 1) n += snprintf(conf + n, (size_t)(96 - n), ",devices=%d", devices);
  if (!fuse) n += snprintf(conf + n, (size_t)(96 - n), ",fuse=0");
  if (c->dense_vjp) n += snprintf(conf + n, (size_t)(96 - n), ",dense_vjp=1");
  if (isa_forced) n += snprintf(conf + n, (size_t)(96 - n), ",isa=%s", lathe_cpu_isa_name(isa));
  if (async != LATHE_CPU_INLINE) snprintf(conf + n, (size_t)(96 - n), ",async=%s", async == LATHE_CPU_THREAD ? "1" : "late");
  *out_dev = &lathe_cpu_device;
  *out_ctx = c;
  *out_config = conf;
  return NULL;
}

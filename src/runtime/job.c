/* job.c -- the job this process belongs to: configuration from options and environment, joining
 * (process 0 runs the coordinator; every process connects, and all meet at a first barrier), and
 * collectives of host memory across the processes through Gloo (the plugin liblathe_gloo.so,
 * opened on the first collective: a job without CPU collectives never needs it). */
#include <dlfcn.h>
#include <pthread.h>

#include "../gloo/lathe_gloo.h"
#include "device.h"
#include "job.h"

/* ---- configuration ---- */

void lathe_job_config_init(lathe_job_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->process = -1;
}

static lathe_status_t parse_int(const char *who, const char *what, const char *v, long lo, long hi, int *out) {
  char *e;
  long x = strtol(v, &e, 10);
  if (!*v || *e || x < lo || x > hi) return LATHE_INVALID("%s: %s must be an integer in [%ld, %ld], got \"%s\"", who, what, lo, hi, v);
  *out = (int)x;
  return NULL;
}

/* seconds, possibly fractional ("0.5"), to milliseconds */
static lathe_status_t parse_timeout(const char *who, const char *what, const char *v, int *out_ms) {
  char *e;
  double s = strtod(v, &e);
  if (!*v || *e || !(s >= 0.001 && s <= 86400)) return LATHE_INVALID("%s: %s must be seconds in [0.001, 86400], got \"%s\"", who, what, v);
  *out_ms = (int)(s * 1000 + 0.5);
  return NULL;
}

static lathe_status_t copy_str(const char *who, const char *what, const char *v, size_t n, char *dst, size_t cap) {
  if (n == 0 || n >= cap) return LATHE_INVALID("%s: %s must have 1 to %zu characters", who, what, cap - 1);
  memcpy(dst, v, n);
  dst[n] = 0;
  return NULL;
}

static const char *job_keys[] = {"coordinator", "processes", "process", "token", "timeout"};

static int key_of(const char *p, size_t len) {
  for (int k = 0; k < 5; k++) {
    size_t kl = strlen(job_keys[k]);
    if (len > kl && !strncmp(p, job_keys[k], kl) && p[kl] == '=') return k;
  }
  return -1;
}

bool lathe_job_is_option(const char *p, size_t len) { return key_of(p, len) >= 0; }

lathe_status_t lathe_job_option(const char *who, const char *p, size_t len, lathe_job_config *cfg) {
  int k = key_of(p, len);
  if (k >= 0) {
    size_t kl = strlen(job_keys[k]);
    const char *v = p + kl + 1;
    size_t vl = len - kl - 1;
    char buf[64];
    if (k == 0) return copy_str(who, "coordinator", v, vl, cfg->coordinator, sizeof cfg->coordinator);
    if (k == 3) return copy_str(who, "token", v, vl, cfg->token, sizeof cfg->token);
    LATHE_RETURN_IF_ERROR(copy_str(who, job_keys[k], v, vl, buf, sizeof buf));
    if (k == 1) return parse_int(who, "processes", buf, 1, 65536, &cfg->processes);
    if (k == 2) return parse_int(who, "process", buf, 0, 65535, &cfg->process);
    return parse_timeout(who, "timeout", buf, &cfg->timeout_ms);
  }
  char shown[320];
  return LATHE_INVALID("%s: \"%s\" is not a job option", who, lathe_config_redact(p, len, shown, sizeof shown));
}

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* The first of names that is set (its name in *from). */
static const char *env_first(const char *const *names, const char **from) {
  for (; *names; names++)
    if (env(*names)) {
      *from = *names;
      return env(*names);
    }
  return NULL;
}

lathe_status_t lathe_job_config_resolve(const char *who, lathe_job_config *cfg, bool *is_job) {
  *is_job = false;
  /* the environment makes a job only where it names a coordinator (a Slurm or MPI task count alone
   * says nothing about lathe) */
  if (!cfg->coordinator[0]) {
    const char *c = env("LATHE_COORDINATOR"), *a = env("MASTER_ADDR"), *pt = env("MASTER_PORT");
    if (c) LATHE_RETURN_IF_ERROR(copy_str(who, "LATHE_COORDINATOR", c, strlen(c), cfg->coordinator, sizeof cfg->coordinator));
    else if (a && pt) {
      bool v6 = strchr(a, ':') != NULL;
      snprintf(cfg->coordinator, sizeof cfg->coordinator, v6 ? "[%s]:%s" : "%s:%s", a, pt);
    }
  }
  bool coordinated = cfg->coordinator[0] != 0;
  const char *from = NULL, *v;
  static const char *const n_names[] = {"LATHE_NUM_PROCESSES", "WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", NULL};
  static const char *const i_names[] = {"LATHE_PROCESS_ID", "RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", NULL};
  if (!cfg->processes && coordinated && (v = env_first(n_names, &from)))
    LATHE_RETURN_IF_ERROR(parse_int(who, from, v, 1, 65536, &cfg->processes));
  if (cfg->process < 0 && coordinated && (v = env_first(i_names, &from)))
    LATHE_RETURN_IF_ERROR(parse_int(who, from, v, 0, 65535, &cfg->process));
  if (!cfg->token[0] && (v = env("LATHE_JOB_TOKEN")))
    LATHE_RETURN_IF_ERROR(copy_str(who, "LATHE_JOB_TOKEN", v, strlen(v), cfg->token, sizeof cfg->token));
  if (!cfg->timeout_ms && (v = env("LATHE_JOB_TIMEOUT"))) LATHE_RETURN_IF_ERROR(parse_timeout(who, "LATHE_JOB_TIMEOUT", v, &cfg->timeout_ms));
  if (!cfg->timeout_ms) cfg->timeout_ms = LATHE_JOB_DEFAULT_TIMEOUT_MS;
  /* processes on this host: lathe-launch's, torchrun's, Open MPI's, Slurm's (a plain count only:
   * Slurm writes "2(x3)" for uneven nodes, which says nothing about this one) */
  static const char *const l_names[] = {"LATHE_LOCAL_PROCESSES", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                        "SLURM_NTASKS_PER_NODE", NULL};
  if (!cfg->local_processes && (v = env_first(l_names, &from))) {
    char *e;
    long n = strtol(v, &e, 10);
    if (*e == 0 && n >= 1 && n <= 65536) cfg->local_processes = (int)n;
  }
  if (cfg->processes <= 1) {
    if (cfg->process > 0) return LATHE_INVALID("%s: process=%d needs processes > %d", who, cfg->process, cfg->process);
    return NULL; /* one process: no job */
  }
  if (!coordinated)
    return LATHE_INVALID("%s: a job of %d processes needs a coordinator (coordinator=HOST:PORT or LATHE_COORDINATOR)", who,
                         cfg->processes);
  if (cfg->process < 0)
    return LATHE_INVALID("%s: a job of %d processes needs this process's index (process=I or LATHE_PROCESS_ID)", who, cfg->processes);
  if (cfg->process >= cfg->processes)
    return LATHE_INVALID("%s: process index %d is outside the job's 0..%d", who, cfg->process, cfg->processes - 1);
  if (!cfg->token[0])
    return LATHE_INVALID("%s: a job needs a token that every process presents (token=T or LATHE_JOB_TOKEN; lathe-launch makes one)", who);
  char h[256], p[16];
  LATHE_RETURN_IF_ERROR(lathe_coord_split_address(cfg->coordinator, h, sizeof h, p, sizeof p));
  *is_job = true;
  return NULL;
}

/* ---- the job ---- */

typedef struct gloo_api {
  int (*abi)(void);
  int (*connect)(const lathe_gloo_store *, const char *, const char *, int, int, int, lathe_gloo_context **, char *, size_t);
  int (*all_reduce)(lathe_gloo_context *, void *, size_t, size_t, lathe_gloo_reduce_fn, void *, uint32_t, char *, size_t);
  int (*all_gather)(lathe_gloo_context *, const void *, void *, size_t, uint32_t, char *, size_t);
  int (*all_to_all)(lathe_gloo_context *, const void *, void *, size_t, uint32_t, char *, size_t);
  void (*free)(lathe_gloo_context *);
} gloo_api;

static pthread_once_t gloo_once = PTHREAD_ONCE_INIT;
static gloo_api gloo;
static char gloo_error[600];


typedef struct gloo_group {
  struct gloo_group *next;
  char *name;
  lathe_gloo_context *ctx;
  lathe_status_t broken; /* the first failure: the context is unusable after it */
  pthread_mutex_t mu;    /* one operation at a time on a context */
} gloo_group;

struct lathe_job {
  int refs; /* guarded by job_mu */
  lathe_job_config cfg;
  lathe_coord_server *server; /* process 0 */
  lathe_coord_client *client;
  char local_host[256]; /* this process's address as the coordinator sees it */
  pthread_mutex_t mu;   /* guards groups */
  gloo_group *groups;
  int64_t barriers;
};

static pthread_mutex_t job_mu = PTHREAD_MUTEX_INITIALIZER;
static lathe_job *the_job;

int lathe_job_process(const lathe_job *j) { return j->cfg.process; }
int lathe_job_processes(const lathe_job *j) { return j->cfg.processes; }

static lathe_status_t call(lathe_job *j, int type, const char *key, const void *v, size_t n, void **value, size_t *vn) {
  size_t kl = strlen(key);
  if (kl == 0 || kl > LATHE_COORD_MAX_KEY) return LATHE_INVALID("job: key of %zu bytes", kl);
  lathe_coord_msg m = {.type = type, .a = (const uint8_t *)key, .a_len = (uint32_t)kl, .b = v, .b_len = (uint32_t)n};
  return lathe_coord_client_call(j->client, &m, value, vn);
}

lathe_status_t lathe_job_set(lathe_job *j, const char *key, const void *value, size_t n) {
  return call(j, LATHE_COORD_SET, key, value, n, NULL, NULL);
}
lathe_status_t lathe_job_get(lathe_job *j, const char *key, void **value, size_t *n) {
  return call(j, LATHE_COORD_GET, key, NULL, 0, value, n);
}
lathe_status_t lathe_job_barrier(lathe_job *j, const char *name) { return call(j, LATHE_COORD_BARRIER, name, NULL, 0, NULL, NULL); }

static void job_free(lathe_job *j) {
  while (j->groups) {
    gloo_group *g = j->groups;
    j->groups = g->next;
    if (g->ctx) gloo.free(g->ctx); /* the plugin, once opened, stays */
    lathe_status_free(g->broken);
    pthread_mutex_destroy(&g->mu);
    free(g->name);
    free(g);
  }
  lathe_coord_client_free(j->client);
  lathe_coord_server_free(j->server, j->cfg.timeout_ms);
  pthread_mutex_destroy(&j->mu);
  free(j);
}

lathe_status_t lathe_job_acquire(const lathe_job_config *cfg, lathe_job **out) {
  pthread_mutex_lock(&job_mu);
  if (the_job) {
    const lathe_job_config *h = &the_job->cfg;
    lathe_status_t st = NULL;
    if (strcmp(h->coordinator, cfg->coordinator) || h->processes != cfg->processes || h->process != cfg->process ||
        strcmp(h->token, cfg->token))
      st = LATHE_INVALID("job: this process is already process %d of %d in the job at %s; a backend cannot join another "
                         "(process %d of %d at %s)", h->process, h->processes, h->coordinator, cfg->process, cfg->processes,
                         cfg->coordinator);
    else {
      the_job->refs++;
      *out = the_job;
    }
    pthread_mutex_unlock(&job_mu);
    return st;
  }
  lathe_job *j = calloc(1, sizeof *j);
  if (!j || pthread_mutex_init(&j->mu, NULL)) {
    free(j);
    pthread_mutex_unlock(&job_mu);
    return LATHE_OOM("job");
  }
  j->cfg = *cfg;
  j->refs = 1;
  lathe_status_t st = NULL;
  if (cfg->process == 0) {
    st = lathe_coord_server_new(cfg->coordinator, cfg->token, cfg->processes, cfg->timeout_ms, &j->server);
    if (st) st = lathe_status_annotate(st, "process 0 (is another process 0 of this job, or another program, using the port?)");
  }
  if (!st)
    st = lathe_coord_client_new(cfg->coordinator, cfg->token, cfg->process, cfg->processes, cfg->timeout_ms, &j->client,
                                j->local_host, sizeof j->local_host);
  /* every process present before any goes on */
  if (!st) st = lathe_job_barrier(j, "lathe/joined");
  if (st) {
    lathe_coord_client_free(j->client);
    j->client = NULL;
    lathe_coord_server_free(j->server, 0);
    j->server = NULL;
    job_free(j);
    pthread_mutex_unlock(&job_mu);
    return lathe_status_annotate(st, "joining the job at %s as process %d of %d", cfg->coordinator, cfg->process, cfg->processes);
  }
  the_job = j;
  *out = j;
  pthread_mutex_unlock(&job_mu);
  return NULL;
}

lathe_status_t lathe_job_current(const char *who, lathe_job **out) {
  *out = NULL;
  pthread_mutex_lock(&job_mu);
  if (the_job) {
    the_job->refs++;
    *out = the_job;
  }
  pthread_mutex_unlock(&job_mu);
  if (*out) return NULL;
  lathe_job_config cfg;
  lathe_job_config_init(&cfg);
  bool is_job = false;
  LATHE_RETURN_IF_ERROR(lathe_job_config_resolve(who, &cfg, &is_job));
  return is_job ? lathe_job_acquire(&cfg, out) : NULL;
}

void lathe_job_release(lathe_job *j) {
  if (!j) return;
  pthread_mutex_lock(&job_mu);
  if (--j->refs == 0) {
    the_job = NULL;
    job_free(j);
  }
  pthread_mutex_unlock(&job_mu);
}

void lathe_job_info(int *out_process, int *out_processes) {
  pthread_mutex_lock(&job_mu);
  int p = the_job ? the_job->cfg.process : 0, n = the_job ? the_job->cfg.processes : 1;
  pthread_mutex_unlock(&job_mu);
  if (out_process) *out_process = p;
  if (out_processes) *out_processes = n;
}

/* ---- Gloo ---- */

static void gloo_load(void) {
  const char *path = env("LATHE_GLOO_LIBRARY");
  void *h = dlopen(path ? path : "liblathe_gloo.so", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(gloo_error, sizeof gloo_error,
             "Collectives across processes need lathe's Gloo plugin: %s (install Gloo: apt-get install libgloo-dev; build the "
             "plugin: make build/liblathe_gloo.so; and put it on the library path or name it in LATHE_GLOO_LIBRARY)",
             dlerror());
    return;
  }
  *(void **)&gloo.abi = dlsym(h, "lathe_gloo_abi");
  *(void **)&gloo.connect = dlsym(h, "lathe_gloo_connect");
  *(void **)&gloo.all_reduce = dlsym(h, "lathe_gloo_all_reduce");
  *(void **)&gloo.all_gather = dlsym(h, "lathe_gloo_all_gather");
  *(void **)&gloo.all_to_all = dlsym(h, "lathe_gloo_all_to_all");
  *(void **)&gloo.free = dlsym(h, "lathe_gloo_free");
  if (!gloo.abi || !gloo.connect || !gloo.all_reduce || !gloo.all_gather || !gloo.all_to_all || !gloo.free ||
      gloo.abi() != LATHE_GLOO_ABI) {
    snprintf(gloo_error, sizeof gloo_error, "Collectives across processes: %s is not lathe's Gloo plugin of ABI %d (rebuild it)",
             path ? path : "liblathe_gloo.so", LATHE_GLOO_ABI);
    memset(&gloo, 0, sizeof gloo);
  }
}

static int store_set(void *ctx, const char *key, const void *value, size_t n, char *err, size_t cap) {
  lathe_status_t st = lathe_job_set(ctx, key, value, n);
  if (st) snprintf(err, cap, "%s", lathe_status_message(st));
  lathe_status_free(st);
  return st != NULL;
}

static int store_get(void *ctx, const char *key, void **value, size_t *n, char *err, size_t cap) {
  lathe_status_t st = lathe_job_get(ctx, key, value, n);
  if (st) snprintf(err, cap, "%s", lathe_status_message(st));
  lathe_status_free(st);
  return st != NULL;
}

static lathe_status_t group_of(lathe_job *j, const char *name, gloo_group **out) {
  pthread_mutex_lock(&j->mu);
  gloo_group *g = j->groups;
  while (g && strcmp(g->name, name)) g = g->next;
  if (!g) {
    g = calloc(1, sizeof *g);
    if (g && !(g->name = strdup(name))) {
      free(g);
      g = NULL;
    }
    if (g && pthread_mutex_init(&g->mu, NULL)) {
      free(g->name);
      free(g);
      g = NULL;
    }
    if (g) {
      g->next = j->groups;
      j->groups = g;
    }
  }
  pthread_mutex_unlock(&j->mu);
  *out = g;
  return g ? NULL : LATHE_OOM("collective across processes");
}

/* One Gloo operation of the collective named group: connects the group on first use, then runs
 * run(ctx, arg, err) under the group's lock. A failure breaks the group for good (Gloo's context
 * is unusable after one). */
typedef int (*gloo_run_fn)(lathe_gloo_context *ctx, void *arg, char *err, size_t cap);
static lathe_status_t gloo_op(lathe_job *j, const char *op, const char *group, gloo_run_fn run, void *arg) {
  pthread_once(&gloo_once, gloo_load);
  if (!gloo.connect) return lathe_status_new(LATHE_STATUS_UNAVAILABLE, "%s: %s", op, gloo_error);
  gloo_group *g;
  LATHE_RETURN_IF_ERROR(group_of(j, group, &g));
  pthread_mutex_lock(&g->mu);
  char err[512] = {0};
  lathe_status_t st = NULL;
  if (g->broken) st = lathe_status_new(lathe_status_code_of(g->broken), "%s", lathe_status_message(g->broken));
  if (!st && !g->ctx) {
    char prefix[LATHE_COORD_MAX_KEY / 2];
    snprintf(prefix, sizeof prefix, "gloo/%s", group);
    lathe_gloo_store store = {j, store_set, store_get};
    if (gloo.connect(&store, prefix, j->local_host, j->cfg.process, j->cfg.processes, j->cfg.timeout_ms, &g->ctx, err, sizeof err))
      st = lathe_status_new(LATHE_STATUS_UNAVAILABLE, "%s across %d processes: connecting (Gloo): %s", op, j->cfg.processes, err);
  }
  if (!st && run(g->ctx, arg, err, sizeof err))
    st = lathe_status_new(LATHE_STATUS_UNAVAILABLE,
                          "%s across %d processes failed (Gloo: %s): a process died, stopped answering within %d ms, or "
                          "ran a different collective",
                          op, j->cfg.processes, err, j->cfg.timeout_ms);
  if (st && !g->broken) g->broken = lathe_status_new(lathe_status_code_of(st), "%s", lathe_status_message(st));
  pthread_mutex_unlock(&g->mu);
  return st;
}

typedef struct {
  void *buf;
  const void *in;
  size_t count, elem_size;
  lathe_job_reduce_fn fn;
  void *fn_ctx;
} gloo_args;

static int run_all_reduce(lathe_gloo_context *ctx, void *arg, char *err, size_t cap) {
  gloo_args *a = arg;
  return a->count ? gloo.all_reduce(ctx, a->buf, a->count, a->elem_size, a->fn, a->fn_ctx, 0, err, cap) : 0;
}
static int run_all_gather(lathe_gloo_context *ctx, void *arg, char *err, size_t cap) {
  gloo_args *a = arg;
  return a->count ? gloo.all_gather(ctx, a->in, a->buf, a->count, 0, err, cap) : 0;
}
static int run_all_to_all(lathe_gloo_context *ctx, void *arg, char *err, size_t cap) {
  gloo_args *a = arg;
  return a->count ? gloo.all_to_all(ctx, a->in, a->buf, a->count, 0, err, cap) : 0;
}

lathe_status_t lathe_job_all_reduce(lathe_job *j, const char *group, void *buf, size_t count, size_t elem_size,
                                    lathe_job_reduce_fn fn, void *fn_ctx) {
  gloo_args a = {.buf = buf, .count = count, .elem_size = elem_size, .fn = fn, .fn_ctx = fn_ctx};
  return gloo_op(j, "AllReduce", group, run_all_reduce, &a);
}

lathe_status_t lathe_job_all_gather(lathe_job *j, const char *op, const char *group, const void *in, void *out, size_t bytes) {
  gloo_args a = {.buf = out, .in = in, .count = bytes};
  return gloo_op(j, op, group, run_all_gather, &a);
}

lathe_status_t lathe_job_all_to_all(lathe_job *j, const char *op, const char *group, const void *in, void *out, size_t bytes) {
  gloo_args a = {.buf = out, .in = in, .count = bytes};
  return gloo_op(j, op, group, run_all_to_all, &a);
}

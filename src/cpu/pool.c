/* pool.c -- a persistent pthread pool. Callers of lathe_parallel_for work on their own job
 * too, so several executions (and nested calls) can share the pool without deadlock.
 *
 * A step posts many short jobs back to back. Waking a sleeping worker costs a futex call and,
 * on a VM whose idle vCPU halted, tens of microseconds before it runs; so a worker that finds
 * no work, and a caller waiting for its job's last chunks, spin for a short while (SPIN_NS)
 * before they sleep. Spinning is skipped when the pool has more threads than the machine has
 * cores (a spinner would then take time from the thread it waits for). */
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "../core/trace.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

enum { SPIN_NS = 100000 };

typedef struct job {
  lathe_range_fn fn;
  void *ctx;
  int64_t n, chunk, nchunks;
  atomic_llong next, done;
  struct job *next_job;
  lathe_trace *trace; /* the poster's, while tracing: each chunk becomes an event on its thread */
} job;

struct lathe_pool {
  int threads; /* including the caller */
  pthread_t *tids;
  int n_started;
  pthread_mutex_t mu;
  pthread_cond_t work_cv, done_cv;
  job *head;
  bool stop;
  bool spin;        /* threads <= online cores */
  atomic_uint gen;  /* bumped when a job is posted (or the pool stops): what spinning workers watch */
};

static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spins until *v != old (true) or SPIN_NS pass (false). */
static bool spin_while_equal(atomic_uint *v, unsigned old) {
  int64_t end = now_ns() + SPIN_NS;
  for (;;) {
    for (int i = 0; i < 64; i++) {
      if (atomic_load_explicit(v, memory_order_acquire) != old) return true;
      CPU_RELAX();
    }
    if (now_ns() > end) return false;
  }
}

/* Spins until j's chunks are all done (true) or SPIN_NS pass (false). */
static bool spin_until_done(job *j) {
  int64_t end = now_ns() + SPIN_NS;
  for (;;) {
    for (int i = 0; i < 64; i++) {
      if (atomic_load_explicit(&j->done, memory_order_acquire) >= j->nchunks) return true;
      CPU_RELAX();
    }
    if (now_ns() > end) return false;
  }
}

static void unlink_job(lathe_pool *p, job *j) {
  for (job **pp = &p->head; *pp; pp = &(*pp)->next_job)
    if (*pp == j) {
      *pp = j->next_job;
      return;
    }
}

static void run_chunk(lathe_pool *p, job *j, int64_t c) {
  int64_t b = c * j->chunk, e = b + j->chunk;
  if (e > j->n) e = j->n;
  if (LATHE_UNLIKELY(j->trace)) {
    int64_t t0 = lathe_trace_now();
    j->fn(j->ctx, b, e);
    char args[96];
    snprintf(args, sizeof args, "\"chunk\":%lld,\"of\":%lld,\"begin\":%lld,\"end\":%lld", (long long)c,
             (long long)j->nchunks, (long long)b, (long long)e);
    lathe_trace_complete(j->trace, "pool chunk", "worker", t0, lathe_trace_now(), args);
  } else {
    j->fn(j->ctx, b, e);
  }
  /* nchunks is read before the increment: the last increment lets the poster return, and j lives
   * on the poster's stack */
  int64_t nchunks = j->nchunks;
  if (atomic_fetch_add(&j->done, 1) + 1 == nchunks) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->done_cv);
    pthread_mutex_unlock(&p->mu);
  }
}

static void *worker(void *arg) {
  lathe_pool *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    if (!p->stop && !p->head) {
      bool posted = false;
      if (p->spin) {
        unsigned g = atomic_load(&p->gen);
        pthread_mutex_unlock(&p->mu);
        posted = spin_while_equal(&p->gen, g);
        pthread_mutex_lock(&p->mu);
      }
      if (!posted)
        while (!p->stop && !p->head) pthread_cond_wait(&p->work_cv, &p->mu);
      continue;
    }
    if (p->stop) break;
    job *j = p->head;
    int64_t c = atomic_fetch_add(&j->next, 1);
    if (c >= j->nchunks) {
      unlink_job(p, j);
      continue;
    }
    pthread_mutex_unlock(&p->mu);
    run_chunk(p, j, c);
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

lathe_status_t lathe_pool_new(int threads, lathe_pool **out) {
  if (threads < 1) threads = 1;
  lathe_pool *p = calloc(1, sizeof *p);
  if (!p) return LATHE_OOM("ThreadPool");
  p->threads = threads;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  p->spin = cores > 0 && threads <= cores;
  atomic_init(&p->gen, 0);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work_cv, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  if (threads > 1) {
    p->tids = calloc((size_t)threads - 1, sizeof(pthread_t));
    if (!p->tids) {
      lathe_pool_free(p);
      return LATHE_OOM("ThreadPool");
    }
    for (int i = 0; i < threads - 1; i++) {
      if (pthread_create(&p->tids[i], NULL, worker, p) != 0) {
        lathe_pool_free(p);
        return lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED, "ThreadPool: cannot start thread %d of %d", i + 1, threads - 1);
      }
      p->n_started++;
    }
  }
  *out = p;
  return NULL;
}

void lathe_pool_free(lathe_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = true;
  atomic_fetch_add(&p->gen, 1);
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_started; i++) pthread_join(p->tids[i], NULL);
  free(p->tids);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->work_cv);
  pthread_cond_destroy(&p->done_cv);
  free(p);
}

int lathe_pool_threads(const lathe_pool *p) { return p ? p->threads : 1; }

void lathe_parallel_for(lathe_pool *p, int64_t n, int64_t grain, lathe_range_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (!p || p->threads == 1 || n <= grain) {
    fn(ctx, 0, n);
    return;
  }
  int64_t max_chunks = (int64_t)p->threads * 4;
  int64_t nchunks = (n + grain - 1) / grain;
  if (nchunks > max_chunks) nchunks = max_chunks;
  job j = {.fn = fn, .ctx = ctx, .n = n, .chunk = (n + nchunks - 1) / nchunks, .trace = lathe_trace_current};
  j.nchunks = (n + j.chunk - 1) / j.chunk;
  atomic_init(&j.next, 0);
  atomic_init(&j.done, 0);
  pthread_mutex_lock(&p->mu);
  job **tail = &p->head;
  while (*tail) tail = &(*tail)->next_job;
  *tail = &j;
  atomic_fetch_add(&p->gen, 1);
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  for (int64_t c; (c = atomic_fetch_add(&j.next, 1)) < j.nchunks;) run_chunk(p, &j, c);
  if (p->spin) spin_until_done(&j);
  pthread_mutex_lock(&p->mu);
  while (atomic_load(&j.done) < j.nchunks) pthread_cond_wait(&p->done_cv, &p->mu);
  unlink_job(p, &j);
  pthread_mutex_unlock(&p->mu);
}

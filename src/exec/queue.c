/* queue.c -- a worker thread that runs jobs in the order they were pushed: the SPMD replicas of
 * one device ordinal (their collectives then meet in the same order on every ordinal), the CPU's
 * asynchronous executions, and the completion of a GPU's executions. */
#include <stdatomic.h>
#include <time.h>

#include "exec.h"

struct lathe_exec_queue {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  lathe_exec_job *head, *tail;
  bool stop;
  bool orphan;   /* freed from its own worker: the worker frees q as it exits */
  bool sleeping; /* the worker waits on cv: a push signals it */
  int spin_us;
  atomic_int queued; /* jobs pushed and not yet taken: what a spinning worker polls */
};

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

/* With q->mu not held: polls for a job for up to spin_us. */
static void spin(lathe_exec_queue *q) {
  double until = now_us() + q->spin_us;
  for (int k = 0; !atomic_load_explicit(&q->queued, memory_order_acquire); k++)
    if ((k & 63) == 63 && now_us() > until) return;
}

static void *worker(void *arg) {
  lathe_exec_queue *q = arg;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    if (!q->head && !q->stop && q->spin_us > 0) {
      pthread_mutex_unlock(&q->mu);
      spin(q);
      pthread_mutex_lock(&q->mu);
    }
    while (!q->head && !q->stop) {
      q->sleeping = true;
      pthread_cond_wait(&q->cv, &q->mu);
      q->sleeping = false;
    }
    lathe_exec_job *j = q->head;
    if (!j) break; /* stopping, and every job is done */
    q->head = j->next;
    if (!q->head) q->tail = NULL;
    atomic_fetch_sub_explicit(&q->queued, 1, memory_order_relaxed);
    pthread_mutex_unlock(&q->mu);
    j->run(j);
    pthread_mutex_lock(&q->mu);
  }
  bool orphan = q->orphan;
  pthread_mutex_unlock(&q->mu);
  if (orphan) {
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
  }
  return NULL;
}

lathe_status_t lathe_exec_queue_new(const char *label, lathe_exec_queue **out) {
  return lathe_exec_queue_new_spinning(label, 0, out);
}

lathe_status_t lathe_exec_queue_new_spinning(const char *label, int spin_us, lathe_exec_queue **out) {
  lathe_exec_queue *q = calloc(1, sizeof *q);
  if (!q) return LATHE_OOM(label);
  q->spin_us = spin_us;
  atomic_init(&q->queued, 0);
  if (pthread_mutex_init(&q->mu, NULL)) {
    free(q);
    return LATHE_OOM(label);
  }
  if (pthread_cond_init(&q->cv, NULL)) {
    pthread_mutex_destroy(&q->mu);
    free(q);
    return LATHE_OOM(label);
  }
  if (pthread_create(&q->thread, NULL, worker, q)) {
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
    return lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED, "%s: cannot start a queue thread", label);
  }
  *out = q;
  return NULL;
}

void lathe_exec_queue_push(lathe_exec_queue *q, lathe_exec_job *j) {
  j->next = NULL;
  pthread_mutex_lock(&q->mu);
  if (q->tail) q->tail->next = j;
  else q->head = j;
  q->tail = j;
  atomic_fetch_add_explicit(&q->queued, 1, memory_order_release);
  if (q->sleeping) pthread_cond_signal(&q->cv); /* a spinning or busy worker finds the job itself */
  pthread_mutex_unlock(&q->mu);
}

bool lathe_exec_queue_is_worker(const lathe_exec_queue *q) { return q && pthread_equal(q->thread, pthread_self()); }

void lathe_exec_queue_free(lathe_exec_queue *q) {
  if (!q) return;
  /* The last reference to a backend may drop inside a job this queue runs (a launch's token):
   * that thread cannot join itself, so it finishes its queue and frees q on exit. */
  bool self = pthread_equal(q->thread, pthread_self());
  pthread_mutex_lock(&q->mu);
  q->stop = true;
  q->orphan = self;
  pthread_cond_signal(&q->cv);
  pthread_mutex_unlock(&q->mu);
  if (self) {
    pthread_detach(q->thread);
    return;
  }
  pthread_join(q->thread, NULL);
  pthread_cond_destroy(&q->cv);
  pthread_mutex_destroy(&q->mu);
  free(q);
}

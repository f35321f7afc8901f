/* queue.c -- a worker thread that runs jobs in the order they were pushed: the SPMD replicas of
 * one device ordinal (their collectives then meet in the same order on every ordinal), and the
 * CPU's asynchronous executions. */
#include "exec.h"

struct lathe_exec_queue {
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  lathe_exec_job *head, *tail;
  bool stop;
  bool orphan; /* freed from its own worker: the worker frees q as it exits */
};

static void *worker(void *arg) {
  lathe_exec_queue *q = arg;
  pthread_mutex_lock(&q->mu);
  for (;;) {
    while (!q->head && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
    lathe_exec_job *j = q->head;
    if (!j) break; /* stopping, and every job is done */
    q->head = j->next;
    if (!q->head) q->tail = NULL;
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
  lathe_exec_queue *q = calloc(1, sizeof *q);
  if (!q) return LATHE_OOM(label);
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
  pthread_cond_signal(&q->cv);
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

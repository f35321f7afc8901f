/* event.c -- events: a mutex, a condition variable and a list of callbacks around a status.
 * Signalled once; waiting on a signalled event is one atomic load. */
#include <pthread.h>

#include "device.h"

typedef struct ev_cb {
  lathe_event_fn fn;
  void *ctx;
  struct ev_cb *next;
} ev_cb;

struct lathe_event {
  atomic_int refs;
  atomic_bool done;
  lathe_status_t status; /* written before done is set; immutable afterwards */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  ev_cb *cbs; /* guarded by mu; run in registration order */
  const void *native_owner;
  void *native;
  void (*native_free)(void *);
  lathe_status_t (*native_wait)(void *);
};

lathe_status_t lathe_event_new(lathe_event **out) {
  lathe_event *ev = calloc(1, sizeof *ev);
  if (!ev) return LATHE_OOM("Event");
  if (pthread_mutex_init(&ev->mu, NULL)) {
    free(ev);
    return LATHE_OOM("Event");
  }
  if (pthread_cond_init(&ev->cv, NULL)) {
    pthread_mutex_destroy(&ev->mu);
    free(ev);
    return LATHE_OOM("Event");
  }
  atomic_init(&ev->refs, 1);
  atomic_init(&ev->done, false);
  *out = ev;
  return NULL;
}

lathe_event *lathe_event_retain(lathe_event *ev) {
  if (ev) atomic_fetch_add_explicit(&ev->refs, 1, memory_order_relaxed);
  return ev;
}

void lathe_event_release(lathe_event *ev) {
  if (!ev || atomic_fetch_sub_explicit(&ev->refs, 1, memory_order_acq_rel) != 1) return;
  /* an event dropped unsignalled still frees its callbacks' records (they never ran) */
  for (ev_cb *c = ev->cbs, *next; c; c = next) {
    next = c->next;
    free(c);
  }
  if (ev->native_free) ev->native_free(ev->native);
  lathe_status_free(ev->status);
  pthread_cond_destroy(&ev->cv);
  pthread_mutex_destroy(&ev->mu);
  free(ev);
}

void lathe_event_signal(lathe_event *ev, lathe_status_t status) {
  if (!ev) {
    lathe_status_free(status);
    return;
  }
  pthread_mutex_lock(&ev->mu);
  if (atomic_load_explicit(&ev->done, memory_order_relaxed)) { /* a second signal is a device bug */
    pthread_mutex_unlock(&ev->mu);
    lathe_status_free(status);
    return;
  }
  ev->status = status;
  atomic_store_explicit(&ev->done, true, memory_order_release);
  ev_cb *cbs = ev->cbs;
  ev->cbs = NULL;
  pthread_cond_broadcast(&ev->cv);
  pthread_mutex_unlock(&ev->mu);
  /* callbacks may release the last other reference: keep ours until they are done */
  lathe_event_retain(ev);
  for (ev_cb *c = cbs, *next; c; c = next) {
    next = c->next;
    c->fn(c->ctx, ev->status);
    free(c);
  }
  lathe_event_release(ev);
}

bool lathe_event_is_ready(lathe_event *ev) { return !ev || atomic_load_explicit(&ev->done, memory_order_acquire); }

static lathe_status_t copy_status(lathe_status_t st) {
  if (!st) return NULL;
  return lathe_status_new(lathe_status_code_of(st), "%s", lathe_status_message(st));
}

lathe_status_t lathe_event_wait(lathe_event *ev) {
  if (!ev) return NULL;
  if (!atomic_load_explicit(&ev->done, memory_order_acquire) && ev->native_wait) {
    /* the device's signal comes from another thread after the work: asking the native handle
     * spares this thread that hand-over when the handle alone tells success */
    lathe_status_t st = ev->native_wait(ev->native);
    if (!st) return NULL;
    lathe_status_free(st);
  }
  if (!atomic_load_explicit(&ev->done, memory_order_acquire)) {
    pthread_mutex_lock(&ev->mu);
    while (!atomic_load_explicit(&ev->done, memory_order_acquire)) pthread_cond_wait(&ev->cv, &ev->mu);
    pthread_mutex_unlock(&ev->mu);
  }
  return copy_status(ev->status);
}

lathe_status_t lathe_event_on_ready(lathe_event *ev, lathe_event_fn cb, void *ctx) {
  if (lathe_event_is_ready(ev)) {
    cb(ctx, ev ? ev->status : NULL);
    return NULL;
  }
  ev_cb *c = malloc(sizeof *c);
  if (!c) return LATHE_OOM("Event");
  c->fn = cb;
  c->ctx = ctx;
  c->next = NULL;
  pthread_mutex_lock(&ev->mu);
  if (atomic_load_explicit(&ev->done, memory_order_relaxed)) {
    pthread_mutex_unlock(&ev->mu);
    free(c);
    cb(ctx, ev->status);
    return NULL;
  }
  ev_cb **tail = &ev->cbs;
  while (*tail) tail = &(*tail)->next;
  *tail = c;
  pthread_mutex_unlock(&ev->mu);
  return NULL;
}

void lathe_event_set_native(lathe_event *ev, const void *owner, void *native, void (*free_fn)(void *native)) {
  if (!ev || ev->native_owner) return;
  ev->native_owner = owner;
  ev->native = native;
  ev->native_free = free_fn;
}

void lathe_event_set_native_wait(lathe_event *ev, lathe_status_t (*wait_fn)(void *native)) {
  if (ev && ev->native) ev->native_wait = wait_fn;
}

void *lathe_event_native(lathe_event *ev, const void *owner) {
  return ev && ev->native_owner == owner ? ev->native : NULL;
}

/* ---- the replicas of an SPMD execution ---- */
lathe_status_t lathe_collective_new(int n_replicas, const int *devices, lathe_collective **out) {
  lathe_collective *g = calloc(1, sizeof *g);
  pthread_mutex_t *mu = malloc(sizeof *mu);
  int *d = malloc(sizeof(int) * (size_t)(n_replicas > 0 ? n_replicas : 1));
  if (!g || !mu || !d || pthread_mutex_init(mu, NULL)) {
    free(g);
    free(mu);
    free(d);
    return LATHE_OOM("Execute");
  }
  atomic_init(&g->refs, 1);
  g->n_replicas = n_replicas;
  memcpy(d, devices, sizeof(int) * (size_t)n_replicas);
  g->devices = d;
  g->mu = mu;
  *out = g;
  return NULL;
}

lathe_collective *lathe_collective_retain(lathe_collective *g) {
  if (g) atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
  return g;
}

void lathe_collective_release(lathe_collective *g) {
  if (!g || atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) != 1) return;
  if (g->impl_free) g->impl_free(g->impl);
  pthread_mutex_destroy(g->mu);
  free(g->mu);
  free(g->devices);
  free(g);
}

/* alloc.c -- the caching device allocator: blocks in size classes (eight per power of two, at
 * most 12.5% slack), kept when freed and reused by the next allocation of their class. Blocks
 * are freed only after every use of them is done (tensors are released by the work that used
 * them once it has completed), so reuse needs no stream ordering of its own. Out of memory: the
 * cache goes back to the driver and the allocation is tried once more; if it still fails the
 * error is RESOURCE_EXHAUSTED with the sizes, and the device stays usable. */
#include <stdio.h>

#include "cuda.h"

enum { MIN_BLOCK = 512, CLASSES = 8 * 48 };

struct cuda_block {
  struct cuda_block *next;
  lcuDeviceptr ptr;
};

/* The class of a request and the size its blocks have. */
static int class_of(size_t n, size_t *size) {
  size_t base = MIN_BLOCK;
  int c = 0;
  while (n > 2 * base) base *= 2, c += 8;
  size_t step = base / 8, k = n <= base ? 0 : (n - base + step - 1) / step;
  *size = base + k * step;
  return c + (int)k;
}

lathe_status_t lathe_cuda_alloc_init(cuda_alloc *a) {
  memset(a, 0, sizeof *a);
  a->free_lists = calloc(CLASSES, sizeof(cuda_block *));
  if (!a->free_lists || pthread_mutex_init(&a->mu, NULL)) {
    free(a->free_lists);
    return LATHE_OOM("lathe:cuda");
  }
  return NULL;
}

static void drain(cuda_dev *d) { /* with a->mu held; context current */
  cuda_alloc *a = &d->alloc;
  for (int c = 0; c < CLASSES; c++)
    while (a->free_lists[c]) {
      cuda_block *b = a->free_lists[c];
      a->free_lists[c] = b->next;
      d->cu->api->cuMemFree(b->ptr);
      free(b);
    }
  a->cached_bytes = 0;
}

void lathe_cuda_alloc_destroy(cuda_dev *d) {
  if (!d->alloc.free_lists) return;
  lathe_status_t st = lathe_cuda_use(d);
  if (!st) drain(d);
  lathe_status_free(st);
  pthread_mutex_destroy(&d->alloc.mu);
  free(d->alloc.free_lists);
  d->alloc.free_lists = NULL;
}

lathe_status_t lathe_cuda_malloc(cuda_dev *d, size_t nbytes, lcuDeviceptr *out) {
  cuda_alloc *a = &d->alloc;
  size_t size;
  int c = class_of(nbytes ? nbytes : 1, &size);
  if (c >= CLASSES)
    return lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED, "lathe:cuda: %zu bytes is more than any GPU holds", nbytes);
  pthread_mutex_lock(&a->mu);
  cuda_block *b = a->free_lists[c];
  if (b) {
    a->free_lists[c] = b->next;
    a->cached_bytes -= size;
    a->in_use_bytes += size;
    a->n_allocs++;
    if (a->in_use_bytes > a->peak_bytes) a->peak_bytes = a->in_use_bytes;
    pthread_mutex_unlock(&a->mu);
    *out = b->ptr;
    free(b);
    return NULL;
  }
  pthread_mutex_unlock(&a->mu);
  LATHE_RETURN_IF_ERROR(lathe_cuda_use(d));
  const lcu_api *api = d->cu->api;
  lcuDeviceptr p = 0;
  lcuResult r = api->cuMemAlloc(&p, size);
  if (r == LCU_ERROR_OUT_OF_MEMORY) { /* the cache may hold what is missing */
    pthread_mutex_lock(&a->mu);
    drain(d);
    pthread_mutex_unlock(&a->mu);
    r = api->cuMemAlloc(&p, size);
  }
  if (r == LCU_ERROR_OUT_OF_MEMORY) {
    size_t free_b = 0, total = 0;
    api->cuMemGetInfo(&free_b, &total);
    return lathe_status_new(LATHE_STATUS_RESOURCE_EXHAUSTED,
                            "lathe:cuda: out of memory on device %d allocating %zu bytes (%zu bytes in use by lathe, "
                            "%zu free of %zu)", d->ordinal, nbytes, a->in_use_bytes, free_b, total);
  }
  LATHE_RETURN_IF_ERROR(lathe_cuda_error(api, r, "lathe:cuda: cuMemAlloc"));
  pthread_mutex_lock(&a->mu);
  a->in_use_bytes += size;
  a->n_allocs++;
  if (a->in_use_bytes > a->peak_bytes) a->peak_bytes = a->in_use_bytes;
  pthread_mutex_unlock(&a->mu);
  *out = p;
  return NULL;
}

/* Called from any thread, also from a completion thread: no CUDA call unless the block cannot
 * be recorded. */
void lathe_cuda_free(cuda_dev *d, lcuDeviceptr p, size_t nbytes) {
  if (!p) return;
  cuda_alloc *a = &d->alloc;
  size_t size;
  int c = class_of(nbytes ? nbytes : 1, &size);
  cuda_block *b = malloc(sizeof *b);
  pthread_mutex_lock(&a->mu);
  a->in_use_bytes -= size;
  if (b) {
    b->ptr = p;
    b->next = a->free_lists[c];
    a->free_lists[c] = b;
    a->cached_bytes += size;
  }
  pthread_mutex_unlock(&a->mu);
  if (!b) {
    lathe_status_t st = lathe_cuda_use(d);
    if (!st) d->cu->api->cuMemFree(p);
    lathe_status_free(st);
  }
}

/* Counted in block sizes (the request rounded up to its class), which is what the GPU holds. */
void lathe_cuda_alloc_stats(cuda_dev *d, bool reset_peak, lathe_memory_stats *out) {
  cuda_alloc *a = &d->alloc;
  pthread_mutex_lock(&a->mu);
  *out = (lathe_memory_stats){.current_bytes = (int64_t)a->in_use_bytes, .peak_bytes = (int64_t)a->peak_bytes,
                              .cached_bytes = (int64_t)a->cached_bytes, .n_allocs = a->n_allocs};
  if (reset_peak) a->peak_bytes = a->in_use_bytes;
  pthread_mutex_unlock(&a->mu);
}

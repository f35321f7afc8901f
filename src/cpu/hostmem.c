/* hostmem.c -- the CPU device's memory: 64-byte aligned host blocks, with large blocks kept in
 * a cache of size classes when freed, so a step that allocates the same big outputs every run
 * reuses warm pages instead of mapping (and faulting in) fresh ones each time. Small blocks (up
 * to SMALL_MAX) are kept too, a few per power of two: glibc's aligned allocation splits a larger
 * chunk on every call (about 700 instructions for 64 bytes, most of a one-op execution's cost).
 * One cache per process (host memory is one resource), bounded, emptied when the last CPU
 * device goes. */
#include <pthread.h>
#include <unistd.h>
#ifdef __APPLE__
#include <malloc/malloc.h>
static size_t block_size(void *p) { return malloc_size(p); }
#else
#include <malloc.h>
static size_t block_size(void *p) { return malloc_usable_size(p); }
#endif

#include "cpu.h"

enum { CACHE_MIN = 256 << 10 };   /* blocks between SMALL_MAX and this go straight to malloc */
#define CLASSES 256
enum { SMALL_MAX = 4096, SMALL_CLASSES = 7, SMALL_KEEP = 64 }; /* 64 B .. 4 KiB, 64 blocks each */

typedef struct block {
  struct block *next;
} block;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static block *cached[CLASSES];
static size_t cached_bytes, cache_limit;
static int users; /* live CPU devices */
static block *small[SMALL_CLASSES];
static int n_small[SMALL_CLASSES];
/* lathe_memory_stats, counted in the callers' bytes under mu (which every small and cached block
 * takes anyway, so the floor of a tiny execution pays no extra atomic operation) */
static int64_t live_bytes, peak_bytes, n_allocs;

static void count_alloc(size_t nbytes) { /* with mu held */
  live_bytes += (int64_t)nbytes;
  n_allocs++;
  if (live_bytes > peak_bytes) peak_bytes = live_bytes;
}

/* The small class of an n-byte block (-1: not small) and its size. */
static int small_class_of(size_t n, size_t *size) {
  if (n > SMALL_MAX) return -1;
  int c = 0;
  size_t s = 64;
  while (s < n) s *= 2, c++;
  *size = s;
  return c;
}

/* Classes: eight steps per power of two from CACHE_MIN up (at most 12.5% slack). */
static int class_of(size_t n, size_t *size) {
  int c = 0;
  size_t base = CACHE_MIN;
  while (n > 2 * base && c + 8 < CLASSES) base *= 2, c += 8;
  size_t step = base / 8;
  size_t k = n <= base ? 0 : (n - base + step - 1) / step;
  if (c + (int)k >= CLASSES) return -1;
  *size = base + k * step;
  return c + (int)k;
}

static void drain(void) { /* with mu held */
  for (int c = 0; c < SMALL_CLASSES; c++) {
    while (small[c]) {
      block *b = small[c];
      small[c] = b->next;
      lathe_aligned_free(b);
    }
    n_small[c] = 0;
  }
  for (int c = 0; c < CLASSES; c++)
    while (cached[c]) {
      block *b = cached[c];
      cached[c] = b->next;
      lathe_aligned_free(b);
    }
  cached_bytes = 0;
}

void lathe_cpu_mem_attach(void) {
  pthread_mutex_lock(&mu);
  if (users++ == 0 && !cache_limit) {
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    size_t phys = pages > 0 && psize > 0 ? (size_t)pages * (size_t)psize : (size_t)8 << 30;
    cache_limit = phys / 16 < ((size_t)2 << 30) ? phys / 16 : (size_t)2 << 30;
  }
  pthread_mutex_unlock(&mu);
}

void lathe_cpu_mem_detach(void) {
  pthread_mutex_lock(&mu);
  if (--users == 0) drain();
  pthread_mutex_unlock(&mu);
}

void *lathe_cpu_mem_alloc(size_t nbytes) {
  size_t size = nbytes;
  int sc = small_class_of(nbytes, &size);
  if (sc >= 0) {
    pthread_mutex_lock(&mu);
    block *b = small[sc];
    if (b) {
      small[sc] = b->next;
      n_small[sc]--;
    }
    count_alloc(nbytes);
    pthread_mutex_unlock(&mu);
    void *p = b ? (void *)b : lathe_aligned_alloc(size);
    if (!p) lathe_cpu_mem_uncount(nbytes);
    return p;
  }
  int c = nbytes >= CACHE_MIN ? class_of(nbytes, &size) : -1;
  pthread_mutex_lock(&mu);
  count_alloc(nbytes);
  block *hit = NULL;
  if (c >= 0 && (hit = cached[c])) {
    cached[c] = hit->next;
    cached_bytes -= size;
  }
  pthread_mutex_unlock(&mu);
  if (hit) return hit;
  void *p = lathe_aligned_alloc(size);
  if (!p && c >= 0) { /* memory may be sitting in the cache: give it back and retry once */
    pthread_mutex_lock(&mu);
    drain();
    pthread_mutex_unlock(&mu);
    p = lathe_aligned_alloc(size);
  }
  if (!p) lathe_cpu_mem_uncount(nbytes);
  return p;
}

void lathe_cpu_mem_uncount(size_t nbytes) {
  pthread_mutex_lock(&mu);
  live_bytes -= (int64_t)nbytes;
  pthread_mutex_unlock(&mu);
}

void lathe_cpu_mem_stats(bool reset_peak, lathe_memory_stats *out) {
  pthread_mutex_lock(&mu);
  if (reset_peak) peak_bytes = live_bytes;
  int64_t small_bytes = 0;
  for (int c = 0; c < SMALL_CLASSES; c++) small_bytes += (int64_t)n_small[c] * (64 << c);
  *out = (lathe_memory_stats){.current_bytes = live_bytes, .peak_bytes = peak_bytes,
                              .cached_bytes = (int64_t)cached_bytes + small_bytes, .n_allocs = n_allocs,
                              .process_wide = true};
  pthread_mutex_unlock(&mu);
}

void lathe_cpu_mem_free(void *p, size_t nbytes) {
  if (!p) return;
  size_t size;
  int sc = small_class_of(nbytes, &size);
  if (sc >= 0) {
    /* kept only when the block holds its class's size: a caller's nbytes is then never trusted
     * to hand a smaller block out as a larger one */
    bool fits = block_size(p) >= size;
    pthread_mutex_lock(&mu);
    live_bytes -= (int64_t)nbytes;
    if (fits && users > 0 && n_small[sc] < SMALL_KEEP) {
      block *b = p;
      b->next = small[sc];
      small[sc] = b;
      n_small[sc]++;
      p = NULL;
    }
    pthread_mutex_unlock(&mu);
    lathe_aligned_free(p);
    return;
  }
  int c = nbytes >= CACHE_MIN ? class_of(nbytes, &size) : -1;
  pthread_mutex_lock(&mu);
  live_bytes -= (int64_t)nbytes;
  if (c >= 0 && users > 0 && cached_bytes + size <= cache_limit) {
    block *b = p;
    b->next = cached[c];
    cached[c] = b;
    cached_bytes += size;
    p = NULL;
  }
  pthread_mutex_unlock(&mu);
  lathe_aligned_free(p);
}

/* lathe_gloo.h -- the C interface of liblathe_gloo.so, the plugin that wraps Gloo's C++ API (the
 * only C++ outside src/mlx). The engine dlopens the plugin (src/runtime/job.c), so a build
 * without Gloo works; every entry catches Gloo's exceptions and returns nonzero with a message in
 * err (NUL-terminated, at most cap bytes). */
#ifndef LATHE_GLOO_H
#define LATHE_GLOO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LATHE_GLOO_ABI 2

/* The key-value store Gloo rendezvous through (the job's coordinator). get waits for the key
 * up to the job's timeout; its *value is malloc'ed and freed by the caller with free. Each
 * returns 0, or nonzero with a message in err. */
typedef struct lathe_gloo_store {
  void *ctx;
  int (*set)(void *ctx, const char *key, const void *value, size_t n, char *err, size_t cap);
  int (*get)(void *ctx, const char *key, void **value, size_t *n, char *err, size_t cap);
} lathe_gloo_store;

/* c[i] = a[i] (op) b[i] for i < n elements (the engine's reduction, so semantics are lathe's). */
typedef void (*lathe_gloo_reduce_fn)(void *ctx, void *c, const void *a, const void *b, size_t n);

typedef struct lathe_gloo_context lathe_gloo_context; /* a connected group of processes */

int lathe_gloo_abi(void);
/* Connects rank of size processes over TCP bound to host (this process's address), keys under
 * prefix in store; each operation then fails after timeout_ms without progress. */
int lathe_gloo_connect(const lathe_gloo_store *store, const char *prefix, const char *host, int rank, int size,
                       int timeout_ms, lathe_gloo_context **out, char *err, size_t cap);
/* In-place AllReduce of count elements of elem_size bytes at buf. */
int lathe_gloo_all_reduce(lathe_gloo_context *c, void *buf, size_t count, size_t elem_size, lathe_gloo_reduce_fn fn,
                          void *fn_ctx, uint32_t tag, char *err, size_t cap);
/* AllGather of bytes bytes from each rank: out (size * bytes) gets rank r's in at r * bytes. */
int lathe_gloo_all_gather(lathe_gloo_context *c, const void *in, void *out, size_t bytes, uint32_t tag, char *err,
                          size_t cap);
/* AllToAll: in and out hold size chunks of bytes; in's chunk r goes to rank r, out's chunk r
 * comes from rank r. */
int lathe_gloo_all_to_all(lathe_gloo_context *c, const void *in, void *out, size_t bytes, uint32_t tag, char *err,
                          size_t cap);
void lathe_gloo_free(lathe_gloo_context *c);

#ifdef __cplusplus
}
#endif
#endif

/* cpu.h -- the CPU device: thread pool, execution frames, and the kernel families.
 *
 * Every family (src/cpu/<family>.c per kind of src/graph/kinds.def) exports two functions:
 *   bool lathe_cpu_supports_<family>(lathe_op op, lathe_dtype dtype);
 *   lathe_status_t lathe_cpu_run_<family>(lathe_cpu_exec *ex, const lathe_node *n,
 *                                       lathe_tensor *const *in, lathe_tensor **out);
 * `in` holds n->n_operands input tensors (hidden capture inputs are not passed); `out` holds
 * n->n_out tensors already allocated with the node's result shape(s) (contents undefined).
 * Kernels assume the graph was validated at build time and never re-check shapes. */
#ifndef LATHE_CPU_H
#define LATHE_CPU_H

#include "../graph/program.h"
#include "../runtime/runtime.h"

/* ---- thread pool (pthreads; persistent; safe to submit from many threads at once) ---- */
typedef struct lathe_pool lathe_pool;
lathe_status_t lathe_pool_new(int threads, lathe_pool **out);
void lathe_pool_free(lathe_pool *p);
int lathe_pool_threads(const lathe_pool *p);
/* Runs fn(ctx, begin, end) over [0, n) split into chunks of at least grain items, using the
 * pool's threads and the caller's; returns when all chunks are done. Runs inline when n is
 * small or the pool has one thread. */
typedef void (*lathe_range_fn)(void *ctx, int64_t begin, int64_t end);
void lathe_parallel_for(lathe_pool *p, int64_t n, int64_t grain, lathe_range_fn fn, void *ctx);

/* ---- the device context and execution ---- */

typedef enum lathe_cpu_async {
  LATHE_CPU_INLINE = 0, /* async=0: work runs on the caller's thread before execute returns */
  LATHE_CPU_THREAD = 1, /* async=1: a worker thread per ordinal; execute returns at once */
  LATHE_CPU_LATE = 2,   /* async=late: as THREAD, each job delayed on purpose (tests) */
} lathe_cpu_async;

typedef struct lathe_cpu {
  lathe_pool *pool; /* shared by every ordinal */
  int threads;
  bool fuse;        /* fusion regions at compile (option fuse=0|1, default 1) */
  bool dense_vjp;   /* FusedDenseVJP advertised (option dense_vjp=1; off by default) */
  const struct lathe_cpu_kernels *kernels; /* the ISA's kernel table (kernels.h), chosen at creation */
  bool isa_forced;  /* isa= was given (then the config string names it) */
  int n_devices;    /* ordinals (option devices=N) */
  lathe_cpu_async async;
  struct lathe_exec_queue **queues; /* per ordinal (src/exec/queue.c); made at once when asynchronous, on the first SPMD run when INLINE */
  void *queues_mu;    /* pthread_mutex_t guarding their creation */
  char **descriptions;
  struct lathe_job *job; /* a reference when this backend is part of a job of several processes */
} lathe_cpu;

extern const lathe_device_i lathe_cpu_device;

/* Host memory (hostmem.c): 64-byte aligned; large blocks come from a cache of freed ones. */
void *lathe_cpu_mem_alloc(size_t nbytes);
void lathe_cpu_mem_free(void *p, size_t nbytes);
void lathe_cpu_mem_attach(void); /* a CPU device starts using the cache */
void lathe_cpu_mem_detach(void); /* ... stops; the last one empties it */
/* The process's host memory counters (bytes handed out and not freed, their peak, the cache). */
void lathe_cpu_mem_stats(bool reset_peak, lathe_memory_stats *out);
void lathe_cpu_mem_uncount(size_t nbytes); /* an allocation counted but failed */

typedef struct lathe_cpu_exec lathe_cpu_exec; /* one execution (frames, pool) */
lathe_pool *lathe_cpu_exec_pool(lathe_cpu_exec *ex);
/* SPMD: the execution's replicas (NULL for a single-device program) and this run's replica. */
lathe_collective *lathe_cpu_exec_group(lathe_cpu_exec *ex, int *out_replica);
/* c = a (op) b over n elements of dt with AllReduce's semantics (op: REDUCE_SUM/PRODUCT/MAX/MIN;
 * NaN-propagating max and min, wrapping integers): the pairwise step Gloo calls across processes.
 * c may be a or b. */
void lathe_cpu_pair_reduce(lathe_op op, lathe_dtype dt, void *c, const void *a, const void *b, size_t n);
/* Runs sub-function fn of the running op (While, If, Sort, Call) on inputs (borrowed): its own
 * arguments; the values it captures are passed after them from the op's hidden inputs. outputs
 * are owned tensors. */
lathe_status_t lathe_cpu_exec_call(lathe_cpu_exec *ex, const lathe_function *fn, lathe_tensor *const *inputs,
                                   int n_inputs, lathe_tensor **outputs);
/* A host tensor of the CPU device (ordinal 0) with memory from the host allocator. */
lathe_status_t lathe_cpu_tensor_new(const lathe_shape *shape, lathe_tensor **out);

/* Capabilities (device.c) and the kernel of node n (by its KIND). */
bool lathe_cpu_supports_op(lathe_op op, lathe_dtype dtype);
lathe_status_t lathe_cpu_run_kernel(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out);

/* Plans (exec.c). */
lathe_status_t lathe_cpu_compile(void *ctx, const lathe_program *program, lathe_plan **out);
void lathe_cpu_plan_free(void *ctx, lathe_plan *plan);
/* Runs launch l now, on this thread (src/exec's lathe_exec_program): waits for pending inputs,
 * takes over l->inputs (released after their last use: a donated input held by nothing else can
 * be reused in place), fills l->outputs. l->release is the caller's. */
lathe_status_t lathe_cpu_run_launch(lathe_cpu *cpu, lathe_plan *plan, const lathe_launch *l);

#define LATHE_CPU_FAMILY(K)                                                                             \
  bool lathe_cpu_supports_##K(lathe_op op, lathe_dtype dtype);                                                  \
  lathe_status_t lathe_cpu_run_##K(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,            \
                                   lathe_tensor **out);
#define LATHE_KIND(NAME, family) LATHE_KIND_IF_FAMILY(family, LATHE_CPU_FAMILY(family))
#include "../graph/kinds.def"
#undef LATHE_KIND
#undef LATHE_CPU_FAMILY

/* ---- element access helpers for kernels ---- */
/* Reads element i of a (possibly packed) integer tensor as int64 (sign-extended for SINT). Bit
 * positions are unsigned: below 2^62 elements of at most 4 bits, they fit in 64 bits. */
static inline int64_t lathe_load_packed(const void *data, lathe_dtype dt, int64_t i) {
  int bits = lathe_dtype_bits(dt);
  const uint8_t *p = data;
  uint64_t bit = (uint64_t)i * (uint64_t)bits;
  unsigned v = (p[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1);
  if (lathe_dtype_class_of(dt) == LATHE_CLASS_SINT && (v >> (bits - 1))) return (int64_t)v - (1 << bits);
  return (int64_t)v;
}
static inline void lathe_store_packed(void *data, lathe_dtype dt, int64_t i, int64_t v) {
  int bits = lathe_dtype_bits(dt);
  uint8_t *p = data;
  uint64_t bit = (uint64_t)i * (uint64_t)bits;
  unsigned mask = ((1u << bits) - 1) << (bit & 7);
  p[bit >> 3] = (uint8_t)((p[bit >> 3] & ~mask) | (((unsigned)v << (bit & 7)) & mask));
}

static inline int64_t lathe_clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Advances a row-major multi-index over dims[0..n). */
static inline void lathe_odometer(int64_t *idx, const int64_t *dims, int n) {
  for (int d = n - 1; d >= 0; d--) {
    if (++idx[d] < dims[d]) return;
    idx[d] = 0;
  }
}
/* The row-major multi-index of flat position s over dims[0..n). */
static inline void lathe_unflatten(int64_t s, const int64_t *dims, int n, int64_t *idx) {
  for (int d = n - 1; d >= 0; d--) {
    idx[d] = dims[d] ? s % dims[d] : 0;
    s = dims[d] ? s / dims[d] : 0;
  }
}

/* ---- Float16/BFloat16 (dt) <-> Float32 arrays and tensors ---- */
static inline void lathe_halves_to_f32(lathe_dtype dt, const uint16_t *h, float *f, int64_t n) {
  if (dt == LATHE_DTYPE_BFLOAT16)
    for (int64_t i = 0; i < n; i++) f[i] = lathe_bf16_to_f32(h[i]);
  else
    for (int64_t i = 0; i < n; i++) f[i] = lathe_f16_to_f32(h[i]);
}
static inline void lathe_f32_to_halves(lathe_dtype dt, const float *f, uint16_t *h, int64_t n) {
  if (dt == LATHE_DTYPE_BFLOAT16)
    for (int64_t i = 0; i < n; i++) h[i] = lathe_f32_to_bf16(f[i]);
  else
    for (int64_t i = 0; i < n; i++) h[i] = lathe_f32_to_f16(f[i]);
}
/* A new Float32 copy of a half tensor (owned by the caller). */
static inline lathe_status_t lathe_cpu_widen_half(const lathe_tensor *t, lathe_tensor **out) {
  lathe_shape s = t->shape;
  s.dtype = LATHE_DTYPE_FLOAT32;
  LATHE_RETURN_IF_ERROR(lathe_cpu_tensor_new(&s, out));
  lathe_halves_to_f32(t->shape.dtype, t->data, (*out)->data, lathe_shape_size(&s));
  return NULL;
}
/* Stores Float32 tensor f32 into half tensor t of the same dims. */
static inline void lathe_cpu_narrow_half(const lathe_tensor *f32, lathe_tensor *t) {
  lathe_f32_to_halves(t->shape.dtype, f32->data, t->data, lathe_shape_size(&t->shape));
}

#endif

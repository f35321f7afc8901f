/* cpu.h -- the CPU device: thread pool, execution frames, and the kernel families.
 *
 * Every family (one file per KIND of lathe_ops.def) exports two functions:
 *   bool lathe_cpu_supports_<kind>(lathe_op op, lathe_dtype dtype);
 *   lathe_status_t lathe_cpu_run_<kind>(lathe_cpu_exec *ex, const lathe_node *n,
 *                                       lathe_tensor *const *in, lathe_tensor **out);
 * `in` holds n->n_operands input tensors (hidden capture inputs are not passed); `out` holds
 * n->n_out tensors already allocated with the node's result shape(s) (contents undefined).
 * Kernels assume the graph was validated at build time and never re-check shapes. */
#ifndef LATHE_CPU_H
#define LATHE_CPU_H

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
typedef struct lathe_cpu {
  lathe_pool *pool;
  int threads;
  bool fuse; /* elementwise fusion at compile (option fuse=0|1, default 1) */
} lathe_cpu;

typedef struct lathe_cpu_exec lathe_cpu_exec; /* one execution (frames, pool) */
lathe_pool *lathe_cpu_exec_pool(lathe_cpu_exec *ex);
/* Runs sub-function fn (compiled with the plan) on inputs (borrowed) from inside a kernel of
 * the current frame; outputs are owned tensors. Closures see the caller frame's values. */
lathe_status_t lathe_cpu_exec_call(lathe_cpu_exec *ex, const lathe_function *fn, lathe_tensor *const *inputs,
                                   int n_inputs, lathe_tensor **outputs);
lathe_status_t lathe_cpu_tensor_new(const lathe_shape *shape, lathe_tensor **out);

#define LATHE_CPU_FAMILY(K)                                                       \
  bool lathe_cpu_supports_##K(lathe_op op, lathe_dtype dtype);                     \
  lathe_status_t lathe_cpu_run_##K(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, \
                                   lathe_tensor **out);
LATHE_CPU_FAMILY(unary)
LATHE_CPU_FAMILY(convert)
LATHE_CPU_FAMILY(binary)
LATHE_CPU_FAMILY(compare)
LATHE_CPU_FAMILY(select)
LATHE_CPU_FAMILY(reduce)
LATHE_CPU_FAMILY(layout)
LATHE_CPU_FAMILY(dot)
LATHE_CPU_FAMILY(conv)
LATHE_CPU_FAMILY(window)
LATHE_CPU_FAMILY(index)
LATHE_CPU_FAMILY(control)
LATHE_CPU_FAMILY(numeric)
LATHE_CPU_FAMILY(dynshape)
LATHE_CPU_FAMILY(barrier)
LATHE_CPU_FAMILY(fused)
LATHE_CPU_FAMILY(leaf)
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

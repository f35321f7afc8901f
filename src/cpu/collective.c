/* collective.c -- AllReduce between the replicas of an SPMD execution on lathe:cpu,devices=N.
 * Replicas run at once on their queues' threads and meet in shared memory: the k-th collective
 * call of every replica (they run one program, so their calls line up) posts its operands, waits
 * until its whole group has posted, reduces the group's values in group order (so every
 * replica computes the same bits), then waits until all have read before the operands may go.
 * In a job of several processes (src/runtime/job.h) each local group spans every process: its
 * first replica reduces the local values, then reduces that across the processes with Gloo (the
 * same reduction, pairwise), and the group's other replicas copy its result. */
#include <pthread.h>

#include "cpu.h"
#include "exec.h"
#include "../runtime/job.h"

typedef struct coll_call {
  struct coll_call *next;
  int64_t seq;
  int posted, read, left;
  lathe_tensor *const **in; /* per replica: its operands */
  /* in a job, per replica leading a group: its results, whether they are final, its error */
  lathe_tensor ***out;
  bool *done;
  char **err;
} coll_call;

typedef struct cpu_coll {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n;
  int64_t *seq; /* per replica: its next call's number */
  coll_call *calls;
} cpu_coll;

static void call_free(coll_call *k, int n) {
  for (int r = 0; k->err && r < n; r++) free(k->err[r]);
  free(k->err);
  free(k->done);
  free(k->out);
  free(k->in);
  free(k);
}

static void coll_free(void *p) {
  cpu_coll *c = p;
  if (!c) return;
  while (c->calls) {
    coll_call *k = c->calls;
    c->calls = k->next;
    call_free(k, c->n);
  }
  pthread_cond_destroy(&c->cv);
  pthread_mutex_destroy(&c->mu);
  free(c->seq);
  free(c);
}

static lathe_status_t coll_of(lathe_collective *g, cpu_coll **out) {
  pthread_mutex_lock(g->mu);
  if (!g->impl) {
    cpu_coll *c = calloc(1, sizeof *c);
    if (c) c->seq = calloc((size_t)g->n_replicas, sizeof(int64_t));
    if (!c || !c->seq || pthread_mutex_init(&c->mu, NULL) || pthread_cond_init(&c->cv, NULL)) {
      if (c) free(c->seq);
      free(c);
      pthread_mutex_unlock(g->mu);
      return LATHE_OOM("AllReduce");
    }
    c->n = g->n_replicas;
    g->impl = c;
    g->impl_free = coll_free;
  }
  *out = g->impl;
  pthread_mutex_unlock(g->mu);
  return NULL;
}

bool lathe_cpu_supports_collective(lathe_op op, lathe_dtype dtype) {
  return op == LATHE_OP_ALL_REDUCE && lathe_dtype_is_valid(dtype) && dtype != LATHE_DTYPE_BOOL &&
         !lathe_dtype_is_packed(dtype);
}

/* ---- the reduction of one operand over the group's replicas ---- */
typedef struct {
  lathe_op op;
  lathe_dtype dt;
  const void *const *src; /* per group member */
  int m;
  void *dst;
} red_job;

#define RED_INT(T, UT)                                                                                  \
  for (int64_t i = b; i < e; i++) {                                                                     \
    T v = ((const T *)j->src[0])[i];                                                                    \
    for (int k = 1; k < j->m; k++) {                                                                    \
      T x = ((const T *)j->src[k])[i];                                                                  \
      switch (j->op) {                                                                                  \
        case LATHE_OP_REDUCE_SUM: v = (T)((UT)v + (UT)x); break;                                        \
        case LATHE_OP_REDUCE_PRODUCT: v = (T)((UT)v * (UT)x); break;                                    \
        case LATHE_OP_REDUCE_MAX: v = x > v ? x : v; break;                                             \
        default: v = x < v ? x : v; break;                                                              \
      }                                                                                                 \
    }                                                                                                   \
    ((T *)j->dst)[i] = v;                                                                               \
  }

#define RED_FLOAT(T, LOAD, STORE)                                                                        \
  for (int64_t i = b; i < e; i++) {                                                                     \
    T v = LOAD(j->src[0], i);                                                                           \
    for (int k = 1; k < j->m; k++) {                                                                    \
      T x = LOAD(j->src[k], i);                                                                         \
      switch (j->op) {                                                                                  \
        case LATHE_OP_REDUCE_SUM: v = v + x; break;                                                     \
        case LATHE_OP_REDUCE_PRODUCT: v = v * x; break;                                                 \
        case LATHE_OP_REDUCE_MAX: v = (v > x || v != v) ? v : x; break;                                 \
        default: v = (v < x || v != v) ? v : x; break;                                                  \
      }                                                                                                 \
    }                                                                                                   \
    STORE(j->dst, i, v);                                                                                \
  }

#define LD_F32(p, i) (((const float *)(p))[i])
#define LD_F64(p, i) (((const double *)(p))[i])
#define LD_F16(p, i) lathe_f16_to_f32(((const uint16_t *)(p))[i])
#define LD_BF16(p, i) lathe_bf16_to_f32(((const uint16_t *)(p))[i])
#define ST_F32(p, i, v) (((float *)(p))[i] = (v))
#define ST_F64(p, i, v) (((double *)(p))[i] = (v))
#define ST_F16(p, i, v) (((uint16_t *)(p))[i] = lathe_f32_to_f16(v))
#define ST_BF16(p, i, v) (((uint16_t *)(p))[i] = lathe_f32_to_bf16(v))

#define RED_COMPLEX(T, R)                                                                                \
  for (int64_t i = b; i < e; i++) {                                                                     \
    T v = ((const T *)j->src[0])[i];                                                                    \
    for (int k = 1; k < j->m; k++) {                                                                    \
      T x = ((const T *)j->src[k])[i];                                                                  \
      if (j->op == LATHE_OP_REDUCE_SUM) v = (T){v.re + x.re, v.im + x.im};                              \
      else v = (T){(R)(v.re * x.re - v.im * x.im), (R)(v.re * x.im + v.im * x.re)};                     \
    }                                                                                                   \
    ((T *)j->dst)[i] = v;                                                                               \
  }

static void reduce_range(void *ctx, int64_t b, int64_t e) {
  const red_job *j = ctx;
  switch (j->dt) {
    case LATHE_DTYPE_INT8: RED_INT(int8_t, uint8_t) break;
    case LATHE_DTYPE_INT16: RED_INT(int16_t, uint16_t) break;
    case LATHE_DTYPE_INT32: RED_INT(int32_t, uint32_t) break;
    case LATHE_DTYPE_INT64: RED_INT(int64_t, uint64_t) break;
    case LATHE_DTYPE_UINT8: RED_INT(uint8_t, unsigned) break;
    case LATHE_DTYPE_UINT16: RED_INT(uint16_t, unsigned) break;
    case LATHE_DTYPE_UINT32: RED_INT(uint32_t, uint32_t) break;
    case LATHE_DTYPE_UINT64: RED_INT(uint64_t, uint64_t) break;
    case LATHE_DTYPE_FLOAT32: RED_FLOAT(float, LD_F32, ST_F32) break;
    case LATHE_DTYPE_FLOAT64: RED_FLOAT(double, LD_F64, ST_F64) break;
    case LATHE_DTYPE_FLOAT16: RED_FLOAT(float, LD_F16, ST_F16) break;
    case LATHE_DTYPE_BFLOAT16: RED_FLOAT(float, LD_BF16, ST_BF16) break;
    case LATHE_DTYPE_COMPLEX64: RED_COMPLEX(lathe_c64, float) break;
    case LATHE_DTYPE_COMPLEX128: RED_COMPLEX(lathe_c128, double) break;
    default: break;
  }
}

/* The group of replica r: its members in group order. */
static int group_of(const lathe_node *n, int r, int n_replicas, int *members) {
  lathe_ilist groups = lathe_attr_all_reduce_groups(n), sizes = lathe_attr_all_reduce_group_sizes(n);
  if (sizes.n == 0) {
    for (int k = 0; k < n_replicas; k++) members[k] = k;
    return n_replicas;
  }
  for (int g = 0, at = 0; g < sizes.n; at += (int)sizes.v[g++])
    for (int k = 0; k < sizes.v[g]; k++)
      if (groups.v[at + k] == r) {
        for (int q = 0; q < sizes.v[g]; q++) members[q] = (int)groups.v[at + q];
        return (int)sizes.v[g];
      }
  members[0] = r;
  return 1;
}

/* Gloo's pairwise reduction: c = a (op) b with lathe's semantics (NaN-propagating max/min, wrapping
 * integers), so a job computes what one process with every replica would, up to summation order. */
typedef struct {
  lathe_op op;
  lathe_dtype dt;
} pair_ctx;

/* Float sums and products in 16-byte vectors (GNU vector extensions: SSE on x86-64, NEON on
 * arm64): Gloo calls this on every chunk it receives, and the scalar loop (which gcc's -O2 does not
 * vectorise) was the slowest stage of a large AllReduce. Each vector is loaded whole before it is
 * stored, so c may be a or b. The same expression as RED_FLOAT, a first (same bits). */
typedef float pair_f4 __attribute__((vector_size(16)));
typedef double pair_d2 __attribute__((vector_size(16)));
#define PAIR_VEC(T, V, OPER)                                                                             \
  do {                                                                                                  \
    T *z = c;                                                                                           \
    const T *x = a, *y = b;                                                                             \
    size_t i = 0;                                                                                       \
    for (; i + sizeof(V) / sizeof(T) <= n; i += sizeof(V) / sizeof(T)) {                                \
      V u, v;                                                                                           \
      memcpy(&u, x + i, sizeof u);                                                                      \
      memcpy(&v, y + i, sizeof v);                                                                      \
      u = u OPER v;                                                                                     \
      memcpy(z + i, &u, sizeof u);                                                                      \
    }                                                                                                   \
    for (; i < n; i++) z[i] = x[i] OPER y[i];                                                           \
    return;                                                                                             \
  } while (0)

static bool apart(const void *p, const void *q, size_t bytes) {
  return (const char *)p + bytes <= (const char *)q || (const char *)q + bytes <= (const char *)p;
}

void lathe_cpu_pair_reduce(lathe_op op, lathe_dtype dt, void *c, const void *a, const void *b, size_t n) {
  size_t bytes = n * (size_t)lathe_dtype_bits(dt) / 8;
  if ((c == a || apart(c, a, bytes)) && (c == b || apart(c, b, bytes))) {
    bool sum = op == LATHE_OP_REDUCE_SUM, prod = op == LATHE_OP_REDUCE_PRODUCT;
    if (dt == LATHE_DTYPE_FLOAT32 && sum) PAIR_VEC(float, pair_f4, +);
    if (dt == LATHE_DTYPE_FLOAT32 && prod) PAIR_VEC(float, pair_f4, *);
    if (dt == LATHE_DTYPE_FLOAT64 && sum) PAIR_VEC(double, pair_d2, +);
    if (dt == LATHE_DTYPE_FLOAT64 && prod) PAIR_VEC(double, pair_d2, *);
  }
  const void *src[2] = {a, b};
  red_job j = {op, dt, src, 2, c};
  reduce_range(&j, 0, (int64_t)n);
}

static void pair_reduce(void *ctx, void *c, const void *a, const void *b, size_t n) {
  const pair_ctx *pc = ctx;
  lathe_cpu_pair_reduce(pc->op, pc->dt, c, a, b, n);
}

/* The job part of a collective: the group's leader reduces its local result across the
 * processes; the others wait for it and copy. The group's name is the same in every process. */
static lathe_status_t across_processes(struct lathe_job *job, const lathe_node *n, int replica, int leader,
                                       const int *members, int m, cpu_coll *c, coll_call *call, lathe_tensor **out) {
  lathe_status_t st = NULL;
  if (replica == leader) {
    char name[256];
    int at = snprintf(name, sizeof name, "cpu/%d", c->n);
    for (int q = 0; q < m && at < (int)sizeof name - 12; q++) at += snprintf(name + at, sizeof name - (size_t)at, "%c%d", q ? '.' : ':', members[q]);
    /* operands of one dtype go as one buffer: one exchange instead of one per operand (a step's
     * gradients are many small tensors, and each exchange costs round trips) */
    int no = n->n_operands;
    bool same = no > 1;
    size_t total = 0;
    for (int k = 0; k < no; k++) {
      same &= out[k]->shape.dtype == out[0]->shape.dtype;
      total += out[k]->nbytes;
    }
    char *packed = same && total ? malloc(total) : NULL;
    if (packed) {
      for (size_t k = 0, at = 0; k < (size_t)no; at += out[k]->nbytes, k++) memcpy(packed + at, out[k]->data, out[k]->nbytes);
      pair_ctx pc = {lathe_attr_all_reduce_reduction(n), out[0]->shape.dtype};
      size_t es = (size_t)lathe_dtype_bits(pc.dt) / 8;
      st = lathe_job_all_reduce(job, name, packed, total / es, es, pair_reduce, &pc);
      for (size_t k = 0, at = 0; !st && k < (size_t)no; at += out[k]->nbytes, k++) memcpy(out[k]->data, packed + at, out[k]->nbytes);
      free(packed);
    }
    for (int k = 0; !packed && !st && k < no; k++) {
      pair_ctx pc = {lathe_attr_all_reduce_reduction(n), out[k]->shape.dtype};
      size_t es = (size_t)lathe_dtype_bits(pc.dt) / 8;
      st = lathe_job_all_reduce(job, name, out[k]->data, (size_t)lathe_shape_size(&out[k]->shape), es, pair_reduce, &pc);
    }
    pthread_mutex_lock(&c->mu);
    call->done[leader] = true;
    if (st) call->err[leader] = strdup(lathe_status_message(st));
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    return st;
  }
  pthread_mutex_lock(&c->mu);
  while (!call->done[leader]) pthread_cond_wait(&c->cv, &c->mu);
  if (call->err[leader] || !call->out[leader])
    st = lathe_status_new(LATHE_STATUS_UNAVAILABLE, "%s", call->err[leader] ? call->err[leader] : "AllReduce: across processes failed");
  pthread_mutex_unlock(&c->mu);
  for (int k = 0; !st && k < n->n_operands; k++)
    if (out[k]->nbytes) memcpy(out[k]->data, call->out[leader][k]->data, out[k]->nbytes);
  return st;
}

lathe_status_t lathe_cpu_run_collective(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                        lathe_tensor **out) {
  if (n->op != LATHE_OP_ALL_REDUCE) return LATHE_UNIMPL("%s: not a collective", lathe_op_name(n->op));
  int replica;
  lathe_collective *g = lathe_cpu_exec_group(ex, &replica);
  if (!g) return LATHE_INVALID("AllReduce: the program is not running as SPMD replicas");
  cpu_coll *c = NULL;
  LATHE_RETURN_IF_ERROR(coll_of(g, &c));
  int *members = malloc(sizeof(int) * (size_t)c->n);
  const void **src = malloc(sizeof(void *) * (size_t)c->n);
  if (!members || !src) {
    free(members);
    free(src);
    return LATHE_OOM("AllReduce");
  }
  /* post this replica's operands for its call number, wait for every replica */
  pthread_mutex_lock(&c->mu);
  int64_t seq = c->seq[replica]++;
  coll_call *call = c->calls;
  while (call && call->seq != seq) call = call->next;
  if (!call) {
    call = calloc(1, sizeof *call);
    if (call) {
      call->in = calloc((size_t)c->n, sizeof *call->in);
      call->out = calloc((size_t)c->n, sizeof *call->out);
      call->done = calloc((size_t)c->n, sizeof *call->done);
      call->err = calloc((size_t)c->n, sizeof *call->err);
    }
    if (!call || !call->in || !call->out || !call->done || !call->err) {
      if (call) call_free(call, c->n);
      pthread_mutex_unlock(&c->mu);
      free(members);
      free(src);
      return LATHE_OOM("AllReduce");
    }
    call->seq = seq;
    call->next = c->calls;
    c->calls = call;
  }
  call->in[replica] = in;
  call->out[replica] = out;
  if (++call->posted == c->n) pthread_cond_broadcast(&c->cv);
  while (call->posted < c->n) pthread_cond_wait(&c->cv, &c->mu);
  pthread_mutex_unlock(&c->mu);
  int m = group_of(n, replica, c->n, members);
  struct lathe_job *job = ex->cpu->job;
  int leader = members[0];
  lathe_status_t st = NULL;
  if (!job || replica == leader) {
    for (int k = 0; k < n->n_operands; k++) {
      for (int q = 0; q < m; q++) src[q] = call->in[members[q]][k]->data;
      red_job j = {lathe_attr_all_reduce_reduction(n), out[k]->shape.dtype, src, m, out[k]->data};
      lathe_parallel_for(lathe_cpu_exec_pool(ex), lathe_shape_size(&out[k]->shape), 1 << 15, reduce_range, &j);
    }
  }
  if (job) st = across_processes(job, n, replica, leader, members, m, c, call, out);
  /* every replica has read before any may let its operands go; the last one out frees the call */
  pthread_mutex_lock(&c->mu);
  if (++call->read == c->n) pthread_cond_broadcast(&c->cv);
  while (call->read < c->n) pthread_cond_wait(&c->cv, &c->mu);
  if (++call->left == c->n) {
    coll_call **pp = &c->calls;
    while (*pp != call) pp = &(*pp)->next;
    *pp = call->next;
    call_free(call, c->n);
  }
  pthread_mutex_unlock(&c->mu);
  free(members);
  free(src);
  return st;
}

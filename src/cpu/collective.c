/* collective.c -- the collectives between the replicas of an SPMD execution on lathe:cpu,devices=N
 * (AllReduce, AllGather, ReduceScatter, AllToAll, CollectivePermute).
 * Replicas run at once on their queues' threads and meet in shared memory: the k-th collective
 * call of every replica (they run one program, so their calls line up) posts its operands, waits
 * until every replica has posted, computes its own result reading its group's operands in place
 * (reductions in group order, so every replica computes the same bits), then waits until all
 * have read before the operands may go.
 * In a job of several processes (src/runtime/job.h) each local group spans every process
 * (process-major: member k of process p is the group's member p*m+k): the group's first replica
 * runs the exchange across the processes with Gloo -- AllReduce (the same reduction, pairwise;
 * ReduceScatter is that AllReduce, sliced), AllGather of the local members' operands, AllToAll of
 * the parts each process's members send another's -- and the group's replicas take their results
 * from its buffer. CollectivePermute's pairs name local replicas and stay inside each process, as
 * do the groups of collectives built in-process (lathe_builder_collectives_in_process). */
#include <pthread.h>

#include "cpu.h"
#include "exec.h"
#include "../runtime/job.h"

typedef struct coll_call {
  struct coll_call *next;
  int64_t seq;
  int posted, read, left;
  lathe_tensor *const **in; /* per replica: its operands */
  /* in a job, per replica leading a group: its results (AllReduce) or exchanged bytes (the
   * others, malloc'ed), whether they are final, its error */
  lathe_tensor ***out;
  char **buf;
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
  for (int r = 0; k->buf && r < n; r++) free(k->buf[r]);
  free(k->err);
  free(k->buf);
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
      return LATHE_OOM("collective");
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
  if (!lathe_dtype_is_valid(dtype) || lathe_dtype_is_packed(dtype)) return false;
  switch (op) {
    case LATHE_OP_ALL_REDUCE:
    case LATHE_OP_REDUCE_SCATTER: return dtype != LATHE_DTYPE_BOOL;
    case LATHE_OP_ALL_GATHER:
    case LATHE_OP_ALL_TO_ALL:
    case LATHE_OP_COLLECTIVE_PERMUTE: return true;
    default: return false;
  }
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

/* ---- data movement: boxes of one tensor copied into another ---- */

/* Copies the box of sizes box[] (rank axes, elements of es bytes) at offset soff[] of src (dims
 * sd[]) to offset doff[] of dst (dims dd[]): trailing axes that are whole in all three go as one
 * run, the rest one run per index of the leading axes. */
static void copy_box(char *dst, const int64_t *dd, const int64_t *doff, const char *src, const int64_t *sd,
                     const int64_t *soff, const int64_t *box, int rank, size_t es) {
  int64_t run = 1;
  int r0 = rank;
  for (int a = 0; a < rank; a++)
    if (box[a] == 0) return;
  while (r0 > 0 && box[r0 - 1] == sd[r0 - 1] && box[r0 - 1] == dd[r0 - 1]) run *= box[--r0];
  int64_t ss[LATHE_MAX_RANK], ds[LATHE_MAX_RANK], idx[LATHE_MAX_RANK] = {0}, sst = 1, dst_ = 1;
  for (int a = rank - 1; a >= 0; a--) {
    ss[a] = sst, ds[a] = dst_;
    sst *= sd[a], dst_ *= dd[a];
  }
  if (r0 > 0) run *= box[r0 - 1], r0--; /* the innermost partial axis joins the run */
  size_t bytes = (size_t)run * es;
  for (;;) {
    int64_t so = 0, dof = 0;
    for (int a = 0; a < rank; a++) {
      so += (soff[a] + (a < r0 ? idx[a] : 0)) * ss[a];
      dof += (doff[a] + (a < r0 ? idx[a] : 0)) * ds[a];
    }
    memcpy(dst + (size_t)dof * es, src + (size_t)so * es, bytes);
    int a = r0 - 1;
    while (a >= 0 && ++idx[a] == box[a]) idx[a--] = 0;
    if (a < 0) break;
  }
}

/* An offset of zero except on axis (off). */
static void offset_on(int64_t *o, int rank, int axis, int64_t off) {
  for (int a = 0; a < rank; a++) o[a] = a == axis ? off : 0;
}

/* ---- one replica's result, from operands it can read (src[j]: the group's j-th operand) ---- */

/* AllGather: out = the G operands (of dims id) concatenated along axis. */
static void gather_into(lathe_tensor *out, const char *const *src, int G, const int64_t *id, int axis, size_t es) {
  const lathe_shape *os = &out->shape;
  int64_t zero[LATHE_MAX_RANK] = {0}, off[LATHE_MAX_RANK];
  for (int j = 0; j < G; j++) {
    offset_on(off, os->rank, axis, j * id[axis]);
    copy_box(out->data, os->dims, off, src[j], id, zero, id, os->rank, es);
  }
}

/* AllToAll: member k's out = part k (along split) of each source's operand (dims id),
 * concatenated along concat in source order. */
static void all_to_all_into(lathe_tensor *out, const char *const *src, int G, int k, const int64_t *id, int split,
                            int concat, size_t es) {
  const lathe_shape *os = &out->shape;
  int64_t part[LATHE_MAX_RANK], so[LATHE_MAX_RANK], dof[LATHE_MAX_RANK];
  memcpy(part, id, sizeof(int64_t) * (size_t)os->rank);
  part[split] = id[split] / G;
  offset_on(so, os->rank, split, k * part[split]);
  for (int j = 0; j < G; j++) {
    offset_on(dof, os->rank, concat, j * part[concat]);
    copy_box(out->data, os->dims, dof, src[j], id, so, part, os->rank, es);
  }
}

/* ReduceScatter: out = slice k (along axis, G slices) of the reduction of the m operands (p: room
 * for m pointers). */
static void reduce_slice_into(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *out, const void *const *src,
                              const void **p, int m, int G, int k, const int64_t *id, int axis) {
  const lathe_shape *os = &out->shape;
  int64_t outer = 1, chunk = 1;
  for (int a = 0; a < axis; a++) outer *= id[a];
  for (int a = axis; a < os->rank; a++) chunk *= os->dims[a];
  size_t es = (size_t)lathe_dtype_bits(os->dtype) / 8;
  for (int64_t o = 0; o < outer; o++) {
    for (int q = 0; q < m; q++) p[q] = (const char *)src[q] + (size_t)((o * G + k) * chunk) * es;
    red_job j = {lathe_attr_collective_reduction(n), os->dtype, p, m, (char *)out->data + (size_t)(o * chunk) * es};
    lathe_parallel_for(lathe_cpu_exec_pool(ex), chunk, 1 << 15, reduce_range, &j);
  }
}

/* ---- across the processes of a job ---- */

/* The name of the local group of members in every process (one Gloo context per group). */
static void group_name(char *name, size_t cap, int n_replicas, const int *members, int m) {
  int at = snprintf(name, cap, "cpu/%d", n_replicas);
  for (int q = 0; q < m && at < (int)cap - 12; q++) at += snprintf(name + at, cap - (size_t)at, "%c%d", q ? '.' : ':', members[q]);
}

/* AllReduce's job part: the group's leader reduces its local result across the processes; the
 * others wait for it and copy. */
static lathe_status_t reduce_across(struct lathe_job *job, const char *name, const lathe_node *n, lathe_tensor **out) {
  lathe_status_t st = NULL;
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
    pair_ctx pc = {lathe_attr_collective_reduction(n), out[0]->shape.dtype};
    size_t es = (size_t)lathe_dtype_bits(pc.dt) / 8;
    st = lathe_job_all_reduce(job, name, packed, total / es, es, pair_reduce, &pc);
    for (size_t k = 0, at = 0; !st && k < (size_t)no; at += out[k]->nbytes, k++) memcpy(out[k]->data, packed + at, out[k]->nbytes);
    free(packed);
  }
  for (int k = 0; !packed && !st && k < no; k++) {
    pair_ctx pc = {lathe_attr_collective_reduction(n), out[k]->shape.dtype};
    size_t es = (size_t)lathe_dtype_bits(pc.dt) / 8;
    st = lathe_job_all_reduce(job, name, out[k]->data, (size_t)lathe_shape_size(&out[k]->shape), es, pair_reduce, &pc);
  }
  return st;
}

/* The leader's exchange for AllGather, ReduceScatter and AllToAll: into *buf (malloc'ed), what
 * every member of the local group reads its result from. P processes, m local members, operand
 * dims id of `bytes` bytes. */
static lathe_status_t exchange(lathe_cpu_exec *ex, struct lathe_job *job, const char *name, const lathe_node *n,
                               lathe_tensor *const *const *in, const int *members, int m, const int64_t *id, int rank,
                               size_t bytes, size_t es, const void **src, char **buf) {
  const char *op = lathe_op_name(n->op);
  int P = lathe_job_processes(job), G = P * m;
  lathe_status_t st = NULL;
  *buf = NULL;
  if (n->op == LATHE_OP_REDUCE_SCATTER) { /* the group's AllReduce, whole; members slice it */
    *buf = malloc(bytes ? bytes : 1);
    if (!*buf) return LATHE_OOM(op);
    for (int q = 0; q < m; q++) src[q] = in[members[q]][0]->data;
    red_job j = {lathe_attr_collective_reduction(n), in[members[0]][0]->shape.dtype, src, m, *buf};
    lathe_parallel_for(lathe_cpu_exec_pool(ex), (int64_t)(bytes / es), 1 << 15, reduce_range, &j);
    pair_ctx pc = {j.op, j.dt};
    return lathe_job_all_reduce(job, name, *buf, bytes / es, es, pair_reduce, &pc);
  }
  char *send = malloc(bytes * (size_t)m + 1);
  *buf = malloc(bytes * (size_t)G + 1);
  if (!send || !*buf) st = LATHE_OOM(op);
  if (!st && n->op == LATHE_OP_ALL_GATHER) { /* the local operands in group order, to every process */
    for (int q = 0; q < m; q++) memcpy(send + (size_t)q * bytes, in[members[q]][0]->data, bytes);
    st = lathe_job_all_gather(job, op, name, send, *buf, bytes * (size_t)m);
  } else if (!st) { /* AllToAll: to process q, for each local source l, its parts for q's members */
    int split = (int)lathe_attr_collective_axis(n);
    int64_t part[LATHE_MAX_RANK], zero[LATHE_MAX_RANK] = {0}, so[LATHE_MAX_RANK];
    memcpy(part, id, sizeof(int64_t) * (size_t)rank);
    part[split] = id[split] / G;
    size_t pb = bytes / (size_t)G;
    for (int q = 0; q < P; q++)
      for (int l = 0; l < m; l++)
        for (int k = 0; k < m; k++) {
          offset_on(so, rank, split, (int64_t)(q * m + k) * part[split]);
          copy_box(send + ((size_t)(q * m + l) * (size_t)m + (size_t)k) * pb, part, zero, in[members[l]][0]->data, id, so,
                   part, rank, es);
        }
    st = lathe_job_all_to_all(job, op, name, send, *buf, (size_t)m * (size_t)m * pb);
  }
  free(send);
  return st;
}

/* A member's result from its leader's exchanged buffer: member k of process p (src: room for P*m
 * pointers). */
static void finish_from(const lathe_node *n, lathe_tensor *out, const char *buf, int P, int p, int m, int k,
                        const int64_t *id, size_t bytes, size_t es, const char **src) {
  int rank = out->shape.rank, G = P * m;
  int64_t zero[LATHE_MAX_RANK] = {0}, off[LATHE_MAX_RANK];
  int axis = (int)lathe_attr_collective_axis(n);
  if (n->op == LATHE_OP_REDUCE_SCATTER) {
    offset_on(off, rank, axis, (int64_t)(p * m + k) * out->shape.dims[axis]);
    copy_box(out->data, out->shape.dims, zero, buf, id, off, out->shape.dims, rank, es);
  } else if (n->op == LATHE_OP_ALL_GATHER) {
    for (int j = 0; j < G; j++) src[j] = buf + (size_t)j * bytes;
    gather_into(out, src, G, id, axis, es);
  } else { /* AllToAll: the part from source q*m+l for member k, as a whole operand of dims part */
    int concat = (int)lathe_attr_collective_concat_axis(n);
    int64_t part[LATHE_MAX_RANK];
    memcpy(part, id, sizeof(int64_t) * (size_t)rank);
    part[axis] = id[axis] / G;
    size_t pb = bytes / (size_t)G;
    for (int s = 0; s < G; s++) {
      offset_on(off, rank, concat, s * part[concat]);
      copy_box(out->data, out->shape.dims, off, buf + ((size_t)s * (size_t)m + (size_t)k) * pb, part, zero, part, rank, es);
    }
  }
}

/* The group size the result's shape was built for (AllReduce, CollectivePermute: any). */
static int64_t built_group_size(const lathe_node *n, const lathe_shape *is, const lathe_shape *os) {
  int axis = (int)lathe_attr_collective_axis(n);
  switch (n->op) {
    case LATHE_OP_ALL_GATHER: return is->dims[axis] ? os->dims[axis] / is->dims[axis] : -1;
    case LATHE_OP_REDUCE_SCATTER: return os->dims[axis] ? is->dims[axis] / os->dims[axis] : -1;
    case LATHE_OP_ALL_TO_ALL: /* split and concat on one axis keep its size: nothing to check */
      return os->dims[axis] && axis != lathe_attr_collective_concat_axis(n) ? is->dims[axis] / os->dims[axis] : -1;
    default: return -1;
  }
}

lathe_status_t lathe_cpu_run_collective(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                        lathe_tensor **out) {
  const char *op = lathe_op_name(n->op);
  if (lathe_op_kind_of(n->op) != LATHE_KIND_COLLECTIVE) return LATHE_UNIMPL("%s: not a collective", op);
  int replica;
  lathe_collective *g = lathe_cpu_exec_group(ex, &replica);
  if (!g) return LATHE_INVALID("%s: the program is not running as SPMD replicas", op);
  cpu_coll *c = NULL;
  LATHE_RETURN_IF_ERROR(coll_of(g, &c));
  /* a group that stays in this process (CollectivePermute's pairs, in-process groups) runs as if
   * there were no job */
  struct lathe_job *job = lathe_collective_in_process(n) ? NULL : ex->cpu->job;
  int P = job ? lathe_job_processes(job) : 1, p = job ? lathe_job_process(job) : 0;
  int *members = malloc(sizeof(int) * (size_t)c->n);
  /* two arrays of a pointer per replica of the job's group */
  const void **src = malloc(sizeof(void *) * 2 * (size_t)c->n * (size_t)P);
  if (!members || !src) {
    free(members);
    free(src);
    return LATHE_OOM(op);
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
      call->buf = calloc((size_t)c->n, sizeof *call->buf);
      call->done = calloc((size_t)c->n, sizeof *call->done);
      call->err = calloc((size_t)c->n, sizeof *call->err);
    }
    if (!call || !call->in || !call->out || !call->buf || !call->done || !call->err) {
      if (call) call_free(call, c->n);
      pthread_mutex_unlock(&c->mu);
      free(members);
      free(src);
      return LATHE_OOM(op);
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
  members[0] = replica; /* CollectivePermute: no group */
  int m = n->op == LATHE_OP_COLLECTIVE_PERMUTE ? 1 : lathe_collective_group(n, replica, c->n, members);
  int leader = members[0], k = 0;
  while (members[k] != replica && k < m - 1) k++;
  lathe_status_t st = NULL;
  const lathe_shape *is = &in[0]->shape;
  size_t es = (size_t)lathe_dtype_bits(is->dtype) / 8, bytes = in[0]->nbytes;
  int64_t built = built_group_size(n, is, &out[0]->shape);
  if (built > 0 && built != (int64_t)m * P)
    st = lathe_status_new(LATHE_STATUS_FAILED_PRECONDITION, "%s: built for groups of %lld replicas, runs in groups of %d "
                          "(%d processes, %d in each)", op, (long long)built, m * P, P, m);
  bool local = !job;
  if (st) {
  } else if (n->op == LATHE_OP_ALL_REDUCE && (!job || replica == leader)) {
    for (int o = 0; o < n->n_operands; o++) {
      for (int q = 0; q < m; q++) src[q] = call->in[members[q]][o]->data;
      red_job j = {lathe_attr_collective_reduction(n), out[o]->shape.dtype, src, m, out[o]->data};
      lathe_parallel_for(lathe_cpu_exec_pool(ex), lathe_shape_size(&out[o]->shape), 1 << 15, reduce_range, &j);
    }
  } else if (n->op == LATHE_OP_COLLECTIVE_PERMUTE) {
    lathe_ilist pairs = lathe_attr_collective_pairs(n);
    int from = -1;
    for (int i = 0; i + 1 < pairs.n; i += 2)
      if (pairs.v[i + 1] == replica) from = (int)pairs.v[i];
    if (from >= 0) memcpy(out[0]->data, call->in[from][0]->data, bytes);
    else memset(out[0]->data, 0, bytes);
  } else if (local) {
    for (int q = 0; q < m; q++) src[q] = call->in[members[q]][0]->data;
    if (n->op == LATHE_OP_ALL_GATHER)
      gather_into(out[0], (const char *const *)src, m, is->dims, (int)lathe_attr_collective_axis(n), es);
    else if (n->op == LATHE_OP_ALL_TO_ALL)
      all_to_all_into(out[0], (const char *const *)src, m, k, is->dims, (int)lathe_attr_collective_axis(n),
                      (int)lathe_attr_collective_concat_axis(n), es);
    else reduce_slice_into(ex, n, out[0], src, src + m, m, m, k, is->dims, (int)lathe_attr_collective_axis(n));
  }
  if (job && !local) {
    /* the leader exchanges across the processes; every member waits for it, then takes its part */
    if (replica == leader) {
      char name[256];
      group_name(name, sizeof name, c->n, members, m);
      if (!st && n->op == LATHE_OP_ALL_REDUCE) st = reduce_across(job, name, n, out);
      else if (!st) st = exchange(ex, job, name, n, call->in, members, m, is->dims, is->rank, bytes, es, src, &call->buf[leader]);
      pthread_mutex_lock(&c->mu);
      call->done[leader] = true;
      if (st) call->err[leader] = strdup(lathe_status_message(st));
      pthread_cond_broadcast(&c->cv);
      pthread_mutex_unlock(&c->mu);
    } else {
      pthread_mutex_lock(&c->mu);
      while (!call->done[leader]) pthread_cond_wait(&c->cv, &c->mu);
      if (!st && (call->err[leader] || !call->out[leader]))
        st = lathe_status_new(LATHE_STATUS_UNAVAILABLE, "%s", call->err[leader] ? call->err[leader] : "collective across processes failed");
      pthread_mutex_unlock(&c->mu);
      for (int o = 0; !st && n->op == LATHE_OP_ALL_REDUCE && o < n->n_operands; o++)
        if (out[o]->nbytes) memcpy(out[o]->data, call->out[leader][o]->data, out[o]->nbytes);
    }
    if (!st && n->op != LATHE_OP_ALL_REDUCE) finish_from(n, out[0], call->buf[leader], P, p, m, k, is->dims, bytes, es, (const char **)src);
  }
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

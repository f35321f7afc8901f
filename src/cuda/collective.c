/* collective.c -- the collectives between the replicas of an SPMD execution on lathe:cuda, through
 * NCCL: AllReduce, and AllGather, ReduceScatter, AllToAll (grouped ncclSend/ncclRecv) and
 * CollectivePermute (the same), which are compiled but have not run on a GPU yet.
 *
 * Each replica runs on its GPU's SPMD worker thread (spmd.c), so each NCCL rank calls from a
 * thread of its own: the replica issues ncclAllReduce for its operands (one ncclGroupStart/End)
 * on its execution's stream, ordered with the kernels before and after it. A replica group is one
 * communicator over its members' GPUs, rank = position in the group; communicators are made by
 * ncclCommInitAll for an ordered device list on first use and cached in the backend until it
 * goes (executions and their lathe_collective come and go). A group of one replica is a copy.
 *
 * Semantics are lathe:cpu's (src/cpu/collective.c): integers wrap, halves reduce through NCCL's
 * half arithmetic (rounding may differ from the CPU's float accumulation), complex sums as pairs
 * of reals. NCCL's max and min need not propagate NaN, lathe's do: for floats a NaN flag per
 * element is max-reduced with the values and the elements it marks become NaN. Int16/Uint16 (no
 * NCCL type) reduce widened to Int32 (sign- or zero-extended: sums and products keep their low 16
 * bits exact, max and min their order) and are narrowed back. Complex products are UNIMPLEMENTED.
 *
 * In a job of several processes (src/runtime/job.h; joined by another backend of the process or
 * from the environment) a local group spans every process: its communicators come from
 * ncclCommInitRank over P*n ranks (process-major: rank p*n+q), the unique id made by process 0
 * and passed through the job's coordinator. A failed NCCL call aborts the set's communicators
 * (ncclCommAbort) and drops it from the cache; a later collective makes a new set. */
#include <stdio.h>

#include "cuda.h"
#include "../runtime/job.h"

struct lncclUniqueId {
  char internal[128]; /* NCCL_UNIQUE_ID_BYTES */
};

typedef struct nccl_set {
  struct nccl_set *next;
  int n;
  int *devs;        /* backend ordinals, in rank order */
  lncclComm *comms; /* per rank */
  lathe_job *job;   /* a reference when the set spans the processes of a job */
  lathe_cuda *owner;
  bool aborted;
} nccl_set;

/* sets aborted after a fault: kept (replicas may still hold them) until the backend goes */
static nccl_set *aborted_sets;

/* cache_mu guards every backend's list (short lookups); make_mu serialises making communicators,
 * which may take long: lookups of existing ones never wait for it (a replica blocked there would
 * hold back its peers' collectives). */
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER, make_mu = PTHREAD_MUTEX_INITIALIZER;

static nccl_set *find(lathe_cuda *cu, const int *devs, int n) {
  pthread_mutex_lock(&cache_mu);
  nccl_set *s = cu->nccl;
  for (; s; s = s->next)
    if (s->n == n && !memcmp(s->devs, devs, sizeof(int) * (size_t)n)) break;
  pthread_mutex_unlock(&cache_mu);
  return s;
}

static lathe_status_t nccl_error(const lcu_api *api, const char *op, lncclResult r, const char *what) {
  if (r == LNCCL_SUCCESS) return NULL;
  const char *msg = api->ncclGetErrorString ? api->ncclGetErrorString(r) : NULL;
  return lathe_status_new(LATHE_STATUS_INTERNAL, "%s: %s failed: NCCL error %d (%s)", op, what, r, msg ? msg : "unknown");
}

/* The job's communicators for local group devs: this process's n ranks of P*n, made in one
 * NCCL group from this thread (each on its GPU's context), the unique id through the
 * coordinator. On failure the ranks made are aborted. */
static lathe_status_t init_ranks(lathe_cuda *cu, const lcu_api *api, const char *op, lathe_job *job, const int *devs, int n, lncclComm *comms) {
  static int made; /* sets made in this process: with the device list, names the id's key */
  char key[256];
  int at = snprintf(key, sizeof key, "nccl/%d/%d", __atomic_fetch_add(&made, 1, __ATOMIC_SEQ_CST), n);
  for (int k = 0; k < n && at < (int)sizeof key - 12; k++) at += snprintf(key + at, sizeof key - (size_t)at, ".%d", devs[k]);
  int P = lathe_job_processes(job), p = lathe_job_process(job);
  struct lncclUniqueId id;
  lathe_status_t st = NULL;
  if (p == 0) {
    st = nccl_error(api, op, api->ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (!st) st = lathe_job_set(job, key, &id, sizeof id);
  } else {
    void *v = NULL;
    size_t vn = 0;
    st = lathe_job_get(job, key, &v, &vn);
    if (!st && vn != sizeof id) st = lathe_status_new(LATHE_STATUS_INTERNAL, "%s: NCCL unique id of %zu bytes from the coordinator", op, vn);
    if (!st) memcpy(&id, v, sizeof id);
    free(v);
  }
  if (st) return lathe_status_annotate(st, "%s across %d processes: the NCCL unique id", op, P);
  st = nccl_error(api, op, api->ncclGroupStart(), "ncclGroupStart");
  if (st) return st;
  for (int k = 0; !st && k < n; k++) {
    st = lathe_cuda_use(&cu->devs[devs[k]]);
    if (!st) st = nccl_error(api, op, api->ncclCommInitRank(&comms[k], P * n, id, p * n + k), "ncclCommInitRank");
  }
  lathe_status_t end = nccl_error(api, op, api->ncclGroupEnd(), "ncclGroupEnd");
  if (!st) st = end;
  else lathe_status_free(end);
  if (st)
    for (int k = 0; k < n; k++)
      if (comms[k]) {
        api->ncclCommAbort(comms[k]);
        comms[k] = NULL;
      }
  return st ? lathe_status_annotate(st, "%s across %d processes (rank %d..%d of %d)", op, P, p * n, p * n + n - 1, P * n) : NULL;
}

/* After a failed NCCL call: the set's communicators are aborted (peers blocked in them return)
 * and the set leaves the cache, so the next collective makes new ones. */
static void abort_set(lathe_cuda *cu, const lcu_api *api, nccl_set *s) {
  pthread_mutex_lock(&cache_mu);
  if (!s->aborted) {
    s->aborted = true;
    for (nccl_set **pp = &cu->nccl; *pp; pp = &(*pp)->next)
      if (*pp == s) {
        *pp = s->next;
        break;
      }
    for (int k = 0; k < s->n; k++)
      if (s->comms[k]) api->ncclCommAbort(s->comms[k]);
    s->next = aborted_sets;
    aborted_sets = s;
  }
  pthread_mutex_unlock(&cache_mu);
}

/* The communicators of GPUs devs (rank order): cached, else made now. */
static lathe_status_t comms_for(lathe_cuda_exec *ex, const lcu_api *api, const char *op, const int *devs, int n,
                                nccl_set **out) {
  lathe_cuda *cu = lathe_cuda_exec_dev(ex)->cu;
  if ((*out = find(cu, devs, n))) return NULL;
  pthread_mutex_lock(&make_mu);
  lathe_status_t st = NULL;
  nccl_set *s = find(cu, devs, n);
  if (!s) {
    s = calloc(1, sizeof *s);
    int *gpus = calloc((size_t)n, sizeof(int));
    if (s) {
      s->devs = calloc((size_t)n, sizeof(int));
      s->comms = calloc((size_t)n, sizeof(lncclComm));
    }
    if (!s || !gpus || !s->devs || !s->comms) st = LATHE_OOM(op);
    for (int k = 0; !st && k < n; k++) {
      s->devs[k] = devs[k];
      gpus[k] = cu->devs[devs[k]].dev; /* the driver's ordinal, as NCCL counts GPUs */
    }
    lathe_job *job = NULL;
    if (s) s->owner = cu;
    if (!st) st = lathe_job_current("lathe:cuda", &job);
    if (!st && job) {
      s->job = job;
      st = init_ranks(cu, api, op, job, devs, n, s->comms);
    } else if (!st) {
      st = nccl_error(api, op, api->ncclCommInitAll(s->comms, n, gpus), "ncclCommInitAll");
    }
    /* NCCL set the devices current on this thread as it went: back to this execution's */
    lathe_status_t use = lathe_cuda_use(lathe_cuda_exec_dev(ex));
    if (!st) st = use;
    else lathe_status_free(use);
    if (!st) {
      s->n = n;
      pthread_mutex_lock(&cache_mu);
      s->next = cu->nccl;
      cu->nccl = s;
      pthread_mutex_unlock(&cache_mu);
    } else if (s) {
      lathe_job_release(s->job);
      free(s->devs);
      free(s->comms);
      free(s);
      s = NULL;
    }
    free(gpus);
  }
  pthread_mutex_unlock(&make_mu);
  *out = s;
  return st;
}

void lathe_cuda_nccl_release(lathe_cuda *cu) {
  const lcu_api *api = NULL;
  int version;
  lathe_status_t st = cu->nccl ? lathe_cuda_load_nccl(&api, &version) : NULL;
  lathe_status_free(st);
  while (cu->nccl) {
    nccl_set *s = cu->nccl;
    cu->nccl = s->next;
    for (int k = 0; api && k < s->n; k++)
      if (s->comms[k]) api->ncclCommDestroy(s->comms[k]);
    lathe_job_release(s->job);
    free(s->devs);
    free(s->comms);
    free(s);
  }
  /* aborted sets: their communicators were aborted (which frees them) */
  pthread_mutex_lock(&cache_mu);
  for (nccl_set **pp = &aborted_sets; *pp;) {
    nccl_set *s = *pp;
    if (s->owner != cu) {
      pp = &s->next;
      continue;
    }
    *pp = s->next;
    lathe_job_release(s->job);
    free(s->devs);
    free(s->comms);
    free(s);
  }
  pthread_mutex_unlock(&cache_mu);
}

/* ---- dtypes and reductions ---- */
/* NCCL's type for dt (complex: its real parts), or -1. */
static int nccl_type(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_INT8: return LNCCL_INT8;
    case LATHE_DTYPE_UINT8: return LNCCL_UINT8;
    case LATHE_DTYPE_INT32: case LATHE_DTYPE_INT16: case LATHE_DTYPE_UINT16: return LNCCL_INT32; /* 16: widened */
    case LATHE_DTYPE_UINT32: return LNCCL_UINT32;
    case LATHE_DTYPE_INT64: return LNCCL_INT64;
    case LATHE_DTYPE_UINT64: return LNCCL_UINT64;
    case LATHE_DTYPE_FLOAT16: return LNCCL_FLOAT16;
    case LATHE_DTYPE_BFLOAT16: return LNCCL_BFLOAT16;
    case LATHE_DTYPE_FLOAT32: case LATHE_DTYPE_COMPLEX64: return LNCCL_FLOAT32;
    case LATHE_DTYPE_FLOAT64: case LATHE_DTYPE_COMPLEX128: return LNCCL_FLOAT64;
    default: return -1;
  }
}

/* AllGather, ReduceScatter, AllToAll and CollectivePermute below compile but have not yet run on
 * GPUs: not offered (compile says so) until a multi-GPU run of their rows passes; then this
 * becomes true for their dtypes (all of them; ReduceScatter as AllReduce). */
static const bool offer_untried = false;

bool lathe_cuda_supports_collective(lathe_op op, lathe_dtype dtype) {
  if (!lathe_dtype_is_valid(dtype) || lathe_dtype_is_packed(dtype)) return false;
  switch (op) {
    case LATHE_OP_ALL_REDUCE: return nccl_type(dtype) >= 0;
    case LATHE_OP_REDUCE_SCATTER: return offer_untried && nccl_type(dtype) >= 0;
    case LATHE_OP_ALL_GATHER: /* bytes: every dtype */
    case LATHE_OP_ALL_TO_ALL:
    case LATHE_OP_COLLECTIVE_PERMUTE: return offer_untried;
    default: return false;
  }
}

/* NaN flags: f[i] = x[i] is NaN (on the bit pattern); y[i] = NaN where f[i]. */
#define NAN_SRC(SUF, U, MASK, INF, QNAN)                                                            \
  "extern \"C\" __global__ void lt_ar_nanflag_" #SUF "(const " #U " *x, uint8_t *f, int64_t n) {\n" \
  "  LT_LOOP(i, n) f[i] = (x[i] & " #MASK ") > " #INF ";\n"                                         \
  "}\n"                                                                                             \
  "extern \"C\" __global__ void lt_ar_nanset_" #SUF "(" #U " *y, const uint8_t *f, int64_t n) {\n"  \
  "  LT_LOOP(i, n) if (f[i]) y[i] = " #QNAN ";\n"                                                   \
  "}\n"

static const char *nan_source =
    NAN_SRC(f16, uint16_t, 0x7fff, 0x7c00, (uint16_t)0x7e00)
    NAN_SRC(bf16, uint16_t, 0x7fff, 0x7f80, (uint16_t)0x7fc0)
    NAN_SRC(f32, uint32_t, 0x7fffffffu, 0x7f800000u, 0x7fc00000u)
    NAN_SRC(f64, uint64_t, 0x7fffffffffffffffull, 0x7ff0000000000000ull, 0x7ff8000000000000ull);

/* 16-bit integers to Int32 and back (wide[i] = x[i] extended; x[i] = low 16 bits of wide[i]) */
static const char *wide_source =
    "extern \"C\" __global__ void lt_ar_widen_s16(const int16_t *x, int32_t *w, int64_t n) {\n"
    "  LT_LOOP(i, n) w[i] = (int32_t)x[i];\n"
    "}\n"
    "extern \"C\" __global__ void lt_ar_widen_u16(const uint16_t *x, int32_t *w, int64_t n) {\n"
    "  LT_LOOP(i, n) w[i] = (int32_t)x[i];\n"
    "}\n"
    "extern \"C\" __global__ void lt_ar_narrow_16(const int32_t *w, uint16_t *x, int64_t n) {\n"
    "  LT_LOOP(i, n) x[i] = (uint16_t)(uint32_t)w[i];\n"
    "}\n";

void lathe_cuda_sources_collective(lathe_cuda_source_fn fn, void *ctx) {
  fn(ctx, "AllReduce NaN flags", nan_source);
  fn(ctx, "AllReduce 16-bit integers", wide_source);
}

/* AllReduce's helper kernels run only for NaN-aware or 16-bit reductions: compiled when first met */
void lathe_cuda_texts_collective(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx) {
  (void)d, (void)n, (void)fn, (void)ctx;
}

static lathe_status_t wide_kernel(lathe_cuda_exec *ex, const char *name, lcuDeviceptr a, lcuDeviceptr b, int64_t n) {
  lcuFunction fn;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), wide_source, name, &fn));
  unsigned blocks, threads;
  lathe_cuda_grid(n, &blocks, &threads);
  void *args[] = {&a, &b, &n};
  return lathe_cuda_launch(ex, fn, blocks, threads, 0, args);
}

static bool is16(lathe_dtype dt) { return dt == LATHE_DTYPE_INT16 || dt == LATHE_DTYPE_UINT16; }

static const char *nan_suffix(lathe_dtype dt) {
  switch (dt) {
    case LATHE_DTYPE_FLOAT16: return "f16";
    case LATHE_DTYPE_BFLOAT16: return "bf16";
    case LATHE_DTYPE_FLOAT32: return "f32";
    case LATHE_DTYPE_FLOAT64: return "f64";
    default: return NULL;
  }
}

static lathe_status_t nan_kernel(lathe_cuda_exec *ex, const char *kind, lathe_dtype dt, lcuDeviceptr a, lcuDeviceptr f,
                                 int64_t n) {
  char name[48];
  snprintf(name, sizeof name, "lt_ar_nan%s_%s", kind, nan_suffix(dt));
  lcuFunction fn;
  LATHE_RETURN_IF_ERROR(lathe_cuda_kernel_lasting(lathe_cuda_exec_dev(ex), nan_source, name, &fn));
  unsigned blocks, threads;
  lathe_cuda_grid(n, &blocks, &threads);
  void *args[] = {&a, &f, &n};
  return lathe_cuda_launch(ex, fn, blocks, threads, 0, args);
}

static lathe_status_t all_reduce(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out,
                                 lathe_collective *g, int replica, int *members, int *devs) {
  int m = lathe_collective_group(n, replica, g->n_replicas, members);
  if (m == 1) {
    for (int k = 0; k < n->n_operands; k++) LATHE_RETURN_IF_ERROR(lathe_cuda_copy(ex, in[k], out[k]));
    return NULL;
  }
  const char *op_name = "AllReduce";
  lathe_op red = lathe_attr_collective_reduction(n);
  int rop = red == LATHE_OP_REDUCE_SUM ? LNCCL_SUM : red == LATHE_OP_REDUCE_PRODUCT ? LNCCL_PROD
         : red == LATHE_OP_REDUCE_MAX ? LNCCL_MAX : LNCCL_MIN;
  for (int k = 0; k < n->n_operands; k++) {
    lathe_dtype dt = in[k]->shape.dtype;
    if (nccl_type(dt) < 0)
      return LATHE_UNIMPL("AllReduce: %s is not implemented on lathe:cuda (NCCL has no such type)", lathe_dtype_name(dt));
    if (lathe_dtype_is_complex(dt) && rop != LNCCL_SUM)
      return LATHE_UNIMPL("AllReduce: %s of %s is not implemented on lathe:cuda (NCCL reduces complex values only as "
                          "sums of their parts)", lathe_op_name(red), lathe_dtype_name(dt));
  }
  const lcu_api *api;
  int version = 0;
  LATHE_RETURN_IF_ERROR(lathe_cuda_load_nccl(&api, &version));
  for (int k = 0; k < n->n_operands; k++)
    if (in[k]->shape.dtype == LATHE_DTYPE_BFLOAT16 && version && version < 21000)
      return LATHE_UNIMPL("AllReduce: BFloat16 needs NCCL 2.10 or newer (this is %d)", version);
  int rank = 0;
  for (int q = 0; q < m; q++) {
    devs[q] = g->devices[members[q]];
    if (members[q] == replica) rank = q;
  }
  nccl_set *s;
  LATHE_RETURN_IF_ERROR(comms_for(ex, api, op_name, devs, m, &s));
  lncclComm comm = s->comms[rank];
  lcuStream stream = lathe_cuda_exec_stream(ex);
  bool minmax = rop == LNCCL_MAX || rop == LNCCL_MIN;
  /* per operand: NaN flags for float max/min, or the Int32 copy of a 16-bit integer operand --
   * made before the group call that reduces them */
  int no = n->n_operands;
  lathe_tensor *aux_s[8] = {0}, **aux = no <= 8 ? aux_s : calloc((size_t)no, sizeof *aux);
  if (!aux) return LATHE_OOM("AllReduce");
  lathe_status_t st = NULL;
  for (int k = 0; !st && k < no; k++) {
    lathe_dtype dt = in[k]->shape.dtype;
    int64_t count = lathe_shape_num_elements(&in[k]->shape);
    if (count == 0 || !(is16(dt) || (minmax && nan_suffix(dt)))) continue;
    lathe_shape as;
    memset(&as, 0, sizeof as);
    as.dtype = is16(dt) ? LATHE_DTYPE_INT32 : LATHE_DTYPE_UINT8;
    as.rank = 1;
    as.dims[0] = count;
    st = lathe_cuda_exec_tensor(ex, &as, &aux[k]);
    if (!st && is16(dt))
      st = wide_kernel(ex, dt == LATHE_DTYPE_INT16 ? "lt_ar_widen_s16" : "lt_ar_widen_u16", lathe_cuda_ptr(in[k]),
                       lathe_cuda_ptr(aux[k]), count);
    else if (!st)
      st = nan_kernel(ex, "flag", dt, lathe_cuda_ptr(in[k]), lathe_cuda_ptr(aux[k]), count);
  }
  if (!st) st = nccl_error(api, op_name, api->ncclGroupStart(), "ncclGroupStart");
  if (!st) {
    for (int k = 0; !st && k < no; k++) {
      lathe_dtype dt = in[k]->shape.dtype;
      size_t count = (size_t)lathe_shape_num_elements(&in[k]->shape) * (lathe_dtype_is_complex(dt) ? 2 : 1);
      if (count == 0) continue;
      if (is16(dt)) { /* in place on the wide copy */
        st = nccl_error(api, op_name, api->ncclAllReduce(aux[k]->data, aux[k]->data, count, LNCCL_INT32, rop, comm, stream), "ncclAllReduce");
        continue;
      }
      st = nccl_error(api, op_name, api->ncclAllReduce(in[k]->data, out[k]->data, count, nccl_type(dt), rop, comm, stream), "ncclAllReduce");
      if (!st && aux[k])
        st = nccl_error(api, op_name, api->ncclAllReduce(aux[k]->data, aux[k]->data, count, LNCCL_UINT8, LNCCL_MAX, comm, stream),
                        "ncclAllReduce");
    }
    /* the group ends whatever happened inside it (NCCL requires the pairing) */
    lathe_status_t end = nccl_error(api, op_name, api->ncclGroupEnd(), "ncclGroupEnd");
    if (!st) st = end;
    else lathe_status_free(end);
    /* NCCL switches devices as it goes; the execution's context again */
    lathe_status_t use = lathe_cuda_use(lathe_cuda_exec_dev(ex));
    if (!st) st = use;
    else lathe_status_free(use);
    /* a fault (a peer gone, a mismatch): abort, so no rank stays blocked in this set */
    if (st && s->job) abort_set(lathe_cuda_exec_dev(ex)->cu, api, s);
  }
  for (int k = 0; !st && k < no; k++) {
    if (!aux[k]) continue;
    int64_t count = lathe_shape_num_elements(&in[k]->shape);
    st = is16(in[k]->shape.dtype)
             ? wide_kernel(ex, "lt_ar_narrow_16", lathe_cuda_ptr(aux[k]), lathe_cuda_ptr(out[k]), count)
             : nan_kernel(ex, "set", in[k]->shape.dtype, lathe_cuda_ptr(out[k]), lathe_cuda_ptr(aux[k]), count);
  }
  for (int k = 0; k < no; k++) lathe_tensor_release(aux[k]);
  if (aux != aux_s) free(aux);
  return st;
}

/* ---- AllGather, ReduceScatter, AllToAll, CollectivePermute ----
 * NCCL moves contiguous buffers in rank order; a block along an inner axis is a pitched 2-D copy
 * (cuMemcpy2DAsync) into or out of a scratch tensor: a tensor of dims d seen around axis a is
 * [outer, d[a], inner], and G equal blocks along a are G columns of `outer` rows. Data moves as
 * bytes (every dtype); ReduceScatter reduces as AllReduce does (NaN flags for float max/min, 16-bit
 * integers widened). */

typedef struct {
  lathe_cuda_exec *ex;
  const lcu_api *api; /* NCCL's and the driver's entry points */
  const char *op;
  lncclComm comm;
  lcuStream stream;
} nccl_ctx;

/* height rows of width bytes from src (pitch sp) to dst (pitch dp) */
static lathe_status_t copy2d(const nccl_ctx *c, lcuDeviceptr dst, size_t dp, lcuDeviceptr src, size_t sp, size_t width,
                             size_t height) {
  if (!width || !height) return NULL;
  lcuMemcpy2D m;
  memset(&m, 0, sizeof m);
  m.srcMemoryType = m.dstMemoryType = LCU_MEMORYTYPE_DEVICE;
  m.srcDevice = src, m.srcPitch = sp, m.dstDevice = dst, m.dstPitch = dp, m.WidthInBytes = width, m.Height = height;
  const lcu_api *drv = lathe_cuda_exec_api(c->ex);
  return lathe_cuda_error(drv, drv->cuMemcpy2DAsync(&m, c->stream), "cuMemcpy2DAsync");
}

/* outer (elements before axis) and the bytes of one block of `size` along axis of dims d */
static void around(const lathe_shape *s, int axis, int64_t size, size_t *outer, size_t *block) {
  int64_t o = 1, in = 1;
  for (int a = 0; a < axis; a++) o *= s->dims[a];
  for (int a = axis + 1; a < s->rank; a++) in *= s->dims[a];
  *outer = (size_t)o;
  *block = (size_t)(size * in) * (size_t)lathe_dtype_bits(s->dtype) / 8;
}

/* a scratch tensor of bytes bytes on this execution's device */
static lathe_status_t scratch(lathe_cuda_exec *ex, size_t bytes, lathe_dtype dt, lathe_tensor **out) {
  lathe_shape s;
  memset(&s, 0, sizeof s);
  s.dtype = dt;
  s.rank = 1;
  s.dims[0] = (int64_t)(bytes ? bytes : 1) / (lathe_dtype_bits(dt) / 8);
  return lathe_cuda_exec_tensor(ex, &s, out);
}

/* Runs NCCL calls between ncclGroupStart and ncclGroupEnd (the end pairs the start whatever
 * happened), then makes the execution's context current again. */
#define NCCL_GROUP(c, st, body)                                                                             \
  do {                                                                                                    \
    if (!(st)) (st) = nccl_error((c)->api, (c)->op, (c)->api->ncclGroupStart(), "ncclGroupStart");        \
    if (!(st)) {                                                                                          \
      body;                                                                                               \
      lathe_status_t end_ = nccl_error((c)->api, (c)->op, (c)->api->ncclGroupEnd(), "ncclGroupEnd");       \
      if (!(st)) (st) = end_;                                                                             \
      else lathe_status_free(end_);                                                                       \
      lathe_status_t use_ = lathe_cuda_use(lathe_cuda_exec_dev((c)->ex));                                 \
      if (!(st)) (st) = use_;                                                                             \
      else lathe_status_free(use_);                                                                       \
    }                                                                                                     \
  } while (0)

static lathe_status_t all_gather(const nccl_ctx *c, const lathe_node *n, const lathe_tensor *in, lathe_tensor *out, int G) {
  int axis = (int)lathe_attr_collective_axis(n);
  size_t outer, block, bytes = in->nbytes;
  around(&in->shape, axis, in->shape.dims[axis], &outer, &block);
  lathe_tensor *tmp = NULL;
  lathe_status_t st = outer > 1 ? scratch(c->ex, bytes * (size_t)G, LATHE_DTYPE_UINT8, &tmp) : NULL;
  lcuDeviceptr dst = tmp ? lathe_cuda_ptr(tmp) : lathe_cuda_ptr(out);
  NCCL_GROUP(c, st, st = nccl_error(c->api, c->op, c->api->ncclAllGather(in->data, (void *)(uintptr_t)dst, bytes, LNCCL_UINT8,
                                                                          c->comm, c->stream), "ncclAllGather"));
  for (int j = 0; !st && tmp && j < G; j++) /* member j's operand: column j of out's [outer, G * block] */
    st = copy2d(c, lathe_cuda_ptr(out) + (size_t)j * block, (size_t)G * block, dst + (size_t)j * bytes, block, block, outer);
  lathe_tensor_release(tmp);
  return st;
}

static lathe_status_t reduce_scatter(const nccl_ctx *c, const lathe_node *n, const lathe_tensor *in, lathe_tensor *out,
                                     int G) {
  int axis = (int)lathe_attr_collective_axis(n);
  lathe_dtype dt = in->shape.dtype;
  lathe_op red = lathe_attr_collective_reduction(n);
  int rop = red == LATHE_OP_REDUCE_SUM ? LNCCL_SUM : red == LATHE_OP_REDUCE_PRODUCT ? LNCCL_PROD
          : red == LATHE_OP_REDUCE_MAX ? LNCCL_MAX : LNCCL_MIN;
  if (nccl_type(dt) < 0) return LATHE_UNIMPL("%s: %s is not implemented on lathe:cuda (NCCL has no such type)", c->op, lathe_dtype_name(dt));
  if (lathe_dtype_is_complex(dt) && rop != LNCCL_SUM)
    return LATHE_UNIMPL("%s: %s of %s is not implemented on lathe:cuda (NCCL reduces complex values only as sums of their "
                        "parts)", c->op, lathe_op_name(red), lathe_dtype_name(dt));
  size_t outer, block;
  around(&in->shape, axis, out->shape.dims[axis], &outer, &block);
  int64_t total = lathe_shape_num_elements(&in->shape), mine = total / G;
  lathe_tensor *packed = NULL, *aux = NULL, *aux_out = NULL;
  lathe_status_t st = NULL;
  /* member j's slice, contiguous: the j-th column of [outer, G * block] to rows of block */
  if (outer > 1) st = scratch(c->ex, in->nbytes, LATHE_DTYPE_UINT8, &packed);
  for (int j = 0; !st && packed && j < G; j++)
    st = copy2d(c, lathe_cuda_ptr(packed) + (size_t)j * outer * block, block, lathe_cuda_ptr(in) + (size_t)j * block,
                (size_t)G * block, block, outer);
  lcuDeviceptr send = packed ? lathe_cuda_ptr(packed) : lathe_cuda_ptr(in);
  bool wide = is16(dt), flags = (rop == LNCCL_MAX || rop == LNCCL_MIN) && nan_suffix(dt);
  if (!st && total && (wide || flags)) {
    lathe_dtype at = wide ? LATHE_DTYPE_INT32 : LATHE_DTYPE_UINT8;
    st = scratch(c->ex, (size_t)total * (size_t)(lathe_dtype_bits(at) / 8), at, &aux);
    if (!st) st = scratch(c->ex, (size_t)mine * (size_t)(lathe_dtype_bits(at) / 8), at, &aux_out);
    if (!st && wide)
      st = wide_kernel(c->ex, dt == LATHE_DTYPE_INT16 ? "lt_ar_widen_s16" : "lt_ar_widen_u16", send, lathe_cuda_ptr(aux), total);
    else if (!st)
      st = nan_kernel(c->ex, "flag", dt, send, lathe_cuda_ptr(aux), total);
  }
  size_t count = (size_t)mine * (lathe_dtype_is_complex(dt) ? 2 : 1);
  if (count)
    NCCL_GROUP(c, st, {
      if (wide)
        st = nccl_error(c->api, c->op, c->api->ncclReduceScatter(aux->data, aux_out->data, count, LNCCL_INT32, rop, c->comm, c->stream),
                        "ncclReduceScatter");
      else
        st = nccl_error(c->api, c->op, c->api->ncclReduceScatter((const void *)(uintptr_t)send, out->data, count, nccl_type(dt), rop,
                                                                 c->comm, c->stream), "ncclReduceScatter");
      if (!st && flags)
        st = nccl_error(c->api, c->op, c->api->ncclReduceScatter(aux->data, aux_out->data, count, LNCCL_UINT8, LNCCL_MAX, c->comm,
                                                                 c->stream), "ncclReduceScatter");
    });
  if (!st && aux_out)
    st = wide ? wide_kernel(c->ex, "lt_ar_narrow_16", lathe_cuda_ptr(aux_out), lathe_cuda_ptr(out), mine)
              : nan_kernel(c->ex, "set", dt, lathe_cuda_ptr(out), lathe_cuda_ptr(aux_out), mine);
  lathe_tensor_release(packed);
  lathe_tensor_release(aux);
  lathe_tensor_release(aux_out);
  return st;
}

static lathe_status_t all_to_all(const nccl_ctx *c, const lathe_node *n, const lathe_tensor *in, lathe_tensor *out, int G) {
  int split = (int)lathe_attr_collective_axis(n), concat = (int)lathe_attr_collective_concat_axis(n);
  size_t so, sb, co, cb, pb = in->nbytes / (size_t)G;
  around(&in->shape, split, in->shape.dims[split] / G, &so, &sb);        /* parts to send: G columns of so rows */
  around(&out->shape, concat, out->shape.dims[concat] / G, &co, &cb);    /* parts received: G columns of co rows */
  lathe_tensor *send_t = NULL, *recv_t = NULL;
  lathe_status_t st = so > 1 ? scratch(c->ex, in->nbytes, LATHE_DTYPE_UINT8, &send_t) : NULL;
  if (!st && co > 1) st = scratch(c->ex, out->nbytes, LATHE_DTYPE_UINT8, &recv_t);
  for (int j = 0; !st && send_t && j < G; j++)
    st = copy2d(c, lathe_cuda_ptr(send_t) + (size_t)j * pb, sb, lathe_cuda_ptr(in) + (size_t)j * sb, (size_t)G * sb, sb, so);
  lcuDeviceptr send = send_t ? lathe_cuda_ptr(send_t) : lathe_cuda_ptr(in);
  lcuDeviceptr recv = recv_t ? lathe_cuda_ptr(recv_t) : lathe_cuda_ptr(out);
  if (pb)
    NCCL_GROUP(c, st, {
      for (int j = 0; !st && j < G; j++) {
        st = nccl_error(c->api, c->op, c->api->ncclSend((const void *)(uintptr_t)(send + (size_t)j * pb), pb, LNCCL_UINT8, j, c->comm,
                                                        c->stream), "ncclSend");
        if (!st)
          st = nccl_error(c->api, c->op, c->api->ncclRecv((void *)(uintptr_t)(recv + (size_t)j * pb), pb, LNCCL_UINT8, j, c->comm,
                                                          c->stream), "ncclRecv");
      }
    });
  for (int j = 0; !st && recv_t && j < G; j++) /* source j's part: column j of out's [co, G * cb] */
    st = copy2d(c, lathe_cuda_ptr(out) + (size_t)j * cb, (size_t)G * cb, recv + (size_t)j * pb, cb, cb, co);
  lathe_tensor_release(send_t);
  lathe_tensor_release(recv_t);
  return st;
}

/* CollectivePermute over a communicator of every local replica (in a job: rank p * n + replica,
 * so pairs stay inside each process). */
static lathe_status_t permute(const nccl_ctx *c, const lathe_node *n, const lathe_tensor *in, lathe_tensor *out, int replica,
                              int base) {
  lathe_ilist pairs = lathe_attr_collective_pairs(n);
  int to = -1, from = -1;
  for (int i = 0; i + 1 < pairs.n; i += 2) {
    if (pairs.v[i] == replica) to = (int)pairs.v[i + 1];
    if (pairs.v[i + 1] == replica) from = (int)pairs.v[i];
  }
  lathe_status_t st = NULL;
  size_t bytes = in->nbytes;
  if (from == replica) return lathe_cuda_copy(c->ex, in, out); /* to itself: no exchange (it sends nothing else) */
  if (from < 0 && bytes) {
    const lcu_api *drv = lathe_cuda_exec_api(c->ex);
    st = lathe_cuda_error(drv, drv->cuMemsetD8Async(lathe_cuda_ptr(out), 0, bytes, c->stream), "cuMemsetD8Async");
  }
  if (!st && bytes && (to >= 0 || from >= 0))
    NCCL_GROUP(c, st, {
      if (to >= 0)
        st = nccl_error(c->api, c->op, c->api->ncclSend(in->data, bytes, LNCCL_UINT8, base + to, c->comm, c->stream), "ncclSend");
      if (!st && from >= 0)
        st = nccl_error(c->api, c->op, c->api->ncclRecv(out->data, bytes, LNCCL_UINT8, base + from, c->comm, c->stream), "ncclRecv");
    });
  return st;
}

static lathe_status_t exchange(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out,
                               lathe_collective *g, int replica, int *members, int *devs) {
  const char *op = lathe_op_name(n->op);
  bool perm = n->op == LATHE_OP_COLLECTIVE_PERMUTE;
  int m = g->n_replicas;
  if (perm)
    for (int q = 0; q < m; q++) members[q] = q;
  else m = lathe_collective_group(n, replica, g->n_replicas, members);
  int rank = 0;
  for (int q = 0; q < m; q++) {
    devs[q] = g->devices[members[q]];
    if (members[q] == replica) rank = q;
  }
  const lcu_api *api;
  int version = 0;
  LATHE_RETURN_IF_ERROR(lathe_cuda_load_nccl(&api, &version));
  if (version && version < 20700) return LATHE_UNIMPL("%s: needs NCCL 2.7 or newer (this is %d)", op, version);
  if (n->op == LATHE_OP_REDUCE_SCATTER && in[0]->shape.dtype == LATHE_DTYPE_BFLOAT16 && version && version < 21000)
    return LATHE_UNIMPL("%s: BFloat16 needs NCCL 2.10 or newer (this is %d)", op, version);
  nccl_set *s;
  LATHE_RETURN_IF_ERROR(comms_for(ex, api, op, devs, m, &s));
  int P = s->job ? lathe_job_processes(s->job) : 1, p = s->job ? lathe_job_process(s->job) : 0;
  nccl_ctx c = {ex, api, op, s->comms[rank], lathe_cuda_exec_stream(ex)};
  /* the shape was built for groups of P * m (the processes are the outermost mesh axis) */
  int G = P * m;
  lathe_status_t st = NULL;
  switch (n->op) {
    case LATHE_OP_ALL_GATHER: st = all_gather(&c, n, in[0], out[0], G); break;
    case LATHE_OP_REDUCE_SCATTER: st = reduce_scatter(&c, n, in[0], out[0], G); break;
    case LATHE_OP_ALL_TO_ALL: st = all_to_all(&c, n, in[0], out[0], G); break;
    default: st = permute(&c, n, in[0], out[0], replica, p * m); break;
  }
  /* a fault (a peer gone, a mismatch): abort, so no rank stays blocked in this set */
  if (st && s->job) abort_set(lathe_cuda_exec_dev(ex)->cu, api, s);
  return st;
}

lathe_status_t lathe_cuda_run_collective(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in,
                                         lathe_tensor **out) {
  const char *op = lathe_op_name(n->op);
  if (lathe_op_kind_of(n->op) != LATHE_KIND_COLLECTIVE) return LATHE_UNIMPL("%s: not a collective", op);
  if (n->op != LATHE_OP_COLLECTIVE_PERMUTE && lathe_attr_collective_in_process(n) && lathe_collective_processes() > 1)
    return LATHE_UNIMPL("%s: groups kept inside one process of a job are not implemented on lathe:cuda (its NCCL "
                        "communicators span the job's processes)", op);
  int replica;
  lathe_collective *g = lathe_cuda_exec_group(ex, &replica);
  if (!g) return LATHE_INVALID("%s: the program is not running as SPMD replicas", op);
  int *members = malloc(sizeof(int) * (size_t)g->n_replicas), *devs = malloc(sizeof(int) * (size_t)g->n_replicas);
  lathe_status_t st = !members || !devs                 ? LATHE_OOM(op)
                      : n->op == LATHE_OP_ALL_REDUCE ? all_reduce(ex, n, in, out, g, replica, members, devs)
                                                     : exchange(ex, n, in, out, g, replica, members, devs);
  free(members);
  free(devs);
  return st;
}

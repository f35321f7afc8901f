/* device.c -- the CUDA device: options, one context per GPU (the primary context), streams,
 * cuBLASLt, pinned staging for host transfers, completion threads, and the device table. Plans
 * and execution are in exec.c, kernels in the family files. */
#include <stdarg.h>
#include <stdio.h>

#include "../exec/exec.h"
#include "cuda.h"

enum { N_STREAMS = 8, STAGING_BYTES = 32 << 20, LT_WORKSPACE_BYTES = 32 << 20, COMPLETION_SPIN_US = 50 };

lathe_status_t lathe_cuda_use(cuda_dev *d) {
  return lathe_cuda_error(d->cu->api, d->cu->api->cuCtxSetCurrent(d->ctx), "lathe:cuda: cuCtxSetCurrent");
}

lathe_status_t lathe_cuda_tensor_new(cuda_dev *d, const lathe_shape *shape, lathe_tensor **out) {
  return lathe_tensor_alloc(&lathe_cuda_device, d->cu, d->ordinal, shape, out);
}

/* ---- memory slots ---- */
static lathe_status_t mem_alloc(void *ctx, int device, size_t nbytes, void **out) {
  lathe_cuda *cu = ctx;
  lcuDeviceptr p;
  LATHE_RETURN_IF_ERROR(lathe_cuda_malloc(&cu->devs[device], nbytes, &p));
  *out = (void *)(uintptr_t)p;
  return NULL;
}

static lathe_status_t memory_stats(void *ctx, int device, bool reset_peak, lathe_memory_stats *out) {
  lathe_cuda *cu = ctx;
  lathe_cuda_alloc_stats(&cu->devs[device], reset_peak, out);
  return NULL;
}

static void mem_free(void *ctx, int device, void *mem, size_t nbytes) {
  lathe_cuda *cu = ctx;
  lathe_cuda_free(&cu->devs[device], (lcuDeviceptr)(uintptr_t)mem, nbytes);
}

static lcuStream take_stream(cuda_dev *d) {
  return d->streams[atomic_fetch_add(&d->next_stream, 1) % (unsigned)d->n_streams];
}

/* ---- CUDA events: a pool per device, and the native handle of lathe events ---- */
enum { EV_POOL_MAX = 256 };

lathe_status_t lathe_cuda_event_get(cuda_dev *d, lcuEvent *out) {
  pthread_mutex_lock(&d->ev_mu);
  bool have = d->n_ev_pool > 0;
  if (have) *out = d->ev_pool[--d->n_ev_pool];
  pthread_mutex_unlock(&d->ev_mu);
  if (have) return NULL;
  return lathe_cuda_error(d->cu->api, d->cu->api->cuEventCreate(out, LCU_EVENT_DISABLE_TIMING), "lathe:cuda: cuEventCreate");
}

void lathe_cuda_event_put(cuda_dev *d, lcuEvent ev) {
  pthread_mutex_lock(&d->ev_mu);
  bool kept = d->ev_pool && d->n_ev_pool < EV_POOL_MAX;
  if (kept) d->ev_pool[d->n_ev_pool++] = ev;
  pthread_mutex_unlock(&d->ev_mu);
  if (!kept) d->cu->api->cuEventDestroy(ev);
}

/* The CUDA event behind a lathe event lives as long as that event: later work on the same
 * device waits on it. */
typedef struct native_event {
  cuda_dev *d;
  lcuEvent ev;
  bool decides;
} native_event;

static void free_native_event(void *p) {
  native_event *n = p;
  lathe_cuda_event_put(n->d, n->ev);
  free(n);
}

/* A reader waits on the CUDA event itself rather than for the completion thread. */
static lathe_status_t wait_native_event(void *p) {
  native_event *n = p;
  LATHE_RETURN_IF_ERROR(lathe_cuda_use(n->d));
  return lathe_cuda_error(n->d->cu->api, n->d->cu->api->cuEventSynchronize(n->ev), "lathe:cuda: execution");
}

bool lathe_cuda_event_attach(cuda_dev *d, lathe_event *ev, lcuEvent cev, bool gpu_decides) {
  native_event *n = malloc(sizeof *n);
  if (!n) return false;
  *n = (native_event){.d = d, .ev = cev, .decides = gpu_decides};
  lathe_event_set_native(ev, d, n, free_native_event);
  if (gpu_decides) lathe_event_set_native_wait(ev, wait_native_event);
  return true;
}

lathe_status_t lathe_cuda_stream_wait_tensor(cuda_dev *d, lcuStream s, lathe_tensor *t, bool decided_only, const char *op) {
  lathe_event *ev = atomic_load(&t->ready);
  native_event *n = ev && !lathe_event_is_ready(ev) ? lathe_event_native(ev, d) : NULL;
  if (n && (n->decides || !decided_only))
    return lathe_cuda_error(d->cu->api, d->cu->api->cuStreamWaitEvent(s, n->ev, 0), "lathe:cuda: cuStreamWaitEvent");
  return op ? lathe_tensor_wait_for(op, t) : lathe_tensor_wait(t);
}

/* ---- host transfers ---- */
/* Up to this size an upload is queued from the caller's memory (the driver stages pageable
 * memory before the call returns) and a read goes through the small pinned slot, ordered after
 * its writer on the GPU: a one-op graph's input and result cost one host wait in all, not three. */
enum { SMALL_COPY = 64 << 10 };

/* Host <-> device through the pinned staging buffer, a chunk at a time. */
static lathe_status_t transfer(cuda_dev *d, lcuDeviceptr dev, void *host, size_t n, bool to_device) {
  const lcu_api *api = d->cu->api;
  LATHE_RETURN_IF_ERROR(lathe_cuda_use(d));
  lcuStream s = to_device ? d->up_stream : d->down_stream;
  lathe_status_t st = NULL;
  pthread_mutex_lock(&d->staging_mu);
  for (size_t done = 0; done < n && !st; done += d->staging_bytes) {
    size_t k = n - done < d->staging_bytes ? n - done : d->staging_bytes;
    if (to_device) {
      memcpy(d->staging, (char *)host + done, k);
      st = lathe_cuda_error(api, api->cuMemcpyHtoDAsync(dev + done, d->staging, k, s), "BufferFromHost: cuMemcpyHtoDAsync");
    } else {
      st = lathe_cuda_error(api, api->cuMemcpyDtoHAsync(d->staging, dev + done, k, s), "BufferToHost: cuMemcpyDtoHAsync");
    }
    if (!st) st = lathe_cuda_error(api, api->cuStreamSynchronize(s), "lathe:cuda: cuStreamSynchronize");
    if (!st && !to_device) memcpy((char *)host + done, d->staging, k);
  }
  pthread_mutex_unlock(&d->staging_mu);
  return st;
}

static void signal_upload(void *arg, lathe_status_t st) {
  lathe_event_signal(arg, st);
  lathe_event_release(arg);
}

/* A small upload: queued, the tensor's ready event signalled by the completion thread (and
 * carrying the CUDA event, so that executions wait for it on the GPU). */
static lathe_status_t upload_queued(cuda_dev *d, lathe_tensor *t, const void *src, size_t n) {
  const lcu_api *api = d->cu->api;
  LATHE_RETURN_IF_ERROR(lathe_cuda_use(d));
  lcuStream s = d->up_stream;
  lcuEvent cev = NULL;
  lathe_event *ev = NULL;
  lathe_status_t st = lathe_cuda_error(api, api->cuMemcpyHtoDAsync(lathe_cuda_ptr(t), src, n, s), "BufferFromHost: cuMemcpyHtoDAsync");
  if (st) return st;
  st = lathe_cuda_event_get(d, &cev);
  if (!st) st = lathe_cuda_error(api, api->cuEventRecord(cev, s), "BufferFromHost: cuEventRecord");
  if (!st) st = lathe_event_new(&ev);
  if (!st && !lathe_cuda_event_attach(d, ev, cev, true)) st = LATHE_OOM("BufferFromHost");
  if (!st) {
    lcuEvent recorded = cev;
    cev = NULL; /* the lathe event's now */
    st = lathe_cuda_when_done(d, recorded, signal_upload, lathe_event_retain(ev));
    if (st) lathe_event_release(ev); /* the completion thread's reference */
  }
  if (st) { /* nothing waits for the copy: finish it here */
    lathe_status_free(lathe_cuda_error(api, api->cuStreamSynchronize(s), "lathe:cuda: cuStreamSynchronize"));
    if (cev) lathe_cuda_event_put(d, cev);
    lathe_event_release(ev);
    return st;
  }
  atomic_store(&t->ready, ev);
  return NULL;
}

static lathe_status_t upload(void *ctx, lathe_tensor *t, const void *src, size_t nbytes) {
  lathe_cuda *cu = ctx;
  cuda_dev *d = &cu->devs[t->device];
  if (nbytes && nbytes <= SMALL_COPY) return upload_queued(d, t, src, nbytes);
  return transfer(d, lathe_cuda_ptr(t), (void *)src, nbytes, true);
}

/* The runtime leaves the wait for t's writer to this (LATHE_DEVCAP_ORDERED_DOWNLOAD): a small read
 * is queued after the writer on the GPU and waited for once. */
static lathe_status_t download(void *ctx, lathe_tensor *t, void *dst, size_t nbytes) {
  lathe_cuda *cu = ctx;
  cuda_dev *d = &cu->devs[t->device];
  if (nbytes > SMALL_COPY || !nbytes) {
    LATHE_RETURN_IF_ERROR(lathe_tensor_wait_for("BufferToHost", t));
    return transfer(d, lathe_cuda_ptr(t), dst, nbytes, false);
  }
  const lcu_api *api = cu->api;
  LATHE_RETURN_IF_ERROR(lathe_cuda_use(d));
  lcuStream s = d->down_stream;
  pthread_mutex_lock(&d->small_mu);
  lathe_status_t st = lathe_cuda_stream_wait_tensor(d, s, t, true, "BufferToHost");
  if (!st) st = lathe_cuda_error(api, api->cuMemcpyDtoHAsync(d->small_slot, lathe_cuda_ptr(t), nbytes, s), "BufferToHost: cuMemcpyDtoHAsync");
  if (!st) st = lathe_cuda_error(api, api->cuStreamSynchronize(s), "lathe:cuda: cuStreamSynchronize");
  if (!st) memcpy(dst, d->small_slot, nbytes);
  pthread_mutex_unlock(&d->small_mu);
  return st;
}

/* CopyToDevice between GPUs: a peer copy on the target's stream once the source is computed. */
static lathe_status_t copy(void *ctx, lathe_tensor *src, lathe_tensor *dst) {
  lathe_cuda *cu = ctx;
  LATHE_RETURN_IF_ERROR(lathe_tensor_wait(src));
  cuda_dev *ds = &cu->devs[src->device], *dd = &cu->devs[dst->device];
  LATHE_RETURN_IF_ERROR(lathe_cuda_use(dd));
  lcuStream s = take_stream(dd);
  const lcu_api *api = cu->api;
  if (!dst->nbytes) return NULL;
  lcuResult r = ds == dd ? api->cuMemcpyDtoDAsync(lathe_cuda_ptr(dst), lathe_cuda_ptr(src), dst->nbytes, s)
                         : api->cuMemcpyPeerAsync(lathe_cuda_ptr(dst), dd->ctx, lathe_cuda_ptr(src), ds->ctx, dst->nbytes, s);
  LATHE_RETURN_IF_ERROR(lathe_cuda_error(api, r, "CopyToDevice"));
  return lathe_cuda_error(api, api->cuStreamSynchronize(s), "CopyToDevice: cuStreamSynchronize");
}

/* ---- description and capabilities ---- */
static uint32_t caps(void *ctx) {
  (void)ctx;
  return LATHE_DEVCAP_ASYNC | LATHE_DEVCAP_ORDERED_DOWNLOAD;
}

static int num_devices(void *ctx) { return ((lathe_cuda *)ctx)->n_devices; }

static const char *description(void *ctx, int device) {
  lathe_cuda *cu = ctx;
  return device >= 0 && device < cu->n_devices ? cu->devs[device].description : cu->description;
}

static bool supports_op(void *ctx, lathe_op op, lathe_dtype dt) {
  /* FusedDenseVJP runs (a C caller may build it) but is advertised only with dense_vjp=1: GoMLX
   * takes it over its own decomposition whenever it is advertised, and that decomposition, fused
   * by lathe, measured faster (docs/CUDA.md "Dense layers"). */
  if (op == LATHE_OP_FUSED_DENSE_VJP && !((lathe_cuda *)ctx)->dense_vjp) return false;
  return lathe_cuda_supports_op(op, dt);
}

static bool supports_dtype(void *ctx, lathe_dtype dt) {
  (void)ctx;
  return lathe_dtype_is_valid(dt);
}

static void program_options(void *ctx, lathe_program_options *opt) {
  lathe_cuda *cu = ctx;
  opt->fuse = cu->fuse;
  opt->rows_max = cu->fuse && cu->rows ? LATHE_CUDA_ROWS_MAX : 0;
  opt->rows_long = opt->rows_max && cu->rows_long ? LATHE_CUDA_ROWS_LONG_MAX : 0;
  /* a lone reduction in a ROWS kernel when its rows give 8 groups per SM (fewer rows: the
   * reduction kernels split each row across blocks instead) */
  opt->rows_lone = (int64_t)(cu->n_devices && cu->devs[0].sm_count > 0 ? cu->devs[0].sm_count : 80) * 8;
  opt->plan_memory = true;
  opt->alias_reshape = true; /* lathe_cuda_copy skips the copy: a training step's Reshapes moved GBs */
  opt->alignment = 256; /* what cuBLASLt and vector loads like */
  opt->remat = cu->fuse && cu->remat;
}

/* ---- completion: jobs of the device's worker queue, in the order executions were queued ---- */
typedef struct cuda_pending {
  lathe_exec_job q; /* first: the queue's view of the job */
  cuda_dev *d;
  lcuEvent ev;
  void (*fn)(void *arg, lathe_status_t st); /* takes st */
  void *arg;
} cuda_pending;

static void run_pending(lathe_exec_job *j) {
  cuda_pending *p = (cuda_pending *)j;
  lathe_status_t st = lathe_cuda_use(p->d);
  if (!st) st = lathe_cuda_error(p->d->cu->api, p->d->cu->api->cuEventSynchronize(p->ev), "lathe:cuda: execution");
  p->fn(p->arg, st);
  free(p);
}

lathe_status_t lathe_cuda_when_done(cuda_dev *d, lcuEvent ev, void (*fn)(void *arg, lathe_status_t st), void *arg) {
  cuda_pending *p = malloc(sizeof *p);
  if (!p) return LATHE_OOM("lathe:cuda");
  *p = (cuda_pending){.q.run = run_pending, .d = d, .ev = ev, .fn = fn, .arg = arg};
  lathe_exec_queue_push(d->done_q, &p->q);
  return NULL;
}

/* ---- setup and teardown ---- */
static void dev_destroy(cuda_dev *d) {
  const lcu_api *api = d->cu->api;
  lathe_exec_queue_free(d->done_q); /* finishes what is queued first */
  d->done_q = NULL;
  if (!d->ctx) return;
  lathe_status_t st = lathe_cuda_use(d);
  if (!st) {
    lathe_cuda_fft_release(d);
    for (int i = 0; i < d->n_streams; i++)
      if (d->streams[i]) api->cuStreamDestroy(d->streams[i]);
    if (d->up_stream) api->cuStreamDestroy(d->up_stream);
    if (d->down_stream) api->cuStreamDestroy(d->down_stream);
    if (d->lt) api->cublasLtDestroy(d->lt);
    if (d->staging) api->cuMemFreeHost(d->staging);
    if (d->small_slot) api->cuMemFreeHost(d->small_slot);
  }
  /* every event is back: no tensor (nor its ready event) outlives the backend */
  for (int i = 0; i < d->n_ev_pool; i++) api->cuEventDestroy(d->ev_pool[i]);
  free(d->ev_pool);
  d->ev_pool = NULL;
  d->n_ev_pool = 0;
  lathe_status_free(st);
  lathe_cuda_cudnn_release(d);
  if (d->lt_workspace) lathe_cuda_free(d, d->lt_workspace, d->lt_workspace_bytes);
  lathe_cuda_modules_destroy(d);
  lathe_cuda_alloc_destroy(d);
  free(d->streams);
  pthread_mutex_destroy(&d->lt_mu);
  pthread_mutex_destroy(&d->staging_mu);
  pthread_mutex_destroy(&d->small_mu);
  pthread_mutex_destroy(&d->ev_mu);
  api->cuDevicePrimaryCtxRelease(d->dev);
  d->ctx = NULL;
}

static lathe_status_t dev_init(lathe_cuda *cu, cuda_dev *d, int ordinal, int gpu) {
  const lcu_api *api = cu->api;
  d->cu = cu;
  d->ordinal = ordinal;
  LATHE_CU_TRY(api, cuDeviceGet(&d->dev, gpu), "lathe:cuda: cuDeviceGet");
  LATHE_CU_TRY(api, cuDevicePrimaryCtxRetain(&d->ctx, d->dev), "lathe:cuda: cuDevicePrimaryCtxRetain");
  pthread_mutex_init(&d->lt_mu, NULL);
  pthread_mutex_init(&d->dnn_mu, NULL);
  pthread_mutex_init(&d->staging_mu, NULL);
  pthread_mutex_init(&d->small_mu, NULL);
  pthread_mutex_init(&d->ev_mu, NULL);
  if (!(d->ev_pool = malloc(sizeof(lcuEvent) * EV_POOL_MAX))) return LATHE_OOM("lathe:cuda");
  LATHE_RETURN_IF_ERROR(lathe_cuda_alloc_init(&d->alloc));
  LATHE_RETURN_IF_ERROR(lathe_cuda_modules_init(&d->modules));
  LATHE_RETURN_IF_ERROR(lathe_cuda_use(d));
  int major = 0, minor = 0;
  char name[128] = "";
  api->cuDeviceGetAttribute(&major, LCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->dev);
  api->cuDeviceGetAttribute(&minor, LCU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->dev);
  api->cuDeviceGetAttribute(&d->sm_count, LCU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d->dev);
  api->cuDeviceGetAttribute(&d->max_smem_optin, LCU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, d->dev);
  api->cuDeviceGetName(name, sizeof name, d->dev);
  api->cuDeviceTotalMem(&d->total_mem, d->dev);
  d->cc = 10 * major + minor;
  snprintf(d->description, sizeof d->description, "cuda:%d %s (sm_%d, %zu MiB)", ordinal, name, d->cc,
           d->total_mem >> 20);
  d->n_streams = N_STREAMS;
  d->streams = calloc(N_STREAMS, sizeof(lcuStream));
  if (!d->streams) return LATHE_OOM("lathe:cuda");
  for (int i = 0; i < N_STREAMS; i++)
    LATHE_CU_TRY(api, cuStreamCreate(&d->streams[i], LCU_STREAM_NON_BLOCKING), "lathe:cuda: cuStreamCreate");
  d->staging_bytes = STAGING_BYTES;
  LATHE_CU_TRY(api, cuMemHostAlloc(&d->staging, d->staging_bytes, LCU_MEMHOSTALLOC_PORTABLE), "lathe:cuda: cuMemHostAlloc");
  LATHE_CU_TRY(api, cuMemHostAlloc(&d->small_slot, SMALL_COPY, LCU_MEMHOSTALLOC_PORTABLE), "lathe:cuda: cuMemHostAlloc");
  LATHE_CU_TRY(api, cuStreamCreate(&d->up_stream, LCU_STREAM_NON_BLOCKING), "lathe:cuda: cuStreamCreate");
  LATHE_CU_TRY(api, cuStreamCreate(&d->down_stream, LCU_STREAM_NON_BLOCKING), "lathe:cuda: cuStreamCreate");
  if (api->cublasLtCreate(&d->lt) != LCUBLAS_STATUS_SUCCESS)
    return lathe_status_new(LATHE_STATUS_UNAVAILABLE, "lathe:cuda: cublasLtCreate failed on device %d", ordinal);
  d->lt_workspace_bytes = LT_WORKSPACE_BYTES;
  LATHE_RETURN_IF_ERROR(lathe_cuda_malloc(d, d->lt_workspace_bytes, &d->lt_workspace));
  /* a wake-up of a sleeping thread costs microseconds (10 us a round trip on the H200 machine):
   * the completion thread polls a while for the next execution's job instead */
  return lathe_exec_queue_new_spinning("lathe:cuda", COMPLETION_SPIN_US, &d->done_q);
}

static void *destroy_now(void *ctx) {
  lathe_cuda *cu = ctx;
  lathe_cuda_spmd_stop(cu);
  lathe_cuda_nccl_release(cu);
  for (int i = 0; cu->devs && i < cu->n_devices; i++) dev_destroy(&cu->devs[i]);
  free(cu->devs);
  free(cu);
  return NULL;
}

/* The last reference to the backend may drop on a completion thread (a launch's token released
 * when its work is done): that thread cannot join itself, so a detached thread tears down. */
static void destroy(void *ctx) {
  lathe_cuda *cu = ctx;
  bool on_own_thread = false;
  for (int i = 0; cu->devs && i < cu->n_devices; i++)
    on_own_thread |= lathe_exec_queue_is_worker(cu->devs[i].done_q);
  on_own_thread |= lathe_cuda_spmd_is_worker(cu);
  pthread_t t;
  if (on_own_thread) {
    if (pthread_create(&t, NULL, destroy_now, cu) == 0) pthread_detach(t);
    /* else: without a thread to tear down from, the backend's resources stay (a leak, not a crash) */
    return;
  }
  destroy_now(cu);
}

const lathe_device_i lathe_cuda_device = {
    .struct_size = sizeof(lathe_device_i),
    .api_version = LATHE_DEVICE_API_VERSION,
    .name = "cuda",
    .caps = caps,
    .num_devices = num_devices,
    .description = description,
    .supports_op = supports_op,
    .supports_dtype = supports_dtype,
    .destroy = destroy,
    .mem_alloc = mem_alloc,
    .mem_free = mem_free,
    .memory_stats = memory_stats,
    .upload = upload,
    .download = download,
    .copy = copy,
    .program_options = program_options,
    .compile = lathe_cuda_compile,
    .plan_free = lathe_cuda_plan_free,
    .execute = lathe_cuda_execute,
    .dump_plan = lathe_cuda_dump_plan,
};

/* lathe:cuda's options (docs/CUDA.md), parsed by the runtime (runtime/options.c); CONF_CAP holds
 * the longest configuration string they make. */
enum { CONF_CAP = 384 };

/* Appends to the configuration string conf of length n, never past CONF_CAP; the new length. */
static int conf_add(char *conf, int n, const char *fmt, ...) {
  if (n >= CONF_CAP - 1) return n;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(conf + n, (size_t)(CONF_CAP - n), fmt, ap);
  va_end(ap);
  return w < 0 ? n : n + w < CONF_CAP ? n + w : CONF_CAP - 1;
}
enum { OPT_DEVICE, OPT_TF32, OPT_FUSE, OPT_CUDNN, OPT_GRAPHS, OPT_ROWS, OPT_FLASH, OPT_DENSE_VJP, OPT_TRACE_GRAPHS, OPT_REMAT,
       OPT_ROWS_LONG, OPT_HALF_BWD, OPT_GEMM_PAD, OPT_CUDNN_SDPA, OPT_REDUCE_COLS, OPT_REDUCE_FUSE, OPT_ROWS_SHIFT, OPT_ROWS_IOTA, OPT_ACT_VEC, OPT_TF32X3, OPT_IN_PLACE,
       OPT_DENSE_BIAS };
const lathe_option_spec lathe_cuda_options[] = {
    [OPT_DEVICE] = {"device", LATHE_OPTION_INT, "N", 0, 1024, false, "every GPU", "GPU N alone (as device 0)"},
    [OPT_TF32] = {"tf32", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "0",
                  "Float32 products may use TF32 tensor cores (10 mantissa bits)"},
    [OPT_FUSE] = {"fuse", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1", "fusion regions on or off"},
    [OPT_CUDNN] = {"cudnn", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1",
                   "convolutions may use cuDNN where it is installed and measured faster"},
    [OPT_GRAPHS] = {"graphs", LATHE_OPTION_INT, "N", 0, 1000000, false, "2",
                    "a program's launches become one CUDA graph at its N-th run on a GPU, replayed after (0: never)"},
    [OPT_ROWS] = {"rows", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1",
                  "reductions over rows fuse with the work before and after them (softmax, layer norm) into one kernel"},
    [OPT_FLASH] = {"flash", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1",
                   "with tf32=1, attention runs as streaming kernels that never write the scores (sm_80 and later)"},
    [OPT_DENSE_VJP] = {"dense_vjp", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "0",
                       "advertise FusedDenseVJP, GoMLX's fully fused dense gradient (measured slower than its decomposition)"},
    [OPT_TRACE_GRAPHS] = {"trace_graphs", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "0",
                          "while tracing, replay CUDA graphs (one GPU span per run) instead of walking the steps (one per step)"},
    [OPT_REMAT] = {"remat", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1",
                   "large values made elementwise from small ones (a one-hot) are computed again for each later reader "
                   "instead of kept in memory between them"},
    [OPT_ROWS_LONG] = {"rows_long", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1",
                       "rows longer than 8192 elements (a vocabulary's softmax and cross-entropy) fuse too, each "
                       "read once per reduction level instead of kept in memory"},
    [OPT_HALF_BWD] = {"half_bwd", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1",
                      "Float16/BFloat16 attention gradients on the half tensor cores, P and dS rounded to the storage "
                      "type as FlashAttention does (heads of 32 or more; 0: the TF32 backward on half storage)"},
    [OPT_GEMM_PAD] = {"gemm_pad", LATHE_OPTION_INT, "MiB", 0, 1 << 20, false, "512",
                      "tensor-core products copy operands whose rows start off 16 bytes (a vocabulary of 50257) or "
                      "whose sizes are not whole 16 bytes into padded rows (zeros in the padding), in blocks of at "
                      "most this many MiB, so cuBLASLt's fastest kernels take them (0: never)"},
    [OPT_CUDNN_SDPA] = {"cudnn_sdpa", LATHE_OPTION_CHOICE, "0|1|2", 0, 0, false, "1",
                        "Float16/BFloat16 attention and its gradient may use cuDNN's fused attention where it is "
                        "installed, takes the form and is measured faster than lathe's kernels (2: wherever it takes "
                        "the form, unmeasured: for tests)"},
    [OPT_REDUCE_COLS] = {"reduce_cols", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1",
                         "reductions over leading axes (bias gradients) read rows of 16-byte vectors of outputs, 8 "
                         "warps a block (0: one thread an output)"},
    [OPT_REDUCE_FUSE] = {"reduce_fuse", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1",
                         "a column reduction (bias and layer-norm gradients) and the elementwise work before it run as "
                         "one kernel that never writes the reduced operand (0: a kernel for each)"},
    [OPT_ROWS_SHIFT] = {"rows_shift", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1",
                        "fused row kernels read and write rows whose length is off 4 (a vocabulary of 50257) in vector "
                        "groups of 4 shifted per row (0: one value at a time)"},
    [OPT_ROWS_IOTA] = {"rows_iota", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1",
                       "fused row kernels compute an Iota input (a one-hot's column index) instead of reading it (0: "
                       "read)"},
    [OPT_ACT_VEC] = {"act_vec", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "0",
                     "1: FusedActivation and its gradient take 4 elements a thread in vector accesses (measured no "
                     "faster on GPT-2 small)"},
    [OPT_TF32X3] = {"tf32x3", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "0",
                    "1: Float32 products (without tf32=1) as one TF32 tensor-core product of operands split in "
                    "high and low parts, within Float32's accuracy (sm_80 and later; GPT-2 small's step 0.70x the "
                    "exact one's time, 1.07x its memory, on an H100)"},
    [OPT_IN_PLACE] = {"in_place", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "0",
                      "1: a fused elementwise kernel writes a result over a donated input that dies there (an "
                      "optimizer's update over the weights and moments it reads) instead of new memory"},
    [OPT_DENSE_BIAS] = {"dense_bias", LATHE_OPTION_CHOICE, "0|1", 0, 0, false, "1",
                        "a FusedDense without an activation has cuBLASLt add its bias to the Float32 sums and write "
                        "its result (0: the sums into Float32 scratch, then a pass adding the bias and rounding)"},
    LATHE_RUNTIME_OPTION_SPECS, /* the runtime's (trace, dump) */
};
const int lathe_cuda_n_options = (int)(sizeof lathe_cuda_options / sizeof lathe_cuda_options[0]);
_Static_assert(sizeof lathe_cuda_options / sizeof lathe_cuda_options[0] <= LATHE_MAX_OPTIONS, "lathe:cuda's options");

/* The driver, NVRTC and cuBLASLt load and the driver sees a GPU (the first steps of device_new). */
static lathe_status_t gpu_count(const lcu_api **api, int *count) {
  LATHE_RETURN_IF_ERROR(lathe_cuda_load(api));
  *count = 0;
  lcuResult r = (*api)->cuDeviceGetCount(count);
  if (r != LCU_SUCCESS || *count == 0)
    return lathe_status_new(LATHE_STATUS_UNAVAILABLE, "lathe:cuda: no CUDA device found (the driver reports %d)", *count);
  return NULL;
}

lathe_status_t lathe_cuda_probe(void) {
  const lcu_api *api;
  int count;
  return gpu_count(&api, &count);
}

lathe_status_t lathe_cuda_device_new(const lathe_option_value *opt, const lathe_device_i **out_dev, void **out_ctx,
                                     char **out_config) {
  int only = opt[OPT_DEVICE].set ? (int)opt[OPT_DEVICE].value : -1;
  bool tf32 = opt[OPT_TF32].set && opt[OPT_TF32].value == 1;
  bool fuse = !opt[OPT_FUSE].set || opt[OPT_FUSE].value == 1;
  bool cudnn = !opt[OPT_CUDNN].set || opt[OPT_CUDNN].value == 1;
  int graph_after = opt[OPT_GRAPHS].set ? (int)opt[OPT_GRAPHS].value : 2;
  bool rows = !opt[OPT_ROWS].set || opt[OPT_ROWS].value == 1;
  bool flash = !opt[OPT_FLASH].set || opt[OPT_FLASH].value == 1;
  bool dense_vjp = opt[OPT_DENSE_VJP].set && opt[OPT_DENSE_VJP].value == 1;
  bool trace_graphs = opt[OPT_TRACE_GRAPHS].set && opt[OPT_TRACE_GRAPHS].value == 1;
  bool remat = !opt[OPT_REMAT].set || opt[OPT_REMAT].value == 1;
  bool rows_long = !opt[OPT_ROWS_LONG].set || opt[OPT_ROWS_LONG].value == 1;
  bool half_bwd = !opt[OPT_HALF_BWD].set || opt[OPT_HALF_BWD].value == 1;
  int64_t gemm_pad = opt[OPT_GEMM_PAD].set ? opt[OPT_GEMM_PAD].value : 512;
  int cudnn_sdpa = opt[OPT_CUDNN_SDPA].set ? (int)opt[OPT_CUDNN_SDPA].value : 1;
  bool reduce_cols = !opt[OPT_REDUCE_COLS].set || opt[OPT_REDUCE_COLS].value == 1;
  bool reduce_fuse = !opt[OPT_REDUCE_FUSE].set || opt[OPT_REDUCE_FUSE].value == 1;
  bool rows_shift = !opt[OPT_ROWS_SHIFT].set || opt[OPT_ROWS_SHIFT].value == 1;
  bool rows_iota = !opt[OPT_ROWS_IOTA].set || opt[OPT_ROWS_IOTA].value == 1;
  bool act_vec = opt[OPT_ACT_VEC].set && opt[OPT_ACT_VEC].value == 1;
  bool tf32x3 = opt[OPT_TF32X3].set && opt[OPT_TF32X3].value == 1;
  bool in_place = opt[OPT_IN_PLACE].set && opt[OPT_IN_PLACE].value == 1;
  bool dense_bias = !opt[OPT_DENSE_BIAS].set || opt[OPT_DENSE_BIAS].value == 1;
  const lcu_api *api;
  int count;
  LATHE_RETURN_IF_ERROR(gpu_count(&api, &count));
  if (only >= count)
    return LATHE_INVALID("lathe:cuda: device=%d, but there %s %d GPU%s", only, count == 1 ? "is" : "are", count, count == 1 ? "" : "s");
  lathe_cuda *cu = calloc(1, sizeof *cu);
  if (!cu) return LATHE_OOM("lathe:cuda");
  cu->api = api;
  cu->tf32 = tf32;
  cu->fuse = fuse;
  cu->rows = rows;
  cu->flash = flash;
  cu->cudnn = cudnn;
  cu->cudnn_sdpa = cudnn_sdpa;
  cu->reduce_cols = reduce_cols;
  cu->reduce_fuse = reduce_fuse;
  cu->rows_shift = rows_shift;
  cu->rows_iota = rows_iota;
  cu->act_vec = act_vec;
  cu->tf32x3 = tf32x3;
  cu->loop_in_place = in_place;
  cu->dense_bias = dense_bias;
  cu->dense_vjp = dense_vjp;
  cu->trace_graphs = trace_graphs;
  cu->remat = remat;
  cu->rows_long = rows_long;
  cu->half_bwd = half_bwd;
  cu->gemm_pad = gemm_pad << 20;
  cu->graph_after = graph_after;
  cu->n_devices = only >= 0 ? 1 : count;
  cu->devs = calloc((size_t)cu->n_devices, sizeof(cuda_dev));
  lathe_status_t st = cu->devs ? NULL : LATHE_OOM("lathe:cuda");
  for (int i = 0; !st && i < cu->n_devices; i++) st = dev_init(cu, &cu->devs[i], i, only >= 0 ? only : i);
  /* peer access between every pair that allows it (CopyToDevice then goes GPU to GPU) */
  for (int i = 0; !st && i < cu->n_devices; i++)
    for (int j = 0; j < cu->n_devices; j++) {
      int can = 0;
      if (i == j || api->cuDeviceCanAccessPeer(&can, cu->devs[i].dev, cu->devs[j].dev) != LCU_SUCCESS || !can) continue;
      if (!(st = lathe_cuda_use(&cu->devs[i]))) api->cuCtxEnablePeerAccess(cu->devs[j].ctx, 0);
    }
  char *conf = st ? NULL : malloc(CONF_CAP);
  if (!st && !conf) st = LATHE_OOM("lathe:cuda");
  if (st) {
    destroy(cu);
    return st;
  }
  int driver, nvrtc;
  lathe_cuda_versions(&driver, &nvrtc);
  snprintf(cu->description, sizeof cu->description, "cuda (%d GPU%s: %s%s; driver %d.%d, NVRTC %d.%d%s)", cu->n_devices,
           cu->n_devices == 1 ? "" : "s", cu->devs[0].description + 7, cu->n_devices > 1 ? ", ..." : "", driver / 1000,
           driver % 1000 / 10, nvrtc / 1000, nvrtc % 1000 / 10, tf32 ? ", TF32" : tf32x3 ? ", 3xTF32" : "");
  int n = only >= 0 ? snprintf(conf, CONF_CAP, "cuda,device=%d", only) : snprintf(conf, CONF_CAP, "cuda");
  if (tf32) n = conf_add(conf, n, ",tf32=1");
  if (!fuse) n = conf_add(conf, n, ",fuse=0");
  if (!rows) n = conf_add(conf, n, ",rows=0");
  if (!flash) n = conf_add(conf, n, ",flash=0");
  if (!cudnn) n = conf_add(conf, n, ",cudnn=0");
  if (cudnn_sdpa != 1) n = conf_add(conf, n, ",cudnn_sdpa=%d", cudnn_sdpa);
  if (!reduce_cols) n = conf_add(conf, n, ",reduce_cols=0");
  if (!reduce_fuse) n = conf_add(conf, n, ",reduce_fuse=0");
  if (!rows_shift) n = conf_add(conf, n, ",rows_shift=0");
  if (!rows_iota) n = conf_add(conf, n, ",rows_iota=0");
  if (act_vec) n = conf_add(conf, n, ",act_vec=1");
  if (tf32x3) n = conf_add(conf, n, ",tf32x3=1");
  if (in_place) n = conf_add(conf, n, ",in_place=1");
  if (!dense_bias) n = conf_add(conf, n, ",dense_bias=0");
  if (dense_vjp) n = conf_add(conf, n, ",dense_vjp=1");
  if (trace_graphs) n = conf_add(conf, n, ",trace_graphs=1");
  if (!remat) n = conf_add(conf, n, ",remat=0");
  if (!rows_long) n = conf_add(conf, n, ",rows_long=0");
  if (!half_bwd) n = conf_add(conf, n, ",half_bwd=0");
  if (gemm_pad != 512) n = conf_add(conf, n, ",gemm_pad=%lld", (long long)gemm_pad);
  if (graph_after != 2) conf_add(conf, n, ",graphs=%d", graph_after);
  *out_dev = &lathe_cuda_device;
  *out_ctx = cu;
  *out_config = conf;
  return NULL;
}

/* cuda.h -- the CUDA device (lathe:cuda): contexts, memory, kernels and execution on NVIDIA GPUs,
 * with every CUDA library opened at run time (loader.c). Kernel families follow the CPU's
 * layout: one file per op kind, each exporting
 *   bool lathe_cuda_supports_<family>(lathe_op op, lathe_dtype dtype);
 *   lathe_status_t lathe_cuda_run_<family>(lathe_cuda_exec *ex, const lathe_node *n,
 *                                          lathe_tensor *const *in, lathe_tensor **out);
 * with the CPU's contract (cpu.h): `in` holds the operands, `out` the results already allocated
 * on the device (control ops allocate their own). Tensors' data are device pointers. Kernels are
 * CUDA C source strings compiled by NVRTC for the device's architecture on first use, cached in
 * memory and on disk (module.c); sizes are kernel arguments, so a new batch size never
 * recompiles. */
#ifndef LATHE_CUDA_H
#define LATHE_CUDA_H

#include <pthread.h>
#include <stdatomic.h>

#include "../graph/program.h"
#include "../runtime/runtime.h"
#include "cuda_api.h"

/* ---- loading (loader.c) ---- */
/* The driver, NVRTC and cuBLASLt, or UNAVAILABLE naming what is missing. */
lathe_status_t lathe_cuda_load(const lcu_api **out);
/* NVRTC alone (compiling kernels needs no GPU: tests use this). */
lathe_status_t lathe_cuda_load_nvrtc(const lcu_api **out);
bool lathe_cuda_have_cufft(void);
/* NCCL (libnccl.so.2, or the file LATHE_NCCL_LIBRARY names), or UNAVAILABLE saying how to get it;
 * *version as NCCL_VERSION_CODE (21903 for 2.19.3). Needs no GPU. */
lathe_status_t lathe_cuda_load_nccl(const lcu_api **out, int *version);
/* cuDNN 9 (libcudnn.so.9, or the file LATHE_CUDNN_LIBRARY names), or UNAVAILABLE. */
lathe_status_t lathe_cuda_load_cudnn(const lcu_api **out);
/* Driver and NVRTC versions as 1000 * major + 10 * minor (0 when not loaded). */
void lathe_cuda_versions(int *driver, int *nvrtc);
/* A status for CUDA error r during `what` (NULL for success); out of memory is RESOURCE_EXHAUSTED. */
lathe_status_t lathe_cuda_error(const lcu_api *api, lcuResult r, const char *what);
#define LATHE_CU_TRY(api, call, what) LATHE_RETURN_IF_ERROR(lathe_cuda_error((api), (api)->call, (what)))

/* ---- memory (alloc.c): a caching allocator per device ---- */
typedef struct cuda_block cuda_block;
typedef struct cuda_alloc {
  pthread_mutex_t mu;
  cuda_block **free_lists; /* per size class */
  size_t cached_bytes, in_use_bytes, peak_bytes;
  int64_t n_allocs; /* requests served, cache hits included */
} cuda_alloc;

/* ---- compiled kernels (module.c) ---- */
typedef struct cuda_module cuda_module;
struct lasting_fn;
typedef struct cuda_modules {
  pthread_mutex_t mu;
  cuda_module **table;
  int cap, n;
  _Atomic(struct lasting_fn *) *lasting; /* lathe_cuda_kernel_lasting's table (module.c) */
} cuda_modules;

/* One GPU. */
typedef struct cuda_dev {
  struct lathe_cuda *cu;
  int ordinal;        /* within the backend */
  lcuDevice dev;
  lcuContext ctx;     /* the primary context */
  int cc;             /* compute capability, 10 * major + minor (90 for Hopper) */
  int sm_count, max_smem_optin;
  size_t total_mem;
  char description[192];
  cuda_alloc alloc;
  cuda_modules modules;
  lcuStream *streams; /* executions and copies take one in turn */
  int n_streams;
  atomic_uint next_stream;
  lcublasLtHandle lt;
  lcuDeviceptr lt_workspace;
  size_t lt_workspace_bytes;
  pthread_mutex_t lt_mu; /* cuBLASLt handles are not to be shared by threads at once */
  /* cuDNN (cudnn.c): the handle, made on the first convolution (0 untried, 1 made, -1 none) */
  pthread_mutex_t dnn_mu;
  int dnn_state;
  lcudnnHandle dnn;
  struct cudnn_choice *dnn_choices; /* per configuration: cuDNN's algorithm, or lathe's own path */
  struct sdpa_choice *sdpa_choices; /* per attention form and shape: cuDNN's plan, or lathe's kernels */
  /* host staging: pinned memory for transfers */
  pthread_mutex_t staging_mu;
  void *staging;
  size_t staging_bytes;
  /* transfers have streams of their own, so that they never wait behind an execution they do
   * not read; a small read goes through its own pinned slot (guarded by small_mu) */
  lcuStream up_stream, down_stream;
  pthread_mutex_t small_mu;
  void *small_slot;
  /* CUDA events (disable-timing) kept for reuse: executions and uploads take one each */
  pthread_mutex_t ev_mu;
  lcuEvent *ev_pool;
  int n_ev_pool;
  /* completion: a worker per device (src/exec/queue.c) waits for each execution's event, then
   * finishes it */
  struct lathe_exec_queue *done_q;
} cuda_dev;

typedef struct lathe_cuda {
  const lcu_api *api;
  int n_devices;
  cuda_dev *devs;
  bool tf32; /* Float32 products may use TF32 tensor cores (option tf32=1; off by default) */
  bool tf32x3; /* Float32 products as three TF32 products of split operands (option tf32x3=1; gemm.c) */
  bool fuse;
  bool rows;  /* ROWS regions (the option rows=0|1) */
  bool rows_long; /* ROWS regions over rows longer than LATHE_CUDA_ROWS_MAX too (option rows_long=1) */
  /* ROWS kernels over rows of a length off 4 in shifted groups of 4 (rows_shift=1, the default)
   * and with Iota inputs computed (rows_iota=1, the default); activation kernels 4 elements a
   * thread (act_vec=1, off: measured no faster) */
  bool rows_shift, rows_iota, act_vec;
  /* a LOOP region's result over a dying donated input (option in_place=1): exec.c's launch_loop */
  bool loop_in_place;
  bool flash; /* attention by the streaming kernels where they apply (option flash=0|1; attention.c) */
  bool half_bwd; /* half attention gradients on the half tensor cores (option half_bwd=1; flash.cuh) */
  int64_t gemm_pad; /* > 0: tensor-core products stage operands whose lines start off 16 bytes or
                     * whose sizes are not whole 16 bytes in padded lines, in blocks of at most this
                     * many bytes (option gemm_pad=MiB; gemm.c) */
  bool trace_graphs; /* while tracing, CUDA graphs still replay (option trace_graphs=1; src/exec/xtrace.c) */
  bool remat;        /* recomputing cheap values (option remat=1; src/graph/program.c) */
  bool cudnn; /* convolutions may use cuDNN (option cudnn=1, the default) */
  int cudnn_sdpa; /* half attention may use cuDNN's fused attention: 1 (default) where measured faster, 2 always,
                   * 0 never (option cudnn_sdpa) */
  bool reduce_cols; /* column reductions by 16-byte vectors of outputs (reduce.c; option reduce_cols=0 turns them off) */
  bool reduce_fuse; /* REDUCE regions of column reductions as one kernel with their prologue (reduce_fused.c; option reduce_fuse, on by default) */
  bool dense_bias; /* FusedDense's bias in cuBLASLt's epilogue (fused.c; option dense_bias=0 turns it off) */
  bool dense_vjp; /* FusedDenseVJP advertised (option dense_vjp=1; off by default) */
  int graph_after; /* a plan becomes a CUDA graph at its graph_after-th run on a GPU (option graphs; 0: never) */
  char description[256];
  struct cuda_spmd *spmd; /* SPMD worker threads, made on first need (spmd.c) */
  struct nccl_set *nccl;  /* NCCL communicators by device list (collective.c) */
} lathe_cuda;

extern const lathe_device_i lathe_cuda_device;

/* Frees device d's cuDNN handle and remembered choices (cudnn.c; at device teardown). */
void lathe_cuda_cudnn_release(cuda_dev *d);
/* Frees d's remembered attention plans (cudnn_sdpa.c; lathe_cuda_cudnn_release calls it). */
void lathe_cuda_sdpa_release(cuda_dev *d);
/* Destroys d's cached cuFFT plans (fft.c; at device teardown, with d's context current). */
void lathe_cuda_fft_release(cuda_dev *d);

/* Runs fn(arg, status) on d's completion thread once event ev has completed (status: NULL, or
 * the error the stream reported; fn takes it). */
lathe_status_t lathe_cuda_when_done(cuda_dev *d, lcuEvent ev, void (*fn)(void *arg, lathe_status_t st), void *arg);

/* A CUDA event from d's pool (made when the pool is empty), and back to it. */
lathe_status_t lathe_cuda_event_get(cuda_dev *d, lcuEvent *out);
void lathe_cuda_event_put(cuda_dev *d, lcuEvent ev);
/* Attaches cev (taken from d's pool; the lathe event returns it there when it goes) to ev as its
 * native handle, so that later work on d waits for it on the GPU. gpu_decides: the work's success
 * is the stream's alone (no kernel error flags), so readers may wait on cev itself. Returns false
 * (cev untouched) when there is no memory for it. */
bool lathe_cuda_event_attach(cuda_dev *d, lathe_event *ev, lcuEvent cev, bool gpu_decides);
/* Orders stream s after t's pending writer: on the GPU when the writer carries d's CUDA event
 * (and, with decided_only, when that event alone decides the writer's success), else by waiting
 * on the host, which returns the writer's status (as lathe_tensor_wait_for(op) words it, when op
 * is given). */
lathe_status_t lathe_cuda_stream_wait_tensor(cuda_dev *d, lcuStream s, lathe_tensor *t, bool decided_only, const char *op);

/* Makes dev's context current on this thread. */
lathe_status_t lathe_cuda_use(cuda_dev *d);
/* Device memory of nbytes (a unique pointer also for 0 bytes), from the caching allocator. */
lathe_status_t lathe_cuda_malloc(cuda_dev *d, size_t nbytes, lcuDeviceptr *out);
void lathe_cuda_free(cuda_dev *d, lcuDeviceptr p, size_t nbytes);
lathe_status_t lathe_cuda_alloc_init(cuda_alloc *a);
/* lathe_memory_stats of d's pool; reset_peak starts the peak again from what is in use. */
void lathe_cuda_alloc_stats(cuda_dev *d, bool reset_peak, lathe_memory_stats *out);
void lathe_cuda_alloc_destroy(cuda_dev *d);

/* A device tensor of shape on d (memory from the allocator). */
lathe_status_t lathe_cuda_tensor_new(cuda_dev *d, const lathe_shape *shape, lathe_tensor **out);
static inline lcuDeviceptr lathe_cuda_ptr(const lathe_tensor *t) { return (lcuDeviceptr)(uintptr_t)t->data; }
/* Whether device address p can be read as the prelude's lt_v4 of elements elem_bytes wide: a
 * group of 4 elements, aligned to its size but at most 16 bytes. */
static inline bool lathe_cuda_v4_aligned(uintptr_t p, size_t elem_bytes) {
  size_t a = 4 * elem_bytes > 16 ? 16 : 4 * elem_bytes;
  return p % a == 0;
}

/* ---- kernels ---- */
/* Compiles source (the prelude is prepended) for architecture sm_<cc> with NVRTC into a cubin;
 * NVRTC's log is in the error. *out is malloc'd. Needs NVRTC only (no GPU). */
lathe_status_t lathe_cuda_compile_source(const char *source, int cc, void **out_cubin, size_t *out_size);
/* The function `name` of source on device d: compiled once per source (and cached on disk), then
 * looked up. Thread-safe. */
lathe_status_t lathe_cuda_kernel(cuda_dev *d, const char *source, const char *name, lcuFunction *out);
/* The same for a source that lives, unchanged, as long as the process (a static array, or text
 * made once): after the first call the function is found by the text's address and the name,
 * without reading the text or taking a lock (the launch path of most kernels). */
lathe_status_t lathe_cuda_kernel_lasting(cuda_dev *d, const char *source, const char *name, lcuFunction *out);
/* Compiles (or finds in the caches) and loads source's module on d now, so that its first launch
 * only looks the function up: plans do it for the texts their steps will use, on several threads. */
lathe_status_t lathe_cuda_module_prepare(cuda_dev *d, const char *source);
/* Functions names[i] of sources[i] on d (i < n): those found in neither the table nor the disk
 * cache are compiled as one NVRTC program (NVRTC's cost per program paid once), the others found.
 * Every source starts with the same `prefix` bytes (kept once in the program) and its kernel's name
 * is its own among them. A failed batch is compiled member by member, so an error names its
 * kernel. Thread-safe; out[i] NULL where an error stopped it. */
lathe_status_t lathe_cuda_kernels_batch(cuda_dev *d, int n, const char *const *sources, const char *const *names,
                                        size_t prefix, lcuFunction *out);
/* The program of such a batch: the prefix, then each source's rest in a namespace. malloc'd; NULL
 * on out of memory. */
char *lathe_cuda_batch_text(int n, const char *const *sources, size_t prefix);
/* A lasting text for a small key (a dtype path, say): made by make(key, n) the first time a key is
 * asked for, then the same text for the life of the process, so that a launch finds its kernel
 * by address (lathe_cuda_kernel_lasting) instead of generating and hashing the text each time.
 * make returns malloc'd text or NULL; keys of different makers never meet. NULL on out of memory. */
typedef char *(*lathe_cuda_text_maker)(const void *key, size_t n);
const char *lathe_cuda_memo_text(lathe_cuda_text_maker make, const void *key, size_t n);
lathe_status_t lathe_cuda_modules_init(cuda_modules *m);
/* The on-disk cache's folder (LATHE_CUDA_CACHE_DIR, else $XDG_CACHE_HOME/lathe/cuda, else
 * ~/.cache/lathe/cuda; false when off or unknown), and its best-effort file access: a file read
 * whole (malloc'd, NULL when absent), a file written whole (atomically, by rename; failures are
 * ignored). */
bool lathe_cuda_cache_dir(char *buf, size_t cap);
void *lathe_cuda_read_file(const char *path, size_t *size);
void lathe_cuda_write_file(const char *dir, const char *path, const void *data, size_t n);
void lathe_cuda_modules_destroy(cuda_dev *d);

/* ---- execution (exec.c) ---- */
typedef struct lathe_cuda_exec lathe_cuda_exec;
cuda_dev *lathe_cuda_exec_dev(lathe_cuda_exec *ex);
lcuStream lathe_cuda_exec_stream(lathe_cuda_exec *ex);
const lcu_api *lathe_cuda_exec_api(lathe_cuda_exec *ex);
/* Whether ex's launches are being captured into a CUDA graph (graph.c): nothing runs, so a step
 * that needs a result on the host (a read back, a measurement) fails and the run is walked instead. */
bool lathe_cuda_exec_capturing(const lathe_cuda_exec *ex);
/* Launches f on the execution's stream: a 1-D grid of blocks x threads, args as cuLaunchKernel. */
lathe_status_t lathe_cuda_launch(lathe_cuda_exec *ex, lcuFunction f, unsigned blocks, unsigned threads,
                                 unsigned shared_bytes, void **args);
/* Blocks and threads for n elements, one thread each (grid-stride loops cover the rest). */
void lathe_cuda_grid(int64_t n, unsigned *blocks, unsigned *threads);
/* A scratch tensor of the execution, freed (stream-ordered) with it. *out is a new reference of the
 * caller's: release it (the data stays valid until the execution's stream is done). */
lathe_status_t lathe_cuda_exec_tensor(lathe_cuda_exec *ex, const lathe_shape *shape, lathe_tensor **out);
/* Scratch memory for the step being run (lathe_cuda_scratch): the memory of an earlier step's
 * scratch when reuse is set and one fits (the stream runs the steps in order), else new; *out is
 * borrowed (its shape may be another's when reused: read its pointer only), valid until the step
 * is done. */
lathe_status_t lathe_cuda_exec_scratch(lathe_cuda_exec *ex, const lathe_shape *shape, bool reuse, lathe_tensor **out);
/* Steps nest (a control op runs its bodies' steps): the scratch handed out since mark (the count
 * lathe_cuda_exec_scratch_mark gave when the step began) is free for later steps once it is done. */
int lathe_cuda_exec_scratch_mark(const lathe_cuda_exec *ex);
void lathe_cuda_exec_scratch_done(lathe_cuda_exec *ex, int mark);
/* Packs wide (Int8/Uint8, one value per byte) into t, a sub-byte integer tensor of the same
 * element count: each value keeps its low bits (the wrap of a conversion to t's width). */
lathe_status_t lathe_cuda_pack(lathe_cuda_exec *ex, const lathe_tensor *wide, lathe_tensor *t);
/* For kernels that find bad input while they run (an index out of range that the op defines as
 * an error): a device word the kernel ORs *out_code into; the execution then fails with
 * INVALID_ARGUMENT and `message` (copied), reported when its outputs are read. */
lathe_status_t lathe_cuda_exec_error_flag(lathe_cuda_exec *ex, const char *message, lcuDeviceptr *out_flag,
                                          uint32_t *out_code);
/* ---- elementwise kernels bound at compile (ew.c) ----
 * The kernel of an elementwise step or a LOOP region: its source and launch geometry (the
 * iteration space collapsed, broadcasts as stride-0 axes, 31-bit indices where sizes allow,
 * vector groups for rows read in order) made once from the program's static shapes, and its
 * function on each GPU resolved once; a launch only fills in the pointers. */
typedef struct lathe_cuda_ewk lathe_cuda_ewk;
/* Whether node n is an op these kernels run (an elementwise op other than Bitcast). */
bool lathe_cuda_ewk_step_kind(const lathe_node *n);
/* The kernel of step n over operand shapes `in` (as stored: sub-byte integers widened) giving
 * `out`; of LOOP region g of pf. *k is the caller's (lathe_cuda_ewk_free). */
lathe_status_t lathe_cuda_ewk_step(lathe_cuda *cu, const lathe_node *n, const lathe_shape *const *in, const lathe_shape *out,
                                   lathe_cuda_ewk **k);
lathe_status_t lathe_cuda_ewk_region(lathe_cuda *cu, const lathe_pfunc *pf, const lathe_pregion *g, lathe_cuda_ewk **k);
/* Compiles (or finds) k's function on GPU `device`. Not concurrently for the same k and device. */
lathe_status_t lathe_cuda_ewk_resolve(lathe_cuda *cu, lathe_cuda_ewk *k, int device);
/* The same for ks[0..n) at once: those not found compiled as one program (lathe_cuda_kernels_batch). */
lathe_status_t lathe_cuda_ewk_resolve_batch(lathe_cuda *cu, lathe_cuda_ewk *const *ks, int n, int device);
/* The name generators give a kernel (ew.c, rows.c); replaced by lt_fused_<hash of the text>. */
#define LATHE_CUDA_EWK_ANON "lt_fused_0000000000000000"
const char *lathe_cuda_ewk_source(const lathe_cuda_ewk *k);
const char *lathe_cuda_ewk_name(const lathe_cuda_ewk *k);
/* k's collapsed geometry (tests): rank and dims, index width, vector groups, per input access. */
void lathe_cuda_ewk_describe(const lathe_cuda_ewk *k, int *rank, int64_t *dims, bool *idx32, bool *vec, int *access);
/* Queues k over outputs outs and inputs ins on the execution's stream. */
lathe_status_t lathe_cuda_ewk_launch(lathe_cuda_exec *ex, lathe_cuda_ewk *k, lathe_tensor **outs, lathe_tensor *const *ins);
void lathe_cuda_ewk_free(lathe_cuda_ewk *k);
/* Runs LOOP (or ROWS) region g of pf at step pos with kernel `bound` (NULL: made for this run).
 * in_place (LOOP): an escaping member's result may take a dying input's memory
 * (lathe_exec_loop_in_place): the kernels load an element's inputs before they store it. */
lathe_status_t lathe_cuda_region_loop(lathe_cuda_exec *ex, const lathe_pfunc *pf, const lathe_pregion *g, lathe_cuda_ewk *bound,
                                      int pos, bool in_place, lathe_tensor **vals,
                                      lathe_status_t (*result)(lathe_cuda_exec *, int slot, lathe_tensor **));
/* The device's 31-bit index division, on the host (tests). */
uint32_t lathe_cuda_udiv_host(uint32_t n, uint32_t d);

/* The CUDA prelude of ew.c's helpers (lt_max, lt_min, lt_key, complex operators and math, ...),
 * for other families' kernel sources to start with. */
const char *lathe_cuda_ew_prelude(void);
/* Copies a device tensor's bytes to host memory (waits for the stream). */
lathe_status_t lathe_cuda_read(lathe_cuda_exec *ex, const lathe_tensor *t, void *dst, size_t nbytes);

lathe_status_t lathe_cuda_compile(void *ctx, const lathe_program *program, lathe_plan **out);
void lathe_cuda_plan_free(void *ctx, lathe_plan *plan);
void lathe_cuda_dump_plan(void *ctx, const lathe_plan *plan, FILE *f);
/* While dumping (option dump=): the directory where run-time choices are noted, else NULL (the
 * libraries' choices: lathe_profile_note into LATHE_CUDA_LIBRARY_NOTES there). */
#define LATHE_CUDA_LIBRARY_NOTES "cuda-libraries.txt"
const char *lathe_cuda_exec_dump_dir(const lathe_cuda_exec *ex);
/* While tracing: the trace, for compile-like work done at a first run (cuDNN's engine search). */
struct lathe_trace *lathe_cuda_exec_trace(const lathe_cuda_exec *ex);
/* The device's execute: a launch with a group (an SPMD replica) goes to its device's worker
 * thread (spmd.c), any other runs lathe_cuda_execute_now on the calling thread. */
lathe_status_t lathe_cuda_execute(void *ctx, lathe_plan *plan, const lathe_launch *launch);
/* Queues a launch's work on its device's stream from this thread. given: NULL, or an event the
 * outputs already carry (shared), which this then signals exactly once, with the error if it
 * fails (the outputs then get no native CUDA event). */
lathe_status_t lathe_cuda_execute_now(void *ctx, lathe_plan *plan, const lathe_launch *launch, lathe_event *given);
/* SPMD: the execution's replicas (NULL for a single-device run) and this run's replica. */
lathe_collective *lathe_cuda_exec_group(lathe_cuda_exec *ex, int *out_replica);
/* SPMD worker threads (spmd.c): whether the caller is one of cu's; stops and joins them. */
bool lathe_cuda_spmd_is_worker(lathe_cuda *cu);
/* The owner key of the mark SPMD launches put on their outputs' event (lathe_event_native): work
 * that d's worker has queued, or will have queued before its next launch, on d's SPMD stream. */
static inline const void *lathe_cuda_spmd_key(const cuda_dev *d) { return &d->streams; }
void lathe_cuda_spmd_stop(lathe_cuda *cu);
/* Destroys the cached NCCL communicators (collective.c; at backend teardown). */
void lathe_cuda_nccl_release(lathe_cuda *cu);
bool lathe_cuda_supports_op(lathe_op op, lathe_dtype dtype);
lathe_status_t lathe_cuda_run_kernel(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out);

/* ---- shared kernels (layout.c) ---- */
/* Host images of the prelude's lt_dims / lt_strides (kernel arguments by value). */
typedef struct lt_dims_h {
  int rank;
  int64_t d[16];
} lt_dims_h;
typedef struct lt_strides_h {
  int64_t s[16];
} lt_strides_h;
/* The multiplier and shift that divide a 31-bit index by d (the prelude's lt_div32, lt_udiv). */
typedef struct {
  uint32_t d, m, s;
} lt_div32_h;
lt_div32_h lathe_cuda_div32(uint32_t d);
/* Host image of the prelude's lt_dims32 (sizes as divisors, 32-bit strides). */
typedef struct lt_dims32_h {
  int rank;
  lt_div32_h q[16];
  int32_t s[16];
} lt_dims32_h;
/* n elements (of in's dtype width) moved by one strided kernel: gather: out[i] = in[base +
 * offset(i)]; scatter: out[base + offset(i)] = in[i]; offset(i) = sum over axes of i's index
 * in dims times strides. */
lathe_status_t lathe_cuda_strided(lathe_cuda_exec *ex, bool scatter, const lathe_tensor *in, lathe_tensor *out,
                                  int64_t n, const lt_dims_h *dims, const lt_strides_h *strides, int64_t base);
/* *g: dims and strides for lt_offset32, when n and every offset base + offset(i) lie in
 * [0, 2^31); else false. */
bool lathe_cuda_dims32(const lt_dims_h *d, const lt_strides_h *s, int64_t n, int64_t base, lt_dims32_h *g);
/* The same move between device pointers, of elements of w bytes (1, 2, 4, 8 or 16). */
lathe_status_t lathe_cuda_move(lathe_cuda_exec *ex, bool scatter, lcuDeviceptr in, lcuDeviceptr out, int w, int64_t n,
                               const lt_dims_h *dims, const lt_strides_h *strides, int64_t base);
/* Lines of a matrix moved between pitches, elements of w bytes: out line l < n_out, element
 * j < len_out (at element l * op + j) gets in[l * ip + j] where l < n_in and j < len_in, else
 * zero (gemm.c stages matrices in padded lines with it, and copies results back). */
lathe_status_t lathe_cuda_lines(lathe_cuda_exec *ex, lcuDeviceptr in, lcuDeviceptr out, int w, int64_t n_out, int64_t len_out,
                                int64_t op, int64_t n_in, int64_t len_in, int64_t ip);
/* The index of such a move simplified as lathe_cuda_strided launches it (layout.c; exposed for
 * tests): n elements of *w bytes, `strided_p` the strided side's pointer, `plain_p` the other's;
 * afterwards n / (new *w / old *w) elements of the new *w bytes move the same bytes. */
void lathe_cuda_strided_simplify(lt_dims_h *d, lt_strides_h *s, int64_t n, int64_t *base, int *w, lcuDeviceptr strided_p,
                                 lcuDeviceptr plain_p);
/* out = in, byte for byte (nothing when they share memory). */
lathe_status_t lathe_cuda_copy(lathe_cuda_exec *ex, const lathe_tensor *in, lathe_tensor *out);

/* ---- sources for tests: every fixed kernel source of every family (NVRTC compile test) ---- */
typedef void (*lathe_cuda_source_fn)(void *ctx, const char *label, const char *source);
void lathe_cuda_each_source(lathe_cuda_source_fn fn, void *ctx);

/* ---- Sort (sort.c), run by the control family ---- */
bool lathe_cuda_supports_sort(lathe_dtype dtype);
lathe_status_t lathe_cuda_run_sort(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out);
void lathe_cuda_sources_sort(lathe_cuda_source_fn fn, void *ctx);

/* ---- the lasting texts a step will launch ----
 * lathe_cuda_texts_of(d, n, fn, ctx) calls fn with each lasting text (see
 * lathe_cuda_kernel_lasting) that running n on d is expected to launch, decided from n's op,
 * attributes, shapes and d's configuration, as the family's launch decides it; a plan compiles
 * them all on several threads when it is made. A text left out is compiled at its first launch
 * (slower, never wrong); one listed but not launched costs only its compile. */
typedef void (*lathe_cuda_text_fn)(void *ctx, const char *source);
void lathe_cuda_texts_of(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx);
/* The texts a move of elements of w bytes may launch (layout.c): w's, and 16 bytes' where
 * lathe_cuda_move can widen its elements. */
void lathe_cuda_move_texts(int w, lathe_cuda_text_fn fn, void *ctx);

/* ---- kernel families ---- */
#define LATHE_CUDA_FAMILY(K)                                                                          \
  bool lathe_cuda_supports_##K(lathe_op op, lathe_dtype dtype);                                       \
  lathe_status_t lathe_cuda_run_##K(lathe_cuda_exec *ex, const lathe_node *n, lathe_tensor *const *in, \
                                    lathe_tensor **out);                                              \
  void lathe_cuda_sources_##K(lathe_cuda_source_fn fn, void *ctx);                                    \
  void lathe_cuda_texts_##K(const cuda_dev *d, const lathe_node *n, lathe_cuda_text_fn fn, void *ctx);
#define LATHE_KIND(NAME, family) LATHE_KIND_IF_FAMILY(family, LATHE_CUDA_FAMILY(family))
#include "../graph/kinds.def"
#undef LATHE_KIND
#undef LATHE_CUDA_FAMILY

/* A growing kernel source: lt_put appends printf-style; on out of memory it sets oom and
 * appends nothing more. The caller frees s. */
typedef struct lt_text {
  char *s;
  size_t n, cap;
  bool oom;
} lt_text;
void lt_put(lt_text *t, const char *fmt, ...) LATHE_PRINTF(2, 3);

/* ew.c's generation helpers, shared with rows.c: storage and compute types of a dtype (NULL when
 * no kernel holds it), an op's element function (its name into name), and the conversions
 * between a half's storage and float (other dtypes: the value as it is). */
const char *lathe_cuda_ew_storage(lathe_dtype dt);
const char *lathe_cuda_ew_compute(lathe_dtype dt);
/* A region's element functions (one per op and dtypes) into t, their names into names (64 x 96);
 * then its members' evaluation as local values v<i> over loaded inputs x<k>, member i's value
 * escaping through store_fmt (%d: out[i] when >= 0, %s: the value converted for storage). */
lathe_status_t lathe_cuda_ew_member_fns(lt_text *t, const lathe_pregion *g, char names[][96]);
void lathe_cuda_ew_members(lt_text *t, const lathe_pregion *g, char names[][96], const int *out, const char *ind,
                           const char *store_fmt);
lathe_status_t lathe_cuda_ew_element_fn(lt_text *t, const lathe_node *n, char *name, size_t name_cap);
const char *lathe_cuda_ew_load(char *buf, size_t cap, lathe_dtype dt, const char *v);
const char *lathe_cuda_ew_store(char *buf, size_t cap, lathe_dtype dt, const char *v);

/* ---- ROWS regions (rows.c) ----
 * A ROWS region (src/graph/program.h) as one kernel: a group of G threads per row holds the row
 * in registers (PER values a thread), folds each reduction with warp shuffles (and shared memory
 * across a group's warps), and writes only the values that escape. Made at compile from the
 * region's static shapes; ew.c's kernel object carries it (lathe_cuda_ewk_region). */
typedef struct lathe_cuda_rowk lathe_cuda_rowk;
/* Rows of at most this many elements form ROWS regions (the program option rows_max), held in
 * registers; with the option rows_long=1, rows of up to LATHE_CUDA_ROWS_LONG_MAX (program option
 * rows_long) too, walked in chunks once per reduction level. */
enum { LATHE_CUDA_ROWS_MAX = 8192, LATHE_CUDA_ROWS_LONG_MAX = 1 << 20 };
/* The geometry (*out) and kernel source `lt_fused` (*source, malloc'd) of ROWS region g. */
enum { LATHE_CUDA_ROWS_SHIFT = 1, LATHE_CUDA_ROWS_IOTA = 2 }; /* lathe_cuda_rowk_new's flags */
lathe_status_t lathe_cuda_rowk_new(const lathe_pfunc *pf, const lathe_pregion *g, unsigned flags, lathe_cuda_rowk **out,
                                   char **source);
/* Queues k's function f over outputs outs (the escaping members, in order) and inputs ins. */
lathe_status_t lathe_cuda_rowk_launch(lathe_cuda_exec *ex, const lathe_cuda_rowk *k, lcuFunction f, lathe_tensor **outs,
                                      lathe_tensor *const *ins);
void lathe_cuda_rowk_free(lathe_cuda_rowk *k);
/* The fold (kernels/rows.cuh: lt_rsum, lt_rprod, lt_rmax, lt_rmin) of a float reduction, or NULL. */
const char *lathe_cuda_rows_fold(lathe_op op);

/* ---- fused column reductions (reduce_fused.c) ----
 * A REDUCE region whose reduction sums (or multiplies, or takes the extreme of) float columns
 * over the leading axes, as one kernel that computes the prologue where it reads the operand;
 * ew.c's kernel object carries its geometry (lathe_cuda_ewk_region, option reduce_fuse). */
typedef struct lathe_cuda_redk lathe_cuda_redk;
/* The geometry (*out) and source (*source, malloc'd) of REDUCE region g's kernel; both NULL, and
 * no error, when g is not of that form. */
lathe_status_t lathe_cuda_redk_new(const lathe_pfunc *pf, const lathe_pregion *g, lathe_cuda_redk **out, char **source);
/* The slots of the prologue values it writes (the escaping ones read after the region). */
int lathe_cuda_redk_outputs(const lathe_cuda_redk *k, const int **slots);
/* Queues k's function f: the prologue's escaping values into outs, the reduction into result. */
lathe_status_t lathe_cuda_redk_launch(lathe_cuda_exec *ex, const lathe_cuda_redk *k, lcuFunction f, lathe_tensor **outs,
                                      lathe_tensor *const *ins, lathe_tensor *result);
void lathe_cuda_redk_free(lathe_cuda_redk *k);
/* Runs REDUCE region g's prologue and reduction with its fused kernel `bound` (ew.c). */
lathe_status_t lathe_cuda_region_reduce(lathe_cuda_exec *ex, const lathe_pfunc *pf, const lathe_pregion *g, lathe_cuda_ewk *bound,
                                        lathe_tensor **vals, lathe_status_t (*result)(lathe_cuda_exec *, int slot, lathe_tensor **));
/* out[j] = the sum over i < m of in[i * n + j] (dt, n columns of m rows, both contiguous), as a
 * ReduceSum over the leading axis runs (partial sums in parallel, accumulated as the reduction's
 * dtype is); the lasting text it launches is lathe_cuda_sum_columns_text(dt) (NULL: no sum). */
lathe_status_t lathe_cuda_sum_columns(lathe_cuda_exec *ex, lathe_dtype dt, lcuDeviceptr in, lcuDeviceptr out, int64_t m,
                                      int64_t n);
const char *lathe_cuda_sum_columns_text(lathe_dtype dt);
/* reduce.c's second pass of a column reduction: part, [splits][n_out] accumulators of n's
 * reduction, reduced along splits into out. */
lathe_status_t lathe_cuda_reduce_partials(lathe_cuda_exec *ex, const lathe_node *n, const void *part, int64_t splits,
                                          int64_t n_out, lathe_tensor *out);

#endif

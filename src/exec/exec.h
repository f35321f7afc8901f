/* exec.h -- the executor: runs a compiled program (src/graph/program.h) for every device.
 *
 * It owns what does not depend on where the work runs: plans' per-function data, constants per
 * memory domain, planned arenas (taken per execution, kept for the next), frames of value slots,
 * results into arena views / output shells / fresh memory, reuse of a dying unshared operand in
 * place, sub-byte integers widened to 8 bits around kernels, views detached when they leave
 * their arena, Call/While/If and their predicates, the outputs handed to the runtime's shells,
 * errors annotated with the op, and the worker queue that SPMD replicas run on (queue.c).
 *
 * A device supplies a lathe_exec_device table: memory, copies, reads, and the launches of one
 * step, one LOOP region and (optionally) a whole program (CUDA: a graph replay). Its execution
 * struct begins with a lathe_exec, so that the executor's callbacks hand it back as that.
 * Adding a device: docs/ARCHITECTURE.md "Adding a device". */
#ifndef LATHE_EXEC_H
#define LATHE_EXEC_H

#include <pthread.h>

#include "../graph/program.h"
#include "../runtime/runtime.h"

typedef struct lathe_exec lathe_exec;
typedef struct lathe_xplan lathe_xplan;

typedef struct lathe_exec_device {
  const char *where; /* appended to error annotations ("" or " on lathe:cuda") */
  /* Inputs of the main function are taken over by its frame and released after their last use
   * (a donated input then may be reused in place); otherwise the frame adds references. A plan
   * starts with this (lathe_xplan.takes_inputs) and the device's compile may change it. */
  bool takes_inputs;
  /* The arenas are given back by the device once its work is done (lathe_exec_arenas_give_back),
   * not when lathe_exec_program returns. */
  bool keeps_arenas;
  /* Every ordinal's tensors share one memory (the CPU's): a result moves into any ordinal's shell. */
  bool one_memory;
  /* ---- memory of a plan; domain: where the memory lives (a GPU ordinal; the CPU has one) ---- */
  /* The device's seam table: arenas come from its mem_alloc / mem_free on the domain's ordinal. */
  const struct lathe_device_i *device;
  /* Sets the device fields (dev, dev_ctx, device) of an arena view. */
  void (*view_init)(void *dev, int domain, lathe_tensor *view);
  /* A constant slot's tensor on domain (a reference for the plan). */
  lathe_status_t (*const_new)(void *dev, int domain, const lathe_pslot *slot, lathe_tensor **out);
  /* ---- during an execution ---- */
  /* Fresh memory for a result (a reference for the caller). */
  lathe_status_t (*tensor_new)(lathe_exec *x, const lathe_shape *shape, lathe_tensor **out);
  /* A temporary of one step (a widened operand or result): a reference for the caller. */
  lathe_status_t (*scratch_new)(lathe_exec *x, const lathe_shape *shape, lathe_tensor **out);
  /* Gives an output shell (data NULL) memory of its nbytes. */
  lathe_status_t (*shell_fill)(lathe_exec *x, lathe_tensor *shell);
  /* dst's bytes from src's (same size), in the execution's order. */
  lathe_status_t (*copy)(lathe_exec *x, const lathe_tensor *src, lathe_tensor *dst);
  /* Drops a reference the walk held (CUDA keeps it until its stream is done with the memory). */
  void (*drop)(lathe_exec *x, lathe_tensor *t);
  /* Sub-byte integers: t widened to 8 bits into fresh scratch; wide packed into t. */
  lathe_status_t (*widen)(lathe_exec *x, lathe_tensor *t, lathe_tensor **out);
  lathe_status_t (*narrow)(lathe_exec *x, const lathe_tensor *wide, lathe_tensor *t);
  /* Reads t's first nbytes to the host (a predicate), after the work that computes them. */
  lathe_status_t (*read)(lathe_exec *x, const lathe_tensor *t, void *dst, size_t nbytes);
  /* ---- launches ---- */
  /* Node n, step pos of function fi (pos -1: the reduction of a REDUCE region), on tensors of
   * the node's shapes (sub-byte ones widened unless the op is PACKED or CONTROL). */
  lathe_status_t (*launch)(lathe_exec *x, int fi, int pos, const lathe_node *n, lathe_tensor *const *in,
                           lathe_tensor **out);
  /* LOOP region `region` of the running function at step pos: inputs from lathe_exec_vals, each
   * escaping member's result (lathe_exec_result) stored there. in_place: a dying unshared full
   * input may hold a result (never inside a REDUCE region, whose parts run one after another).
   * Also a ROWS region, for a device whose program options ask for them (in_place false). */
  lathe_status_t (*launch_loop)(lathe_exec *x, int pos, int region, bool in_place);
  /* Optional: REDUCE region `region`'s prologue and reduction at once, when the device has a
   * kernel for them (*done; else the executor runs the parts). Its results as launch_loop's. */
  lathe_status_t (*launch_reduce)(lathe_exec *x, int pos, int region, bool *done);
  /* Optional: the whole program at once (CUDA: a captured graph). *handled false: the executor
   * walks the steps instead (nothing was done). */
  lathe_status_t (*launch_program)(lathe_exec *x, const lathe_launch *l, bool *handled);
  /* Called before the walk of a launch (after launch_program declined): the device waits for
   * pending inputs its own way. */
  lathe_status_t (*begin)(lathe_exec *x, const lathe_launch *l);
  /* ---- tracing, optional (lathe:cuda): times on the device's own clock ----
   * trace_mark records a timestamp on the execution's queue, after the work queued so far, and
   * returns its index (-1 when it cannot); an execution's first waits until the queue is idle,
   * so that it falls at the host time of the call. trace_times waits for the marks, writes their
   * times on the host's clock (lathe_trace_now) into t[0..n), names the queue's track and
   * forgets them (t NULL: only forgets them). */
  int (*trace_mark)(lathe_exec *x);
  lathe_status_t (*trace_times)(lathe_exec *x, int64_t *t, int n, int *track, char *track_name, size_t cap);
} lathe_exec_device;

/* ---- plans ---- */
typedef struct lathe_xfn {
  const lathe_pfunc *pf;
  int *const_slots; /* the CONST slots, to seed a frame */
  int n_consts;
  int max_in; /* the most inputs of one step */
} lathe_xfn;

typedef struct lathe_xarena {
  void *mem;
  lathe_tensor *views; /* by slot; only planned slots are set */
} lathe_xarena;

/* The arenas of one execution, one per function (made on first use), on one domain. */
typedef struct lathe_xarena_set {
  struct lathe_xarena_set *next;
  int domain;
  lathe_xarena *fns;
} lathe_xarena_set;

struct lathe_xplan {
  const lathe_exec_device *dev;
  void *dev_ctx; /* the device's context (lathe_cpu, lathe_cuda) */
  const lathe_program *prog;
  lathe_xfn *fns;
  int n_fns;
  int n_domains;
  bool has_arenas;       /* some function plans memory; otherwise executions share `none` */
  bool trace_replay;     /* tracing: the device still runs whole programs (launch_program) */
  bool takes_inputs;     /* the main function's frame takes the launch's inputs (dev->takes_inputs) */
  lathe_xarena_set none; /* empty arenas, never written */
  pthread_mutex_t mu;    /* guards spare and the making of consts */
  lathe_xarena_set *spare;
  int n_spare;
  _Atomic(lathe_tensor **) *consts; /* per domain, made on first use: every function's slots */
  int64_t *const_base;              /* per function: the index of its slot 0 in consts[domain] */
  int64_t n_const_entries;
};

/* Fills p (zeroed by the caller) for prog: checks every op of every step with supported (the
 * device's "not implemented" status), per-function data; constants are made on first use. */
lathe_status_t lathe_xplan_init(lathe_xplan *p, const lathe_exec_device *dev, void *dev_ctx, int n_domains,
                                const lathe_program *prog, lathe_status_t (*supported)(const lathe_node *n));
void lathe_xplan_release(lathe_xplan *p);

/* Arena sets: taken for an execution on domain (a spare one, or made), given back when done. */
lathe_status_t lathe_exec_arenas_take(lathe_xplan *p, int domain, lathe_xarena_set **out);
void lathe_exec_arenas_give_back(lathe_xplan *p, lathe_xarena_set *a);
void lathe_exec_arena_set_free(lathe_xplan *p, lathe_xarena_set *a);

/* ---- executions ---- */
typedef struct lathe_frame {
  int fi;
  const lathe_xfn *f;
  lathe_tensor **vals; /* by slot */
  lathe_xarena *arena;
  const lathe_pstep *step;  /* running now (control ops call sub-functions from it) */
  lathe_tensor **step_in;   /* its input tensors, hidden captures included */
  lathe_tensor **shells;    /* main function: the output shell of each returned slot, by slot */
} lathe_frame;

/* The first member of a device's execution struct. */
struct lathe_exec {
  lathe_xplan *plan;
  int domain;
  lathe_xarena_set *arenas; /* set by lathe_exec_program, or by the device before lathe_exec_walk */
  lathe_frame *cur;
  int replica;             /* SPMD: this run's replica */
  lathe_collective *group; /* SPMD: the execution's replicas (a reference the device holds); NULL otherwise */
  /* tracing with device times: the walk marks each step (xtrace.c), or, in replay mode (the
   * plan's trace_replay), the device marks the start and end of its whole-program launch */
  struct lathe_xgpu *gpu;
};

/* Runs launch l on x (plan, domain, replica, group set): the device's whole-program launch when
 * it takes it; otherwise begin, arenas, the walk of the main function, and the results handed to
 * l's output shells. Inputs: taken (released here) when the plan takes_inputs. */
lathe_status_t lathe_exec_program(lathe_exec *x, const lathe_launch *l);
/* The walk alone: the main function on inputs (retained or taken as for lathe_exec_program) into
 * results (references for the caller); x->arenas set; shells: the launch's output shells or NULL. */
lathe_status_t lathe_exec_walk(lathe_exec *x, lathe_tensor *const *inputs, int n_inputs, lathe_tensor **results,
                               lathe_tensor *const *shells);
/* Runs sub-function fn of the running control op on inputs (hidden captures added from the
 * op's step) into outputs (references for the caller). */
lathe_status_t lathe_exec_call(lathe_exec *x, const lathe_function *fn, lathe_tensor *const *inputs, int n_inputs,
                               lathe_tensor **outputs);
/* Call, While and If (control.c): sub-functions through lathe_exec_call, predicates read with
 * the device's read; out[k] set to references (CONTROL results are not pre-allocated). */
bool lathe_exec_is_control(lathe_op op);
lathe_status_t lathe_exec_control(lathe_exec *x, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out);

/* The running function's frame data, for a device's region launches. */
static inline const lathe_pfunc *lathe_exec_pfunc(const lathe_exec *x) { return x->cur->f->pf; }
static inline int lathe_exec_fn_index(const lathe_exec *x) { return x->cur->fi; }
static inline lathe_tensor **lathe_exec_vals(lathe_exec *x) { return x->cur->vals; }
/* The tensor for result slot of the running function (a reference for the caller): its arena
 * view when planned, its output shell when the main function returns it, else fresh memory. */
lathe_status_t lathe_exec_result(lathe_exec *x, int slot, lathe_tensor **out);
/* For escaping member m of LOOP region g at step pos, whose result is not planned: a full input
 * (ins: the region's input tensors) that dies here, that nothing else holds (a donated weight, an
 * optimizer's moment), of the result's shape, that no later member reads and that none of the
 * taken results already has, as a new reference; else NULL. A kernel that reads each element's
 * inputs before it writes that element may write the result there (every earlier member has read
 * it), so an optimizer's update needs no second copy of what it updates. */
lathe_tensor *lathe_exec_loop_in_place(lathe_exec *x, int pos, const lathe_pregion *g, int m, lathe_tensor *const *ins,
                                       lathe_tensor *const *taken, int n_taken);

/* ---- trace events (xtrace.c), made only while tracing (the program's options.trace) ---- */
/* Step pos of pf ran from t0 to t1 (ns, lathe_trace_now) on the calling thread. */
void lathe_exec_trace_step(lathe_trace *tr, lathe_exec *x, const lathe_pfunc *pf, int pos, int64_t t0, int64_t t1,
                           int m0, int m1);
/* Step pos's name as trace events and dumps show it ("Transpose", "fused:Mul+Add") into name (cap
 * bytes), its family ("LAYOUT", "fused LOOP") as *kind; returns name. */
const char *lathe_exec_step_name(const lathe_pfunc *pf, int pos, char *name, size_t cap, const char **kind);
/* Device times (the device's trace_mark), around a traced launch: gpu_begin sets x->gpu when the
 * device marks; the device's whole-program launch marks its start and end (gpu_mark); a walk
 * (gpu_walk) marks around each step (gpu_step_mark); gpu_end writes the spans of the marks on
 * the device's track ("gpu step" per step, "gpu" for a whole launch) and frees them. */
void lathe_exec_trace_gpu_begin(lathe_exec *x);
void lathe_exec_trace_gpu_walk(lathe_exec *x);
int lathe_exec_trace_gpu_mark(lathe_exec *x);
int lathe_exec_trace_gpu_step_mark(lathe_exec *x);
void lathe_exec_trace_gpu_end(lathe_trace *tr, lathe_exec *x);
/* Launch l of x ran from t0 to t1; also a memory counter when the device keeps one. */
void lathe_exec_trace_run(lathe_trace *tr, lathe_exec *x, const lathe_launch *l, int64_t t0, int64_t t1);

/* ---- worker queues (queue.c): one thread running jobs in order (SPMD replicas per ordinal) ---- */
typedef struct lathe_exec_job {
  struct lathe_exec_job *next;
  void (*run)(struct lathe_exec_job *j); /* runs and frees the job */
} lathe_exec_job;

typedef struct lathe_exec_queue lathe_exec_queue;
lathe_status_t lathe_exec_queue_new(const char *label, lathe_exec_queue **out);
/* spin_us > 0: the worker polls that long for the next job before it sleeps, so that a stream of
 * pushes (one per execution) does not pay a thread wake-up each (a GPU's completion queue) */
lathe_status_t lathe_exec_queue_new_spinning(const char *label, int spin_us, lathe_exec_queue **out);
void lathe_exec_queue_push(lathe_exec_queue *q, lathe_exec_job *j);
/* Whether the calling thread is q's worker. */
bool lathe_exec_queue_is_worker(const lathe_exec_queue *q);
/* Finishes every queued job, then stops and frees q. From q's own worker (the last reference
 * to a backend dropped inside a job), the worker finishes its queue and frees q as it exits. */
void lathe_exec_queue_free(lathe_exec_queue *q);

#endif

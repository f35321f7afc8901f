/* exec.h -- lathe:cuda's plans and executions, shared by exec.c (its side of the executor,
 * src/exec) and graph.c (a plan captured once as a CUDA graph and replayed). Private to src/cuda. */
#ifndef LATHE_CUDA_EXEC_H
#define LATHE_CUDA_EXEC_H

#include "../exec/exec.h"
#include "cuda.h"

/* ---- plans: the executor's (src/exec), and the kernels bound at compile ---- */
typedef struct cuda_fn {
  lathe_cuda_ewk **step_k;   /* per step: its elementwise kernel, bound at compile (or NULL) */
  lathe_cuda_ewk **region_k; /* per region: a LOOP region's kernel */
} cuda_fn;

struct lathe_plan {
  lathe_xplan x; /* domains: the GPU ordinals */
  lathe_cuda *cu;
  cuda_fn *fns;               /* per program function */
  struct cuda_replay *replay; /* per device: the plan as a CUDA graph (graph.c); NULL when it cannot be one */
};

struct lathe_cuda_exec {
  lathe_exec x; /* first: the executor's callbacks hand this struct back as x (x.domain: d's ordinal) */
  lathe_cuda *cu;
  cuda_dev *d;
  lathe_plan *plan;
  lcuStream stream;
  /* tensors released during the walk, freed once the stream has finished with them */
  lathe_tensor **dead;
  int n_dead, cap_dead;
  /* scratch (lathe_cuda_scratch) handed out during the step being run, and that of finished
   * steps, free for later steps: one stream runs them in order, so a later step's kernels start
   * after the earlier ones are done with it (both lists borrow from dead) */
  lathe_tensor **step_scratch, **free_scratch;
  int n_step_scratch, cap_step_scratch, n_free_scratch, cap_free_scratch;
  /* finishing */
  lathe_tensor **inputs;
  int n_inputs;
  void (*release)(void *);
  void *token;
  lathe_event *done;
  lcuEvent ev;
  bool ev_owned; /* by done's native handle */
  /* errors found by kernels: a device word they set, and the message of each code */
  lathe_tensor *err_word;
  char *err_msgs[8];
  int n_err_msgs;
  bool capturing; /* the walk is being captured into a CUDA graph (graph.c): nothing runs */
  /* tracing: timing events recorded on the stream (trace_mark), the host time of the first */
  lcuEvent *marks;
  int n_marks, cap_marks;
  int64_t t_first;
};

/* Makes ex->stream wait for the launch's inputs that are still being computed. */
lathe_status_t lathe_cuda_exec_wait_inputs(lathe_cuda_exec *ex, const lathe_launch *l);

/* ---- CUDA graphs (graph.c) ---- */
/* The replay state of a plan on every device, or NULL when the plan is not capturable (its
 * program has sub-functions, control flow, collectives or dynamic shapes) or graphs are off. */
lathe_status_t lathe_cuda_replay_new(lathe_plan *p, struct cuda_replay **out);
void lathe_cuda_replay_free(lathe_plan *p);
/* Runs the launch through the plan's graph when it has one, or captures it when this is the
 * execution to capture at: inputs copied into the graph's own, the graph launched, results
 * copied into the output shells, all on the graph's stream (ex->stream). *handled false: the
 * execution takes the ordinary walk (nothing was queued). */
lathe_status_t lathe_cuda_replay(lathe_cuda_exec *ex, const lathe_launch *l, bool *handled);

#endif

/* exec.h -- lathe:cuda's plans and executions, shared by exec.c (the walk over a program's steps)
 * and graph.c (a plan captured once as a CUDA graph and replayed). Private to src/cuda. */
#ifndef LATHE_CUDA_EXEC_H
#define LATHE_CUDA_EXEC_H

#include "cuda.h"

/* ---- plans ---- */
typedef struct cuda_arena {
  lcuDeviceptr mem;
  lathe_tensor *views; /* by slot: planned slots only */
} cuda_arena;

typedef struct arena_set {
  struct arena_set *next;
  int device;
  cuda_arena *fns; /* per program function, made on first use */
} arena_set;

typedef struct cuda_fn {
  const lathe_pfunc *pf;
  int *const_slots;
  int n_consts;
  int max_in;
  lathe_cuda_ewk **step_k;   /* per step: its elementwise kernel, bound at compile (or NULL) */
  lathe_cuda_ewk **region_k; /* per region: a LOOP region's kernel */
} cuda_fn;

struct lathe_plan {
  lathe_cuda *cu;
  const lathe_program *prog;
  cuda_fn *fns;
  int n_fns;
  pthread_mutex_t mu;   /* guards consts and spare */
  lathe_tensor ***consts; /* [device][function index * 0 + slot over all functions]: see const_of */
  int64_t *const_base;  /* per function: index of its first slot in the consts arrays */
  int64_t n_const_entries;
  arena_set *spare;
  int n_spare;
  struct cuda_replay *replay; /* per device: the plan as a CUDA graph (graph.c); NULL when it cannot be one */
};

typedef struct frame {
  const cuda_fn *f;
  int fi;
  lathe_tensor **vals;
  cuda_arena *arena;
  lathe_tensor **consts;
  const lathe_pstep *step;
  lathe_tensor **step_in;
  lathe_tensor **shells; /* main function: output shells by slot */
} frame;

struct lathe_cuda_exec {
  lathe_cuda *cu;
  cuda_dev *d;
  lathe_plan *plan;
  lcuStream stream;
  arena_set *arenas;
  frame *cur;
  /* tensors released during the walk, freed once the stream has finished with them */
  lathe_tensor **dead;
  int n_dead, cap_dead;
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
  /* SPMD: this run's replica and the execution's replicas (a reference; NULL otherwise) */
  int replica;
  lathe_collective *group;
  bool capturing; /* the walk is being captured into a CUDA graph (graph.c): nothing runs */
};

/* Arena sets: taken for an execution (made when none is spare), given back when it is done. */
lathe_status_t lathe_cuda_arenas_take(lathe_plan *p, int device, arena_set **out);
void lathe_cuda_arenas_give_back(lathe_plan *p, arena_set *a);
void lathe_cuda_arena_set_free(lathe_plan *p, arena_set *a);
/* Runs the main function on inputs (references the walk retains), into fresh results
 * (references for the caller); with ex->arenas set. */
lathe_status_t lathe_cuda_exec_walk(lathe_cuda_exec *ex, lathe_tensor *const *inputs, int n_inputs, lathe_tensor **results);
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

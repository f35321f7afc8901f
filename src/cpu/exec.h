/* exec.h -- the CPU interpreter's internals, shared by exec.c (plans, steps, sub-function
 * calls) and region.c (fusion regions). Kernels see only cpu.h. */
#ifndef LATHE_CPU_EXEC_H
#define LATHE_CPU_EXEC_H

#include "cpu.h"

/* One function's planned memory: the block and a view tensor per planned slot. */
typedef struct cpu_arena {
  void *mem;
  lathe_tensor *views; /* by slot; only planned slots are set */
} cpu_arena;

/* The arenas of one execution, one per function (made on first use). */
typedef struct arena_set {
  struct arena_set *next;
  cpu_arena *fns;
} arena_set;

typedef struct cpu_fn {
  const lathe_pfunc *pf;
  lathe_tensor **consts; /* by slot */
  int *const_slots;      /* the CONST slots, to seed a frame */
  int n_consts;
  int max_in;            /* the most inputs of one step */
} cpu_fn;

typedef struct frame {
  const cpu_fn *f;
  lathe_tensor **vals; /* by slot */
  cpu_arena *arena;
  const lathe_pstep *step;  /* running now (control kernels call sub-functions from it) */
  lathe_tensor **step_in;   /* its input tensors, hidden captures included */
  lathe_tensor **shells;    /* main function: the output shell of each returned slot, by slot */
} frame;

struct lathe_cpu_exec {
  lathe_cpu *cpu;
  lathe_plan *plan;
  arena_set *arenas;
  frame *cur;
  int replica;             /* SPMD: this run's replica */
  lathe_collective *group; /* SPMD: the execution's replicas; NULL otherwise */
};

/* The tensor for result slot of the running function (a reference for the caller): its arena
 * view when planned, its output shell when the main function returns it, else fresh memory. */
lathe_status_t lathe_cpu_result_tensor(lathe_cpu_exec *ex, int slot, lathe_tensor **out);
/* Runs the region step sp at position pos of the running function. */
lathe_status_t lathe_cpu_run_region(lathe_cpu_exec *ex, int pos, const lathe_pstep *sp);

#endif

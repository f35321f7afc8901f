/* exec.h -- lathe:cpu's execution, shared by exec.c (its side of the executor, src/exec) and
 * region.c (fusion regions). Kernels see only cpu.h. */
#ifndef LATHE_CPU_EXEC_H
#define LATHE_CPU_EXEC_H

#include "../exec/exec.h"
#include "cpu.h"

struct lathe_cpu_exec {
  lathe_exec x; /* first: the executor's callbacks hand this struct back as x */
  lathe_cpu *cpu;
};

/* Runs LOOP region g of the running function at step pos (the executor's launch_loop). */
lathe_status_t lathe_cpu_run_loop(lathe_cpu_exec *ex, int pos, const lathe_pregion *g, bool in_place);

#endif

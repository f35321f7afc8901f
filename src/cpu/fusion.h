/* fusion.h -- elementwise fusion on the CPU: runs of consecutive elementwise ops over one shape
 * execute tile by tile, so a chain of N ops reads its inputs and writes its results once
 * instead of N times. Values used only inside a run never reach memory at full size. */
#ifndef LATHE_CPU_FUSION_H
#define LATHE_CPU_FUSION_H

#include "cpu.h"

/* A run of schedule positions [first, last] whose ops are fused. */
typedef struct lathe_fusion_group {
  int first, last;
  bool *escapes; /* per member (position - first): its value is used after the run or is an output */
} lathe_fusion_group;

typedef struct lathe_fusion_plan {
  int *group_at;               /* per schedule position: the group starting there, or -1 */
  lathe_fusion_group *groups;
  int n_groups;
} lathe_fusion_plan;

/* Finds the groups of a function's schedule (at least two members each). */
lathe_status_t lathe_fusion_plan_build(const lathe_function *fn, const lathe_schedule *s, lathe_fusion_plan *out);
void lathe_fusion_plan_free(lathe_fusion_plan *p);

/* Runs group g: reads operands from vals (by node id, through s->remap), stores a tensor for
 * every escaping member into vals. May reuse the memory of an operand that dies in the group. */
lathe_status_t lathe_fusion_run(lathe_cpu_exec *ex, const lathe_function *fn, const lathe_schedule *s,
                                const lathe_fusion_group *g, lathe_tensor **vals);

/* The interpreter's kernel dispatch (device.c), used per tile. */
lathe_status_t lathe_cpu_run_kernel(lathe_cpu_exec *ex, const lathe_node *n, lathe_tensor *const *in, lathe_tensor **out);

#endif

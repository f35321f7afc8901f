/* partition.h -- the AutoSharding partitioner (partition.c): an AutoSharding builder rewritten
 * into an SPMD builder of local shapes, with the collectives its shardings imply. */
#ifndef LATHE_PARTITION_H
#define LATHE_PARTITION_H

#include "graph.h"

typedef struct lathe_partition_report {
  const char *declined; /* why the program is left whole (static text), or NULL: partitioned */
  int fallbacks;        /* ops run whole: without a rule, sharded operands gathered first; RNGBitGenerator */
  int collectives;      /* collectives the pass inserted */
} lathe_partition_report;

/* The per-device program of AutoSharding builder src: an SPMD builder over src's devices whose
 * main takes, per device, the shards of src's parameters (their local shapes) and then one hidden
 * Int32 parameter (lathe_partition_coords), and returns the shards of src's outputs. Its nodes
 * share attribute memory with src's graph, which must outlive it. *out is NULL (and
 * report->declined says why) for a program the pass leaves whole: the caller then runs it whole.
 * Errors name the op and the problem. */
lathe_status_t lathe_partition(struct lathe_builder *src, struct lathe_builder **out, lathe_partition_report *report);

/* The values device `index` passes as the partitioned program's last parameter: its coordinates
 * in each mesh, mesh after mesh (shape: lathe_partition_coords_shape). */
lathe_shape lathe_partition_coords_shape(const struct lathe_builder *src);
void lathe_partition_coords(const struct lathe_builder *src, int index, int32_t *out);

#endif

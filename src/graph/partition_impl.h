/* partition_impl.h -- what the AutoSharding partitioner's two files share: partition.c (the pass,
 * reshards, emission, the backward hints) and partition_rules.c (one propagation rule per op
 * family). Shardings are lathe_sharding_def values of a value's rank (docs/ARCHITECTURE.md
 * "Partitioning"). */
#ifndef LATHE_PARTITION_IMPL_H
#define LATHE_PARTITION_IMPL_H

#include "partition.h"

typedef lathe_sharding_def spec; /* rank = the value's; n_axes[a] == 0: axis a replicated */

#define MAX_VARIANTS 4

typedef struct {
  spec s;
  lathe_node *v;
} variant;

typedef struct {
  int fallbacks, collectives;
  char fallback_ops[256]; /* the fallbacks' op names, each once */
} part_stats;

typedef struct part {
  struct lathe_builder *src;
  lathe_builder_t dst;
  const lathe_function *sfn;  /* the source function partitioned: main, or a control op's sub-function */
  struct part *parent;        /* the partitioning of sfn's caller (NULL for main) */
  lathe_function *fn;  /* its copy in dst: dst's main, or a closure of the parent's */
  lathe_node *coords;  /* the hidden parameter */
  int coord_base[16];  /* offset of each mesh's coordinates in it */
  lathe_node *coord_val[16][LATHE_MAX_MESH_RANK];
  variant (*vars)[MAX_VARIANTS]; /* per source node id: the value under some shardings, [0] its own */
  int *n_vars;
  spec *hint;   /* per source node id: the sharding its consumers would take (outputs first), */
  bool *hinted; /* from the backward pass */
  lathe_node ***tuples; /* per source multi-result node id: its results in dst */
  spec *res;            /* the results' shardings: result i of multi-result node id at res[res_at[id] + i] */
  int *res_at;
  spec *need;        /* scratch: the shardings a node's operands must arrive in */
  spec *rs;          /* scratch: a multi-result node's results' shardings */
  lathe_node **ops;  /* scratch: its operands in dst */
  part_stats *stats; /* the whole partitioning's counts (main's and its sub-functions' parts share them) */
  struct part_clone *clones; /* sub-functions copied into dst (lathe_part_emit_whole), by source */
  int n_clones, cap_clones;
  struct part_halo *halos; /* operands extended with their halos (partition_window.c), by source */
  int n_halos, cap_halos;
} part;

/* ---- shardings ---- */

static inline bool replicated(const spec *s) {
  for (int a = 0; a < s->rank; a++)
    if (s->n_axes[a]) return false;
  return true;
}

static inline spec replicated_spec(int rank) {
  spec s;
  memset(&s, 0, sizeof s);
  s.rank = rank;
  return s;
}

static inline bool axis_eq(const spec *x, int a, const spec *y, int b) {
  if (x->n_axes[a] != y->n_axes[b]) return false;
  if (x->n_axes[a] && x->mesh != y->mesh) return false;
  for (int k = 0; k < x->n_axes[a]; k++)
    if (x->axes[a][k] != y->axes[b][k]) return false;
  return true;
}

static inline bool spec_eq(const spec *x, const spec *y) {
  if (x->rank != y->rank) return false;
  for (int a = 0; a < x->rank; a++)
    if (!axis_eq(x, a, y, a)) return false;
  return true;
}

static inline int64_t parts(const part *p, const spec *s, int a) {
  int64_t n = 1;
  for (int k = 0; k < s->n_axes[a]; k++) n *= p->src->meshes[s->mesh].sizes[s->axes[a][k]];
  return n;
}

static inline void clear_axis(spec *s, int a) { s->n_axes[a] = 0; }

static inline void copy_axis(spec *to, int b, const spec *from, int a) {
  to->n_axes[b] = from->n_axes[a];
  for (int k = 0; k < from->n_axes[a]; k++) to->axes[b][k] = from->axes[a][k];
  if (from->n_axes[a]) to->mesh = from->mesh;
}

/* Whether mesh axis j of mesh m is used by s on an axis other than `except`. */
static inline bool uses(const spec *s, int m, int j, int except) {
  for (int a = 0; a < s->rank; a++)
    for (int k = 0; a != except && k < s->n_axes[a]; k++)
      if (s->mesh == m && s->axes[a][k] == j) return true;
  return false;
}

/* Copies axis a of from into axis b of to unless it clashes (other mesh, or a mesh axis to uses). */
static inline bool try_copy_axis(spec *to, int b, const spec *from, int a) {
  if (!from->n_axes[a]) return true;
  if (!replicated(to) && to->mesh != from->mesh) return false;
  for (int k = 0; k < from->n_axes[a]; k++)
    if (uses(to, from->mesh, from->axes[a][k], b)) return false;
  copy_axis(to, b, from, a);
  return true;
}

static inline void local_shape(const part *p, const spec *s, const lathe_shape *g, lathe_shape *out) {
  *out = *g;
  for (int a = 0; a < s->rank && a < g->rank; a++) {
    int64_t n = parts(p, s, a);
    if (n > 1) out->dims[a] = g->dims[a] / n, out->axis_names[a] = NULL;
  }
}

/* The part partitioning source function fn: p or one of its ancestors (NULL: none). */
static inline struct part *part_of(struct part *p, const lathe_function *fn) {
  while (p && p->sfn != fn) p = p->parent;
  return p;
}

/* Source node id's own sharding. */
static inline const spec *own(const part *p, int id) { return &p->vars[id][0].s; }

/* ---- partition.c ---- */
/* Source value sn under sharding t (resharded once per sharding, then cached). */
lathe_status_t lathe_part_get(part *p, const lathe_node *sn, const spec *t, lathe_node **out);
/* Records v as source value sn's own, with sharding s. */
void lathe_part_set(part *p, const lathe_node *sn, lathe_node *v, const spec *s);
/* Bytes each device receives to turn source value sn from its sharding into t (slicing is free;
 * nothing where t or a whole copy is made already). */
double lathe_part_reshard_cost(const part *p, const lathe_node *sn, const spec *t);
/* Bytes each device receives to turn a value of global shape g from sharding s into t. */
double lathe_part_reshard_bytes(const part *p, const lathe_shape *g, const spec *s, const spec *t);
/* Emits sn on its operands resharded to need[i], with result sharding rs (its local shape). */
lathe_status_t lathe_part_emit_with(part *p, const lathe_node *sn, const spec *need, const spec *rs, lathe_node **out);
/* Multi-result sn emitted on its operands resharded to need[i], result i with sharding rs[i] (its
 * local shape); its TUPLE_ELEMENTs then read result i under rs[i]. */
lathe_status_t lathe_part_emit_multi(part *p, const lathe_node *sn, const spec *need, const spec *rs);
/* sn emitted on its operands resharded to need[i], result i with sharding rs[i], its sub-function j
 * replaced by fns[j] (partitioned, lathe_part_function). */
lathe_status_t lathe_part_emit_control(part *p, const lathe_node *sn, const spec *need, const spec *rs,
                                       lathe_function *const *fns);
/* How lathe_part_function's outputs leave: resharded to out[i] (FIXED), in their own shardings,
 * written to out[i] (OWN), or DRY: out[i] hinted (as FIXED) and their own shardings written to out[i],
 * the copy then dropped from dst and its collectives not counted (a While's fixed point). */
typedef enum { PART_OUT_FIXED, PART_OUT_OWN, PART_OUT_DRY } part_outs;
/* Source sub-function sfn of a control op of p partitioned into a new closure of p's function (*dst;
 * NULL for PART_OUT_DRY): its parameter i arrives in sharding in[i]; its outputs leave as `outs` says. */
lathe_status_t lathe_part_function(part *p, const lathe_function *sfn, const spec *in, spec *out, part_outs outs,
                                   lathe_function **dst);
/* An op with sub-functions (a Sort along its split axis) emitted whole on replicated operands,
 * result i replicated: its sub-functions copied into dst as they are (the values they capture
 * gathered in the function that made them); *gathered: whether an operand or a captured value
 * was split. */
lathe_status_t lathe_part_emit_whole(part *p, const lathe_node *sn, bool *gathered);
/* Replica groups of the devices that differ only along mesh axes ax[0..k) of mesh m, each in the
 * row-major order of those axes as listed; returns the group count. */
int lathe_part_groups(const part *p, int m, const int *ax, int k, int *groups, int *sizes);
/* CollectivePermute of v in p's function over pairs (source, target) of replicas, counted. */
lathe_status_t lathe_part_permute(part *p, lathe_node *v, const int *pairs, int n_pairs, lathe_node **out);
/* AllReduce(op) of v over the mesh axes ax[0..k) of mesh m. */
lathe_status_t lathe_part_all_reduce(part *p, lathe_node *v, lathe_op op, int m, const int *ax, int k, lathe_node **out);

/* An Int32 scalar constant in p's function. */
lathe_status_t lathe_part_int_const(part *p, int32_t v, lathe_node **out);
/* Where this device's shard of axis a under s starts: its shard index (row-major over the mesh
 * axes as listed) times local. */
lathe_status_t lathe_part_shard_offset(part *p, const spec *s, int a, int64_t local, lathe_node **out);
/* sn emitted on dst operands ops (already in their local shapes), its result in its local shape
 * under rs; not yet recorded as sn's value (lathe_part_set). */
lathe_status_t lathe_part_emit_ops(part *p, const lathe_node *sn, lathe_node **ops, const spec *rs, lathe_node **out);

/* ---- partition_rules.c ---- */
/* Source node sn of p's function partitioned by its op's rule (or the fallback). */
lathe_status_t lathe_part_node(part *p, const lathe_node *sn);
/* sn run whole on every device on replicated operands (counted where that gathers a split one). */
lathe_status_t lathe_part_fallback(part *p, const lathe_node *sn);
/* sn's partial results v (sharding rs) combined over the mesh axes ax[0..n_ax) of mesh m: a
 * ReduceScatter where sn's consumers want an axis split over exactly those, else an AllReduce;
 * the result recorded as sn's value. */
lathe_status_t lathe_part_combine(part *p, const lathe_node *sn, lathe_node *v, spec rs, lathe_op op, int m, const int *ax,
                                  int n_ax);

/* The backward pass's step: the sharding operand i of sn should take for sn's result to come out
 * split as h (its consumers' wish), where sn's rule would keep that split (t; false: none). */
bool lathe_part_operand_hint(const part *p, const lathe_node *sn, int i, const spec *h, spec *t);

/* ---- partition_window.c ---- */
lathe_status_t lathe_part_rule_conv(part *p, const lathe_node *sn);
lathe_status_t lathe_part_rule_window(part *p, const lathe_node *sn);

#endif
